#include "format/metadata_h5.hpp"

#include "cairn/errors.hpp"
#include "cairn/testing.hpp"
#include "core/checksum.hpp"
#include "core/fault.hpp"
#include "core/metadata_adapter.hpp"
#include "core/tiling.hpp"
#include "format/column_runs.hpp"
#include "io/fs.hpp"
#include "io/h5.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cairn::detail {

using h5::check_read;
using h5::check_read_status;
using h5::check_write;
using h5::check_write_status;
using h5::Handle;

std::string escape_name(const std::string& fqn)
{
    std::string out;
    out.reserve(fqn.size());
    for (std::size_t i = 0; i < fqn.size(); ++i) {
        const char ch = fqn[i];
        if (ch == '%')
            out += "%25";
        else if (ch == '/')
            out += "%2F";
        else if (ch == '.' && i == 0)
            out += "%2E";
        else
            out += ch;
    }
    return out;
}

namespace {

// Enumerated HDF5 types for kinds and dtypes: h5dump and h5py show names.
Handle kind_enum()
{
    Handle t(check_write(H5Tenum_create(H5T_NATIVE_UINT8), "metadata: kind type"));
    for (auto k : {ItemKind::array, ItemKind::bytes, ItemKind::scalar, ItemKind::string}) {
        const auto v = static_cast<std::uint8_t>(k);
        check_write_status(H5Tenum_insert(t, item_kind_name(k), &v), "metadata: kind type");
    }
    return t;
}

Handle dtype_enum()
{
    Handle t(check_write(H5Tenum_create(H5T_NATIVE_UINT8), "metadata: dtype type"));
    for (int c = 0; c < dtype_count; ++c) {
        const auto v = static_cast<std::uint8_t>(c);
        check_write_status(H5Tenum_insert(t, std::string(dtype_name(static_cast<DType>(c))).c_str(), &v),
                           "metadata: dtype type");
    }
    return t;
}

bool has_dims(ItemKind k) { return k == ItemKind::array || k == ItemKind::bytes; }

// A per-chunk column goes in its run form (FORMAT.md 2.5) when its plain
// form would take 64 KiB or more even in 32 bits, and the runs (24 bytes
// each) at most a quarter of that: checkpoints of few chunks, or of
// irregular ones, keep the plain columns that any reader of version 1 reads.
template <class T>
bool as_runs(const std::vector<T>& values, const std::vector<RowBlock>& blocks, std::vector<std::int64_t>& runs)
{
    constexpr std::size_t min_values = 64 * 1024 / 4;
    if (values.size() < min_values)
        return false;
    return encode_runs(values, blocks, values.size() / 24, runs); // 24 bytes a run, a quarter of 4 bytes a value
}

// Writes a column in its run form, or plain (`plain`); returns true when it
// was stored as a dataset (FORMAT.md 2.6).
template <class Plain>
bool write_runs_or(hid_t root, const char* name, bool as_runs, const std::vector<std::int64_t>& runs,
                   std::size_t dataset_above, Plain&& plain)
{
    if (as_runs)
        return h5::write_i64_attr(root, (std::string(name) + "_runs").c_str(), runs, {runs.size() / 3, 3},
                                  dataset_above);
    return plain();
}

// A per-chunk column as stored, plain or in its run form (never both),
// handed out block by block (an entry's rows) without expanding the rest.
template <class T>
class StoredColumn {
public:
    // Where the next block starts: a run (run form) or a value (plain).
    struct Cursor {
        std::size_t at = 0;
    };

    void read(hid_t root, const char* name, const std::vector<RowBlock>& blocks, const std::string& rw)
    {
        const std::string runs_name = std::string(name) + "_runs";
        // Each an attribute or a dataset (FORMAT.md 2.6).
        const auto plain = h5::IntArray::find(root, name, rw);
        const auto runs = h5::IntArray::find(root, runs_name.c_str(), rw);
        if (plain && runs)
            throw error::FormatError(rw + ": both '" + name + "' and '" + runs_name + "'");
        m_runs = runs.has_value();
        if (!runs) {
            if (!plain)
                throw error::FormatError(rw + ": attribute '" + name + "' is missing");
            m_what = plain->what();
            if constexpr (std::is_signed_v<T>)
                m_values = plain->read_i64();
            else
                m_values = plain->read_u64();
            return;
        }
        m_what = runs->what();
        std::vector<hsize_t> dims;
        m_triples = runs->read_i64(&dims);
        if (!m_triples.empty() && (dims.size() != 2 || dims[1] != 3))
            throw error::FormatError(m_what + " is not an array of (first, step, count) rows");
        if (too_many_values(blocks))
            throw error::FormatError(m_what + ": more values than a reader expands");
    }

    // Appends the block of `rows` rows of `width` values at `cur` to `out`
    // and moves `cur` past it. `entry` names the entry in messages.
    void block(Cursor& cur, std::uint64_t rows, std::uint32_t width, std::vector<T>& out,
               const std::string& entry) const
    {
        if (!m_runs && width && rows > (m_values.size() - cur.at) / width)
            throw error::FormatError(m_what + ": " + entry + ": invalid chunk count " + std::to_string(rows) +
                                     " (more than the rows left)");
        // Bounded: by the plain values, or for runs by read()'s check.
        const std::size_t n = static_cast<std::size_t>(rows * width), base = out.size();
        out.resize(base + n);
        if (m_runs) {
            decode_run_block(m_triples, cur.at, rows, width, out.data() + base, m_what, entry);
        } else {
            std::copy_n(m_values.begin() + static_cast<std::ptrdiff_t>(cur.at), n,
                        out.begin() + static_cast<std::ptrdiff_t>(base));
            cur.at += n;
        }
    }

    // How many values the blocks would take from it, at most (to reserve).
    std::size_t values_for(const std::vector<RowBlock>& blocks) const
    {
        if (!m_runs)
            return m_values.size();
        std::size_t n = 0; // read() checked that the sum is bounded
        for (const auto& b : blocks)
            n += static_cast<std::size_t>(b.rows * b.width);
        return n;
    }

    // After the last block: nothing may be left.
    void finish(const Cursor& cur) const
    {
        if (m_runs && 3 * cur.at != m_triples.size())
            throw error::FormatError(m_what + ": " + std::to_string(m_triples.size() / 3 - cur.at) +
                                     " runs beyond the last entry's values");
        if (!m_runs && cur.at != m_values.size())
            throw error::FormatError(m_what + ": rows that no entry claims");
    }

private:
    std::string m_what;
    bool m_runs = false;
    std::vector<T> m_values;              // plain
    std::vector<std::int64_t> m_triples;  // run form
};

} // namespace

namespace {

// The entry table of the metadata group (FORMAT.md 2): one row per entry,
// in name order.
struct EntryTable {
    explicit EntryTable(std::size_t n)
    {
        names.reserve(n);
        kinds.reserve(n);
        dtypes.reserve(n);
        ndims.reserve(n);
        counts.reserve(n);
    }
    void add(const MetadataColumns::Entry& em)
    {
        names.push_back(em.name);
        kinds.push_back(static_cast<std::uint8_t>(em.kind));
        dtypes.push_back(static_cast<std::uint8_t>(em.kind == ItemKind::string ? DType::u8 : em.dtype));
        const auto nd = has_dims(em.kind) ? em.global_shape.size() : 0;
        ndims.push_back(static_cast<std::uint8_t>(nd));
        if (nd)
            shapes.insert(shapes.end(), em.global_shape.begin(), em.global_shape.end());
        counts.push_back(static_cast<std::int64_t>(em.chunks));
    }

    std::vector<std::string> names;
    std::vector<std::uint8_t> kinds, dtypes, ndims;
    std::vector<std::int64_t> shapes, counts;
};

// The chunk rows of the entries seen so far, as check_chunk_rows finds them.
struct ChunkRows {
    std::size_t coords = 0; // box values
    std::size_t sums = 0;   // checksums
    bool pooled_in_order = true; // each chunk's checksums follow the previous one's in the pool
};

void check_column_lengths(const MetadataColumns& md)
{
    if (md.world_size < 1)
        throw error::WrongAPIUsage("metadata: world_size must be at least 1, not " + std::to_string(md.world_size));
    const std::size_t nchunks = md.chunk_count();
    if (md.chunk_offset.size() != nchunks || md.chunk_length.size() != nchunks || md.sum_begin.size() != nchunks ||
        md.sum_count.size() != nchunks)
        throw error::WriteError("metadata: chunk columns of different lengths");
}

// Checks the chunk rows of entry i: where its entry says, every chunk in a
// file, with the checksums its length needs, inside the pool.
void check_chunk_rows(const MetadataColumns& md, std::size_t i, ChunkRows& seen)
{
    const auto& em = md.entries[i];
    const std::size_t nchunks = md.chunk_count();
    const std::size_t cnd = em.global_shape.size(), stride = 2 * cnd;
    if (em.first_chunk != (i ? md.entries[i - 1].first_chunk + md.entries[i - 1].chunks : 0) ||
        em.first_coord != seen.coords || em.first_chunk + em.chunks > nchunks ||
        md.boxes.size() < seen.coords + stride * em.chunks)
        throw error::WriteError("metadata: the chunk rows of '" + em.name + "' are not where its entry says");
    seen.coords += stride * em.chunks;
    const auto es = em.kind == ItemKind::bytes ? 1 : dtype_size(em.dtype);
    for (std::size_t j = 0; j < em.chunks; ++j) {
        const std::size_t k = em.first_chunk + j;
        const std::int64_t* b = md.boxes.data() + em.first_coord + stride * j;
        const auto box_str = [&] { return Box{Shape(b, b + cnd), Shape(b + cnd, b + stride)}.str(); };
        if (md.chunk_file[k] < 0 || static_cast<std::size_t>(md.chunk_file[k]) >= md.files.size())
            throw error::WriteError("metadata: chunk " + box_str() + " of '" + em.name + "' has no file");
        const auto expect = checksum_blocks(md.chunk_length[k], checksum_span(b + cnd, cnd, es, md.checksum_block));
        if (md.sum_count[k] != expect)
            throw error::WriteError("metadata: chunk " + box_str() + " of '" + em.name + "' has " +
                                    std::to_string(md.sum_count[k]) + " checksums, expected " +
                                    std::to_string(expect));
        if (md.sum_begin[k] > md.sums.size() || md.sums.size() - md.sum_begin[k] < md.sum_count[k])
            throw error::WriteError("metadata: the checksums of chunk " + box_str() + " of '" + em.name +
                                    "' lie outside the pool");
        seen.pooled_in_order = seen.pooled_in_order && md.sum_begin[k] == seen.sums;
        seen.sums += md.sum_count[k];
    }
}

// The entry table; checks the entries' order and every chunk row
// (check_chunk_rows), and that no row is left over.
EntryTable entry_table(const MetadataColumns& md, ChunkRows& rows)
{
    const std::size_t n = md.entries.size();
    EntryTable table(n);
    for (std::size_t i = 0; i < n; ++i) {
        const auto& em = md.entries[i];
        if (i > 0 && !(md.entries[i - 1].name < em.name))
            throw error::WriteError("metadata: entries not in strict name order at '" + em.name + "'");
        table.add(em);
        check_chunk_rows(md, i, rows);
    }
    if (rows.coords != md.boxes.size() ||
        (n ? md.entries.back().first_chunk + md.entries.back().chunks : 0) != md.chunk_count())
        throw error::WriteError("metadata: chunk rows that no entry claims");
    return table;
}

// The checksums in chunk order: the pool itself when it is so, else
// gathered into `gathered`.
const std::vector<std::uint64_t>& sums_in_chunk_order(const MetadataColumns& md, const ChunkRows& rows,
                                                      std::vector<std::uint64_t>& gathered)
{
    if (rows.pooled_in_order && rows.sums == md.sums.size())
        return md.sums;
    gathered.reserve(rows.sums);
    for (std::size_t k = 0; k < md.chunk_count(); ++k)
        gathered.insert(gathered.end(), md.sums.begin() + static_cast<std::ptrdiff_t>(md.sum_begin[k]),
                        md.sums.begin() + static_cast<std::ptrdiff_t>(md.sum_begin[k] + md.sum_count[k]));
    return gathered;
}

// The per-chunk integer columns in their run form (FORMAT.md 2.5), where
// that is how they are stored.
struct ChunkColumnRuns {
    explicit ChunkColumnRuns(const MetadataColumns& md)
    {
        const std::size_t n = md.entries.size();
        std::vector<RowBlock> box_blocks(n), chunk_blocks(n);
        for (std::size_t i = 0; i < n; ++i) {
            box_blocks[i] = {md.entries[i].chunks, static_cast<std::uint32_t>(2 * md.entries[i].ndim())};
            chunk_blocks[i] = {md.entries[i].chunks, 1};
        }
        boxes_as_runs = as_runs(md.boxes, box_blocks, boxes);
        files_as_runs = as_runs(md.chunk_file, chunk_blocks, files);
        offsets_as_runs = as_runs(md.chunk_offset, chunk_blocks, offsets);
        lengths_as_runs = as_runs(md.chunk_length, chunk_blocks, lengths);
    }
    bool any() const { return boxes_as_runs || files_as_runs || offsets_as_runs || lengths_as_runs; }

    std::vector<std::int64_t> boxes, files, offsets, lengths;
    bool boxes_as_runs = false, files_as_runs = false, offsets_as_runs = false, lengths_as_runs = false;
};

// Attributes of the checkpoint as a whole.
void write_header(hid_t root, const MetadataColumns& md)
{
    h5::write_string_attr(root, "library_version", md.library_version);
    h5::write_i64_attr(root, "world_size", {md.world_size}, {});
    h5::write_string_attr(root, "layout", md.layout);
    h5::write_string_attr(root, "created", md.created);
    h5::write_i64_attr(root, "entry_count", {static_cast<std::int64_t>(md.entries.size())}, {});
    h5::write_string_array_attr(root, "files", md.files);
}

// Returns true when it stored an array as a dataset.
bool write_entry_table(hid_t root, const EntryTable& t, std::size_t dataset_above)
{
    const std::size_t n = t.names.size();
    h5::write_string_array_attr(root, "names", t.names);
    h5::write_raw_array_attr(root, "kinds", kind_enum(), t.kinds.data(), n);
    h5::write_raw_array_attr(root, "dtypes", dtype_enum(), t.dtypes.data(), n);
    h5::write_raw_array_attr(root, "ndims", H5T_NATIVE_UINT8, t.ndims.data(), n);
    bool any_dataset = h5::write_i64_attr(root, "global_shapes", t.shapes, {t.shapes.size()}, dataset_above);
    any_dataset |= h5::write_i64_attr(root, "chunk_counts", t.counts, {t.counts.size()}, dataset_above);
    return any_dataset;
}

// The per-chunk columns, in their run form or plain, in 32 bits where their
// values fit (FORMAT.md 2); boxes only when every global extent does
// (`shapes`), so that a reader's offset + extent cannot overflow either.
// Returns true when it stored a column as a dataset.
bool write_chunk_columns(hid_t root, const MetadataColumns& md, const std::vector<std::int64_t>& shapes,
                         const ChunkColumnRuns& runs, std::size_t dataset_above)
{
    const bool extents_fit = std::all_of(shapes.begin(), shapes.end(), [](std::int64_t e) {
        return e <= std::numeric_limits<std::int32_t>::max();
    });
    bool any_dataset = write_runs_or(root, "chunk_boxes", runs.boxes_as_runs, runs.boxes, dataset_above, [&] {
        return h5::write_i64_column(root, "chunk_boxes", md.boxes, extents_fit, dataset_above);
    });
    any_dataset |= write_runs_or(root, "chunk_files", runs.files_as_runs, runs.files, dataset_above, [&] {
        return h5::write_i64_column(root, "chunk_files", md.chunk_file, true, dataset_above);
    });
    any_dataset |= write_runs_or(root, "chunk_offsets", runs.offsets_as_runs, runs.offsets, dataset_above, [&] {
        return h5::write_u64_column(root, "chunk_offsets", md.chunk_offset, dataset_above);
    });
    any_dataset |= write_runs_or(root, "chunk_lengths", runs.lengths_as_runs, runs.lengths, dataset_above, [&] {
        return h5::write_u64_column(root, "chunk_lengths", md.chunk_length, dataset_above);
    });
    return any_dataset;
}

// Returns true when it stored the checksums as a dataset.
bool write_checksums(hid_t root, const MetadataColumns& md, const std::vector<std::uint64_t>& sums,
                     std::size_t dataset_above)
{
    h5::write_string_attr(root, "checksum_algorithm", md.checksum_block ? checksum_algorithm : "none");
    h5::write_i64_attr(root, "checksum_block_bytes", {static_cast<std::int64_t>(md.checksum_block)}, {});
    return h5::write_u64_attr(root, "chunk_checksums", sums, dataset_above);
}

// Scalars and strings: one attribute each in /cairn/values, named by the
// entry, of its natural type, so h5dump shows `"step" ... (0): 100`.
void write_values(hid_t root, const MetadataColumns& md)
{
    Handle values(
        check_write(H5Gcreate2(root, "values", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "creating /cairn/values"));
    for (const auto& em : md.entries) {
        if (em.kind == ItemKind::string)
            h5::write_string_attr(values, em.name.c_str(), em.value);
        else if (em.kind == ItemKind::scalar)
            h5::write_raw_attr(values, em.name.c_str(), h5::native_type(static_cast<int>(em.dtype)), em.value.data());
    }
}

} // namespace

void write_metadata_group(hid_t loc, const MetadataColumns& md, std::size_t dataset_above)
{
    // Everything is checked before the group is created.
    check_column_lengths(md);
    ChunkRows rows;
    const EntryTable table = entry_table(md, rows);
    std::vector<std::uint64_t> gathered;
    const std::vector<std::uint64_t>& sums = sums_in_chunk_order(md, rows, gathered);
    const ChunkColumnRuns runs(md);

    Handle root(check_write(H5Gcreate2(loc, "cairn", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "creating group /cairn"));
    write_header(root, md);
    bool any_dataset = write_entry_table(root, table, dataset_above);
    any_dataset |= write_chunk_columns(root, md, table.shapes, runs, dataset_above);
    any_dataset |= write_checksums(root, md, sums, dataset_above);
    // The lowest version that describes the file: 3 where an array is a
    // dataset (2.6), 2 where a column is in its run form (2.5), else 1, so
    // that a file stays readable by older readers wherever it can.
    h5::write_i64_attr(root, "format_version", {any_dataset ? 3 : runs.any() ? 2 : 1}, {});
    write_values(root, md);
}

namespace {

// The /cairn group, read whole but for its chunk rows, which it expands and
// checks entry by entry, in stored order (ChunkRowSource when the stored
// order is name order, as Cairn writes it).
class GroupRows final : public ChunkRowSource {
public:
    GroupRows(hid_t loc, const std::string& where);

    // Whether the entries are stored in name order with distinct names.
    bool in_name_order() const noexcept { return m_sorted; }
    const MetadataColumns& head() const override { return m_head; }
    std::vector<std::int64_t> files_in_use() const override;
    void rows(std::size_t i) override
    {
        m_head.boxes.clear();
        m_head.chunk_file.clear();
        m_head.chunk_offset.clear();
        m_head.chunk_length.clear();
        m_head.sum_begin.clear();
        m_head.sum_count.clear();
        append(i);
    }
    void finish() override;
    // Every entry's rows, one after the other (the whole-columns reader),
    // then finish().
    void expand_all();
    MetadataColumns take_head() { return std::move(m_head); }

private:
    std::string m_rw; // "<where>: /cairn"
    std::vector<std::uint64_t> m_elem; // per entry: element size
    std::vector<RowBlock> m_box_blocks, m_chunk_blocks;
    StoredColumn<std::int64_t> m_boxes, m_files;
    StoredColumn<std::uint64_t> m_offsets, m_lengths;
    StoredColumn<std::int64_t>::Cursor m_box_at, m_file_at;
    StoredColumn<std::uint64_t>::Cursor m_offset_at, m_length_at;
    MetadataColumns m_head;
    std::size_t m_next = 0;    // the entry whose rows come next
    std::size_t m_sums_at = 0; // its first checksum in the pool
    bool m_sorted = true;

    // Appends the rows of entries[i] to the chunk columns of m_head and
    // points the entry at them; i in order.
    void append(std::size_t i);

    // append's checks.
    Box box_at(std::size_t first_value, std::size_t nd) const;
    void check_chunks(const MetadataColumns::Entry& em, std::uint64_t elem, const std::string& ew);
    void check_tiling_of(const MetadataColumns::Entry& em, const std::string& ew) const;
    // The constructor's steps, in the order of the checks.
    void read_header(hid_t root);
    EntryTable read_entry_table(hid_t root) const;
    void read_chunk_columns(hid_t root, const EntryTable& t);
    void read_checksums(hid_t root);
    void read_entries(hid_t root, const EntryTable& t);
    MetadataColumns::Entry entry_of(const EntryTable& t, std::size_t i, std::size_t& si) const;
    void read_value(const Handle& values, MetadataColumns::Entry& em) const;
    [[noreturn]] void fail(const std::string& why) const { throw error::FormatError(m_rw + ": " + why); }
};

// Checks the file index `f` of chunk `c` of the entry named in `ew` against
// a file table of `nfiles` names.
void check_file_index(const std::string& ew, std::size_t c, std::int64_t f, std::size_t nfiles)
{
    if (f < 0 || static_cast<std::uint64_t>(f) >= nfiles)
        throw error::FormatError(ew + ": chunk " + std::to_string(c) + " names file " + std::to_string(f) + " of " +
                                 std::to_string(nfiles));
}

GroupRows::GroupRows(hid_t loc, const std::string& where) : m_rw(where + ": /cairn")
{
    if (H5Lexists(loc, "cairn", H5P_DEFAULT) <= 0)
        throw error::FormatError(where + ": no group /cairn (not a Cairn checkpoint)");
    h5::hard_links_only(loc, "/cairn", where + ": /cairn"); // never another file's, nor another object
    Handle root(check_read(H5Gopen2(loc, "cairn", H5P_DEFAULT), where + ": opening /cairn"));
    read_header(root);
    m_head.files = h5::read_string_array_attr(root, "files", m_rw);
    const EntryTable table = read_entry_table(root);
    read_chunk_columns(root, table);
    read_checksums(root);
    read_entries(root, table);
}

// The attributes of the checkpoint as a whole (write_header), the format
// version first.
void GroupRows::read_header(hid_t root)
{
    MetadataColumns& md = m_head;
    const std::string& rw = m_rw;
    const auto fv = h5::read_i64_attr(root, "format_version", rw);
    if (fv.size() != 1)
        fail("attribute 'format_version' is not a single integer");
    if (fv[0] < 1 || fv[0] > Metadata::current_format_version)
        fail("format version " + std::to_string(fv[0]) + ", this Cairn reads versions 1 to " +
             std::to_string(Metadata::current_format_version) +
             (fv[0] > Metadata::current_format_version ? " (written by a newer Cairn)" : ""));
    md.format_version = static_cast<int>(fv[0]);
    md.library_version = h5::read_string_attr(root, "library_version", rw);
    const auto ws = h5::read_i64_attr(root, "world_size", rw);
    if (ws.size() != 1 || ws[0] < 1 || ws[0] > (std::int64_t(1) << 30))
        fail("invalid world_size");
    md.world_size = static_cast<int>(ws[0]);
    md.layout = h5::read_string_attr(root, "layout", rw);
    md.created = h5::read_string_attr(root, "created", rw);
}

// The entry table (write_entry_table), its columns of one length.
EntryTable GroupRows::read_entry_table(hid_t root) const
{
    const std::string& rw = m_rw;
    EntryTable t(0);
    t.names = h5::read_string_array_attr(root, "names", rw);
    const auto count = h5::read_i64_attr(root, "entry_count", rw);
    const std::size_t n = t.names.size();
    if (count.size() != 1 || count[0] != static_cast<std::int64_t>(n))
        fail("entry_count does not match the " + std::to_string(n) + " names (truncated metadata?)");
    t.kinds.resize(n);
    t.dtypes.resize(n);
    t.ndims.resize(n);
    h5::read_raw_array_attr(root, "kinds", kind_enum(), t.kinds.data(), n, rw);
    h5::read_raw_array_attr(root, "dtypes", dtype_enum(), t.dtypes.data(), n, rw);
    h5::read_raw_array_attr(root, "ndims", H5T_NATIVE_UINT8, t.ndims.data(), n, rw);
    t.shapes = h5::read_i64_attr(root, "global_shapes", rw);
    t.counts = h5::read_i64_attr(root, "chunk_counts", rw);
    if (t.counts.size() != n)
        fail("chunk_counts has " + std::to_string(t.counts.size()) + " rows for " + std::to_string(n) + " entries");
    return t;
}

// The per-chunk columns as stored (write_chunk_columns), each entry's rows
// a block of them.
void GroupRows::read_chunk_columns(hid_t root, const EntryTable& t)
{
    const std::size_t n = t.names.size();
    m_box_blocks.resize(n);
    m_chunk_blocks.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (t.counts[i] < 0)
            fail("entry '" + t.names[i] + "': invalid chunk count " + std::to_string(t.counts[i]));
        m_box_blocks[i] = {static_cast<std::uint64_t>(t.counts[i]), 2u * t.ndims[i]};
        m_chunk_blocks[i] = {static_cast<std::uint64_t>(t.counts[i]), 1};
    }
    m_boxes.read(root, "chunk_boxes", m_box_blocks, m_rw);
    m_files.read(root, "chunk_files", m_chunk_blocks, m_rw);
    m_offsets.read(root, "chunk_offsets", m_chunk_blocks, m_rw);
    m_lengths.read(root, "chunk_lengths", m_chunk_blocks, m_rw);
}

// The checksum attributes (write_checksums): the pool, whole.
void GroupRows::read_checksums(hid_t root)
{
    MetadataColumns& md = m_head;
    const auto algorithm = h5::read_string_attr(root, "checksum_algorithm", m_rw);
    const auto block = h5::read_i64_attr(root, "checksum_block_bytes", m_rw);
    md.sums = h5::read_u64_attr(root, "chunk_checksums", m_rw);
    if (block.size() != 1 || block[0] < 0)
        fail("invalid checksum_block_bytes");
    md.checksum_block = static_cast<std::uint64_t>(block[0]);
    if (md.checksum_block && algorithm != checksum_algorithm)
        fail("checksum algorithm '" + algorithm + "', this Cairn knows '" + checksum_algorithm + "'");
}

// The entries of the table, checked, with the values of scalars and
// strings (write_values); every global shape claimed by one.
void GroupRows::read_entries(hid_t root, const EntryTable& t)
{
    const std::size_t n = t.names.size();
    m_head.entries.reserve(n);
    m_elem.reserve(n);
    Handle values;
    if (H5Lexists(root, "values", H5P_DEFAULT) > 0 && h5::hard_links_only(root, "values", m_rw + "/values"))
        values = Handle(check_read(H5Gopen2(root, "values", H5P_DEFAULT), m_rw + "/values"));
    std::size_t si = 0; // cursor into the global shapes
    for (std::size_t i = 0; i < n; ++i) {
        auto em = entry_of(t, i, si);
        if (em.kind == ItemKind::string || em.kind == ItemKind::scalar)
            read_value(values, em);
        m_sorted = m_sorted && (i == 0 || m_head.entries.back().name < em.name);
        m_elem.push_back(em.kind == ItemKind::bytes ? 1 : dtype_size(em.dtype));
        m_head.entries.push_back(std::move(em));
    }
    if (si != t.shapes.size())
        fail("the shape and chunk tables have rows that no entry claims");
}

// Row i of the entry table as an entry (no chunk rows yet, no value), its
// global shape at `si` of the shapes, which it moves past it.
MetadataColumns::Entry GroupRows::entry_of(const EntryTable& t, std::size_t i, std::size_t& si) const
{
    const std::string ew = m_rw + ": entry '" + t.names[i] + "'";
    if (t.kinds[i] > static_cast<std::uint8_t>(ItemKind::string) || !dtype_valid(t.dtypes[i]))
        throw error::FormatError(ew + ": invalid kind or dtype");
    MetadataColumns::Entry em;
    em.name = t.names[i];
    em.kind = static_cast<ItemKind>(t.kinds[i]);
    em.dtype = static_cast<DType>(t.dtypes[i]);
    const std::size_t nd = t.ndims[i];
    if (nd && !has_dims(em.kind))
        throw error::FormatError(ew + ": a " + item_kind_name(em.kind) + " has no shape");
    if (nd > 32 || t.shapes.size() - si < nd)
        throw error::FormatError(ew + ": global_shapes is too short");
    em.global_shape.assign(t.shapes.begin() + static_cast<std::ptrdiff_t>(si),
                           t.shapes.begin() + static_cast<std::ptrdiff_t>(si + nd));
    si += nd;
    for (auto e : em.global_shape)
        if (e < 0)
            throw error::FormatError(ew + ": negative extent in its global shape");
    if (em.kind == ItemKind::bytes && nd != 1)
        throw error::FormatError(ew + ": a bytes entry must have a 1-d global shape");
    const std::uint64_t elem = em.kind == ItemKind::bytes ? 1 : dtype_size(em.dtype);
    if (has_dims(em.kind) && !checked_bytes(em.global_shape, elem))
        throw error::FormatError(ew + ": global shape " + shape_str(em.global_shape) +
                                 " holds more bytes than a 64-bit size");
    if (!has_dims(em.kind) && t.counts[i] != 0)
        throw error::FormatError(ew + ": invalid chunk count " + std::to_string(t.counts[i]));
    em.chunks = static_cast<std::size_t>(t.counts[i]);
    return em;
}

// The value of a scalar or string entry: its attribute in /cairn/values.
void GroupRows::read_value(const Handle& values, MetadataColumns::Entry& em) const
{
    if (!values.valid())
        fail("group 'values' is missing");
    const std::string where = m_rw + "/values";
    if (em.kind == ItemKind::string) {
        em.value = h5::read_string_attr(values, em.name.c_str(), where);
    } else {
        em.value.resize(dtype_size(em.dtype));
        h5::read_raw_attr(values, em.name.c_str(), h5::native_type(static_cast<int>(em.dtype)), em.value.data(), where);
    }
}

std::vector<std::int64_t> GroupRows::files_in_use() const
{
    const auto& md = m_head;
    std::vector<std::int64_t> order, column;
    std::vector<bool> seen(md.files.size(), false);
    StoredColumn<std::int64_t>::Cursor at;
    for (std::size_t i = 0; i < md.entries.size(); ++i) {
        const auto& em = md.entries[i];
        const std::string ew = m_rw + ": entry '" + em.name + "'";
        column.clear();
        m_files.block(at, em.chunks, 1, column, "entry '" + em.name + "'");
        for (std::size_t c = 0; c < column.size(); ++c) {
            const auto f = column[c];
            check_file_index(ew, c, f, md.files.size());
            if (!seen[static_cast<std::size_t>(f)]) {
                seen[static_cast<std::size_t>(f)] = true;
                order.push_back(f);
            }
        }
    }
    return order;
}

void GroupRows::append(std::size_t i)
{
    MetadataColumns& out = m_head;
    if (i != m_next || i >= out.entries.size())
        throw error::Internal("internal: metadata rows asked out of order");
    ++m_next;
    auto& em = out.entries[i];
    const std::string entry = "entry '" + em.name + "'";
    const std::size_t ci = out.chunk_file.size();
    em.first_chunk = ci;
    em.first_coord = out.boxes.size();
    m_boxes.block(m_box_at, m_box_blocks[i].rows, m_box_blocks[i].width, out.boxes, entry);
    m_files.block(m_file_at, em.chunks, 1, out.chunk_file, entry);
    m_offsets.block(m_offset_at, em.chunks, 1, out.chunk_offset, entry);
    m_lengths.block(m_length_at, em.chunks, 1, out.chunk_length, entry);
    out.sum_begin.resize(ci + em.chunks);
    out.sum_count.resize(ci + em.chunks);
    const std::string ew = m_rw + ": " + entry;
    check_chunks(em, m_elem[i], ew);
    if (has_dims(em.kind))
        check_tiling_of(em, ew);
}

// Chunk boxes as stored: offsets then extents, 2 * nd values each.
Box GroupRows::box_at(std::size_t first_value, std::size_t nd) const
{
    const std::int64_t* b = m_head.boxes.data() + first_value;
    return Box{Shape(b, b + nd), Shape(b + nd, b + 2 * nd)};
}

// The chunk rows of `em` just appended: each inside the global shape, in a
// file of the table, of the length its box needs (elements of `elem`
// bytes), with its checksums next in the pool. `ew` names the entry.
void GroupRows::check_chunks(const MetadataColumns::Entry& em, std::uint64_t elem, const std::string& ew)
{
    MetadataColumns& out = m_head;
    const auto& sums = out.sums;
    const std::size_t nd = em.ndim();
    std::size_t ki = m_sums_at;
    for (std::size_t c = 0, k = em.first_chunk, bi = em.first_coord; c < em.chunks; ++c, ++k, bi += 2 * nd) {
        const std::int64_t* off = out.boxes.data() + bi;
        const std::int64_t* ext = off + nd;
        if (!inside(off, ext, em.global_shape.data(), nd))
            throw error::FormatError(ew + ": chunk " + std::to_string(c) + " box " + box_at(bi, nd).str() +
                                     " lies outside the global shape " + shape_str(em.global_shape));
        check_file_index(ew, c, out.chunk_file[k], out.files.size());
        // Inside a global shape whose byte size fits: so does the box's.
        const auto expect = static_cast<std::uint64_t>(volume_of(ext, nd)) * elem;
        if (out.chunk_length[k] != expect)
            throw error::FormatError(ew + ": chunk " + std::to_string(c) + " has length " +
                                     std::to_string(out.chunk_length[k]) + ", its box needs " + std::to_string(expect));
        const auto nsums = checksum_blocks(out.chunk_length[k], checksum_span(ext, nd, elem, out.checksum_block));
        if (sums.size() - ki < nsums)
            throw error::FormatError(ew + ": chunk_checksums is too short");
        out.sum_begin[k] = ki;
        out.sum_count[k] = static_cast<std::uint32_t>(nsums);
        ki += nsums;
    }
    m_sums_at = ki;
}

// The chunks of array or blob `em` tile its global shape: no overlap, every
// element covered. `ew` names the entry.
void GroupRows::check_tiling_of(const MetadataColumns::Entry& em, const std::string& ew) const
{
    const std::size_t nd = em.ndim();
    const auto p = check_tiling(em.global_shape, m_head.boxes.data() + em.first_coord, em.chunks);
    if (p.kind == TilingProblem::overlap)
        throw error::FormatError(ew + ": chunk " + std::to_string(p.first) + " " +
                                 box_at(em.first_coord + 2 * nd * p.first, nd).str() + " overlaps chunk " +
                                 std::to_string(p.second) + " " + box_at(em.first_coord + 2 * nd * p.second, nd).str());
    if (p.kind == TilingProblem::coverage)
        throw error::FormatError(ew + ": its chunks cover " + std::to_string(p.covered) + " of the " +
                                 std::to_string(p.total) + " elements of its global shape " +
                                 shape_str(em.global_shape));
}

void GroupRows::expand_all()
{
    // Room for every row at once (a bound: read() checked the runs' total).
    m_head.boxes.reserve(m_boxes.values_for(m_box_blocks));
    const std::size_t rows = std::min({m_files.values_for(m_chunk_blocks), m_offsets.values_for(m_chunk_blocks),
                                       m_lengths.values_for(m_chunk_blocks)});
    m_head.chunk_file.reserve(rows);
    m_head.chunk_offset.reserve(rows);
    m_head.chunk_length.reserve(rows);
    m_head.sum_begin.reserve(rows);
    m_head.sum_count.reserve(rows);
    for (std::size_t i = 0; i < m_head.entries.size(); ++i)
        append(i);
    finish();
}

void GroupRows::finish()
{
    if (m_next != m_head.entries.size())
        throw error::Internal("internal: metadata rows finished before the last entry");
    m_boxes.finish(m_box_at);
    m_files.finish(m_file_at);
    m_offsets.finish(m_offset_at);
    m_lengths.finish(m_length_at);
    if (m_sums_at != m_head.sums.size())
        throw error::FormatError(m_rw + ": the checksum pool has values that no chunk claims");
}

} // namespace

namespace {

// Every row of `g` in one set of columns, entries in name order.
MetadataColumns expand_all(GroupRows& g, const std::string& where)
{
    g.expand_all();
    MetadataColumns md = g.take_head();
    // In name order, as a cairn::Metadata holds them (the writer's order;
    // a file need not keep it), names distinct.
    if (!g.in_name_order()) {
        std::stable_sort(md.entries.begin(), md.entries.end(),
                         [](const auto& a, const auto& b) { return a.name < b.name; });
        for (std::size_t i = 1; i < md.entries.size(); ++i)
            if (md.entries[i].name == md.entries[i - 1].name)
                throw error::FormatError(where + ": /cairn: entry '" + md.entries[i].name + "': duplicate name");
    }
    return md;
}

} // namespace

MetadataColumns read_metadata_columns_group(hid_t loc, const std::string& where)
{
    GroupRows g(loc, where);
    return expand_all(g, where);
}

std::unique_ptr<ChunkRowSource> read_metadata_rows_group(hid_t loc, const std::string& where)
{
    auto g = std::make_unique<GroupRows>(loc, where);
    if (g->in_name_order())
        return g;
    return std::make_unique<ColumnRows>(expand_all(*g, where));
}

namespace {

// The integrity header in the HDF5 user block (docs/FORMAT.md, section 2.4).
constexpr char k_magic[8] = {'C', 'A', 'I', 'R', 'N', '-', 'M', 'D'};
constexpr unsigned char k_hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr std::uint32_t k_header_version = 1;
constexpr std::size_t k_header_fields = 32; // bytes [0, 32): covered by the header checksum at [32, 40)
constexpr std::size_t k_header_used = 40;
constexpr std::uint64_t k_max_header_bytes = std::uint64_t(1) << 20;

void put_le(unsigned char* p, std::uint64_t v, int n)
{
    for (int i = 0; i < n; ++i)
        p[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::uint64_t get_le(const unsigned char* p, int n)
{
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
        v |= std::uint64_t(p[i]) << (8 * i);
    return v;
}

std::string hex(std::uint64_t v)
{
    char text[24];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
    return text;
}

[[noreturn]] void io_fail(const std::string& path, const std::string& what, int err, bool write)
{
    const auto msg = path + ": " + what + ": " + std::strerror(err);
    if (write)
        throw error::WriteError(msg);
    throw error::ReadError(msg);
}

// Up to `n` bytes at `offset` of `fd` (fewer at the end of the file).
std::size_t read_at(int fd, unsigned char* b, std::size_t n, std::uint64_t offset, const std::string& path, bool write)
{
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::pread(fd, b + got, n - got, static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            io_fail(path, "cannot read", errno, write);
        if (r == 0)
            break;
        got += static_cast<std::size_t>(r);
    }
    return got;
}

// The whole file, read with POSIX calls (no HDF5) into one buffer of the
// size fstat reports (the buffer is never reallocated: a file that grew
// since has its tail appended).
std::vector<unsigned char> read_whole(int fd, const std::string& path, bool write)
{
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        io_fail(path, "cannot stat", errno, write);
    if (!S_ISREG(st.st_mode))
        throw error::FormatError(path + ": not a regular file");
    std::vector<unsigned char> buf(static_cast<std::size_t>(st.st_size));
    buf.resize(read_at(fd, buf.data(), buf.size(), 0, path, write));
    unsigned char more[4096];
    while (buf.size() == static_cast<std::size_t>(st.st_size)) { // grown since fstat: read to the end
        const std::size_t n = read_at(fd, more, sizeof more, buf.size(), path, write);
        if (n == 0)
            break;
        buf.insert(buf.end(), more, more + n);
        st.st_size += static_cast<off_t>(n);
    }
    return buf;
}

// Checks the integrity header of a metadata file's bytes. Returns false for
// a file without one (written before it existed: an HDF5 signature at byte
// 0), which is read unchecked; throws error::FormatError naming `path` for a
// damaged or foreign file.
bool check_header(const std::vector<unsigned char>& b, const std::string& path)
{
    const auto fail = [&](const std::string& why) -> void { throw error::FormatError(path + ": " + why); };
    const std::size_t size = b.size();
    if (size >= 8 && std::memcmp(b.data(), k_hdf5_signature, 8) == 0)
        return false; // no header (an older file of format version 1)
    if (size < 8 || std::memcmp(b.data(), k_magic, 8) != 0) {
        if (size == 0)
            fail("empty file (truncated metadata)");
        if (size < 8 && std::memcmp(b.data(), k_magic, size) == 0)
            fail("truncated metadata file (" + std::to_string(size) + " bytes)");
        fail("not a Cairn metadata file: no Cairn header and no HDF5 signature at its start (a damaged file?)");
    }
    if (size < k_header_used)
        fail("truncated metadata file (" + std::to_string(size) + " bytes, less than its header)");
    const auto stored_hsum = get_le(b.data() + k_header_fields, 8);
    if (checksum(b.data(), k_header_fields) != stored_hsum)
        fail("header checksum mismatch (damaged file)");
    const auto version = get_le(b.data() + 8, 4);
    if (version != k_header_version)
        fail("metadata header version " + std::to_string(version) + ", this Cairn reads version " +
             std::to_string(k_header_version) + " (written by a newer Cairn)");
    const auto hbytes = get_le(b.data() + 12, 4);
    const auto length = get_le(b.data() + 16, 8);
    if (hbytes < 512 || hbytes > k_max_header_bytes || (hbytes & (hbytes - 1)) != 0 || length < hbytes)
        fail("invalid metadata header (header bytes " + std::to_string(hbytes) + ", length " + std::to_string(length) +
             ")");
    if (size < length)
        fail("truncated metadata file (" + std::to_string(size) + " of the " + std::to_string(length) +
             " bytes its header records)");
    if (size > length)
        fail("metadata file of " + std::to_string(size) + " bytes, its header records " + std::to_string(length) +
             " (damaged file)");
    if (!std::all_of(b.begin() + k_header_used, b.begin() + static_cast<std::ptrdiff_t>(hbytes),
                     [](unsigned char c) { return c == 0; }))
        fail("damaged header (its reserved bytes are not zero)");
    const auto stored = get_le(b.data() + 24, 8);
    const auto computed = checksum(b.data() + hbytes, static_cast<std::size_t>(length - hbytes));
    if (stored != computed)
        fail("checksum mismatch (damaged file): stored " + hex(stored) + ", computed " + hex(computed));
    return true;
}

// The integrity header (FORMAT.md 2.4) of a file of `size` bytes whose
// bytes after the user block hash to `sum`.
void make_header(unsigned char (&h)[k_header_used], std::uint64_t size, std::uint64_t sum)
{
    std::memset(h, 0, sizeof h);
    std::memcpy(h, k_magic, 8);
    put_le(h + 8, k_header_version, 4);
    put_le(h + 12, metadata_header_bytes, 4);
    put_le(h + 16, size, 8);
    put_le(h + 24, sum, 8);
    put_le(h + k_header_fields, checksum(h, k_header_fields), 8);
}

// Writes bytes [0, n) of `b` at offset 0 of `fd`.
void write_fully(int fd, const unsigned char* b, std::size_t n, const std::string& path)
{
    std::size_t done = 0;
    while (done < n) {
        const ssize_t w = ::pwrite(fd, b + done, n - done, static_cast<off_t>(done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            throw error::WriteError(path + ": cannot write the metadata: " + std::strerror(w < 0 ? errno : EIO));
        done += static_cast<std::size_t>(w);
    }
}

} // namespace

void seal_metadata_file(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
        throw error::WriteError("cannot open " + path + " to seal it: " + std::strerror(errno));
    try {
        // The file must have a blank user block of metadata_header_bytes
        // (zeros or an earlier header) with the superblock right after it;
        // what follows is hashed as it is read, block by block, so that
        // sealing never holds the whole file in memory.
        const std::size_t hbytes = metadata_header_bytes;
        std::vector<unsigned char> buf(std::size_t(4) << 20);
        std::size_t got = read_at(fd, buf.data(), hbytes + 8, 0, path, true);
        const bool blank =
            got >= 8 && (std::memcmp(buf.data(), k_magic, 8) == 0 ||
                         std::all_of(buf.data(), buf.data() + 8, [](unsigned char c) { return c == 0; }));
        if (!blank || got < hbytes + 8 || std::memcmp(buf.data() + hbytes, k_hdf5_signature, 8) != 0)
            throw error::WriteError(path + ": no HDF5 user block of " + std::to_string(hbytes) +
                                    " bytes for the Cairn header");
        ChunkHasher hash(UINT64_MAX); // one block: the checksum of all the bytes fed
        std::uint64_t size = hbytes;
        while ((got = read_at(fd, buf.data(), buf.size(), size, path, true)) > 0) {
            hash.update(buf.data(), got);
            size += got;
        }
        unsigned char h[k_header_used];
        const auto sums = hash.finish();
        make_header(h, size, sums.empty() ? checksum(nullptr, 0) : sums.front());
        write_fully(fd, h, sizeof h, path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0)
        throw error::WriteError("closing " + path + ": " + std::strerror(errno));
}

std::uint64_t metadata_group_bytes_bound(const MetadataColumns& md)
{
    std::uint64_t b = 0;
    for (const auto& e : md.entries)
        b += e.name.size() + e.value.size() + 8 * e.global_shape.size() + 64;
    for (const auto& f : md.files)
        b += f.size() + 16;
    b += 8 * (md.boxes.size() + md.chunk_file.size() + md.chunk_offset.size() + md.chunk_length.size() +
              md.sum_begin.size() + md.sums.size()) +
         4 * md.sum_count.size() + md.library_version.size() + md.layout.size() + md.created.size();
    // Twice the payload (dense attribute storage, heaps, B-trees, and the
    // aggregators' partly used blocks), 2 KiB of headers per entry (a
    // container's scalars are datasets too), 64 KiB.
    return 2 * b + 2048 * static_cast<std::uint64_t>(md.entries.size()) + (std::uint64_t(64) << 10);
}

namespace {

// The in-memory file of write_metadata_file: HDF5's core driver allocates it
// through these callbacks (H5Pset_file_image_callbacks), and at the close
// hands it over instead of freeing it, complete: the close has written the
// final superblock (H5Fget_file_image of an open file copies a superblock
// whose status flags it clears after their checksum was taken).
struct ImageSink {
    unsigned char* mem = nullptr; ///< the closed file's memory (malloc'd), owned
    std::size_t size = 0;         ///< its allocated size
    unsigned char* live = nullptr;
    std::size_t live_size = 0;
    ~ImageSink() { std::free(mem); }
};
void* sink_malloc(std::size_t size, H5FD_file_image_op_t, void* udata)
{
    auto* s = static_cast<ImageSink*>(udata);
    s->live = static_cast<unsigned char*>(std::malloc(size));
    s->live_size = s->live ? size : 0;
    return s->live;
}
void* sink_memcpy(void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void*)
{
    return std::memcpy(dest, src, size);
}
void* sink_realloc(void* ptr, std::size_t size, H5FD_file_image_op_t, void* udata)
{
    auto* s = static_cast<ImageSink*>(udata);
    void* p = std::realloc(ptr, size);
    if (p) {
        s->live = static_cast<unsigned char*>(p);
        s->live_size = size;
    }
    return p;
}
herr_t sink_free(void* ptr, H5FD_file_image_op_t op, void* udata)
{
    auto* s = static_cast<ImageSink*>(udata);
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr && ptr == s->live) { // the last file closed wins
        std::free(s->mem);
        s->mem = s->live;
        s->size = s->live_size;
    } else {
        std::free(ptr);
    }
    if (ptr == s->live) {
        s->live = nullptr;
        s->live_size = 0;
    }
    return 0;
}
void* sink_udata_copy(void* udata) { return udata; }
herr_t sink_udata_free(void*) { return 0; }

// The end of the HDF5 file in `b` (n bytes, its superblock at `at`): the
// end-of-file address of a version 2 or 3 superblock with 8-byte addresses,
// else n (HDF5 reads a file longer than its end-of-file address).
std::size_t hdf5_file_end(const unsigned char* b, std::size_t n, std::size_t at)
{
    if (n < at + 48 || (b[at + 8] != 2 && b[at + 8] != 3) || b[at + 9] != 8)
        return n;
    const std::uint64_t base = get_le(b + at + 12, 8);
    const std::uint64_t eof = get_le(b + at + 28, 8);
    return base + eof >= at + 48 && base + eof <= n ? static_cast<std::size_t>(base + eof) : n;
}

} // namespace

void write_metadata_file(const std::string& path, const MetadataColumns& md, bool durable)
{
    // HDF5 builds the file in memory (the core driver without a backing
    // store): its close cannot fail for want of space, which would leave the
    // file open inside HDF5 and crash the process at exit. The bytes, sealed,
    // reach the disk through plain POSIX calls that report any error.
    ImageSink sink;
    {
        h5::ErrorSilencer quiet;
        Handle fcpl(check_write(H5Pcreate(H5P_FILE_CREATE), path));
        check_write_status(H5Pset_userblock(fcpl, metadata_header_bytes), path + ": user block");
        Handle fapl(check_write(H5Pcreate(H5P_FILE_ACCESS), path));
        check_write_status(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST), path);
        check_write_status(H5Pset_fapl_core(fapl, std::size_t(64) << 10, 0), path + ": in-memory driver");
        H5FD_file_image_callbacks_t cb{};
        cb.image_malloc = &sink_malloc;
        cb.image_memcpy = &sink_memcpy;
        cb.image_realloc = &sink_realloc;
        cb.image_free = &sink_free;
        cb.udata_copy = &sink_udata_copy;
        cb.udata_free = &sink_udata_free;
        cb.udata = &sink;
        check_write_status(H5Pset_file_image_callbacks(fapl, &cb), path + ": file image callbacks");
        // HDF5 first opens an existing file of the name without creating it:
        // a name below `path` cannot exist, so nothing on disk is read.
        const std::string image = path + "/cairn-metadata-image";
        Handle file(check_write(H5Fcreate(image.c_str(), H5F_ACC_TRUNC, fcpl, fapl), "creating " + path));
        write_metadata_group(file, md);
        if (!file.reset())
            throw error::WriteError("closing " + path + ": " + h5::last_error());
    }
    const std::size_t hbytes = metadata_header_bytes;
    if (!sink.mem || sink.size < hbytes + 8 || std::memcmp(sink.mem + hbytes, k_hdf5_signature, 8) != 0)
        throw error::Internal(path + ": HDF5 left no file image with a user block of " + std::to_string(hbytes) +
                              " bytes (internal error)");
    const std::size_t size = hdf5_file_end(sink.mem, sink.size, hbytes);
    unsigned char* image = sink.mem;
    unsigned char h[k_header_used];
    make_header(h, size, checksum(image + hbytes, size - hbytes));
    std::memcpy(image, h, sizeof h);

    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        throw error::WriteError("cannot create " + path + ": " + std::strerror(errno));
    try {
        if (const int injected = fault::inject(fault::fs_write, path))
            throw error::WriteError(path + ": cannot write the metadata: " + std::strerror(injected));
        write_fully(fd, image, size, path);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0)
        throw error::WriteError("closing " + path + ": " + std::strerror(errno));
    if (durable)
        fs::fsync_path(path);
}

namespace {

// File image callbacks (H5Pset_file_image_callbacks) that share one
// read-only buffer, the std::vector<unsigned char> at `udata`, instead of
// copying it: every allocation of the image is the buffer, every copy a
// no-op, nothing is freed or grown.
void* shared_image_malloc(std::size_t size, H5FD_file_image_op_t, void* udata)
{
    auto* b = static_cast<std::vector<unsigned char>*>(udata);
    return size <= b->size() ? b->data() : nullptr;
}
void* shared_image_memcpy(void* dest, const void* src, std::size_t size, H5FD_file_image_op_t, void*)
{
    if (dest != src) // not ours: a real copy (HDF5 does not ask for one here)
        std::memcpy(dest, src, size);
    return dest;
}
void* shared_image_realloc(void*, std::size_t, H5FD_file_image_op_t, void*) { return nullptr; }
herr_t shared_image_free(void*, H5FD_file_image_op_t, void*) { return 0; }
void* shared_image_udata_copy(void* udata) { return udata; }
herr_t shared_image_udata_free(void*) { return 0; }

// Calls `read` with the metadata file `path` open (read_metadata_columns_file).
template <class Read>
auto with_metadata_file(const std::string& path, Read&& read)
{
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        throw error::NotFound("no checkpoint metadata at " + path);
    std::vector<unsigned char> bytes;
    {
        // A regular file, not a symbolic link to something outside the
        // checkpoint, nor a FIFO that would block the read (fs.hpp).
        const int fd = fs::open_regular_file(path);
        try {
            bytes = read_whole(fd, path, false);
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
    }
    // Everything HDF5 parses below has been checked first (unless the file
    // predates the header), and is parsed from these very bytes.
    const bool sealed = check_header(bytes, path);
    h5::ErrorSilencer quiet;
    Handle fapl(check_read(H5Pcreate(H5P_FILE_ACCESS), path));
    check_read_status(H5Pset_fapl_core(fapl, 1 << 16, 0), path + ": in-memory driver");
    // HDF5 copies an image into the property list, into its copies and into
    // the open file: with these callbacks every copy is `bytes` itself
    // (read-only, and `bytes` outlives the list and the file).
    H5FD_file_image_callbacks_t shared{};
    shared.image_malloc = &shared_image_malloc;
    shared.image_memcpy = &shared_image_memcpy;
    shared.image_realloc = &shared_image_realloc;
    shared.image_free = &shared_image_free;
    shared.udata_copy = &shared_image_udata_copy;
    shared.udata_free = &shared_image_udata_free;
    shared.udata = &bytes;
    check_read_status(H5Pset_file_image_callbacks(fapl, &shared), path + ": file image callbacks");
    check_read_status(H5Pset_file_image(fapl, bytes.data(), bytes.size()), path + ": file image");
    // The core driver refuses to open an image under the name of an existing
    // file: a name below a regular file cannot exist.
    const std::string image = path + "/cairn-metadata-image";
    Handle file(H5Fopen(image.c_str(), H5F_ACC_RDONLY, fapl));
    if (!file.valid()) {
        const auto why = h5::last_error();
        H5Eclear2(H5E_DEFAULT);
        throw error::FormatError(path + (sealed ? ": HDF5 cannot open it: " : ": a damaged HDF5 file (truncated?): ") +
                                 (why.empty() ? "cannot open" : why));
    }
    return read(file);
}

} // namespace

MetadataColumns read_metadata_columns_file(const std::string& path)
{
    return with_metadata_file(path, [&](hid_t file) { return read_metadata_columns_group(file, path); });
}

std::unique_ptr<ChunkRowSource> read_metadata_rows_file(const std::string& path)
{
    return with_metadata_file(path, [&](hid_t file) { return read_metadata_rows_group(file, path); });
}

} // namespace cairn::detail

namespace cairn {

void write_metadata_file(const std::string& path, const Metadata& metadata, bool durable)
{
    detail::write_metadata_file(path, detail::to_columns(metadata), durable);
}

Metadata read_metadata_file(const std::string& path)
{
    return detail::to_metadata(detail::read_metadata_columns_file(path));
}

void testing::reseal_metadata_file(const std::string& path) { detail::seal_metadata_file(path); }

} // namespace cairn
