// A CPU-only program against a libcairn built with CUDA, run where the CUDA
// runtime cannot be loaded (no_runtime.sh hides every libcudart of the
// machine in a mount namespace of its own). It must start, save and load
// host arrays in both layouts, report no usable device, and refuse a shard
// declared in device memory on every rank with an error that names the
// array and says that the runtime cannot be loaded. Prints "FAIL: ..." and
// exits 1 on any rank that sees otherwise.
#include <cairn/cairn.hpp>

#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what, int rank)
{
    if (!ok) {
        std::fprintf(stderr, "FAIL (rank %d): %s\n", rank, what.c_str());
        ++failures;
    }
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string dir = argc > 1 ? argv[1] : "no_runtime";
    constexpr std::int64_t n = 1000;

    std::vector<double> mine(n);
    for (std::int64_t i = 0; i < n; ++i)
        mine[i] = static_cast<double>(rank * n + i) + 0.5;
    const cairn::Shape global{n * size};
    const cairn::Box box{{rank * n}, {n}};

    for (const auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const std::string id = dir + (layout == cairn::Layout::container ? "/host.h5" : "/host");
        try {
            cairn::StateDict out;
            out.add_array("field", mine.data(), global, box);
            cairn::SaveOptions so;
            so.layout = layout;
            so.overwrite = true;
            cairn::save(out, id, MPI_COMM_WORLD, so);
            // Loaded on the reverse decomposition, so every rank reads another's data.
            const int other = size - 1 - rank;
            std::vector<double> back(n, -1.0);
            cairn::StateDict in;
            in.add_array("field", back.data(), global, cairn::Box{{other * n}, {n}});
            cairn::load(in, id, MPI_COMM_WORLD);
            bool same = true;
            for (std::int64_t i = 0; i < n; ++i)
                same = same && back[i] == static_cast<double>(other * n + i) + 0.5;
            expect(same, "host array loaded back from " + id + " differs", rank);
        } catch (const std::exception& e) {
            expect(false, std::string("host save/load of ") + id + ": " + e.what(), rank);
        }
    }

    expect(!cairn::cuda_device_available(), "cuda_device_available() is true with the runtime hidden", rank);

    // A shard declared in device memory: refused on every rank, naming the
    // array and the runtime that could not be loaded.
    std::string message;
    try {
        cairn::StateDict out;
        out.add_array("device_field", cairn::ArrayShard{cairn::DType::f64, global, box, mine.data(), {},
                                                        cairn::MemorySpace::cuda});
        cairn::SaveOptions so;
        so.overwrite = true;
        cairn::save(out, dir + "/device", MPI_COMM_WORLD, so);
    } catch (const cairn::Error& e) {
        message = e.what();
    }
    expect(message.find("device_field") != std::string::npos, "the device save's error does not name the array: '" +
                                                                  message + "'", rank);
    expect(message.find("cannot be loaded") != std::string::npos,
           "the device save's error does not say the CUDA runtime cannot be loaded: '" + message + "'", rank);
    if (rank == 0)
        std::printf("device save refused: %s\n", message.c_str());

    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        std::printf("ok: host save and load without the CUDA runtime, device shards refused by name\n");
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
