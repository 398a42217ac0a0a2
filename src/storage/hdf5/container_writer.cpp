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
#include "cairn/container.hpp"

#include "cairn/errors.hpp"
#include "comm/protocol.hpp"
#include "core/checksum.hpp"
#include "core/codec.hpp"
#include "core/fault.hpp"
#include "core/strided.hpp"
#include "stage/stage.hpp"
#include "storage/columnar_storage.hpp"
#include "storage/distcp/mpiio.hpp"
#include "storage/fs.hpp"
#include "storage/hdf5/container_h5.hpp"
#include "storage/hdf5/h5.hpp"
#include "storage/hdf5/metadata_h5.hpp"
#include "storage/writeback.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>

#include <sys/statvfs.h>

namespace cairn {

namespace fs = detail::fs;
namespace ct = detail::container;
namespace fault = detail::fault;
using detail::Bytes;
using detail::h5::check;
using detail::h5::check_status;
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
    Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), what, true));
    check_status(H5Pset_layout(dcpl, H5D_CONTIGUOUS), what + ": contiguous layout", true);
    check_status(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), what + ": allocation time", true);
    check_status(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), what + ": fill time", true);
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
    ct::Split split;
    std::int64_t rounds = 0;
};

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

// Writes the small datasets (docs/FORMAT.md 7.4), collective over `comm`:
// each group of consecutive datasets (their storage mostly adjacent in the
// file) is written by one rank, its owner, which receives every rank's
// pieces of the group (MPI_Alltoallv) and writes each run of adjacent bytes
// with one call, instead of every rank writing its pieces one by one (7,500
// writes of 5-10 KiB per rank in the mixed benchmark; the kernel's cost is
// per write). Rounds bound the memory (ct::small_rounds, from the most bytes
// any rank sends for each group, one allreduce): a rank sends at most
// k_small_send_bytes of data per round (or one group) and receives at most
// one group; a round spans up to one group per rank. `pack(sd, hdr, data)`
// appends this rank's
// runs of it ((offset, length) pairs and bytes); `write(at, src, size)`
// writes. A rank that `failed` earlier sends nothing and writes nothing but
// takes part in every round. MPI failures throw; write failures throw after
// the rounds.
template <class Pack, class Write>
void write_small_datasets(MPI_Comm comm, const std::string& tmp, const std::vector<SmallDataset>& smalls, bool failed,
                          Pack&& pack, Write&& write)
{
    int size = 1;
    MPI_Comm_size(comm, &size);
    auto mpi = [&](int rc, const char* what) {
        if (rc != MPI_SUCCESS)
            throw error::WriteError(tmp + ": " + what + " of the small datasets failed");
    };
    // The rounds below are collective: every rank must see the same list
    // (it follows from the agreed schedule and the shared dataset list; a
    // difference would be a bug, reported the same way on every rank).
    std::int64_t n[2] = {static_cast<std::int64_t>(smalls.size()), -static_cast<std::int64_t>(smalls.size())};
    mpi(MPI_Allreduce(MPI_IN_PLACE, n, 2, MPI_INT64_T, MPI_MAX, comm), "MPI_Allreduce");
    if (n[0] != -n[1])
        throw error::WriteError(tmp + ": the ranks list between " + std::to_string(-n[1]) + " and " +
                                std::to_string(n[0]) + " small datasets (internal error)");
    if (smalls.empty())
        return;
    std::vector<std::size_t> group{0}; // group g: smalls[group[g], group[g + 1])
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < smalls.size(); ++i) {
        if (acc > 0 && acc + smalls[i].bytes > k_small_group_bytes) {
            group.push_back(i);
            acc = 0;
        }
        acc += smalls[i].bytes;
    }
    group.push_back(smalls.size());
    const std::size_t groups = group.size() - 1;
    std::exception_ptr write_error;
    std::vector<std::uint64_t> most(groups, 0); // the most bytes a rank sends per group
    if (!failed)
        for (std::size_t g = 0; g < groups; ++g)
            for (std::size_t i = group[g]; i < group[g + 1]; ++i)
                most[g] += smalls[i].mine;
    mpi(MPI_Allreduce(MPI_IN_PLACE, most.data(), static_cast<int>(groups), MPI_UINT64_T, MPI_MAX, comm),
        "MPI_Allreduce");
    const std::vector<std::size_t> rounds = ct::small_rounds(most, size, k_small_send_bytes);
    std::vector<std::uint64_t> hdr, rhdr;
    std::vector<char> data, rdata, run;
    std::vector<std::int64_t> counts(2 * static_cast<std::size_t>(size)), rcounts(counts.size());
    std::vector<int> hc(static_cast<std::size_t>(size)), hd(hc.size()), dc(hc.size()), dd(hc.size());
    std::vector<int> rhc(hc.size()), rhd(hc.size()), rdc(hc.size()), rdd(hc.size());
    for (std::size_t round = 0; round + 1 < rounds.size(); ++round) {
        const std::size_t first = rounds[round], last = rounds[round + 1];
        // Pack in the order of the owners (group g: rank g % size), which is
        // the order of the send displacements.
        std::vector<std::pair<std::size_t, std::size_t>> owned; // (owner, group)
        for (std::size_t g = first; g < last; ++g)
            owned.emplace_back(g % static_cast<std::size_t>(size), g);
        std::sort(owned.begin(), owned.end());
        hdr.clear();
        data.clear();
        std::fill(counts.begin(), counts.end(), 0);
        if (!failed) {
            try {
                for (const auto& [owner, g] : owned) {
                    const auto h0 = hdr.size();
                    const auto d0 = data.size();
                    for (std::size_t i = group[g]; i < group[g + 1]; ++i)
                        pack(smalls[i], hdr, data);
                    counts[2 * owner] = static_cast<std::int64_t>(hdr.size() - h0);
                    counts[2 * owner + 1] = static_cast<std::int64_t>(data.size() - d0);
                }
            } catch (...) {
                failed = true;
                if (!write_error)
                    write_error = std::current_exception();
                hdr.clear();
                data.clear();
                std::fill(counts.begin(), counts.end(), 0);
            }
        }
        mpi(MPI_Alltoall(counts.data(), 2, MPI_INT64_T, rcounts.data(), 2, MPI_INT64_T, comm), "MPI_Alltoall");
        int hoff = 0, doff = 0, rhoff = 0, rdoff = 0;
        for (int k = 0; k < size; ++k) {
            const auto u = static_cast<std::size_t>(k);
            hc[u] = static_cast<int>(counts[2 * u]);
            dc[u] = static_cast<int>(counts[2 * u + 1]);
            rhc[u] = static_cast<int>(rcounts[2 * u]);
            rdc[u] = static_cast<int>(rcounts[2 * u + 1]);
            hd[u] = hoff;
            dd[u] = doff;
            rhd[u] = rhoff;
            rdd[u] = rdoff;
            hoff += hc[u];
            doff += dc[u];
            rhoff += rhc[u];
            rdoff += rdc[u];
        }
        rhdr.resize(static_cast<std::size_t>(rhoff));
        rdata.resize(static_cast<std::size_t>(rdoff));
        mpi(MPI_Alltoallv(hdr.data(), hc.data(), hd.data(), MPI_UINT64_T, rhdr.data(), rhc.data(), rhd.data(),
                          MPI_UINT64_T, comm),
            "MPI_Alltoallv (offsets)");
        mpi(MPI_Alltoallv(data.data(), dc.data(), dd.data(), MPI_BYTE, rdata.data(), rdc.data(), rdd.data(), MPI_BYTE,
                          comm),
            "MPI_Alltoallv (bytes)");
        if (failed || rhdr.empty())
            continue;
        // This rank's group: every piece, by offset; adjacent ones in one write.
        struct Piece {
            std::uint64_t at, size;
            const char* src;
        };
        std::vector<Piece> pieces;
        pieces.reserve(rhdr.size() / 2);
        const char* src = rdata.data();
        for (std::size_t j = 0; j + 1 < rhdr.size(); j += 2) {
            pieces.push_back(Piece{rhdr[j], rhdr[j + 1], src});
            src += rhdr[j + 1];
        }
        std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.at < b.at; });
        try {
            std::size_t j = 0;
            while (j < pieces.size()) {
                std::size_t k = j + 1;
                std::uint64_t end = pieces[j].at + pieces[j].size;
                while (k < pieces.size() && pieces[k].at == end)
                    end += pieces[k++].size;
                if (k == j + 1) {
                    write(pieces[j].at, pieces[j].src, pieces[j].size);
                } else {
                    run.clear();
                    for (std::size_t m = j; m < k; ++m)
                        run.insert(run.end(), pieces[m].src, pieces[m].src + pieces[m].size);
                    write(pieces[j].at, run.data(), run.size());
                }
                j = k;
            }
        } catch (...) {
            failed = true;
            if (!write_error)
                write_error = std::current_exception();
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
                throw error::Mismatch("entry '" + it.fqn + "': the global plan writes it as " +
                                      item_kind_name(at->second.kind) + " " + std::string(dtype_name(at->second.dtype)) +
                                      " " + shape_str(at->second.shape) + " and as " + item_kind_name(s.kind) + " " +
                                      std::string(dtype_name(s.dtype)) + " " + shape_str(s.shape));
        }
    std::vector<DatasetSpec> list;
    list.reserve(specs.size());
    for (auto& [fqn, s] : specs)
        list.push_back(std::move(s));
    im.list = encode_list(im.tmp, list);
    return plans;
}

std::vector<WriteResult> ContainerWriter::write_data(const SavePlan& plan, SavePlanner& planner)
{
    auto& im = *m_impl;
    const detail::Comm c(im.comm);
    Bytes list = im.coordinator ? im.list : Bytes{};
    detail::bcast_bytes(c, list);
    std::string tmp;
    const auto specs = decode_list(list, tmp);

    // 1. Local: what this rank writes, and how many pieces (rounds) each
    //    dataset needs here. Agreed, with any local failure, in one allreduce
    //    (MAX) of [failed, rounds[D], highest writer[D], -lowest writer[D]].
    const std::size_t D = specs.size();
    std::vector<Task> tasks;
    std::vector<WriteResult> results;
    std::vector<std::int64_t> sched(1 + 3 * D, 0);
    const std::uint64_t writeback_limit = im.opt.fsync ? im.opt.writeback_bytes : 0; // early writeback: with fsync only
    std::int64_t max_piece_bytes = 0;
    std::exception_ptr failed;
    std::vector<char> scratch; // packing strided data for checksums
    // Dense chunks are hashed after the writes, overlapping the flush's
    // MPI_File_sync, which mostly waits for the device: their hashers (by
    // result) and byte ranges.
    std::vector<std::unique_ptr<detail::ChunkHasher>> hashers;
    detail::DeferredHashes deferred;
    try {
        std::map<std::string, std::size_t> index;
        for (std::size_t d = 0; d < D; ++d)
            index.emplace(specs[d].fqn, d);
        const std::int64_t capacity_bytes = static_cast<std::int64_t>(im.opt.staging_bytes);
        // The piece of early writeback (0: off), as detail::Writeback cuts it.
        const std::int64_t piece_bytes =
            detail::Writeback::available() ? static_cast<std::int64_t>(detail::Writeback::piece_of(writeback_limit)) : 0;
        for (const auto& it : plan.items) {
            if (it.kind != ItemKind::array && it.kind != ItemKind::bytes)
                continue; // scalars and strings: written by finish() from the metadata
            const auto found = index.find(it.fqn);
            if (found == index.end())
                throw error::WriteError(tmp + ": entry '" + it.fqn + "' is not in the coordinator's dataset list");
            const DatasetSpec& ds = specs[found->second];
            const auto es = static_cast<std::int64_t>(dtype_size(stored_dtype(ds)));
            if (it.box.ndim() != ds.shape.size() || !it.box.inside(ds.shape) ||
                it.nbytes != static_cast<std::uint64_t>(it.box.volume() * es))
                throw error::WriteError(tmp + ": dataset '" + ds.path + "': planned chunk " + it.box.str() + " of " +
                                        std::to_string(it.nbytes) + " bytes does not fit its global shape " +
                                        shape_str(ds.shape));
            const DataRef ref = planner.resolve_data(it);
            const bool on_host = ref.space == MemorySpace::host;
            if (ref.view.elem_size != static_cast<std::size_t>(es) || ref.view.shape != it.box.shape)
                throw error::WriteError(tmp + ": dataset '" + ds.path + "': the planner's data does not match chunk " +
                                        it.box.str());
            Task t;
            t.item = &it;
            t.dataset = found->second;
            t.view = ref.view;
            t.space = ref.space;
            if (it.box.volume() > 0) {
                if (on_host) // device memory: never handed to HDF5, staged in pieces
                    t.mem = ct::view_space(ref.view, tmp + ": dataset '" + ds.path + "'", true);
                if (t.mem.valid() && piece_bytes > 0 && detail::is_dense(ref.view) &&
                    static_cast<std::int64_t>(it.nbytes) > piece_bytes) {
                    // Dense and large, with early writeback: written from
                    // the caller's memory in pieces, each one's writeback
                    // started as soon as it is in the file.
                    t.mem = Handle();
                    t.split = ct::Split(it.box, std::max<std::int64_t>(piece_bytes / es, 1));
                    t.rounds = t.split.count();
                } else if (t.mem.valid()) {
                    t.rounds = 1;
                } else {
                    // Strided or on the device: through the staging buffer.
                    t.split = ct::Split(it.box, std::max<std::int64_t>(capacity_bytes / es, 1));
                    t.rounds = t.split.count();
                    max_piece_bytes = std::max(max_piece_bytes, t.split.max_elements() * es);
                }
            }
            sched[1 + found->second] += t.rounds;
            WriteResult res; // the chunk lives at its box in the dataset: offset 0
            res.fqn = it.fqn;
            res.chunk = it.chunk;
            res.storage.path = ds.path;
            res.storage.length = it.nbytes;
            hashers.emplace_back();
            if (im.opt.checksum_block && it.box.volume() > 0) {
                if (!on_host || detail::is_dense(ref.view)) {
                    hashers.back() = std::make_unique<detail::ChunkHasher>(
                        detail::checksum_span(it.box.shape, static_cast<std::size_t>(es), im.opt.checksum_block));
                    if (on_host) // hashed later, from the same memory
                        deferred.add(hashers.back().get(), ref.view.data, static_cast<std::size_t>(it.nbytes));
                    else // from the host copies, piece by piece, as they are staged
                        t.hash = hashers.back().get();
                } else {
                    res.storage.checksums = chunk_checksums(ref.view, it.box, static_cast<std::size_t>(es),
                                                            im.opt.checksum_block, im.opt.staging_bytes, scratch);
                }
            }
            results.push_back(std::move(res));
            tasks.push_back(std::move(t));
        }
    } catch (...) {
        failed = std::current_exception();
        sched[0] = 1;
    }
    for (std::size_t d = 0; d < D; ++d) {
        const bool mine = sched[1 + d] > 0;
        sched[1 + D + d] = mine ? c.rank : -1;
        sched[1 + 2 * D + d] = mine ? -c.rank : -std::int64_t(c.size);
    }
    if (MPI_Allreduce(MPI_IN_PLACE, sched.data(), static_cast<int>(sched.size()), MPI_INT64_T, MPI_MAX, im.comm) !=
        MPI_SUCCESS)
        throw error::WriteError(tmp + ": MPI_Allreduce of the write schedule failed");
    if (sched[0] != 0) {
        if (failed)
            std::rethrow_exception(failed);
        return {}; // another rank failed; the save's error agreement reports it
    }
    std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.dataset < b.dataset; });

    // 2. Collective: create the file and every dataset; write each dataset
    //    collectively in its agreed number of rounds, or independently by its
    //    writers alone (a single writer, or fewer bytes than independent_below).
    detail::h5::ErrorSilencer quiet;
    std::exception_ptr err; // this rank's first write error
    bool another_failed = false;
    auto note = [&] {
        if (!err)
            err = std::current_exception();
    };
    {
        const Handle fapl = ct::file_access(im.comm, im.opt.tuning, im.opt.alignment, tmp, true);
        Handle file(detail::h5::create_file(tmp, H5P_DEFAULT, fapl));
        ct::log_hints(file, im.opt.tuning, tmp);
        detail::Writeback writeback(tmp, writeback_limit);
        // Injected faults (ct::inject) follow the real, collective calls: the
        // rank notes the error and takes part in the rest with empty selections.
        try {
            ct::inject(fault::h5_create, "creating " + tmp, true);
        } catch (...) {
            note();
        }
        // The file's space is reserved before anything is written into it:
        // a collective write that fails on one rank for want of space leaves
        // parallel HDF5's ranks in different states, and the close's
        // metadata sync then waits forever. The coordinator reserves; when
        // it cannot, no rank writes (every rank learns it in one broadcast).
        // Where the file system cannot reserve, the coordinator checks its
        // free space before the flush instead (unreserved_room).
        int reserved = 1; // 1: reserved, 0: cannot be reserved here, -1: failed
        if (c.rank == 0) {
            try {
                reserved = fs::reserve(tmp, 0, reserve_bytes(specs, im.opt.alignment)) ? 1 : 0;
            } catch (...) {
                note();
                reserved = -1;
            }
        }
        if (MPI_Bcast(&reserved, 1, MPI_INT, 0, im.comm) != MPI_SUCCESS)
            throw error::WriteError(tmp + ": MPI_Bcast of the space reservation failed");
        const bool doomed = reserved < 0;
        const Handle dcpl = dataset_creation(tmp);
        const Handle lcpl = ct::link_creation(tmp, true);
        const Handle collective(check(H5Pcreate(H5P_DATASET_XFER), tmp + ": transfer properties", true));
        check_status(H5Pset_dxpl_mpio(collective, H5FD_MPIO_COLLECTIVE), tmp + ": collective transfers", true);
        const Handle independent(check(H5Pcreate(H5P_DATASET_XFER), tmp + ": transfer properties", true));
        check_status(H5Pset_dxpl_mpio(independent, H5FD_MPIO_INDEPENDENT), tmp + ": independent transfers", true);
        const Handle none = ct::dense_space(0, tmp, true);
        detail::HostBuffer buffer; // the staging buffer (page-locked with CUDA), on first use
        static const char dummy = 0; // H5Dwrite wants a buffer even for an empty selection
        // Small datasets written independently go straight to their address
        // through this rank's own MPI-IO handle on the file (opened on first
        // use, closed before the flush, whose MPI_File_sync makes them durable).
        std::optional<detail::MpiFile> direct;
        // The same on every rank (it does not depend on per-rank options):
        // the small datasets form one list, aggregated after the loop.
        const std::uint64_t direct_max = ct::direct_max_bytes;
        std::vector<SmallDataset> smalls;
        // Appends the runs of task `t` (a dataset of `shape` stored at `at`)
        // to `hdr` (file offset, length) and its bytes, in the chunk's
        // row-major order (the order of the runs), to `data`.
        auto pack_small = [&](const Task& t, const Shape& shape, std::uint64_t at, std::size_t es,
                              std::vector<std::uint64_t>& hdr, std::vector<char>& data) {
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
        };
        // Writes `size` bytes at `at` through this rank's own handle.
        auto write_direct = [&](std::uint64_t at, const char* src, std::uint64_t size) {
            if (!direct)
                direct.emplace(tmp, detail::MpiFile::Mode::write, im.opt.tuning.mpi_hints);
            direct->write_at(at, src, size);
            writeback.wrote(at, size);
        };

        // Selects piece `p` of task `t` in `fspace` (its box: `region`); the
        // memory side in `mem` / `buf`.
        auto prepare = [&](Task& t, std::int64_t p, hid_t fspace, const std::string& what, hid_t& mem, const void*& buf,
                           Handle& owned, Box& region) {
            if (t.mem.valid()) {
                region = t.item->box;
                ct::select_box(fspace, region, what, true);
                mem = t.mem;
                buf = t.view.data;
                return;
            }
            std::int64_t first = 0, n = 0;
            region = t.split.piece(p, first, n);
            ct::select_box(fspace, region, what, true);
            owned = ct::dense_space(static_cast<std::uint64_t>(n), what, true);
            mem = owned;
            if (detail::is_dense(t.view) && t.space == MemorySpace::host) { // a piece of a large dense chunk, in place
                buf = static_cast<const char*>(t.view.data) + first * static_cast<std::int64_t>(t.view.elem_size);
                return;
            }
            if (!buffer.data())
                buffer = detail::HostBuffer(static_cast<std::size_t>(max_piece_bytes));
            detail::stage_out(DataRef{t.view, t.space}, first, n, buffer.data());
            if (t.hash) // pieces come in order: p = 0, 1, ...
                t.hash->update(buffer.data(), static_cast<std::size_t>(n) * t.view.elem_size);
            buf = buffer.data();
        };
        // Starts the writeback of `region`, just written by this rank into a
        // dataset of `shape` stored at `at`.
        auto wrote = [&](const Box& region, const Shape& shape, haddr_t at, std::size_t es) {
            if (at == HADDR_UNDEF) // writeback off
                return;
            detail::for_each_run(shape, region, [&](std::uint64_t first, std::uint64_t count) {
                writeback.wrote(static_cast<std::uint64_t>(at) + first * es, count * es);
            });
        };

        std::size_t cursor = 0;
        for (std::size_t d = 0; d < (doomed ? 0 : D); ++d) {
            const DatasetSpec& ds = specs[d];
            const std::string what = tmp + ": dataset '" + ds.path + "'";
            const auto code = static_cast<int>(stored_dtype(ds));
            const Handle ftype = detail::h5::dataset_type(code, false);
            const Handle mtype = detail::h5::dataset_type(code, true);
            const Handle fspace = ct::shape_space(ds.shape, what, true);
            Handle dset(check(H5Dcreate2(file, ds.path.c_str(), ftype, fspace, lcpl, dcpl, H5P_DEFAULT),
                              "creating " + what, true));
            try {
                ct::inject(fault::h5_create, "creating " + what, true);
            } catch (...) {
                note();
            }
            std::size_t end = cursor;
            while (end < tasks.size() && tasks[end].dataset == d)
                ++end;
            const std::int64_t rounds = sched[1 + d];
            const auto es = dtype_size(stored_dtype(ds));
            const auto bytes = static_cast<std::uint64_t>(volume(ds.shape)) * es;
            const bool single = sched[1 + D + d] == -sched[1 + 2 * D + d];
            // Where its bytes start (contiguous, allocated at creation): for
            // early writeback of what this rank writes through HDF5.
            const haddr_t stored_at = writeback.active() ? H5Dget_offset(dset) : HADDR_UNDEF;
            if (rounds > 0 && (single || bytes < im.opt.tuning.independent_below)) {
                // Small, stored as in memory: straight to its address.
                haddr_t at = HADDR_UNDEF;
                if (bytes <= direct_max && H5Tequal(ftype, mtype) > 0)
                    at = stored_at != HADDR_UNDEF ? stored_at : H5Dget_offset(dset);
                if (at != HADDR_UNDEF) {
                    // Written after the loop, aggregated (write_small_datasets).
                    std::uint64_t mine = 0;
                    for (std::size_t ti = cursor; ti < end; ++ti)
                        if (tasks[ti].rounds > 0) // as `pack` below
                            mine += static_cast<std::uint64_t>(tasks[ti].item->box.volume()) * es;
                    smalls.push_back(SmallDataset{d, static_cast<std::uint64_t>(at), bytes, cursor, end, mine});
                    for (std::size_t ti = cursor; ti < end && !err; ++ti) {
                        try {
                            ct::inject(fault::h5_write, "writing " + what, true);
                        } catch (...) {
                            note();
                        }
                    }
                }
                for (std::size_t ti = cursor; ti < end && !err && at == HADDR_UNDEF; ++ti)
                    for (std::int64_t p = 0; p < tasks[ti].rounds && !err; ++p) {
                        try {
                            hid_t mem = none;
                            const void* buf = &dummy;
                            Handle owned;
                            Box region;
                            prepare(tasks[ti], p, fspace, what, mem, buf, owned, region);
                            check_status(H5Dwrite(dset, mtype, mem, fspace, independent, buf), "writing " + what, true);
                            ct::inject(fault::h5_write, "writing " + what, true);
                            wrote(region, ds.shape, stored_at, es);
                        } catch (...) {
                            note();
                        }
                    }
            } else {
                std::size_t ti = cursor;
                std::int64_t piece = 0;
                for (std::int64_t r = 0; r < rounds; ++r) {
                    while (ti < end && piece >= tasks[ti].rounds) {
                        ++ti;
                        piece = 0;
                    }
                    hid_t mem = none;
                    const void* buf = &dummy;
                    Handle owned;
                    Box region;
                    bool mine = !err && ti < end;
                    if (mine) {
                        try {
                            prepare(tasks[ti], piece, fspace, what, mem, buf, owned, region);
                        } catch (...) {
                            note();
                            mine = false;
                        }
                        ++piece;
                    }
                    try {
                        if (!mine) {
                            check_status(H5Sselect_none(fspace), what + ": empty selection", true);
                            mem = none;
                            buf = &dummy;
                        }
                        check_status(H5Dwrite(dset, mtype, mem, fspace, collective, buf), "writing " + what, true);
                        ct::inject(fault::h5_write, "writing " + what, true);
                        if (mine)
                            wrote(region, ds.shape, stored_at, es);
                    } catch (...) {
                        note();
                    }
                }
            }
            cursor = end;
            if (!dset.reset() && !err)
                err = std::make_exception_ptr(error::WriteError("closing " + what + ": " + detail::h5::last_error()));
        }
        try {
            const auto pack = [&](const SmallDataset& sd, std::vector<std::uint64_t>& hdr, std::vector<char>& data) {
                for (std::size_t ti = sd.first_task; ti < sd.end_task; ++ti)
                    if (tasks[ti].rounds > 0)
                        pack_small(tasks[ti], specs[sd.dataset].shape, sd.at,
                                   dtype_size(stored_dtype(specs[sd.dataset])), hdr, data);
            };
            write_small_datasets(im.comm, tmp, smalls, err != nullptr, pack, write_direct);
        } catch (...) {
            note();
        }
        writeback.start_rest();
        if (direct) {
            try {
                direct->close();
            } catch (...) {
                note();
            }
            direct.reset();
        }
        // Agreed: did any rank fail? Then no rank flushes, and the
        // coordinator first truncates the doomed file, so that the close's
        // metadata writes find space whatever filled the disk.
        if (reserved == 0 && c.rank == 0 && !err) {
            try {
                unreserved_room(tmp, specs.size());
            } catch (...) {
                note();
            }
        }
        if (err) // HDF5 and the MPI library may have lost a full disk's errno: named here, before the truncation
            try {
                std::rethrow_exception(err);
            } catch (const error::WriteError& e) {
                const std::string what = e.what();
                if (what.find(std::strerror(ENOSPC)) == std::string::npos)
                    if (const auto full = fs::no_space_note(tmp, 4096); !full.empty())
                        err = std::make_exception_ptr(error::WriteError(what + full));
            } catch (...) {
            }
        int any_failed = err ? 1 : 0;
        if (MPI_Allreduce(MPI_IN_PLACE, &any_failed, 1, MPI_INT, MPI_MAX, im.comm) != MPI_SUCCESS)
            throw error::WriteError(tmp + ": MPI_Allreduce of the write outcome failed");
        if (any_failed) {
            if (c.rank == 0)
                fs::truncate_noexcept(tmp, 0);
            if (MPI_Barrier(im.comm) != MPI_SUCCESS)
                throw error::WriteError(tmp + ": MPI_Barrier before closing a failed save failed");
        } else {
            try {
                if (im.opt.fsync) // collective; MPI_File_sync on every rank: durable before the commit
                    deferred.run_during([&] {
                        try {
                            check_status(H5Fflush(file, H5F_SCOPE_GLOBAL), "flushing " + tmp, true);
                            ct::inject(fault::h5_flush, "flushing " + tmp, true);
                        } catch (...) {
                            note();
                        }
                    });
                else
                    deferred.run();
            } catch (...) {
                note(); // the hashing's error
            }
        }
        if (!file.reset() && !err)
            err = std::make_exception_ptr(error::WriteError("closing " + tmp + ": " + detail::h5::last_error()));
        try {
            ct::inject(fault::h5_close, "closing " + tmp, true);
        } catch (...) {
            note();
        }
        another_failed = any_failed != 0;
    }
    if (err)
        std::rethrow_exception(err);
    if (another_failed)
        return {}; // the save's error agreement reports the other rank's error
    for (std::size_t k = 0; k < results.size(); ++k)
        if (hashers[k])
            results[k].storage.checksums = hashers[k]->finish();
    return results;
}

void ContainerWriter::finish(const Metadata& metadata, const std::vector<std::vector<WriteResult>>&)
{
    auto md = detail::to_columns(metadata);
    m_impl->commit(md);
}

detail::ColumnarWriter* ContainerWriter::columnar() noexcept { return m_impl.get(); }

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
        Handle file(check(H5Fopen(im.tmp.c_str(), H5F_ACC_RDWR, fapl), "reopening " + im.tmp, true));
        ct::inject(fault::h5_open, "reopening " + im.tmp, true);
        const Handle lcpl = ct::link_creation(im.tmp, true);
        const Handle dcpl = dataset_creation(im.tmp);
        for (const auto& em : md.entries) {
            const std::string& fqn = em.name;
            const std::string dataset = container_dataset_path(fqn);
            const std::string what = im.tmp + ": dataset '" + dataset + "'";
            if (em.kind == ItemKind::scalar) {
                if (em.value.size() != dtype_size(em.dtype))
                    throw error::WriteError(what + ": the value of scalar '" + fqn + "' has " +
                                            std::to_string(em.value.size()) + " bytes");
                const auto code = static_cast<int>(em.dtype);
                const Handle space(check(H5Screate(H5S_SCALAR), what, true));
                Handle dset(check(H5Dcreate2(file, dataset.c_str(), detail::h5::dataset_type(code, false), space, lcpl,
                                             H5P_DEFAULT, H5P_DEFAULT),
                                  "creating " + what, true));
                check_status(H5Dwrite(dset, detail::h5::dataset_type(code, true), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                      em.value.data()),
                             "writing " + what, true);
            } else if (em.kind == ItemKind::string) {
                const Handle type(check(H5Tcopy(H5T_C_S1), what, true));
                check_status(H5Tset_size(type, H5T_VARIABLE), what, true);
                check_status(H5Tset_cset(type, H5T_CSET_UTF8), what, true);
                const Handle space(check(H5Screate(H5S_SCALAR), what, true));
                Handle dset(check(H5Dcreate2(file, dataset.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT),
                                  "creating " + what, true));
                const char* p = em.value.c_str();
                check_status(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), "writing " + what, true);
            } else if (em.chunks == 0 && H5Lexists(file, dataset.c_str(), H5P_DEFAULT) <= 0) {
                // An array without elements: nobody wrote it.
                const auto code = static_cast<int>(em.kind == ItemKind::bytes ? DType::u8 : em.dtype);
                const Handle space = ct::shape_space(em.global_shape, what, true);
                Handle dset(check(H5Dcreate2(file, dataset.c_str(), detail::h5::dataset_type(code, false), space, lcpl,
                                             dcpl, H5P_DEFAULT),
                                  "creating " + what, true));
            }
        }
        detail::write_metadata_group(file, md);
        if (!file.reset())
            throw error::WriteError("closing " + im.tmp + ": " + detail::h5::last_error());
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
