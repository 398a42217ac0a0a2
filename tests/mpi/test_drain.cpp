// Draining a per-rank checkpoint (a node-local step) into another directory
// and committing it there (src/levels/drain.hpp): bitwise loads, replacement
// of a committed checkpoint, failures that name the file and leave the
// committed checkpoint intact, prompt cancellation; the levels record.
#include "fixtures.hpp"
#include "outcome.hpp"

#include "comm/protocol.hpp"
#include "levels/drain.hpp"

#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include <cstdlib>
#include <vector>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

using namespace cairn_test;
namespace stdfs = std::filesystem;
using cairn::detail::Drain;

namespace {

// A 1-D field of doubles split by blocks, a 2-D int32 field split by rows
// and the step; element i of field "u" of step s holds s * 1e6 + i + 0.25.
struct State {
    std::int64_t n = 0;
    cairn::Box box, box2;
    std::vector<double> u;
    std::vector<std::int32_t> v;
    std::int64_t step = -1;
    cairn::StateDict dict;

    State(std::int64_t s, bool fill)
    {
        const int p = world_size(), r = world_rank();
        n = 40000 + 13 * p;
        box = cairn::Box{{0}, {n}};
        std::tie(box.offsets[0], box.shape[0]) = block(n, p, r);
        box2 = cairn::Box{{0, 0}, {17, 33}};
        std::tie(box2.offsets[0], box2.shape[0]) = block(17, p, r);
        u.assign(static_cast<std::size_t>(box.shape[0]), -1.0);
        v.assign(static_cast<std::size_t>(box2.volume()), -1);
        if (fill) {
            step = s;
            for (std::int64_t i = 0; i < box.shape[0]; ++i)
                u[static_cast<std::size_t>(i)] = static_cast<double>(s) * 1e6 + static_cast<double>(box.offsets[0] + i) + 0.25;
            for (std::size_t k = 0; k < v.size(); ++k)
                v[k] = static_cast<std::int32_t>(s * 100000 + static_cast<std::int64_t>(box2.offsets[0]) * 33 +
                                                 static_cast<std::int64_t>(k));
        }
        dict.add_array<double>("u", u.data(), cairn::Shape{n}, box);
        dict.add_array<std::int32_t>("field.v", v.data(), cairn::Shape{17, 33}, box2);
        dict.add_scalar("step", &step);
    }

    /// Whether this rank holds step `s`'s values, bit for bit.
    bool holds(std::int64_t s) const
    {
        State want(s, true);
        return step == s && std::memcmp(u.data(), want.u.data(), u.size() * sizeof(double)) == 0 && v == want.v;
    }
};

void save_step(std::int64_t s, const std::string& path, bool overwrite = false)
{
    State st(s, true);
    cairn::SaveOptions o;
    o.layout = cairn::Layout::per_rank;
    o.files_per_rank = 2;
    o.overwrite = overwrite;
    cairn::save(st.dict, path, MPI_COMM_WORLD, o);
}

/// Whether the checkpoint at `path` loads as step `s` on every rank.
bool loads_step(std::int64_t s, const std::string& path)
{
    State got(s, false);
    bool ok = true;
    try {
        cairn::load(got.dict, path, MPI_COMM_WORLD);
        ok = got.holds(s);
    } catch (const std::exception& e) {
        UNSCOPED_INFO("rank " << world_rank() << ": load of " << path << ": " << e.what());
        ok = false;
    }
    return all(ok);
}

std::uint64_t bytes_of(const std::string& dir, const std::vector<std::string>& files)
{
    std::uint64_t b = 0;
    for (const auto& f : files)
        b += stdfs::file_size(dir + "/" + f);
    return b;
}

/// Every rank drains its own data files of `src` into `dst`; errors are
/// agreed (agree(), phase "drain").
std::uint64_t drain_all(const std::string& src, const std::string& dst, std::vector<std::string> files = {},
                        bool use_files = false)
{
    const cairn::detail::Comm c(MPI_COMM_WORLD);
    std::exception_ptr err;
    std::uint64_t bytes = 0;
    try {
        if (!use_files)
            files = cairn::detail::rank_data_files(src, c.rank);
        Drain d(src, dst, files, true);
        bytes = d.wait();
        if (!d.done())
            throw std::runtime_error("done() is false after wait()");
    } catch (...) {
        err = std::current_exception();
    }
    cairn::detail::agree(c, "drain", err);
    return bytes;
}

bool no_part_files(const std::string& dir)
{
    std::error_code ec;
    if (!stdfs::is_directory(dir, ec))
        return true;
    for (const auto& e : stdfs::directory_iterator(dir))
        if (e.path().string().find(".cairn-part") != std::string::npos)
            return false;
    return true;
}

// What destroying a Drain of a sparse file `big` of `size` bytes in its
// first copy did: whether its temporary file had appeared (bounded wait),
// whether it had finished, and how long the destruction took.
struct Stopped {
    bool part_seen = false;
    bool done = false;
    double seconds = 0;
};

Stopped destroy_while_copying(const std::string& src, const std::string& dst, std::uint64_t size, bool fsync,
                              cairn::detail::DrainCopy copy)
{
    stdfs::create_directories(src);
    {
        const int fd = ::open((src + "/big").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0); // sparse: no blocks at the source
        ::close(fd);
    }
    Stopped out;
    auto d = std::make_unique<Drain>(src, dst, std::vector<std::string>{"big"}, fsync, copy);
    // The copy has begun once its temporary file exists (bounded wait).
    const auto t0 = std::chrono::steady_clock::now();
    while (!d->done() && !stdfs::exists(dst + "/big.cairn-part") &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
        std::this_thread::yield();
    out.part_seen = stdfs::exists(dst + "/big.cairn-part");
    out.done = d->done();
    const auto t1 = std::chrono::steady_clock::now();
    d.reset(); // stops between two writes
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    return out;
}

} // namespace

TEST_CASE("drain: a drained per-rank step commits and loads bitwise", "[drain]")
{
    const auto dir = fresh_dir("drain_basic");
    const auto local = dir + "/local/step-3", path = dir + "/fs/step-3";
    save_step(3, local);
    const auto files = cairn::detail::rank_data_files(local, world_rank());
    CHECK(all(files.size() == 2));
    const auto want = bytes_of(local, files);

    // No checkpoint at the path: the ranks drain into it directly, and what
    // an interrupted drain left there goes first.
    const cairn::detail::Comm c(MPI_COMM_WORLD);
    if (world_rank() == 0) {
        stdfs::create_directories(path);
        std::ofstream(path + "/__0_0.distcp.cairn-part") << "partial";
        std::ofstream(path + "/.metadata.h5.tmp") << "partial";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(all(cairn::detail::drain_destination(c, path) == path));
    CHECK(all(no_part_files(path) && !stdfs::exists(path + "/.metadata.h5.tmp")));
    std::uint64_t got = 0;
    const auto o = attempt([&] { got = drain_all(local, path); });
    REQUIRE(all(!o.threw && !o.foreign));
    CHECK(all(got == want));
    // Copied, not committed: no metadata yet, so no checkpoint at the path.
    CHECK(all(!cairn::is_distcp_checkpoint(path)));
    CHECK(all(no_part_files(path)));

    cairn::detail::commit_drain(c, local, path, path, true);
    CHECK(all(cairn::is_distcp_checkpoint(path)));
    CHECK(loads_step(3, path));
    const auto report = cairn::verify(path, MPI_COMM_WORLD);
    CHECK(all(report.ok() && report.checksums && report.bytes > 0));
    // The node-local step is untouched and still a checkpoint.
    CHECK(loads_step(3, local));
    // The drained files are the node-local files, byte for byte.
    bool same = true;
    for (const auto& f : files) {
        std::ifstream a(local + "/" + f, std::ios::binary), b(path + "/" + f, std::ios::binary);
        const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
        same = same && !sa.empty() && sa == sb;
    }
    CHECK(all(same));
}

TEST_CASE("drain: over a committed checkpoint, replaced only at the commit", "[drain]")
{
    const auto dir = fresh_dir("drain_replace");
    const auto path = dir + "/fs/latest", staging = path + ".cairn-staging", local = dir + "/local/step-5";
    save_step(4, path);
    save_step(5, local);
    const cairn::detail::Comm c(MPI_COMM_WORLD);
    // A stale staging directory of an earlier attempt is emptied first.
    if (world_rank() == 0) {
        stdfs::create_directories(staging);
        std::ofstream(staging + "/__99_0.distcp") << "stale";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(all(cairn::detail::drain_destination(c, path) == staging));
    CHECK(all(!stdfs::exists(staging + "/__99_0.distcp")));
    const auto o = attempt([&] { drain_all(local, staging); });
    REQUIRE(all(!o.threw && !o.foreign));
    // Drained but not committed: the old checkpoint is what loads.
    CHECK(loads_step(4, path));
    cairn::detail::commit_drain(c, local, staging, path, true);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(loads_step(5, path));
    CHECK(all(cairn::verify(path, MPI_COMM_WORLD).ok()));
    CHECK(all(!stdfs::exists(staging) && !stdfs::exists(path + ".cairn-old")));
}

TEST_CASE("drain: an unreadable source file fails on its rank, agreed, the checkpoint intact", "[drain]")
{
    const auto dir = fresh_dir("drain_bad_source");
    const auto path = dir + "/fs/latest", staging = path + ".cairn-staging", local = dir + "/local/step-7";
    save_step(6, path);
    save_step(7, local);
    const int last = world_size() - 1;
    auto files = cairn::detail::rank_data_files(local, world_rank());
    const std::string missing = "__" + std::to_string(last) + "_9.distcp";
    if (world_rank() == last)
        files.push_back(missing);
    const auto o = attempt([&] { drain_all(local, staging, files, true); });
    CHECK(same_error_everywhere(o, cairn::Error::Kind::read));
    INFO(o.what);
    CHECK(all(contains(o.what, local + "/" + missing) && contains(o.what, "rank " + std::to_string(last))));
    CHECK(all(no_part_files(staging)));
    CHECK(all(!stdfs::exists(staging + "/" + missing)));
    CHECK(loads_step(6, path));

    // A source that is no regular file is refused as well, naming it.
    if (world_rank() == last)
        stdfs::create_directories(local + "/__dir.distcp");
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::string> dir_file{"__dir.distcp"};
    const auto o2 = attempt([&] { drain_all(local, staging, world_rank() == last ? dir_file : std::vector<std::string>{}, true); });
    CHECK(same_error_everywhere(o2, cairn::Error::Kind::read));
    CHECK(all(contains(o2.what, local + "/__dir.distcp") && contains(o2.what, "not a regular file")));

    // The commit of a step that is not committed fails everywhere, removes
    // the staging directory and leaves the checkpoint.
    const cairn::detail::Comm c(MPI_COMM_WORLD);
    const auto o3 = attempt([&] {
        drain_all(local, staging);
        cairn::detail::commit_drain(c, dir + "/local/none", staging, path, true);
    });
    CHECK(same_error_everywhere(o3, cairn::Error::Kind::not_found));
    CHECK(all(contains(o3.what, dir + "/local/none")));
    CHECK(all(!stdfs::exists(staging)));
    CHECK(loads_step(6, path));
}

TEST_CASE("drain: a destination that cannot be written fails naming it, the checkpoint intact", "[drain]")
{
    const auto dir = fresh_dir("drain_bad_destination");
    const auto path = dir + "/fs/latest", local = dir + "/local/step-9";
    save_step(8, path);
    save_step(9, local);
    // A directory under a regular file.
    if (world_rank() == 0)
        std::ofstream(dir + "/plain") << "a regular file\n";
    MPI_Barrier(MPI_COMM_WORLD);
    const auto o = attempt([&] { drain_all(local, dir + "/plain/staging"); });
    CHECK(same_error_everywhere(o, cairn::Error::Kind::write));
    CHECK(all(contains(o.what, dir + "/plain/staging")));
    CHECK(loads_step(8, path));
    const cairn::detail::Comm c(MPI_COMM_WORLD);
    const auto od = attempt([&] { cairn::detail::drain_destination(c, dir + "/plain"); });
    CHECK(same_error_everywhere(od, cairn::Error::Kind::write));
    CHECK(all(contains(od.what, dir + "/plain") && contains(od.what, "not a directory")));

    // One rank's file cannot be created (its temporary name is taken by a
    // directory): that rank's error, naming the file, on every rank.
    const int last = world_size() - 1;
    const auto staging = path + ".cairn-staging";
    const auto files = cairn::detail::rank_data_files(local, world_rank());
    if (world_rank() == last)
        stdfs::create_directories(staging + "/" + files.front() + ".cairn-part/x");
    MPI_Barrier(MPI_COMM_WORLD);
    const auto o2 = attempt([&] { drain_all(local, staging); });
    CHECK(same_error_everywhere(o2, cairn::Error::Kind::write));
    INFO(o2.what);
    CHECK(all(contains(o2.what, staging + "/__" + std::to_string(last) + "_0.distcp") &&
              contains(o2.what, "rank " + std::to_string(last))));
    CHECK(loads_step(8, path));
}

TEST_CASE("drain: an injected copy failure (drain.copy) on one rank is agreed, naming the file", "[drain]")
{
    const auto dir = fresh_dir("drain_copy_fault");
    const auto path = dir + "/fs/latest", local = dir + "/local/step-9";
    save_step(8, path);
    save_step(9, local);
    const int last = world_size() - 1;
    const auto staging = path + ".cairn-staging";
    // The second of the last rank's two files: ENOSPC is the destination's
    // fault (WriteError), EIO the copy's (ReadError).
    for (const auto& [err, kind] : {std::pair{ENOSPC, cairn::Error::Kind::write},
                                    std::pair{EIO, cairn::Error::Kind::read}}) {
        INFO("errno " << err);
        cairn::detail::Comm c(MPI_COMM_WORLD);
        const auto to = cairn::detail::drain_destination(c, path);
        CHECK(to == staging);
        cairn::testing::ScopedFault fault({"drain.copy", last, 1, 1, err});
        const auto o = attempt([&] { drain_all(local, to); });
        INFO(o.what);
        CHECK(same_error_everywhere(o, kind));
        CHECK(all(contains(o.what, staging + "/__" + std::to_string(last) + "_1.distcp") &&
                  contains(o.what, "rank " + std::to_string(last))));
        CHECK(all(cairn::testing::faults_fired() == (world_rank() == last ? 1u : 0u)));
        CHECK(all(no_part_files(staging)));
        CHECK(loads_step(8, path));
    }
}

TEST_CASE("drain: destruction while copying a large file returns promptly", "[drain]")
{
    const auto dir = fresh_dir("drain_cancel");
    const auto src = dir + "/src-" + std::to_string(world_rank()), dst = dir + "/dst-" + std::to_string(world_rank());
    const std::uint64_t size = std::uint64_t(4) << 30;
    // The destruction must not copy the rest of 4 GiB first.
    const Stopped stop = destroy_while_copying(src, dst, size, false, cairn::detail::DrainCopy::automatic);
    const bool started = stop.part_seen || stop.done;
    const double seconds = stop.seconds;
    CHECK(all(started));
    INFO("destruction took " << seconds << " s");
    CHECK(all(seconds < 3.0)); // a whole copy of 4 GiB takes several times longer
    // No partial file is left under a data file's name, nor a temporary one.
    std::error_code ec;
    const bool whole_or_absent = !stdfs::exists(dst + "/big") || stdfs::file_size(dst + "/big", ec) == size;
    CHECK(all(whole_or_absent && no_part_files(dst)));
    stdfs::remove_all(src);
    stdfs::remove_all(dst);
}

namespace {

/// The two copies a Drain can make, with their names.
const std::pair<cairn::detail::DrainCopy, const char*> both_copies[] = {{cairn::detail::DrainCopy::direct, "direct"},
                                                                        {cairn::detail::DrainCopy::kernel, "kernel"}};

/// Writes `size` bytes of a pattern of (`seed`, offset) to `path`.
void write_pattern(const std::string& path, std::uint64_t size, std::uint64_t seed)
{
    std::vector<std::uint64_t> w(static_cast<std::size_t>(size / 8 + 1));
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : w) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v = x;
    }
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(w.data()),
                                                static_cast<std::streamsize>(size));
}

std::string file_bytes(const std::string& path)
{
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    std::string b(static_cast<std::size_t>(std::max<std::streamoff>(0, f.tellg())), '\0');
    f.seekg(0);
    f.read(b.data(), static_cast<std::streamsize>(b.size()));
    return f || b.empty() ? b : std::string("(unreadable)");
}

/// Whether `dir` takes an aligned O_DIRECT write (probed with a file of its own).
bool takes_direct_writes(const std::string& dir)
{
    const auto probe = dir + "/direct-probe-" + std::to_string(world_rank());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    bool ok = false;
    if (fd >= 0) {
        void* p = nullptr;
        if (::posix_memalign(&p, 4096, 4096) == 0) {
            std::memset(p, 7, 4096);
            ok = ::pwrite(fd, p, 4096, 0) == 4096;
            std::free(p);
        }
        ::close(fd);
    }
    stdfs::remove(probe);
    return ok;
}

} // namespace

TEST_CASE("drain: direct and kernel copies of any size are byte for byte", "[drain]")
{
    const auto dir = fresh_dir("drain_sizes");
    const int r = world_rank();
    const auto src = dir + "/src-" + std::to_string(r);
    stdfs::create_directories(src);
    // Empty, under a page, not a multiple of 4096, over 4 MiB; on rank 0
    // also one of more 8 MiB direct writes than are in flight at once; on
    // the last rank one copied by two streams at once (64 MiB and more),
    // the second's range ending in an unaligned tail.
    std::vector<std::pair<std::string, std::uint64_t>> files{
        {"empty", 0}, {"small", 1000}, {"odd", 3 * 4096 + 123}, {"big", (std::uint64_t(5) << 20) + 7}};
    if (r == 0)
        files.emplace_back("pieces", (std::uint64_t(40) << 20) + 3 * 4096);
    if (r == world_size() - 1)
        files.emplace_back("streams", (std::uint64_t(67) << 20) + 5 * 4096 + 77);
    std::vector<std::string> names;
    std::uint64_t total = 0, aligned = 0;
    for (std::size_t k = 0; k < files.size(); ++k) {
        write_pattern(src + "/" + files[k].first, files[k].second, static_cast<std::uint64_t>(r * 16) + k);
        names.push_back(files[k].first);
        total += files[k].second;
        aligned += files[k].second / 4096 * 4096;
    }
    const bool direct_ok = takes_direct_writes(dir);
    UNSCOPED_INFO("rank " << r << ": " << dir << (direct_ok ? " takes" : " refuses") << " O_DIRECT");
    for (const auto& [copy, name] : both_copies) {
        INFO("copy " << name);
        const auto dst = dir + "/dst-" + name + "-" + std::to_string(r);
        std::uint64_t got = 0, direct = 0;
        bool ok = true;
        try {
            Drain d(src, dst, names, true, copy);
            got = d.wait();
            direct = d.direct_bytes();
        } catch (const std::exception& e) {
            UNSCOPED_INFO("rank " << r << ": " << e.what());
            ok = false;
        }
        REQUIRE(all(ok));
        CHECK(all(got == total));
        bool same = true;
        for (const auto& [f, size] : files)
            same = same && stdfs::file_size(dst + "/" + f) == size && file_bytes(src + "/" + f) == file_bytes(dst + "/" + f);
        CHECK(all(same));
        CHECK(all(no_part_files(dst)));
        // Direct: every aligned byte where the file system takes O_DIRECT,
        // the tails by the kernel copy; kernel: none.
        const std::uint64_t want = copy == cairn::detail::DrainCopy::direct && direct_ok ? aligned : 0;
        UNSCOPED_INFO("rank " << r << ": " << direct << " bytes direct, " << want << " expected");
        CHECK(all(direct == want));
    }
}

TEST_CASE("drain: one stream's failure (drain.range) fails the file and stops the other", "[drain]")
{
    const auto dir = fresh_dir("drain_range_fault");
    const int r = world_rank(), last = world_size() - 1;
    const auto src = dir + "/src-" + std::to_string(r);
    stdfs::create_directories(src);
    // Copied by two streams (64 MiB and more); the second stream to start
    // fails on the last rank, whichever it is.
    const std::uint64_t size = (std::uint64_t(66) << 20) + 4096 + 9;
    write_pattern(src + "/f", size, static_cast<std::uint64_t>(r) + 77);
    for (const auto& [copy, name] : both_copies) {
        INFO("copy " << name);
        const auto dst = dir + "/dst-" + name + "-" + std::to_string(r);
        std::string what;
        std::uint64_t got = 0;
        {
            cairn::testing::ScopedFault fault({"drain.range", last, 1, 1, ENOSPC});
            try {
                Drain d(src, dst, {"f"}, true, copy);
                got = d.wait();
            } catch (const cairn::error::WriteError& e) {
                what = e.what();
            }
            CHECK(all(cairn::testing::faults_fired() == (r == last ? 1u : 0u)));
        }
        UNSCOPED_INFO("rank " << r << ": " << what);
        const bool failed_here = contains(what, dst + "/f.cairn-part") && contains(what, std::strerror(ENOSPC));
        CHECK(all(r == last ? failed_here && got == 0 : what.empty() && got == size));
        CHECK(all(r == last ? !stdfs::exists(dst + "/f") : file_bytes(src + "/f") == file_bytes(dst + "/f")));
        CHECK(all(no_part_files(dst)));
    }
}

TEST_CASE("drain: CAIRN_DRAIN_COPY selects the copy, a wrong value is refused", "[drain]")
{
    const auto dir = fresh_dir("drain_env");
    const int r = world_rank();
    const auto src = dir + "/src-" + std::to_string(r), dst = dir + "/dst-" + std::to_string(r);
    stdfs::create_directories(src);
    write_pattern(src + "/f", 64 * 4096, static_cast<std::uint64_t>(r));
    const char* old = std::getenv("CAIRN_DRAIN_COPY");
    const std::string saved = old ? old : "";
    const bool direct_ok = takes_direct_writes(dir);
    for (const std::string v : {"direct", "kernel"}) {
        INFO("CAIRN_DRAIN_COPY=" << v);
        ::setenv("CAIRN_DRAIN_COPY", v.c_str(), 1);
        std::uint64_t direct = 1, got = 0;
        {
            Drain d(src, dst + "-" + v, {"f"}, true);
            got = d.wait();
            direct = d.direct_bytes();
        }
        const std::uint64_t want = v == "direct" && direct_ok ? 64 * 4096 : 0;
        CHECK(all(got == 64 * 4096 && direct == want && file_bytes(src + "/f") == file_bytes(dst + "-" + v + "/f")));
    }
    ::setenv("CAIRN_DRAIN_COPY", "fast", 1);
    std::string what;
    try {
        Drain d(src, dst, {"f"}, true);
        d.wait();
    } catch (const cairn::error::WrongAPIUsage& e) {
        what = e.what();
    }
    if (old)
        ::setenv("CAIRN_DRAIN_COPY", saved.c_str(), 1);
    else
        ::unsetenv("CAIRN_DRAIN_COPY");
    INFO(what);
    CHECK(all(contains(what, "CAIRN_DRAIN_COPY") && contains(what, "fast")));
}

namespace {

/// The pages of `path` in the page cache (mincore over a mapping of it);
/// -1 when it cannot be mapped.
long resident_pages(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st {};
    long n = -1;
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
        const auto len = static_cast<std::size_t>(st.st_size);
        void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            const long page = ::sysconf(_SC_PAGESIZE);
            std::vector<unsigned char> vec((len + static_cast<std::size_t>(page) - 1) / static_cast<std::size_t>(page));
            if (::mincore(p, len, vec.data()) == 0)
                n = static_cast<long>(std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return c & 1; }));
            ::munmap(p, len);
        }
    }
    ::close(fd);
    return n;
}

} // namespace

TEST_CASE("drain: a durable copy leaves no pages of its own in the page cache", "[drain]")
{
    const auto dir = fresh_dir("drain_drop");
    const int r = world_rank();
    const auto src = dir + "/src-" + std::to_string(r);
    stdfs::create_directories(src);
    // Two streams, each past its 64 MiB of early writeback.
    const std::uint64_t size = std::uint64_t(160) << 20;
    write_pattern(src + "/f", size, static_cast<std::uint64_t>(r) + 11);
    struct statfs fs {};
    const bool ram = ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
    if (ram)
        WARN("rank " << r << ": " << dir << " is a RAM disk: its pages are the file, nothing to drop");
    for (const auto& [copy, name] : both_copies) {
        INFO("copy " << name);
        const auto dst = dir + "/dst-" + name + "-" + std::to_string(r);
        {
            Drain d(src, dst, {"f"}, true, copy);
            d.wait();
        }
        const long resident = resident_pages(dst + "/f");
        UNSCOPED_INFO("rank " << r << ": " << resident << " pages of " << dst << "/f in the page cache");
        CHECK(all(resident >= 0 && (ram || resident == 0)));
        CHECK(all(file_bytes(src + "/f") == file_bytes(dst + "/f")));
    }
}

TEST_CASE("drain: CAIRN_DRAIN_STREAMS sets the streams, a wrong count is refused", "[drain]")
{
    const auto dir = fresh_dir("drain_streams");
    const int r = world_rank();
    const auto src = dir + "/src-" + std::to_string(r), dst = dir + "/dst-" + std::to_string(r);
    stdfs::create_directories(src);
    // Three streams of 32 MiB and more, the last with an unaligned tail.
    const std::uint64_t size = (std::uint64_t(97) << 20) + 4096 * 3 + 1;
    write_pattern(src + "/f", size, static_cast<std::uint64_t>(r) + 5);
    const char* old = std::getenv("CAIRN_DRAIN_STREAMS");
    const std::string saved = old ? old : "";
    for (const std::string v : {"1", "3", "64"}) {
        INFO("CAIRN_DRAIN_STREAMS=" << v);
        ::setenv("CAIRN_DRAIN_STREAMS", v.c_str(), 1);
        std::uint64_t got = 0;
        {
            Drain d(src, dst + "-" + v, {"f"}, true, cairn::detail::DrainCopy::kernel);
            got = d.wait();
        }
        CHECK(all(got == size && file_bytes(src + "/f") == file_bytes(dst + "-" + v + "/f")));
    }
    std::vector<std::string> refused;
    for (const std::string v : {"0", "65", "two", "2x"}) {
        ::setenv("CAIRN_DRAIN_STREAMS", v.c_str(), 1);
        try {
            Drain d(src, dst, {"f"}, true);
            d.wait();
        } catch (const cairn::error::WrongAPIUsage& e) {
            if (contains(e.what(), "CAIRN_DRAIN_STREAMS") && contains(e.what(), "'" + v + "'"))
                refused.push_back(v);
        }
    }
    if (old)
        ::setenv("CAIRN_DRAIN_STREAMS", saved.c_str(), 1);
    else
        ::unsetenv("CAIRN_DRAIN_STREAMS");
    CHECK(all(refused.size() == 4));
    // Given to the constructor: taken as it is, out of range refused.
    std::string what;
    try {
        Drain d(src, dst, {"f"}, true, cairn::detail::DrainCopy::kernel, 65);
    } catch (const cairn::error::WrongAPIUsage& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(all(contains(what, "65 streams") && contains(what, src)));
    CHECK(all(!stdfs::exists(dst + "/f")));
}

TEST_CASE("drain: destruction during a direct copy returns promptly, nothing left", "[drain]")
{
    const auto dir = fresh_dir("drain_cancel_direct");
    const auto src = dir + "/src-" + std::to_string(world_rank()), dst = dir + "/dst-" + std::to_string(world_rank());
    // Stopped between two 8 MiB writes.
    const Stopped stop = destroy_while_copying(src, dst, std::uint64_t(512) << 20, true, cairn::detail::DrainCopy::direct);
    const bool started = stop.part_seen;
    const double seconds = stop.seconds;
    CHECK(all(started));
    INFO("destruction took " << seconds << " s");
    CHECK(all(seconds < 3.0));
    // Stopped: neither the whole file under its name nor a partial one.
    CHECK(all(!stdfs::exists(dst + "/big") && no_part_files(dst)));
    stdfs::remove_all(src);
    stdfs::remove_all(dst);
}

TEST_CASE("drain: Drain refuses file names that leave the step's directory", "[drain]")
{
    bool refused = false;
    try {
        Drain d("a", "b", {"../x"}, false);
    } catch (const cairn::error::WrongAPIUsage& e) {
        refused = std::string(e.what()).find("../x") != std::string::npos;
    }
    CHECK(all(refused));
}

TEST_CASE("drain: a per-rank save removes the copies a killed drain left", "[drain]")
{
    const auto dir = fresh_dir("drain_killed");
    const auto path = dir + "/fs/step";
    // What a drain killed mid-copy leaves: data files under their
    // temporary names, no metadata.
    if (world_rank() == 0) {
        stdfs::create_directories(path);
        std::ofstream(path + "/__0_0.distcp.cairn-part") << "partial";
        std::ofstream(path + "/__7_1.distcp.cairn-part") << "partial";
        std::ofstream(path + "/notes.txt") << "not Cairn's";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    save_step(11, path);
    CHECK(loads_step(11, path));
    CHECK(all(no_part_files(path) && stdfs::exists(path + "/notes.txt")));
}

TEST_CASE("drain: a commit that fails leaves the committed checkpoint", "[drain]")
{
    const auto dir = fresh_dir("drain_commit_fault");
    const auto path = dir + "/fs/latest", staging = path + ".cairn-staging", local = dir + "/local/step-13";
    save_step(12, path);
    save_step(13, local);
    const cairn::detail::Comm c(MPI_COMM_WORLD);
    // The coordinator's renames of the commit: the metadata's copy into
    // .metadata.h5.tmp, .metadata.h5.tmp to metadata.h5, the exchange with
    // the committed checkpoint; its directory syncs: the data files' entries,
    // the metadata's, the parent's after the exchange (then swapped back).
    const struct {
        const char* point;
        std::uint64_t after;
    } faults[] = {{"fs.rename", 0}, {"fs.rename", 1}, {"fs.rename", 2},
                  {"fs.fsync", 0},  {"fs.fsync", 1},  {"fs.fsync", 2}};
    for (const auto& f : faults) {
        INFO(f.point << " after " << f.after);
        CHECK(all(cairn::detail::drain_destination(c, path) == staging));
        const auto o = attempt([&] { drain_all(local, staging); });
        REQUIRE(all(!o.threw && !o.foreign));
        Outcome oc;
        {
            cairn::testing::ScopedFault fault({f.point, 0, f.after, 1, EIO});
            oc = attempt([&] { cairn::detail::commit_drain(c, local, staging, path, true); });
        }
        INFO(oc.what);
        CHECK(same_error_everywhere(oc, cairn::Error::Kind::write));
        CHECK(all(contains(oc.what, "Input/output error") && contains(oc.what, "drain commit")));
        CHECK(loads_step(12, path));
        CHECK(all(!stdfs::exists(staging) && !stdfs::exists(path + ".cairn-old")));
    }
    // Without a fault the same drain commits.
    CHECK(all(cairn::detail::drain_destination(c, path) == staging));
    const auto o = attempt([&] { drain_all(local, staging); });
    REQUIRE(all(!o.threw && !o.foreign));
    cairn::detail::commit_drain(c, local, staging, path, true);
    CHECK(loads_step(13, path));
}

// ---- the levels record (each rank its own root) ----

namespace {

std::string rank_root(const std::string& dir)
{
    const auto root = dir + "/root-" + std::to_string(world_rank());
    stdfs::create_directories(root);
    return root;
}

void put_text(const std::string& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

/// The FormatError message of reading `root`'s record ("" when none).
std::string format_error(const std::string& root)
{
    cairn::detail::LevelRecord r;
    try {
        cairn::detail::read_level_record(root, r);
    } catch (const cairn::error::FormatError& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("levels record: written atomically, read back as written", "[drain]")
{
    const auto dir = fresh_dir("levels_record");
    const auto root = rank_root(dir);
    cairn::detail::LevelRecord r, got;
    CHECK(all(!cairn::detail::read_level_record(root, got) && got.steps.empty()));

    r.local_dir = "/dev/shm/run-%n";
    r.redundancy = "xor:4";
    r.nodes = 3;
    r.ranks = 6;
    r.steps = {{10, false, true}, {20, true, true}, {30, true, false}};
    cairn::detail::write_level_record(root, r, true);
    REQUIRE(all(cairn::detail::read_level_record(root, got)));
    bool same = got.local_dir == r.local_dir && got.redundancy == r.redundancy && got.nodes == 3 && got.ranks == 6 &&
                got.steps.size() == 3;
    for (std::size_t i = 0; same && i < 3; ++i)
        same = got.steps[i].step == r.steps[i].step && got.steps[i].node_local == r.steps[i].node_local &&
               got.steps[i].file_system == r.steps[i].file_system;
    CHECK(all(same));
    std::ifstream in(root + "/.cairn-levels");
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    CHECK(all(contains(text, "\"format\": \"cairn-levels\"") && contains(text, "\"version\": 1")));

    // Replaced whole; no temporary file stays.
    r.steps = {{40, true, false}};
    r.redundancy = "partner";
    cairn::detail::write_level_record(root, r, false);
    REQUIRE(all(cairn::detail::read_level_record(root, got)));
    CHECK(all(got.steps.size() == 1 && got.steps[0].step == 40 && got.redundancy == "partner"));
    CHECK(all(!stdfs::exists(root + "/.cairn-levels.cairn-tmp")));
}

TEST_CASE("levels record: damage and unwritable roots are named", "[drain]")
{
    const auto dir = fresh_dir("levels_record_damage");
    const auto root = rank_root(dir), file = root + "/.cairn-levels";
    put_text(file, "{\"format\": \"cairn-levels\", \"version\": 1,");
    auto e = format_error(root);
    CHECK(all(contains(e, file) && contains(e, "not JSON")));

    put_text(file, R"({"format": "cairn-levels", "version": 1, "local_dir": "/l", "nodes": 1, "ranks": 1, "steps": []})");
    e = format_error(root);
    CHECK(all(contains(e, file) && contains(e, "\"redundancy\"")));

    put_text(file, R"({"format": "cairn-levels", "version": 1, "local_dir": "/l", "redundancy": "none", "nodes": 1,
                      "ranks": 1, "steps": [{"step": 5, "node_local": true, "file_system": false},
                                            {"step": 2, "node_local": true, "file_system": false}]})");
    e = format_error(root);
    CHECK(all(contains(e, file) && contains(e, "ascending")));

    put_text(file, R"({"format": "cairn-levels", "version": 1, "local_dir": "/l", "redundancy": "none", "nodes": 1,
                      "ranks": "one", "steps": []})");
    e = format_error(root);
    CHECK(all(contains(e, file) && contains(e, "\"ranks\" is not an integer")));

    put_text(file, R"({"format": "something-else", "version": 1})");
    CHECK(all(contains(format_error(root), file)));

    // A root that is a regular file: the record cannot be written there.
    put_text(root + "/plain", "x");
    std::string msg;
    try {
        cairn::detail::write_level_record(root + "/plain", cairn::detail::LevelRecord{}, false);
    } catch (const cairn::error::WriteError& w) {
        msg = w.what();
    }
    CHECK(all(contains(msg, "the levels record " + root + "/plain/.cairn-levels: cannot create")));
}
