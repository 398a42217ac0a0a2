// Redundancy of node-local steps (levels/redundancy.hpp): partner copies and
// XOR parity, encoded at save and used at restore to rebuild lost data files.
#include "levels/redundancy.hpp"

#include "cairn/errors.hpp"
#include "io/fs.hpp"
#include "storage/per_rank/mapped_files.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>

namespace cairn::detail {

namespace {

using u64 = std::uint64_t;

/// Bytes moved per message: bounds the memory of an exchange.
constexpr u64 piece_bytes = u64{4} << 20;
/// Tag of the messages on the duplicated communicators.
constexpr int tag_data = 33;

void mpi_check(int rc, const char* what)
{
    if (rc != MPI_SUCCESS)
        throw Error(Error::Kind::generic, std::string("node-local redundancy: ") + what + " failed");
}

/// A communicator of our own for one exchange (collective over `comm`).
class DupComm {
public:
    explicit DupComm(MPI_Comm comm) { mpi_check(MPI_Comm_dup(comm, &c), "MPI_Comm_dup"); }
    ~DupComm()
    {
        if (c != MPI_COMM_NULL)
            MPI_Comm_free(&c);
    }
    DupComm(const DupComm&) = delete;
    DupComm& operator=(const DupComm&) = delete;
    MPI_Comm c = MPI_COMM_NULL;
};

/// The first local error of an exchange. Once one happened, the rank goes
/// on with the messages (sending zeros, writing nothing) so that no other
/// rank waits for it forever, and throws it at the end.
class FirstError {
public:
    template <class F>
    void run(F&& f)
    {
        if (m_error)
            return;
        try {
            f();
        } catch (...) {
            m_error = std::current_exception();
        }
    }
    bool failed() const noexcept { return static_cast<bool>(m_error); }
    void rethrow() const
    {
        if (m_error)
            std::rethrow_exception(m_error);
    }

private:
    std::exception_ptr m_error;
};

std::string sys_error() { return std::strerror(errno); }

class InFile {
public:
    explicit InFile(std::string path) : m_path(std::move(path))
    {
        m_fd = ::open(m_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (m_fd < 0)
            throw error::ReadError("node-local redundancy: cannot open " + m_path + ": " + sys_error());
    }
    ~InFile()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    InFile(const InFile&) = delete;
    InFile& operator=(const InFile&) = delete;

    void read_at(char* dst, u64 offset, u64 length)
    {
        while (length > 0) {
            const ssize_t n = ::pread(m_fd, dst, static_cast<std::size_t>(std::min<u64>(length, u64{1} << 30)),
                                      static_cast<off_t>(offset));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                throw error::ReadError("node-local redundancy: read of " + m_path + " at byte " +
                                       std::to_string(offset) + " failed: " + sys_error());
            if (n == 0)
                throw error::ReadError("node-local redundancy: " + m_path +
                                       " is shorter than its saved size (ends at byte " + std::to_string(offset) + ")");
            dst += n;
            offset += static_cast<u64>(n);
            length -= static_cast<u64>(n);
        }
    }

private:
    std::string m_path;
    int m_fd = -1;
};

class OutFile {
public:
    explicit OutFile(std::string path) : m_path(std::move(path))
    {
        // Not truncated: a file recycled from an older step is written over
        // in place (its pages reused) and cut to the written length at
        // finish().
        m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (m_fd < 0)
            throw error::WriteError("node-local redundancy: cannot create " + m_path + ": " + sys_error());
    }
    ~OutFile()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    OutFile(const OutFile&) = delete;
    OutFile& operator=(const OutFile&) = delete;

    /// For a file recycled from an older step on a RAM disk: makes it `size`
    /// bytes long with every page allocated and returns its kept mapping
    /// (storage/per_rank/mapped_files.hpp), into which the caller puts the
    /// whole file's bytes (received straight into place: no write(), whose
    /// page-cache lookups cost about twice a memcpy), instead of write().
    /// Null for a new (empty) file, elsewhere, or where the file cannot be
    /// mapped: write() then (into new pages, write(2) was not slower than
    /// allocating them first). A RAM disk without room for the file:
    /// error::WriteError naming it.
    char* map(u64 size)
    {
        if (size == 0 || !is_ram_disk(fs::parent(m_path)))
            return nullptr;
        // A file written whole before at this size is mapped as it is;
        // another is cut or grown to `size` first.
        m_map = kept_mapping(m_path, size);
        if (!m_map) {
            struct stat st {};
            if (::fstat(m_fd, &st) != 0)
                throw error::WriteError("node-local redundancy: cannot stat " + m_path + ": " + sys_error());
            if (st.st_size == 0)
                return nullptr;
            if (static_cast<u64>(st.st_size) > size && ::ftruncate(m_fd, static_cast<off_t>(size)) != 0)
                throw error::WriteError("node-local redundancy: cannot cut " + m_path + ": " + sys_error());
            if (!fs::reserve(m_path, 0, size))
                return nullptr;
            m_map = kept_mapping(m_path, size);
        }
        if (m_map)
            m_written = size;
        return m_map;
    }
    char* mapping() const noexcept { return m_map; }

    void write(const char* src, u64 length)
    {
        while (length > 0) {
            const ssize_t n = ::write(m_fd, src, static_cast<std::size_t>(std::min<u64>(length, u64{1} << 30)));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                throw error::WriteError("node-local redundancy: write of " + m_path + " failed" +
                                        (n < 0 ? ": " + sys_error() : std::string()) +
                                        fs::no_space_note(m_path, length));
            src += n;
            length -= static_cast<u64>(n);
            m_written += static_cast<u64>(n);
        }
    }
    /// Cut to the bytes written, fsync and close.
    void finish()
    {
        if (::ftruncate(m_fd, static_cast<off_t>(m_written)) != 0)
            throw error::WriteError("node-local redundancy: truncation of " + m_path + " failed: " + sys_error());
        if (::fsync(m_fd) != 0 && errno != EINVAL)
            throw error::WriteError("node-local redundancy: fsync of " + m_path + " failed: " + sys_error());
        const int fd = m_fd;
        m_fd = -1;
        if (::close(fd) != 0)
            throw error::WriteError("node-local redundancy: close of " + m_path + " failed: " + sys_error());
    }

private:
    std::string m_path;
    int m_fd = -1;
    u64 m_written = 0;
    char* m_map = nullptr; ///< kept mapping (map()), or null
};

/// A saved rank's data: its files, concatenated in the order of
/// SavedLayout::files, followed by zeros. Files marked absent read as zeros
/// too (another node holds them).
class ConcatReader {
public:
    ConcatReader(const std::string& dir, const std::vector<SavedFile>& files, const std::vector<bool>& here)
    {
        u64 at = 0;
        for (std::size_t i = 0; i < files.size(); ++i) {
            m_parts.push_back({fs::join(dir, files[i].name), at, files[i].bytes, here.empty() || here[i], nullptr});
            at += files[i].bytes;
        }
    }

    /// Bytes [offset, offset + length) of the data into dst.
    void read(char* dst, u64 offset, u64 length)
    {
        std::memset(dst, 0, static_cast<std::size_t>(length));
        for (auto& p : m_parts) {
            const u64 lo = std::max(offset, p.start), hi = std::min(offset + length, p.start + p.bytes);
            if (lo >= hi || !p.here)
                continue;
            if (!p.file)
                p.file = std::make_unique<InFile>(p.path);
            p.file->read_at(dst + (lo - offset), lo - p.start, hi - lo);
        }
    }

private:
    struct Part {
        std::string path;
        u64 start, bytes;
        bool here;
        std::unique_ptr<InFile> file;
    };
    std::vector<Part> m_parts;
};

/// Writes a stream of bytes as consecutive files (the inverse of
/// ConcatReader). Files marked skipped take their bytes but are not written.
/// Atomic: each file is written under a temporary name and renamed when
/// complete (finish()).
class ConcatWriter {
public:
    ConcatWriter(const std::string& dir, const std::vector<SavedFile>& files, const std::vector<bool>& skip,
                 bool atomic)
        : m_atomic(atomic)
    {
        for (std::size_t i = 0; i < files.size(); ++i) {
            const std::string path = fs::join(dir, files[i].name);
            m_parts.push_back({path, atomic ? path + ".cairn-rebuild" : path, files[i].bytes,
                               !skip.empty() && skip[i], nullptr});
        }
    }
    ~ConcatWriter()
    {
        if (m_atomic)
            for (auto& p : m_parts)
                if (p.file) {
                    p.file.reset();
                    fs::remove_all_noexcept(p.temp);
                }
    }

    void write(const char* src, u64 length)
    {
        while (length > 0) {
            open_next();
            if (m_current >= m_parts.size())
                return; // padding beyond the last file
            Part& p = m_parts[m_current];
            const u64 n = std::min(length, p.bytes - m_written);
            if (!p.skip)
                p.file->write(src, n);
            src += n;
            length -= n;
            m_written += n;
        }
    }

    /// Creates the files not reached yet (empty ones), syncs and renames them.
    void finish()
    {
        open_next();
        if (m_current < m_parts.size())
            throw error::Internal("node-local redundancy: " + m_parts[m_current].path +
                                  " got fewer bytes than its size");
        std::set<std::string> dirs;
        for (auto& p : m_parts) {
            if (p.skip)
                continue;
            p.file->finish();
            p.file.reset();
            if (m_atomic)
                fs::rename(p.temp, p.path);
            dirs.insert(fs::parent(p.path));
        }
        for (const auto& d : dirs)
            fs::fsync_path(d);
    }

private:
    /// Moves to the next file with room, opening it.
    void open_next()
    {
        while (m_current < m_parts.size()) {
            Part& p = m_parts[m_current];
            if (!p.skip && !p.file)
                p.file = std::make_unique<OutFile>(p.temp);
            if (m_written < p.bytes)
                return;
            ++m_current;
            m_written = 0;
        }
    }

    struct Part {
        std::string path, temp;
        u64 bytes;
        bool skip;
        std::unique_ptr<OutFile> file;
    };
    std::vector<Part> m_parts;
    std::size_t m_current = 0;
    u64 m_written = 0;
    bool m_atomic;
};

void xor_into(char* acc, const char* src, u64 length)
{
    u64 i = 0;
    for (; i + 8 <= length; i += 8) {
        std::uint64_t a, b;
        std::memcpy(&a, acc + i, 8);
        std::memcpy(&b, src + i, 8);
        a ^= b;
        std::memcpy(acc + i, &a, 8);
    }
    for (; i < length; ++i)
        acc[i] = static_cast<char>(acc[i] ^ src[i]);
}

u64 data_bytes(const SavedLayout& layout, int rank)
{
    u64 total = 0;
    for (const auto& f : layout.files[static_cast<std::size_t>(rank)])
        total += f.bytes;
    return total;
}

void check_layout(const SavedLayout& layout)
{
    if (layout.nodes < 1 || layout.node_of_rank.size() != layout.files.size() || layout.node_of_rank.empty())
        throw error::Internal("node-local redundancy: a saved layout of " + std::to_string(layout.nodes) + " nodes, " +
                              std::to_string(layout.node_of_rank.size()) + " ranks and files of " +
                              std::to_string(layout.files.size()) + " ranks");
    for (int n : layout.node_of_rank)
        if (n < 0 || n >= layout.nodes)
            throw error::Internal("node-local redundancy: saved rank on node " + std::to_string(n) + " of " +
                                  std::to_string(layout.nodes));
}

/// Per saved node: its ranks, in rank order.
std::vector<std::vector<int>> ranks_of_nodes(const SavedLayout& layout)
{
    std::vector<std::vector<int>> out(static_cast<std::size_t>(layout.nodes));
    for (std::size_t r = 0; r < layout.node_of_rank.size(); ++r)
        out[static_cast<std::size_t>(layout.node_of_rank[r])].push_back(static_cast<int>(r));
    return out;
}

std::string node_name(const SavedLayout& layout, int n)
{
    std::string s = "node " + std::to_string(n);
    if (n >= 0 && static_cast<std::size_t>(n) < layout.hosts.size())
        s += " (host " + layout.hosts[static_cast<std::size_t>(n)] + ")";
    return s;
}

std::string node_count(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

/// XOR groups: lists of consecutive saved nodes.
std::vector<std::vector<int>> xor_groups(const SavedLayout& layout)
{
    const int k = layout.redundancy.group_size;
    if (k < 2)
        throw error::WrongAPIUsage("XOR redundancy needs groups of at least 2 nodes, not group_size " +
                                   std::to_string(k));
    if (layout.nodes < 2)
        throw error::WrongAPIUsage("XOR redundancy needs at least 2 nodes; this job has " + node_count(layout.nodes) +
                                   " (a node's parity must be kept on other nodes)");
    const int full = layout.nodes / k, rest = layout.nodes % k;
    std::vector<std::vector<int>> groups;
    int next = 0;
    const int count = rest >= 2 || full == 0 ? full + 1 : full;
    for (int g = 0; g < count; ++g) {
        std::vector<int> nodes;
        const int end = g + 1 == count ? layout.nodes : next + k;
        for (; next < end; ++next)
            nodes.push_back(next);
        groups.push_back(std::move(nodes));
    }
    return groups;
}

/// Chunk of member `m` that goes to stripe `j` (j != m).
int chunk_of(int m, int j) { return j < m ? j : j - 1; }
/// Stripe of member `m`'s chunk `c`.
int stripe_of(int m, int c) { return c < m ? c : c + 1; }

std::string parity_name(std::size_t set, int member)
{
    return "xor/" + std::to_string(set) + "." + std::to_string(member) + ".xor";
}

std::string partner_name(const std::string& file) { return "partner/" + file; }

bool all_present(const SavedLayout& layout, int rank, const std::set<std::string>& available)
{
    for (const auto& f : layout.files[static_cast<std::size_t>(rank)])
        if (!available.count(f.name))
            return false;
    return true;
}

/// The stripes whose parity rebuilding member `mi` of `set` needs: those its
/// data's chunks reach.
std::vector<int> needed_stripes(const SavedLayout& layout, const XorSet& set, int mi)
{
    const u64 bytes = data_bytes(layout, set.members[static_cast<std::size_t>(mi)]);
    std::vector<int> out;
    const int s = static_cast<int>(set.members.size());
    for (int c = 0; c + 1 < s; ++c)
        if (static_cast<u64>(c) * set.piece < bytes)
            out.push_back(stripe_of(mi, c));
    return out;
}

/// Whether saved rank `rank` (member `mi` of `set`) can be rebuilt from the set.
bool set_covers(const SavedLayout& layout, const XorSet& set, std::size_t set_index, int mi,
                const std::set<std::string>& available)
{
    for (std::size_t o = 0; o < set.members.size(); ++o)
        if (static_cast<int>(o) != mi && !all_present(layout, set.members[o], available))
            return false;
    for (int j : needed_stripes(layout, set, mi))
        if (!available.count(parity_name(set_index, j)))
            return false;
    return true;
}

/// The first set of `sets` that covers saved rank `rank`, or -1.
int covering_set(const SavedLayout& layout, const std::vector<XorSet>& sets, int rank,
                 const std::set<std::string>& available, int* member)
{
    for (std::size_t si = 0; si < sets.size(); ++si) {
        const auto& m = sets[si].members;
        const auto it = std::find(m.begin(), m.end(), rank);
        if (it == m.end())
            continue;
        const int mi = static_cast<int>(it - m.begin());
        if (set_covers(layout, sets[si], si, mi, available)) {
            *member = mi;
            return static_cast<int>(si);
        }
    }
    return -1;
}

std::string join_list(const std::vector<std::string>& items, std::size_t at_most = 4)
{
    std::string s;
    for (std::size_t i = 0; i < items.size() && i < at_most; ++i)
        s += (i ? ", " : "") + items[i];
    if (items.size() > at_most)
        s += " and " + std::to_string(items.size() - at_most) + " more";
    return s;
}

// ------------------------------------------------------- mapped data files

// The encoders send straight from the data files, mapped (reading through a
// mapping saves the copy of pread(2)), and receive into the kept mappings
// of recycled redundancy files on a RAM disk (OutFile::map), otherwise into
// buffers of one message (still in the cache) then written. A data file on
// a RAM disk is read through its kept mapping (the writer's, or one made
// now and kept for the next save over the file): mapping a file, with its
// page tables filled, and unmapping it again at every save costs about a
// third of its exchange over MPI.

/// A whole file mapped for reading (nothing for an empty one).
class MappedIn {
public:
    MappedIn(const std::string& path, u64 bytes) : m_bytes(bytes)
    {
        if (bytes == 0)
            return;
        if (is_ram_disk(fs::parent(path)) && (m_data = kept_mapping(path, bytes)) != nullptr) {
            m_kept = true;
            return;
        }
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            throw error::ReadError("node-local redundancy: cannot open " + path + ": " + sys_error());
        struct stat st {};
        if (::fstat(fd, &st) != 0 || static_cast<u64>(st.st_size) < bytes) {
            ::close(fd);
            throw error::ReadError("node-local redundancy: " + path + " is shorter than its saved size of " +
                                   std::to_string(bytes) + " bytes");
        }
        void* p = ::mmap(nullptr, static_cast<std::size_t>(bytes), PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        const std::string why = p == MAP_FAILED ? sys_error() : std::string();
        ::close(fd);
        if (p == MAP_FAILED)
            throw error::ReadError("node-local redundancy: cannot map " + path + ": " + why);
        m_data = static_cast<char*>(p);
        ::madvise(p, static_cast<std::size_t>(bytes), MADV_SEQUENTIAL);
    }
    ~MappedIn()
    {
        if (m_data && !m_kept)
            ::munmap(m_data, static_cast<std::size_t>(m_bytes));
    }
    MappedIn(const MappedIn&) = delete;
    MappedIn& operator=(const MappedIn&) = delete;
    const char* data() const noexcept { return m_data; }

private:
    u64 m_bytes;
    char* m_data = nullptr;
    bool m_kept = false; ///< m_data is a kept mapping (storage/per_rank/mapped_files.hpp): not ours to unmap
};

/// A rank's data files, mapped: bytes of their concatenation (then zeros).
/// A file that cannot be mapped reads as zeros, its error kept in `err`.
class MappedData {
public:
    MappedData(const std::string& dir, const std::vector<SavedFile>& files, FirstError& err)
    {
        u64 at = 0;
        for (const auto& f : files) {
            Part p{at, f.bytes, nullptr};
            err.run([&] { p.map = std::make_unique<MappedIn>(fs::join(dir, f.name), f.bytes); });
            at += f.bytes;
            m_parts.push_back(std::move(p));
        }
    }

    /// Bytes [offset, offset + length): in place when one file holds them,
    /// else gathered into `scratch`.
    const char* view(u64 offset, u64 length, std::vector<char>& scratch) const
    {
        for (const auto& p : m_parts)
            if (p.map && p.bytes > 0 && offset >= p.start && offset + length <= p.start + p.bytes)
                return p.map->data() + (offset - p.start);
        scratch.assign(static_cast<std::size_t>(length), 0);
        for (const auto& p : m_parts) {
            const u64 lo = std::max(offset, p.start), hi = std::min(offset + length, p.start + p.bytes);
            if (lo < hi && p.map)
                std::memcpy(scratch.data() + (lo - offset), p.map->data() + (lo - p.start),
                            static_cast<std::size_t>(hi - lo));
        }
        return scratch.data();
    }

private:
    struct Part {
        u64 start, bytes;
        std::unique_ptr<MappedIn> map;
    };
    std::vector<Part> m_parts;
};

// ---------------------------------------------------------------- partner

/// One rank's files, sent to or received from one peer, file by file in
/// messages of at most `piece` bytes (the same on both sides).
struct Stream {
    int peer = 0;
    u64 piece = 0;
    std::vector<u64> sizes;                       ///< per file
    std::vector<std::unique_ptr<MappedIn>> in;    ///< sender: per file (null: failed, zeros sent)
    std::vector<std::unique_ptr<OutFile>> out;    ///< receiver: per file (null: failed, bytes dropped)
    std::size_t file = 0;
    u64 at = 0;
    std::vector<char> buffers[2];

    /// Skips finished and empty files; false when all is moved.
    bool next()
    {
        while (file < sizes.size() && at >= sizes[file]) {
            ++file;
            at = 0;
        }
        return file < sizes.size();
    }
    u64 length() const { return std::min(piece, sizes[file] - at); }
    /// Buffer `b` (0 or 1) of one message (zeros until something is received
    /// into it), allocated once so that it never moves under a message.
    char* buffer(int b)
    {
        auto& v = buffers[b];
        if (v.size() < piece)
            v.assign(static_cast<std::size_t>(piece), 0);
        return v.data();
    }
};

/// Moves every stream's bytes: all streams advance together, one message
/// each per round (message k of a stream is in round k on both sides). A
/// message to a mapped file is received in place; otherwise a receiving
/// stream has two buffers: round k+1 is posted before the pieces of round k
/// are written, so that writing overlaps the transfer wherever the network
/// moves the bytes without the CPU.
void run_streams(MPI_Comm comm, std::vector<Stream>& sends, std::vector<Stream>& recvs, FirstError& err)
{
    struct Piece {
        Stream* stream;
        std::size_t file;
        u64 length;
    };
    struct Round {
        std::vector<MPI_Request> requests;
        std::vector<Piece> pieces; ///< received, to write
    };
    const auto post = [&](Round& r, int buf) {
        r.requests.clear();
        r.pieces.clear();
        for (auto& s : recvs)
            if (s.next()) {
                const u64 n = s.length();
                char* const mapped = s.out[s.file] ? s.out[s.file]->mapping() : nullptr;
                r.requests.emplace_back();
                mpi_check(MPI_Irecv(mapped ? mapped + s.at : s.buffer(buf), static_cast<int>(n), MPI_BYTE, s.peer,
                                    tag_data, comm, &r.requests.back()),
                          "MPI_Irecv");
                if (!mapped)
                    r.pieces.push_back(Piece{&s, s.file, n});
                s.at += n;
            }
        for (auto& s : sends)
            if (s.next()) {
                const u64 n = s.length();
                const char* src = s.in[s.file] ? s.in[s.file]->data() + s.at : s.buffer(0);
                r.requests.emplace_back();
                mpi_check(MPI_Isend(src, static_cast<int>(n), MPI_BYTE, s.peer, tag_data, comm, &r.requests.back()),
                          "MPI_Isend");
                s.at += n;
            }
        return !r.requests.empty();
    };
    Round current, following;
    int buf = 0;
    bool more = post(current, buf);
    while (more) {
        mpi_check(MPI_Waitall(static_cast<int>(current.requests.size()), current.requests.data(),
                              MPI_STATUSES_IGNORE),
                  "MPI_Waitall");
        more = post(following, 1 - buf);
        for (const auto& p : current.pieces)
            if (p.stream->out[p.file])
                err.run([&] { p.stream->out[p.file]->write(p.stream->buffer(buf), p.length); });
        std::swap(current, following);
        buf = 1 - buf;
    }
}

RedundancyCounts encode_partner(const Topology& topo, const SavedLayout& layout, const std::string& step_dir)
{
    RedundancyCounts counts;
    if (layout.nodes < 2)
        throw error::WrongAPIUsage("partner redundancy needs at least 2 nodes; this job has " +
                                   node_count(layout.nodes) + " (" + node_name(layout, 0) +
                                   "): a node's copy must be kept on another node");
    if (layout.nodes != topo.nodes || static_cast<int>(layout.node_of_rank.size()) != topo.size)
        throw error::Internal("node-local redundancy: the saved layout (" + node_count(layout.nodes) +
                              ") does not describe the job (" + node_count(topo.nodes) + ")");
    DupComm comm(topo.comm);
    FirstError err;
    const int N = topo.nodes, n = topo.node, l = topo.local_rank;
    const int next = (n + 1) % N, prev = (n + N - 1) % N;
    const auto on = [&](int node) { return topo.ranks_on_node[static_cast<std::size_t>(node)]; };
    // Streams of a rank: its own files out (sent from their mapping), and
    // in those of the ranks of the node before whose local rank is its own
    // modulo its node's ranks (each received into two buffers of one
    // message): a message takes piece_bytes shared among the receiver's
    // streams in.
    const auto piece_to = [&](int node, int local) {
        const int before = on((node + N - 1) % N);
        const int incoming = (before - local + on(node) - 1) / on(node);
        return std::max<u64>(u64{256} << 10, piece_bytes / static_cast<u64>(std::max(1, incoming)));
    };
    const auto sizes_of = [&](int rank) {
        std::vector<u64> sizes;
        for (const auto& f : layout.files[static_cast<std::size_t>(rank)])
            sizes.push_back(f.bytes);
        return sizes;
    };
    std::vector<Stream> sends, recvs;
    {
        Stream s;
        s.peer = topo.rank_of(next, l % on(next));
        s.piece = piece_to(next, l % on(next));
        s.sizes = sizes_of(topo.rank);
        for (const auto& f : layout.files[static_cast<std::size_t>(topo.rank)]) {
            s.in.emplace_back();
            err.run([&] { s.in.back() = std::make_unique<MappedIn>(fs::join(step_dir, f.name), f.bytes); });
        }
        counts.bytes_sent = data_bytes(layout, topo.rank);
        sends.push_back(std::move(s));
    }
    const std::string partner_dir = fs::join(step_dir, "partner");
    err.run([&] { fs::create_directories(partner_dir); });
    for (int pl = l; pl < on(prev); pl += on(n)) {
        Stream s;
        s.peer = topo.rank_of(prev, pl);
        s.piece = piece_to(n, l);
        s.sizes = sizes_of(s.peer);
        for (const auto& f : layout.files[static_cast<std::size_t>(s.peer)]) {
            s.out.emplace_back();
            err.run([&] {
                s.out.back() = std::make_unique<OutFile>(fs::join(partner_dir, f.name));
                s.out.back()->map(f.bytes);
            });
        }
        counts.bytes_received += data_bytes(layout, s.peer);
        recvs.push_back(std::move(s));
    }
    run_streams(comm.c, sends, recvs, err);
    for (auto& s : recvs)
        for (auto& o : s.out)
            if (o)
                err.run([&] { o->finish(); });
    err.run([&] { fs::fsync_path(partner_dir); });
    err.rethrow();
    counts.bytes_written = counts.bytes_received;
    return counts;
}

// -------------------------------------------------------------------- XOR

/// x mod s, in [0, s).
int wrap(int x, int s) { return ((x % s) + s) % s; }

RedundancyCounts encode_xor(const Topology& topo, const SavedLayout& layout, const std::string& step_dir)
{
    RedundancyCounts counts;
    const auto sets = xor_sets(layout);
    if (layout.nodes != topo.nodes || static_cast<int>(layout.node_of_rank.size()) != topo.size)
        throw error::Internal("node-local redundancy: the saved layout (" + node_count(layout.nodes) +
                              ") does not describe the job (" + node_count(topo.nodes) + ")");
    DupComm comm(topo.comm);
    FirstError err;
    const std::string xor_dir = fs::join(step_dir, "xor");
    bool made_dir = false;
    std::unique_ptr<MappedData> data;
    std::vector<char> partial[2], scratch_send, scratch_own, scratch_out;
    for (std::size_t si = 0; si < sets.size(); ++si) {
        const XorSet& set = sets[si];
        const auto it = std::find(set.members.begin(), set.members.end(), topo.rank);
        if (it == set.members.end())
            continue;
        const int j = static_cast<int>(it - set.members.begin());
        const int s = static_cast<int>(set.members.size());
        const int right = set.members[static_cast<std::size_t>(wrap(j + 1, s))];
        const int left = set.members[static_cast<std::size_t>(wrap(j - 1, s))];
        if (!made_dir) {
            err.run([&] { fs::create_directories(xor_dir); });
            data = std::make_unique<MappedData>(step_dir, layout.files[static_cast<std::size_t>(topo.rank)], err);
            made_dir = true;
        }
        std::unique_ptr<OutFile> out;
        char* parity = nullptr; // the parity file's mapping, or null: written
        err.run([&] {
            out = std::make_unique<OutFile>(fs::join(step_dir, parity_name(si, j)));
            parity = out->map(set.piece);
        });
        // A ring reduce-scatter, in rounds of bytes [o, o + len) of every
        // stripe: at step t this member sends its partial XOR of stripe
        // j-t-1 to the right and gets stripe j-t-2 from the left, adding its
        // own chunk of it; the last step brings stripe j, its own, complete
        // (every member but j contributed): received into the parity file's
        // mapping, or written to the file.
        const auto own = [&](int stripe, u64 o, u64 len, std::vector<char>& scratch) {
            return data->view(static_cast<u64>(chunk_of(j, stripe)) * set.piece + o, len, scratch);
        };
        for (u64 o = 0; o < set.piece; o += piece_bytes) {
            const u64 len = std::min(piece_bytes, set.piece - o);
            for (int t = 0; t + 1 < s; ++t) {
                const int stripe_out = wrap(j - t - 1, s), stripe_in = wrap(j - t - 2, s);
                const bool last = t + 2 == s;
                const char* src = t == 0 ? own(stripe_out, o, len, scratch_send) : partial[(t + 1) % 2].data();
                char* dst = nullptr;
                if (last && parity) {
                    dst = parity + o;
                } else {
                    auto& into = last ? scratch_out : partial[t % 2];
                    into.resize(static_cast<std::size_t>(len));
                    dst = into.data();
                }
                mpi_check(MPI_Sendrecv(src, static_cast<int>(len), MPI_BYTE, right, tag_data, dst,
                                       static_cast<int>(len), MPI_BYTE, left, tag_data, comm.c, MPI_STATUS_IGNORE),
                          "MPI_Sendrecv");
                if (!last)
                    xor_into(dst, own(stripe_in, o, len, scratch_own), len);
                else if (out && !parity)
                    err.run([&] { out->write(dst, len); });
            }
            counts.bytes_sent += static_cast<u64>(s - 1) * len;
            counts.bytes_received += static_cast<u64>(s - 1) * len;
            counts.bytes_written += len;
        }
        if (out)
            err.run([&] { out->finish(); });
    }
    if (made_dir)
        err.run([&] { fs::fsync_path(xor_dir); });
    err.rethrow();
    return counts;
}

/// The union of what the current nodes hold.
std::set<std::string> union_of(const std::vector<std::set<std::string>>& held)
{
    std::set<std::string> all;
    for (const auto& h : held)
        all.insert(h.begin(), h.end());
    return all;
}

/// The lowest current node holding `name`, or -1.
int holder(const std::vector<std::set<std::string>>& held, const std::string& name)
{
    for (std::size_t n = 0; n < held.size(); ++n)
        if (held[n].count(name))
            return static_cast<int>(n);
    return -1;
}

} // namespace

// ------------------------------------------------------------------ public

std::vector<XorSet> xor_sets(const SavedLayout& layout)
{
    check_layout(layout);
    const auto groups = xor_groups(layout);
    const auto ranks = ranks_of_nodes(layout);
    std::vector<XorSet> sets;
    for (const auto& g : groups) {
        std::size_t most = 0;
        for (int n : g)
            most = std::max(most, ranks[static_cast<std::size_t>(n)].size());
        for (std::size_t l = 0; l < most; ++l) {
            XorSet set;
            u64 largest = 0;
            for (int n : g) {
                const auto& rs = ranks[static_cast<std::size_t>(n)];
                if (rs.empty())
                    continue;
                set.members.push_back(rs[l % rs.size()]);
                largest = std::max(largest, data_bytes(layout, set.members.back()));
            }
            if (set.members.size() < 2)
                throw error::Internal("node-local redundancy: an XOR set with fewer than 2 nodes");
            const u64 chunks = set.members.size() - 1;
            set.piece = (largest + chunks - 1) / chunks;
            sets.push_back(std::move(set));
        }
    }
    return sets;
}

RedundancyCounts encode_redundancy(const Topology& topo, const SavedLayout& layout, const std::string& step_dir)
{
    const auto t0 = std::chrono::steady_clock::now();
    RedundancyCounts counts;
    switch (layout.redundancy.scheme) {
    case Redundancy::Scheme::none: return counts;
    case Redundancy::Scheme::partner: check_layout(layout); counts = encode_partner(topo, layout, step_dir); break;
    case Redundancy::Scheme::xor_parity: counts = encode_xor(topo, layout, step_dir); break;
    }
    counts.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return counts;
}

void remove_stale_redundancy(const Topology& topo, const SavedLayout& layout, const std::string& step_dir)
{
    std::set<std::string> written;
    const char* sub = nullptr;
    if (layout.redundancy.scheme == Redundancy::Scheme::partner) {
        sub = "partner";
        const int prev = (topo.node + topo.nodes - 1) % topo.nodes;
        for (std::size_t r = 0; r < layout.files.size(); ++r)
            if (layout.node_of_rank[r] == prev)
                for (const auto& f : layout.files[r])
                    written.insert(partner_name(f.name));
    } else if (layout.redundancy.scheme == Redundancy::Scheme::xor_parity) {
        sub = "xor";
        const auto sets = xor_sets(layout);
        for (std::size_t si = 0; si < sets.size(); ++si)
            for (std::size_t j = 0; j < sets[si].members.size(); ++j)
                if (layout.node_of_rank[static_cast<std::size_t>(sets[si].members[j])] == topo.node)
                    written.insert(parity_name(si, static_cast<int>(j)));
    }
    if (!sub)
        return;
    const std::string dir = fs::join(step_dir, sub);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (!written.count(std::string(sub) + "/" + e.path().filename().string()))
            fs::remove_all(e.path().string());
}

namespace {

/// What the loss of saved ranks leaves, for recoverable().
struct Loss {
    std::vector<bool> rank; ///< per saved rank: a data file of it is lost
    std::vector<bool> node; ///< per saved node: a data file of one of its ranks is lost
    bool any = false;
};

Loss loss_of(const SavedLayout& layout, const std::set<std::string>& available)
{
    Loss l;
    const int ranks = static_cast<int>(layout.node_of_rank.size());
    l.rank.assign(static_cast<std::size_t>(ranks), false);
    l.node.assign(static_cast<std::size_t>(layout.nodes), false);
    for (int r = 0; r < ranks; ++r)
        if (!all_present(layout, r, available)) {
            l.rank[static_cast<std::size_t>(r)] = true;
            l.node[static_cast<std::size_t>(layout.node_of_rank[static_cast<std::size_t>(r)])] = true;
            l.any = true;
        }
    return l;
}

std::vector<std::string> missing_files(const SavedLayout& layout, int r, const std::set<std::string>& available)
{
    std::vector<std::string> names;
    for (const auto& f : layout.files[static_cast<std::size_t>(r)])
        if (!available.count(f.name))
            names.push_back(f.name);
    return names;
}

/// recoverable() without redundancy: what is lost.
std::vector<std::string> problems_without_redundancy(const SavedLayout& layout, const Loss& loss,
                                                     const std::set<std::string>& available)
{
    std::vector<std::string> nodes, files;
    for (int n = 0; n < layout.nodes; ++n)
        if (loss.node[static_cast<std::size_t>(n)])
            nodes.push_back(node_name(layout, n));
    for (std::size_t r = 0; r < layout.node_of_rank.size(); ++r)
        for (auto& f : missing_files(layout, static_cast<int>(r), available))
            files.push_back(f);
    return {"no redundancy, and " + join_list(nodes, 16) + " lost (" + join_list(files) + ")"};
}

/// recoverable() with partner copies: each lost node whose partner lacks copies.
std::vector<std::string> partner_problems(const SavedLayout& layout, const Loss& loss,
                                          const std::set<std::string>& available)
{
    std::vector<std::string> problems;
    for (int n = 0; n < layout.nodes; ++n) {
        if (!loss.node[static_cast<std::size_t>(n)])
            continue;
        std::vector<std::string> files;
        for (std::size_t r = 0; r < layout.node_of_rank.size(); ++r)
            if (layout.node_of_rank[r] == n)
                for (auto& f : missing_files(layout, static_cast<int>(r), available))
                    if (!available.count(partner_name(f)))
                        files.push_back(f);
        if (files.empty())
            continue;
        const int p = (n + 1) % layout.nodes;
        problems.push_back(node_name(layout, n) + " lost and its partner " + node_name(layout, p) +
                           (loss.node[static_cast<std::size_t>(p)] ? " too" : " lacks its copies") + ": no copy of " +
                           join_list(files));
    }
    return problems;
}

/// recoverable() with XOR parity: each group with lost data no set covers.
std::vector<std::string> xor_problems(const SavedLayout& layout, const Loss& loss,
                                      const std::set<std::string>& available)
{
    const auto groups = xor_groups(layout);
    const auto sets = xor_sets(layout);
    std::vector<std::string> problems;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::vector<std::string> lost_nodes, uncovered;
        for (int n : groups[g])
            if (loss.node[static_cast<std::size_t>(n)])
                lost_nodes.push_back(node_name(layout, n));
        for (std::size_t r = 0; r < layout.node_of_rank.size(); ++r) {
            const int n = layout.node_of_rank[r];
            if (!loss.rank[r] || std::find(groups[g].begin(), groups[g].end(), n) == groups[g].end())
                continue;
            int member = 0;
            if (covering_set(layout, sets, static_cast<int>(r), available, &member) < 0)
                for (auto& f : missing_files(layout, static_cast<int>(r), available))
                    uncovered.push_back(f);
        }
        if (uncovered.empty())
            continue;
        if (lost_nodes.size() >= 2)
            problems.push_back(std::to_string(lost_nodes.size()) + " nodes of XOR group " + std::to_string(g) +
                               " lost: " + join_list(lost_nodes, 16) + " (XOR covers one per group; lost " +
                               join_list(uncovered) + ")");
        else
            problems.push_back(join_list(lost_nodes, 16) + " of XOR group " + std::to_string(g) +
                               " lost and its set's parity incomplete: no way to rebuild " + join_list(uncovered));
    }
    return problems;
}

} // namespace

bool recoverable(const SavedLayout& layout, const std::set<std::string>& available, std::string* why)
{
    check_layout(layout);
    const Loss loss = loss_of(layout, available);
    if (!loss.any)
        return true;
    std::vector<std::string> problems;
    try {
        switch (layout.redundancy.scheme) {
        case Redundancy::Scheme::none: problems = problems_without_redundancy(layout, loss, available); break;
        case Redundancy::Scheme::partner: problems = partner_problems(layout, loss, available); break;
        case Redundancy::Scheme::xor_parity: problems = xor_problems(layout, loss, available); break;
        }
    } catch (const Error& e) {
        if (why)
            *why = e.what(); // XOR groups that the layout cannot form
        return false;
    }
    if (problems.empty())
        return true;
    if (why) {
        why->clear();
        for (std::size_t i = 0; i < problems.size(); ++i)
            *why += (i ? "; " : "") + problems[i];
    }
    return false;
}

namespace {

/// Partner: each lost file's copy renamed in place by one rank of the node
/// holding it, taking turns. Returns where each is now.
std::map<std::string, int> rebuild_from_partners(const Topology& topo, const SavedLayout& layout,
                                                 const std::vector<std::set<std::string>>& held,
                                                 const std::set<std::string>& available, const std::vector<int>& lost,
                                                 const std::string& step_dir)
{
    std::map<std::string, int> where;
    FirstError err;
    int turn = 0;
    bool renamed = false;
    for (int r : lost)
        for (const auto& f : layout.files[static_cast<std::size_t>(r)]) {
            if (available.count(f.name))
                continue;
            const int n = holder(held, partner_name(f.name));
            where[f.name] = n;
            const int local = turn++ % topo.ranks_on_node[static_cast<std::size_t>(n)];
            if (topo.node == n && topo.local_rank == local) {
                err.run([&] { fs::rename(fs::join(step_dir, partner_name(f.name)), fs::join(step_dir, f.name)); });
                renamed = true;
            }
        }
    if (renamed)
        err.run([&] { fs::fsync_path(step_dir); });
    err.rethrow();
    return where;
}

/// This rank's part in rebuilding one lost saved rank (a member of an XOR
/// set) from its set: reading and XORing what its node holds of the set
/// (parity pieces, the other members' data) and sending that to the
/// rebuilder, or, as the rebuilder, that and the senders' pieces XORed and
/// written as the lost files. Pieces go in order (piece k of every part in
/// round k of rebuild_members), on a tag of the member's own.
struct MemberPart {
    struct Source {
        int stripe;      ///< -1: a member's data (every stripe but the member's own)
        int member = -1; ///< index in the set
        std::unique_ptr<ConcatReader> reader;
    };
    const XorSet* set = nullptr;
    int mi = 0;      ///< the lost rank's index in the set
    int tag = 0;
    u64 bytes = 0;   ///< the lost rank's data
    u64 at = 0;      ///< the next byte to rebuild
    int rebuilder = 0;
    bool rebuilding = false;
    std::vector<Source> sources;
    std::unique_ptr<ConcatWriter> writer; ///< the rebuilder's
    std::vector<int> senders;             ///< the rebuilder's: ranks sending pieces
    std::vector<char> acc, tmp, in_flight;
    std::vector<std::vector<char>> incoming;
    MPI_Request send = MPI_REQUEST_NULL;

    bool done() const noexcept { return at >= bytes; }

    /// Bytes [at, at + len) of the lost data: chunk c's stripe and offset in it.
    u64 next_length(int& stripe, u64& in_chunk) const
    {
        const int c = static_cast<int>(at / set->piece);
        in_chunk = at - static_cast<u64>(c) * set->piece;
        stripe = stripe_of(mi, c);
        return std::min({piece_bytes, bytes - at, set->piece - in_chunk});
    }

    /// acc = the XOR of this node's sources over the next piece.
    void contribute(int stripe, u64 in_chunk, u64 len, FirstError& err)
    {
        acc.assign(static_cast<std::size_t>(len), 0);
        tmp.resize(static_cast<std::size_t>(len));
        for (auto& src : sources) {
            if (err.failed())
                break;
            if (src.stripe >= 0 && src.stripe != stripe)
                continue;
            if (src.stripe < 0 && src.member == stripe)
                continue; // member j keeps stripe j's parity and has no chunk in it
            const u64 offset =
                src.stripe >= 0 ? in_chunk : static_cast<u64>(chunk_of(src.member, stripe)) * set->piece + in_chunk;
            err.run([&] {
                src.reader->read(tmp.data(), offset, len);
                xor_into(acc.data(), tmp.data(), len);
            });
        }
    }

    /// A sender's round: its piece sent (zeros after a local error).
    /// Returns the bytes sent.
    u64 send_piece(MPI_Comm comm, FirstError& err)
    {
        if (send != MPI_REQUEST_NULL)
            mpi_check(MPI_Wait(&send, MPI_STATUS_IGNORE), "MPI_Wait");
        int stripe = 0;
        u64 in_chunk = 0;
        const u64 len = next_length(stripe, in_chunk);
        contribute(stripe, in_chunk, len, err);
        if (err.failed())
            std::fill(acc.begin(), acc.end(), 0);
        std::swap(acc, in_flight);
        mpi_check(MPI_Isend(in_flight.data(), static_cast<int>(len), MPI_BYTE, rebuilder, tag, comm, &send),
                  "MPI_Isend");
        at += len;
        return len;
    }

    /// The rebuilder's round: the senders' pieces received and XORed with
    /// its own, written.
    void rebuild_piece(MPI_Comm comm, FirstError& err)
    {
        int stripe = 0;
        u64 in_chunk = 0;
        const u64 len = next_length(stripe, in_chunk);
        std::vector<MPI_Request> requests(senders.size());
        incoming.resize(senders.size());
        for (std::size_t i = 0; i < senders.size(); ++i) {
            incoming[i].resize(static_cast<std::size_t>(len));
            mpi_check(MPI_Irecv(incoming[i].data(), static_cast<int>(len), MPI_BYTE, senders[i], tag, comm,
                                &requests[i]),
                      "MPI_Irecv");
        }
        contribute(stripe, in_chunk, len, err);
        mpi_check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
                  "MPI_Waitall");
        for (auto& in : incoming)
            xor_into(acc.data(), in.data(), len);
        err.run([&] { writer->write(acc.data(), len); });
        at += len;
    }
};

/// Who takes part in rebuilding lost saved rank `m` (covered by set `si`,
/// member `mi`), the same on every rank: the rebuilding node (one holding a
/// parity piece it needs, or any holder of the set's data when none is
/// needed: empty data) and rank, and per current node what it contributes
/// (stripe or -1, member) and its reader rank (-1: none). `turn` spreads
/// the work over the ranks of a node.
struct MemberPlan {
    int rebuilder_node = 0, rebuilder = 0;
    std::vector<std::vector<std::pair<int, int>>> parts;
    std::vector<int> reader_rank;
};

MemberPlan plan_member(const Topology& topo, const SavedLayout& layout, const std::vector<std::set<std::string>>& held,
                       const XorSet& set, int si, int mi, int turn)
{
    MemberPlan p;
    const auto stripes = needed_stripes(layout, set, mi);
    if (!stripes.empty())
        p.rebuilder_node = holder(held, parity_name(static_cast<std::size_t>(si),
                                                    stripes[static_cast<std::size_t>(turn) % stripes.size()]));
    const auto on = [&](int n) { return topo.ranks_on_node[static_cast<std::size_t>(n)]; };
    p.rebuilder = topo.rank_of(p.rebuilder_node, turn % on(p.rebuilder_node));
    p.parts.resize(static_cast<std::size_t>(topo.nodes));
    for (int j : stripes) {
        const int node = holder(held, parity_name(static_cast<std::size_t>(si), j));
        p.parts[static_cast<std::size_t>(node)].push_back({j, -1});
    }
    for (int o = 0; o < static_cast<int>(set.members.size()); ++o) {
        if (o == mi)
            continue;
        std::set<int> nodes;
        for (const auto& f : layout.files[static_cast<std::size_t>(set.members[static_cast<std::size_t>(o)])])
            if (f.bytes > 0)
                nodes.insert(holder(held, f.name));
        for (int n : nodes)
            p.parts[static_cast<std::size_t>(n)].push_back({-1, o});
    }
    p.reader_rank.assign(static_cast<std::size_t>(topo.nodes), -1);
    for (int n = 0; n < topo.nodes; ++n)
        if (!p.parts[static_cast<std::size_t>(n)].empty() || n == p.rebuilder_node)
            p.reader_rank[static_cast<std::size_t>(n)] =
                n == p.rebuilder_node ? p.rebuilder : topo.rank_of(n, turn % on(n));
    return p;
}

/// This rank's part of `plan` for lost rank `m` (null when it has none).
std::unique_ptr<MemberPart> part_of(const Topology& topo, const SavedLayout& layout,
                                    const std::vector<std::set<std::string>>& held,
                                    const std::set<std::string>& available, const std::string& step_dir,
                                    const MemberPlan& plan, const XorSet& set, int si, int mi, int m, int tag,
                                    FirstError& err)
{
    const bool rebuilding = topo.rank == plan.rebuilder;
    if (!rebuilding && plan.reader_rank[static_cast<std::size_t>(topo.node)] != topo.rank)
        return nullptr;
    auto part = std::make_unique<MemberPart>();
    part->set = &set;
    part->mi = mi;
    part->tag = tag;
    part->bytes = data_bytes(layout, m);
    part->rebuilder = plan.rebuilder;
    part->rebuilding = rebuilding;
    for (const auto& [stripe, member] : plan.parts[static_cast<std::size_t>(topo.node)]) {
        MemberPart::Source src{stripe, member, nullptr};
        if (stripe >= 0) {
            const std::vector<SavedFile> parity{{parity_name(static_cast<std::size_t>(si), stripe), set.piece}};
            src.reader = std::make_unique<ConcatReader>(step_dir, parity, std::vector<bool>{});
        } else {
            const auto& mf = layout.files[static_cast<std::size_t>(set.members[static_cast<std::size_t>(member)])];
            std::vector<bool> here;
            for (const auto& f : mf)
                here.push_back(holder(held, f.name) == topo.node);
            src.reader = std::make_unique<ConcatReader>(step_dir, mf, here);
        }
        part->sources.push_back(std::move(src));
    }
    if (rebuilding) {
        const auto& files = layout.files[static_cast<std::size_t>(m)];
        std::vector<bool> skip;
        for (const auto& f : files)
            skip.push_back(available.count(f.name) > 0);
        err.run([&] {
            fs::create_directories(step_dir);
            part->writer = std::make_unique<ConcatWriter>(step_dir, files, skip, true);
        });
        for (int n = 0; n < topo.nodes; ++n)
            if (n != plan.rebuilder_node && plan.reader_rank[static_cast<std::size_t>(n)] >= 0)
                part->senders.push_back(plan.reader_rank[static_cast<std::size_t>(n)]);
    }
    return part;
}

/// Runs this rank's parts of every lost member's rebuild together, one
/// piece of each per round: in each round every sender's piece goes out
/// (non-blocking) before any rebuilder waits for the pieces of that round,
/// so that the rebuilds of different members overlap and none waits for
/// another's. Returns the bytes this rank sent.
u64 rebuild_members(MPI_Comm comm, std::vector<std::unique_ptr<MemberPart>>& parts, FirstError& err)
{
    u64 sent = 0;
    for (bool more = true; more;) {
        more = false;
        for (auto& p : parts)
            if (!p->rebuilding && !p->done()) {
                sent += p->send_piece(comm, err);
                more = true;
            }
        for (auto& p : parts)
            if (p->rebuilding && !p->done()) {
                p->rebuild_piece(comm, err);
                more = true;
            }
    }
    for (auto& p : parts) {
        if (p->send != MPI_REQUEST_NULL)
            mpi_check(MPI_Wait(&p->send, MPI_STATUS_IGNORE), "MPI_Wait");
        if (p->rebuilding && p->writer)
            err.run([&] { p->writer->finish(); });
    }
    return sent;
}

} // namespace

std::map<std::string, int> rebuild_lost_files(const Topology& topo, const SavedLayout& layout,
                                              const std::vector<std::set<std::string>>& held,
                                              const std::string& step_dir, std::uint64_t* bytes_moved)
{
    check_layout(layout);
    if (static_cast<int>(held.size()) != topo.nodes)
        throw error::Internal("node-local redundancy: held lists " + std::to_string(held.size()) +
                              " nodes, the job has " + std::to_string(topo.nodes));
    const std::set<std::string> available = union_of(held);
    std::string why;
    if (!recoverable(layout, available, &why))
        throw error::NotFound("cannot rebuild the node-local step: " + why);
    if (bytes_moved)
        *bytes_moved = 0;
    std::vector<int> lost;
    for (int r = 0; r < static_cast<int>(layout.node_of_rank.size()); ++r)
        if (!all_present(layout, r, available))
            lost.push_back(r);
    if (lost.empty())
        return {};
    if (layout.redundancy.scheme == Redundancy::Scheme::partner)
        return rebuild_from_partners(topo, layout, held, available, lost, step_dir);

    // XOR: every lost member planned the same way on every rank, then this
    // rank's parts of all of them run together.
    const auto sets = xor_sets(layout);
    std::map<std::string, int> where;
    FirstError err;
    std::vector<std::unique_ptr<MemberPart>> parts;
    for (std::size_t i = 0; i < lost.size(); ++i) {
        const int m = lost[i];
        int mi = 0;
        const int si = covering_set(layout, sets, m, available, &mi);
        const XorSet& set = sets[static_cast<std::size_t>(si)];
        const MemberPlan plan = plan_member(topo, layout, held, set, si, mi, static_cast<int>(i));
        for (const auto& f : layout.files[static_cast<std::size_t>(m)])
            if (!available.count(f.name))
                where[f.name] = plan.rebuilder_node;
        const int tag = tag_data + 1 + static_cast<int>(i % 30000);
        if (auto part = part_of(topo, layout, held, available, step_dir, plan, set, si, mi, m, tag, err))
            parts.push_back(std::move(part));
    }
    DupComm comm(topo.comm);
    const u64 sent = rebuild_members(comm.c, parts, err);
    if (bytes_moved)
        *bytes_moved = sent;
    err.rethrow();
    return where;
}

} // namespace cairn::detail
