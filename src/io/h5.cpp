#include "io/h5.hpp"

#include "cairn/dtype.hpp"
#include "cairn/errors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace cairn::detail::h5 {

bool Handle::reset() noexcept
{
    if (m_id < 0)
        return true;
    herr_t rc = 0;
    switch (H5Iget_type(m_id)) {
    case H5I_FILE: rc = H5Fclose(m_id); break;
    case H5I_GROUP: rc = H5Gclose(m_id); break;
    case H5I_DATASET: rc = H5Dclose(m_id); break;
    case H5I_DATASPACE: rc = H5Sclose(m_id); break;
    case H5I_DATATYPE: rc = H5Tclose(m_id); break;
    case H5I_ATTR: rc = H5Aclose(m_id); break;
    case H5I_GENPROP_LST: rc = H5Pclose(m_id); break;
    default: rc = H5Idec_ref(m_id) < 0 ? -1 : 0;
    }
    m_id = H5I_INVALID_HID;
    return rc >= 0;
}

ErrorSilencer::ErrorSilencer()
{
    H5Eget_auto2(H5E_DEFAULT, &m_func, &m_data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

ErrorSilencer::~ErrorSilencer() { H5Eset_auto2(H5E_DEFAULT, m_func, m_data); }

namespace {
herr_t innermost(unsigned n, const H5E_error2_t* err, void* data)
{
    if (n == 0 && err && err->desc)
        *static_cast<std::string*>(data) = err->desc;
    return 0;
}
} // namespace

std::string last_error()
{
    std::string msg;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, innermost, &msg);
    return msg;
}

namespace {
herr_t system_reason(unsigned, const H5E_error2_t* err, void* data)
{
    auto& out = *static_cast<std::string*>(data);
    if (!out.empty() || !err || !err->desc)
        return 0;
    static const char key[] = "error message = '";
    const std::string desc = err->desc;
    const auto at = desc.find(key);
    if (at == std::string::npos)
        return 0;
    const auto from = at + sizeof key - 1;
    const auto to = desc.find('\'', from);
    out = desc.substr(from, to == std::string::npos ? std::string::npos : to - from);
    return 0;
}

// An anonymous file in memory that accepts every write (an unlinked
// temporary file where memfd_create is missing); -1 if none can be had.
int scratch_fd() noexcept
{
#ifdef SYS_memfd_create
    const int fd = static_cast<int>(::syscall(SYS_memfd_create, "cairn-abandoned", 1U /* MFD_CLOEXEC */));
    if (fd >= 0)
        return fd;
#endif
    if (std::FILE* f = std::tmpfile()) {
        const int copy = ::dup(::fileno(f));
        std::fclose(f);
        return copy;
    }
    return -1;
}
} // namespace

std::string last_system_error()
{
    std::string msg;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, system_reason, &msg);
    return msg;
}

namespace {
// The descriptor of a file that HDF5's sec2 driver holds; -1 for another
// driver.
int sec2_descriptor(hid_t file) noexcept
{
    const hid_t fapl = H5Fget_access_plist(file);
    if (fapl < 0)
        return -1;
    const bool sec2 = H5Pget_driver(fapl) == H5FD_SEC2;
    H5Pclose(fapl);
    void* handle = nullptr;
    if (!sec2 || H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle)
        return -1;
    return *static_cast<int*>(handle);
}

// Points `fd` at an anonymous memory file; false when it cannot.
bool divert_to_memory(int fd) noexcept
{
    const int scratch = scratch_fd();
    if (scratch < 0)
        return false;
    const bool ok = ::dup2(scratch, fd) == fd;
    ::close(scratch);
    return ok;
}

// The end of the file's allocated space (EOA); false where HDF5 cannot
// tell (H5Fget_eoa came with 1.10.2).
bool end_of_allocation(hid_t file, haddr_t& eoa) noexcept
{
#if H5_VERSION_GE(1, 10, 2)
    return H5Fget_eoa(file, &eoa) >= 0;
#else
    (void)file;
    (void)eoa;
    return false;
#endif
}

std::string stack_message()
{
    std::string msg = last_error().empty() ? "HDF5 call failed" : last_error();
    if (const auto why = last_system_error(); !why.empty() && msg.find(why) == std::string::npos)
        msg += " (" + why + ")";
    H5Eclear2(H5E_DEFAULT);
    return msg;
}
} // namespace

namespace {
// Why the system refuses to create `path` for writing (the errno text of
// the first of its parent directory and the file itself that may not be
// written), or "" when nothing does (HDF5 then failed for a reason of its
// own, or the device is full). Looks only: several ranks may ask at once.
std::string create_refusal(const std::string& path)
{
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
        return std::strerror(errno);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        return "";
    if (S_ISDIR(st.st_mode))
        return std::strerror(EISDIR);
    if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0)
        return std::strerror(errno);
    return "";
}

// Points this process's descriptors on `path` at memory: what HDF5 keeps
// of a file it failed to open or create (no id to close it by).
void divert_leftovers(const std::string& path) noexcept
{
    struct stat file {};
    if (::stat(path.c_str(), &file) != 0)
        return;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        char* end = nullptr;
        const long fd = std::strtol(e.path().filename().c_str(), &end, 10);
        struct stat st {};
        if (end && *end == '\0' && fd > 2 && ::fstat(static_cast<int>(fd), &st) == 0 &&
            st.st_dev == file.st_dev && st.st_ino == file.st_ino)
            divert_to_memory(static_cast<int>(fd));
    }
}
} // namespace

Sec2File Sec2File::open(const std::string& path, hid_t fapl)
{
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl);
    if (id >= 0)
        return Sec2File(id, path);
    const std::string msg = stack_message();
    divert_leftovers(path);
    throw error::WriteError("reopening " + path + ": " + msg);
}

Sec2File Sec2File::create(const std::string& path, hid_t fcpl, hid_t fapl)
{
    const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
    if (id >= 0)
        return Sec2File(id, path);
    std::string msg = stack_message();
    divert_leftovers(path);
    if (const std::string sys = create_refusal(path); !sys.empty() && msg.find(sys) == std::string::npos)
        msg += " (" + sys + ")";
    throw error::WriteError("creating " + path + ": " + msg);
}

void Sec2File::close()
{
    if (m_id < 0)
        return;
    // Everything reaches the file here: after the flush it is a complete
    // HDF5 file whose end of allocated space (EOA) the superblock records.
    if (H5Fflush(m_id, H5F_SCOPE_LOCAL) < 0) {
        const std::string msg = stack_message();
        abandon();
        throw error::WriteError("closing " + m_what + ": " + msg);
    }
    haddr_t eoa = 0;
    const int fd = end_of_allocation(m_id, eoa) ? sec2_descriptor(m_id) : -1;
    const int file = fd >= 0 ? ::dup(fd) : -1;
    if (file < 0 || !divert_to_memory(fd)) {
        // (Not sec2, HDF5 before 1.10.2, or out of descriptors: an
        // ordinary close.)
        if (file >= 0)
            ::close(file);
        const hid_t id = m_id;
        m_id = H5I_INVALID_HID;
        if (H5Fclose(id) < 0)
            throw error::WriteError("closing " + m_what + ": " + stack_message());
        return;
    }
    // The close's own writes (the superblock's smaller EOA once the unused
    // space of HDF5's allocation blocks is released, the trim of the file)
    // go to memory: a close that fails half destroys the file inside HDF5,
    // which then crashes at shutdown. The file keeps what the flush wrote,
    // cut at the flushed EOA (space reserved beyond it is given back).
    const hid_t id = m_id;
    m_id = H5I_INVALID_HID;
    const bool closed = H5Fclose(id) >= 0;
    const std::string msg = closed ? std::string() : stack_message();
    const int trim = ::ftruncate(file, static_cast<off_t>(eoa)) == 0 ? 0 : errno;
    const int shut = ::close(file) == 0 ? 0 : errno;
    if (!closed)
        throw error::WriteError("closing " + m_what + ": " + msg);
    if (trim != 0)
        throw error::WriteError("closing " + m_what + ": cannot trim it to " + std::to_string(eoa) +
                                " bytes: " + std::strerror(trim));
    if (shut != 0)
        throw error::WriteError("closing " + m_what + ": " + std::strerror(shut));
}

void Sec2File::abandon() noexcept
{
    const hid_t id = m_id;
    m_id = H5I_INVALID_HID;
    if (id < 0 || H5Iis_valid(id) <= 0)
        return;
    if (const int fd = sec2_descriptor(id); fd >= 0)
        divert_to_memory(fd);
    // A flush that failed leaves HDF5's metadata cache half prepared (its
    // list of dirty entries still enabled): a close then fails, keeps the
    // id and crashes at shutdown. Another flush writes the dirty entries
    // (into memory now) and resets the cache, even though it reports that
    // it found the cache prepared; the close then succeeds.
    H5Fflush(id, H5F_SCOPE_LOCAL);
    H5Fclose(id);
    H5Eclear2(H5E_DEFAULT);
}

namespace {

// "<what>: <hdf5 message>", and the HDF5 error stack cleared.
std::string failure(const std::string& what)
{
    auto msg = what + ": " + (last_error().empty() ? "HDF5 call failed" : last_error());
    H5Eclear2(H5E_DEFAULT);
    return msg;
}

} // namespace

hid_t check_write(hid_t id, const std::string& what)
{
    if (id < 0)
        throw error::WriteError(failure(what));
    return id;
}

hid_t check_read(hid_t id, const std::string& what)
{
    if (id < 0)
        throw error::ReadError(failure(what));
    return id;
}

herr_t check_write_status(herr_t rc, const std::string& what)
{
    if (rc < 0)
        throw error::WriteError(failure(what));
    return rc;
}

herr_t check_read_status(herr_t rc, const std::string& what)
{
    if (rc < 0)
        throw error::ReadError(failure(what));
    return rc;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value)
{
    const std::string what = std::string("writing attribute '") + name + "'";
    Handle type(check_write(H5Tcopy(H5T_C_S1), what));
    check_write_status(H5Tset_size(type, H5T_VARIABLE), what);
    check_write_status(H5Tset_cset(type, H5T_CSET_UTF8), what);
    Handle space(check_write(H5Screate(H5S_SCALAR), what));
    Handle attr(check_write(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), what));
    const char* p = value.c_str();
    check_write_status(H5Awrite(attr, type, &p), what);
}

namespace {
// An attribute (or, above `dataset_above` bytes, a contiguous dataset) named
// `name` on `obj` holding `data` of `type` with extents `dims`.
bool write_array_attr(hid_t obj, const char* name, hid_t type, const void* data, const std::vector<hsize_t>& dims,
                      std::size_t dataset_above = never_dataset)
{
    bool empty = false;
    std::size_t bytes = H5Tget_size(type);
    for (auto d : dims) {
        empty = empty || d == 0;
        bytes *= static_cast<std::size_t>(d);
    }
    const bool dataset = !empty && !dims.empty() && bytes > dataset_above;
    const std::string what = std::string(dataset ? "writing dataset '" : "writing attribute '") + name + "'";
    // No dims: one value in a scalar dataspace; a zero extent: a null dataspace.
    Handle space(check_write(dims.empty() ? H5Screate(H5S_SCALAR)
                             : empty      ? H5Screate(H5S_NULL)
                                          : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                             what));
    if (dataset) {
        // Contiguous, allocated when written, never filled: its bytes are
        // written once (HDF5 1.10 writes a large attribute three times).
        Handle dcpl(check_write(H5Pcreate(H5P_DATASET_CREATE), what));
        check_write_status(H5Pset_layout(dcpl, H5D_CONTIGUOUS), what);
        check_write_status(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), what);
        Handle dset(check_write(H5Dcreate2(obj, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), what));
        check_write_status(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), what);
        return true;
    }
    Handle attr(check_write(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), what));
    if (!empty)
        check_write_status(H5Awrite(attr, type, data), what);
    return false;
}
} // namespace

bool write_i64_attr(hid_t obj, const char* name, const std::vector<std::int64_t>& values,
                    const std::vector<hsize_t>& dims, std::size_t dataset_above)
{
    return write_array_attr(obj, name, H5T_NATIVE_INT64, values.data(), dims, dataset_above);
}

bool write_u64_attr(hid_t obj, const char* name, const std::vector<std::uint64_t>& values, std::size_t dataset_above)
{
    return write_array_attr(obj, name, H5T_NATIVE_UINT64, values.data(), {values.size()}, dataset_above);
}

namespace {
// Writes `values` as `narrow` (32-bit) integers when they all lie in
// [lo, hi], else as `wide` (64-bit) ones.
template <class Narrow, class Wide>
bool write_column(hid_t obj, const char* name, const std::vector<Wide>& values, hid_t narrow, hid_t wide,
                  bool may_narrow, std::size_t dataset_above)
{
    const Wide lo = std::numeric_limits<Narrow>::min(), hi = std::numeric_limits<Narrow>::max();
    bool fits = may_narrow;
    for (const Wide v : values)
        fits = fits && v >= lo && v <= hi; // no early exit: vectorizes
    if (!fits)
        return write_array_attr(obj, name, wide, values.data(), {values.size()}, dataset_above);
    std::vector<Narrow> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i)
        out[i] = static_cast<Narrow>(values[i]);
    return write_array_attr(obj, name, narrow, out.data(), {out.size()}, dataset_above);
}
} // namespace

bool write_i64_column(hid_t obj, const char* name, const std::vector<std::int64_t>& values, bool may_narrow,
                      std::size_t dataset_above)
{
    return write_column<std::int32_t>(obj, name, values, H5T_NATIVE_INT32, H5T_NATIVE_INT64, may_narrow,
                                      dataset_above);
}

bool write_u64_column(hid_t obj, const char* name, const std::vector<std::uint64_t>& values, std::size_t dataset_above)
{
    return write_column<std::uint32_t>(obj, name, values, H5T_NATIVE_UINT32, H5T_NATIVE_UINT64, true, dataset_above);
}

void write_raw_attr(hid_t obj, const char* name, hid_t type, const void* data)
{
    const std::string what = std::string("writing attribute '") + name + "'";
    Handle space(check_write(H5Screate(H5S_SCALAR), what));
    Handle attr(check_write(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), what));
    check_write_status(H5Awrite(attr, type, data), what);
}

void write_raw_array_attr(hid_t obj, const char* name, hid_t type, const void* data, hsize_t n)
{
    write_array_attr(obj, name, type, data, {n});
}

namespace {
Handle vlen_string_type(const std::string& what, bool write)
{
    const auto check = write ? check_write : check_read;
    const auto check_status = write ? check_write_status : check_read_status;
    Handle type(check(H5Tcopy(H5T_C_S1), what));
    check_status(H5Tset_size(type, H5T_VARIABLE), what);
    check_status(H5Tset_cset(type, H5T_CSET_UTF8), what);
    return type;
}
} // namespace

void write_string_array_attr(hid_t obj, const char* name, const std::vector<std::string>& values)
{
    std::vector<const char*> p;
    p.reserve(values.size());
    for (const auto& v : values)
        p.push_back(v.c_str());
    write_array_attr(obj, name, vlen_string_type(std::string("writing attribute '") + name + "'", true), p.data(),
                     {values.size()});
}

bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

namespace {
Handle open_attr(hid_t obj, const char* name, const std::string& where)
{
    if (!has_attr(obj, name))
        throw error::FormatError(where + ": attribute '" + name + "' is missing");
    return Handle(check_read(H5Aopen(obj, name, H5P_DEFAULT), where + ": opening attribute '" + name + "'"));
}

std::size_t space_points(hid_t space, const std::string& what, std::vector<hsize_t>* dims)
{
    const auto cls = H5Sget_simple_extent_type(space);
    if (dims)
        dims->clear();
    if (cls == H5S_NULL)
        return 0;
    if (cls == H5S_SCALAR)
        return 1;
    const int nd = H5Sget_simple_extent_ndims(space);
    if (nd < 0 || nd > 32)
        throw error::FormatError(what + ": unexpected rank " + std::to_string(nd));
    std::vector<hsize_t> d(static_cast<std::size_t>(nd));
    H5Sget_simple_extent_dims(space, d.data(), nullptr);
    if (dims)
        *dims = d;
    hsize_t n = 1;
    for (auto x : d) {
        if (x != 0 && n > std::numeric_limits<hsize_t>::max() / x)
            throw error::FormatError(what + ": extents whose product overflows");
        n *= x;
    }
    return static_cast<std::size_t>(n);
}

std::size_t attr_points(hid_t attr, const std::string& what, std::vector<hsize_t>* dims)
{
    Handle space(check_read(H5Aget_space(attr), what));
    return space_points(space, what, dims);
}

} // namespace

int link_kind(hid_t obj, const char* name)
{
    if (H5Lexists(obj, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    H5L_info_t info;
    if (H5Lget_info(obj, name, &info, H5P_DEFAULT) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return -1;
    }
    return info.type == H5L_TYPE_HARD ? 1 : -1;
}

bool hard_links_only(hid_t file, const std::string& path, const std::string& what)
{
    std::size_t at = 0;
    while (at < path.size()) {
        if (path[at] == '/') {
            ++at;
            continue;
        }
        const auto end = std::min(path.find('/', at), path.size());
        const std::string prefix = path.substr(0, end);
        // One lookup in the usual case; whether it exists only on failure.
        H5L_info_t info;
        if (H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) < 0) {
            H5Eclear2(H5E_DEFAULT);
            const bool exists = H5Lexists(file, prefix.c_str(), H5P_DEFAULT) > 0;
            H5Eclear2(H5E_DEFAULT);
            if (!exists)
                return false;
            throw error::FormatError(what + ": cannot read link '" + prefix + "'");
        }
        const std::string where = prefix == path ? what : what + ": '" + prefix + "'";
        if (info.type == H5L_TYPE_SOFT) {
            std::string target(info.u.val_size, '\0');
            if (H5Lget_val(file, prefix.c_str(), target.data(), target.size(), H5P_DEFAULT) < 0)
                H5Eclear2(H5E_DEFAULT);
            target.resize(std::min(target.find('\0'), target.size()));
            throw error::FormatError(
                where + " is a soft link (to '" + target +
                "'); Cairn follows no links, it reads only the objects the file holds under their own names");
        }
        if (info.type == H5L_TYPE_EXTERNAL) {
            std::vector<char> val(info.u.val_size + 1, '\0');
            const char* target_file = nullptr;
            const char* target_obj = nullptr;
            unsigned flags = 0;
            std::string to;
            if (H5Lget_val(file, prefix.c_str(), val.data(), info.u.val_size, H5P_DEFAULT) >= 0 &&
                H5Lunpack_elink_val(val.data(), info.u.val_size, &flags, &target_file, &target_obj) >= 0 &&
                target_file && target_obj)
                to = " (to '" + std::string(target_file) + "', object '" + target_obj + "')";
            H5Eclear2(H5E_DEFAULT);
            throw error::FormatError(where + " is an external link" + to +
                                     "; Cairn never opens files outside the checkpoint");
        }
        if (info.type != H5L_TYPE_HARD)
            throw error::FormatError(where + " is a user-defined link; Cairn follows no links");
        at = end;
    }
    return true;
}

void check_dataset_storage(hid_t dset, const std::string& what)
{
    // The usual case, cheaply: an address means contiguous storage in this
    // file (HDF5 has none for external storage, chunked, compact and virtual
    // layouts); copying the creation properties costs more than the open.
    if (H5Dget_offset(dset) != HADDR_UNDEF)
        return;
    H5Eclear2(H5E_DEFAULT);
    Handle dcpl(check_read(H5Dget_create_plist(dset), what + ": creation properties"));
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    switch (layout) {
    case H5D_CONTIGUOUS:
    case H5D_CHUNKED:
    case H5D_COMPACT: break;
    case H5D_VIRTUAL:
        throw error::FormatError(what + " is a virtual dataset (its data may come from other files); Cairn "
                                        "reads only datasets stored in the checkpoint's file");
    default:
        H5Eclear2(H5E_DEFAULT);
        throw error::FormatError(what + " has an unknown storage layout (" + std::to_string(static_cast<int>(layout)) +
                                 ")");
    }
    const int external = H5Pget_external_count(dcpl);
    if (external != 0) {
        std::string first;
        if (external > 0) {
            char name[4096] = {0};
            off_t offset = 0;
            hsize_t size = 0;
            if (H5Pget_external(dcpl, 0, sizeof name - 1, name, &offset, &size) >= 0)
                first = " ('" + std::string(name) + "'" + (external > 1 ? ", ..." : "") + ")";
        }
        H5Eclear2(H5E_DEFAULT);
        throw error::FormatError(what + " has external raw storage" + first +
                                 "; Cairn reads only datasets stored in the checkpoint's file");
    }
}

std::string read_string_attr(hid_t obj, const char* name, const std::string& where)
{
    const std::string what = where + ": attribute '" + name + "'";
    Handle attr = open_attr(obj, name, where);
    Handle ftype(check_read(H5Aget_type(attr), what));
    if (H5Tget_class(ftype) != H5T_STRING)
        throw error::FormatError(what + " is not a string");
    if (attr_points(attr, what, nullptr) != 1)
        throw error::FormatError(what + " is not a single string");
    if (H5Tis_variable_str(ftype) > 0) {
        Handle mtype(check_read(H5Tcopy(H5T_C_S1), what));
        H5Tset_size(mtype, H5T_VARIABLE);
        H5Tset_cset(mtype, H5Tget_cset(ftype));
        char* p = nullptr;
        check_read_status(H5Aread(attr, mtype, &p), what);
        std::string s = p ? p : "";
        Handle space(H5Screate(H5S_SCALAR));
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, &p);
        return s;
    }
    const std::size_t n = H5Tget_size(ftype);
    std::string s(n, '\0');
    check_read_status(H5Aread(attr, ftype, s.data()), what);
    s.resize(s.find('\0') == std::string::npos ? n : s.find('\0'));
    return s;
}

std::optional<IntArray> IntArray::find(hid_t obj, const char* name, const std::string& where)
{
    const bool attr = has_attr(obj, name);
    Handle ds;
    const int link = link_kind(obj, name);
    if (link < 0)
        throw error::FormatError(where + ": '" + name + "' is a soft or external link, not a dataset of this file");
    if (link > 0) {
        Handle o(check_read(H5Oopen(obj, name, H5P_DEFAULT), where + ": opening '" + name + "'"));
        if (H5Iget_type(o) == H5I_DATASET) {
            check_dataset_storage(o, where + ": dataset '" + name + "'");
            ds = std::move(o);
        }
    }
    if (attr && ds.valid())
        throw error::FormatError(where + ": '" + name + "' is stored both as an attribute and as a dataset");
    if (ds.valid())
        return IntArray(std::move(ds), true, where + ": dataset '" + name + "'");
    if (attr)
        return IntArray(open_attr(obj, name, where), false, where + ": attribute '" + name + "'");
    return std::nullopt;
}

IntArray::IntArray(Handle h, bool dataset, std::string what)
    : m_h(std::move(h)), m_dataset(dataset), m_what(std::move(what))
{
    Handle ftype(check_read(m_dataset ? H5Dget_type(m_h) : H5Aget_type(m_h), m_what));
    if (H5Tget_class(ftype) != H5T_INTEGER)
        throw error::FormatError(m_what + " is not an integer " + (m_dataset ? "dataset" : "attribute"));
    m_value_bytes = H5Tget_size(ftype);
}

std::size_t IntArray::points(std::vector<hsize_t>* dims) const
{
    Handle space(check_read(m_dataset ? H5Dget_space(m_h) : H5Aget_space(m_h), m_what));
    const std::size_t n = space_points(space, m_what, dims);
    if (m_dataset) {
        // A dataset's extents are only a claim: what the file stores bounds
        // them before anything is allocated for a read.
        const std::size_t stored = H5Dget_storage_size(m_h);
        if (m_value_bytes == 0 || n > stored / m_value_bytes)
            throw error::FormatError(m_what + " has " + std::to_string(n) + " values but stores " +
                                     std::to_string(stored) + " bytes");
    }
    return n;
}

void IntArray::read(hid_t mtype, void* data) const
{
    check_read_status(m_dataset ? H5Dread(m_h, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : H5Aread(m_h, mtype, data),
                      m_what);
}

std::vector<std::int64_t> IntArray::read_i64(std::vector<hsize_t>* dims) const
{
    std::vector<std::int64_t> v(points(dims));
    if (!v.empty())
        read(H5T_NATIVE_INT64, v.data());
    return v;
}

std::vector<std::uint64_t> IntArray::read_u64() const
{
    std::vector<std::uint64_t> v(points(nullptr));
    if (!v.empty())
        read(H5T_NATIVE_UINT64, v.data());
    return v;
}

namespace {
IntArray find_int_array(hid_t obj, const char* name, const std::string& where)
{
    auto a = IntArray::find(obj, name, where);
    if (!a)
        throw error::FormatError(where + ": attribute '" + name + "' is missing");
    return std::move(*a);
}
} // namespace

std::vector<std::int64_t> read_i64_attr(hid_t obj, const char* name, const std::string& where,
                                        std::vector<hsize_t>* dims)
{
    return find_int_array(obj, name, where).read_i64(dims);
}

std::vector<std::uint64_t> read_u64_attr(hid_t obj, const char* name, const std::string& where)
{
    return find_int_array(obj, name, where).read_u64();
}

void read_raw_array_attr(hid_t obj, const char* name, hid_t type, void* data, std::size_t n, const std::string& where)
{
    const std::string what = where + ": attribute '" + name + "'";
    Handle attr = open_attr(obj, name, where);
    const auto got = attr_points(attr, what, nullptr);
    if (got != n)
        throw error::FormatError(what + " has " + std::to_string(got) + " elements, expected " + std::to_string(n));
    if (n)
        check_read_status(H5Aread(attr, type, data), what);
}

std::vector<std::string> read_string_array_attr(hid_t obj, const char* name, const std::string& where)
{
    const std::string what = where + ": attribute '" + name + "'";
    Handle attr = open_attr(obj, name, where);
    Handle ftype(check_read(H5Aget_type(attr), what));
    const auto n = attr_points(attr, what, nullptr);
    std::vector<std::string> out;
    if (n == 0)
        return out;
    if (H5Tget_class(ftype) != H5T_STRING || H5Tis_variable_str(ftype) <= 0)
        throw error::FormatError(what + " is not an array of variable-length strings");
    Handle mtype = vlen_string_type(what, false);
    std::vector<char*> p(n, nullptr);
    check_read_status(H5Aread(attr, mtype, p.data()), what);
    out.reserve(n);
    for (auto* s : p)
        out.emplace_back(s ? s : "");
    Handle space(check_read(H5Aget_space(attr), what));
    H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, p.data());
    return out;
}

void read_raw_attr(hid_t obj, const char* name, hid_t type, void* data, const std::string& where)
{
    const std::string what = where + ": attribute '" + name + "'";
    Handle attr = open_attr(obj, name, where);
    if (attr_points(attr, what, nullptr) != 1)
        throw error::FormatError(what + " is not a single value");
    check_read_status(H5Aread(attr, type, data), what);
}

hid_t native_type(int code)
{
    switch (static_cast<DType>(code)) {
    case DType::f16:
    case DType::bf16:
    case DType::u16: return H5T_NATIVE_UINT16;
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::i8: return H5T_NATIVE_INT8;
    case DType::i16: return H5T_NATIVE_INT16;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::i64: return H5T_NATIVE_INT64;
    case DType::u8:
    case DType::boolean: return H5T_NATIVE_UINT8;
    case DType::u32: return H5T_NATIVE_UINT32;
    case DType::u64: return H5T_NATIVE_UINT64;
    }
    return H5T_NATIVE_UINT8;
}

} // namespace cairn::detail::h5

namespace cairn::detail::h5 {

namespace {

// A 16-bit float built from a 32-bit one: fields first (they must fit the
// current precision), then the size (which shrinks the precision to 16),
// then the exponent bias.
Handle float16(hid_t base, std::size_t epos, std::size_t esize, std::size_t msize, std::size_t ebias)
{
    const std::string what = "building a 16-bit float type";
    Handle t(check_write(H5Tcopy(base), what));
    check_write_status(H5Tset_fields(t, 15, epos, esize, 0, msize), what);
    check_write_status(H5Tset_size(t, 2), what);
    check_write_status(H5Tset_precision(t, 16), what);
    check_write_status(H5Tset_offset(t, 0), what);
    check_write_status(H5Tset_ebias(t, ebias), what);
    check_write_status(H5Tset_norm(t, H5T_NORM_IMPLIED), what);
    check_write_status(H5Tset_inpad(t, H5T_PAD_ZERO), what);
    return t;
}

Handle bool_enum()
{
    const std::string what = "building the bool enum type";
    Handle t(check_write(H5Tenum_create(H5T_NATIVE_INT8), what));
    const std::int8_t no = 0, yes = 1;
    check_write_status(H5Tenum_insert(t, "FALSE", &no), what);
    check_write_status(H5Tenum_insert(t, "TRUE", &yes), what);
    return t;
}

} // namespace

Handle dataset_type(int code, bool memory)
{
    const std::string what = "copying an HDF5 type";
    auto copy = [&](hid_t file_type, hid_t mem_type) {
        return Handle(check_write(H5Tcopy(memory ? mem_type : file_type), what));
    };
    switch (static_cast<DType>(code)) {
    case DType::f16: return float16(memory ? H5T_NATIVE_FLOAT : H5T_IEEE_F32LE, 10, 5, 10, 15);
    case DType::bf16: return float16(memory ? H5T_NATIVE_FLOAT : H5T_IEEE_F32LE, 7, 8, 7, 127);
    case DType::f32: return copy(H5T_IEEE_F32LE, H5T_NATIVE_FLOAT);
    case DType::f64: return copy(H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
    case DType::i8: return copy(H5T_STD_I8LE, H5T_NATIVE_INT8);
    case DType::i16: return copy(H5T_STD_I16LE, H5T_NATIVE_INT16);
    case DType::i32: return copy(H5T_STD_I32LE, H5T_NATIVE_INT32);
    case DType::i64: return copy(H5T_STD_I64LE, H5T_NATIVE_INT64);
    case DType::u8: return copy(H5T_STD_U8LE, H5T_NATIVE_UINT8);
    case DType::u16: return copy(H5T_STD_U16LE, H5T_NATIVE_UINT16);
    case DType::u32: return copy(H5T_STD_U32LE, H5T_NATIVE_UINT32);
    case DType::u64: return copy(H5T_STD_U64LE, H5T_NATIVE_UINT64);
    case DType::boolean: return bool_enum();
    }
    throw error::WriteError("no HDF5 type for dtype code " + std::to_string(code));
}

bool dataset_type_matches(hid_t type, int code)
{
    const auto cls = H5Tget_class(type);
    const std::size_t size = H5Tget_size(type);
    const auto t = static_cast<DType>(code);
    if (t == DType::boolean)
        return (cls == H5T_ENUM || cls == H5T_INTEGER) && size == 1;
    if (size != dtype_size(t))
        return false;
    switch (t) {
    case DType::f16:
    case DType::bf16: {
        if (cls != H5T_FLOAT)
            return false;
        std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
        if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0)
            return false;
        return t == DType::f16 ? (esize == 5 && msize == 10) : (esize == 8 && msize == 7);
    }
    case DType::f32:
    case DType::f64: return cls == H5T_FLOAT;
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64: return cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_2;
    default: return cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE;
    }
}

std::string type_description(hid_t type)
{
    const auto bits = std::to_string(H5Tget_size(type) * 8);
    switch (H5Tget_class(type)) {
    case H5T_FLOAT: {
        std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
        H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
        std::string s = bits + "-bit float";
        if (H5Tget_size(type) == 2)
            s += " (" + std::to_string(esize) + "-bit exponent, " + std::to_string(msize) + "-bit mantissa)";
        return s;
    }
    case H5T_INTEGER: return bits + "-bit " + (H5Tget_sign(type) == H5T_SGN_NONE ? "unsigned" : "signed") + " integer";
    case H5T_STRING: return "string";
    case H5T_ENUM: return bits + "-bit enum";
    case H5T_COMPOUND: return "compound";
    case H5T_OPAQUE: return "opaque";
    case H5T_ARRAY: return "array type";
    case H5T_VLEN: return "variable-length sequence";
    case H5T_REFERENCE: return "reference";
    case H5T_BITFIELD: return bits + "-bit bitfield";
    case H5T_TIME: return "time";
    default: return "unknown type";
    }
}

} // namespace cairn::detail::h5
