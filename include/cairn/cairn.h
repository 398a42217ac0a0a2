/* Cairn C API: distributed checkpoint/restart for MPI codes written in C (and
 * the base of the Fortran module `cairn`).
 *
 * C99. No C++ type crosses this interface and no exception escapes it.
 *
 * Conventions (docs/C_FORTRAN.md has the whole story):
 *
 * - Every function returns an `int` error code: CAIRN_SUCCESS (0) or one of
 *   the CAIRN_ERR_* codes below. The message of the most recent failing call
 *   on the calling thread is cairn_last_error() (thread-local; successful
 *   calls leave it alone).
 * - Objects are opaque handles created by `cairn_<object>_create(&h)` and
 *   released by `cairn_<object>_free(&h)`, which sets `h` to NULL and accepts
 *   NULL. A handle is not thread-safe: use one from one thread at a time.
 * - Collective calls (marked **Collective over `comm`**) return the same code
 *   and message on every rank of `comm`, so no rank hangs on another's
 *   failure. Their argument checks are agreed between the ranks too.
 * - MPI communicators are passed as MPI_Comm; the Fortran module converts
 *   its handles (integer or type(MPI_Comm)) with MPI_Comm_f2c.
 * - Arrays are described C-style: extents, offsets and strides are given
 *   outermost dimension first (row-major), strides in elements.
 * - Pointers handed to cairn_state_add_* are borrowed, not copied: the
 *   memory must stay valid until the state handle is freed (or at least over
 *   every save and load that uses it). Save reads it, load writes it.
 */
#ifndef CAIRN_CAIRN_H
#define CAIRN_CAIRN_H

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------ */

/** Error codes returned by every function. Each cairn::Error of
 *  <cairn/errors.hpp> is the code of its class (cairn::Error::Kind holds
 *  the same values: 1 to 8, OTHER for a plain cairn::Error, INTERNAL for
 *  error::Internal); NO_MEMORY and INTERNAL also stand for std::bad_alloc
 *  and any other exception. Values are stable. */
enum cairn_error_code {
    CAIRN_SUCCESS = 0,
    CAIRN_ERR_USAGE = 1,      /**< the caller used the API wrongly (error::WrongAPIUsage) */
    CAIRN_ERR_MISMATCH = 2,   /**< state and checkpoint (or ranks) disagree: dtype, shape, keys */
    CAIRN_ERR_READ = 3,       /**< reading a checkpoint failed */
    CAIRN_ERR_WRITE = 4,      /**< writing a checkpoint failed */
    CAIRN_ERR_FORMAT = 5,     /**< stored bytes are not what Cairn wrote */
    CAIRN_ERR_NOT_FOUND = 6,  /**< no such checkpoint, or no such entry */
    CAIRN_ERR_INTEGRITY = 7,  /**< stored data does not match its checksum */
    CAIRN_ERR_CONCURRENT = 8, /**< another job writes or replaced the checkpoint path */
    CAIRN_ERR_OTHER = 64,     /**< any other Cairn error */
    CAIRN_ERR_NO_MEMORY = 65, /**< out of memory */
    CAIRN_ERR_INTERNAL = 66   /**< a bug inside Cairn: error::Internal, or any other exception */
};

/** The message of the most recent failing call on this thread ("" if none).
 *  The pointer stays valid until the next failing call on this thread. Local. */
const char* cairn_last_error(void);

/** The code of the most recent failing call on this thread (CAIRN_SUCCESS if
 *  none). Local. */
int cairn_last_error_code(void);

/** Forgets the last error of this thread. Local. */
void cairn_clear_error(void);

/** The name of an error code ("CAIRN_ERR_USAGE"), "CAIRN_ERR_UNKNOWN" for
 *  other values. Static storage. Local. */
const char* cairn_error_name(int code);

/** The library version, "major.minor.patch". Static storage. Local. */
const char* cairn_version(void);

/* ---- element types and entry kinds --------------------------------------- */

/** Element types; the values are Cairn's on-disk dtype codes (docs/FORMAT.md). */
typedef enum cairn_dtype {
    CAIRN_F16 = 0,  /**< IEEE binary16, as uint16_t bits */
    CAIRN_BF16 = 1, /**< bfloat16, as uint16_t bits */
    CAIRN_F32 = 2,  /**< float */
    CAIRN_F64 = 3,  /**< double */
    CAIRN_I8 = 4,
    CAIRN_I16 = 5,
    CAIRN_I32 = 6,
    CAIRN_I64 = 7,
    CAIRN_U8 = 8,
    CAIRN_U16 = 9,
    CAIRN_U32 = 10,
    CAIRN_U64 = 11,
    CAIRN_BOOL = 12 /**< one byte, 0 or 1 (C99 _Bool) */
} cairn_dtype_t;

/* Functions taking a dtype take it as an `int` holding a cairn_dtype_t value:
 * an invalid code (say 99) is refused with CAIRN_ERR_USAGE, "invalid dtype
 * code 99 (...)", and never converted to the enum. */

/** Size of one element of `dtype` in bytes; 0 for an invalid code. Local. */
size_t cairn_dtype_size(int dtype);

/** Kinds of stored entries (metadata). */
enum cairn_kind { CAIRN_KIND_ARRAY = 0, CAIRN_KIND_BYTES = 1, CAIRN_KIND_SCALAR = 2, CAIRN_KIND_STRING = 3 };

/** Most dimensions an array may have in this API. */
#define CAIRN_MAX_NDIM 32

/* ---- state dict ---------------------------------------------------------- */

/** A state dict: what this rank saves and loads (cairn::StateDict). */
typedef struct cairn_state cairn_state_t;

/** Creates an empty state dict in `*state`. Local. */
int cairn_state_create(cairn_state_t** state);

/** Frees `*state` (NULL is fine) and sets it to NULL. Local. */
int cairn_state_free(cairn_state_t** state);

/** Number of entries added so far (each box of an array counts). Local. */
int cairn_state_size(const cairn_state_t* state, size_t* size);

/** Adds this rank's box of a global N-d array. Local.
 *
 *  `ndim` (0..CAIRN_MAX_NDIM) dimensions, outermost first: the array has
 *  `global_shape`; this rank holds the box starting at `offsets` (0-based)
 *  with extents `shape`. `data` points at the box's first element; element
 *  (k0, k1, ...) of the box is at `data + (k0*strides[0] + k1*strides[1] + ...)
 *  * cairn_dtype_size(dtype)`. `strides == NULL` means dense row-major; larger
 *  strides describe a window into a larger local array (ghost cells are
 *  neither saved nor overwritten). Strides are >= 0, in elements.
 *  Several ranks holding the same box hold a replicated array, stored once.
 *  Called again with the name of an array already added, adds another box
 *  of it (its own `data`, `strides`): a rank may hold any number of boxes of
 *  one array, of the same dtype and global shape. Saved boxes must be
 *  disjoint (on a rank and across ranks, replicas excepted); load boxes may
 *  overlap. A rank without any box of an array adds an empty one (`shape`
 *  of zeros, `data` NULL).
 *  Returns CAIRN_ERR_USAGE for an empty name or one taken by another kind of
 *  entry, another dtype or global shape than the array's boxes added
 *  before, an inconsistent box or a NULL `data` for a non-empty box. */
int cairn_state_add_array(cairn_state_t* state, const char* name, int dtype, int ndim,
                          const int64_t* global_shape, const int64_t* offsets, const int64_t* shape, void* data,
                          const int64_t* strides);

/** Like cairn_state_add_array, for memory a CUDA device can access
 *  (cudaMalloc, managed or page-locked host memory; from Fortran, e.g. a
 *  CUDA Fortran `device` array or OpenACC's acc_deviceptr): saves and loads
 *  stage it through page-locked host buffers, in both layouts. Call
 *  cudaSetDevice before. Local. Returns CAIRN_ERR_USAGE as
 *  cairn_state_add_array does, and for plain pageable host memory where a
 *  device is present. Where this Cairn was built without CUDA, or no device
 *  is usable, saves and loads of the array fail on every rank. Cairn copies
 *  on a non-blocking stream of its own: finish the work writing the memory
 *  (cudaDeviceSynchronize, or your stream's) before the save; a load's
 *  copies are complete when it returns. */
int cairn_state_add_device_array(cairn_state_t* state, const char* name, int dtype, int ndim,
                                 const int64_t* global_shape, const int64_t* offsets, const int64_t* shape, void* data,
                                 const int64_t* strides);

/** 1 when this Cairn was built with CUDA and a device is usable, else 0.
 *  Local; asks CUDA once per process and creates no CUDA context. */
int cairn_cuda_device_available(void);

/** Adds a whole dense row-major array of `shape`, held identically by every
 *  rank that adds it (replicated, stored once). Local. */
int cairn_state_add_replicated(cairn_state_t* state, const char* name, int dtype, int ndim,
                               const int64_t* shape, void* data);

/** Adds a scalar bound to `*value` (an object of `dtype`). Local. */
int cairn_state_add_scalar(cairn_state_t* state, const char* name, int dtype, void* value);

/** Adds a string held in `buffer` of `capacity` bytes. Save stores the
 *  NUL-terminated string in `buffer` (at most `capacity` bytes; no NUL within
 *  `capacity` means all of them). Load writes the stored string and a NUL; a
 *  stored string of `capacity` bytes or more fails the load with
 *  CAIRN_ERR_USAGE on every rank (cairn_metadata_entry_value gives the length
 *  beforehand). Local. */
int cairn_state_add_string(cairn_state_t* state, const char* name, char* buffer, size_t capacity);

/** Adds a byte blob in `data`, of `capacity` bytes, of which `*size` are in
 *  use. Save stores `*size` bytes (at most `capacity`). Load copies the stored
 *  blob into `data` and sets `*size`; a stored blob longer than `capacity`
 *  fails the load with CAIRN_ERR_USAGE on every rank. Blobs are replicated:
 *  every rank that saves one must hold the same bytes. Local. */
int cairn_state_add_bytes(cairn_state_t* state, const char* name, void* data, size_t capacity, size_t* size);

/* ---- rows that vary per rank (cairn::RowGroup) ------------------------- */

/** Gives the buffer of `rows` rows of the row array `array` (its name in
 *  the group) on load, once this rank's share is known and before anything
 *  is read: dense row-major, valid until cairn_load returns; NULL only for
 *  0 rows (NULL otherwise fails the load on every rank). */
typedef void* (*cairn_rows_resize_fn)(const char* array, uint64_t rows, void* user);

/** Chooses this rank's rows on load from the stored rows of the group
 *  (`global_rows`), this rank and the communicator's size; the counts of
 *  all ranks must add up to `global_rows`. */
typedef uint64_t (*cairn_rows_split_fn)(uint64_t global_rows, int rank, int size, void* user);

/** Adds the array `array` to the row group `group` of `state` (created on
 *  first use, entry names "<group>.<array>"): `rows` rows (this rank's; they
 *  vary per rank, 0 is fine) of `row_ndim` trailing dimensions `row_shape`,
 *  dense row-major at `data`. Save computes each rank's offset and the
 *  global rows (collectively); the arrays of a group must have the same rows
 *  on a rank. Load hands each rank a share of the stored rows (the even
 *  split unless cairn_state_rows_split_counts or cairn_state_rows_split
 *  says otherwise) and calls `resize(array, rows, user)` for the buffer
 *  (it may be NULL for a group only saved). Every rank adds the same groups
 *  and arrays. Local. Returns CAIRN_ERR_USAGE for a bad name, dtype or row
 *  shape, or a NULL `data` with rows. */
int cairn_state_add_rows(cairn_state_t* state, const char* group, const char* array, int dtype, uint64_t rows,
                         int row_ndim, const int64_t* row_shape, void* data, cairn_rows_resize_fn resize,
                         void* user);

/** On load, this rank takes `rows` rows of `group` (the counts of all ranks
 *  must add up to the stored rows, else the load fails with
 *  CAIRN_ERR_MISMATCH on every rank). Local. */
int cairn_state_rows_split_counts(cairn_state_t* state, const char* group, uint64_t rows);

/** On load, this rank takes `split(global_rows, rank, size, user)` rows
 *  of `group`; NULL: back to the even split (rank r of P gets N/P rows,
 *  one more for r < N % P). Local. */
int cairn_state_rows_split(cairn_state_t* state, const char* group, cairn_rows_split_fn split, void* user);

/** After a save or load of `state`: this rank's rows of `group`, the offset
 *  of its first row and the rows of all ranks (each pointer may be NULL).
 *  Local. */
int cairn_state_rows(const cairn_state_t* state, const char* group, uint64_t* local_rows, uint64_t* offset,
                     uint64_t* global_rows);

/* ---- options ------------------------------------------------------------- */

/** Storage layouts (cairn::Layout) of save and load options and of the
 *  checkpoints a manager writes (a manager reads both). */
enum cairn_layout {
    CAIRN_LAYOUT_PER_RANK = 0,  /**< a directory of .distcp files and metadata.h5 (manager: root/step_<N>/) */
    CAIRN_LAYOUT_CONTAINER = 1, /**< one parallel HDF5 file (manager: root/step_<N>.h5) */
    CAIRN_LAYOUT_AUTOMATIC = 2  /**< save and load options only (their default): from the checkpoint id, a
                                     container for ids ending in ".h5" or ".hdf5" or naming a regular file */
};

/** How cairn_async_save stages the data (cairn::AsyncStaging). */
enum cairn_async_staging {
    CAIRN_ASYNC_STAGING_FULL_COPY = 0, /**< copy it all to host memory before returning (default) */
    CAIRN_ASYNC_STAGING_BOUNDED = 1    /**< copy through the staging buffer while writing: host memory stays
                                            within the staging bytes; the data may change only once
                                            cairn_async_wait_staged returned */
};

/** HDF5 file locking of the container layout (cairn::FileLocking). */
enum cairn_file_locking {
    CAIRN_FILE_LOCKING_BEST_EFFORT = 0, /**< lock, unlocked where the file system has no locks (default) */
    CAIRN_FILE_LOCKING_ON = 1,          /**< lock; fail where the file system cannot */
    CAIRN_FILE_LOCKING_OFF = 2          /**< never lock */
};

/** What Cairn prints on stderr (cairn::LogLevel). */
enum cairn_log_level {
    CAIRN_LOG_OFF = 0,  /**< nothing (the default) */
    CAIRN_LOG_INFO = 1, /**< rank 0: a line per phase of each save, load and verify, with its time and rate */
    CAIRN_LOG_DEBUG = 2 /**< as INFO, and every rank its own time and bytes of each phase */
};

/** Sets this process's log level, overriding the environment variable
 *  CAIRN_LOG ("off", "info", "debug"). **Local**: ranks may differ.
 *  CAIRN_ERR_USAGE for another value. */
int cairn_set_log_level(int level);

/** Phases of a save or load (cairn::Phase), as progress callbacks get them. */
enum cairn_phase {
    CAIRN_PHASE_PLAN = 0,     /**< save: local plans; load: metadata read and broadcast, local plans */
    CAIRN_PHASE_EXCHANGE = 1, /**< save: plans to the coordinator, global plan, final plans back */
    CAIRN_PHASE_WRITE = 2,    /**< save: every rank writes its data */
    CAIRN_PHASE_COMMIT = 3,   /**< save: write results to the coordinator, which commits */
    CAIRN_PHASE_READ = 4      /**< load: every rank reads what it needs */
};

/** A progress callback (cairn::ProgressCallback): `done` and `total` are this
 *  rank's bytes of the data phase (write, read) done so far and in all
 *  (`total` 0 for the other phases); `user` as given to the setter. Called on
 *  **every rank** with its own progress, on the thread that runs the phase
 *  (the caller's; cairn_async_save's background thread for write and
 *  commit): once when each phase begins (done = 0), as data moves (per-rank
 *  layout: after each item; container layout: at the phase's ends), and once
 *  when the phase ends on this rank (done = total); `done` never decreases
 *  within a phase. It must be cheap and must not call Cairn or MPI on the
 *  same communicator. It returns 0 to go on; anything else cancels the save
 *  or load: it fails on every rank with CAIRN_ERR_OTHER, "progress callback
 *  returned <n> in phase '<phase>'", at the end of that phase at the latest,
 *  and a cancelled save leaves the last committed checkpoint as it was. At
 *  the end of the commit phase the checkpoint is committed: the return value
 *  is then ignored. */
typedef int (*cairn_progress_fn)(int phase, uint64_t done, uint64_t total, void* user);

/** Options of cairn_save (cairn::SaveOptions); defaults as in C++. The
 *  setters of save and load options are **local**: they record the value
 *  (refusing, with CAIRN_ERR_USAGE, only what they can tell alone: a value
 *  out of range, a NULL handle, a hint MPI cannot hold); the save or load
 *  that gets the options uses them. */
typedef struct cairn_save_options cairn_save_options_t;
int cairn_save_options_create(cairn_save_options_t** options);
int cairn_save_options_free(cairn_save_options_t** options);
/** Make data and metadata durable before commit (default 1). */
int cairn_save_options_set_fsync(cairn_save_options_t* options, int fsync);
/** Replace a committed checkpoint at the same path (default 0). */
int cairn_save_options_set_overwrite(cairn_save_options_t* options, int overwrite);
/** Compare the copies of replicated arrays (whole-array shards) between the
 *  ranks that hold them; a difference fails the save with CAIRN_ERR_MISMATCH
 *  (default 1; SaveOptions::check_replicas). */
int cairn_save_options_set_check_replicas(cairn_save_options_t* options, int check);
/** Number of data files per rank, >= 1 (default 1); with grouped files
 *  (cairn_save_options_set_data_files), per group of ranks. */
int cairn_save_options_set_files_per_rank(cairn_save_options_t* options, int files_per_rank);
/** cairn_save_options_set_data_files: one data file per rank (the default). */
#define CAIRN_FILES_PER_RANK 0
/** cairn_save_options_set_data_files: one data file per node (the ranks that
 *  share memory write one file together). */
#define CAIRN_FILES_PER_NODE (-1)
/** Which ranks share a data file of the per-rank layout
 *  (PerRankTuning::files): CAIRN_FILES_PER_RANK (default),
 *  CAIRN_FILES_PER_NODE, or M >= 1: M files in all, the ranks in M
 *  contiguous groups. Anything else: CAIRN_ERR_USAGE. */
int cairn_save_options_set_data_files(cairn_save_options_t* options, int files);
/** Alignment of large chunks in their file, a power of two or 0 (default 4096). */
int cairn_save_options_set_alignment(cairn_save_options_t* options, size_t alignment);
/** Bytes of host staging memory per rank (default 64 MiB). */
int cairn_save_options_set_staging_bytes(cairn_save_options_t* options, size_t staging_bytes);
/** With fsync: bytes per file written but not yet on the device while the
 *  save goes on (early writeback, Linux sync_file_range; default 64 MiB;
 *  0: off; see SaveOptions::writeback_bytes). */
int cairn_save_options_set_writeback_bytes(cairn_save_options_t* options, size_t writeback_bytes);
/** Keep the global plan for the next save and reuse the kept one when only
 *  data, scalar and string values and blob contents changed (default 0; see
 *  SaveOptions::reuse_plan). It takes effect only when every rank sets it. */
int cairn_save_options_set_reuse_plan(cairn_save_options_t* options, int reuse_plan);
/** CAIRN_LAYOUT_AUTOMATIC (default), CAIRN_LAYOUT_PER_RANK or CAIRN_LAYOUT_CONTAINER. */
int cairn_save_options_set_layout(cairn_save_options_t* options, int layout);
/** Bytes per checksum block (default 1 MiB); 0: no checksums. */
int cairn_save_options_set_checksum_block(cairn_save_options_t* options, uint64_t checksum_block);
/** How cairn_async_save stages: CAIRN_ASYNC_STAGING_FULL_COPY (default) or
 *  CAIRN_ASYNC_STAGING_BOUNDED. */
int cairn_save_options_set_async_staging(cairn_save_options_t* options, int async_staging);
/** Calls `callback(phase, done, total, user)` as the save goes on (see
 *  cairn_progress_fn); a NULL callback: none (default). */
int cairn_save_options_set_progress(cairn_save_options_t* options, cairn_progress_fn callback, void* user);

/** An MPI-IO hint given to MPI_File_open of the per-rank layout's .distcp
 *  files (cairn::PerRankTuning), e.g. "striping_factor" "1" on Lustre; as
 *  cairn_save_options_set_container_hint: a key set again gets the new
 *  value, a NULL value removes it, the same refusals. With CAIRN_LOG=debug
 *  (or cairn_set_log_level), every file opened with hints prints what the MPI
 *  library reports for them, on either layout. */
int cairn_save_options_set_per_rank_hint(cairn_save_options_t* options, const char* key, const char* value);

/** The container layout's settings (cairn::ContainerTuning), on save options
 *  and load options alike. An MPI-IO hint given to the container's file
 *  (e.g. "striping_factor" "16", "striping_unit" "1048576", "cb_nodes" "8");
 *  a key set again gets the new value, a NULL value removes it. Hints the MPI
 *  library does not know are ignored by it. CAIRN_ERR_USAGE, naming the hint,
 *  for a NULL or empty key, or a key or value longer than MPI allows
 *  (MPI_MAX_INFO_KEY - 1, MPI_MAX_INFO_VAL - 1). */
int cairn_save_options_set_container_hint(cairn_save_options_t* options, const char* key, const char* value);
/** CAIRN_FILE_LOCKING_BEST_EFFORT (default), _ON or _OFF. */
int cairn_save_options_set_container_file_locking(cairn_save_options_t* options, int file_locking);
/** Datasets of fewer bytes are transferred independently (default 1 MiB;
 *  0: every dataset with several writers collectively). */
int cairn_save_options_set_container_independent_below(cairn_save_options_t* options, size_t bytes);
/** Collective metadata reads and writes (default 1). */
int cairn_save_options_set_container_collective_metadata(cairn_save_options_t* options, int collective);
/** Initial size of HDF5's metadata cache (default 32 MiB). */
int cairn_save_options_set_container_metadata_cache_bytes(cairn_save_options_t* options, size_t bytes);

/** Options of cairn_load (cairn::LoadOptions); defaults as in C++. */
typedef struct cairn_load_options cairn_load_options_t;
int cairn_load_options_create(cairn_load_options_t** options);
int cairn_load_options_free(cairn_load_options_t** options);
/** Allow keys on one side only; they are reported instead of failing (default 0). */
int cairn_load_options_set_partial(cairn_load_options_t* options, int partial);
/** Adds a state key the checkpoint may lack (an exact name, or a prefix
 *  ending in '.'): it is reported as missing instead of failing. Without
 *  partial, only such keys may be missing; with partial, any key added here
 *  restricts which may be (a misspelt key then fails). LoadOptions::may_be_missing. */
int cairn_load_options_add_may_be_missing(cairn_load_options_t* options, const char* key);
/** Bytes of host memory per rank for read buffers (default 64 MiB). */
int cairn_load_options_set_staging_bytes(cairn_load_options_t* options, size_t staging_bytes);
/** CAIRN_LAYOUT_AUTOMATIC (default), CAIRN_LAYOUT_PER_RANK or CAIRN_LAYOUT_CONTAINER. */
int cairn_load_options_set_layout(cairn_load_options_t* options, int layout);
/** Check the checksums of what is read (default 1); a mismatch fails the
 *  load with CAIRN_ERR_INTEGRITY. */
int cairn_load_options_set_verify_checksums(cairn_load_options_t* options, int verify);
/** Cooperative reads (LoadOptions::cooperative, off by default): when
 *  several ranks need bytes of the same checksum block, one of them reads
 *  and verifies it and sends the others their parts over MPI, so that each
 *  needed block is read from storage once per load. Every rank passes the
 *  same value (else CAIRN_ERR_MISMATCH on every rank). Worth it across
 *  nodes; within one node the page cache already serves repeated reads. */
int cairn_load_options_set_cooperative(cairn_load_options_t* options, int cooperative);
/** As cairn_save_options_set_progress, for loads. */
int cairn_load_options_set_progress(cairn_load_options_t* options, cairn_progress_fn callback, void* user);
/** The per-rank layout's MPI-IO hints, as cairn_save_options_set_per_rank_hint. */
int cairn_load_options_set_per_rank_hint(cairn_load_options_t* options, const char* key, const char* value);
/** The container layout's settings, as cairn_save_options_set_container_*. */
int cairn_load_options_set_container_hint(cairn_load_options_t* options, const char* key, const char* value);
int cairn_load_options_set_container_file_locking(cairn_load_options_t* options, int file_locking);
int cairn_load_options_set_container_independent_below(cairn_load_options_t* options, size_t bytes);
int cairn_load_options_set_container_collective_metadata(cairn_load_options_t* options, int collective);
int cairn_load_options_set_container_metadata_cache_bytes(cairn_load_options_t* options, size_t bytes);

/* ---- save and load ------------------------------------------------------- */

/** What cairn_save reports (the same on every rank). */
typedef struct cairn_save_result {
    uint64_t bytes_written; /**< all ranks, data only */
    uint64_t entries;
    double seconds;
    int plan_reused; /**< 1: the previous save's global plan was reused (cairn_save_options_set_reuse_plan) */
} cairn_save_result_t;

/** What cairn_load reports on this rank. */
typedef struct cairn_load_result {
    uint64_t bytes_read; /**< this rank */
    uint64_t missing;    /**< state keys the checkpoint lacks (partial loads), see cairn_state_missing */
    uint64_t skipped;    /**< checkpoint keys not asked for (partial loads), see cairn_state_skipped */
    double seconds;
    uint64_t bytes_received; /**< this rank, from other ranks' cooperative reads (0 without them) */
} cairn_load_result_t;

/** Saves `state` as the checkpoint `checkpoint_id` (a directory). `options`
 *  and `result` may be NULL. **Collective over `comm`**: every rank returns
 *  the same code and message. Nothing is committed unless every rank wrote
 *  its data; a failed save leaves an earlier checkpoint at that path intact. */
int cairn_save(cairn_state_t* state, const char* checkpoint_id, MPI_Comm comm, const cairn_save_options_t* options,
               cairn_save_result_t* result);

/** Loads `checkpoint_id` into the memory described by `state`, resharding
 *  from whatever decomposition and rank count it was saved with. `options`
 *  and `result` may be NULL. **Collective over `comm`**, same error contract
 *  as cairn_save: CAIRN_ERR_NOT_FOUND (no checkpoint, missing key),
 *  CAIRN_ERR_MISMATCH (dtype, global shape, kind), CAIRN_ERR_FORMAT,
 *  CAIRN_ERR_READ, CAIRN_ERR_USAGE. */
int cairn_load(cairn_state_t* state, const char* checkpoint_id, MPI_Comm comm, const cairn_load_options_t* options,
               cairn_load_result_t* result);

/** Name number `index` of the state keys the last (partial) load of `state`
 *  did not find in the checkpoint; valid until the next load or free. Local. */
int cairn_state_missing(const cairn_state_t* state, size_t index, const char** name);

/** Name number `index` of the checkpoint keys the last (partial) load of
 *  `state` did not ask for; valid until the next load or free. Local. */
int cairn_state_skipped(const cairn_state_t* state, size_t index, const char** name);

/** What cairn_verify reports (the same on every rank). */
typedef struct cairn_verify_result {
    uint64_t chunks; /**< stored chunks read */
    uint64_t bytes;  /**< bytes read and checked */
    int checksums;   /**< 1: the checkpoint has checksums (0: only read) */
    size_t problems; /**< damaged chunks (0: intact) */
} cairn_verify_result_t;

/** Reads every stored chunk of `checkpoint_id` and checks every checksum
 *  block (cairn::verify), the chunks spread over the ranks of `comm`.
 *  **Collective over `comm`.** Returns CAIRN_SUCCESS when it is intact;
 *  CAIRN_ERR_INTEGRITY on every rank when a chunk is damaged, the message
 *  holding one line per damaged chunk (entry, file, bytes, rank); a missing
 *  or unreadable checkpoint as cairn_load. `result` (may be NULL) is filled
 *  in both of the first two cases. `options` may be NULL; its staging bytes,
 *  container settings and progress callback apply. */
int cairn_verify(const char* checkpoint_id, MPI_Comm comm, const cairn_load_options_t* options,
                 cairn_verify_result_t* result);

/* ---- metadata of a committed checkpoint ---------------------------------- */

/** The metadata of a committed checkpoint (cairn::Metadata). */
typedef struct cairn_metadata cairn_metadata_t;

/** Reads the metadata of `checkpoint_id`. **Local** (call it on one rank or
 *  all). CAIRN_ERR_NOT_FOUND when there is no committed checkpoint. */
int cairn_metadata_read(const char* checkpoint_id, cairn_metadata_t** metadata);
int cairn_metadata_free(cairn_metadata_t** metadata);

/** Format version, ranks of the saving communicator, number of entries. Any
 *  output pointer may be NULL. Local. */
int cairn_metadata_info(const cairn_metadata_t* metadata, int* format_version, int* world_size, size_t* num_entries);

/** Library version that wrote it, layout ("distcp"), creation time (UTC,
 *  ISO 8601). Any output pointer may be NULL; strings live as long as the
 *  handle. Local. */
int cairn_metadata_strings(const cairn_metadata_t* metadata, const char** library_version, const char** layout,
                           const char** created);

/** Entry number `index` (0-based, sorted by name): its name, kind
 *  (enum cairn_kind), dtype (cairn_dtype_t; arrays and scalars) and number of
 *  dimensions (arrays: the rank; bytes: 1; scalars, strings: 0). Any output
 *  pointer may be NULL. Local. */
int cairn_metadata_entry(const cairn_metadata_t* metadata, size_t index, const char** name, int* kind, int* dtype,
                         int* ndim);

/** The index of the entry `name`; CAIRN_ERR_NOT_FOUND when absent. Local. */
int cairn_metadata_find(const cairn_metadata_t* metadata, const char* name, size_t* index);

/** Writes the `ndim` extents of entry `index` (outermost first) to
 *  `global_shape` (bytes: its length). Local. */
int cairn_metadata_entry_shape(const cairn_metadata_t* metadata, size_t index, int64_t* global_shape);

/** The stored value of a scalar (its raw bytes, native byte order) or string
 *  entry (its characters, not NUL-terminated) and its size in bytes;
 *  CAIRN_ERR_USAGE for arrays and bytes. Local. */
int cairn_metadata_entry_value(const cairn_metadata_t* metadata, size_t index, const void** value, size_t* size);

/* ---- asynchronous save --------------------------------------------------- */

/** A save running in the background (cairn::AsyncSave). */
typedef struct cairn_async cairn_async_save_t;

/** Starts saving `state` as `checkpoint_id` and returns with `*handle` as
 *  soon as this rank's data is copied out of the caller's memory (staged:
 *  with the default options everything is copied to host memory before this
 *  returns); writing and the commit run on a background thread over a
 *  duplicate of `comm`. `options` may be NULL.
 *
 *  **Collective over `comm`.** Needs MPI initialized with
 *  MPI_THREAD_MULTIPLE (MPI_Init_thread): otherwise every rank returns
 *  CAIRN_ERR_USAGE, "... async_save needs MPI initialized with
 *  MPI_THREAD_MULTIPLE (MPI_Init_thread); this process has
 *  MPI_THREAD_SINGLE". Errors of the arguments and of planning (existing
 *  checkpoint without overwrite, bad state...) are returned here, the same on
 *  every rank, with `*handle` NULL; later errors (writing, commit) come from
 *  cairn_async_wait_committed / cairn_async_test_committed.
 *
 *  A save started while an earlier async save of this process is still
 *  running first waits for that one (saves never interleave); so do
 *  cairn_save and the checkpoint manager. Until the save is staged, calls
 *  that change `state` (adding entries, saving, loading, freeing) wait for
 *  it; after that the state may be used and freed while the save goes on.
 *  MPI_Finalize waits for a save still running. */
int cairn_async_save(cairn_state_t* state, const char* checkpoint_id, MPI_Comm comm,
                     const cairn_save_options_t* options, cairn_async_save_t** handle);

/** Waits until this rank's data is staged: from then on the caller may
 *  modify the memory the state describes. Returns CAIRN_SUCCESS, or the
 *  error of a save that failed before its data was staged. **Local**: the
 *  ranks may see such an error at different times; the agreed error comes
 *  from cairn_async_wait_committed. */
int cairn_async_wait_staged(cairn_async_save_t* handle);

/** Sets `*flag` to 1 when the data is staged (and then returns what
 *  cairn_async_wait_staged would), else to 0 and returns CAIRN_SUCCESS.
 *  Never blocks. Local. */
int cairn_async_test_staged(cairn_async_save_t* handle, int* flag);

/** Waits until the save is committed (durable, metadata in place) or failed,
 *  and for its background thread to end; returns the save's code (message:
 *  cairn_last_error()), the same code and message on every rank, and fills
 *  `*result` (may be NULL; the same on every rank) on success. May be called
 *  again: it returns the same. Local call (it waits for the background
 *  threads of all ranks, which need nothing from the callers). */
int cairn_async_wait_committed(cairn_async_save_t* handle, cairn_save_result_t* result);

/** Sets `*flag` to 1 when the save is committed or failed (and then returns
 *  what cairn_async_wait_committed would, filling `*result`), else to 0 and
 *  returns CAIRN_SUCCESS. Local; blocks at most for a finished save's
 *  background thread to end. */
int cairn_async_test_committed(cairn_async_save_t* handle, int* flag, cairn_save_result_t* result);

/** Frees `*handle` (NULL is fine) and sets it to NULL. A save that is still
 *  running is **waited for** (as cairn_async_wait_committed, its error not
 *  reported: call that first to see it): freeing never cancels a save, never
 *  leaves a thread running behind a freed handle and never crashes. Local. */
int cairn_async_free(cairn_async_save_t** handle);

/* ---- checkpoint manager ---------------------------------------------------- */

/** Options of a checkpoint manager (cairn::ManagerOptions). */
typedef struct cairn_manager_options cairn_manager_options_t;
int cairn_manager_options_create(cairn_manager_options_t** options);
int cairn_manager_options_free(cairn_manager_options_t** options);
/** Keep the `keep_last` newest checkpoints (by step); 0 keeps all (default 2). */
int cairn_manager_options_set_keep_last(cairn_manager_options_t* options, int keep_last);
/** Also keep every checkpoint whose step is a multiple of `keep_every`; 0: none (default). */
int cairn_manager_options_set_keep_every(cairn_manager_options_t* options, int64_t keep_every);
/** Save in the background (cairn_async_save; needs MPI_THREAD_MULTIPLE) (default 0). */
int cairn_manager_options_set_async(cairn_manager_options_t* options, int async);
/** CAIRN_LAYOUT_PER_RANK (default) or CAIRN_LAYOUT_CONTAINER. */
int cairn_manager_options_set_layout(cairn_manager_options_t* options, int layout);
/** Options of every save (copied; their overwrite and layout are the manager's). */
int cairn_manager_options_set_save_options(cairn_manager_options_t* options, const cairn_save_options_t* save_options);

/* The node-local level (cairn::LocalLevel; docs/API.md "Node-local level"):
 * with a local directory, cairn_manager_save writes each step into
 * node-local storage (plus its redundancy data, exchanged between nodes) and
 * every flush_every-th step, or cairn_manager_flush, also drains it into the
 * root in the background; cairn_manager_restore_latest takes the newest step
 * of any level. The setters are local; the manager checks the values on
 * every rank when it is created. */
/** The node-local directory, each node's own storage under the same name
 *  (a RAM disk or NVMe path); "%n" in it becomes the node's index. NULL or
 *  "": no node-local level (the default). */
int cairn_manager_options_set_local_dir(cairn_manager_options_t* options, const char* dir);
/** What loss of node-local storage a step survives: "none" (the default),
 *  "partner" (each node's files also on the next node) or "xor" / "xor:K"
 *  (XOR parity over groups of K >= 2 nodes, 4 by default).
 *  CAIRN_ERR_USAGE naming the text otherwise. */
int cairn_manager_options_set_redundancy(cairn_manager_options_t* options, const char* redundancy);
/** Node-local steps kept on each node, the newest ones, >= 1 (default 2). */
int cairn_manager_options_set_local_keep_last(cairn_manager_options_t* options, int keep_last);
/** Every flush_every-th save is also drained to the root; 0: only by
 *  cairn_manager_flush (default 10). */
int cairn_manager_options_set_flush_every(cairn_manager_options_t* options, int flush_every);
/** 0 (the default): a node is the ranks that share memory
 *  (MPI_COMM_TYPE_SHARED); K > 0: every K consecutive ranks form a node (to
 *  try several nodes on one host). */
int cairn_manager_options_set_ranks_per_node(cairn_manager_options_t* options, int ranks_per_node);

/** Manages the checkpoints of a run in the directory `root`
 *  (cairn::CheckpointManager): root/step_<N> per step, root/LATEST naming the
 *  newest committed one, retention. */
typedef struct cairn_manager cairn_manager_t;

/** Creates a manager of `root` over `comm` in `*manager` (NULL on error).
 *  `options` may be NULL (the defaults: keep_last 2, synchronous, per-rank
 *  layout). Touches nothing on disk; `root` is created by the first save.
 *  `comm` is not duplicated: it must stay valid until cairn_manager_free.
 *  **Collective over `comm`**: every rank gets the same code (e.g.
 *  CAIRN_ERR_USAGE for a NULL or empty root on any rank).
 *
 *  Every cairn_manager_* call below except cairn_manager_free is
 *  **collective over the manager's communicator**, called by every rank in
 *  the same order, and returns the same code, message and outputs on every
 *  rank. Output pointers may be NULL. Only a NULL manager handle fails
 *  locally (there is no communicator to agree on). With the async option,
 *  every call first settles the save in flight: waits for its commit, then
 *  updates LATEST and applies retention, and returns that save's error if it
 *  failed. */
int cairn_manager_create(const char* root, MPI_Comm comm, const cairn_manager_options_t* options,
                         cairn_manager_t** manager);

/** Saves `state` as the checkpoint of `step` (>= 0, the same on every rank;
 *  saving a step again replaces it). Synchronous manager: returns when it is
 *  committed, LATEST names it and retention removed what it does not keep;
 *  `*committed` = 1 and `*result` filled. Async manager: returns once the
 *  data is staged (the caller may modify it) with `*committed` = 0 and
 *  `*result` zeroed; the commit, LATEST and retention follow in the
 *  background and by the next manager call. A failed save leaves the
 *  committed checkpoints and LATEST as they were. */
int cairn_manager_save(cairn_manager_t* manager, int64_t step, cairn_state_t* state, int* committed,
                       cairn_save_result_t* result);

/** Settles the async save in flight, if any: `*saved` = 1 and `*result`
 *  filled when there was one (then committed), else 0. Returns its error
 *  if it failed. */
int cairn_manager_wait(cairn_manager_t* manager, int* saved, cairn_save_result_t* result);

/** The highest step with a committed, complete checkpoint in the root:
 *  `*found` = 1 and `*step`, or `*found` = 0 and `*step` = -1 when there is
 *  none (or no root). */
int cairn_manager_latest(cairn_manager_t* manager, int64_t* step, int* found);

/** Loads the newest checkpoint that loads into `state` (resharding to this
 *  communicator's decomposition): `*found` = 1 and `*step`; or `*found` = 0,
 *  `*step` = -1 and `state`'s memory untouched when there is none. A step
 *  whose load fails on damage (CAIRN_ERR_INTEGRITY, CAIRN_ERR_FORMAT,
 *  CAIRN_ERR_READ) is skipped with a warning on stderr (rank 0) naming it
 *  and why, and the next older one is tried; the error of the newest,
 *  naming every step tried, when none loads. Other errors (a state that does
 *  not fit) fail at once. See CheckpointManager::restore_latest. `options`
 *  may be NULL. */
int cairn_manager_restore_latest(cairn_manager_t* manager, cairn_state_t* state, const cairn_load_options_t* options,
                                 int64_t* step, int* found);

/** The steps of all committed, complete checkpoints in the root, ascending
 *  (the ones cairn_manager_latest chooses from). `*count` = how many there
 *  are; the first min(count, capacity) go to `steps`, which may be NULL when
 *  `capacity` is 0 (ask for the count first). Settles a save in flight
 *  first. */
int cairn_manager_steps(cairn_manager_t* manager, int64_t* steps, size_t capacity, size_t* count);

/** What interrupted saves left in the root: the new or old directory of an
 *  interrupted replacement, a container file never committed, a LATEST being
 *  replaced, a step directory without metadata; with a node-local level also
 *  in every node's directory (each node's leader looks, every rank gets the
 *  whole list). `*count` = how many; with
 *  `remove` nonzero, they are removed (committed checkpoints are never
 *  touched) and `*count` says how many it removed. Settles a save in flight
 *  first. Their paths and reasons: cairn_manager_leftover. */
int cairn_manager_leftovers(cairn_manager_t* manager, int remove, size_t* count);

/** Leftover `index` (0 <= index < count) of the last cairn_manager_leftovers
 *  call on this manager: its path (root/name) and why it is a leftover, in
 *  words. The strings belong to the manager and stay valid until its next
 *  cairn_manager_leftovers or cairn_manager_free. Local. */
int cairn_manager_leftover(const cairn_manager_t* manager, size_t index, const char** path, const char** reason);

/** Where a step was restored from (cairn_manager_last_restore). */
enum cairn_level {
    CAIRN_LEVEL_NONE = 0,       /**< nothing restored yet */
    CAIRN_LEVEL_NODE_LOCAL = 1, /**< node-local storage (files rebuilt from partner copies or parity, if any) */
    CAIRN_LEVEL_FILE_SYSTEM = 2 /**< the root on the parallel file system */
};

/** With a node-local level: starts draining the newest node-local step that
 *  the root lacks into the root, in the background (as cairn_manager_save
 *  does every flush_every saves): `*started` = 1 and `*step`, or
 *  `*started` = 0 and `*step` = -1 when there is nothing to drain. The drain
 *  is committed by the next manager call that settles, or by
 *  cairn_manager_wait. CAIRN_ERR_USAGE without a node-local level. */
int cairn_manager_flush(cairn_manager_t* manager, int64_t* step, int* started);

/** Which levels hold a step (cairn_manager_levels), as bits. */
enum cairn_step_levels {
    CAIRN_STEP_NODE_LOCAL = 1,   /**< loadable from node-local storage */
    CAIRN_STEP_NEEDS_REBUILD = 2, /**< node-local, but only once lost files are rebuilt */
    CAIRN_STEP_FILE_SYSTEM = 4   /**< a committed, complete checkpoint in the root */
};

/** The steps held by any level, ascending (CheckpointManager::levels):
 *  `*count` of them; the first min(count, capacity) go to `steps` and their
 *  CAIRN_STEP_* bits to `levels` (either may be NULL when `capacity` is 0).
 *  Every node reports what its storage holds. */
int cairn_manager_levels(cairn_manager_t* manager, int64_t* steps, int* levels, size_t capacity, size_t* count);

/** How the last successful cairn_manager_restore_latest of this manager
 *  restored: `*level` (enum cairn_level), `*step` (-1: none), `*rebuilt`
 *  the data files rebuilt from partner copies or XOR parity, `*bytes_moved`
 *  the bytes of data files sent between nodes before the load. Local; the
 *  same on every rank. */
int cairn_manager_last_restore(const cairn_manager_t* manager, int* level, int64_t* step, size_t* rebuilt,
                               uint64_t* bytes_moved);

/** Frees `*manager` (NULL is fine) and sets it to NULL. A save in flight is
 *  settled first (its commit waited for, then LATEST and retention by rank
 *  0) without any MPI call; an error of it is written to stderr by rank 0,
 *  so call cairn_manager_wait first to handle it. Local. */
int cairn_manager_free(cairn_manager_t** manager);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CAIRN_CAIRN_H */
