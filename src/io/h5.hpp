// Private: RAII handles and checked calls for the HDF5 C API. Every HDF5 call
// Cairn makes goes through check_write() or check_read(); failures throw with the HDF5 error stack's
// innermost message and the object involved. The automatic printing of the
// HDF5 error stack is silenced while Cairn is inside HDF5 (ErrorSilencer).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn::detail::h5 {

/// Owns an hid_t and closes it with the matching H5?close.
class Handle {
public:
    Handle() = default;
    explicit Handle(hid_t id) : m_id(id) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& o) noexcept : m_id(o.m_id) { o.m_id = H5I_INVALID_HID; }
    Handle& operator=(Handle&& o) noexcept
    {
        if (this != &o) {
            reset();
            m_id = o.m_id;
            o.m_id = H5I_INVALID_HID;
        }
        return *this;
    }
    ~Handle() { reset(); }
    hid_t get() const noexcept { return m_id; }
    operator hid_t() const noexcept { return m_id; }
    bool valid() const noexcept { return m_id >= 0; }
    /// Closes now; returns false when HDF5 reported an error (never throws).
    bool reset() noexcept;

private:
    hid_t m_id = H5I_INVALID_HID;
};

/// A file opened by one process through HDF5's sec2 driver that always ends
/// closed, even when its writes fail. HDF5 1.10 keeps a file whose close
/// failed (a write error in its flush) open inside the library, half
/// destroyed, and MPI_Finalize (H5F_term_package) then crashes on it.
/// close() flushes (after which the file on disk is complete), sends the
/// close's own writes to an anonymous memory file put in place of the
/// driver's descriptor (dup2), and trims the file to the flushed end of its
/// allocated space itself. When the flush fails, and when the object is
/// destroyed without close() (an exception), the file is abandoned: its
/// descriptor is pointed at memory and the id closed. An abandoned file's
/// contents are undefined: its owner removes it.
class Sec2File {
public:
    /// Takes `id` (an H5Fopen / H5Fcreate result: check() it first);
    /// `what` names the file in errors.
    Sec2File(hid_t id, std::string what) : m_id(id), m_what(std::move(what)) {}
    /// H5Fopen(path, H5F_ACC_RDWR, fapl) with the sec2 driver, or
    /// error::WriteError "reopening <path>: <hdf5 message> (<system error>)".
    /// HDF5 writes at such an open; when that fails it keeps the file's
    /// descriptor without an id: it is pointed at memory, so that the file's
    /// space is freed once the file is removed.
    static Sec2File open(const std::string& path, hid_t fapl);
    /// H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl) with the sec2 driver, or
    /// error::WriteError "creating <path>: <hdf5 message> (<system
    /// reason>)": the reason a failed write recorded in HDF5's error stack
    /// ("Input/output error"), else why the system refuses, now, to let
    /// this process write the parent directory or the file (EACCES, EROFS,
    /// ENOENT, ENOTDIR, EISDIR; faccessat with the effective ids), left out
    /// when nothing does. What HDF5 keeps of a file it failed to create is
    /// pointed at memory, as for open(). Local.
    static Sec2File create(const std::string& path, hid_t fcpl, hid_t fapl);
    Sec2File(const Sec2File&) = delete;
    Sec2File& operator=(const Sec2File&) = delete;
    ~Sec2File() { abandon(); }
    operator hid_t() const noexcept { return m_id; }
    /// Flushes, closes and trims; after a failure abandons the file and
    /// throws error::WriteError "closing <what>: <hdf5 message> (<system
    /// error>)".
    void close();
    /// Closes the file whatever its writes do; never throws.
    void abandon() noexcept;

private:
    hid_t m_id = H5I_INVALID_HID;
    std::string m_what;
};

/// Turns off HDF5's automatic error printing for its lifetime.
class ErrorSilencer {
public:
    ErrorSilencer();
    ~ErrorSilencer();
    ErrorSilencer(const ErrorSilencer&) = delete;
    ErrorSilencer& operator=(const ErrorSilencer&) = delete;

private:
    H5E_auto2_t m_func = nullptr;
    void* m_data = nullptr;
};

/// The innermost message of the current HDF5 error stack ("" if none).
std::string last_error();
/// The system's reason in the current HDF5 error stack: the "error message"
/// a failed read or write of a file driver records ("Input/output error"),
/// "" if none.
std::string last_system_error();

/// Return `id` (`rc`), or, when it is negative, clear the HDF5 error stack
/// and throw "<what>: <hdf5 message>": error::WriteError for a call of a
/// save, error::ReadError for a call of a load or verify.
hid_t check_write(hid_t id, const std::string& what);
hid_t check_read(hid_t id, const std::string& what);
herr_t check_write_status(herr_t rc, const std::string& what);
herr_t check_read_status(herr_t rc, const std::string& what);

// Attributes on an object.
//
// Integer arrays of the metadata group (docs/FORMAT.md 2.6) are attributes,
// or, when they hold more than `dataset_above` bytes, contiguous datasets of
// the same name in the same group: HDF5 1.10 writes a large attribute three
// times over (filled at creation, read back, written), a dataset once. The
// writers return true when they stored a dataset; read_i64_attr and
// read_u64_attr read either (never both: a FormatError).
inline constexpr std::size_t never_dataset = static_cast<std::size_t>(-1);
void write_string_attr(hid_t obj, const char* name, const std::string& value);
bool write_i64_attr(hid_t obj, const char* name, const std::vector<std::int64_t>& values,
                    const std::vector<hsize_t>& dims, std::size_t dataset_above = never_dataset);
bool write_u64_attr(hid_t obj, const char* name, const std::vector<std::uint64_t>& values,
                    std::size_t dataset_above = never_dataset);
/// A 1-d integer column (docs/FORMAT.md, section 2): stored as 32-bit
/// integers of the same signedness when every value fits, else as 64-bit
/// ones; read_i64_attr / read_u64_attr (and h5py) read either.
/// `may_narrow` = false keeps 64 bits whatever the values.
bool write_i64_column(hid_t obj, const char* name, const std::vector<std::int64_t>& values, bool may_narrow = true,
                      std::size_t dataset_above = never_dataset);
bool write_u64_column(hid_t obj, const char* name, const std::vector<std::uint64_t>& values,
                      std::size_t dataset_above = never_dataset);
void write_raw_attr(hid_t obj, const char* name, hid_t type, const void* data);

/// A 1-d array attribute of `n` elements of `type` (null dataspace when n = 0).
void write_raw_array_attr(hid_t obj, const char* name, hid_t type, const void* data, hsize_t n);
/// A 1-d array of variable-length UTF-8 strings.
void write_string_array_attr(hid_t obj, const char* name, const std::vector<std::string>& values);

bool has_attr(hid_t obj, const char* name);

/// Link `name` of `obj`: 0 none, 1 a hard link, -1 another kind (soft,
/// external, user-defined). Opening an external link opens another file,
/// a soft link another object: Cairn follows neither.
int link_kind(hid_t obj, const char* name);

/// Checks that every component of the absolute path `path` in `file` is a
/// hard link (walking from the root, so that nothing is traversed before it
/// is checked). Throws error::FormatError "<what> is a soft link" / "... an
/// external link (to '<file>', '<object>')" / "... a user-defined link";
/// returns false when a component does not exist.
bool hard_links_only(hid_t file, const std::string& path, const std::string& what);

/// Checks that the dataset `dset` keeps its bytes in this file: a
/// contiguous, chunked or compact layout (not virtual) and no external raw
/// storage (H5Pset_external). Throws error::FormatError naming `what`.
void check_dataset_storage(hid_t dset, const std::string& what);

/// An integer array of the metadata group (docs/FORMAT.md 2.6): the
/// attribute `name` of `obj`, or a dataset of that name in it, never both.
/// Local. find() and the reads throw error::FormatError, prefixed by
/// `where`, for both forms at once, a soft or external link in the
/// dataset's place (never followed), a type that is not an integer, or a
/// dataset whose extents claim more values than it stores (checked before
/// anything is allocated). The reads convert any stored integer type.
class IntArray {
public:
    /// Opens the array; nullopt when `obj` holds neither form.
    static std::optional<IntArray> find(hid_t obj, const char* name, const std::string& where);
    /// "<where>: attribute '<name>'" or "<where>: dataset '<name>'".
    const std::string& what() const noexcept { return m_what; }
    /// Its values as int64; `dims` receives its extents (empty for a null
    /// or scalar dataspace).
    std::vector<std::int64_t> read_i64(std::vector<hsize_t>* dims = nullptr) const;
    std::vector<std::uint64_t> read_u64() const;

private:
    IntArray(Handle h, bool dataset, std::string what);
    std::size_t points(std::vector<hsize_t>* dims) const;
    void read(hid_t mtype, void* data) const;

    Handle m_h;
    bool m_dataset = false;
    std::string m_what;
    std::size_t m_value_bytes = 0; // of the stored type
};

/// Reads a 1-d array attribute that must hold exactly `n` elements, converted to `type`.
void read_raw_array_attr(hid_t obj, const char* name, hid_t type, void* data, std::size_t n, const std::string& where);
std::vector<std::string> read_string_array_attr(hid_t obj, const char* name, const std::string& where);
std::string read_string_attr(hid_t obj, const char* name, const std::string& where);
/// Reads an integer array (IntArray) that must be present, as int64 values;
/// `dims` receives its extents (empty for a null or scalar dataspace).
std::vector<std::int64_t> read_i64_attr(hid_t obj, const char* name, const std::string& where,
                                        std::vector<hsize_t>* dims = nullptr);
std::vector<std::uint64_t> read_u64_attr(hid_t obj, const char* name, const std::string& where);
/// Reads a one-element attribute into `data` with memory type `type`.
void read_raw_attr(hid_t obj, const char* name, hid_t type, void* data, const std::string& where);

/// The native HDF5 type of a Cairn dtype (f16 / bf16: 16-bit unsigned, the raw bits).
hid_t native_type(int dtype_code);

/// The HDF5 type of a dataset (or scalar) of a Cairn dtype in a container
/// (docs/FORMAT.md, "Container layout"): little-endian IEEE floats and
/// integers; f16 as IEEE binary16 (sign bit 15, exponent bits 10-14 with bias
/// 15, mantissa bits 0-9); bf16 as a 16-bit float with sign bit 15, exponent
/// bits 7-14 with bias 127, mantissa bits 0-6; bool as the enum {FALSE = 0,
/// TRUE = 1} over int8 (what h5py reads as numpy bool). With `memory`, the
/// same types in the machine's byte order (for H5Dread / H5Dwrite buffers).
/// Throws error::WriteError.
Handle dataset_type(int dtype_code, bool memory);

/// Whether a dataset's type holds values of `dtype_code`: same class, size and
/// sign; for 16-bit floats also the exponent and mantissa widths; for bool an
/// 8-bit enum or integer. Byte order is not compared (HDF5 converts it).
bool dataset_type_matches(hid_t type, int dtype_code);

/// A short description of an HDF5 type for messages ("64-bit float",
/// "16-bit float (8-bit exponent, 7-bit mantissa)", "32-bit signed integer",
/// "string", ...).
std::string type_description(hid_t type);

} // namespace cairn::detail::h5
