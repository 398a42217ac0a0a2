// The per-rank layout, writing side: each rank opens its own .distcp files
// on MPI_COMM_SELF and writes its chunks at explicit offsets, large ones
// aligned, small ones coalesced into one write.
#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "comm/protocol.hpp"
#include "core/checksum.hpp"
#include "core/codec.hpp"
#include "core/fault.hpp"
#include "core/metadata_adapter.hpp"
#include "core/stream_copy.hpp"
#include "core/strided.hpp"
#include "stage/stage.hpp"
#include "storage/columnar_storage.hpp"
#include "storage/per_rank/commit.hpp"
#include "storage/per_rank/file_groups.hpp"
#include "storage/per_rank/mapped_files.hpp"
#include "io/mpiio.hpp"
#include "io/fs.hpp"
#include "format/metadata_h5.hpp"
#include "io/mpi_hints.hpp"
#include "io/writeback.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/magic.h>
#include <sys/statfs.h>
#endif

namespace cairn {

using detail::MpiFile;
namespace fs = detail::fs;

namespace {

std::string data_file_name(int rank, int k)
{
    return "__" + std::to_string(rank) + "_" + std::to_string(k) + ".distcp";
}

std::string utc_now()
{
    const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

// Whether the directory `dir` is on a RAM disk (tmpfs, ramfs): a written
// byte is in its final place there, and fsync and early writeback have no
// device to wait for.
bool on_ram_disk(const std::string& dir)
{
#if defined(__linux__)
    struct statfs sf {};
    if (::statfs(dir.c_str(), &sf) != 0)
        return false;
    const auto type = static_cast<unsigned long>(sf.f_type);
    return type == static_cast<unsigned long>(TMPFS_MAGIC) || type == static_cast<unsigned long>(RAMFS_MAGIC);
#else
    (void)dir;
    return false;
#endif
}

// The mappings of data files on a RAM disk (storage/per_rank/mapped_files.hpp),
// one per file (device and inode: a reused file is renamed between saves),
// each of the whole file, shared and writable, with its descriptor.
class MappedFiles {
public:
    static MappedFiles& instance()
    {
        static MappedFiles m;
        return m;
    }
    ~MappedFiles() { clear(); }

    /// The mapping of data file `path` (on a RAM disk) of `size` bytes, kept
    /// or made now; null where the file is not to be written through one:
    /// it is not `size` bytes long, or has holes (a store into a hole would
    /// need a new page, and a full RAM disk answers that with SIGBUS, not
    /// an error; every page of a file written whole before is there), or a
    /// fault is armed (fault points are on the MPI-IO path). Local.
    char* get(const std::string& path, std::uint64_t size)
    {
#if defined(__linux__) && defined(SEEK_HOLE)
        if (size == 0 || detail::fault::g_armed.load(std::memory_order_relaxed))
            return nullptr;
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            return nullptr;
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != size) {
            ::close(fd);
            return nullptr;
        }
        std::lock_guard<std::mutex> lock(m_mutex);
        auto kept = std::find_if(m_entries.begin(), m_entries.end(),
                                 [&](const Entry& e) { return e.dev == st.st_dev && e.ino == st.st_ino; });
        if (kept != m_entries.end() && kept->size != size) { // the file was resized since
            release(*kept);
            m_entries.erase(kept);
            kept = m_entries.end();
        }
        // The search for a hole walks the file's pages (milliseconds for
        // hundreds of MiB). A kept mapping's file had none when it was
        // mapped, and a hole punched since would lower its allocated blocks,
        // which tmpfs counts page by page: while they cover the file, it is
        // not searched again (ramfs counts none: searched every time).
        const bool covered = kept != m_entries.end() && static_cast<std::uint64_t>(st.st_blocks) * 512 >= size;
        if (!covered && ::lseek(fd, 0, SEEK_HOLE) != static_cast<off_t>(size)) {
            ::close(fd);
            return nullptr;
        }
        if (kept != m_entries.end()) {
            ::close(fd);
            return kept->addr;
        }
        void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                         fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            return nullptr;
        }
        try {
            m_entries.push_back(Entry{st.st_dev, st.st_ino, size, static_cast<char*>(p), fd});
        } catch (...) {
            ::munmap(p, static_cast<std::size_t>(size));
            ::close(fd);
            return nullptr;
        }
        return static_cast<char*>(p);
#else
        (void)path;
        (void)size;
        return nullptr;
#endif
    }

    /// detail::use_kept_mapping().
    bool use(const std::string& path, std::uint64_t size, const std::function<void(const char*)>& use)
    {
        struct stat st {};
        if (detail::fault::g_armed.load(std::memory_order_relaxed) || ::stat(path.c_str(), &st) != 0 ||
            static_cast<std::uint64_t>(st.st_size) != size)
            return false;
        std::lock_guard<std::mutex> lock(m_mutex);
        for (const auto& e : m_entries)
            if (e.dev == st.st_dev && e.ino == st.st_ino && e.size == size) {
                use(e.addr);
                return true;
            }
        return false;
    }

    /// Unmaps the files without a name.
    void sweep() noexcept
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        for (auto it = m_entries.begin(); it != m_entries.end();) {
            struct stat st {};
            if (::fstat(it->fd, &st) != 0 || st.st_nlink == 0) {
                release(*it);
                it = m_entries.erase(it);
            } else {
                ++it;
            }
        }
    }

    void clear() noexcept
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        for (auto& e : m_entries)
            release(e);
        m_entries.clear();
    }

private:
    struct Entry {
        dev_t dev;
        ino_t ino;
        std::uint64_t size;
        char* addr;
        int fd;
    };
    static void release(Entry& e) noexcept
    {
        ::munmap(e.addr, static_cast<std::size_t>(e.size));
        ::close(e.fd);
    }
    std::mutex m_mutex;
    std::vector<Entry> m_entries;
};

// Streams the items of one file through one staging buffer: small items and
// strided or device-resident data are packed (copied out of CUDA device
// memory where they live there) and written when the buffer is full, with
// `MPI_File_write_at`; dense host items of at least `direct_min` bytes go
// straight from the caller's memory, in pieces of early writeback (every
// write is reported to the file's Writeback, which starts the device on
// it), hashed from the same memory during the sync; where there is no sync
// worth overlapping (`hash_as_written`: no fsync, or a RAM disk) and into a
// file written directly (MpiFile::write_direct), they are hashed piece by
// piece as they go instead, each piece still in the cache from its write,
// so that the bytes are read from memory once (into a RAM-disk file that
// MappedFiles maps, by a copy whose stores bypass the cache); device items
// of at least `direct_min` bytes go through the buffer's two halves, the
// copy of one from the GPU running while the other is hashed and written.
// Extra host memory: the buffer, whatever the state. The writes are
// blocking on purpose: OpenMPI's `ompio` completes an `MPI_File_iwrite_at`
// at about 0.25 GB/s here (measured: 0.2-0.25 s in MPI_Wait for the 3
// buffers of the mixed benchmark's small items, 0.01 s with blocking
// writes), and ROMIO's ufs driver writes inside the non-blocking call
// anyway, so a second buffer bought no overlap.
class FileStream {
public:
    FileStream(MpiFile& file, detail::HostBuffer& buffer, detail::DeferredHashes& deferred,
               detail::Writeback& writeback, bool hash_as_written, char* mapped, std::uint64_t mapped_size)
        : m_file(file), m_buf(buffer), m_deferred(deferred), m_writeback(writeback),
          m_hash_as_written(hash_as_written), m_map(mapped), m_map_size(mapped_size)
    {
    }

    /// Writes one item at `offset`, feeding its bytes to `hasher` (if any)
    /// as they stream out.
    void put(const DataRef& ref, std::uint64_t offset, std::uint64_t nbytes, std::uint64_t direct_min,
             detail::ChunkHasher* hasher)
    {
        const auto& v = ref.view;
        const auto es = static_cast<std::uint64_t>(v.elem_size);
        const auto elems = static_cast<std::uint64_t>(volume(v.shape));
        if (elems * es != nbytes)
            throw error::WriteError(m_file.path() + ": the planner's data has " + std::to_string(elems * es) +
                                    " bytes, the plan expects " + std::to_string(nbytes));
        if (nbytes == 0)
            return;
        if (ref.space == MemorySpace::host && detail::is_dense(v) && nbytes >= direct_min) {
            flush();
            const auto* p = static_cast<const char*>(v.data);
            // Written around the page cache, the bytes are on the device
            // once written: hashed piece by piece as the device writes.
            // Without a sync to overlap with, each piece is hashed after
            // its write, from the cache. Into a mapped file (MappedFiles),
            // the pieces are copied with non-temporal stores (the file's
            // pages are not read back during the save), their source then
            // hashed from the cache.
            const bool direct = m_file.writes_direct();
            const bool hash_now = hasher && (direct || m_hash_as_written);
            char* const to = m_map && offset + nbytes <= m_map_size ? m_map + offset : nullptr;
            for (std::uint64_t done = 0; done < nbytes;) {
                const auto n = hash_now || to
                                   ? std::min<std::uint64_t>(nbytes - done, direct ? k_hash_piece : k_cached_piece)
                                   : m_writeback.piece(nbytes - done);
                if (to) {
                    detail::copy_streaming(to + done, p + done, static_cast<std::size_t>(n));
                } else {
                    m_file.write_at(offset + done, p + done, n);
                    m_writeback.wrote(offset + done, n);
                }
                if (hash_now)
                    hasher->update(p + done, static_cast<std::size_t>(n));
                done += n;
            }
            if (hasher && !hash_now) // hashed later, from the same memory (during the sync)
                m_deferred.add(hasher, v.data, static_cast<std::size_t>(nbytes));
            return;
        }
        if (ref.space != MemorySpace::host && nbytes >= direct_min && m_buf.size() / 2 >= es) {
            flush();
            put_device(ref, offset, elems, es, hasher);
            return;
        }
        const auto cap = m_buf.size();
        std::uint64_t e = 0;
        while (e < elems) {
            const auto at = offset + e * es;
            if (m_len > 0 && at != m_start + m_len) {
                const auto gap = at - (m_start + m_len);
                if (at > m_start + m_len && gap <= cap - m_len && gap < 65536) {
                    std::memset(m_buf.data() + m_len, 0, gap); // alignment padding
                    m_len += gap;
                } else {
                    flush();
                }
            }
            if (m_len == 0)
                m_start = at;
            const auto n = std::min<std::uint64_t>(elems - e, (cap - m_len) / es);
            if (n == 0) {
                if (m_len == 0)
                    throw error::WriteError(m_file.path() + ": staging buffer smaller than one element");
                flush();
                continue;
            }
            detail::stage_out(ref, static_cast<std::int64_t>(e), static_cast<std::int64_t>(n), m_buf.data() + m_len);
            if (hasher)
                hasher->update(m_buf.data() + m_len, static_cast<std::size_t>(n * es));
            m_len += n * es;
            e += n;
            if (m_len == cap)
                flush();
        }
    }

    /// Writes a device item of `elems` elements of `es` bytes at `offset`,
    /// double-buffered: while half k of the buffer is hashed and written,
    /// the next piece is copied from the device into the other half.
    void put_device(const DataRef& ref, std::uint64_t offset, std::uint64_t elems, std::uint64_t es,
                    detail::ChunkHasher* hasher)
    {
        const std::uint64_t per = m_buf.size() / 2 / es; // elements per half
        char* const half[2] = {m_buf.data(), m_buf.data() + per * es};
        const auto start = [&](std::uint64_t e, char* dst) {
            detail::stage_out_start(ref, static_cast<std::int64_t>(e),
                                    static_cast<std::int64_t>(std::min(per, elems - e)), dst);
        };
        start(0, half[0]);
        try {
            int k = 0;
            for (std::uint64_t e = 0; e < elems; k ^= 1) {
                const auto n = std::min(per, elems - e);
                detail::stage_wait();
                if (e + n < elems)
                    start(e + n, half[k ^ 1]);
                if (hasher)
                    hasher->update(half[k], static_cast<std::size_t>(n * es));
                m_file.write_at(offset + e * es, half[k], n * es);
                m_writeback.wrote(offset + e * es, n * es);
                e += n;
            }
        } catch (...) {
            // No copy may land in the buffer once it is handed back.
            try {
                detail::stage_wait();
            } catch (...) {
            }
            throw;
        }
    }

    /// Writes what the buffer holds.
    void flush()
    {
        if (m_len) {
            m_file.write_at(m_start, m_buf.data(), m_len);
            m_writeback.wrote(m_start, m_len);
        }
        m_len = 0;
    }

private:
    static constexpr std::uint64_t k_hash_piece = std::uint64_t(4) << 20;
    // Written, then hashed while in the cache (a core's L2 holds it).
    static constexpr std::uint64_t k_cached_piece = std::uint64_t(256) << 10;
    MpiFile& m_file;
    detail::HostBuffer& m_buf;
    detail::DeferredHashes& m_deferred; // direct items, hashed by the caller later
    detail::Writeback& m_writeback;
    bool m_hash_as_written;
    char* m_map;                // the file's mapping (MappedFiles), or null
    std::uint64_t m_map_size;
    std::uint64_t m_start = 0;
    std::uint64_t m_len = 0;
};


// Where one rank's items go: for each of its files, the items (indices into
// the plan, in plan order) and their offsets from the start of the rank's
// region of the file, large items aligned, small ones packed.
struct FileLayout {
    std::vector<std::vector<std::size_t>> buckets;
    std::vector<std::vector<std::uint64_t>> offsets;
    std::vector<std::uint64_t> ends; // bytes of the rank's region, per file
};

FileLayout lay_out(const SavePlan& plan, std::size_t nfiles, std::uint64_t align)
{
    // Balance items over the files by size, largest first.
    FileLayout out;
    std::vector<std::size_t> order(plan.items.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return plan.items[a].nbytes > plan.items[b].nbytes; });
    out.buckets.resize(nfiles);
    out.offsets.resize(nfiles);
    out.ends.assign(nfiles, 0);
    std::vector<std::uint64_t> fill(nfiles, 0);
    for (auto i : order) {
        const auto k = static_cast<std::size_t>(std::min_element(fill.begin(), fill.end()) - fill.begin());
        out.buckets[k].push_back(i);
        fill[k] += plan.items[i].nbytes;
    }
    for (std::size_t k = 0; k < nfiles; ++k) {
        auto& bucket = out.buckets[k];
        // Plan order inside a file: large items aligned, small ones packed.
        std::sort(bucket.begin(), bucket.end());
        auto& offsets = out.offsets[k];
        offsets.resize(bucket.size());
        std::uint64_t end = 0;
        for (std::size_t j = 0; j < bucket.size(); ++j) {
            const auto& it = plan.items[bucket[j]];
            offsets[j] = it.nbytes >= align ? align_up(end, align) : end;
            end = offsets[j] + it.nbytes;
        }
        out.ends[k] = end;
    }
    return out;
}

// The ranks that share a file (DataFiles): their communicator (owned by
// the cache below) and their ranks in the save's communicator, ascending.
struct FileGroup {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0;
    std::vector<int> members;
};

// The group communicators of a save's communicator, split once per
// grouping and cached on it as an MPI attribute: repeated saves on one
// communicator split it once. They are freed with it (MPI_Comm_free of the
// save's communicator), and left to MPI_Finalize when that comes first.
struct GroupCache {
    std::map<int, MPI_Comm> comms; // key: -1 per node, else the file count
    std::map<int, std::vector<int>> members;
};

std::atomic<bool> g_finalizing{false};

int on_finalize_groups(MPI_Comm, int, void*, void*)
{
    g_finalizing = true; // MPI_COMM_SELF's attributes go first in MPI_Finalize
    return MPI_SUCCESS;
}

int free_group_cache(MPI_Comm, int, void* value, void*)
{
    auto* cache = static_cast<GroupCache*>(value);
    if (!g_finalizing)
        for (auto& kv : cache->comms)
            MPI_Comm_free(&kv.second);
    delete cache;
    return MPI_SUCCESS;
}

int group_cache_key()
{
    static const int key = [] {
        int finalize_key = MPI_KEYVAL_INVALID;
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize_groups, &finalize_key, nullptr);
        MPI_Comm_set_attr(MPI_COMM_SELF, finalize_key, nullptr);
        int k = MPI_KEYVAL_INVALID;
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_group_cache, &k, nullptr);
        return k;
    }();
    return key;
}

// Writes the items of `bucket` (at `offsets`, absolute) into `file` through
// the staging buffer, filling their write results (but the checksums);
// returns their hashers, which finish once the deferred hashes ran.
std::vector<std::unique_ptr<detail::ChunkHasher>>
write_items(const DistcpWriterOptions& opt, const SavePlan& plan, SavePlanner& planner, MpiFile& file,
            const std::string& name, const std::vector<std::size_t>& bucket, const std::vector<std::uint64_t>& offsets,
            detail::HostBuffer& staging, std::uint64_t direct_min, detail::DeferredHashes& deferred,
            detail::Writeback& writeback, bool hash_as_written, char* mapped, std::uint64_t mapped_size,
            std::vector<WriteResult>& results)
{
    FileStream stream(file, staging, deferred, writeback, hash_as_written, mapped, mapped_size);
    // One hasher per item; those of items written straight from the
    // caller's memory are fed after the writes.
    std::vector<std::unique_ptr<detail::ChunkHasher>> hashers(bucket.size());
    for (std::size_t j = 0; j < bucket.size(); ++j) {
        const auto& it = plan.items[bucket[j]];
        const DataRef ref = planner.resolve_data(it);
        if (opt.checksum_block)
            hashers[j] = std::make_unique<detail::ChunkHasher>(
                detail::checksum_span(ref.view.shape, ref.view.elem_size, opt.checksum_block));
        stream.put(ref, offsets[j], it.nbytes, direct_min, hashers[j].get());
        results[bucket[j]] = WriteResult{it.fqn, it.chunk, StorageInfo{name, offsets[j], it.nbytes, {}}};
    }
    stream.flush();
    writeback.start_rest();
    return hashers;
}


// What write_data prepares before it opens a file (local).
struct WriteSetup {
    FileLayout layout;
    std::vector<WriteResult> results;
    detail::HostBuffer staging;
    std::uint64_t direct_min = 1;
    /// Whether a file's sync waits for a device (fsync, not a RAM disk):
    /// early writeback then, and the hashing of direct items during it.
    bool sync_waits = true;
    /// Whether the files are on a RAM disk (a file of its own is written
    /// through a mapping where it can: MappedFiles).
    bool ram_disk = false;
};

WriteSetup set_up_writes(const DistcpWriterOptions& opt, const SavePlan& plan, const std::string& write_dir)
{
    WriteSetup s;
    s.ram_disk = on_ram_disk(write_dir);
    s.sync_waits = opt.fsync && !s.ram_disk;
    s.layout = lay_out(plan, static_cast<std::size_t>(opt.files_per_rank), opt.alignment);
    std::uint64_t total_bytes = 0;
    for (const auto& it : plan.items)
        total_bytes += it.nbytes;
    // One buffer of the staging bound (no more than the data needs); items
    // of an eighth of the bound or more go direct.
    if (!plan.items.empty())
        s.staging = detail::HostBuffer(
            static_cast<std::size_t>(std::min<std::uint64_t>(opt.staging_bytes, total_bytes + 65536)));
    s.direct_min = std::max<std::uint64_t>(opt.staging_bytes / 8, 1);
    s.results.resize(plan.items.size());
    return s;
}

// After the items of a file are written into it: syncs it (with
// opt.fsync; collective on a shared file) while the deferred hashes run.
void sync_file(const DistcpWriterOptions& opt, MpiFile& file, detail::DeferredHashes& deferred)
{
    if (opt.fsync)
        deferred.run_during([&] { file.sync(); }); // the sync mostly waits for the device
    else
        deferred.run();
}

// The checksums of the items of `bucket`, from their hashers (those of
// items written straight from the caller's memory finish once the deferred
// hashes ran).
void set_checksums(const std::vector<std::size_t>& bucket,
                   const std::vector<std::unique_ptr<detail::ChunkHasher>>& hashers, std::vector<WriteResult>& results)
{
    for (std::size_t j = 0; j < bucket.size(); ++j)
        if (hashers[j])
            results[bucket[j]].storage.checksums = hashers[j]->finish();
}

// Where each member's region of the group's files starts (`start`, per
// file) and the group's bytes of each file (`total`), the regions in rank
// order, each rounded up to the alignment so that aligned offsets inside a
// region are aligned in the file; `failed`: whether a member failed before
// (a local failure in set_up_writes). Collective over the group.
struct GroupRegions {
    std::vector<std::uint64_t> start, total;
    bool failed = false;
};

GroupRegions group_regions(const FileGroup& g, const FileLayout& layout, std::uint64_t align, bool failed)
{
    const auto nfiles = layout.ends.size();
    const auto n = static_cast<int>(nfiles + 1); // the sizes, then the failure count
    std::vector<std::uint64_t> mine(nfiles + 1, 0);
    GroupRegions out;
    out.start.assign(nfiles + 1, 0);
    out.total.assign(nfiles + 1, 0);
    if (!failed)
        for (std::size_t k = 0; k < nfiles; ++k)
            mine[k] = align_up(layout.ends[k], align);
    mine[nfiles] = failed ? 1 : 0;
    MPI_Exscan(mine.data(), out.start.data(), n, MPI_UINT64_T, MPI_SUM, g.comm);
    if (g.rank == 0)
        std::fill(out.start.begin(), out.start.end(), 0);
    MPI_Allreduce(mine.data(), out.total.data(), n, MPI_UINT64_T, MPI_SUM, g.comm);
    out.failed = out.total[nfiles] != 0;
    return out;
}

// The error agreement of a group after a step that `err` (null: none) ended
// on this member. Collective over the group: when any member failed, the
// lowest failing one rethrows its own error and every other member throws
// it too, the same kind with the same message after the failing member's
// rank in the save's communicator ("rank 3: ckpt/__0-3_0.distcp: write of
// ..."), so that whichever rank the save's agreement reports, it reports
// what failed and where.
void agree_in_group(const FileGroup& g, std::exception_ptr err)
{
    const int size = static_cast<int>(g.members.size());
    int first = err ? g.rank : size;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, g.comm);
    if (first == size)
        return;
    Error::Kind kind = Error::Kind::generic;
    std::string what;
    if (g.rank == first)
        std::tie(kind, what) = detail::describe_exception(err);
    detail::bcast_error(g.comm, first, kind, what);
    if (g.rank == first)
        std::rethrow_exception(err);
    error::throw_error(kind, "rank " + std::to_string(g.members[static_cast<std::size_t>(first)]) + ": " + what);
}

} // namespace

namespace detail {

namespace {

// fsync of the directory `dir`; on a failure runs `undo` (which never
// throws), then rethrows.
template <class Undo>
void fsync_or_undo(const std::string& dir, Undo undo)
{
    try {
        fs::fsync_path(dir);
    } catch (...) {
        undo();
        throw;
    }
}

// Swaps the checkpoint in `write_dir` in for the one at `path` in one step,
// where the file system can exchange two names: no moment without a
// checkpoint at `path`. Returns where the replaced checkpoint is now
// (`write_dir`), or "" where the names cannot be exchanged (nothing done).
std::string swap_in_by_exchange(const std::string& write_dir, const std::string& path, bool fsync)
{
    if (!fs::exchange(write_dir, path))
        return {};
    if (fsync) // a failed commit never damages the old checkpoint: swap it back
        fsync_or_undo(fs::parent(path), [&]() noexcept {
            try {
                fs::exchange(write_dir, path);
            } catch (...) {
            }
        });
    return write_dir;
}

// The same in two renames, `path` -> `old`, then `write_dir` -> `path`: a
// crash between them leaves both complete beside a missing `path`, which
// loads refuse to guess about and remove_leftovers() / `cairn repair`
// finish. Returns `old`.
std::string swap_in_by_renames(const std::string& write_dir, const std::string& path, const std::string& old,
                               bool fsync)
{
    fs::rename(path, old);
    const auto put_back = [&]() noexcept { // a failed commit never damages the old checkpoint
        try {
            fs::rename(old, path);
        } catch (...) {
        }
    };
    try {
        fs::rename(write_dir, path);
    } catch (...) {
        put_back();
        throw;
    }
    if (fsync)
        fsync_or_undo(fs::parent(path), [&]() noexcept {
            try {
                fs::rename(path, write_dir); // the caller removes it
            } catch (...) {
            }
            put_back();
        });
    return old;
}

// Removes the checkpoint that `path` replaced, now at `replaced`; a failure
// is only reported (committed: the replaced checkpoint is a leftover that
// find_leftovers() names).
void remove_replaced(const std::string& replaced, const std::string& path)
{
    try {
        fs::remove_all(replaced);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cairn: warning: checkpoint %s committed, but the checkpoint it replaced (%s) was "
                             "not removed: %s\n", path.c_str(), replaced.c_str(), e.what());
    }
}

} // namespace

void commit_distcp_dir(const std::string& write_dir, const std::string& path, bool fsync)
{
    const auto tmp = fs::join(write_dir, ".metadata.h5.tmp");
    if (fsync)
        fs::fsync_path(write_dir); // the data files' directory entries
    const auto final_md = fs::join(write_dir, metadata_file_name);
    fs::rename(tmp, final_md);
    // From here on the checkpoint may be visible. A failure to make it
    // durable (fsync) undoes what is visible and fails the save, so that
    // what save reports is what is on disk; a failure to clean up after the
    // commit (removing the replaced checkpoint) is only reported.
    const auto uncommit = [&]() noexcept {
        if (write_dir == path) {
            try {
                fs::rename(final_md, tmp); // no longer a checkpoint; the caller removes it
            } catch (...) {
            }
        }
    };
    if (fsync)
        fsync_or_undo(write_dir, uncommit);
    if (write_dir == path) {
        if (fsync)
            fsync_or_undo(fs::parent(path), uncommit);
        return;
    }
    // Swap the new checkpoint in; the old one is removed only after (the
    // staging name or `path`.cairn-old then holds it).
    const auto old = path + ".cairn-old";
    fs::remove_all(old); // a leftover of an earlier interrupted replacement
    auto replaced = swap_in_by_exchange(write_dir, path, fsync);
    if (replaced.empty())
        replaced = swap_in_by_renames(write_dir, path, old, fsync);
    remove_replaced(replaced, path);
}

} // namespace detail

namespace {

// Removes the data files and the temporary metadata of an unfinished save in
// the checkpoint directory `dir` (nothing there is committed): the files
// __*.distcp, __*.distcp.cairn-part and .metadata.h5.tmp.
template <class Remove>
void remove_unfinished(const std::string& dir, Remove remove)
{
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const auto name = e.path().filename().string();
        const bool part = name.size() > 18 && name.compare(name.size() - 18, 18, ".distcp.cairn-part") == 0;
        if ((name.rfind("__", 0) == 0 && (e.path().extension() == ".distcp" || part)) || name == ".metadata.h5.tmp")
            remove(e.path().string());
    }
}

} // namespace

void detail::unmap_removed_files() noexcept { MappedFiles::instance().sweep(); }

void detail::unmap_all_files() noexcept { MappedFiles::instance().clear(); }

bool detail::use_kept_mapping(const std::string& path, std::uint64_t size, const std::function<void(const char*)>& use)
{
    return MappedFiles::instance().use(path, size, use);
}

bool detail::is_ram_disk(const std::string& dir) { return on_ram_disk(dir); }

char* detail::kept_mapping(const std::string& path, std::uint64_t size)
{
    return MappedFiles::instance().get(path, size);
}

struct DistcpWriter::Impl final : detail::ColumnarWriter {
    void commit(detail::MetadataColumns& md) override;
    /// Writes this rank's file k (not grouped).
    void write_rank_file(const SavePlan& plan, SavePlanner& planner, WriteSetup& s, std::size_t k);
    /// Writes this member's region, at `start`, of the group's file k, with
    /// every collective call of the file whatever fails; returns what failed
    /// here (null: nothing).
    std::exception_ptr write_group_file(const SavePlan& plan, SavePlanner& planner, WriteSetup& s,
                                        const FileGroup& g, const GroupRegions& regions, std::size_t k);
    DistcpWriterOptions opt;
    std::string path;      // the checkpoint directory
    std::string write_dir; // where this save writes: `path`, or a staging sibling when replacing
    /// The directories this save created for `path` (coordinator): `path`
    /// first, then each parent that did not exist either.
    std::vector<std::string> created;
    bool committed = false; // the coordinator's commit went through: abort() leaves it
    bool coordinator = false;
    int rank = 0;
    int size = 1;
    MPI_Comm comm = MPI_COMM_NULL; // the save's

    /// Whether ranks share files (opt.files groups more than one rank).
    bool grouped() const
    {
        return opt.files.kind == DataFiles::Kind::per_node ||
               (opt.files.kind == DataFiles::Kind::count && opt.files.count < size);
    }

    /// The group of this rank under opt.files: the save's communicator
    /// split into the groups (collective over it), or the split of an
    /// earlier save on the same communicator (local).
    void split_group(FileGroup& g) const
    {
        const int key = opt.files.kind == DataFiles::Kind::per_node ? -1 : opt.files.count;
        const int cache_key = group_cache_key();
        GroupCache* cache = nullptr;
        int found = 0;
        MPI_Comm_get_attr(comm, cache_key, &cache, &found);
        if (!found || !cache) {
            cache = new GroupCache;
            MPI_Comm_set_attr(comm, cache_key, cache);
        }
        if (const auto it = cache->comms.find(key); it != cache->comms.end()) {
            g.comm = it->second;
            g.members = cache->members[key];
            MPI_Comm_rank(g.comm, &g.rank);
            return;
        }
        if (opt.files.kind == DataFiles::Kind::per_node) {
            MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &g.comm);
        } else {
            MPI_Comm_split(comm, detail::count_group(rank, size, opt.files.count), rank, &g.comm);
        }
        int n = 1;
        MPI_Comm_rank(g.comm, &g.rank);
        MPI_Comm_size(g.comm, &n);
        g.members.resize(static_cast<std::size_t>(n));
        MPI_Allgather(&rank, 1, MPI_INT, g.members.data(), 1, MPI_INT, g.comm);
        cache->comms[key] = g.comm;
        cache->members[key] = g.members;
    }
};

DistcpWriter::DistcpWriter(DistcpWriterOptions options) : m_impl(std::make_unique<Impl>())
{
    if (options.files_per_rank < 1)
        throw error::WrongAPIUsage("files_per_rank must be at least 1, not " + std::to_string(options.files_per_rank));
    if (options.files.kind == DataFiles::Kind::count && options.files.count < 1)
        throw error::WrongAPIUsage("the number of data files (DataFiles::in_all) must be at least 1, not " +
                                   std::to_string(options.files.count));
    if (options.staging_bytes < 4096)
        throw error::WrongAPIUsage("staging_bytes must be at least 4096, not " + std::to_string(options.staging_bytes));
    detail::check_mpi_hints(options.mpi_hints);
    m_impl->opt = std::move(options);
}

DistcpWriter::~DistcpWriter() = default;

void DistcpWriter::reset(const std::string& checkpoint_id)
{
    if (checkpoint_id.empty())
        throw error::WrongAPIUsage("empty checkpoint id");
    m_impl->path = fs::strip(checkpoint_id);
    m_impl->write_dir.clear();
    m_impl->created.clear();
    m_impl->committed = false;
}

void DistcpWriter::set_up_storage_writer(bool is_coordinator, MPI_Comm comm)
{
    m_impl->coordinator = is_coordinator;
    m_impl->comm = comm;
    MPI_Comm_rank(comm, &m_impl->rank);
    MPI_Comm_size(comm, &m_impl->size);
}

std::vector<SavePlan> DistcpWriter::prepare_global_plan(std::vector<SavePlan> plans)
{
    auto& im = *m_impl;
    if (fs::exists(im.path) && !fs::is_directory(im.path))
        throw error::WriteError("cannot save to " + im.path + ": it exists and is not a directory");
    if (fs::exists(fs::join(im.path, metadata_file_name))) {
        if (!im.opt.overwrite)
            throw error::WrongAPIUsage("checkpoint " + im.path +
                                       " already exists (pass overwrite to replace it once the new one is committed)");
        im.write_dir = im.path + ".cairn-staging";
        fs::remove_all(im.write_dir);
    } else {
        im.write_dir = im.path;
        // Leftovers of an interrupted save or drain (a copy under its
        // temporary name, src/levels/drain.cpp): nothing here is committed.
        if (fs::is_directory(im.path))
            remove_unfinished(im.path, fs::remove_all);
        // What this save creates, so that a failed save removes it again.
        for (std::string dir = im.path; !dir.empty() && !fs::exists(dir);) {
            im.created.push_back(dir);
            const auto up = fs::parent(dir);
            dir = up == dir || up == "." ? std::string() : up;
        }
    }
    fs::create_directories(im.write_dir);
    detail::Encoder enc;
    enc.str(im.write_dir);
    const auto data = enc.take();
    for (auto& p : plans)
        p.storage_data = data;
    return plans;
}


void DistcpWriter::Impl::write_rank_file(const SavePlan& plan, SavePlanner& planner, WriteSetup& s, std::size_t k)
{
    const auto& bucket = s.layout.buckets[k];
    const auto name = data_file_name(rank, static_cast<int>(k));
    MpiFile file(fs::join(write_dir, name), MpiFile::Mode::write, opt.mpi_hints);
    file.set_size(s.layout.ends[k]);
    char* const mapped = s.ram_disk ? MappedFiles::instance().get(file.path(), s.layout.ends[k]) : nullptr;
    detail::DeferredHashes deferred;
    detail::Writeback writeback(file.path(), s.sync_waits ? opt.writeback_bytes : 0);
    const auto hashers =
        write_items(opt, plan, planner, file, name, bucket, s.layout.offsets[k], s.staging, s.direct_min, deferred,
                    writeback, !s.sync_waits, mapped, s.layout.ends[k], s.results);
    sync_file(opt, file, deferred);
    file.close();
    set_checksums(bucket, hashers, s.results);
}

std::exception_ptr DistcpWriter::Impl::write_group_file(const SavePlan& plan, SavePlanner& planner, WriteSetup& s,
                                                        const FileGroup& g, const GroupRegions& regions,
                                                        std::size_t k)
{
    const auto start = regions.start[k];
    const auto name = detail::group_file_name(g.members, k);
    const auto& bucket = s.layout.buckets[k];
    std::vector<std::uint64_t> offsets = s.layout.offsets[k];
    for (auto& o : offsets)
        o += start;
    std::unique_ptr<MpiFile> file;
    try {
        file = std::make_unique<MpiFile>(fs::join(write_dir, name), MpiFile::Mode::write, opt.mpi_hints,
                                         g.comm); // fails on every member or on none
    } catch (...) {
        return std::current_exception();
    }
    // A durable save writes the member's region, rounded up to the
    // alignment, around the page cache where it can (MpiFile::write_direct).
    std::exception_ptr err;
    try {
        if (opt.fsync && !bucket.empty())
            file->write_direct(start, start + align_up(s.layout.ends[k], opt.alignment));
    } catch (...) {
        err = std::current_exception();
    }
    detail::DeferredHashes deferred;
    detail::Writeback writeback(file->path(), s.sync_waits && !file->writes_direct() ? opt.writeback_bytes : 0);
    std::vector<std::unique_ptr<detail::ChunkHasher>> hashers;
    try {
        if (!err)
            hashers = write_items(opt, plan, planner, *file, name, bucket, offsets, s.staging, s.direct_min,
                                  deferred, writeback, !s.sync_waits, nullptr, 0, s.results);
    } catch (...) {
        err = std::current_exception();
    }
    // The sync and the close are collective: a member that failed still
    // makes them, once.
    try {
        if (!err)
            sync_file(opt, *file, deferred);
        else if (opt.fsync)
            file->sync();
    } catch (...) {
        if (!err)
            err = std::current_exception();
    }
    try {
        file->close();
    } catch (...) {
        if (!err)
            err = std::current_exception();
    }
    if (!err)
        set_checksums(bucket, hashers, s.results);
    return err;
}

std::vector<WriteResult> DistcpWriter::write_data(const SavePlan& plan, SavePlanner& planner)
{
    auto& im = *m_impl;
    if (!im.grouped()) {
        detail::Decoder dec(plan.storage_data, "distcp plan");
        im.write_dir = dec.str();
        auto s = set_up_writes(im.opt, plan, im.write_dir);
        if (s.ram_disk)
            MappedFiles::instance().sweep();
        for (std::size_t k = 0; k < s.layout.buckets.size(); ++k)
            if (!s.layout.buckets[k].empty())
                im.write_rank_file(plan, planner, s, k);
        return std::move(s.results);
    }
    // Grouped: every member makes every collective call whatever fails on
    // it, and failures are agreed in the group before the regions are used
    // and after each file, so that no member waits for one that gave up.
    std::exception_ptr failed;
    WriteSetup s;
    try {
        detail::Decoder dec(plan.storage_data, "distcp plan");
        im.write_dir = dec.str();
        s = set_up_writes(im.opt, plan, im.write_dir);
    } catch (...) {
        failed = std::current_exception();
    }
    FileGroup g;
    im.split_group(g);
    const auto nfiles = static_cast<std::size_t>(im.opt.files_per_rank);
    if (failed)
        s.layout.ends.assign(nfiles, 0);
    const auto regions = group_regions(g, s.layout, im.opt.alignment, failed != nullptr);
    if (regions.failed)
        agree_in_group(g, failed); // throws on every member
    for (std::size_t k = 0; k < nfiles; ++k)
        if (regions.total[k] != 0)
            agree_in_group(g, im.write_group_file(plan, planner, s, g, regions, k));
    return std::move(s.results);
}

void DistcpWriter::finish(const Metadata& metadata, const std::vector<std::vector<WriteResult>>&)
{
    auto md = detail::to_columns(metadata);
    m_impl->commit(md);
}

detail::ColumnarWriter* DistcpWriter::columnar() noexcept { return m_impl.get(); }

const char* DistcpWriter::layout_name() const noexcept { return "per_rank"; }

std::string DistcpWriter::lock_path() const { return m_impl->path; }

bool DistcpWriter::writes_items_in_turn() const noexcept { return true; }

void DistcpWriter::Impl::commit(detail::MetadataColumns& md)
{
    auto& im = *this;
    md.layout = "distcp";
    md.checksum_block = im.opt.checksum_block;
    md.created = utc_now();
    detail::write_metadata_file(fs::join(im.write_dir, ".metadata.h5.tmp"), md, im.opt.fsync);
    detail::commit_distcp_dir(im.write_dir, im.path, im.opt.fsync);
    im.write_dir = im.path;
    im.committed = true;
}

// The coordinator, after every rank agreed on the failure: each rank has
// left write_data by then (its files closed, a group's after the group's
// last agreement), so nothing writes here any more.
void DistcpWriter::abort() noexcept
{
    auto& im = *m_impl;
    if (im.write_dir.empty() || im.committed)
        return;
    if (im.write_dir != im.path) {
        fs::remove_all_noexcept(im.write_dir); // the staging sibling; the checkpoint at path is untouched
        return;
    }
    if (im.created.empty()) {
        // A directory that was there before: what this save wrote into it.
        remove_unfinished(im.write_dir, fs::remove_all_noexcept);
        return;
    }
    // Created by this save: all of it, then each parent it created while
    // empty (another save may have put something beside it).
    fs::remove_all_noexcept(im.created.front());
    for (std::size_t k = 1; k < im.created.size(); ++k)
        if (::rmdir(im.created[k].c_str()) != 0)
            break;
}

std::string DataFiles::str() const
{
    switch (kind) {
    case Kind::per_rank: return "per-rank";
    case Kind::per_node: return "per-node";
    case Kind::count: break;
    }
    return std::to_string(count);
}

DataFiles DataFiles::parse(const std::string& text)
{
    if (text == "per-rank")
        return per_rank();
    if (text == "per-node")
        return per_node();
    if (!text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos) {
        const int m = std::stoi(text);
        if (m >= 1)
            return in_all(m);
    }
    throw error::WrongAPIUsage("data files '" + text +
                               "': expected per-rank, per-node or a number of files of at least 1");
}

bool is_distcp_checkpoint(const std::string& path)
{
    return fs::exists(fs::join(fs::strip(path), metadata_file_name));
}

} // namespace cairn
