// 03_reshard: save on 4 ranks, load on 2 and on 3 ranks.
//
// A checkpoint does not remember how the ranks split the data: it stores
// chunks of global arrays. On load every rank asks for the box it wants now,
// in any decomposition and on any number of ranks, and reads only the bytes
// that overlap it. Here one 4-rank job plays three jobs in a row:
//
//   1. all 4 ranks save a 12 x 10 field as a 2 x 2 grid of blocks;
//   2. ranks 0-1 (a communicator of 2, from MPI_Comm_split) load it as 2
//      blocks of rows;
//   3. ranks 0-2 (a communicator of 3) load it as 3 blocks of columns;
//   4. ranks 0-1 ask for a field of another shape: Cairn refuses it with
//      cairn::error::Mismatch, thrown on every rank of the load.
//
//   mpiexec -n 4 ./03_reshard [CHECKPOINT_DIR]       (default: ckpt_03_reshard)
//
// Prints "03_reshard: OK" on rank 0 and exits 0 when every check passed.
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::int64_t NY = 12, NX = 10; // the global field: NY rows, NX columns

// The value of global element (i, j): any rank can tell what it should hold.
double value(std::int64_t i, std::int64_t j) { return 100.0 * static_cast<double>(i) + static_cast<double>(j); }

// Block r of p of a range of n: {offset, length}, the first n % p blocks one longer.
std::pair<std::int64_t, std::int64_t> block(std::int64_t n, int p, int r)
{
    const std::int64_t base = n / p, extra = n % p;
    return {r * base + (r < extra ? r : extra), base + (r < extra ? 1 : 0)};
}

// A rank's part of the field: its box and a dense row-major buffer.
struct Piece {
    cairn::Box box;
    std::vector<double> data;
    explicit Piece(cairn::Box b) : box(std::move(b)), data(static_cast<std::size_t>(box.volume()), -1.0) {}
    double& at(std::int64_t i, std::int64_t j)
    {
        return data[static_cast<std::size_t>((i - box.offsets[0]) * box.shape[1] + (j - box.offsets[1]))];
    }
    int count_wrong()
    {
        int wrong = 0;
        for (std::int64_t i = box.offsets[0]; i < box.offsets[0] + box.shape[0]; ++i)
            for (std::int64_t j = box.offsets[1]; j < box.offsets[1] + box.shape[1]; ++j)
                wrong += at(i, j) != value(i, j);
        return wrong;
    }
};

// The ranks of `comm` with rank < n, in a communicator of their own
// (MPI_COMM_NULL on the others).
MPI_Comm first_ranks(int n, int rank)
{
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank < n ? 0 : MPI_UNDEFINED, rank, &sub);
    return sub;
}

// Loads the field into `piece` on `comm`, checks it, returns the number of
// wrong values on this rank and prints what this group of ranks did.
int load_and_check(const std::string& path, MPI_Comm comm, Piece& piece, const char* how)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    cairn::StateDict state;
    state.add_array<double>("field", piece.data.data(), {NY, NX}, piece.box);
    int wrong = 0;
    unsigned long long bytes = 0;
    try {
        bytes = cairn::load(state, path, comm).bytes_read; // collective over comm only
        wrong = piece.count_wrong();
    } catch (const cairn::Error& e) {
        // Thrown on every rank of comm alike: all of them carry on to the
        // final agreement on MPI_COMM_WORLD instead of leaving the others.
        std::fprintf(stderr, "03_reshard: load on %d ranks failed: %s\n", size, e.what());
        wrong = 1;
    }
    int wrong_here = 0;
    unsigned long long bytes_here = 0;
    MPI_Reduce(&wrong, &wrong_here, 1, MPI_INT, MPI_SUM, 0, comm);
    MPI_Reduce(&bytes, &bytes_here, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, comm);
    if (rank == 0) {
        std::printf("03_reshard: loaded on %d ranks (%s): %s\n", size, how, wrong_here == 0 ? "OK" : "WRONG");
        std::printf("03_reshard:   %llu bytes read by %d ranks\n", bytes_here, size);
    }
    return wrong;
}

int run(const std::string& path, int rank, int size)
{
    if (size != 4) {
        if (rank == 0)
            std::fprintf(stderr, "03_reshard: run me on 4 ranks (mpiexec -n 4), not %d\n", size);
        return 1;
    }
    int wrong = 0;

    // 1. Save on 4 ranks: a 2 x 2 grid of blocks.
    {
        const auto [i0, ni] = block(NY, 2, rank / 2);
        const auto [j0, nj] = block(NX, 2, rank % 2);
        Piece piece(cairn::Box{{i0, j0}, {ni, nj}});
        for (std::int64_t i = i0; i < i0 + ni; ++i)
            for (std::int64_t j = j0; j < j0 + nj; ++j)
                piece.at(i, j) = value(i, j);
        cairn::StateDict state;
        state.add_array<double>("field", piece.data.data(), {NY, NX}, piece.box);
        cairn::SaveOptions options;
        options.overwrite = true;
        cairn::save(state, path, MPI_COMM_WORLD, options);
        if (rank == 0)
            std::printf("03_reshard: saved a %lld x %lld field on 4 ranks (2 x 2 blocks)\n",
                        static_cast<long long>(NY), static_cast<long long>(NX));
    }

    // 2. Load on 2 ranks: blocks of rows. Ranks 2 and 3 sit this one out.
    MPI_Comm two = first_ranks(2, rank);
    if (two != MPI_COMM_NULL) {
        const auto [i0, ni] = block(NY, 2, rank);
        Piece piece(cairn::Box{{i0, 0}, {ni, NX}});
        wrong += load_and_check(path, two, piece, "row blocks");
    }

    // 3. Load on 3 ranks: blocks of columns (4, 3 and 3 columns).
    MPI_Comm three = first_ranks(3, rank);
    if (three != MPI_COMM_NULL) {
        const auto [j0, nj] = block(NX, 3, rank);
        Piece piece(cairn::Box{{0, j0}, {NY, nj}});
        wrong += load_and_check(path, three, piece, "column blocks");
        MPI_Comm_free(&three);
    }

    // 4. A shape that does not match the checkpoint: every rank of the load
    //    gets the same exception, so none of them hangs.
    if (two != MPI_COMM_NULL) {
        Piece piece(cairn::Box{{rank * NY, 0}, {NY, NX}});
        cairn::StateDict state;
        state.add_array<double>("field", piece.data.data(), {2 * NY, NX}, piece.box);
        bool refused = false;
        try {
            cairn::load(state, path, two);
        } catch (const cairn::error::Mismatch&) {
            refused = true; // e.what() names the entry and both shapes
        } catch (const cairn::Error& e) {
            std::fprintf(stderr, "03_reshard: unexpected error: %s\n", e.what());
        }
        wrong += refused ? 0 : 1;
        if (rank == 0)
            std::printf("03_reshard: a field of another shape is refused: %s\n", refused ? "Mismatch" : "NOT REFUSED");
        MPI_Comm_free(&two);
    }

    int total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total == 0 ? "03_reshard: OK\n" : "03_reshard: FAILED (%d wrong values)\n", total);
    return total == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = 1;
    try {
        rc = run(argc > 1 ? argv[1] : "ckpt_03_reshard", rank, size);
    } catch (const cairn::Error& e) {
        std::fprintf(stderr, "03_reshard: error on rank %d: %s\n", rank, e.what());
    }
    MPI_Finalize();
    return rc;
}
