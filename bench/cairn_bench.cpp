// Cairn benchmark driver (issue 7). One MPI run measures, side by side and
// interleaved (A/B/A/B), Cairn's save and load against the physical limit
// (fio), plain MPI-IO, plain parallel HDF5, PyTorch DCP (optional), plus
// resharding, async_save blocking time, peak memory of a save and the
// coordinator's planning and metadata cost. Every figure is the median of
// --runs repetitions (with min-max); every comparison is printed as
//
//     ratio <workload> <cairn-case>/<baseline> <value>
//
// value = throughput over throughput (higher is better), except blocking
// time and memory (Cairn's over the baseline's: lower is better).
// See docs/BENCHMARKS.md. Not a test: the ctest smoke test only checks that
// a tiny run prints well-formed lines.
#include <cairn/async.hpp>
#include <cairn/cairn.hpp>
#include <cairn/manager.hpp>

// Internal headers: the coordinator's planning and the metadata writer are
// called directly for synthetic plans of many ranks.
#include "comm/protocol.hpp"
#include "levels/redundancy.hpp"
#include "core/codec.hpp"
#include "levels/drain.hpp"
#include "plan/columnar.hpp"
#include "storage/per_rank/file_groups.hpp"
#include "storage/per_rank/mapped_files.hpp"
#include "stage/stage.hpp"
#include "format/metadata_h5.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <malloc.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

namespace stdfs = std::filesystem;
using u64 = std::uint64_t;

int g_rank = 0, g_size = 1;
MPI_Comm g_comm = MPI_COMM_WORLD;

// ---------------------------------------------------------------- options

struct Options {
    double size_mib = 1024;       // total state size (all ranks)
    int runs = 3;
    int warmup = 1; // untimed-for-the-figures rounds of every case before the runs
    std::string dir = "/work/bench-scratch";
    std::string io = "ompio";     // MPI-IO label: Open MPI's component, romio (MPICH), mpiio
    std::set<std::string> only;   // workloads/parts to run; empty: all
    bool drop_caches = true;
    bool warm_cache = true; // the page-cache pre-warm before every timed write and cold read
    bool fio = true;
    long plan_ranks = 2048;     // ladder 1024, 2048, 4096, 16384 up to this
    long plan_arrays = 1000;
    bool plan_generic = false;  // also time the struct-based coordinator path
    long plan_prewarm = 100;    // bytes per chunk touched and freed before the coordinator's steps
                                // (its measured peak: 84 at 16,384 x 1,000)
    // PyTorch DCP peers: a name for their cases ("<name>-save", "<name>-load")
    // and the python that runs bench/torch_dcp.py, e.g. {"torch-dcp", python
    // with torch 2.x}, {"torch113-dcp", python with torch 1.13}.
    std::vector<std::pair<std::string, std::string>> torch_peers;
    std::string torch_script;
    int small_arrays = 10000;     // mixed workload
    int many_arrays = 4000;       // small workload: arrays per rank
    int many_kib = 16;            // small workload: KiB per array and rank
    long writeback_mib = -1;      // SaveOptions::writeback_bytes in MiB; -1: Cairn's default
    std::string local_dir = "/dev/shm/cairn-bench-local"; // the drain's node-local directory (a RAM disk)
};
Options g_opt;

bool want(const std::string& part) { return g_opt.only.empty() || g_opt.only.count(part) > 0; }

void usage()
{
    std::puts("usage: cairn_bench [--size-mib N] [--runs R] [--warmup W] [--dir D] [--only a,b] [--no-drop-caches]\n"
              "                   [--no-warm-cache] [--no-fio]\n"
              "                   [--plan-ranks R] [--plan-arrays A] [--plan-generic] [--plan-prewarm B] [--small-arrays K]\n"
              "                   [--many-arrays K] [--many-kib S]\n"
              "                   [--python P] [--torch-peer NAME=PYTHON ...] --torch-script S [--local-dir D]\n"
              "                   (--python P is --torch-peer torch-dcp=P)\n"
              "parts: large, mixed, small, reshard, async, memory, coop, drain, planning, torch, fio, hdf5, mpiio, "
              "redundancy, files, levels");
}

void parse(int argc, char** argv)
{
    // The MPI-IO implementation, for the labels: Open MPI's component
    // (OMPI_MCA_io, default ompio), or ROMIO for MPICH and its derivatives.
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(library, &length);
    const std::string lib(library, static_cast<std::size_t>(length));
    const char* io = std::getenv("OMPI_MCA_io");
    if (lib.find("Open MPI") == std::string::npos)
        g_opt.io = lib.find("MPICH") != std::string::npos ? "romio" : "mpiio";
    else if (io && *io)
        g_opt.io = io;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage();
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--size-mib")
            g_opt.size_mib = std::stod(next());
        else if (a == "--runs")
            g_opt.runs = std::max(1, std::stoi(next()));
        else if (a == "--warmup")
            g_opt.warmup = std::max(0, std::stoi(next()));
        else if (a == "--dir")
            g_opt.dir = next();
        else if (a == "--only") {
            std::stringstream ss(next());
            std::string p;
            while (std::getline(ss, p, ','))
                g_opt.only.insert(p);
        } else if (a == "--no-drop-caches")
            g_opt.drop_caches = false;
        else if (a == "--no-warm-cache")
            g_opt.warm_cache = false;
        else if (a == "--no-fio")
            g_opt.fio = false;
        else if (a == "--plan-ranks")
            g_opt.plan_ranks = std::stol(next());
        else if (a == "--plan-arrays")
            g_opt.plan_arrays = std::stol(next());
        else if (a == "--plan-prewarm")
            g_opt.plan_prewarm = std::stol(next());
        else if (a == "--plan-generic")
            g_opt.plan_generic = true;
        else if (a == "--small-arrays")
            g_opt.small_arrays = std::stoi(next());
        else if (a == "--many-arrays")
            g_opt.many_arrays = std::max(1, std::stoi(next()));
        else if (a == "--many-kib")
            g_opt.many_kib = std::max(1, std::stoi(next()));
        else if (a == "--writeback-mib")
            g_opt.writeback_mib = std::stol(next());
        else if (a == "--python")
            g_opt.torch_peers.emplace_back("torch-dcp", next());
        else if (a == "--torch-peer") {
            const std::string v = next();
            const auto eq = v.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
                std::fprintf(stderr, "cairn_bench: --torch-peer wants NAME=PYTHON, got '%s'\n", v.c_str());
                std::exit(2);
            }
            g_opt.torch_peers.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        }
        else if (a == "--torch-script")
            g_opt.torch_script = next();
        else if (a == "--local-dir")
            g_opt.local_dir = next();
        else {
            usage();
            std::exit(a == "--help" || a == "-h" ? 0 : 2);
        }
    }
}

// ---------------------------------------------------------------- helpers

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...)
{
    if (g_rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stdout, fmt, ap);
    va_end(ap);
    std::fflush(stdout);
}

double now() { return MPI_Wtime(); }

// Time of `f` on the slowest rank (barriers on both sides).
template <class F>
double timed(F&& f)
{
    MPI_Barrier(g_comm);
    const double t0 = now();
    f();
    MPI_Barrier(g_comm);
    return now() - t0;
}

double allmax(double v)
{
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, g_comm);
    return v;
}

// Touches one byte per page for reading (pre-warm a source).
volatile unsigned char g_sink;
void touch_read(const void* p, std::size_t n)
{
    const auto* c = static_cast<const unsigned char*>(p);
    unsigned char s = 0;
    for (std::size_t i = 0; i < n; i += 4096)
        s ^= c[i];
    g_sink = s;
}
// Touches one byte per page for writing (pre-warm a destination).
void touch_write(void* p, std::size_t n)
{
    auto* c = static_cast<volatile unsigned char*>(p);
    for (std::size_t i = 0; i < n; i += 4096)
        c[i] = c[i];
}

// The page-cache pre-warm (on unless --no-warm-cache). This VM hands free
// memory back to its host within seconds; the page cache of the next write
// or cold read then waits for the host to back its pages again, at random
// (the same 1 GiB per-rank save took 0.63 to 1.02 s from run to run). Before
// every timed write or cold read, of Cairn and of every baseline alike,
// each rank touches a buffer of 1.25 x its share of the state, writes it as
// a scratch file into the bench directory, deletes the file before it is
// written back and frees the buffer: the pages freed are backed again when
// the timed step asks for page cache. Untimed.
u64 g_warm_bytes = 0; // this rank's share of the workload being measured, x 1.25
void warm_page_cache()
{
    if (!g_opt.warm_cache || g_warm_bytes == 0)
        return;
    // Touched first: written from untouched memory (the zero page) the same
    // scratch file left every following write about twice as slow here, and
    // touching memory without the file left the noise as it was (A/B runs of
    // mixed,mpiio,hdf5; BENCHMARKS.md, "Method", "Page cache"). Freed
    // (unmapped) before any memory figure is taken.
    const std::unique_ptr<char[]> buf(new char[static_cast<std::size_t>(g_warm_bytes)]);
    touch_write(buf.get(), static_cast<std::size_t>(g_warm_bytes));
    const std::string f = g_opt.dir + "/.warm." + std::to_string(g_rank);
    if (FILE* fp = std::fopen(f.c_str(), "wb")) {
        const bool ok = std::fwrite(buf.get(), 1, static_cast<std::size_t>(g_warm_bytes), fp) == g_warm_bytes;
        std::fclose(fp);
        std::remove(f.c_str());
        if (!ok)
            std::printf("note: the page-cache pre-warm could not write %s\n", f.c_str());
    }
    MPI_Barrier(g_comm);
}

bool g_warned_drop = false;
// Drops the page cache (root only) so that the next read is cold, then
// pre-warms it (warm_page_cache).
void drop_caches()
{
    MPI_Barrier(g_comm);
    if (g_rank == 0) {
        ::sync();
        bool ok = false;
        if (g_opt.drop_caches) {
            if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
                ok = std::fputs("3\n", f) >= 0;
                ok = (std::fclose(f) == 0) && ok;
            }
        }
        if (!ok && !g_warned_drop) {
            g_warned_drop = true;
            std::printf("note: could not drop the page cache (not root, or --no-drop-caches): loads are NOT cold\n");
        }
    }
    MPI_Barrier(g_comm);
    warm_page_cache();
}

void remove_path(const std::string& p)
{
    MPI_Barrier(g_comm);
    if (g_rank == 0) {
        std::error_code ec;
        stdfs::remove_all(p, ec);
        ::sync();
    }
    MPI_Barrier(g_comm);
}

// Removes `p` and creates it again, empty, on every rank's view.
void fresh_path(const std::string& p)
{
    remove_path(p);
    if (g_rank == 0)
        stdfs::create_directories(p);
    MPI_Barrier(g_comm);
}

void fsync_file(const std::string& p)
{
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

long status_kib(const char* key)
{
    std::ifstream f("/proc/self/status");
    std::string line;
    const std::string k = std::string(key) + ":";
    while (std::getline(f, line))
        if (line.rfind(k, 0) == 0)
            return std::stol(line.substr(k.size()));
    return -1;
}

// Resets this process's VmHWM to its current resident size (Linux
// /proc/self/clear_refs); false when that could not be done.
bool reset_peak_rss()
{
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    f.flush();
    return f.good();
}

struct Stat {
    std::vector<double> v;
    double median() const
    {
        if (v.empty())
            return NAN;
        auto s = v;
        std::sort(s.begin(), s.end());
        const auto n = s.size();
        return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    }
    double min() const { return v.empty() ? NAN : *std::min_element(v.begin(), v.end()); }
    double max() const { return v.empty() ? NAN : *std::max_element(v.begin(), v.end()); }
};

// Figures of one workload: case -> seconds per run, and bytes moved.
struct Results {
    std::string workload;
    std::map<std::string, Stat> secs;
    std::map<std::string, u64> bytes;
    void add(const std::string& c, u64 b, double s)
    {
        secs[c].v.push_back(s);
        bytes[c] = b;
    }
    bool has(const std::string& c) const { return secs.count(c) && !secs.at(c).v.empty(); }
    double gbps(const std::string& c) const { return bytes.at(c) / secs.at(c).median() / 1e9; }
};

void print_figures(const Results& r)
{
    if (g_rank != 0)
        return;
    std::printf("\n# %s: medians of %d runs (GB/s = 1e9 B/s; min-max over runs)\n", r.workload.c_str(), g_opt.runs);
    for (const auto& [c, s] : r.secs) {
        const double b = static_cast<double>(r.bytes.at(c));
        if (b > 0)
            std::printf("figure %s %s %.3f GB/s (min %.3f, max %.3f) %.3f s, %.1f MiB, n=%zu\n", r.workload.c_str(),
                        c.c_str(), b / s.median() / 1e9, b / s.max() / 1e9, b / s.min() / 1e9, s.median(),
                        b / 1048576.0, s.v.size());
        else
            std::printf("figure %s %s %.4f s (min %.4f, max %.4f) n=%zu\n", r.workload.c_str(), c.c_str(), s.median(),
                        s.min(), s.max(), s.v.size());
        // Every run, in order: shows whether a slow run is the first one.
        std::printf("runs %s %s", r.workload.c_str(), c.c_str());
        for (const double v : s.v)
            std::printf(" %.3f", v);
        std::printf(" s\n");
    }
    std::fflush(stdout);
}

void ratio_line(const std::string& workload, const std::string& what, double v)
{
    if (g_rank == 0 && std::isfinite(v)) {
        std::printf("ratio %s %s %.3f\n", workload.c_str(), what.c_str(), v);
        std::fflush(stdout);
    }
}

// Throughput ratio of two cases (higher is better), when both were measured.
void tput_ratio(const Results& r, const std::string& a, const std::string& b, const Results* rb = nullptr,
                const std::string& bname = "")
{
    const Results& B = rb ? *rb : r;
    if (!r.has(a) || !B.has(b))
        return;
    ratio_line(r.workload, a + "/" + (bname.empty() ? b : bname), r.gbps(a) / B.gbps(b));
}

// ---------------------------------------------------------------- workloads

// One global array and this rank's part of it.
struct Array {
    std::string name;
    cairn::Shape global;
    cairn::Box box;            // this rank's box (saved decomposition)
    std::vector<double> data;  // this rank's elements, dense row-major
    bool replicated = false;
    int writer = 0;            // plain baselines: the rank writing a replicated array
    u64 global_bytes() const { return static_cast<u64>(cairn::volume(global)) * 8; }
};

struct Workload {
    std::string name;
    std::vector<Array> arrays;
    u64 total = 0;       // bytes of the state (replicas once)
    u64 mine = 0;        // bytes this rank writes in the plain baselines
    int large = 0;       // the first `large` arrays are the 2-D large ones
    std::int64_t rows = 0, cols = 0;
};

double pattern(u64 gi) { return static_cast<double>(gi % 1000003) * 0.5 + 1.0; }

void fill(Array& a)
{
    const auto& g = a.global;
    const auto& b = a.box;
    std::size_t k = 0;
    if (g.size() == 2) {
        for (std::int64_t i = 0; i < b.shape[0]; ++i)
            for (std::int64_t j = 0; j < b.shape[1]; ++j)
                a.data[k++] = pattern(static_cast<u64>((b.offsets[0] + i) * g[1] + b.offsets[1] + j));
    } else {
        for (std::int64_t i = 0; i < b.shape[0]; ++i)
            a.data[k++] = pattern(static_cast<u64>(b.offsets[0] + i));
    }
}

// Large 2-D arrays of `cols` doubles per row, sharded by rows.
void add_large(Workload& w, u64 bytes, int count)
{
    const std::int64_t P = g_size;
    std::int64_t cols = 131072; // 1 MiB rows
    // At least 2 rows per rank and array.
    while (cols > 512 && static_cast<u64>(cols) * 8 * 2 * P * count > bytes)
        cols /= 2;
    std::int64_t rows = static_cast<std::int64_t>(bytes / (static_cast<u64>(cols) * 8 * count));
    rows = std::max<std::int64_t>(P, rows / P * P);
    w.rows = rows;
    w.cols = cols;
    for (int k = 0; k < count; ++k) {
        Array a;
        a.name = "large_" + std::to_string(k);
        a.global = {rows, cols};
        const std::int64_t per = rows / P;
        a.box = cairn::Box{{per * g_rank, 0}, {per, cols}};
        a.data.resize(static_cast<std::size_t>(per * cols));
        fill(a);
        w.arrays.push_back(std::move(a));
    }
    w.large = count;
}

Workload make_workload(const std::string& name, u64 total)
{
    Workload w;
    w.name = name;
    if (name == "large") {
        add_large(w, total, 4);
    } else if (name == "small") {
        // Only small arrays: many_arrays 1-D arrays of many_kib KiB per rank,
        // sharded by ranks (each rank writes its own part of every array).
        const std::int64_t per = std::max<std::int64_t>(1, std::int64_t(g_opt.many_kib) * 1024 / 8);
        for (int k = 0; k < g_opt.many_arrays; ++k) {
            Array a;
            a.name = "small/" + std::to_string(k);
            a.global = {per * g_size};
            a.box = cairn::Box{{per * g_rank}, {per}};
            a.data.resize(static_cast<std::size_t>(per));
            fill(a);
            w.arrays.push_back(std::move(a));
        }
    } else { // mixed: 90 % in four large arrays, 10 % in many arrays of <= 64 KiB
        add_large(w, total - total / 10, 4);
        const int K = std::max(2, g_opt.small_arrays);
        u64 each = std::min<u64>(64 * 1024, total / 10 / static_cast<u64>(K));
        std::int64_t n = std::max<std::int64_t>(g_size, static_cast<std::int64_t>(each / 8) / g_size * g_size);
        for (int k = 0; k < K; ++k) {
            Array a;
            a.name = "small/" + std::to_string(k);
            a.global = {n};
            if (k % 2 == 0) { // replicated: every rank holds it whole
                a.replicated = true;
                a.writer = (k / 2) % g_size;
                a.box = cairn::Box{{0}, {n}};
            } else {
                const std::int64_t per = n / g_size;
                a.box = cairn::Box{{per * g_rank}, {per}};
            }
            a.data.resize(static_cast<std::size_t>(a.box.shape[0]));
            fill(a);
            w.arrays.push_back(std::move(a));
        }
    }
    for (const auto& a : w.arrays) {
        w.total += a.global_bytes();
        if (!a.replicated || a.writer == g_rank)
            w.mine += a.data.size() * 8;
    }
    g_warm_bytes = w.total / static_cast<u64>(g_size) * 5 / 4;
    return w;
}

cairn::StateDict state_of(Workload& w)
{
    cairn::StateDict sd;
    for (auto& a : w.arrays)
        sd.add_array<double>(a.name, a.data.data(), a.global, a.box);
    return sd;
}

// Pre-warms the state before a timed step: its pages for reading (a save's
// source) or writing (a load's destination). Before a save, the page cache
// too (warm_page_cache; a load's is warmed by drop_caches).
void touch_state(Workload& w, bool for_write)
{
    if (!for_write)
        warm_page_cache();
    for (auto& a : w.arrays) {
        if (for_write)
            touch_write(a.data.data(), a.data.size() * 8);
        else
            touch_read(a.data.data(), a.data.size() * 8);
    }
}

// Spot-checks the contents after a load (first run only; untimed).
void check_state(const Workload& w, const char* what)
{
    long bad = 0;
    for (const auto& a : w.arrays) {
        const auto& g = a.global;
        const std::size_t n = a.data.size();
        for (std::size_t s = 0; s < 64 && n; ++s) {
            const std::size_t k = (s * 7919 * 104729) % n;
            u64 gi;
            if (g.size() == 2) {
                const auto i = static_cast<std::int64_t>(k) / a.box.shape[1], j = static_cast<std::int64_t>(k) % a.box.shape[1];
                gi = static_cast<u64>((a.box.offsets[0] + i) * g[1] + a.box.offsets[1] + j);
            } else {
                gi = static_cast<u64>(a.box.offsets[0] + static_cast<std::int64_t>(k));
            }
            if (a.data[k] != pattern(gi))
                ++bad;
        }
    }
    long all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, g_comm);
    if (all)
        say("ERROR: %s: %ld wrong elements after the load\n", what, all);
}

void scramble(Workload& w)
{
    for (auto& a : w.arrays)
        if (!a.data.empty())
            a.data[0] = -1, a.data[a.data.size() / 2] = -1, a.data.back() = -1;
}

// ---------------------------------------------------------------- plain MPI-IO

struct Seg {
    void* p;
    u64 n;
};

// The byte segments this rank writes in the plain baselines, in order.
std::vector<Seg> segments(Workload& w)
{
    std::vector<Seg> s;
    for (auto& a : w.arrays)
        if ((!a.replicated || a.writer == g_rank) && !a.data.empty())
            s.push_back(Seg{a.data.data(), a.data.size() * 8});
    return s;
}

// Groups of segments of at most 1 GiB each (MPI counts are ints), each
// described by one hindexed datatype over MPI_BOTTOM.
struct Group {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    u64 bytes = 0;
};

std::vector<Group> groups_of(const std::vector<Seg>& segs)
{
    std::vector<Group> out;
    const u64 cap = u64(1) << 30;
    std::vector<int> lens;
    std::vector<MPI_Aint> disps;
    u64 bytes = 0;
    auto close = [&] {
        if (lens.empty())
            return;
        Group g;
        MPI_Type_create_hindexed(static_cast<int>(lens.size()), lens.data(), disps.data(), MPI_BYTE, &g.type);
        MPI_Type_commit(&g.type);
        g.bytes = bytes;
        out.push_back(g);
        lens.clear();
        disps.clear();
        bytes = 0;
    };
    for (const auto& s : segs) {
        u64 off = 0;
        while (off < s.n) {
            const u64 n = std::min(s.n - off, cap - bytes);
            MPI_Aint d;
            MPI_Get_address(static_cast<char*>(s.p) + off, &d);
            lens.push_back(static_cast<int>(n));
            disps.push_back(d);
            bytes += n;
            off += n;
            if (bytes == cap)
                close();
        }
    }
    close();
    return out;
}

void free_groups(std::vector<Group>& gs)
{
    for (auto& g : gs)
        MPI_Type_free(&g.type);
    gs.clear();
}

void check_mpi(int rc, const char* what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

// One file per rank: independent writes of each group, MPI_File_sync, close.
void mpiio_rank(Workload& w, const std::string& dir, bool write)
{
    const std::string path = dir + "/rank_" + std::to_string(g_rank) + ".bin";
    auto segs = segments(w);
    MPI_File fh;
    check_mpi(MPI_File_open(MPI_COMM_SELF, path.c_str(), write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY,
                            MPI_INFO_NULL, &fh),
              "MPI_File_open");
    // Large segments go straight from their buffers; one write call each
    // (at most 1 GiB); small ones in one hindexed call per group.
    u64 off = 0;
    std::vector<Seg> small;
    auto flush_small = [&] {
        auto gs = groups_of(small);
        for (auto& g : gs) {
            MPI_Status st;
            check_mpi(write ? MPI_File_write_at(fh, static_cast<MPI_Offset>(off), MPI_BOTTOM, 1, g.type, &st)
                            : MPI_File_read_at(fh, static_cast<MPI_Offset>(off), MPI_BOTTOM, 1, g.type, &st),
                      "MPI_File_write_at/read_at");
            off += g.bytes;
        }
        free_groups(gs);
        small.clear();
    };
    for (const auto& s : segs) {
        if (s.n < (u64(1) << 20)) {
            small.push_back(s);
            continue;
        }
        flush_small();
        for (u64 o = 0; o < s.n;) {
            const int n = static_cast<int>(std::min<u64>(s.n - o, u64(1) << 30));
            MPI_Status st;
            check_mpi(write ? MPI_File_write_at(fh, static_cast<MPI_Offset>(off), static_cast<char*>(s.p) + o, n,
                                                MPI_BYTE, &st)
                            : MPI_File_read_at(fh, static_cast<MPI_Offset>(off), static_cast<char*>(s.p) + o, n,
                                               MPI_BYTE, &st),
                      "MPI_File_write_at/read_at");
            o += static_cast<u64>(n);
            off += static_cast<u64>(n);
        }
    }
    flush_small();
    if (write)
        check_mpi(MPI_File_sync(fh), "MPI_File_sync");
    check_mpi(MPI_File_close(&fh), "MPI_File_close");
}

// One shared file: rank r's bytes at its prefix offset, MPI_File_write_at_all
// (one collective call per <= 1 GiB group, every rank the same number of
// calls), MPI_File_sync, close.
void mpiio_shared(Workload& w, const std::string& dir, bool write)
{
    const std::string path = dir + "/shared.bin";
    auto segs = segments(w);
    auto gs = groups_of(segs);
    unsigned long long mine = w.mine, start = 0;
    MPI_Exscan(&mine, &start, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, g_comm);
    if (g_rank == 0)
        start = 0;
    int calls = static_cast<int>(gs.size());
    MPI_Allreduce(MPI_IN_PLACE, &calls, 1, MPI_INT, MPI_MAX, g_comm);
    MPI_File fh;
    check_mpi(MPI_File_open(g_comm, path.c_str(), write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY,
                            MPI_INFO_NULL, &fh),
              "MPI_File_open shared");
    u64 off = start;
    for (int c = 0; c < calls; ++c) {
        MPI_Status st;
        const bool have = c < static_cast<int>(gs.size());
        const MPI_Datatype t = have ? gs[c].type : MPI_BYTE;
        const int count = have ? 1 : 0;
        check_mpi(write ? MPI_File_write_at_all(fh, static_cast<MPI_Offset>(off), MPI_BOTTOM, count, t, &st)
                        : MPI_File_read_at_all(fh, static_cast<MPI_Offset>(off), MPI_BOTTOM, count, t, &st),
                  "MPI_File_write_at_all/read_at_all");
        if (have)
            off += gs[c].bytes;
    }
    if (write)
        check_mpi(MPI_File_sync(fh), "MPI_File_sync shared");
    check_mpi(MPI_File_close(&fh), "MPI_File_close shared");
    free_groups(gs);
}

// ---------------------------------------------------------------- plain HDF5

void h5check(long long rc, const char* what)
{
    if (rc < 0) {
        std::fprintf(stderr, "rank %d: HDF5: %s failed\n", g_rank, what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

// One dataset per array, collective transfers of each rank's hyperslab (a
// replicated array: its writer selects all, the others none); default
// properties otherwise. Durable: H5Fflush (MPI_File_sync) and an fsync.
void hdf5_plain(Workload& w, const std::string& path, bool write)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, g_comm, MPI_INFO_NULL);
    hid_t file = write ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                       : H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
    h5check(file, "H5Fcreate/H5Fopen");
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    for (auto& a : w.arrays) {
        std::vector<hsize_t> dims(a.global.begin(), a.global.end());
        hid_t fspace = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
        std::string dname = a.name;
        std::replace(dname.begin(), dname.end(), '/', '_');
        hid_t dset = write ? H5Dcreate2(file, dname.c_str(), H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, H5P_DEFAULT,
                                        H5P_DEFAULT)
                           : H5Dopen2(file, dname.c_str(), H5P_DEFAULT);
        h5check(dset, "H5Dcreate2/H5Dopen2");
        const bool mine = !a.replicated || a.writer == g_rank || !write;
        hid_t mspace;
        if (mine && !a.data.empty()) {
            std::vector<hsize_t> off(a.box.offsets.begin(), a.box.offsets.end()), cnt(a.box.shape.begin(), a.box.shape.end());
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, off.data(), nullptr, cnt.data(), nullptr);
            mspace = H5Screate_simple(static_cast<int>(cnt.size()), cnt.data(), nullptr);
        } else {
            H5Sselect_none(fspace);
            mspace = H5Scopy(fspace);
            H5Sselect_none(mspace);
        }
        static double dummy = 0;
        void* buf = mine && !a.data.empty() ? a.data.data() : &dummy;
        h5check(write ? H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, buf)
                      : H5Dread(dset, H5T_NATIVE_DOUBLE, mspace, fspace, dxpl, buf),
                "H5Dwrite/H5Dread");
        H5Sclose(mspace);
        H5Sclose(fspace);
        H5Dclose(dset);
    }
    if (write)
        h5check(H5Fflush(file, H5F_SCOPE_GLOBAL), "H5Fflush");
    H5Pclose(dxpl);
    H5Pclose(fapl);
    h5check(H5Fclose(file), "H5Fclose");
    if (write && g_rank == 0)
        fsync_file(path);
    MPI_Barrier(g_comm);
}

// ---------------------------------------------------------------- external programs

// Runs `cmd` (std::system) with this thread's CPU affinity widened to every
// online CPU, then restores it. mpiexec binds each rank to a core, and a
// program rank 0 starts (fio's jobs, PyTorch DCP's processes) inherits the
// mask of the thread that forks it: without this, all of them would share
// rank 0's single core while the other ranks' cores sit idle.
int run_unbound(const std::string& cmd)
{
    cpu_set_t mine;
    const bool have = sched_getaffinity(0, sizeof mine, &mine) == 0;
    cpu_set_t all;
    CPU_ZERO(&all);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n && i < CPU_SETSIZE; ++i)
        CPU_SET(static_cast<int>(i), &all);
    if (sched_setaffinity(0, sizeof all, &all) != 0)
        std::printf("note: could not widen the CPU affinity for: %s\n", cmd.c_str());
    const int rc = std::system(cmd.c_str());
    if (have)
        sched_setaffinity(0, sizeof mine, &mine);
    return rc;
}

// ---------------------------------------------------------------- fio

bool have_fio()
{
    int ok = 0;
    if (g_rank == 0)
        ok = std::system("command -v fio >/dev/null 2>&1") == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, g_comm);
    return ok != 0;
}

std::string slurp(const std::string& p)
{
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The number after "key" : in the first occurrence after `from` in a JSON text.
double json_number(const std::string& s, const std::string& key, std::size_t from = 0)
{
    const auto k = s.find("\"" + key + "\"", from);
    if (k == std::string::npos)
        return NAN;
    const auto c = s.find(':', k);
    return std::strtod(s.c_str() + c + 1, nullptr);
}

// fio, P jobs (one per rank), each a sequential file of this rank's share:
// durable writes (end_fsync) or reads. Returns seconds (fio's runtime of the
// group, which includes the final fsync), or NAN. Rank 0 runs it; others wait.
// While rank 0 runs an external program (fio, PyTorch DCP), the other
// ranks wait here without spinning: a blocking MPI call busy-polls a core,
// which on this 2-core machine the program's own processes need. They poll
// a non-blocking barrier every millisecond instead; rank 0 enters it when
// the program has finished.
void idle_until_root_done()
{
    MPI_Request req;
    MPI_Ibarrier(g_comm, &req);
    if (g_rank == 0) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        ::usleep(1000);
    }
}

double run_fio(const std::string& dir, u64 per_job, bool write, const std::string& bs)
{
    double secs = NAN;
    if (g_rank == 0) {
        const std::string out = dir + "/fio.json";
        std::string cmd = "fio --name=seq --directory=" + dir + " --rw=" + (write ? "write" : "read") +
                          " --bs=" + bs + " --ioengine=psync --size=" + std::to_string(per_job) +
                          " --numjobs=" + std::to_string(g_size) + " --group_reporting --output-format=json" +
                          (write ? " --end_fsync=1" : "") + " --output=" + out + " >/dev/null 2>&1";
        const double t0 = now();
        const int rc = run_unbound(cmd);
        const double wall = now() - t0;
        if (rc == 0) {
            const auto j = slurp(out);
            // The group's section ("read" : { ... }), not the job option "rw" : "read".
            auto sect = j.find(write ? "\"write\" : {" : "\"read\" : {");
            if (sect == std::string::npos)
                sect = j.size();
            const double ms = json_number(j, "runtime", sect);
            const double io_bytes = json_number(j, "io_bytes", sect);
            if (ms > 0 && io_bytes > 0)
                secs = ms / 1e3 * (static_cast<double>(per_job) * g_size / io_bytes);
            if (!(secs > 0))
                secs = wall;
        } else {
            std::printf("note: fio failed (rc %d): %s\n", rc, cmd.c_str());
        }
        std::remove(out.c_str());
    }
    idle_until_root_done();
    MPI_Bcast(&secs, 1, MPI_DOUBLE, 0, g_comm);
    return secs;
}

// ---------------------------------------------------------------- torch DCP peer

// Runs bench/torch_dcp.py with one peer's python once (one save and one cold
// load on g_size processes of its own). Returns {save s, load s}, or NANs
// when skipped. A peer that fails or is missing is skipped from then on.
std::map<std::string, int> g_torch_state; // by peer name: 0 unknown, 1 available, -1 skipped
std::pair<double, double> run_torch(const std::string& name, const std::string& python, const std::string& dir,
                                    double size_mib)
{
    double t[2] = {NAN, NAN};
    int& state = g_torch_state[name];
    if (g_rank == 0 && state >= 0) {
        const std::string out = dir + "/torch.out";
        const std::string cmd = python + " " + g_opt.torch_script + " --nproc " + std::to_string(g_size) +
                                " --size-mib " + std::to_string(size_mib) + " --dir " + dir + "/torch_ckpt" +
                                (g_opt.drop_caches ? "" : " --no-drop-caches") + " > " + out + " 2>&1";
        const int rc = run_unbound(cmd);
        const auto text = slurp(out);
        std::istringstream is(text);
        std::string line;
        while (std::getline(is, line)) {
            double v;
            if (std::sscanf(line.c_str(), "torch-dcp save %lf", &v) == 1)
                t[0] = v;
            else if (std::sscanf(line.c_str(), "torch-dcp load %lf", &v) == 1)
                t[1] = v;
        }
        if (rc != 0 || !(t[0] > 0) || !(t[1] > 0)) {
            std::string first = text.substr(0, text.find('\n'));
            if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3)
                std::printf("note: PyTorch DCP peer %s skipped: %s\n", name.c_str(), first.c_str());
            else
                std::printf("note: PyTorch DCP peer %s failed (rc %d): %s\n", name.c_str(), rc,
                            text.substr(0, 2000).c_str());
            state = -1;
            t[0] = t[1] = NAN;
        } else {
            state = 1;
        }
        std::remove(out.c_str());
    }
    idle_until_root_done();
    MPI_Bcast(t, 2, MPI_DOUBLE, 0, g_comm);
    return {t[0], t[1]};
}

// ---------------------------------------------------------------- cooperative reads

// Read amplification (bytes read from storage by all ranks / bytes the load
// needs) of loads where ranks need the same checksum blocks, with
// LoadOptions::cooperative (and without, as `note` lines), both layouts: a resharding load
// (rows saved, columns loaded), a 1 -> N load (columns) and an array
// replicated on every rank; and the time of the 1 -> N load cooperatively
// and not, interleaved, medians of --runs runs. One array of a quarter of
// --size-mib in rows of 64 KiB (16 per 1 MiB checksum block).
void bench_cooperative(u64 total)
{
    Results R;
    R.workload = "coop" + (g_opt.io == "ompio" ? std::string() : "-" + g_opt.io);
    const std::int64_t cols = 8192;
    const std::int64_t rows = std::max<std::int64_t>(64, static_cast<std::int64_t>(total / 4 / (cols * 8)));
    const cairn::Shape g{rows, cols};
    const u64 T = static_cast<u64>(rows * cols * 8);
    const std::string base = g_opt.dir + "/coop";
    if (g_rank == 0)
        stdfs::create_directories(base);
    MPI_Barrier(g_comm);
    auto value = [&](std::int64_t i, std::int64_t j) { return pattern(static_cast<u64>(i * cols + j)); };
    auto filled = [&](const cairn::Box& b) {
        std::vector<double> v(static_cast<std::size_t>(b.volume()));
        for (std::int64_t i = 0; i < b.shape[0]; ++i)
            for (std::int64_t j = 0; j < b.shape[1]; ++j)
                v[static_cast<std::size_t>(i * b.shape[1] + j)] = value(b.offsets[0] + i, b.offsets[1] + j);
        return v;
    };
    const std::int64_t per_row = rows / g_size, per_col = cols / g_size;
    const cairn::Box my_rows{{per_row * g_rank, 0}, {g_rank == g_size - 1 ? rows - per_row * g_rank : per_row, cols}};
    const cairn::Box my_cols{{0, per_col * g_rank}, {rows, g_rank == g_size - 1 ? cols - per_col * g_rank : per_col}};
    const cairn::Box all{{0, 0}, g};
    MPI_Comm one = MPI_COMM_NULL;
    MPI_Comm_split(g_comm, g_rank == 0 ? 0 : MPI_UNDEFINED, 0, &one);
    say("\nworkload coop: one %lld x %lld f64 array, %.1f MiB\n", static_cast<long long>(rows),
        static_cast<long long>(cols), T / 1048576.0);
    // A load of `box` on every rank: seconds, bytes read by all ranks.
    auto load = [&](const std::string& path, const cairn::Box& box, bool coop, const char* what) {
        std::vector<double> buf(static_cast<std::size_t>(box.volume()));
        cairn::StateDict sd;
        sd.add_array<double>("a", buf.data(), g, box);
        cairn::LoadOptions lo;
        lo.cooperative = coop;
        drop_caches();
        touch_write(buf.data(), buf.size() * 8);
        cairn::LoadResult res;
        const double t = timed([&] { res = cairn::load(sd, path, g_comm, lo); });
        long bad = 0;
        for (std::int64_t s = 0; s < 256; ++s) { // spot check
            const std::int64_t i = (s * 7919) % box.shape[0], j = (s * 104729) % box.shape[1];
            bad += buf[static_cast<std::size_t>(i * box.shape[1] + j)] != value(box.offsets[0] + i, box.offsets[1] + j);
        }
        long wrong = 0;
        MPI_Allreduce(&bad, &wrong, 1, MPI_LONG, MPI_SUM, g_comm);
        if (wrong)
            say("ERROR: %s: %ld wrong elements after the load\n", what, wrong);
        return std::make_pair(t, res.bytes_read_all);
    };
    const std::string n1 = "1to" + std::to_string(g_size);
    for (auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const bool container = layout == cairn::Layout::container;
        const std::string l = container ? "container" : "rank";
        const std::string pn = base + "/n_" + l + (container ? ".h5" : ""), p1 = base + "/one_" + l + (container ? ".h5" : "");
        cairn::SaveOptions so;
        so.layout = layout;
        {
            auto v = filled(my_rows);
            cairn::StateDict sd;
            sd.add_array<double>("a", v.data(), g, my_rows);
            cairn::save(sd, pn, g_comm, so);
        }
        if (one != MPI_COMM_NULL) {
            auto v = filled(all);
            cairn::StateDict sd;
            sd.add_array<double>("a", v.data(), g, all);
            cairn::save(sd, p1, one, so);
        }
        MPI_Barrier(g_comm);
        // Amplification: every case needs the whole array (T bytes) in all.
        const struct {
            std::string name, path;
            cairn::Box box;
        } cases[] = {{"reshard", pn, my_cols}, {n1, p1, my_cols}, {"replicated", pn, all}};
        for (const auto& c : cases) {
            const std::string what = "cairn-" + l + "-" + c.name + "-load";
            const auto on = load(c.path, c.box, true, what.c_str());
            const auto off = load(c.path, c.box, false, what.c_str());
            ratio_line(R.workload, "amplification-" + what + "/needed",
                       static_cast<double>(on.second) / static_cast<double>(T));
            if (g_rank == 0)
                std::printf("note %s amplification-%s without cooperative reads %.3f\n", R.workload.c_str(),
                            what.c_str(), static_cast<double>(off.second) / static_cast<double>(T));
        }
        // Time of the 1 -> N load, cooperative and plain, interleaved,
        // after --warmup untimed rounds.
        for (int run = 0; run < g_opt.warmup; ++run)
            for (bool coop : {true, false}) {
                const std::string what = "cairn-" + l + (coop ? "-coop-" : "-plain-") + n1 + "-load";
                const double t = load(p1, my_cols, coop, what.c_str()).first;
                if (g_rank == 0)
                    std::printf("warmup %s %s %.3f s\n", R.workload.c_str(), what.c_str(), t);
            }
        for (int run = 0; run < g_opt.runs; ++run) {
            R.add("cairn-" + l + "-coop-" + n1 + "-load", T, load(p1, my_cols, true, "coop").first);
            R.add("cairn-" + l + "-plain-" + n1 + "-load", T, load(p1, my_cols, false, "plain").first);
        }
        remove_path(pn);
        remove_path(p1);
    }
    if (one != MPI_COMM_NULL)
        MPI_Comm_free(&one);
    print_figures(R);
    for (const std::string l : {"rank", "container"})
        tput_ratio(R, "cairn-" + l + "-coop-" + n1 + "-load", "cairn-" + l + "-plain-" + n1 + "-load");
}

// ---------------------------------------------------------------- drain

// Draining a node-local step (src/levels/drain.hpp): the large workload saved
// per rank into --local-dir (a RAM disk), then every rank copies its data
// files into --dir on a background thread and the coordinator commits
// ("cairn-drain-M"), against a direct per-rank save into --dir
// ("cairn-rank-save"), interleaved, both durable (fsync). Then the drain
// while the main thread streams memory (a copy between two buffers of 64 MiB
// per rank, the "simulation"): the drain's time until committed
// ("cairn-drain-busy-M": until every rank's files are copied, seen by the
// simulation between two passes; "cairn-drain-busy-total-M": until committed
// after the simulation's last pass) and the simulation's throughput with the drain
// running ("compute-busy-M") against alone ("compute-alone"). M is the copy,
// each measured in every run, in rotating order: "direct" (DrainCopy::direct,
// CAIRN_DRAIN_COPY=direct: O_DIRECT from the source's pages), "kernel"
// (DrainCopy::kernel, the default: copy_file_range), both with the default
// two streams per file, and "kernel-1" (DrainCopy::kernel, one stream:
// CAIRN_DRAIN_STREAMS=1).
void bench_drain(u64 total)
{
    Results R;
    R.workload = "drain" + (g_opt.io == "ompio" ? std::string() : "-" + g_opt.io);
    auto w = make_workload("large", total);
    auto sd = state_of(w);
    const u64 T = w.total;
    const std::string base = g_opt.dir + "/drain", local = g_opt.local_dir + "/step";
    const std::string direct = base + "/direct", drained = base + "/drained";
    if (g_rank == 0) {
        stdfs::create_directories(base);
        stdfs::create_directories(g_opt.local_dir);
    }
    MPI_Barrier(g_comm);
    say("\nworkload drain: %d arrays of %lld x %lld f64 sharded by rows, %.1f MiB; node-local %s\n", w.large,
        static_cast<long long>(w.rows), static_cast<long long>(w.cols), T / 1048576.0, g_opt.local_dir.c_str());
    cairn::SaveOptions so;
    so.layout = cairn::Layout::per_rank;
    const cairn::detail::Comm c(g_comm);
    using cairn::detail::DrainCopy;
    struct Copy {
        DrainCopy copy;
        int streams; // 0: the default
        std::string name;
    };
    // Starts this rank's drain of `local` into `drained`.
    auto start = [&](const Copy& how) {
        return std::make_unique<cairn::detail::Drain>(local, drained, cairn::detail::rank_data_files(local, g_rank),
                                                       true, how.copy, how.streams);
    };
    const Copy copies[] = {{DrainCopy::direct, 0, "direct"}, {DrainCopy::kernel, 0, "kernel"},
                           {DrainCopy::kernel, 1, "kernel-1"}};
    const int n_copies = static_cast<int>(std::size(copies));
    auto finish = [&](cairn::detail::Drain& d) {
        std::exception_ptr err;
        try {
            d.wait();
        } catch (...) {
            err = std::current_exception();
        }
        cairn::detail::agree(c, "drain", err);
        cairn::detail::commit_drain(c, local, drained, drained, true);
    };
    // The "simulation": streams memory, `passes` copies of 64 MiB, checking
    // `d` (when given) after each; returns the passes done when d ended.
    const std::size_t sim_bytes = std::size_t(64) << 20;
    std::vector<char> sim_a(sim_bytes, 1), sim_b(sim_bytes, 2);
    auto simulate = [&](int passes, cairn::detail::Drain* d, double* drain_done) {
        const double t0 = now();
        for (int k = 0; k < passes; ++k) {
            std::memcpy(k % 2 ? sim_a.data() : sim_b.data(), k % 2 ? sim_b.data() : sim_a.data(), sim_bytes);
            if (d && drain_done && *drain_done < 0 && d->done())
                *drain_done = now() - t0;
        }
        g_sink = static_cast<unsigned char>(sim_a[12345] + sim_b[54321]);
        return now() - t0;
    };
    // Passes of the simulation that take about as long as a direct save.
    int passes = 1;
    {
        const double t = simulate(4, nullptr, nullptr) / 4;
        double save_t = 0;
        remove_path(direct);
        touch_state(w, false);
        save_t = timed([&] { cairn::save(sd, direct, g_comm, so); });
        passes = static_cast<int>(std::max(4.0, std::min(100000.0, 1.5 * save_t / std::max(t, 1e-6))));
        MPI_Allreduce(MPI_IN_PLACE, &passes, 1, MPI_INT, MPI_MAX, g_comm);
    }
    for (int run = 0; run < g_opt.warmup + g_opt.runs; ++run) {
        const bool timed_run = run >= g_opt.warmup;
        // The direct save before the drain in even runs, after it in odd ones.
        double t_direct = 0;
        auto direct_save = [&] {
            remove_path(direct);
            touch_state(w, false);
            t_direct = timed([&] { cairn::save(sd, direct, g_comm, so); });
            remove_path(direct);
        };
        if (run % 2 == 0)
            direct_save();
        remove_path(local);
        touch_state(w, false);
        const double t_local = timed([&] { cairn::save(sd, local, g_comm, so); });
        const double t_alone = allmax(simulate(passes, nullptr, nullptr));
        if (timed_run) {
            R.add("cairn-local-save", T, t_local);
            const u64 moved = static_cast<u64>(passes) * sim_bytes * 2 * static_cast<u64>(g_size);
            R.add("compute-alone", moved, t_alone);
        }
        for (int k = 0; k < n_copies; ++k) {
            const Copy& copy = copies[(k + run) % n_copies];
            const std::string& m = copy.name;
            remove_path(drained);
            const double t_drain = timed([&] {
                auto d = start(copy);
                finish(*d);
            });
            if (run == 0) { // the drained checkpoint is the state
                scramble(w);
                cairn::load(sd, drained, g_comm);
                check_state(w, ("cairn-drain-" + m).c_str());
            }
            remove_path(drained);
            MPI_Barrier(g_comm);
            double drain_done = -1;
            const double t0 = now();
            auto d = start(copy);
            const double t_sim = simulate(passes, d.get(), &drain_done);
            if (drain_done < 0) { // still copying when the simulation ended
                try {
                    d->wait();
                } catch (...) {
                    // finish() agrees on it
                }
                drain_done = now() - t0;
            }
            finish(*d);
            const double t_busy_drain = allmax(drain_done);
            const double t_busy_total = allmax(now() - t0);
            const double t_busy_sim = allmax(t_sim);
            remove_path(drained);
            if (!timed_run) {
                if (g_rank == 0)
                    std::printf("warmup %s cairn-drain-%s %.3f s\n", R.workload.c_str(), m.c_str(), t_drain);
                continue;
            }
            R.add("cairn-drain-" + m, T, t_drain);
            R.add("cairn-drain-busy-" + m, T, t_busy_drain);
            R.add("cairn-drain-busy-total-" + m, T, t_busy_total);
            const u64 moved = static_cast<u64>(passes) * sim_bytes * 2 * static_cast<u64>(g_size);
            R.add("compute-busy-" + m, moved, t_busy_sim);
        }
        if (run % 2 == 1)
            direct_save();
        if (timed_run)
            R.add("cairn-rank-save", T, t_direct);
        else if (g_rank == 0)
            std::printf("warmup %s cairn-rank-save %.3f s\n", R.workload.c_str(), t_direct);
    }
    remove_path(direct);
    remove_path(drained);
    remove_path(local);
    if (g_rank == 0) {
        std::error_code ec;
        stdfs::remove(g_opt.local_dir, ec);
    }
    print_figures(R);
    for (const std::string m : {"direct", "kernel", "kernel-1"}) {
        tput_ratio(R, "cairn-drain-" + m, "cairn-rank-save");
        tput_ratio(R, "cairn-drain-busy-" + m, "cairn-rank-save");
        tput_ratio(R, "compute-busy-" + m, "compute-alone");
    }
    tput_ratio(R, "cairn-drain-busy-direct", "cairn-drain-busy-kernel");
    tput_ratio(R, "compute-busy-direct", "compute-busy-kernel");
    tput_ratio(R, "cairn-drain-busy-kernel", "cairn-drain-busy-kernel-1");
    tput_ratio(R, "compute-busy-kernel", "compute-busy-kernel-1");
    tput_ratio(R, "cairn-local-save", "cairn-rank-save");
}

// ---------------------------------------------------------------- one workload

struct Case {
    std::string name;
    std::function<void(Results&, int run)> run;
};

Results bench_workload(Workload& w)
{
    Results R;
    R.workload = w.name + (g_opt.io == "ompio" ? "" : "-" + g_opt.io);
    const std::string base = g_opt.dir + "/" + w.name;
    if (g_rank == 0)
        stdfs::create_directories(base);
    MPI_Barrier(g_comm);
    auto sd = state_of(w);
    const u64 T = w.total;
    const bool is_large = w.name == "large";

    cairn::SaveOptions so; // fsync on, checksums on (the defaults)
    if (g_opt.writeback_mib >= 0)
        so.writeback_bytes = static_cast<std::size_t>(g_opt.writeback_mib) << 20;
    cairn::LoadOptions lo; // verify checksums (the default)

    std::vector<Case> cases;
    // Cairn, per-rank layout: durable save, cold load.
    cases.push_back({"cairn-rank", [&](Results& r, int run) {
                         const std::string p = base + "/ckpt_rank";
                         remove_path(p);
                         auto o = so;
                         o.layout = cairn::Layout::per_rank;
                         touch_state(w, false);
                         r.add("cairn-rank-save", T, timed([&] { cairn::save(sd, p, g_comm, o); }));
                         if (run == 0)
                             scramble(w);
                         drop_caches();
                         touch_state(w, true);
                         auto l = lo;
                         l.layout = cairn::Layout::per_rank;
                         r.add("cairn-rank-load", T, timed([&] { cairn::load(sd, p, g_comm, l); }));
                         if (run == 0)
                             check_state(w, "cairn-rank-load");
                         if (is_large && want("reshard")) {
                             // N -> M with another decomposition: columns instead
                             // of rows, every rank reads part of every chunk.
                             std::vector<std::vector<double>> bufs;
                             cairn::StateDict rs;
                             Workload cw; // for the spot check
                             for (int k = 0; k < w.large; ++k) {
                                 const auto& a = w.arrays[static_cast<std::size_t>(k)];
                                 const std::int64_t per = a.global[1] / g_size;
                                 Array c;
                                 c.name = a.name;
                                 c.global = a.global;
                                 c.box = cairn::Box{{0, per * g_rank}, {a.global[0], per}};
                                 c.data.resize(static_cast<std::size_t>(a.global[0] * per));
                                 cw.arrays.push_back(std::move(c));
                             }
                             for (auto& c : cw.arrays)
                                 rs.add_array<double>(c.name, c.data.data(), c.global, c.box);
                             // With cooperative reads off and on (-coop-), in
                             // an order that alternates from run to run.
                             for (int k = 0; k < 2; ++k) {
                                 const bool coop = (k + run) % 2 == 1;
                                 const char* name = coop ? "cairn-rank-reshard-coop-load" : "cairn-rank-reshard-load";
                                 auto lr = l;
                                 lr.cooperative = coop;
                                 if (run == 0)
                                     for (auto& c : cw.arrays)
                                         std::fill(c.data.begin(), c.data.end(), -1.0);
                                 drop_caches();
                                 for (auto& c : cw.arrays)
                                     touch_write(c.data.data(), c.data.size() * 8);
                                 r.add(name, T, timed([&] { cairn::load(rs, p, g_comm, lr); }));
                                 if (run == 0)
                                     check_state(cw, name);
                             }
                             // The same decomposition into arrays with one
                             // ghost layer, as a simulation holds its fields:
                             // not dense, so read through the buffer.
                             std::vector<std::vector<double>> gb(static_cast<std::size_t>(w.large));
                             cairn::StateDict gs;
                             for (int k = 0; k < w.large; ++k) {
                                 const auto& a = w.arrays[static_cast<std::size_t>(k)];
                                 const std::int64_t ld = a.box.shape[1] + 2;
                                 auto& b = gb[static_cast<std::size_t>(k)];
                                 b.assign(static_cast<std::size_t>((a.box.shape[0] + 2) * ld), 0.0);
                                 gs.add_array<double>(a.name, &b[static_cast<std::size_t>(ld + 1)], a.global, a.box, {ld, 1});
                             }
                             drop_caches();
                             for (auto& b : gb)
                                 touch_write(b.data(), b.size() * 8);
                             r.add("cairn-rank-ghost-load", T, timed([&] { cairn::load(gs, p, g_comm, l); }));
                             if (run == 0) {
                                 long bad = 0;
                                 for (int k = 0; k < w.large; ++k) { // the interior, spot-checked
                                     const auto& a = w.arrays[static_cast<std::size_t>(k)];
                                     const std::int64_t ld = a.box.shape[1] + 2;
                                     for (std::int64_t s = 0; s < 64; ++s) {
                                         const std::int64_t i = (s * 7919) % a.box.shape[0], j = (s * 104729) % a.box.shape[1];
                                         const double got = gb[static_cast<std::size_t>(k)][static_cast<std::size_t>((i + 1) * ld + j + 1)];
                                         bad += got != pattern(static_cast<u64>((a.box.offsets[0] + i) * a.global[1] + j));
                                     }
                                 }
                                 long all = 0;
                                 MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, g_comm);
                                 if (all)
                                     say("ERROR: cairn-rank-ghost-load: %ld wrong elements after the load\n", all);
                             }
                         }
                         remove_path(p);
                     }});
    // Cairn, per-rank layout with one data file per node (the ranks of a
    // node write one file together): the save only, against cairn-rank-save.
    if (want("files"))
        cases.push_back({"cairn-node", [&](Results& r, int) {
                             const std::string p = base + "/ckpt_node";
                             remove_path(p);
                             auto o = so;
                             o.layout = cairn::Layout::per_rank;
                             o.per_rank.files = cairn::DataFiles::per_node();
                             touch_state(w, false);
                             r.add("cairn-node-save", T, timed([&] { cairn::save(sd, p, g_comm, o); }));
                             remove_path(p);
                         }});
    // The same with direct writes (CAIRN_GROUP_WRITES=direct: O_DIRECT into
    // allocated space, not MPI_File_write_at through the page cache, whose
    // write(2)s into one file on a local file system run one at a time under
    // the file's write lock).
    if (want("files"))
        cases.push_back({"cairn-node-direct", [&](Results& r, int) {
                             const std::string p = base + "/ckpt_node_direct";
                             remove_path(p);
                             auto o = so;
                             o.layout = cairn::Layout::per_rank;
                             o.per_rank.files = cairn::DataFiles::per_node();
                             touch_state(w, false);
                             setenv("CAIRN_GROUP_WRITES", "direct", 1);
                             r.add("cairn-node-direct-save", T, timed([&] { cairn::save(sd, p, g_comm, o); }));
                             unsetenv("CAIRN_GROUP_WRITES");
                             remove_path(p);
                         }});
    // Cairn, container layout.
    cases.push_back({"cairn-container", [&](Results& r, int run) {
                         const std::string p = base + "/ckpt.h5";
                         remove_path(p);
                         auto o = so;
                         o.layout = cairn::Layout::container;
                         touch_state(w, false);
                         r.add("cairn-container-save", T, timed([&] { cairn::save(sd, p, g_comm, o); }));
                         if (run == 0)
                             scramble(w);
                         drop_caches();
                         touch_state(w, true);
                         auto l = lo;
                         l.layout = cairn::Layout::container;
                         r.add("cairn-container-load", T, timed([&] { cairn::load(sd, p, g_comm, l); }));
                         if (run == 0)
                             check_state(w, "cairn-container-load");
                         remove_path(p);
                     }});
    if (want("mpiio")) {
        cases.push_back({"mpiio-rank", [&](Results& r, int) {
                             const std::string p = base + "/mpiio_rank";
                             fresh_path(p);
                             touch_state(w, false);
                             r.add("mpiio-rank-" + g_opt.io + "-save", T, timed([&] { mpiio_rank(w, p, true); }));
                             drop_caches();
                             touch_state(w, true);
                             r.add("mpiio-rank-" + g_opt.io + "-load", T, timed([&] { mpiio_rank(w, p, false); }));
                             remove_path(p);
                         }});
        cases.push_back({"mpiio-shared", [&](Results& r, int) {
                             const std::string p = base + "/mpiio_shared";
                             fresh_path(p);
                             touch_state(w, false);
                             r.add("mpiio-shared-" + g_opt.io + "-save", T, timed([&] { mpiio_shared(w, p, true); }));
                             drop_caches();
                             touch_state(w, true);
                             r.add("mpiio-shared-" + g_opt.io + "-load", T, timed([&] { mpiio_shared(w, p, false); }));
                             remove_path(p);
                         }});
    }
    if (want("hdf5")) {
        cases.push_back({"hdf5", [&](Results& r, int) {
                             const std::string p = base + "/plain.h5";
                             remove_path(p);
                             touch_state(w, false);
                             r.add("hdf5-save", T, timed([&] { hdf5_plain(w, p, true); }));
                             drop_caches();
                             touch_state(w, true);
                             r.add("hdf5-load", T, timed([&] { hdf5_plain(w, p, false); }));
                             remove_path(p);
                         }});
    }
    if (is_large && g_opt.fio && want("fio")) {
        if (have_fio()) {
            cases.push_back({"fio", [&](Results& r, int) {
                                 const std::string p = base + "/fio";
                                 const u64 per = T / static_cast<u64>(g_size);
                                 // Not pre-warmed before its write: with the pre-warm fio wrote
                                 // 2x slower here (1.16-1.25 s against 0.57-0.97 s for 1 GiB,
                                 // unexplained); the limit is taken in fio's better condition.
                                 // Two request sizes: 1 MiB, and 64 MiB, the size of the
                                 // requests Cairn and plain MPI-IO make for large arrays (cold
                                 // reads of 1 MiB ran at 2.2-2.6 GB/s here, of 64 MiB at 3.4-3.5).
                                 // The limit is the better of the two, run by run (1 MiB only
                                 // when a rank's share is smaller than 64 MiB).
                                 struct Block {
                                     const char* name;
                                     u64 bytes;
                                 };
                                 double best_w = HUGE_VAL, best_r = HUGE_VAL;
                                 for (const Block bs : {Block{"1M", u64(1) << 20}, Block{"64M", u64(64) << 20}}) {
                                     if (per < bs.bytes)
                                         continue; // fio refuses a file smaller than its block
                                     fresh_path(p);
                                     const double ws = run_fio(p, per, true, bs.name);
                                     drop_caches();
                                     const double rs = run_fio(p, per, false, bs.name);
                                     const std::string c = std::string("fio-") + bs.name;
                                     if (ws > 0) {
                                         r.add(c + "-write", per * g_size, ws);
                                         best_w = std::min(best_w, ws);
                                     }
                                     if (rs > 0) {
                                         r.add(c + "-read", per * g_size, rs);
                                         best_r = std::min(best_r, rs);
                                     }
                                 }
                                 if (best_w < HUGE_VAL)
                                     r.add("fio-write", per * g_size, best_w);
                                 if (best_r < HUGE_VAL)
                                     r.add("fio-read", per * g_size, best_r);
                                 remove_path(p);
                             }});
        } else {
            say("note: fio not found: the physical-limit figures are skipped (scripts/bench.sh installs it)\n");
        }
    }
    for (const auto& [name, python] : g_opt.torch_peers) {
        if (!is_large || !want("torch") || g_opt.torch_script.empty())
            break;
        cases.push_back({name, [&, name = name, python = python](Results& r, int) {
                             const std::string p = base + "/torch";
                             fresh_path(p);
                             warm_page_cache(); // for its save (its load follows in the same process)
                             const auto [s, l] = run_torch(name, python, p, static_cast<double>(T) / 1048576.0);
                             if (s > 0)
                                 r.add(name + "-save", T, s);
                             if (l > 0)
                                 r.add(name + "-load", T, l);
                             remove_path(p);
                         }});
    }
    if (is_large && want("async")) {
        // async_save (full_copy) blocking time vs a memcpy of this rank's
        // bytes into a pre-touched buffer, and vs a synchronous save.
        cases.push_back({"async", [&, buf = std::vector<char>()](Results& r, int) mutable {
                             const std::string p = base + "/ckpt_async";
                             remove_path(p);
                             u64 mine = 0;
                             for (const auto& a : w.arrays)
                                 mine += a.data.size() * 8;
                             if (buf.size() != mine)
                                 buf.assign(mine, 0);
                             touch_write(buf.data(), buf.size());
                             touch_state(w, false);
                             MPI_Barrier(g_comm);
                             double t0 = now();
                             char* d = buf.data();
                             for (const auto& a : w.arrays) {
                                 std::memcpy(d, a.data.data(), a.data.size() * 8);
                                 d += a.data.size() * 8;
                             }
                             const double tm = allmax(now() - t0);
                             auto o = so;
                             o.layout = cairn::Layout::per_rank;
                             o.async_staging = cairn::AsyncStaging::full_copy;
                             touch_state(w, false);
                             MPI_Barrier(g_comm);
                             t0 = now();
                             auto h = cairn::async_save(sd, p, g_comm, o);
                             const double tb = allmax(now() - t0);
                             const double tw = timed([&] { h.wait(); }) + tb;
                             r.add("memcpy-block", 0, tm);
                             r.add("async-save-block", 0, tb);
                             r.add("async-save-total", T, tw);
                             remove_path(p);
                         }});
    }

    // Warm-up rounds first (run 0 also checks the data read back): on this
    // kind of VM the first use of memory and page cache after a while is slow
    // at random, and the first save of a process allocates its buffers. Their
    // figures are printed ("warmup" lines: what a first checkpoint costs) but
    // not counted in the medians.
    Results W;
    W.workload = R.workload;
    // Each run starts one case later than the one before (the order
    // rotates): no case always follows the same one, whose cold read or
    // removed files leave the page cache and free memory in a given state.
    for (int run = 0; run < g_opt.warmup + g_opt.runs; ++run)
        for (std::size_t i = 0; i < cases.size(); ++i) {
            auto& c = cases[(i + static_cast<std::size_t>(run)) % cases.size()];
            c.run(run < g_opt.warmup ? W : R, run);
            say("  %s %d/%d %s %s done\n", run < g_opt.warmup ? "warm-up" : "run",
                run < g_opt.warmup ? run + 1 : run - g_opt.warmup + 1, run < g_opt.warmup ? g_opt.warmup : g_opt.runs,
                w.name.c_str(), c.name.c_str());
        }
    if (g_rank == 0)
        for (const auto& [c, st] : W.secs) {
            std::printf("warmup %s %s", W.workload.c_str(), c.c_str());
            for (const double v : st.v)
                std::printf(" %.3f", v);
            std::printf(" s\n");
        }
    return R;
}

void print_ratios(const Results& r, const Results* large)
{
    const std::string io = g_opt.io;
    tput_ratio(r, "cairn-rank-save", "fio-write");
    tput_ratio(r, "cairn-rank-save", "mpiio-rank-" + io + "-save");
    tput_ratio(r, "cairn-rank-load", "fio-read");
    tput_ratio(r, "cairn-node-save", "cairn-rank-save");
    tput_ratio(r, "cairn-node-direct-save", "cairn-rank-save");
    tput_ratio(r, "cairn-rank-load", "mpiio-rank-" + io + "-load");
    tput_ratio(r, "cairn-rank-reshard-load", "fio-read");
    tput_ratio(r, "cairn-rank-reshard-load", "cairn-rank-load");
    tput_ratio(r, "cairn-rank-reshard-coop-load", "fio-read");
    tput_ratio(r, "cairn-rank-reshard-coop-load", "cairn-rank-reshard-load");
    tput_ratio(r, "cairn-rank-ghost-load", "fio-read");
    tput_ratio(r, "cairn-rank-ghost-load", "cairn-rank-load");
    tput_ratio(r, "cairn-container-save", "hdf5-save");
    tput_ratio(r, "cairn-container-save", "mpiio-shared-" + io + "-save");
    tput_ratio(r, "cairn-container-save", "fio-write");
    tput_ratio(r, "cairn-container-load", "fio-read");
    tput_ratio(r, "cairn-container-load", "hdf5-load");
    for (const auto& peer : g_opt.torch_peers) {
        const std::string& name = peer.first;
        tput_ratio(r, "cairn-rank-save", name + "-save");
        tput_ratio(r, "cairn-rank-load", name + "-load");
        tput_ratio(r, "cairn-container-save", name + "-save");
        tput_ratio(r, "cairn-container-load", name + "-load");
    }
    // The baselines against the physical limit.
    tput_ratio(r, "mpiio-rank-" + io + "-save", "fio-write");
    tput_ratio(r, "mpiio-shared-" + io + "-save", "fio-write");
    tput_ratio(r, "mpiio-rank-" + io + "-load", "fio-read");
    tput_ratio(r, "hdf5-save", "fio-write");
    if (r.has("async-save-block") && r.has("memcpy-block")) {
        ratio_line(r.workload, "async-save-block/memcpy", r.secs.at("async-save-block").median() /
                                                               r.secs.at("memcpy-block").median());
        if (r.has("cairn-rank-save"))
            ratio_line(r.workload, "async-save-block/sync-save", r.secs.at("async-save-block").median() /
                                                                     r.secs.at("cairn-rank-save").median());
    }
    if (large) {
        // The many-small-arrays mix against the large arrays.
        tput_ratio(r, "cairn-rank-save", "cairn-rank-save", large, large->workload + "-cairn-rank-save");
        tput_ratio(r, "cairn-rank-load", "cairn-rank-load", large, large->workload + "-cairn-rank-load");
        tput_ratio(r, "cairn-container-save", "cairn-container-save", large,
                   large->workload + "-cairn-container-save");
        tput_ratio(r, "cairn-container-load", "cairn-container-load", large,
                   large->workload + "-cairn-container-load");
        tput_ratio(r, "cairn-rank-save", "fio-write", large);
        tput_ratio(r, "cairn-rank-load", "fio-read", large);
    }
}

// ---------------------------------------------------------------- small

// The processor time per array of a save and of a load (warm page cache)
// of the small workload in each layout, summed over the ranks: unlike the
// wall time, it hardly depends on what else runs on the machine. Open MPI
// spins in collectives, so with several ranks it includes their waits.
void bench_small_cpu(Workload& w)
{
    auto sd = state_of(w);
    const std::string base = g_opt.dir + "/" + w.name;
    const auto cpu = [] {
        timespec t{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
    };
    const auto all = [](double v) {
        double s = 0;
        MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, g_comm);
        return s;
    };
    std::map<std::string, Stat> st;
    for (int run = 0; run < g_opt.warmup + g_opt.runs; ++run)
        for (const auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
            const bool rank = layout == cairn::Layout::per_rank;
            const std::string name = rank ? "cairn-rank" : "cairn-container";
            const std::string p = base + (rank ? "/cpu_rank" : "/cpu.h5");
            remove_path(p);
            cairn::SaveOptions so;
            so.layout = layout;
            cairn::LoadOptions lo;
            lo.layout = layout;
            MPI_Barrier(g_comm);
            double c0 = cpu();
            cairn::save(sd, p, g_comm, so);
            const double save = all(cpu() - c0);
            MPI_Barrier(g_comm);
            c0 = cpu();
            cairn::load(sd, p, g_comm, lo);
            const double load = all(cpu() - c0);
            if (run >= g_opt.warmup) {
                st[name + "-save"].v.push_back(save);
                st[name + "-load"].v.push_back(load);
            }
            remove_path(p);
        }
    if (g_rank != 0)
        return;
    const double n = g_opt.many_arrays;
    for (const auto& [c, s] : st)
        std::printf("figure %s %s-cpu-per-array %.1f us (min %.1f, max %.1f; all ranks)\n", w.name.c_str(), c.c_str(),
                    s.median() / n * 1e6, s.min() / n * 1e6, s.max() / n * 1e6);
    for (const char* op : {"save", "load"})
        std::printf("ratio %s cairn-container-%s-cpu/cairn-rank-%s-cpu %.3f\n", w.name.c_str(), op, op,
                    st["cairn-rank-" + std::string(op)].median() / st["cairn-container-" + std::string(op)].median());
}

// ---------------------------------------------------------------- memory

// Peak resident growth of one synchronous save (fsync) of the workload
// against the state size and the staging bound, in each layout (alternating
// within a run), measured with VmHWM reset through /proc/self/clear_refs.
// The container's figure includes what HDF5 and MPI-IO hold during the save
// (metadata cache, collective buffers) and the small-dataset exchange.
void bench_memory(Workload& w)
{
    const std::string& wl = w.name;
    remove_path(g_opt.dir + "/memory");
    auto sd = state_of(w);
    cairn::SaveOptions o;
    struct Case {
        const char* name; // ratio prefix ("" for the per-rank layout, as before)
        cairn::Layout layout;
        std::string id;
        Stat extra;
    };
    std::vector<Case> cases{{"", cairn::Layout::per_rank, g_opt.dir + "/memory/ckpt", {}},
                            {"container-", cairn::Layout::container, g_opt.dir + "/memory/ckpt.h5", {}}};
    bool reset_ok = true;
    u64 mine = 0;
    for (const auto& a : w.arrays)
        mine += a.data.size() * 8;
    for (int run = 0; run < g_opt.runs; ++run) {
        for (std::size_t k = 0; k < cases.size(); ++k) {
            Case& c = cases[(k + static_cast<std::size_t>(run)) % cases.size()];
            o.layout = c.layout;
            remove_path(g_opt.dir + "/memory");
            cairn::detail::release_buffer_pool();
            touch_state(w, false);
            reset_ok = reset_peak_rss() && reset_ok;
            MPI_Barrier(g_comm);
            const long before = status_kib("VmRSS");
            if (run == 0 && status_kib("VmHWM") > before + 1024)
                reset_ok = false;
            cairn::save(sd, c.id, g_comm, o);
            const long hwm = status_kib("VmHWM");
            c.extra.v.push_back(allmax(static_cast<double>(hwm - before) * 1024.0));
        }
    }
    remove_path(g_opt.dir + "/memory");
    const double bound = static_cast<double>(o.staging_bytes) + 16.0 * 1048576.0;
    if (!reset_ok)
        say("note: could not reset VmHWM (/proc/self/clear_refs): the memory figure is an upper bound\n");
    say("\n# memory: peak resident growth of a synchronous save, largest rank (MiB; min-max over %d runs)\n",
        g_opt.runs);
    for (auto& c : cases) {
        say("figure %s %ssync-save-peak-extra %.1f MiB (min %.1f, max %.1f); this rank's state %.1f MiB; "
            "staging bound %.0f MiB + 16 MiB\n",
            wl.c_str(), c.name, c.extra.median() / 1048576.0, c.extra.min() / 1048576.0, c.extra.max() / 1048576.0,
            mine / 1048576.0, static_cast<double>(o.staging_bytes) / 1048576.0);
        ratio_line(wl, std::string(c.name) + "sync-save-peak-extra/state-bytes",
                   c.extra.median() / static_cast<double>(mine));
        ratio_line(wl, std::string(c.name) + "sync-save-peak-extra/staging-bound+16MiB", c.extra.median() / bound);
    }
}

// ---------------------------------------------------------------- planning

// The coordinator's side of a save for synthetic plans of `ranks` ranks
// with `arrays` 2-D arrays each sharded by rows over all ranks (chunks of
// 256 KiB, one checksum block each), without running those processes, on
// the path save() takes for the default planner and Cairn's own storage
// (src/plan/columnar.hpp): reading the gathered encoded plans into columns
// ("decode plans"), the global plan (validation, dedup, chunks, who writes
// what), encoding the final plans (assignments), decoding and attaching the
// ranks' encoded write results, and writing metadata.h5 (fsync). Building
// the encoded plans and results is not timed. Rank 0 only.
void bench_planning(long ranks, long arrays, Results& R)
{
    namespace cd = cairn::detail;
    const std::string label = std::to_string(ranks) + "x" + std::to_string(arrays);
    const std::int64_t rows = 32, cols = 1024; // 256 KiB chunks of f64
    double t_build = 0, t_decode = 0, t_global = 0, t_encode = 0, t_attach = 0, t_md = 0;
    double r_encode = 0, r_attach = 0, r_md = 0; // the next save with the kept plan (SaveOptions::reuse_plan)
    double t_load_read = 0;    // a load's coordinator: metadata.h5 read, its rows framed entry by entry
    double t_load_columns = 0; // ... of which the read before the first frame
    double load_heap = 0;      // ... heap held by the read content (largest over the runs)
    double t_load_whole = 0;   // the same with every row expanded first (read_metadata_columns_file)
    double load_whole_heap = 0;
    double t_load_decode = 0, load_heap_bytes = 0; // every rank of a load: the metadata decoded into structs
    double t_load_part = 0, load_part_heap = 0;    // ... only the chunks a rank's box overlaps
    double t_verify_share = 0, verify_share_heap = 0; // verify on 64 ranks: rank 0's share
    u64 load_bcast_bytes = 0, load_frame_max = 0;
    u64 md_bytes = 0, chunks = 0, gathered_bytes = 0, results_bytes = 0;
    double peak_extra = 0; // bytes: VmHWM growth over the timed steps, gathered plans and results not counted
    const std::string mdpath = g_opt.dir + "/planning/metadata.h5";
    stdfs::create_directories(g_opt.dir + "/planning");
    const int runs = ranks * arrays > 1100000 ? 1 : g_opt.runs;
    std::vector<std::string> names;
    for (long a = 0; a < arrays; ++a)
        names.push_back("model.layer" + std::to_string(a / 10) + ".field_" + std::to_string(a % 10));
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    // The write results as the ranks report them: rank r writes chunk r of
    // every array, in name order (its final plan's order).
    const auto make_results = [&](int run) {
        std::vector<cd::Bytes> results(static_cast<std::size_t>(ranks));
        for (long r = 0; r < ranks; ++r) {
            std::vector<cairn::WriteResult> rs(static_cast<std::size_t>(arrays));
            u64 off = 0;
            const std::string path = "__" + std::to_string(r) + "_0.distcp";
            for (long a = 0; a < arrays; ++a) {
                auto& w = rs[static_cast<std::size_t>(a)];
                w.fqn = sorted[static_cast<std::size_t>(a)];
                w.chunk = static_cast<std::uint32_t>(r);
                w.storage = cairn::StorageInfo{path, off, static_cast<u64>(rows * cols * 8), {0x9e3779b97f4a7c15ull ^ off}};
                off += static_cast<u64>(rows * cols * 8);
            }
            // As the ranks send them (src/driver/save.cpp): every name table
            // is the same bytes here, so ranks but 0 leave theirs out.
            results[static_cast<std::size_t>(r)] = r == 0 ? cd::encode(rs) : cd::strip_name_table(cd::encode(rs));
            results_bytes += run == 0 ? results[static_cast<std::size_t>(r)].size() : 0;
        }
        return results;
    };
    // What the storage's prepare_global_plan returns, final plans encoded.
    const auto encode_finals = [&](cd::ColumnarSavePlan& cp) {
        auto shells = cp.storage_shells();
        cd::Encoder dir; // as DistcpWriter::prepare_global_plan: the directory to write
        dir.str(g_opt.dir + "/planning");
        const auto data = dir.take();
        for (auto& sh : shells)
            sh.storage_data = data;
        std::vector<cd::Bytes> out;
        out.reserve(shells.size());
        for (std::size_t r = 0; r < shells.size(); ++r)
            out.push_back(cp.encode_final(r, shells[r]));
        return out;
    };
    for (int run = 0; run < runs; ++run) {
        auto t0 = now();
        std::vector<cd::Bytes> gathered(static_cast<std::size_t>(ranks));
        cairn::SavePlan plan0; // rank 0's local plan
        for (long r = 0; r < ranks; ++r) {
            cairn::SavePlan p;
            p.items.reserve(static_cast<std::size_t>(arrays));
            for (long a = 0; a < arrays; ++a) {
                cairn::WriteItem it;
                it.fqn = names[static_cast<std::size_t>(a)];
                it.kind = cairn::ItemKind::array;
                it.dtype = cairn::DType::f64;
                it.global_shape = {rows * ranks, cols};
                it.box = cairn::Box{{rows * r, 0}, {rows, cols}};
                it.nbytes = static_cast<u64>(rows * cols * 8);
                p.items.push_back(std::move(it));
            }
            // As a save sends it: every rank's plan is the same but for its
            // boxes, so ranks but 0 send only those (src/driver/save.cpp).
            std::uint64_t skeleton = 0;
            gathered[static_cast<std::size_t>(r)] = r == 0 ? cd::encode(p) : cd::boxes_form(cd::encode(p), skeleton);
            gathered_bytes += run == 0 ? gathered[static_cast<std::size_t>(r)].size() : 0;
            if (r == 0)
                plan0 = std::move(p);
        }
        t_build += now() - t0;
        // The memory the coordinator's steps are about to take, touched and
        // freed just before (BENCHMARKS.md, "Method", "Page cache":
        // on this VM the first use of memory the host has taken back costs
        // more than the work; a coordinator on a dedicated node reuses its own).
        const auto prewarm = [&] {
            if (g_opt.plan_prewarm > 0) {
                std::vector<char> warm(static_cast<std::size_t>(g_opt.plan_prewarm) *
                                       static_cast<std::size_t>(ranks * arrays));
                touch_write(warm.data(), warm.size());
            }
        };
        prewarm();
        reset_peak_rss(); // VmHWM from here: the coordinator's peak
        const long rss_before = status_kib("VmRSS");
        t0 = now();
        cd::ColumnarSavePlan cp;
        bool ok = cp.ingest(gathered);
        t_decode += now() - t0;
        t0 = now();
        ok = ok && cp.plan();
        t_global += now() - t0;
        if (!ok) {
            std::printf("figure planning-%s: the columnar path refused the plans\n", label.c_str());
            return;
        }
        t0 = now();
        encode_finals(cp);
        cp.keep(); // as save() with SaveOptions::reuse_plan (release_plan_tables() otherwise)
        t_encode += now() - t0;
        std::vector<cd::Bytes>().swap(gathered);
        t0 = now();
        auto results = make_results(run);
        t_build += now() - t0;
        // Again: building the results took memory. The peak so far is kept,
        // VmHWM reset after the pre-warm.
        peak_extra = std::max(peak_extra, static_cast<double>(status_kib("VmHWM") - rss_before) * 1024.0);
        prewarm();
        reset_peak_rss();
        t0 = now();
        cp.attach_results(results);
        t_attach += now() - t0;
        std::vector<cd::Bytes>().swap(results);
        auto& md = cp.metadata();
        md.layout = "distcp";
        md.checksum_block = u64(1) << 20;
        chunks = md.chunk_count();
        t0 = now();
        cd::write_metadata_file(mdpath, md, true);
        t_md += now() - t0;
        md_bytes = static_cast<u64>(stdfs::file_size(mdpath));
        peak_extra = std::max(peak_extra, static_cast<double>(status_kib("VmHWM") - rss_before) * 1024.0);
        {
            // A load of it (src/driver/load.cpp). The coordinator reads
            // metadata.h5 and encodes it in frames of whole entries for the
            // broadcast (detail::share_metadata), the chunk rows expanded
            // entry by entry; kept here to decode them below as every rank
            // would, one at a time. Side by side (order alternating by run):
            // the same with every row expanded before the first frame.
            std::vector<cd::Bytes> frames;
            const auto frame_all = [&](cd::MetadataFrames& f, std::vector<cd::Bytes>* keep) {
                for (cd::Bytes b; !(b = f.next(cd::metadata_frame_bytes())).empty();)
                    if (keep)
                        keep->push_back(std::move(b));
            };
            // malloc's bytes in use, including its mmap'ed blocks (large vectors).
            const auto heap_now = [] {
                const auto m = mallinfo2();
                return static_cast<double>(m.uordblks) + static_cast<double>(m.hblkhd);
            };
            const auto by_rows = [&] {
                const auto heap0 = heap_now();
                t0 = now();
                cd::MetadataFrames f(cd::read_metadata_rows_file(mdpath));
                t_load_columns += now() - t0;
                load_heap = std::max(load_heap, heap_now() - heap0);
                frame_all(f, &frames);
                t_load_read += now() - t0;
            };
            const auto whole = [&] {
                const auto heap0 = heap_now();
                const double t = now();
                cd::MetadataFrames f(cd::read_metadata_columns_file(mdpath));
                load_whole_heap = std::max(load_whole_heap, heap_now() - heap0);
                frame_all(f, nullptr);
                t_load_whole += now() - t;
            };
            if (run % 2) {
                whole();
                by_rows();
            } else {
                by_rows();
                whole();
            }
            load_bcast_bytes = 0;
            load_frame_max = 0;
            for (const auto& b : frames) {
                load_bcast_bytes += b.size();
                load_frame_max = std::max<u64>(load_frame_max, b.size());
            }
            // With a custom planner or reader, every rank decodes it all
            // into the structs it plans from. Heap bytes in use while it
            // holds them (malloc's count: exact, not resident pages).
            if (chunks <= 4200000) { // about 250 bytes per chunk
                const auto heap_before = mallinfo2().uordblks;
                t0 = now();
                cd::MetadataDecoder all;
                for (const auto& b : frames)
                    all.add(b);
                const cairn::Metadata decoded = all.finish();
                t_load_decode += now() - t0;
                load_heap_bytes = static_cast<double>(mallinfo2().uordblks - heap_before);
            } else {
                t_load_decode = -1;
            }
            // With the default planner and Cairn's readers, only the chunks
            // the rank's box overlaps, here a rank in the middle (one chunk
            // of every array, besides each array's first).
            const long r = ranks / 2;
            const cairn::Box mine{{rows * r, 0}, {rows, cols}};
            const auto heap_before = mallinfo2().uordblks;
            t0 = now();
            cd::MetadataDecoder mine_only([&](const std::string&) -> const cairn::Box* { return &mine; });
            for (const auto& b : frames)
                mine_only.add(b);
            const cairn::Metadata part = mine_only.finish();
            t_load_part += now() - t0;
            load_part_heap = static_cast<double>(mallinfo2().uordblks - heap_before);
            // verify() on 64 ranks: rank 0's share of the chunks, assigned
            // as they arrive (src/driver/verify.cpp), kept with each entry's first.
            {
                constexpr int verifiers = 64;
                const auto heap0 = mallinfo2().uordblks;
                t0 = now();
                using Load = std::pair<u64, int>;
                std::priority_queue<Load, std::vector<Load>, std::greater<>> least;
                for (int v = 0; v < verifiers; ++v)
                    least.emplace(0, v);
                cd::MetadataDecoder share([&](const std::string&, std::size_t, u64 length) {
                    auto [b, v] = least.top();
                    least.pop();
                    least.emplace(b + length + 1, v);
                    return v == 0;
                });
                for (const auto& b : frames)
                    share.add(b);
                const cairn::Metadata kept = share.finish();
                t_verify_share += now() - t0;
                verify_share_heap = static_cast<double>(mallinfo2().uordblks - heap0);
            }
        }
        stdfs::remove(mdpath);
        // The next save of the same plans, with the kept plan: nothing
        // gathered or decoded, no global plan; the final plans encoded again
        // for the storage, the results attached, metadata.h5 written.
        t0 = now();
        cp.reuse(plan0);
        encode_finals(cp);
        r_encode += now() - t0;
        results = make_results(1);
        t0 = now();
        cp.attach_results(results);
        r_attach += now() - t0;
        std::vector<cd::Bytes>().swap(results);
        t0 = now();
        cd::write_metadata_file(mdpath, md, true);
        r_md += now() - t0;
        stdfs::remove(mdpath);
    }
    const double n = runs;
    const double total = (t_decode + t_global + t_encode + t_attach + t_md) / n;
    const double again = (r_encode + r_attach + r_md) / n;
    std::printf("figure planning-%s chunks %llu, plan+metadata %.3f s (decode plans %.3f, global plan %.3f, "
                "encode plans %.3f, attach results %.3f, write metadata.h5 %.3f); gathered plans %.1f MiB, results "
                "%.1f MiB, metadata.h5 %.1f MiB = %.1f B/chunk (mean of %d runs)\n",
                label.c_str(), static_cast<unsigned long long>(chunks), total, t_decode / n, t_global / n,
                t_encode / n, t_attach / n, t_md / n,
                gathered_bytes / 1048576.0, results_bytes / 1048576.0, md_bytes / 1048576.0,
                static_cast<double>(md_bytes) / static_cast<double>(chunks), runs);
    // Resident growth: memory the process already held (freed by earlier
    // cases, kept by malloc) is not counted, so smaller cases can show less
    // than they use.
    std::printf("figure planning-%s coordinator peak resident growth %.1f MiB (%.0f B/chunk) beyond the gathered "
                "plans (a lower bound); pre-warmed %ld B/chunk\n",
                label.c_str(), peak_extra / 1048576.0, peak_extra / static_cast<double>(chunks), g_opt.plan_prewarm);
    std::printf("figure planning-%s next save with the kept plan (reuse_plan): %.3f s (encode plans %.3f, attach "
                "results %.3f, write metadata.h5 %.3f)\n",
                label.c_str(), again, r_encode / n, r_attach / n, r_md / n);
    std::printf("figure planning-%s a load of it: the coordinator reads metadata.h5 and encodes it, its chunk rows "
                "entry by entry, in %.3f s (%.3f s before the first frame), holding %.1f MiB of heap; %.1f MiB to "
                "broadcast (%.1f B/chunk) in frames of at most %.2f MiB\n",
                label.c_str(), t_load_read / n, t_load_columns / n, load_heap / 1048576.0,
                load_bcast_bytes / 1048576.0, static_cast<double>(load_bcast_bytes) / static_cast<double>(chunks),
                load_frame_max / 1048576.0);
    std::printf("figure planning-%s a load of it, every row expanded first (read_metadata_columns_file): %.3f s, "
                "holding %.1f MiB of heap\n",
                label.c_str(), t_load_whole / n, load_whole_heap / 1048576.0);
    std::printf("ratio planning-%s load-read-rows/whole-seconds %.3f\n", label.c_str(),
                t_load_whole > 0 ? t_load_read / t_load_whole : 0.0);
    if (t_load_decode >= 0)
        std::printf("figure planning-%s a load of it, custom planner or reader: every rank decodes all of it into "
                    "structs in %.3f s, holding %.1f MiB of heap (%.0f B/chunk)\n",
                    label.c_str(), t_load_decode / n, load_heap_bytes / 1048576.0,
                    load_heap_bytes / static_cast<double>(chunks));
    std::printf("figure planning-%s a load of it, default planner: a rank decodes only the chunks its box overlaps "
                "in %.3f s, holding %.2f MiB of heap (%.2f B/chunk of the checkpoint) and one frame at a time\n",
                label.c_str(), t_load_part / n, load_part_heap / 1048576.0,
                load_part_heap / static_cast<double>(chunks));
    std::printf("figure planning-%s verify on 64 ranks: a rank decodes its share of the chunks in %.3f s, holding "
                "%.1f MiB of heap and one frame at a time\n",
                label.c_str(), t_verify_share / n, verify_share_heap / 1048576.0);
    std::printf("ratio planning-%s plan+metadata-seconds/target-2s %.3f\n", label.c_str(), total / 2.0);
    std::printf("ratio planning-%s reused-plan+metadata-seconds/target-2s %.3f\n", label.c_str(), again / 2.0);
    std::printf("ratio planning-%s metadata-bytes-per-chunk/target-100 %.3f\n", label.c_str(),
                static_cast<double>(md_bytes) / static_cast<double>(chunks) / 100.0);
    std::fflush(stdout);
    R.add("plan+metadata-" + label, 0, total);
    R.add("reused-plan+metadata-" + label, 0, again);
}

// The struct-based coordinator path (a custom planner or storage): the
// coordinator's side of a save for synthetic plans of `ranks` ranks
// with `arrays` 2-D arrays each sharded by rows over all ranks (chunks of
// 256 KiB, one checksum block each), without running those processes:
// decoding the gathered plans, the global plan (validation, dedup,
// metadata), encoding the final plans, attaching the write results and
// writing metadata.h5 (fsync). Rank 0 only.
void bench_planning_generic(long ranks, long arrays, Results& R)
{
    const std::string label = std::to_string(ranks) + "x" + std::to_string(arrays) + "-generic";
    const std::int64_t rows = 32, cols = 1024; // 256 KiB chunks of f64
    double t_build = 0, t_decode = 0, t_global = 0, t_encode = 0, t_attach = 0, t_md = 0, t_bcast_md = 0;
    u64 md_bytes = 0, chunks = 0, gathered_bytes = 0;
    const std::string mdpath = g_opt.dir + "/planning/metadata.h5";
    stdfs::create_directories(g_opt.dir + "/planning");
    // Plans of more than a million chunks take long here: one run.
    const int runs = ranks * arrays > 1100000 ? 1 : g_opt.runs;
    for (int run = 0; run < runs; ++run) {
        auto t0 = now();
        std::vector<cairn::detail::Bytes> gathered(static_cast<std::size_t>(ranks));
        {
            std::vector<std::string> names;
            for (long a = 0; a < arrays; ++a)
                names.push_back("model.layer" + std::to_string(a / 10) + ".field_" + std::to_string(a % 10));
            for (long r = 0; r < ranks; ++r) {
                cairn::SavePlan p;
                p.items.reserve(static_cast<std::size_t>(arrays));
                for (long a = 0; a < arrays; ++a) {
                    cairn::WriteItem it;
                    it.fqn = names[static_cast<std::size_t>(a)];
                    it.kind = cairn::ItemKind::array;
                    it.dtype = cairn::DType::f64;
                    it.global_shape = {rows * ranks, cols};
                    it.box = cairn::Box{{rows * r, 0}, {rows, cols}};
                    it.nbytes = static_cast<u64>(rows * cols * 8);
                    p.items.push_back(std::move(it));
                }
                std::uint64_t skeleton = 0; // as a save sends it (above)
                gathered[static_cast<std::size_t>(r)] =
                    r == 0 ? cairn::detail::encode(p) : cairn::detail::boxes_form(cairn::detail::encode(p), skeleton);
                gathered_bytes += run == 0 ? gathered[static_cast<std::size_t>(r)].size() : 0;
            }
        }
        t_build += now() - t0;
        t0 = now();
        std::vector<cairn::SavePlan> plans;
        plans.reserve(gathered.size());
        for (auto& g : gathered) { // as src/driver/save.cpp: the plans sent as boxes put back together with rank 0's
            plans.push_back(cairn::detail::decode_save_plan(cairn::detail::restore_save_plan(g, gathered.front())));
            if (&g != &gathered.front())
                cairn::detail::Bytes().swap(g);
        }
        gathered.clear();
        t_decode += now() - t0;
        t0 = now();
        cairn::DefaultSavePlanner planner;
        auto [finals, md] = planner.create_global_plan(std::move(plans));
        t_global += now() - t0;
        t0 = now();
        std::vector<cairn::detail::Bytes> out;
        out.reserve(finals.size());
        for (const auto& f : finals)
            out.push_back(cairn::detail::encode(f));
        t_encode += now() - t0;
        out.clear();
        // Write results as the ranks would report them, attached to the metadata.
        // As attach_results (src/driver/save.cpp): entries found through one
        // hash map of names.
        t0 = now();
        std::unordered_map<std::string_view, cairn::EntryMeta*> by_name;
        for (auto& [f, e] : md.entries)
            by_name.emplace(f, &e);
        for (std::size_t r = 0; r < finals.size(); ++r) {
            u64 off = 0;
            const std::string path = "__" + std::to_string(r) + "_0.distcp";
            for (const auto& it : finals[r].items) {
                auto& ch = by_name.at(it.fqn)->chunks[it.chunk];
                ch.storage.path = path;
                ch.storage.offset = off;
                ch.storage.length = it.nbytes;
                ch.storage.checksums = {0x9e3779b97f4a7c15ull ^ off};
                off += it.nbytes;
            }
        }
        finals.clear();
        t_attach += now() - t0;
        md.layout = "distcp";
        md.checksum_block = u64(1) << 20;
        md.world_size = static_cast<int>(ranks);
        chunks = 0;
        for (const auto& [f, e] : md.entries)
            chunks += e.chunks.size();
        t0 = now();
        cairn::write_metadata_file(mdpath, md, true);
        t_md += now() - t0;
        md_bytes = static_cast<u64>(stdfs::file_size(mdpath));
        t0 = now();
        const auto enc = cairn::detail::encode(md); // what a load broadcasts
        t_bcast_md += now() - t0;
        (void)enc;
        stdfs::remove(mdpath);
    }
    const double n = runs;
    const double total = (t_decode + t_global + t_encode + t_attach + t_md) / n;
    std::printf("figure planning-%s chunks %llu, plan+metadata %.3f s (decode plans %.3f, global plan %.3f, "
                "encode plans %.3f, attach results %.3f, write metadata.h5 %.3f; encode metadata for load %.3f); "
                "gathered plans %.1f MiB, metadata.h5 %.1f MiB = %.1f B/chunk (mean of %d runs)\n",
                label.c_str(), static_cast<unsigned long long>(chunks), total, t_decode / n, t_global / n,
                t_encode / n, t_attach / n, t_md / n, t_bcast_md / n, gathered_bytes / 1048576.0,
                md_bytes / 1048576.0, static_cast<double>(md_bytes) / static_cast<double>(chunks), runs);
    std::printf("ratio planning-%s plan+metadata-seconds/target-2s %.3f\n", label.c_str(), total / 2.0);
    std::printf("ratio planning-%s metadata-bytes-per-chunk/target-100 %.3f\n", label.c_str(),
                static_cast<double>(md_bytes) / static_cast<double>(chunks) / 100.0);
    std::fflush(stdout);
    R.add("plan+metadata-" + label, 0, total);
}

// The data files of a per-rank save by `ranks` ranks over `nodes` nodes
// (consecutive ranks per node) with one file per node and with one per
// rank: the writer's grouping (detail::data_file_groups) on simulated node
// ids, no MPI job of that size. One process.
void bench_file_groups(int ranks, int nodes)
{
    std::vector<int> node_of(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r)
        node_of[static_cast<std::size_t>(r)] = static_cast<int>(static_cast<long long>(r) * nodes / ranks);
    std::set<std::string> names;
    std::vector<std::vector<int>> groups;
    const double t0 = now();
    groups = cairn::detail::data_file_groups(cairn::DataFiles::per_node(), node_of);
    for (const auto& g : groups)
        names.insert(cairn::detail::group_file_name(g, 0));
    const double t = now() - t0;
    const auto per_rank = cairn::detail::data_file_groups(cairn::DataFiles::per_rank(), node_of).size();
    const std::string label = std::to_string(ranks) + "-ranks-" + std::to_string(nodes) + "-nodes";
    std::printf("figure planning-files-%s data files per node %zu (distinct names %zu), per rank %zu; grouped in "
                "%.4f s\n",
                label.c_str(), groups.size(), names.size(), per_rank, t);
    std::printf("ratio planning-files-%s per-node-data-files/nodes %.3f\n", label.c_str(),
                static_cast<double>(names.size()) / nodes);
    std::fflush(stdout);
}

// ---------------------------------------------------------------- redundancy

// write(2) of n bytes at p to fd, in pieces of at most 64 MiB; false on error.
bool write_all(int fd, const char* p, std::size_t n)
{
    while (n > 0) {
        const ssize_t w = ::write(fd, p, std::min<std::size_t>(n, std::size_t(64) << 20));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

// The exchange of a node-local step's redundancy data (src/levels/
// redundancy.hpp) between fake nodes of one rank each, in a RAM disk
// (--local-dir + "-redundancy"), against the same bytes sent memory to
// memory by MPI point to point in the same pattern (each rank to the next,
// 4 MiB messages, Isend/Irecv: "mpi-p2p"), sent so with each piece received
// also written into a fresh file of the RAM disk ("mpi-p2p-write"), and
// copied by memcpy from memory into the kept mapping of a RAM-disk file
// written before ("memcpy-mapped": what receiving into a reused file's
// mapping costs without MPI), and by MPI into that mapping
// ("mpi-p2p-mapped"): partner copies and XOR parity over one group of every
// node, into fresh files (the first save of a manager: "partner-encode",
// "xor-encode") and over the files of the previous encode
// ("partner-encode-reused", "xor-encode-reused": a manager's later saves,
// which write over the redundancy files of the step they drop; the files
// are made before the first run), and the XOR rebuild of lost members
// ("xor-rebuild", below). Bytes: the ranks' data files. Every case in every
// run, the order rotating from run to run.
void bench_redundancy(u64 total)
{
    namespace cd = cairn::detail;
    const u64 mine = std::min<u64>(total, u64{512} << 20) / static_cast<u64>(g_size) / 4096 * 4096;
    const std::string root = g_opt.local_dir + "-redundancy";
    say("\nworkload redundancy: %d fake nodes of 1 rank, %.1f MiB of data files per rank, in %s\n", g_size,
        mine / 1048576.0, root.c_str());
    if (g_size < 2) {
        say("note: redundancy needs 2 ranks (2 fake nodes): skipped\n");
        return;
    }
    Results r;
    r.workload = "redundancy";
    cd::Topology topo(g_comm, 1);
    // Two step directories of the node holding the same data file (a hard
    // link): "step" for the fresh cases, emptied of redundancy files after
    // each, "reused" for the reused ones, whose files stay.
    const std::string node_dir = root + "/node" + std::to_string(topo.node);
    const std::string step = node_dir + "/step", reused = node_dir + "/reused";
    const std::string data_name = "__" + std::to_string(g_rank) + "_0.distcp";
    stdfs::remove_all(node_dir);
    stdfs::create_directories(step);
    stdfs::create_directories(reused);
    cd::SavedLayout layout;
    layout.nodes = topo.nodes;
    layout.node_of_rank = topo.node_of_rank;
    layout.hosts = topo.hosts;
    for (int q = 0; q < g_size; ++q)
        layout.files.push_back({{"__" + std::to_string(q) + "_0.distcp", mine}});
    {
        std::vector<char> data(static_cast<std::size_t>(mine));
        for (std::size_t i = 0; i < data.size(); ++i)
            data[i] = static_cast<char>((i * 131 + static_cast<std::size_t>(g_rank) * 7) >> 3);
        std::ofstream out(step + "/" + data_name, std::ios::binary);
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
    }
    stdfs::create_hard_link(step + "/" + data_name, reused + "/" + data_name);
    const u64 all_bytes = mine * static_cast<u64>(g_size);
    const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    const u64 piece = u64{4} << 20;
    std::vector<char> send(static_cast<std::size_t>(mine)), recv(static_cast<std::size_t>(mine));
    touch_write(send.data(), send.size());
    touch_write(recv.data(), recv.size());
    // Each rank sends `send` to the next and receives into `into` from the one before.
    const auto exchange = [&](char* into) {
        for (u64 at = 0; at < mine; at += piece) {
            const int n = static_cast<int>(std::min(piece, mine - at));
            MPI_Request q[2];
            MPI_Irecv(into + at, n, MPI_BYTE, prev, 77, g_comm, &q[0]);
            MPI_Isend(send.data() + at, n, MPI_BYTE, next, 77, g_comm, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        }
    };
    const auto p2p = [&] { exchange(recv.data()); };
    // The same exchange, each received piece also written (write(2)) into a
    // fresh file in the RAM disk: the floor of an encode that must keep
    // what it receives.
    const std::string p2p_file = step + "/p2p-received";
    // A file of the size of the data, written once (no holes), mapped as a
    // reused redundancy file is (storage/per_rank/mapped_files.hpp).
    const std::string mapped_file = reused + "/memcpy-target";
    stdfs::copy_file(step + "/" + data_name, mapped_file);
    char* const mapped = cd::kept_mapping(mapped_file, mine);
    if (!mapped)
        say("ERROR: redundancy memcpy-mapped: cannot map %s\n", mapped_file.c_str());
    const auto memcpy_mapped = [&] {
        if (mapped)
            std::memcpy(mapped, send.data(), static_cast<std::size_t>(mine));
    };
    const auto p2p_mapped = [&] { exchange(mapped ? mapped : recv.data()); };
    const auto p2p_write = [&] {
        const int fd = ::open(p2p_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        bool ok = fd >= 0;
        for (u64 at = 0; at < mine; at += piece) {
            const int n = static_cast<int>(std::min(piece, mine - at));
            MPI_Request q[2];
            MPI_Irecv(recv.data() + at, n, MPI_BYTE, prev, 78, g_comm, &q[0]);
            MPI_Isend(send.data() + at, n, MPI_BYTE, next, 78, g_comm, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
            ok = ok && write_all(fd, recv.data() + at, static_cast<std::size_t>(n));
        }
        if (fd >= 0)
            ::close(fd);
        if (!ok)
            say("ERROR: redundancy mpi-p2p-write: cannot write %s\n", p2p_file.c_str());
    };
    const auto encode = [&](cairn::Redundancy red, const std::string& dir) {
        layout.redundancy = red;
        cd::encode_redundancy(topo, layout, dir);
    };
    const auto clean = [&] {
        MPI_Barrier(g_comm);
        stdfs::remove_all(step + "/partner");
        stdfs::remove_all(step + "/xor");
        stdfs::remove_all(p2p_file);
        cd::unmap_removed_files(); // their pages freed, as the next save of a manager does
        MPI_Barrier(g_comm);
    };
    const auto partner = cairn::Redundancy::partner(), parity = cairn::Redundancy::xor_parity(g_size);
    encode(partner, reused); // the files the reused cases write over
    encode(parity, reused);
    // XOR rebuild: a third step directory with the data file and its parity
    // in groups of 2 nodes (3 in the last group when the count is odd); the
    // data file of the last node of each group is removed before each run
    // (with the copy rebuilt by the run before) and rebuilt by
    // rebuild_lost_files, all together. Bytes: the data rebuilt.
    const std::string rebuild_dir = node_dir + "/rebuild";
    stdfs::create_directories(rebuild_dir);
    stdfs::create_hard_link(step + "/" + data_name, rebuild_dir + "/" + data_name);
    const auto pairs = cairn::Redundancy::xor_parity(2);
    encode(pairs, rebuild_dir);
    std::vector<int> lost;
    std::vector<std::set<std::string>> held(static_cast<std::size_t>(topo.nodes));
    {
        const auto sets = cd::xor_sets(layout);
        for (std::size_t si = 0; si < sets.size(); ++si) {
            const auto& m = sets[si].members;
            lost.push_back(m.back());
            for (std::size_t j = 0; j < m.size(); ++j)
                held[static_cast<std::size_t>(topo.node_of_rank[static_cast<std::size_t>(m[j])])].insert(
                    "xor/" + std::to_string(si) + "." + std::to_string(j) + ".xor");
        }
        for (int q = 0; q < g_size; ++q)
            if (std::find(lost.begin(), lost.end(), q) == lost.end())
                held[static_cast<std::size_t>(topo.node_of_rank[static_cast<std::size_t>(q)])].insert(
                    layout.files[static_cast<std::size_t>(q)][0].name);
    }
    const auto lose = [&] {
        MPI_Barrier(g_comm);
        for (int q : lost) {
            std::error_code ec;
            if (q == g_rank || stdfs::exists(rebuild_dir + "/" + layout.files[static_cast<std::size_t>(q)][0].name))
                stdfs::remove(rebuild_dir + "/" + layout.files[static_cast<std::size_t>(q)][0].name, ec);
        }
        MPI_Barrier(g_comm);
    };
    const auto rebuild = [&] {
        layout.redundancy = pairs;
        cd::rebuild_lost_files(topo, layout, held, rebuild_dir, nullptr);
    };
    struct Case {
        const char* name;
        std::function<void()> run;
        std::function<void()> prepare; // untimed, before the run
        u64 bytes;
    };
    const std::vector<Case> cases{
        {"mpi-p2p", p2p, nullptr, all_bytes},
        {"mpi-p2p-write", p2p_write, nullptr, all_bytes},
        {"memcpy-mapped", memcpy_mapped, nullptr, all_bytes},
        {"mpi-p2p-mapped", p2p_mapped, nullptr, all_bytes},
        {"partner-encode", [&] { encode(partner, step); }, nullptr, all_bytes},
        {"xor-encode", [&] { encode(parity, step); }, nullptr, all_bytes},
        {"partner-encode-reused", [&] { encode(partner, reused); }, nullptr, all_bytes},
        {"xor-encode-reused", [&] { encode(parity, reused); }, nullptr, all_bytes},
        {"xor-rebuild", rebuild, lose, mine * static_cast<u64>(lost.size())},
    };
    const u64 warm_before = g_warm_bytes;
    g_warm_bytes = mine + mine / 4;
    for (int run = -g_opt.warmup; run < g_opt.runs; ++run) {
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const Case& c = cases[(i + static_cast<std::size_t>(run + g_opt.warmup)) % cases.size()];
            if (c.prepare)
                c.prepare();
            warm_page_cache();
            const double t = timed(c.run);
            clean();
            if (run < 0)
                say("warmup redundancy %s %.3f s\n", c.name, t);
            else
                r.add(c.name, c.bytes, t);
        }
    }
    g_warm_bytes = warm_before;
    MPI_Barrier(g_comm);
    if (g_rank == 0)
        stdfs::remove_all(root);
    MPI_Barrier(g_comm);
    cd::unmap_removed_files();
    print_figures(r);
    tput_ratio(r, "memcpy-mapped", "mpi-p2p");
    tput_ratio(r, "mpi-p2p-mapped", "mpi-p2p");
    for (const char* base : {"mpi-p2p", "mpi-p2p-write"})
        for (const char* c :
             {"partner-encode", "xor-encode", "partner-encode-reused", "xor-encode-reused", "xor-rebuild"})
            tput_ratio(r, c, base);
}

// ---------------------------------------------------------------- levels

// The node-local level of a CheckpointManager (ManagerOptions::local), on
// fake nodes of one rank each (ranks_per_node 1) in a RAM disk
// (--local-dir + "-levels/node%n"), flush_every 0 so that nothing drains.
// The large workload (at most 512 MiB). Per run, interleaved, order rotating:
// the blocking time of CheckpointManager::save with redundancy none
// ("local-save-none") and partner ("local-save-partner", 2 ranks or more),
// keep_last 2 (the default: each save writes over the files of the step it
// drops; two steps are saved before the runs, as a running job's saves
// find them), and with redundancy none and keep_last 1 (nothing to reuse:
// fresh files, "local-save-fresh"), against a memcpy of this rank's bytes
// into a touched buffer ("memcpy") and a write(2) of them into a fresh file
// of the RAM disk ("write-shm");
// then restore_latest by a new manager from the node-local level, as a
// restarted job does (the mappings the saves kept dropped first, as a new
// process has none: "restore-local") and as a rollback in the process
// that saved does (through them: "restore-local-rollback"), and from a
// per-rank checkpoint in --dir ("restore-fs"); page cache dropped first;
// the rollbacks first, then restarts alternating with restores from --dir.
void bench_levels(u64 total)
{
    Results R;
    R.workload = "levels";
    auto w = make_workload("large", std::min<u64>(total, u64{512} << 20));
    auto sd = state_of(w);
    const u64 T = w.total;
    const std::string local_root = g_opt.local_dir + "-levels";
    const std::string base = g_opt.dir + "/levels";
    say("\nworkload levels: %d arrays of %lld x %lld f64 sharded by rows, %.1f MiB; %d fake nodes of 1 rank in %s\n",
        w.large, static_cast<long long>(w.rows), static_cast<long long>(w.cols), T / 1048576.0, g_size,
        local_root.c_str());
    remove_path(local_root);
    remove_path(base);
    auto options = [&](const char* red, cairn::Redundancy r, int keep) {
        cairn::ManagerOptions o;
        o.local.dir = local_root + "/" + red + "/node%n";
        o.local.redundancy = r;
        o.local.flush_every = 0;
        o.local.ranks_per_node = 1;
        o.local.keep_last = keep;
        return o;
    };
    const cairn::ManagerOptions o_none = options("none", cairn::Redundancy{}, 2);
    const cairn::ManagerOptions o_fresh = options("fresh", cairn::Redundancy{}, 1);
    const cairn::ManagerOptions o_partner = options("partner", cairn::Redundancy::partner(), 2);
    cairn::ManagerOptions o_async = options("async", cairn::Redundancy{}, 2);
    o_async.async = true;
    const std::string root_none = base + "/none", root_partner = base + "/partner", root_fs = base + "/fs";
    const std::string root_fresh = base + "/fresh", root_async = base + "/async";
    const bool partner = g_size >= 2;
    if (!partner)
        say("note: local-save-partner needs 2 ranks (2 fake nodes): skipped\n");
    int thread_level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&thread_level);
    const bool async = thread_level >= MPI_THREAD_MULTIPLE;
    if (!async)
        say("note: local-save-async needs MPI_THREAD_MULTIPLE: skipped\n");
    cairn::CheckpointManager m_none(root_none, g_comm, o_none);
    cairn::CheckpointManager m_fresh(root_fresh, g_comm, o_fresh);
    std::unique_ptr<cairn::CheckpointManager> m_partner, m_async;
    if (partner)
        m_partner = std::make_unique<cairn::CheckpointManager>(root_partner, g_comm, o_partner);
    if (async)
        m_async = std::make_unique<cairn::CheckpointManager>(root_async, g_comm, o_async);
    std::vector<char> buf(static_cast<std::size_t>(w.mine));
    auto memcpy_case = [&] {
        touch_write(buf.data(), buf.size());
        touch_state(w, false);
        MPI_Barrier(g_comm);
        const double t0 = now();
        char* d = buf.data();
        for (const auto& a : w.arrays) {
            std::memcpy(d, a.data.data(), a.data.size() * 8);
            d += a.data.size() * 8;
        }
        return allmax(now() - t0);
    };
    // write(2) of this rank's bytes into a fresh file of the RAM disk (its
    // pages allocated as a node-local save's are): the floor of any save
    // into it.
    const std::string write_dir = local_root + "/write";
    auto write_case = [&] {
        const std::string file = write_dir + "/rank" + std::to_string(g_rank);
        stdfs::create_directories(write_dir);
        stdfs::remove(file);
        touch_state(w, false);
        const double t = timed([&] {
            const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            bool ok = fd >= 0;
            for (const auto& a : w.arrays)
                ok = ok && write_all(fd, reinterpret_cast<const char*>(a.data.data()), a.data.size() * 8);
            if (fd >= 0)
                ::close(fd);
            if (!ok)
                say("ERROR: levels write-shm: cannot write %s\n", file.c_str());
        });
        stdfs::remove(file);
        return t;
    };
    // The save's blocking time; then (untimed) the manager settles, which
    // waits for the node-local retention's removal of the dropped step (and
    // for an async save's background part), so that it does not run into
    // the next case.
    auto save_case = [&](cairn::CheckpointManager& m, std::int64_t step) {
        touch_state(w, false);
        const double t = timed([&] { m.save(step, sd); });
        m.wait();
        return t;
    };
    // The file-system checkpoint: one per-rank save into --dir (untimed).
    {
        cairn::CheckpointManager m(root_fs, g_comm);
        touch_state(w, false);
        m.save(0, sd);
    }
    auto restore_case = [&](const std::string& root, const cairn::ManagerOptions& o,
                            cairn::RestoreReport::Level want_level, const char* what, bool check, bool restart) {
        if (restart)
            cairn::detail::unmap_all_files();
        cairn::CheckpointManager m(root, g_comm, o);
        drop_caches();
        touch_state(w, true);
        if (check)
            scramble(w);
        std::optional<std::int64_t> step;
        const double t = timed([&] { step = m.restore_latest(sd); });
        if (!step || m.last_restore().level != want_level)
            say("ERROR: %s: restore_latest restored %s\n", what,
                !step ? "nothing" : "from the wrong level");
        if (check)
            check_state(w, what);
        return t;
    };
    // Two steps saved before the runs (untimed), so that every timed save
    // with keep_last 2 drops, and reuses, an older step.
    for (std::int64_t s = 0; s < 2; ++s) {
        save_case(m_none, s);
        save_case(m_fresh, s);
        if (m_partner)
            save_case(*m_partner, s);
        if (m_async)
            save_case(*m_async, s);
    }
    for (int run = 0; run < g_opt.warmup + g_opt.runs; ++run) {
        const bool timed_run = run >= g_opt.warmup;
        double t_mem = 0, t_write = 0, t_none = 0, t_fresh = 0, t_partner = 0, t_async = 0;
        // The six cases in rotating order.
        for (int k = 0; k < 6; ++k) {
            switch ((run + k) % 6) {
            case 0: t_mem = memcpy_case(); break;
            case 1: t_none = save_case(m_none, run + 2); break;
            case 2: t_write = write_case(); break;
            case 3: t_fresh = save_case(m_fresh, run + 2); break;
            case 4:
                if (m_async)
                    t_async = save_case(*m_async, run + 2);
                break;
            default:
                if (m_partner)
                    t_partner = save_case(*m_partner, run + 2);
            }
        }
        if (!timed_run) {
            if (g_rank == 0) {
                std::printf("warmup levels memcpy %.3f s\n", t_mem);
                std::printf("warmup levels write-shm %.3f s\n", t_write);
                std::printf("warmup levels local-save-none %.3f s\n", t_none);
                std::printf("warmup levels local-save-fresh %.3f s\n", t_fresh);
                if (partner)
                    std::printf("warmup levels local-save-partner %.3f s\n", t_partner);
                if (async)
                    std::printf("warmup levels local-save-async %.3f s\n", t_async);
            }
            continue;
        }
        R.add("memcpy", T, t_mem);
        R.add("write-shm", T, t_write);
        R.add("local-save-none", T, t_none);
        R.add("local-save-fresh", T, t_fresh);
        if (partner)
            R.add("local-save-partner", T, t_partner);
        if (async)
            R.add("local-save-async", T, t_async);
    }
    // The restores, after every save: first the rollbacks, through the
    // mappings the saves over reused files keep; then the restarts, which
    // drop them, alternating with the restores from the file system.
    const auto level_local = cairn::RestoreReport::Level::node_local;
    const auto level_fs = cairn::RestoreReport::Level::file_system;
    for (int run = 0; run < g_opt.warmup + g_opt.runs; ++run) {
        const double t = restore_case(root_none, o_none, level_local, "restore-local-rollback", run == 0, false);
        if (run >= g_opt.warmup)
            R.add("restore-local-rollback", T, t);
        else if (g_rank == 0)
            std::printf("warmup levels restore-local-rollback %.3f s\n", t);
    }
    for (int run = 0; run < g_opt.warmup + g_opt.runs; ++run) {
        double t_local = 0, t_fs = 0;
        for (int k = 0; k < 2; ++k) {
            if ((run + k) % 2 == 0)
                t_local = restore_case(root_none, o_none, level_local, "restore-local", run == 0, true);
            else
                t_fs = restore_case(root_fs, cairn::ManagerOptions{}, level_fs, "restore-fs", run == 0, false);
        }
        if (run >= g_opt.warmup) {
            R.add("restore-local", T, t_local);
            R.add("restore-fs", T, t_fs);
        } else if (g_rank == 0) {
            std::printf("warmup levels restore-local %.3f s\n", t_local);
            std::printf("warmup levels restore-fs %.3f s\n", t_fs);
        }
    }
    m_partner.reset();
    m_async.reset();
    remove_path(base);
    remove_path(local_root);
    print_figures(R);
    auto secs_ratio = [&](const std::string& a, const std::string& b) {
        if (R.has(a) && R.has(b))
            ratio_line(R.workload, a + "/" + b, R.secs.at(a).median() / R.secs.at(b).median());
    };
    secs_ratio("local-save-none", "memcpy");
    secs_ratio("local-save-fresh", "memcpy");
    secs_ratio("local-save-none", "local-save-fresh");
    secs_ratio("local-save-partner", "memcpy");
    secs_ratio("local-save-async", "memcpy");
    secs_ratio("write-shm", "memcpy");
    secs_ratio("local-save-none", "write-shm");
    secs_ratio("local-save-fresh", "write-shm");
    secs_ratio("local-save-partner", "write-shm");
    secs_ratio("restore-fs", "restore-local");
    secs_ratio("restore-fs", "restore-local-rollback");
}

} // namespace

int main(int argc, char** argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(g_comm, &g_rank);
    MPI_Comm_size(g_comm, &g_size);
    parse(argc, argv);
    double load[3] = {0, 0, 0};
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = load[1] = load[2] = -1;
        std::fclose(f);
    }
    const u64 total = static_cast<u64>(g_opt.size_mib * 1048576.0);
    say("cairn_bench: Cairn %s, %d ranks, state %.0f MiB, %d runs, dir %s, MPI-IO component %s, load average "
        "%.2f %.2f %.2f\n",
        cairn::version(), g_size, g_opt.size_mib, g_opt.runs, g_opt.dir.c_str(), g_opt.io.c_str(), load[0], load[1],
        load[2]);
    if (provided < MPI_THREAD_MULTIPLE) {
        say("note: MPI_THREAD_MULTIPLE not provided: async_save is skipped\n");
        g_opt.only.erase("async");
        if (g_opt.only.empty())
            g_opt.only = {"large", "mixed", "reshard", "memory", "coop", "drain", "planning", "torch", "fio", "hdf5",
                          "mpiio", "redundancy", "files", "levels"};
    }
    if (g_rank == 0)
        stdfs::create_directories(g_opt.dir);
    MPI_Barrier(g_comm);

    std::unique_ptr<Results> large;
    if (want("large") || want("reshard") || want("async") || want("memory") || want("torch") || want("fio")) {
        auto w = make_workload("large", total);
        say("workload large: %d arrays of %lld x %lld f64 sharded by rows, %.1f MiB\n", w.large,
            static_cast<long long>(w.rows), static_cast<long long>(w.cols), w.total / 1048576.0);
        large = std::make_unique<Results>(bench_workload(w));
        if (want("memory"))
            bench_memory(w);
        print_figures(*large);
        print_ratios(*large, nullptr);
    }
    if (want("mixed")) {
        auto w = make_workload("mixed", total);
        say("\nworkload mixed: %d large arrays (%.1f MiB) + %zu small arrays of %lld f64 (half replicated, half "
            "sharded), %.1f MiB\n",
            w.large, static_cast<double>(w.arrays[0].global_bytes()) * w.large / 1048576.0, w.arrays.size() - w.large,
            static_cast<long long>(w.arrays.back().global[0]), w.total / 1048576.0);
        auto r = bench_workload(w);
        if (want("memory"))
            bench_memory(w);
        print_figures(r);
        print_ratios(r, large.get());
    }
    if (want("small")) {
        auto w = make_workload("small", total);
        say("\nworkload small: %d arrays of %d KiB per rank (sharded), %.1f MiB\n", g_opt.many_arrays,
            g_opt.many_kib, w.total / 1048576.0);
        auto r = bench_workload(w);
        print_figures(r);
        // The cost per array (wall time of one save or load over the
        // arrays), and the container against the per-rank layout.
        for (const char* c : {"cairn-rank-save", "cairn-rank-load", "cairn-container-save", "cairn-container-load"})
            if (r.has(c) && g_rank == 0)
                std::printf("figure %s %s-per-array %.1f us\n", r.workload.c_str(), c,
                            r.secs.at(c).median() / g_opt.many_arrays * 1e6);
        tput_ratio(r, "cairn-container-save", "cairn-rank-save");
        tput_ratio(r, "cairn-container-load", "cairn-rank-load");
        bench_small_cpu(w);
    }
    if (want("coop"))
        bench_cooperative(total);
    if (want("drain"))
        bench_drain(total);
    if (want("redundancy"))
        bench_redundancy(total);
    if (want("levels"))
        bench_levels(total);
    if (want("planning")) {
        MPI_Barrier(g_comm);
        if (g_rank == 0) {
            Results pr;
            std::printf("\n# planning: the coordinator's cost for synthetic plans (one process)\n");
            for (long r : {1024L, 2048L, 4096L, 16384L}) {
                if (r > g_opt.plan_ranks)
                    break;
                bench_planning(r, g_opt.plan_arrays, pr);
                if (g_opt.plan_generic)
                    bench_planning_generic(r, g_opt.plan_arrays, pr);
            }
            if (g_opt.plan_ranks > 0 && g_opt.plan_ranks != 1024 && g_opt.plan_ranks != 2048 &&
                g_opt.plan_ranks != 4096 && g_opt.plan_ranks != 16384) {
                bench_planning(g_opt.plan_ranks, g_opt.plan_arrays, pr);
                if (g_opt.plan_generic)
                    bench_planning_generic(g_opt.plan_ranks, g_opt.plan_arrays, pr);
            }
            bench_file_groups(16384, 512);
            std::error_code ec;
            stdfs::remove_all(g_opt.dir + "/planning", ec);
        }
        MPI_Barrier(g_comm);
    }
    say("\ncairn_bench: done\n");
    MPI_Finalize();
    return 0;
}
