// The container layout, writing side (docs/FORMAT.md, "Container layout").
//
// write_data is collective over the save's communicator and is built so that
// every rank makes the same sequence of collective HDF5 calls whatever
// happens on it: the dataset list comes from the coordinator; local work that
// can fail (resolving the planner's data) is done and agreed on before the
// file is created; the number of collective H5Dwrite calls per dataset (its
// rounds) is agreed in the same allreduce; a rank whose write fails takes
// part in the remaining rounds with empty selections and reports its error
// at the end, through the save's error agreement.
//
// The coordinator alone creates the file and every dataset through HDF5's
// serial driver (the list is the same on every rank: it broadcasts it in
// write_data) and broadcasts where each dataset's storage starts. Datasets
// of at most 1 MiB written independently (one writer, or below
// `independent_below`) go straight to their address through MPI-IO
// (docs/FORMAT.md 7.4), aggregated; so do the chunks of datasets whose
// chunks are each one range of it in dense host memory, in pieces: these are
// created first, and every rank writes them while the coordinator creates
// the rest (in a thread of its own). The others are written through
// parallel HDF5, the file then opened by every rank: as hyperslabs with
// collective transfers, every rank taking part with an empty selection in
// the transfers it has nothing for, or independently. With fsync the file
// is synced before the commit.
#include "cairn/container.hpp"

#include "cairn/errors.hpp"
#include "comm/protocol.hpp"
#include "core/checksum.hpp"
#include "core/codec.hpp"
#include "core/fault.hpp"
#include "core/metadata_adapter.hpp"
#include "core/strided.hpp"
#include "stage/stage.hpp"
#include "storage/columnar_storage.hpp"
#include "io/mpiio.hpp"
#include "io/fs.hpp"
#include "storage/container/container_h5.hpp"
#include "io/h5.hpp"
#include "format/metadata_h5.hpp"
#include "io/writeback.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include <sys/statvfs.h>

namespace cairn {

namespace fs = detail::fs;
namespace ct = detail::container;
namespace fault = detail::fault;
using detail::Bytes;
using detail::h5::check_write;
using detail::h5::check_write_status;
using detail::h5::Handle;

namespace {

// One dataset holding data, as every rank creates it.
struct DatasetSpec {
    std::string fqn;
    std::string path;
    ItemKind kind = ItemKind::array;
    DType dtype = DType::u8;
    Shape shape;
};

Bytes encode_list(const std::string& tmp, const std::vector<DatasetSpec>& specs)
{
    detail::Encoder enc;
    enc.str(tmp);
    enc.count(specs.size());
    for (const auto& s : specs) {
        enc.str(s.fqn);
        enc.str(s.path);
        enc.u8(static_cast<std::uint8_t>(s.kind));
        enc.u8(static_cast<std::uint8_t>(s.dtype));
        enc.shape(s.shape);
    }
    return enc.take();
}

std::vector<DatasetSpec> decode_list(const Bytes& b, std::string& tmp)
{
    detail::Decoder dec(b, "container dataset list");
    tmp = dec.str();
    std::vector<DatasetSpec> specs(dec.count(5));
    for (auto& s : specs) {
        s.fqn = dec.str();
        s.path = dec.str();
        s.kind = static_cast<ItemKind>(dec.u8());
        const auto code = dec.u8();
        if (!dtype_valid(code))
            dec.fail("invalid dtype code " + std::to_string(code));
        s.dtype = static_cast<DType>(code);
        s.shape = dec.shape();
    }
    dec.expect_done();
    return specs;
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

// Dataset creation properties: contiguous (one extent, no chunk index), space
// allocated at creation, never filled (every element is written by some rank).
Handle dataset_creation(const std::string& what)
{
    Handle dcpl(check_write(H5Pcreate(H5P_DATASET_CREATE), what));
    check_write_status(H5Pset_layout(dcpl, H5D_CONTIGUOUS), what + ": contiguous layout");
    check_write_status(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), what + ": allocation time");
    check_write_status(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), what + ": fill time");
    return dcpl;
}

DType stored_dtype(const DatasetSpec& s) { return s.kind == ItemKind::bytes ? DType::u8 : s.dtype; }

// Without a reservation (a file system without fallocate), a failed write
// may go unreported (Open MPI's ompio reports ENOSPC as success with nothing
// written), and the collective flush that fails on one rank for want of
// space leaves HDF5's ranks waiting for each other. So the coordinator
// checks, before the flush, that the file system has room for the metadata
// (128 KiB and 4 KiB per dataset); if not, the save fails there, and the
// doomed file is truncated before its close.
void unreserved_room(const std::string& tmp, std::size_t datasets)
{
    struct statvfs st {};
    if (::statvfs(fs::parent(tmp).c_str(), &st) != 0)
        return;
    const auto avail = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
    const std::uint64_t need = (std::uint64_t(128) << 10) + 4096 * static_cast<std::uint64_t>(datasets);
    if (avail < need)
        throw error::WriteError(tmp + ": " + std::strerror(ENOSPC) + " (" + std::to_string(avail) +
                                " bytes free before its metadata is written; the file system cannot reserve space)");
}

// An upper bound of the container's size after write_data: every dataset's
// bytes, its alignment's padding, its headers, and HDF5's 64 KiB metadata
// and small-data blocks (one of each partly used).
std::uint64_t reserve_bytes(const std::vector<DatasetSpec>& specs, std::size_t alignment)
{
    std::uint64_t b = std::uint64_t(128) << 10;
    for (const auto& ds : specs)
        b += static_cast<std::uint64_t>(volume(ds.shape)) * dtype_size(stored_dtype(ds)) + 4096 +
             (alignment > 1 ? alignment : 0);
    return b;
}

// The file and memory types of a save's datasets by dtype code, made once
// per save (HDF5 copies a type on every H5Tcopy), and whether they are the
// same.
class DatasetTypes {
public:
    struct Types {
        Handle file, memory;
        bool same = false;
    };
    const Types& of(DType dtype)
    {
        const int code = static_cast<int>(dtype);
        auto at = m_types.find(code);
        if (at == m_types.end()) {
            Types t{detail::h5::dataset_type(code, false), detail::h5::dataset_type(code, true)};
            t.same = H5Tequal(t.file, t.memory) > 0;
            at = m_types.emplace(code, std::move(t)).first;
        }
        return at->second;
    }

private:
    std::map<int, Types> m_types;
};

// The coordinator's serial HDF5 session that creates the container and its
// datasets (ContainerSave::create_datasets): the file is created and its
// space reserved on construction, datasets are added one by one, and close()
// flushes and closes it (the destructor abandons a file not closed).
class Skeleton {
public:
    Skeleton(const std::string& tmp, const ContainerWriterOptions& opt, const std::vector<DatasetSpec>& specs)
        : m_tmp(tmp), m_file(create(tmp, opt))
    {
        ct::inject(fault::h5_create, "creating " + tmp, true);
        m_reserved = fs::reserve(tmp, 0, reserve_bytes(specs, opt.alignment));
        m_dcpl = dataset_creation(tmp);
        m_lcpl = ct::link_creation(tmp, true);
    }

    // Whether the file's space is reserved (else the coordinator checks the
    // free space before the flush: unreserved_room).
    bool reserved() const { return m_reserved; }

    // Creates `spec`'s dataset, of file type `type`; returns where its
    // storage starts (HADDR_UNDEF: it has no elements).
    std::uint64_t add(const DatasetSpec& spec, hid_t type)
    {
        const std::string what = m_tmp + ": dataset '" + spec.path + "'";
        const Handle space = ct::shape_space(spec.shape, what, true);
        Handle dset(check_write(H5Dcreate2(m_file, spec.path.c_str(), type, space, m_lcpl, m_dcpl, H5P_DEFAULT),
                                "creating " + what));
        ct::inject(fault::h5_create, "creating " + what, true);
        const auto at = static_cast<std::uint64_t>(H5Dget_offset(dset));
        if (at == static_cast<std::uint64_t>(HADDR_UNDEF) && volume(spec.shape) > 0)
            throw error::WriteError(what + ": HDF5 allocated no storage for it at its creation");
        if (!dset.reset())
            throw error::WriteError("closing " + what + ": " + detail::h5::last_error());
        return at;
    }

    void close() { m_file.close(); }

private:
    static detail::h5::Sec2File create(const std::string& tmp, const ContainerWriterOptions& opt)
    {
        const Handle fapl = ct::file_access(MPI_COMM_NULL, opt.tuning, opt.alignment, tmp, true);
        // Metadata and small raw data from blocks of 64 KiB, so that the
        // small datasets sit back to back (write_small_datasets).
        const hsize_t block = 64 * 1024;
        check_write_status(H5Pset_meta_block_size(fapl, block), tmp + ": metadata block size");
        check_write_status(H5Pset_small_data_block_size(fapl, block), tmp + ": small data block size");
        return detail::h5::Sec2File::create(tmp, H5P_DEFAULT, fapl);
    }

    std::string m_tmp;
    detail::h5::Sec2File m_file;
    bool m_reserved = false;
    Handle m_dcpl, m_lcpl;
};

// Runs `create` (the coordinator's HDF5 calls) and `meanwhile` (none) and
// returns when both are done: in two threads, the caller's running
// `meanwhile`, unless faults are injected (their points are then passed in
// one order, the creation's first, as the other ranks mirror them) or no
// thread can be started. What `meanwhile` throws is thrown once `create`
// has ended.
void run_alongside(const std::function<void()>& create, const std::function<void()>& meanwhile)
{
    std::optional<std::thread> creating;
    if (meanwhile && !fault::g_armed.load(std::memory_order_relaxed)) {
        try {
            creating.emplace(create);
        } catch (const std::system_error&) {
        }
    }
    if (!creating)
        create();
    try {
        if (meanwhile)
            meanwhile();
    } catch (...) {
        if (creating)
            creating->join();
        throw;
    }
    if (creating)
        creating->join();
}

// What this rank writes into one dataset: its view, written either directly
// (one round, a memory hyperslab) or in pieces packed into the staging buffer
// (always for CUDA device memory, staged through it).
struct Task {
    const WriteItem* item = nullptr;
    std::size_t dataset = 0;
    StridedView view;
    MemorySpace space = MemorySpace::host;
    detail::ChunkHasher* hash = nullptr; // device memory: hashed as its pieces are staged
    Handle mem; // valid: direct
    bool whole = false; // direct from dense host memory; `mem` made on first use (prepare)
    ct::Split split;
    std::int64_t rounds = 0;
    // Dense host memory whose box is one contiguous range of the dataset:
    // it can go straight to the file (ContainerSave::write_directly).
    bool one_run = false;
};

// Whether `box` is one contiguous range of the row-major elements of an
// array of `shape`: whole in every dimension after some dimension j, of
// extent 1 in every dimension before it.
bool one_run(const Box& box, const Shape& shape)
{
    std::size_t j = box.ndim();
    while (j > 0 && box.offsets[j - 1] == 0 && box.shape[j - 1] == shape[j - 1])
        --j;
    for (std::size_t k = 0; k + 1 < j; ++k)
        if (box.shape[k] != 1)
            return false;
    return true;
}

// The row-major index, in an array of `shape`, of the first element of `box`.
std::uint64_t first_element(const Box& box, const Shape& shape)
{
    std::uint64_t at = 0;
    for (std::size_t d = 0; d < box.ndim(); ++d)
        at = at * static_cast<std::uint64_t>(shape[d]) + static_cast<std::uint64_t>(box.offsets[d]);
    return at;
}

// The checksums of a chunk (docs/FORMAT.md, "Checksums"): its bytes in
// row-major order over its box, hashed straight from a dense view or packed
// piece by piece (at most `staging` bytes) from a strided one. Host memory.
std::vector<std::uint64_t> chunk_checksums(const StridedView& view, const Box& box, std::size_t es,
                                           std::uint64_t block, std::size_t staging, std::vector<char>& scratch)
{
    detail::ChunkHasher hasher(detail::checksum_span(box.shape, es, block));
    const auto n = box.volume();
    if (detail::is_dense(view)) {
        hasher.update(view.data, static_cast<std::size_t>(n) * es);
        return hasher.finish();
    }
    const ct::Split split(Box{Shape(box.ndim(), 0), box.shape}, std::max<std::int64_t>(
                                                                     static_cast<std::int64_t>(staging / es), 1));
    scratch.resize(static_cast<std::size_t>(split.max_elements()) * es);
    for (std::int64_t p = 0; p < split.count(); ++p) {
        std::int64_t first = 0, count = 0;
        split.piece(p, first, count);
        detail::pack_range(view, first, count, scratch.data());
        hasher.update(scratch.data(), static_cast<std::size_t>(count) * es);
    }
    return hasher.finish();
}

// A small dataset written straight to its address: the same list, in
// dataset order, on every rank; its tasks on this rank are [first_task,
// end_task) of the rank's task list.
struct SmallDataset {
    std::size_t dataset = 0;
    std::uint64_t at = 0; // the address of its contiguous storage
    std::uint64_t bytes = 0;
    std::size_t first_task = 0, end_task = 0;
    std::uint64_t mine = 0; // the bytes of it this rank writes (sends to the group's owner)
};

// Small datasets are aggregated in groups of consecutive datasets of at most
// this many bytes, each written by one rank; a round of groups sends at most
// k_small_send_bytes from any rank (ct::small_rounds).
constexpr std::uint64_t k_small_group_bytes = std::uint64_t(2) << 20;
constexpr std::uint64_t k_small_send_bytes = std::uint64_t(8) << 20;

void small_mpi(int rc, const std::string& tmp, const char* what)
{
    if (rc != MPI_SUCCESS)
        throw error::WriteError(tmp + ": " + what + " of the small datasets failed");
}

// The rounds of write_small_datasets are collective: every rank must see
// the same list (it follows from the agreed schedule and the shared dataset
// list; a difference would be a bug, reported the same way on every rank).
void check_same_small_list(MPI_Comm comm, const std::string& tmp, std::size_t count)
{
    std::int64_t n[2] = {static_cast<std::int64_t>(count), -static_cast<std::int64_t>(count)};
    small_mpi(MPI_Allreduce(MPI_IN_PLACE, n, 2, MPI_INT64_T, MPI_MAX, comm), tmp, "MPI_Allreduce");
    if (n[0] != -n[1])
        throw error::Internal(tmp + ": the ranks list between " + std::to_string(-n[1]) + " and " +
                              std::to_string(n[0]) + " small datasets (internal error)");
}

// The groups of consecutive small datasets of at most k_small_group_bytes
// (or one dataset): group g is smalls[group[g], group[g + 1]).
std::vector<std::size_t> small_groups(const std::vector<SmallDataset>& smalls)
{
    std::vector<std::size_t> group{0};
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < smalls.size(); ++i) {
        if (acc > 0 && acc + smalls[i].bytes > k_small_group_bytes) {
            group.push_back(i);
            acc = 0;
        }
        acc += smalls[i].bytes;
    }
    group.push_back(smalls.size());
    return group;
}

// The most bytes any rank sends for each group, agreed in one allreduce; a
// rank that `failed` sends nothing.
std::vector<std::uint64_t> most_sent(MPI_Comm comm, const std::string& tmp, const std::vector<SmallDataset>& smalls,
                                     const std::vector<std::size_t>& group, bool failed)
{
    const std::size_t groups = group.size() - 1;
    std::vector<std::uint64_t> most(groups, 0);
    if (!failed)
        for (std::size_t g = 0; g < groups; ++g)
            for (std::size_t i = group[g]; i < group[g + 1]; ++i)
                most[g] += smalls[i].mine;
    small_mpi(MPI_Allreduce(MPI_IN_PLACE, most.data(), static_cast<int>(groups), MPI_UINT64_T, MPI_MAX, comm), tmp,
              "MPI_Allreduce");
    return most;
}

// One round's exchange of small-dataset pieces: what this rank sends (hdr:
// (file offset, length) pairs; data: their bytes; counts: per rank, the hdr
// values and the data bytes for it) and what it receives from the other
// ranks (rhdr, rdata). Its pieces for itself stay where pack_round put them
// (own()): they take no part in the MPI_Alltoallv.
class SmallExchange {
public:
    SmallExchange(int rank, int size)
        : counts(2 * static_cast<std::size_t>(size)), rcounts(counts.size()), m_rank(rank), m_size(size),
          m_hc(static_cast<std::size_t>(size)), m_hd(m_hc.size()), m_dc(m_hc.size()), m_dd(m_hc.size()),
          m_rhc(m_hc.size()), m_rhd(m_hc.size()), m_rdc(m_hc.size()), m_rdd(m_hc.size())
    {
    }
    // Nothing to send.
    void clear()
    {
        hdr.clear();
        data.clear();
        std::fill(counts.begin(), counts.end(), 0);
    }
    // Collective: MPI_Alltoall of the counts, then MPI_Alltoallv of the
    // offsets and of the bytes for the other ranks (one rank: nothing).
    void exchange(MPI_Comm comm, const std::string& tmp)
    {
        displace(counts, m_hc, m_hd, m_dc, m_dd);
        if (m_size == 1)
            return;
        small_mpi(MPI_Alltoall(counts.data(), 2, MPI_INT64_T, rcounts.data(), 2, MPI_INT64_T, comm), tmp,
                  "MPI_Alltoall");
        const auto me = static_cast<std::size_t>(m_rank);
        rcounts[2 * me] = rcounts[2 * me + 1] = 0; // its own pieces stay in hdr and data
        const int rh = displace(rcounts, m_rhc, m_rhd, m_rdc, m_rdd);
        rhdr.resize(static_cast<std::size_t>(rh));
        rdata.resize(static_cast<std::size_t>(m_rdd.back() + m_rdc.back()));
        // The counts for this rank itself are 0 on both sides; the
        // displacements keep its pieces in place in hdr and data.
        const int hc = m_hc[me], dc = m_dc[me];
        m_hc[me] = m_dc[me] = 0;
        small_mpi(MPI_Alltoallv(hdr.data(), m_hc.data(), m_hd.data(), MPI_UINT64_T, rhdr.data(), m_rhc.data(),
                                m_rhd.data(), MPI_UINT64_T, comm),
                  tmp, "MPI_Alltoallv (offsets)");
        small_mpi(MPI_Alltoallv(data.data(), m_dc.data(), m_dd.data(), MPI_BYTE, rdata.data(), m_rdc.data(),
                                m_rdd.data(), MPI_BYTE, comm),
                  tmp, "MPI_Alltoallv (bytes)");
        m_hc[me] = hc;
        m_dc[me] = dc;
    }
    // This rank's pieces for itself, after exchange(): `n` hdr values from
    // `h`, their bytes from `d`.
    void own(const std::uint64_t*& h, std::size_t& n, const char*& d) const
    {
        const auto me = static_cast<std::size_t>(m_rank);
        h = hdr.data() + m_hd[me];
        n = static_cast<std::size_t>(m_hc[me]);
        d = data.data() + m_dd[me];
    }

    std::vector<std::uint64_t> hdr, rhdr;
    std::vector<char> data, rdata;
    std::vector<std::int64_t> counts, rcounts;

private:
    // Counts and displacements of the hdr values and the bytes from `c`
    // (pairs per rank); returns the hdr values in all.
    int displace(const std::vector<std::int64_t>& c, std::vector<int>& hc, std::vector<int>& hd, std::vector<int>& dc,
                 std::vector<int>& dd) const
    {
        int hoff = 0, doff = 0;
        for (std::size_t u = 0; u < static_cast<std::size_t>(m_size); ++u) {
            hc[u] = static_cast<int>(c[2 * u]);
            dc[u] = static_cast<int>(c[2 * u + 1]);
            hd[u] = hoff;
            dd[u] = doff;
            hoff += hc[u];
            doff += dc[u];
        }
        return hoff;
    }

    int m_rank, m_size;
    std::vector<int> m_hc, m_hd, m_dc, m_dd, m_rhc, m_rhd, m_rdc, m_rdd;
};

// Packs this rank's pieces of the round's groups [first, last) into `x`, in
// the order of their owners (group g: rank g % size), which is the order of
// the send displacements.
template <class Pack>
void pack_round(SmallExchange& x, const std::vector<SmallDataset>& smalls, const std::vector<std::size_t>& group,
                std::size_t first, std::size_t last, int size, Pack& pack)
{
    std::vector<std::pair<std::size_t, std::size_t>> owned; // (owner, group)
    for (std::size_t g = first; g < last; ++g)
        owned.emplace_back(g % static_cast<std::size_t>(size), g);
    std::sort(owned.begin(), owned.end());
    for (const auto& [owner, g] : owned) {
        const auto h0 = x.hdr.size();
        const auto d0 = x.data.size();
        for (std::size_t i = group[g]; i < group[g + 1]; ++i)
            pack(smalls[i], x.hdr, x.data);
        x.counts[2 * owner] = static_cast<std::int64_t>(x.hdr.size() - h0);
        x.counts[2 * owner + 1] = static_cast<std::int64_t>(x.data.size() - d0);
    }
}

// A piece of a small dataset: its bytes at `src` go to file offset `at`.
struct SmallPiece {
    std::uint64_t at, size;
    const char* src;
};

// Appends the pieces of `n` hdr values ((offset, length) pairs) from `h`,
// their bytes one after the other from `d`.
void add_pieces(const std::uint64_t* h, std::size_t n, const char* d, std::vector<SmallPiece>& pieces)
{
    for (std::size_t j = 0; j + 1 < n; j += 2) {
        pieces.push_back(SmallPiece{h[j], h[j + 1], d});
        d += h[j + 1];
    }
}

// Writes this rank's group from its pieces (its own and those it received
// from the others), by offset; adjacent ones in one write, from where their
// bytes are when those are adjacent there too, else gathered in `run`.
template <class Write>
void write_pieces(std::vector<SmallPiece>& pieces, std::vector<char>& run, Write& write)
{
    std::sort(pieces.begin(), pieces.end(), [](const SmallPiece& a, const SmallPiece& b) { return a.at < b.at; });
    std::size_t j = 0;
    while (j < pieces.size()) {
        std::size_t k = j + 1;
        std::uint64_t end = pieces[j].at + pieces[j].size;
        while (k < pieces.size() && pieces[k].at == end)
            end += pieces[k++].size;
        bool in_place = true; // the run's bytes are adjacent in memory too (the usual case)
        for (std::size_t m = j + 1; m < k && in_place; ++m)
            in_place = pieces[m].src == pieces[m - 1].src + pieces[m - 1].size;
        if (in_place) {
            write(pieces[j].at, pieces[j].src, end - pieces[j].at);
        } else {
            run.clear();
            for (std::size_t m = j; m < k; ++m)
                run.insert(run.end(), pieces[m].src, pieces[m].src + pieces[m].size);
            write(pieces[j].at, run.data(), run.size());
        }
        j = k;
    }
}

// Writes the small datasets (docs/FORMAT.md 7.4), collective over `comm`:
// each group of consecutive datasets (their storage mostly adjacent in the
// file) is written by one rank, its owner, which receives the other ranks'
// pieces of the group (MPI_Alltoallv; its own are written from where they
// were packed) and writes each run of adjacent bytes
// with one call, instead of every rank writing its pieces one by one (7,500
// writes of 5-10 KiB per rank in the mixed benchmark; the kernel's cost is
// per write). Rounds bound the memory (ct::small_rounds, from the most bytes
// any rank sends for each group, one allreduce): a rank sends at most
// k_small_send_bytes of data per round (or one group) and receives at most
// one group; a round spans up to one group per rank. `pack(sd, hdr, data)`
// appends this rank's runs of it ((offset, length) pairs and bytes);
// `write(at, src, size)` writes. A rank that `failed` earlier sends nothing
// and writes nothing but takes part in every round. MPI failures throw;
// write failures throw after the rounds.
template <class Pack, class Write>
void write_small_datasets(MPI_Comm comm, const std::string& tmp, const std::vector<SmallDataset>& smalls, bool failed,
                          Pack&& pack, Write&& write)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    check_same_small_list(comm, tmp, smalls.size());
    if (smalls.empty())
        return;
    const std::vector<std::size_t> group = small_groups(smalls);
    const std::vector<std::size_t> rounds =
        ct::small_rounds(most_sent(comm, tmp, smalls, group, failed), size, k_small_send_bytes);
    SmallExchange x(rank, size);
    std::vector<char> run;
    std::vector<SmallPiece> pieces;
    std::exception_ptr write_error;
    auto note = [&] {
        failed = true;
        if (!write_error)
            write_error = std::current_exception();
    };
    for (std::size_t round = 0; round + 1 < rounds.size(); ++round) {
        x.clear();
        if (!failed) {
            try {
                pack_round(x, smalls, group, rounds[round], rounds[round + 1], size, pack);
            } catch (...) {
                note();
                x.clear();
            }
        }
        x.exchange(comm, tmp);
        if (failed)
            continue;
        const std::uint64_t* own = nullptr;
        std::size_t own_n = 0;
        const char* own_data = nullptr;
        x.own(own, own_n, own_data);
        pieces.clear();
        add_pieces(own, own_n, own_data, pieces);
        add_pieces(x.rhdr.data(), x.rhdr.size(), x.rdata.data(), pieces);
        try {
            write_pieces(pieces, run, write);
        } catch (...) {
            note();
        }
    }
    if (write_error)
        std::rethrow_exception(write_error);
}

} // namespace

struct ContainerWriter::Impl final : detail::ColumnarWriter {
    void commit(detail::MetadataColumns& md) override;
    ContainerWriterOptions opt;
    std::string path; // the committed file
    std::string tmp;  // where this save writes
    bool coordinator = false;
    MPI_Comm comm = MPI_COMM_NULL;
    Bytes list; // coordinator: the encoded dataset list (prepare_global_plan -> write_data)
};

ContainerWriter::ContainerWriter(ContainerWriterOptions options) : m_impl(std::make_unique<Impl>())
{
    if (options.staging_bytes < 4096)
        throw error::WrongAPIUsage("staging_bytes must be at least 4096, not " + std::to_string(options.staging_bytes));
    ct::check_tuning(options.tuning);
    m_impl->opt = std::move(options);
}

ContainerWriter::~ContainerWriter() = default;

void ContainerWriter::reset(const std::string& checkpoint_id)
{
    if (checkpoint_id.empty())
        throw error::WrongAPIUsage("empty checkpoint id");
    m_impl->path = fs::strip(checkpoint_id);
    m_impl->tmp = m_impl->path + container_temp_suffix;
    m_impl->list.clear();
}

void ContainerWriter::set_up_storage_writer(bool is_coordinator, MPI_Comm comm)
{
    m_impl->coordinator = is_coordinator;
    m_impl->comm = comm;
}

std::vector<SavePlan> ContainerWriter::prepare_global_plan(std::vector<SavePlan> plans)
{
    auto& im = *m_impl;
    if (fs::is_directory(im.path))
        throw error::WriteError("cannot save a container to " + im.path + ": it is a directory");
    if (fs::exists(im.path) && !im.opt.overwrite)
        throw error::WrongAPIUsage("checkpoint " + im.path +
                                   " already exists (pass overwrite to replace it once the new one is committed)");
    fs::create_directories(fs::parent(im.path));
    fs::remove_all(im.tmp); // an interrupted save's leftover: never committed

    // Every array and blob that some rank writes, in name order (the order
    // of the metadata). Arrays without elements have no items: finish()
    // creates their datasets.
    std::map<std::string, DatasetSpec> specs;
    for (const auto& p : plans)
        for (const auto& it : p.items) {
            if (it.kind != ItemKind::array && it.kind != ItemKind::bytes)
                continue;
            DatasetSpec s{it.fqn, container_dataset_path(it.fqn), it.kind,
                          it.kind == ItemKind::bytes ? DType::u8 : it.dtype, it.global_shape};
            auto [at, fresh] = specs.emplace(it.fqn, s);
            if (!fresh && (at->second.kind != s.kind || at->second.dtype != s.dtype || at->second.shape != s.shape))
                throw error::Mismatch(
                    "entry '" + it.fqn + "': the global plan writes it as " + item_kind_name(at->second.kind) + " " +
                    std::string(dtype_name(at->second.dtype)) + " " + shape_str(at->second.shape) + " and as " +
                    item_kind_name(s.kind) + " " + std::string(dtype_name(s.dtype)) + " " + shape_str(s.shape));
        }
    std::vector<DatasetSpec> list;
    list.reserve(specs.size());
    for (auto& [fqn, s] : specs)
        list.push_back(std::move(s));
    im.list = encode_list(im.tmp, list);
    return plans;
}

namespace {

// ---- write_data ---------------------------------------------------------

// The write schedule that every rank agrees on before the file is created,
// in one allreduce (MAX) of [failed, rounds[D], highest writer[D], -lowest
// writer[D], through HDF5[D]]: whether a rank failed, how many collective
// H5Dwrite calls (rounds) each dataset needs, whether one rank alone writes
// it, and whether some rank's chunk of it cannot go straight to the file.
class Schedule {
public:
    explicit Schedule(std::size_t datasets) : m_d(datasets), m_v(1 + 4 * datasets, 0) {}
    void add_rounds(std::size_t d, std::int64_t n) { m_v[1 + d] += n; }
    void needs_h5(std::size_t d) { m_v[1 + 3 * m_d + d] = 1; }
    /// Collective: adds this rank's writers (and `failed`) and agrees.
    void agree(const detail::Comm& c, bool failed, const std::string& tmp)
    {
        if (failed)
            m_v[0] = 1;
        for (std::size_t d = 0; d < m_d; ++d) {
            const bool mine = m_v[1 + d] > 0;
            m_v[1 + m_d + d] = mine ? c.rank : -1;
            m_v[1 + 2 * m_d + d] = mine ? -c.rank : -std::int64_t(c.size);
        }
        if (MPI_Allreduce(MPI_IN_PLACE, m_v.data(), static_cast<int>(m_v.size()), MPI_INT64_T, MPI_MAX, c.comm) !=
            MPI_SUCCESS)
            throw error::WriteError(tmp + ": MPI_Allreduce of the write schedule failed");
    }
    bool failed() const { return m_v[0] != 0; }
    std::int64_t rounds(std::size_t d) const { return m_v[1 + d]; }
    bool single_writer(std::size_t d) const { return m_v[1 + m_d + d] == -m_v[1 + 2 * m_d + d]; }
    bool through_h5(std::size_t d) const { return m_v[1 + 3 * m_d + d] != 0; }

private:
    std::size_t m_d;
    std::vector<std::int64_t> m_v;
};

// The container while write_data writes it, and what its writes share.
// Members in the order they are made (and destroyed in reverse). The file
// exists (the coordinator's skeleton); it is opened through parallel HDF5
// only when some dataset is written through HDF5 (open_parallel).
struct OpenContainer {
    OpenContainer(const std::string& tmp, std::uint64_t writeback_limit) : writeback(tmp, writeback_limit) {}
    // Collective: opens the file with the MPI-IO driver and makes the
    // transfer properties.
    void open_parallel(const std::string& tmp, MPI_Comm comm, const ContainerWriterOptions& opt)
    {
        fapl = ct::file_access(comm, opt.tuning, opt.alignment, tmp, true);
        file = Handle(check_write(H5Fopen(tmp.c_str(), H5F_ACC_RDWR, fapl), "opening " + tmp));
        ct::log_hints(file, opt.tuning, tmp);
        collective = Handle(check_write(H5Pcreate(H5P_DATASET_XFER), tmp + ": transfer properties"));
        check_write_status(H5Pset_dxpl_mpio(collective, H5FD_MPIO_COLLECTIVE), tmp + ": collective transfers");
        independent = Handle(check_write(H5Pcreate(H5P_DATASET_XFER), tmp + ": transfer properties"));
        check_write_status(H5Pset_dxpl_mpio(independent, H5FD_MPIO_INDEPENDENT), tmp + ": independent transfers");
        none = ct::dense_space(0, tmp, true);
    }

    detail::Writeback writeback;
    Handle fapl, file; // parallel HDF5: valid when open_parallel() succeeded
    Handle collective, independent;
    Handle none;               // an empty selection
    detail::HostBuffer buffer; // the staging buffer (page-locked with CUDA), on first use
    // Small datasets written independently go straight to their address
    // through this rank's own MPI-IO handle on the file (opened on first
    // use; synced and closed at the flush).
    std::optional<detail::MpiFile> direct;
    // The same list on every rank: aggregated after the datasets' loop.
    std::vector<SmallDataset> smalls;
};

// One dataset while write_data writes it.
struct OpenDataset {
    std::size_t index = 0; // in the dataset list
    const DatasetSpec* spec = nullptr;
    std::string what; // "<tmp>: dataset '<path>'"
    std::size_t es = 0;
    hid_t ftype = H5I_INVALID_HID, mtype = H5I_INVALID_HID; // ContainerSave::m_types
    bool same_types = false;
    Handle fspace, dset;
    haddr_t stored_at = HADDR_UNDEF; // where its bytes start, for early writeback
    std::size_t first_task = 0, end_task = 0; // its tasks on this rank
};

// The memory side of one H5Dwrite: a piece of a task, or nothing (`none`,
// an empty dataspace, and a dummy buffer).
struct Piece {
    Piece(hid_t none, const void* dummy) : mem(none), buf(dummy) {}
    hid_t mem; // memory dataspace
    const void* buf;
    Handle owned; // `mem`, when made for this piece
    Box region;   // what it covers in the dataset
};

// One write_data call (docs at the top of this file): step 1, local, finds
// what this rank writes and agrees on the schedule; step 2, collective,
// creates the file and every dataset and writes them.
class ContainerSave : ct::FirstError {
public:
    ContainerSave(const ContainerWriterOptions& opt, MPI_Comm comm, std::string tmp, std::vector<DatasetSpec> specs)
        : m_opt(opt), m_c(comm), m_tmp(std::move(tmp)), m_specs(std::move(specs)), m_sched(m_specs.size()),
          m_writeback_limit(opt.fsync ? opt.writeback_bytes : 0), // early writeback: with fsync only
          m_piece_bytes(detail::Writeback::available()
                            ? static_cast<std::int64_t>(detail::Writeback::piece_of(m_writeback_limit))
                            : 0)
    {
    }

    std::vector<WriteResult> run(const SavePlan& plan, SavePlanner& planner)
    {
        plan_writes(plan, planner);
        if (!agree_schedule())
            return {}; // another rank failed; the save's error agreement reports it
        write_container();
        if (m_err)
            std::rethrow_exception(m_err);
        if (m_another_failed)
            return {}; // the save's error agreement reports the other rank's error
        return finished_results();
    }

private:
    // ---- step 1 (local)
    void plan_writes(const SavePlan& plan, SavePlanner& planner);
    void plan_item(const WriteItem& it, const std::map<std::string, std::size_t>& index, SavePlanner& planner);
    void choose_rounds(Task& t, const DataRef& ref, std::int64_t es);
    void plan_checksums(Task& t, const DataRef& ref, std::int64_t es, WriteResult& res);
    bool agree_schedule();
    // ---- step 2 (collective)
    void write_container();
    int create_datasets(std::optional<Skeleton>& file, bool first, const std::vector<std::size_t>& order,
                        std::size_t from, std::size_t to, int status, const std::function<void()>& meanwhile = {});
    enum class Route { none, small, direct, h5 };
    Route route_of(std::size_t d);
    void write_dataset(OpenContainer& f, std::size_t d, Route route);
    void write_directly(OpenContainer& f, OpenDataset& ds);
    void write_independently(OpenContainer& f, OpenDataset& ds);
    void queue_small(OpenContainer& f, OpenDataset& ds, haddr_t at);
    void write_collectively(OpenContainer& f, OpenDataset& ds);
    void prepare(OpenContainer& f, Task& t, std::int64_t p, const OpenDataset& ds, Piece& piece);
    void wrote(OpenContainer& f, const Box& region, const OpenDataset& ds);
    void write_smalls(OpenContainer& f);
    void pack_small(const Task& t, const Shape& shape, std::uint64_t at, std::size_t es,
                    std::vector<std::uint64_t>& hdr, std::vector<char>& data);
    void write_direct(OpenContainer& f, std::uint64_t at, const char* src, std::uint64_t size);
    void close_direct(OpenContainer& f);
    void name_full_disk();
    bool agree_outcome();
    void flush(OpenContainer& f);
    void close(OpenContainer& f);
    std::vector<WriteResult> finished_results();

    const ContainerWriterOptions& m_opt;
    const detail::Comm m_c;
    const std::string m_tmp;
    const std::vector<DatasetSpec> m_specs;
    Schedule m_sched;
    const std::uint64_t m_writeback_limit;
    const std::int64_t m_piece_bytes; // of early writeback (0: off), as detail::Writeback cuts it
    // Step 1's: what this rank writes, by dataset after the agreement.
    std::vector<Task> m_tasks;
    std::vector<WriteResult> m_results;
    std::int64_t m_max_piece_bytes = 0;
    std::exception_ptr m_local_failure;
    std::vector<char> m_scratch; // packing strided data for checksums
    // Dense chunks are hashed after the writes, overlapping the flush's
    // MPI_File_sync, which mostly waits for the device: their hashers (by
    // result) and byte ranges.
    std::vector<std::unique_ptr<detail::ChunkHasher>> m_hashers;
    detail::DeferredHashes m_deferred;
    // Step 2's (and m_err, this rank's first write error): where each
    // dataset's storage starts (HADDR_UNDEF: none), from the coordinator.
    std::vector<std::uint64_t> m_at;
    bool m_another_failed = false;
    DatasetTypes m_types;
};

// What this rank writes, and how many pieces (rounds) each dataset needs
// here. A failure is kept for the agreement (agree_schedule).
void ContainerSave::plan_writes(const SavePlan& plan, SavePlanner& planner)
{
    try {
        std::map<std::string, std::size_t> index;
        for (std::size_t d = 0; d < m_specs.size(); ++d)
            index.emplace(m_specs[d].fqn, d);
        for (const auto& it : plan.items)
            if (it.kind == ItemKind::array || it.kind == ItemKind::bytes) // scalars and strings: finish()
                plan_item(it, index, planner);
    } catch (...) {
        m_local_failure = std::current_exception();
    }
}

void ContainerSave::plan_item(const WriteItem& it, const std::map<std::string, std::size_t>& index,
                              SavePlanner& planner)
{
    const auto found = index.find(it.fqn);
    if (found == index.end())
        throw error::WriteError(m_tmp + ": entry '" + it.fqn + "' is not in the coordinator's dataset list");
    const DatasetSpec& ds = m_specs[found->second];
    const auto es = static_cast<std::int64_t>(dtype_size(stored_dtype(ds)));
    if (it.box.ndim() != ds.shape.size() || !it.box.inside(ds.shape) ||
        it.nbytes != static_cast<std::uint64_t>(it.box.volume() * es))
        throw error::WriteError(m_tmp + ": dataset '" + ds.path + "': planned chunk " + it.box.str() + " of " +
                                std::to_string(it.nbytes) + " bytes does not fit its global shape " +
                                shape_str(ds.shape));
    const DataRef ref = planner.resolve_data(it);
    if (ref.view.elem_size != static_cast<std::size_t>(es) || ref.view.shape != it.box.shape)
        throw error::WriteError(m_tmp + ": dataset '" + ds.path + "': the planner's data does not match chunk " +
                                it.box.str());
    Task t;
    t.item = &it;
    t.dataset = found->second;
    t.view = ref.view;
    t.space = ref.space;
    if (it.box.volume() > 0) {
        choose_rounds(t, ref, es);
        t.one_run = ref.space == MemorySpace::host && detail::is_dense(ref.view) && one_run(it.box, ds.shape);
        if (!t.one_run)
            m_sched.needs_h5(found->second);
    }
    m_sched.add_rounds(found->second, t.rounds);
    WriteResult res; // the chunk lives at its box in the dataset: offset 0
    res.fqn = it.fqn;
    res.chunk = it.chunk;
    res.storage.path = ds.path;
    res.storage.length = it.nbytes;
    plan_checksums(t, ref, es, res);
    m_results.push_back(std::move(res));
    m_tasks.push_back(std::move(t));
}

// How task `t` is written: from the caller's memory in one round (a memory
// hyperslab), in pieces with early writeback, or staged in pieces.
void ContainerSave::choose_rounds(Task& t, const DataRef& ref, std::int64_t es)
{
    const WriteItem& it = *t.item;
    const std::int64_t piece_bytes = m_piece_bytes;
    // Device memory: never handed to HDF5, staged in pieces. Dense host
    // memory is one dense memory space, made when it is written through
    // HDF5 (most small chunks never are: write_small_datasets).
    if (ref.space == MemorySpace::host && detail::is_dense(ref.view))
        t.whole = true;
    else if (ref.space == MemorySpace::host)
        t.mem = ct::view_space(ref.view, m_tmp + ": dataset '" + m_specs[t.dataset].path + "'", true);
    if (t.whole && piece_bytes > 0 && static_cast<std::int64_t>(it.nbytes) > piece_bytes) {
        // Dense and large, with early writeback: written from the caller's
        // memory in pieces, each one's writeback started as soon as it is
        // in the file.
        t.whole = false;
        t.split = ct::Split(it.box, std::max<std::int64_t>(piece_bytes / es, 1));
        t.rounds = t.split.count();
    } else if (t.whole || t.mem.valid()) {
        t.rounds = 1;
    } else {
        // Strided or on the device: through the staging buffer.
        const auto capacity_bytes = static_cast<std::int64_t>(m_opt.staging_bytes);
        t.split = ct::Split(it.box, std::max<std::int64_t>(capacity_bytes / es, 1));
        t.rounds = t.split.count();
        m_max_piece_bytes = std::max(m_max_piece_bytes, t.split.max_elements() * es);
    }
}

// The chunk's checksums: hashed now (strided host data), after the writes
// (dense host data, DeferredHashes) or as its pieces are staged (device).
void ContainerSave::plan_checksums(Task& t, const DataRef& ref, std::int64_t es, WriteResult& res)
{
    const WriteItem& it = *t.item;
    m_hashers.emplace_back();
    if (!m_opt.checksum_block || it.box.volume() == 0)
        return;
    const bool on_host = ref.space == MemorySpace::host;
    if (!on_host || detail::is_dense(ref.view)) {
        m_hashers.back() = std::make_unique<detail::ChunkHasher>(
            detail::checksum_span(it.box.shape, static_cast<std::size_t>(es), m_opt.checksum_block));
        if (on_host) // hashed later, from the same memory
            m_deferred.add(m_hashers.back().get(), ref.view.data, static_cast<std::size_t>(it.nbytes));
        else // from the host copies, piece by piece, as they are staged
            t.hash = m_hashers.back().get();
    } else {
        res.storage.checksums = chunk_checksums(ref.view, it.box, static_cast<std::size_t>(es), m_opt.checksum_block,
                                                m_opt.staging_bytes, m_scratch);
    }
}

// Collective: agrees on the schedule and on any rank's local failure;
// false when another rank failed (this rank's own failure is thrown).
bool ContainerSave::agree_schedule()
{
    m_sched.agree(m_c, m_local_failure != nullptr, m_tmp);
    if (m_sched.failed()) {
        if (m_local_failure)
            std::rethrow_exception(m_local_failure);
        return false;
    }
    std::stable_sort(m_tasks.begin(), m_tasks.end(),
                     [](const Task& a, const Task& b) { return a.dataset < b.dataset; });
    return true;
}

// Collective: the coordinator creates the file and every dataset
// (create_datasets); every rank writes each dataset collectively in its
// agreed number of rounds, or independently by its writers alone (a single
// writer, or fewer bytes than independent_below), small ones straight to
// their address after the loop (write_smalls); then, when no rank failed,
// flushes; closes. The datasets written straight to the file in pieces
// (Route::direct, the large ones) are created first: every rank writes
// them while the coordinator creates the rest, the coordinator's creation
// in a thread of its own.
void ContainerSave::write_container()
{
    detail::h5::ErrorSilencer quiet;
    std::vector<Route> route(m_specs.size(), Route::none);
    bool any_h5 = false;
    std::vector<std::size_t> order; // of creation: the direct datasets first
    for (std::size_t d = 0; d < m_specs.size(); ++d) {
        route[d] = route_of(d);
        any_h5 = any_h5 || route[d] == Route::h5;
        if (route[d] == Route::direct)
            order.push_back(d);
    }
    const std::size_t early = order.size();
    for (std::size_t d = 0; d < m_specs.size(); ++d)
        if (route[d] != Route::direct)
            order.push_back(d);
    const auto write_range = [&](OpenContainer& f, std::size_t from, std::size_t to) {
        for (std::size_t k = from; k < to; ++k)
            write_dataset(f, order[k], route[order[k]]);
    };
    std::optional<Skeleton> skeleton;
    int status = create_datasets(skeleton, true, order, 0, early, 1);
    OpenContainer f(m_tmp, m_writeback_limit);
    // The direct datasets' types were made by route_of: writing them makes
    // no HDF5 call, as the creation alongside requires.
    status = create_datasets(skeleton, false, order, early, order.size(), status, [&] { write_range(f, 0, early); });
    if (any_h5 && status >= 0) // the same on every rank
        f.open_parallel(m_tmp, m_c.comm, m_opt);
    if (status >= 0)
        write_range(f, early, order.size());
    write_smalls(f);
    f.writeback.start_rest();
    if (status == 0 && m_c.rank == 0 && !m_err)
        noting([&] { unreserved_room(m_tmp, m_specs.size()); });
    name_full_disk();
    m_another_failed = agree_outcome();
    if (!m_another_failed)
        flush(f);
    close_direct(f);
    close(f);
}

// Collective: the coordinator alone creates the datasets order[from, to)
// through HDF5's serial driver (one creation per dataset, where parallel
// HDF5 makes every rank create each one): on the `first` call first the
// file; it closes the file after the last dataset. It broadcasts where each one's
// storage starts (m_at) and the status: 1: created and reserved, 0: created,
// space not reserved, -1: failed (no rank writes; the coordinator noted
// why), which stays -1. Unless `status` is already -1, every rank runs
// `meanwhile` (which makes no HDF5 call) before the broadcast, the
// coordinator alongside its creation (run_alongside); what it throws is
// noted, as a failed write is, so that every rank reaches the broadcast. The file's space is
// reserved before anything is written into it: a collective write that
// fails on one rank for want of space leaves parallel HDF5's ranks in
// different states, and the close's metadata sync then waits forever. Where the file system cannot reserve,
// the coordinator checks its free space before the flush instead
// (unreserved_room).
int ContainerSave::create_datasets(std::optional<Skeleton>& file, bool first, const std::vector<std::size_t>& order,
                                   std::size_t from, std::size_t to, int status,
                                   const std::function<void()>& meanwhile)
{
    std::vector<std::uint64_t> msg(1 + to - from, static_cast<std::uint64_t>(HADDR_UNDEF));
    // What `meanwhile` throws is noted, not thrown: every rank must reach
    // the broadcast below.
    std::function<void()> guarded;
    if (meanwhile)
        guarded = [&] { noting(meanwhile); };
    if (m_c.rank == 0 && status >= 0) {
        std::vector<hid_t> types(to - from); // made here: the creation may run in another thread
        for (std::size_t k = from; k < to; ++k)
            types[k - from] = m_types.of(stored_dtype(m_specs[order[k]])).file;
        std::exception_ptr failure;
        const auto create = [&]() noexcept {
            detail::h5::ErrorSilencer quiet; // a thread-safe HDF5 has one error stack per thread
            try {
                if (first) {
                    file.emplace(m_tmp, m_opt, m_specs);
                    status = file->reserved() ? 1 : 0;
                }
                for (std::size_t k = from; k < to; ++k)
                    msg[1 + k - from] = file->add(m_specs[order[k]], types[k - from]);
                if (to == order.size())
                    file->close();
            } catch (...) {
                failure = std::current_exception();
                file.reset();
                status = -1;
            }
        };
        run_alongside(create, guarded);
        if (failure)
            note(failure);
    } else if (status >= 0 && guarded) {
        guarded();
    }
    msg[0] = static_cast<std::uint64_t>(status + 1);
    if (MPI_Bcast(msg.data(), static_cast<int>(msg.size()), MPI_UINT64_T, 0, m_c.comm) != MPI_SUCCESS)
        throw error::WriteError(m_tmp + ": MPI_Bcast of the container's datasets failed");
    status = static_cast<int>(msg[0]) - 1;
    m_at.resize(m_specs.size(), static_cast<std::uint64_t>(HADDR_UNDEF));
    for (std::size_t k = from; k < to; ++k)
        m_at[order[k]] = msg[1 + k - from];
    // Injected faults (ct::inject) follow the real calls, here the
    // coordinator's: every rank passes the same points, notes the error and
    // takes part in the rest with empty selections.
    if (m_c.rank != 0 && first)
        noting([&] { ct::inject(fault::h5_create, "creating " + m_tmp, true); });
    if (m_c.rank != 0 && status >= 0 && fault::g_armed.load(std::memory_order_relaxed))
        for (std::size_t k = from; k < to; ++k)
            noting([&] {
                ct::inject(fault::h5_create, "creating " + m_tmp + ": dataset '" + m_specs[order[k]].path + "'", true);
            });
    return status;
}

// How dataset `d` is written: the same on every rank (it depends on the
// agreed schedule only). Straight to the file when it is stored in its
// memory type and every chunk of it is dense host memory and one contiguous
// range of the dataset (Route::direct; small ones aggregated, Route::small),
// else through parallel HDF5. (A dataset with elements has storage from its
// creation: Skeleton::add.)
ContainerSave::Route ContainerSave::route_of(std::size_t d)
{
    if (m_sched.rounds(d) == 0)
        return Route::none;
    const DatasetSpec& spec = m_specs[d];
    const auto bytes = static_cast<std::uint64_t>(volume(spec.shape)) * dtype_size(stored_dtype(spec));
    if (!m_types.of(stored_dtype(spec)).same)
        return Route::h5;
    if ((m_sched.single_writer(d) || bytes < m_opt.tuning.independent_below) && bytes <= ct::direct_max_bytes)
        return Route::small;
    return m_sched.through_h5(d) ? Route::h5 : Route::direct;
}

// Writes this rank's tasks of dataset `d` by its route.
void ContainerSave::write_dataset(OpenContainer& f, std::size_t d, Route route)
{
    OpenDataset ds;
    ds.index = d;
    ds.spec = &m_specs[d];
    ds.what = m_tmp + ": dataset '" + ds.spec->path + "'";
    const auto& types = m_types.of(stored_dtype(*ds.spec));
    ds.ftype = types.file;
    ds.mtype = types.memory;
    ds.same_types = types.same;
    // m_tasks is sorted by dataset (agree_schedule)
    const auto by_dataset = [](const Task& t, std::size_t k) { return t.dataset < k; };
    const auto first = std::lower_bound(m_tasks.begin(), m_tasks.end(), d, by_dataset);
    ds.first_task = static_cast<std::size_t>(first - m_tasks.begin());
    ds.end_task = static_cast<std::size_t>(std::lower_bound(first, m_tasks.end(), d + 1, by_dataset) - m_tasks.begin());
    ds.es = dtype_size(stored_dtype(*ds.spec));
    if (route == Route::none)
        return;
    if (route == Route::small) {
        queue_small(f, ds, static_cast<haddr_t>(m_at[d]));
        return;
    }
    if (route == Route::direct) {
        write_directly(f, ds);
        return;
    }
    ds.fspace = ct::shape_space(ds.spec->shape, ds.what, true);
    ds.dset = Handle(check_write(H5Dopen2(f.file, ds.spec->path.c_str(), H5P_DEFAULT), "opening " + ds.what));
    // Where its bytes start (contiguous, allocated at creation): for early
    // writeback of what this rank writes through HDF5.
    ds.stored_at = f.writeback.active() ? static_cast<haddr_t>(m_at[d]) : HADDR_UNDEF;
    const auto bytes = static_cast<std::uint64_t>(volume(ds.spec->shape)) * ds.es;
    if (m_sched.single_writer(d) || bytes < m_opt.tuning.independent_below)
        write_independently(f, ds);
    else
        write_collectively(f, ds);
    if (!ds.dset.reset() && !m_err)
        m_err = std::make_exception_ptr(error::WriteError("closing " + ds.what + ": " + detail::h5::last_error()));
}

// A dataset its writers write alone through HDF5, piece by piece (small
// ones stored as in memory go to write_smalls instead: direct()).
void ContainerSave::write_independently(OpenContainer& f, OpenDataset& ds)
{
    static const char dummy = 0; // H5Dwrite wants a buffer even for an empty selection
    for (std::size_t ti = ds.first_task; ti < ds.end_task && !m_err; ++ti)
        for (std::int64_t p = 0; p < m_tasks[ti].rounds && !m_err; ++p)
            noting([&] {
                Piece piece(f.none, &dummy);
                prepare(f, m_tasks[ti], p, ds, piece);
                check_write_status(H5Dwrite(ds.dset, ds.mtype, piece.mem, ds.fspace, f.independent, piece.buf),
                             "writing " + ds.what);
                ct::inject(fault::h5_write, "writing " + ds.what, true);
                wrote(f, piece.region, ds);
            });
}

// A dataset whose chunks are each one contiguous range of it, from dense
// host memory: each of this rank's chunks written straight to its place in
// the file, in pieces that early writeback follows.
void ContainerSave::write_directly(OpenContainer& f, OpenDataset& ds)
{
    const auto at = m_at[ds.index];
    for (std::size_t ti = ds.first_task; ti < ds.end_task && !m_err; ++ti) {
        const Task& t = m_tasks[ti];
        if (t.rounds == 0)
            continue;
        noting([&] {
            const auto bytes = static_cast<std::uint64_t>(t.item->box.volume()) * ds.es;
            const auto start = at + first_element(t.item->box, ds.spec->shape) * ds.es;
            const char* src = static_cast<const char*>(t.view.data);
            const std::uint64_t piece = std::max<std::uint64_t>(f.writeback.piece(bytes), 1);
            for (std::uint64_t done = 0; done < bytes;) {
                const auto n = std::min(piece, bytes - done);
                write_direct(f, start + done, src + done, n);
                ct::inject(fault::h5_write, "writing " + ds.what, true);
                done += n;
            }
        });
    }
}

// A small dataset written straight to its address `at`, after the loop
// over the datasets, aggregated (write_small_datasets).
void ContainerSave::queue_small(OpenContainer& f, OpenDataset& ds, haddr_t at)
{
    const auto bytes = static_cast<std::uint64_t>(volume(ds.spec->shape)) * ds.es;
    std::uint64_t mine = 0;
    for (std::size_t ti = ds.first_task; ti < ds.end_task; ++ti)
        if (m_tasks[ti].rounds > 0) // as write_smalls packs them
            mine += static_cast<std::uint64_t>(m_tasks[ti].item->box.volume()) * ds.es;
    f.smalls.push_back(SmallDataset{ds.index, static_cast<std::uint64_t>(at), bytes, ds.first_task, ds.end_task, mine});
    for (std::size_t ti = ds.first_task; ti < ds.end_task && !m_err; ++ti)
        noting([&] { ct::inject(fault::h5_write, "writing " + ds.what, true); });
}

// A dataset written collectively in its agreed rounds: every rank takes part
// in each, with an empty selection when it has nothing (left) to write or
// has failed.
void ContainerSave::write_collectively(OpenContainer& f, OpenDataset& ds)
{
    static const char dummy = 0;
    std::size_t ti = ds.first_task;
    std::int64_t next = 0; // the next piece of task ti
    for (std::int64_t r = 0; r < m_sched.rounds(ds.index); ++r) {
        while (ti < ds.end_task && next >= m_tasks[ti].rounds) {
            ++ti;
            next = 0;
        }
        Piece piece(f.none, &dummy);
        bool mine = !m_err && ti < ds.end_task;
        if (mine) {
            try {
                prepare(f, m_tasks[ti], next, ds, piece);
            } catch (...) {
                note();
                mine = false;
            }
            ++next;
        }
        noting([&] {
            if (!mine) {
                check_write_status(H5Sselect_none(ds.fspace), ds.what + ": empty selection");
                piece.mem = f.none;
                piece.buf = &dummy;
            }
            check_write_status(H5Dwrite(ds.dset, ds.mtype, piece.mem, ds.fspace, f.collective, piece.buf),
                         "writing " + ds.what);
            ct::inject(fault::h5_write, "writing " + ds.what, true);
            if (mine)
                wrote(f, piece.region, ds);
        });
    }
}

// Selects piece `p` of task `t` in the dataset's file space; the memory side
// in `piece`.
void ContainerSave::prepare(OpenContainer& f, Task& t, std::int64_t p, const OpenDataset& ds, Piece& piece)
{
    if (t.whole || t.mem.valid()) {
        if (!t.mem.valid())
            t.mem = ct::dense_space(static_cast<std::uint64_t>(t.item->box.volume()), ds.what, true);
        piece.region = t.item->box;
        ct::select_box(ds.fspace, piece.region, ds.what, true);
        piece.mem = t.mem;
        piece.buf = t.view.data;
        return;
    }
    std::int64_t first = 0, n = 0;
    piece.region = t.split.piece(p, first, n);
    ct::select_box(ds.fspace, piece.region, ds.what, true);
    piece.owned = ct::dense_space(static_cast<std::uint64_t>(n), ds.what, true);
    piece.mem = piece.owned;
    if (detail::is_dense(t.view) && t.space == MemorySpace::host) { // a piece of a large dense chunk, in place
        piece.buf = static_cast<const char*>(t.view.data) + first * static_cast<std::int64_t>(t.view.elem_size);
        return;
    }
    if (!f.buffer.data())
        f.buffer = detail::HostBuffer(static_cast<std::size_t>(m_max_piece_bytes));
    detail::stage_out(DataRef{t.view, t.space}, first, n, f.buffer.data());
    if (t.hash) // pieces come in order: p = 0, 1, ...
        t.hash->update(f.buffer.data(), static_cast<std::size_t>(n) * t.view.elem_size);
    piece.buf = f.buffer.data();
}

// Starts the writeback of `region`, just written by this rank into the dataset.
void ContainerSave::wrote(OpenContainer& f, const Box& region, const OpenDataset& ds)
{
    if (ds.stored_at == HADDR_UNDEF) // writeback off
        return;
    detail::for_each_run(ds.spec->shape, region, [&](std::uint64_t first, std::uint64_t count) {
        f.writeback.wrote(static_cast<std::uint64_t>(ds.stored_at) + first * ds.es, count * ds.es);
    });
}

// Collective: the small datasets queued by queue_small, aggregated.
void ContainerSave::write_smalls(OpenContainer& f)
{
    noting([&] {
        const auto pack = [&](const SmallDataset& sd, std::vector<std::uint64_t>& hdr, std::vector<char>& data) {
            for (std::size_t ti = sd.first_task; ti < sd.end_task; ++ti)
                if (m_tasks[ti].rounds > 0)
                    pack_small(m_tasks[ti], m_specs[sd.dataset].shape, sd.at,
                               dtype_size(stored_dtype(m_specs[sd.dataset])), hdr, data);
        };
        const auto write = [&](std::uint64_t at, const char* src, std::uint64_t size) {
            write_direct(f, at, src, size);
        };
        write_small_datasets(m_c.comm, m_tmp, f.smalls, m_err != nullptr, pack, write);
    });
}

// Appends the runs of task `t` (a dataset of `shape` stored at `at`) to
// `hdr` (file offset, length) and its bytes, in the chunk's row-major order
// (the order of the runs), to `data`.
void ContainerSave::pack_small(const Task& t, const Shape& shape, std::uint64_t at, std::size_t es,
                               std::vector<std::uint64_t>& hdr, std::vector<char>& data)
{
    const auto n = static_cast<std::size_t>(t.item->box.volume());
    const auto start = data.size();
    data.resize(start + n * es);
    if (detail::is_dense(t.view) && t.space == MemorySpace::host)
        std::memcpy(data.data() + start, t.view.data, n * es);
    else
        detail::stage_out(DataRef{t.view, t.space}, 0, static_cast<std::int64_t>(n), data.data() + start);
    if (t.hash)
        t.hash->update(data.data() + start, n * es);
    detail::for_each_run(shape, t.item->box, [&](std::uint64_t first, std::uint64_t count) {
        hdr.push_back(at + first * es);
        hdr.push_back(count * es);
    });
}

// Writes `size` bytes at `at` through this rank's own handle.
void ContainerSave::write_direct(OpenContainer& f, std::uint64_t at, const char* src, std::uint64_t size)
{
    if (!f.direct)
        f.direct.emplace(m_tmp, detail::MpiFile::Mode::write, m_opt.tuning.mpi_hints);
    f.direct->write_at(at, src, size);
    f.writeback.wrote(at, size);
}

void ContainerSave::close_direct(OpenContainer& f)
{
    if (!f.direct)
        return;
    noting([&] { f.direct->close(); });
    f.direct.reset();
}

// HDF5 and the MPI library may have lost a full disk's errno: named here,
// before the failed file is truncated (agree_outcome).
void ContainerSave::name_full_disk()
{
    if (!m_err)
        return;
    try {
        std::rethrow_exception(m_err);
    } catch (const error::WriteError& e) {
        const std::string what = e.what();
        if (what.find(std::strerror(ENOSPC)) == std::string::npos)
            if (const auto full = fs::no_space_note(m_tmp, 4096); !full.empty())
                m_err = std::make_exception_ptr(error::WriteError(what + full));
    } catch (...) {
    }
}

// Collective: did any rank fail? Then no rank flushes, and the coordinator
// first truncates the doomed file, so that the close's metadata writes find
// space whatever filled the disk.
bool ContainerSave::agree_outcome()
{
    int any_failed = m_err ? 1 : 0;
    if (MPI_Allreduce(MPI_IN_PLACE, &any_failed, 1, MPI_INT, MPI_MAX, m_c.comm) != MPI_SUCCESS)
        throw error::WriteError(m_tmp + ": MPI_Allreduce of the write outcome failed");
    if (any_failed) {
        if (m_c.rank == 0)
            fs::truncate_noexcept(m_tmp, 0);
        if (MPI_Barrier(m_c.comm) != MPI_SUCCESS)
            throw error::WriteError(m_tmp + ": MPI_Barrier before closing a failed save failed");
    }
    return any_failed != 0;
}

// With fsync, every rank that wrote syncs the file (durable before the
// commit; the coordinator syncs it again after adding the metadata group):
// collective through parallel HDF5 when it is open (MPI_File_sync on every
// rank), else through the rank's own MPI-IO handle. The deferred checksums
// are computed meanwhile. Not left to the commit's fsync, even on the
// coordinator's node: that one opens the file anew, and an I/O error that
// early writeback's waits have seen is not reported to it (io/writeback.hpp).
void ContainerSave::flush(OpenContainer& f)
{
    noting([&] { // the hashing's error
        if (m_opt.fsync)
            m_deferred.run_during([&] {
                noting([&] {
                    if (f.file.valid())
                        check_write_status(H5Fflush(f.file, H5F_SCOPE_GLOBAL), "flushing " + m_tmp);
                    else if (f.direct)
                        f.direct->sync();
                    ct::inject(fault::h5_flush, "flushing " + m_tmp, true);
                });
            });
        else
            m_deferred.run();
    });
}

void ContainerSave::close(OpenContainer& f)
{
    if (!f.file.reset() && !m_err)
        m_err = std::make_exception_ptr(error::WriteError("closing " + m_tmp + ": " + detail::h5::last_error()));
    noting([&] { ct::inject(fault::h5_close, "closing " + m_tmp, true); });
}

std::vector<WriteResult> ContainerSave::finished_results()
{
    for (std::size_t k = 0; k < m_results.size(); ++k)
        if (m_hashers[k])
            m_results[k].storage.checksums = m_hashers[k]->finish();
    return std::move(m_results);
}

} // namespace

std::vector<WriteResult> ContainerWriter::write_data(const SavePlan& plan, SavePlanner& planner)
{
    auto& im = *m_impl;
    const detail::Comm c(im.comm);
    Bytes list = im.coordinator ? im.list : Bytes{};
    detail::bcast_bytes(c, list);
    std::string tmp;
    auto specs = decode_list(list, tmp);
    ContainerSave save(im.opt, im.comm, std::move(tmp), std::move(specs));
    return save.run(plan, planner);
}

namespace {

// A scalar's dataset, of its natural type (docs/FORMAT.md 7).
void write_scalar_dataset(hid_t file, const detail::MetadataColumns::Entry& em, const std::string& path, hid_t lcpl,
                          const std::string& what)
{
    if (em.value.size() != dtype_size(em.dtype))
        throw error::WriteError(what + ": the value of scalar '" + em.name + "' has " +
                                std::to_string(em.value.size()) + " bytes");
    const auto code = static_cast<int>(em.dtype);
    const Handle space(check_write(H5Screate(H5S_SCALAR), what));
    Handle dset(check_write(
        H5Dcreate2(file, path.c_str(), detail::h5::dataset_type(code, false), space, lcpl, H5P_DEFAULT, H5P_DEFAULT),
        "creating " + what));
    check_write_status(
        H5Dwrite(dset, detail::h5::dataset_type(code, true), H5S_ALL, H5S_ALL, H5P_DEFAULT, em.value.data()),
        "writing " + what);
}

// A string's dataset: a variable-length UTF-8 string.
void write_string_dataset(hid_t file, const detail::MetadataColumns::Entry& em, const std::string& path, hid_t lcpl,
                          const std::string& what)
{
    const Handle type(check_write(H5Tcopy(H5T_C_S1), what));
    check_write_status(H5Tset_size(type, H5T_VARIABLE), what);
    check_write_status(H5Tset_cset(type, H5T_CSET_UTF8), what);
    const Handle space(check_write(H5Screate(H5S_SCALAR), what));
    Handle dset(
        check_write(H5Dcreate2(file, path.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT), "creating " + what));
    const char* p = em.value.c_str();
    check_write_status(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), "writing " + what);
}

// The dataset of an array without elements: nobody wrote it.
void create_empty_dataset(hid_t file, const detail::MetadataColumns::Entry& em, const std::string& path, hid_t lcpl,
                          hid_t dcpl, const std::string& what)
{
    const auto code = static_cast<int>(em.kind == ItemKind::bytes ? DType::u8 : em.dtype);
    const Handle space = ct::shape_space(em.global_shape, what, true);
    Handle dset(check_write(H5Dcreate2(file, path.c_str(), detail::h5::dataset_type(code, false), space, lcpl, dcpl,
                                 H5P_DEFAULT),
                      "creating " + what));
}

// The commit's datasets in the temporary file `tmp`: the scalars' and the
// strings' (the values every rank agreed on), and the arrays' without
// elements.
void write_value_datasets(hid_t file, const detail::MetadataColumns& md, const std::string& tmp)
{
    const Handle lcpl = ct::link_creation(tmp, true);
    const Handle dcpl = dataset_creation(tmp);
    for (const auto& em : md.entries) {
        const std::string path = container_dataset_path(em.name);
        const std::string what = tmp + ": dataset '" + path + "'";
        if (em.kind == ItemKind::scalar)
            write_scalar_dataset(file, em, path, lcpl, what);
        else if (em.kind == ItemKind::string)
            write_string_dataset(file, em, path, lcpl, what);
        else if (em.chunks == 0 && H5Lexists(file, path.c_str(), H5P_DEFAULT) <= 0)
            create_empty_dataset(file, em, path, lcpl, dcpl, what);
    }
}

} // namespace

void ContainerWriter::finish(const Metadata& metadata, const std::vector<std::vector<WriteResult>>&)
{
    auto md = detail::to_columns(metadata);
    m_impl->commit(md);
}

detail::ColumnarWriter* ContainerWriter::columnar() noexcept { return m_impl.get(); }

const char* ContainerWriter::layout_name() const noexcept { return "container"; }

std::string ContainerWriter::lock_path() const { return m_impl->path; }

void ContainerWriter::Impl::commit(detail::MetadataColumns& md)
{
    auto& im = *this;
    md.layout = "container";
    md.checksum_block = im.opt.checksum_block;
    md.created = utc_now();
    detail::h5::ErrorSilencer quiet;
    {
        // The coordinator alone, serially, after the collective close: the
        // values every rank agreed on, and the metadata group.
        // Its space first (as write_data's): HDF5 adds the group at the end
        // of the file, and a close that fails for want of space leaves the
        // file open inside HDF5 (which then crashes the process at exit).
        // The close trims the file to what HDF5 used.
        fs::reserve(im.tmp, fs::file_size(im.tmp),
                    detail::metadata_group_bytes_bound(md) + 16 * static_cast<std::uint64_t>(im.opt.alignment));
        const Handle fapl = ct::file_access(MPI_COMM_NULL, im.opt.tuning, im.opt.alignment, im.tmp, true);
        // A write that fails (EIO) in this session must not leave the file
        // open inside HDF5: Sec2File closes it whatever happens.
        auto file = detail::h5::Sec2File::open(im.tmp, fapl);
        ct::inject(fault::h5_open, "reopening " + im.tmp, true);
        write_value_datasets(file, md, im.tmp);
        detail::write_metadata_group(file, md);
        file.close();
    }
    if (im.opt.fsync)
        fs::fsync_path(im.tmp);
    fs::rename(im.tmp, im.path); // the commit; replaces an older checkpoint atomically
    if (im.opt.fsync)
        fs::fsync_path(fs::parent(im.path));
}

void ContainerWriter::abort() noexcept
{
    if (!m_impl->tmp.empty())
        fs::remove_all_noexcept(m_impl->tmp);
}

} // namespace cairn
