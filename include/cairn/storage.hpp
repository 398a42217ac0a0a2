// Cairn: storage layers. A storage writer/reader moves the bytes of a plan
// to and from a medium; the call sequence is the seeds' (DCP's StorageWriter /
// StorageReader). Implement these to add a backend without touching Cairn.
#pragma once

#include "cairn/plan.hpp"
#include "cairn/planner.hpp"

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace cairn {

namespace detail {
class ColumnarWriter; // Cairn's own storages: the commit from metadata columns (internal)
class ColumnarReader; // Cairn's own storages: the metadata as columns (internal)
} // namespace detail

/// MPI-IO hints (key, value), set in order on the MPI_Info given to
/// MPI_File_open (e.g. {"striping_factor", "16"}, {"striping_unit",
/// "1048576"}, {"romio_cb_write", "enable"}). Hints the MPI library does not
/// know are ignored by it; at LogLevel::debug each file opened with hints
/// prints what the library reports for them (cairn/log.hpp). A key must have
/// 1 to MPI_MAX_INFO_KEY - 1 characters and a value at most
/// MPI_MAX_INFO_VAL - 1, else the save or load throws error::WrongAPIUsage
/// naming the hint.
using MpiHints = std::vector<std::pair<std::string, std::string>>;

/// Storage writer. Sequence, on every rank unless said otherwise:
///  1. reset(checkpoint_id)
///  2. set_up_storage_writer(is_coordinator, comm)
///  3. prepare_local_plan(plan)
///  4. coordinator: prepare_global_plan(plans) (e.g. create the directory,
///     assign files; plans are then scattered)
///  5. write_data(plan, planner): collective over `comm` (every rank calls it,
///     with a possibly empty plan); calls planner.resolve_data per item
///  6. coordinator: finish(metadata, results): makes the checkpoint durable and
///     commits it. Only called when every rank's write_data succeeded.
///  abort(): coordinator, after any failure past step 4; best effort, noexcept.
/// validate_checkpoint_id(id) is asked before any of these, to choose a storage
/// from a checkpoint id (Layout::automatic asks the built-in storages).
class StorageWriter {
public:
    virtual ~StorageWriter() = default;
    /// Whether `checkpoint_id` is an id this storage writes (the seeds'
    /// validate_checkpoint_id, which enables choosing a storage from an id):
    /// Layout::automatic saves with the first built-in storage that accepts
    /// the id (ContainerWriter, then DistcpWriter); an application can choose
    /// among its own storages the same way. A storage passed explicitly
    /// (SaveOptions::storage) is used whatever it answers. Local; it may look
    /// at the file system. The default accepts every id.
    virtual bool validate_checkpoint_id(const std::string& checkpoint_id) const;
    virtual void reset(const std::string& checkpoint_id) = 0;
    virtual void set_up_storage_writer(bool is_coordinator, MPI_Comm comm) = 0;
    virtual SavePlan prepare_local_plan(SavePlan plan) { return plan; }
    virtual std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) { return plans; }
    virtual std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) = 0;
    virtual void finish(const Metadata& metadata, const std::vector<std::vector<WriteResult>>& results) = 0;
    virtual void abort() noexcept {}
    /// The layout this storage writes, as CAIRN_PROFILE's records name it:
    /// "per_rank" (DistcpWriter), "container" (ContainerWriter); the
    /// default, "custom", for any other storage.
    virtual const char* layout_name() const noexcept { return "custom"; }
    /// Whether write_data resolves and writes the plan's items one at a time,
    /// in plan order: the save then reports progress (SaveOptions::progress)
    /// item by item; else (the default) once write_data returns.
    virtual bool writes_items_in_turn() const noexcept { return false; }
    /// The file-system path this storage writes for the id of the last
    /// reset(), asked on the coordinator: the save locks it (one writer per
    /// path, `<path>.cairn-lock`, docs/robustness.md) before
    /// prepare_global_plan and checks the lock before finish(). Empty (the
    /// default): no lock; the storage keeps other writers off its target
    /// itself. DistcpWriter and ContainerWriter (and their subclasses)
    /// return the checkpoint id.
    virtual std::string lock_path() const { return {}; }
    /// A faster form of the commit, from the metadata as columns, an
    /// internal interface that Cairn's own writers offer; nullptr (the
    /// default): none, and the save calls finish() with a Metadata. A
    /// subclass of DistcpWriter or ContainerWriter that overrides finish()
    /// returns nullptr here, so that its finish() is called.
    virtual detail::ColumnarWriter* columnar() noexcept { return nullptr; }
};

/// Storage reader. Sequence:
///  1. reset(checkpoint_id)
///  2. coordinator: read_metadata() (broadcast by Cairn to every rank)
///  3. set_up_storage_reader(metadata, is_coordinator, comm)
///  4. prepare_local_plan(plan)
///  5. when needs_global_plan(): coordinator prepare_global_plan(plans)
///  6. read_data(plan, planner): collective over `comm`; calls
///     planner.resolve_destination / load_bytes per item.
/// validate_checkpoint_id(id) is asked before any of these, to choose a storage
/// from a checkpoint id (Layout::automatic asks the built-in storages).
class StorageReader {
public:
    virtual ~StorageReader() = default;
    /// Whether `checkpoint_id` names a checkpoint this storage reads (the
    /// seeds' validate_checkpoint_id): Layout::automatic loads with the first
    /// built-in storage that accepts the id (ContainerReader, then
    /// DistcpReader), asked on the coordinator, whose choice every rank
    /// follows. A storage passed explicitly (LoadOptions::storage) is used
    /// whatever it answers. Local; it may look at the file system. The
    /// default accepts every id.
    virtual bool validate_checkpoint_id(const std::string& checkpoint_id) const;
    virtual void reset(const std::string& checkpoint_id) = 0;
    virtual Metadata read_metadata() = 0;
    virtual void set_up_storage_reader(const Metadata& metadata, bool is_coordinator, MPI_Comm comm) = 0;
    virtual LoadPlan prepare_local_plan(LoadPlan plan) { return plan; }
    virtual bool needs_global_plan() const { return false; }
    virtual std::vector<LoadPlan> prepare_global_plan(std::vector<LoadPlan> plans) { return plans; }
    virtual void read_data(const LoadPlan& plan, LoadPlanner& planner) = 0;
    /// Reads the whole stored chunk `chunk` of entry `fqn` and checks its
    /// checksums (used by cairn::verify, after set_up_storage_reader).
    /// Local. Returns the bytes checked; throws error::IntegrityError on a
    /// mismatch, error::ReadError when the bytes cannot be read. The default
    /// throws error::WrongAPIUsage (the storage cannot verify).
    virtual std::uint64_t verify_chunk(const std::string& fqn, const EntryMeta& entry, const ChunkMeta& chunk);
    /// Bytes this rank read from storage in its last read_data, for
    /// LoadResult::bytes_read; the default: 0 (not counted).
    virtual std::uint64_t bytes_read() const noexcept { return 0; }
    /// Whether read_data reads the plan's items one at a time, in plan
    /// order: the load then reports progress (LoadOptions::progress) item
    /// by item; else (the default) once read_data returns.
    virtual bool reads_items_in_turn() const noexcept { return false; }
    /// A faster form of read_metadata, as columns framed entry by entry, an
    /// internal interface that Cairn's own readers offer; nullptr (the
    /// default): none, and the load calls read_metadata(). A reader that
    /// offers it also takes a metadata in which each entry keeps only the
    /// chunks the rank reads. A subclass of DistcpReader or ContainerReader
    /// that overrides read_metadata() or set_up_storage_reader() returns
    /// nullptr here.
    virtual detail::ColumnarReader* columnar() noexcept { return nullptr; }
};

} // namespace cairn

namespace cairn {

/// Writes `metadata` as Cairn's metadata file (an HDF5 file holding the
/// attribute group of docs/FORMAT.md) at `path`, for storages that keep
/// Cairn's metadata format. Local. Throws error::WriteError.
void write_metadata_file(const std::string& path, const Metadata& metadata, bool durable = true);

/// Reads a file written by write_metadata_file. Local. Throws
/// error::NotFound (no file) or error::FormatError (not Cairn metadata).
Metadata read_metadata_file(const std::string& path);

} // namespace cairn
