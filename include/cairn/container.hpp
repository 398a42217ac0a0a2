// Cairn: the container layout. A checkpoint is one HDF5 file written through
// parallel HDF5's MPI-IO driver: every array is one dataset with its global
// shape and dtype, written collectively by hyperslab, so h5dump, h5ls and h5py
// read it without Cairn; the checkpoint metadata is the attribute group
// /cairn in the same file (docs/FORMAT.md, "Container layout").
#pragma once

#include "cairn/storage.hpp"
#include "cairn/write_options.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

/// HDF5 file locking of a container file. HDF5 (>= 1.10.7) takes a lock when
/// it opens a file; on parallel file systems that do not support locks it can
/// fail ("unable to lock file") or hang. The environment variable
/// HDF5_USE_FILE_LOCKING (TRUE, FALSE or BEST_EFFORT), when set, overrides
/// this setting, as HDF5 documents.
enum class FileLocking : std::uint8_t {
    best_effort = 0, ///< lock, and carry on unlocked where the file system has no locks (default)
    on = 1,          ///< lock; fail where the file system cannot
    off = 2,         ///< never lock
};

/// Settings of the parallel HDF5 file of the container layout, used by save
/// (SaveOptions::container) and load (LoadOptions::container).
struct ContainerTuning {
    /// MPI-IO hints (cairn/storage.hpp), set on the MPI_Info given to
    /// H5Pset_fapl_mpio and to the MPI-IO file through which a save writes
    /// the small datasets directly (a load reads them through the HDF5
    /// driver's own handle).
    MpiHints mpi_hints;
    FileLocking file_locking = FileLocking::best_effort;
    /// Initial size of HDF5's metadata cache (and lower bound of its maximum):
    /// large enough that the object headers and links of many thousands of
    /// small datasets stay in memory and reach the file in a few large
    /// collective writes at close.
    std::size_t metadata_cache_bytes = std::size_t(32) << 20;
    /// Collective metadata reads (H5Pset_all_coll_metadata_ops) and writes
    /// (H5Pset_coll_metadata_write). Turn off only to diagnose an MPI-IO problem.
    bool collective_metadata = true;
    /// Datasets of fewer bytes than this are transferred independently (each
    /// rank with a part writes or reads it, the others skip the dataset)
    /// rather than collectively. A dataset that a single rank writes (or
    /// reads) is always transferred independently: a collective transfer
    /// gains nothing there. Larger datasets that several ranks write (read)
    /// are transferred collectively: their pieces are aggregated into few
    /// large file accesses, at the price of a few collectives per dataset,
    /// which dominates for small datasets (1 MiB by default; 0: every
    /// dataset with several writers collectively). Independent datasets of
    /// at most 1 MiB go straight to their address through MPI-IO
    /// (docs/FORMAT.md 7.4).
    std::size_t independent_below = std::size_t(1) << 20;
};

/// Options of the container writer: the WriteOptions of a save, and the
/// container's tuning.
struct ContainerWriterOptions : WriteOptions {
    /// MPI-IO hints, file locking, metadata cache (SaveOptions::container).
    ContainerTuning tuning;
};

/// Suffix of the file a container is written to before it is committed.
inline constexpr const char* container_temp_suffix = ".cairn-tmp";

/// Writes the container layout: one HDF5 file that all ranks write through
/// parallel HDF5, one dataset per array (ContainerTuning chooses collective
/// or independent transfers; docs/FORMAT.md 7.4). Commit: the file is
/// written as `<id>.cairn-tmp` and flushed; the coordinator then adds
/// scalars, strings and the /cairn metadata group, syncs it, renames it to
/// `<id>` and syncs the directory.
class ContainerWriter : public StorageWriter {
public:
    explicit ContainerWriter(ContainerWriterOptions options = {});
    ~ContainerWriter() override;
    /// Accepts ids ending in ".h5" or ".hdf5" (trailing '/' ignored).
    bool validate_checkpoint_id(const std::string& checkpoint_id) const override;
    void reset(const std::string& checkpoint_id) override;
    void set_up_storage_writer(bool is_coordinator, MPI_Comm comm) override;
    std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
    std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
    void finish(const Metadata& metadata, const std::vector<std::vector<WriteResult>>& results) override;
    void abort() noexcept override;
    /// The checkpoint id: a save locks it.
    std::string lock_path() const override;
    /// "container".
    const char* layout_name() const noexcept override;
    /// Offers Cairn's faster commit from metadata columns (StorageWriter::columnar).
    detail::ColumnarWriter* columnar() noexcept override;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// Reads the container layout. set_up_storage_reader checks that every
/// dataset the metadata names exists with the right shape and type (a
/// FormatError otherwise). Each rank reads what its boxes need, through at
/// most `staging_bytes` of buffer (docs/FORMAT.md 7.5). With `verify` (the
/// default) and a checkpoint with checksums, each rank reads the whole
/// checksum blocks its region touches and checks them before copying its
/// region out. verify_chunk reads a chunk whole (local, any rank).
class ContainerReader : public StorageReader {
public:
    explicit ContainerReader(std::size_t staging_bytes = std::size_t(64) << 20, ContainerTuning tuning = {},
                             bool verify = true);
    ~ContainerReader() override;
    /// Accepts an id that names a regular file, or names nothing and ends in
    /// ".h5" or ".hdf5" (so that load's error names the missing file).
    bool validate_checkpoint_id(const std::string& checkpoint_id) const override;
    void reset(const std::string& checkpoint_id) override;
    /// Reads the metadata group (coordinator); checks no dataset.
    Metadata read_metadata() override;
    /// Collective over `comm`: check_datasets(metadata, rank, size).
    void set_up_storage_reader(const Metadata& metadata, bool is_coordinator, MPI_Comm comm) override;
    /// Checks that the datasets of `metadata`'s arrays and byte blobs (every
    /// `parts`-th one from the `part`-th, in metadata order) exist with the
    /// entry's global shape, a type that holds its dtype and all their bytes
    /// stored; throws error::FormatError naming the file, the dataset and
    /// the entry. Local, through the file opened with HDF5's serial driver
    /// (read_metadata's, or opened here), which stays open for verify_chunk
    /// and, on one rank, read_data. Call after reset().
    void check_datasets(const Metadata& metadata, int part = 0, int parts = 1);
    LoadPlan prepare_local_plan(LoadPlan plan) override;
    void read_data(const LoadPlan& plan, LoadPlanner& planner) override;
    std::uint64_t verify_chunk(const std::string& fqn, const EntryMeta& entry, const ChunkMeta& chunk) override;
    /// Offers Cairn's metadata as columns (StorageReader::columnar).
    detail::ColumnarReader* columnar() noexcept override;

    /// Bytes of array and blob data this rank read in the last read_data.
    std::uint64_t bytes_read() const noexcept override;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// The HDF5 path of the dataset of entry `fqn` in a container: "/" followed by
/// the name with '%', '/', control characters and a leading '.' escaped as
/// %XX, and the name "cairn" (the metadata group) written "%63airn". The
/// identity (after the "/") on ordinary names. Local.
std::string container_dataset_path(const std::string& fqn);

/// Inverse of container_dataset_path. Throws error::FormatError on a path it
/// does not produce. Local.
std::string container_entry_name(const std::string& dataset_path);

/// True when `path` is a committed container checkpoint (an HDF5 file with a
/// /cairn group whose layout is "container"). Local.
bool is_container_checkpoint(const std::string& path);

} // namespace cairn
