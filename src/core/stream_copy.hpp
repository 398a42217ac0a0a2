// Private: a copy whose stores bypass the caches. A large copy into memory
// that is not read again soon (a RAM-disk file written through a mapping)
// costs, with ordinary stores, a read of each destination line into the
// cache before it is written and its write back later; non-temporal stores
// write the lines straight to memory, a third less memory traffic. The
// source is read through the cache as usual, so a piece of it that fits in
// the cache can be hashed from there right after it is copied.
#pragma once

#include <cstddef>

namespace cairn::detail {

/// Copies `n` bytes from `src` to `dst` (the two must not overlap) with
/// non-temporal stores where the processor has them (x86-64: SSE2), else
/// with memcpy; the stores are complete (a store fence) when it returns.
void copy_streaming(void* dst, const void* src, std::size_t n) noexcept;

} // namespace cairn::detail
