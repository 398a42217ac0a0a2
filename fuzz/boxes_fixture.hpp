// The fixed plans of the boxes-form fuzz check (fuzz/decode_plans.cpp,
// boxes_form_input) and of its seed (fuzz/seeds.cpp): rank `rank` of two
// holding rows [4 rank, 4 rank + 4) of an 8 x 10 x 12 array and a scalar.
#pragma once

#include "cairn/plan.hpp"

#include <cstdint>
#include <string>

namespace cairn_fuzz {

inline cairn::SavePlan boxes_fixture_plan(std::int64_t rank)
{
    cairn::SavePlan p;
    cairn::WriteItem a;
    a.fqn = "fluid.velocity";
    a.dtype = cairn::DType::f32;
    a.global_shape = {8, 10, 12};
    a.box = cairn::Box{{4 * rank, 0, 0}, {4, 10, 12}};
    a.nbytes = 4 * 10 * 12 * 4;
    cairn::WriteItem s;
    s.fqn = "step";
    s.kind = cairn::ItemKind::scalar;
    s.dtype = cairn::DType::i64;
    s.value = std::string(8, '\0');
    p.items = {a, s};
    return p;
}

} // namespace cairn_fuzz
