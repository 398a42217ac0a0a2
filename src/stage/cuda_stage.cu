// CUDA staging: strided device views to and from host buffers with
// cudaMemcpy2DAsync on one dedicated non-blocking stream. CUDA errors are
// thrown as cairn errors naming the operation and CUDA's reason.
#include "stage/cuda_stage.hpp"

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

struct Dims {
    std::vector<std::int64_t> shape, strides; // collapsed, element strides
};

Dims collapse(const StridedView& v)
{
    Dims d;
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        if (v.shape[i] == 1)
            continue;
        if (!d.shape.empty() && d.strides.back() == v.strides[i] * v.shape[i]) {
            d.shape.back() *= v.shape[i];
            d.strides.back() = v.strides[i];
        } else {
            d.shape.push_back(v.shape[i]);
            d.strides.push_back(v.strides[i]);
        }
    }
    if (d.shape.empty()) {
        d.shape = {1};
        d.strides = {1};
    }
    return d;
}

// Walks `count` elements from row-major index `first`, issuing one 2-D copy
// per run of the innermost dimension (or per block of full rows).
void walk(const StridedView& v, std::int64_t first, std::int64_t count, char* host, bool to_host)
{
    if (count <= 0)
        return;
    const Dims d = collapse(v);
    const std::size_t n = d.shape.size();
    const auto es = static_cast<std::int64_t>(v.elem_size);
    std::vector<std::int64_t> idx(n, 0);
    auto rem = first;
    for (std::size_t k = n; k-- > 0;) {
        idx[k] = rem % d.shape[k];
        rem /= d.shape[k];
    }
    char* base = static_cast<char*>(v.data);
    const auto kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    auto left = count;
    while (left > 0) {
        std::int64_t off = 0;
        for (std::size_t k = 0; k < n; ++k)
            off += idx[k] * d.strides[k];
        char* dev = base + off * es;
        const auto inner = d.shape[n - 1];
        std::int64_t done;
        if (n >= 2 && idx[n - 1] == 0 && d.strides[n - 1] == 1 && left >= inner) {
            // Several full rows at once: rows of `inner` elements, pitch = stride of dim n-2.
            const auto rows = std::min(left / inner, d.shape[n - 2] - idx[n - 2]);
            const auto width = static_cast<std::size_t>(inner * es);
            const auto pitch = static_cast<std::size_t>(d.strides[n - 2] * es);
            if (to_host)
                check(cudaMemcpy2DAsync(host, width, dev, pitch, width, static_cast<std::size_t>(rows), kind, stream()), "copy");
            else
                check(cudaMemcpy2DAsync(dev, pitch, host, width, width, static_cast<std::size_t>(rows), kind, stream()), "copy");
            done = rows * inner;
            idx[n - 2] += rows;
        } else {
            const auto run = std::min(inner - idx[n - 1], left);
            const auto w = static_cast<std::size_t>(es);
            if (d.strides[n - 1] == 1) {
                // Contiguous: one linear copy. A 2-D copy of one-element rows
                // (pitch = width) staged 1 GiB at 3.2 GB/s on an H100, the
                // linear copy at 27 GB/s (docs/BENCHMARKS.md, "CUDA staging").
                const auto bytes = static_cast<std::size_t>(run) * w;
                if (to_host)
                    check(cudaMemcpyAsync(host, dev, bytes, kind, stream()), "copy");
                else
                    check(cudaMemcpyAsync(dev, host, bytes, kind, stream()), "copy");
            } else { // a gather of single elements
                const auto spitch = static_cast<std::size_t>(d.strides[n - 1] * es);
                if (to_host)
                    check(cudaMemcpy2DAsync(host, w, dev, spitch, w, static_cast<std::size_t>(run), kind, stream()),
                          "copy");
                else
                    check(cudaMemcpy2DAsync(dev, spitch, host, w, w, static_cast<std::size_t>(run), kind, stream()),
                          "copy");
            }
            done = run;
            idx[n - 1] += run;
        }
        host += done * es;
        left -= done;
        // carry
        for (std::size_t k = n; k-- > 1;) {
            if (idx[k] < d.shape[k])
                break;
            idx[k] = 0;
            ++idx[k - 1];
        }
    }
    check(cudaStreamSynchronize(stream()), "stream synchronize");
}

} // namespace

void copy_out(const StridedView& src, std::int64_t first, std::int64_t count, void* dst)
{
    walk(src, first, count, static_cast<char*>(dst), true);
}

void copy_in(const StridedView& dst, std::int64_t first, std::int64_t count, const void* src)
{
    walk(dst, first, count, const_cast<char*>(static_cast<const char*>(src)), false);
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
