// CheckpointManager's node-local level: steps saved into per-node
// directories (fake nodes: LocalLevel::ranks_per_node, "%n" in the
// directory), restored from them — also after a node's directory is wiped,
// from partner copies or XOR parity, and on fewer ranks —, drained into the
// root, and the fallback to the root when a step cannot be recovered.
#include "../damage.hpp" // flip_bits
#include "fixtures.hpp"
#include "outcome.hpp"
#include "storage/per_rank/mapped_files.hpp" // detail::unmap_all_files

#include <cairn/manager.hpp>
#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

using namespace cairn_test;
namespace stdfs = std::filesystem;

namespace {

// A 13 x 7 field split by rows or by columns of `comm`; element (i, j) of the
// checkpoint of step s holds s * 1000 + i * 7 + j.
struct Field {
    cairn::Shape global{13, 7};
    cairn::Box box;
    std::vector<double> u;
    std::int64_t step = -1;
    cairn::StateDict dict;

    Field(MPI_Comm comm, bool by_rows)
    {
        int p = 1, r = 0;
        MPI_Comm_size(comm, &p);
        MPI_Comm_rank(comm, &r);
        box = cairn::whole(global);
        const std::size_t d = by_rows ? 0 : 1;
        std::tie(box.offsets[d], box.shape[d]) = block(global[d], p, r);
        u.assign(static_cast<std::size_t>(box.volume()), -1.0);
        dict.add_array<double>("u", u.data(), global, box);
        dict.add_scalar("step", &step);
    }
    template <class F>
    void each(F&& f)
    {
        std::size_t k = 0;
        for (std::int64_t i = 0; i < box.shape[0]; ++i)
            for (std::int64_t j = 0; j < box.shape[1]; ++j)
                f(u[k++], (box.offsets[0] + i) * 7 + box.offsets[1] + j);
    }
    void fill(std::int64_t s)
    {
        step = s;
        each([&](double& v, std::int64_t lin) { v = static_cast<double>(s * 1000 + lin); });
    }
    bool holds(std::int64_t s)
    {
        bool ok = step == s;
        each([&](double& v, std::int64_t lin) { ok = ok && v == static_cast<double>(s * 1000 + lin); });
        return ok;
    }
};

cairn::ManagerOptions level_options(const std::string& base, cairn::Redundancy red, int ranks_per_node,
                                    int flush_every = 0)
{
    cairn::ManagerOptions o;
    o.keep_last = 2;
    o.save_options.fsync = false;
    o.local.dir = base + "/node%n";
    o.local.redundancy = red;
    o.local.keep_last = 2;
    o.local.flush_every = flush_every;
    o.local.ranks_per_node = ranks_per_node;
    return o;
}

std::string node_dir(const std::string& base, int node) { return base + "/node" + std::to_string(node); }

// Rank 0 removes node `node`'s directory (its storage lost); everyone waits.
void wipe(const std::string& base, int node)
{
    if (world_rank() == 0)
        stdfs::remove_all(node_dir(base, node));
    MPI_Barrier(MPI_COMM_WORLD);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string host_name()
{
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, static_cast<std::size_t>(len));
}

// The host of rank 0 (fake node 0 with ranks_per_node = 1), on every rank:
// across hosts the ranks' own host names differ.
std::string host_of_rank0()
{
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
    const std::string mine = host_name();
    mine.copy(name, MPI_MAX_PROCESSOR_NAME);
    MPI_Bcast(name, MPI_MAX_PROCESSOR_NAME + 1, MPI_CHAR, 0, MPI_COMM_WORLD);
    return std::string(name);
}

// A fresh directory for one test in /dev/shm where it is a RAM disk (`ram`:
// the writer maps the reused files there), else in the test directory
// (written as on any disk). Collective; remove_dir() removes it.
std::string ram_disk_dir(const std::string& test, bool& ram)
{
    struct statfs sf {};
    ram = ::statfs("/dev/shm", &sf) == 0 && static_cast<unsigned long>(sf.f_type) == TMPFS_MAGIC;
    long id = static_cast<long>(::getpid());
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    const std::string name = test + "_" + std::to_string(world_size()) + "_" + std::to_string(id);
    return ram ? "/dev/shm/cairn-test-" + name : fresh_dir(name);
}

// Rank 0 removes `dir`; everyone waits.
void remove_dir(const std::string& dir)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0)
        stdfs::remove_all(dir);
    MPI_Barrier(MPI_COMM_WORLD);
}

} // namespace

TEST_CASE("levels: steps saved node-local restore bitwise, resharded, with no byte moved when nothing changed",
          "[levels]")
{
    const int w = world_size();
    for (int rpn : {1, 2}) {
        if (w % rpn != 0)
            continue;
        INFO("ranks per node " << rpn);
        const std::string base = fresh_dir("levels_round_trip_" + std::to_string(w) + "_" + std::to_string(rpn));
        const std::string root = base + "/root";
        const int nodes = w / rpn;
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, level_options(base, cairn::Redundancy::none(), rpn));
        Field f(MPI_COMM_WORLD, true);
        for (std::int64_t s : {10, 20, 30}) {
            f.fill(s);
            m.save(s, f.dict);
        }
        // Every node holds the two newest steps, each with its metadata and
        // manifest; the root holds nothing.
        bool ok = true;
        if (world_rank() == 0)
            for (int n = 0; n < nodes; ++n) {
                const std::string d = node_dir(base, n);
                ok = ok && !stdfs::exists(d + "/step_00000010") && stdfs::exists(d + "/step_00000020") &&
                     stdfs::exists(d + "/step_00000030/metadata.h5") &&
                     stdfs::exists(d + "/step_00000030/.cairn-level.json") &&
                     stdfs::exists(d + "/step_00000030/__" + std::to_string(n * rpn) + "_0.distcp");
            }
        CHECK(all(ok));
        // The dropped step was renamed away at once and is removed in the
        // background; wait() waits for that.
        m.wait();
        MPI_Barrier(MPI_COMM_WORLD);
        bool removed = true;
        if (world_rank() == 0)
            for (int n = 0; n < nodes; ++n)
                removed = removed && !stdfs::exists(node_dir(base, n) + "/step_00000010.cairn-old");
        CHECK(all(removed));
        CHECK(all(!stdfs::exists(root + "/step_00000030")));
        const auto lv = m.levels();
        CHECK(all(lv.size() == 2 && lv[0].step == 20 && lv[1].step == 30 && lv[1].node_local &&
                  !lv[1].needs_rebuild && !lv[1].file_system));

        Field same(MPI_COMM_WORLD, true);
        CHECK(all(m.restore_latest(same.dict) == 30));
        CHECK(all(same.holds(30)));
        const auto& rep = m.last_restore();
        CHECK(all(rep.level == cairn::RestoreReport::Level::node_local && rep.step == 30 && rep.rebuilt.empty() &&
                  rep.bytes_moved == 0));

        Field cols(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(cols.dict) == 30));
        CHECK(all(cols.holds(30)));
        // By columns, every rank needs every rank's file: other nodes' files move.
        CHECK(all((nodes > 1) == (m.last_restore().bytes_moved > 0)));
        // The restored step (saved by this job's layout) drains on demand.
        CHECK(all(m.flush() == 30));
        m.wait();
        CHECK(all(m.steps() == std::vector<std::int64_t>{30}));
    }
}

TEST_CASE("levels: what killed node-local saves and drains leave is named as such, and removed, never put back",
          "[levels]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_leftovers_" + std::to_string(w));
    const std::string root = base + "/root";
    const std::string node0 = node_dir(base, 0);
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, level_options(base, cairn::Redundancy::none(), 1, 1));
    Field f(MPI_COMM_WORLD, true);
    for (std::int64_t s : {10, 20}) {
        f.fill(s);
        m.save(s, f.dict); // node-local, and drained
    }
    m.wait();
    if (world_rank() == 0) {
        const auto write = [](const std::string& path, const char* text) { std::ofstream(path) << text; };
        // On node 0: a step retention dropped, its removal cut short (its
        // final name gone), and a save stopped before its commit.
        stdfs::copy(node0 + "/step_00000020", node0 + "/step_00000005.cairn-old", stdfs::copy_options::recursive);
        stdfs::create_directories(node0 + "/step_00000030.cairn-staging");
        write(node0 + "/step_00000030.cairn-staging/__0_0.distcp", "data");
        // In the root: a drain over the committed step 20 stopped while it
        // copied, and partial copies in a directory of another name.
        stdfs::create_directories(root + "/step_00000020.cairn-staging");
        write(root + "/step_00000020.cairn-staging/__0_0.distcp.cairn-part", "da");
        stdfs::create_directories(root + "/elsewhere");
        write(root + "/elsewhere/__0_0.distcp.cairn-part", "da");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const auto reasons = [](const std::vector<cairn::Leftover>& v) {
        std::map<std::string, std::string> out;
        for (const auto& l : v)
            out[stdfs::path(l.path).filename().string()] = l.reason;
        return out;
    };
    auto local = reasons(cairn::find_leftovers(node0));
    CHECK(all(local.size() == 2 && has(local["step_00000005.cairn-old"], "node-local step") &&
              has(local["step_00000005.cairn-old"], "retention") &&
              has(local["step_00000030.cairn-staging"], "node-local step") &&
              has(local["step_00000030.cairn-staging"], "never committed")));
    // The manager's list: the root's and node 0's, that one named as such.
    const std::string node0_host = host_of_rank0();
    auto listed = reasons(m.find_leftovers());
    CHECK(all(listed.size() == 4 && has(listed["step_00000020.cairn-staging"], "drain") &&
              has(listed["elsewhere"], "never committed") &&
              listed["step_00000030.cairn-staging"] == local["step_00000030.cairn-staging"] +
                                                           " (node-local directory of node 0, host " + node0_host +
                                                           ")"));
    MPI_Barrier(MPI_COMM_WORLD);

    std::size_t removed = 0;
    if (world_rank() == 0)
        removed = cairn::remove_leftovers(node0).size();
    CHECK(all(removed == (world_rank() == 0 ? 2u : 0u)));
    CHECK(all(m.remove_leftovers().size() == 2));
    CHECK(all(!stdfs::exists(node0 + "/step_00000005") && !stdfs::exists(node0 + "/step_00000005.cairn-old") &&
              !stdfs::exists(node0 + "/step_00000030.cairn-staging")));
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20) && m.last_restore().level == cairn::RestoreReport::Level::node_local));
    CHECK(all(m.steps() == std::vector<std::int64_t>{10, 20})); // both drained, both intact
}

TEST_CASE("levels: flush_every and flush() drain a step into the root, which a plain load reads", "[levels]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_drain_" + std::to_string(w));
    const std::string root = base + "/root";
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, level_options(base, cairn::Redundancy::none(), 1, 2));
    Field f(MPI_COMM_WORLD, true);
    f.fill(10);
    m.save(10, f.dict);
    f.fill(20);
    m.save(20, f.dict); // the second save: drained
    m.wait();
    CHECK(all(m.steps() == std::vector<std::int64_t>{20}));
    {
        const auto lv = m.levels();
        CHECK(all(lv.size() == 2 && lv[0].step == 10 && lv[0].node_local && !lv[0].file_system &&
                  lv[1].step == 20 && lv[1].node_local && lv[1].file_system));
    }
    {
        Field back(MPI_COMM_WORLD, false);
        cairn::load(back.dict, root + "/step_00000020", MPI_COMM_WORLD);
        CHECK(all(back.holds(20)));
    }
    CHECK(all(!m.flush().has_value())); // the root has the newest step already
    f.fill(30);
    m.save(30, f.dict);
    CHECK(all(m.flush() == 30));
    const auto lv = m.levels(); // settles the drain; node-local retention keeps 2 steps
    CHECK(all(lv.size() == 2 && lv[0].step == 20 && lv[0].node_local && lv[0].file_system && lv[1].step == 30 &&
              lv[1].node_local && lv[1].file_system));
    Field back(MPI_COMM_WORLD, false);
    cairn::load(back.dict, root + "/step_00000030", MPI_COMM_WORLD);
    CHECK(all(back.holds(30)));
    // The record of the levels, for `cairn steps ROOT`.
    std::ifstream in(root + "/.cairn-levels");
    const std::string record((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(all(has(record, "\"redundancy\": \"none\"") || has(record, "\"redundancy\":\"none\"")));
}

TEST_CASE("levels: a root of grouped data files gets flush steps saved into it, read by a restore", "[levels]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_grouped_root_" + std::to_string(w));
    const std::string root = base + "/root";
    cairn::ManagerOptions o = level_options(base, cairn::Redundancy::none(), 1, 2);
    o.save_options.per_rank.files = cairn::DataFiles::in_all(1); // one data file for all ranks
    {
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
        Field f(MPI_COMM_WORLD, true);
        f.fill(10);
        m.save(10, f.dict);
        f.fill(20);
        m.save(20, f.dict); // a flush step: also saved into the root, grouped
        CHECK(all(m.steps() == std::vector<std::int64_t>{20}));
        int data_files = 0;
        for (const auto& e : stdfs::directory_iterator(root + "/step_00000020"))
            data_files += e.path().extension() == ".distcp";
        CHECK(all(data_files == 1));
        const auto lv = m.levels();
        CHECK(all(lv.size() == 2 && lv[1].step == 20 && lv[1].node_local && lv[1].file_system));
        // flush() cannot drain node-local per-rank files into it.
        std::string what;
        try {
            m.flush();
        } catch (const cairn::error::WrongAPIUsage& e) {
            what = e.what();
        }
        INFO(what);
        CHECK(all(has(what, "grouped data files (1)")));
    }
    for (int node = 0; node < w; ++node)
        wipe(base, node); // every node's storage lost: the root's step
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20)));
    CHECK(all(m.last_restore().level == cairn::RestoreReport::Level::file_system));
}

TEST_CASE("levels: a wiped node's files are rebuilt from partner copies and from XOR parity", "[levels]")
{
    const int w = world_size();
    if (w < 2)
        return; // one node: nothing else to hold its data
    for (const auto& red : {cairn::Redundancy::partner(), cairn::Redundancy::xor_parity(w)})
        for (int rpn : {1, 2}) {
            if (w % rpn != 0 || w / rpn < 2)
                continue;
            INFO("redundancy " << red.str() << ", ranks per node " << rpn);
            const std::string base =
                fresh_dir("levels_rebuild_" + std::to_string(w) + "_" + red.str().substr(0, 3) + std::to_string(rpn));
            cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD, level_options(base, red, rpn));
            Field f(MPI_COMM_WORLD, true);
            f.fill(10);
            m.save(10, f.dict);
            wipe(base, 1);
            const auto lv = m.levels();
            CHECK(all(lv.size() == 1 && lv[0].node_local && lv[0].needs_rebuild));
            Field back(MPI_COMM_WORLD, true);
            CHECK(all(m.restore_latest(back.dict) == 10));
            CHECK(all(back.holds(10)));
            const auto& rep = m.last_restore();
            CHECK(all(rep.level == cairn::RestoreReport::Level::node_local && !rep.rebuilt.empty() &&
                      rep.bytes_moved > 0));
        }
}

TEST_CASE("levels: two lost nodes of one XOR group: the steps are skipped, naming them, for the root's",
          "[levels]")
{
    const int w = world_size();
    if (w < 3)
        return; // two lost nodes and one holding the step
    const std::string base = fresh_dir("levels_xor_lost_" + std::to_string(w));
    cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD,
                               level_options(base, cairn::Redundancy::xor_parity(w), 1));
    Field f(MPI_COMM_WORLD, true);
    f.fill(10);
    m.save(10, f.dict);
    CHECK(all(m.flush() == 10));
    f.fill(20);
    m.save(20, f.dict); // node-local only
    wipe(base, 0);
    wipe(base, 1);
    std::vector<cairn::SkippedCheckpoint> skipped;
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict, {}, &skipped) == 10));
    CHECK(all(back.holds(10)));
    CHECK(all(m.last_restore().level == cairn::RestoreReport::Level::file_system));
    // Both node-local steps lost two nodes of the group: each is skipped,
    // then the root's step 10 loads.
    REQUIRE(all(skipped.size() == 2));
    INFO(skipped[0].reason);
    CHECK(all(skipped[0].step == 20 && has(skipped[0].reason, "step 20") && has(skipped[0].reason, "node 0") &&
              has(skipped[0].reason, "node 1") && has(skipped[0].reason, "(host " + host_of_rank0() + ")") &&
              skipped[1].step == 10));
}

TEST_CASE("levels: a step saved on 4 nodes restores on 3 ranks with one node lost, resharded", "[levels][reshard]")
{
    const int w = world_size();
    if (w < 4)
        return; // needs 4 ranks
    for (const auto& red : {cairn::Redundancy::partner(), cairn::Redundancy::xor_parity(4)}) {
        INFO("redundancy " << red.str());
        const std::string base = fresh_dir("levels_4to3_" + std::to_string(w) + "_" + red.str().substr(0, 3));
        REQUIRE(run_on(4, [&](const SubComm& c) {
            cairn::CheckpointManager m(base + "/root", c.get(), level_options(base, red, 1));
            Field f(c.get(), true);
            f.fill(10);
            m.save(10, f.dict);
            return true;
        }));
        CHECK(run_on(3, [&](const SubComm& c) {
            // Node 3's directory is not among the 3 nodes' now: its files are lost.
            cairn::CheckpointManager m(base + "/root", c.get(), level_options(base, red, 1));
            Field back(c.get(), false);
            const auto step = m.restore_latest(back.dict);
            const auto& rep = m.last_restore();
            return step == 10 && back.holds(10) && rep.level == cairn::RestoreReport::Level::node_local &&
                   !rep.rebuilt.empty();
        }));
    }
}

TEST_CASE("levels: a node-local save that fails midway leaves the previous step restorable", "[levels][errors]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_failed_save_" + std::to_string(w));
    cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD,
                               level_options(base, w > 1 ? cairn::Redundancy::partner() : cairn::Redundancy::none(),
                                             1));
    Field f(MPI_COMM_WORLD, true);
    f.fill(10);
    m.save(10, f.dict);
    f.fill(20);
    cairn::testing::Fault fault;
    fault.point = "mpiio.write";
    fault.rank = w - 1;
    cairn::testing::arm_fault(fault);
    std::string msg;
    try {
        m.save(20, f.dict);
    } catch (const cairn::error::WriteError& e) {
        msg = e.what();
    }
    cairn::testing::disarm_faults();
    CHECK(all(!msg.empty()));
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 10));
    CHECK(all(back.holds(10)));
    CHECK(all(m.last_restore().level == cairn::RestoreReport::Level::node_local));
    // The next save of that step succeeds over what the failed one left.
    f.fill(20);
    m.save(20, f.dict);
    CHECK(all(m.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20)));
}

TEST_CASE("levels: a node's copy from an earlier save of the same step is stale and not used", "[levels]")
{
    const int w = world_size();
    if (w < 3)
        return; // a node that the second save does not reach
    const std::string base = fresh_dir("levels_stale_" + std::to_string(w));
    const auto opts = level_options(base, cairn::Redundancy::partner(), 1);
    // Step 10 on 3 nodes, restored by columns (node 2 gets copies of nodes
    // 0 and 1's files), then step 10 again (other data) on nodes 0 and 1
    // only: node 2 keeps the first save's copy, with stale files of the names
    // the second save wrote.
    REQUIRE(run_on(3, [&](const SubComm& c) {
        cairn::CheckpointManager m(base + "/root", c.get(), opts);
        Field f(c.get(), true);
        f.fill(10);
        m.save(10, f.dict);
        Field back(c.get(), false);
        return m.restore_latest(back.dict) == 10 && back.holds(10) && m.last_restore().bytes_moved > 0;
    }));
    REQUIRE(run_on(2, [&](const SubComm& c) {
        cairn::CheckpointManager m(base + "/root", c.get(), opts);
        Field f(c.get(), true);
        f.fill(20);
        m.save(10, f.dict);
        return true;
    }));
    CHECK(run_on(3, [&](const SubComm& c) {
        cairn::CheckpointManager m(base + "/root", c.get(), opts);
        Field back(c.get(), false);
        const auto step = m.restore_latest(back.dict);
        return step == 10 && back.holds(20) && m.last_restore().level == cairn::RestoreReport::Level::node_local;
    }));
}

TEST_CASE("levels: async saves staged, then written and drained in the background, restore bitwise after a wipe",
          "[levels][async]")
{
    const int w = world_size();
    if (w < 2)
        return; // one node: nothing else to hold its data
    for (const auto& red : {cairn::Redundancy::partner(), cairn::Redundancy::xor_parity(w)}) {
        INFO("redundancy " << red.str());
        const std::string base = fresh_dir("levels_async_" + std::to_string(w) + "_" + red.str().substr(0, 3));
        const std::string root = base + "/root";
        auto o = level_options(base, red, 1, 2);
        o.async = true;
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
        Field f(MPI_COMM_WORLD, true);
        for (std::int64_t s : {10, 20, 30}) {
            f.fill(s);
            CHECK(all(!m.save(s, f.dict).has_value())); // returns once staged
            // The caller's buffers are free once save() returns: what the
            // background writes is the staged copy.
            f.fill(-1);
        }
        CHECK(all(m.wait().has_value()));
        // Every node holds the two newest steps; step 20 (the second save)
        // was drained into the root in the background.
        const auto lv = m.levels();
        CHECK(all(lv.size() == 2 && lv[0].step == 20 && lv[0].node_local && lv[0].file_system && lv[1].step == 30 &&
                  lv[1].node_local && !lv[1].file_system));
        wipe(base, 1);
        Field back(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(back.dict) == 30));
        CHECK(all(back.holds(30)));
        const auto& rep = m.last_restore();
        CHECK(all(rep.level == cairn::RestoreReport::Level::node_local && !rep.rebuilt.empty()));
        Field drained(MPI_COMM_WORLD, true);
        cairn::load(drained.dict, root + "/step_00000020", MPI_COMM_WORLD);
        CHECK(all(drained.holds(20)));
    }
}

TEST_CASE("levels: an async node-local save failing on one rank in the background fails it on every rank",
          "[levels][async][errors]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_async_failed_" + std::to_string(w));
    auto o = level_options(base, w > 1 ? cairn::Redundancy::partner() : cairn::Redundancy::none(), 1);
    o.async = true;
    cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD, o);
    Field f(MPI_COMM_WORLD, true);
    f.fill(10);
    m.save(10, f.dict);
    m.wait(); // committed before the fault is armed
    f.fill(20);
    std::optional<cairn::SaveResult> returned;
    {
        // The write of the data files runs in the background: save() returns.
        cairn::testing::ScopedFault fault({"mpiio.write", w - 1, 0, 1, ENOSPC});
        returned = m.save(20, f.dict);
        const Outcome failed = attempt([&] { m.wait(); });
        CHECK(same_error_everywhere(failed, cairn::Error::Kind::write));
        CHECK(all(has(failed.what, "step_00000020")));
    }
    CHECK(all(!returned.has_value()));
    // Settled: the next call finds nothing in flight.
    CHECK(all(!m.wait().has_value()));
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 10));
    CHECK(all(back.holds(10)));
    CHECK(all(m.last_restore().level == cairn::RestoreReport::Level::node_local));
    // The next save of that step succeeds over what the failed one left,
    // also settled by the destructor of the manager.
    {
        cairn::CheckpointManager again(base + "/root", MPI_COMM_WORLD, o);
        f.fill(20);
        again.save(20, f.dict);
    }
    cairn::CheckpointManager later(base + "/root", MPI_COMM_WORLD, o);
    CHECK(all(later.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20)));
}

TEST_CASE("levels: flush() drains the newest node-local step the root lacks, also one an earlier job saved",
          "[levels]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_flush_newest_" + std::to_string(w));
    const std::string root = base + "/root";
    const auto opts = level_options(base, cairn::Redundancy::none(), 1);
    {
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, opts);
        Field f(MPI_COMM_WORLD, true);
        for (std::int64_t s : {10, 20}) {
            f.fill(s);
            m.save(s, f.dict);
        }
    }
    // A new job of the same layout, before it saves or restores anything.
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, opts);
    CHECK(all(m.flush() == 20));
    m.wait();
    CHECK(all(m.steps() == std::vector<std::int64_t>{20}));
    CHECK(all(!m.flush().has_value())); // the root has it now
    Field back(MPI_COMM_WORLD, false);
    cairn::load(back.dict, root + "/step_00000020", MPI_COMM_WORLD);
    CHECK(all(back.holds(20)));
}

namespace {

// Per relative path under `dir`, the file's size (the metadata and the
// manifest left out: they hold the time of the save).
std::map<std::string, std::uintmax_t> sizes_under(const std::string& dir)
{
    std::map<std::string, std::uintmax_t> out;
    for (const auto& e : stdfs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) {
            const std::string rel = stdfs::relative(e.path(), dir).generic_string();
            if (rel != "metadata.h5" && rel != ".cairn-level.json")
                out[rel] = e.file_size();
        }
    return out;
}

std::uintmax_t inode_of(const std::string& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uintmax_t>(st.st_ino) : 0;
}

// Saves `s` with 512 more doubles per rank beside the field (a longer step).
void save_long(cairn::CheckpointManager& m, Field& f, std::int64_t s)
{
    const int w = world_size();
    std::vector<double> pad(512, static_cast<double>(s));
    cairn::Box b = cairn::whole(cairn::Shape{512 * w});
    b.offsets[0] = 512 * world_rank();
    b.shape[0] = 512;
    cairn::StateDict d = f.dict;
    d.add_array<double>("pad", pad.data(), cairn::Shape{512 * w}, b);
    f.fill(s);
    m.save(s, d);
}

} // namespace

TEST_CASE("levels: a save that reuses a dropped step's files holds exactly the new step", "[levels][recycle]")
{
    const int w = world_size();
    std::vector<cairn::Redundancy> reds{cairn::Redundancy::none()};
    if (w > 1) {
        reds.push_back(cairn::Redundancy::partner());
        reds.push_back(cairn::Redundancy::xor_parity(w));
    }
    for (const auto& red : reds) {
        INFO("redundancy " << red.str());
        const std::string tag = std::to_string(w) + "_" + red.str().substr(0, 3);
        const std::string base = fresh_dir("levels_recycle_" + tag), fresh = fresh_dir("levels_fresh_" + tag);
        const auto opts = level_options(base, red, 1); // keep_last 2: step 30 reuses step 10's files
        cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD, opts);
        Field f(MPI_COMM_WORLD, true);
        save_long(m, f, 10);
        save_long(m, f, 20);
        const std::string mine = node_dir(base, world_rank()); // one rank per node
        const std::string file = "/__" + std::to_string(world_rank()) + "_0.distcp";
        const std::uintmax_t inode = inode_of(mine + "/step_00000010" + file);
        const std::uintmax_t long_size = stdfs::file_size(mine + "/step_00000010" + file);
        f.fill(30);
        m.save(30, f.dict); // the field alone: shorter
        m.wait();
        // The same step saved into fresh files, to compare with.
        {
            cairn::CheckpointManager other(fresh + "/root", MPI_COMM_WORLD, level_options(fresh, red, 1));
            other.save(30, f.dict);
        }
        const auto got = sizes_under(mine + "/step_00000030");
        const auto want = sizes_under(node_dir(fresh, world_rank()) + "/step_00000030");
        CHECK(all(inode != 0 && inode_of(mine + "/step_00000030" + file) == inode));
        CHECK(all(stdfs::file_size(mine + "/step_00000030" + file) < long_size));
        CHECK(all(got == want));
        CHECK(all(!stdfs::exists(mine + "/step_00000010") && !stdfs::exists(mine + "/step_00000010.cairn-old")));
        Field back(MPI_COMM_WORLD, true); // by rows: each rank reads its own node's file, none moves
        CHECK(all(m.restore_latest(back.dict) == 30));
        CHECK(all(back.holds(30)));
        if (red.scheme != cairn::Redundancy::Scheme::none) {
            // The redundancy files written over the old ones rebuild a lost node.
            wipe(base, 1);
            Field again(MPI_COMM_WORLD, true);
            CHECK(all(m.restore_latest(again.dict) == 30));
            CHECK(all(again.holds(30)));
            CHECK(all(!m.last_restore().rebuilt.empty()));
        }
    }
}

TEST_CASE("levels: a failed save that reused a dropped step's files leaves the newer steps loadable",
          "[levels][recycle][errors]")
{
    const int w = world_size();
    const std::string base = fresh_dir("levels_recycle_fail_" + std::to_string(w));
    auto opts = level_options(base, w > 1 ? cairn::Redundancy::partner() : cairn::Redundancy::none(), 1);
    opts.local.keep_last = 3;
    cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD, opts);
    Field f(MPI_COMM_WORLD, true);
    for (std::int64_t s : {10, 20, 30}) {
        f.fill(s);
        m.save(s, f.dict);
    }
    f.fill(40);
    std::string msg;
    {
        cairn::testing::ScopedFault fault({"mpiio.write", w - 1, 0, 1, ENOSPC});
        try {
            m.save(40, f.dict); // reuses step 10's files, then fails
        } catch (const cairn::error::WriteError& e) {
            msg = e.what();
        }
    }
    CHECK(all(!msg.empty()));
    const auto lv = m.levels();
    CHECK(all(lv.size() == 2 && lv[0].step == 20 && lv[0].node_local && lv[1].step == 30 && lv[1].node_local));
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 30));
    CHECK(all(back.holds(30)));
    if (world_rank() == 0)
        for (int n = 0; n < w; ++n)
            stdfs::remove_all(node_dir(base, n) + "/step_00000030");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(all(m.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20)));
    f.fill(40);
    m.save(40, f.dict);
    CHECK(all(m.restore_latest(back.dict) == 40));
    CHECK(all(back.holds(40)));
}

TEST_CASE("levels: saves into a RAM disk write over the reused files through kept mappings, checksummed",
          "[levels][recycle]")
{
    bool ram = false;
    const std::string base = ram_disk_dir("levels_mapped", ram);
    auto opts = level_options(base, cairn::Redundancy::none(), 1); // keep_last 2: step s reuses step s - 2's files
    opts.save_options.fsync = true;
    opts.save_options.staging_bytes = 64 << 10; // arrays of 8 KiB or more go straight from memory
    const std::int64_t n = 40000; // doubles per rank: several pieces of the writer's
    std::vector<double> big(static_cast<std::size_t>(n)), small(5);
    std::int64_t step = 0;
    cairn::StateDict d;
    d.add_array<double>("big", big.data(), cairn::Shape{n * world_size()}, cairn::Box{{n * world_rank()}, {n}});
    d.add_array<double>("small", small.data(), cairn::Shape{5 * world_size()}, cairn::Box{{5 * world_rank()}, {5}});
    d.add_scalar("step", &step);
    const auto fill = [&](std::int64_t s) {
        step = s;
        for (std::int64_t i = 0; i < n; ++i)
            big[static_cast<std::size_t>(i)] = static_cast<double>(s * 1000000 + n * world_rank() + i);
        for (std::size_t i = 0; i < small.size(); ++i)
            small[i] = static_cast<double>(-s - static_cast<std::int64_t>(i));
    };
    const std::string file = "/__" + std::to_string(world_rank()) + "_0.distcp";
    const std::string mine = node_dir(base, world_rank());
    std::uintmax_t first = 0;
    {
        cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD, opts);
        for (std::int64_t s = 1; s <= 5; ++s) {
            fill(s);
            m.save(s, d);
            m.wait();
            if (s == 1)
                first = inode_of(mine + "/step_00000001" + file);
            if (s == 3 && ram) {
                // A hole punched into the mapped file: step 5 finds it (the
                // file's blocks no longer cover it) and writes around the
                // mapping, filling the hole.
                const int fd = ::open((mine + "/step_00000003" + file).c_str(), O_RDWR | O_CLOEXEC);
                CHECK(all(fd >= 0 && ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0 &&
                          ::lseek(fd, 0, SEEK_HOLE) == 0));
                if (fd >= 0)
                    ::close(fd);
            }
        }
        if (ram) {
            const int fd = ::open((mine + "/step_00000005" + file).c_str(), O_RDONLY | O_CLOEXEC);
            struct stat st {};
            CHECK(all(fd >= 0 && ::fstat(fd, &st) == 0 && ::lseek(fd, 0, SEEK_HOLE) == st.st_size));
            if (fd >= 0)
                ::close(fd);
        }
        // Steps 3 and 5 wrote over step 1's file, and the mapping step 3 made
        // is kept (the kernel names a mapping by the file's current path).
        CHECK(all(first != 0 && inode_of(mine + "/step_00000005" + file) == first));
        if (ram) {
            std::ifstream maps("/proc/self/maps");
            const std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
            CHECK(all(has(text, mine + "/step_00000005" + file)));
        }
        big.assign(big.size(), -1.0);
        small.assign(small.size(), -1.0);
        step = -1;
        CHECK(all(m.restore_latest(d) == 5)); // every block verified against its checksum
        bool ok = step == 5 && small[4] == -9.0;
        for (std::int64_t i = 0; i < n; ++i)
            ok = ok && big[static_cast<std::size_t>(i)] == static_cast<double>(5000000 + n * world_rank() + i);
        CHECK(all(ok));
    }
    remove_dir(base);
}

TEST_CASE("levels: a restore through kept mappings verifies every block; a damaged one names the file and array",
          "[levels][recycle]")
{
    bool ram = false;
    const std::string base = ram_disk_dir("levels_mapped_restore", ram);
    const auto opts = level_options(base, cairn::Redundancy::none(), 1); // step 3 reuses step 1's files
    const std::int64_t n = 300000; // doubles per rank: 2.3 MiB, read straight into the array, 3 checksum blocks
    std::vector<double> big(static_cast<std::size_t>(n));
    std::int64_t step = 0;
    cairn::StateDict d;
    d.add_array<double>("big", big.data(), cairn::Shape{n * world_size()}, cairn::Box{{n * world_rank()}, {n}});
    d.add_scalar("step", &step);
    const auto fill = [&](std::int64_t s) {
        step = s;
        for (std::int64_t i = 0; i < n; ++i)
            big[static_cast<std::size_t>(i)] = static_cast<double>(s * 10000000 + n * world_rank() + i);
    };
    const auto holds = [&](std::int64_t s) {
        bool ok = step == s;
        for (std::int64_t i = 0; i < n; ++i)
            ok = ok && big[static_cast<std::size_t>(i)] == static_cast<double>(s * 10000000 + n * world_rank() + i);
        return ok;
    };
    const auto scramble = [&] {
        big.assign(big.size(), -1.0);
        step = -1;
    };
    const std::string file = node_dir(base, 0) + "/step_00000003/__0_0.distcp";
    {
        cairn::CheckpointManager m(base + "/root", MPI_COMM_WORLD, opts);
        for (std::int64_t s = 1; s <= 3; ++s) {
            fill(s);
            m.save(s, d);
            m.wait();
        }
        if (ram) { // step 3 was written through a mapping this process keeps
            std::ifstream maps("/proc/self/maps");
            const std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
            CHECK(all(world_rank() != 0 || has(text, file)));
        }
        scramble();
        CHECK(all(m.restore_latest(d) == 3));
        CHECK(all(holds(3)));

        // One byte of rank 0's array changed in place (the mapping sees it):
        // step 3 is skipped, naming the file and the array, for step 2.
        if (world_rank() == 0)
            CHECK(flip_bits(file, static_cast<std::streamoff>(stdfs::file_size(file) / 2), 0x40));
        MPI_Barrier(MPI_COMM_WORLD);
        scramble();
        std::vector<cairn::SkippedCheckpoint> skipped;
        CHECK(all(m.restore_latest(d, cairn::LoadOptions{}, &skipped) == 2));
        CHECK(all(holds(2)));
        REQUIRE(all(skipped.size() == 1));
        const std::string& why = skipped[0].reason;
        CHECK(all(skipped[0].step == 3 && has(why, "checksum mismatch in 'big'") && has(why, file)));
    }
    remove_dir(base);
}

TEST_CASE("levels: a load from a RAM disk into memory not aligned like the file is bitwise and verified",
          "[levels][bounce]")
{
    // A read from a RAM disk into memory whose address is not congruent to
    // the file offset modulo 64 goes through an aligned buffer, 1 MiB at a
    // time (DistcpReader: read_blocks_bounced). Two destinations 8 bytes
    // apart: at least one of them is not aligned like the file.
    // A plain save and load: a directory every rank sees (the shared test
    // directory where ranks run on hosts of their own).
    std::string base = shared_ram_dir("levels_bounce");
    if (base.empty())
        base = fresh_dir("levels_bounce_" + std::to_string(world_size()));
    const std::string path = base + "/ckpt";
    const std::int64_t n = 300000; // doubles per rank: 2.3 MiB, 3 checksum blocks, the last one short
    std::vector<double> src(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        src[static_cast<std::size_t>(i)] = static_cast<double>(n * world_rank() + i) * 0.5;
    const cairn::Shape global{n * world_size()};
    const cairn::Box mine{{n * world_rank()}, {n}};
    {
        cairn::StateDict d;
        d.add_array<double>("big", src.data(), global, mine);
        cairn::save(d, path, MPI_COMM_WORLD);
    }
    cairn::detail::unmap_all_files(); // as in a new process
    std::vector<char> raw(static_cast<std::size_t>(n) * sizeof(double) + 128);
    const auto load_at = [&](std::size_t shift) {
        auto* at = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw.data()) + 63) / 64 * 64) + shift;
        auto* dst = reinterpret_cast<double*>(at);
        std::fill(dst, dst + n, -1.0);
        cairn::StateDict d;
        d.add_array<double>("big", dst, global, mine);
        const auto result = cairn::load(d, path, MPI_COMM_WORLD);
        return std::make_pair(std::equal(src.begin(), src.end(), dst),
                              result.bytes_read == static_cast<std::uint64_t>(n) * sizeof(double));
    };
    for (std::size_t shift : {8, 16}) {
        INFO("destination 64-byte aligned + " << shift);
        const auto [same, bytes] = load_at(shift);
        CHECK(all(same));
        CHECK(all(bytes));
    }
    // One byte of rank 0's data changed: both loads fail, naming the array and the file.
    const std::string file = path + "/__0_0.distcp";
    if (world_rank() == 0)
        CHECK(flip_bits(file, static_cast<std::streamoff>(stdfs::file_size(file) / 2), 0x20));
    MPI_Barrier(MPI_COMM_WORLD);
    for (std::size_t shift : {8, 16}) {
        INFO("destination 64-byte aligned + " << shift);
        const auto msg = agreed_error<cairn::error::IntegrityError>([&] { load_at(shift); });
        CHECK(has(msg, "'big'"));
        CHECK(has(msg, "__0_0.distcp"));
    }
    remove_dir(base);
}
