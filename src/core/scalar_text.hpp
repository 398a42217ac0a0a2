// Private: a scalar's value as text, for error messages.
#pragma once

#include "cairn/dtype.hpp"

#include <cstddef>
#include <string>

namespace cairn::detail {

/// The `n` bytes at `p`, a value of `t`, as text ("<n bytes>" when `n` is
/// not the size of `t`; the bits of 16-bit floats in hex). Local, no throw
/// but std::bad_alloc.
std::string scalar_text(DType t, const void* p, std::size_t n);

} // namespace cairn::detail
