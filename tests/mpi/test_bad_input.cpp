// Bad input never crashes or hangs: damaged data files and metadata, metadata
// of an unknown version, chunk paths that leave the checkpoint, absurd sizes
// and counts, chunk tables that overlap or leave holes, states that differ
// across ranks. Every rank gets the same clear error.
#include "fixtures.hpp"
#include "outcome.hpp"

#include <hdf5.h>

#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

using namespace cairn_test;
using Kind = cairn::Error::Kind;
namespace stdfs = std::filesystem;

namespace {

constexpr std::int64_t k_rows = 64; // elements of "u" per rank

// A small state: one array decomposed over the ranks (or, with `whole`, the
// whole array on every rank), a blob, a scalar.
struct Simple {
    std::vector<double> u;
    std::vector<std::byte> blob;
    std::int64_t step = 0;
    cairn::StateDict dict;

    Simple(bool filled, bool whole = false)
    {
        const int w = world_size(), r = world_rank();
        const std::int64_t n = whole ? w * k_rows : k_rows;
        u.assign(static_cast<std::size_t>(n), 0.0);
        if (filled) {
            for (std::int64_t i = 0; i < n; ++i)
                u[static_cast<std::size_t>(i)] = static_cast<double>(r * k_rows + i);
            blob.assign(300, std::byte{0x5C});
            step = 17;
        }
        const cairn::Box box = whole ? cairn::Box{{0}, {n}} : cairn::Box{{r * k_rows}, {k_rows}};
        dict.add_array<double>("u", u.data(), {w * k_rows}, box);
        dict.add_bytes("blob", &blob);
        dict.add_scalar("step", &step);
    }

    bool correct(bool whole = false) const
    {
        const std::int64_t first = whole ? 0 : world_rank() * k_rows;
        for (std::size_t i = 0; i < u.size(); ++i)
            if (u[i] != static_cast<double>(first + static_cast<std::int64_t>(i)))
                return false;
        return step == 17 && blob == std::vector<std::byte>(300, std::byte{0x5C});
    }
};

// A fresh checkpoint of the simple state at <base>/<name>.
std::string saved(const std::string& base, const std::string& name)
{
    const std::string dir = base + "/" + name;
    Simple s(true);
    cairn::SaveOptions o;
    o.fsync = false;
    cairn::save(s.dict, dir, MPI_COMM_WORLD, o);
    return dir;
}

Outcome try_load(const std::string& dir, bool whole = false)
{
    Simple s(false, whole);
    return attempt([&] { cairn::load(s.dict, dir, MPI_COMM_WORLD); });
}

// Runs `f` on rank 0 only, then a barrier.
template <class F>
void on_rank0(F&& f)
{
    bool ok = true;
    std::string why;
    if (world_rank() == 0) {
        try {
            f();
        } catch (const std::exception& e) {
            ok = false;
            why = e.what();
        }
    }
    INFO(why);
    REQUIRE(all(ok));
}

// Rewrites the committed metadata of `dir` through the public API.
void edit_metadata(const std::string& dir, const std::function<void(cairn::Metadata&)>& edit)
{
    on_rank0([&] {
        auto md = cairn::read_metadata_file(dir + "/metadata.h5");
        // Without checksums: the structure alone must be checked (a checksum
        // mismatch would catch some of these edits too, by other means).
        md.checksum_block = 0;
        for (auto& [fqn, e] : md.entries)
            for (auto& c : e.chunks)
                c.storage.checksums.clear();
        edit(md);
        cairn::write_metadata_file(dir + "/metadata.h5", md, false);
    });
}

// Overwrites the integer attribute /cairn/<name> in place with the HDF5 C API.
void poke_attribute(const std::string& file, const char* name, const std::vector<std::int64_t>& values)
{
    on_rank0([&] {
        const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        if (f < 0)
            throw std::runtime_error("cannot open " + file);
        const hid_t g = H5Gopen2(f, "cairn", H5P_DEFAULT);
        const hid_t a = g < 0 ? -1 : H5Aopen(g, name, H5P_DEFAULT);
        const herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_INT64, values.data());
        if (a >= 0)
            H5Aclose(a);
        if (g >= 0)
            H5Gclose(g);
        H5Fclose(f);
        if (rc < 0)
            throw std::runtime_error(std::string("cannot rewrite attribute ") + name);
        // The edit must reach the reader's own checks, not its checksum.
        cairn::testing::reseal_metadata_file(file);
    });
}

std::vector<char> read_file(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<char>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

} // namespace

TEST_CASE("damaged data files: truncated, missing, replaced", "[bad_input]")
{
    const int w = world_size();
    const std::string base = fresh_dir("bad_data_" + std::to_string(w));
    const auto data = [](const std::string& dir) { return dir + "/__" + std::to_string(world_size() - 1) + "_0.distcp"; };

    SECTION("truncated to nothing")
    {
        const auto dir = saved(base, "empty");
        on_rank0([&] { stdfs::resize_file(data(dir), 0); });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::read));
        CHECK(all(contains(o.what, data(dir)) && contains(o.what, "short read")));
    }
    SECTION("one byte short")
    {
        const auto dir = saved(base, "short");
        on_rank0([&] { stdfs::resize_file(data(dir), stdfs::file_size(data(dir)) - 1); });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::read));
        CHECK(all(contains(o.what, data(dir)) && contains(o.what, "short read")));
    }
    SECTION("missing")
    {
        const auto dir = saved(base, "missing");
        on_rank0([&] { stdfs::remove(data(dir)); });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::read));
        CHECK(all(contains(o.what, data(dir))));
    }
    SECTION("a directory in its place")
    {
        const auto dir = saved(base, "dir");
        on_rank0([&] {
            stdfs::remove(data(dir));
            stdfs::create_directory(data(dir));
        });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(same_error_everywhere(o));
        CHECK(all(contains(o.what, data(dir))));
    }
}

TEST_CASE("a flipped bit in a data file is detected on load", "[bad_input][checksum]")
{
    const int w = world_size();
    const auto dir = saved(fresh_dir("bitflip_" + std::to_string(w)), "ckpt");
    on_rank0([&] {
        const auto md = cairn::read_metadata(dir);
        const auto& chunk = md.entries.at("u").chunks.at(0);
        const auto file = dir + "/" + chunk.storage.path;
        auto bytes = read_file(file);
        const auto at = static_cast<std::size_t>(chunk.storage.offset + chunk.storage.length / 2);
        REQUIRE(at < bytes.size());
        bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
        write_file(file, bytes);
    });
    const auto o = try_load(dir);
    INFO(o.what);
    CHECK(same_error_everywhere(o));
    CHECK(all(contains(o.what, "'u'") || contains(o.what, ".distcp")));
}

TEST_CASE("damaged metadata: truncated, garbage, unknown version", "[bad_input]")
{
    const int w = world_size();
    const std::string base = fresh_dir("bad_metadata_" + std::to_string(w));

    SECTION("truncated at many lengths")
    {
        const auto dir = saved(base, "trunc");
        const auto file = dir + "/metadata.h5";
        const auto good = read_file(file); // every rank: the same bytes
        MPI_Barrier(MPI_COMM_WORLD);        // before rank 0 changes them
        std::vector<std::size_t> cuts{0, 1, 7, 8, 96, 512, good.size() / 2, good.size() - 100, good.size() - 1};
        for (std::size_t i = 1; i < 16; ++i)
            cuts.push_back(good.size() * i / 16);
        for (const auto cut : cuts) {
            if (cut >= good.size())
                continue;
            on_rank0([&] { write_file(file, std::vector<char>(good.begin(), good.begin() + static_cast<long>(cut))); });
            const auto o = try_load(dir);
            INFO("cut at " << cut << " of " << good.size() << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::format));
            CHECK(all(contains(o.what, "rank 0 (read metadata): ") && contains(o.what, file)));
        }
    }
    SECTION("garbage, and garbage after an HDF5 signature")
    {
        const auto dir = saved(base, "garbage");
        const auto file = dir + "/metadata.h5";
        const auto good = read_file(file);
        MPI_Barrier(MPI_COMM_WORLD);
        std::mt19937 rng(1234);
        for (int k = 0; k < 6; ++k) {
            std::vector<char> junk(good.size());
            for (auto& c : junk)
                c = static_cast<char>(rng());
            if (k % 2 == 1) // the superblock of the real file, then junk
                std::copy(good.begin(), good.begin() + 96, junk.begin());
            on_rank0([&] { write_file(file, junk); });
            const auto o = try_load(dir);
            INFO("junk " << k << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::format));
            CHECK(all(contains(o.what, file)));
        }
    }
    SECTION("flipped bits anywhere: refused before HDF5 parses the file")
    {
        const auto dir = saved(base, "flips");
        const auto file = dir + "/metadata.h5";
        const auto good = read_file(file);
        MPI_Barrier(MPI_COMM_WORLD);
        for (std::size_t i = 0; i < good.size(); i += 1 + good.size() / 40) {
            auto bad = good;
            bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
            on_rank0([&] { write_file(file, bad); });
            const auto o = try_load(dir);
            INFO("bit " << i % 8 << " of byte " << i << " of " << good.size() << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::format));
            CHECK(all(contains(o.what, "rank 0 (read metadata): ") && contains(o.what, file)));
            CHECK(all(contains(o.what, "checksum mismatch") || contains(o.what, "header") ||
                      contains(o.what, "not a Cairn metadata file")));
        }
        on_rank0([&] { write_file(file, good); });
        Simple s(false);
        cairn::load(s.dict, dir, MPI_COMM_WORLD);
        CHECK(all(s.correct()));
    }
    SECTION("an unknown format version")
    {
        const auto dir = saved(base, "version");
        const auto file = dir + "/metadata.h5";
        const std::int64_t newer = cairn::Metadata::current_format_version + 1;
        for (const std::int64_t v : {newer, std::int64_t(999), std::int64_t(0), std::int64_t(-1),
                                     std::numeric_limits<std::int64_t>::min()}) {
            poke_attribute(file, "format_version", {v});
            const auto o = try_load(dir);
            INFO("version " << v << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::format));
            CHECK(all(contains(o.what, file) && contains(o.what, "format version " + std::to_string(v))));
            if (v > 1)
                CHECK(all(contains(o.what, "newer Cairn")));
        }
        // The same file with its version restored loads again.
        poke_attribute(file, "format_version", {1});
        Simple s(false);
        cairn::load(s.dict, dir, MPI_COMM_WORLD);
        CHECK(all(s.correct()));
    }
    SECTION("absurd counts in the tables")
    {
        const auto dir = saved(base, "counts");
        const auto file = dir + "/metadata.h5";
        const auto good = read_file(file);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto n = static_cast<std::size_t>(3); // entries: blob, step, u
        for (const std::int64_t v : {std::int64_t(1) << 60, std::int64_t(-1), std::int64_t(1) << 31}) {
            on_rank0([&] { write_file(file, good); });
            poke_attribute(file, "entry_count", {v});
            auto o = try_load(dir);
            INFO("entry_count " << v << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::format));
            CHECK(all(contains(o.what, "entry_count")));

            on_rank0([&] { write_file(file, good); });
            std::vector<std::int64_t> counts(n, v);
            poke_attribute(file, "chunk_counts", counts);
            o = try_load(dir);
            INFO("chunk_counts " << v << ": " << o.what);
            CHECK(same_error_everywhere(o, Kind::format));
            CHECK(all(contains(o.what, "chunk count")));
        }
    }
}

TEST_CASE("chunk paths in metadata that leave the checkpoint are refused", "[bad_input][paths]")
{
    const int w = world_size();
    const std::string base = stdfs::absolute(fresh_dir("escape_" + std::to_string(w))).string();
    // Each path resolves to the real data file, so only the check stops it.
    const std::vector<std::function<std::string(const std::string&, const std::string&)>> escapes = {
        [](const std::string&, const std::string& f) { return "../ckpt/" + f; },
        [](const std::string& dir, const std::string& f) { return dir + "/" + f; }, // absolute
        [](const std::string&, const std::string& f) { return "./" + f; },
        [](const std::string&, const std::string&) { return std::string(".."); },
        [](const std::string&, const std::string&) { return std::string("/etc/passwd"); },
        [](const std::string&, const std::string&) { return std::string(""); },
    };
    for (std::size_t k = 0; k < escapes.size(); ++k) {
        const auto dir = saved(base, "ckpt");
        std::string bad;
        edit_metadata(dir, [&](cairn::Metadata& md) {
            for (auto& [fqn, e] : md.entries)
                for (auto& c : e.chunks)
                    bad = c.storage.path = escapes[k](dir, c.storage.path);
        });
        const auto o = try_load(dir);
        INFO("escape " << k << ": " << o.what);
        CHECK(same_error_everywhere(o, Kind::format));
        CHECK(all(contains(o.what, "not a plain file name inside the checkpoint")));
        on_rank0([&] { stdfs::remove_all(dir); });
    }
}

TEST_CASE("chunks beyond the end of their file are refused", "[bad_input]")
{
    const int w = world_size();
    const std::string base = fresh_dir("beyond_" + std::to_string(w));
    SECTION("a chunk far beyond the end of its file")
    {
        const auto dir = saved(base, "offset");
        for (const std::uint64_t off : {std::uint64_t(1) << 40, ~std::uint64_t(0) - 8, std::uint64_t(1) << 63}) {
            edit_metadata(dir, [&](cairn::Metadata& md) {
                for (auto& c : md.entries.at("u").chunks)
                    c.storage.offset = off;
            });
            const auto o = try_load(dir);
            INFO("offset " << off << ": " << o.what);
            CHECK(same_error_everywhere(o));
            CHECK(all(o.kind == Kind::format || o.kind == Kind::read));
            CHECK(all(contains(o.what, ".distcp")));
        }
    }
}

// The metadata reader refuses global shapes whose byte size overflows 64
// bits; the per-rank reader checks a chunk's stored range against its file
// before it allocates or reads anything for it.
TEST_CASE("absurd sizes in metadata are refused before allocating or reading", "[bad_input]")
{
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("absurd_" + std::to_string(w));

    SECTION("a bytes entry claiming 32 TiB")
    {
        const auto dir = saved(base, "blob");
        edit_metadata(dir, [](cairn::Metadata& md) {
            auto& e = md.entries.at("blob");
            const std::int64_t n = std::int64_t(1) << 45;
            e.global_shape = {n};
            e.chunks.at(0).box = cairn::Box{{0}, {n}};
            e.chunks.at(0).storage.length = static_cast<std::uint64_t>(n);
        });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(same_error_everywhere(o));
        CHECK(all(o.kind == Kind::format || o.kind == Kind::read));
        CHECK(all(contains(o.what, "blob") || contains(o.what, ".distcp")));
    }
    SECTION("a global shape whose volume overflows 64 bits")
    {
        // A state of the same (huge) global shape holding a small box: only
        // the metadata's arithmetic can tell that the chunk is absurd.
        const std::int64_t big = std::int64_t(1) << 40;
        const auto dir = saved(base, "overflow");
        edit_metadata(dir, [&](cairn::Metadata& md) {
            auto& e = md.entries.at("u");
            e.global_shape = {big, big};
            e.chunks.resize(1);
            e.chunks[0].box = cairn::Box{{0, 0}, {big, big}};
            e.chunks[0].storage.length = 0; // 2^80 elements * 8 bytes, wrapped
        });
        Simple s(false);
        std::vector<double> u(k_rows);
        cairn::StateDict sd;
        sd.add_array<double>("u", u.data(), {big, big}, cairn::Box{{0, r * k_rows}, {1, k_rows}});
        sd.add_bytes("blob", &s.blob);
        sd.add_scalar("step", &s.step);
        const auto o = attempt([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::format));
        CHECK(all(contains(o.what, "'u'")));
    }
    SECTION("a chunk whose byte length wraps to 0")
    {
        const std::int64_t n = std::int64_t(1) << 61; // 2^61 f64 = 2^64 bytes
        const auto dir = saved(base, "wrap");
        edit_metadata(dir, [&](cairn::Metadata& md) {
            auto& e = md.entries.at("u");
            e.global_shape = {n};
            e.chunks.resize(1);
            e.chunks[0].box = cairn::Box{{0}, {n}};
            e.chunks[0].storage.length = 0;
        });
        Simple s(false);
        std::vector<double> u(k_rows);
        cairn::StateDict sd;
        sd.add_array<double>("u", u.data(), {n}, cairn::Box{{r * k_rows}, {k_rows}});
        sd.add_bytes("blob", &s.blob);
        sd.add_scalar("step", &s.step);
        const auto o = attempt([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::format));
        CHECK(all(contains(o.what, "'u'")));
    }
}

namespace {

// Splits chunk 0 of "u" into halves; the second half is moved to `second_offset`.
void split(cairn::Metadata& md, std::int64_t second_offset)
{
    auto& chunks = md.entries.at("u").chunks;
    auto a = chunks.at(0), b = chunks.at(0);
    const auto half = a.box.shape[0] / 2;
    a.box.shape[0] = half;
    a.storage.length = static_cast<std::uint64_t>(half) * 8;
    b.box.offsets[0] = second_offset;
    b.box.shape[0] = half;
    b.storage.offset += static_cast<std::uint64_t>(half) * 8;
    b.storage.length = a.storage.length;
    chunks[0] = a;
    chunks.insert(chunks.begin() + 1, b);
}

} // namespace

TEST_CASE("chunk tables that leave holes are refused", "[bad_input][boxes]")
{
    const int w = world_size();
    const std::string base = fresh_dir("bad_boxes_" + std::to_string(w));
    SECTION("the halves of a chunk split correctly load (control)")
    {
        const auto dir = saved(base, "control");
        edit_metadata(dir, [&](cairn::Metadata& md) { split(md, k_rows / 2); });
        Simple s(false, true);
        cairn::load(s.dict, dir, MPI_COMM_WORLD);
        CHECK(all(s.correct(true)));
    }
    SECTION("chunks that do not cover the array")
    {
        const auto dir = saved(base, "hole");
        edit_metadata(dir, [&](cairn::Metadata& md) { md.entries.at("u").chunks.pop_back(); });
        // Every rank asks for the whole array, so every rank sees the hole.
        const auto o = try_load(dir, true);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::format));
        CHECK(all(contains(o.what, "'u'")));
    }
}

// The metadata reader checks that the chunks of an array are disjoint and
// cover it (counting volumes alone would let a duplicate hide a hole).
TEST_CASE("chunk tables that overlap are refused", "[bad_input][boxes]")
{
    const int w = world_size();
    const std::string base = fresh_dir("overlap_boxes_" + std::to_string(w));
    SECTION("a duplicated chunk hides a hole")
    {
        const auto dir = saved(base, "dup");
        edit_metadata(dir, [&](cairn::Metadata& md) { split(md, 0); }); // [0:32] twice, [32:64] missing
        const auto o = try_load(dir, true);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::format));
        CHECK(all(contains(o.what, "'u'")));
    }
    SECTION("overlapping chunks")
    {
        const auto dir = saved(base, "overlap");
        edit_metadata(dir, [&](cairn::Metadata& md) { split(md, 8); });
        const auto o = try_load(dir, true);
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::format));
        CHECK(all(contains(o.what, "'u'")));
    }
}

TEST_CASE("load states that differ across ranks", "[bad_input]")
{
    const int w = world_size(), r = world_rank();
    const auto dir = saved(fresh_dir("load_differs_" + std::to_string(w)), "ckpt");
    SECTION("a key missing on the last rank")
    {
        Simple s(false);
        cairn::StateDict sd;
        std::vector<double> u(k_rows);
        sd.add_array<double>("u", u.data(), {w * k_rows}, cairn::Box{{r * k_rows}, {k_rows}});
        sd.add_bytes("blob", &s.blob);
        if (r != w - 1)
            sd.add_scalar("step", &s.step);
        const auto o = attempt([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::not_found));
        CHECK(all(contains(o.what, "rank " + std::to_string(w - 1) + " (local plan): ") && contains(o.what, "'step'")));
    }
    SECTION("a dtype that differs on the last rank")
    {
        Simple s(false);
        std::vector<float> f(k_rows);
        std::vector<double> d(k_rows);
        cairn::StateDict sd;
        if (r == w - 1)
            sd.add_array<float>("u", f.data(), {w * k_rows}, cairn::Box{{r * k_rows}, {k_rows}});
        else
            sd.add_array<double>("u", d.data(), {w * k_rows}, cairn::Box{{r * k_rows}, {k_rows}});
        sd.add_bytes("blob", &s.blob);
        sd.add_scalar("step", &s.step);
        const auto o = attempt([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        INFO(o.what);
        CHECK(same_error_everywhere(o, Kind::mismatch));
        CHECK(all(contains(o.what, "rank " + std::to_string(w - 1) + " (local plan): ") &&
                  contains(o.what, "dtype f32 in the state vs. f64 in the checkpoint")));
    }
}
