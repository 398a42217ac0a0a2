// Private: the CUDA side of staging, behind a header without CUDA includes.
// Implemented in cuda_stage.cu when CAIRN_HAVE_CUDA; absent otherwise.
#pragma once

#include "cairn/box.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace cairn::detail::cuda {

/// Queues on Cairn's stream the copies of elements [first, first + count)
/// of the device view into host memory and returns; `host_dst` must be
/// page-locked for them to run in the background, and must not be read
/// before synchronize().
void copy_out_async(const StridedView& device_src, std::int64_t first, std::int64_t count, void* host_dst);
/// Waits for every copy queued on Cairn's stream.
void synchronize();
/// Copies `count` elements from host memory into the device view at `first`.
void copy_in(const StridedView& device_dst, std::int64_t first, std::int64_t count, const void* host_src);
/// True when CUDA's copies can read and write `p`: device, managed or
/// page-locked host memory (not plain pageable host memory).
bool is_accessible(const void* p) noexcept;
/// Why no device is usable ("" when one is), with CUDA's reason
/// (cudaGetDeviceCount: creates no context).
std::string device_problem();
/// Page-locked host memory; nullptr when it cannot be had.
void* alloc_pinned(std::size_t size) noexcept;
void free_pinned(void* p) noexcept;

} // namespace cairn::detail::cuda
