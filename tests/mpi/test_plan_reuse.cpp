// SaveOptions::reuse_plan: the coordinator's global plan kept from one save
// to the next (src/plan/plan_cache.hpp).
#include "common.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace cairn_test;

namespace {

// A simulation's state: a sharded field, a replicated array, a step, a
// label and a replicated blob.
struct Sim {
    std::vector<double> u;
    std::int64_t off = 0, global = 0;
    std::vector<float> coef;
    std::int64_t step = 0;
    std::string label;
    std::vector<std::byte> rng;

    // Rank r of p holds a block of `global` cells, one cell moved from rank 0
    // to the last rank when `shifted`; `salt` makes every value of the save.
    Sim(int p, int r, int salt, bool shifted = false, std::int64_t n = 1000) : global(n)
    {
        auto [o, len] = block(n, p, r);
        if (shifted && p > 1) {
            if (r == 0)
                --len;
            else
                --o;
            if (r == p - 1)
                ++len;
        }
        off = o;
        u.resize(static_cast<std::size_t>(len));
        for (std::int64_t i = 0; i < len; ++i)
            u[static_cast<std::size_t>(i)] = static_cast<double>((off + i) * 3 + salt);
        coef = {1.5f * static_cast<float>(salt), 2.0f, 3.0f};
        step = 100 * salt;
        label = "run " + std::string(static_cast<std::size_t>(salt % 5 + 1), 'x');
        rng.assign(16, std::byte{static_cast<unsigned char>(salt)});
    }
    cairn::StateDict dict()
    {
        cairn::StateDict sd;
        sd.add_array<double>("u", u.data(), {global}, cairn::Box{{off}, {static_cast<std::int64_t>(u.size())}});
        sd.add_array<float>("coef", coef.data(), {3}, cairn::Box{{0}, {3}});
        sd.add_scalar("step", &step);
        sd.add_string("label", &label);
        sd.add_bytes("rng", &rng);
        return sd;
    }
};

// Saves `sim` at `id`; true on every rank when every rank reports `reused`.
bool save_reports(Sim& sim, const std::string& id, cairn::Layout layout, bool reuse, bool reused)
{
    auto sd = sim.dict();
    cairn::SaveOptions o;
    o.layout = layout;
    o.reuse_plan = reuse;
    o.fsync = false;
    const auto res = cairn::save(sd, id, MPI_COMM_WORLD, o);
    return all(res.plan_reused == reused);
}

// Loads `id` into a state of `sim`'s decomposition; true on every rank when
// everything equals `sim`'s values.
bool loads_as(const Sim& sim, const std::string& id)
{
    Sim got = sim;
    std::fill(got.u.begin(), got.u.end(), -1.0);
    got.coef.assign(3, -1.0f);
    got.step = -1;
    got.label = "?";
    got.rng.clear();
    auto sd = got.dict();
    cairn::load(sd, id, MPI_COMM_WORLD);
    const bool same = got.u == sim.u && got.coef == sim.coef && got.step == sim.step && got.label == sim.label &&
                      got.rng == sim.rng;
    return all(same) && all(cairn::verify(id, MPI_COMM_WORLD).ok());
}

// The message of the error::Mismatch that saving `sim` at `id` with
// reuse_plan throws; empty when it throws none.
std::string mismatch_of(Sim& sim, const std::string& id)
{
    try {
        auto sd = sim.dict();
        cairn::SaveOptions o;
        o.reuse_plan = true;
        o.fsync = false;
        cairn::save(sd, id, MPI_COMM_WORLD, o);
    } catch (const cairn::error::Mismatch& e) {
        return e.what();
    }
    return {};
}

} // namespace

TEST_CASE("reuse_plan: repeated saves of the same layout reuse the global plan", "[reuse]")
{
    const int w = world_size(), r = world_rank();
    for (const auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const bool per_rank = layout == cairn::Layout::per_rank;
        INFO((per_rank ? "per-rank" : "container") << " layout");
        const std::string dir = fresh_dir(std::string("plan_reuse_") + (per_rank ? "r" : "c") + std::to_string(w));
        const auto id = [&](int k) { return dir + "/ckpt" + std::to_string(k) + (per_rank ? "" : ".h5"); };

        // A save without the option keeps nothing; the first one with it plans.
        Sim s1(w, r, 1);
        CHECK(save_reports(s1, id(1), layout, false, false));
        Sim s2(w, r, 2);
        CHECK(save_reports(s2, id(2), layout, true, false));
        // New data, step, label (of another length) and blob content: reused.
        Sim s3(w, r, 3);
        CHECK(save_reports(s3, id(3), layout, true, true));
        Sim s4(w, r, 4);
        CHECK(save_reports(s4, id(4), layout, true, true));
        CHECK(loads_as(s2, id(2)));
        CHECK(loads_as(s3, id(3)));
        CHECK(loads_as(s4, id(4)));
        CHECK(loads_as(s1, id(1)));

        // Another decomposition (or, on one rank, another global shape): planned anew, then reused.
        Sim s5(w, r, 5, true, w > 1 ? 1000 : 999);
        CHECK(save_reports(s5, id(5), layout, true, false));
        Sim s6(w, r, 6, true, w > 1 ? 1000 : 999);
        CHECK(save_reports(s6, id(6), layout, true, true));
        CHECK(loads_as(s5, id(5)));
        CHECK(loads_as(s6, id(6)));

        // A blob of another size: planned anew.
        const auto longer_blob = [&](int salt) {
            Sim s(w, r, salt, true, w > 1 ? 1000 : 999);
            s.rng.resize(20);
            return s;
        };
        Sim s7 = longer_blob(7);
        CHECK(save_reports(s7, id(7), layout, true, false));
        CHECK(loads_as(s7, id(7)));

        // A save without the option forgets the kept plan.
        Sim s8 = longer_blob(8);
        CHECK(save_reports(s8, id(8), layout, false, false));
        Sim s9 = longer_blob(9);
        CHECK(save_reports(s9, id(9), layout, true, false));
        CHECK(loads_as(s9, id(9)));

        // The kept plan does not depend on the storage: a save of the same
        // plans in the other layout reuses it and loads back.
        Sim s10 = longer_blob(10);
        const auto other = per_rank ? cairn::Layout::container : cairn::Layout::per_rank;
        const std::string other_id = dir + "/other" + (per_rank ? ".h5" : "");
        CHECK(save_reports(s10, other_id, other, true, true));
        CHECK(loads_as(s10, other_id));
    }
}

TEST_CASE("reuse_plan: values that differ between ranks are refused as without reuse", "[reuse]")
{
    const int w = world_size(), r = world_rank();
    if (w < 2)
        return; // nothing to disagree with
    const std::string dir = fresh_dir("plan_reuse_agree" + std::to_string(w));
    Sim a(w, r, 1);
    CHECK(save_reports(a, dir + "/a", cairn::Layout::per_rank, true, false));
    // The same plans but for the step, which the last rank has wrong: the
    // plan is not reused and the save fails naming the scalar, the checkpoint
    // is not written, and the kept plan still serves the next save.
    Sim b(w, r, 2);
    if (r == w - 1)
        b.step = 12345;
    std::string msg = mismatch_of(b, dir + "/b");
    INFO(msg);
    CHECK(all(msg.find("scalar 'step'") != std::string::npos && msg.find("scalars must agree") != std::string::npos));
    CHECK(all(!std::filesystem::exists(dir + "/b/metadata.h5")));
    // A blob whose content differs on the last rank: refused the same way.
    Sim c(w, r, 3);
    if (r == w - 1)
        c.rng[0] = std::byte{0x7f};
    msg = mismatch_of(c, dir + "/c");
    INFO(msg);
    CHECK(all(msg.find("bytes 'rng'") != std::string::npos && msg.find("byte blobs must agree") != std::string::npos));
    Sim d(w, r, 4);
    CHECK(save_reports(d, dir + "/d", cairn::Layout::per_rank, true, true));
    CHECK(loads_as(d, dir + "/d"));
}

TEST_CASE("reuse_plan: async saves reuse the plan too", "[reuse][async]")
{
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return; // async_save needs MPI_THREAD_MULTIPLE (tests/mpi/main.cpp asks for it)
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("plan_reuse_async" + std::to_string(w));
    std::vector<Sim> sims;
    for (int k = 0; k < 3; ++k)
        sims.emplace_back(w, r, k + 1);
    Sim first(w, r, 9);
    CHECK(save_reports(first, dir + "/forget", cairn::Layout::per_rank, false, false)); // nothing kept before
    std::vector<bool> reused;
    for (int k = 0; k < 3; ++k) {
        auto sd = sims[static_cast<std::size_t>(k)].dict();
        cairn::SaveOptions o;
        o.reuse_plan = true;
        o.fsync = false;
        auto h = cairn::async_save(sd, dir + "/a" + std::to_string(k), MPI_COMM_WORLD, o);
        reused.push_back(h.committed().get().plan_reused);
    }
    INFO("rank " << r << ": " << reused[0] << reused[1] << reused[2]);
    CHECK(all(!reused[0] && reused[1] && reused[2]));
    for (int k = 0; k < 3; ++k)
        CHECK(loads_as(sims[static_cast<std::size_t>(k)], dir + "/a" + std::to_string(k)));
}

TEST_CASE("reuse_plan: set on some ranks only, the save plans from scratch and forgets", "[reuse]")
{
    const int w = world_size(), r = world_rank();
    if (w < 2)
        return; // needs a rank without the option
    const std::string dir = fresh_dir("plan_reuse_some" + std::to_string(w));
    Sim a(w, r, 1);
    {
        auto sd = a.dict();
        cairn::SaveOptions o;
        o.reuse_plan = true;
        o.fsync = false;
        cairn::save(sd, dir + "/a", MPI_COMM_WORLD, o); // keeps the plan (or reuses one an earlier test kept)
    }
    Sim b(w, r, 2);
    CHECK(save_reports(b, dir + "/b", cairn::Layout::per_rank, r != w - 1, false));
    CHECK(loads_as(b, dir + "/b"));
    Sim c(w, r, 3);
    CHECK(save_reports(c, dir + "/c", cairn::Layout::per_rank, true, false)); // b forgot the kept plan
    Sim d(w, r, 4);
    CHECK(save_reports(d, dir + "/d", cairn::Layout::per_rank, true, true));
    CHECK(loads_as(d, dir + "/d"));
}

TEST_CASE("plans to the coordinator: only the array boxes when the plans are alike otherwise", "[reuse]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("plan_boxes_" + std::to_string(w));
    constexpr int arrays = 100;
    constexpr std::int64_t n = 64;
    auto [off, len] = block(n, w, r);
    std::vector<std::vector<double>> data(arrays, std::vector<double>(static_cast<std::size_t>(len)));
    for (int a = 0; a < arrays; ++a)
        for (std::int64_t i = 0; i < len; ++i)
            data[static_cast<std::size_t>(a)][static_cast<std::size_t>(i)] = static_cast<double>(a * 1000 + off + i);
    std::int64_t step = 7;
    const auto dict = [&](std::vector<std::vector<double>>& d) {
        cairn::StateDict sd;
        for (int a = 0; a < arrays; ++a)
            sd.add_array<double>("solver.a_rather_long_field_name_" + std::to_string(a), d[static_cast<std::size_t>(a)].data(),
                                 {n}, cairn::Box{{off}, {len}});
        sd.add_scalar("step", &step);
        return sd;
    };
    auto sd = dict(data);
    cairn::SaveOptions o;
    o.fsync = false;
    const auto res = cairn::save(sd, dir + "/ckpt", MPI_COMM_WORLD, o);
    // Rank 0's plan whole (names of 35 bytes and more); the others, each
    // array's box and size in a few bytes (without the form: 20 bytes an
    // item even without the name table).
    if (r == 0)
        CHECK(res.plan_bytes_sent > arrays * 35);
    else
        CHECK((res.plan_bytes_sent > 0 && res.plan_bytes_sent < arrays * 10));
    // And the checkpoint holds every rank's part.
    std::vector<std::vector<double>> back(arrays, std::vector<double>(static_cast<std::size_t>(len), -1.0));
    step = 0;
    auto sd_back = dict(back);
    cairn::load(sd_back, dir + "/ckpt", MPI_COMM_WORLD);
    CHECK(all(back == data && step == 7));
}
