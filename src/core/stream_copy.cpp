#include "core/stream_copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace cairn::detail {

void copy_streaming(void* dst, const void* src, std::size_t n) noexcept
{
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
#if defined(__SSE2__)
    // Up to the first 16-byte boundary of the destination, then 64 bytes (a
    // cache line) per round, the rest by memcpy.
    constexpr std::size_t vec = sizeof(__m128i);
    const std::size_t misalign = reinterpret_cast<std::uintptr_t>(d) % vec;
    const std::size_t head = misalign == 0 ? 0 : vec - misalign;
    if (n <= head) {
        std::memcpy(d, s, n);
        return;
    }
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 4 * vec; n -= 4 * vec, d += 4 * vec, s += 4 * vec) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + vec));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * vec));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 3 * vec));
        _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + vec), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 2 * vec), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 3 * vec), e);
    }
    std::memcpy(d, s, n);
    _mm_sfence();
#else
    std::memcpy(d, s, n);
#endif
}

} // namespace cairn::detail
