#include "storage/container/container_h5.hpp"

#include "cairn/errors.hpp"
#include "cairn/log.hpp"
#include "core/fault.hpp"
#include "io/mpi_hints.hpp"

#include <algorithm>
#include <cstring>

namespace cairn {

namespace {

constexpr const char* k_hex = "0123456789ABCDEF";

bool must_escape(unsigned char ch) { return ch == '%' || ch == '/' || ch < 0x20 || ch == 0x7F; }

int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1; // lower case is never produced, so never accepted
}

} // namespace

std::string container_dataset_path(const std::string& fqn) { return "/" + detail::container::link_name(fqn); }

std::string container_entry_name(const std::string& path)
{
    auto bad = [&](const std::string& why) -> void {
        throw error::FormatError("'" + path + "' is not a container dataset path: " + why);
    };
    if (path.size() < 2 || path[0] != '/')
        bad("it must be '/' followed by a name");
    std::string out;
    out.reserve(path.size());
    for (std::size_t i = 1; i < path.size(); ++i) {
        if (path[i] != '%') {
            out += path[i];
            continue;
        }
        const int hi = i + 2 < path.size() ? hex_value(path[i + 1]) : -1;
        const int lo = i + 2 < path.size() ? hex_value(path[i + 2]) : -1;
        if (hi < 0 || lo < 0)
            bad("'%' is not followed by two upper-case hex digits");
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    if (out.find('\0') != std::string::npos)
        bad("it encodes a NUL byte");
    if (container_dataset_path(out) != path)
        bad("names are escaped only where docs/FORMAT.md says");
    return out;
}

} // namespace cairn

namespace cairn::detail::container {

using h5::check_read;
using h5::check_read_status;
using h5::check_write;
using h5::check_write_status;
using h5::Handle;

std::string link_name(const std::string& fqn)
{
    if (fqn == "cairn")
        return "%63airn"; // the metadata group's name
    std::string out;
    out.reserve(fqn.size());
    for (std::size_t i = 0; i < fqn.size(); ++i) {
        const auto ch = static_cast<unsigned char>(fqn[i]);
        if (must_escape(ch) || (i == 0 && ch == '.')) {
            out += '%';
            out += k_hex[ch >> 4];
            out += k_hex[ch & 15];
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out;
}

void check_tuning(const ContainerTuning& t)
{
    detail::check_mpi_hints(t.mpi_hints);
}

void log_hints(hid_t file, const ContainerTuning& t, const std::string& path) noexcept
{
    if (t.mpi_hints.empty() || log_level() != LogLevel::debug)
        return;
    detail::h5::ErrorSilencer quiet;
    void* handle = nullptr; // the MPI-IO driver's: an MPI_File*
    if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) >= 0 && handle)
        detail::log_hints(*static_cast<MPI_File*>(handle), t.mpi_hints, path);
}

std::vector<std::size_t> small_rounds(const std::vector<std::uint64_t>& most, int ranks, std::uint64_t send_limit)
{
    if (most.empty())
        return {0};
    const auto cap = static_cast<std::size_t>(std::max(ranks, 1));
    std::vector<std::size_t> starts{0};
    std::uint64_t sent = 0;
    for (std::size_t g = 0; g < most.size(); ++g) {
        const std::size_t in_round = g - starts.back();
        if (in_round > 0 && (in_round == cap || sent + most[g] > send_limit)) {
            starts.push_back(g);
            sent = 0;
        }
        sent += most[g];
    }
    starts.push_back(most.size());
    return starts;
}

Handle file_access(MPI_Comm comm, const ContainerTuning& t, std::size_t alignment, const std::string& what, bool write)
{
    const auto check = write ? check_write : check_read;
    const auto check_status = write ? check_write_status : check_read_status;
    Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), what + ": file access properties"));
    if (comm != MPI_COMM_NULL) {
        const detail::MpiInfo info(t.mpi_hints); // checked (check_tuning)
        // duplicates comm and info
        check_status(H5Pset_fapl_mpio(fapl, comm, info.get()), what + ": selecting the MPI-IO driver");
        check_status(H5Pset_all_coll_metadata_ops(fapl, t.collective_metadata), what + ": collective metadata reads");
        check_status(H5Pset_coll_metadata_write(fapl, t.collective_metadata), what + ": collective metadata writes");
    }
    check_status(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST), what + ": library version bounds");
    if (alignment > 1) {
        // Objects below 64 KiB (small datasets, from the small-data blocks
        // below) are packed without padding, so that runs of adjacent small
        // datasets are written with one call (write_small_datasets).
        const hsize_t threshold = std::max<hsize_t>(alignment, hsize_t(64) * 1024);
        check_status(H5Pset_alignment(fapl, threshold, alignment), what + ": alignment");
    }
    if (comm != MPI_COMM_NULL) {
        // Metadata and small raw data are allocated from blocks of this size,
        // so that the many small objects of a save sit together and reach the
        // file in large writes. (The coordinator's serial session adds few
        // objects: HDF5's 2 KiB default wastes less there.)
        const hsize_t block = 64 * 1024;
        check_status(H5Pset_meta_block_size(fapl, block), what + ": metadata block size");
        check_status(H5Pset_small_data_block_size(fapl, block), what + ": small data block size");
    }
    if (t.metadata_cache_bytes > 0) {
        // HDF5 bounds: a cache of at most 128 MiB; sync points of parallel
        // HDF5 every 512 B .. 32 MiB of dirty metadata.
        const std::size_t size = std::clamp<std::size_t>(t.metadata_cache_bytes, 1024 * 1024, std::size_t(128) << 20);
        H5AC_cache_config_t cfg;
        cfg.version = H5AC__CURR_CACHE_CONFIG_VERSION;
        check_status(H5Pget_mdc_config(fapl, &cfg), what + ": metadata cache");
        cfg.set_initial_size = true;
        cfg.initial_size = size;
        cfg.max_size = std::max(cfg.max_size, size);
        cfg.min_size = std::min(cfg.min_size, size);
        cfg.decr_mode = H5C_decr__off; // keep the headers of a save's datasets until close
        cfg.dirty_bytes_threshold = std::clamp<std::size_t>(size / 2, 512, std::size_t(32) << 20);
        check_status(H5Pset_mdc_config(fapl, &cfg), what + ": metadata cache");
    }
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
    const hbool_t use = t.file_locking != FileLocking::off;
    const hbool_t ignore_when_disabled = t.file_locking != FileLocking::on;
    check_status(H5Pset_file_locking(fapl, use, ignore_when_disabled), what + ": file locking");
#else
    if (t.file_locking != FileLocking::best_effort)
        throw error::WrongAPIUsage(
            std::string("file_locking: this HDF5 (") + H5_VERS_INFO +
            ") cannot set file locking per file; set HDF5_USE_FILE_LOCKING=FALSE in the environment");
#endif
    return fapl;
}

Handle link_creation(const std::string& what, bool write)
{
    const auto check = write ? check_write : check_read;
    const auto check_status = write ? check_write_status : check_read_status;
    Handle lcpl(check(H5Pcreate(H5P_LINK_CREATE), what));
    check_status(H5Pset_char_encoding(lcpl, H5T_CSET_UTF8), what);
    return lcpl;
}

Handle shape_space(const Shape& shape, const std::string& what, bool write)
{
    const auto check = write ? check_write : check_read;
    if (shape.empty())
        return Handle(check(H5Screate(H5S_SCALAR), what + ": dataspace"));
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    return Handle(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), what + ": dataspace"));
}

void inject(const char* point, const std::string& what, bool write)
{
    if (const int err = fault::inject(point, what)) {
        const auto msg = what + ": " + std::strerror(err);
        if (write)
            throw error::WriteError(msg);
        throw error::ReadError(msg);
    }
}

void select_box(hid_t space, const Box& box, const std::string& what, bool write)
{
    const auto check_status = write ? check_write_status : check_read_status;
    if (box.ndim() == 0) {
        check_status(H5Sselect_all(space), what + ": selection");
        return;
    }
    std::vector<hsize_t> start(box.offsets.begin(), box.offsets.end()), count(box.shape.begin(), box.shape.end());
    check_status(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                 what + ": selecting " + box.str());
}

Handle view_space(const StridedView& v, const std::string& what, bool write)
{
    const auto check = write ? check_write : check_read;
    const auto check_status = write ? check_write_status : check_read_status;
    // Dimensions of extent 1 do not move in memory: drop them (the row-major
    // order of the elements is unchanged).
    Shape s, t;
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
        if (v.shape[d] == 0)
            return Handle();
        if (v.shape[d] != 1) {
            s.push_back(v.shape[d]);
            t.push_back(v.strides[d]);
        }
    }
    const std::size_t n = s.size();
    if (n == 0)
        return dense_space(1, what, write);
    // Memory dims M and hyperslab strides q such that element i lies at
    // sum_d i_d * t_d: from the innermost dimension out, P is the number of
    // elements one index of the current dimension spans.
    std::vector<hsize_t> M(n), q(n), count(n), start(n, 0);
    std::int64_t P = 1;
    for (std::size_t d = n; d-- > 0;) {
        if (t[d] <= 0 || t[d] % P != 0)
            return Handle();
        q[d] = static_cast<hsize_t>(t[d] / P);
        const std::int64_t need = (s[d] - 1) * static_cast<std::int64_t>(q[d]) + 1;
        std::int64_t m = need;
        if (d > 0) {
            if (t[d - 1] % P != 0)
                return Handle();
            m = t[d - 1] / P;
            if (m < need)
                return Handle(); // rows overlap: not a hyperslab
        }
        M[d] = static_cast<hsize_t>(m);
        count[d] = static_cast<hsize_t>(s[d]);
        if (P > (std::int64_t(1) << 62) / m)
            return Handle();
        P *= m;
    }
    Handle space(check(H5Screate_simple(static_cast<int>(n), M.data(), nullptr), what + ": memory dataspace"));
    check_status(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), q.data(), count.data(), nullptr),
                 what + ": memory selection");
    return space;
}

Handle dense_space(std::uint64_t n, const std::string& what, bool write)
{
    const auto check = write ? check_write : check_read;
    const auto check_status = write ? check_write_status : check_read_status;
    const hsize_t dims[1] = {std::max<hsize_t>(n, 1)};
    Handle space(check(H5Screate_simple(1, dims, nullptr), what + ": memory dataspace"));
    if (n == 0)
        check_status(H5Sselect_none(space), what + ": empty selection");
    return space;
}

Split::Split(const Box& box, std::int64_t capacity) : m_box(box)
{
    const std::int64_t vol = box.volume();
    if (vol == 0)
        return;
    capacity = std::max<std::int64_t>(capacity, 1);
    const std::size_t nd = box.ndim();
    if (nd == 0 || vol <= capacity) {
        m_count = 1;
        m_max = vol;
        m_dim = 0;
        m_inner = nd == 0 ? 1 : vol / box.shape[0];
        m_group = nd == 0 ? 1 : box.shape[0];
        return;
    }
    // The outermost dimension whose inner block fits the buffer.
    std::size_t j = 0;
    std::int64_t inner = vol / box.shape[0];
    while (inner > capacity) {
        ++j;
        inner /= box.shape[j];
    }
    m_dim = j;
    m_inner = inner;
    m_group = std::min(box.shape[j], capacity / inner);
    m_per_row = (box.shape[j] + m_group - 1) / m_group;
    std::int64_t outer = 1;
    for (std::size_t d = 0; d < j; ++d)
        outer *= box.shape[d];
    m_count = outer * m_per_row;
    m_max = m_group * m_inner;
}

Box Split::piece(std::int64_t k, std::int64_t& first, std::int64_t& elements) const
{
    const std::size_t nd = m_box.ndim();
    if (nd == 0) {
        first = 0;
        elements = 1;
        return m_box;
    }
    const std::int64_t o = k / m_per_row;
    const std::int64_t a = (k % m_per_row) * m_group;
    const std::int64_t g = std::min(m_group, m_box.shape[m_dim] - a);
    Box b = m_box;
    std::int64_t rest = o;
    for (std::size_t d = m_dim; d-- > 0;) {
        b.offsets[d] = m_box.offsets[d] + rest % m_box.shape[d];
        b.shape[d] = 1;
        rest /= m_box.shape[d];
    }
    b.offsets[m_dim] = m_box.offsets[m_dim] + a;
    b.shape[m_dim] = g;
    first = (o * m_box.shape[m_dim] + a) * m_inner;
    elements = g * m_inner;
    return b;
}

} // namespace cairn::detail::container
