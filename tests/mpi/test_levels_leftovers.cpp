// CheckpointManager's node-local level after interrupted or failed saves:
// the levels record stays true after a failed save that reused an older
// step, the manager finds and removes the leftovers in every node's
// directory (fake nodes: LocalLevel::ranks_per_node, "%n" in the directory),
// the step a save reuses is chosen together by all nodes (a stale copy of
// another save counting as none), and the record lists a step some nodes
// lack as partial, with the nodes that hold it.
#include "common.hpp"
#include "outcome.hpp"

#include "levels/drain.hpp"

#include <cairn/manager.hpp>
#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
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

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The host name of world rank `r`, on every rank.
std::string host_of(int r)
{
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    MPI_Bcast(name, MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR, r, MPI_COMM_WORLD);
    return std::string(name);
}

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

// Saves steps `steps` in turn, each its own field values.
void save_steps(cairn::CheckpointManager& m, Field& f, std::initializer_list<std::int64_t> steps)
{
    for (const std::int64_t s : steps) {
        f.fill(s);
        m.save(s, f.dict);
    }
}

// restore_latest restores `step` from the node-local level, with its values.
void check_restores_node_local(cairn::CheckpointManager& m, std::int64_t step)
{
    Field back;
    CHECK(all(m.restore_latest(back.dict) == step));
    CHECK(all(back.holds(step)));
    CHECK(all(m.last_restore().level == cairn::RestoreReport::Level::node_local));
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
        save_steps(m, f, {10, 20});
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
    // A record that cannot be written is a warning: the caller gets the
    // save's own error.
    const std::string base = fresh_dir("levels_record_unwritable_" + std::to_string(w));
    const std::string root = base + "/root";
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, options(base, 1));
    Field f;
    save_steps(m, f, {10, 20});
    m.wait(); // the record of a synchronous save is written on a thread
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0)
        stdfs::create_directories(root + "/.cairn-levels.cairn-tmp"); // the record's temporary name taken
    MPI_Barrier(MPI_COMM_WORLD);
    const Outcome failed = failed_save(m, f, 30, false);
    CHECK(same_error_everywhere(failed, cairn::Error::Kind::write));
    CHECK(all(has(failed.what, "step_00000030") && !has(failed.what, ".cairn-levels")));
}

TEST_CASE("levels leftovers: the manager finds and removes leftovers in every node's directory",
          "[levels][leftovers]")
{
    const int w = world_size();
    for (const int rpn : {1, 2}) {
        if (w % rpn != 0 || (rpn > 1 && w < 4))
            continue;
        INFO("ranks per node " << rpn);
        const int nodes = w / rpn;
        const int victim = nodes - 1; // not the coordinator's node when there are several
        const std::string base = fresh_dir("levels_leftovers_" + std::to_string(w) + "_" + std::to_string(rpn));
        const std::string root = base + "/root";
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, options(base, rpn));
        Field f;
        save_steps(m, f, {10, 20});
        // What a save killed on that node leaves: its staging directory and
        // the remains of the step it reused; and a per-rank save in the root.
        const std::string staging = node_dir(base, victim) + "/step_00000030.cairn-staging";
        const std::string old = node_dir(base, victim) + "/step_00000005.cairn-old";
        const std::string in_root = root + "/step_00000007";
        if (world_rank() == 0) {
            for (const auto& d : {staging, old, in_root})
                stdfs::create_directories(d);
            std::ofstream(staging + "/__" + std::to_string(w - 1) + "_0.distcp") << "partial";
            std::ofstream(old + "/__0_0.distcp") << "old";
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const std::string host = host_of(victim * rpn);

        const auto found = m.find_leftovers();
        std::set<std::string> paths;
        bool named = true;
        for (const auto& l : found) {
            paths.insert(l.path);
            if (l.path == staging || l.path == old)
                named = named && has(l.reason, "node-local") && has(l.reason, "node " + std::to_string(victim)) &&
                        has(l.reason, "host " + host);
        }
        CHECK(all(paths == std::set<std::string>{in_root, old, staging}));
        CHECK(all(found.size() == 3 && named));
        // Every rank got the same list, in the same order.
        std::string joined;
        for (const auto& l : found)
            joined += l.path + "\n" + l.reason + "\n";
        CHECK(all(joined == [&] {
            std::vector<char> b(joined.begin(), joined.end());
            int n = static_cast<int>(b.size());
            MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
            b.resize(static_cast<std::size_t>(n));
            MPI_Bcast(b.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
            return std::string(b.begin(), b.end());
        }()));

        const auto removed = m.remove_leftovers();
        std::set<std::string> gone;
        for (const auto& l : removed)
            gone.insert(l.path);
        CHECK(all(gone == paths));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(all(!stdfs::exists(staging) && !stdfs::exists(old) && !stdfs::exists(in_root)));
        CHECK(all(m.find_leftovers().empty()));
        // The committed steps of every node stay.
        CHECK(all(stdfs::exists(node_dir(base, victim) + "/step_00000020/.cairn-level.json")));
        check_restores_node_local(m, 20);
    }
}

TEST_CASE("levels leftovers: a save reuses a step only when every node agrees, never the newest complete one",
          "[levels][recycle][errors]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_reuse_agreed_" + std::to_string(w));
    const std::string root = base + "/root";
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, options(base, 1));
    Field f;
    save_steps(m, f, {10, 20, 30});
    // A save of step 30 killed between the nodes' commits: the last node
    // lacks it (with one node, nothing is lost).
    const int last = w - 1;
    if (w > 1 && world_rank() == 0)
        stdfs::remove_all(node_dir(base, last) + "/step_00000030");
    MPI_Barrier(MPI_COMM_WORLD);
    const std::int64_t newest = w > 1 ? 20 : 30; // complete on every node
    CHECK(all(node_local_steps(m).count(newest) == 1));

    // Step 40 fails after the nodes chose what to reuse: the newest step
    // complete on every node stays loadable.
    const Outcome failed = failed_save(m, f, 40, false);
    CHECK(same_error_everywhere(failed, cairn::Error::Kind::write));
    CHECK(all(node_local_steps(m).count(newest) == 1));
    CHECK(all(stdfs::exists(node_dir(base, world_rank()) + "/step_00000020") == (w > 1)));
    check_restores_node_local(m, newest);

    // Saved again: every node holds it.
    f.fill(40);
    m.save(40, f.dict);
    CHECK(all(node_local_steps(m).count(40) == 1));
    Field back;
    CHECK(all(m.restore_latest(back.dict) == 40));
    CHECK(all(back.holds(40)));
}

namespace {

// The levels record's steps by number (every rank reads it).
std::map<std::int64_t, cairn::detail::LevelRecord::Step> record_steps(const std::string& root,
                                                                      cairn::detail::LevelRecord& rec)
{
    std::map<std::int64_t, cairn::detail::LevelRecord::Step> out;
    if (cairn::detail::read_level_record(root, rec))
        for (const auto& s : rec.steps)
            out[s.step] = s;
    return out;
}

std::vector<int> iota_nodes(int n)
{
    std::vector<int> v;
    for (int k = 0; k < n; ++k)
        v.push_back(k);
    return v;
}

} // namespace

TEST_CASE("levels record: a step some nodes lack is partial, with the nodes that hold it", "[levels][record]")
{
    const int w = world_size();
    for (const int rpn : {1, 2}) {
        if (w % rpn != 0 || (rpn > 1 && w < 4))
            continue;
        INFO("ranks per node " << rpn);
        const int nodes = w / rpn;
        const int last = nodes - 1;
        const std::string base = fresh_dir("levels_record_partial_" + std::to_string(w) + "_" + std::to_string(rpn));
        const std::string root = base + "/root";
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, options(base, rpn, 3));
        Field f;
        save_steps(m, f, {10, 20});
        // The last node loses step 10 between saves (a wiped node).
        if (world_rank() == 0)
            stdfs::remove_all(node_dir(base, last) + "/step_00000010");
        MPI_Barrier(MPI_COMM_WORLD);
        f.fill(30);
        m.save(30, f.dict);
        m.wait(); // the record of a synchronous save is written on a thread
        MPI_Barrier(MPI_COMM_WORLD); // the coordinator writes the record last
        cairn::detail::LevelRecord rec;
        auto steps = record_steps(root, rec);
        CHECK(all(rec.nodes == nodes && rec.hosts.size() == static_cast<std::size_t>(nodes)));
        CHECK(all(rec.hosts.empty() || rec.hosts[static_cast<std::size_t>(last)] == host_of(last * rpn)));
        if (nodes > 1) {
            CHECK(all(steps.count(10) == 1 && !steps[10].node_local && !steps[10].file_system &&
                      steps[10].partial == iota_nodes(nodes - 1)));
        } else {
            CHECK(all(steps.count(10) == 0)); // the only node lost it
        }
        CHECK(all(steps[20].node_local && steps[20].partial.empty() && steps[30].node_local &&
                  steps[30].partial.empty()));

        // Step 40: the nodes that hold step 10 drop it (keep_last 3), the
        // last node keeps 20 and 30 as every other does.
        f.fill(40);
        m.save(40, f.dict);
        m.wait();
        MPI_Barrier(MPI_COMM_WORLD);
        steps = record_steps(root, rec);
        CHECK(all(steps.size() == 3 && steps.count(10) == 0 && steps[20].node_local && steps[30].node_local &&
                  steps[40].node_local));
    }

    // A record written before "hosts" and "partial" existed still loads.
    const std::string base = fresh_dir("levels_record_old_" + std::to_string(w));
    if (world_rank() == 0) {
        stdfs::create_directories(base);
        std::ofstream(base + "/.cairn-levels")
            << R"({"format": "cairn-levels", "version": 1, "local_dir": "/dev/shm/x-%n", "redundancy": "none",
                  "nodes": 2, "ranks": 4, "steps": [{"step": 5, "node_local": true, "file_system": false}]})";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    cairn::detail::LevelRecord old;
    const auto steps = record_steps(base, old);
    CHECK(all(old.nodes == 2 && old.hosts.empty() && steps.size() == 1 && steps.at(5).node_local &&
              steps.at(5).partial.empty()));
}

TEST_CASE("levels leftovers: a stale copy of another save on one node makes no step complete for reuse",
          "[levels][recycle][record][errors]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_reuse_save_id_" + std::to_string(w));
    const std::string root = base + "/root";
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, options(base, 1));
    Field f;
    save_steps(m, f, {10, 20});
    // The last node's step 20 is a committed copy left by an earlier job
    // (another save_id); with one node, it is the only copy and complete.
    const int last = w - 1;
    if (w > 1 && world_rank() == 0) {
        const std::string file = node_dir(base, last) + "/step_00000020/.cairn-level.json";
        std::stringstream ss;
        ss << std::ifstream(file).rdbuf();
        const std::string planted = std::regex_replace(ss.str(), std::regex("\"save_id\": *[0-9]+"), "\"save_id\": 7");
        REQUIRE(planted != ss.str());
        std::ofstream(file, std::ios::trunc) << planted;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::int64_t newest = w > 1 ? 10 : 20; // complete on every node, as one save

    // Step 30 fails after the nodes chose what to reuse: step 10 is not
    // reused where step 20 is not one save's on every node.
    const Outcome failed = failed_save(m, f, 30, false);
    CHECK(same_error_everywhere(failed, cairn::Error::Kind::write));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(all(stdfs::exists(node_dir(base, world_rank()) + "/step_00000010") == (w > 1)));
    cairn::detail::LevelRecord rec;
    auto steps = record_steps(root, rec);
    CHECK(all(steps[newest].node_local));
    if (w > 1)
        CHECK(all(!steps[20].node_local && steps[20].partial == iota_nodes(w - 1)));
    check_restores_node_local(m, newest);

    // Saved again: step 30 on every node, the stale step 20 still partial.
    f.fill(30);
    m.save(30, f.dict);
    m.wait();
    MPI_Barrier(MPI_COMM_WORLD);
    steps = record_steps(root, rec);
    CHECK(all(steps[30].node_local && steps[30].partial.empty()));
    const std::vector<int> holders = w > 1 ? iota_nodes(w - 1) : std::vector<int>{};
    CHECK(all(steps[20].node_local == (w == 1) && steps[20].partial == holders));
    Field back;
    CHECK(all(m.restore_latest(back.dict) == 30));
    CHECK(all(back.holds(30)));
}
