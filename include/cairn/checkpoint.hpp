// Cairn: save and load.
#pragma once

#include "cairn/planner.hpp"
#include "cairn/state_dict.hpp"
#include "cairn/storage.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cairn {

/// Options of save().
struct SaveOptions {
    /// Make data and metadata durable (fsync of files and directory) before commit.
    bool fsync = true;
    /// Number of .distcp files each rank writes (items are balanced by size).
    int files_per_rank = 1;
    /// Chunks of at least this many bytes start at a multiple of it in their file.
    std::size_t alignment = 4096;
    /// Replace a committed checkpoint at the same path. The old one stays
    /// intact until the new one is committed.
    bool overwrite = false;
    /// Bytes of host staging memory per rank (packing strided shards,
    /// coalescing small items).
    std::size_t staging_bytes = std::size_t(64) << 20;
    /// Custom planner; default: DefaultSavePlanner.
    std::shared_ptr<SavePlanner> planner;
    /// Custom storage; default: chosen from the checkpoint id (per-rank layout).
    std::shared_ptr<StorageWriter> storage;
};

/// Options of load().
struct LoadOptions {
    /// Allow keys present on one side only (state or checkpoint); they are
    /// reported in LoadResult instead of raising error::NotFound.
    bool partial = false;
    /// Bytes of host memory per rank for read buffers.
    std::size_t staging_bytes = std::size_t(64) << 20;
    std::shared_ptr<LoadPlanner> planner;
    std::shared_ptr<StorageReader> storage;
};

/// What save() reports (the same on every rank).
struct SaveResult {
    std::uint64_t bytes_written = 0; ///< all ranks, data only
    std::size_t entries = 0;
    double seconds = 0.0;
};

/// What load() reports on this rank.
struct LoadResult {
    std::uint64_t bytes_read = 0;       ///< this rank
    std::vector<std::string> missing;   ///< state keys the checkpoint lacks (partial)
    std::vector<std::string> skipped;   ///< checkpoint keys not asked for (partial)
    double seconds = 0.0;
};

/// Saves `state` as the checkpoint `checkpoint_id` (a directory for the
/// per-rank layout). **Collective over `comm`**: every rank calls it with its
/// own shards; every rank returns the same result or throws the same
/// exception (cairn::Error subclasses) and no rank hangs on another's failure.
/// Nothing is committed unless every rank wrote its data; a failed save
/// leaves any earlier checkpoint at that path intact. Host memory only for now.
SaveResult save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const SaveOptions& options = {});

/// Loads `checkpoint_id` into the buffers described by `state`, resharding
/// from whatever decomposition (and rank count) it was saved with. Each rank
/// reads only the byte ranges overlapping its boxes. **Collective over
/// `comm`**, same error contract as save(). Throws error::NotFound (missing
/// checkpoint or key), error::Mismatch (dtype / global shape; the message
/// names the entry and both values), error::FormatError, error::ReadError.
LoadResult load(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options = {});

/// Reads the metadata of a committed checkpoint. **Local** (call it on one
/// rank or all). Throws error::NotFound when there is no committed checkpoint.
Metadata read_metadata(const std::string& checkpoint_id);

/// The library version, "major.minor.patch".
const char* version() noexcept;

} // namespace cairn
