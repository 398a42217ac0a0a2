// Private: early writeback of the bytes a save writes (Linux sync_file_range).
//
// A buffered write only copies into the page cache; the device gets the
// bytes when the kernel's background writeback reaches them (here only past
// gigabytes of dirty memory) or at the save's fsync. Left to the fsync, a
// save copies everything into the cache first and only then waits for the
// device: the two run one after the other. Writeback starts the device on
// each piece as soon as it is written and keeps at most `limit` bytes per
// file written but not yet on the device, so that copying and the device
// overlap and the fsync finds little left to do (docs/DESIGN.md, "Early
// writeback").
//
// It is a hint: it changes no byte and no durability guarantee (the fsync
// still follows and reports any I/O error; sync_file_range alone does not
// write metadata or flush the device's cache). That fsync must go through a
// descriptor opened before the writes: a wait here marks a failed
// writeback's error as seen (Linux errseq), and an error already seen is
// reported to the descriptors opened before it only. Where it is unavailable (not
// Linux, the file cannot be opened, the file system refuses the call) it
// does nothing. It acts on the file's pages in this node's page cache,
// whichever handle wrote them, so it works beside MPI-IO or HDF5 handles.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

namespace cairn::detail {

class Writeback {
public:
    /// Pieces of at most `limit` / 4 bytes start as they are complete, and at
    /// most `limit` bytes are in flight. limit 0: off. With `drop`, a piece
    /// waited for leaves the page cache once on the device
    /// (POSIX_FADV_DONTNEED): for copies nobody reads soon, whose pages would
    /// otherwise crowd out the application's. **Local**; never throws.
    Writeback(const std::string& path, std::uint64_t limit, bool drop = false) noexcept;
    ~Writeback();
    Writeback(const Writeback&) = delete;
    Writeback& operator=(const Writeback&) = delete;

    /// Whether this system has it at all (Linux).
    static constexpr bool available() noexcept
    {
#if defined(__linux__)
        return true;
#else
        return false;
#endif
    }
    /// The piece a Writeback of `limit` cuts (0 when off).
    static std::uint64_t piece_of(std::uint64_t limit) noexcept;

    bool active() const noexcept { return m_fd >= 0; }
    /// The largest write worth making at once, so that writeback can follow
    /// it (the whole `size` when off).
    std::uint64_t piece(std::uint64_t size) const noexcept;
    /// `size` bytes at `offset` of the file have been written (through any
    /// handle). Starts the writeback of each complete piece; waits for the
    /// oldest pieces while more than `limit` bytes are in flight. Never throws.
    void wrote(std::uint64_t offset, std::uint64_t size) noexcept;
    /// Starts the writeback of what wrote() has not started yet (a partial
    /// piece), without waiting. Never throws.
    void start_rest() noexcept;

private:
    void start(std::uint64_t lo, std::uint64_t hi) noexcept;
    void disable() noexcept;

    int m_fd = -1;
    std::uint64_t m_limit = 0;
    bool m_drop = false;
    std::uint64_t m_piece = 0;
    std::uint64_t m_lo = 0, m_hi = 0; // written, writeback not started
    std::deque<std::pair<std::uint64_t, std::uint64_t>> m_started;
    std::uint64_t m_in_flight = 0;
};

} // namespace cairn::detail
