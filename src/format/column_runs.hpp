// Private: the run form of metadata.h5's per-chunk integer columns
// (docs/FORMAT.md, section 2.5). A column is a sequence of blocks, one per
// entry in name order; block i has rows[i] rows (its chunks) of width[i]
// values (2 * ndim for @chunk_boxes, 1 for the other columns). Its run form
// lists, block by block and within a block lane (column of the block) by
// lane, maximal arithmetic runs (first, step, count): the lane's values are
// first, first + step, ..., first + (count - 1) * step, then the next run's.
// A checkpoint of a regular decomposition needs a handful of runs per entry
// where the plain column needs a value per chunk and dimension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::detail {

struct RowBlock {
    std::uint64_t rows = 0;
    std::uint32_t width = 0;
};

/// Appends the runs of `values` (the blocks one after the other) to `runs`
/// as (first, step, count) triples. Returns false, leaving `runs`
/// unspecified, when more than `max_runs` runs would be needed, when a
/// value does not fit in int64 or a step would overflow, or when the blocks
/// do not cover `values` exactly.
template <class T>
bool encode_runs(const std::vector<T>& values, const std::vector<RowBlock>& blocks, std::size_t max_runs,
                 std::vector<std::int64_t>& runs);

/// The column of `runs` (triples, as encode_runs makes them) for `blocks`.
/// Throws FormatError, naming `what`, when the runs do not fill every lane
/// of every block exactly (a run crossing a lane, runs left over or
/// missing), when a count is not positive, or when a value leaves T's range.
/// `names`, when given, names the blocks' entries in the messages (else
/// their index).
template <class T>
std::vector<T> decode_runs(const std::vector<std::int64_t>& runs, const std::vector<RowBlock>& blocks,
                           const std::string& what, const std::vector<std::string>* names = nullptr);

/// Expands the runs of one block of `rows` rows of `width` values into
/// `out` (rows * width values), starting at run `r` (a triple's index / 3)
/// and leaving `r` at the next block's first run: decode_runs() block by
/// block, for a reader that needs one entry's rows at a time. Throws
/// FormatError, naming `what` and `entry`, where decode_runs() does for
/// this block.
template <class T>
void decode_run_block(const std::vector<std::int64_t>& runs, std::size_t& r, std::uint64_t rows, std::uint32_t width,
                      T* out, const std::string& what, const std::string& entry);

/// Whether `blocks` hold more values in all than a reader expands
/// (decode_runs refuses them): a bound on what a crafted chunk count can
/// make a reader allocate.
bool too_many_values(const std::vector<RowBlock>& blocks);

} // namespace cairn::detail
