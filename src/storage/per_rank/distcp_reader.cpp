#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "core/checksum.hpp"
#include "core/metadata_adapter.hpp"
#include "core/strided.hpp"
#include "format/metadata_h5.hpp"
#include "io/fs.hpp"
#include "io/mpi_hints.hpp"
#include "io/mpiio.hpp"
#include "stage/stage.hpp"
#include "storage/columnar_storage.hpp"
#include "storage/per_rank/mapped_files.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <queue>

namespace cairn {

using detail::MpiFile;
namespace fs = detail::fs;

namespace {

// Gaps up to this size between two needed byte runs are read rather than
// skipped (data sieving) when they lie in checksum blocks read anyway: one
// larger read beats two small ones. Larger gaps end a read, which keeps
// reads of widely spaced runs (a column band) cache-sized: verified and
// copied out while still in cache.
constexpr std::uint64_t k_sieve_gap = 128 * 1024;

// Runs of at least this many bytes are read straight into a dense host
// destination (no copy through the read buffer).
constexpr std::uint64_t k_direct_min = 1024 * 1024;

// Bytes copied at once from a kept mapping (read_blocks_mapped) or through
// the aligned buffer (read_blocks_bounced), each piece hashed right after,
// from the cache. Pieces of 1 MiB copied fastest on the development machine
// (AMD EPYC, glibc): copies of 64-256 KiB from a mapping into a destination
// not aligned like it were 3-7 times slower.
constexpr std::uint64_t k_verified_piece = 1024 * 1024;

// The kernel's copy out of the page cache into memory whose address is not
// congruent to the file offset modulo a cache line ran at a quarter to half
// the speed of an aligned one on the development machine (out of the cache
// of a disk file in 1 MiB reads: 0.9-1.0 against 2.2-4.9 GB/s; from a RAM
// disk: 1.9 against 4.0). Reads into the reader's buffer are placed
// congruent (read_widened).
constexpr std::uint64_t k_copy_align = 64;

// A read from a RAM disk into memory not aligned like the file goes through
// an aligned buffer of k_verified_piece bytes (read_blocks_bounced): the
// copy to the buffer, its hash and the copy out of the cache ran at 3.1-3.3
// GB/s. Checksum blocks larger than it are read directly.

// Gathered reads of at least this many bytes into host memory are verified
// and copied out on a helper thread while the next one is read (a thread
// per group costs tens of microseconds: not worth it for small groups).
constexpr std::uint64_t k_overlap_min = 4 * 1024 * 1024;

bool safe_file_name(const std::string& name)
{
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

// What first_bad_block returns when every block is intact.
constexpr std::uint64_t k_intact = ~std::uint64_t(0);

// The first checksum block of `chunk` in bytes [lo, hi) (read to `p`) whose
// checksum differs, or k_intact.
std::uint64_t first_bad_block(const ChunkMeta& chunk, std::uint64_t span, const char* p, std::uint64_t lo,
                              std::uint64_t hi)
{
    const auto& sums = chunk.storage.checksums;
    for (std::uint64_t blk = lo / span; blk * span < hi; ++blk) {
        const auto s = blk * span, e = std::min(chunk.storage.length, s + span);
        if (blk >= sums.size() || detail::checksum(p + (s - lo), static_cast<std::size_t>(e - s)) != sums[blk])
            return blk;
    }
    return k_intact;
}

// Chunk bytes [A, B) (A at a block's start) in pieces of k_verified_piece:
// `piece(lo, hi)` puts bytes [lo, hi) where they go and returns where they
// can be hashed from, still in the cache; returns the first checksum block
// whose checksum differs, or k_intact (every piece is put first).
template <class Piece>
std::uint64_t put_verified(const ChunkMeta& chunk, std::uint64_t span, std::uint64_t A, std::uint64_t B,
                           Piece&& piece)
{
    std::optional<detail::ChunkHasher> hasher;
    if (span)
        hasher.emplace(span);
    for (std::uint64_t lo = A; lo < B; lo += k_verified_piece) {
        const auto hi = std::min(B, lo + k_verified_piece);
        const char* at = piece(lo, hi);
        if (hasher)
            hasher->update(at, static_cast<std::size_t>(hi - lo));
    }
    if (!hasher)
        return k_intact;
    const auto got = hasher->finish();
    const auto& sums = chunk.storage.checksums;
    for (std::uint64_t k = 0; k < got.size(); ++k)
        if (A / span + k >= sums.size() || got[k] != sums[A / span + k])
            return A / span + k;
    return k_intact;
}

// Checks that the planner's destination `dst` fits region `item.box` of an
// array of `es`-byte elements, and that the region lies inside `chunk`.
void check_region(const ReadItem& item, const ChunkMeta& chunk, const DataRef& dst, std::uint64_t es)
{
    if (dst.view.elem_size != es || dst.view.shape != item.box.shape)
        throw error::WrongAPIUsage("array '" + item.fqn + "': the planner's destination does not match the region " +
                                   item.box.str());
    const Box& C = chunk.box;
    const Box& I = item.box;
    if (C.ndim() > 0 && (I.ndim() != C.ndim() || !intersect(C, I) || intersect(C, I)->volume() != I.volume()))
        throw error::FormatError("array '" + item.fqn + "': region " + I.str() + " is not inside stored chunk " +
                                 C.str());
}

// The runs of region I in chunk C, in file order: a run is a stretch of the
// region contiguous in the file, dimensions k.. of the region, where the
// region spans the chunk fully beyond k.
class RegionRuns {
public:
    RegionRuns(const Box& C, const Box& I, std::uint64_t es)
        : m_C(C), m_I(I), m_es(es), m_cs(row_major_strides(C.shape))
    {
        const std::size_t nd = C.ndim();
        m_k = nd == 0 ? 0 : nd - 1;
        while (m_k > 0 && I.shape[m_k] == C.shape[m_k])
            --m_k;
        for (std::size_t d = m_k; d < nd; ++d)
            m_elems *= static_cast<std::uint64_t>(d == m_k ? I.shape[d] : C.shape[d]);
        for (std::size_t d = 0; d < m_k; ++d)
            m_count *= static_cast<std::uint64_t>(I.shape[d]);
        m_idx.assign(m_k, 0);
    }
    bool done() const { return m_r >= m_count; }
    /// The current run's number (row-major among the region's runs).
    std::uint64_t index() const { return m_r; }
    std::uint64_t elems() const { return m_elems; }
    std::uint64_t elem_size() const { return m_es; }
    std::uint64_t bytes() const { return m_elems * m_es; }
    /// The chunk-relative byte offset of the current run.
    std::uint64_t offset() const
    {
        std::int64_t e = 0;
        for (std::size_t d = 0; d < m_k; ++d)
            e += (m_I.offsets[d] - m_C.offsets[d] + m_idx[d]) * m_cs[d];
        if (m_C.ndim() > 0)
            e += (m_I.offsets[m_k] - m_C.offsets[m_k]) * m_cs[m_k];
        return static_cast<std::uint64_t>(e) * m_es;
    }
    void next()
    {
        ++m_r;
        for (std::size_t d = m_k; d-- > 0;) {
            if (++m_idx[d] < m_I.shape[d])
                return;
            m_idx[d] = 0;
        }
    }

private:
    const Box& m_C;
    const Box& m_I;
    std::uint64_t m_es;
    Shape m_cs; // the chunk's row-major strides
    std::size_t m_k = 0;
    std::uint64_t m_elems = 1, m_count = 1, m_r = 0;
    Shape m_idx; // outer index of the current run
};

// Whether a run at chunk byte `o` joins a read of the bytes up to `end`
// (data sieving): it starts at or after `end`, no later than `limit` (the
// read stays within its cap), after a small gap whose bytes lie in
// checksum blocks read anyway: a load reads no block it does not need.
bool sieves_into(std::uint64_t o, std::uint64_t end, std::uint64_t limit, std::uint64_t span)
{
    if (o < end || o - end > k_sieve_gap || o > limit)
        return false;
    return span ? o / span <= (end - 1) / span + 1 : o == end;
}

// One item of a read_data call, with what it reads.
struct ReadTask {
    const ReadItem* item;
    const EntryMeta* entry;
    const ChunkMeta* chunk;
    std::uint64_t first; // the item's first element in the chunk (row-major)
};

// The items of `plan`, in file order for sequential access: by file, chunk,
// and within a chunk by first byte, so that reads of a chunk go forward and
// a block two items share is read once (DistcpReader::Impl::held).
std::vector<ReadTask> tasks_in_file_order(const Metadata& md, const LoadPlan& plan)
{
    std::vector<ReadTask> tasks;
    tasks.reserve(plan.items.size());
    for (const auto& item : plan.items) {
        auto e = md.entries.find(item.fqn);
        if (e == md.entries.end() || item.chunk >= e->second.chunks.size())
            throw error::WrongAPIUsage("read item for '" + item.fqn + "' chunk " + std::to_string(item.chunk) +
                                       " is not in the checkpoint's metadata");
        const ChunkMeta& chunk = e->second.chunks[item.chunk];
        std::uint64_t first = 0;
        if (item.kind != ItemKind::bytes && item.box.ndim() == chunk.box.ndim())
            for (std::size_t d = 0; d < chunk.box.ndim(); ++d)
                first =
                    first * static_cast<std::uint64_t>(chunk.box.shape[d]) +
                    static_cast<std::uint64_t>(std::max<std::int64_t>(item.box.offsets[d] - chunk.box.offsets[d], 0));
        tasks.push_back(ReadTask{&item, &e->second, &chunk, first});
    }
    std::stable_sort(tasks.begin(), tasks.end(), [](const ReadTask& a, const ReadTask& b) {
        if (a.chunk->storage.path != b.chunk->storage.path)
            return a.chunk->storage.path < b.chunk->storage.path;
        if (a.chunk->storage.offset != b.chunk->storage.offset)
            return a.chunk->storage.offset < b.chunk->storage.offset;
        return a.first < b.first;
    });
    return tasks;
}

// The chunk byte after the last element of array task `t` (`es`-byte
// elements).
std::uint64_t end_byte(const ReadTask& t, std::uint64_t es)
{
    const Box &C = t.chunk->box, &I = t.item->box;
    std::uint64_t last = 0;
    for (std::size_t d = 0; d < C.ndim(); ++d)
        last = last * static_cast<std::uint64_t>(C.shape[d]) +
               static_cast<std::uint64_t>(I.offsets[d] + I.shape[d] - 1 - C.offsets[d]);
    return (last + 1) * es;
}

// The end of the tasks from `i` on that read one chunk's array, each
// beginning before the others end (interleaved or overlapping): they
// share checksum blocks beyond the one where the others end and the
// next begins (which the reader's last read holds). i + 1 when task i
// shares none.
std::size_t sharing_end(const std::vector<ReadTask>& tasks, std::size_t i)
{
    const auto joins = [](const ReadTask& t) { // a non-empty region inside its chunk
        const Box &C = t.chunk->box, &I = t.item->box;
        if (t.item->kind != ItemKind::array || C.ndim() == 0 || I.ndim() != C.ndim() || I.volume() == 0)
            return false;
        for (std::size_t d = 0; d < C.ndim(); ++d)
            if (I.offsets[d] < C.offsets[d] || I.offsets[d] + I.shape[d] > C.offsets[d] + C.shape[d])
                return false;
        return true;
    };
    if (!joins(tasks[i]))
        return i + 1;
    const auto es = static_cast<std::uint64_t>(dtype_size(tasks[i].entry->dtype));
    std::uint64_t end = end_byte(tasks[i], es); // of the tasks so far
    std::size_t j = i + 1;
    for (; j < tasks.size() && tasks[j].chunk == tasks[i].chunk && joins(tasks[j]); ++j) {
        if (tasks[j].first * es >= end)
            break; // shares at most the block where the others end, which the last read holds
        end = std::max(end, end_byte(tasks[j], es));
    }
    return j;
}

} // namespace

struct DistcpReader::Impl final : detail::ColumnarReader {
    detail::MetadataColumns read_metadata_columns() const;
    std::unique_ptr<detail::ChunkRowSource> read_metadata_rows() override;
    std::size_t staging;
    bool verify;
    MpiHints hints;
    std::string path;
    const Metadata* md = nullptr;
    std::uint64_t bytes_read = 0;
    std::map<std::string, std::unique_ptr<MpiFile>> files;
    std::map<std::string, std::uint64_t> sizes; // of the files opened
    detail::HostBuffer buffer;
    // The last range read through the buffer: chunk bytes [A, B), at `at`
    // in the buffer (intact until the buffer's next read there). Reads of a
    // chunk go forward, so a block a read shares with the one before it is
    // copied from there instead of read again: each block is read once.
    struct Held {
        const ChunkMeta* chunk = nullptr;
        std::uint64_t A = 0, B = 0;
        const char* at = nullptr;
    } held;

    /// ", written by ranks 0 to 3", naming who wrote data file `name`.
    static std::string written_by(const std::string& name)
    {
        const auto who = detail::distcp_writers(name);
        return who.empty() ? "" : ", written by " + who;
    }

    MpiFile& open(const std::string& name)
    {
        if (!safe_file_name(name))
            throw error::FormatError(fs::join(path, metadata_file_name) + ": chunk file name '" + name +
                                     "' is not a plain file name inside the checkpoint");
        auto& f = files[name];
        if (!f) {
            // Only a regular file inside the checkpoint: not a symbolic link
            // (to a file outside it), not a FIFO (MPI_File_open would block).
            const auto file = fs::join(path, name);
            try {
                std::error_code ec;
                if (std::filesystem::symlink_status(file, ec).type() == std::filesystem::file_type::not_found)
                    throw error::ReadError("missing data file " + file + written_by(name));
                fs::check_regular_file(file, fs::Follow::no);
                f = std::make_unique<MpiFile>(file, MpiFile::Mode::read, hints);
            } catch (...) {
                files.erase(name);
                throw;
            }
        }
        return *f;
    }

    /// Checks, before anything is allocated or read for it, that the chunk's
    /// stored bytes lie inside its file (metadata may claim any length).
    void check_extent(const std::string& fqn, const ChunkMeta& chunk)
    {
        auto known = sizes.find(chunk.storage.path);
        if (known == sizes.end())
            known = sizes.emplace(chunk.storage.path, open(chunk.storage.path).size()).first;
        const auto size = known->second;
        const auto off = chunk.storage.offset, len = chunk.storage.length;
        if (off > size || len > size - off)
            throw error::ReadError("short read: file " + fs::join(path, chunk.storage.path) + " holds " +
                                   std::to_string(size) + " bytes, but chunk " + chunk.box.str() + " of '" + fqn +
                                   "' is stored at bytes [" + std::to_string(off) + ", " + std::to_string(off) + "+" +
                                   std::to_string(len) + ") (truncated file, or damaged metadata)" +
                                   written_by(chunk.storage.path));
    }

    /// Bytes per checksum block of `chunk` when verifying it, else 0.
    std::uint64_t span_of(const ChunkMeta& chunk, std::size_t es) const
    {
        if (!verify || !md->checksum_block)
            return 0;
        return detail::checksum_span(chunk.box.shape, es, md->checksum_block);
    }

    /// Reads bytes [a, b) of the chunk (chunk-relative) into the buffer and
    /// returns where byte `a` landed. When verifying, the read is widened to
    /// whole checksum blocks and every block read is checked.
    const char* read_range(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, std::uint64_t a,
                           std::uint64_t b)
    {
        const Widened w = read_widened(chunk, span, a, b, buffer.data(), buffer.size());
        check_blocks(fqn, chunk, span, w.at, w.A, b);
        return w.at + (a - w.A);
    }

    /// A read by read_widened: chunk bytes [A, ...) at `at`.
    struct Widened {
        std::uint64_t A;
        char* at;
    };

    /// Reads bytes [a, b) of the chunk, widened to whole checksum blocks of
    /// `span` bytes (when not 0), into [to, to + room): at the first address
    /// there congruent to their file offset modulo k_copy_align, or at `to`
    /// where the room leaves no slack for that.
    Widened read_widened(const ChunkMeta& chunk, std::uint64_t span, std::uint64_t a, std::uint64_t b, char* to,
                         std::uint64_t room)
    {
        const auto len = chunk.storage.length;
        const std::uint64_t A = span ? a - a % span : a;
        const std::uint64_t B = span ? std::min(len, (b + span - 1) / span * span) : b;
        if (B - A > room)
            throw error::Internal("internal: read of " + std::to_string(B - A) + " bytes exceeds the " +
                                  std::to_string(room) + "-byte buffer");
        const auto shift = (chunk.storage.offset + A - reinterpret_cast<std::uintptr_t>(to)) % k_copy_align;
        if (B - A + shift <= room)
            to += shift;
        std::uint64_t from = A; // bytes [A, from) are in the buffer already
        if (held.chunk == &chunk && held.A <= A && A < held.B) {
            from = std::min(B, held.B);
            std::memmove(to, held.at + (A - held.A), static_cast<std::size_t>(from - A));
        }
        if (B > from) {
            MpiFile& f = open(chunk.storage.path);
            f.read_at(chunk.storage.offset + from, to + (from - A), B - from);
            bytes_read += B - from;
        }
        held = Held{&chunk, A, B, to};
        return {A, to};
    }

    /// Checks the checksum blocks of the chunk that hold bytes [A, b), read
    /// by read_widened to `at`; throws error::IntegrityError naming the
    /// entry, file and bytes of the first that differs. Touches nothing of
    /// the reader but its immutable path: safe on a helper thread.
    void check_blocks(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, const char* at,
                      std::uint64_t A, std::uint64_t b) const
    {
        if (!span)
            return;
        const auto len = chunk.storage.length;
        const auto& sums = chunk.storage.checksums;
        for (std::uint64_t blk = A / span; blk * span < b; ++blk) {
            const auto lo = blk * span, hi = std::min(len, lo + span);
            const auto got = detail::checksum(at + (lo - A), static_cast<std::size_t>(hi - lo));
            if (blk >= sums.size() || got != sums[blk]) {
                throw error::IntegrityError(
                    "checksum mismatch in '" + fqn + "': file " + fs::join(path, chunk.storage.path) + ", bytes [" +
                    std::to_string(chunk.storage.offset + lo) + ", " + std::to_string(chunk.storage.offset + hi) +
                    ") (block " + std::to_string(blk) + " of chunk " + chunk.box.str() +
                    "): " + detail::mismatch_text(sums, blk, got));
            }
        }
    }

    /// Reads bytes [a, b) of the chunk straight into `dst` (dense host
    /// memory, b - a bytes), verifying the checksum blocks in place: no copy
    /// through the buffer. Partial blocks at either end go through
    /// read_range (widened to whole blocks) and a copy.
    void read_direct(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, std::uint64_t a,
                     std::uint64_t b, char* dst);

    /// Reads the whole checksum blocks [A, B) of the chunk into `dst`, in
    /// pieces of the staging bound, each verified on a helper thread while
    /// the next is read, all verified before this returns.
    void read_blocks_verified(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, std::uint64_t A,
                              std::uint64_t B, char* dst);

    /// read_blocks_verified() through one aligned buffer of
    /// k_verified_piece bytes, reused: each piece read into it, copied to
    /// `dst` and hashed there (put_verified). For reads from a RAM disk into memory that is
    /// not aligned like the file (bounces()).
    void read_blocks_bounced(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, std::uint64_t A,
                             std::uint64_t B, char* dst);
    /// Whether bytes [A, ...) of the chunk go to `dst` through the buffer.
    bool bounces(const ChunkMeta& chunk, std::uint64_t span, std::uint64_t A, const char* dst);
    struct FreeAligned {
        void operator()(char* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<char, FreeAligned> bounce_buffer; // k_verified_piece bytes, page-aligned
    std::optional<bool> ram_disk;                     // whether `path` is on a RAM disk, once asked

    /// read_blocks_verified() from the writer's kept mapping of the chunk's
    /// file (storage/per_rank/mapped_files.hpp) where there is one: each
    /// piece copied, then hashed from the cache. False where there is none.
    bool read_blocks_mapped(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, std::uint64_t A,
                            std::uint64_t B, char* dst);

    /// Throws error::IntegrityError for block `blk` of the chunk (its
    /// checksum differed): re-read through the buffer for the details.
    [[noreturn]] void throw_mismatch(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span,
                                     std::uint64_t blk);

    class Staged;

    /// Reads the region `item` of `chunk` into the planner's destination.
    void read_array(const ReadItem& item, const ChunkMeta& chunk, DType dtype, LoadPlanner& planner);

    /// Reads the current run of `runs`, longer than one read, in pieces.
    void read_long_run(Staged& reads, const RegionRuns& runs, const DataRef& dst);

    /// Reads the current run of `runs` and the following ones that one
    /// read can take with it (data sieving); `runs` moves past them.
    void read_gathered_runs(Staged& reads, RegionRuns& runs, const DataRef& dst, std::uint64_t span);

    /// Reads the `n` array tasks at `tasks`, regions of one chunk that
    /// share blocks, together: the runs of all in file order, each read
    /// (up to the read cap) once and copied to every region that needs it,
    /// so that each block is read once.
    void read_arrays_together(const ReadTask* tasks, std::size_t n, LoadPlanner& planner);

    /// Reads the whole stored bytes of a bytes item to the planner.
    void read_bytes_item(const ReadTask& t, LoadPlanner& planner);

    /// The bytes of the read buffer for `tasks`: the staging bound, no more
    /// than the largest chunk needs, and room for four checksum blocks when
    /// verifying.
    std::uint64_t buffer_bytes(const std::vector<ReadTask>& tasks) const;

    /// Closes the files of a read_data and frees its buffer.
    void close_files();
};

// Reads through the reader's buffer. With `overlap`, each read goes to one
// half of it while the read before it, in the other half, is verified and
// copied out on a helper thread (reads of k_overlap_min bytes or more;
// smaller ones are finished here).
class DistcpReader::Impl::Staged {
public:
    Staged(Impl& im, const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, bool overlap)
        : m_im(im), m_fqn(fqn), m_chunk(chunk), m_span(span), m_overlap(overlap), m_half(im.buffer.size() / 2)
    {
    }

    /// The most bytes of one read. At least a block per read: a read of up
    /// to `span` bytes touches at most two blocks, and the buffer (four
    /// blocks or more) has room for two per half. Smaller reads would read
    /// the blocks they share with their neighbours over and over.
    std::uint64_t cap() const
    {
        const std::uint64_t room = m_overlap ? m_half : m_im.buffer.size();
        const std::uint64_t widen = 2 * m_span; // to whole blocks at both ends
        if (room >= widen + k_copy_align + m_span)
            return room - widen - k_copy_align; // and slack to align the read (read_widened)
        return std::max(room - widen, m_span);
    }

    /// Reads bytes [a, b) of the chunk (its next half when overlapping);
    /// `copy(at)` copies them out from where byte a landed, once their
    /// blocks are verified.
    template <class Copy>
    void read(std::uint64_t a, std::uint64_t b, Copy copy)
    {
        char* to = m_im.buffer.data() + (m_overlap ? m_side * m_half : 0);
        const Widened w = m_im.read_widened(m_chunk, m_span, a, b, to, m_overlap ? m_half : m_im.buffer.size());
        auto finish = [&im = m_im, &fqn = m_fqn, &chunk = m_chunk, span = m_span, w, b, at = w.at + (a - w.A),
                       copy = std::move(copy)] {
            im.check_blocks(fqn, chunk, span, w.at, w.A, b);
            copy(at);
        };
        if (m_pending.valid())
            m_pending.get(); // the other half is free again
        if (m_overlap && b - a >= k_overlap_min)
            m_pending = std::async(std::launch::async, std::move(finish));
        else
            finish();
        m_side ^= 1;
    }

    /// Waits for the last read's verification and copy.
    void finish()
    {
        if (m_pending.valid())
            m_pending.get();
    }

private:
    Impl& m_im;
    const std::string& m_fqn;
    const ChunkMeta& m_chunk;
    std::uint64_t m_span;
    bool m_overlap;
    std::uint64_t m_half;
    int m_side = 0;
    std::future<void> m_pending; // the helper's verification and copy of the previous read
};

void DistcpReader::Impl::read_direct(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span,
                                     std::uint64_t a, std::uint64_t b, char* dst)
{
    const auto len = chunk.storage.length;
    // Whole checksum blocks inside [a, b): [A, B).
    std::uint64_t A = a, B = b;
    if (span) {
        A = (a + span - 1) / span * span;
        B = b == len ? b : b / span * span;
        if (A >= B) { // no whole block: buffered
            std::memcpy(dst, read_range(fqn, chunk, span, a, b), static_cast<std::size_t>(b - a));
            return;
        }
    }
    if (A > a)
        std::memcpy(dst, read_range(fqn, chunk, span, a, A), static_cast<std::size_t>(A - a));
    char* to = dst + (A - a);
    if (!read_blocks_mapped(fqn, chunk, span, A, B, to)) {
        if (bounces(chunk, span, A, to))
            read_blocks_bounced(fqn, chunk, span, A, B, to);
        else
            read_blocks_verified(fqn, chunk, span, A, B, to);
    }
    if (b > B)
        std::memcpy(dst + (B - a), read_range(fqn, chunk, span, B, b), static_cast<std::size_t>(b - B));
}

void DistcpReader::Impl::read_blocks_verified(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span,
                                              std::uint64_t A, std::uint64_t B, char* dst)
{
    MpiFile& f = open(chunk.storage.path);
    // Pieces of whole blocks, of the staging bound per read call
    // (LoadOptions::staging_bytes, 64 MiB by default; cold reads in 8 MiB
    // calls were 10-15 % slower here).
    const std::uint64_t bound = std::min<std::uint64_t>(staging, std::uint64_t(1) << 30);
    const std::uint64_t piece = span ? std::max<std::uint64_t>(span, bound / span * span) : bound;
    const auto check = [&](std::uint64_t blk) {
        if (blk != k_intact)
            throw_mismatch(fqn, chunk, span, blk);
    };
    std::future<std::uint64_t> pending; // the verification of the previous piece
    for (std::uint64_t lo = A; lo < B; lo += piece) {
        const auto hi = std::min(B, lo + piece);
        char* p = dst + (lo - A);
        f.read_at(chunk.storage.offset + lo, p, hi - lo);
        bytes_read += hi - lo;
        if (!span)
            continue;
        if (hi < B) {
            auto next = std::async(std::launch::async, first_bad_block, std::cref(chunk), span, p, lo, hi);
            if (pending.valid())
                check(pending.get());
            pending = std::move(next);
        } else {
            if (pending.valid())
                check(pending.get());
            check(first_bad_block(chunk, span, p, lo, hi));
        }
    }
}

bool DistcpReader::Impl::bounces(const ChunkMeta& chunk, std::uint64_t span, std::uint64_t A, const char* dst)
{
    if ((reinterpret_cast<std::uintptr_t>(dst) - (chunk.storage.offset + A)) % k_copy_align == 0 ||
        span > k_verified_piece)
        return false;
    if (!ram_disk)
        ram_disk = detail::is_ram_disk(path);
    return *ram_disk;
}

void DistcpReader::Impl::read_blocks_bounced(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span,
                                             std::uint64_t A, std::uint64_t B, char* dst)
{
    MpiFile& f = open(chunk.storage.path);
    if (!bounce_buffer) {
        bounce_buffer.reset(static_cast<char*>(std::aligned_alloc(4096, k_verified_piece)));
        if (!bounce_buffer)
            throw std::bad_alloc();
    }
    char* buf = bounce_buffer.get();
    const auto bad = put_verified(chunk, span, A, B, [&](std::uint64_t lo, std::uint64_t hi) {
        f.read_at(chunk.storage.offset + lo, buf, hi - lo);
        bytes_read += hi - lo;
        std::memcpy(dst + (lo - A), buf, static_cast<std::size_t>(hi - lo));
        return buf;
    });
    if (bad != k_intact)
        throw_mismatch(fqn, chunk, span, bad);
}

bool DistcpReader::Impl::read_blocks_mapped(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span,
                                            std::uint64_t A, std::uint64_t B, char* dst)
{
    const auto size = sizes.find(chunk.storage.path); // check_extent() put it there
    if (size == sizes.end())
        return false;
    std::uint64_t bad = k_intact;
    const bool kept = detail::use_kept_mapping(fs::join(path, chunk.storage.path), size->second, [&](const char* file) {
        bad = put_verified(chunk, span, A, B, [&](std::uint64_t lo, std::uint64_t hi) {
            char* to = dst + (lo - A);
            std::memcpy(to, file + chunk.storage.offset + lo, static_cast<std::size_t>(hi - lo));
            return to;
        });
    });
    if (!kept)
        return false;
    bytes_read += B - A;
    if (bad != k_intact)
        throw_mismatch(fqn, chunk, span, bad);
    return true;
}

void DistcpReader::Impl::throw_mismatch(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span,
                                        std::uint64_t blk)
{
    const auto s = blk * span, e = std::min(chunk.storage.length, s + span);
    (void)read_range(fqn, chunk, span, s, e); // re-read through the buffer: throws with the details
    throw error::IntegrityError("checksum mismatch in '" + fqn + "': file " + fs::join(path, chunk.storage.path) +
                                ", bytes [" + std::to_string(chunk.storage.offset + s) + ", " +
                                std::to_string(chunk.storage.offset + e) + ")");
}

void DistcpReader::Impl::read_array(const ReadItem& item, const ChunkMeta& chunk, DType dtype, LoadPlanner& planner)
{
    const DataRef dst = planner.resolve_destination(item);
    const auto es = static_cast<std::uint64_t>(dtype_size(dtype));
    check_region(item, chunk, dst, es);
    if (item.box.volume() == 0)
        return;
    const std::uint64_t span = span_of(chunk, es);
    RegionRuns runs(chunk.box, item.box, es);
    // Dense host destination and long runs: read straight into it.
    if (dst.space == MemorySpace::host && detail::is_dense(dst.view) && runs.bytes() >= k_direct_min) {
        for (; !runs.done(); runs.next())
            read_direct(item.fqn, chunk, span, runs.offset(), runs.offset() + runs.bytes(),
                        static_cast<char*>(dst.view.data) + runs.index() * runs.bytes());
        return;
    }
    // Other host destinations overlap reading with verifying and copying
    // out; device destinations are copied here, on the thread that chose
    // their device.
    Staged reads(*this, item.fqn, chunk, span,
                 dst.space == MemorySpace::host && buffer.size() / 2 >= 2 * span + es);
    while (!runs.done()) {
        if (runs.bytes() > reads.cap()) {
            read_long_run(reads, runs, dst);
            runs.next();
        } else {
            read_gathered_runs(reads, runs, dst, span);
        }
    }
    reads.finish();
}

void DistcpReader::Impl::read_long_run(Staged& reads, const RegionRuns& runs, const DataRef& dst)
{
    const std::uint64_t es = runs.elem_size(), elems = runs.elems(), first_off = runs.offset();
    for (std::uint64_t e = 0; e < elems;) {
        const auto n = std::min<std::uint64_t>(elems - e, reads.cap() / es);
        const auto first = static_cast<std::int64_t>(runs.index() * elems + e);
        const auto count = static_cast<std::int64_t>(n);
        reads.read(first_off + e * es, first_off + (e + n) * es,
                   [&dst, first, count](const char* p) { detail::stage_in(dst, first, count, p); });
        e += n;
    }
}

void DistcpReader::Impl::read_gathered_runs(Staged& reads, RegionRuns& runs, const DataRef& dst, std::uint64_t span)
{
    const std::uint64_t r = runs.index(), first_off = runs.offset(), len = runs.bytes(), elems = runs.elems();
    std::vector<std::uint64_t> offs{first_off};
    std::uint64_t end = first_off + len;
    for (runs.next(); !runs.done(); runs.next()) {
        const auto o = runs.offset();
        if (!sieves_into(o, end, first_off + reads.cap() - len, span))
            break;
        offs.push_back(o);
        end = o + len;
    }
    reads.read(first_off, end, [&dst, r, elems, first_off, offs = std::move(offs)](const char* p) {
        for (std::size_t j = 0; j < offs.size(); ++j)
            detail::stage_in(dst, static_cast<std::int64_t>((r + j) * elems), static_cast<std::int64_t>(elems),
                             p + (offs[j] - first_off));
    });
}

void DistcpReader::Impl::read_arrays_together(const ReadTask* tasks, std::size_t n, LoadPlanner& planner)
{
    const ChunkMeta& chunk = *tasks[0].chunk;
    const auto es = static_cast<std::uint64_t>(dtype_size(tasks[0].entry->dtype));
    const std::uint64_t span = span_of(chunk, es);
    struct Along {
        DataRef dst;
        RegionRuns runs;
    };
    std::vector<Along> items;
    items.reserve(n);
    bool host = true;
    for (std::size_t k = 0; k < n; ++k) {
        const ReadItem& item = *tasks[k].item;
        items.push_back(Along{planner.resolve_destination(item), RegionRuns(chunk.box, item.box, es)});
        check_region(item, chunk, items.back().dst, es);
        host = host && items.back().dst.space == MemorySpace::host;
    }
    Staged reads(*this, tasks[0].item->fqn, chunk, span, host && buffer.size() / 2 >= 2 * span + es);
    const std::uint64_t cap = reads.cap() / es * es;
    // The next byte each item needs, least first.
    using Next = std::pair<std::uint64_t, std::size_t>;
    std::priority_queue<Next, std::vector<Next>, std::greater<>> next;
    for (std::size_t k = 0; k < n; ++k)
        next.push({items[k].runs.offset(), k});
    struct Copy {
        const DataRef* dst;
        std::int64_t first, count; // elements of the destination
        std::uint64_t at;          // their bytes in the read
    };
    while (!next.empty()) {
        // One read of bytes [W, E): the runs (or parts of runs) it can take.
        const std::uint64_t W = next.top().first;
        std::uint64_t E = W;
        std::vector<Copy> copies;
        while (!next.empty()) {
            const auto [s, k] = next.top();
            if (s >= W + cap || (s > E && !sieves_into(s, E, W + cap, span)))
                break;
            next.pop();
            RegionRuns& runs = items[k].runs;
            const std::uint64_t run_end = runs.offset() + runs.bytes(), to = std::min(run_end, W + cap);
            const std::uint64_t first = runs.index() * runs.elems() + (s - runs.offset()) / es;
            copies.push_back(Copy{&items[k].dst, static_cast<std::int64_t>(first),
                                  static_cast<std::int64_t>((to - s) / es), s - W});
            E = std::max(E, to);
            if (to < run_end) {
                next.push({to, k});
                continue;
            }
            runs.next();
            if (!runs.done())
                next.push({runs.offset(), k});
        }
        reads.read(W, E, [copies = std::move(copies)](const char* p) {
            for (const auto& c : copies)
                detail::stage_in(*c.dst, c.first, c.count, p + c.at);
        });
    }
    reads.finish();
}

void DistcpReader::Impl::read_bytes_item(const ReadTask& t, LoadPlanner& planner)
{
    const auto n = t.chunk->storage.length;
    std::vector<std::byte> data(static_cast<std::size_t>(n));
    const auto span = span_of(*t.chunk, 1);
    const auto piece = buffer.size() - 2 * span;
    for (std::uint64_t a = 0; a < n; a += piece) {
        const auto b = std::min(n, a + piece);
        std::memcpy(data.data() + a, read_range(t.item->fqn, *t.chunk, span, a, b), static_cast<std::size_t>(b - a));
    }
    planner.load_bytes(*t.item, std::move(data));
}

std::uint64_t DistcpReader::Impl::buffer_bytes(const std::vector<ReadTask>& tasks) const
{
    std::uint64_t largest = 0;
    for (const auto& t : tasks)
        largest = std::max(largest, t.chunk->storage.length);
    std::uint64_t want = std::min<std::uint64_t>(staging, std::max<std::uint64_t>(largest, 4096));
    for (const auto& t : tasks)
        want = std::max(want, 4 * span_of(*t.chunk, t.item->kind == ItemKind::bytes ? 1 : dtype_size(t.entry->dtype)));
    return want;
}

void DistcpReader::Impl::close_files()
{
    for (auto& [name, f] : files)
        f->close();
    files.clear();
    sizes.clear();
    buffer = detail::HostBuffer();
    held = {};
}

DistcpReader::DistcpReader(std::size_t staging_bytes, bool verify, MpiHints mpi_hints)
    : m_impl(std::make_unique<Impl>())
{
    if (staging_bytes < 4096)
        throw error::WrongAPIUsage("staging_bytes must be at least 4096, not " + std::to_string(staging_bytes));
    detail::check_mpi_hints(mpi_hints);
    m_impl->staging = staging_bytes;
    m_impl->verify = verify;
    m_impl->hints = std::move(mpi_hints);
}

DistcpReader::~DistcpReader() = default;

void DistcpReader::reset(const std::string& checkpoint_id)
{
    if (checkpoint_id.empty())
        throw error::WrongAPIUsage("empty checkpoint id");
    m_impl->path = fs::strip(checkpoint_id);
    m_impl->files.clear();
    m_impl->sizes.clear();
    m_impl->bytes_read = 0;
    m_impl->held = {};
}

Metadata DistcpReader::read_metadata() { return detail::to_metadata(m_impl->read_metadata_columns()); }

detail::ColumnarReader* DistcpReader::columnar() noexcept { return m_impl.get(); }

bool DistcpReader::reads_items_in_turn() const noexcept { return true; }

namespace {

// The metadata file of the checkpoint directory `path`, which must be a
// committed checkpoint.
// When `path` is missing: the committed sibling a replacement interrupted
// between its two renames left (`path.cairn-staging`: the new checkpoint,
// `path.cairn-old`: the one it replaced), as words for the error; empty when
// there is none. Loads do not pick one themselves: which is wanted is the
// caller's choice, and `cairn repair` makes it as remove_leftovers() does.
std::string interrupted_replacement(const std::string& path)
{
    if (fs::exists(path))
        return {};
    std::string found;
    const std::pair<const char*, const char*> siblings[] = {{".cairn-staging", " (the new checkpoint)"},
                                                            {".cairn-old", " (the checkpoint it replaced)"}};
    for (const auto& [suffix, what] : siblings) {
        const std::string sibling = path + suffix;
        if (fs::exists(fs::join(sibling, metadata_file_name)))
            found += (found.empty() ? "" : " and ") + sibling + what;
    }
    if (found.empty())
        return {};
    return "; a replacement of it was interrupted between its two renames and left the committed " + found +
           ": run `cairn repair " + path + "` (or cairn::remove_leftovers() on its directory) to put the newest in "
           "place";
}

std::string metadata_file_of(const std::string& path)
{
    if (!fs::is_directory(path))
        throw error::NotFound("no checkpoint at " + path + " (not a directory)" + interrupted_replacement(path));
    auto mdfile = fs::join(path, metadata_file_name);
    if (!fs::exists(mdfile))
        throw error::NotFound(path + " is not a committed checkpoint: " + metadata_file_name +
                              " is missing (an interrupted save?)");
    return mdfile;
}

void expect_distcp(const std::string& layout, const std::string& mdfile)
{
    if (layout != "distcp")
        throw error::FormatError(mdfile + ": layout '" + layout + "', expected 'distcp'");
}

} // namespace

detail::MetadataColumns DistcpReader::Impl::read_metadata_columns() const
{
    const auto mdfile = metadata_file_of(path);
    auto columns = detail::read_metadata_columns_file(mdfile);
    expect_distcp(columns.layout, mdfile);
    return columns;
}

std::unique_ptr<detail::ChunkRowSource> DistcpReader::Impl::read_metadata_rows()
{
    const auto mdfile = metadata_file_of(path);
    auto rows = detail::read_metadata_rows_file(mdfile);
    expect_distcp(rows->head().layout, mdfile);
    return rows;
}

void DistcpReader::set_up_storage_reader(const Metadata& metadata, bool, MPI_Comm) { m_impl->md = &metadata; }

void DistcpReader::read_data(const LoadPlan& plan, LoadPlanner& planner)
{
    auto& im = *m_impl;
    im.bytes_read = 0;
    if (!im.md)
        throw error::WrongAPIUsage("DistcpReader::read_data before set_up_storage_reader");
    const std::vector<ReadTask> tasks = tasks_in_file_order(*im.md, plan);
    im.buffer = detail::HostBuffer(static_cast<std::size_t>(im.buffer_bytes(tasks)));
    im.held = {};
    for (std::size_t i = 0; i < tasks.size();) {
        const ReadTask& t = tasks[i];
        const std::size_t end = sharing_end(tasks, i);
        im.check_extent(t.item->fqn, *t.chunk);
        if (end > i + 1)
            im.read_arrays_together(&tasks[i], end - i, planner);
        else if (t.item->kind == ItemKind::bytes)
            im.read_bytes_item(t, planner);
        else
            im.read_array(*t.item, *t.chunk, t.entry->dtype, planner);
        i = end;
    }
    im.close_files();
}

std::uint64_t DistcpReader::verify_chunk(const std::string& fqn, const EntryMeta& entry, const ChunkMeta& chunk)
{
    auto& im = *m_impl;
    if (!im.md)
        throw error::WrongAPIUsage("DistcpReader::verify_chunk before set_up_storage_reader");
    const auto es = entry.kind == ItemKind::bytes ? 1 : dtype_size(entry.dtype);
    im.check_extent(fqn, chunk);
    const bool saved = im.verify;
    im.verify = true;
    const auto span = im.span_of(chunk, es);
    im.verify = saved;
    const std::uint64_t size =
        std::max<std::uint64_t>(std::min<std::uint64_t>(im.staging, chunk.storage.length), 4 * span);
    detail::grow(im.buffer, static_cast<std::size_t>(size), im.staging);
    im.held = {}; // the buffer may have moved
    // Whole blocks per read, as many as fit.
    const std::uint64_t piece = span ? std::max<std::uint64_t>(span, (im.buffer.size() - 2 * span) / span * span)
                                     : im.buffer.size();
    const auto len = chunk.storage.length;
    for (std::uint64_t a = 0; a < len; a += piece)
        im.read_range(fqn, chunk, span, a, std::min(len, a + piece));
    return len;
}

std::uint64_t DistcpReader::bytes_read() const noexcept { return m_impl->bytes_read; }

} // namespace cairn
