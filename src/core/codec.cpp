#include "core/codec.hpp"

#include "cairn/errors.hpp"
#include "core/checksum.hpp"
#include "core/tiling.hpp"

#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

namespace cairn::detail {

namespace {
// Integers that are mostly small (indices, extents, lengths, counts) are
// varints (Encoder::uv); magic numbers, checksums and digests are fixed.
// (The magics of save plans and results: codec.hpp.)
constexpr std::uint32_t k_magic_load_plan = 0x434c5033;   // "CLP3": varints, a box number per item
constexpr std::uint32_t k_magic_metadata = 0x434d4433;    // "CMD3": varints, a file table
constexpr std::size_t k_max_ndim = max_encoded_ndim;

// The distinct strings of a sequence, numbered in order of first appearance.
class Table {
public:
    std::uint32_t add(const std::string& s)
    {
        auto [it, fresh] = m_index.try_emplace(s, static_cast<std::uint32_t>(m_strings.size()));
        if (fresh)
            m_strings.push_back(&s);
        return it->second;
    }
    void put(Encoder& e) const
    {
        e.count(m_strings.size());
        for (const auto* s : m_strings)
            e.str(*s);
    }
    std::size_t bytes() const
    {
        std::size_t n = 8;
        for (const auto* s : m_strings)
            n += 8 + s->size();
        return n;
    }

private:
    std::unordered_map<std::string_view, std::uint32_t> m_index;
    std::vector<const std::string*> m_strings;
};

// A table as Table::put writes it: distinct strings.
std::vector<std::string> get_table(Decoder& d, const char* what)
{
    std::vector<std::string> t(d.count(1));
    std::unordered_map<std::string_view, std::size_t> seen;
    seen.reserve(t.size());
    for (auto& s : t) {
        s = d.str();
        if (!seen.emplace(s, 0).second)
            d.fail(std::string(what) + " table lists '" + s + "' twice");
    }
    return t;
}

// References into a table, which must come in the order Table::add numbers
// them (each new string the next index) and use every string: the only
// encoding of a plan, so that what decodes re-encodes to the same bytes.
class TableRefs {
public:
    TableRefs(const std::vector<std::string>& table, const char* what) : m_table(table), m_what(what) {}
    const std::string& get(Decoder& d, std::uint32_t i)
    {
        if (i >= m_table.size() || i > m_next)
            d.fail(std::string(m_what) + " index " + std::to_string(i) +
                   (i >= m_table.size() ? " beyond the table of " + std::to_string(m_table.size()) : " out of order"));
        if (i == m_next)
            ++m_next;
        return m_table[i];
    }
    void done(Decoder& d) const
    {
        if (m_next != m_table.size())
            d.fail(std::string(m_what) + " table with " + std::to_string(m_table.size() - m_next) + " unused entries");
    }

private:
    const std::vector<std::string>& m_table;
    const char* m_what;
    std::size_t m_next = 0;
};
} // namespace

void Encoder::str(const std::string& s)
{
    uv(s.size());
    raw(reinterpret_cast<const std::byte*>(s.data()), s.size());
}

void Encoder::bytes(const Bytes& b)
{
    uv(b.size());
    raw(b.data(), b.size());
}

void Decoder::fail(const std::string& why) const { throw error::FormatError(std::string(m_what) + ": " + why); }

void Decoder::truncated(std::size_t n) const
{
    fail("truncated (needs " + std::to_string(n) + " more bytes, " + std::to_string(m_end - m_p) + " left)");
}

void Decoder::too_wide(std::uint64_t v) const { fail("value " + std::to_string(v) + " exceeds 32 bits"); }

void Decoder::bad_rank(std::size_t n) const
{
    fail("rank " + std::to_string(n) + " exceeds the limit of " + std::to_string(k_max_ndim));
}

void Decoder::negative() const { fail("negative extent or offset"); }

void Decoder::too_many(std::uint64_t n) const
{
    fail("count " + std::to_string(n) + " cannot fit in the " + std::to_string(m_end - m_p) + " bytes left");
}

std::uint64_t Decoder::uv_more()
{
    if (m_end - m_p < 10)
        return uv_long(); // near the end: every byte checked
    const auto* p = reinterpret_cast<const std::uint8_t*>(m_p);
    std::uint64_t v = p[0] & 0x7f;
    for (int i = 1; i < 10; ++i) {
        const std::uint64_t b = p[i];
        v |= (b & 0x7f) << (7 * i);
        if (b < 0x80) {
            if (b == 0 || (i == 9 && b > 1))
                return uv_long(); // refused there, with the reason
            m_p += i + 1;
            return v;
        }
    }
    return uv_long();
}

std::uint64_t Decoder::uv_long()
{
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        need(1);
        const auto b = std::to_integer<std::uint8_t>(*m_p++);
        if (shift == 63 && b > 1)
            fail("varint beyond 64 bits");
        v |= std::uint64_t(b & 0x7f) << shift;
        if (b < 0x80) {
            if (b == 0 && shift > 0) // 0x80 0x00 for 0: one value, one encoding (equal plans are equal bytes)
                fail("varint with a trailing zero byte");
            return v;
        }
    }
    fail("varint longer than 10 bytes");
}

std::string Decoder::str()
{
    const auto n = uv();
    need(n);
    std::string s(reinterpret_cast<const char*>(m_p), static_cast<std::size_t>(n));
    m_p += n;
    return s;
}

Bytes Decoder::bytes()
{
    const auto n = uv();
    need(n);
    Bytes b(m_p, m_p + n);
    m_p += n;
    return b;
}

Shape Decoder::shape()
{
    std::int64_t v[max_encoded_ndim];
    const std::size_t n = shape_into(v);
    return Shape(v, v + n);
}

void Decoder::expect_done()
{
    if (!done())
        fail(std::to_string(m_end - m_p) + " trailing bytes");
}

namespace {

ItemKind get_kind(Decoder& d)
{
    const auto k = d.u8();
    if (k > static_cast<std::uint8_t>(ItemKind::string))
        d.fail("unknown item kind " + std::to_string(k));
    return static_cast<ItemKind>(k);
}

DType get_dtype(Decoder& d)
{
    const auto t = d.u8();
    if (!dtype_valid(t))
        d.fail("unknown dtype code " + std::to_string(t));
    return static_cast<DType>(t);
}

void put_box(Encoder& e, const Box& b)
{
    e.shape(b.offsets);
    e.shape(b.shape);
}

Box get_box(Decoder& d)
{
    Box b;
    b.offsets = d.shape();
    b.shape = d.shape();
    if (b.offsets.size() != b.shape.size())
        d.fail("box with " + std::to_string(b.offsets.size()) + " offsets and " + std::to_string(b.shape.size()) +
               " extents");
    return b;
}

} // namespace

void expect_magic(Decoder& d, std::uint32_t magic)
{
    if (d.u32() != magic)
        d.fail("bad magic number (not a Cairn encoding, or another version)");
}

Bytes encode(const SavePlan& plan)
{
    Table names;
    std::vector<std::uint32_t> index(plan.items.size());
    for (std::size_t i = 0; i < plan.items.size(); ++i)
        index[i] = names.add(plan.items[i].fqn);
    Encoder e;
    std::size_t size = 4 + names.bytes() + 8 + 16 + plan.storage_data.size() + plan.planner_data.size();
    for (const auto& it : plan.items)
        size += 38 + it.value.size() + 8 * (it.global_shape.size() + it.box.offsets.size() + it.box.shape.size());
    e.reserve(size);
    e.u32(magic_save_plan);
    names.put(e);
    e.count(plan.items.size());
    for (std::size_t i = 0; i < plan.items.size(); ++i) {
        const auto& it = plan.items[i];
        e.uv(index[i]);
        e.u8(static_cast<std::uint8_t>(it.kind));
        e.u8(static_cast<std::uint8_t>(it.dtype));
        e.shape(it.global_shape);
        put_box(e, it.box);
        e.uv(it.nbytes);
        e.uv(it.digest);
        e.str(it.value);
        e.uv(it.chunk);
    }
    e.bytes(plan.storage_data);
    e.bytes(plan.planner_data);
    return e.take();
}

SavePlan decode_save_plan(const Bytes& b) { return decode_save_plan(b.data(), b.size()); }

namespace {
// The magic of an encode() form with a name table (a save plan or write
// results), its form without the table, and what it is.
struct NamedForm {
    std::uint32_t with, without;
    const char* what;
};
constexpr NamedForm k_named_forms[] = {{magic_save_plan, magic_save_plan_shared, "save plan"},
                                       {magic_results, magic_results_shared, "write results"}};

const NamedForm* named_form(std::uint32_t magic) noexcept
{
    for (const auto& f : k_named_forms)
        if (magic == f.with || magic == f.without)
            return &f;
    return nullptr;
}

// Where the name table of an encode() form of a save plan or write results ends.
std::size_t name_table_end(const Bytes& b)
{
    const NamedForm* f = named_form(leading_magic(b));
    Decoder d(b, f ? f->what : "save plan");
    expect_magic(d, f ? f->with : magic_save_plan);
    const std::size_t n = d.count(1);
    for (std::size_t k = 0; k < n; ++k)
        (void)d.view_str();
    return static_cast<std::size_t>(d.position() - b.data());
}

void put_u32(Bytes& b, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        b.push_back(std::byte(static_cast<std::uint8_t>(v >> (8 * i))));
}
} // namespace

Bytes strip_name_table(const Bytes& plan)
{
    const std::size_t end = name_table_end(plan); // checks the magic
    Bytes out;
    out.reserve(4 + plan.size() - end);
    put_u32(out, named_form(leading_magic(plan))->without);
    out.insert(out.end(), plan.begin() + static_cast<std::ptrdiff_t>(end), plan.end());
    return out;
}

std::uint32_t leading_magic(const Bytes& b) noexcept
{
    if (b.size() < 4)
        return 0;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
        v |= std::uint32_t(std::to_integer<std::uint8_t>(b[static_cast<std::size_t>(i)])) << (8 * i);
    return v;
}

bool has_shared_names(const Bytes& plan) noexcept
{
    const auto magic = leading_magic(plan);
    const NamedForm* f = named_form(magic);
    return f && magic == f->without;
}

Bytes restore_name_table(const Bytes& shared, const Bytes& with_names)
{
    if (!has_shared_names(shared))
        return shared;
    if (named_form(leading_magic(shared)) != named_form(leading_magic(with_names)))
        throw error::FormatError("restoring a name table: the encodings are of different kinds");
    const std::size_t end = name_table_end(with_names);
    Bytes out;
    out.reserve(end + shared.size() - 4);
    out.insert(out.end(), with_names.begin(), with_names.begin() + static_cast<std::ptrdiff_t>(end));
    out.insert(out.end(), shared.begin() + 4, shared.end());
    return out;
}

std::uint64_t name_table_hash(const Bytes& plan)
{
    const std::size_t end = name_table_end(plan);
    return checksum(plan.data() + 4, end - 4);
}

namespace {

// Walks an encode() form of a save plan item by item. For each item,
// `array(box_begin, box_end)` is told where an array's box and byte count
// lie (the bytes that boxes_form() moves out of the skeleton).
template <class OnArray>
const std::byte* walk_plan_items(Decoder& d, OnArray&& array)
{
    expect_magic(d, magic_save_plan);
    const std::size_t nnames = d.count(1);
    for (std::size_t k = 0; k < nnames; ++k)
        (void)d.view_str();
    const std::size_t n = d.count(save_item_min_bytes);
    std::int64_t v[max_encoded_ndim];
    for (std::size_t i = 0; i < n; ++i) {
        (void)d.uv32();
        const auto kind = d.u8();
        (void)d.u8();
        (void)d.shape_into(v);
        const std::byte* box = d.position();
        const std::size_t ond = d.shape_into(v), snd = d.shape_into(v);
        if (ond != snd)
            d.fail("box with " + std::to_string(ond) + " offsets and " + std::to_string(snd) + " extents");
        (void)d.uv(); // nbytes
        if (kind == static_cast<std::uint8_t>(ItemKind::array))
            array(box, d.position());
        (void)d.uv();
        (void)d.view_str();
        (void)d.uv32();
    }
    return d.position(); // the storage and planner data
}

// Reads a whole encode() form of a save plan and hashes its skeleton:
// everything after the magic but each array's box and byte count, whose
// bytes `array(begin, end)` is given. `tail` is left at the storage and
// planner data.
template <class OnArray>
std::uint64_t hash_skeleton(const Bytes& plan, OnArray&& array, const std::byte*& tail)
{
    Decoder d(plan, "save plan");
    if (leading_magic(plan) != magic_save_plan)
        expect_magic(d, magic_save_plan); // throws (also for fewer than 4 bytes: plan.data() may be null)
    ChunkHasher hash(std::numeric_limits<std::uint64_t>::max()); // one block: XXH3 of all the bytes fed
    const std::byte* from = plan.data() + 4; // the skeleton not yet hashed starts here
    tail = walk_plan_items(d, [&](const std::byte* b, const std::byte* e) {
        hash.update(from, static_cast<std::size_t>(b - from));
        array(b, e);
        from = e;
    });
    (void)d.view_str(); // storage data
    (void)d.view_str(); // planner data
    d.expect_done();
    hash.update(from, static_cast<std::size_t>(tail - from));
    const auto sums = hash.finish();
    return sums.empty() ? checksum(nullptr, 0) : sums.front();
}

} // namespace

std::uint64_t plan_skeleton_hash(const Bytes& plan)
{
    const std::byte* tail = nullptr;
    return hash_skeleton(plan, [](const std::byte*, const std::byte*) {}, tail);
}

Bytes boxes_form(const Bytes& plan, std::uint64_t& skeleton_hash)
{
    std::size_t items = 0; // arrays
    Bytes boxes;
    const std::byte* tail = nullptr;
    skeleton_hash = hash_skeleton(
        plan,
        [&](const std::byte* b, const std::byte* e) {
            boxes.insert(boxes.end(), b, e);
            ++items;
        },
        tail);
    Encoder e;
    e.u32(magic_save_plan_boxes);
    e.count(items);
    Bytes out = e.take();
    out.insert(out.end(), boxes.begin(), boxes.end());
    out.insert(out.end(), tail, plan.data() + plan.size());
    return out;
}

Bytes restore_save_plan(const Bytes& sent, const Bytes& rank0)
{
    if (has_shared_names(sent))
        return restore_name_table(sent, rank0);
    if (leading_magic(sent) != magic_save_plan_boxes)
        return sent;
    Decoder b(sent, "save plan (boxes form)");
    expect_magic(b, magic_save_plan_boxes);
    const std::size_t items = b.count(3);
    Bytes out;
    out.reserve(rank0.size() + sent.size());
    Decoder d(rank0, "save plan");
    const std::byte* from = rank0.data();
    std::size_t k = 0;
    std::int64_t v[max_encoded_ndim];
    const std::byte* tail = walk_plan_items(d, [&](const std::byte* box, const std::byte* end) {
        if (k++ == items)
            b.fail("fewer arrays than rank 0's plan has");
        out.insert(out.end(), from, box);
        const std::byte* mine = b.position();
        (void)b.shape_into(v);
        (void)b.shape_into(v);
        (void)b.uv();
        out.insert(out.end(), mine, b.position());
        from = end;
    });
    if (k != items)
        b.fail(std::to_string(items) + " arrays where rank 0's plan has " + std::to_string(k));
    out.insert(out.end(), from, tail);
    out.insert(out.end(), b.position(), sent.data() + sent.size()); // its storage and planner data
    (void)b.view_str();
    (void)b.view_str();
    b.expect_done();
    return out;
}

SavePlan decode_save_plan(const std::byte* data, std::size_t size)
{
    Decoder d(data, size, "save plan");
    expect_magic(d, magic_save_plan);
    const auto names = get_table(d, "name");
    TableRefs name_refs(names, "name");
    SavePlan p;
    p.items.resize(d.count(save_item_min_bytes));
    for (auto& it : p.items) {
        it.fqn = name_refs.get(d, d.uv32());
        it.kind = get_kind(d);
        it.dtype = get_dtype(d);
        it.global_shape = d.shape();
        it.box = get_box(d);
        it.nbytes = d.uv();
        it.digest = d.uv();
        it.value = d.str();
        it.chunk = d.uv32();
    }
    name_refs.done(d);
    p.storage_data = d.bytes();
    p.planner_data = d.bytes();
    d.expect_done();
    return p;
}

Bytes encode(const LoadPlan& plan)
{
    Encoder e;
    e.u32(k_magic_load_plan);
    e.count(plan.items.size());
    for (const auto& it : plan.items) {
        e.str(it.fqn);
        e.u8(static_cast<std::uint8_t>(it.kind));
        e.uv(it.chunk);
        put_box(e, it.box);
        e.uv(it.shard);
    }
    e.bytes(plan.storage_data);
    e.bytes(plan.planner_data);
    return e.take();
}

LoadPlan decode_load_plan(const Bytes& b)
{
    Decoder d(b, "load plan");
    expect_magic(d, k_magic_load_plan);
    LoadPlan p;
    p.items.resize(d.count(6)); // name, kind, chunk, two shapes, shard: a byte each at least
    for (auto& it : p.items) {
        it.fqn = d.str();
        it.kind = get_kind(d);
        it.chunk = d.uv32();
        it.box = get_box(d);
        it.shard = d.uv32();
    }
    p.storage_data = d.bytes();
    p.planner_data = d.bytes();
    d.expect_done();
    return p;
}

Bytes encode(const std::vector<WriteResult>& results)
{
    Table names, paths;
    std::vector<std::uint32_t> index(2 * results.size());
    std::size_t size = 4 + 8;
    for (std::size_t i = 0; i < results.size(); ++i) {
        index[2 * i] = names.add(results[i].fqn);
        index[2 * i + 1] = paths.add(results[i].storage.path);
        size += 36 + 8 * results[i].storage.checksums.size();
    }
    Encoder e;
    e.reserve(size + names.bytes() + paths.bytes());
    e.u32(magic_results);
    names.put(e);
    paths.put(e);
    e.count(results.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        e.uv(index[2 * i]);
        e.uv(r.chunk);
        e.uv(index[2 * i + 1]);
        e.uv(r.storage.offset);
        e.uv(r.storage.length);
        e.count(r.storage.checksums.size());
        for (auto c : r.storage.checksums)
            e.u64(c);
    }
    return e.take();
}

std::vector<WriteResult> decode_write_results(const Bytes& b)
{
    Decoder d(b, "write results");
    expect_magic(d, magic_results);
    const auto names = get_table(d, "name");
    const auto paths = get_table(d, "path");
    TableRefs name_refs(names, "name"), path_refs(paths, "path");
    std::vector<WriteResult> rs(d.count(result_min_bytes));
    for (auto& r : rs) {
        r.fqn = name_refs.get(d, d.uv32());
        r.chunk = d.uv32();
        r.storage.path = path_refs.get(d, d.uv32());
        r.storage.offset = d.uv();
        r.storage.length = d.uv();
        r.storage.checksums.resize(d.count(8));
        for (auto& c : r.storage.checksums)
            c = d.u64();
    }
    name_refs.done(d);
    path_refs.done(d);
    d.expect_done();
    return rs;
}

namespace {

// The checkpoint-wide fields of a metadata encoding, its entry count and
// its file table, from Metadata or MetadataColumns.
template <class M>
void put_metadata_header(Encoder& e, const M& md, const Table& files)
{
    e.u32(k_magic_metadata);
    e.u32(static_cast<std::uint32_t>(md.format_version));
    e.str(md.library_version);
    e.u32(static_cast<std::uint32_t>(md.world_size));
    e.str(md.layout);
    e.str(md.created);
    e.u64(md.checksum_block);
    e.uv(md.entries.size());
    files.put(e);
}

// What every entry starts with, then its chunk count.
void put_entry_head(Encoder& e, const std::string& name, ItemKind kind, DType dtype, const Shape& shape,
                    const std::string& value, std::size_t chunks)
{
    e.str(name);
    e.u8(static_cast<std::uint8_t>(kind));
    e.u8(static_cast<std::uint8_t>(dtype));
    e.shape(shape);
    e.str(value);
    e.count(chunks);
}

void put_sums(Encoder& e, const std::uint64_t* sums, std::size_t n)
{
    e.count(n);
    for (std::size_t i = 0; i < n; ++i)
        e.u64(sums[i]);
}

const std::string k_no_file; // a chunk not written (columns: file -1): the empty path, as in to_metadata()

} // namespace

// The content to frame, as columns whose rows may come entry by entry
// (Cairn's readers) or as structs (other readers), and where the framing
// stands.
struct MetadataFrames::State {
    std::unique_ptr<ChunkRowSource> own_rows;
    Metadata own_structs;
    ChunkRowSource* rows = nullptr; // one of these two
    const Metadata* structs = nullptr;
    std::map<std::string, EntryMeta>::const_iterator it; // structs: the next entry
    std::size_t next = 0;                                // columns: the next entry
    Table files;                                         // refers to the content's strings
    std::vector<std::uint32_t> file_slot; // columns: the table index of file f at slot f + 1 (slot 0: not written)
    bool started = false;

    // The files in order of first use.
    void index_files()
    {
        if (structs) {
            for (const auto& [fqn, e] : structs->entries)
                for (const auto& c : e.chunks)
                    files.add(c.storage.path);
            it = structs->entries.begin();
            return;
        }
        const MetadataColumns& cols = rows->head();
        file_slot.assign(cols.files.size() + 1, std::numeric_limits<std::uint32_t>::max());
        for (const auto f : rows->files_in_use())
            file_slot[static_cast<std::size_t>(f + 1)] =
                files.add(f < 0 ? k_no_file : cols.files[static_cast<std::size_t>(f)]);
    }
    bool done() const { return structs ? it == structs->entries.end() : next == rows->head().entries.size(); }
    void put_header(Encoder& e) const
    {
        if (structs)
            put_metadata_header(e, *structs, files);
        else
            put_metadata_header(e, rows->head(), files);
    }
    void put_next_entry(Encoder& e)
    {
        if (structs) {
            const auto& [fqn, em] = *it++;
            put_entry_head(e, fqn, em.kind, em.dtype, em.global_shape, em.value, em.chunks.size());
            for (const auto& c : em.chunks) {
                put_box(e, c.box);
                e.uv(files.add(c.storage.path)); // known: its index
                e.uv(c.storage.offset);
                e.uv(c.storage.length);
                put_sums(e, c.storage.checksums.data(), c.storage.checksums.size());
            }
            return;
        }
        rows->rows(next);
        const MetadataColumns& cols = rows->head();
        const auto& em = cols.entries[next++];
        put_entry_head(e, em.name, em.kind, em.dtype, em.global_shape, em.value, em.chunks);
        const std::size_t nd = em.ndim();
        for (std::size_t j = 0; j < em.chunks; ++j) {
            const std::int64_t* b = cols.boxes.data() + em.first_coord + 2 * nd * j;
            e.shape(b, nd);
            e.shape(b + nd, nd);
            const std::size_t k = em.first_chunk + j;
            e.uv(file_slot[static_cast<std::size_t>(cols.chunk_file[k] + 1)]);
            e.uv(cols.chunk_offset[k]);
            e.uv(cols.chunk_length[k]);
            put_sums(e, cols.sums.data() + cols.sum_begin[k], cols.sum_count[k]);
        }
    }
    // The next frame (MetadataFrames::next).
    Bytes frame(std::size_t max_bytes)
    {
        Encoder e; // grows by doubling: reserving a whole frame up front zero-fills 8 MiB for a tiny load
        if (!started) {
            put_header(e);
            started = true;
        } else if (done()) {
            return {};
        }
        while (!done()) {
            put_next_entry(e);
            if (e.size() >= max_bytes)
                break;
        }
        if (rows && done())
            rows->finish(); // once: the next call returns no frame
        return e.take();
    }
};

MetadataFrames::MetadataFrames(MetadataColumns md) : MetadataFrames(std::make_unique<ColumnRows>(std::move(md))) {}

MetadataFrames::MetadataFrames(std::unique_ptr<ChunkRowSource> rows) : m(std::make_unique<State>())
{
    m->own_rows = std::move(rows);
    m->rows = m->own_rows.get();
    m->index_files();
}

MetadataFrames::MetadataFrames(Metadata md) : m(std::make_unique<State>())
{
    m->own_structs = std::move(md);
    m->structs = &m->own_structs;
    m->index_files();
}

MetadataFrames::~MetadataFrames() = default;
MetadataFrames::MetadataFrames(MetadataFrames&&) noexcept = default;
MetadataFrames& MetadataFrames::operator=(MetadataFrames&&) noexcept = default;

Bytes MetadataFrames::next(std::size_t max_bytes) { return m->frame(max_bytes); }

Bytes encode(const Metadata& md)
{
    MetadataFrames::State s;
    s.structs = &md;
    s.index_files();
    return s.frame(std::numeric_limits<std::size_t>::max());
}

Bytes encode(const MetadataColumns& md)
{
    ColumnRows rows(&md);
    MetadataFrames::State s;
    s.rows = &rows;
    s.index_files();
    return s.frame(std::numeric_limits<std::size_t>::max());
}

struct MetadataDecoder::State {
    WantedBox wanted;
    KeepChunk keep;
    Metadata md;
    bool started = false;
    std::uint64_t count = 0; // entries, as the header says
    std::uint64_t seen = 0;
    std::vector<std::string> files;
    std::optional<TableRefs> file_refs;

    void header(Decoder& d)
    {
        expect_magic(d, k_magic_metadata);
        md.format_version = static_cast<int>(d.u32());
        md.library_version = d.str();
        md.world_size = static_cast<int>(d.u32());
        md.layout = d.str();
        md.created = d.str();
        md.checksum_block = d.u64();
        count = d.uv();
        files = get_table(d, "file");
        file_refs.emplace(files, "file");
        started = true;
    }

    void entry(Decoder& d)
    {
        std::int64_t off[max_encoded_ndim], ext[max_encoded_ndim];
        auto fqn = d.str();
        EntryMeta em;
        em.kind = get_kind(d);
        em.dtype = get_dtype(d);
        em.global_shape = d.shape();
        em.value = d.str();
        const std::size_t nchunks = d.count(6); // two shapes, file, offset, length, checksum count
        // Without a filter (or, by box, for entries other than arrays) every chunk.
        const bool all = !keep && (!wanted || em.kind != ItemKind::array);
        const Box* want = all || keep ? nullptr : wanted(fqn);
        if (all)
            em.chunks.reserve(nchunks);
        for (std::size_t k = 0; k < nchunks; ++k) {
            const std::size_t nd = d.shape_into(off);
            const std::size_t ne = d.shape_into(ext);
            if (ne != nd)
                d.fail("box with " + std::to_string(nd) + " offsets and " + std::to_string(ne) + " extents");
            const std::string& path = file_refs->get(d, d.uv32());
            const std::uint64_t offset = d.uv();
            const std::uint64_t length = d.uv();
            const bool kept = keep ? keep(fqn, k, length) || k == 0
                                   : all || k == 0 ||
                                         (want && (want->ndim() != nd ||
                                                   overlaps(off, ext, want->offsets.data(), want->shape.data(), nd)));
            const std::size_t nsums = d.count(8);
            if (!kept) {
                d.skip_to(d.position() + 8 * nsums); // count(8) checked that they are there
                continue;
            }
            ChunkMeta& c = em.chunks.emplace_back();
            c.box.offsets.assign(off, off + nd);
            c.box.shape.assign(ext, ext + nd);
            c.storage.path = path;
            c.storage.offset = offset;
            c.storage.length = length;
            c.storage.checksums.resize(nsums);
            for (auto& s : c.storage.checksums)
                s = d.u64();
        }
        if (!md.entries.emplace(std::move(fqn), std::move(em)).second)
            d.fail("duplicate entry name");
    }
};

MetadataDecoder::MetadataDecoder(WantedBox wanted) : m(std::make_unique<State>()) { m->wanted = std::move(wanted); }

MetadataDecoder::MetadataDecoder(KeepChunk keep) : m(std::make_unique<State>()) { m->keep = std::move(keep); }

MetadataDecoder::~MetadataDecoder() = default;

void MetadataDecoder::add(const std::byte* data, std::size_t size)
{
    Decoder d(data, size, "metadata");
    if (!m->started)
        m->header(d);
    while (!d.done()) {
        if (m->seen == m->count)
            d.fail("trailing bytes after the " + std::to_string(m->count) + " entries");
        m->entry(d);
        ++m->seen;
    }
}

Metadata MetadataDecoder::finish()
{
    Decoder end(nullptr, 0, "metadata");
    if (!m->started)
        end.fail("no header");
    if (m->seen != m->count)
        end.fail("truncated: " + std::to_string(m->seen) + " entries of the entry count " + std::to_string(m->count));
    m->file_refs->done(end);
    return std::move(m->md);
}

Metadata decode_metadata(const Bytes& b) { return decode_metadata(b, WantedBox{}); }

Metadata decode_metadata(const Bytes& b, const WantedBox& wanted)
{
    MetadataDecoder dec(wanted);
    dec.add(b);
    return dec.finish();
}

std::uint64_t hash64(const void* data, std::size_t size) noexcept
{
    // 8 bytes per step, multiply-xorshift mixing; tail bytes folded in last.
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (size * 0xC2B2AE3D27D4EB4Full);
    std::size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        w *= 0x87C37B91114253D5ull;
        w = (w << 31) | (w >> 33);
        h ^= w * 0x4CF5AD432745937Full;
        h = ((h << 27) | (h >> 37)) * 5 + 0x52DCE729;
    }
    std::uint64_t t = 0;
    for (std::size_t k = 0; i + k < size; ++k)
        t |= std::uint64_t(p[i + k]) << (8 * k);
    h ^= t * 0x87C37B91114253D5ull;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

} // namespace cairn::detail
