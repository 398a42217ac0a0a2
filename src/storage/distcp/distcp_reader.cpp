#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "core/checksum.hpp"
#include "core/metadata_adapter.hpp"
#include "core/strided.hpp"
#include "stage/stage.hpp"
#include "storage/distcp/mpiio.hpp"
#include "storage/columnar_storage.hpp"
#include "storage/fs.hpp"
#include "storage/hdf5/metadata_h5.hpp"
#include "storage/mpi_hints.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <memory>

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

// Gathered reads of at least this many bytes into host memory are verified
// and copied out on a helper thread while the next one is read (a thread
// per group costs tens of microseconds: not worth it for small groups).
constexpr std::uint64_t k_overlap_min = 4 * 1024 * 1024;

bool safe_file_name(const std::string& name)
{
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
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
        const auto A = read_widened(chunk, span, a, b, buffer.data(), buffer.size());
        check_blocks(fqn, chunk, span, buffer.data(), A, b);
        return buffer.data() + (a - A);
    }

    /// Reads bytes [a, b) of the chunk, widened to whole checksum blocks of
    /// `span` bytes (when not 0), into `to` (room for `room` bytes); returns
    /// where the widened range [A, ...) starts.
    std::uint64_t read_widened(const ChunkMeta& chunk, std::uint64_t span, std::uint64_t a, std::uint64_t b, char* to,
                               std::uint64_t room)
    {
        const auto len = chunk.storage.length;
        const std::uint64_t A = span ? a - a % span : a;
        const std::uint64_t B = span ? std::min(len, (b + span - 1) / span * span) : b;
        if (B - A > room)
            throw error::Internal("internal: read of " + std::to_string(B - A) + " bytes exceeds the " +
                                  std::to_string(room) + "-byte buffer");
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
        return A;
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
                    ") (block " + std::to_string(blk) + " of chunk " + chunk.box.str() + "): " + detail::mismatch_text(sums, blk, got));
            }
        }
    }

    /// Reads bytes [a, b) of the chunk straight into `dst` (dense host
    /// memory, b - a bytes), verifying the checksum blocks in place: no copy
    /// through the buffer. Partial blocks at either end go through
    /// read_range (widened to whole blocks) and a copy.
    void read_direct(const std::string& fqn, const ChunkMeta& chunk, std::uint64_t span, std::uint64_t a,
                     std::uint64_t b, char* dst);

    void read_array(const ReadItem& item, const ChunkMeta& chunk, DType dtype, LoadPlanner& planner);
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
    MpiFile& f = open(chunk.storage.path);
    // Pieces of whole blocks, of the staging bound per read call
    // (LoadOptions::staging_bytes, 64 MiB by default; cold reads in 8 MiB
    // calls were 10-15 % slower here). Each piece but the last is verified
    // on a helper thread while the next one is read; every piece is verified
    // before this returns.
    const std::uint64_t bound = std::min<std::uint64_t>(staging, std::uint64_t(1) << 30);
    const std::uint64_t piece = span ? std::max<std::uint64_t>(span, bound / span * span) : bound;
    constexpr std::uint64_t intact = ~std::uint64_t(0);
    // The first block of [lo, hi) (read to `p`) whose checksum differs, or `intact`.
    const auto first_bad = [&chunk, span, len](const char* p, std::uint64_t lo, std::uint64_t hi) {
        const auto& sums = chunk.storage.checksums;
        for (std::uint64_t blk = lo / span; blk * span < hi; ++blk) {
            const auto s = blk * span, e = std::min(len, s + span);
            if (blk >= sums.size() || detail::checksum(p + (s - lo), static_cast<std::size_t>(e - s)) != sums[blk])
                return blk;
        }
        return intact;
    };
    const auto check = [&](std::uint64_t blk) {
        if (blk == intact)
            return;
        const auto s = blk * span, e = std::min(len, s + span);
        (void)read_range(fqn, chunk, span, s, e); // re-read through the buffer: throws with the details
        throw error::IntegrityError("checksum mismatch in '" + fqn + "': file " + fs::join(path, chunk.storage.path) +
                                    ", bytes [" + std::to_string(chunk.storage.offset + s) + ", " +
                                    std::to_string(chunk.storage.offset + e) + ")");
    };
    std::future<std::uint64_t> pending; // the verification of the previous piece
    for (std::uint64_t lo = A; lo < B; lo += piece) {
        const auto hi = std::min(B, lo + piece);
        char* p = dst + (lo - a);
        f.read_at(chunk.storage.offset + lo, p, hi - lo);
        bytes_read += hi - lo;
        if (!span)
            continue;
        if (hi < B) {
            auto next = std::async(std::launch::async, first_bad, p, lo, hi);
            if (pending.valid())
                check(pending.get());
            pending = std::move(next);
        } else {
            if (pending.valid())
                check(pending.get());
            check(first_bad(p, lo, hi));
        }
    }
    if (b > B)
        std::memcpy(dst + (B - a), read_range(fqn, chunk, span, B, b), static_cast<std::size_t>(b - B));
}

void DistcpReader::Impl::read_array(const ReadItem& item, const ChunkMeta& chunk, DType dtype, LoadPlanner& planner)
{
    const DataRef dst = planner.resolve_destination(item);
    const auto es = static_cast<std::uint64_t>(dtype_size(dtype));
    if (dst.view.elem_size != es || dst.view.shape != item.box.shape)
        throw error::WrongAPIUsage("array '" + item.fqn + "': the planner's destination does not match the region " +
                                   item.box.str());
    const Box& C = chunk.box;
    const Box& I = item.box;
    const std::size_t nd = C.ndim();
    if (I.ndim() != nd || !intersect(C, I) || intersect(C, I)->volume() != I.volume())
        if (nd > 0)
            throw error::FormatError("array '" + item.fqn + "': region " + I.str() + " is not inside stored chunk " +
                                     C.str());
    if (I.volume() == 0)
        return;
    const std::uint64_t span = span_of(chunk, es);

    // A run is a stretch of the region contiguous in the file: dimensions
    // k.. of the region, where the region spans the chunk fully beyond k.
    std::size_t k = nd == 0 ? 0 : nd - 1;
    while (k > 0 && I.shape[k] == C.shape[k])
        --k;
    const Shape cs = row_major_strides(C.shape);
    std::uint64_t run_elems = 1;
    for (std::size_t d = k; d < nd; ++d)
        run_elems *= static_cast<std::uint64_t>(d == k ? I.shape[d] : C.shape[d]);
    std::uint64_t nruns = 1;
    for (std::size_t d = 0; d < k; ++d)
        nruns *= static_cast<std::uint64_t>(I.shape[d]);
    const std::uint64_t run_bytes = run_elems * es;
    // Room for widening a read to whole checksum blocks at both ends.
    const std::uint64_t cap = buffer.size() - 2 * span;

    Shape idx(k, 0); // outer index of the current run
    auto run_offset = [&]() {  // chunk-relative byte offset of the current run
        std::int64_t e = 0;
        for (std::size_t d = 0; d < k; ++d)
            e += (I.offsets[d] - C.offsets[d] + idx[d]) * cs[d];
        if (nd > 0)
            e += (I.offsets[k] - C.offsets[k]) * cs[k];
        return static_cast<std::uint64_t>(e) * es;
    };
    auto next = [&]() {
        for (std::size_t d = k; d-- > 0;) {
            if (++idx[d] < I.shape[d])
                return;
            idx[d] = 0;
        }
    };

    // Dense host destination and long runs: read straight into it.
    const bool direct = dst.space == MemorySpace::host && detail::is_dense(dst.view) && run_bytes >= k_direct_min;
    // Other host destinations: each read through the buffer goes to one
    // half of it while the read before it, in the other half, is verified
    // and copied out on a helper thread (reads of k_overlap_min bytes or
    // more; smaller ones are finished here). Device destinations are copied
    // here, on the thread that chose their device.
    const std::uint64_t half = buffer.size() / 2;
    const bool overlap = !direct && dst.space == MemorySpace::host && half >= 2 * span + es;
    // At least a block per read: a read of up to `span` bytes touches at
    // most two blocks, and the buffer (four blocks or more) has room for
    // two per half. Smaller reads would read the blocks they share with
    // their neighbours over and over.
    const std::uint64_t read_cap = std::max(overlap ? half - 2 * span : cap, span);
    std::future<void> pending; // the helper's verification and copy of the previous read
    int side = 0;
    // Reads bytes [a, b) of the chunk through the buffer (its next half when
    // overlapping); `copy(at)` copies them out from where byte a landed,
    // once their blocks are verified.
    auto through_buffer = [&](std::uint64_t a, std::uint64_t b, auto copy) {
        char* to = buffer.data() + (overlap ? side * half : 0);
        const auto A = read_widened(chunk, span, a, b, to, overlap ? half : buffer.size());
        auto finish = [this, &item, &chunk, span, to, A, b, at = to + (a - A), copy = std::move(copy)] {
            check_blocks(item.fqn, chunk, span, to, A, b);
            copy(at);
        };
        if (pending.valid())
            pending.get(); // the other half is free again
        if (overlap && b - a >= k_overlap_min)
            pending = std::async(std::launch::async, std::move(finish));
        else
            finish();
        side ^= 1;
    };

    std::uint64_t r = 0;
    while (r < nruns) {
        const auto first_off = run_offset();
        if (direct) {
            read_direct(item.fqn, chunk, span, first_off, first_off + run_bytes,
                        static_cast<char*>(dst.view.data) + r * run_bytes);
            ++r;
            next();
            continue;
        }
        if (run_bytes > read_cap) {
            // One run larger than a read: read it in pieces.
            for (std::uint64_t e = 0; e < run_elems;) {
                const auto n = std::min<std::uint64_t>(run_elems - e, read_cap / es);
                const auto a = first_off + e * es, b = first_off + (e + n) * es;
                const auto first = static_cast<std::int64_t>(r * run_elems + e);
                const auto count = static_cast<std::int64_t>(n);
                through_buffer(a, b, [&dst, first, count](const char* p) { detail::stage_in(dst, first, count, p); });
                e += n;
            }
            ++r;
            next();
            continue;
        }
        // Gather following runs into one read while the span fits and the
        // gaps are small (data sieving).
        std::vector<std::uint64_t> offs{first_off};
        std::uint64_t end = first_off + run_bytes;
        auto r2 = r + 1;
        next();
        while (r2 < nruns) {
            const auto o = run_offset();
            if (o < end || o - end > k_sieve_gap || o + run_bytes - first_off > read_cap)
                break;
            // The bytes between two runs are read only where they lie in
            // checksum blocks read anyway (data sieving inside the blocks):
            // a load reads no block it does not need.
            if (span ? o / span > (end - 1) / span + 1 : o != end)
                break;
            offs.push_back(o);
            end = o + run_bytes;
            ++r2;
            next();
        }
        auto copy = [&dst, r, run_elems, first_off, offs = std::move(offs)](const char* p) {
            for (std::size_t j = 0; j < offs.size(); ++j)
                detail::stage_in(dst, static_cast<std::int64_t>((r + j) * run_elems),
                                 static_cast<std::int64_t>(run_elems), p + (offs[j] - first_off));
        };
        through_buffer(first_off, end, std::move(copy));
        r = r2;
    }
    if (pending.valid())
        pending.get();
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
    // Visit chunks in file order for sequential access.
    struct Task {
        const ReadItem* item;
        const EntryMeta* entry;
        const ChunkMeta* chunk;
        std::uint64_t first; // the item's first element in the chunk (row-major)
    };
    std::vector<Task> tasks;
    tasks.reserve(plan.items.size());
    std::uint64_t largest = 0;
    for (const auto& item : plan.items) {
        auto e = im.md->entries.find(item.fqn);
        if (e == im.md->entries.end() || item.chunk >= e->second.chunks.size())
            throw error::WrongAPIUsage("read item for '" + item.fqn + "' chunk " + std::to_string(item.chunk) +
                                       " is not in the checkpoint's metadata");
        const ChunkMeta& chunk = e->second.chunks[item.chunk];
        std::uint64_t first = 0;
        if (item.kind != ItemKind::bytes && item.box.ndim() == chunk.box.ndim())
            for (std::size_t d = 0; d < chunk.box.ndim(); ++d)
                first = first * static_cast<std::uint64_t>(chunk.box.shape[d]) +
                        static_cast<std::uint64_t>(std::max<std::int64_t>(item.box.offsets[d] - chunk.box.offsets[d], 0));
        tasks.push_back(Task{&item, &e->second, &chunk, first});
        largest = std::max(largest, e->second.chunks[item.chunk].storage.length);
    }
    // Items of one chunk by their first byte: reads of a chunk go forward,
    // and a block two items share is read once (Impl::held).
    std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) {
        if (a.chunk->storage.path != b.chunk->storage.path)
            return a.chunk->storage.path < b.chunk->storage.path;
        if (a.chunk->storage.offset != b.chunk->storage.offset)
            return a.chunk->storage.offset < b.chunk->storage.offset;
        return a.first < b.first;
    });
    // The buffer: the staging bound, no more than the largest chunk needs,
    // and room for four checksum blocks when verifying.
    std::uint64_t want = std::min<std::uint64_t>(im.staging, std::max<std::uint64_t>(largest, 4096));
    for (const auto& t : tasks)
        want = std::max(want, 4 * im.span_of(*t.chunk, t.item->kind == ItemKind::bytes ? 1 : dtype_size(t.entry->dtype)));
    im.buffer = detail::HostBuffer(static_cast<std::size_t>(want));
    im.held = {};
    for (const auto& t : tasks) {
        im.check_extent(t.item->fqn, *t.chunk);
        if (t.item->kind == ItemKind::bytes) {
            const auto n = t.chunk->storage.length;
            std::vector<std::byte> data(static_cast<std::size_t>(n));
            const auto span = im.span_of(*t.chunk, 1);
            const auto piece = im.buffer.size() - 2 * span;
            for (std::uint64_t a = 0; a < n; a += piece) {
                const auto b = std::min(n, a + piece);
                std::memcpy(data.data() + a, im.read_range(t.item->fqn, *t.chunk, span, a, b), static_cast<std::size_t>(b - a));
            }
            planner.load_bytes(*t.item, std::move(data));
        } else {
            im.read_array(*t.item, *t.chunk, t.entry->dtype, planner);
        }
    }
    for (auto& [name, f] : im.files)
        f->close();
    im.files.clear();
    im.sizes.clear();
    im.buffer = detail::HostBuffer();
    im.held = {};
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
    const std::uint64_t size = std::max<std::uint64_t>(std::min<std::uint64_t>(im.staging, chunk.storage.length), 4 * span);
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
