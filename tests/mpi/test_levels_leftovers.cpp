// CheckpointManager's node-local level after failed saves: the levels
// record stays true after a failed save that reused an older step.
#include "common.hpp"
#include "outcome.hpp"

#include "levels/drain.hpp"

#include <cairn/manager.hpp>
#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>

using namespace cairn_test;
namespace stdfs = std::filesystem;

namespace {

// A 9 x 5 field split by rows; element (i, j) of step s holds s * 1000 + i * 5 + j.
struct Field {
    cairn::Shape global{9, 5};
    cairn::Box box;
    std::vector<double> u;
    std::int64_t step = -1;
    cairn::StateDict dict;

    Field()
    {
        box = cairn::whole(global);
        std::tie(box.offsets[0], box.shape[0]) = block(global[0], world_size(), world_rank());
        u.assign(static_cast<std::size_t>(box.volume()), -1.0);
        dict.add_array<double>("u", u.data(), global, box);
        dict.add_scalar("step", &step);
    }
    void fill(std::int64_t s)
    {
        step = s;
        for (std::size_t k = 0; k < u.size(); ++k)
            u[k] = static_cast<double>(s * 1000 + box.offsets[0] * 5 + static_cast<std::int64_t>(k));
    }
    bool holds(std::int64_t s) const
    {
        bool ok = step == s;
        for (std::size_t k = 0; k < u.size(); ++k)
            ok = ok && u[k] == static_cast<double>(s * 1000 + box.offsets[0] * 5 + static_cast<std::int64_t>(k));
        return ok;
    }
};

cairn::ManagerOptions options(const std::string& base, int ranks_per_node, int keep_last = 2)
{
    cairn::ManagerOptions o;
    o.save_options.fsync = false;
    o.local.dir = base + "/node%n";
    o.local.keep_last = keep_last;
    o.local.flush_every = 0;
    o.local.ranks_per_node = ranks_per_node;
    return o;
}

std::string node_dir(const std::string& base, int node) { return base + "/node" + std::to_string(node); }

// The steps the record lists as held node-local, and as held by the root.
std::pair<std::set<std::int64_t>, std::set<std::int64_t>> recorded(const std::string& root)
{
    cairn::detail::LevelRecord rec;
    std::pair<std::set<std::int64_t>, std::set<std::int64_t>> out;
    if (!cairn::detail::read_level_record(root, rec))
        return out;
    for (const auto& s : rec.steps) {
        if (s.node_local)
            out.first.insert(s.step);
        if (s.file_system)
            out.second.insert(s.step);
    }
    return out;
}

std::set<std::int64_t> node_local_steps(cairn::CheckpointManager& m)
{
    std::set<std::int64_t> out;
    for (const auto& l : m.levels())
        if (l.node_local)
            out.insert(l.step);
    return out;
}

// Saves `s` with a write fault on the last rank: the save reuses an older
// step's files first, then fails on every rank.
Outcome failed_save(cairn::CheckpointManager& m, Field& f, std::int64_t s, bool async)
{
    f.fill(s);
    cairn::testing::ScopedFault fault({"mpiio.write", world_size() - 1, 0, 1, ENOSPC});
    return attempt([&] {
        m.save(s, f.dict);
        if (async)
            m.wait();
    });
}

} // namespace

TEST_CASE("levels leftovers: after a failed save that reused a step, the levels record no longer lists it",
          "[levels][recycle][errors]")
{
    const int w = world_size();
    for (const bool async : {false, true}) {
        INFO("async " << async);
        const std::string base = fresh_dir("levels_record_failed_" + std::to_string(w) + (async ? "_a" : "_s"));
        const std::string root = base + "/root";
        auto o = options(base, 1);
        o.async = async;
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
        Field f;
        for (std::int64_t s : {10, 20}) {
            f.fill(s);
            m.save(s, f.dict);
        }
        m.wait();
        MPI_Barrier(MPI_COMM_WORLD); // the coordinator writes the record last
        CHECK(all(recorded(root).first == std::set<std::int64_t>{10, 20}));
        // Step 30 reuses step 10's files (retention drops it), then fails.
        const Outcome failed = failed_save(m, f, 30, async);
        CHECK(same_error_everywhere(failed, cairn::Error::Kind::write));
        CHECK(all(!stdfs::exists(node_dir(base, world_rank()) + "/step_00000010")));
        // The record says what the nodes hold: step 20 only, as levels() does.
        const auto rec = recorded(root);
        CHECK(all(rec.first == std::set<std::int64_t>{20}));
        CHECK(all(rec.second.empty()));
        CHECK(all(node_local_steps(m) == rec.first));
        // The next save writes it again with the new step.
        f.fill(30);
        m.save(30, f.dict);
        m.wait();
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(all(recorded(root).first == std::set<std::int64_t>{20, 30}));
    }
}
