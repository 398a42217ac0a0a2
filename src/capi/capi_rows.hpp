// Private: the row groups of a C state handle (capi_rows.cpp), shared with
// the Fortran helpers (fortran_support.cpp).
#pragma once

#include "capi/capi_internal.hpp"

#include "cairn/rows.hpp"

#include <string>

namespace cairn::capi {

/// Adds the array `array` to the row group `group` of `state` (created on
/// first use). Throws error::WrongAPIUsage.
void add_rows(cairn_state& state, const std::string& group, const std::string& array, int dtype, std::uint64_t rows,
              const Shape& row_shape, void* data, RowResize resize);

/// The row group `group` of `state`. Throws error::WrongAPIUsage when there is none.
RowGroup& row_group(cairn_state& state, const std::string& group);

} // namespace cairn::capi
