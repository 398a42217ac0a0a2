#include "core/checksum.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <future>
#include <new>

// Where the xxHash library has them (built with its x86 dispatch, as
// Debian's is), the XXH3 functions that pick the widest vector unit at run
// time (AVX2, AVX-512); the plain ones use the build's baseline (SSE2 on
// x86-64), slower on data in cache (a piece hashed just after its write).
// The checksums are the same either way. Weak references: a library
// without them leaves them null.
#if defined(__GNUC__) && defined(__ELF__) && defined(__x86_64__) && !defined(XXH_NAMESPACE)
#define CAIRN_XXH3_DISPATCH 1
extern "C" {
XXH64_hash_t XXH3_64bits_dispatch(const void* input, size_t len) __attribute__((weak));
XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t* state, const void* input, size_t len) __attribute__((weak));
}
#endif

namespace cairn::detail {

namespace {

std::uint64_t xxh3(const void* data, std::size_t size) noexcept
{
#if CAIRN_XXH3_DISPATCH
    if (XXH3_64bits_dispatch)
        return XXH3_64bits_dispatch(data, size);
#endif
    return XXH3_64bits(data, size);
}

void xxh3_update(XXH3_state_t* st, const void* data, std::size_t size) noexcept
{
#if CAIRN_XXH3_DISPATCH
    if (XXH3_64bits_update_dispatch) {
        XXH3_64bits_update_dispatch(st, data, size);
        return;
    }
#endif
    XXH3_64bits_update(st, data, size);
}

} // namespace

std::uint64_t checksum_span(const Shape& shape, std::size_t es, std::uint64_t block_bytes) noexcept
{
    return checksum_span(shape.data(), shape.size(), es, block_bytes);
}

std::uint64_t checksum(const void* data, std::size_t size) noexcept { return xxh3(data, size); }

std::string mismatch_text(const std::vector<std::uint64_t>& stored, std::uint64_t block, std::uint64_t computed)
{
    char text[64];
    std::snprintf(text, sizeof text, "stored %016llx, computed %016llx",
                  block < stored.size() ? static_cast<unsigned long long>(stored[block]) : 0ull,
                  static_cast<unsigned long long>(computed));
    return text;
}

ChunkHasher::ChunkHasher(std::uint64_t span) : m_state(XXH3_createState()), m_span(span)
{
    if (!m_state)
        throw std::bad_alloc();
    XXH3_64bits_reset(static_cast<XXH3_state_t*>(m_state));
}

ChunkHasher::~ChunkHasher()
{
    if (m_state)
        XXH3_freeState(static_cast<XXH3_state_t*>(m_state));
}

ChunkHasher::ChunkHasher(ChunkHasher&& o) noexcept
    : m_state(o.m_state), m_span(o.m_span), m_in_block(o.m_in_block), m_sums(std::move(o.m_sums))
{
    o.m_state = nullptr;
}

void ChunkHasher::update(const void* data, std::size_t size)
{
    auto* st = static_cast<XXH3_state_t*>(m_state);
    const auto* p = static_cast<const unsigned char*>(data);
    while (size > 0) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(size, m_span - m_in_block));
        xxh3_update(st, p, n);
        p += n;
        size -= n;
        m_in_block += n;
        if (m_in_block == m_span) {
            m_sums.push_back(XXH3_64bits_digest(st));
            XXH3_64bits_reset(st);
            m_in_block = 0;
        }
    }
}

std::vector<std::uint64_t> ChunkHasher::finish()
{
    if (m_in_block > 0) {
        m_sums.push_back(XXH3_64bits_digest(static_cast<XXH3_state_t*>(m_state)));
        m_in_block = 0;
    }
    return std::move(m_sums);
}

void DeferredHashes::add(ChunkHasher* hasher, const void* data, std::size_t size)
{
    m_ranges.push_back(Range{hasher, data, size});
}

void DeferredHashes::run()
{
    for (const auto& r : m_ranges)
        r.hasher->update(r.data, r.size);
    m_ranges.clear();
}

void DeferredHashes::run_during(const std::function<void()>& sync)
{
    if (m_ranges.empty()) {
        sync();
        return;
    }
    // The future's destructor waits for the hashing on every path, so
    // nothing outlives the memory it reads.
    auto hashing = std::async(std::launch::async, [this] { run(); });
    std::exception_ptr failed;
    try {
        sync();
    } catch (...) {
        failed = std::current_exception();
    }
    hashing.wait();
    if (failed)
        std::rethrow_exception(failed);
    hashing.get();
}

} // namespace cairn::detail
