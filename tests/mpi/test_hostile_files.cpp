// Files that are not what Cairn wrote, put inside a checkpoint to make Cairn
// read something else: symbolic links and FIFOs in place of its files, HDF5
// datasets of a container whose bytes live in other files (external raw
// storage, external links, virtual datasets) or elsewhere in the file (soft
// links). Every rank gets the same clear error naming the file or dataset,
// within seconds (a FIFO must not block an open); verify does not call such a
// checkpoint intact. Also: the container's scalar datasets (for other
// readers) checked by verify, and the system's reason when the container
// cannot be created.
//
// Hidden from the mpi.<file>.np* runs ([.hostile]): CTest runs them as
// mpi_hostile_np*, with a short TIMEOUT (tests/hostile.cmake).
#include "fixtures.hpp"
#include "outcome.hpp"

#include <hdf5.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

using namespace cairn_test;
using Kind = cairn::Error::Kind;
namespace stdfs = std::filesystem;

namespace {

constexpr std::int64_t k_rows = 64; // elements of "u" per rank
constexpr double k_limit_s = 20;    // a refused file fails this fast on every rank

// One array split over the ranks and a scalar.
struct State {
    std::vector<double> u;
    std::int64_t step = 0;
    cairn::StateDict dict;

    explicit State(bool filled)
    {
        const int w = world_size(), r = world_rank();
        u.assign(static_cast<std::size_t>(k_rows), 0.0);
        if (filled) {
            for (std::int64_t i = 0; i < k_rows; ++i)
                u[static_cast<std::size_t>(i)] = static_cast<double>(r * k_rows + i);
            step = 17;
        }
        dict.add_array<double>("u", u.data(), {w * k_rows}, cairn::Box{{r * k_rows}, {k_rows}});
        dict.add_scalar("step", &step);
    }

    bool correct() const
    {
        for (std::int64_t i = 0; i < k_rows; ++i)
            if (u[static_cast<std::size_t>(i)] != static_cast<double>(world_rank() * k_rows + i))
                return false;
        return step == 17;
    }
};

std::string saved(const std::string& path)
{
    State s(true);
    cairn::SaveOptions o;
    o.fsync = false;
    o.overwrite = true;
    cairn::save(s.dict, path, MPI_COMM_WORLD, o);
    return path;
}

Outcome try_load(const std::string& path)
{
    State s(false);
    return attempt([&] { cairn::load(s.dict, path, MPI_COMM_WORLD); });
}

// verify's report, or the error it threw, on every rank.
struct Verified {
    Outcome outcome;
    cairn::VerifyReport report;
    std::string problems; // joined
};

Verified try_verify(const std::string& path)
{
    Verified v;
    v.outcome = attempt([&] { v.report = cairn::verify(path, MPI_COMM_WORLD); });
    for (const auto& p : v.report.problems)
        v.problems += p + "\n";
    return v;
}

// Runs `f` on rank 0 only, then a barrier; REQUIREs that it did not throw.
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

void make_fifo(const std::string& path)
{
    stdfs::remove(path);
    if (::mkfifo(path.c_str(), 0644) != 0)
        throw std::runtime_error("mkfifo " + path + ": " + std::strerror(errno));
}

// The container file `file`, opened read-write with the serial driver, handed to `edit`.
void edit_container(const std::string& file, const std::function<void(hid_t)>& edit)
{
    on_rank0([&] {
        const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        if (f < 0)
            throw std::runtime_error("cannot open " + file);
        try {
            edit(f);
        } catch (...) {
            H5Fclose(f);
            throw;
        }
        if (H5Fclose(f) < 0)
            throw std::runtime_error("cannot close " + file);
    });
}

void require(bool ok, const std::string& what)
{
    if (!ok)
        throw std::runtime_error("HDF5: " + what);
}

// The values of dataset `name` of `file` (doubles).
std::vector<double> read_doubles(hid_t file, const char* name)
{
    const hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    require(d >= 0, std::string("opening ") + name);
    const hid_t space = H5Dget_space(d);
    std::vector<double> v(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
    require(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, "reading");
    H5Sclose(space);
    H5Dclose(d);
    return v;
}

// Replaces dataset `name` of `file` by one of the same values created with
// the creation properties `dcpl` (external storage, virtual).
void replace_dataset(hid_t file, const char* name, hid_t dcpl, bool write)
{
    const auto v = read_doubles(file, name);
    require(H5Ldelete(file, name, H5P_DEFAULT) >= 0, "deleting the dataset");
    const hsize_t n = v.size();
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(file, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    require(d >= 0, "creating the replacement");
    if (write)
        require(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, "writing it");
    H5Dclose(d);
    H5Sclose(space);
}

std::string absolute(const std::string& p) { return stdfs::absolute(p).string(); }

// Seconds of the slowest rank are below k_limit_s, and every rank threw the
// same error of `kind` whose message holds every part of `parts`.
bool refused(const Outcome& o, Kind kind, const std::vector<std::string>& parts)
{
    bool has = true;
    for (const auto& p : parts)
        has = has && contains(o.what, p);
    return same_error_everywhere(o, kind) && all(has) && max_seconds(o) < k_limit_s;
}

} // namespace

TEST_CASE("per-rank layout: only regular files inside the checkpoint are read", "[.hostile]")
{
    const std::string base = fresh_dir("hostile_distcp");
    const std::string outside = base + "/outside";
    on_rank0([&] { stdfs::create_directories(outside); });
    const auto data = [](const std::string& dir) { return dir + "/__0_0.distcp"; };

    SECTION("a data file that is a symbolic link to a copy outside the checkpoint")
    {
        const auto dir = saved(base + "/link");
        on_rank0([&] {
            stdfs::copy_file(data(dir), outside + "/copy.distcp");
            stdfs::remove(data(dir));
            stdfs::create_symlink(absolute(outside + "/copy.distcp"), data(dir));
        });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {data(dir), "is a symbolic link", "regular files inside the checkpoint"}));
        const auto v = try_verify(dir);
        INFO(v.outcome.what << v.problems);
        CHECK(all(!v.outcome.threw && !v.report.ok() && contains(v.problems, data(dir)) &&
                  contains(v.problems, "symbolic link")));
    }
    SECTION("a FIFO named like a data file")
    {
        const auto dir = saved(base + "/fifo");
        on_rank0([&] { make_fifo(data(dir)); });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {data(dir), "not a regular file (a FIFO)"}));
        const auto v = try_verify(dir);
        INFO(v.outcome.what << v.problems);
        CHECK(all(!v.outcome.threw && !v.report.ok() && contains(v.problems, "not a regular file (a FIFO)")));
        CHECK(max_seconds(v.outcome) < k_limit_s);
    }
    SECTION("a FIFO named metadata.h5")
    {
        const auto dir = saved(base + "/fifo_md");
        on_rank0([&] { make_fifo(dir + "/metadata.h5"); });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {dir + "/metadata.h5", "not a regular file (a FIFO)"}));
        const auto v = try_verify(dir);
        INFO(v.outcome.what);
        CHECK(refused(v.outcome, Kind::format, {dir + "/metadata.h5", "(a FIFO)"}));
        const auto r = attempt([&] { (void)cairn::read_metadata(dir); });
        CHECK(refused(r, Kind::format, {dir + "/metadata.h5", "(a FIFO)"}));
    }
    SECTION("metadata.h5 that is a symbolic link to a copy outside the checkpoint")
    {
        const auto dir = saved(base + "/link_md");
        on_rank0([&] {
            stdfs::copy_file(dir + "/metadata.h5", outside + "/metadata.h5");
            stdfs::remove(dir + "/metadata.h5");
            stdfs::create_symlink(absolute(outside + "/metadata.h5"), dir + "/metadata.h5");
        });
        const auto o = try_load(dir);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {dir + "/metadata.h5", "is a symbolic link"}));
    }
    SECTION("the checkpoint directory itself may be a symbolic link")
    {
        const auto dir = saved(base + "/real");
        on_rank0([&] { stdfs::create_directory_symlink(absolute(dir), base + "/alias"); });
        State s(false);
        const auto o = attempt([&] { cairn::load(s.dict, base + "/alias", MPI_COMM_WORLD); });
        INFO(o.what);
        CHECK(all(!o.threw && !o.foreign && s.correct()));
    }
}

TEST_CASE("container: only datasets stored in the container's own file are read", "[.hostile][container]")
{
    const std::string base = fresh_dir("hostile_container");
    const std::string outside = base + "/outside";
    on_rank0([&] { stdfs::create_directories(outside); });
    // The copies outside hold the very bytes of the originals, so that
    // checksums match: only the refusal tells.
    const std::string twin = saved(outside + "/twin.h5");

    SECTION("a dataset with external raw storage")
    {
        const auto file = saved(base + "/external_storage.h5");
        const std::string raw = absolute(outside + "/u.raw");
        edit_container(file, [&](hid_t f) {
            const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
            require(H5Pset_external(dcpl, raw.c_str(), 0, H5F_UNLIMITED) >= 0, "H5Pset_external");
            replace_dataset(f, "/u", dcpl, true);
            H5Pclose(dcpl);
        });
        const auto o = try_load(file);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "dataset '/u'", "external raw storage", raw}));
        const auto v = try_verify(file);
        INFO(v.outcome.what << v.problems);
        CHECK(refused(v.outcome, Kind::format, {file, "dataset '/u'", "external raw storage"}));
        const auto r = attempt([&] { (void)cairn::read_metadata(file); });
        CHECK(refused(r, Kind::format, {"dataset '/u'", "external raw storage"}));
    }
    SECTION("an external link in place of a dataset")
    {
        const auto file = saved(base + "/external_link.h5");
        edit_container(file, [&](hid_t f) {
            require(H5Ldelete(f, "/u", H5P_DEFAULT) >= 0, "deleting /u");
            require(H5Lcreate_external(absolute(twin).c_str(), "/u", f, "/u", H5P_DEFAULT, H5P_DEFAULT) >= 0,
                    "H5Lcreate_external");
        });
        const auto o = try_load(file);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "dataset '/u'", "is an external link", "twin.h5"}));
        const auto v = try_verify(file);
        INFO(v.outcome.what << v.problems);
        CHECK(refused(v.outcome, Kind::format, {file, "dataset '/u'", "is an external link"}));
    }
    SECTION("a soft link in place of a dataset")
    {
        const auto file = saved(base + "/soft_link.h5");
        edit_container(file, [&](hid_t f) {
            require(H5Lmove(f, "/u", f, "/moved", H5P_DEFAULT, H5P_DEFAULT) >= 0, "moving /u");
            require(H5Lcreate_soft("/moved", f, "/u", H5P_DEFAULT, H5P_DEFAULT) >= 0, "H5Lcreate_soft");
        });
        const auto o = try_load(file);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "dataset '/u'", "is a soft link", "/moved"}));
        const auto v = try_verify(file);
        CHECK(refused(v.outcome, Kind::format, {file, "dataset '/u'", "is a soft link"}));
    }
    SECTION("a virtual dataset in place of a dataset")
    {
        const auto file = saved(base + "/virtual.h5");
        const std::string src = absolute(twin);
        edit_container(file, [&](hid_t f) {
            const hsize_t n = static_cast<hsize_t>(world_size() * k_rows);
            const hid_t space = H5Screate_simple(1, &n, nullptr);
            const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
            require(H5Pset_virtual(dcpl, space, src.c_str(), "/u", space) >= 0, "H5Pset_virtual");
            replace_dataset(f, "/u", dcpl, false);
            H5Pclose(dcpl);
            H5Sclose(space);
        });
        const auto o = try_load(file);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "dataset '/u'", "virtual dataset"}));
        const auto v = try_verify(file);
        CHECK(refused(v.outcome, Kind::format, {file, "dataset '/u'", "virtual dataset"}));
    }
    SECTION("the metadata group as a soft link")
    {
        const auto file = saved(base + "/soft_cairn.h5");
        edit_container(file, [&](hid_t f) {
            require(H5Lmove(f, "/cairn", f, "/elsewhere", H5P_DEFAULT, H5P_DEFAULT) >= 0, "moving /cairn");
            require(H5Lcreate_soft("/elsewhere", f, "/cairn", H5P_DEFAULT, H5P_DEFAULT) >= 0, "H5Lcreate_soft");
        });
        const auto o = try_load(file);
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "/cairn", "is a soft link"}));
    }
    SECTION("a FIFO named like the container, read as a container")
    {
        const auto file = base + "/fifo.h5";
        on_rank0([&] { make_fifo(file); });
        State s(false);
        cairn::LoadOptions lo;
        lo.layout = cairn::Layout::container;
        const auto o = attempt([&] { cairn::load(s.dict, file, MPI_COMM_WORLD, lo); });
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "not a regular file (a FIFO)"}));
    }
    SECTION("the container itself may be a symbolic link")
    {
        const auto file = saved(base + "/real.h5");
        on_rank0([&] { stdfs::create_symlink(absolute(file), base + "/alias.h5"); });
        State s(false);
        const auto o = attempt([&] { cairn::load(s.dict, base + "/alias.h5", MPI_COMM_WORLD); });
        INFO(o.what);
        CHECK(all(!o.threw && !o.foreign && s.correct()));
        const auto v = try_verify(base + "/alias.h5");
        CHECK(all(!v.outcome.threw && v.report.ok()));
    }
}

// With many datasets, a rank checks the root group's links in one listing
// (ContainerReader::check_datasets): a soft link or a missing dataset among
// them is refused as with few.
TEST_CASE("container: links among many datasets", "[.hostile][container]")
{
    const std::string base = fresh_dir("hostile_many");
    const int w = world_size(), r = world_rank();
    constexpr int k_many = 300; // at least 64 checks per rank at 4 ranks
    std::vector<double> many(k_many);
    auto state = [&](State& s) {
        for (int k = 0; k < k_many; ++k)
            s.dict.add_array<double>("many/" + std::to_string(k), &many[static_cast<std::size_t>(k)], {w},
                                     cairn::Box{{r}, {1}});
    };
    auto save_many = [&](const std::string& path) {
        State s(true);
        for (int k = 0; k < k_many; ++k)
            many[static_cast<std::size_t>(k)] = k * 1000.0 + r;
        state(s);
        cairn::SaveOptions o;
        o.fsync = false;
        cairn::save(s.dict, path, MPI_COMM_WORLD, o);
        return path;
    };
    auto load_many = [&](const std::string& path) {
        State s(false);
        std::fill(many.begin(), many.end(), -1.0);
        state(s);
        auto o = attempt([&] { cairn::load(s.dict, path, MPI_COMM_WORLD); });
        bool ok = s.correct();
        for (int k = 0; k < k_many; ++k)
            ok = ok && many[static_cast<std::size_t>(k)] == k * 1000.0 + r;
        return std::make_pair(o, ok);
    };
    SECTION("intact")
    {
        const auto [o, ok] = load_many(save_many(base + "/intact.h5"));
        INFO(o.what);
        CHECK(all(!o.threw && ok));
    }
    SECTION("a soft link in place of a dataset")
    {
        const auto file = save_many(base + "/soft_link.h5");
        edit_container(file, [&](hid_t f) {
            require(H5Lmove(f, "/u", f, "/moved", H5P_DEFAULT, H5P_DEFAULT) >= 0, "moving /u");
            require(H5Lcreate_soft("/moved", f, "/u", H5P_DEFAULT, H5P_DEFAULT) >= 0, "H5Lcreate_soft");
        });
        const auto o = load_many(file).first;
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "dataset '/u'", "is a soft link", "/moved"}));
    }
    SECTION("a missing dataset")
    {
        const auto file = save_many(base + "/missing.h5");
        edit_container(file, [&](hid_t f) { require(H5Ldelete(f, "/many%2F17", H5P_DEFAULT) >= 0, "deleting"); });
        const auto o = load_many(file).first;
        INFO(o.what);
        CHECK(refused(o, Kind::format, {file, "dataset '/many%2F17'", "is missing"}));
    }
}

TEST_CASE("container: verify compares the scalar datasets with the metadata", "[.hostile][container]")
{
    const std::string base = fresh_dir("hostile_values");
    const auto file = saved(base + "/step.h5");
    {
        const auto v = try_verify(file);
        INFO(v.outcome.what << v.problems);
        REQUIRE(all(!v.outcome.threw && v.report.ok()));
    }
    // What h5py would read after this edit is 18; the metadata says 17.
    edit_container(file, [&](hid_t f) {
        const hid_t d = H5Dopen2(f, "/step", H5P_DEFAULT);
        require(d >= 0, "opening /step");
        const std::int64_t wrong = 18;
        require(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &wrong) >= 0, "writing /step");
        H5Dclose(d);
    });
    const auto v = try_verify(file);
    INFO(v.outcome.what << v.problems);
    CHECK(all(!v.outcome.threw && !v.report.ok() && v.report.problems.size() == 1));
    CHECK(all(contains(v.problems, file) && contains(v.problems, "dataset '/step' of scalar 'step'") &&
              contains(v.problems, "holds 18, the metadata's value is 17")));
    // Load reads the metadata's value, as before.
    State s(false);
    const auto o = attempt([&] { cairn::load(s.dict, file, MPI_COMM_WORLD); });
    CHECK(all(!o.threw && s.correct()));
}

namespace {

// While alive, this process's effective user is `nobody` (when it runs as
// root, whom no permission stops); restores root after. Every rank.
class Unprivileged {
public:
    Unprivileged()
    {
        if (::geteuid() == 0)
            m_dropped = ::seteuid(65534) == 0;
    }
    ~Unprivileged()
    {
        if (m_dropped && ::seteuid(0) != 0)
            std::abort();
    }
    bool ok() const { return ::geteuid() != 0; }

private:
    bool m_dropped = false;
};

} // namespace

TEST_CASE("container: a file that cannot be created is reported with the system's reason", "[.hostile][container]")
{
    const std::string base = fresh_dir("hostile_create");
    const std::string dir = base + "/read_only";
    on_rank0([&] {
        stdfs::create_directories(dir);
        stdfs::permissions(dir, stdfs::perms::owner_read | stdfs::perms::owner_exec | stdfs::perms::group_read |
                                    stdfs::perms::group_exec | stdfs::perms::others_read | stdfs::perms::others_exec);
    });
    Outcome o;
    bool dropped = false;
    {
        Unprivileged user;
        dropped = user.ok();
        State s(true);
        cairn::SaveOptions so;
        so.fsync = false;
        o = attempt([&] { cairn::save(s.dict, dir + "/c.h5", MPI_COMM_WORLD, so); });
    }
    on_rank0([&] { stdfs::permissions(dir, stdfs::perms::owner_all); });
    REQUIRE(all(dropped));
    INFO(o.what);
    CHECK(same_error_everywhere(o, Kind::write));
    CHECK(all(contains(o.what, "creating " + dir + "/c.h5.cairn-tmp") && contains(o.what, std::strerror(EACCES))));
}
