// Private: the global plan of DefaultSavePlanner, computed on columns: the
// only one Cairn has. Two entry points: global_plan() on SavePlan structs
// (DefaultSavePlanner::create_global_plan), and the coordinator's save
// planning on encoded plans (ColumnarSavePlan, below).
//
// The coordinator's save planning on columns. When the planner and the
// storage offer the columnar form (driver/capabilities.hpp), the
// coordinator never builds a WriteItem or a ChunkMeta: it reads the
// gathered encoded plans straight into flat tables (each distinct name
// interned once; a rank's name table compared with the previous rank's name
// by name before any hashing; array boxes copied into one table per entry),
// computes the same global plan as global_plan() on them, sends each rank
// its final plan as an assignment of the rank's own local items (item
// index, chunk), and keeps the metadata as columns (MetadataColumns) into
// which the encoded write results are attached and from which metadata.h5
// is written. Anything that form does not take (a plan the planner refuses,
// fields the final plan takes from rank 0's item, a rank with several boxes
// of one array) makes ingest() or plan() return false, and the coordinator
// decodes the plans and calls create_global_plan, that is global_plan(),
// which plans them or reports the problem. Such a plan is not kept for
// reuse (plan/plan_cache.hpp).
#pragma once

#include "core/codec.hpp"
#include "core/metadata_columns.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace cairn::detail {

class ColumnarSavePlan {
public:
    ColumnarSavePlan();
    ~ColumnarSavePlan();
    ColumnarSavePlan(const ColumnarSavePlan&) = delete;
    ColumnarSavePlan& operator=(const ColumnarSavePlan&) = delete;

    /// Reads the gathered encoded plans (index = rank): rank 0's an encode()
    /// form, the others that, or its strip_name_table() or boxes_form() form
    /// (read against rank 0's). `gathered` must stay alive and unchanged
    /// until plan() and storage_shells() are done.
    /// False (nothing thrown) on a malformed plan or anything this form
    /// does not take: the coordinator then calls global_plan().
    bool ingest(const std::vector<Bytes>& gathered);
    /// Validates, dedups, numbers the chunks and assigns each to a rank.
    /// False on any problem (global_plan() reports it).
    bool plan();
    /// What StorageWriter::prepare_global_plan gets: per rank its storage and
    /// planner data; rank 0's also holds one item (name, kind, dtype, global
    /// shape) per array or blob that is written, the others no items.
    std::vector<SavePlan> storage_shells() const;
    /// Rank `rank`'s final plan as an assignment of its local items: its
    /// chunks in entry name order, then the replicas it writes; `shell` is
    /// what prepare_global_plan returned for it (its storage and planner data
    /// go along).
    Bytes encode_final(std::size_t rank, const SavePlan& shell);
    /// Frees the planning tables (after the last encode_final).
    void release_plan_tables();
    /// Keeps the plan for later saves (plan/plan_cache.hpp): drops what
    /// points into the gathered plans; the planning tables stay, so that
    /// storage_shells() and encode_final() can run again.
    void keep();
    /// Readies a kept plan for a save whose ranks' plans equal the kept ones
    /// but for the values of scalars and strings and the digests of blobs:
    /// the values are `rank0`'s (rank 0's local plan of this save), the
    /// write results are cleared.
    void reuse(const SavePlan& rank0);
    /// Bytes all ranks write.
    std::uint64_t total_bytes() const noexcept;
    /// Attaches the ranks' encoded write results (index = rank; rank 0's
    /// whole, the others whole or without their name table, which is then
    /// rank 0's) to the chunk columns: every chunk exactly once. The
    /// checksum pool comes out in chunk order (a chunk of one checksum has
    /// it at its own row; a row whose chunk has none or several is unused,
    /// their checksums after the rows). Throws error::WriteError (as
    /// attach_results of the struct-based path), error::FormatError on a
    /// malformed encoding.
    void attach_results(const std::vector<Bytes>& results);
    /// The metadata (chunk storage filled by attach_results).
    MetadataColumns& metadata() noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> m;
    friend std::pair<std::vector<SavePlan>, Metadata> global_plan(std::vector<SavePlan> plans);
};

/// DefaultSavePlanner::create_global_plan (a custom storage, a subclass of
/// the default planner, plans the encoded form declined): validates the
/// ranks' plans (index = rank), dedups replicas, numbers the chunks (an
/// array's in box order) and assigns each to a rank; returns the final plans
/// (each rank's own chunks in entry name order, then the replicas it
/// writes, the rank's items moved) and the metadata. Several boxes of an
/// array on one rank are planned like boxes of several ranks. Throws what
/// explain_refusal() throws on plans it refuses.
std::pair<std::vector<SavePlan>, Metadata> global_plan(std::vector<SavePlan> plans);

/// Throws the error of the first problem of `plans`, entry by entry in name
/// order and rank by rank: error::WrongAPIUsage (an entry twice in a plan,
/// a box of the wrong rank, a box held twice, overlapping boxes, boxes that
/// do not cover the array, a size overflow, a blob's box of the wrong rank),
/// error::Mismatch (an entry missing on some rank, another kind, dtype,
/// global shape, scalar, string or blob than rank 0's); returns if there is
/// none (plan/refusal.cpp).
void explain_refusal(const std::vector<SavePlan>& plans);

/// Whether a final plan scattered by the coordinator is an assignment
/// (ColumnarSavePlan::encode_final) rather than an encoded SavePlan.
bool is_assignment(const Bytes& final_plan) noexcept;

/// The final plan of this rank from an assignment and the local plan it
/// sent: the assigned items, copied with their chunk number (arrays: bytes
/// recomputed from the box), and the storage and planner data of the
/// assignment. Throws error::FormatError on a malformed assignment.
SavePlan apply_assignment(const SavePlan& local, const Bytes& assignment);

} // namespace cairn::detail
