// The container layout, reading side (docs/FORMAT.md, "Container layout").
//
// read_data follows the writer's discipline: local work that can fail is
// done first and agreed on together with the schedule (how many collective
// H5Dread calls each dataset gets: the largest number of pieces any rank
// reads from it), datasets are visited in metadata order, skipped by every
// rank when nobody reads them, and a rank that fails keeps taking part with
// empty selections until the file is closed.
//
// Opens: read_metadata (the coordinator) opens the file with HDF5's serial
// driver and keeps it open; set_up_storage_reader shares the check of the
// datasets out over the ranks, each through its serial handle (the
// coordinator's from the metadata, the others' opened there). On one rank
// read_data reads through that same handle: one open per load. On several,
// read_data closes it and opens the file collectively with the MPI-IO
// driver, which collective transfers need (two opens per rank): the check
// cannot use that open, since each rank opens only its share of the
// datasets, and HDF5's collective metadata reads need every rank to go
// through the same metadata. Each rank reads, per array, one hyperslab (the
// bounding box of its read items when they tile it) with collective
// transfers; ranks with nothing to read from a dataset take part with an
// empty selection. Strided destinations that are windows of row-major
// arrays are read into directly; others through the bounded buffer. Small
// datasets (at most 1 MiB, addresses found by the set-up check) are read
// straight through the HDF5 driver's own file handle and not opened
// (docs/FORMAT.md 7.5).
//
// Verification: each rank then reads, independently, the whole checksum
// blocks of every stored chunk its region touches (whole rows along
// dimension 0 of the chunk, one row more at either end when a row is longer
// than a block) through the bounded buffer, checks them, and copies its
// region out. Dense destinations are read into in place, in pieces of at most
// staging_bytes, each piece but a chunk's last verified on a helper thread
// while the next is read. verify_chunk reads through the serial handle.
#include "cairn/container.hpp"

#include "cairn/errors.hpp"
#include "core/checksum.hpp"
#include "core/fault.hpp"
#include "core/metadata_adapter.hpp"
#include "core/scalar_text.hpp"
#include "core/strided.hpp"
#include "stage/stage.hpp"
#include "format/metadata_h5.hpp"
#include "io/fs.hpp"
#include "io/h5.hpp"
#include "storage/columnar_storage.hpp"
#include "storage/container/container_h5.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <unordered_set>

#include <unistd.h>

namespace cairn {

namespace fs = detail::fs;
namespace ct = detail::container;
namespace fault = detail::fault;
using detail::h5::check_read;
using detail::h5::check_read_status;
using detail::h5::Handle;

namespace {

DType stored_dtype(const EntryMeta& em) { return em.kind == ItemKind::bytes ? DType::u8 : em.dtype; }

std::string dims_str(hid_t space)
{
    if (H5Sget_simple_extent_type(space) == H5S_SCALAR)
        return "[] (scalar)";
    const int nd = H5Sget_simple_extent_ndims(space);
    if (nd < 0 || nd > 32)
        return "?";
    std::vector<hsize_t> d(static_cast<std::size_t>(nd));
    H5Sget_simple_extent_dims(space, d.data(), nullptr);
    return shape_str(Shape(d.begin(), d.end()));
}

bool same_shape(hid_t space, const Shape& shape)
{
    const auto cls = H5Sget_simple_extent_type(space);
    if (cls == H5S_SCALAR)
        return shape.empty();
    if (cls != H5S_SIMPLE || shape.empty())
        return false;
    const int nd = H5Sget_simple_extent_ndims(space);
    if (nd != static_cast<int>(shape.size()))
        return false;
    std::vector<hsize_t> d(static_cast<std::size_t>(nd));
    H5Sget_simple_extent_dims(space, d.data(), nullptr);
    return std::equal(d.begin(), d.end(), shape.begin(),
                      [](hsize_t a, std::int64_t b) { return a == static_cast<hsize_t>(b); });
}

// The dataset that holds entry `em` (every chunk names it).
const std::string& dataset_of(const std::string& file, const std::string& fqn, const EntryMeta& em)
{
    const std::string& p = em.chunks.front().storage.path;
    for (const auto& c : em.chunks)
        if (c.storage.path != p)
            throw error::FormatError(file + ": " + item_kind_name(em.kind) + " '" + fqn +
                                     "': its chunks name datasets '" + p + "' and '" + c.storage.path +
                                     "' (a container holds each entry in one dataset)");
    if (p.size() < 2 || p[0] != '/')
        throw error::FormatError(file + ": " + item_kind_name(em.kind) + " '" + fqn + "': dataset path '" + p +
                                 "' is not an absolute HDF5 path");
    return p;
}

// The memory type to read a dataset of `type` holding `dtype` into.
Handle memory_type(hid_t file_type, DType dtype)
{
    if (dtype == DType::boolean && H5Tget_class(file_type) == H5T_INTEGER)
        return Handle(check_read(H5Tcopy(H5T_NATIVE_UINT8), "copying an HDF5 type")); // bool stored as plain bytes
    return detail::h5::dataset_type(static_cast<int>(dtype), true);
}

herr_t add_hard_link(hid_t, const char* name, const H5L_info_t* info, void* names)
{
    if (info->type == H5L_TYPE_HARD)
        static_cast<std::unordered_set<std::string>*>(names)->insert(name);
    return 0;
}

// The names of the root group's hard links, read in one pass, when `checks`
// lookups of links by name would cost more (a lookup in a large group costs
// several times one step of the pass); nothing when not, or when HDF5
// cannot list them (each lookup then says what is wrong).
std::optional<std::unordered_set<std::string>> root_hard_links(hid_t file, std::size_t checks)
{
    H5G_info_t gi;
    if (H5Gget_info(file, &gi) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return std::nullopt;
    }
    if (checks < 64 || checks * 4 < gi.nlinks)
        return std::nullopt;
    std::unordered_set<std::string> names;
    names.reserve(static_cast<std::size_t>(gi.nlinks));
    hsize_t idx = 0;
    if (H5Literate(file, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, add_hard_link, &names) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return std::nullopt;
    }
    return names;
}

// The memory types of check_datasets, by dtype code (but boolean, whose
// memory type follows the file type).
using MemoryTypes = std::map<int, Handle>;

// The file address of dataset `dset` (of file type `type`, `need` bytes,
// holding `dt`) when it can be read straight through MPI-IO: contiguous, at
// most ct::direct_max_bytes, stored as it is in memory.
std::optional<std::uint64_t> direct_address(hid_t dset, hid_t type, DType dt, hsize_t need, MemoryTypes& mtypes)
{
    if (need == 0 || need > ct::direct_max_bytes)
        return std::nullopt;
    Handle one;
    hid_t mtype = H5I_INVALID_HID;
    if (dt == DType::boolean) {
        one = memory_type(type, dt);
        mtype = one;
    } else {
        auto at = mtypes.find(static_cast<int>(dt));
        if (at == mtypes.end())
            at = mtypes.emplace(static_cast<int>(dt), memory_type(type, dt)).first;
        mtype = at->second;
    }
    const haddr_t at = H5Tequal(type, mtype) > 0 ? H5Dget_offset(dset) : HADDR_UNDEF;
    if (at == HADDR_UNDEF)
        return std::nullopt;
    return static_cast<std::uint64_t>(at);
}

// Checks that the dataset of entry `fqn` exists in `file` with the entry's
// global shape, a type that holds its dtype and all its bytes stored
// (`hard`: the root group's hard links, when listed); returns its direct
// address (direct_address).
std::optional<std::uint64_t> check_dataset(hid_t file, const std::string& path, const std::string& fqn,
                                           const EntryMeta& em,
                                           const std::optional<std::unordered_set<std::string>>& hard,
                                           MemoryTypes& mtypes)
{
    const std::string& ds = dataset_of(path, fqn, em);
    const std::string what = path + ": dataset '" + ds + "' of " + item_kind_name(em.kind) + " '" + fqn + "'";
    // A hard link in this file (never a soft or external link) to a
    // dataset whose bytes are in this file too (no external storage, not
    // virtual): what read_data and verify_chunk open, and whose address
    // the direct reads use, is then this file's own dataset.
    const bool listed = hard && ds.find('/', 1) == std::string::npos && hard->count(ds.substr(1)) > 0;
    if (!listed && !detail::h5::hard_links_only(file, ds, what))
        throw error::FormatError(what + " is missing");
    const Handle dset(H5Dopen2(file, ds.c_str(), H5P_DEFAULT));
    if (!dset.valid()) {
        H5Eclear2(H5E_DEFAULT);
        throw error::FormatError(what + " is not a dataset");
    }
    detail::h5::check_dataset_storage(dset, what);
    const Handle space(check_read(H5Dget_space(dset), what));
    if (!same_shape(space, em.global_shape))
        throw error::FormatError(what + " has shape " + dims_str(space) + ", the metadata says " +
                                 shape_str(em.global_shape));
    const Handle type(check_read(H5Dget_type(dset), what));
    const auto dt = stored_dtype(em);
    if (!detail::h5::dataset_type_matches(type, static_cast<int>(dt))) {
        const Handle want = detail::h5::dataset_type(static_cast<int>(dt), false);
        throw error::FormatError(what + " has type " + detail::h5::type_description(type) + ", the metadata says " +
                                 std::string(dtype_name(dt)) + " (" + detail::h5::type_description(want) + ")");
    }
    // Every element was written: the dataset stores all its bytes.
    const auto need = static_cast<hsize_t>(volume(em.global_shape)) * H5Tget_size(type);
    const hsize_t stored = H5Dget_storage_size(dset);
    if (stored < need)
        throw error::FormatError(what + " stores " + std::to_string(stored) + " bytes, its shape needs " +
                                 std::to_string(need));
    return direct_address(dset, type, dt, need, mtypes);
}

bool stores_data(const EntryMeta& em)
{
    return (em.kind == ItemKind::array || em.kind == ItemKind::bytes) && !em.chunks.empty();
}

// Checks the datasets the metadata names (every `parts`-th one from the
// `part`-th, in metadata order) with check_dataset. Records in `direct`
// the addresses of those that can be read straight through MPI-IO.
void check_dataset_part(hid_t file, const Metadata& md, const std::string& path, int part, int parts,
                        std::map<std::string, std::uint64_t>& direct)
{
    const auto n = static_cast<std::size_t>(
        std::count_if(md.entries.begin(), md.entries.end(), [](const auto& kv) { return stores_data(kv.second); }));
    const auto hard =
        root_hard_links(file, (n + static_cast<std::size_t>(parts) - 1) / static_cast<std::size_t>(parts));
    MemoryTypes mtypes;
    std::size_t k = 0;
    for (const auto& [fqn, em] : md.entries) {
        if (!stores_data(em) || static_cast<int>(k++ % static_cast<std::size_t>(parts)) != part)
            continue;
        if (const auto at = check_dataset(file, path, fqn, em, hard, mtypes))
            direct[fqn] = *at;
    }
}

// What this rank reads from one dataset.
struct Task {
    const ReadItem* item = nullptr;
    std::size_t dataset = 0;
    StridedView view;
    MemorySpace space = MemorySpace::host; // of the destination (bytes entries: host)
    Handle mem; // valid: read directly into the destination
    ct::Split split;
    std::int64_t rounds = 0;
    std::size_t blob = 0; // bytes entries: index into the blobs
};

// read_verified reads the checksum blocks of stored chunk `ch` that region
// `O` touches (all of it without `O`), each once, checks them, and copies
// region `O` (inside `ch.box` and `I`) into `dst`, the destination of region
// `I`. Blocks are whole rows along dimension 0 when a row fits in one: the
// rows of `O`, rounded out to blocks; else pieces of rows: the blocks that
// the runs of `O` along the last dimension touch, read as boxes of
// consecutive elements. Independent transfers through `scratch`, in pieces
// of at most `staging` bytes. Returns the bytes read.
// `fetch(P, n, buf)` reads the n elements of box P (row-major) into buf.
using Fetch = std::function<void(const Box&, std::int64_t, char*)>;

// The host memory a load reads through when it cannot read in place: what
// it reads, and parts of it packed for a device destination. HostBuffers,
// page-locked once the process uses device memory, so that the copies into
// the device are DMA transfers straight from them (from pageable memory
// CUDA copies through a bounce buffer of its own, synchronously); kept
// across datasets and grown with detail::grow.
struct Scratch {
    detail::HostBuffer read, packed;
};

// Elements [e0, e1) of box C in row-major order as boxes of consecutive
// elements, in order: at most two per dimension.
std::vector<Box> linear_boxes(const Box& C, std::uint64_t e0, std::uint64_t e1)
{
    const std::size_t nd = C.ndim();
    std::vector<Box> out;
    if (nd == 0) {
        if (e1 > e0)
            out.push_back(C);
        return out;
    }
    std::vector<std::uint64_t> stride(nd, 1); // elements per index of each dimension
    for (std::size_t d = nd - 1; d-- > 0;)
        stride[d] = stride[d + 1] * static_cast<std::uint64_t>(C.shape[d + 1]);
    while (e0 < e1) {
        // The outermost dimension whose whole indices start at e0 and fit.
        std::size_t j = 0;
        while (j + 1 < nd && (e0 % stride[j] != 0 || stride[j] > e1 - e0))
            ++j;
        Box b = C;
        for (std::size_t d = 0; d < nd; ++d) {
            const auto at = static_cast<std::int64_t>(
                e0 / stride[d] % (d == 0 ? ~std::uint64_t(0) : static_cast<std::uint64_t>(C.shape[d])));
            if (d < j) {
                b.offsets[d] = C.offsets[d] + at;
                b.shape[d] = 1;
            } else if (d == j) {
                const auto left = static_cast<std::uint64_t>(C.shape[d] - at); // indices to the end of this one
                const auto n = std::min(left, (e1 - e0) / stride[d]);
                b.offsets[d] = C.offsets[d] + at;
                b.shape[d] = static_cast<std::int64_t>(n);
            }
        }
        out.push_back(b);
        e0 += static_cast<std::uint64_t>(b.shape[j]) * stride[j];
    }
    return out;
}

// Where read_verified copies what it reads: region `O` (inside the chunk
// and `I`) of `dst`, the destination of region `I`, in `space`; nothing
// when `dst` is null (verify_chunk).
struct Destination {
    const Box* O = nullptr;
    const Box* I = nullptr;
    const StridedView* dst = nullptr;
    MemorySpace space = MemorySpace::host;
};

// The elements of chunk box `C` holding its bytes [A, B), as boxes of
// consecutive elements, each cut in pieces of at most `staging` bytes;
// `pieces`: their number in all.
std::vector<ct::Split> block_pieces(const Box& C, std::uint64_t A, std::uint64_t B, std::size_t es,
                                    std::size_t staging, std::int64_t& pieces)
{
    std::vector<ct::Split> splits;
    pieces = 0;
    for (const Box& R : linear_boxes(C, A / es, (B + es - 1) / es)) {
        splits.emplace_back(R, std::max<std::int64_t>(static_cast<std::int64_t>(staging / es), 1));
        pieces += splits.back().count();
    }
    return splits;
}

// Where piece `P` (of `split`) is read to: in place when it lies wholly in
// the region and its destination there is dense host memory (`in_place`),
// else into the buffer (sized on first use).
char* piece_target(const Box& P, const std::optional<Box>& X, const Destination& to, const ct::Split& split,
                   std::size_t es, std::size_t staging, Scratch& scratch, bool& in_place)
{
    in_place = false;
    if (X && X->volume() == P.volume() && to.space == MemorySpace::host) {
        const StridedView d = detail::subview(*to.dst, *to.I, P);
        if (detail::is_dense(d)) {
            in_place = true;
            return static_cast<char*>(d.data);
        }
    }
    return detail::grow(scratch.read, static_cast<std::size_t>(split.max_elements()) * es, staging);
}

// Copies the part `X` of piece `P`, read into the buffer at `at`, to its
// destination.
void copy_out(const Box& P, const Box& X, char* at, const Destination& to, std::size_t es, std::size_t staging,
              Scratch& scratch)
{
    const StridedView src{at, es, P.shape, row_major_strides(P.shape)};
    const StridedView dst = detail::subview(*to.dst, *to.I, X);
    if (to.space == MemorySpace::host) {
        copy_strided(dst, detail::subview(src, P, X));
    } else if (X.volume() == P.volume()) { // the whole piece, dense in the buffer
        detail::stage_in(DataRef{dst, to.space}, 0, X.volume(), at);
    } else { // packed first: staging copies from dense host memory
        char* part = detail::grow(scratch.packed, static_cast<std::size_t>(X.volume()) * es, staging);
        detail::pack_range(detail::subview(src, P, X), 0, X.volume(), part);
        detail::stage_in(DataRef{dst, to.space}, 0, X.volume(), part);
    }
}

// Compares the checksums `sums` of the blocks from byte `A` of chunk `ch`
// (blocks of `span` bytes) with the stored ones; IntegrityError naming the
// entry, the dataset, the chunk and the block.
void check_block_sums(const std::vector<std::uint64_t>& sums, std::uint64_t A, std::uint64_t span,
                      const ChunkMeta& ch, const std::string& what, const std::string& fqn)
{
    const auto& stored = ch.storage.checksums;
    const std::uint64_t b0 = A / span;
    for (std::uint64_t k = 0; k < sums.size(); ++k) {
        const auto blk = b0 + k;
        if (blk >= stored.size() || stored[blk] != sums[k]) {
            throw error::IntegrityError("checksum mismatch in '" + fqn + "': " + what + ", chunk " + ch.box.str() +
                                        ", bytes [" + std::to_string(blk * span) + ", " +
                                        std::to_string(std::min(ch.storage.length, (blk + 1) * span)) +
                                        ") of the chunk (block " + std::to_string(blk) +
                                        "): " + detail::mismatch_text(stored, blk, sums[k]));
        }
    }
}

// Reads bytes [A, B) of stored chunk `ch` (whole checksum blocks of `span`
// bytes), checks their blocks, and copies what of them lies in the region
// into its destination `to` (read_verified). Returns the bytes read.
std::uint64_t read_blocks(const Fetch& fetch, std::uint64_t A, std::uint64_t B, std::uint64_t span,
                          const ChunkMeta& ch, std::size_t es, const Destination& to, std::size_t staging,
                          Scratch& scratch, const std::string& what, const std::string& fqn)
{
    std::int64_t pieces = 0;
    const std::vector<ct::Split> splits = block_pieces(ch.box, A, B, es, staging, pieces);
    detail::ChunkHasher hasher(span);
    std::future<void> hashing; // of the previous piece, read in place
    std::uint64_t pos = A / es * es, bytes = 0;
    std::size_t box = 0;
    std::int64_t in_box = 0;
    for (std::int64_t p = 0; p < pieces; ++p, ++in_box) {
        while (in_box >= splits[box].count()) {
            ++box;
            in_box = 0;
        }
        std::int64_t first = 0, n = 0;
        const Box P = splits[box].piece(in_box, first, n);
        const auto X = !to.dst ? std::nullopt : ch.box.ndim() ? intersect(*to.O, P) : std::optional<Box>(*to.O);
        bool in_place = false;
        char* at = piece_target(P, X, to, splits[box], es, staging, scratch, in_place);
        fetch(P, n, at);
        const std::uint64_t lo = pos, hi = pos + static_cast<std::uint64_t>(n) * es;
        const std::uint64_t a = std::max(lo, A), b = std::min(hi, B);
        // The hasher takes the pieces in order. A piece read in place and
        // followed by another is hashed on a helper thread while the next
        // one is read; one in the buffer, or the last, here.
        if (hashing.valid())
            hashing.get();
        if (b > a) {
            const char* from = at + (a - lo);
            const auto count = static_cast<std::size_t>(b - a);
            if (in_place && p + 1 < pieces)
                hashing = std::async(std::launch::async, [&hasher, from, count] { hasher.update(from, count); });
            else
                hasher.update(from, count);
        }
        pos = hi;
        bytes += hi - lo;
        if (X && !in_place)
            copy_out(P, *X, at, to, es, staging, scratch);
    }
    if (hashing.valid())
        hashing.get();
    check_block_sums(hasher.finish(), A, span, ch, what, fqn);
    return bytes;
}

std::uint64_t read_verified(const Fetch& fetch, std::uint64_t block, const ChunkMeta& ch, std::size_t es, const Box* O,
                            const Box* I, const StridedView* dst, MemorySpace space, std::size_t staging,
                            Scratch& scratch, const std::string& what, const std::string& fqn)
{
    const Box& C = ch.box;
    const std::size_t nd = C.ndim();
    const std::uint64_t len = ch.storage.length;
    const std::uint64_t span = detail::checksum_span(C.shape, es, block);
    const std::uint64_t plane = nd ? static_cast<std::uint64_t>(volume(Shape(C.shape.begin() + 1, C.shape.end()))) * es
                                   : len;
    if (span == 0 || plane == 0 || len == 0)
        return 0;
    if (O && O->volume() == 0)
        return 0;
    // The block-aligned byte ranges of the chunk to read, ascending and
    // disjoint: the blocks the region's runs touch, each once. Blocks of
    // whole rows: the rows of the region, rounded out to blocks; blocks
    // shorter than a row: those the region's runs along the last dimension
    // touch.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    if (O && nd > 1 && plane > span) {
        const Shape cs = row_major_strides(C.shape);
        const auto run = static_cast<std::uint64_t>(O->shape[nd - 1]) * es;
        Shape idx(nd - 1, 0);
        for (std::int64_t r = 0, runs = O->volume() / O->shape[nd - 1]; r < runs; ++r) {
            std::int64_t e = 0;
            for (std::size_t d = 0; d < nd; ++d)
                e += (O->offsets[d] - C.offsets[d] + (d + 1 < nd ? idx[d] : 0)) * cs[d];
            const auto at = static_cast<std::uint64_t>(e) * es;
            const std::uint64_t a = at / span * span, b = std::min(len, (at + run + span - 1) / span * span);
            if (!ranges.empty() && a <= ranges.back().second)
                ranges.back().second = std::max(ranges.back().second, b);
            else
                ranges.emplace_back(a, b);
            for (std::size_t d = nd - 1; d-- > 0;) {
                if (++idx[d] < O->shape[d])
                    break;
                idx[d] = 0;
            }
        }
    } else {
        std::uint64_t r0 = 0, r1 = nd ? static_cast<std::uint64_t>(C.shape[0]) : 1;
        if (O && nd) {
            r0 = static_cast<std::uint64_t>(O->offsets[0] - C.offsets[0]);
            r1 = r0 + static_cast<std::uint64_t>(O->shape[0]);
        }
        ranges.emplace_back(r0 * plane / span * span, std::min(len, (r1 * plane + span - 1) / span * span));
    }
    std::uint64_t bytes = 0;
    const Destination to{O, I, dst, space};
    for (const auto& [A, B] : ranges)
        bytes += read_blocks(fetch, A, B, span, ch, es, to, staging, scratch, what, fqn);
    return bytes;
}

// Reads box P of a dataset through HDF5 (read_verified's fetch).
Fetch hdf5_fetch(hid_t dset, hid_t mtype, hid_t fspace, hid_t xfer, const std::string& what)
{
    return [=](const Box& P, std::int64_t n, char* buf) {
        ct::select_box(fspace, P, what, false);
        const Handle mem = ct::dense_space(static_cast<std::uint64_t>(n), what, false);
        check_read_status(H5Dread(dset, mtype, mem, fspace, xfer, buf), "reading " + what);
        ct::inject(fault::h5_read, "reading " + what, false);
    };
}

// Reads of the open container through its driver's own handle (the MPI-IO
// driver's MPI_File, the serial driver's descriptor): the direct reads of
// small datasets, without opening the file again. Independent reads (the
// MPI-IO driver resets the file view after its collective transfers).
class RawReads {
public:
    RawReads(hid_t file, bool serial, const std::string& path) : m_path(path)
    {
        void* h = nullptr;
        check_read_status(H5Fget_vfd_handle(file, H5P_DEFAULT, &h), path + ": the HDF5 driver's file handle");
        if (!h)
            throw error::ReadError(path + ": HDF5's driver has no file handle");
        if (serial)
            m_fd = *static_cast<int*>(h);
        else
            m_fh = *static_cast<MPI_File*>(h);
    }
    /// Reads exactly `size` bytes at `offset`; error::ReadError (also on a short read).
    void read_at(std::uint64_t offset, char* p, std::uint64_t size) const
    {
        const std::uint64_t start = offset, want = size;
        while (size > 0) {
            const std::uint64_t n = std::min<std::uint64_t>(size, std::uint64_t(1) << 30);
            const std::int64_t done = m_fd >= 0 ? pread_some(offset, p, n) : mpi_read_some(offset, p, n);
            if (done <= 0)
                throw error::ReadError(m_path + ": short read: " + std::to_string(want) + " bytes at offset " +
                                       std::to_string(start) + ", the file ends after " +
                                       std::to_string(offset - start) + " of them (truncated file?)");
            p += done;
            offset += static_cast<std::uint64_t>(done);
            size -= static_cast<std::uint64_t>(done);
        }
    }

private:
    std::int64_t pread_some(std::uint64_t offset, char* p, std::uint64_t n) const
    {
        for (;;) {
            const ssize_t r = ::pread(m_fd, p, static_cast<std::size_t>(n), static_cast<off_t>(offset));
            if (r >= 0)
                return r;
            if (errno != EINTR)
                fail(n, offset, std::strerror(errno));
        }
    }
    std::int64_t mpi_read_some(std::uint64_t offset, char* p, std::uint64_t n) const
    {
        MPI_Status st;
        const int rc = MPI_File_read_at(m_fh, static_cast<MPI_Offset>(offset), p, static_cast<int>(n), MPI_BYTE, &st);
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, text, &len);
            fail(n, offset, std::string(text, static_cast<std::size_t>(len)));
        }
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        return got;
    }
    [[noreturn]] void fail(std::uint64_t n, std::uint64_t offset, const std::string& why) const
    {
        throw error::ReadError(m_path + ": read of " + std::to_string(n) + " bytes at offset " +
                               std::to_string(offset) + ": " + why);
    }

    std::string m_path;
    int m_fd = -1;
    MPI_File m_fh = MPI_FILE_NULL;
};

// Reads box P of a dataset of `shape` stored contiguously at `at` with
// elements of `es` bytes straight from `file`, run by run.
void read_box_direct(const RawReads& file, std::uint64_t at, const Shape& shape, std::size_t es, const Box& P,
                     char* buf, const std::string& what)
{
    detail::for_each_run(shape, P, [&](std::uint64_t first, std::uint64_t count) {
        file.read_at(at + first * es, buf, count * es);
        buf += count * es;
    });
    ct::inject(fault::h5_read, "reading " + what, false);
}

} // namespace

struct ContainerReader::Impl final : detail::ColumnarReader {
    detail::MetadataColumns read_metadata_columns();
    hid_t serial_file();
    std::unique_ptr<detail::ChunkRowSource> read_metadata_rows() override;
    void verify_value(const std::string& fqn, const EntryMeta& entry) override;
    std::size_t staging = 0;
    ContainerTuning tuning;
    bool verify = true;
    std::string path;
    const Metadata* md = nullptr;
    MPI_Comm comm = MPI_COMM_NULL;
    std::uint64_t bytes_read = 0;
    // The file opened with HDF5's serial driver: read_metadata's on the
    // coordinator, kept for check_datasets, verify_chunk and verify_value,
    // and handed to read_data on one rank (serial_file()).
    Handle serial;
    Scratch scratch; // verify_chunk's
    // The addresses of the datasets read straight through MPI-IO that this
    // rank's part of check_datasets found, by entry; read_data shares them.
    std::map<std::string, std::uint64_t> direct;
};

namespace {
// Opens `path` read-only with HDF5's serial driver; FormatError when HDF5
// cannot: "not an HDF5 file" (`say_not_hdf5`, and H5Fis_hdf5 says so) or a
// truncated or damaged file.
Handle open_serial(const std::string& path, const ContainerTuning& tuning, bool say_not_hdf5 = false)
{
    fs::check_regular_file(path, fs::Follow::yes); // a FIFO would block HDF5's open
    const Handle fapl = ct::file_access(MPI_COMM_NULL, tuning, 0, path, false);
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl));
    if (!file.valid()) {
        const auto why = detail::h5::last_error();
        H5Eclear2(H5E_DEFAULT);
        if (say_not_hdf5 && H5Fis_hdf5(path.c_str()) <= 0)
            throw error::FormatError(path + ": not an HDF5 file");
        throw error::FormatError(path + ": HDF5 cannot open it (" + (why.empty() ? "unknown error" : why) +
                                 "): a truncated or damaged file?");
    }
    ct::inject(fault::h5_open, "opening " + path, false);
    return file;
}
} // namespace

ContainerReader::ContainerReader(std::size_t staging_bytes, ContainerTuning tuning, bool verify)
    : m_impl(std::make_unique<Impl>())
{
    m_impl->verify = verify;
    if (staging_bytes < 4096)
        throw error::WrongAPIUsage("staging_bytes must be at least 4096, not " + std::to_string(staging_bytes));
    ct::check_tuning(tuning);
    m_impl->staging = staging_bytes;
    m_impl->tuning = std::move(tuning);
}

ContainerReader::~ContainerReader() = default;

void ContainerReader::reset(const std::string& checkpoint_id)
{
    if (checkpoint_id.empty())
        throw error::WrongAPIUsage("empty checkpoint id");
    m_impl->path = fs::strip(checkpoint_id);
    m_impl->md = nullptr;
    m_impl->bytes_read = 0;
    m_impl->direct.clear();
    detail::h5::ErrorSilencer quiet;
    m_impl->serial = Handle();
    m_impl->scratch = Scratch();
}

Metadata ContainerReader::read_metadata() { return detail::to_metadata(m_impl->read_metadata_columns()); }

detail::ColumnarReader* ContainerReader::columnar() noexcept { return m_impl.get(); }

namespace {

// Reads the metadata group of the container `path` with `read`, checking
// that the file is a container checkpoint. The file stays open in `file`
// (serial driver) for the rest of the load.
template <class Read>
auto read_container_metadata(const std::string& path, const ContainerTuning& tuning, Handle& file, Read&& read)
{
    if (!fs::exists(path))
        throw error::NotFound("no checkpoint at " + path);
    if (fs::is_directory(path))
        throw error::FormatError(path + " is a directory, not a container checkpoint (one HDF5 file)");
    detail::h5::ErrorSilencer quiet;
    file = open_serial(path, tuning, true);
    return read(static_cast<hid_t>(file));
}

void expect_container(const std::string& layout, const std::string& path)
{
    if (layout != "container")
        throw error::FormatError(path + ": layout '" + layout + "', expected 'container'");
}

} // namespace

hid_t ContainerReader::Impl::serial_file()
{
    if (!serial.valid())
        serial = open_serial(path, tuning);
    return serial;
}

detail::MetadataColumns ContainerReader::Impl::read_metadata_columns()
{
    auto columns = read_container_metadata(path, tuning, serial,
                                      [&](hid_t file) { return detail::read_metadata_columns_group(file, path); });
    expect_container(columns.layout, path);
    return columns;
}

std::unique_ptr<detail::ChunkRowSource> ContainerReader::Impl::read_metadata_rows()
{
    auto rows = read_container_metadata(path, tuning, serial,
                                      [&](hid_t file) { return detail::read_metadata_rows_group(file, path); });
    expect_container(rows->head().layout, path);
    return rows;
}

void ContainerReader::check_datasets(const Metadata& metadata, int part, int parts)
{
    auto& im = *m_impl;
    if (im.path.empty())
        throw error::WrongAPIUsage("ContainerReader::check_datasets before reset");
    if (parts < 1 || part < 0 || part >= parts)
        throw error::WrongAPIUsage("ContainerReader::check_datasets: part " + std::to_string(part) + " of " +
                                   std::to_string(parts));
    detail::h5::ErrorSilencer quiet;
    im.direct.clear();
    check_dataset_part(im.serial_file(), metadata, im.path, part, parts, im.direct);
}

void ContainerReader::set_up_storage_reader(const Metadata& metadata, bool, MPI_Comm comm)
{
    m_impl->md = &metadata;
    m_impl->comm = comm;
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    check_datasets(metadata, rank, size);
}

LoadPlan ContainerReader::prepare_local_plan(LoadPlan plan)
{
    // The stored chunks only record how the saving ranks were decomposed: a
    // container holds each array whole. The read items of one array that
    // tile a box (those of the default planner tile the rank's box) become
    // one read of that box.
    // (Per box of the rank: the boxes of one array may touch or overlap.)
    std::map<std::pair<std::string, std::uint32_t>, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < plan.items.size(); ++i)
        if (plan.items[i].kind == ItemKind::array)
            groups[{plan.items[i].fqn, plan.items[i].shard}].push_back(i);
    std::vector<bool> drop(plan.items.size(), false);
    for (const auto& [key, idx] : groups) {
        if (idx.size() < 2)
            continue;
        Box bound = plan.items[idx.front()].box;
        std::int64_t sum = 0;
        bool ok = true;
        for (auto i : idx) {
            const Box& b = plan.items[i].box;
            if (b.ndim() != bound.ndim() || b.empty()) {
                ok = false;
                break;
            }
            sum += b.volume();
            for (std::size_t d = 0; d < b.ndim(); ++d) {
                const auto lo = std::min(bound.offsets[d], b.offsets[d]);
                const auto hi = std::max(bound.offsets[d] + bound.shape[d], b.offsets[d] + b.shape[d]);
                bound.offsets[d] = lo;
                bound.shape[d] = hi - lo;
            }
        }
        // Items come from disjoint chunks, so equal volumes mean a tiling.
        if (!ok || bound.volume() != sum)
            continue;
        plan.items[idx.front()].box = bound;
        for (std::size_t k = 1; k < idx.size(); ++k)
            drop[idx[k]] = true;
    }
    std::vector<ReadItem> kept;
    kept.reserve(plan.items.size());
    for (std::size_t i = 0; i < plan.items.size(); ++i)
        if (!drop[i])
            kept.push_back(std::move(plan.items[i]));
    plan.items = std::move(kept);
    return plan;
}

namespace {

// ---- read_data ----------------------------------------------------------

// The read schedule every rank agrees on before the collective open, in one
// allreduce (MAX) of [failed, rounds[D], highest reader[D], -lowest
// reader[D], 1 + address[D]]: whether a rank failed, how many collective
// H5Dread calls (rounds) each dataset needs, whether one rank alone reads
// it, and the addresses of the datasets read straight through MPI-IO (0:
// through HDF5; each rank knows those of its part of check_datasets).
class ReadSchedule {
public:
    explicit ReadSchedule(std::size_t datasets) : m_d(datasets), m_v(1 + 4 * datasets, 0) {}
    void set_address(std::size_t d, std::uint64_t at) { m_v[1 + 3 * m_d + d] = static_cast<std::int64_t>(at) + 1; }
    void add_rounds(std::size_t d, std::int64_t n) { m_v[1 + d] += n; }
    /// Collective: adds this rank's readers (and `failed`) and agrees.
    void agree(MPI_Comm comm, bool failed, const std::string& path)
    {
        if (failed)
            m_v[0] = 1;
        int rank = 0, size = 1;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &size);
        for (std::size_t d = 0; d < m_d; ++d) {
            const bool mine = m_v[1 + d] > 0;
            m_v[1 + m_d + d] = mine ? rank : -1;
            m_v[1 + 2 * m_d + d] = mine ? -rank : -std::int64_t(size);
        }
        if (MPI_Allreduce(MPI_IN_PLACE, m_v.data(), static_cast<int>(m_v.size()), MPI_INT64_T, MPI_MAX, comm) !=
            MPI_SUCCESS)
            throw error::ReadError(path + ": MPI_Allreduce of the read schedule failed");
    }
    bool failed() const { return m_v[0] != 0; }
    std::int64_t rounds(std::size_t d) const { return m_v[1 + d]; }
    bool single_reader(std::size_t d) const { return m_v[1 + m_d + d] == -m_v[1 + 2 * m_d + d]; }
    /// Where dataset d's bytes start, when some rank may read it straight.
    std::optional<std::uint64_t> address(std::size_t d) const
    {
        const std::int64_t at1 = m_v[1 + 3 * m_d + d];
        return at1 > 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(at1 - 1)) : std::nullopt;
    }
    bool anything_read() const
    {
        return std::any_of(m_v.begin() + 1, m_v.begin() + 1 + static_cast<std::ptrdiff_t>(m_d),
                           [](std::int64_t r) { return r > 0; });
    }

private:
    std::size_t m_d;
    std::vector<std::int64_t> m_v;
};

// The container while read_data reads it, and what its reads share.
// Members in the order they are made (and destroyed in reverse).
struct OpenReadFile {
    // Collective over `comm`: opens `path` with the MPI-IO driver.
    OpenReadFile(const std::string& path, MPI_Comm comm, const ContainerTuning& tuning)
        : fapl(ct::file_access(comm, tuning, 0, path, false)),
          file(check_read(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "opening " + path))
    {
        ct::log_hints(file, tuning, path);
    }
    // One rank: reads through `opened`, the file open with the serial driver.
    explicit OpenReadFile(Handle opened) : file(std::move(opened)), serial(true) {}
    void make_properties(const std::string& path)
    {
        collective = Handle(check_read(H5Pcreate(H5P_DATASET_XFER), path + ": transfer properties"));
        independent = Handle(check_read(H5Pcreate(H5P_DATASET_XFER), path + ": transfer properties"));
        none = ct::dense_space(0, path, false);
        if (serial) // no MPI-IO: HDF5 refuses collective transfers
            return;
        check_read_status(H5Pset_dxpl_mpio(collective, H5FD_MPIO_COLLECTIVE), path + ": collective transfers");
        check_read_status(H5Pset_dxpl_mpio(independent, H5FD_MPIO_INDEPENDENT), path + ": independent transfers");
    }
    const RawReads& raw(const std::string& path)
    {
        if (!direct)
            direct.emplace(file, serial, path);
        return *direct;
    }

    const Handle fapl;
    Handle file;
    const bool serial = false;
    Handle collective, independent;
    Handle none;               // an empty selection
    Scratch scratch;           // read_verified's, and small strided or device regions
    detail::HostBuffer staged; // pieces of regions not read in place (page-locked with CUDA)
    // Small datasets stored as in memory are read straight from their
    // address through the driver's handle of `file` (raw()); every rank
    // skips them in HDF5 (no open, no transfer).
    std::optional<RawReads> direct;
};

// One dataset while read_data reads it through HDF5.
struct OpenReadDataset {
    std::size_t index = 0;            // in the schedule
    const EntryMeta* em = nullptr;
    std::string what;                 // "<path>: dataset '<name>'"
    std::uint64_t es = 0;
    Handle dset, fspace, ftype, mtype;
    bool usable = true;               // its shape is the metadata's
    std::size_t first_task = 0, end_task = 0; // its tasks on this rank
};

// The memory side of one H5Dread: a piece of a task, or nothing (`none`, an
// empty dataspace, and a dummy buffer); `packed` when it goes through the
// staging buffer (elements [first, first + n) of that task).
struct ReadPiece {
    ReadPiece(hid_t none, void* dummy) : mem(none), buf(dummy) {}
    hid_t mem;
    void* buf;
    Handle owned; // `mem`, when made for this piece
    Task* packed = nullptr;
    std::int64_t first = 0, n = 0;
};

// What read_data reads with: the reader's settings and state.
struct LoadSetup {
    const Metadata& md;
    const std::string& path;
    MPI_Comm comm;
    std::size_t staging;
    const ContainerTuning& tuning;
    bool verifying; // checksums on: every region read chunk by chunk, checked (read_verified)
    const std::map<std::string, std::uint64_t>& direct; // check_datasets' addresses
    std::uint64_t& bytes_read;
    Handle* serial; // valid on one rank: the file open with the serial driver, read through (and closed)
};

// One read_data call (docs at the top of this file): step 1, local, finds
// the destinations and pieces this rank reads and agrees on the schedule;
// step 2, collective, opens the file and reads the rounds of every dataset
// someone needs.
class ContainerLoad : ct::FirstError {
public:
    explicit ContainerLoad(const LoadSetup& s) : m_s(s), m_sched(0) { list_datasets(); }

    void run(const LoadPlan& plan, LoadPlanner& planner)
    {
        plan_reads(plan, planner);
        if (!agree_schedule())
            return; // another rank failed; the load's error agreement reports it
        if (m_sched.anything_read())
            read_container();
        if (m_err)
            std::rethrow_exception(m_err);
        for (std::size_t b = 0; b < m_blobs.size(); ++b)
            planner.load_bytes(*m_blob_items[b], std::move(m_blobs[b]));
    }

private:
    // ---- step 1 (local)
    void list_datasets();
    void plan_reads(const LoadPlan& plan, LoadPlanner& planner);
    void plan_item(const ReadItem& item, LoadPlanner& planner);
    Task destination(const ReadItem& item, const EntryMeta& em, std::int64_t es, LoadPlanner& planner);
    void choose_rounds(Task& t, const EntryMeta& em, std::int64_t es, const std::string& what);
    bool agree_schedule();
    // ---- step 2 (collective)
    void read_container();
    bool read_straight(OpenReadFile& f, std::size_t d, std::size_t& cursor);
    void read_task_straight(OpenReadFile& f, const Task& t, const EntryMeta& em, std::uint64_t at, std::size_t es,
                            const std::string& what);
    void read_dataset(OpenReadFile& f, std::size_t d, std::size_t& cursor);
    void read_verified_regions(OpenReadFile& f, OpenReadDataset& ds);
    void read_independently(OpenReadFile& f, OpenReadDataset& ds);
    void read_collectively(OpenReadFile& f, OpenReadDataset& ds);
    void read_chunks_verified(OpenReadFile& f, const Fetch& fetch, const Task& t, const EntryMeta& em, std::size_t es,
                              const std::string& what);
    void prepare(OpenReadFile& f, Task& t, std::int64_t p, const OpenReadDataset& ds, ReadPiece& piece);
    void done(OpenReadFile& f, const ReadPiece& piece, const OpenReadDataset& ds);
    void close(OpenReadFile& f);
    std::size_t tasks_end(std::size_t cursor, std::size_t d) const
    {
        while (cursor < m_tasks.size() && m_tasks[cursor].dataset == d)
            ++cursor;
        return cursor;
    }
    static Box region_of(const Task& t, const EntryMeta& em)
    {
        return t.item->kind == ItemKind::bytes ? whole(em.global_shape) : t.item->box;
    }

    const LoadSetup& m_s;
    // Datasets with elements, in metadata order: the schedule's columns.
    std::vector<const std::pair<const std::string, EntryMeta>*> m_datasets;
    std::map<std::string, std::size_t> m_index;
    ReadSchedule m_sched;
    // Step 1's: what this rank reads, by dataset after the agreement.
    std::vector<Task> m_tasks;
    std::vector<std::vector<std::byte>> m_blobs;
    std::vector<const ReadItem*> m_blob_items;
    std::int64_t m_max_piece_bytes = 0;
    std::exception_ptr m_local_failure;
    // Step 2's: m_err, this rank's first read error.
};

void ContainerLoad::list_datasets()
{
    for (const auto& kv : m_s.md.entries)
        if ((kv.second.kind == ItemKind::array || kv.second.kind == ItemKind::bytes) && !kv.second.chunks.empty() &&
            volume(kv.second.global_shape) > 0) {
            m_index.emplace(kv.first, m_datasets.size());
            m_datasets.push_back(&kv);
        }
    m_sched = ReadSchedule(m_datasets.size());
    for (std::size_t d = 0; d < m_datasets.size(); ++d) {
        const auto a = m_s.direct.find(m_datasets[d]->first);
        if (a != m_s.direct.end())
            m_sched.set_address(d, a->second);
    }
}

// Destinations and pieces; a failure is kept for the agreement.
void ContainerLoad::plan_reads(const LoadPlan& plan, LoadPlanner& planner)
{
    try {
        // Before the collective open (which every rank must enter or none):
        // a FIFO or device would block HDF5's open, on some ranks perhaps.
        fs::check_regular_file(m_s.path, fs::Follow::yes);
        for (const auto& item : plan.items)
            plan_item(item, planner);
    } catch (...) {
        m_local_failure = std::current_exception();
    }
}

void ContainerLoad::plan_item(const ReadItem& item, LoadPlanner& planner)
{
    const auto e = m_s.md.entries.find(item.fqn);
    if (e == m_s.md.entries.end() || e->second.kind != item.kind ||
        (item.kind != ItemKind::array && item.kind != ItemKind::bytes))
        throw error::WrongAPIUsage("read item for " + std::string(item_kind_name(item.kind)) + " '" + item.fqn +
                                   "' is not in the checkpoint's metadata");
    const EntryMeta& em = e->second;
    const auto es = static_cast<std::int64_t>(dtype_size(stored_dtype(em)));
    Task t = destination(item, em, es, planner);
    if (volume(t.view.shape) == 0)
        return; // nothing to read (an empty blob is delivered at the end)
    const auto d = m_index.find(item.fqn);
    if (d == m_index.end())
        throw error::FormatError(m_s.path + ": entry '" + item.fqn + "' has elements but no stored chunks");
    t.dataset = d->second;
    if (m_s.verifying)
        t.rounds = 1; // read alone, chunk by chunk (read_verified)
    else
        choose_rounds(t, em, es, m_s.path + ": dataset '" + em.chunks.front().storage.path + "'");
    m_sched.add_rounds(t.dataset, t.rounds);
    m_tasks.push_back(std::move(t));
}

// Where item's elements go: a blob of this load (bytes entries) or the
// planner's destination (arrays).
Task ContainerLoad::destination(const ReadItem& item, const EntryMeta& em, std::int64_t es, LoadPlanner& planner)
{
    Task t;
    t.item = &item;
    if (item.kind == ItemKind::bytes) {
        t.blob = m_blobs.size();
        m_blobs.emplace_back(static_cast<std::size_t>(em.global_shape.at(0)));
        m_blob_items.push_back(&item);
        t.view = StridedView{m_blobs.back().data(), 1, em.global_shape, {1}};
        return t;
    }
    if (item.box.ndim() != em.global_shape.size() || !item.box.inside(em.global_shape))
        throw error::WrongAPIUsage("array '" + item.fqn + "': region " + item.box.str() +
                                   " is outside its global shape " + shape_str(em.global_shape));
    const DataRef dst = planner.resolve_destination(item);
    if (dst.view.elem_size != static_cast<std::size_t>(es) || dst.view.shape != item.box.shape)
        throw error::WrongAPIUsage("array '" + item.fqn + "': the planner's destination does not match the region " +
                                   item.box.str());
    t.view = dst.view;
    t.space = dst.space;
    return t;
}

// Read in place in one round (a memory hyperslab of host memory), or in
// pieces through the staging buffer.
void ContainerLoad::choose_rounds(Task& t, const EntryMeta& em, std::int64_t es, const std::string& what)
{
    if (t.space == MemorySpace::host) // device memory: never handed to HDF5, staged in pieces
        t.mem = ct::view_space(t.view, what, false);
    if (t.mem.valid()) {
        t.rounds = 1;
        return;
    }
    t.split = ct::Split(region_of(t, em), std::max<std::int64_t>(static_cast<std::int64_t>(m_s.staging) / es, 1));
    t.rounds = t.split.count();
    m_max_piece_bytes = std::max(m_max_piece_bytes, t.split.max_elements() * es);
}

// Collective: agrees on the schedule and on any rank's local failure;
// false when another rank failed (this rank's own failure is thrown).
bool ContainerLoad::agree_schedule()
{
    m_sched.agree(m_s.comm, m_local_failure != nullptr, m_s.path);
    if (m_sched.failed()) {
        if (m_local_failure)
            std::rethrow_exception(m_local_failure);
        return false;
    }
    std::stable_sort(m_tasks.begin(), m_tasks.end(),
                     [](const Task& a, const Task& b) { return a.dataset < b.dataset; });
    return true;
}

// Collective: opens the file and reads, dataset by dataset in metadata
// order, those someone reads (straight or through HDF5); closes.
void ContainerLoad::read_container()
{
    detail::h5::ErrorSilencer quiet;
    std::optional<OpenReadFile> opened;
    if (m_s.serial->valid()) {
        opened.emplace(std::move(*m_s.serial));
    } else {
        opened.emplace(m_s.path, m_s.comm, m_s.tuning);
        // Injected faults (ct::inject) follow the real, collective calls: the
        // rank notes the error and takes part in the rest with empty selections.
        noting([&] { ct::inject(fault::h5_open, "opening " + m_s.path, false); });
    }
    OpenReadFile& f = *opened;
    f.make_properties(m_s.path);
    std::size_t cursor = 0;
    for (std::size_t d = 0; d < m_datasets.size(); ++d)
        if (m_sched.rounds(d) > 0 && !read_straight(f, d, cursor))
            read_dataset(f, d, cursor);
    close(f);
}

// Reads dataset `d` straight from its address when it is small, stored as
// in memory (check_datasets found its address) and read alone or verified;
// false (and nothing done) otherwise.
bool ContainerLoad::read_straight(OpenReadFile& f, std::size_t d, std::size_t& cursor)
{
    const EntryMeta& em = m_datasets[d]->second;
    const auto es = dtype_size(stored_dtype(em));
    const auto bytes = static_cast<std::uint64_t>(volume(em.global_shape)) * es;
    const std::uint64_t direct_max = std::min<std::uint64_t>(ct::direct_max_bytes, m_s.staging);
    const auto at = m_sched.address(d);
    if (!at || bytes > direct_max ||
        !(m_s.verifying || m_sched.single_reader(d) || bytes < m_s.tuning.independent_below))
        return false;
    const std::string what = m_s.path + ": dataset '" + em.chunks.front().storage.path + "'";
    const std::size_t end = tasks_end(cursor, d);
    for (std::size_t ti = cursor; ti < end && !m_err; ++ti)
        noting([&] { read_task_straight(f, m_tasks[ti], em, *at, es, what); });
    cursor = end;
    return true;
}

void ContainerLoad::read_task_straight(OpenReadFile& f, const Task& t, const EntryMeta& em, std::uint64_t at,
                                       std::size_t es, const std::string& what)
{
    const RawReads& raw = f.raw(m_s.path);
    const Box I = region_of(t, em);
    if (m_s.verifying) {
        const Fetch fetch = [&](const Box& P, std::int64_t, char* buf) {
            read_box_direct(raw, at, em.global_shape, es, P, buf, what);
        };
        read_chunks_verified(f, fetch, t, em, es, what);
        return;
    }
    const auto n = static_cast<std::size_t>(I.volume());
    if (detail::is_dense(t.view) && t.space == MemorySpace::host) {
        read_box_direct(raw, at, em.global_shape, es, I, static_cast<char*>(t.view.data), what);
    } else {
        char* buf = detail::grow(f.scratch.read, n * es, m_s.staging);
        read_box_direct(raw, at, em.global_shape, es, I, buf, what);
        detail::stage_in(DataRef{t.view, t.space}, 0, static_cast<std::int64_t>(n), buf);
    }
    m_s.bytes_read += n * es;
}

// Reads the checksum blocks of the stored chunks that task `t`'s region
// touches, checked, into its destination (read_verified).
void ContainerLoad::read_chunks_verified(OpenReadFile& f, const Fetch& fetch, const Task& t, const EntryMeta& em,
                                         std::size_t es, const std::string& what)
{
    const Box I = region_of(t, em);
    for (const auto& ch : em.chunks) {
        const auto O = I.ndim() ? intersect(ch.box, I) : std::optional<Box>(I);
        if (O)
            m_s.bytes_read += read_verified(fetch, m_s.md.checksum_block, ch, es, &*O, &I, &t.view, t.space,
                                            m_s.staging, f.scratch, what, t.item->fqn);
    }
}

// Collective: opens dataset `d` and reads this rank's tasks of it,
// [cursor, ...), in the agreed way; moves `cursor` past them.
void ContainerLoad::read_dataset(OpenReadFile& f, std::size_t d, std::size_t& cursor)
{
    OpenReadDataset ds;
    ds.index = d;
    ds.em = &m_datasets[d]->second;
    const std::string& name = ds.em->chunks.front().storage.path;
    ds.what = m_s.path + ": dataset '" + name + "'";
    ds.dset = Handle(check_read(H5Dopen2(f.file, name.c_str(), H5P_DEFAULT), "opening " + ds.what));
    ds.fspace = Handle(check_read(H5Dget_space(ds.dset), ds.what));
    ds.ftype = Handle(check_read(H5Dget_type(ds.dset), ds.what));
    ds.mtype = memory_type(ds.ftype, stored_dtype(*ds.em));
    if (!same_shape(ds.fspace, ds.em->global_shape)) {
        ds.usable = false;
        if (!m_err)
            m_err = std::make_exception_ptr(error::FormatError(ds.what + " has shape " + dims_str(ds.fspace) +
                                                               ", the metadata says " +
                                                               shape_str(ds.em->global_shape)));
    }
    ds.es = static_cast<std::uint64_t>(dtype_size(stored_dtype(*ds.em)));
    ds.first_task = cursor;
    ds.end_task = tasks_end(cursor, d);
    const auto bytes = static_cast<std::uint64_t>(volume(ds.em->global_shape)) * ds.es;
    if (m_s.verifying)
        read_verified_regions(f, ds);
    else if (m_sched.single_reader(d) || bytes < m_s.tuning.independent_below)
        read_independently(f, ds);
    else
        read_collectively(f, ds);
    cursor = ds.end_task;
    if (!ds.dset.reset() && !m_err)
        m_err = std::make_exception_ptr(error::ReadError("closing " + ds.what + ": " + detail::h5::last_error()));
}

// Every rank opened the dataset; each reads the checksum blocks of the
// chunks its regions touch, alone.
void ContainerLoad::read_verified_regions(OpenReadFile& f, OpenReadDataset& ds)
{
    for (std::size_t ti = ds.first_task; ti < ds.end_task && !m_err && ds.usable; ++ti)
        noting([&] {
            read_chunks_verified(f, hdf5_fetch(ds.dset, ds.mtype, ds.fspace, f.independent, ds.what), m_tasks[ti],
                                 *ds.em, ds.es, ds.what);
        });
}

// Every rank opened the dataset (collective metadata); its readers read alone.
void ContainerLoad::read_independently(OpenReadFile& f, OpenReadDataset& ds)
{
    static char dummy = 0;
    for (std::size_t ti = ds.first_task; ti < ds.end_task && !m_err && ds.usable; ++ti)
        for (std::int64_t p = 0; p < m_tasks[ti].rounds && !m_err; ++p)
            noting([&] {
                ReadPiece piece(f.none, &dummy);
                prepare(f, m_tasks[ti], p, ds, piece);
                check_read_status(H5Dread(ds.dset, ds.mtype, piece.mem, ds.fspace, f.independent, piece.buf),
                             "reading " + ds.what);
                ct::inject(fault::h5_read, "reading " + ds.what, false);
                done(f, piece, ds);
            });
}

// The dataset's agreed rounds of collective reads: every rank takes part in
// each, with an empty selection when it has nothing (left) to read or has
// failed.
void ContainerLoad::read_collectively(OpenReadFile& f, OpenReadDataset& ds)
{
    static char dummy = 0;
    std::size_t ti = ds.first_task;
    std::int64_t next = 0; // the next piece of task ti
    for (std::int64_t r = 0; r < m_sched.rounds(ds.index); ++r) {
        while (ti < ds.end_task && next >= m_tasks[ti].rounds) {
            ++ti;
            next = 0;
        }
        ReadPiece piece(f.none, &dummy);
        bool mine = !m_err && ds.usable && ti < ds.end_task;
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
                check_read_status(H5Sselect_none(ds.fspace), ds.what + ": empty selection");
                piece.mem = f.none;
                piece.buf = &dummy;
            }
            check_read_status(H5Dread(ds.dset, ds.mtype, piece.mem, ds.fspace, f.collective, piece.buf),
                         "reading " + ds.what);
            ct::inject(fault::h5_read, "reading " + ds.what, false);
            if (mine)
                done(f, piece, ds);
        });
    }
}

// Selects piece `p` of task `t` in the dataset's file space; the memory side
// in `piece`.
void ContainerLoad::prepare(OpenReadFile& f, Task& t, std::int64_t p, const OpenReadDataset& ds, ReadPiece& piece)
{
    const Box box = region_of(t, *ds.em);
    if (t.mem.valid()) {
        ct::select_box(ds.fspace, box, ds.what, false);
        piece.mem = t.mem;
        piece.buf = t.view.data;
        piece.first = 0;
        piece.n = box.volume();
        piece.packed = nullptr;
        return;
    }
    const Box b = t.split.piece(p, piece.first, piece.n);
    ct::select_box(ds.fspace, b, ds.what, false);
    if (!f.staged.data())
        f.staged = detail::HostBuffer(static_cast<std::size_t>(m_max_piece_bytes));
    piece.owned = ct::dense_space(static_cast<std::uint64_t>(piece.n), ds.what, false);
    piece.mem = piece.owned;
    piece.buf = f.staged.data();
    piece.packed = &t;
}

// After a piece is read: unpacks it into its destination when staged.
void ContainerLoad::done(OpenReadFile& f, const ReadPiece& piece, const OpenReadDataset& ds)
{
    if (piece.packed)
        detail::stage_in(DataRef{piece.packed->view, piece.packed->space}, piece.first, piece.n, f.staged.data());
    m_s.bytes_read += static_cast<std::uint64_t>(piece.n) * ds.es;
}

void ContainerLoad::close(OpenReadFile& f)
{
    f.direct.reset();
    if (!f.file.reset() && !m_err)
        m_err = std::make_exception_ptr(error::ReadError("closing " + m_s.path + ": " + detail::h5::last_error()));
    noting([&] { ct::inject(fault::h5_close, "closing " + m_s.path, false); });
}

} // namespace

void ContainerReader::read_data(const LoadPlan& plan, LoadPlanner& planner)
{
    auto& im = *m_impl;
    im.bytes_read = 0;
    if (!im.md)
        throw error::WrongAPIUsage("ContainerReader::read_data before set_up_storage_reader");
    const bool verifying = im.verify && im.md->checksum_block != 0;
    // One rank reads through the file it opened for the metadata and the
    // check (serial driver); several open it together with the MPI-IO
    // driver for the collective transfers.
    int size = 1;
    MPI_Comm_size(im.comm, &size);
    if (size > 1) {
        detail::h5::ErrorSilencer quiet;
        im.serial.reset();
    }
    const LoadSetup setup{*im.md,     im.path,   im.comm,         im.staging,  im.tuning,
                          verifying, im.direct, im.bytes_read,  &im.serial};
    ContainerLoad load(setup);
    load.run(plan, planner);
}

std::uint64_t ContainerReader::verify_chunk(const std::string& fqn, const EntryMeta& entry, const ChunkMeta& chunk)
{
    auto& im = *m_impl;
    if (im.path.empty())
        throw error::WrongAPIUsage("ContainerReader::verify_chunk before reset");
    if (!im.md || !im.md->checksum_block)
        return 0; // nothing to check: a checkpoint without checksums
    detail::h5::ErrorSilencer quiet;
    const hid_t file = im.serial_file();
    const std::string what = im.path + ": dataset '" + chunk.storage.path + "'";
    if (!detail::h5::hard_links_only(file, chunk.storage.path, what))
        throw error::FormatError(what + " is missing");
    const Handle dset(check_read(H5Dopen2(file, chunk.storage.path.c_str(), H5P_DEFAULT), "opening " + what));
    detail::h5::check_dataset_storage(dset, what);
    const Handle fspace(check_read(H5Dget_space(dset), what));
    if (!same_shape(fspace, entry.global_shape))
        throw error::FormatError(what + " has shape " + dims_str(fspace) + ", the metadata says " +
                                 shape_str(entry.global_shape));
    const Handle ftype(check_read(H5Dget_type(dset), what));
    const Handle mtype = memory_type(ftype, stored_dtype(entry));
    const auto es = dtype_size(stored_dtype(entry));
    return read_verified(hdf5_fetch(dset, mtype, fspace, H5P_DEFAULT, what), im.md->checksum_block, chunk, es, nullptr,
                         nullptr, nullptr, MemorySpace::host, im.staging, im.scratch, what, fqn);
}

std::uint64_t ContainerReader::bytes_read() const noexcept { return m_impl->bytes_read; }

void ContainerReader::Impl::verify_value(const std::string& fqn, const EntryMeta& entry)
{
    auto& im = *this;
    if (im.path.empty())
        throw error::WrongAPIUsage("ContainerReader: verify_value before reset");
    if (entry.kind != ItemKind::scalar && entry.kind != ItemKind::string)
        return;
    detail::h5::ErrorSilencer quiet;
    const hid_t file = im.serial_file();
    const std::string ds = container_dataset_path(fqn);
    const std::string what =
        im.path + ": dataset '" + ds + "' of " + item_kind_name(entry.kind) + " '" + fqn + "'";
    auto bad = [&](const std::string& why) -> void {
        throw error::IntegrityError(what + " " + why + " (changed after the save? Cairn reads the metadata's value, "
                                                       "other readers this dataset's)");
    };
    if (!detail::h5::hard_links_only(file, ds, what))
        bad("is missing");
    const Handle dset(H5Dopen2(file, ds.c_str(), H5P_DEFAULT));
    if (!dset.valid()) {
        H5Eclear2(H5E_DEFAULT);
        bad("is not a dataset");
    }
    detail::h5::check_dataset_storage(dset, what);
    const Handle space(check_read(H5Dget_space(dset), what));
    if (H5Sget_simple_extent_type(space) != H5S_SCALAR)
        bad("has shape " + dims_str(space) + ", not a scalar dataspace");
    const Handle ftype(check_read(H5Dget_type(dset), what));
    if (entry.kind == ItemKind::string) {
        if (H5Tget_class(ftype) != H5T_STRING || H5Tis_variable_str(ftype) <= 0)
            bad("has type " + detail::h5::type_description(ftype) + ", not a variable-length string");
        const Handle mtype(check_read(H5Tcopy(H5T_C_S1), what));
        check_read_status(H5Tset_size(mtype, H5T_VARIABLE), what);
        check_read_status(H5Tset_cset(mtype, H5Tget_cset(ftype)), what);
        char* p = nullptr;
        check_read_status(H5Dread(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), "reading " + what);
        const std::string got = p ? p : "";
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, &p);
        if (got != entry.value)
            bad("holds a string of " + std::to_string(got.size()) + " bytes that differs from the metadata's (" +
                std::to_string(entry.value.size()) + " bytes)");
        return;
    }
    const auto code = static_cast<int>(entry.dtype);
    if (!detail::h5::dataset_type_matches(ftype, code)) {
        const Handle want = detail::h5::dataset_type(code, false);
        bad("has type " + detail::h5::type_description(ftype) + ", the metadata says " +
            std::string(dtype_name(entry.dtype)) + " (" + detail::h5::type_description(want) + ")");
    }
    const Handle mtype = memory_type(ftype, entry.dtype);
    std::vector<unsigned char> got(dtype_size(entry.dtype), 0);
    check_read_status(H5Dread(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, got.data()), "reading " + what);
    if (entry.value.size() != got.size() || std::memcmp(got.data(), entry.value.data(), got.size()) != 0)
        bad("holds " + detail::scalar_text(entry.dtype, got.data(), got.size()) + ", the metadata's value is " +
            detail::scalar_text(entry.dtype, entry.value.data(), entry.value.size()));
}

bool is_container_checkpoint(const std::string& path)
{
    const auto p = fs::strip(path);
    if (!fs::exists(p) || fs::is_directory(p))
        return false;
    try {
        fs::check_regular_file(p, fs::Follow::yes); // a FIFO would block H5Fis_hdf5
    } catch (const Error&) {
        return false;
    }
    detail::h5::ErrorSilencer quiet;
    if (H5Fis_hdf5(p.c_str()) <= 0)
        return false;
    try {
        const Handle fapl = ct::file_access(MPI_COMM_NULL, ContainerTuning{}, 0, p, false);
        const Handle file(H5Fopen(p.c_str(), H5F_ACC_RDONLY, fapl));
        if (!file.valid() || H5Lexists(file, "cairn", H5P_DEFAULT) <= 0)
            return false;
        const Handle group(H5Gopen2(file, "cairn", H5P_DEFAULT));
        return group.valid() && detail::h5::read_string_attr(group, "layout", p) == "container";
    } catch (...) {
        H5Eclear2(H5E_DEFAULT);
        return false;
    }
}

} // namespace cairn
