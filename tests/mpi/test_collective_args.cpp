// Collective misuse: ranks that pass different arguments to one collective
// call (checkpoint ids, layouts, overwrite) and replicated arrays whose
// copies differ between ranks. Every rank must get the same error::Mismatch
// naming the values, promptly (a hang fails the CTest TIMEOUT), and nothing
// may be written. Tagged [bad_input]; CTest mpi.collective_args.np1..4 (at 1
// rank there is nothing to disagree with, and only the saves that must work
// run).
#include "outcome.hpp"

#include <cairn/cairn.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

using namespace cairn_test;
using Kind = cairn::Error::Kind;
namespace stdfs = std::filesystem;

namespace {

constexpr std::int64_t k_rows = 32; // elements of "u" per rank

// One array split over the ranks, a replicated table and a scalar.
struct State {
    std::vector<double> u;
    std::vector<float> table; // replicated: the same on every rank
    std::int64_t step = 0;
    cairn::StateDict dict;

    explicit State(bool filled)
    {
        const int w = world_size(), r = world_rank();
        u.assign(static_cast<std::size_t>(k_rows), 0.0);
        table.assign(100, 0.0f);
        if (filled) {
            for (std::int64_t i = 0; i < k_rows; ++i)
                u[static_cast<std::size_t>(i)] = static_cast<double>(r * k_rows + i);
            for (std::size_t i = 0; i < table.size(); ++i)
                table[i] = static_cast<float>(i) * 0.5f;
            step = 9;
        }
        dict.add_array<double>("u", u.data(), {w * k_rows}, cairn::Box{{r * k_rows}, {k_rows}});
        cairn::StateDict grid;
        grid.add_replicated<float>("x", table.data(), {static_cast<std::int64_t>(table.size())});
        dict.add_dict("grid", std::move(grid));
        dict.add_scalar("step", &step);
    }

    bool correct() const
    {
        State ref(true);
        return u == ref.u && table == ref.table && step == ref.step;
    }
};

bool last() { return world_rank() == world_size() - 1; }
std::string last_rank() { return std::to_string(world_size() - 1); }

cairn::SaveOptions quick(cairn::Layout layout = cairn::Layout::automatic)
{
    cairn::SaveOptions o;
    o.fsync = false;
    o.layout = layout;
    return o;
}

// Whether anything exists at `path` (checked on rank 0, told to all).
bool exists_anywhere(const std::string& path)
{
    int e = world_rank() == 0 && (stdfs::exists(path) || stdfs::exists(path + ".cairn-tmp") ||
                                  stdfs::exists(path + ".cairn-staging"))
                ? 1
                : 0;
    MPI_Bcast(&e, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return e != 0;
}

// Whether a committed checkpoint of either layout is at `path` (rank 0 looks).
bool committed(const std::string& path)
{
    int e = world_rank() == 0 && (stdfs::is_regular_file(path) || stdfs::exists(path + "/metadata.h5")) ? 1 : 0;
    MPI_Bcast(&e, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return e != 0;
}

// The expected error, on every rank, within seconds.
void check_disagreement(const Outcome& o, const std::string& call, const std::string& what, const std::string& first,
                        const std::string& other)
{
    INFO(o.what);
    CHECK(same_error_everywhere(o, Kind::mismatch));
    CHECK(all(contains(o.what, call + ": ranks disagree on " + what + ": rank 0 '" + first + "', rank " + last_rank() +
                                   " '" + other + "'")));
    CHECK(max_seconds(o) < 30);
}

} // namespace

TEST_CASE("ranks that pass different save arguments all fail, naming them", "[bad_input]")
{
    if (world_size() < 2)
        return; // nothing to disagree with
    const auto dir = fresh_dir("args_save_" + std::to_string(world_size()));
    State s(true);
    SECTION("checkpoint ids, per-rank layout")
    {
        const std::string a = dir + "/ckpt_a", b = dir + "/ckpt_b";
        const auto o = attempt([&] { cairn::save(s.dict, last() ? b : a, MPI_COMM_WORLD, quick()); });
        check_disagreement(o, "save", "the checkpoint id", a, b);
        CHECK(!exists_anywhere(a));
        CHECK(!exists_anywhere(b));
    }
    SECTION("checkpoint ids, container layout")
    {
        const std::string a = dir + "/ckpt_a.h5", b = dir + "/ckpt_b.h5";
        const auto o = attempt([&] { cairn::save(s.dict, last() ? b : a, MPI_COMM_WORLD, quick()); });
        check_disagreement(o, "save", "the checkpoint id", a, b);
        CHECK(!exists_anywhere(a));
        CHECK(!exists_anywhere(b));
    }
    SECTION("layouts")
    {
        const std::string id = dir + "/ckpt";
        const auto o = attempt([&] {
            cairn::save(s.dict, id, MPI_COMM_WORLD, quick(last() ? cairn::Layout::container : cairn::Layout::per_rank));
        });
        check_disagreement(o, "save", "the layout", "per-rank", "container");
        CHECK(!exists_anywhere(id));
    }
    SECTION("overwrite, replacing a checkpoint")
    {
        const std::string id = dir + "/ckpt";
        cairn::save(s.dict, id, MPI_COMM_WORLD, quick());
        State changed(true);
        changed.step = 10;
        auto opt = quick();
        opt.overwrite = !last();
        const auto o = attempt([&] { cairn::save(changed.dict, id, MPI_COMM_WORLD, opt); });
        check_disagreement(o, "save", "overwrite", "true", "false");
        State back(false);
        cairn::load(back.dict, id, MPI_COMM_WORLD);
        CHECK(all(back.correct())); // the old checkpoint, untouched
    }
    SECTION("checksum blocks")
    {
        const std::string id = dir + "/ckpt";
        auto opt = quick();
        opt.checksum_block = last() ? 4096 : 1 << 20;
        const auto o = attempt([&] { cairn::save(s.dict, id, MPI_COMM_WORLD, opt); });
        check_disagreement(o, "save", "checksum_block", "1048576", "4096");
        CHECK(!exists_anywhere(id));
    }
    SECTION("checkpoint ids, async_save")
    {
        const std::string a = dir + "/ckpt_a", b = dir + "/ckpt_b";
        const auto o = attempt([&] { cairn::async_save(s.dict, last() ? b : a, MPI_COMM_WORLD, quick()).committed().get(); });
        check_disagreement(o, "save", "the checkpoint id", a, b);
        CHECK(!exists_anywhere(a));
        CHECK(!exists_anywhere(b));
    }
}

TEST_CASE("ranks that pass different load or verify arguments all fail, naming them", "[bad_input]")
{
    if (world_size() < 2)
        return;
    const auto dir = fresh_dir("args_load_" + std::to_string(world_size()));
    for (const char* ext : {"", ".h5"}) {
        DYNAMIC_SECTION("layout " << (*ext ? "container" : "per-rank"))
        {
            const std::string a = dir + "/ckpt_a" + ext, b = dir + "/ckpt_b" + ext;
            {
                State s(true);
                cairn::save(s.dict, a, MPI_COMM_WORLD, quick());
                cairn::save(s.dict, b, MPI_COMM_WORLD, quick());
            }
            State s(false);
            auto o = attempt([&] { cairn::load(s.dict, last() ? b : a, MPI_COMM_WORLD); });
            check_disagreement(o, "load", "the checkpoint id", a, b);
            o = attempt([&] { cairn::verify(last() ? b : a, MPI_COMM_WORLD); });
            check_disagreement(o, "verify", "the checkpoint id", a, b);
            cairn::LoadOptions lo;
            lo.layout = last() ? (*ext ? cairn::Layout::container : cairn::Layout::per_rank) : cairn::Layout::automatic;
            o = attempt([&] { cairn::load(s.dict, a, MPI_COMM_WORLD, lo); });
            check_disagreement(o, "load", "the layout", "automatic", *ext ? "container" : "per-rank");
            lo = {};
            lo.verify_checksums = !last();
            o = attempt([&] { cairn::load(s.dict, a, MPI_COMM_WORLD, lo); });
            check_disagreement(o, "load", "verify_checksums", "true", "false");
            lo = {};
            lo.cooperative = !last();
            o = attempt([&] { cairn::load(s.dict, a, MPI_COMM_WORLD, lo); });
            check_disagreement(o, "load", "cooperative", "true", "false");
            // The same arguments everywhere still load.
            cairn::load(s.dict, a, MPI_COMM_WORLD);
            CHECK(all(s.correct()));
        }
    }
}

TEST_CASE("replicated arrays whose copies differ fail the save, naming the array and ranks", "[bad_input]")
{
    const auto dir = fresh_dir("replicas_" + std::to_string(world_size()));
    for (const char* ext : {"", ".h5"}) {
        DYNAMIC_SECTION("layout " << (*ext ? "container" : "per-rank"))
        {
            const std::string id = dir + "/ckpt" + ext;
            SECTION("identical copies save and load")
            {
                State s(true);
                cairn::save(s.dict, id, MPI_COMM_WORLD, quick());
                State back(false);
                cairn::load(back.dict, id, MPI_COMM_WORLD);
                CHECK(all(back.correct()));
            }
            if (world_size() < 2)
                continue;
            SECTION("one element differs on the last rank")
            {
                State s(true);
                if (last())
                    s.table[57] += 1.0f;
                const auto o = attempt([&] { cairn::save(s.dict, id, MPI_COMM_WORLD, quick()); });
                INFO(o.what);
                CHECK(same_error_everywhere(o, Kind::mismatch));
                CHECK(all(contains(o.what, "replicated array 'grid.x' differs between ranks 0 and " + last_rank())));
                CHECK(max_seconds(o) < 30);
                CHECK(!committed(id));
            }
            SECTION("a strided copy on rank 1: alike saves, one element off fails")
            {
                // Rank 1 holds its copy with a gap between elements (the gaps
                // differ from everything else: they are not part of the copy).
                State s(true);
                const auto n = static_cast<std::int64_t>(s.table.size());
                std::vector<float> strided(2 * s.table.size(), -1.0f);
                for (std::size_t i = 0; i < s.table.size(); ++i)
                    strided[2 * i] = s.table[i];
                const auto save_x = [&] {
                    cairn::StateDict d;
                    if (world_rank() == 1)
                        d.add_array<float>("x", strided.data(), {n}, cairn::Box{{0}, {n}}, {2});
                    else
                        d.add_replicated<float>("x", s.table.data(), {n});
                    auto opt = quick();
                    opt.overwrite = true;
                    return attempt([&] { cairn::save(d, id, MPI_COMM_WORLD, opt); });
                };
                auto o = save_x();
                INFO(o.what);
                CHECK(all(!o.threw && !o.foreign));
                strided[6] += 1.0f;
                o = save_x();
                INFO(o.what);
                CHECK(same_error_everywhere(o, Kind::mismatch));
                CHECK(all(contains(o.what, "replicated array 'x' differs between ranks 0 and 1")));
            }
            SECTION("unchecked with check_replicas = false: the save succeeds")
            {
                State s(true);
                if (last())
                    s.table[57] += 1.0f;
                auto opt = quick();
                opt.check_replicas = false;
                cairn::save(s.dict, id, MPI_COMM_WORLD, opt);
                CHECK(committed(id));
            }
        }
    }
}
