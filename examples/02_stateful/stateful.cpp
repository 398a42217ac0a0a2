// 02_stateful: objects that checkpoint themselves, and nested dicts.
//
// A cairn::Stateful object hands Cairn a state dict of its own members
// (state_dict()) and is told when a load has filled them
// (load_state_dict()), the way torch's Stateful works. Its entries, and
// those of nested dicts, are stored under dotted names: "particles.x",
// "run.step". This example saves a small particle system and its run
// parameters, reads the checkpoint's metadata to list what was stored, then
// restores everything into fresh objects, as a restarted job would.
//
//   mpiexec -n 2 ./02_stateful [CHECKPOINT_DIR]      (default: ckpt_02_stateful)
//
// Prints "02_stateful: OK" on rank 0 and exits 0 when everything came back.
#include <cairn/checkpoint.hpp> // save, load, read_metadata
#include <cairn/errors.hpp>
#include <cairn/plan.hpp>       // Metadata, item_kind_name
#include <cairn/state_dict.hpp> // StateDict, Stateful

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// Particles distributed over the ranks: each rank owns `n` of them.
struct Particles : cairn::Stateful {
    Particles(std::int64_t n_, int rank_, int size_) : n(n_), rank(rank_), size(size_), x(static_cast<std::size_t>(n_)) {}

    std::int64_t n;
    int rank, size;
    std::vector<double> x;      // positions: a global array of n * size, sharded by rank
    double mass = 0;            // a scalar: must be the same on every rank
    std::uint64_t rng = 0;      // per-rank RNG state: differs between ranks,
                                // so it is stored as an array with one element per rank
    double total_mass = 0;      // derived, not stored: recomputed after a load
    int loads = 0;

    cairn::StateDict state_dict() override
    {
        cairn::StateDict sd;
        sd.add_array<double>("x", x.data(), {n * size}, cairn::Box{{n * rank}, {n}});
        sd.add_scalar("mass", &mass);
        sd.add_array<std::uint64_t>("rng", &rng, {size}, cairn::Box{{rank}, {1}});
        return sd;
    }

    // Called after a load has written into the buffers named by state_dict():
    // the place to rebuild what is derived from the stored state.
    void load_state_dict(cairn::StateDict&) override
    {
        total_mass = mass * static_cast<double>(n * size);
        ++loads;
    }
};

// Builds the top-level state dict: the particle system and a nested dict of
// run parameters. Called twice: to save, and to load into fresh objects.
cairn::StateDict make_state(Particles& particles, std::int64_t& step, double& time, std::string& integrator)
{
    cairn::StateDict run;
    run.add_scalar("step", &step);
    run.add_scalar("time", &time);
    run.add_string("integrator", &integrator);

    cairn::StateDict state;
    state.add_stateful("particles", &particles); // entries "particles.*"
    state.add_dict("run", std::move(run));       // entries "run.*"
    return state;
}

int run(const std::string& path, int rank, int size)
{
    const std::int64_t n = 8;

    // ---- the first job: set up, run, save -----------------------------------
    {
        Particles particles(n, rank, size);
        for (std::int64_t i = 0; i < n; ++i)
            particles.x[static_cast<std::size_t>(i)] = 0.5 * static_cast<double>(n * rank + i);
        particles.mass = 2.0;
        particles.rng = 1000u + static_cast<std::uint64_t>(rank);
        std::int64_t step = 250;
        double time = 1.25;
        std::string integrator = "leapfrog";

        cairn::StateDict state = make_state(particles, step, time, integrator);
        cairn::SaveOptions options;
        options.overwrite = true;
        cairn::save(state, path, MPI_COMM_WORLD, options);
    }

    // What was stored, by name: read_metadata is Local, one rank is enough.
    if (rank == 0) {
        const cairn::Metadata meta = cairn::read_metadata(path);
        for (const auto& [fqn, entry] : meta.entries)
            std::printf("02_stateful: stored %s (%s)\n", fqn.c_str(), cairn::item_kind_name(entry.kind));
    }

    // ---- the restarted job: fresh objects, load -----------------------------
    Particles particles(n, rank, size); // all zero
    std::int64_t step = 0;
    double time = 0;
    std::string integrator;
    cairn::StateDict state = make_state(particles, step, time, integrator);
    cairn::load(state, path, MPI_COMM_WORLD);

    int wrong = 0;
    for (std::int64_t i = 0; i < n; ++i)
        wrong += particles.x[static_cast<std::size_t>(i)] != 0.5 * static_cast<double>(n * rank + i);
    wrong += particles.mass != 2.0;
    wrong += particles.rng != 1000u + static_cast<std::uint64_t>(rank);
    wrong += particles.loads != 1;                                   // load_state_dict ran once
    wrong += particles.total_mass != 2.0 * static_cast<double>(n * size); // ... after the values arrived
    wrong += step != 250 || time != 1.25 || integrator != "leapfrog";
    int total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        std::printf("02_stateful: restored step %lld, time %g, integrator %s, total mass %g\n",
                    static_cast<long long>(step), time, integrator.c_str(), particles.total_mass);
        std::printf(total == 0 ? "02_stateful: OK\n" : "02_stateful: FAILED (%d wrong values)\n", total);
    }
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
        rc = run(argc > 1 ? argv[1] : "ckpt_02_stateful", rank, size);
    } catch (const cairn::Error& e) {
        std::fprintf(stderr, "02_stateful: error on rank %d: %s\n", rank, e.what());
    }
    MPI_Finalize();
    return rc;
}
