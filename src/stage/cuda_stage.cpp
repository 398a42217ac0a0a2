// CUDA staging: strided device views to and from host buffers with
// cudaMemcpyAsync / cudaMemcpy2DAsync (cut by copy_runs.hpp) on one
// dedicated non-blocking stream. CUDA errors are thrown as cairn errors
// naming the operation and CUDA's reason.
//
// The CUDA runtime is not linked: it is loaded (dlopen) on the first use of
// device memory, so that a CPU-only program runs against a CUDA-enabled
// libcairn on a node without the runtime. A program that links the runtime
// itself has it loaded already, and Cairn then calls that same instance.
#include "stage/cuda_stage.hpp"
#include "stage/copy_runs.hpp"

#include "cairn/errors.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

// The symbol a runtime function has in the library (its name after the
// header's macros, if any).
#define CAIRN_CUDA_NAME2(f) #f
#define CAIRN_CUDA_NAME(f) CAIRN_CUDA_NAME2(f)

namespace cairn::detail::cuda {

namespace {

// The runtime functions Cairn calls, resolved once from the loaded library.
struct Runtime {
    std::string problem; // why the runtime could not be loaded ("" when it was)
    decltype(&cudaGetDeviceCount) get_device_count = nullptr;
    decltype(&cudaGetErrorString) get_error_string = nullptr;
    decltype(&cudaGetLastError) get_last_error = nullptr;
    decltype(&cudaPointerGetAttributes) pointer_get_attributes = nullptr;
    decltype(&cudaStreamCreateWithFlags) stream_create_with_flags = nullptr;
    decltype(&cudaStreamSynchronize) stream_synchronize = nullptr;
    decltype(&cudaMemcpyAsync) memcpy_async = nullptr;
    decltype(&cudaMemcpy2DAsync) memcpy_2d_async = nullptr;
    decltype(&cudaHostAlloc) host_alloc = nullptr;
    decltype(&cudaFreeHost) free_host = nullptr;
};

// Loads the runtime Cairn was built against (CAIRN_CUDART_SONAME): the
// instance already in the process if there is one, else the loader's search
// path, else the toolkit's library directory of the build.
Runtime load_runtime()
{
    Runtime rt;
    void* h = dlopen(CAIRN_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h)
        h = dlopen(CAIRN_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL);
    const char* err = h ? nullptr : dlerror();
    const std::string why = err ? err : "";
    if (!h)
        h = dlopen(CAIRN_CUDART_DIR "/" CAIRN_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        rt.problem = "the CUDA runtime (" CAIRN_CUDART_SONAME ") cannot be loaded: " + why;
        return rt;
    }
    const auto bind = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        if (!fn && rt.problem.empty())
            rt.problem = std::string("the CUDA runtime (" CAIRN_CUDART_SONAME ") has no ") + name;
    };
    bind(rt.get_device_count, CAIRN_CUDA_NAME(cudaGetDeviceCount));
    bind(rt.get_error_string, CAIRN_CUDA_NAME(cudaGetErrorString));
    bind(rt.get_last_error, CAIRN_CUDA_NAME(cudaGetLastError));
    bind(rt.pointer_get_attributes, CAIRN_CUDA_NAME(cudaPointerGetAttributes));
    bind(rt.stream_create_with_flags, CAIRN_CUDA_NAME(cudaStreamCreateWithFlags));
    bind(rt.stream_synchronize, CAIRN_CUDA_NAME(cudaStreamSynchronize));
    bind(rt.memcpy_async, CAIRN_CUDA_NAME(cudaMemcpyAsync));
    bind(rt.memcpy_2d_async, CAIRN_CUDA_NAME(cudaMemcpy2DAsync));
    bind(rt.host_alloc, CAIRN_CUDA_NAME(cudaHostAlloc));
    bind(rt.free_host, CAIRN_CUDA_NAME(cudaFreeHost));
    return rt;
}

// The runtime, loaded on first use (device_problem() says whether it was).
const Runtime& runtime()
{
    static const Runtime rt = load_runtime();
    return rt;
}

// The runtime, for a copy: throws when it could not be loaded.
const Runtime& loaded()
{
    const Runtime& rt = runtime();
    if (!rt.problem.empty())
        throw Error(Error::Kind::generic, "CUDA copy: " + rt.problem);
    return rt;
}

void check(cudaError_t rc, const char* what)
{
    if (rc == cudaSuccess)
        return;
    throw Error(Error::Kind::generic, std::string("CUDA ") + what + ": " + loaded().get_error_string(rc));
}

cudaStream_t stream()
{
    static std::once_flag once;
    static cudaStream_t s = nullptr;
    std::call_once(once,
                   [] { check(loaded().stream_create_with_flags(&s, cudaStreamNonBlocking), "stream creation"); });
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
            check(loaded().memcpy_async(to_host ? h : dev, to_host ? dev : h, r.width, kind, stream()), "copy");
        } else if (to_host) {
            check(loaded().memcpy_2d_async(h, r.width, dev, r.pitch, r.width, r.rows, kind, stream()), "copy");
        } else {
            check(loaded().memcpy_2d_async(dev, r.pitch, h, r.width, r.width, r.rows, kind, stream()), "copy");
        }
    });
}

} // namespace

void synchronize() { check(loaded().stream_synchronize(stream()), "stream synchronize"); }

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
    const Runtime& rt = runtime();
    cudaPointerAttributes attr{};
    if (!rt.problem.empty())
        return false;
    if (rt.pointer_get_attributes(&attr, p) != cudaSuccess) {
        rt.get_last_error();
        return false;
    }
    return attr.type != cudaMemoryTypeUnregistered;
}

std::string device_problem()
{
    const Runtime& rt = runtime();
    if (!rt.problem.empty())
        return "no CUDA device is usable in this process (" + rt.problem + ")";
    int n = 0;
    const cudaError_t rc = rt.get_device_count(&n);
    if (rc != cudaSuccess) {
        rt.get_last_error();
        return std::string("no CUDA device is usable in this process (") + rt.get_error_string(rc) + ")";
    }
    return n > 0 ? std::string() : std::string("no CUDA device is usable in this process");
}

void* alloc_pinned(std::size_t size) noexcept
{
    void* p = nullptr;
    const Runtime& rt = runtime();
    if (!rt.problem.empty())
        return nullptr;
    if (rt.host_alloc(&p, size, cudaHostAllocDefault) != cudaSuccess) {
        rt.get_last_error();
        return nullptr;
    }
    return p;
}

void free_pinned(void* p) noexcept
{
    if (runtime().problem.empty())
        runtime().free_host(p);
}

} // namespace cairn::detail::cuda
