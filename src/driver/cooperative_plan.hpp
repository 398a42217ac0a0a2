// Private: who reads what in a cooperative read (driver/cooperative.hpp).
// The ranks' records, as exchanged, and the assignment every rank computes
// from them alike: what each rank reads alone, and the pieces one rank
// reads for several, in exchange rounds.
#pragma once

#include "cairn/planner.hpp"
#include "core/codec.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cairn::detail {

/// The part of one array item of some rank's plan in one stored chunk, as
/// exchanged.
struct Rec {
    int rank = 0;
    std::uint32_t item = 0;  ///< index in that rank's plan
    std::uint32_t local = 0; ///< the chunk's number in that rank's metadata
    std::uint64_t es = 0;    ///< element size
    std::string fqn;
    Box chunk; ///< the stored chunk
    Box box;   ///< what the item reads of it
};

/// What one rank receives (or keeps) of a piece.
struct Part {
    std::size_t rec;
    Box sub;
};

/// Rows of a chunk that one rank reads for several.
struct Piece {
    std::size_t first = 0; ///< a record of the chunk read by `reader`
    int reader = 0;
    Box bbox; ///< what `reader` reads: the bounding box of the parts
    std::vector<Part> parts;
};

/// The assignment, the same on every rank.
struct Schedule {
    std::vector<Piece> pieces;
    std::vector<std::size_t> round_end; ///< round k: pieces [round_end[k-1], round_end[k])
    /// This rank's items: (chunk, part) read alone.
    std::map<std::uint32_t, std::vector<std::pair<std::uint32_t, Box>>> plain;
    /// This rank's items: elements of them read alone in whole records.
    std::map<std::uint32_t, std::int64_t> whole;
};

/// Bytes of `b`'s elements of `es` bytes.
inline std::uint64_t bytes_of(const Box& b, std::uint64_t es)
{
    return static_cast<std::uint64_t>(b.volume()) * es;
}

/// This rank's records, encoded: each item `take` marks, in each stored
/// chunk it overlaps (an item names one chunk in the per-rank layout, the
/// whole region of a dataset in the container's).
Bytes encode_records(const Metadata& md, const LoadPlan& plan, const std::vector<char>& take);

/// Appends the records `rank` encoded in the `n` bytes at `p` to `out`.
void decode_records(const std::byte* p, std::size_t n, int rank, std::vector<Rec>& out);

/// The assignment of every rank's records `recs` (in rank order) on a
/// communicator of `size` ranks, seen from rank `me`: `checksum_block` as
/// in the metadata (0: none), `verify` whether the reads verify it,
/// `budget` the bytes of buffers per rank and round.
Schedule assign(const std::vector<Rec>& recs, int size, int me, std::uint64_t checksum_block, bool verify,
                std::size_t budget);

/// Most bytes of one exchange round (MPI_Alltoallv counts are ints).
constexpr std::size_t max_round = std::size_t(1) << 30;

} // namespace cairn::detail
