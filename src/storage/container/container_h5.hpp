// Private: pieces shared by the container writer and reader: file access
// properties, the name mapping, dataspaces of boxes and strided views, and
// the splitting of a box into pieces that fit a bounded buffer.
#pragma once

#include "cairn/box.hpp"
#include "cairn/container.hpp"
#include "io/h5.hpp"

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace cairn::detail::container {

/// The link name of entry `fqn` (container_dataset_path without the "/").
std::string link_name(const std::string& fqn);

/// File access properties of a container. With a communicator: the MPI-IO
/// driver with `tuning`'s hints, collective metadata; without
/// (MPI_COMM_NULL): the default (sec2) driver, for the coordinator's serial
/// steps. Both: library versions 1.8 to latest, alignment (threshold =
/// alignment), metadata cache and block sizes, file locking. `what` names the
/// file in errors; `write` picks the error kind.
h5::Handle file_access(MPI_Comm comm, const ContainerTuning& tuning, std::size_t alignment, const std::string& what,
                       bool write);

/// Checks `tuning` (hint keys and values MPI can hold). Local. Throws
/// error::WrongAPIUsage.
void check_tuning(const ContainerTuning& tuning);

/// At LogLevel::debug: what the MPI library reports for `tuning`'s hints on
/// `file`, opened with the MPI-IO driver (detail::log_hints). Never throws.
void log_hints(hid_t file, const ContainerTuning& tuning, const std::string& path) noexcept;

/// Link creation properties: intermediate groups not created, names UTF-8.
h5::Handle link_creation(const std::string& what, bool write);

/// The dataspace of an array of `shape`: simple, or scalar for 0-d.
h5::Handle shape_space(const Shape& shape, const std::string& what, bool write);

/// Selects `box` in `space` (all for 0-d).
void select_box(hid_t space, const Box& box, const std::string& what, bool write);

/// A memory dataspace with a selection that addresses the elements of `view`
/// from `view.data`, when its strides nest (each outer stride a multiple of
/// the inner ones and the rows do not overlap: dense arrays and windows into
/// larger row-major arrays, e.g. interiors with ghost cells). An invalid
/// handle otherwise (the caller then packs through a buffer).
h5::Handle view_space(const StridedView& view, const std::string& what, bool write);

/// A 1-d dataspace of `n` elements, all selected (n > 0) or none (n = 0).
h5::Handle dense_space(std::uint64_t n, const std::string& what, bool write);

/// Fault point `point` (src/core/fault.hpp) at an HDF5 call that has just
/// succeeded: throws error::WriteError (`write`) or error::ReadError
/// "<what>: <strerror>" when a fault fires there, as h5::check_write() and
/// h5::check_read() throw for a failed call. The call is made first because
/// a collective call skipped on one rank hangs the others; the caller notes
/// the error and goes on taking part in the collective calls, as after a
/// real failure.
void inject(const char* point, const std::string& what, bool write);

/// A rank's first error in the collective steps of a container save or
/// load: the rank notes it and goes on taking part in the collective calls
/// (with empty selections) until the file is closed, then throws it.
class FirstError {
protected:
    /// Records the exception being handled as the first error (if none yet).
    void note() noexcept
    {
        note(std::current_exception());
    }
    /// Records `e` as the first error (if none yet).
    void note(std::exception_ptr e) noexcept
    {
        if (!m_err)
            m_err = std::move(e);
    }
    /// Runs `f`, noting what it throws.
    template <class F>
    void noting(F&& f) noexcept
    {
        try {
            f();
        } catch (...) {
            note();
        }
    }

    std::exception_ptr m_err;
};

/// Datasets of at most this many bytes whose file type needs no conversion
/// are transferred by their writers (readers) straight through MPI-IO at the
/// dataset's address (H5Dget_offset of its contiguous storage), instead of
/// one H5Dwrite (H5Dread) per piece: the per-call cost of HDF5's transfer
/// path dominates for small datasets (docs/FORMAT.md 7.4).
inline constexpr std::uint64_t direct_max_bytes = std::uint64_t(1) << 20;

/// The rounds of the small datasets' aggregation (container_writer.cpp,
/// write_small_datasets): round k holds groups [starts[k], starts[k + 1]).
/// `most[g]`: the most bytes any rank sends for group g. A round holds at
/// most `ranks` groups (group g's owner is rank g % ranks, which receives one
/// group per round) and, past its first group, only groups that keep the sum
/// of their `most` within `send_limit`, so that no rank sends more than that
/// in a round however the bytes are spread. When every rank holds a little
/// of each group, a round spans up to `ranks` groups (one round at scale
/// where a fixed number of owners would take hundreds); when one rank holds
/// everything, send_limit / group size groups.
std::vector<std::size_t> small_rounds(const std::vector<std::uint64_t>& most, int ranks, std::uint64_t send_limit);

/// The pieces of a box that fit a buffer of `capacity` elements, in row-major
/// order: each piece is both a box and a contiguous range of the box's
/// row-major element order (so pack_range / unpack_range apply).
class Split {
public:
    Split() = default;
    Split(const Box& box, std::int64_t capacity);
    std::int64_t count() const noexcept { return m_count; }
    /// Piece `k`: its box and its first element in the row-major order of the whole box.
    Box piece(std::int64_t k, std::int64_t& first, std::int64_t& elements) const;
    /// The largest piece, in elements.
    std::int64_t max_elements() const noexcept { return m_max; }

private:
    Box m_box;
    std::size_t m_dim = 0;     // the dimension pieces are cut along
    std::int64_t m_inner = 1;  // elements of one index of m_dim (dims after it, whole)
    std::int64_t m_group = 1;  // indices of m_dim per piece
    std::int64_t m_per_row = 1;
    std::int64_t m_count = 0;
    std::int64_t m_max = 0;
};

} // namespace cairn::detail::container
