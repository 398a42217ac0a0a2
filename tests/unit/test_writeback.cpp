// Early writeback (src/io/writeback.hpp): the pieces it cuts, that it is
// a harmless no-op where it cannot work, that it never changes a byte, and,
// where the kernel can tell (cachestat(2), Linux 6.5), that it really bounds
// the bytes of a file that are written but not yet on the device.
#include "io/writeback.hpp"
#include "unit_common.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

using cairn::detail::Writeback;
using cairn_test::TempDir;

namespace {

constexpr std::uint64_t MiB = std::uint64_t(1) << 20;

std::vector<char> pattern(std::size_t n, unsigned seed)
{
    std::vector<char> v(n);
    std::uint32_t x = seed * 2654435761u + 1;
    for (auto& c : v) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>(x >> 24);
    }
    return v;
}

void pwrite_all(int fd, const char* p, std::uint64_t n, std::uint64_t off)
{
    while (n > 0) {
        const auto w = ::pwrite(fd, p, n, static_cast<off_t>(off));
        REQUIRE(w > 0);
        p += w;
        off += static_cast<std::uint64_t>(w);
        n -= static_cast<std::uint64_t>(w);
    }
}

std::vector<char> slurp(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

} // namespace

TEST_CASE("writeback: pieces are a quarter of the limit, at least 1 MiB; 0 is off", "[writeback]")
{
    CHECK(Writeback::piece_of(0) == 0);
    CHECK(Writeback::piece_of(64 * MiB) == 16 * MiB);
    CHECK(Writeback::piece_of(2 * MiB) == 1 * MiB);
    TempDir dir;
    const auto path = dir.file("f");
    { std::ofstream(path) << "x"; }
    Writeback off(path, 0);
    CHECK_FALSE(off.active());
    CHECK(off.piece(100 * MiB) == 100 * MiB); // off: one write of everything
    Writeback on(path, 64 * MiB);
    CHECK(on.active() == Writeback::available());
    if (Writeback::available()) {
        CHECK(on.piece(100 * MiB) == 16 * MiB);
        CHECK(on.piece(3) == 3);
    }
}

TEST_CASE("writeback: a file it cannot open leaves it off, and calls do nothing", "[writeback]")
{
    TempDir dir;
    Writeback wb(dir.file("missing/nothing"), 64 * MiB);
    CHECK_FALSE(wb.active());
    wb.wrote(0, 100 * MiB); // no file, no throw
    wb.start_rest();
    CHECK(wb.piece(5 * MiB) == 5 * MiB);
}

TEST_CASE("writeback: ranges in any order, with gaps, change no byte of the file", "[writeback]")
{
    TempDir dir;
    const auto path = dir.file("data");
    const std::uint64_t size = 9 * MiB + 12345;
    const auto data = pattern(size, 7);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    {
        Writeback wb(path, 2 * MiB); // pieces of 1 MiB, 2 MiB in flight
        // Back to front in uneven pieces, then a far range out of order.
        const std::uint64_t cut = 5 * MiB + 777;
        for (std::uint64_t end = size; end > cut;) {
            const std::uint64_t n = std::min<std::uint64_t>(end - cut, 700 * 1024 + 3);
            pwrite_all(fd, data.data() + end - n, n, end - n);
            wb.wrote(end - n, n);
            end -= n;
        }
        pwrite_all(fd, data.data(), cut, 0);
        for (std::uint64_t at = 0; at < cut; at += wb.piece(cut - at))
            wb.wrote(at, wb.piece(cut - at));
        wb.wrote(size, 0); // empty: nothing
        wb.start_rest();
    }
    REQUIRE(::fsync(fd) == 0);
    ::close(fd);
    const auto back = slurp(path);
    REQUIRE(back.size() == data.size());
    const bool same = back == data; // not compared by Catch: it would print megabytes
    CHECK(same);
}

#if defined(__linux__)
namespace {
struct CacheRange {
    std::uint64_t off, len;
};
struct CacheStat {
    std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
// Bytes of the file in the page cache that are dirty or under writeback;
// -1 where the kernel lacks cachestat.
long long unsynced_bytes(int fd)
{
    CacheRange r{0, 0}; // 0: to the end of the file
    CacheStat s{};
    if (::syscall(SYS_cachestat, fd, &r, &s, 0) != 0)
        return -1;
    return static_cast<long long>((s.nr_dirty + s.nr_writeback) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
}
} // namespace

// Its own ctest (unit.writeback_cachestat): exits 77, reported as skipped,
// where the kernel cannot show dirty pages (no cachestat, or a file system
// that keeps none, such as tmpfs).
TEST_CASE("writeback: at most limit + one piece of a file is ever unsynced", "[writeback_cachestat]")
{
    TempDir dir;
    const std::uint64_t total = 48 * MiB, limit = 8 * MiB;
    const auto data = pattern(total, 3);

    // Control: plain buffered writes leave (almost) all of it dirty.
    const auto plain = dir.file("plain");
    const int pfd = ::open(plain.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(pfd >= 0);
    pwrite_all(pfd, data.data(), total, 0);
    const long long control = unsynced_bytes(pfd);
    ::fsync(pfd);
    ::close(pfd);
    if (control < static_cast<long long>(total / 2)) {
        std::printf("writeback: dirty pages not observable here (cachestat: %lld bytes of %llu unsynced); skipped\n",
                    control, static_cast<unsigned long long>(total));
        std::fflush(stdout);
        std::_Exit(77);
    }

    const auto path = dir.file("early");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    Writeback wb(path, limit);
    REQUIRE(wb.active());
    long long worst = 0;
    for (std::uint64_t at = 0; at < total;) {
        const auto n = std::min<std::uint64_t>(wb.piece(total - at), 3 * MiB); // pieces of 2 MiB
        pwrite_all(fd, data.data() + at, n, at);
        wb.wrote(at, n);
        at += n;
        worst = std::max(worst, unsynced_bytes(fd));
    }
    wb.start_rest();
    // (worst may be 0 on a device that finishes each piece at once: the
    // control above shows the bytes would otherwise stay dirty.)
    INFO("control: " << control << " bytes unsynced after plain writes");
    CHECK(worst <= static_cast<long long>(limit + Writeback::piece_of(limit)));
    REQUIRE(::fsync(fd) == 0);
    ::close(fd);
    const bool same = slurp(path) == data;
    CHECK(same);
}
#endif
