#include "stage/stage.hpp"

#include "cairn/checkpoint.hpp"

#include "cairn/config.hpp"
#include "cairn/errors.hpp"
#include "core/strided.hpp"
#if CAIRN_HAVE_CUDA
#include "stage/cuda_stage.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

namespace cairn::detail {

namespace {

#if !CAIRN_HAVE_CUDA
[[noreturn]] void no_cuda()
{
    throw error::WrongAPIUsage("data in CUDA device memory, but this Cairn was built without CUDA (CAIRN_USE_CUDA)");
}
#endif

// Set by the first shard declared in device memory: until then Cairn makes
// no CUDA call that could create a context (a host-only program on a GPU node
// leaves the devices alone), and its buffers are plain host memory.
std::atomic<bool> g_device_memory_seen{false};

[[maybe_unused]] bool use_pinned() noexcept
{
    return g_device_memory_seen.load(std::memory_order_relaxed) && cuda_unavailable_reason().empty();
}

// Free buffers by size; a buffer returns here when its HostBuffer dies.
struct Pool {
    std::mutex mutex;
    std::multimap<std::size_t, std::pair<char*, bool>> free; // size -> (memory, pinned)
};

Pool& pool()
{
    static Pool* p = new Pool; // never destroyed: buffers may return during exit
    return *p;
}

void free_memory(char* p, bool pinned) noexcept
{
#if CAIRN_HAVE_CUDA
    if (pinned) {
        cuda::free_pinned(p);
        return;
    }
#else
    (void)pinned;
#endif
    std::free(p);
}

} // namespace

void stage_out(const DataRef& src, std::int64_t first, std::int64_t count, void* dst)
{
    stage_out_start(src, first, count, dst);
    if (src.space != MemorySpace::host)
        stage_wait();
}

void stage_out_start(const DataRef& src, std::int64_t first, std::int64_t count, void* dst)
{
    if (src.space == MemorySpace::host) {
        pack_range(src.view, first, count, dst);
        return;
    }
#if CAIRN_HAVE_CUDA
    note_device_memory();
    cuda::copy_out_async(src.view, first, count, dst);
#else
    no_cuda();
#endif
}

void stage_wait()
{
#if CAIRN_HAVE_CUDA
    if (g_device_memory_seen.load(std::memory_order_relaxed))
        cuda::synchronize();
#endif
}

void stage_in(const DataRef& dst, std::int64_t first, std::int64_t count, const void* src)
{
    if (dst.space == MemorySpace::host) {
        unpack_range(dst.view, first, count, src);
        return;
    }
#if CAIRN_HAVE_CUDA
    note_device_memory();
    cuda::copy_in(dst.view, first, count, src);
#else
    no_cuda();
#endif
}

} // namespace cairn::detail

bool cairn::cuda_device_available() noexcept { return detail::cuda_unavailable_reason().empty(); }

namespace cairn::detail {

const std::string& cuda_unavailable_reason()
{
    // Asked of CUDA once: whether a device is usable does not change while
    // the process runs, and the planners ask for every device array.
#if CAIRN_HAVE_CUDA
    static const std::string why = cuda::device_problem();
#else
    static const std::string why = "this Cairn was built without CUDA (CAIRN_USE_CUDA)";
#endif
    return why;
}

void note_device_memory() noexcept { g_device_memory_seen.store(true, std::memory_order_relaxed); }

bool cuda_pointer_usable(const void* p) noexcept
{
#if CAIRN_HAVE_CUDA
    return !cuda_unavailable_reason().empty() || cuda::is_accessible(p);
#else
    (void)p;
    return true;
#endif
}

HostBuffer::HostBuffer(std::size_t size)
{
    {
        auto& p = pool();
        std::lock_guard<std::mutex> lock(p.mutex);
        // Reuse the smallest free buffer that is large enough, unless it is
        // more than a quarter larger than asked for (the bound must hold), or
        // pageable where page-locked memory is wanted now.
        auto it = p.free.lower_bound(size);
        if (it != p.free.end() && it->first <= size + size / 4 + 4096 && (it->second.second || !use_pinned())) {
            m_capacity = it->first;
            m_data = it->second.first;
            m_pinned = it->second.second;
            p.free.erase(it);
            m_size = size;
            return;
        }
    }
#if CAIRN_HAVE_CUDA
    if (use_pinned()) {
        m_data = static_cast<char*>(cuda::alloc_pinned(size));
        m_pinned = m_data != nullptr;
    }
#endif
    if (!m_data)
        m_data = static_cast<char*>(std::malloc(size ? size : 1));
    if (!m_data)
        throw std::bad_alloc();
    m_size = size;
    m_capacity = size;
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : m_data(o.m_data), m_size(o.m_size), m_capacity(o.m_capacity), m_pinned(o.m_pinned)
{
    o.m_data = nullptr;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept
{
    if (this != &o) {
        release();
        m_data = o.m_data;
        m_size = o.m_size;
        m_capacity = o.m_capacity;
        m_pinned = o.m_pinned;
        o.m_data = nullptr;
    }
    return *this;
}

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::release() noexcept
{
    if (!m_data)
        return;
    try {
        auto& p = pool();
        std::lock_guard<std::mutex> lock(p.mutex);
        // Keep at most a few buffers, the largest: a large buffer (the full
        // copy of async_save) is the most expensive to fault in again, and
        // its first touch would fall in the caller's blocking time.
        if (p.free.size() >= 4 && p.free.begin()->first < m_capacity) {
            free_memory(p.free.begin()->second.first, p.free.begin()->second.second);
            p.free.erase(p.free.begin());
        }
        if (p.free.size() < 4) {
            p.free.emplace(m_capacity, std::make_pair(m_data, m_pinned));
            m_data = nullptr;
            return;
        }
    } catch (...) {
    }
    free_memory(m_data, m_pinned);
    m_data = nullptr;
}

char* grow(HostBuffer& b, std::size_t n, std::size_t limit)
{
    if (b.size() < n || !b.data()) {
        std::size_t want = 4096;
        while (want < n)
            want *= 2;
        b = HostBuffer(std::max(n, std::min(want, limit)));
    }
    return b.data();
}

void release_buffer_pool() noexcept
{
    auto& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    for (auto& [size, mem] : p.free)
        free_memory(mem.first, mem.second);
    p.free.clear();
}

} // namespace cairn::detail
