// CheckpointManager: retention, latest() only ever committed and complete,
// restore on another communicator, async saves, leftovers (fsck).
#include "fixtures.hpp"
#include "../damage.hpp"

#include <cairn/manager.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

using namespace cairn_test;
namespace stdfs = std::filesystem;

namespace {

// An 11 x 9 field split by rows or by columns, and the step counter. Element
// (i, j) of the checkpoint of step s holds s * 1000 + i * 9 + j.
struct Field {
    cairn::Shape global{11, 9};
    cairn::Box box;
    std::vector<double> u;
    std::int64_t step = -1;
    cairn::StateDict dict;

    Field(int p, int r, bool by_rows)
    {
        box = cairn::whole(global);
        const std::size_t d = by_rows ? 0 : 1;
        std::tie(box.offsets[d], box.shape[d]) = block(global[d], p, r);
        u.assign(static_cast<std::size_t>(box.volume()), -1.0);
        dict.add_array<double>("u", u.data(), global, box);
        dict.add_scalar("step", &step);
    }
    explicit Field(const SubComm& c, bool by_rows = true) : Field(c.size(), c.rank(), by_rows) {}
    Field(MPI_Comm comm, bool by_rows)
        : Field(
              [&] {
                  int s = 0;
                  MPI_Comm_size(comm, &s);
                  return s;
              }(),
              [&] {
                  int r = 0;
                  MPI_Comm_rank(comm, &r);
                  return r;
              }(),
              by_rows)
    {
    }

    template <class F>
    void each(F&& f)
    {
        std::size_t k = 0;
        for (std::int64_t i = 0; i < box.shape[0]; ++i)
            for (std::int64_t j = 0; j < box.shape[1]; ++j)
                f(u[k++], (box.offsets[0] + i) * 9 + box.offsets[1] + j);
    }
    void fill(std::int64_t s)
    {
        step = s;
        each([&](double& v, std::int64_t lin) { v = static_cast<double>(s * 1000 + lin); });
    }
    void scribble()
    {
        step = -7;
        std::fill(u.begin(), u.end(), -7.0);
    }
    bool holds(std::int64_t s)
    {
        bool ok = step == s;
        each([&](double& v, std::int64_t lin) { ok = ok && v == static_cast<double>(s * 1000 + lin); });
        return ok;
    }
};

std::vector<std::int64_t> steps_of(std::initializer_list<std::int64_t> l) { return l; }

// The names in `dir`, sorted; collective: rank 0 lists, all agree on `want`.
bool names_are(const std::string& dir, std::set<std::string> want)
{
    bool ok = true;
    if (world_rank() == 0) {
        std::set<std::string> got;
        for (const auto& e : stdfs::directory_iterator(dir))
            got.insert(e.path().filename().string());
        if (got != want) {
            std::string s;
            for (const auto& g : got)
                s += g + " ";
            UNSCOPED_INFO("names in " << dir << ": " << s);
        }
        ok = got == want;
    }
    return all(ok);
}

std::string read_text(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Rank 0 runs f (file-system fabrication), everyone waits.
template <class F>
void on_root_rank(F&& f)
{
    bool ok = true;
    if (world_rank() == 0) {
        try {
            f();
        } catch (const std::exception& e) {
            UNSCOPED_INFO(e.what());
            ok = false;
        }
    }
    REQUIRE(all(ok));
}

// Rank 0 flips a bit in the first stored byte of "u" in the checkpoint
// `path`: its checksum no longer matches; metadata and sizes are intact.
void damage(const std::string& path, bool container)
{
    on_root_rank([&] {
        const cairn::Metadata md = cairn::read_metadata(path);
        const cairn::EntryMeta& e = md.entries.at("u");
        const auto [file, pos] = chunk_start(path, e, e.chunks.at(0), container);
        if (pos < 0 || !flip_bits(file, pos, 0x10))
            throw std::runtime_error("cannot damage " + path);
    });
}

cairn::ManagerOptions quick(int keep_last, std::int64_t keep_every = 0)
{
    cairn::ManagerOptions o;
    o.keep_last = keep_last;
    o.keep_every = keep_every;
    o.save_options.fsync = false;
    return o;
}

} // namespace

TEST_CASE("manager: retention keeps the last N and every K-th step; LATEST names the newest", "[manager]")
{
    const std::string base = fresh_dir("manager_retention_" + std::to_string(world_size()));
    Field f(MPI_COMM_WORLD, true);

    SECTION("keep_last = 2")
    {
        cairn::CheckpointManager m(base + "/a", MPI_COMM_WORLD, quick(2));
        CHECK(all(!m.latest().has_value()));
        for (std::int64_t s = 10; s <= 60; s += 10) {
            f.fill(s);
            const auto r = m.save(s, f.dict);
            CHECK(all(r.has_value() && r->entries == 2));
            CHECK(all(m.latest() == s));
        }
        CHECK(all(m.steps() == steps_of({50, 60})));
        CHECK(names_are(base + "/a", {"LATEST", "step_00000050", "step_00000060"}));
        CHECK(all(read_text(base + "/a/LATEST") == "step_00000060\n"));
        CHECK(all(m.checkpoint_path(60) == base + "/a/step_00000060"));
    }
    SECTION("keep_last = 2, keep_every = 30")
    {
        cairn::CheckpointManager m(base + "/b", MPI_COMM_WORLD, quick(2, 30));
        for (std::int64_t s = 10; s <= 100; s += 10) {
            f.fill(s);
            m.save(s, f.dict);
        }
        CHECK(all(m.steps() == steps_of({30, 60, 90, 100})));
        CHECK(all(read_text(base + "/b/LATEST") == "step_00000100\n"));
    }
    SECTION("keep_last = 0 keeps everything")
    {
        cairn::CheckpointManager m(base + "/c", MPI_COMM_WORLD, quick(0));
        for (std::int64_t s = 1; s <= 4; ++s) {
            f.fill(s);
            m.save(s, f.dict);
        }
        CHECK(all(m.steps() == steps_of({1, 2, 3, 4})));
    }
    SECTION("saving a step again replaces it")
    {
        cairn::CheckpointManager m(base + "/d", MPI_COMM_WORLD, quick(2));
        f.fill(10);
        m.save(10, f.dict);
        f.fill(20);
        m.save(20, f.dict);
        if (world_rank() == 0)
            f.u[0] += 0.5; // element (0, 0)
        m.save(20, f.dict); // LATEST is moved off step 20 while it is replaced
        CHECK(all(read_text(base + "/d/LATEST") == "step_00000020\n"));
        CHECK(names_are(base + "/d", {"LATEST", "step_00000010", "step_00000020"}));
        Field back(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(back.dict) == 20));
        CHECK(all(back.step == 20 && (world_rank() != 0 || back.u[0] == 20000.5)));
    }
}

TEST_CASE("manager: latest() ignores uncommitted and damaged checkpoints and a stale or corrupt LATEST", "[manager]")
{
    const std::string root = fresh_dir("manager_latest_" + std::to_string(world_size())) + "/root";
    Field f(MPI_COMM_WORLD, true);
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(2));
    for (std::int64_t s : {10, 20}) {
        f.fill(s);
        m.save(s, f.dict);
    }
    on_root_rank([&] {
        // Uncommitted: data without metadata, metadata not renamed yet.
        stdfs::create_directories(root + "/step_00000030");
        write_text(root + "/step_00000030/__0_0.distcp", std::string(4096, 'x'));
        stdfs::create_directories(root + "/step_00000040");
        stdfs::copy_file(root + "/step_00000020/metadata.h5", root + "/step_00000040/.metadata.h5.tmp");
        write_text(root + "/step_00000050.h5.cairn-tmp", "half a container");
        // Damaged: metadata that is not HDF5; data shorter than the metadata says.
        stdfs::create_directories(root + "/step_00000060");
        write_text(root + "/step_00000060/metadata.h5", "garbage");
        stdfs::copy(root + "/step_00000020", root + "/step_00000070", stdfs::copy_options::recursive);
        for (const auto& e : stdfs::directory_iterator(root + "/step_00000070"))
            if (e.path().extension() == ".distcp")
                stdfs::resize_file(e.path(), 8);
        write_text(root + "/step_00000080.h5", "not a container");
        // Not a canonical name: ignored.
        stdfs::copy(root + "/step_00000020", root + "/step_90", stdfs::copy_options::recursive);
    });
    CHECK(all(m.latest() == 20));
    CHECK(all(m.steps() == steps_of({10, 20})));

    for (const std::string pointer : {"step_00000030\n", "step_00000060\n", "step_00000099\n", "\x01\x02garbage",
                                      "../step_00000020\n", ""}) {
        on_root_rank([&] { write_text(root + "/LATEST", pointer); });
        CHECK(all(m.latest() == 20));
    }
    on_root_rank([&] { stdfs::remove(root + "/LATEST"); });
    CHECK(all(m.latest() == 20));

    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20)));

    // The next save points LATEST at it; retention counts only complete
    // checkpoints and leaves the damaged ones and the leftovers alone.
    f.fill(25);
    m.save(25, f.dict);
    CHECK(all(read_text(root + "/LATEST") == "step_00000025\n"));
    CHECK(all(m.steps() == steps_of({20, 25})));
    CHECK(names_are(root, {"LATEST", "step_00000020", "step_00000025", "step_00000030", "step_00000040",
                           "step_00000050.h5.cairn-tmp", "step_00000060", "step_00000070", "step_00000080.h5",
                           "step_90"}));
}

TEST_CASE("manager: restore_latest reshards on a subcommunicator", "[manager][reshard]")
{
    const int w = world_size();
    const std::string root = fresh_dir("manager_restore_" + std::to_string(w)) + "/root";
    {
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(2));
        Field f(MPI_COMM_WORLD, true);
        for (std::int64_t s : {5, 10}) {
            f.fill(s);
            m.save(s, f.dict);
        }
    }
    const int n = std::max(1, w - 1);
    CHECK(run_on(n, [&](SubComm& c) {
        cairn::CheckpointManager m(root, c.get());
        Field back(c, false);
        const auto s = m.restore_latest(back.dict);
        return s == 10 && back.holds(10);
    }));
    // Nothing to restore: the state stays as it was.
    CHECK(run_on(n, [&](SubComm& c) {
        Field back(c, false);
        back.fill(3);
        cairn::CheckpointManager empty(root + "/nothing_here", c.get());
        return !empty.restore_latest(back.dict) && !empty.latest() && empty.steps().empty() && back.holds(3) &&
               !stdfs::exists(root + "/nothing_here");
    }));
}

TEST_CASE("manager: async saves commit, publish and apply retention in the background", "[manager][async]")
{
    const std::string base = fresh_dir("manager_async_" + std::to_string(world_size()));
    const std::string root = base + "/root";
    Field f(MPI_COMM_WORLD, true);
    auto o = quick(2);
    o.async = true;
    o.save_options.async_staging = cairn::AsyncStaging::bounded;
    o.save_options.staging_bytes = 4096;
    {
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
        for (std::int64_t s = 1; s <= 4; ++s) {
            f.fill(s);
            CHECK(all(!m.save(s, f.dict).has_value()));
            f.scribble(); // staged: the caller's data may change
            // LATEST follows when the save is settled, never before.
            if (s > 1)
                CHECK(all(read_text(root + "/LATEST") == "step_0000000" + std::to_string(s - 1) + "\n"));
            if (s < 3) {
                CHECK(all(m.latest() == s)); // settles: committed, published
                CHECK(all(read_text(root + "/LATEST") == "step_0000000" + std::to_string(s) + "\n"));
            }
        }
        const auto r = m.wait();
        CHECK(all(r.has_value() && r->entries == 2));
        CHECK(all(!m.wait().has_value()));
        CHECK(all(m.steps() == steps_of({3, 4})));
        CHECK(all(read_text(root + "/LATEST") == "step_00000004\n"));
        Field back(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(back.dict) == 4));
        CHECK(all(back.holds(4)));

        // restore_latest waits for the save in flight.
        f.fill(5);
        m.save(5, f.dict);
        f.scribble();
        CHECK(all(m.restore_latest(back.dict) == 5));
        CHECK(all(back.holds(5)));

        // The destructor finishes the save in flight.
        f.fill(6);
        m.save(6, f.dict);
    }
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(2));
    CHECK(all(m.steps() == steps_of({5, 6})));
    CHECK(all(read_text(root + "/LATEST") == "step_00000006\n"));
    CHECK(all(m.find_leftovers().empty()));
}

TEST_CASE("manager: a failed save leaves LATEST and the committed checkpoints as they were", "[manager][errors]")
{
    const int w = world_size();
    const std::string root = fresh_dir("manager_fail_" + std::to_string(w)) + "/root";
    Field f(MPI_COMM_WORLD, true);
    for (bool async : {false, true}) {
        {
            cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(1));
            f.fill(async ? 30 : 10);
            m.save(async ? 30 : 10, f.dict);
        }
        auto o = quick(1);
        o.async = async;
        o.save_options.storage = std::make_shared<FailingWriter>(w - 1, cairn::DistcpWriterOptions{});
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
        f.fill(40);
        std::string msg;
        try {
            m.save(40, f.dict);
            m.wait();
        } catch (const cairn::error::WriteError& e) {
            msg = e.what();
        }
        CHECK(all(msg.find("injected") != std::string::npos));
        const std::int64_t want = async ? 30 : 10;
        CHECK(all(m.latest() == want));
        CHECK(all(read_text(root + "/LATEST") == (async ? "step_00000030\n" : "step_00000010\n")));
        Field back(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(back.dict) == want));
        CHECK(all(back.holds(want)));
    }
}

TEST_CASE("manager: leftovers are found and removed; committed checkpoints stay", "[manager][fsck]")
{
    const std::string root = fresh_dir("manager_leftovers_" + std::to_string(world_size())) + "/root";
    Field f(MPI_COMM_WORLD, true);
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(0));
    for (std::int64_t s : {10, 20}) {
        f.fill(s);
        m.save(s, f.dict);
    }
    CHECK(all(m.find_leftovers().empty()));
    on_root_rank([&] {
        stdfs::create_directories(root + "/step_00000030");
        write_text(root + "/step_00000030/__1_0.distcp", "data");
        stdfs::create_directories(root + "/step_00000040"); // created, nothing written yet
        stdfs::create_directories(root + "/elsewhere");     // not a managed name, but Cairn's files
        write_text(root + "/elsewhere/.metadata.h5.tmp", "x");
        stdfs::create_directories(root + "/notes"); // the user's: not a leftover
        write_text(root + "/notes.txt", "mine");
        stdfs::copy(root + "/step_00000020", root + "/step_00000020.cairn-old", stdfs::copy_options::recursive);   // swap done, old not removed
        stdfs::copy(root + "/step_00000010", root + "/step_00000010.cairn-staging", stdfs::copy_options::recursive); // swap not started
        // Killed in the middle of replacing step 15: its final name is gone.
        stdfs::copy(root + "/step_00000020", root + "/step_00000015.cairn-staging", stdfs::copy_options::recursive);
        stdfs::copy(root + "/step_00000010", root + "/step_00000015.cairn-old", stdfs::copy_options::recursive);
        write_text(root + "/step_00000050.h5.cairn-tmp", "x");
        write_text(root + "/LATEST.cairn-tmp", "step_0000");
        // Open MPI's lock-test files of a container being opened when the
        // job was killed (seen in the kill test); the user's look-alikes stay.
        write_text(root + "/step_00000050.h5.cairn-tmp.locktest.1", "");
        write_text(root + "/step_00000060.h5.locktest.0", "");
        write_text(root + "/notes.txt.locktest.0", "mine");
        write_text(root + "/step_00000070.h5.locktest.x", "mine");
        // ... and one a load killed while opening a data file leaves inside
        // a committed checkpoint.
        write_text(root + "/step_00000020/__0_0.distcp.locktest.1", "");
    });
    const std::set<std::string> want = {"LATEST.cairn-tmp",          "elsewhere",
                                        "step_00000010.cairn-staging", "step_00000015.cairn-old",
                                        "step_00000015.cairn-staging", "step_00000020.cairn-old",
                                        "step_00000030",             "step_00000040",
                                        "step_00000050.h5.cairn-tmp", "step_00000050.h5.cairn-tmp.locktest.1",
                                        "step_00000060.h5.locktest.0", "__0_0.distcp.locktest.1"};
    auto names = [](const std::vector<cairn::Leftover>& v) {
        std::set<std::string> s;
        for (const auto& l : v)
            s.insert(stdfs::path(l.path).filename().string());
        return s;
    };
    const auto found = m.find_leftovers();
    CHECK(all(names(found) == want));
    CHECK(all(std::all_of(found.begin(), found.end(), [](const cairn::Leftover& l) { return !l.reason.empty(); })));
    CHECK(all(names(cairn::find_leftovers(root)) == want)); // local, the same on every rank

    const auto removed = m.remove_leftovers();
    CHECK(all(names(removed) == want));
    CHECK(all(m.find_leftovers().empty()));
    CHECK(names_are(root, {"LATEST", "step_00000010", "step_00000015", "step_00000020", "notes", "notes.txt",
                           "notes.txt.locktest.0", "step_00000070.h5.locktest.x"}));
    CHECK(!stdfs::exists(root + "/step_00000020/__0_0.distcp.locktest.1"));
    CHECK(stdfs::exists(root + "/step_00000020/metadata.h5"));
    CHECK(all(m.steps() == steps_of({10, 15, 20})));
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 20));
    CHECK(all(back.holds(20)));
    CHECK(all(cairn::find_leftovers(root + "/does_not_exist").empty()));
}

TEST_CASE("manager: container layout", "[manager][container]")
{
    const int w = world_size();
    const std::string root = fresh_dir("manager_container_" + std::to_string(w)) + "/root";
    auto o = quick(2);
    o.layout = cairn::Layout::container;
    {
        cairn::CheckpointManager m(root, MPI_COMM_WORLD, o);
        Field f(MPI_COMM_WORLD, true);
        for (std::int64_t s : {1, 2, 3}) {
            f.fill(s);
            m.save(s, f.dict);
        }
        CHECK(all(m.checkpoint_path(3) == root + "/step_00000003.h5"));
        CHECK(all(m.steps() == steps_of({2, 3})));
        CHECK(names_are(root, {"LATEST", "step_00000002.h5", "step_00000003.h5"}));
        CHECK(all(cairn::is_container_checkpoint(root + "/step_00000003.h5")));
    }
    const int n = std::max(1, w - 1);
    CHECK(run_on(n, [&](SubComm& c) {
        cairn::CheckpointManager per_rank(root, c.get()); // reads either layout
        Field back(c, false);
        return per_rank.restore_latest(back.dict) == 3 && back.holds(3);
    }));
}

TEST_CASE("manager: wrong arguments", "[manager][errors]")
{
    const std::string root = fresh_dir("manager_args_" + std::to_string(world_size())) + "/root";
    CHECK_THROWS_AS(cairn::CheckpointManager(root, MPI_COMM_WORLD, quick(-1)), cairn::error::WrongAPIUsage);
    CHECK_THROWS_AS(cairn::CheckpointManager(root, MPI_COMM_WORLD, quick(1, -5)), cairn::error::WrongAPIUsage);
    CHECK_THROWS_AS(cairn::CheckpointManager("", MPI_COMM_WORLD), cairn::error::WrongAPIUsage);
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(2));
    Field f(MPI_COMM_WORLD, true);
    bool threw = false;
    try {
        m.save(-1, f.dict);
    } catch (const cairn::error::WrongAPIUsage&) {
        threw = true;
    }
    CHECK(all(threw));
    if (world_size() > 1) {
        threw = false;
        try {
            m.save(world_rank(), f.dict);
        } catch (const cairn::error::Mismatch&) {
            threw = true;
        }
        CHECK(all(threw));
    }
    CHECK(all(!m.latest().has_value()));
}

TEST_CASE("manager: restore_latest falls back over damaged steps and says which it skipped", "[manager][fallback]")
{
    const std::string base = fresh_dir("manager_fallback_" + std::to_string(world_size()));
    for (const bool container : {false, true}) {
        INFO((container ? "container layout" : "per-rank layout"));
        auto o = quick(0);
        if (container)
            o.layout = cairn::Layout::container;
        cairn::CheckpointManager m(base + (container ? "/c" : "/p"), MPI_COMM_WORLD, o);
        Field f(MPI_COMM_WORLD, true);
        for (std::int64_t s : {10, 20, 30}) {
            f.fill(s);
            m.save(s, f.dict);
        }
        damage(m.checkpoint_path(30), container);
        CHECK(all(m.latest() == 30)); // metadata and sizes are intact: latest() reads no data

        std::vector<cairn::SkippedCheckpoint> skipped;
        Field back(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(back.dict, {}, &skipped) == 20));
        CHECK(all(back.holds(20)));
        REQUIRE(all(skipped.size() == 1));
        CHECK(all(skipped[0].step == 30 && skipped[0].path == m.checkpoint_path(30)));
        CHECK(all(has(skipped[0].reason, "checksum mismatch in 'u'")));

        // Two damaged steps: the third; the list is replaced, not appended to.
        damage(m.checkpoint_path(20), container);
        Field back2(MPI_COMM_WORLD, false);
        CHECK(all(m.restore_latest(back2.dict, {}, &skipped) == 10));
        CHECK(all(back2.holds(10)));
        CHECK(all(skipped.size() == 2 && skipped[0].step == 30 && skipped[1].step == 20));
        Field back3(MPI_COMM_WORLD, true); // without the list
        CHECK(all(m.restore_latest(back3.dict) == 10));
        CHECK(all(back3.holds(10)));

        // None loads: the error of the newest, naming every step tried.
        damage(m.checkpoint_path(10), container);
        Field back4(MPI_COMM_WORLD, false);
        bool threw = false;
        std::string what;
        try {
            m.restore_latest(back4.dict, {}, &skipped);
        } catch (const cairn::error::IntegrityError& e) {
            threw = true;
            what = e.what();
        }
        INFO(what);
        CHECK(all(threw));
        for (std::int64_t s : {30, 20, 10})
            CHECK(all(has(what, "step " + std::to_string(s) + " at " + m.checkpoint_path(s) + ": ")));
        CHECK(all(has(what, "no checkpoint in " + m.root() + " loads")));
    }
}

TEST_CASE("manager: restore_latest does not fall back when the state does not fit", "[manager][fallback]")
{
    const std::string root = fresh_dir("manager_fallback_mismatch_" + std::to_string(world_size())) + "/root";
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(0));
    Field f(MPI_COMM_WORLD, true);
    for (std::int64_t s : {10, 20}) {
        f.fill(s);
        m.save(s, f.dict);
    }
    // "u" as f32: a Mismatch, from the newest step, whether or not it is
    // damaged; the intact step before is not tried.
    for (const bool damaged : {false, true}) {
        if (damaged)
            damage(m.checkpoint_path(20), false);
        std::vector<float> u(f.u.size());
        std::int64_t step = -1;
        cairn::StateDict d;
        d.add_array<float>("u", u.data(), f.global, f.box);
        d.add_scalar("step", &step);
        std::vector<cairn::SkippedCheckpoint> skipped{{1, "x", "y"}};
        bool threw = false;
        std::string what;
        try {
            m.restore_latest(d, {}, &skipped);
        } catch (const cairn::error::Mismatch& e) {
            threw = true;
            what = e.what();
        }
        INFO(what);
        CHECK(all(threw));
        CHECK(all(skipped.empty() && step == -1));
        CHECK(all(!has(what, "step_00000010")));
    }
}

TEST_CASE("manager: a replacement interrupted between its renames is finished, not passed over", "[manager][fsck]")
{
    const std::string root = fresh_dir("manager_interrupted_" + std::to_string(world_size())) + "/root";
    cairn::CheckpointManager m(root, MPI_COMM_WORLD, quick(0));
    Field f(MPI_COMM_WORLD, true);
    // Step 20 re-saved (element (0, 0) changed) and killed between the two
    // renames: the new one under the staging name, the old one moved aside,
    // nothing named step_00000020.
    const auto interrupt = [&] {
        f.fill(20);
        if (world_rank() == 0)
            f.u[0] += 0.5;
        cairn::SaveOptions so;
        so.fsync = false;
        cairn::save(f.dict, root + "/step_00000020.cairn-staging", MPI_COMM_WORLD, so);
        on_root_rank([&] {
            stdfs::remove_all(root + "/step_00000020.cairn-old");
            stdfs::rename(root + "/step_00000020", root + "/step_00000020.cairn-old");
        });
    };
    for (std::int64_t s : {10, 20}) {
        f.fill(s);
        m.save(s, f.dict);
    }
    interrupt();
    Field back(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back.dict) == 20)); // the new step 20, not step 10
    CHECK(all(back.step == 20 && (world_rank() != 0 || back.u[0] == 20000.5)));
    CHECK(names_are(root, {"LATEST", "step_00000010", "step_00000020", "step_00000020.cairn-old"}));
    const auto removed = m.remove_leftovers();
    CHECK(all(removed.size() == 1 && has(removed[0].path, "step_00000020.cairn-old")));

    // latest() and steps() finish it too.
    f.fill(20);
    m.save(20, f.dict);
    interrupt();
    CHECK(all(m.latest() == 20));
    CHECK(names_are(root, {"LATEST", "step_00000010", "step_00000020", "step_00000020.cairn-old"}));
    f.fill(20);
    m.save(20, f.dict);
    interrupt();
    CHECK(all(m.steps() == steps_of({10, 20})));
    Field back2(MPI_COMM_WORLD, false);
    CHECK(all(m.restore_latest(back2.dict) == 20));
    CHECK(all(back2.step == 20 && (world_rank() != 0 || back2.u[0] == 20000.5)));
}
