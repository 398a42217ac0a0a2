// Private: the reference global plan of DefaultSavePlanner (entry by entry
// in name order, rank by rank). The columnar implementation
// (src/plan/columnar.hpp: the coordinator's path on encoded plans, and
// global_plan_columnar() behind create_global_plan) computes the same result
// faster and defers to this one to report any problem; unit tests compare
// the two.
#pragma once

#include "cairn/plan.hpp"

#include <utility>
#include <vector>

namespace cairn::detail {

std::pair<std::vector<SavePlan>, Metadata> global_plan_reference(std::vector<SavePlan> plans);

} // namespace cairn::detail
