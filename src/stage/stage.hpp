// Private: staging, the copies between the caller's memory (host or CUDA
// device, dense or strided) and dense host buffers, and the reusable host
// buffers they go through (pinned when CUDA is in use).
#pragma once

#include "cairn/planner.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cairn::detail {

/// Copies elements [first, first + count) (row-major order of the view's
/// box) of `src` into the dense host buffer `dst`. Host or CUDA memory.
/// Throws error::WrongAPIUsage for device memory in a build without CUDA.
void stage_out(const DataRef& src, std::int64_t first, std::int64_t count, void* dst);

/// Starts stage_out: for CUDA memory the copies are queued on Cairn's stream
/// and run while the caller goes on (where `dst` is page-locked, as
/// HostBuffers are once device memory is declared); `dst` must not be read
/// or reused before stage_wait(). Host memory is copied before it returns.
void stage_out_start(const DataRef& src, std::int64_t first, std::int64_t count, void* dst);

/// Waits for the copies stage_out_start queued (all of the process's).
/// Throws on a CUDA error; does nothing without CUDA.
void stage_wait();

/// Copies `count` elements from the dense host buffer `src` into `dst`,
/// starting at row-major element `first` of its box. Host or CUDA memory.
void stage_in(const DataRef& dst, std::int64_t first, std::int64_t count, const void* src);

/// Why device memory cannot be staged in this process: this build has no
/// CUDA, or no device is usable (with CUDA's reason). Empty when it can.
/// Asked of CUDA on the first call only; creates no CUDA context.
const std::string& cuda_unavailable_reason();

/// Records that the process uses device memory: from then on HostBuffers
/// are page-locked (where a device is present). Called for every shard
/// declared MemorySpace::cuda, and by staging.
void note_device_memory() noexcept;

/// False when `p`, declared MemorySpace::cuda, is plain pageable host memory
/// that CUDA's copies cannot read or write. True otherwise, and whenever it
/// cannot be told (no CUDA in this build, no device): staging then reports the
/// error. Never creates a CUDA context that the caller has not created: memory
/// in MemorySpace::cuda implies one.
bool cuda_pointer_usable(const void* p) noexcept;

/// A host buffer from a process-wide pool, reused across saves and loads,
/// returned to the pool on destruction. Page-locked once the process has
/// declared device memory (note_device_memory) and a device is present.
class HostBuffer {
public:
    HostBuffer() = default;
    explicit HostBuffer(std::size_t size);
    HostBuffer(HostBuffer&&) noexcept;
    HostBuffer& operator=(HostBuffer&&) noexcept;
    ~HostBuffer();
    char* data() const noexcept { return m_data; }
    /// The size asked for (the memory may be larger).
    std::size_t size() const noexcept { return m_size; }

private:
    void release() noexcept;
    char* m_data = nullptr;
    std::size_t m_size = 0;
    std::size_t m_capacity = 0;
    bool m_pinned = false;
};

/// Makes `b` hold at least `n` bytes and returns its memory: keeps it when it
/// does, else replaces it (contents not kept) with a buffer of `n` rounded up
/// to a power of two, but not past `limit` (never below `n`), so that a
/// buffer grown for one load comes back from the pool at the size the next
/// one asks for.
char* grow(HostBuffer& b, std::size_t n, std::size_t limit);

/// Frees the buffers held by the pool (e.g. before measuring memory).
void release_buffer_pool() noexcept;

} // namespace cairn::detail
