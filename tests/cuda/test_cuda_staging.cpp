// CUDA staging on a real device: strided device shards saved and loaded
// (resharded) through pinned host buffers, synchronously and asynchronously,
// in both layouts; host memory declared as device memory is refused with an
// error that names the array; a host-only save and load creates no CUDA
// context. Exits 77 (reported by CTest as skipped, never
// as passed) without a device.
#include <cairn/cairn.hpp>

#include <cuda_runtime.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                                               \
    do {                                                                                                               \
        cudaError_t rc_ = (call);                                                                                      \
        if (rc_ != cudaSuccess) {                                                                                      \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(rc_));                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

double value(std::int64_t i, std::int64_t j) { return static_cast<double>((i * 7 + j * 13) % 101) + 0.25; }

// Block `p` of `n` elements cut into `parts`: {first, count}.
std::pair<std::int64_t, std::int64_t> block(std::int64_t n, int parts, int p)
{
    return {p * (n / parts) + std::min<std::int64_t>(p, n % parts), n / parts + (p < n % parts ? 1 : 0)};
}

// How many devices have an active primary context in this process, through
// the driver API (dlopen: the test links and skips without a driver); -1
// when it cannot be asked.
int active_contexts()
{
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return -1;
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    using Get = int (*)(int*, int);
    using State = int (*)(int, unsigned*, int*);
    const auto init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
    const auto count = reinterpret_cast<Count>(dlsym(lib, "cuDeviceGetCount"));
    const auto get = reinterpret_cast<Get>(dlsym(lib, "cuDeviceGet"));
    const auto state = reinterpret_cast<State>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
    int n = 0;
    if (!init || !count || !get || !state || init(0) != 0 || count(&n) != 0)
        return -1;
    int active_n = 0;
    for (int i = 0; i < n; ++i) {
        int dev = 0, active = 0;
        unsigned flags = 0;
        if (get(&dev, i) != 0 || state(dev, &flags, &active) != 0)
            return -1;
        active_n += active != 0;
    }
    return active_n;
}

} // namespace

int main(int argc, char** argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int have = cairn::cuda_device_available() ? 1 : 0, all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_have) {
        if (rank == 0)
            std::printf("no CUDA device on every rank: skipped\n");
        MPI_Finalize();
        return 77;
    }
    const std::string dir = std::string(argc > 1 ? argv[1] : "cuda_tmp");
    int failures = 0;
    // A host-only save and load leaves the devices alone: no CUDA context
    // (a CPU code with many ranks per GPU node must not put one per rank on
    // device 0), so no page-locked buffers either.
    {
        std::vector<double> h(64, 1.0 + rank), back(static_cast<std::size_t>(64 * size), 0.0);
        cairn::StateDict sd;
        sd.add_array<double>("h", h.data(), {64 * size}, cairn::Box{{64 * rank}, {64}});
        cairn::SaveOptions o;
        o.overwrite = true;
        cairn::save(sd, dir + "/host_only", MPI_COMM_WORLD, o);
        cairn::StateDict in;
        in.add_array<double>("h", back.data(), {64 * size}, cairn::Box{{0}, {64 * size}});
        cairn::load(in, dir + "/host_only", MPI_COMM_WORLD);
        for (int k = 0; k < 64 * size; ++k)
            failures += back[static_cast<std::size_t>(k)] != 1.0 + k / 64;
        const int contexts = active_contexts();
        if (contexts != 0) {
            std::printf("rank %d: after a host-only save and load, %d CUDA contexts (-1: cannot tell)\n", rank,
                        contexts);
            ++failures;
        }
    }
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    cudaSetDevice(rank % ndev);
    // 300 x 200 doubles is below 1 MiB: the container writes it as a small
    // dataset (aggregated, read straight from its address); 1000 x 700 goes
    // through HDF5 in pieces.
    for (const auto [nx, ny] : {std::pair<std::int64_t, std::int64_t>{300, 200}, {1000, 700}}) {
        const auto [i0, lnx] = block(nx, size, rank);
        const std::int64_t ld = ny + 2; // one ghost layer
        // This rank's rows, interior of a device array with a ghost layer at `base`.
        const auto device_rows = [nx = nx, ny = ny, i0 = i0, lnx = lnx, ld](double* base) {
            const cairn::Box rows{{i0, 0}, {lnx, ny}};
            return cairn::ArrayShard{cairn::DType::f64, {nx, ny}, rows, base + ld + 1, {ld, 1},
                                     cairn::MemorySpace::cuda};
        };
        std::vector<double> host(static_cast<std::size_t>((lnx + 2) * ld), -1.0);
        for (std::int64_t i = 0; i < lnx; ++i)
            for (std::int64_t j = 0; j < ny; ++j)
                host[static_cast<std::size_t>((i + 1) * ld + j + 1)] = value(i0 + i, j);
        double* dev = nullptr;
        CHECK_CUDA(cudaMalloc(&dev, host.size() * sizeof(double)));
        CHECK_CUDA(cudaMemcpy(dev, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice));

        for (int run = 0; run < 6; ++run) {
            const int mode = run % 3; // save, async_save with a full copy, async_save bounded
            const bool container = run >= 3;
            const std::string ck = dir + "/ckpt" + std::to_string(mode) + (container ? ".h5" : "");
            cairn::StateDict sd;
            sd.add_array("u", device_rows(dev));
            cairn::SaveOptions o;
            o.overwrite = true;
            o.layout = container ? cairn::Layout::container : cairn::Layout::per_rank;
            o.staging_bytes = 64 * 1024; // many pipeline steps
            if (mode == 0) {
                cairn::save(sd, ck, MPI_COMM_WORLD, o);
            } else {
                o.async_staging = mode == 1 ? cairn::AsyncStaging::full_copy : cairn::AsyncStaging::bounded;
                cairn::async_save(sd, ck, MPI_COMM_WORLD, o).wait();
            }
            // Load columns [rank-th block of ny] on the host, and the same rows back
            // into device memory.
            const auto [j0, lny] = block(ny, size, rank);
            std::vector<double> cols(static_cast<std::size_t>(nx * lny), 0.0);
            cairn::StateDict in;
            in.add_array<double>("u", cols.data(), {nx, ny}, cairn::Box{{0, j0}, {nx, lny}});
            cairn::load(in, ck, MPI_COMM_WORLD);
            int wrong = 0;
            for (std::int64_t i = 0; i < nx; ++i)
                for (std::int64_t j = 0; j < lny; ++j)
                    wrong += cols[static_cast<std::size_t>(i * lny + j)] != value(i, j0 + j);

            double* dev2 = nullptr;
            CHECK_CUDA(cudaMalloc(&dev2, host.size() * sizeof(double)));
            CHECK_CUDA(cudaMemset(dev2, 0, host.size() * sizeof(double)));
            cairn::StateDict in2;
            in2.add_array("u", device_rows(dev2));
            cairn::load(in2, ck, MPI_COMM_WORLD);
            std::vector<double> back(host.size());
            CHECK_CUDA(cudaMemcpy(back.data(), dev2, back.size() * sizeof(double), cudaMemcpyDeviceToHost));
            for (std::size_t k = 0; k < back.size(); ++k) {
                const bool ghost = k < static_cast<std::size_t>(ld) || k >= static_cast<std::size_t>((lnx + 1) * ld) ||
                                   k % static_cast<std::size_t>(ld) == 0 ||
                                   k % static_cast<std::size_t>(ld) == static_cast<std::size_t>(ld - 1);
                wrong += ghost ? back[k] != 0.0 : back[k] != host[k];
            }
            cudaFree(dev2);
            if (wrong)
                std::printf("rank %d: %lld x %lld, %s layout, mode %d: %d wrong values\n", rank,
                            static_cast<long long>(nx), static_cast<long long>(ny),
                            container ? "container" : "per-rank", mode, wrong);
            failures += wrong;
        }
        cudaFree(dev);
    }

    // Pageable host memory declared as device memory: refused when the array
    // is added, naming the array, before any collective call.
    {
        std::vector<double> pageable(16, 1.0);
        std::string msg;
        try {
            cairn::StateDict sd;
            sd.add_array("mislabelled", cairn::ArrayShard{cairn::DType::f64,
                                                          {16 * size},
                                                          cairn::Box{{16 * rank}, {16}},
                                                          pageable.data(),
                                                          {},
                                                          cairn::MemorySpace::cuda});
        } catch (const cairn::error::WrongAPIUsage& e) {
            msg = e.what();
        }
        const bool named =
            msg.find("'mislabelled'") != std::string::npos && msg.find("host memory") != std::string::npos;
        if (!named) {
            std::printf("rank %d: host memory declared as CUDA memory: wrong or no "
                        "error: '%s'\n",
                        rank, msg.c_str());
            ++failures;
        }
        // Pinned host memory is readable by CUDA's copies: accepted, and saved.
        double* pinned = nullptr;
        CHECK_CUDA(cudaMallocHost(&pinned, 16 * sizeof(double)));
        for (int k = 0; k < 16; ++k)
            pinned[k] = 16.0 * rank + k;
        cairn::StateDict sd;
        sd.add_array(
            "pinned",
            cairn::ArrayShard{
                cairn::DType::f64, {16 * size}, cairn::Box{{16 * rank}, {16}}, pinned, {}, cairn::MemorySpace::cuda});
        cairn::SaveOptions o;
        o.overwrite = true;
        cairn::save(sd, dir + "/pinned", MPI_COMM_WORLD, o);
        std::vector<double> all(static_cast<std::size_t>(16 * size), -1.0);
        cairn::StateDict in;
        in.add_array<double>("pinned", all.data(), {16 * size}, cairn::Box{{0}, {16 * size}});
        cairn::load(in, dir + "/pinned", MPI_COMM_WORLD);
        for (int k = 0; k < 16 * size; ++k)
            failures += all[static_cast<std::size_t>(k)] != static_cast<double>(k);
        cudaFreeHost(pinned);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("%s (%d wrong values)\n", total == 0 ? "passed" : "FAILED", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
