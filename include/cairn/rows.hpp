// Cairn: rows that vary per rank (particles, unstructured data).
#pragma once

#include "cairn/dtype.hpp"
#include "cairn/state_dict.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cairn {

/// Called by load() once this rank's row count is known, before any data is
/// read: returns the buffer for `rows` rows (host memory, dense, row-major;
/// null only for 0 rows), which stays valid until load returns. An
/// exception it throws fails the load on every rank.
using RowResize = std::function<void*(std::uint64_t rows)>;

/// Gives an array's current buffer and rows, read by save() when it
/// starts: for containers the caller may grow or shrink between saves.
using RowSource = std::function<std::pair<void*, std::uint64_t>()>;

/// Chooses this rank's row count on load: given the stored row count of the
/// group, this rank and the size of the communicator. The counts of all
/// ranks must add up to `global_rows`.
using RowSplit = std::function<std::uint64_t(std::uint64_t global_rows, int rank, int size)>;

/// Arrays whose leading dimension (rows) varies per rank and whose trailing
/// dimensions are fixed: the positions, velocities and ids of one particle
/// set, which share one distribution of rows.
///
/// Save: each rank gives its rows; save() computes every rank's offset (an
/// exclusive prefix sum over the save's communicator) and the global row
/// count, and stores each array as an ordinary global array of
/// {global rows, trailing dims...}. Ranks with no rows are allowed.
///
/// Load: load() reads the stored global row count, hands each rank a share
/// of the rows (even split by default, or split_counts(), or split()),
/// calls each array's RowResize with that count, then loads into the
/// buffers returned: one load call, the rows in their stored order (rank 0's
/// rows first). The rank's count, offset and the global count are then
/// local_rows(), row_offset() and global_rows().
///
/// A RowGroup is a Stateful object: add it with add_rows() (or
/// StateDict::add_stateful), at the top level of the state dict or in a
/// nested dict (not inside another Stateful's dict); its arrays are named
/// "<group>.<array>". Every rank of the save or load must add the same groups
/// with the same arrays (same names, dtypes, trailing dims).
///
/// Cost: without a RowGroup in the state, one allreduce per save and load;
/// with groups, an exclusive scan and an allreduce of the counts, and on
/// load one more read of the metadata on rank 0 (StorageReader::read_metadata)
/// for the stored row counts.
class RowGroup final : public Stateful {
    template <class T>
    struct is_std_vector : std::false_type {};
    template <class T, class A>
    struct is_std_vector<std::vector<T, A>> : std::true_type {};

public:
    /// Adds an array of `rows` rows of `row_shape` (trailing dims; empty: one
    /// element per row) held densely at `data`. `resize` (optional on
    /// save) gives the buffer on load. Every array of a group must have the
    /// same number of rows (save and load throw error::WrongAPIUsage naming
    /// the arrays otherwise). Throws error::WrongAPIUsage when the name is
    /// empty, has a '.', or is taken, or `data` is null with rows.
    RowGroup& add(const std::string& name, DType dtype, void* data, std::uint64_t rows, const Shape& row_shape = {},
                  RowResize resize = {});

    /// Adds an array for load only: its buffer comes from `resize`.
    RowGroup& add(const std::string& name, DType dtype, const Shape& row_shape, RowResize resize)
    {
        return add(name, dtype, nullptr, 0, row_shape, std::move(resize));
    }

    /// Adds `rows` rows of `row_shape` elements of T at `data`.
    template <class T, class = std::enable_if_t<!is_std_vector<std::remove_const_t<T>>::value>>
    RowGroup& add(const std::string& name, T* data, std::uint64_t rows, const Shape& row_shape = {},
                  RowResize resize = {})
    {
        return add(name, dtype_of<T>, const_cast<std::remove_const_t<T>*>(data), rows, row_shape, std::move(resize));
    }

    /// Adds a std::vector holding rows of `row_shape` elements: each save
    /// takes its data and size (a whole number of rows) as they are when the
    /// save starts, so the vector may change between saves; load resizes it.
    template <class T>
    RowGroup& add(const std::string& name, std::vector<T>* v, const Shape& row_shape = {})
    {
        const std::uint64_t per_row = row_elements(row_shape);
        add(name, dtype_of<T>, v->data(), per_row ? v->size() / per_row : 0, row_shape,
            [v, per_row](std::uint64_t rows) -> void* {
                v->resize(static_cast<std::size_t>(rows * per_row));
                return v->data();
            });
        return source(name, [v, per_row]() -> std::pair<void*, std::uint64_t> {
            return {v->data(), per_row ? v->size() / per_row : 0};
        });
    }

    /// Sets the source of the array `name`: save calls it when it starts for
    /// the array's buffer and rows, instead of those given to add(). For
    /// containers that reallocate (std::vector, Kokkos views). Throws
    /// error::WrongAPIUsage when there is no such array.
    RowGroup& source(const std::string& name, RowSource source);

    /// Load: this rank asks for `rows` rows (the counts of all ranks must
    /// add up to the stored global count; load throws error::Mismatch on
    /// every rank otherwise).
    RowGroup& split_counts(std::uint64_t rows);
    /// Load: this rank's count is `split(global_rows, rank, size)`.
    RowGroup& split(RowSplit split);
    /// Load: the even split (the default): rank r of P gets
    /// global/P rows, one more for r < global % P.
    RowGroup& split_even();

    /// The even split's share of rank `rank` of `size`.
    static std::uint64_t even_share(std::uint64_t global_rows, int rank, int size) noexcept;

    /// After save or load: this rank's rows, the offset of its first row,
    /// the rows of all ranks.
    std::uint64_t local_rows() const noexcept { return m_rows; }
    std::uint64_t row_offset() const noexcept { return m_offset; }
    std::uint64_t global_rows() const noexcept { return m_global; }

    /// One array of the group.
    struct Array {
        std::string name;
        DType dtype;
        void* data;
        std::uint64_t rows;
        Shape row_shape;
        RowResize resize;
        RowSource source;
    };
    const std::vector<Array>& arrays() const noexcept { return m_arrays; }

    /// The arrays as shards of the global arrays (once save or load has
    /// placed the rows; before, throws error::WrongAPIUsage).
    StateDict state_dict() override;
    void load_state_dict(StateDict&) override {}

    /// Elements of one row of `row_shape`.
    static std::uint64_t row_elements(const Shape& row_shape) noexcept;

    /// Internal (save): the rows of the arrays (from their sources), checked to agree.
    std::uint64_t rows_to_save(const std::string& group);
    /// Internal (load): this rank's count of `global_rows`.
    std::uint64_t rows_to_load(std::uint64_t global_rows, int rank, int size) const;
    /// Internal: places this rank's rows; `resize`: call the arrays'
    /// RowResize (load).
    void place(const std::string& group, std::uint64_t rows, std::uint64_t offset, std::uint64_t global, bool resize);

private:
    std::vector<Array> m_arrays;
    RowSplit m_split;
    bool m_given = false;
    std::uint64_t m_given_rows = 0;
    bool m_placed = false;
    std::uint64_t m_rows = 0, m_offset = 0, m_global = 0;
};

/// Adds `group` to `state` under `name` (StateDict::add_stateful).
inline StateDict& add_rows(StateDict& state, const std::string& name, RowGroup& group)
{
    return state.add_stateful(name, &group);
}

} // namespace cairn
