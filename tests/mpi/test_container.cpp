// The container layout: one parallel HDF5 file, every array a dataset with its
// global shape. Resharding N -> M, identical datasets whatever the saving
// decomposition (h5diff), readers without Cairn (h5dump and plain HDF5 calls),
// names, types, the commit, tuning options and bad input.
#include "fixtures.hpp"
#include "outcome.hpp"

#include <catch2/catch.hpp>

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#ifndef CAIRN_H5DUMP
#define CAIRN_H5DUMP "h5dump"
#endif
#ifndef CAIRN_H5DIFF
#define CAIRN_H5DIFF "h5diff"
#endif

using namespace cairn_test;
namespace stdfs = std::filesystem;

namespace {

std::string slurp(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs a shell command (rank 0 only), its output in `out`; returns its exit status.
int shell(const std::string& cmd, std::string& out, const std::string& scratch)
{
    const int rc = std::system((cmd + " > " + scratch + " 2>&1").c_str());
    out = slurp(scratch);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

// ---- plain HDF5, no Cairn: what any reader of the file sees -----------------

struct H5File {
    hid_t id;
    explicit H5File(const std::string& path, unsigned flags = H5F_ACC_RDONLY) : id(H5Fopen(path.c_str(), flags, H5P_DEFAULT)) {}
    ~H5File()
    {
        if (id >= 0)
            H5Fclose(id);
    }
};

std::vector<hsize_t> dims_of(hid_t file, const std::string& path)
{
    const hid_t d = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
    if (d < 0)
        return {9999};
    const hid_t s = H5Dget_space(d);
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(H5Sget_simple_extent_ndims(s), 0)));
    H5Sget_simple_extent_dims(s, dims.data(), nullptr);
    H5Sclose(s);
    H5Dclose(d);
    return dims;
}

// Reads a whole dataset converted to `mem_type`; empty on failure.
template <class T>
std::vector<T> read_all(hid_t file, const std::string& path, hid_t mem_type)
{
    const hid_t d = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
    if (d < 0)
        return {};
    const hid_t s = H5Dget_space(d);
    std::vector<T> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(s)));
    const herr_t rc = v.empty() ? 0 : H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Sclose(s);
    H5Dclose(d);
    return rc < 0 ? std::vector<T>{} : v;
}

std::string read_string(hid_t file, const std::string& path)
{
    const hid_t d = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
    if (d < 0)
        return "<missing>";
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char* p = nullptr;
    std::string s = "<unreadable>";
    if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) >= 0 && p) {
        s = p;
        H5free_memory(p);
    }
    H5Tclose(t);
    H5Dclose(d);
    return s;
}

// Expected values of a standard array in the file, as doubles.
double expected(const ArraySpec& s, std::int64_t lin)
{
    unsigned char b[8] = {};
    put_value(s.dtype, b, value_at(lin, s.salt));
    switch (s.dtype) {
    case cairn::DType::f64: { double x; std::memcpy(&x, b, 8); return x; }
    case cairn::DType::f32: { float x; std::memcpy(&x, b, 4); return x; }
    case cairn::DType::i32: { std::int32_t x; std::memcpy(&x, b, 4); return x; }
    case cairn::DType::i64: { std::int64_t x; std::memcpy(&x, b, 8); return static_cast<double>(x); }
    case cairn::DType::u16: { std::uint16_t x; std::memcpy(&x, b, 2); return x; }
    default: return -1;
    }
}

// Replaces dataset `path` of `file` by one of `type` and `dims` (a tampered file).
void replace_dataset(const std::string& file, const std::string& path, hid_t type, std::vector<hsize_t> dims)
{
    H5File f(file, H5F_ACC_RDWR);
    if (H5Lexists(f.id, path.c_str(), H5P_DEFAULT) > 0)
        H5Ldelete(f.id, path.c_str(), H5P_DEFAULT);
    if (dims.empty())
        return; // deleted only
    const hid_t s = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t d = H5Dcreate2(f.id, path.c_str(), type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(s);
}

cairn::SaveOptions container_save(bool overwrite = false)
{
    cairn::SaveOptions o;
    o.fsync = false;
    o.overwrite = overwrite;
    return o;
}

} // namespace

TEST_CASE("container: save on N ranks, load on M ranks with another decomposition", "[container][reshard]")
{
    const int w = world_size();
    for (int n = 1; n <= w; ++n) {
        for (int m = 1; m <= w; ++m) {
            const std::string base = fresh_dir("c_reshard_" + std::to_string(w)) + "/ckpt_" + std::to_string(n) + "_" +
                                     std::to_string(m);
            INFO("container saved on " << n << " ranks, loaded on " << m);
            CHECK(round_trip(base + "_a.h5", n, Decomp::dim0, m, Decomp::last_dim, 1, 0));
            CHECK(round_trip(base + "_b.h5", n, Decomp::grid, m, Decomp::grid, 0, 2));
            CHECK(round_trip(base + "_c.h5", n, Decomp::single_owner, m, Decomp::dim0, 1, 1));
            // The explicit option, with an id that does not say "container".
            CHECK(round_trip(base + "_d", n, Decomp::last_dim, m, Decomp::replicated, 0, 1, cairn::Layout::container));
        }
    }
}

TEST_CASE("container: the layout follows the id or the option; metadata as for the per-rank layout", "[container]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_select_" + std::to_string(w));
    const auto specs = standard_arrays();
    {
        TestState s(specs, Decomp::dim0, w, r, 1, true);
        cairn::save(s.dict, dir + "/auto.h5", MPI_COMM_WORLD, container_save());
        cairn::SaveOptions o = container_save();
        o.layout = cairn::Layout::container;
        cairn::save(s.dict, dir + "/named", MPI_COMM_WORLD, o);
        o.layout = cairn::Layout::per_rank;
        cairn::save(s.dict, dir + "/dir.h5", MPI_COMM_WORLD, o);
    }
    CHECK(all(stdfs::is_regular_file(dir + "/auto.h5")));
    CHECK(all(stdfs::is_regular_file(dir + "/named")));
    CHECK(all(stdfs::is_directory(dir + "/dir.h5")));
    CHECK(all(cairn::is_container_checkpoint(dir + "/auto.h5") && cairn::is_container_checkpoint(dir + "/named")));
    CHECK(all(!cairn::is_container_checkpoint(dir + "/dir.h5") && cairn::is_distcp_checkpoint(dir + "/dir.h5")));
    CHECK(all(!stdfs::exists(dir + "/auto.h5" + cairn::container_temp_suffix)));

    // Automatic load: a regular file is a container, a directory is not.
    for (const char* id : {"/auto.h5", "/named", "/dir.h5"}) {
        TestState s(specs, Decomp::grid, w, r, 0, false);
        const auto res = cairn::load(s.dict, dir + id, MPI_COMM_WORLD);
        CHECK(all(s.errors() == 0));
        CHECK(all(res.bytes_read > 0));
    }

    // read_metadata works for both layouts; the same schema, layout "container".
    const auto md = cairn::read_metadata(dir + "/auto.h5");
    const auto mdd = cairn::read_metadata(dir + "/dir.h5");
    CHECK(md.layout == "container");
    CHECK(mdd.layout == "distcp");
    CHECK(md.world_size == w);
    CHECK(md.entries.size() == mdd.entries.size());
    const auto& a2 = md.entries.at("fluid.a2");
    CHECK(a2.chunks.size() == mdd.entries.at("fluid.a2").chunks.size());
    for (const auto& c : a2.chunks) {
        CHECK(c.storage.path == "/fluid.a2");
        CHECK(c.storage.offset == 0);
        CHECK(c.storage.length == static_cast<std::uint64_t>(c.box.volume()) * 4);
    }
    CHECK(md.entries.at("blob").chunks.at(0).storage.path == "/blob");
    CHECK(md.entries.at("rep.table").chunks.size() == 1); // a replicated array is written once
}

TEST_CASE("container: every dtype round-trips and has a natural HDF5 type", "[container][dtype]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_dtypes_" + std::to_string(w));
    const std::string id = dir + "/dtypes.h5";
    std::vector<ArraySpec> specs;
    for (int t = 0; t < cairn::dtype_count; ++t)
        specs.push_back({"dt." + std::string(cairn::dtype_name(static_cast<cairn::DType>(t))),
                         static_cast<cairn::DType>(t), {9, 4}, t});
    // Known 16-bit float values and booleans, replicated.
    std::vector<cairn::half> h{{0x3C00}, {0x3E00}, {0xC000}, {0x7BFF}};      // 1, 1.5, -2, 65504
    std::vector<cairn::bfloat16> b{{0x3F80}, {0x3FC0}, {0xC000}, {0x4049}}; // 1, 1.5, -2, 3.140625
    bool flags[3] = {true, false, true};
    {
        TestState s(specs, Decomp::dim0, w, r, 1, true);
        s.dict.add_replicated("h", h.data(), {4});
        s.dict.add_replicated("b", b.data(), {4});
        s.dict.add_replicated("flags", flags, {3});
        cairn::save(s.dict, id, MPI_COMM_WORLD, container_save());
    }
    {
        TestState s(specs, Decomp::last_dim, w, r, 0, false);
        std::vector<cairn::half> h2(4);
        std::vector<cairn::bfloat16> b2(4);
        bool f2[3] = {false, true, false};
        s.dict.add_replicated("h", h2.data(), {4});
        s.dict.add_replicated("b", b2.data(), {4});
        s.dict.add_replicated("flags", f2, {3});
        cairn::load(s.dict, id, MPI_COMM_WORLD);
        CHECK(all(s.errors() == 0));
        bool same = f2[0] && !f2[1] && f2[2];
        for (int k = 0; k < 4; ++k)
            same = same && h2[k].bits == h[k].bits && b2[k].bits == b[k].bits;
        CHECK(all(same));
    }
    if (r == 0) {
        H5File f(id);
        REQUIRE(f.id >= 0);
        // f16 and bf16 are HDF5 floats that HDF5 converts to float.
        CHECK(read_all<float>(f.id, "/h", H5T_NATIVE_FLOAT) == std::vector<float>{1.0f, 1.5f, -2.0f, 65504.0f});
        CHECK(read_all<float>(f.id, "/b", H5T_NATIVE_FLOAT) == std::vector<float>{1.0f, 1.5f, -2.0f, 3.140625f});
        const hid_t d = H5Dopen2(f.id, "/dt.f16", H5P_DEFAULT);
        const hid_t t = H5Dget_type(d);
        std::size_t spos, epos, esize, mpos, msize;
        H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize);
        CHECK(H5Tget_class(t) == H5T_FLOAT);
        CHECK(H5Tget_size(t) == 2);
        CHECK((spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15));
        H5Tclose(t);
        H5Dclose(d);
        const hid_t d2 = H5Dopen2(f.id, "/dt.bf16", H5P_DEFAULT);
        const hid_t t2 = H5Dget_type(d2);
        H5Tget_fields(t2, &spos, &epos, &esize, &mpos, &msize);
        CHECK((spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 && H5Tget_ebias(t2) == 127));
        H5Tclose(t2);
        H5Dclose(d2);
        // bool: the enum h5py reads as numpy bool.
        const hid_t d3 = H5Dopen2(f.id, "/flags", H5P_DEFAULT);
        const hid_t t3 = H5Dget_type(d3);
        CHECK(H5Tget_class(t3) == H5T_ENUM);
        char name[16] = {};
        std::int8_t one = 1;
        H5Tenum_nameof(t3, &one, name, sizeof name);
        CHECK(std::string(name) == "TRUE");
        H5Tclose(t3);
        H5Dclose(d3);

        std::string out;
        const std::string scratch = dir + "/h5dump.txt";
        CHECK(shell(std::string(CAIRN_H5DUMP) + " -d /h -d /b -d /flags " + quote(id), out, scratch) == 0);
        CHECK(contains(out, "(0): 1, 1.5, -2, 65504"));
        CHECK(contains(out, "(0): 1, 1.5, -2, 3.14062"));
        CHECK(contains(out, "(0): TRUE, FALSE, TRUE"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("container: the datasets do not depend on the saving ranks or decomposition (h5diff)", "[container][hdf5]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("c_h5diff_" + std::to_string(w));
    const int fewer = std::max(w - 1, 1);
    REQUIRE(round_trip(dir + "/w.h5", w, Decomp::grid, w, Decomp::dim0, 1, 0));
    REQUIRE(round_trip(dir + "/fewer.h5", fewer, Decomp::dim0, w, Decomp::last_dim, 0, 1));
    // A negative control: another value of the scalar "step".
    REQUIRE(run_on(fewer, [&](SubComm& c) {
        TestState s(standard_arrays(), Decomp::dim0, c.size(), c.rank(), 0, true);
        s.step = 1;
        cairn::save(s.dict, dir + "/other.h5", c.get(), container_save());
        return true;
    }));
    if (world_rank() == 0) {
        std::string out;
        const std::string diff = std::string(CAIRN_H5DIFF) + " --exclude-path /cairn ";
        const int same = shell(diff + quote(dir + "/w.h5") + " " + quote(dir + "/fewer.h5"), out, dir + "/diff.txt");
        INFO(out);
        CHECK(same == 0);
        const int differ = shell(diff + quote(dir + "/w.h5") + " " + quote(dir + "/other.h5"), out, dir + "/diff2.txt");
        CHECK(differ == 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("container: h5dump -H shows every array with its global dimensions", "[container][hdf5]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_header_" + std::to_string(w));
    const std::string id = dir + "/ckpt.h5";
    TestState s(standard_arrays(), Decomp::grid, w, r, 1, true);
    cairn::save(s.dict, id, MPI_COMM_WORLD, container_save());
    if (r == 0) {
        std::string out;
        REQUIRE(shell(std::string(CAIRN_H5DUMP) + " -H " + quote(id), out, dir + "/h.txt") == 0);
        for (const auto& spec : standard_arrays()) {
            INFO("array " << spec.name);
            const auto at = out.find("DATASET \"" + spec.name + "\"");
            REQUIRE(at != std::string::npos);
            const auto sp = out.find("DATASPACE", at);
            const std::string line = out.substr(sp, out.find('\n', sp) - sp);
            std::string dims;
            for (std::size_t d = 0; d < spec.global.size(); ++d)
                dims += (d ? ", " : "") + std::to_string(spec.global[d]);
            CHECK(line == (spec.global.empty() ? std::string("DATASPACE  SCALAR")
                                                : "DATASPACE  SIMPLE { ( " + dims + " ) / ( " + dims + " ) }"));
        }
        CHECK(contains(out, "DATASET \"blob\""));
        CHECK(contains(out, "DATASET \"label\""));
        CHECK(contains(out, "GROUP \"cairn\""));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

namespace {

// "ATTRIBUTE <name>: <first DATATYPE line>" for every attribute h5dump -H
// prints, in order.
std::vector<std::string> attribute_types(const std::string& dump)
{
    std::vector<std::string> out;
    std::istringstream in(dump);
    std::string line, name;
    while (std::getline(in, line)) {
        const auto a = line.find("ATTRIBUTE \"");
        if (a != std::string::npos) {
            name = line.substr(a + 11, line.find('"', a + 11) - a - 11);
            continue;
        }
        const auto t = line.find("DATATYPE");
        if (t != std::string::npos && !name.empty()) {
            out.push_back(name + ": " + line.substr(t));
            name.clear();
        }
    }
    return out;
}

} // namespace

TEST_CASE("container: /cairn has the schema of the per-rank layout's metadata.h5 (h5dump)", "[container][hdf5]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_schema_" + std::to_string(w));
    {
        TestState s(standard_arrays(), Decomp::dim0, w, r, 0, true);
        cairn::save(s.dict, dir + "/ckpt.h5", MPI_COMM_WORLD, container_save());
        cairn::SaveOptions o = container_save();
        o.layout = cairn::Layout::per_rank;
        cairn::save(s.dict, dir + "/ckpt", MPI_COMM_WORLD, o);
    }
    if (r == 0) {
        std::string c, d;
        REQUIRE(shell(std::string(CAIRN_H5DUMP) + " -H -g /cairn " + quote(dir + "/ckpt.h5"), c, dir + "/c.txt") == 0);
        REQUIRE(shell(std::string(CAIRN_H5DUMP) + " -H -g /cairn " + quote(dir + "/ckpt/metadata.h5"), d, dir + "/d.txt") == 0);
        const auto ct = attribute_types(c), dt = attribute_types(d);
        CHECK(ct.size() > 20); // the table, and the scalars and strings of /cairn/values
        CHECK(ct == dt);
        CHECK(contains(c, "GROUP \"values\""));
        std::string v;
        REQUIRE(shell(std::string(CAIRN_H5DUMP) + " -a /cairn/layout " + quote(dir + "/ckpt.h5"), v, dir + "/v.txt") == 0);
        CHECK(contains(v, "\"container\""));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("container: a reader without Cairn sees the right values", "[container][hdf5]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_reader_" + std::to_string(w));
    const std::string id = dir + "/ckpt.h5";
    {
        TestState s(standard_arrays(), Decomp::last_dim, w, r, 2, true);
        cairn::save(s.dict, id, MPI_COMM_WORLD, container_save());
    }
    if (r == 0) {
        const TestState ref({}, Decomp::dim0, 1, 0, 0, true);
        // h5dump's raw binary output of each numeric array.
        for (const auto& spec : standard_arrays()) {
            if (spec.global.empty() || cairn::volume(spec.global) == 0)
                continue;
            INFO("array " << spec.name);
            const std::string bin = dir + "/" + spec.name + ".bin";
            std::string out;
            CHECK(shell(std::string(CAIRN_H5DUMP) + " -d " + quote("/" + spec.name) + " -b LE -o " + quote(bin) + " " +
                            quote(id),
                        out, dir + "/dump.txt") == 0);
            const std::string raw = slurp(bin);
            const auto es = cairn::dtype_size(spec.dtype);
            REQUIRE(raw.size() == static_cast<std::size_t>(cairn::volume(spec.global)) * es);
            std::int64_t bad = 0;
            std::vector<unsigned char> want(es);
            for (std::int64_t i = 0; i < cairn::volume(spec.global); ++i) {
                put_value(spec.dtype, want.data(), value_at(i, spec.salt));
                bad += std::memcmp(raw.data() + i * static_cast<std::int64_t>(es), want.data(), es) != 0;
            }
            CHECK(bad == 0);
        }
        // Plain HDF5 calls, converting to double.
        H5File f(id);
        REQUIRE(f.id >= 0);
        for (const auto& spec : standard_arrays()) {
            INFO("array " << spec.name);
            CHECK(dims_of(f.id, "/" + spec.name) == std::vector<hsize_t>(spec.global.begin(), spec.global.end()));
            const auto v = read_all<double>(f.id, "/" + spec.name, H5T_NATIVE_DOUBLE);
            REQUIRE(static_cast<std::int64_t>(v.size()) == cairn::volume(spec.global));
            std::int64_t bad = 0;
            for (std::size_t i = 0; i < v.size(); ++i)
                bad += v[i] != expected(spec, static_cast<std::int64_t>(i));
            CHECK(bad == 0);
        }
        CHECK(read_all<std::int64_t>(f.id, "/step", H5T_NATIVE_INT64) == std::vector<std::int64_t>{ref.step});
        CHECK(read_all<double>(f.id, "/dt", H5T_NATIVE_DOUBLE) == std::vector<double>{ref.dt});
        CHECK(read_string(f.id, "/label") == ref.label);
        const auto blob = read_all<unsigned char>(f.id, "/blob", H5T_NATIVE_UCHAR);
        CHECK(blob.size() == ref.blob.size());
        CHECK(std::memcmp(blob.data(), ref.blob.data(), std::min(blob.size(), ref.blob.size())) == 0);
        // The string reads as a string in h5dump too.
        std::string out;
        CHECK(shell(std::string(CAIRN_H5DUMP) + " -d /label " + quote(id), out, dir + "/label.txt") == 0);
        CHECK(contains(out, "H5T_STRING"));
        CHECK(contains(out, " run/1\""));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("container: names map to readable, reversible HDF5 paths", "[container][names]")
{
    CHECK(cairn::container_dataset_path("fluid.velocity") == "/fluid.velocity");
    CHECK(cairn::container_dataset_path("a/b") == "/a%2Fb");
    CHECK(cairn::container_dataset_path("100%") == "/100%25");
    CHECK(cairn::container_dataset_path(".hidden") == "/%2Ehidden");
    CHECK(cairn::container_dataset_path("..") == "/%2E.");
    CHECK(cairn::container_dataset_path("cairn") == "/%63airn");
    CHECK(cairn::container_dataset_path("cairn.x") == "/cairn.x");
    CHECK(cairn::container_dataset_path("tab\there") == "/tab%09here");
    CHECK(cairn::container_dataset_path("sp ace, \xce\xb1\xce\xb2") == "/sp ace, \xce\xb1\xce\xb2");
    const std::vector<std::string> names{"fluid.velocity", "a/b", "/lead", "trail/", "100%", "%2F", ".hidden", "..",
                                         "cairn", "tab\there", "sp ace", "\xce\xb1\xce\xb2\xce\xb3", "x.y.z", "%",
                                         "del\x7f", "not utf-8 \xff\xfe\x80", "!\"#$&'()*+,-:;<=>?@[\\]^_`{|}~",
                                         "a//b/./c/../d", "\n", "."};
    for (const auto& n : names)
        CHECK(cairn::container_entry_name(cairn::container_dataset_path(n)) == n);
    {   // Any name (any bytes but NUL) round-trips, and its path is one link name.
        std::mt19937 rng(4711);
        int bad = 0;
        for (int k = 0; k < 20000; ++k) {
            std::string n(1 + rng() % 12, ' ');
            for (auto& c : n)
                c = static_cast<char>(1 + rng() % 255);
            const auto path = cairn::container_dataset_path(n);
            bad += path.size() < 2 || path[0] != '/' || path.find('/', 1) != std::string::npos ||
                   path == "/." || path == "/.." || path == "/cairn" || cairn::container_entry_name(path) != n;
        }
        CHECK(bad == 0);
    }
    for (const char* bad : {"", "x", "/", "/%4", "/%zz", "/%2f", "/%41", "/a/b", "/cairn", "/%00"})
        CHECK_THROWS_AS(cairn::container_entry_name(bad), cairn::error::FormatError);

    // Such names survive a save and a load, and the file has their datasets.
    const int w = world_size(), r = world_rank();
    const std::string id = fresh_dir("c_names_" + std::to_string(w)) + "/names.h5";
    std::vector<std::vector<double>> bufs(names.size(), std::vector<double>(3));
    double lr = 0.25;
    {
        cairn::StateDict sd;
        for (std::size_t i = 0; i < names.size(); ++i) {
            for (int k = 0; k < 3; ++k)
                bufs[i][static_cast<std::size_t>(k)] = static_cast<double>(i * 100 + static_cast<std::size_t>(r * 3 + k));
            sd.add_array<double>(names[i], bufs[i].data(), {w * 3}, cairn::Box{{r * 3}, {3}});
        }
        sd.add_scalar("opt/lr", &lr);
        cairn::save(sd, id, MPI_COMM_WORLD, container_save());
    }
    std::vector<std::vector<double>> back(names.size(), std::vector<double>(static_cast<std::size_t>(w * 3)));
    double lr2 = 0;
    cairn::StateDict in;
    for (std::size_t i = 0; i < names.size(); ++i)
        in.add_array<double>(names[i], back[i].data(), {w * 3}, cairn::whole({w * 3}));
    in.add_scalar("opt/lr", &lr2);
    cairn::load(in, id, MPI_COMM_WORLD);
    bool ok = lr2 == lr;
    for (std::size_t i = 0; i < names.size(); ++i)
        for (int k = 0; k < w * 3; ++k)
            ok = ok && back[i][static_cast<std::size_t>(k)] == static_cast<double>(i * 100 + static_cast<std::size_t>(k));
    CHECK(all(ok));
    if (r == 0) {
        H5File f(id);
        for (const auto& n : names)
            CHECK(H5Lexists(f.id, cairn::container_dataset_path(n).c_str(), H5P_DEFAULT) > 0);
        CHECK(read_all<double>(f.id, "/opt%2Flr", H5T_NATIVE_DOUBLE) == std::vector<double>{0.25});
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("container: shards that are not row-major go through a bounded buffer", "[container][strided]")
{
    const int w = world_size(), r = world_rank();
    const std::string id = fresh_dir("c_strided_" + std::to_string(w)) + "/colmajor.h5";
    // A column-major (Fortran order) local array: strides {1, rows}. Rows are
    // split unevenly so ranks need different numbers of pieces.
    const std::int64_t R = w * 40 + 3, C = 30;
    auto value = [&](std::int64_t i, std::int64_t j) { return static_cast<double>(i * C + j); };
    {
        const auto [lo, n] = block(R, w, r);
        std::vector<double> a(static_cast<std::size_t>(n * C));
        for (std::int64_t j = 0; j < C; ++j)
            for (std::int64_t i = 0; i < n; ++i)
                a[static_cast<std::size_t>(i + j * n)] = value(lo + i, j);
        cairn::StateDict sd;
        sd.add_array<double>("f", a.data(), {R, C}, cairn::Box{{lo, 0}, {n, C}}, {1, n});
        cairn::SaveOptions o = container_save();
        o.staging_bytes = 4096; // 512 doubles: several pieces per rank
        cairn::save(sd, id, MPI_COMM_WORLD, o);
    }
    // Back into column-major columns blocks, through a small buffer too.
    const auto [clo, cn] = block(C, w, w - 1 - r);
    std::vector<double> b(static_cast<std::size_t>(R * cn), -1);
    cairn::StateDict in;
    in.add_array<double>("f", b.data(), {R, C}, cairn::Box{{0, clo}, {R, cn}}, {1, R});
    cairn::LoadOptions lo;
    lo.staging_bytes = 4096;
    lo.cooperative = false; // what each rank's reader reads for itself
    auto check_loaded = [&] {
        std::int64_t bad = 0;
        for (std::int64_t j = 0; j < cn; ++j)
            for (std::int64_t i = 0; i < R; ++i)
                bad += b[static_cast<std::size_t>(i + j * R)] != value(i, clo + j);
        return bad;
    };
    SECTION("without verification: only the region is read")
    {
        lo.verify_checksums = false;
        const auto res = cairn::load(in, id, MPI_COMM_WORLD, lo);
        CHECK(all(check_loaded() == 0));
        CHECK(all(res.bytes_read == static_cast<std::uint64_t>(R * cn * 8))); // only what this rank needs
    }
    SECTION("verified: the whole rows of the chunks the region touches")
    {
        const auto res = cairn::load(in, id, MPI_COMM_WORLD, lo);
        CHECK(all(check_loaded() == 0));
        CHECK(all(res.bytes_read == static_cast<std::uint64_t>(R * C * 8))); // a column block touches every row
    }
}

TEST_CASE("container: many small datasets, dense and strided, are written straight to their addresses",
          "[container][small]")
{
    // Small datasets (at most 1 MiB) go straight to their address through
    // MPI-IO, aggregated by group (strided sources packed first); plain HDF5
    // reads the file back.
    const int w = world_size(), r = world_rank();
    const std::string id = fresh_dir("c_small_" + std::to_string(w)) + "/small.h5";
    const int K = 240;
    const std::int64_t n = 6; // rows per rank in the strided ones
    auto value = [](int k, std::int64_t i) { return k * 1000.0 + static_cast<double>(i); };
    std::vector<std::vector<double>> data(K);
    cairn::StateDict sd;
    for (int k = 0; k < K; ++k) {
        auto& d = data[static_cast<std::size_t>(k)];
        const std::string name = "s" + std::to_string(k);
        if (k % 3 == 0) { // replicated, whole on every rank, 1-D
            for (std::int64_t i = 0; i < 50 + k; ++i)
                d.push_back(value(k, i));
            sd.add_array<double>(name, d.data(), {50 + k}, cairn::Box{{0}, {50 + k}});
        } else if (k % 3 == 1) { // sharded, 1-D, dense
            const std::int64_t per = 7 + k % 5;
            for (std::int64_t i = 0; i < per; ++i)
                d.push_back(value(k, r * per + i));
            sd.add_array<double>(name, d.data(), {w * per}, cairn::Box{{r * per}, {per}});
        } else { // sharded rows of a (w*n) x 3 array held column-major: strided
            d.resize(static_cast<std::size_t>(n * 3));
            for (std::int64_t j = 0; j < 3; ++j)
                for (std::int64_t i = 0; i < n; ++i)
                    d[static_cast<std::size_t>(i + j * n)] = value(k, (r * n + i) * 3 + j);
            sd.add_array<double>(name, d.data(), {w * n, 3}, cairn::Box{{r * n, 0}, {n, 3}}, {1, n});
        }
    }
    cairn::SaveOptions o = container_save();
    o.staging_bytes = 4096;
    cairn::save(sd, id, MPI_COMM_WORLD, o);
    if (r == 0) {
        H5File f(id);
        REQUIRE(f.id >= 0);
        std::int64_t bad = 0, checked = 0;
        for (int k = 0; k < K; ++k) {
            const auto v = read_all<double>(f.id, "/s" + std::to_string(k), H5T_NATIVE_DOUBLE);
            for (std::size_t i = 0; i < v.size(); ++i, ++checked)
                bad += v[i] != value(k, static_cast<std::int64_t>(i));
        }
        CHECK(bad == 0);
        CHECK(checked > K * 20);
    }
    // Loaded back (small datasets read straight, verified) into fresh memory.
    std::vector<std::vector<double>> back(K);
    cairn::StateDict in;
    for (int k = 0; k < K; ++k) {
        auto& b = back[static_cast<std::size_t>(k)];
        const auto& d = data[static_cast<std::size_t>(k)];
        b.assign(d.size(), -1.0);
        const std::string name = "s" + std::to_string(k);
        if (k % 3 == 0)
            in.add_array<double>(name, b.data(), {50 + k}, cairn::Box{{0}, {50 + k}});
        else if (k % 3 == 1)
            in.add_array<double>(name, b.data(), {w * static_cast<std::int64_t>(d.size())},
                                 cairn::Box{{r * static_cast<std::int64_t>(d.size())}, {static_cast<std::int64_t>(d.size())}});
        else
            in.add_array<double>(name, b.data(), {w * n, 3}, cairn::Box{{r * n, 0}, {n, 3}}, {1, n});
    }
    cairn::load(in, id, MPI_COMM_WORLD);
    CHECK(all(back == data));
}

TEST_CASE("container: small datasets are packed, and their pieces written in runs by one rank per group",
          "[container][small]")
{
    // 1,500 datasets of 8,000 bytes (12 MB: 6 groups of 2 MiB, so several
    // rounds at every size), sharded unevenly, replicated or strided. Below
    // 64 KiB nothing is aligned: most neighbours in the file touch, which
    // lets a group's owner write each run with one call.
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_small_runs_" + std::to_string(w));
    std::vector<ArraySpec> specs;
    for (int k = 0; k < 1500; ++k) {
        char name[32];
        std::snprintf(name, sizeof name, "%ssmall.%04d", k % 5 == 0 ? "rep." : "", k);
        specs.push_back({name, cairn::DType::f64, {1000}, 60 + k});
    }
    for (const int ghost : {0, 1}) {
        const std::string id = dir + "/ckpt" + std::to_string(ghost) + ".h5";
        INFO(id);
        TestState s(specs, Decomp::dim0, w, r, ghost, true);
        cairn::save(s.dict, id, MPI_COMM_WORLD, container_save());
        TestState back(specs, Decomp::single_owner, w, w - 1 - r, 1 - ghost, false);
        cairn::load(back.dict, id, MPI_COMM_WORLD);
        CHECK(all(back.errors() == 0));
        CHECK(cairn::verify(id, MPI_COMM_WORLD).ok());
        if (r == 0) {
            H5File f(id);
            REQUIRE(f.id >= 0);
            std::vector<haddr_t> at;
            for (const auto& sp : specs) {
                const hid_t d = H5Dopen2(f.id, ("/" + sp.name).c_str(), H5P_DEFAULT);
                at.push_back(d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF);
                if (d >= 0)
                    H5Dclose(d);
            }
            CHECK(std::count(at.begin(), at.end(), HADDR_UNDEF) == 0);
            std::sort(at.begin(), at.end());
            std::size_t touching = 0;
            for (std::size_t i = 1; i < at.size(); ++i)
                touching += at[i] == at[i - 1] + 8000;
            INFO(touching << " of " << at.size() - 1 << " neighbours touch");
            CHECK(touching * 2 > at.size()); // none touch when every dataset is aligned to 4096
        }
    }
}

TEST_CASE("container: rows of dense memory go straight to the file, other chunks of the same save through HDF5",
          "[container][direct]")
{
    // Datasets above 1 MiB: rows of dense memory on every rank (straight to
    // their place), the same rows held column-major on odd ranks (that
    // dataset goes through HDF5 on every rank), columns (not one range of
    // the dataset: through HDF5, collective) and a replicated array (one
    // writer, straight), in one save, with fsync. Plain HDF5 and a load on
    // the ranks in reverse order read every value back.
    const int w = world_size(), r = world_rank();
    const std::string id = fresh_dir("c_direct_" + std::to_string(w)) + "/direct.h5";
    const std::int64_t R = 256, C = 1024; // rows and columns per rank: 2 MiB of f64
    auto value = [](int a, std::int64_t i) { return a * 1e7 + static_cast<double>(i); };
    struct Arr {
        std::string name;
        cairn::Shape global;
        cairn::Box box;
        bool strided;
        std::vector<double> data;
    };
    auto make = [&](int rank, bool fill) {
        std::vector<Arr> v;
        v.push_back({"rows", {w * R, C}, cairn::Box{{rank * R, 0}, {R, C}}, false, {}});
        v.push_back({"rows.mixed", {w * R, C}, cairn::Box{{rank * R, 0}, {R, C}}, rank % 2 == 1, {}});
        v.push_back({"cols", {R, w * C}, cairn::Box{{0, rank * C}, {R, C}}, false, {}});
        v.push_back({"rep", {R + 44, C}, cairn::Box{{0, 0}, {R + 44, C}}, false, {}});
        for (std::size_t a = 0; a < v.size(); ++a) {
            auto& x = v[a];
            const std::int64_t rows = x.box.shape[0], cols = x.box.shape[1];
            x.data.assign(static_cast<std::size_t>(rows * cols), -1.0);
            if (!fill)
                continue;
            for (std::int64_t i = 0; i < rows; ++i)
                for (std::int64_t j = 0; j < cols; ++j) {
                    const auto g = (x.box.offsets[0] + i) * x.global[1] + x.box.offsets[1] + j;
                    x.data[static_cast<std::size_t>(x.strided ? i + j * rows : i * cols + j)] =
                        value(static_cast<int>(a), g);
                }
        }
        return v;
    };
    auto dict = [](std::vector<Arr>& v) {
        cairn::StateDict sd;
        for (auto& x : v) {
            if (x.strided)
                sd.add_array<double>(x.name, x.data.data(), x.global, x.box, {1, x.box.shape[0]});
            else
                sd.add_array<double>(x.name, x.data.data(), x.global, x.box);
        }
        return sd;
    };
    auto out = make(r, true);
    cairn::SaveOptions o = container_save();
    o.fsync = true;
    auto sd_out = dict(out);
    cairn::save(sd_out, id, MPI_COMM_WORLD, o);
    if (r == 0) {
        H5File f(id);
        REQUIRE(f.id >= 0);
        for (std::size_t a = 0; a < out.size(); ++a) {
            const auto v = read_all<double>(f.id, "/" + out[a].name, H5T_NATIVE_DOUBLE);
            INFO(out[a].name);
            REQUIRE(v.size() == static_cast<std::size_t>(out[a].global[0] * out[a].global[1]));
            std::int64_t bad = 0;
            for (std::size_t i = 0; i < v.size(); ++i)
                bad += v[i] != value(static_cast<int>(a), static_cast<std::int64_t>(i));
            CHECK(bad == 0);
        }
    }
    auto in = make(w - 1 - r, false);
    auto sd = dict(in);
    cairn::load(sd, id, MPI_COMM_WORLD);
    const auto expect = make(w - 1 - r, true);
    bool same = true;
    for (std::size_t a = 0; a < in.size(); ++a)
        same = same && in[a].data == expect[a].data;
    CHECK(all(same));
    CHECK(cairn::verify(id, MPI_COMM_WORLD).ok());
}

TEST_CASE("container: ranks may read different subsets (partial loads)", "[container][partial]")
{
    const int w = world_size(), r = world_rank();
    const std::string id = fresh_dir("c_partial_" + std::to_string(w)) + "/ckpt.h5";
    const auto specs = standard_arrays();
    {
        TestState s(specs, Decomp::dim0, w, r, 0, true);
        cairn::save(s.dict, id, MPI_COMM_WORLD, container_save());
    }
    // Rank r asks for the arrays i with i % w == r, and nothing else.
    std::vector<std::unique_ptr<LocalArray>> arrays;
    cairn::StateDict sd;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        if (static_cast<int>(i) % w != r)
            continue;
        const auto& s = specs[i];
        arrays.push_back(std::make_unique<LocalArray>(s.name, s.dtype, s.global, cairn::whole(s.global), 1, s.salt));
        sd.add_array(s.name, arrays.back()->shard());
    }
    cairn::LoadOptions o;
    o.partial = true;
    const auto res = cairn::load(sd, id, MPI_COMM_WORLD, o);
    std::int64_t bad = 0;
    for (auto& a : arrays)
        bad += a->errors();
    CHECK(all(bad == 0));
    CHECK(all(res.missing.empty()));
    CHECK(all(res.skipped.size() == specs.size() + 4 - arrays.size()));
}

TEST_CASE("container: tuning options (hints, locking, cache, alignment)", "[container][tuning]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_tuning_" + std::to_string(w));
    // 8 KiB + 40 bytes of doubles per rank: at least 64 KiB in all only from
    // 8 ranks, so the big array is sized to exceed 64 KiB on its own.
    const std::int64_t per = 8192 / w + 5;
    std::vector<double> big(static_cast<std::size_t>(per)), small(2);
    for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = static_cast<double>(r * per + static_cast<std::int64_t>(i));
    small = {1.0 * r, 2.0 * r};
    cairn::StateDict sd;
    sd.add_array<double>("big", big.data(), {w * per}, cairn::Box{{r * per}, {per}});
    sd.add_array<double>("small", small.data(), {w * 2}, cairn::Box{{r * 2}, {2}});
    for (const bool collective : {true, false}) {
        const std::string id = dir + (collective ? "/coll.h5" : "/indep.h5");
        cairn::SaveOptions o = container_save();
        o.alignment = 65536;
        o.container.mpi_hints = {{"romio_cb_write", "enable"}, {"cb_buffer_size", "1048576"}, {"cairn_unknown_hint", "1"}};
        o.container.file_locking = cairn::FileLocking::off;
        o.container.metadata_cache_bytes = std::size_t(8) << 20;
        o.container.collective_metadata = collective;
        // Without collective metadata, also every transfer independent.
        o.container.independent_below = collective ? 0 : std::size_t(1) << 20;
        cairn::save(sd, id, MPI_COMM_WORLD, o);
        std::vector<double> b2(big.size()), s2(2);
        cairn::StateDict in;
        in.add_array<double>("big", b2.data(), {w * per}, cairn::Box{{r * per}, {per}});
        in.add_array<double>("small", s2.data(), {w * 2}, cairn::Box{{r * 2}, {2}});
        cairn::LoadOptions lo;
        lo.container = o.container;
        cairn::load(in, id, MPI_COMM_WORLD, lo);
        CHECK(all(b2 == big && s2 == small));
        if (r == 0) {
            H5File f(id);
            const hid_t d = H5Dopen2(f.id, "/big", H5P_DEFAULT);
            const haddr_t at = H5Dget_offset(d);
            H5Dclose(d);
            CHECK(at != HADDR_UNDEF);
            CHECK(at % 65536 == 0); // the dataset of >= 64 KiB is aligned
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    // A hint key MPI cannot hold is refused before anything is written.
    cairn::SaveOptions bad = container_save();
    bad.container.mpi_hints = {{std::string(300, 'k'), "1"}};
    const auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, dir + "/bad.h5", MPI_COMM_WORLD, bad); });
    CHECK(contains(msg, "MPI-IO hint"));
    CHECK(all(!stdfs::exists(dir + "/bad.h5")));
}

namespace {

// Container storage that fails on one rank after the collective writes.
class FailingContainerWriter : public cairn::ContainerWriter {
public:
    FailingContainerWriter(int bad_rank, cairn::ContainerWriterOptions o) : ContainerWriter(std::move(o)), m_bad(bad_rank) {}
    std::vector<cairn::WriteResult> write_data(const cairn::SavePlan& plan, cairn::SavePlanner& planner) override
    {
        auto r = ContainerWriter::write_data(plan, planner);
        if (world_rank() == m_bad)
            throw cairn::error::WriteError("injected: disk full on rank " + std::to_string(m_bad));
        return r;
    }

private:
    int m_bad;
};

// A planner whose data cannot be resolved on one rank: that rank fails
// inside write_data before any collective HDF5 call.
class UnresolvablePlanner : public cairn::DefaultSavePlanner {
public:
    explicit UnresolvablePlanner(int bad_rank) : m_bad(bad_rank) {}
    cairn::DataRef resolve_data(const cairn::WriteItem& item) override
    {
        if (world_rank() == m_bad)
            throw cairn::error::WrongAPIUsage("injected: no data for '" + item.fqn + "'");
        return DefaultSavePlanner::resolve_data(item);
    }

private:
    int m_bad;
};

} // namespace

TEST_CASE("container: commit, overwrite and failures never leave a file that looks complete", "[container][commit]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("c_commit_" + std::to_string(w));
    const std::string id = dir + "/ckpt.h5";
    const std::string tmp = id + cairn::container_temp_suffix;
    std::vector<double> one(4, 1.0), two(4, 2.0), got(4, 0.0);
    auto dict = [&](std::vector<double>& v) {
        cairn::StateDict sd;
        sd.add_array<double>("u", v.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        return sd;
    };
    auto loads = [&](const std::vector<double>& want) {
        std::fill(got.begin(), got.end(), 0.0);
        auto in = dict(got);
        cairn::load(in, id, MPI_COMM_WORLD);
        return all(got == want);
    };

    // An interrupted save's leftover does not count and is replaced.
    if (r == 0)
        std::ofstream(tmp) << "half-written";
    MPI_Barrier(MPI_COMM_WORLD);
    {
        auto sd = dict(one);
        const auto msg = agreed_error<cairn::error::NotFound>([&] { cairn::load(sd, id, MPI_COMM_WORLD); });
        CHECK(contains(msg, "no checkpoint at " + id));
        cairn::save(sd, id, MPI_COMM_WORLD, container_save());
    }
    CHECK(all(!stdfs::exists(tmp)));
    CHECK(loads(one));

    // Not replaced without overwrite.
    {
        auto sd = dict(two);
        const auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, id, MPI_COMM_WORLD, container_save()); });
        CHECK(contains(msg, "already exists"));
        CHECK(loads(one));
    }
    // A replacement that fails on one rank after writing leaves the old one.
    {
        auto sd = dict(two);
        cairn::SaveOptions o = container_save(true);
        cairn::ContainerWriterOptions co;
        co.fsync = false;
        co.overwrite = true;
        o.storage = std::make_shared<FailingContainerWriter>(w - 1, co);
        const auto msg = agreed_error<cairn::error::WriteError>([&] { cairn::save(sd, id, MPI_COMM_WORLD, o); });
        CHECK(contains(msg, "injected: disk full on rank " + std::to_string(w - 1)));
        CHECK(all(!stdfs::exists(tmp)));
        CHECK(loads(one));
    }
    // A rank that fails before the collective writes does not hang the others.
    {
        auto sd = dict(two);
        cairn::SaveOptions o = container_save(true);
        o.planner = std::make_shared<UnresolvablePlanner>(w - 1);
        const auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, id, MPI_COMM_WORLD, o); });
        CHECK(contains(msg, "rank " + std::to_string(w - 1) + " (write): injected: no data for 'u'"));
        CHECK(all(!stdfs::exists(tmp)));
        CHECK(loads(one));
        // ... and no file appears where there was none.
        const auto msg2 = agreed_error<cairn::error::WrongAPIUsage>(
            [&] { cairn::save(sd, dir + "/fresh.h5", MPI_COMM_WORLD, o); });
        CHECK(contains(msg2, "injected"));
        CHECK(all(!stdfs::exists(dir + "/fresh.h5") && !stdfs::exists(dir + "/fresh.h5.cairn-tmp")));
    }
    // A successful replacement.
    {
        auto sd = dict(two);
        cairn::save(sd, id, MPI_COMM_WORLD, container_save(true));
        CHECK(loads(two));
        CHECK(all(!stdfs::exists(tmp)));
    }
    // A directory in the way is refused.
    {
        auto sd = dict(two);
        if (r == 0)
            stdfs::create_directories(dir + "/adir.h5");
        MPI_Barrier(MPI_COMM_WORLD);
        cairn::SaveOptions o = container_save(true);
        const auto msg = agreed_error<cairn::error::WriteError>([&] { cairn::save(sd, dir + "/adir.h5", MPI_COMM_WORLD, o); });
        CHECK(contains(msg, "it is a directory"));
    }
}

TEST_CASE("container: bad input gets a clear error naming the file and the dataset", "[container][errors]")
{
    const int w = world_size(), r = world_rank();
    // Every SECTION reruns the test case, whose fresh_dir removes the files
    // on rank 0: let every rank finish its local checks first.
    struct BarrierAtEnd {
        ~BarrierAtEnd() { MPI_Barrier(MPI_COMM_WORLD); }
    } barrier_at_end;
    const std::string dir = fresh_dir("c_bad_" + std::to_string(w));
    std::vector<double> buf(4, 3.0);
    cairn::StateDict sd;
    sd.add_array<double>("u", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
    const std::string n = std::to_string(w * 4);

    auto load_error = [&](const std::string& id) {
        return agreed_error<cairn::error::FormatError>([&] { cairn::load(sd, id, MPI_COMM_WORLD); });
    };
    auto local_error = [&](const std::string& id) {
        try {
            cairn::read_metadata(id);
        } catch (const cairn::error::FormatError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    auto fresh_container = [&](const std::string& id) {
        cairn::save(sd, id, MPI_COMM_WORLD, container_save());
        return id;
    };

    SECTION("not an HDF5 file")
    {
        const std::string id = dir + "/text.h5";
        if (r == 0)
            std::ofstream(id) << "this is not a checkpoint";
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = load_error(id);
        CHECK(contains(msg, id + ": not an HDF5 file"));
        CHECK(contains(local_error(id), "not an HDF5 file"));
        CHECK_FALSE(cairn::is_container_checkpoint(id));
    }
    SECTION("an HDF5 file from another program")
    {
        const std::string id = dir + "/other.h5";
        if (r == 0) {
            const hid_t f = H5Fcreate(id.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            H5Fclose(f);
            replace_dataset(id, "/u", H5T_IEEE_F64LE, {static_cast<hsize_t>(w * 4)});
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = load_error(id);
        CHECK(contains(msg, id + ": no group /cairn (not a Cairn checkpoint)"));
        CHECK_FALSE(cairn::is_container_checkpoint(id));
    }
    SECTION("a dataset of the wrong shape")
    {
        const std::string id = fresh_container(dir + "/shape.h5");
        if (r == 0)
            replace_dataset(id, "/u", H5T_IEEE_F64LE, {static_cast<hsize_t>(w * 4 + 1)});
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = load_error(id);
        CHECK(contains(msg, id + ": dataset '/u' of array 'u' has shape [" + std::to_string(w * 4 + 1) +
                                "], the metadata says [" + n + "]"));
        CHECK(contains(local_error(id), "has shape"));
    }
    SECTION("a dataset of the wrong type")
    {
        const std::string id = fresh_container(dir + "/type.h5");
        if (r == 0)
            replace_dataset(id, "/u", H5T_IEEE_F32LE, {static_cast<hsize_t>(w * 4)});
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = load_error(id);
        CHECK(contains(msg, id + ": dataset '/u' of array 'u' has type 32-bit float, the metadata says f64 (64-bit float)"));
    }
    SECTION("a missing dataset")
    {
        const std::string id = fresh_container(dir + "/missing.h5");
        if (r == 0)
            replace_dataset(id, "/u", H5T_IEEE_F64LE, {});
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = load_error(id);
        CHECK(contains(msg, id + ": dataset '/u' of array 'u' is missing"));
    }
    SECTION("a damaged dataset in the last rank's share of the check")
    {
        // The datasets are checked shared out over the ranks (every w-th from
        // the rank's own, in metadata order): damage in the last one's share
        // fails the load on every rank, and read_metadata (local) checks all.
        std::vector<std::vector<double>> more(static_cast<std::size_t>(w), std::vector<double>(4, 1.0));
        cairn::StateDict sd2;
        sd2.add_array<double>("u", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        for (int k = 0; k < w; ++k)
            sd2.add_array<double>("v" + std::to_string(k), more[static_cast<std::size_t>(k)].data(), {w * 4},
                                  cairn::Box{{r * 4}, {4}});
        const std::string id = dir + "/share.h5";
        cairn::save(sd2, id, MPI_COMM_WORLD, container_save());
        // Metadata order: u, v0, v1, ...: index w - 1 is v<w-2> (u when w == 1).
        const std::string victim = w == 1 ? "u" : "v" + std::to_string(w - 2);
        if (r == 0)
            replace_dataset(id, "/" + victim, H5T_IEEE_F64LE, {static_cast<hsize_t>(w * 4 + 2)});
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = agreed_error<cairn::error::FormatError>([&] { cairn::load(sd2, id, MPI_COMM_WORLD); });
        CHECK(contains(msg, id + ": dataset '/" + victim + "' of array '" + victim + "' has shape"));
        CHECK(contains(msg, "rank " + std::to_string(w - 1) + " (local plan)"));
        CHECK(contains(local_error(id), "dataset '/" + victim + "'"));
    }
    SECTION("a truncated container")
    {
        const std::string id = fresh_container(dir + "/truncated.h5");
        if (r == 0)
            stdfs::resize_file(id, stdfs::file_size(id) / 2);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = load_error(id);
        CHECK(contains(msg, id + ": HDF5 cannot open it"));
        CHECK(contains(msg, "truncated"));
    }
    SECTION("a per-rank checkpoint read as a container")
    {
        cairn::save(sd, dir + "/perrank", MPI_COMM_WORLD, container_save());
        cairn::LoadOptions o;
        o.layout = cairn::Layout::container;
        const auto msg = agreed_error<cairn::error::FormatError>([&] { cairn::load(sd, dir + "/perrank", MPI_COMM_WORLD, o); });
        CHECK(contains(msg, dir + "/perrank is a directory, not a container checkpoint"));
    }
    SECTION("a missing container")
    {
        const auto msg =
            agreed_error<cairn::error::NotFound>([&] { cairn::load(sd, dir + "/nowhere.h5", MPI_COMM_WORLD); });
        CHECK(contains(msg, "no checkpoint at " + dir + "/nowhere.h5"));
    }
}
