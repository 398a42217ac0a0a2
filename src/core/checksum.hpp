// Private: checksums of stored chunks. A chunk's stored bytes (row-major over
// its box) are cut into blocks of `span` bytes (the last one shorter), and
// each block has an XXH3-64 checksum (seed 0). `span` is the block size rounded
// down to whole rows of dimension 0 when a row fits in it, else the block size
// itself; see docs/FORMAT.md.
#pragma once

#include "cairn/box.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cairn::detail {

inline constexpr const char* checksum_algorithm = "xxh3-64";
inline constexpr std::uint64_t default_checksum_block = std::uint64_t(1) << 20;

/// Bytes per checksum block of a chunk of `shape` and element size `es`.
std::uint64_t checksum_span(const Shape& shape, std::size_t es, std::uint64_t block_bytes) noexcept;
/// The same for the `nd` extents at `shape` (inline: the metadata writer
/// checks every chunk's checksum count with it).
inline std::uint64_t checksum_span(const std::int64_t* shape, std::size_t nd, std::size_t es,
                                   std::uint64_t block_bytes) noexcept
{
    if (block_bytes == 0)
        return 0;
    std::uint64_t row = es;
    for (std::size_t d = 1; d < nd; ++d)
        row *= static_cast<std::uint64_t>(shape[d]);
    if (nd == 0 || row == 0 || row > block_bytes)
        return block_bytes;
    return block_bytes / row * row;
}

/// Number of blocks of a chunk of `length` bytes with blocks of `span`.
inline std::uint64_t checksum_blocks(std::uint64_t length, std::uint64_t span) noexcept
{
    if (span == 0 || length == 0)
        return 0;
    return length <= span ? 1 : (length - 1) / span + 1; // one block (the usual) without a division
}

/// "stored <hex>, computed <hex>" for the error of a mismatch in block `block`
/// of a chunk whose stored checksums are `stored` (0 when the block has none).
std::string mismatch_text(const std::vector<std::uint64_t>& stored, std::uint64_t block, std::uint64_t computed);

/// XXH3-64 of a byte range.
std::uint64_t checksum(const void* data, std::size_t size) noexcept;

/// Checksums of a chunk's bytes fed in order, in pieces of any size.
class ChunkHasher {
public:
    explicit ChunkHasher(std::uint64_t span);
    ~ChunkHasher();
    ChunkHasher(const ChunkHasher&) = delete;
    ChunkHasher& operator=(const ChunkHasher&) = delete;
    ChunkHasher(ChunkHasher&&) noexcept;
    void update(const void* data, std::size_t size);
    /// The block checksums; the hasher is spent afterwards.
    std::vector<std::uint64_t> finish();

private:
    void* m_state; // XXH3_state_t, kept out of this header
    std::uint64_t m_span;
    std::uint64_t m_in_block = 0;
    std::vector<std::uint64_t> m_sums;
};

/// Byte ranges a writer wrote straight from the caller's memory, each to be
/// fed to its own ChunkHasher later, so that the hashing can run while the
/// file's sync waits for the device. The hashers and the memory must stay
/// alive and unchanged until run() or run_during() returns (the caller's
/// state is, during a save). Not thread-safe itself.
class DeferredHashes {
public:
    void add(ChunkHasher* hasher, const void* data, std::size_t size);
    /// Feeds every range to its hasher, in order, then forgets them.
    void run();
    /// Calls `sync` on this thread while run() goes on on a helper thread
    /// (which must not call MPI or HDF5: it only hashes); returns when both
    /// are done. Rethrows what `sync` threw, else what the hashing threw.
    void run_during(const std::function<void()>& sync);

private:
    struct Range {
        ChunkHasher* hasher;
        const void* data;
        std::size_t size;
    };
    std::vector<Range> m_ranges;
};

} // namespace cairn::detail
