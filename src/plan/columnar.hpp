// Private: the default global plan on columns, the fast one (the struct
// path of DefaultSavePlanner::create_global_plan, src/plan/save_planner.cpp,
// reports errors and plans several boxes per rank). Two entry points: the
// coordinator's save planning on encoded plans (below), and
// global_plan_columnar() for DefaultSavePlanner::create_global_plan on
// structs.
//
// The coordinator's save planning on columns. When the planner is
// exactly DefaultSavePlanner and the storage one of Cairn's own writers,
// the coordinator never builds a WriteItem or a ChunkMeta: it reads the
// gathered encoded plans straight into flat tables (each distinct name
// interned once; a rank's name table compared with the previous rank's name
// by name before any hashing; array boxes copied into one table per entry),
// computes the same global plan as DefaultSavePlanner::create_global_plan
// on them, sends each rank its final plan as an assignment of the rank's own
// local items (item index, chunk), and keeps the metadata as columns
// (MetadataColumns) into which the encoded write results are attached and
// from which metadata.h5 is written. Anything unusual (a plan the default
// planner would refuse, fields it would overwrite, a rank with several
// boxes of one array) makes ingest() or plan() return false, and the
// coordinator takes the struct-based path, which reports the problem
// exactly as before (and plans several boxes per rank). Such a plan is not
// kept for reuse (plan/plan_cache.hpp).
#pragma once

#include "core/codec.hpp"
#include "core/metadata_columns.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
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
    /// False (nothing thrown) on a malformed plan or anything the fast path
    /// does not take: the struct-based path then runs.
    bool ingest(const std::vector<Bytes>& gathered);
    /// Validates, dedups, numbers the chunks and assigns each to a rank as
    /// DefaultSavePlanner::create_global_plan does. False on any problem.
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
    friend bool global_plan_columnar(std::vector<SavePlan>& plans, Metadata& md);
};

/// DefaultSavePlanner::create_global_plan on structs (a custom storage, a
/// subclass of the default planner, a plan the encoded path declined): the
/// same tables built from the plans' items, the same computation, then the
/// final plans (each rank's items moved, in place) and the metadata as the
/// reference returns them. False, with `plans` untouched, on anything the
/// reference would refuse (it then runs and reports it), and on a blob of
/// rank 0 whose box does not have the rank of its shape.
bool global_plan_columnar(std::vector<SavePlan>& plans, Metadata& md);

/// Whether a final plan scattered by the coordinator is an assignment
/// (ColumnarSavePlan::encode_final) rather than an encoded SavePlan.
bool is_assignment(const Bytes& final_plan) noexcept;

/// The final plan of this rank from an assignment and the local plan it
/// sent: the assigned items, copied with their chunk number (arrays: bytes
/// recomputed from the box), and the storage and planner data of the
/// assignment. Throws error::FormatError on a malformed assignment.
SavePlan apply_assignment(const SavePlan& local, const Bytes& assignment);

} // namespace cairn::detail
