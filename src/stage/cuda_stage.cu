// CUDA staging: strided device views to and from host buffers with
// cudaMemcpyAsync / cudaMemcpy2DAsync (cut by copy_runs.hpp) on one
// dedicated non-blocking stream. CUDA errors are thrown as cairn errors
// naming the operation and CUDA's reason.
#include "stage/cuda_stage.hpp"
#include "stage/copy_runs.hpp"

#include "cairn/errors.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace cairn::detail::cuda {

namespace {

void check(cudaError_t rc, const char* what)
{
    if (rc == cudaSuccess)
        return;
    throw Error(Error::Kind::generic, std::string("CUDA ") + what + ": " + cudaGetErrorString(rc));
}

cudaStream_t stream()
{
    static std::once_flag once;
    static cudaStream_t s = nullptr;
    std::call_once(once, [] { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream creation"); });
    return s;
}

// Queues the copies of elements [first, first + count) of `v` to or from
// `host`: one linear copy or one 2-D copy per run (copy_runs.hpp).
void queue(const StridedView& v, std::int64_t first, std::int64_t count, char* host, bool to_host)
{
    char* base = static_cast<char*>(v.data);
    const auto kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    for_each_copy_run(v, first, count, [&](const CopyRun& r) {
        char* dev = base + r.view_offset;
        char* h = host + r.buffer_offset;
        if (r.rows == 1) {
            // One linear copy. A 2-D copy of one-element rows (pitch = width)
            // staged 1 GiB at 3.2 GB/s on an H100, the linear copy at 27 GB/s
            // (docs/BENCHMARKS.md, "CUDA staging").
            check(cudaMemcpyAsync(to_host ? h : dev, to_host ? dev : h, r.width, kind, stream()), "copy");
        } else if (to_host) {
            check(cudaMemcpy2DAsync(h, r.width, dev, r.pitch, r.width, r.rows, kind, stream()), "copy");
        } else {
            check(cudaMemcpy2DAsync(dev, r.pitch, h, r.width, r.width, r.rows, kind, stream()), "copy");
        }
    });
}

} // namespace

void synchronize() { check(cudaStreamSynchronize(stream()), "stream synchronize"); }

void copy_out_async(const StridedView& src, std::int64_t first, std::int64_t count, void* dst)
{
    queue(src, first, count, static_cast<char*>(dst), true);
}

void copy_in(const StridedView& dst, std::int64_t first, std::int64_t count, const void* src)
{
    queue(dst, first, count, const_cast<char*>(static_cast<const char*>(src)), false);
    synchronize();
}

bool is_accessible(const void* p) noexcept
{
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attr.type != cudaMemoryTypeUnregistered;
}

std::string device_problem()
{
    int n = 0;
    const cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        return std::string("no CUDA device is usable in this process (") + cudaGetErrorString(rc) + ")";
    }
    return n > 0 ? std::string() : std::string("no CUDA device is usable in this process");
}

void* alloc_pinned(std::size_t size) noexcept
{
    void* p = nullptr;
    if (cudaHostAlloc(&p, size, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return p;
}

void free_pinned(void* p) noexcept { cudaFreeHost(p); }

} // namespace cairn::detail::cuda
