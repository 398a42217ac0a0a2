// Private: the commit of a per-rank (distcp) checkpoint directory, shared by
// a per-rank save (DistcpWriter) and the drain of a node-local step
// (src/levels/drain.cpp).
#pragma once

#include <string>

namespace cairn::detail {

/// Commits the per-rank checkpoint whose data files and complete temporary
/// metadata (`write_dir/.metadata.h5.tmp`, made durable by the caller when
/// `fsync`) are in `write_dir`, as the checkpoint `path`. Coordinator only,
/// after every rank's data files are complete. With `fsync`, the directory
/// entries are made durable before the metadata is renamed to its final
/// name and after. When `write_dir` is not `path` (a staging directory
/// beside a committed checkpoint at `path`), the new checkpoint is swapped
/// in (renameat2 RENAME_EXCHANGE, else two renames) and the replaced one
/// removed afterwards (a failure to remove it is only reported on stderr).
/// On a throw nothing committed is lost: the checkpoint previously at
/// `path` (if any) is still there, and `write_dir` holds no committed
/// metadata (at most `.metadata.h5.tmp`), for the caller to remove.
void commit_distcp_dir(const std::string& write_dir, const std::string& path, bool fsync);

} // namespace cairn::detail
