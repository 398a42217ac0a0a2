// Private: reusing the coordinator's global plan from one save to the next
// (SaveOptions::reuse_plan), as PyTorch DCP's plan caching does.
//
// A simulation saves the same arrays, split the same way, again and again;
// only the data and a few values (a step counter, a time) change. When every
// rank's local plan equals the one of the save that built the kept plan, but
// for the values of scalars and strings and the digests of blobs (its "plan
// key" is equal), the coordinator skips the gather of the local plans and the
// global plan, and reuses the kept columnar plan: its final plans are
// encoded again for this save's storage and scattered, the write results
// attached and the metadata written as usual. What the key leaves out is
// checked across ranks by one hash (equal on every rank: reuse), and the
// coordinator takes rank 0's values. Anything else (a rank without a kept
// plan, a key that differs, plans kept from different saves, the values
// differing between ranks) and the save plans from scratch, which also
// reports any problem exactly as before.
//
// Only the default planner with Cairn's own storage keeps plans (the
// columnar path); the kept plan is the coordinator's, the key every rank's.
// Saves never run concurrently (save and async_save wait for the previous
// one), so one kept plan per process suffices; a save on another
// communicator replaces it.
#pragma once

#include "cairn/plan.hpp"
#include "comm/protocol.hpp"
#include "plan/columnar.hpp"

#include <cstdint>
#include <memory>

namespace cairn::detail {

/// What a rank's local plan must match for a kept plan to be reused.
struct PlanKey {
    bool want = false;        ///< this rank asks for reuse
    Bytes key;                ///< its local plan encoded with scalar and string values and blob digests blanked
    std::uint64_t values = 0; ///< XXH3 of what `key` leaves out, in item order
    std::uint64_t names = 0;  ///< name_table_hash() of the rank's encoded local plan (every rank, wanting or not)
    std::uint64_t skeleton = 0; ///< boxes_form()'s skeleton hash of it (every rank, wanting or not)
};

/// The key of `local` (want = true). Local; may throw what encoding the
/// plan throws, so it runs inside the local plan's agreed phase.
PlanKey plan_key(const SavePlan& local);

/// The outcome of negotiate_plan_reuse().
struct PlanReuse {
    bool all_want = false; ///< every rank asked for reuse (remember_plan then runs)
    bool reuse = false;    ///< the kept plan is reused (the same on every rank)
    bool same_names = false; ///< every rank's name table hashes alike: ranks but 0 may send plans without it
    bool same_skeleton = false; ///< every rank's plan skeleton hashes alike: ranks but 0 may send boxes_form()
    std::shared_ptr<ColumnarSavePlan> plan; ///< the coordinator's kept plan when reused
    Bytes key;             ///< this rank's plan key (for remember_plan)
};

/// Collective over `c` (one MPI_Allreduce, nothing else that can fail):
/// whether every rank wants reuse and the kept plan fits this save; `key` is
/// this rank's (default-constructed when it does not want reuse). When not
/// every rank wants reuse, what this process kept is forgotten (a save
/// without SaveOptions::reuse_plan frees the kept plan's memory).
PlanReuse negotiate_plan_reuse(const Comm& c, PlanKey key);

/// After a save planned from scratch: collective over `c` when every rank
/// wanted reuse (one MPI_Bcast), nothing otherwise (nor after a reuse).
/// Keeps `plan` (the coordinator's plan of this save; null when it is not a
/// columnar plan, and elsewhere) and every rank's key for the next save, or
/// forgets what was kept when the coordinator has no plan to keep.
void remember_plan(const Comm& c, PlanReuse& reuse, std::shared_ptr<ColumnarSavePlan> plan);

} // namespace cairn::detail
