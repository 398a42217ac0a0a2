// Private: the checkpoint metadata as an HDF5 attribute group (docs/FORMAT.md).
#pragma once

#include "cairn/plan.hpp"

#include <hdf5.h>

#include <string>

namespace cairn::detail {

/// Writes `md` as the group "/cairn" (attributes) with one sub-group per
/// entry under "/cairn/entries" into the open file or group `loc`.
void write_metadata_group(hid_t loc, const Metadata& md);

/// Reads the group written by write_metadata_group; `where` (the file name)
/// prefixes every error. Validates the format version, kinds, dtypes, ranks
/// of boxes and that every chunk lies inside its array.
Metadata read_metadata_group(hid_t loc, const std::string& where);

/// Creates (truncating) the serial HDF5 file `path` holding only the
/// metadata group; fsyncs it when `durable`.
void write_metadata_file(const std::string& path, const Metadata& md, bool durable);

/// Reads a metadata file. Throws error::NotFound when it does not exist,
/// error::FormatError when it is not a Cairn metadata file.
Metadata read_metadata_file(const std::string& path);

/// Escapes an entry name into an HDF5 link name ('%' -> %25, '/' -> %2F, a
/// leading '.' -> %2E); reversible, and the identity on ordinary names.
std::string escape_name(const std::string& fqn);

} // namespace cairn::detail
