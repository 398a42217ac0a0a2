// Private: cooperative reads (LoadOptions::cooperative), the read step of
// load() when several ranks need bytes of the same checksum block.
//
// The ranks exchange their load plans (one allgather of each array item's
// entry, stored chunk and box) and every rank computes the same assignment:
// a chunk's rows are cut into units of one checksum block (whole rows; one
// row when a row is longer than a block); units needed by one rank are read
// by it as usual; runs of units needed by several ranks are cut into pieces
// of a few MiB, each given to the needing rank with the fewest bytes to read
// so far. That rank reads the piece (the bounding box of what the ranks need
// of it, so each block once), verifies it as the reader does, and sends
// each other rank its part with MPI_Alltoallv, in rounds of at most
// `budget` bytes of buffers per rank. Without checksum verification only
// units where the boxes of two ranks overlap are read cooperatively (the
// plain reads then read exactly the bytes needed).
#pragma once

#include "cairn/planner.hpp"
#include "cairn/storage.hpp"
#include "comm/protocol.hpp"

#include <cstdint>
#include <functional>

namespace cairn::detail {

/// What a cooperative read moved on this rank.
struct CooperativeCounts {
    std::uint64_t bytes_read = 0;     ///< from storage
    std::uint64_t bytes_received = 0; ///< from other ranks
    std::uint64_t bytes_sent = 0;     ///< to other ranks
    std::uint64_t rounds = 0;         ///< exchange rounds (the same on every rank)
};

/// Collective over `c`: reads `plan` (this rank's final load plan, its chunk
/// numbers indexing `md` as this rank keeps it) into `planner`'s
/// destinations, cooperatively. Calls `storage.read_data` the same number
/// of times on every rank (once per round, the first also reading what
/// each rank reads alone; once when nothing is shared), and `read_bytes()`
/// after each to count the bytes it read. Items
/// that are not host arrays of at least one dimension are read as usual.
/// Throws this rank's own error; returns false, having read nothing more,
/// when another rank failed (the phase's error agreement then throws that
/// rank's error on every rank, so a block that fails its checksum on its
/// reader fails the load on every rank); true when every rank succeeded.
bool read_cooperatively(const Comm& c, StorageReader& storage, const Metadata& md, const LoadPlan& plan,
                        LoadPlanner& planner, bool verify, std::size_t budget,
                        const std::function<std::uint64_t()>& read_bytes, CooperativeCounts& counts);

} // namespace cairn::detail
