// Private: the checkpoint metadata as an HDF5 attribute group (docs/FORMAT.md).
#pragma once

#include "cairn/plan.hpp"
#include "core/metadata_columns.hpp"

#include <hdf5.h>

#include <cstddef>
#include <memory>
#include <string>

namespace cairn::detail {

/// Integer arrays of the metadata group larger than this are stored as
/// datasets (format version 3, docs/FORMAT.md 2.6): from about a million
/// chunks.
inline constexpr std::size_t metadata_dataset_above = std::size_t(8) << 20;

/// Writes `md` as the group "/cairn" (docs/FORMAT.md 2: a table of
/// attributes; integer arrays of more than `dataset_above` bytes, by
/// default metadata_dataset_above, as datasets) into the open file or group
/// `loc`, with the lowest format version that describes it. Local (the
/// caller's own HDF5 handle).
/// Throws error::WriteError when a chunk has no file or the wrong number of
/// checksums, or the columns do not line up, and when HDF5 fails.
void write_metadata_group(hid_t loc, const MetadataColumns& md, std::size_t dataset_above = metadata_dataset_above);

/// An upper bound of the file space write_metadata_group takes for `md`
/// (its columns' bytes, twice, plus HDF5's headers and heaps per entry):
/// what a container reserves before the coordinator writes the group.
std::uint64_t metadata_group_bytes_bound(const MetadataColumns& md);

/// Reads the group written by write_metadata_group (entries in name order,
/// duplicate names a FormatError), without any per-chunk object; `where`
/// (the file name) prefixes every error. Validates the format version,
/// kinds, dtypes, ranks of boxes and that every chunk lies inside its array.
MetadataColumns read_metadata_columns_group(hid_t loc, const std::string& where);
/// The same for a load's coordinator to frame (MetadataFrames): when the
/// entries are stored in name order (as Cairn writes them), the chunk rows
/// are expanded and checked one entry at a time, as they are framed,
/// instead of all at once; else as read_metadata_columns_group. The same
/// checks and errors; those of the chunk rows may then come from
/// MetadataFrames::next(). Reads nothing from `loc` after it returns.
std::unique_ptr<ChunkRowSource> read_metadata_rows_group(hid_t loc, const std::string& where);

/// Bytes of the HDF5 user block of a metadata file, which holds its
/// integrity header (docs/FORMAT.md, section 2.4).
inline constexpr std::size_t metadata_header_bytes = 512;

/// Creates (truncating) the serial HDF5 file `path` holding only the
/// metadata group, with a user block of metadata_header_bytes, seals it
/// (seal_metadata_file) and fsyncs it when `durable`.
void write_metadata_file(const std::string& path, const MetadataColumns& md, bool durable);

/// Writes the integrity header into the user block of the metadata file
/// `path`: magic, version, the file's length and the XXH3-64 of everything
/// after the user block. Throws error::WriteError (also when the file has
/// no such user block).
void seal_metadata_file(const std::string& path);

/// Reads a metadata file (read_metadata_columns_group): reads its bytes,
/// checks the integrity header before HDF5 sees anything, then parses those
/// same bytes from memory (files written before the header existed are
/// parsed unchecked). Throws error::NotFound when it does not exist,
/// error::FormatError when it is damaged or not a Cairn metadata file,
/// error::ReadError when it cannot be read.
MetadataColumns read_metadata_columns_file(const std::string& path);
/// The same, for a load's coordinator (read_metadata_rows_group).
std::unique_ptr<ChunkRowSource> read_metadata_rows_file(const std::string& path);

/// Escapes an entry name into an HDF5 link name ('%' -> %25, '/' -> %2F, a
/// leading '.' -> %2E); reversible, and the identity on ordinary names.
std::string escape_name(const std::string& fqn);

} // namespace cairn::detail
