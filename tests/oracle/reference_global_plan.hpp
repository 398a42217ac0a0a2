// The reference global plan of DefaultSavePlanner, a test oracle
// (reference_global_plan.cpp).
#pragma once

#include "cairn/plan.hpp"

#include <utility>
#include <vector>

namespace cairn_test {

/// The final plans and metadata of DefaultSavePlanner::create_global_plan
/// for `plans` (index = rank), or the error it throws (same type, same
/// message).
std::pair<std::vector<cairn::SavePlan>, cairn::Metadata> reference_global_plan(std::vector<cairn::SavePlan> plans);

} // namespace cairn_test
