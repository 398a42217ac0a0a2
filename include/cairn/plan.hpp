// Cairn: plans (what each rank writes or reads) and checkpoint metadata.
#pragma once

#include "cairn/box.hpp"
#include "cairn/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cairn {

/// Kind of a stored entry. Numeric values are part of the format.
enum class ItemKind : std::uint8_t { array = 0, bytes = 1, scalar = 2, string = 3 };

/// "array", "bytes", "scalar", "string".
const char* item_kind_name(ItemKind kind) noexcept;

/// Where the bytes of one stored chunk live: a file (or dataset) relative to
/// the checkpoint, a byte offset and a length.
struct StorageInfo {
    std::string path;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    /// XXH3-64 checksums of the chunk's blocks (Metadata::checksum_block);
    /// empty when the checkpoint has no checksums.
    std::vector<std::uint64_t> checksums;
};

/// One unit of a save plan.
struct WriteItem {
    std::string fqn;
    ItemKind kind = ItemKind::array;
    DType dtype = DType::u8;      ///< array and scalar
    Shape global_shape;           ///< array (bytes: {size})
    Box box;                      ///< array: the chunk written by this item (bytes: whole)
    std::uint64_t nbytes = 0;     ///< bytes this item writes
    std::uint64_t digest = 0;     ///< bytes: content hash, to check that replicas agree
    std::string value;            ///< scalar: raw little-endian bytes; string: the value
    std::uint32_t chunk = 0;      ///< set by the global plan: index of the chunk in the metadata
};

/// A rank's save plan. `storage_data` and `planner_data` are opaque bytes that
/// a storage / planner attaches for its own use (e.g. the directory to write).
struct SavePlan {
    std::vector<WriteItem> items;
    std::vector<std::byte> storage_data;
    std::vector<std::byte> planner_data;
};

/// What a rank reports back for each item it wrote.
struct WriteResult {
    std::string fqn;
    std::uint32_t chunk = 0;
    StorageInfo storage;
};

/// One stored chunk of an entry.
struct ChunkMeta {
    Box box;
    StorageInfo storage;
};

/// Everything stored about one entry (one FQN).
struct EntryMeta {
    ItemKind kind = ItemKind::array;
    DType dtype = DType::u8;
    Shape global_shape;
    std::vector<ChunkMeta> chunks; ///< array: disjoint boxes covering the array; bytes: one chunk
    std::string value;             ///< scalar (raw bytes) and string values
};

/// The metadata of a checkpoint, written by the coordinator at commit.
struct Metadata {
    /// The newest metadata format this Cairn reads (docs/FORMAT.md, section 5).
    static constexpr int current_format_version = 3;

    /// The version of the file it was read from. The writer does not take
    /// it from here: it writes 3 where it stores an array as a dataset
    /// (FORMAT.md 2.6), 2 where it stores a column in its run form (2.5),
    /// 1 otherwise.
    int format_version = 1;
    std::string library_version;
    int world_size = 0;
    std::string layout;  ///< "distcp" (per-rank files) or "container"
    std::string created; ///< UTC time, ISO 8601
    /// Bytes per checksum block (docs/FORMAT.md); 0: no checksums.
    std::uint64_t checksum_block = 0;
    std::map<std::string, EntryMeta> entries;
};

/// One unit of a load plan: the region `box` (global coordinates) of entry
/// `fqn`, to be read from its stored chunk number `chunk` into the box
/// number `shard` of this rank.
struct ReadItem {
    std::string fqn;
    ItemKind kind = ItemKind::array;
    std::uint32_t chunk = 0;
    Box box;
    /// Arrays: which of this rank's boxes of `fqn` the region fills (0 for
    /// the first box added, 1 for the second, ...).
    std::uint32_t shard = 0;
};

/// A rank's load plan.
struct LoadPlan {
    std::vector<ReadItem> items;
    std::vector<std::byte> storage_data;
    std::vector<std::byte> planner_data;
};

} // namespace cairn
