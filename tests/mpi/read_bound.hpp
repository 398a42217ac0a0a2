// The most bytes a load may read from storage, computed from the metadata
// alone (independently of the readers): per stored chunk of an array the
// box overlaps, the union of the box's byte runs in the chunk (row-major
// order of the chunk's box), rounded out to whole checksum blocks when
// verifying (docs/FORMAT.md, section 2.3), and each block counted once.
#pragma once

#include <cairn/cairn.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace cairn_test {

/// Bytes per checksum block of a chunk of `shape` (FORMAT.md 2.3).
inline std::uint64_t block_span(const cairn::Shape& shape, std::uint64_t es, std::uint64_t block)
{
    std::uint64_t row = es;
    for (std::size_t d = 1; d < shape.size(); ++d)
        row *= static_cast<std::uint64_t>(shape[d]);
    if (shape.empty())
        return block; // 0-d: one element, one block
    return row <= block ? block / row * row : block;
}

/// The bound of one rank loading boxes `boxes` of array `fqn` (each box
/// inside the array; several may overlap).
inline std::uint64_t read_bound(const cairn::Metadata& md, const std::string& fqn, const std::vector<cairn::Box>& boxes,
                                bool verify)
{
    const auto& em = md.entries.at(fqn);
    const auto es = static_cast<std::uint64_t>(cairn::dtype_size(em.dtype));
    std::uint64_t total = 0;
    for (const auto& ch : em.chunks) {
        const cairn::Box& C = ch.box;
        const std::size_t nd = C.ndim();
        const std::uint64_t span = verify && md.checksum_block ? block_span(C.shape, es, md.checksum_block) : 0;
        std::vector<std::pair<std::uint64_t, std::uint64_t>> runs; // chunk-relative bytes [a, b)
        for (const auto& box : boxes) {
            const auto X = nd ? cairn::intersect(C, box) : std::optional<cairn::Box>(C);
            if (!X || X->volume() == 0)
                continue;
            // Every run along the last dimension of X.
            cairn::Shape idx(nd, 0);
            const std::int64_t rows = nd ? X->volume() / X->shape[nd - 1] : 1;
            for (std::int64_t r = 0; r < rows; ++r) {
                std::uint64_t off = 0;
                for (std::size_t d = 0; d < nd; ++d)
                    off = off * static_cast<std::uint64_t>(C.shape[d]) +
                          static_cast<std::uint64_t>(X->offsets[d] - C.offsets[d] + idx[d]);
                const std::uint64_t n = nd ? static_cast<std::uint64_t>(X->shape[nd - 1]) : 1;
                std::uint64_t a = off * es, b = (off + n) * es;
                if (span) {
                    a = a / span * span;
                    b = std::min(ch.storage.length, (b + span - 1) / span * span);
                }
                runs.emplace_back(a, b);
                for (std::size_t d = nd >= 1 ? nd - 1 : 0; d-- > 0;) {
                    if (++idx[d] < X->shape[d])
                        break;
                    idx[d] = 0;
                }
            }
        }
        std::sort(runs.begin(), runs.end());
        std::uint64_t end = 0;
        for (const auto& [a, b] : runs) {
            const auto from = std::max(a, end);
            if (b > from)
                total += b - from;
            end = std::max(end, b);
        }
    }
    return total;
}

} // namespace cairn_test
