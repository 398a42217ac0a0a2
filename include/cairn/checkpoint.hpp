// Cairn: save and load.
#pragma once

#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "cairn/log.hpp"
#include "cairn/planner.hpp"
#include "cairn/state_dict.hpp"
#include "cairn/storage.hpp"
#include "cairn/write_options.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cairn {

/// How async_save() copies the caller's data before returning.
enum class AsyncStaging {
    /// Copy everything into host memory before returning: the caller is
    /// unblocked earliest, at the cost of a host copy of this rank's data.
    full_copy,
    /// Copy through the bounded staging buffer while writing in the background:
    /// host memory stays within staging_bytes; the caller must wait for
    /// AsyncSave::staged() before modifying its data.
    bounded,
};

/// Storage layout of a checkpoint (docs/FORMAT.md).
enum class Layout {
    /// Chosen from the checkpoint id: save writes a container when the id
    /// ends in ".h5" or ".hdf5", the per-rank layout otherwise; load reads a
    /// container when the id names a regular file (or nothing, with such an
    /// ending), the per-rank layout otherwise.
    automatic,
    /// A directory of per-rank .distcp files and metadata.h5 (DistcpWriter).
    per_rank,
    /// One parallel HDF5 file, every array a dataset (ContainerWriter).
    container,
};

/// Options of save() and async_save().
/// The settings of how the files are written (fsync, overwrite, alignment,
/// staging_bytes, checksum_block, writeback_bytes) are those of WriteOptions
/// (cairn/write_options.hpp), its base.
struct SaveOptions : WriteOptions {
    /// Storage layout; ignored when `storage` is given.
    Layout layout = Layout::automatic;
    /// Number of .distcp files each rank writes (items are balanced by
    /// size); with grouped files (per_rank.files), each group of ranks.
    int files_per_rank = 1;
    /// async_save() only: how the data is staged.
    AsyncStaging async_staging = AsyncStaging::full_copy;
    /// Per-rank layout: MPI-IO hints of the .distcp files, and which ranks
    /// share one (PerRankTuning::files: per rank, per node, or M in all).
    PerRankTuning per_rank;
    /// Container layout: MPI-IO hints, file locking, metadata cache.
    ContainerTuning container;
    /// Called on every rank with its own progress through each phase
    /// (cairn/log.hpp: when, on which thread, what it may do). Empty: none.
    ProgressCallback progress;
    /// Keep the coordinator's global plan for the next save, and reuse the
    /// one kept by the previous save when every rank's local plan is the same
    /// but for the values of scalars and strings and the contents of blobs
    /// (the same arrays, dtypes, global shapes, shards and blob sizes): the
    /// local plans are then not gathered and no global plan is built. It
    /// takes effect only when every rank passes it (otherwise the save plans
    /// from scratch, and what was kept is freed). The coordinator keeps its plan and
    /// metadata tables between saves (about 100 bytes per chunk); a save
    /// without this option frees them. The default planner (`planner`
    /// unset) and Cairn's own storage only, and states in which every rank
    /// holds one box of each array (the option is ignored otherwise).
    bool reuse_plan = false;
    /// Check that the ranks holding a replicated array (a shard whose box is
    /// the whole array, as add_replicated() adds) hold the same bytes: each
    /// such rank hashes its copy (XXH3, one read of it) while planning, and
    /// the coordinator compares the digests before the commit; a difference
    /// fails the save with error::Mismatch naming the array and two ranks.
    /// Only one copy is stored, so without the check the others' bytes are
    /// never looked at. Host memory, and a planner that stores replicas once
    /// (SavePlanner::stores_replicas_once: DefaultSavePlanner) only.
    bool check_replicas = true;
    /// Custom planner; default (unset): DefaultSavePlanner, which Cairn then
    /// also plans on columns (SavePlanner::columnar).
    std::shared_ptr<SavePlanner> planner;
    /// Custom storage; default: chosen by `layout`.
    std::shared_ptr<StorageWriter> storage;
};

/// Options of load().
struct LoadOptions {
    /// Storage layout; ignored when `storage` is given.
    Layout layout = Layout::automatic;
    /// Allow keys present on one side only (state or checkpoint); they are
    /// reported in LoadResult instead of raising error::NotFound.
    bool partial = false;
    /// Keys of the state that the checkpoint may lack: exact names, or
    /// prefixes ending in '.' ("optimizer." for every key under it). They
    /// are reported in LoadResult::missing and left untouched. Without
    /// `partial`, only these may be missing; with `partial`, a non-empty list
    /// also restricts which state keys may be missing, so that a misspelt
    /// key fails with error::NotFound instead of passing silently (the
    /// checkpoint's keys the state does not ask for are still skipped).
    /// Per rank, like `partial`.
    std::vector<std::string> may_be_missing;
    /// Verify the checksums of every block read (a mismatch throws
    /// error::IntegrityError on every rank).
    bool verify_checksums = true;
    /// Bytes of host memory per rank for read buffers; also the most bytes
    /// one read call moves. Every block read is verified before load returns.
    std::size_t staging_bytes = std::size_t(64) << 20;
    /// Cooperative reads: when several ranks need bytes of the same
    /// checksum block (replicated arrays, 1 -> M loads, blocks split
    /// between ranks), one of them reads and verifies it and sends the
    /// others their parts over MPI, so that each needed block is read from
    /// storage once per load, by one rank. The blocks shared are spread over
    /// the ranks that need them, balancing bytes; the exchange runs in
    /// rounds of at most `staging_bytes` of buffers per rank. Both built-in
    /// layouts; a custom `storage` reads as usual. Every rank passes the
    /// same value (else error::Mismatch on every rank). Off (the default): each rank reads everything it needs
    /// itself. Within one node the page cache already serves the ranks'
    /// repeated reads of a block, and the exchange costs more than it saves
    /// (docs/BENCHMARKS.md); across nodes each repeated read goes to storage.
    bool cooperative = false;
    /// Per-rank layout: MPI-IO hints of the .distcp files.
    PerRankTuning per_rank;
    /// Container layout: MPI-IO hints, file locking, metadata cache.
    ContainerTuning container;
    /// Called on every rank with its own progress through each phase of a
    /// load (Phase::plan, Phase::read) or verify (Phase::plan,
    /// Phase::verify); cairn/log.hpp. Empty: none.
    ProgressCallback progress;
    std::shared_ptr<LoadPlanner> planner;
    std::shared_ptr<StorageReader> storage;
};

/// What save() reports (the same on every rank).
struct SaveResult {
    std::uint64_t bytes_written = 0; ///< all ranks, data only
    std::size_t entries = 0;
    double seconds = 0.0;
    bool plan_reused = false;        ///< the previous save's global plan was reused (SaveOptions::reuse_plan)
    /// This rank: bytes of its local plan sent to the coordinator (0 when
    /// the plan was reused). When every rank's plan is the same but for the
    /// boxes of its arrays, ranks but 0 send only those boxes.
    std::uint64_t plan_bytes_sent = 0;
};

/// What load() reports on this rank.
struct LoadResult {
    /// Bytes this rank read from storage. Without cooperative reads: at
    /// most, per stored chunk, the bytes its boxes need from it rounded out
    /// to whole checksum blocks (exactly them without verification), each
    /// block read once. With them, summed over all ranks: the blocks any
    /// rank needs, each read by one rank.
    std::uint64_t bytes_read = 0;
    std::uint64_t bytes_read_all = 0;   ///< all ranks (the same on every rank)
    /// Bytes this rank received from other ranks that read them for it
    /// (LoadOptions::cooperative); 0 otherwise.
    std::uint64_t bytes_received = 0;
    std::vector<std::string> missing;   ///< state keys the checkpoint lacks (partial)
    std::vector<std::string> skipped;   ///< checkpoint keys not asked for (partial)
    double seconds = 0.0;
};

/// Saves `state` as the checkpoint `checkpoint_id` (a directory for the
/// per-rank layout, one HDF5 file for the container layout; see Layout).
/// **Collective over `comm`**: every rank calls it with its own shards;
/// every rank returns the same result or throws the same exception
/// (cairn::Error subclasses) and no rank hangs on another's failure.
/// Nothing is committed unless every rank wrote its data; a failed save
/// leaves any earlier checkpoint at that path intact. Shards in CUDA device
/// memory are staged through pinned host buffers (SaveOptions::staging_bytes).
/// Phases plan, exchange, write, commit: reported to `options.progress` and,
/// with CAIRN_LOG=info|debug (cairn/log.hpp), on stderr.
SaveResult save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const SaveOptions& options = {});

/// Loads `checkpoint_id` into the buffers described by `state`, resharding
/// from whatever decomposition (and rank count) it was saved with. Each rank
/// reads only the byte ranges overlapping its boxes. **Collective over
/// `comm`**, same error contract as save(). Throws error::NotFound (missing
/// checkpoint or key), error::Mismatch (dtype / global shape; the message
/// names the entry and both values), error::FormatError, error::ReadError.
/// Phases plan, read: reported to `options.progress` and logged as save's.
LoadResult load(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options = {});

/// What verify() found. The same on every rank.
struct VerifyReport {
    std::uint64_t chunks = 0;            ///< chunks read
    std::uint64_t bytes = 0;             ///< bytes read and checked
    bool checksums = false;              ///< the checkpoint has checksums
    std::vector<std::string> problems;   ///< one line per problem (a bad chunk, scalar or blob):
                                         ///< entry, file, rank
    bool ok() const noexcept { return problems.empty(); }
};

/// Reads every stored chunk of `checkpoint_id` and checks every checksum
/// block, the chunks spread over the ranks of `comm` by size (each to the
/// rank with the fewest bytes so far; a rank keeps only the metadata of its
/// own chunks, and each entry's first). **Collective
/// over `comm`.** Damage is reported in the result (not thrown); an
/// unreadable or missing checkpoint throws as load() does. Phases plan,
/// verify: reported to `options.progress` and logged as save's.
VerifyReport verify(const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options = {});

/// Reads the metadata of a committed checkpoint of either layout (a regular
/// file is read as a container, anything else as a per-rank directory).
/// **Local** (call it on one rank or all). Throws error::NotFound when there
/// is no committed checkpoint, error::FormatError when it is damaged.
Metadata read_metadata(const std::string& checkpoint_id);

/// True when this build of Cairn stages CUDA device memory (CAIRN_USE_CUDA)
/// and a CUDA device is usable in this process. Local; asks CUDA once per
/// process (cudaGetDeviceCount) and creates no CUDA context.
bool cuda_device_available() noexcept;

/// The library version, "major.minor.patch".
const char* version() noexcept;

} // namespace cairn
