// Grouped data files of the per-rank layout (PerRankTuning::files): ranks in
// groups each write one .distcp file together; the checkpoint loads on any
// rank count, bitwise, and a missing or short group file is an error that
// names the file and the ranks that wrote it.
#include "common.hpp"
#include "outcome.hpp"

#include <cairn/cairn.hpp>
#include <cairn/testing.hpp>

#include "io/mpiio.hpp" // private: detail::distcp_writers

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include <sys/statfs.h>

using namespace cairn_test;

namespace {

constexpr std::int64_t k_u = 3001; // 1-d doubles: every rank's share >= 4096 bytes up to 4 ranks
constexpr std::int64_t k_rows = 37, k_cols = 5;

// The state of rank `r` of `n`: its blocks of `u` (f64) and `v` (i32,
// rows), a replicated `rep` and a scalar; values from value_at.
struct State {
    std::vector<double> u;
    std::vector<std::int32_t> v;
    std::vector<float> rep = std::vector<float>(10);
    std::int64_t step = 0;
    cairn::StateDict sd;

    State(int r, int n, bool fill)
    {
        const auto [uo, ul] = block(k_u, n, r);
        const auto [vo, vl] = block(k_rows, n, r);
        u.assign(static_cast<std::size_t>(ul), -1.0);
        v.assign(static_cast<std::size_t>(vl * k_cols), -1);
        std::fill(rep.begin(), rep.end(), -1.0f);
        if (fill) {
            for (std::int64_t i = 0; i < ul; ++i)
                u[i] = static_cast<double>(value_at(uo + i, 1)) + 0.25;
            for (std::int64_t i = 0; i < vl * k_cols; ++i)
                v[i] = static_cast<std::int32_t>(value_at(vo * k_cols + i, 2));
            for (std::int64_t i = 0; i < 10; ++i)
                rep[i] = static_cast<float>(value_at(i, 3));
            step = 42;
        }
        sd.add_array<double>("u", u.data(), {k_u}, cairn::Box{{uo}, {ul}});
        sd.add_array<std::int32_t>("v", v.data(), {k_rows, k_cols}, cairn::Box{{vo, 0}, {vl, k_cols}});
        sd.add_replicated<float>("rep", rep.data(), {10});
        sd.add_scalar("step", &step);
    }

    bool matches(int r, int n) const
    {
        const State want(r, n, true);
        return u == want.u && v == want.v && rep == want.rep && step == want.step;
    }
};

std::set<std::string> data_files(const std::string& dir)
{
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".distcp")
            out.insert(e.path().filename().string());
    return out;
}

// Number of nodes (shared-memory domains) of the world.
int node_count()
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
    int nr = 0;
    MPI_Comm_rank(node, &nr);
    MPI_Comm_free(&node);
    int leader = nr == 0 ? 1 : 0, nodes = 0;
    MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return nodes;
}

cairn::SaveOptions grouped(cairn::DataFiles files)
{
    cairn::SaveOptions o;
    o.layout = cairn::Layout::per_rank;
    o.per_rank.files = files;
    return o;
}

// The name of the group file of ranks lo..hi (one rank: its per-rank name).
std::string group_name(int lo, int hi, int k = 0)
{
    return lo == hi ? "__" + std::to_string(lo) + "_" + std::to_string(k) + ".distcp"
                    : "__" + std::to_string(lo) + "-" + std::to_string(hi) + "_" + std::to_string(k) + ".distcp";
}

// Whether the file system of `dir` takes the direct writes of grouped files
// (MpiFile::write_direct): ext4 or XFS.
bool direct_writes_here(const std::string& dir)
{
    struct statfs sf {};
    if (::statfs(dir.c_str(), &sf) != 0)
        return false;
    const auto type = static_cast<unsigned long>(sf.f_type);
    return type == 0xEF53 /* ext4 */ || type == 0x58465342 /* XFS */;
}

} // namespace

TEST_CASE("grouped files: the file count, and bitwise loads on every rank count", "[groups]")
{
    const int w = world_size(), r = world_rank();
    struct Case {
        const char* label;
        cairn::DataFiles files;
        int files_per_rank;
        std::set<std::string> names; // expected; empty: only the count is checked
        int count;
    };
    std::set<std::string> one{group_name(0, w - 1)};
    std::set<std::string> two; // ranks r * 2 / w in group r: two contiguous halves
    if (w == 1) {
        two = one;
    } else {
        const int split = (w + 1) / 2; // first rank whose r * 2 / w is 1
        two = {group_name(0, split - 1), group_name(split, w - 1)};
    }
    std::set<std::string> two_by_two;
    for (const auto& n : two) {
        two_by_two.insert(n);
        auto second = n;
        second.replace(second.size() - 8, 1, "1"); // _0.distcp -> _1.distcp
        two_by_two.insert(second);
    }
    std::set<std::string> per_rank;
    for (int i = 0; i < w; ++i)
        per_rank.insert(group_name(i, i));
    const int nodes = node_count();
    const Case cases[] = {
        {"one file", cairn::DataFiles::in_all(1), 1, one, 1},
        {"two files", cairn::DataFiles::in_all(2), 1, two, std::min(w, 2)},
        {"two files, two per group", cairn::DataFiles::in_all(2), 2, two_by_two, 2 * std::min(w, 2)},
        {"more files than ranks", cairn::DataFiles::in_all(w + 3), 1, per_rank, w},
        {"per node", cairn::DataFiles::per_node(), 1, nodes == 1 ? one : std::set<std::string>{}, nodes},
        {"per rank", cairn::DataFiles::per_rank(), 1, per_rank, w},
    };
    for (const auto& c : cases) {
        DYNAMIC_SECTION(c.label)
        {
            const std::string dir = fresh_dir("groups_" + std::to_string(w)) + "/ckpt";
            {
                State s(r, w, true);
                auto o = grouped(c.files);
                o.files_per_rank = c.files_per_rank;
                const auto res = cairn::save(s.sd, dir, MPI_COMM_WORLD, o);
                CHECK(res.bytes_written > 0);
            }
            const auto files = data_files(dir);
            CHECK(all(static_cast<int>(files.size()) == c.count));
            if (!c.names.empty())
                CHECK(all(files == c.names));
            // Every chunk names one of these files; large chunks are aligned
            // in their file, and no two chunks of a file overlap.
            const auto md = cairn::read_metadata_file(dir + "/metadata.h5");
            std::set<std::string> named;
            std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>> extents;
            bool aligned = true;
            for (const auto& [fqn, e] : md.entries)
                for (const auto& ch : e.chunks) {
                    if (ch.storage.length == 0)
                        continue;
                    named.insert(ch.storage.path);
                    extents.emplace_back(ch.storage.path, ch.storage.offset, ch.storage.length);
                    if (ch.storage.length >= 4096 && ch.storage.offset % 4096 != 0)
                        aligned = false;
                }
            std::sort(extents.begin(), extents.end());
            bool disjoint = true;
            for (std::size_t i = 1; i < extents.size(); ++i)
                if (std::get<0>(extents[i]) == std::get<0>(extents[i - 1]) &&
                    std::get<1>(extents[i - 1]) + std::get<2>(extents[i - 1]) > std::get<1>(extents[i]))
                    disjoint = false;
            CHECK(all(named == files));
            CHECK(all(aligned));
            CHECK(all(disjoint));
            // A checkpoint of N ranks loads bitwise on 1..W ranks.
            for (int m = 1; m <= w; ++m) {
                const bool ok = run_on(m, [&](const SubComm& sub) {
                    State s(sub.rank(), m, false);
                    cairn::load(s.sd, dir, sub.get());
                    return s.matches(sub.rank(), m);
                });
                CHECK(ok);
            }
            const auto report = cairn::verify(dir, MPI_COMM_WORLD);
            CHECK(all(report.ok()));
            CHECK(all(report.checksums));
        }
    }
}

TEST_CASE("grouped files: a checkpoint of fewer ranks loads on more", "[groups]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("groups_up_" + std::to_string(w)) + "/ckpt";
    // Saved by the first rank (one group of one) and by all ranks in one file.
    const bool saved = run_on(1, [&](const SubComm& sub) {
        State s(sub.rank(), 1, true);
        cairn::save(s.sd, dir, sub.get(), grouped(cairn::DataFiles::in_all(1)));
        return true;
    });
    REQUIRE(saved);
    CHECK(all(data_files(dir) == std::set<std::string>{"__0_0.distcp"}));
    State s(world_rank(), w, false);
    cairn::load(s.sd, dir, MPI_COMM_WORLD);
    CHECK(all(s.matches(world_rank(), w)));
}

TEST_CASE("grouped files: a missing or short group file names the file and its ranks on every rank",
          "[groups][errors]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("groups_damaged_" + std::to_string(w)) + "/ckpt";
    {
        State s(r, w, true);
        cairn::save(s.sd, dir, MPI_COMM_WORLD, grouped(cairn::DataFiles::in_all(1)));
    }
    const auto file = group_name(0, w - 1);
    const std::string ranks = w == 1 ? "written by rank 0" : "written by ranks 0 to " + std::to_string(w - 1);
    REQUIRE(all(std::filesystem::exists(dir + "/" + file)));

    SECTION("truncated")
    {
        if (r == 0)
            std::filesystem::resize_file(dir + "/" + file, 100);
        MPI_Barrier(MPI_COMM_WORLD);
        State s(r, w, false);
        const auto msg = agreed_error<cairn::error::ReadError>([&] { cairn::load(s.sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, file));
        CHECK(contains(msg, "short read"));
        CHECK(contains(msg, ranks));
    }
    SECTION("removed")
    {
        if (r == 0)
            std::filesystem::remove(dir + "/" + file);
        MPI_Barrier(MPI_COMM_WORLD);
        State s(r, w, false);
        const auto msg = agreed_error<cairn::error::ReadError>([&] { cairn::load(s.sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "missing data file"));
        CHECK(contains(msg, file));
        CHECK(contains(msg, ranks));
    }
}

TEST_CASE("grouped files: overwriting keeps the grouping of the new save only", "[groups]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("groups_over_" + std::to_string(w)) + "/ckpt";
    {
        State s(r, w, true);
        cairn::save(s.sd, dir, MPI_COMM_WORLD, grouped(cairn::DataFiles::per_rank()));
    }
    {
        State s(r, w, true);
        s.step = 43;
        auto o = grouped(cairn::DataFiles::in_all(1));
        o.overwrite = true;
        cairn::save(s.sd, dir, MPI_COMM_WORLD, o);
    }
    CHECK(all(data_files(dir) == std::set<std::string>{group_name(0, w - 1)}));
    State s(r, w, false);
    cairn::load(s.sd, dir, MPI_COMM_WORLD);
    CHECK(all(s.step == 43));
    s.step = 42;
    CHECK(all(s.matches(r, w)));
}

TEST_CASE("grouped files: the ranks must agree on the grouping, and a count below 1 is refused", "[groups]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("groups_args_" + std::to_string(w)) + "/ckpt";
    State s(r, w, true);
    const auto bad = agreed_error<cairn::error::WrongAPIUsage>(
        [&] { cairn::save(s.sd, dir, MPI_COMM_WORLD, grouped(cairn::DataFiles::in_all(0))); });
    CHECK(contains(bad, "at least 1"));
    CHECK_THROWS_AS(cairn::DataFiles::parse("none"), cairn::error::WrongAPIUsage);
    CHECK(cairn::DataFiles::parse("per-node").kind == cairn::DataFiles::Kind::per_node);
    CHECK(cairn::DataFiles::parse("7").count == 7);
    CHECK(cairn::DataFiles::in_all(7).str() == "7");
    if (w > 1) {
        const auto msg = agreed_error<cairn::error::Mismatch>([&] {
            cairn::save(s.sd, dir, MPI_COMM_WORLD,
                        grouped(r == 0 ? cairn::DataFiles::per_node() : cairn::DataFiles::in_all(1)));
        });
        CHECK(contains(msg, "data files"));
    }
}

// Injected I/O errors on one member while a group writes its file (hidden:
// run by mpi_faults_np*, whose short time limit makes a hang a failure).
TEST_CASE("grouped files: an I/O error on one member fails every rank the same way, the old checkpoint intact",
          "[.faults][groups]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("groups_faults_" + std::to_string(w)) + "/ckpt";
    {
        State s(r, w, true);
        cairn::save(s.sd, dir, MPI_COMM_WORLD, grouped(cairn::DataFiles::in_all(1)));
    }
    const auto file = group_name(0, w - 1);
    struct Case {
        const char* point;
        std::uint64_t after;
        int error;
        const char* what; // what the failing rank's own error says failed
        bool buffered = false; // write(2) (the default), not direct writes (CAIRN_GROUP_WRITES=direct)
    };
    const Case cases[] = {
        {"mpiio.open", 0, EACCES, "cannot create"},
        {"mpiio.write", 0, ENOSPC, "write of"},
        {"mpiio.write", 1, EIO, "write of"},
        {"mpiio.sync", 0, EIO, "sync failed"},
        {"mpiio.close", 0, EIO, "close failed"},
        {"mpiio.write", 1, ENOSPC, "write of", true},
    };
    for (const auto& c : cases) {
        const int rank = w - 1;
        setenv("CAIRN_GROUP_WRITES", c.buffered ? "buffered" : "direct", 1);
        State s(r, w, true);
        s.step = 43;
        auto o = grouped(cairn::DataFiles::in_all(1));
        o.overwrite = true;
        o.staging_bytes = 4096; // several writes per member
        Outcome out;
        {
            cairn::testing::ScopedFault fault({c.point, rank, c.after, 1, c.error});
            out = attempt([&] { cairn::save(s.sd, dir, MPI_COMM_WORLD, o); });
            CHECK(all(cairn::testing::faults_fired() == (r == rank ? 1u : 0u)));
        }
        unsetenv("CAIRN_GROUP_WRITES");
        INFO(c.point << " after " << c.after << " on rank " << rank << (c.buffered ? " (buffered)" : "") << ": "
                     << out.what);
        CHECK(same_error_everywhere(out, cairn::Error::Kind::write));
        CHECK(all(contains(out.what, file)));
        // The failing rank's own error, on every rank: its rank, the file,
        // what failed (an open fails on every member: each reports its own).
        CHECK(all(contains(out.what, c.what)));
        CHECK(all(!contains(out.what, "another rank")));
        if (w > 1 && std::string(c.point) != "mpiio.open")
            CHECK(all(contains(out.what, "rank " + std::to_string(rank) + ": " + dir)));
        CHECK(max_seconds(out) < 30.0);
        // The checkpoint of step 42 is still there, whole.
        State back(r, w, false);
        cairn::load(back.sd, dir, MPI_COMM_WORLD);
        CHECK(all(back.matches(r, w)));
        CHECK(all(!std::filesystem::exists(dir + ".cairn-staging")));
    }
}

TEST_CASE("grouped files: errors name the writers of a data file from its name", "[groups]")
{
    using cairn::detail::distcp_writers;
    CHECK(distcp_writers("__3_0.distcp") == "rank 3");
    CHECK(distcp_writers("__0-3_1.distcp") == "ranks 0 to 3");
    CHECK(distcp_writers("__0-6x2_0.distcp") == "ranks 0 to 6 in steps of 2");
    CHECK(distcp_writers("__n4_0.distcp") == "the ranks on the node of rank 4");
    CHECK(distcp_writers("u.bin").empty());
    CHECK(distcp_writers("__a-b_0.distcp").empty());
    CHECK(distcp_writers("__0-3x_0.distcp").empty());
}

TEST_CASE("grouped files: members with nothing to write", "[groups]")
{
    // Odd ranks hold 1000 doubles each, even ranks nothing: the group still
    // opens its file together, and writes none when no member has data.
    const int w = world_size(), r = world_rank();
    const std::int64_t holders = w / 2, n = 1000 * holders;
    const std::string dir = fresh_dir("groups_empty_" + std::to_string(w)) + "/ckpt";
    {
        const std::int64_t len = r % 2 ? 1000 : 0, off = 1000 * (r / 2);
        std::vector<double> u(static_cast<std::size_t>(len));
        for (std::int64_t i = 0; i < len; ++i)
            u[i] = static_cast<double>(value_at(off + i, 5));
        cairn::StateDict sd;
        sd.add_array<double>("u", u.data(), {n}, cairn::Box{{off}, {len}});
        cairn::save(sd, dir, MPI_COMM_WORLD, grouped(cairn::DataFiles::in_all(1)));
    }
    const auto files = data_files(dir);
    CHECK(all(files.size() == (holders > 0 ? 1u : 0u)));
    if (holders > 0)
        CHECK(all(files == std::set<std::string>{group_name(0, w - 1)}));
    for (int m = 1; m <= w; ++m) {
        const bool ok = run_on(m, [&](const SubComm& sub) {
            const auto [off, len] = block(n, m, sub.rank());
            std::vector<double> u(static_cast<std::size_t>(len), -1.0);
            cairn::StateDict sd;
            sd.add_array<double>("u", u.data(), {n}, cairn::Box{{off}, {len}});
            cairn::load(sd, dir, sub.get());
            bool same = true;
            for (std::int64_t i = 0; i < len; ++i)
                same = same && u[i] == static_cast<double>(value_at(off + i, 5));
            return same;
        });
        CHECK(ok);
    }
}

TEST_CASE("grouped files: saves on one communicator reuse its groups and free them with it", "[groups]")
{
    // The groups of a communicator are split once per grouping and cached
    // on it; alternating groupings keep their own, and a freed
    // communicator's handle, reused by the next dup, finds no stale groups.
    const int w = world_size(), r = world_rank();
    const int split = (w + 1) / 2;
    const std::set<std::string> two =
        w == 1 ? std::set<std::string>{group_name(0, 0)}
               : std::set<std::string>{group_name(0, split - 1), group_name(split, w - 1)};
    const std::set<std::string> one{group_name(0, w - 1)};
    const std::string base = fresh_dir("groups_cache_" + std::to_string(w));
    int n = 0;
    for (int round = 0; round < 2; ++round) {
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        for (const auto files : {cairn::DataFiles::in_all(2), cairn::DataFiles::in_all(1), cairn::DataFiles::in_all(2)}) {
            const std::string dir = base + "/ckpt" + std::to_string(n++);
            {
                State s(r, w, true);
                cairn::save(s.sd, dir, comm, grouped(files));
            }
            CHECK(all(data_files(dir) == (files.count == 1 ? one : two)));
            State s(r, w, false);
            cairn::load(s.sd, dir, comm);
            CHECK(all(s.matches(r, w)));
        }
        MPI_Comm_free(&comm);
    }
}

TEST_CASE("grouped files: the same bytes written directly or through the page cache", "[groups]")
{
    // With CAIRN_GROUP_WRITES=direct a durable save writes each member's
    // region with O_DIRECT where the file system has it (ext4, XFS); by
    // default, or without fsync, with MPI_File_write_at.
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("groups_paths_" + std::to_string(w));
    const std::string dirs[3] = {base + "/direct", base + "/buffered", base + "/nosync"};
    for (int k = 0; k < 3; ++k) {
        if (k == 0)
            setenv("CAIRN_GROUP_WRITES", "direct", 1);
        State s(r, w, true);
        auto o = grouped(cairn::DataFiles::in_all(1));
        o.staging_bytes = 4096; // several writes per member, small ones packed between large ones
        o.fsync = k != 2;
        cairn::save(s.sd, dirs[k], MPI_COMM_WORLD, o);
        unsetenv("CAIRN_GROUP_WRITES");
    }
    const auto file = group_name(0, w - 1);
    const auto read_all = [](const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto direct = read_all(dirs[0] + "/" + file), plain = read_all(dirs[1] + "/" + file);
    CHECK(all(read_all(dirs[2] + "/" + file) == plain));
    // The direct file spans every region rounded up to the alignment: at
    // most the alignment's padding longer, zeros (on ext4 and XFS a whole
    // number of 4 KiB blocks).
    CHECK(all(direct.size() >= plain.size() && direct.size() - plain.size() < 4096));
    CHECK(all(direct.compare(0, plain.size(), plain) == 0));
    CHECK(all(direct.find_first_not_of('\0', plain.size()) == std::string::npos));
    if (w > 1 && direct_writes_here(dirs[0])) // one rank alone writes a per-rank file
        CHECK(all(direct.size() % 4096 == 0));
    for (const auto& dir : dirs) {
        State s(r, w, false);
        cairn::load(s.sd, dir, MPI_COMM_WORLD);
        CHECK(all(s.matches(r, w)));
        CHECK(all(cairn::verify(dir, MPI_COMM_WORLD).ok()));
    }
}
