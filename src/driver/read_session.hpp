// Private: what load() and verify() share (src/driver/load.cpp, verify.cpp):
// the agreement on the call, the reader, the metadata read once by the
// coordinator, and the watch on the checkpoint being replaced meanwhile.
#pragma once

#include "cairn/checkpoint.hpp"
#include "cairn/errors.hpp"
#include "comm/protocol.hpp"
#include "core/codec.hpp"
#include "core/phase_log.hpp"
#include "io/path_lock.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace cairn::detail {

/// A load or verify from its first collective call to its last.
struct ReadSession {
    /// Collective over `comm`: agrees on the call's arguments and on the
    /// reader (agree_to_read); `call`: "load" or "verify".
    ReadSession(MPI_Comm comm, const std::string& id, const LoadOptions& options, const char* call);
    Comm comm;
    std::string id;
    const LoadOptions& options;
    const char* call;
    bool container;  ///< Cairn's container reader (else the per-rank one), when options.storage is unset
    PhaseLog log;    ///< CAIRN_LOG lines and LoadOptions::progress
    std::shared_ptr<StorageReader> storage;
    /// The coordinator's note of the checkpoint as it read the metadata
    /// (Cairn's own readers): a checkpoint replaced while it is read (another
    /// job's save with overwrite) shows as a checksum mismatch or a mix of
    /// two checkpoints, told apart at the end.
    CheckpointIdentity watch;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    /// Seconds since the session began.
    double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

/// Phase "read metadata", collective: every rank sets up its reader
/// (options.storage or Cairn's own); the coordinator notes the checkpoint's
/// identity and reads the metadata, returned to be broadcast
/// (share_metadata); null on the other ranks.
std::unique_ptr<MetadataFrames> open_and_read_metadata(ReadSession& s);

/// The layout read, for the profile: "container", "per_rank", or "custom"
/// (options.storage).
inline const char* layout_name(const ReadSession& s)
{
    return s.options.storage ? "custom" : s.container ? "container" : "per_rank";
}

/// The error of a load or verify that read a checkpoint replaced meanwhile.
error::ConcurrentAccess replaced_error(const ReadSession& s);

/// After an error agreed on every rank, with Cairn's own readers: throws
/// replaced_error() on every rank when the coordinator finds the checkpoint
/// replaced since it read the metadata (the error, say a checksum mismatch,
/// then comes from the replacement). Collective (one broadcast) with
/// Cairn's own readers; nothing otherwise.
void check_not_replaced(const ReadSession& s);

/// Whether the coordinator finds the checkpoint replaced since it read the
/// metadata (false on other ranks). Local.
bool replaced_meanwhile(const ReadSession& s);

} // namespace cairn::detail
