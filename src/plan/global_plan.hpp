// Private: the reference global plan of DefaultSavePlanner (entry by entry
// in name order, rank by rank). create_global_plan() computes the same
// result faster and defers to this one to report any problem; unit tests
// compare the two.
#pragma once

#include "cairn/plan.hpp"

#include <utility>
#include <vector>

namespace cairn::detail {

std::pair<std::vector<SavePlan>, Metadata> global_plan_reference(std::vector<SavePlan> plans);

/// The same result in linear time, in place. Returns false, with `plans`
/// untouched, on any problem (the reference then reports it).
bool global_plan_fast(std::vector<SavePlan>& plans, Metadata& md);

} // namespace cairn::detail
