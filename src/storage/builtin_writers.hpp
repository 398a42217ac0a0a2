// Private: the commit of Cairn's own storage writers from metadata columns,
// for the coordinator's columnar save path (src/plan/columnar.hpp), which
// never builds a cairn::Metadata. Their public finish(Metadata, results)
// converts and calls the same code.
#pragma once

#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "core/metadata_columns.hpp"

#include <typeinfo>

namespace cairn::detail {

struct BuiltinWriters {
    /// Whether `w` is exactly DistcpWriter or ContainerWriter (not a subclass,
    /// which may override any step).
    static bool is_builtin(const StorageWriter& w)
    {
        return typeid(w) == typeid(DistcpWriter) || typeid(w) == typeid(ContainerWriter);
    }
    /// StorageWriter::finish for a writer that is_builtin(), from columns
    /// (sets their layout, checksum block and creation time).
    static void finish(StorageWriter& w, MetadataColumns& md)
    {
        if (typeid(w) == typeid(DistcpWriter))
            finish(static_cast<DistcpWriter&>(w), md);
        else
            finish(static_cast<ContainerWriter&>(w), md);
    }
    static void finish(DistcpWriter& w, MetadataColumns& md);    // distcp_writer.cpp
    static void finish(ContainerWriter& w, MetadataColumns& md); // container_writer.cpp
};

} // namespace cairn::detail
