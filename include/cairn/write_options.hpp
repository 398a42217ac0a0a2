// Cairn: how a save writes its files. The settings SaveOptions shares with
// the options of the built-in writers (DistcpWriterOptions,
// ContainerWriterOptions), which hold them as a base.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn {

/// Durability, replacement, layout and checksums of the files a save writes.
struct WriteOptions {
    /// Make data and metadata durable (fsync of files and directory) before
    /// the commit.
    bool fsync = true;
    /// Replace a committed checkpoint at the same path. The old one stays
    /// intact until the new one is committed.
    bool overwrite = false;
    /// Chunks of at least this many bytes start at a multiple of it in their
    /// file. Container layout: H5Pset_alignment(max(alignment, 64 KiB),
    /// alignment), every HDF5 object of at least that size (datasets,
    /// metadata blocks) starts at a multiple of it; smaller objects are
    /// packed. Set it to the stripe size of a parallel file system.
    std::size_t alignment = 4096;
    /// Bytes of host staging memory per rank (packing strided shards,
    /// coalescing small items).
    std::size_t staging_bytes = std::size_t(64) << 20;
    /// Bytes per checksum block: every stored chunk carries XXH3-64
    /// checksums of its blocks, computed as the data streams out. 0: none.
    std::uint64_t checksum_block = std::uint64_t(1) << 20;
    /// With `fsync`: as a rank writes, start the device's writeback of each
    /// piece it has written (Linux `sync_file_range`) and keep at most this
    /// many bytes per file written but not yet on the device, so that
    /// copying into the page cache and writing to the device overlap instead
    /// of all bytes waiting for the final fsync. A hint: the fsync still
    /// follows, so durability is the same; it does nothing where the system
    /// lacks it. 0: off.
    std::size_t writeback_bytes = std::size_t(64) << 20;
};

} // namespace cairn
