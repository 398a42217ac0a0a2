// Private: mappings of the per-rank writer's data files on a RAM disk,
// kept from one save to the next save that writes over the same files in
// place (a node-local level reuses the files of the step its retention
// drops: src/levels/local_level.cpp). Through write(2), rewriting a tmpfs
// page costs a page-cache lookup and lock per 4 KiB, about twice a memcpy;
// through a mapping kept populated it is a memcpy. Defined in
// distcp_writer.cpp.
#pragma once

namespace cairn::detail {

/// Unmaps the kept mappings of files that no longer have a name (removed),
/// so that their RAM-disk pages are freed. Local; call it only while no
/// save of this process writes (the node-local level does when it goes
/// away).
void unmap_removed_files() noexcept;

} // namespace cairn::detail
