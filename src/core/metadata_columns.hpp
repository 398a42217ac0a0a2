// Private: checkpoint metadata as columns, the shape of the /cairn tables of
// metadata.h5 (docs/FORMAT.md): one row per entry, chunk columns
// concatenated in entry order, files by index into a file table. The
// coordinator's columnar save path (src/plan/columnar.hpp) builds it without
// any per-chunk object, and the metadata writer writes it; cairn::Metadata
// converts both ways (for custom storages and the struct-based path).
#pragma once

#include "cairn/plan.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::detail {

struct MetadataColumns {
    struct Entry {
        std::string name;
        ItemKind kind = ItemKind::array;
        DType dtype = DType::u8;
        Shape global_shape;           ///< arrays and bytes
        std::string value;            ///< scalars (raw bytes) and strings
        std::size_t first_chunk = 0;  ///< its chunks: [first_chunk, first_chunk + chunks)
        std::size_t chunks = 0;
        std::size_t first_coord = 0;  ///< its chunk boxes in `boxes`: 2 * ndim values per chunk
        std::size_t ndim() const noexcept { return global_shape.size(); }
    };

    int format_version = 1; ///< as Metadata::format_version
    std::string library_version;
    int world_size = 0;
    std::string layout;
    std::string created;
    std::uint64_t checksum_block = 0;
    std::vector<Entry> entries; ///< in name order, distinct names

    // One row per chunk, in entry order.
    std::vector<std::int64_t> boxes;        ///< offsets then extents of each chunk
    std::vector<std::int64_t> chunk_file;   ///< index into `files`; -1: not written (yet)
    std::vector<std::uint64_t> chunk_offset;
    std::vector<std::uint64_t> chunk_length;
    std::vector<std::uint64_t> sum_begin;   ///< the chunk's checksums: sums[sum_begin, sum_begin + sum_count)
    std::vector<std::uint32_t> sum_count;
    std::vector<std::string> files;
    std::vector<std::uint64_t> sums;        ///< checksum pool (in chunk order when converted from Metadata; may
                                            ///< hold values no chunk refers to: ColumnarSavePlan::attach_results)

    std::size_t chunk_count() const noexcept { return chunk_file.size(); }
    /// Appends `n` chunk rows (unwritten), returns the first.
    std::size_t add_chunks(std::size_t n);
};

/// Same content, as columns (files numbered in order of first appearance).
MetadataColumns to_columns(const Metadata& md);

/// Same content, as the public structs.
Metadata to_metadata(const MetadataColumns& md);
/// The same, moving the names, values and shapes out of `md`.
Metadata to_metadata(MetadataColumns&& md);

} // namespace cairn::detail
