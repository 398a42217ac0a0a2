#include "plan/columnar.hpp"

#include "cairn/config.hpp"
#include "cairn/errors.hpp"
#include "core/metadata_adapter.hpp"
#include "core/tiling.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string_view>
#include <unordered_map>

namespace cairn::detail {

namespace {

constexpr std::uint32_t k_magic_assignment = 0x43534132; // "CSA2": varints
constexpr std::uint32_t not_kept = UINT32_MAX;

// std::equal of a few coordinates: a loop, not a call of memcmp per box
// (millions of boxes of two to four values each).
inline bool same_values(const std::int64_t* a, const std::int64_t* b, std::size_t n) noexcept
{
    for (std::size_t k = 0; k < n; ++k)
        if (a[k] != b[k])
            return false;
    return true;
}

// string_view's == without a call of memcmp for the usual empty values.
inline bool same_text(std::string_view a, std::string_view b) noexcept
{
    return a.size() == b.size() && (a.empty() || a == b);
}

// Interns the names of each plan's or result's name table: a table of the
// same bytes as the previous one takes its ids as a whole (one memcmp), and
// otherwise a name equal to the previous table's name at the same position
// takes its id without hashing (ranks list their names in the same order).
class NameTable {
public:
    // Reads a table; ids[k] is the id of name k (`lookup(view)` for a name
    // not matched by position). Returns false when lookup does.
    template <class Lookup>
    bool read(Decoder& d, Lookup&& lookup)
    {
        // The same bytes as the previous table: the same names, the same ids.
        const std::byte* start = d.position();
        if (m_prev_bytes > 0 && d.left() >= m_prev_bytes && std::memcmp(start, m_prev_start, m_prev_bytes) == 0) {
            d.skip_to(start + m_prev_bytes);
            return true;
        }
        m_prev_bytes = 0;
        const std::size_t n = d.count(1);
        m_views.resize(n);
        m_ids.resize(n);
        for (std::size_t k = 0; k < n; ++k) {
            const std::string_view name = d.view_str();
            if (k < m_prev_n && m_views[k] == name)
                continue; // same name, same id
            m_views[k] = name;
            m_ids[k] = lookup(name);
            if (m_ids[k] == not_kept)
                return false;
        }
        m_prev_n = n;
        m_prev_start = start;
        m_prev_bytes = static_cast<std::size_t>(d.position() - start);
        return true;
    }
    std::size_t size() const noexcept { return m_prev_n; }
    std::string_view name(std::size_t k) const noexcept { return m_views[k]; }
    std::uint32_t id(std::size_t k) const noexcept { return m_ids[k]; }

private:
    std::vector<std::string_view> m_views; // into the previous inputs, which stay alive
    std::vector<std::uint32_t> m_ids;
    std::size_t m_prev_n = 0;
    const std::byte* m_prev_start = nullptr; // the previous table's bytes (its input stays alive)
    std::size_t m_prev_bytes = 0;
};

// One item of an encoded local plan, after its name index, as read_item
// reads it.
struct PlanItem {
    std::uint8_t kind = 0, dtype = 0;
    std::size_t gnd = 0, ond = 0, snd = 0; // dimensions of the global shape, the box's offsets, its extents
    std::int64_t g[max_encoded_ndim], o[max_encoded_ndim], s[max_encoded_ndim];
    std::uint64_t nbytes = 0, digest = 0;
    std::string_view value; // into the gathered plan
};

// Reads an item's fields (the chunk it skips: the global plan sets it).
// False on a kind or dtype the format does not have, or a box whose
// offsets and extents differ in number.
__attribute__((always_inline)) inline bool read_item(Decoder& d, PlanItem& it)
{
    it.kind = d.u8();
    it.dtype = d.u8();
    if (it.kind > static_cast<std::uint8_t>(ItemKind::string) || !dtype_valid(it.dtype))
        return false;
    it.gnd = d.shape_into(it.g);
    it.ond = d.shape_into(it.o);
    it.snd = d.shape_into(it.s);
    it.nbytes = d.uv();
    it.digest = d.uv();
    it.value = d.view_str();
    (void)d.uv32();
    return it.ond == it.snd;
}

} // namespace

struct ColumnarSavePlan::Impl {
    struct Entry {
        std::string_view name;
        ItemKind kind = ItemKind::array;
        DType dtype = DType::u8;
        std::size_t nd = 0;
        std::size_t shape_at = 0; // global shape in `shapes`
        std::size_t box_at = 0;   // bytes: rank 0's box in `shapes` (offsets, extents)
        std::uint64_t nbytes = 0;
        std::uint64_t digest = 0;
        std::string_view value;
        std::size_t coords = 0;   // arrays: boxes in `coords`, rank r's at coords + r * 2 * nd; blobs: rank 0's box
        std::size_t last_rank = SIZE_MAX;
        const WriteItem* first = nullptr; // from structs: rank 0's item
        // From structs, an array some rank lists once per box: its table has
        // a row per item (`rows`, rank by rank), not one per rank; row k is
        // of rank multi_rank[row0 + k].
        bool multi = false;
        std::size_t rows = 0; // items of the entry over all ranks
        std::size_t row0 = 0;
    };
    struct Replica {
        std::uint32_t entry;
        std::uint32_t chunk;
        std::uint64_t nbytes;
        std::size_t holders_at; // in `holders`
        std::size_t holders_n;
    };

    std::size_t nranks = 0;
    std::vector<Entry> entries;
    std::unordered_map<std::string_view, std::uint32_t> index;
    std::vector<std::int64_t> shapes;
    std::vector<std::uint32_t> ids;    // ids[r * nentries + i]: entry of item i of rank r
    std::vector<std::uint32_t> order;  // entry ids in name order
    std::vector<std::int64_t> coords;  // the box table (lay_out_boxes)
    std::vector<std::pair<std::string, std::string>> extra; // storage, planner data per rank
    // From structs: rank r's items are ids[item_at[r], item_at[r + 1]); an
    // item of a multi entry is row item_row[k] of its table.
    std::vector<std::size_t> item_at;
    std::vector<std::uint32_t> item_row;
    std::vector<std::uint32_t> multi_rank; // the rank of each row of the multi entries

    // Rows of an entry's box table (an array: one per rank, or per item).
    std::size_t nrows(const Entry& e) const noexcept { return e.multi ? e.rows : nranks; }
    // The rank whose box is row `row` of array `e`.
    std::uint32_t rank_of_row(const Entry& e, std::size_t row) const noexcept
    {
        return e.multi ? multi_rank[e.row0 + row] : static_cast<std::uint32_t>(row);
    }
    // Where chunk_of holds the chunk written by row `row` of entry `id`.
    std::size_t chunk_slot(std::uint32_t id, std::size_t row) const noexcept
    {
        const Entry& e = entries[id];
        return e.multi ? entries.size() * nranks + e.row0 + row : id * nranks + row;
    }

    // plan()
    std::vector<std::uint32_t> name_rank;  // entry id -> position in name order
    std::vector<char> by_rank;             // [id]: an array whose chunk r is rank r's own box, for every rank r
    std::vector<std::uint32_t> chunk_of;   // [chunk_slot(id, row)]: the chunk row `row` (rank r's box: row r) is
                                           // written as, if its rank writes it itself, or not_kept; empty while
                                           // every array is by_rank (the usual save: no table of a row per chunk)
    // The chunk that rank r writes itself of entry id, or not_kept.
    std::uint32_t own_chunk(std::uint32_t id, std::size_t r) const noexcept
    {
        if (by_rank[id])
            return static_cast<std::uint32_t>(r);
        return chunk_of.empty() ? not_kept : chunk_of[id * nranks + r];
    }
    std::vector<std::uint32_t> holders;
    std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> replicas_of; // per rank: (entry, chunk)
    std::vector<std::uint32_t> slot, pos;  // encode_final scratch
    std::uint64_t total = 0;
    MetadataColumns md;

    bool ingest_rank(std::size_t r, const Bytes& plan, std::vector<std::int64_t>& first_boxes, NameTable& names);
    std::uint32_t intern(std::string_view name);
    std::uint32_t known(std::string_view name) const;
    bool ingest_items(std::size_t r, Decoder& d, const NameTable& names, std::vector<std::int64_t>& first_boxes);
    bool take_first_item(Entry& e, const PlanItem& it, std::vector<std::int64_t>& first_boxes);
    __attribute__((always_inline)) inline bool match_item(std::size_t r, const Entry& e, const PlanItem& it);
    void place_first_boxes(const std::vector<std::int64_t>& first_boxes);
    bool ingest_boxes(std::size_t r, Decoder& d);
    std::size_t lay_out_boxes();
    bool ingest_structs(const std::vector<SavePlan>& plans);
    bool struct_entries(const std::vector<WriteItem>& items0);
    bool struct_rank(const std::vector<SavePlan>& plans, std::size_t r, bool& multi);
    bool struct_item(std::size_t r, const Entry& e, const WriteItem& it);
    void lay_out_multi(const std::vector<SavePlan>& plans);
    void copy_struct_boxes(const std::vector<SavePlan>& plans);
    void take_finals(std::vector<SavePlan>& plans);
    void take_finals_multi(std::vector<SavePlan>& plans);
    struct Planning; // one run of plan()
};

ColumnarSavePlan::ColumnarSavePlan() : m(std::make_unique<Impl>()) {}
ColumnarSavePlan::~ColumnarSavePlan() = default;

bool ColumnarSavePlan::Impl::ingest_rank(std::size_t r, const Bytes& plan, std::vector<std::int64_t>& first_boxes,
                                         NameTable& names)
{
    Decoder d(plan, "save plan");
    const std::uint32_t magic = d.u32();
    const bool first = r == 0;
    if (magic == magic_save_plan_boxes)
        return !first && ingest_boxes(r, d);
    if (magic != magic_save_plan && (first || magic != magic_save_plan_shared))
        return false;
    // A plan sent without its name table uses rank 0's, which `names` holds
    // (every rank's table was agreed to be the same bytes).
    if (magic != magic_save_plan_shared &&
        !names.read(d, [&](std::string_view name) { return first ? intern(name) : known(name); }))
        return false;
    const std::size_t nitems = d.count(save_item_min_bytes);
    if (nitems != entries.size())
        return false; // unused or repeated names (rank 0), or not rank 0's entries
    if (first)
        ids.resize(nranks * nitems);
    if (!ingest_items(r, d, names, first_boxes))
        return false;
    const std::string_view storage_data = d.view_str();
    const std::string_view planner_data = d.view_str();
    if (!d.done())
        return false;
    extra[r] = {std::string(storage_data), std::string(planner_data)};
    if (first)
        place_first_boxes(first_boxes);
    return true;
}

// The id of a name of rank 0's table: a new entry for each distinct name.
// not_kept when the ids run out.
std::uint32_t ColumnarSavePlan::Impl::intern(std::string_view name)
{
    auto [it, fresh] = index.try_emplace(name, static_cast<std::uint32_t>(entries.size()));
    if (fresh) {
        if (entries.size() >= UINT32_MAX - 1)
            return not_kept;
        entries.emplace_back();
        entries.back().name = name;
    }
    return it->second;
}

// The id of a name of another rank's table; not_kept for a name rank 0 lacks.
std::uint32_t ColumnarSavePlan::Impl::known(std::string_view name) const
{
    const auto it = index.find(name);
    return it == index.end() ? not_kept : it->second;
}

// The items of rank r's plan, one per entry: rank 0's define the entries,
// the others' must match them. False on anything the columnar form does
// not take, or when an entry of the name table has no item.
bool ColumnarSavePlan::Impl::ingest_items(std::size_t r, Decoder& d, const NameTable& names,
                                          std::vector<std::int64_t>& first_boxes)
{
    const std::size_t nentries = entries.size();
    std::uint32_t* mine = ids.data() + r * nentries;
    PlanItem item;
    std::size_t next = 0; // names are referenced in table order (codec.cpp's canonical form)
    for (std::size_t i = 0; i < nentries; ++i) {
        const std::uint32_t k = d.uv32();
        if (k >= names.size() || k > next)
            return false;
        next += k == next;
        const std::uint32_t id = names.id(k);
        Entry& e = entries[id];
        if (!read_item(d, item) || e.last_rank == r)
            return false; // malformed; twice in one plan
        e.last_rank = r;
        mine[i] = id;
        if (r == 0 ? !take_first_item(e, item, first_boxes) : !match_item(r, e, item))
            return false;
    }
    return next == names.size();
}

// Rank 0's item of entry `e`: what the entry is. An array's box goes to
// `first_boxes` until the box table is laid out (place_first_boxes).
bool ColumnarSavePlan::Impl::take_first_item(Entry& e, const PlanItem& it, std::vector<std::int64_t>& first_boxes)
{
    e.kind = static_cast<ItemKind>(it.kind);
    e.dtype = static_cast<DType>(it.dtype);
    e.nd = it.gnd;
    e.shape_at = shapes.size();
    shapes.insert(shapes.end(), it.g, it.g + it.gnd);
    e.nbytes = it.nbytes;
    e.digest = it.digest;
    e.value = it.value;
    if (e.kind != ItemKind::array && e.kind != ItemKind::bytes)
        return true;
    if (it.ond != it.gnd)
        return false;
    e.box_at = shapes.size();
    shapes.insert(shapes.end(), it.o, it.o + it.ond);
    shapes.insert(shapes.end(), it.s, it.s + it.snd);
    if (e.kind == ItemKind::array) {
        e.coords = first_boxes.size();
        first_boxes.insert(first_boxes.end(), it.o, it.o + it.ond);
        first_boxes.insert(first_boxes.end(), it.s, it.s + it.snd);
    }
    return true;
}

// Another rank's item of entry `e`, which must be rank 0's but for an
// array's box (then copied into the box table, row r).
bool ColumnarSavePlan::Impl::match_item(std::size_t r, const Entry& e, const PlanItem& it)
{
    if (static_cast<ItemKind>(it.kind) != e.kind)
        return false;
    const auto dtype = static_cast<DType>(it.dtype);
    switch (e.kind) {
    case ItemKind::array: {
        // As rank 0's item: the final item copies everything but the box.
        if (dtype != e.dtype || it.gnd != e.nd || it.ond != e.nd ||
            !same_values(it.g, shapes.data() + e.shape_at, it.gnd) || it.digest != e.digest ||
            !same_text(it.value, e.value))
            return false;
        std::int64_t* c = coords.data() + e.coords + r * 2 * e.nd;
        for (std::size_t j = 0; j < it.ond; ++j) { // a loop: std::copy calls memmove for two values
            c[j] = it.o[j];
            c[e.nd + j] = it.s[j];
        }
        return true;
    }
    case ItemKind::scalar: return dtype == e.dtype && same_text(it.value, e.value);
    case ItemKind::string: return same_text(it.value, e.value);
    case ItemKind::bytes:
        // Every holder's item is rank 0's (the final item is a copy of it).
        return it.nbytes == e.nbytes && it.digest == e.digest && same_text(it.value, e.value) && dtype == e.dtype &&
               it.gnd == e.nd && it.ond == e.nd && same_values(it.g, shapes.data() + e.shape_at, it.gnd) &&
               same_values(it.o, shapes.data() + e.box_at, it.ond) &&
               same_values(it.s, shapes.data() + e.box_at + it.ond, it.snd);
    }
    return false;
}

// Once rank 0's plan is read and the entries known: the box table, rank 0's
// boxes in it.
void ColumnarSavePlan::Impl::place_first_boxes(const std::vector<std::int64_t>& first_boxes)
{
    std::vector<std::size_t> from(entries.size());
    for (std::size_t k = 0; k < entries.size(); ++k)
        from[k] = entries[k].coords;
    coords.assign(lay_out_boxes(), 0);
    for (std::size_t k = 0; k < entries.size(); ++k) {
        const auto& e = entries[k];
        if (e.kind == ItemKind::array)
            std::copy(first_boxes.data() + from[k], first_boxes.data() + from[k] + 2 * e.nd, coords.data() + e.coords);
        else if (e.kind == ItemKind::bytes)
            std::copy(shapes.data() + e.box_at, shapes.data() + e.box_at + 2 * e.nd, coords.data() + e.coords);
    }
}

// A plan sent as boxes_form(): rank 0's items, in rank 0's order, with
// their own array boxes (the rest was agreed equal to rank 0's by hash).
bool ColumnarSavePlan::Impl::ingest_boxes(std::size_t r, Decoder& d)
{
    const std::size_t nentries = entries.size();
    const std::size_t narrays = d.count(3);
    const std::uint32_t* first = ids.data();
    std::uint32_t* mine = ids.data() + r * nentries;
    std::int64_t o[max_encoded_ndim], s[max_encoded_ndim];
    std::size_t seen = 0;
    for (std::size_t i = 0; i < nentries; ++i) {
        const std::uint32_t id = first[i];
        mine[i] = id;
        const Entry& e = entries[id];
        if (e.kind != ItemKind::array)
            continue;
        if (seen++ == narrays)
            return false;
        const std::size_t ond = d.shape_into(o), snd = d.shape_into(s);
        (void)d.uv(); // its byte count: the final item's is computed from the box
        if (ond != e.nd || snd != e.nd)
            return false;
        std::int64_t* c = coords.data() + e.coords + r * 2 * e.nd;
        for (std::size_t j = 0; j < ond; ++j) {
            c[j] = o[j];
            c[e.nd + j] = s[j];
        }
    }
    const std::string_view storage_data = d.view_str();
    const std::string_view planner_data = d.view_str();
    if (seen != narrays || !d.done())
        return false;
    extra[r] = {std::string(storage_data), std::string(planner_data)};
    return true;
}

// The box table: entries in name order, an array's boxes (one per rank, in
// rank order), a blob's one box. For the usual plans (every rank one box of
// its own per array, the boxes in rank order) that is the metadata's chunk
// box column as it is, and plan() takes it over instead of copying it.
// Sets `order` and each entry's place in the table; returns its size.
std::size_t ColumnarSavePlan::Impl::lay_out_boxes()
{
    order.resize(entries.size());
    for (std::uint32_t k = 0; k < order.size(); ++k)
        order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return entries[a].name < entries[b].name; });
    std::size_t n = 0;
    for (const auto id : order) {
        auto& e = entries[id];
        if (e.kind == ItemKind::array) {
            e.coords = n;
            n += nrows(e) * 2 * e.nd;
        } else if (e.kind == ItemKind::bytes) {
            e.coords = n;
            n += 2 * e.nd;
        }
    }
    return n;
}

bool ColumnarSavePlan::ingest(const std::vector<Bytes>& gathered)
{
    auto& im = *m;
    im.nranks = gathered.size();
    if (im.nranks == 0 || im.nranks > static_cast<std::size_t>(INT32_MAX))
        return false;
    im.extra.resize(im.nranks);
    std::vector<std::int64_t> first_boxes;
    NameTable names;
    try {
        for (std::size_t r = 0; r < im.nranks; ++r)
            if (!im.ingest_rank(r, gathered[r], first_boxes, names))
                return false;
    } catch (const error::FormatError&) {
        return false; // the struct-based path reports it
    }
    im.index.clear();
    return true;
}

// The struct entry point (DefaultSavePlanner::create_global_plan): the same
// tables from the plans' items. Only what explain_refusal() checks is
// compared (the final items take the rest from rank 0's item, see
// take_finals), so that every plan those checks take is taken here. False
// on anything they refuse.
bool ColumnarSavePlan::Impl::ingest_structs(const std::vector<SavePlan>& plans)
{
    nranks = plans.size();
    if (nranks == 0 || nranks > static_cast<std::size_t>(INT32_MAX) || !struct_entries(plans[0].items))
        return false;
    // A row per rank and array; laid out again below if a rank lists an
    // array more than once.
    coords.assign(lay_out_boxes(), 0);
    item_at.assign(nranks + 1, 0);
    for (std::size_t r = 0; r < nranks; ++r)
        item_at[r + 1] = item_at[r] + plans[r].items.size();
    ids.resize(item_at[nranks]);
    bool multi = false;
    for (std::size_t r = 0; r < nranks; ++r)
        if (!struct_rank(plans, r, multi))
            return false;
    if (multi)
        lay_out_multi(plans);
    for (const auto& e : entries)
        if (e.kind == ItemKind::bytes)
            std::copy(shapes.data() + e.box_at, shapes.data() + e.box_at + 2 * e.nd, coords.data() + e.coords);
    index.clear();
    return true;
}

// The entries: rank 0's names in its order (an array may be listed once per
// box), each described by its first item.
bool ColumnarSavePlan::Impl::struct_entries(const std::vector<WriteItem>& items0)
{
    if (items0.size() >= UINT32_MAX - 1)
        return false;
    index.reserve(items0.size());
    for (const WriteItem& it : items0) {
        if (!index.emplace(it.fqn, static_cast<std::uint32_t>(entries.size())).second)
            continue; // listed before: checked with the other ranks' items (struct_rank)
        if (static_cast<std::uint8_t>(it.kind) > static_cast<std::uint8_t>(ItemKind::string) ||
            !dtype_valid(static_cast<int>(it.dtype)))
            return false;
        entries.emplace_back();
        Entry& e = entries.back();
        e.name = it.fqn;
        e.kind = it.kind;
        e.dtype = it.dtype;
        e.first = &it;
        e.nd = it.global_shape.size();
        e.shape_at = shapes.size();
        shapes.insert(shapes.end(), it.global_shape.begin(), it.global_shape.end());
        e.nbytes = it.nbytes;
        e.digest = it.digest;
        e.value = it.value;
        if (e.kind == ItemKind::bytes) {
            if (it.box.offsets.size() != e.nd || it.box.shape.size() != e.nd)
                return false;
            e.box_at = shapes.size();
            shapes.insert(shapes.end(), it.box.offsets.begin(), it.box.offsets.end());
            shapes.insert(shapes.end(), it.box.shape.begin(), it.box.shape.end());
        }
    }
    return true;
}

// Rank r's items: their entries into `ids`, each checked against its
// entry (struct_item). False on a name rank 0 lacks or that this rank
// lacks, a kind other than rank 0's, an entry other than an array listed
// twice; `multi` is set when the rank lists an array more than once.
bool ColumnarSavePlan::Impl::struct_rank(const std::vector<SavePlan>& plans, std::size_t r, bool& multi)
{
    const auto& items = plans[r].items;
    const std::size_t nentries = entries.size();
    std::uint32_t* mine = ids.data() + item_at[r];
    const std::uint32_t* prev = r ? ids.data() + item_at[r - 1] : nullptr;
    const std::size_t nprev = r ? plans[r - 1].items.size() : 0;
    std::size_t held = 0; // entries this rank lists
    for (std::size_t i = 0; i < items.size(); ++i) {
        const WriteItem& it = items[i];
        std::uint32_t id;
        if (r == 0 && i < nentries && entries[i].first == &it) {
            id = static_cast<std::uint32_t>(i);
        } else if (i < nprev && entries[prev[i]].name == it.fqn) {
            id = prev[i]; // the previous rank's name at this position
        } else {
            const auto found = index.find(it.fqn);
            if (found == index.end())
                return false; // a name rank 0 lacks
            id = found->second;
        }
        Entry& e = entries[id];
        if (it.kind != e.kind)
            return false;
        ++e.rows;
        if (e.last_rank != r) {
            e.last_rank = r;
            ++held;
        } else if (e.kind == ItemKind::array) {
            e.multi = multi = true; // another box of the array
        } else {
            return false; // twice in one plan
        }
        mine[i] = id;
        if (!struct_item(r, e, it))
            return false;
    }
    return held == nentries; // else a name of rank 0 this rank lacks
}

// Rank r's item `it` of entry `e`, checked against rank 0's first item of
// it; an array's box (listed once by the rank) into the box table.
bool ColumnarSavePlan::Impl::struct_item(std::size_t r, const Entry& e, const WriteItem& it)
{
    const WriteItem& first = *e.first;
    switch (e.kind) {
    case ItemKind::array: {
        const std::size_t nd = e.nd;
        if (it.dtype != e.dtype || it.box.offsets.size() != nd || it.box.shape.size() != nd ||
            (&it != &first && it.global_shape != first.global_shape))
            return false;
        if (e.multi)
            return true; // copied by copy_struct_boxes
        std::int64_t* c = coords.data() + e.coords + r * 2 * nd;
        for (std::size_t j = 0; j < nd; ++j) { // as in match_item: no memmove call per box
            c[j] = it.box.offsets[j];
            c[nd + j] = it.box.shape[j];
        }
        return true;
    }
    case ItemKind::scalar: return it.dtype == e.dtype && it.value == first.value;
    case ItemKind::string: return it.value == first.value;
    case ItemKind::bytes: return it.nbytes == e.nbytes && it.digest == e.digest;
    }
    return false;
}

// The box table again when some rank lists an array more than once: a row
// per item of such an array (rank by rank), a row per rank of the others.
void ColumnarSavePlan::Impl::lay_out_multi(const std::vector<SavePlan>& plans)
{
    std::size_t nmulti = 0;
    for (auto& e : entries)
        if (e.multi) {
            e.row0 = nmulti;
            nmulti += e.rows;
        }
    multi_rank.resize(nmulti);
    item_row.assign(ids.size(), 0);
    coords.assign(lay_out_boxes(), 0);
    copy_struct_boxes(plans);
}

// The array boxes into the box table when some rank lists an array once per
// box: that array's rows are its items, rank by rank.
void ColumnarSavePlan::Impl::copy_struct_boxes(const std::vector<SavePlan>& plans)
{
    for (auto& e : entries)
        e.rows = 0; // counted again as the rows are filled
    for (std::size_t r = 0; r < nranks; ++r) {
        const auto& items = plans[r].items;
        for (std::size_t i = 0; i < items.size(); ++i) {
            Entry& e = entries[ids[item_at[r] + i]];
            if (e.kind != ItemKind::array)
                continue;
            std::size_t row = r;
            if (e.multi) {
                row = e.rows++;
                multi_rank[e.row0 + row] = static_cast<std::uint32_t>(r);
                item_row[item_at[r] + i] = static_cast<std::uint32_t>(row);
            }
            const Box& b = items[i].box;
            std::int64_t* c = coords.data() + e.coords + row * 2 * e.nd;
            std::copy(b.offsets.begin(), b.offsets.end(), c);
            std::copy(b.shape.begin(), b.shape.end(), c + e.nd);
        }
    }
}

// The final plans of the struct entry point, as explain_refusal's order of
// planning gives them: each rank's own chunks in entry name order, then the
// replicas it writes; an array's item is the rank's own (moved), with rank
// 0's digest and value, a blob's a copy of rank 0's. Ranks in reverse
// order, so that rank 0's items (and the entries' views into them) last
// until the end.
void ColumnarSavePlan::Impl::take_finals(std::vector<SavePlan>& plans)
{
    if (!multi_rank.empty())
        return take_finals_multi(plans);
    const std::size_t nentries = entries.size();
    slot.resize(nentries);
    pos.resize(nentries);
    std::vector<WriteItem> out; // the new plan, in the buffer of the previous rank's old plan
    for (std::size_t r = nranks; r-- > 0;) {
        auto& items = plans[r].items;
        const std::uint32_t* mine = ids.data() + r * nentries;
        std::fill(slot.begin(), slot.end(), not_kept);
        std::size_t kept = 0;
        for (std::size_t i = 0; i < nentries; ++i) {
            const std::uint32_t id = mine[i];
            pos[id] = static_cast<std::uint32_t>(i);
            if (own_chunk(id, r) != not_kept) {
                slot[name_rank[id]] = static_cast<std::uint32_t>(i);
                ++kept;
            }
        }
        const auto array_item = [&](std::uint32_t id, std::uint32_t chunk) {
            WriteItem& w = items[pos[id]];
            const WriteItem& first = *entries[id].first;
            w.nbytes = static_cast<std::uint64_t>(w.box.volume()) * dtype_size(w.dtype);
            w.chunk = chunk;
            w.digest = first.digest;
            if (w.value != first.value)
                w.value = first.value;
            out.push_back(std::move(w));
        };
        const auto& reps = replicas_of[r];
        out.clear();
        out.reserve(kept + reps.size());
        for (const auto i : slot)
            if (i != not_kept)
                array_item(mine[i], own_chunk(mine[i], r));
        for (const auto& [id, chunk] : reps) {
            if (entries[id].kind == ItemKind::array) {
                array_item(id, chunk);
            } else {
                out.push_back(r == 0 ? std::move(items[pos[id]]) : *entries[id].first);
                out.back().chunk = chunk;
            }
        }
        items.swap(out);
    }
}

// take_finals when some rank lists an array once per box: a rank's own
// chunks sorted by entry name and chunk, then its replicas, each an array
// replica from the rank's item whose box is the chunk's. Rank 0's items
// are copied (a later one of its items still reads the first one's).
void ColumnarSavePlan::Impl::take_finals_multi(std::vector<SavePlan>& plans)
{
    struct Pick {
        std::uint32_t order, chunk;
        std::size_t item;
    };
    std::vector<Pick> picks;
    std::vector<WriteItem> out;
    for (std::size_t r = nranks; r-- > 0;) {
        auto& items = plans[r].items;
        const std::uint32_t* mine = ids.data() + item_at[r];
        picks.clear();
        for (std::size_t i = 0; i < items.size(); ++i) {
            const std::uint32_t id = mine[i];
            if (entries[id].kind != ItemKind::array)
                continue;
            const std::size_t row = entries[id].multi ? item_row[item_at[r] + i] : r;
            const std::uint32_t chunk = by_rank[id] ? static_cast<std::uint32_t>(r) : chunk_of[chunk_slot(id, row)];
            if (chunk != not_kept)
                picks.push_back(Pick{name_rank[id], chunk, i});
        }
        std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
            return a.order != b.order ? a.order < b.order : a.chunk < b.chunk;
        });
        // The rank's item of a replica: an array's whose box is the chunk's.
        const auto item_of = [&](std::uint32_t id, std::uint32_t chunk) {
            const Entry& e = entries[id];
            const std::int64_t* box =
                md.boxes.data() + md.entries[name_rank[id]].first_coord + static_cast<std::size_t>(chunk) * 2 * e.nd;
            for (std::size_t i = 0; i < items.size(); ++i)
                if (mine[i] == id &&
                    (e.kind != ItemKind::array || (std::equal(box, box + e.nd, items[i].box.offsets.begin()) &&
                                                   std::equal(box + e.nd, box + 2 * e.nd, items[i].box.shape.begin()))))
                    return i;
            throw error::Internal("internal: rank " + std::to_string(r) + " holds no item of chunk " +
                                  std::to_string(chunk) + " of '" + std::string(e.name) + "' it replicates");
        };
        for (const auto& [id, chunk] : replicas_of[r])
            picks.push_back(Pick{name_rank[id], chunk, item_of(id, chunk)});
        out.clear();
        out.reserve(picks.size());
        for (const auto& p : picks) {
            const Entry& e = entries[mine[p.item]];
            if (e.kind != ItemKind::array && r != 0) {
                out.push_back(*e.first);
            } else {
                out.push_back(r == 0 ? items[p.item] : std::move(items[p.item]));
            }
            WriteItem& w = out.back();
            w.chunk = p.chunk;
            if (e.kind == ItemKind::array) {
                w.nbytes = static_cast<std::uint64_t>(w.box.volume()) * dtype_size(w.dtype);
                w.digest = e.first->digest;
                w.value = e.first->value;
            }
        }
        items.swap(out);
    }
}

std::pair<std::vector<SavePlan>, Metadata> global_plan(std::vector<SavePlan> plans)
{
    if (plans.empty()) { // no ranks: no entries
        Metadata md;
        md.world_size = 0;
        md.library_version = CAIRN_VERSION_STRING;
        return {std::move(plans), std::move(md)};
    }
    {
        ColumnarSavePlan cp;
        if (cp.m->ingest_structs(plans) && cp.plan()) {
            cp.m->take_finals(plans);
            return {std::move(plans), to_metadata(std::move(cp.m->md))};
        }
    }
    explain_refusal(plans);
    throw error::Internal("internal: the global plan refused " + std::to_string(plans.size()) +
                          " ranks' plans that its checks take");
}

// One run of plan(): the metadata as it is laid down entry by entry in
// name order, each rank's bytes so far and the replicated chunks, assigned
// once every entry is planned.
struct ColumnarSavePlan::Impl::Planning {
    explicit Planning(Impl& impl);
    /// Adds entry `id`'s metadata row and chunks. False where the default
    /// planner refuses the entry (explain_refusal then reports it).
    bool add(std::uint32_t id);
    /// Replicated chunks to the holder with the fewest bytes so far, largest
    /// first (as DefaultSavePlanner).
    void assign_replicas();
    /// Moves the chunk boxes into the metadata; frees the tables plan() used up.
    void finish();

private:
    std::size_t boxes_size() const { return alias ? aliased : md.boxes.size(); }
    void put_boxes(const std::int64_t* b, std::size_t n);
    void add_bytes(std::uint32_t id, const Entry& e);
    bool add_array(std::uint32_t id, const Entry& e, MetadataColumns::Entry& me);
    std::size_t group_boxes(const std::int64_t* c, std::size_t nd, std::size_t rows, bool slabs, bool& in_rank_order);
    bool held_twice(const Entry& e) const;
    void add_chunks(std::uint32_t id, const std::int64_t* c, std::size_t nd, std::uint64_t esize, bool as_is);

    Impl& im;
    MetadataColumns& md;
    const std::size_t nranks;
    std::vector<std::uint64_t> load; // bytes per rank so far
    std::vector<Replica> replicas;
    std::vector<std::uint32_t> ranks;   // an array's non-empty boxes (rows of its table), sorted
    std::vector<std::int64_t> distinct; // its distinct boxes, flat
    std::vector<std::size_t> group;     // start of each distinct box in `ranks`
    // The chunk boxes: the box table itself while every entry's boxes are
    // where the table has them (md.boxes is then coords[0, aliased)), else
    // copied into md.boxes from the first entry on whose are not.
    bool alias = true;
    std::size_t aliased = 0;
};

ColumnarSavePlan::Impl::Planning::Planning(Impl& impl) : im(impl), md(impl.md), nranks(impl.nranks), load(nranks, 0)
{
    const std::size_t nentries = im.entries.size();
    im.name_rank.assign(nentries, 0);
    for (std::uint32_t k = 0; k < nentries; ++k)
        im.name_rank[im.order[k]] = k;
    im.by_rank.assign(nentries, 0);
    im.chunk_of.clear();
    md = MetadataColumns{};
    md.world_size = static_cast<int>(nranks);
    md.library_version = CAIRN_VERSION_STRING;
    md.entries.reserve(nentries);
    std::size_t nchunks = 0; // at most: one chunk per row of an array
    for (const auto& e : im.entries)
        nchunks += e.kind == ItemKind::array ? im.nrows(e) : e.kind == ItemKind::bytes ? 1 : 0;
    md.chunk_file.reserve(nchunks);
    md.chunk_offset.reserve(nchunks);
    md.chunk_length.reserve(nchunks);
    md.sum_begin.reserve(nchunks);
    md.sum_count.reserve(nchunks);
    im.total = 0;
}

void ColumnarSavePlan::Impl::Planning::put_boxes(const std::int64_t* b, std::size_t n)
{
    if (alias && b == im.coords.data() + aliased) {
        aliased += n;
        return;
    }
    if (alias) {
        md.boxes.reserve(im.coords.size());
        md.boxes.assign(im.coords.begin(), im.coords.begin() + static_cast<std::ptrdiff_t>(aliased));
        alias = false;
    }
    md.boxes.insert(md.boxes.end(), b, b + n);
}

bool ColumnarSavePlan::Impl::Planning::add(std::uint32_t id)
{
    const Entry& e = im.entries[id];
    MetadataColumns::Entry me;
    me.name = std::string(e.name);
    me.kind = e.kind;
    me.dtype = e.dtype;
    me.first_chunk = md.chunk_count();
    me.first_coord = boxes_size();
    const std::int64_t* shape = im.shapes.data() + e.shape_at;
    switch (e.kind) {
    case ItemKind::scalar:
    case ItemKind::string: me.value = std::string(e.value); break;
    case ItemKind::bytes:
        me.global_shape.assign(shape, shape + e.nd);
        add_bytes(id, e);
        me.chunks = 1;
        break;
    case ItemKind::array:
        me.global_shape.assign(shape, shape + e.nd);
        if (!add_array(id, e, me))
            return false;
        break;
    }
    md.entries.push_back(std::move(me));
    return true;
}

// A blob: one chunk, held by every rank (a replica).
void ColumnarSavePlan::Impl::Planning::add_bytes(std::uint32_t id, const Entry& e)
{
    put_boxes(im.coords.data() + e.coords, 2 * e.nd);
    md.add_chunks(1);
    const std::size_t at = im.holders.size();
    for (std::size_t r = 0; r < nranks; ++r)
        im.holders.push_back(static_cast<std::uint32_t>(r));
    replicas.push_back(Replica{id, 0, e.nbytes, at, nranks});
    im.total += e.nbytes;
}

// An array: its ranks' boxes grouped into distinct chunks that must tile it.
bool ColumnarSavePlan::Impl::Planning::add_array(std::uint32_t id, const Entry& e, MetadataColumns::Entry& me)
{
    const std::size_t nd = e.nd, stride = 2 * nd;
    const std::uint64_t esize = dtype_size(e.dtype);
    if (!checked_bytes(me.global_shape, esize))
        return false;
    const std::int64_t* shape = im.shapes.data() + e.shape_at;
    const std::int64_t* c = im.coords.data() + e.coords;
    // The usual decomposition first: one pass proves what the general path
    // (group_boxes) finds (every rank a chunk of its own, in rank order,
    // tiling the array) with sorts and a tiling check.
    const bool slabs = !e.multi && rank_order_slabs(shape, c, nranks, nd);
    bool in_rank_order = true;
    const std::size_t nchunks = group_boxes(c, nd, im.nrows(e), slabs, in_rank_order);
    if (e.multi && held_twice(e))
        return false;
    // Every rank a box of its own, in rank order (ranks is then 0, 1, ...):
    // the chunks' boxes are the table's as they are.
    const bool as_is = !e.multi && in_rank_order && nchunks == nranks;
    if (!as_is) {
        distinct.clear();
        for (std::size_t gi = 0; gi < nchunks; ++gi)
            distinct.insert(distinct.end(), c + ranks[group[gi]] * stride, c + (ranks[group[gi]] + 1) * stride);
    }
    const std::int64_t* boxes = as_is ? c : distinct.data();
    if (!slabs && check_tiling(me.global_shape, boxes, nchunks))
        return false;
    put_boxes(boxes, nchunks * stride);
    md.add_chunks(nchunks);
    me.chunks = nchunks;
    add_chunks(id, c, nd, esize, as_is);
    return true;
}

// Sorts the non-empty boxes of an array (table `c`) into `ranks`, equal
// boxes next to each other, and marks where each distinct box begins in
// `group`; slabs: every rank's box is its own, in rank order. Returns the
// number of distinct boxes (chunks); `in_rank_order`: whether sorting
// left the ranks in rank order.
std::size_t ColumnarSavePlan::Impl::Planning::group_boxes(const std::int64_t* c, std::size_t nd, std::size_t rows,
                                                          bool slabs, bool& in_rank_order)
{
    const std::size_t stride = 2 * nd;
    in_rank_order = true;
    if (slabs) {
        ranks.resize(nranks);
        std::iota(ranks.begin(), ranks.end(), 0u);
        group.resize(nranks + 1);
        std::iota(group.begin(), group.end(), std::size_t(0));
        return nranks;
    }
    ranks.clear();
    for (std::uint32_t r = 0; r < rows; ++r)
        if (volume_of(c + r * stride + nd, nd) > 0)
            ranks.push_back(r);
    // Box order (offsets, then extents: Box::operator<), then rank.
    const auto less = [&](std::uint32_t a, std::uint32_t b) {
        const std::int64_t *x = c + a * stride, *y = c + b * stride;
        for (std::size_t k = 0; k < stride; ++k)
            if (x[k] != y[k])
                return x[k] < y[k];
        return a < b;
    };
    in_rank_order = std::is_sorted(ranks.begin(), ranks.end(), less);
    if (!in_rank_order)
        std::sort(ranks.begin(), ranks.end(), less);
    const auto same = [&](std::uint32_t a, std::uint32_t b) {
        return same_values(c + a * stride, c + b * stride, stride);
    };
    group.clear();
    for (std::size_t k = 0; k < ranks.size(); ++k)
        if (k == 0 || !same(ranks[k - 1], ranks[k]))
            group.push_back(k);
    group.push_back(ranks.size());
    return group.size() - 1;
}

// Whether a rank holds one box of array `e` twice (the rows of one chunk,
// grouped by group_boxes, are in row order, a rank's rows next to each other).
bool ColumnarSavePlan::Impl::Planning::held_twice(const Entry& e) const
{
    for (std::size_t gi = 0; gi + 1 < group.size(); ++gi)
        for (std::size_t k = group[gi] + 1; k < group[gi + 1]; ++k)
            if (im.rank_of_row(e, ranks[k]) == im.rank_of_row(e, ranks[k - 1]))
                return true;
    return false;
}

// The writers of an array's chunks (grouped by group_boxes): a chunk with
// one holder is that rank's; one with several is a replica, assigned later.
void ColumnarSavePlan::Impl::Planning::add_chunks(std::uint32_t id, const std::int64_t* c, std::size_t nd,
                                                  std::uint64_t esize, bool as_is)
{
    const std::size_t stride = 2 * nd, nchunks = group.size() - 1;
    const Entry& e = im.entries[id];
    im.by_rank[id] = as_is; // chunk r is rank r's box
    if (!as_is && im.chunk_of.empty())
        im.chunk_of.assign(im.entries.size() * nranks + im.multi_rank.size(), not_kept);
    for (std::size_t gi = 0; gi < nchunks; ++gi) {
        const std::uint32_t row0 = ranks[group[gi]];
        const std::uint32_t r0 = im.rank_of_row(e, row0);
        const std::uint64_t nbytes = static_cast<std::uint64_t>(volume_of(c + row0 * stride + nd, nd)) * esize;
        const auto chunk = static_cast<std::uint32_t>(gi);
        const std::size_t nholders = group[gi + 1] - group[gi];
        im.total += nbytes;
        if (nholders == 1) {
            if (!as_is)
                im.chunk_of[im.chunk_slot(id, row0)] = chunk;
            load[r0] += nbytes;
        } else {
            const std::size_t at = im.holders.size();
            for (std::size_t k = group[gi]; k < group[gi + 1]; ++k)
                im.holders.push_back(im.rank_of_row(e, ranks[k]));
            replicas.push_back(Replica{id, chunk, nbytes, at, nholders});
        }
    }
}

void ColumnarSavePlan::Impl::Planning::assign_replicas()
{
    std::stable_sort(replicas.begin(), replicas.end(),
                     [](const Replica& a, const Replica& b) { return a.nbytes > b.nbytes; });
    im.replicas_of.assign(nranks, {});
    for (const auto& rep : replicas) {
        const std::uint32_t* h = im.holders.data() + rep.holders_at;
        std::uint32_t best = h[0];
        for (std::size_t k = 0; k < rep.holders_n; ++k)
            if (load[h[k]] < load[best])
                best = h[k];
        load[best] += rep.nbytes;
        im.replicas_of[best].emplace_back(rep.entry, rep.chunk);
    }
}

void ColumnarSavePlan::Impl::Planning::finish()
{
    if (alias) {
        im.coords.resize(aliased);
        md.boxes = std::move(im.coords);
    }
    std::vector<std::int64_t>().swap(im.coords);
    std::vector<std::uint32_t>().swap(im.holders);
}

bool ColumnarSavePlan::plan()
{
    Impl::Planning planning(*m);
    for (const auto id : m->order)
        if (!planning.add(id))
            return false;
    planning.assign_replicas();
    planning.finish();
    return true;
}

std::vector<SavePlan> ColumnarSavePlan::storage_shells() const
{
    const auto& im = *m;
    std::vector<SavePlan> shells(im.nranks);
    const auto to_bytes = [](std::string_view v) {
        const auto* p = reinterpret_cast<const std::byte*>(v.data());
        return std::vector<std::byte>(p, p + v.size());
    };
    for (std::size_t r = 0; r < im.nranks; ++r) {
        shells[r].storage_data = to_bytes(im.extra[r].first);
        shells[r].planner_data = to_bytes(im.extra[r].second);
    }
    for (const auto& e : im.md.entries)
        if ((e.kind == ItemKind::array && e.chunks > 0) || e.kind == ItemKind::bytes) {
            WriteItem it;
            it.fqn = e.name;
            it.kind = e.kind;
            it.dtype = e.dtype;
            it.global_shape = e.global_shape;
            shells[0].items.push_back(std::move(it));
        }
    return shells;
}

Bytes ColumnarSavePlan::encode_final(std::size_t r, const SavePlan& shell)
{
    auto& im = *m;
    const std::size_t nentries = im.entries.size();
    const std::uint32_t* mine = im.ids.data() + r * nentries;
    im.slot.assign(nentries, not_kept);
    im.pos.resize(nentries);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < nentries; ++i) {
        const std::uint32_t id = mine[i];
        im.pos[id] = static_cast<std::uint32_t>(i);
        if (im.own_chunk(id, r) != not_kept) {
            im.slot[im.name_rank[id]] = static_cast<std::uint32_t>(i);
            ++kept;
        }
    }
    const auto& reps = im.replicas_of[r];
    Encoder e;
    e.reserve(4 + 30 + shell.storage_data.size() + shell.planner_data.size() + 10 * (kept + reps.size()));
    e.u32(k_magic_assignment);
    e.bytes(shell.storage_data);
    e.bytes(shell.planner_data);
    e.count(kept + reps.size());
    for (const auto i : im.slot) {
        if (i == not_kept)
            continue;
        e.uv(i);
        e.uv(im.own_chunk(mine[i], r));
    }
    for (const auto& [id, chunk] : reps) {
        e.uv(im.pos[id]);
        e.uv(chunk);
    }
    return e.take();
}

void ColumnarSavePlan::release_plan_tables()
{
    auto& im = *m;
    std::vector<std::uint32_t>().swap(im.ids);
    std::vector<std::uint32_t>().swap(im.chunk_of);
    std::vector<char>().swap(im.by_rank);
    std::vector<std::uint32_t>().swap(im.slot);
    std::vector<std::uint32_t>().swap(im.pos);
    im.replicas_of.clear();
    im.replicas_of.shrink_to_fit();
    im.extra.clear();
    im.extra.shrink_to_fit();
    for (auto& e : im.entries) // their views point into the gathered plans
        e = Impl::Entry{};
}

void ColumnarSavePlan::keep()
{
    for (auto& e : m->entries) { // their views point into the gathered plans
        e.name = {};
        e.value = {};
        e.first = nullptr;
    }
}

void ColumnarSavePlan::reuse(const SavePlan& rank0)
{
    auto& im = *m;
    auto& md = im.md;
    const std::size_t nentries = im.entries.size();
    if (rank0.items.size() != nentries || im.ids.size() != im.nranks * nentries)
        throw error::Internal("internal: a kept plan of " + std::to_string(nentries) +
                              " entries reused for a plan of " + std::to_string(rank0.items.size()));
    for (std::size_t i = 0; i < nentries; ++i) {
        const auto& it = rank0.items[i];
        if (it.kind == ItemKind::scalar || it.kind == ItemKind::string)
            md.entries[im.name_rank[im.ids[i]]].value = it.value;
    }
    md.files.clear();
    std::fill(md.chunk_file.begin(), md.chunk_file.end(), -1);
    md.sums.clear();
}

std::uint64_t ColumnarSavePlan::total_bytes() const noexcept { return m->total; }

MetadataColumns& ColumnarSavePlan::metadata() noexcept { return m->md; }

namespace {

// ColumnarSavePlan::attach_results: the ranks' encoded write results into
// the chunk columns of the metadata.
//
// The results arrive rank by rank, each rank's in entry name order, while
// the chunk columns run entry by entry, an entry's chunks usually in rank
// order: one rank's results land a column stride apart, in six columns. So
// ranks are read in blocks, in lockstep (one result of each rank of the
// block in turn), and consecutive results land in neighbouring rows.
class ResultAttacher {
public:
    explicit ResultAttacher(MetadataColumns& md);
    void attach(const std::vector<Bytes>& results);

private:
    static constexpr std::uint32_t unknown = not_kept - 1; // a name the metadata lacks

    struct Reader { // one rank's results being read
        std::size_t rank = 0;
        Decoder d{nullptr, 0, "write results"};
        const NameTable* names = nullptr;  // rank 0's, or `own`
        NameTable own;                     // the name table of a rank that sent its own
        std::vector<std::int64_t> file_of; // its path table -> file
        std::size_t n = 0, next_name = 0, next_path = 0;
    };

    std::uint32_t lookup(std::string_view name) const
    {
        const auto it = m_by_name.find(name);
        return it == m_by_name.end() ? unknown : it->second;
    }
    void open(Reader& rd, const Bytes& result, std::size_t r);
    __attribute__((always_inline)) inline bool take(Reader& rd);
    __attribute__((always_inline)) inline bool put_sums(Decoder& d, std::size_t k, std::size_t nsums);
    static void close(Reader& rd);

    MetadataColumns& m_md;
    std::unordered_map<std::string_view, std::uint32_t> m_by_name;  // views of m_md's names
    std::unordered_map<std::string_view, std::int64_t> m_file_index; // views into the results
    NameTable m_first; // rank 0's, which ranks that leave theirs out use
};

// The checksum pool in chunk order, as the metadata file stores it (no
// gather when it is written): a chunk of one checksum (the usual: one
// block) has it at its own row, others after the rows.
ResultAttacher::ResultAttacher(MetadataColumns& md) : m_md(md)
{
    m_by_name.reserve(md.entries.size());
    for (std::uint32_t k = 0; k < md.entries.size(); ++k)
        m_by_name.emplace(md.entries[k].name, k);
    md.sums.assign(md.chunk_count(), 0);
}

void ResultAttacher::attach(const std::vector<Bytes>& results)
{
    constexpr std::size_t block = 16;
    std::vector<Reader> readers(block);
    std::size_t got = 0;    // results attached
    std::size_t direct = 0; // chunks of one checksum
    for (std::size_t r0 = 0; r0 < results.size(); r0 += block) {
        const std::size_t r1 = std::min(results.size(), r0 + block);
        const std::size_t nblock = r1 - r0;
        std::size_t least = SIZE_MAX;
        for (std::size_t b = 0; b < nblock; ++b) {
            open(readers[b], results[r0 + b], r0 + b);
            least = std::min(least, readers[b].n);
            got += readers[b].n; // each one attached, or take() throws
        }
        // In lockstep as far as every rank of the block has results, then
        // each one's rest.
        for (std::size_t i = 0; i < least; ++i)
            for (std::size_t b = 0; b < nblock; ++b)
                direct += take(readers[b]);
        for (std::size_t b = 0; b < nblock; ++b) {
            for (std::size_t i = least; i < readers[b].n; ++i)
                direct += take(readers[b]);
            close(readers[b]);
        }
    }
    const std::size_t nchunks = m_md.chunk_count();
    if (got != nchunks)
        throw error::WriteError("the ranks wrote " + std::to_string(got) + " chunks, the global plan has " +
                                std::to_string(nchunks));
    if (direct == 0 && m_md.sums.size() == nchunks)
        m_md.sums.clear(); // no checksums (SaveOptions::checksum_block 0)
}

// Reads rank r's header: its name table (unless it uses rank 0's), its
// path table (each path a file of the metadata), its result count.
void ResultAttacher::open(Reader& rd, const Bytes& result, std::size_t r)
{
    rd.rank = r;
    rd.d = Decoder(result, "write results");
    Decoder& d = rd.d;
    // Sent without its name table (strip_name_table): rank 0's, read first.
    const bool shared = leading_magic(result) == magic_results_shared;
    if (shared && r == 0)
        d.fail("rank 0's results without their name table");
    expect_magic(d, shared ? magic_results_shared : magic_results);
    if (!shared)
        (r == 0 ? m_first : rd.own).read(d, [this](std::string_view name) { return lookup(name); });
    rd.names = shared || r == 0 ? &m_first : &rd.own;
    const std::size_t npaths = d.count(1);
    rd.file_of.resize(npaths);
    for (std::size_t k = 0; k < npaths; ++k) {
        const std::string_view path = d.view_str();
        auto [it, fresh] = m_file_index.try_emplace(path, static_cast<std::int64_t>(m_md.files.size()));
        if (fresh)
            m_md.files.emplace_back(path);
        rd.file_of[k] = it->second;
    }
    rd.n = d.count(result_min_bytes);
    rd.next_name = rd.next_path = 0;
}

// The next result of `rd` into the columns; true when its chunk has one
// checksum.
bool ResultAttacher::take(Reader& rd)
{
    Decoder& d = rd.d;
    const NameTable& names = *rd.names;
    const std::uint32_t ni = d.uv32();
    const std::uint32_t chunk = d.uv32();
    const std::uint32_t pi = d.uv32();
    if (ni >= names.size() || ni > rd.next_name)
        d.fail("name index " + std::to_string(ni) + " beyond the table of " + std::to_string(names.size()) +
               " or out of order");
    if (pi >= rd.file_of.size() || pi > rd.next_path)
        d.fail("path index " + std::to_string(pi) + " beyond the table of " + std::to_string(rd.file_of.size()) +
               " or out of order");
    rd.next_name += ni == rd.next_name;
    rd.next_path += pi == rd.next_path;
    const std::uint64_t offset = d.uv();
    const std::uint64_t length = d.uv();
    const std::size_t nsums = d.count(8);
    const std::uint32_t e = names.id(ni);
    if (e == unknown || chunk >= m_md.entries[e].chunks)
        throw error::WriteError("rank " + std::to_string(rd.rank) + " reported a write of '" +
                                std::string(names.name(ni)) + "' chunk " + std::to_string(chunk) +
                                ", which the global plan does not have");
    const std::size_t k = m_md.entries[e].first_chunk + chunk;
    if (m_md.chunk_file[k] >= 0)
        throw error::WriteError("rank " + std::to_string(rd.rank) + " reported a write of '" + m_md.entries[e].name +
                                "' chunk " + std::to_string(chunk) + ", which was reported before");
    m_md.chunk_file[k] = rd.file_of[pi];
    m_md.chunk_offset[k] = offset;
    m_md.chunk_length[k] = length;
    return put_sums(d, k, nsums);
}

// The `nsums` checksums of chunk row k: one at the row's own place in the
// pool (then true), several (or none) after the rows.
bool ResultAttacher::put_sums(Decoder& d, std::size_t k, std::size_t nsums)
{
    auto& md = m_md;
    md.sum_count[k] = static_cast<std::uint32_t>(nsums);
    if (nsums == 1) {
        md.sum_begin[k] = k;
        md.sums[k] = d.u64();
        return true;
    }
    md.sum_begin[k] = nsums ? md.sums.size() : 0;
    for (std::size_t j = 0; j < nsums; ++j)
        md.sums.push_back(d.u64());
    return false;
}

void ResultAttacher::close(Reader& rd)
{
    if (rd.next_name != rd.names->size() || rd.next_path != rd.file_of.size())
        rd.d.fail("name or path table with unused entries");
    rd.d.expect_done();
}

} // namespace

void ColumnarSavePlan::attach_results(const std::vector<Bytes>& results) { ResultAttacher(m->md).attach(results); }

bool is_assignment(const Bytes& final_plan) noexcept { return leading_magic(final_plan) == k_magic_assignment; }

SavePlan apply_assignment(const SavePlan& local, const Bytes& assignment)
{
    Decoder d(assignment, "final save plan");
    expect_magic(d, k_magic_assignment);
    SavePlan p;
    p.storage_data = d.bytes();
    p.planner_data = d.bytes();
    const std::size_t n = d.count(2);
    p.items.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
        const std::uint32_t i = d.uv32();
        const std::uint32_t chunk = d.uv32();
        if (i >= local.items.size())
            d.fail("item " + std::to_string(i) + " of a local plan of " + std::to_string(local.items.size()));
        WriteItem w = local.items[i];
        w.chunk = chunk;
        if (w.kind == ItemKind::array)
            w.nbytes = static_cast<std::uint64_t>(w.box.volume()) * dtype_size(w.dtype);
        p.items.push_back(std::move(w));
    }
    d.expect_done();
    return p;
}

} // namespace cairn::detail
