// Private: draining a committed node-local step into the file system
// (cairn::LocalLevel::flush_every, CheckpointManager::flush()), and the
// record of which levels hold which step.
#pragma once

#include "comm/protocol.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace cairn::detail {

/// How a durable drain (`fsync`) copies a file's bytes; without fsync it
/// always takes DrainCopy::kernel.
enum class DrainCopy {
    /// CAIRN_DRAIN_COPY from the environment (`direct` or `kernel`), else
    /// the default (DrainCopy::kernel: on a quiet node it drains faster;
    /// `direct` takes less processor time and memory bandwidth from the
    /// simulation: docs/BENCHMARKS.md, "Drain of a node-local step").
    automatic,
    /// copy_file_range, else sendfile, else pread/pwrite through a buffer,
    /// with early writeback (io/writeback.hpp): the kernel copies each page
    /// into the destination's page cache, then writes it back.
    kernel,
    /// The source mapped read-only and its 4096-byte-aligned part written
    /// from its pages with O_DIRECT, 8 MiB per write and 4 writes in flight
    /// per stream (Linux AIO), into space allocated first: no page-cache copy, and the
    /// CPU only issues I/O. The rest (the unaligned tail, or all of it where
    /// O_DIRECT or the mapping is refused) as DrainCopy::kernel.
    direct,
};

/// One rank's part of a drain: copies the data files this rank wrote of a
/// node-local step (`files`, relative names) from `src_dir` into `dst_dir`
/// (created when missing) on a background thread, which makes no MPI call.
/// A file of 64 MiB or more is copied in up to `streams` contiguous ranges
/// at once, one per 32 MiB, each by a thread of its own (the first by the
/// background thread): 0 takes CAIRN_DRAIN_STREAMS from the environment
/// (1 to 64), else 2; other values from 1 to 64 are taken as they are; a
/// value out of range (here or in the environment) is error::WrongAPIUsage.
/// Each file is written fully under a temporary name (`NAME.cairn-part`)
/// and, with `fsync`, made durable before it takes its name; a copy already
/// there is replaced; a failed or cancelled copy is removed. `dst_dir` is
/// either the checkpoint path itself (when no checkpoint is committed
/// there) or a staging directory beside it (e.g. `path + ".cairn-staging"`)
/// that commit_drain() swaps in.
class Drain {
public:
    Drain(std::string src_dir, std::string dst_dir, std::vector<std::string> files, bool fsync,
          DrainCopy copy = DrainCopy::automatic, int streams = 0);
    /// Asks the copy to stop and joins the thread (errors are dropped).
    ~Drain();
    Drain(const Drain&) = delete;
    Drain& operator=(const Drain&) = delete;

    /// Local, non-blocking: whether the copy ended (done or failed).
    bool done() const noexcept;
    /// Local: waits for the copy and returns the bytes copied, or throws its
    /// error (error::ReadError / error::WriteError naming the file).
    std::uint64_t wait();
    /// After wait(): of the bytes copied, those written with O_DIRECT.
    std::uint64_t direct_bytes() const noexcept;

private:
    struct State;
    std::unique_ptr<State> m_state;
    std::thread m_thread;
};

/// Collective over `c`: the directory every rank drains into for a step
/// that commit_drain() will commit as `path`, the same on every rank:
/// `path` when no checkpoint is committed there (what an interrupted save or
/// drain left in it, `__*.distcp`, `__*.distcp.cairn-part` and
/// `.metadata.h5.tmp`, removed), else `path + ".cairn-staging"` (removed
/// first), as a per-rank save chooses. The coordinator looks and prepares;
/// its error (error::WriteError when `path` exists and is no directory) is
/// thrown on every rank.
std::string drain_destination(const Comm& c, const std::string& path);

/// The data files of rank `rank` in the per-rank checkpoint directory `dir`
/// (`__<rank>_<k>.distcp`), sorted: what that rank drains. Local;
/// error::ReadError naming the directory when it cannot be listed.
std::vector<std::string> rank_data_files(const std::string& dir, int rank);

/// Collective over `c`, after every rank's Drain::wait() succeeded (the
/// caller agrees on errors first): the coordinator copies the step's
/// metadata file from `src_dir` (its node's copy of the node-local step)
/// into `dst_dir` and commits `dst_dir` as the checkpoint `path` exactly as a
/// per-rank save commits (temporary name, fsync, rename; a committed
/// checkpoint already at `path` is exchanged, never damaged). Throws the
/// coordinator's error on every rank (agree(), phase "drain commit"); on a
/// failure the staging `dst_dir` (or, when it is `path`, the temporary
/// metadata) is removed and the checkpoint previously at `path` is intact.
void commit_drain(const Comm& c, const std::string& src_dir, const std::string& dst_dir, const std::string& path,
                  bool fsync);

/// The record of a manager's levels in its root (`root/.cairn-levels`,
/// docs/FORMAT.md): written by the coordinator after every save (also a
/// failed node-local save), drain commit and retention; read by `cairn
/// steps ROOT`.
struct LevelRecord {
    struct Step {
        std::int64_t step = 0;
        bool node_local = false;  ///< committed on every node (one save's copy) when last known
        bool file_system = false; ///< committed in the root
        /// When committed on some nodes only: those nodes, ascending (the
        /// others lack it or hold a stale copy of another save); else empty.
        std::vector<int> partial;
    };
    std::string local_dir;  ///< LocalLevel::dir as given ("%n" kept)
    std::string redundancy; ///< Redundancy::str()
    int nodes = 0, ranks = 0;
    std::vector<std::string> hosts; ///< per node (empty in a record without them)
    std::vector<Step> steps; ///< ascending
};
/// root/.cairn-levels.
std::string level_record_path(const std::string& root);
/// Atomically replaces root/.cairn-levels (temporary file, rename; fsync
/// with `fsync`). error::WriteError naming the file.
void write_level_record(const std::string& root, const LevelRecord& record, bool fsync);
/// Reads root/.cairn-levels; false when there is none; error::FormatError
/// naming the file when it does not parse or lacks a field (steps out of
/// ascending order included), error::ReadError when it cannot be read.
bool read_level_record(const std::string& root, LevelRecord& record);

} // namespace cairn::detail
