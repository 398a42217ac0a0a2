// Private: the one adapter between the two forms of checkpoint metadata.
//
// Who owns which form:
// - detail::MetadataColumns (core/metadata_columns.hpp) is Cairn's form:
//   the columnar global plan builds it, the built-in writers commit it,
//   metadata.h5's writer and reader (format/metadata_h5.hpp) store and
//   read it, the built-in readers hand it to a load's coordinator, and the
//   codec frames it. Nothing inside the library converts it.
// - cairn::Metadata (include/cairn/plan.hpp) is the form of the plug-in API:
//   SavePlanner::create_global_plan's result, StorageWriter::finish's
//   argument, StorageReader::read_metadata's result, and the public
//   cairn::write_metadata_file / cairn::read_metadata_file.
//
// Where a public call is made or answered in the other form, it converts
// here, and only here: DefaultSavePlanner::create_global_plan (columns ->
// Metadata), DistcpWriter::finish and ContainerWriter::finish (Metadata ->
// columns), DistcpReader::read_metadata and ContainerReader::read_metadata
// (columns -> Metadata), cairn::write_metadata_file and
// cairn::read_metadata_file.
#pragma once

#include "cairn/plan.hpp"
#include "core/metadata_columns.hpp"

namespace cairn::detail {

/// Same content, as columns (files numbered in order of first appearance).
/// Throws error::WriteError naming the entry and chunk when a chunk's box
/// does not have the dimensions of its entry's global shape.
MetadataColumns to_columns(const Metadata& md);

/// Same content, as the public structs (a chunk not written: an empty path).
Metadata to_metadata(const MetadataColumns& md);
/// The same, moving the names, values and shapes out of `md`.
Metadata to_metadata(MetadataColumns&& md);

} // namespace cairn::detail
