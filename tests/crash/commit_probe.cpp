// cairn_commit_probe: saves or loads a small container on every rank, for
// commit_eio_test.py. A failed save is reported and the program ends
// normally (MPI_Finalize, status 0), as a batch job that carries on would.
//
//   cairn_commit_probe save PATH VALUE [TRIES]   up to TRIES saves (default 1)
//   cairn_commit_probe load PATH VALUE           loads, checks every value
//
// The state: an array "field" of 16 x 64 doubles split by rows across the
// ranks, every element VALUE, and a scalar "step" = VALUE. Prints
//   rank R: try K: save failed: <error>      (every rank)
//   saved on try K                           (rank 0)
//   loaded VALUE                             (rank 0, status 0) or
//   rank R: load failed: <error> / rank R: N wrong values   (status 1)
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t NY = 16, NX = 64;

struct Part {
    std::int64_t i0 = 0, ni = 0;
    std::vector<double> rows;
    std::int64_t step = 0;
    cairn::StateDict state;
};

void describe(Part& p, int rank, int size, double fill, std::int64_t step)
{
    p.i0 = NY * rank / size;
    p.ni = NY * (rank + 1) / size - p.i0;
    p.rows.assign(static_cast<std::size_t>(p.ni * NX), fill);
    p.step = step;
    p.state.add_array<double>("field", p.rows.data(), {NY, NX}, cairn::Box{{p.i0, 0}, {p.ni, NX}});
    p.state.add_scalar("step", &p.step);
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string verb = argc > 1 ? argv[1] : "";
    if (argc < 4 || (verb != "save" && verb != "load")) {
        if (rank == 0)
            std::fprintf(stderr, "usage: cairn_commit_probe save|load PATH VALUE [TRIES]\n");
        MPI_Finalize();
        return 2;
    }
    const std::string path = argv[2];
    const std::int64_t value = std::strtoll(argv[3], nullptr, 10);
    int status = 0;
    if (verb == "save") {
        const int tries = argc > 4 ? std::atoi(argv[4]) : 1;
        Part p;
        describe(p, rank, size, static_cast<double>(value), value);
        cairn::SaveOptions options;
        options.overwrite = true;
        for (int k = 1; k <= tries; ++k) {
            try {
                cairn::save(p.state, path, MPI_COMM_WORLD, options);
                if (rank == 0)
                    std::printf("saved on try %d\n", k);
                break;
            } catch (const cairn::Error& e) {
                std::printf("rank %d: try %d: save failed: %s\n", rank, k, e.what());
            }
            std::fflush(stdout);
        }
    } else {
        Part p;
        describe(p, rank, size, -1.0, -1);
        long wrong = 0;
        try {
            cairn::load(p.state, path, MPI_COMM_WORLD);
            for (double x : p.rows)
                wrong += x != static_cast<double>(value);
            wrong += p.step != value;
            if (wrong != 0)
                std::printf("rank %d: %ld wrong values\n", rank, wrong);
        } catch (const cairn::Error& e) {
            std::printf("rank %d: load failed: %s\n", rank, e.what());
            wrong = 1;
        }
        long total = 0;
        MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0 && total == 0)
            std::printf("loaded %lld\n", static_cast<long long>(value));
        status = total == 0 ? 0 : 1;
    }
    std::fflush(stdout);
    MPI_Finalize();
    return status;
}
