// cairn_cuda_bench: what staging from CUDA device memory costs
// (docs/BENCHMARKS.md, "CUDA staging"). Each rank holds the same state twice,
// once in device memory and once in host memory; within each run the cases
// alternate (which of the two goes first changes from run to run):
//
//   d2h-pinned          cudaMemcpy of the state into page-locked host memory
//                       (the link's limit; async_save's memcpy baseline on a GPU)
//   {host,cuda}-rank-save, {host,cuda}-container-save    durable save (fsync)
//   {host,cuda}-rank-load, {host,cuda}-container-load    cold load of those
//   cuda-async-block    async_save of the device state (full copy): the
//                       caller's blocking time
//   cuda-async-commit   the wait for its commit that follows
//
// Every figure is the median of --runs runs (after --warmup runs), each the
// slowest rank's time. A cuda/host ratio near 1 means that staging through
// pinned buffers costs nothing beside the storage; the async ratio is
// blocking time over the D2H copy time (lower is better). Every load is
// checked against the state, untimed.
//
// usage: mpiexec -n P cairn_cuda_bench [--size-mib N] [--runs R] [--warmup W] [--dir D]
//   N: MiB per rank (default 1024), in 4 arrays of doubles, sharded by rank.
#include <cairn/cairn.hpp>

#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {

void cuda_check(cudaError_t rc, const char* what)
{
    if (rc != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

double now() { return MPI_Wtime(); }

// Slowest rank's duration of f, all ranks starting together.
double timed(const std::function<void()>& f)
{
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now();
    f();
    double t = now() - t0, worst = 0;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

bool drop_caches()
{
    ::sync();
    std::ofstream f("/proc/sys/vm/drop_caches");
    f << "3\n";
    f.flush();
    return static_cast<bool>(f);
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const auto n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

int main(int argc, char** argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long long mib = 1024;
    int runs = 5, warmup = 1;
    std::string dir = "/tmp/cairn_cuda_bench";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--size-mib")
            mib = std::atoll(next().c_str());
        else if (a == "--runs")
            runs = std::atoi(next().c_str());
        else if (a == "--warmup")
            warmup = std::atoi(next().c_str());
        else if (a == "--dir")
            dir = next();
        else {
            if (rank == 0)
                std::fprintf(stderr, "usage: cairn_cuda_bench [--size-mib N] [--runs "
                                     "R] [--warmup W] [--dir D]\n");
            MPI_Finalize();
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0)
            std::printf("no CUDA device: nothing measured\n");
        MPI_Finalize();
        return 77;
    }
    cuda_check(cudaSetDevice(rank % ndev), "cudaSetDevice");
    if (rank == 0)
        std::filesystem::create_directories(dir);
    MPI_Barrier(MPI_COMM_WORLD);

    constexpr int narrays = 4;
    const std::int64_t per = mib * 1048576 / narrays / 8; // doubles per array per rank
    const std::size_t bytes = static_cast<std::size_t>(per) * 8;
    std::vector<double*> dev(narrays), pinned(narrays);
    std::vector<std::vector<double>> host(narrays);
    for (int a = 0; a < narrays; ++a) {
        host[a].resize(static_cast<std::size_t>(per));
        for (std::int64_t k = 0; k < per; ++k)
            host[a][static_cast<std::size_t>(k)] = static_cast<double>((rank * per + k) % 1000003) + a * 0.5;
        cuda_check(cudaMalloc(&dev[a], bytes), "cudaMalloc");
        cuda_check(cudaMemcpy(dev[a], host[a].data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
        cuda_check(cudaMallocHost(&pinned[a], bytes), "cudaMallocHost");
        std::memset(pinned[a], 0, bytes);
    }
    auto state = [&](bool on_device, std::vector<double*>& ptrs) {
        cairn::StateDict sd;
        for (int a = 0; a < narrays; ++a)
            sd.add_array("a" + std::to_string(a),
                         cairn::ArrayShard{cairn::DType::f64,
                                           {per * size},
                                           cairn::Box{{per * rank}, {per}},
                                           ptrs[a],
                                           {},
                                           on_device ? cairn::MemorySpace::cuda : cairn::MemorySpace::host});
        return sd;
    };
    std::vector<double*> host_ptrs(narrays);
    for (int a = 0; a < narrays; ++a)
        host_ptrs[a] = host[a].data();
    // Destinations of the loads: a second device state and a second host state.
    std::vector<double*> dev_in(narrays), host_in_ptrs(narrays);
    std::vector<std::vector<double>> host_in(narrays);
    for (int a = 0; a < narrays; ++a) {
        cuda_check(cudaMalloc(&dev_in[a], bytes), "cudaMalloc");
        host_in[a].assign(static_cast<std::size_t>(per), 0.0);
        host_in_ptrs[a] = host_in[a].data();
    }

    const bool cold = rank == 0 ? drop_caches() : false;
    int cold_all = cold;
    MPI_Bcast(&cold_all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int wrong = 0; // loads that did not bring back the state
    auto save = [&](bool on_device, bool container, const std::string& id) {
        cairn::SaveOptions o;
        o.overwrite = true;
        o.layout = container ? cairn::Layout::container : cairn::Layout::per_rank;
        auto sd = state(on_device, on_device ? dev : host_ptrs);
        cairn::save(sd, id, MPI_COMM_WORLD, o);
    };
    auto load = [&](bool on_device, const std::string& id) {
        auto sd = state(on_device, on_device ? dev_in : host_in_ptrs);
        if (cold_all) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0)
                drop_caches();
        }
        const double secs = timed([&] { cairn::load(sd, id, MPI_COMM_WORLD); });
        // What the load brought back must be the state (untimed); then cleared.
        for (int a = 0; a < narrays; ++a) {
            if (on_device) {
                cuda_check(cudaMemcpy(pinned[a], dev_in[a], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
                cuda_check(cudaMemset(dev_in[a], 0, bytes), "cudaMemset");
            }
            char* got = on_device ? reinterpret_cast<char*>(pinned[a]) : reinterpret_cast<char*>(host_in[a].data());
            wrong += std::memcmp(got, host[a].data(), bytes) != 0;
            std::memset(got, 0, bytes);
        }
        return secs;
    };
    std::map<std::string, std::vector<double>> t;
    for (int run = 0; run < warmup + runs; ++run) {
        std::map<std::string, double> r;
        r["d2h-pinned"] = timed([&] {
            for (int a = 0; a < narrays; ++a)
                cuda_check(cudaMemcpy(pinned[a], dev[a], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
        });
        // Alternate which goes first, so neither always finds a warmer machine.
        for (int k = 0; k < 2; ++k) {
            const bool on_device = (k == 0) == (run % 2 == 0);
            const std::string who = on_device ? "cuda" : "host";
            const std::string id = dir + "/" + who + "-rank";
            r[who + "-rank-save"] = timed([&] { save(on_device, false, id); });
            r[who + "-container-save"] = timed([&] { save(on_device, true, id + ".h5"); });
            r[who + "-rank-load"] = load(on_device, id);
            r[who + "-container-load"] = load(on_device, id + ".h5");
        }
        {
            auto sd = state(true, dev);
            cairn::SaveOptions o;
            o.overwrite = true;
            o.layout = cairn::Layout::per_rank;
            o.async_staging = cairn::AsyncStaging::full_copy;
            cairn::AsyncSave h;
            r["cuda-async-block"] = timed([&] { h = cairn::async_save(sd, dir + "/async", MPI_COMM_WORLD, o); });
            r["cuda-async-commit"] = timed([&] { h.wait(); });
        }
        if (run >= warmup)
            for (auto& [k, v] : r)
                t[k].push_back(v);
    }
    int wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        const double total = static_cast<double>(bytes) * narrays * size;
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, rank % ndev);
        std::printf("# cuda: %s, %d ranks, %.0f MiB per rank, medians of %d runs "
                    "(%s loads)\n",
                    prop.name, size, static_cast<double>(mib), runs,
                    cold_all ? "cold" : "warm: the page cache could not be dropped");
        for (auto& [k, v] : t) {
            const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
            std::printf("figure cuda %s %.3f GB/s %.4f s (min %.4f, max %.4f)\n", k.c_str(), total / median(v) / 1e9,
                        median(v), *lo, *hi);
        }
        auto ratio = [&](const std::string& what, double v) { std::printf("ratio cuda %s %.3f\n", what.c_str(), v); };
        // Throughput over throughput (higher is better) for saves and loads.
        for (const char* c : {"rank-save", "container-save", "rank-load", "container-load"})
            ratio(std::string("cuda-") + c + "/host-" + c,
                  median(t[std::string("host-") + c]) / median(t[std::string("cuda-") + c]));
        // Blocking time over the copy time (lower is better).
        ratio("cuda-async-block/d2h-pinned", median(t["cuda-async-block"]) / median(t["d2h-pinned"]));
        std::printf("%s: %d wrong loads\n", wrong_all ? "FAILED" : "verified", wrong_all);
    }
    for (int a = 0; a < narrays; ++a) {
        cudaFree(dev[a]);
        cudaFree(dev_in[a]);
        cudaFreeHost(pinned[a]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        std::filesystem::remove_all(dir);
    MPI_Finalize();
    return wrong_all ? 1 : 0;
}
