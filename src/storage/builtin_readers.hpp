// Private: the metadata of Cairn's own storage readers as columns, for the
// coordinator of a load, which encodes and broadcasts it without building a
// cairn::Metadata (src/checkpoint.cpp). Their public read_metadata()
// converts the same columns.
#pragma once

#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "core/metadata_columns.hpp"

#include <memory>
#include <typeinfo>

namespace cairn::detail {

struct BuiltinReaders {
    /// Whether `r` is exactly DistcpReader or ContainerReader (not a subclass,
    /// which may override any step).
    static bool is_builtin(const StorageReader& r)
    {
        return typeid(r) == typeid(DistcpReader) || typeid(r) == typeid(ContainerReader);
    }
    /// StorageReader::read_metadata of a reader that is_builtin(), as columns
    /// (entries in name order): local (the coordinator calls it alone),
    /// after reset(); the same checks and errors (error::NotFound,
    /// error::FormatError, error::ReadError).
    static MetadataColumns read_metadata(StorageReader& r)
    {
        if (typeid(r) == typeid(DistcpReader))
            return read_metadata(static_cast<DistcpReader&>(r));
        return read_metadata(static_cast<ContainerReader&>(r));
    }
    static MetadataColumns read_metadata(DistcpReader& r);    // distcp_reader.cpp
    static MetadataColumns read_metadata(ContainerReader& r); // container_reader.cpp
    /// The same for the coordinator of a load, which frames it
    /// (MetadataFrames): its chunk rows expanded and checked entry by entry
    /// as they are framed (detail::read_metadata_rows_group).
    static std::unique_ptr<ChunkRowSource> read_metadata_rows(StorageReader& r)
    {
        if (typeid(r) == typeid(DistcpReader))
            return read_metadata_rows(static_cast<DistcpReader&>(r));
        return read_metadata_rows(static_cast<ContainerReader&>(r));
    }
    static std::unique_ptr<ChunkRowSource> read_metadata_rows(DistcpReader& r);
    static std::unique_ptr<ChunkRowSource> read_metadata_rows(ContainerReader& r);
    /// For cairn::verify of a container: reads the dataset a container
    /// holds for scalar or string entry `fqn` (for readers other than
    /// Cairn, docs/FORMAT.md 7) and compares it with the metadata's value.
    /// Throws error::IntegrityError naming the file, the dataset and both
    /// values when they differ or the dataset is missing or of another
    /// type, error::FormatError when it is no hard link or keeps its bytes
    /// elsewhere (h5::check_dataset_storage). Local, after reset().
    static void verify_value(ContainerReader& r, const std::string& fqn, const EntryMeta& entry);
};

} // namespace cairn::detail
