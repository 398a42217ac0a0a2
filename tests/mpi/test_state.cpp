// Stateful objects, nested dicts, bytes, scalars, strings and partial loads.
#include "fixtures.hpp"

#include <catch2/catch.hpp>

using namespace cairn_test;

namespace {

// A solver whose state is a sharded field, an RNG seed and a nested
// Stateful (its time integrator).
struct Integrator : cairn::Stateful {
    double t = 0;
    std::int32_t order = 0;
    int loaded = 0;
    cairn::StateDict state_dict() override
    {
        cairn::StateDict sd;
        sd.add_scalar("t", &t);
        sd.add_scalar("order", &order);
        return sd;
    }
    void load_state_dict(cairn::StateDict&) override { ++loaded; }
};

struct Solver : cairn::Stateful {
    std::vector<float> field;
    std::int64_t offset = 0, global = 0;
    std::uint64_t seed = 0;
    Integrator integrator;
    int loaded = 0;
    bool integrator_loaded_first = false;
    cairn::StateDict state_dict() override
    {
        cairn::StateDict sd;
        sd.add_array<float>("field", field.data(), {global}, cairn::Box{{offset}, {static_cast<std::int64_t>(field.size())}});
        sd.add_scalar("seed", &seed);
        sd.add_stateful("integrator", &integrator);
        return sd;
    }
    void load_state_dict(cairn::StateDict&) override
    {
        ++loaded;
        integrator_loaded_first = integrator.loaded == 1;
    }
};

Solver make_solver(int p, int r, bool filled)
{
    Solver s;
    s.global = 50;
    auto [off, len] = block(50, p, r);
    s.offset = off;
    s.field.assign(static_cast<std::size_t>(len), -1.0f);
    if (filled) {
        for (std::int64_t i = 0; i < len; ++i)
            s.field[static_cast<std::size_t>(i)] = static_cast<float>(off + i) * 0.5f;
        s.seed = 0xDEADBEEFCAFEull;
        s.integrator.t = 2.75;
        s.integrator.order = 4;
    }
    return s;
}

} // namespace

TEST_CASE("Stateful objects and nested dicts save under dotted names and reshard", "[stateful]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("stateful_" + std::to_string(w)) + "/ckpt";
    {
        Solver s = make_solver(w, r, true);
        std::int64_t outer = 17;
        cairn::StateDict inner;
        inner.add_scalar("count", &outer);
        cairn::StateDict sd;
        sd.add_stateful("solver", &s);
        sd.add_dict("stats", std::move(inner));
        cairn::save(sd, dir, MPI_COMM_WORLD);
    }
    const auto md = cairn::read_metadata(dir);
    CHECK(md.entries.count("solver.field") == 1);
    CHECK(md.entries.count("solver.seed") == 1);
    CHECK(md.entries.count("solver.integrator.t") == 1);
    CHECK(md.entries.count("solver.integrator.order") == 1);
    CHECK(md.entries.count("stats.count") == 1);
    CHECK(md.world_size == w);

    // Load on one rank fewer (or the same when alone).
    const int m = w > 1 ? w - 1 : 1;
    CHECK(run_on(m, [&](SubComm& c) {
        Solver s = make_solver(m, c.rank(), false);
        std::int64_t outer = 0;
        cairn::StateDict inner;
        inner.add_scalar("count", &outer);
        cairn::StateDict sd;
        sd.add_stateful("solver", &s);
        sd.add_dict("stats", std::move(inner));
        cairn::load(sd, dir, c.get());
        bool ok = true;
        for (std::size_t i = 0; i < s.field.size(); ++i)
            ok = ok && s.field[i] == static_cast<float>(s.offset + static_cast<std::int64_t>(i)) * 0.5f;
        ok = ok && s.seed == 0xDEADBEEFCAFEull && s.integrator.t == 2.75 && s.integrator.order == 4;
        return ok && s.loaded == 1 && s.integrator.loaded == 1 && s.integrator_loaded_first && outer == 17;
    }));
}

TEST_CASE("partial loads skip and report keys present on one side only", "[partial]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("partial_" + std::to_string(w)) + "/ckpt";
    TestState saved(standard_arrays(), Decomp::dim0, w, r, 0, true);
    cairn::save(saved.dict, dir, MPI_COMM_WORLD);

    // Ask for one array of the checkpoint and one key it lacks.
    LocalArray a1("a1", cairn::DType::f64, {37}, decompose({37}, Decomp::last_dim, w, r), 1, 1);
    double extra = -1;
    cairn::StateDict sd;
    sd.add_array("a1", a1.shard());
    sd.add_scalar("not_saved", &extra);

    // Strict (default): both directions are errors, on every rank.
    CHECK_THROWS_AS(cairn::load(sd, dir, MPI_COMM_WORLD), cairn::error::NotFound);

    cairn::LoadOptions o;
    o.partial = true;
    const auto res = cairn::load(sd, dir, MPI_COMM_WORLD, o);
    CHECK(all(a1.errors() == 0));
    CHECK(res.missing == std::vector<std::string>{"not_saved"});
    CHECK(res.skipped.size() == saved.dict.size() - 1);
    CHECK(extra == -1);
}

TEST_CASE("may_be_missing names the state keys a checkpoint may lack", "[partial]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("may_be_missing_" + std::to_string(w)) + "/ckpt";
    std::vector<double> u(10);
    for (std::size_t i = 0; i < u.size(); ++i)
        u[i] = r * 10.0 + static_cast<double>(i) + 0.5;
    std::int64_t step = 42;
    {
        cairn::StateDict sd;
        sd.add_array("u", u.data(), {10 * w}, cairn::Box{{10 * r}, {10}}).add_scalar("step", &step);
        cairn::save(sd, dir, MPI_COMM_WORLD);
    }
    std::fill(u.begin(), u.end(), 0.0);
    step = 0;
    double extra = -1, opt_a = -2, opt_b = -3, stpe = -4;
    const auto state = [&](bool misspelt) {
        cairn::StateDict sd;
        sd.add_array("u", u.data(), {10 * w}, cairn::Box{{10 * r}, {10}});
        if (misspelt)
            sd.add_scalar("stpe", &stpe);
        else
            sd.add_scalar("step", &step).add_scalar("extra", &extra).add_scalar("opt.a", &opt_a).add_scalar("opt.b", &opt_b);
        return sd;
    };

    // Named keys and a prefix may be missing, without partial.
    cairn::LoadOptions o;
    o.may_be_missing = {"extra", "opt."};
    auto sd = state(false);
    const auto res = cairn::load(sd, dir, MPI_COMM_WORLD, o);
    CHECK(res.missing == std::vector<std::string>{"extra", "opt.a", "opt.b"});
    CHECK(res.skipped.empty());
    CHECK(step == 42);
    CHECK(u[3] == r * 10.0 + 3.5);
    CHECK((extra == -1 && opt_a == -2 && opt_b == -3));

    // A missing key that is not named fails on every rank, naming it.
    o.may_be_missing = {"opt."};
    auto sd2 = state(false);
    REQUIRE_THROWS_AS(cairn::load(sd2, dir, MPI_COMM_WORLD, o), cairn::error::NotFound);
    try {
        cairn::load(sd2, dir, MPI_COMM_WORLD, o);
    } catch (const cairn::error::NotFound& e) {
        CHECK_THAT(e.what(), Catch::Matchers::Contains("'extra'"));
    }

    // With partial, a list restricts which keys may be missing: a misspelt
    // key fails, with the checkpoint's key it is closest to.
    o.partial = true;
    o.may_be_missing = {"extra"};
    auto sd3 = state(true);
    try {
        cairn::load(sd3, dir, MPI_COMM_WORLD, o);
        FAIL("a misspelt key loaded");
    } catch (const cairn::error::NotFound& e) {
        CHECK_THAT(e.what(), Catch::Matchers::Contains("'stpe'") &&
                                 Catch::Matchers::Contains("did you mean 'step'"));
    }
    // Without a list, partial lets it pass, as before.
    o.may_be_missing.clear();
    const auto lax = cairn::load(sd3, dir, MPI_COMM_WORLD, o);
    CHECK(lax.missing == std::vector<std::string>{"stpe"});
    CHECK(lax.skipped == std::vector<std::string>{"step"});
    CHECK(stpe == -4);
}

TEST_CASE("empty byte blobs and empty strings round-trip", "[state]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("empties_" + std::to_string(w)) + "/ckpt";
    std::vector<std::byte> blob;
    std::string s;
    bool flag = true;
    {
        cairn::StateDict sd;
        sd.add_bytes("blob", &blob).add_string("s", &s).add_scalar("flag", &flag);
        cairn::save(sd, dir, MPI_COMM_WORLD);
    }
    blob.assign(5, std::byte{1});
    s = "junk";
    flag = false;
    cairn::StateDict sd;
    sd.add_bytes("blob", &blob).add_string("s", &s).add_scalar("flag", &flag);
    cairn::load(sd, dir, MPI_COMM_WORLD);
    CHECK(all(blob.empty() && s.empty() && flag));
}
