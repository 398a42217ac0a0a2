// Writes a checkpoint with one entry of every kind and known values, for the
// tests of the cairn tool (tests/cli/cli_test.py computes the same values).
//
//   mpiexec -n N cairn_cli_make_checkpoint PATH [--modify] [--container] [--one]
//
// grid     f32 [7, 5, 3]  grid[i][j][k] = 100 i + 10 j + k, split along dim 1
// ids      i32 [11]       ids[i] = 3 i - 5, split along dim 0
// special  f64 [6]        0, NaN, -0.0, inf, 1.5, -2.25 (replicated)
// flags    bool [4]       true, false, false, true (replicated)
// zero_d   f64 []         3.25 (replicated)
// empty    f64 [0, 4]     no elements
// blob     bytes          0, 1, ..., 19
// label    string         hello "cairn"<newline>
// dt f32 0.5, count u64 18446744073709551615, on bool true (scalars)
// --modify: grid[5][4][2] = -1 and ids[10] = 0. --one: ids alone.
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PATH [--modify] [--container] [--one]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const std::string path = argv[1];
    bool modify = false, container = false, one = false;
    for (int a = 2; a < argc; ++a) {
        modify = modify || std::string(argv[a]) == "--modify";
        container = container || std::string(argv[a]) == "--container";
        one = one || std::string(argv[a]) == "--one";
    }
    auto part = [&](std::int64_t n, int r) { return n * r / size; };

    // grid: this rank's columns [j0, j1) of dim 1.
    const std::int64_t j0 = part(5, rank), j1 = part(5, rank + 1);
    std::vector<float> grid(static_cast<std::size_t>(7 * (j1 - j0) * 3));
    for (std::int64_t i = 0; i < 7; ++i)
        for (std::int64_t j = j0; j < j1; ++j)
            for (std::int64_t k = 0; k < 3; ++k) {
                float v = static_cast<float>(100 * i + 10 * j + k);
                if (modify && i == 5 && j == 4 && k == 2)
                    v = -1.0f;
                grid[static_cast<std::size_t>((i * (j1 - j0) + (j - j0)) * 3 + k)] = v;
            }
    const std::int64_t i0 = part(11, rank), i1 = part(11, rank + 1);
    std::vector<std::int32_t> ids;
    for (std::int64_t i = i0; i < i1; ++i)
        ids.push_back(modify && i == 10 ? 0 : static_cast<std::int32_t>(3 * i - 5));
    std::vector<double> special = {0.0, std::numeric_limits<double>::quiet_NaN(), -0.0,
                                   std::numeric_limits<double>::infinity(), 1.5, -2.25};
    bool flags[4] = {true, false, false, true};
    double zero_d = 3.25;
    std::vector<std::byte> blob;
    for (int b = 0; b < 20; ++b)
        blob.push_back(static_cast<std::byte>(b));
    std::string label = "hello \"cairn\"\n";
    float dt = 0.5f;
    std::uint64_t count = std::numeric_limits<std::uint64_t>::max();
    bool on = true;

    int rc = 0;
    try {
        cairn::StateDict state;
        state.add_array<std::int32_t>("ids", ids.data(), {11}, cairn::Box{{i0}, {i1 - i0}});
        if (!one) {
            state.add_array<float>("grid", grid.data(), {7, 5, 3}, cairn::Box{{0, j0, 0}, {7, j1 - j0, 3}});
            state.add_replicated<double>("special", special.data(), {6});
            state.add_replicated<bool>("flags", flags, {4});
            state.add_replicated<double>("zero_d", &zero_d, {});
            state.add_array<double>("empty", nullptr, {0, 4}, cairn::Box{{0, 0}, {0, 4}});
            state.add_bytes("blob", &blob);
            state.add_string("label", &label);
            state.add_scalar("dt", &dt);
            state.add_scalar("count", &count);
            state.add_scalar("on", &on);
        }
        cairn::SaveOptions options;
        options.overwrite = true;
        if (container)
            options.layout = cairn::Layout::container;
        cairn::save(state, path, MPI_COMM_WORLD, options);
    } catch (const cairn::Error& e) {
        if (rank == 0)
            std::fprintf(stderr, "make_checkpoint: %s\n", e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
