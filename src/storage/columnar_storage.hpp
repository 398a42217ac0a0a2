// Private: the faster forms a storage may offer beyond StorageWriter and
// StorageReader, asked for through StorageWriter::columnar() and
// StorageReader::columnar() (nullptr by default). Cairn's own storages
// (DistcpWriter, ContainerWriter, DistcpReader, ContainerReader) offer them;
// the driver (src/driver/capabilities.hpp) chooses between them and the
// public calls, which every storage has.
#pragma once

#include "core/metadata_columns.hpp"

#include <memory>
#include <string>

namespace cairn::detail {

/// A writer that commits from the metadata as columns, as the coordinator
/// builds it on the columnar save path (src/plan/columnar.hpp), without a
/// cairn::Metadata.
class ColumnarWriter {
public:
    virtual ~ColumnarWriter() = default;
    /// StorageWriter::finish from columns (sets their layout, checksum block
    /// and creation time). Coordinator only.
    virtual void commit(MetadataColumns& md) = 0;
};

/// A reader that hands its metadata over as columns, and reads with a
/// metadata in which each entry keeps only some of its chunks (those the
/// rank's boxes overlap, and the first: src/driver/load.cpp).
class ColumnarReader {
public:
    virtual ~ColumnarReader() = default;
    /// StorageReader::read_metadata for the coordinator of a load, which
    /// frames it (MetadataFrames): its chunk rows expanded and checked entry
    /// by entry as they are framed. Local, after reset(); the same checks
    /// and errors as read_metadata (error::NotFound, error::FormatError,
    /// error::ReadError).
    virtual std::unique_ptr<ChunkRowSource> read_metadata_rows() = 0;
    /// For cairn::verify, of a layout that also stores each scalar and
    /// string as a dataset of its own (for readers other than Cairn,
    /// docs/FORMAT.md 7): compares the one of entry `fqn` with the
    /// metadata's value and throws error::IntegrityError or
    /// error::FormatError naming the file and dataset when they differ.
    /// Local, after reset(). The default: no such datasets, nothing checked.
    virtual void verify_value(const std::string& fqn, const EntryMeta& entry)
    {
        (void)fqn;
        (void)entry;
    }
};

} // namespace cairn::detail
