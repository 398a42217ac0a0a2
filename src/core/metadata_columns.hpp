// Private: checkpoint metadata as columns, the shape of the /cairn tables of
// metadata.h5 (docs/FORMAT.md): one row per entry, chunk columns
// concatenated in entry order, files by index into a file table. The
// library's one form of the metadata: the global plan (src/plan/columnar.hpp)
// builds it without any per-chunk object, the metadata writer and reader
// store and read it. The plug-in API's cairn::Metadata meets it only in
// core/metadata_adapter.hpp.
#pragma once

#include "cairn/plan.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
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

/// Metadata whose chunk rows may come one entry at a time: what a load's
/// coordinator frames (MetadataFrames) without holding every row of a
/// large checkpoint at once. head() holds every field, entries in name
/// order; rows(i) makes its chunk columns hold entries[i]'s rows. Local (no
/// MPI, no I/O after construction); not thread-safe.
class ChunkRowSource {
public:
    virtual ~ChunkRowSource() = default;
    /// Every field; of the chunk rows, at least those last asked for.
    virtual const MetadataColumns& head() const = 0;
    /// The file of every chunk (an index into head().files, -1: not
    /// written), each once, in the order in which the chunks first use them.
    virtual std::vector<std::int64_t> files_in_use() const = 0;
    /// Makes head()'s chunk columns hold the rows of entries[i] where its
    /// first_chunk and first_coord say (sum_begin into head().sums). Asked
    /// for i = 0, 1, ... in order. Throws error::FormatError for rows that
    /// break the format.
    virtual void rows(std::size_t i) = 0;
    /// After the last entry's rows: throws error::FormatError when the
    /// source holds rows or checksums that no entry claims.
    virtual void finish() = 0;
};

/// Columns that hold every row already, owned or borrowed (`md` must then
/// outlive the source).
class ColumnRows final : public ChunkRowSource {
public:
    explicit ColumnRows(const MetadataColumns* md) : m_md(md) {}
    explicit ColumnRows(MetadataColumns md) : m_own(std::move(md)), m_md(&m_own) {}
    ColumnRows(const ColumnRows&) = delete;
    ColumnRows& operator=(const ColumnRows&) = delete;
    const MetadataColumns& head() const override { return *m_md; }
    std::vector<std::int64_t> files_in_use() const override;
    void rows(std::size_t) override {}
    void finish() override {}

private:
    MetadataColumns m_own;
    const MetadataColumns* m_md;
};

} // namespace cairn::detail
