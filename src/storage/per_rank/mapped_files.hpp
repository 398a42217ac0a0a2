// Private: mappings of the per-rank writer's data files on a RAM disk,
// kept from one save to the next save that writes over the same files in
// place (a node-local level reuses the files of the step its retention
// drops: src/levels/local_level.cpp). Through write(2), rewriting a tmpfs
// page costs a page-cache lookup and lock per 4 KiB, about twice a memcpy;
// through a mapping kept populated it is a memcpy. The node-local
// redundancy (src/levels/redundancy.cpp) receives partner copies and parity
// into such mappings of its files. Defined in distcp_writer.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace cairn::detail {

/// Whether directory `dir` is on a RAM disk (tmpfs, ramfs). Local.
bool is_ram_disk(const std::string& dir);

/// The mapping, shared and writable, of file `path` on a RAM disk, `size`
/// bytes long: kept from an earlier call for the same file (the writer's
/// too) or made now and kept. Null where the file is not to be written
/// through one: it is not `size` bytes long or has holes (a store into a
/// hole needs a new page, and a full RAM disk answers that with SIGBUS, not
/// an error: allocate every page first), or a fault is armed. Valid until
/// the file is mapped again at another size or unmap_removed_files() finds
/// it removed. Local.
char* kept_mapping(const std::string& path, std::uint64_t size);

/// Unmaps the kept mappings of files that no longer have a name (removed),
/// so that their RAM-disk pages are freed. Local; call it only while no
/// save of this process writes (the node-local level does when it goes
/// away).
void unmap_removed_files() noexcept;

/// Unmaps every kept mapping of this process: what a new process starts
/// with (the benchmark's restart case). Local; call it only while no save
/// or restore of this process runs.
void unmap_all_files() noexcept;

/// Calls `use` with the start of the kept mapping of data file `path` (the
/// same device and inode) where one of `size` bytes is kept, and returns
/// true; returns false, without calling it, where none is, or a fault is
/// armed (fault points are on the MPI-IO path). The mapping stays while
/// `use` runs: other uses of the kept mappings wait, so `use` must not
/// start a save. Lets a restore in the process that saved read the RAM
/// disk's pages without a system call or a page fault.
bool use_kept_mapping(const std::string& path, std::uint64_t size, const std::function<void(const char*)>& use);

} // namespace cairn::detail
