// 08_particles: particles whose count varies per rank, saved on N ranks,
// restarted on M, then migrated to the ranks that own them.
//
// A particle code holds a different number of particles on every rank, and
// some ranks may hold none. A cairn::RowGroup describes such arrays by
// their local row count: save computes each rank's offset and the global
// count, and stores ordinary global arrays ("particles.x": {N, 3}). On load
// the group hands each rank a share of the rows (here the even split), asks
// for the buffers once the count is known (a std::vector is resized), and
// loads into them, in one call.
//
// After the load the particles are where the split put them, not where the
// domain decomposition wants them: the code sends each to the rank owning
// its position (MPI_Alltoallv), as it does after each time step.
//
//   1. all ranks own a slab of [0, 1) along x and the particles inside it,
//      placed so that the counts differ and the last rank has none; they
//      save them with the step number;
//   2. for M = 1 .. ranks, the first M ranks (MPI_Comm_split) restart from
//      the checkpoint, migrate the particles to their slab owners, and check
//      every particle (ids, positions, velocities bitwise).
//
//   mpiexec -n 4 ./08_particles [CHECKPOINT_DIR]       (default: ckpt_08_particles)
//
// Prints "08_particles: OK" on rank 0 and exits 0 when every check passed.
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/rows.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t N = 1000; // particles in all

// Particle i's position and velocity: any rank can tell what it should hold.
// Positions crowd towards x = 0 and stop before the last slab of 4 ranks.
double position(std::int64_t i, int k)
{
    const double t = static_cast<double>(i) / N;
    return k == 0 ? 0.74 * t * t : 0.001 * static_cast<double>(i % 97) + k;
}
double velocity(std::int64_t i, int k) { return 0.5 - 0.01 * static_cast<double>((i * 7 + k) % 100); }

// The rank of `p` owning position x: slab floor(x * p).
int owner(double x, int p)
{
    const int r = static_cast<int>(std::floor(x * p));
    return r < 0 ? 0 : (r >= p ? p - 1 : r);
}

// This rank's particles: rows of id, x (3 per row) and v (3 per row).
struct Particles {
    std::vector<std::int64_t> id;
    std::vector<double> x, v;
    std::size_t size() const { return id.size(); }
    void push(std::int64_t i)
    {
        id.push_back(i);
        for (int k = 0; k < 3; ++k) {
            x.push_back(position(i, k));
            v.push_back(velocity(i, k));
        }
    }
    // The group of the three arrays: one distribution of rows.
    cairn::RowGroup rows()
    {
        cairn::RowGroup g;
        g.add("id", &id).add("x", &x, {3}).add("v", &v, {3});
        return g;
    }
};

// Sends `per_row` values of each row to the rank in `dest` (one per row).
template <class T>
std::vector<T> exchange(const std::vector<T>& data, int per_row, const std::vector<int>& dest,
                        const std::vector<int>& sends, const std::vector<int>& recvs, MPI_Datatype type, MPI_Comm comm)
{
    const std::size_t p = sends.size();
    std::vector<int> sdispl(p, 0), rdispl(p, 0), scount(p), rcount(p);
    for (std::size_t r = 0; r < p; ++r) {
        scount[r] = sends[r] * per_row;
        rcount[r] = recvs[r] * per_row;
        if (r > 0) {
            sdispl[r] = sdispl[r - 1] + scount[r - 1];
            rdispl[r] = rdispl[r - 1] + rcount[r - 1];
        }
    }
    std::vector<T> packed(data.size()), out(static_cast<std::size_t>(rdispl[p - 1] + rcount[p - 1]));
    std::vector<int> at(sdispl);
    for (std::size_t row = 0; row < dest.size(); ++row)
        for (int k = 0; k < per_row; ++k)
            packed[static_cast<std::size_t>(at[static_cast<std::size_t>(dest[row])]++)] =
                data[row * static_cast<std::size_t>(per_row) + static_cast<std::size_t>(k)];
    MPI_Alltoallv(packed.data(), scount.data(), sdispl.data(), type, out.data(), rcount.data(), rdispl.data(), type,
                  comm);
    return out;
}

// Moves every particle to the rank owning its position.
void migrate(Particles& p, MPI_Comm comm)
{
    int size = 0;
    MPI_Comm_size(comm, &size);
    std::vector<int> dest(p.size()), sends(static_cast<std::size_t>(size), 0), recvs(static_cast<std::size_t>(size));
    for (std::size_t i = 0; i < p.size(); ++i)
        ++sends[static_cast<std::size_t>(dest[i] = owner(p.x[3 * i], size))];
    MPI_Alltoall(sends.data(), 1, MPI_INT, recvs.data(), 1, MPI_INT, comm);
    p.id = exchange(p.id, 1, dest, sends, recvs, MPI_INT64_T, comm);
    p.x = exchange(p.x, 3, dest, sends, recvs, MPI_DOUBLE, comm);
    p.v = exchange(p.v, 3, dest, sends, recvs, MPI_DOUBLE, comm);
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const std::string dir = argc > 1 ? argv[1] : "ckpt_08_particles";
    int failures = 0;

    try {
        // 1. Save: each rank its own particles, counts differing per rank.
        {
            Particles mine;
            for (std::int64_t i = 0; i < N; ++i)
                if (owner(position(i, 0), ranks) == rank)
                    mine.push(i);
            std::int64_t step = 250;
            cairn::RowGroup rows = mine.rows();
            cairn::StateDict state;
            state.add_scalar("step", &step);
            cairn::add_rows(state, "particles", rows);
            cairn::SaveOptions options;
            options.overwrite = true; // replaces a checkpoint left by an earlier run
            cairn::save(state, dir, MPI_COMM_WORLD, options);
            // Every rank's count, for the report.
            std::vector<std::uint64_t> counts(static_cast<std::size_t>(ranks));
            const std::uint64_t n = rows.local_rows();
            MPI_Gather(&n, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                std::string list;
                for (const auto c : counts)
                    list += " " + std::to_string(c);
                std::printf("08_particles: saved %llu particles on %d ranks (per rank:%s)\n",
                            static_cast<unsigned long long>(rows.global_rows()), ranks, list.c_str());
            }
        }

        // 2. Restart on M ranks: the even split, then migration.
        for (int m = 1; m <= ranks; ++m) {
            MPI_Comm comm = MPI_COMM_NULL;
            MPI_Comm_split(MPI_COMM_WORLD, rank < m ? 0 : MPI_UNDEFINED, rank, &comm);
            if (comm == MPI_COMM_NULL)
                continue;
            Particles p;            // empty: the load sizes it
            std::int64_t step = 0;
            cairn::RowGroup rows = p.rows();
            cairn::StateDict state;
            state.add_scalar("step", &step);
            cairn::add_rows(state, "particles", rows);
            cairn::load(state, dir, comm);
            // The split's share, in stored order: rank 0's rows first.
            int wrong = step != 250 || rows.local_rows() != cairn::RowGroup::even_share(N, rank, m);
            migrate(p, comm);
            std::int64_t count = static_cast<std::int64_t>(p.size()), total = 0, id_sum = 0, all_ids = 0;
            for (std::size_t i = 0; i < p.size(); ++i) {
                const std::int64_t id = p.id[i];
                id_sum += id;
                wrong += owner(p.x[3 * i], m) != rank;
                for (int k = 0; k < 3; ++k)
                    wrong += p.x[3 * i + k] != position(id, k) || p.v[3 * i + k] != velocity(id, k);
            }
            MPI_Allreduce(&count, &total, 1, MPI_INT64_T, MPI_SUM, comm);
            MPI_Allreduce(&id_sum, &all_ids, 1, MPI_INT64_T, MPI_SUM, comm);
            wrong += total != N || all_ids != N * (N - 1) / 2;
            int wrong_all = 0;
            MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT, MPI_SUM, comm);
            if (rank == 0)
                std::printf("08_particles: restarted on %d ranks, each particle on its owner: %s\n", m,
                            wrong_all == 0 ? "OK" : "WRONG");
            failures += wrong_all != 0;
            MPI_Comm_free(&comm);
        }
    } catch (const cairn::Error& e) {
        std::fprintf(stderr, "08_particles: rank %d: %s\n", rank, e.what());
        ++failures;
    }

    int failed = 0;
    MPI_Allreduce(&failures, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && failed == 0)
        std::printf("08_particles: OK\n");
    MPI_Finalize();
    return failed == 0 ? 0 : 1;
}
