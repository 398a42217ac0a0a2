// Private: one writer per checkpoint path, and loads that notice a checkpoint
// replaced under them (docs/robustness.md, "Concurrent use of one path").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cairn::detail {

/// The lock file of a checkpoint path: `<path>.cairn-lock` beside it.
std::string lock_file_name(const std::string& checkpoint_path);

/// Suffix of lock files.
inline constexpr const char* lock_suffix = ".cairn-lock";

/// Whether a save holds the lock file `file` now (false where it cannot be
/// told: no such file, no locks). Local.
bool lock_held(const std::string& file);

/// A save's claim on its checkpoint path, held by the coordinator from the
/// global plan to the end of the save. It takes an exclusive lock on the
/// lock file (an open-file-description lock, fcntl F_OFD_SETLK; POSIX
/// record locks where there is none) and writes its owner into it (host,
/// pid, job, start time and a random token). Where the file system refuses
/// locks, it carries on unlocked: check() then still notices another save
/// that took the path over.
class PathLock {
public:
    /// Throws error::ConcurrentAccess naming the other owner when another
    /// process (or another save of this process) holds the lock, and
    /// error::WriteError when the lock file cannot be written. Takes nothing
    /// where the lock file cannot be created (the storage then reports why
    /// it cannot write there).
    explicit PathLock(const std::string& checkpoint_path);
    /// Removes the lock file (when it is still this save's) and releases it;
    /// then the directories it created for the lock file, where empty.
    ~PathLock();
    PathLock(const PathLock&) = delete;
    PathLock& operator=(const PathLock&) = delete;

    /// Before the commit: throws error::ConcurrentAccess when the lock file
    /// no longer names this save (another save took the path over where
    /// locks do not work).
    void check() const;
    /// Whether the lock is held (false: the file system refused locks).
    bool locked() const noexcept { return m_locked; }

private:
    std::string m_path;  // the checkpoint
    std::string m_file;  // its lock file
    std::string m_owner; // what this save wrote into it
    int m_fd = -1;
    bool m_locked = false;
    std::vector<std::string> m_created; // directories made for the lock file, deepest first
};

/// What identifies one committed checkpoint on disk: the device, inode,
/// modification time and size of its metadata file (per-rank) or of the
/// container. A replacement (an overwrite's rename) changes it.
struct CheckpointIdentity {
    std::string file; ///< the file it describes
    bool known = false;
    std::uint64_t dev = 0, ino = 0, mtime_ns = 0, size = 0;
};

/// The identity of the checkpoint at `path` (`container`: a container file,
/// else a per-rank directory's metadata.h5); known = false when there is none.
CheckpointIdentity checkpoint_identity(const std::string& path, bool container);

/// True when `seen` is known and its file is no longer the same (replaced,
/// removed or rewritten).
bool replaced(const CheckpointIdentity& seen);

} // namespace cairn::detail
