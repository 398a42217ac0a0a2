// The binary codec of plans, write results and metadata (src/core/codec.hpp).
#include "plan_compare.hpp"
#include "unit_common.hpp"

#include "core/codec.hpp"
#include "core/metadata_adapter.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <set>
#include <string>
#include <vector>

using namespace cairn;
using namespace cairn::detail;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using cairn_test::check_same;
using cairn_test::message_of;

namespace {

using namespace std::string_literals;

Bytes to_bytes(const std::string& s)
{
    Bytes b(s.size());
    std::memcpy(b.data(), s.data(), s.size());
    return b;
}

std::string raw_of(std::int64_t v)
{
    std::string s(8, '\0');
    std::memcpy(s.data(), &v, 8);
    return s;
}

// Odd strings: embedded NUL, control characters, quotes, UTF-8, 0xFF.
const std::string k_odd = "h\xC3\xA9llo\0w\xC3\xB6rld\n\t\"'\\%/.\xE2\x9C\x93\xFF"s;

SavePlan sample_save_plan()
{
    SavePlan p;
    WriteItem a;
    a.fqn = "fluid.velocity";
    a.kind = ItemKind::array;
    a.dtype = DType::f32;
    a.global_shape = {8, 10, 12};
    a.box = Box{{0, 5, 6}, {8, 5, 6}};
    a.nbytes = 8 * 5 * 6 * 4;
    a.chunk = 3;
    p.items.push_back(a);

    WriteItem z;
    z.fqn = "zero_d";
    z.kind = ItemKind::array;
    z.dtype = DType::f64;
    z.nbytes = 8;
    p.items.push_back(z);

    WriteItem b;
    b.fqn = "rng state";
    b.kind = ItemKind::bytes;
    b.dtype = DType::u8;
    b.global_shape = {5};
    b.box = whole({5});
    b.nbytes = 5;
    b.digest = 0xDEADBEEFCAFEBABEull;
    p.items.push_back(b);

    WriteItem s;
    s.fqn = "step";
    s.kind = ItemKind::scalar;
    s.dtype = DType::i64;
    s.value = raw_of(-255); // contains 0x01 and 0xFF bytes
    s.chunk = std::numeric_limits<std::uint32_t>::max();
    p.items.push_back(s);

    WriteItem t;
    t.fqn = "label/\xC3\xBC";
    t.kind = ItemKind::string;
    t.value = k_odd;
    p.items.push_back(t);

    WriteItem big;
    big.fqn = std::string(300, 'x');
    big.kind = ItemKind::array;
    big.dtype = DType::u64;
    big.global_shape = Shape(64, 1); // the largest rank
    big.box = whole(big.global_shape);
    big.nbytes = std::numeric_limits<std::uint64_t>::max();
    p.items.push_back(big);

    p.storage_data = to_bytes("\x00\x01\xFF\x7F"s);
    p.planner_data = to_bytes("planner");
    return p;
}

LoadPlan sample_load_plan()
{
    LoadPlan p;
    p.items.push_back(ReadItem{"fluid.velocity", ItemKind::array, 7, Box{{1, 2, 3}, {4, 5, 6}}});
    p.items.push_back(ReadItem{"fluid.velocity", ItemKind::array, 2, Box{{0, 2, 3}, {1, 5, 6}}, 300}); // another box
    p.items.push_back(ReadItem{"zero_d", ItemKind::array, 0, Box{}});
    p.items.push_back(ReadItem{"blob", ItemKind::bytes, 0, Box{{0}, {1000}}});
    p.items.push_back(ReadItem{k_odd, ItemKind::array, 0xFFFFFFFFu, Box{{0, 0, 0, 0}, {1, 2, 3, 4}}});
    p.storage_data = to_bytes("dir/ckpt");
    p.planner_data = {};
    return p;
}

std::vector<WriteResult> sample_results()
{
    return {
        WriteResult{"fluid.velocity", 3, StorageInfo{"__0_0.distcp", 0, 960, {}}},
        WriteResult{"rng state", 0, StorageInfo{"__1_0.distcp", 4096, 5, {}}},
        WriteResult{k_odd, 0xFFFFFFFFu, StorageInfo{"", std::numeric_limits<std::uint64_t>::max(), 0, {}}},
    };
}

Metadata sample_metadata()
{
    Metadata md;
    md.library_version = "0.1.0";
    md.world_size = 4;
    md.layout = "distcp";
    md.created = "2024-06-01T12:00:00Z";
    {
        EntryMeta e;
        e.kind = ItemKind::array;
        e.dtype = DType::f32;
        e.global_shape = {8, 10, 12};
        for (int r = 0; r < 4; ++r)
            e.chunks.push_back(ChunkMeta{Box{{0, 0, 3 * r}, {8, 10, 3}},
                                         StorageInfo{"__" + std::to_string(r) + "_0.distcp", 64u * r, 960, {}}});
        md.entries["fluid.velocity"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::array;
        e.dtype = DType::f64;
        e.chunks.push_back(ChunkMeta{Box{}, StorageInfo{"__0_0.distcp", 960, 8, {}}});
        md.entries["zero_d"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::array;
        e.dtype = DType::i16;
        e.global_shape = {100};
        e.chunks.push_back(ChunkMeta{Box{{0}, {50}}, StorageInfo{"a", 0, 100, {}}});
        e.chunks.push_back(ChunkMeta{Box{{50}, {50}}, StorageInfo{"b", 0, 100, {}}});
        md.entries["line"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::array;
        e.dtype = DType::bf16;
        e.global_shape = {0, 4}; // empty array, no chunks
        md.entries["empty"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::bytes;
        e.dtype = DType::u8;
        e.global_shape = {5};
        e.chunks.push_back(ChunkMeta{whole({5}), StorageInfo{"__1_0.distcp", 0, 5, {}}});
        md.entries["rng state"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::scalar;
        e.dtype = DType::i64;
        e.value = raw_of(-255);
        md.entries["step"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::scalar;
        e.dtype = DType::boolean;
        e.value = "\x01"s;
        md.entries["flag"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::scalar;
        e.dtype = DType::f16;
        e.value = "\x00\x3C"s; // 1.0 in binary16, little-endian
        md.entries["h"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::string;
        e.value = k_odd;
        md.entries["label/\xC3\xBC with space%"] = e;
    }
    {
        EntryMeta e;
        e.kind = ItemKind::string;
        md.entries["empty string"] = e;
    }
    return md;
}

void patch_u64(Bytes& b, std::size_t off, std::uint64_t v)
{
    REQUIRE(off + 8 <= b.size());
    for (int i = 0; i < 8; ++i)
        b[off + i] = std::byte(static_cast<std::uint8_t>(v >> (8 * i)));
}

// The varint (Encoder::uv) at `off`: its length in bytes.
std::size_t varint_length(const Bytes& b, std::size_t off)
{
    std::size_t n = 1;
    while (off + n - 1 < b.size() && std::to_integer<std::uint8_t>(b[off + n - 1]) >= 0x80)
        ++n;
    REQUIRE(off + n <= b.size());
    return n;
}

std::uint64_t read_varint(const Bytes& b, std::size_t off)
{
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < varint_length(b, off); ++i)
        v |= std::uint64_t(std::to_integer<std::uint8_t>(b[off + i]) & 0x7f) << (7 * i);
    return v;
}

// Replaces the varint at `off` by `v`'s encoding (longer or shorter).
void replace_varint(Bytes& b, std::size_t off, std::uint64_t v)
{
    Encoder e;
    e.uv(v);
    const auto enc = e.take();
    const auto n = varint_length(b, off);
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(off), b.begin() + static_cast<std::ptrdiff_t>(off + n));
    b.insert(b.begin() + static_cast<std::ptrdiff_t>(off), enc.begin(), enc.end());
}

// Every proper prefix of `good` must be refused with a FormatError that says
// the input is too short ("truncated", or a count that "cannot fit"); returns
// the descriptions of the prefixes that were not (empty when all were).
std::vector<std::string> bad_truncations(const Bytes& good, const std::function<void(const Bytes&)>& decode)
{
    std::vector<std::string> bad;
    for (std::size_t n = 0; n < good.size(); ++n) {
        const Bytes prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        const auto msg = message_of<error::FormatError>([&] { decode(prefix); });
        if (msg.rfind("OK:", 0) != 0 ||
            (msg.find("truncated") == std::string::npos && msg.find("cannot fit") == std::string::npos))
            bad.push_back("prefix of " + std::to_string(n) + " bytes: " + msg);
    }
    return bad;
}

void check_truncations(const char* what, const Bytes& good, const std::function<void(const Bytes&)>& decode)
{
    const auto bad = bad_truncations(good, decode);
    INFO(what << ": " << bad.size() << " of " << good.size() << " prefixes not refused as truncated"
              << (bad.empty() ? std::string() : "; first: " + bad.front() + "; last: " + bad.back()));
    CHECK(bad.empty());
}

constexpr std::uint64_t k_huge = std::uint64_t(1) << 60;

// Bytes of encode(md) before its first entry: the header, the entry count
// and the file table (the chunks' paths in order of first use).
std::size_t metadata_prefix(const Metadata& md)
{
    Metadata header = md;
    header.entries.clear();
    std::vector<std::string> files;
    for (const auto& [fqn, e] : md.entries)
        for (const auto& c : e.chunks)
            if (std::find(files.begin(), files.end(), c.storage.path) == files.end())
                files.push_back(c.storage.path);
    Encoder table;
    table.count(files.size());
    for (const auto& f : files)
        table.str(f);
    return encode(header).size() - 1 + table.size(); // less the header's empty table (a 0)
}

} // namespace

TEST_CASE("codec: SavePlan round trip", "[codec]")
{
    const auto p = sample_save_plan();
    const auto b = encode(p);
    const auto q = decode_save_plan(b);
    check_same(q, p);
    CHECK(encode(q) == b);

    const SavePlan empty;
    const auto e = decode_save_plan(encode(empty));
    CHECK(e.items.empty());
    CHECK(e.storage_data.empty());
    CHECK(e.planner_data.empty());
}

TEST_CASE("codec: a save plan as its array boxes (boxes_form)", "[codec]")
{
    const SavePlan p = sample_save_plan();
    const Bytes full = encode(p);
    std::uint64_t h = 0;
    const Bytes boxes = boxes_form(full, h);
    CHECK(leading_magic(boxes) == magic_save_plan_boxes);
    CHECK(boxes.size() < full.size());
    CHECK(restore_save_plan(boxes, full) == full);
    CHECK(restore_save_plan(full, full) == full);                        // a whole plan as it is
    CHECK(restore_save_plan(strip_name_table(full), full) == full);      // without its name table

    // Another rank's plan: other array boxes and byte counts, other storage
    // and planner data: the same skeleton, and it restores from rank 0's.
    SavePlan q = p;
    q.items[0].box = Box{{0, 0, 6}, {8, 5, 6}};
    q.items[0].nbytes = 1;
    q.items[1].nbytes = 7;
    q.storage_data = {std::byte{1}, std::byte{2}};
    q.planner_data = {std::byte{3}};
    const Bytes qfull = encode(q);
    std::uint64_t hq = 0;
    const Bytes qboxes = boxes_form(qfull, hq);
    CHECK(hq == h);
    CHECK(restore_save_plan(qboxes, full) == qfull);
    CHECK(decode_save_plan(restore_save_plan(qboxes, full)).items[0].box == q.items[0].box);

    // Anything else is in the skeleton.
    const auto skeleton_of = [](const SavePlan& x) {
        std::uint64_t v = 0;
        (void)boxes_form(encode(x), v);
        return v;
    };
    const std::vector<std::function<void(SavePlan&)>> changes = {
        [](SavePlan& x) { x.items[0].fqn = "fluid.pressure"; },
        [](SavePlan& x) { x.items[0].dtype = DType::f64; },
        [](SavePlan& x) { x.items[0].global_shape[1] = 11; },
        [](SavePlan& x) { x.items[0].digest = 1; },
        [](SavePlan& x) { x.items[0].chunk = 4; },
        [](SavePlan& x) { x.items[2].box = Box{{1}, {4}}; }, // a blob's box
        [](SavePlan& x) { x.items[2].nbytes = 4; },          // a blob's size
        [](SavePlan& x) { x.items[3].value = raw_of(-254); },
        [](SavePlan& x) { std::swap(x.items[0], x.items[1]); },
        [](SavePlan& x) { x.items.pop_back(); },
    };
    for (std::size_t k = 0; k < changes.size(); ++k) {
        INFO("change " << k);
        SavePlan x = p;
        changes[k](x);
        CHECK(skeleton_of(x) != h);
    }

    // Put back together with a plan of another shape: refused.
    SavePlan fewer = p;
    fewer.items.erase(fewer.items.begin()); // one array less
    CHECK_THROWS_AS(restore_save_plan(boxes, encode(fewer)), error::FormatError);
    SavePlan more = p;
    more.items.push_back(p.items[0]);
    more.items.back().fqn = "fluid.w";
    CHECK_THROWS_AS(restore_save_plan(boxes, encode(more)), error::FormatError);
    // (A prefix too short for a magic number is returned as it is, and then
    // refused by the decoder, as the coordinator's struct path does.)
    check_truncations("save plan, boxes form", boxes,
                      [&](const Bytes& b) { (void)decode_save_plan(restore_save_plan(b, full)); });
    CHECK_THROWS_AS(boxes_form(boxes, h), error::FormatError); // not a whole plan
    CHECK_THROWS_AS(boxes_form(Bytes{}, h), error::FormatError);
    check_truncations("save plan, to its boxes", full, [&](const Bytes& b) { (void)boxes_form(b, h); });
}

TEST_CASE("codec: LoadPlan round trip", "[codec]")
{
    const auto p = sample_load_plan();
    const auto b = encode(p);
    const auto q = decode_load_plan(b);
    check_same(q, p);
    CHECK(encode(q) == b);
    CHECK(decode_load_plan(encode(LoadPlan{})).items.empty());
}

TEST_CASE("codec: write results round trip", "[codec]")
{
    const auto r = sample_results();
    const auto b = encode(r);
    const auto q = decode_write_results(b);
    check_same(q, r);
    CHECK(encode(q) == b);
    CHECK(decode_write_results(encode(std::vector<WriteResult>{})).empty());
}

TEST_CASE("codec: Metadata round trip", "[codec]")
{
    const auto md = sample_metadata();
    const auto b = encode(md);
    const auto q = decode_metadata(b);
    check_same(q, md);
    CHECK(encode(q) == b);
    CHECK(q.entries.at("label/\xC3\xBC with space%").value.size() == k_odd.size()); // NUL kept

    Metadata empty;
    const auto e = decode_metadata(encode(empty));
    CHECK(e.entries.empty());
    CHECK(e.format_version == 1);

    Metadata odd = md;
    odd.format_version = 7;
    odd.world_size = 1 << 20;
    odd.library_version = k_odd;
    odd.created = "";
    check_same(decode_metadata(encode(odd)), odd);
}

// A rank's part of the metadata (what load() decodes): of each array, the
// first chunk and those its box overlaps, in order; everything else whole.
TEST_CASE("codec: Metadata decoded for one rank's boxes", "[codec]")
{
    auto md = sample_metadata();
    { // 8 x 8 in 2 x 2 chunks, row-major grid order
        EntryMeta e;
        e.kind = ItemKind::array;
        e.dtype = DType::f64;
        e.global_shape = {8, 8};
        for (int k = 0; k < 16; ++k)
            e.chunks.push_back(ChunkMeta{Box{{2 * (k / 4), 2 * (k % 4)}, {2, 2}},
                                         StorageInfo{"__" + std::to_string(k) + "_0.distcp",
                                                     32u * static_cast<unsigned>(k), 32,
                                                     {0x1000u + static_cast<unsigned>(k)}}});
        md.entries["grid"] = e;
    }
    const auto b = encode(md);
    // rows 1-3, columns 3-5: chunk rows 0-1, chunk columns 1-2 (it touches
    // chunk row 2 and chunk column 3 without overlapping them)
    const std::map<std::string, Box> want{{"grid", Box{{1, 3}, {3, 3}}},
                                          {"fluid.velocity", Box{{0, 0}, {8, 10}}}, // 2-d box of a 3-d array
                                          {"rng state", Box{{0}, {1}}},
                                          {"zero_d", Box{{}, {}}}};
    const WantedBox wanted = [&](const std::string& fqn) -> const Box* {
        const auto it = want.find(fqn);
        return it == want.end() ? nullptr : &it->second;
    };
    const auto part = decode_metadata(b, wanted);
    REQUIRE(part.entries.size() == md.entries.size());
    const std::vector<std::size_t> expected_grid{0, 1, 2, 5, 6};
    for (const auto& [fqn, e] : md.entries) {
        INFO(fqn);
        const auto& p = part.entries.at(fqn);
        CHECK(p.kind == e.kind);
        CHECK(p.dtype == e.dtype);
        CHECK(p.global_shape == e.global_shape);
        CHECK(p.value == e.value);
        std::vector<std::size_t> keep; // the stored chunks it must keep
        for (std::size_t k = 0; k < e.chunks.size(); ++k)
            if (fqn == "grid" ? std::find(expected_grid.begin(), expected_grid.end(), k) != expected_grid.end()
                : fqn == "line" ? k == 0 // an array the state does not hold
                                : true)
                keep.push_back(k);
        REQUIRE(p.chunks.size() == keep.size());
        for (std::size_t j = 0; j < keep.size(); ++j) {
            CHECK(p.chunks[j].box == e.chunks[keep[j]].box);
            check_same(p.chunks[j].storage, e.chunks[keep[j]].storage);
        }
    }
    // No box wanted at all: each array's first chunk only.
    const auto none = decode_metadata(b, [](const std::string&) -> const Box* { return nullptr; });
    CHECK(none.entries.at("grid").chunks.size() == 1);
    CHECK(none.entries.at("fluid.velocity").chunks.size() == 1);
    CHECK(none.entries.at("rng state").chunks.size() == 1);
    CHECK(none.entries.at("empty").chunks.empty());
    // An empty filter is the full decode.
    check_same(decode_metadata(b, WantedBox{}), md);

    // It refuses exactly what the full decode refuses.
    check_truncations("metadata, one rank's part", b, [&](const Bytes& x) { decode_metadata(x, wanted); });
    std::mt19937 rng(77);
    std::uniform_int_distribution<std::size_t> pos(0, b.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    int differ = 0, refused = 0;
    for (int iter = 0; iter < 1000; ++iter) {
        auto x = b;
        for (int k = 0; k < 2; ++k)
            x[pos(rng)] = std::byte(static_cast<std::uint8_t>(byte(rng)));
        bool full = true, mine = true;
        try {
            decode_metadata(x);
        } catch (const error::FormatError&) {
            full = false;
        }
        try {
            decode_metadata(x, wanted);
        } catch (const error::FormatError&) {
            mine = false;
        }
        differ += full != mine;
        refused += !full;
    }
    CHECK(differ == 0);
    CHECK(refused > 0);
}

// The metadata broadcast (load, verify): frames of whole entries that
// concatenate to encode()'s bytes, the same from the structs and the
// columns, decoded frame by frame to what decode_metadata() gives.
TEST_CASE("codec: Metadata in frames", "[codec]")
{
    auto md = sample_metadata();
    md.entries["grid"] = EntryMeta{ItemKind::array, DType::f32, {6, 6}, {}, {}};
    for (int k = 0; k < 9; ++k)
        md.entries["grid"].chunks.push_back(ChunkMeta{Box{{2 * (k / 3), 2 * (k % 3)}, {2, 2}},
                                                      StorageInfo{"__" + std::to_string(k % 4) + "_0.distcp",
                                                                  16u * static_cast<unsigned>(k), 16, {}}});
    const auto whole = encode(md);
    for (const std::size_t max : {std::size_t(0), std::size_t(1), std::size_t(40), std::size_t(1) << 30}) {
        INFO("frames of " << max << " bytes");
        MetadataFrames from_structs(md), from_columns(to_columns(md));
        Bytes joined;
        std::vector<Bytes> frames;
        for (Bytes f; !(f = from_structs.next(max)).empty();) {
            CHECK(f == from_columns.next(max));
            joined.insert(joined.end(), f.begin(), f.end());
            frames.push_back(std::move(f));
        }
        CHECK(from_columns.next(max).empty());
        CHECK(from_structs.next(max).empty()); // and stays so
        CHECK(joined == whole);
        // One entry a frame when frames are smaller than any entry (and the
        // header alone in the first), everything in one when large.
        CHECK(frames.size() == (max <= 1 ? md.entries.size() : max >= whole.size() ? 1 : frames.size()));
        CHECK(frames.size() > (max == 40 ? 2u : 0u));
        MetadataDecoder all;
        for (const auto& f : frames)
            all.add(f);
        check_same(all.finish(), md);
        // a frame missing: refused (a count short, or an entry out of place)
        if (frames.size() > 1) {
            MetadataDecoder short_of_one;
            for (std::size_t i = 0; i + 1 < frames.size(); ++i)
                short_of_one.add(frames[i]);
            CHECK_THAT(message_of<error::FormatError>([&] { short_of_one.finish(); }),
                       StartsWith("OK:") && Contains("entry count"));
        }
        // a frame cut short: refused
        auto cut = frames.back();
        cut.pop_back();
        MetadataDecoder broken;
        for (std::size_t i = 0; i + 1 < frames.size(); ++i)
            broken.add(frames[i]);
        CHECK_THROWS_AS(broken.add(cut), error::FormatError);
    }
    // Frame by frame with a filter: what the one-piece partial decode keeps.
    const Box mine{{3, 0}, {1, 6}};
    const WantedBox wanted = [&](const std::string& fqn) { return fqn == "grid" ? &mine : nullptr; };
    MetadataFrames frames(md);
    MetadataDecoder part(wanted);
    for (Bytes f; !(f = frames.next(1)).empty();)
        part.add(f);
    const auto got = part.finish();
    check_same(got, decode_metadata(whole, wanted));
    CHECK(got.entries.at("grid").chunks.size() == 4); // the first, and row 1 of the 3 x 3 chunk grid

    // verify: asked of every chunk once, in stored order (names, chunk
    // indices, lengths), keeping each entry's first and the accepted ones.
    std::vector<std::tuple<std::string, std::size_t, std::uint64_t>> asked, expected;
    for (const auto& [fqn, e] : md.entries)
        for (std::size_t k = 0; k < e.chunks.size(); ++k)
            expected.emplace_back(fqn, k, e.chunks[k].storage.length);
    MetadataDecoder odd_ones([&](const std::string& fqn, std::size_t k, std::uint64_t length) {
        asked.emplace_back(fqn, k, length);
        return k % 2 == 1;
    });
    MetadataFrames again(md);
    for (Bytes f; !(f = again.next(100)).empty();)
        odd_ones.add(f);
    const auto odd = odd_ones.finish();
    CHECK(asked == expected);
    REQUIRE(odd.entries.size() == md.entries.size());
    for (const auto& [fqn, e] : md.entries) {
        INFO(fqn);
        const auto& kept = odd.entries.at(fqn).chunks;
        std::size_t j = 0;
        for (std::size_t k = 0; k < e.chunks.size(); ++k)
            if (k == 0 || k % 2 == 1) {
                REQUIRE(j < kept.size());
                CHECK(kept[j].box == e.chunks[k].box);
                check_same(kept[j].storage, e.chunks[k].storage);
                ++j;
            }
        CHECK(j == kept.size());
    }
}

TEST_CASE("codec: every truncation is refused with FormatError", "[codec]")
{
    check_truncations("save plan", encode(sample_save_plan()), [](const Bytes& b) { decode_save_plan(b); });
    check_truncations("load plan", encode(sample_load_plan()), [](const Bytes& b) { decode_load_plan(b); });
    check_truncations("write results", encode(sample_results()), [](const Bytes& b) { decode_write_results(b); });
    check_truncations("metadata", encode(sample_metadata()), [](const Bytes& b) { decode_metadata(b); });
    // the empty encodings too
    check_truncations("empty save plan", encode(SavePlan{}), [](const Bytes& b) { decode_save_plan(b); });
    check_truncations("empty metadata", encode(Metadata{}), [](const Bytes& b) { decode_metadata(b); });
}

TEST_CASE("codec: trailing bytes are refused", "[codec]")
{
    auto sp = encode(sample_save_plan());
    sp.push_back(std::byte{0});
    CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(sp); }), StartsWith("OK:") && Contains("trailing"));
    auto lp = encode(sample_load_plan());
    lp.push_back(std::byte{0});
    CHECK_THAT(message_of<error::FormatError>([&] { decode_load_plan(lp); }), StartsWith("OK:") && Contains("trailing"));
    auto wr = encode(sample_results());
    wr.insert(wr.end(), 8, std::byte{0xAB});
    CHECK_THAT(message_of<error::FormatError>([&] { decode_write_results(wr); }),
               StartsWith("OK:") && Contains("trailing"));
    auto md = encode(sample_metadata());
    md.push_back(std::byte{1});
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(md); }), StartsWith("OK:") && Contains("trailing"));
}

TEST_CASE("codec: bad magic numbers are refused", "[codec]")
{
    const auto sp = encode(sample_save_plan());
    const auto lp = encode(sample_load_plan());
    const auto wr = encode(sample_results());
    const auto md = encode(sample_metadata());
    // one encoding is not another
    CHECK_THROWS_AS(decode_save_plan(lp), error::FormatError);
    CHECK_THROWS_AS(decode_load_plan(sp), error::FormatError);
    CHECK_THROWS_AS(decode_write_results(md), error::FormatError);
    CHECK_THROWS_AS(decode_metadata(wr), error::FormatError);
    // a flipped magic byte
    for (std::size_t i = 0; i < 4; ++i) {
        auto b = md;
        b[i] ^= std::byte{0x20};
        CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:") && Contains("magic"));
    }
    auto b = sp;
    b[3] = std::byte{0};
    CHECK_THROWS_AS(decode_save_plan(b), error::FormatError);
    // an empty or foreign buffer
    CHECK_THROWS_AS(decode_metadata(Bytes{}), error::FormatError);
    CHECK_THROWS_AS(decode_metadata(to_bytes("\x89HDF\r\n\x1a\n")), error::FormatError);
}

TEST_CASE("codec: huge counts and lengths are refused before allocating", "[codec]")
{
    const std::uint64_t huge_values[] = {k_huge, std::numeric_limits<std::uint64_t>::max(),
                                         std::uint64_t(1) << 32, std::uint64_t(1) << 40};
    const auto sp = encode(sample_save_plan());
    const auto lp = encode(sample_load_plan());
    const auto wr = encode(sample_results());
    const auto md = encode(sample_metadata());

    // Counts and lengths are varints (Encoder::uv): each is replaced by the
    // huge value's encoding. A save plan and write results start with the
    // name table's count, then the first name's length.
    for (auto v : huge_values) {
        INFO("patched value " << v);
        auto b = sp;
        replace_varint(b, 4, v); // name table count
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:"));
        b = sp;
        replace_varint(b, 5, v); // length of the first fqn
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:"));
        b = sp;
        // storage_data length: the encoding ends with two length-prefixed blobs
        const auto p = sample_save_plan();
        REQUIRE(p.planner_data.size() < 128);
        REQUIRE(p.storage_data.size() < 128);
        const auto storage_len_off = b.size() - p.planner_data.size() - 1 - p.storage_data.size() - 1;
        REQUIRE(read_varint(b, storage_len_off) == p.storage_data.size());
        replace_varint(b, storage_len_off, v);
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:"));

        b = lp;
        replace_varint(b, 4, v); // item count
        CHECK_THAT(message_of<error::FormatError>([&] { decode_load_plan(b); }), StartsWith("OK:"));
        b = wr;
        replace_varint(b, 4, v);
        CHECK_THAT(message_of<error::FormatError>([&] { decode_write_results(b); }), StartsWith("OK:"));
        b = wr;
        replace_varint(b, 5, v);
        CHECK_THAT(message_of<error::FormatError>([&] { decode_write_results(b); }), StartsWith("OK:"));

        // metadata: the entry count follows the header strings, then the
        // file table's count
        Metadata header = sample_metadata();
        header.entries.clear();
        const auto count_off = encode(header).size() - 2;
        REQUIRE(read_varint(md, count_off) == sample_metadata().entries.size());
        b = md;
        replace_varint(b, count_off, v);
        CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:"));
        REQUIRE(read_varint(md, count_off + 1) > 0);
        b = md;
        replace_varint(b, count_off + 1, v);
        CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:"));
        b = md;
        replace_varint(b, 8, v); // length of library_version
        CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:"));
    }
}

TEST_CASE("codec: a count one too large is refused", "[codec]")
{
    // The name table's count, one more or one fewer than it holds.
    auto b = encode(sample_results());
    replace_varint(b, 4, read_varint(b, 4) + 1);
    CHECK_THROWS_AS(decode_write_results(b), error::FormatError);
    b = encode(sample_save_plan());
    replace_varint(b, 4, read_varint(b, 4) + 1);
    CHECK_THROWS_AS(decode_save_plan(b), error::FormatError);
    b = encode(sample_save_plan());
    replace_varint(b, 4, read_varint(b, 4) - 1);
    CHECK_THROWS_AS(decode_save_plan(b), error::FormatError);
}

TEST_CASE("codec: chunk count of a metadata entry patched to 2^60", "[codec]")
{
    // a metadata with a single array entry, built so the offset is known
    Metadata md;
    EntryMeta e;
    e.kind = ItemKind::array;
    e.dtype = DType::u8;
    e.global_shape = {4};
    e.chunks.push_back(ChunkMeta{whole({4}), StorageInfo{"f", 0, 4, {}}});
    md.entries["a"] = e;
    auto b = encode(md);
    // after the header and file table: name(1+1) kind dtype global_shape(1+1)
    // value(1), then the chunk count
    const auto chunk_count_off = metadata_prefix(md) + 2 + 1 + 1 + 2 + 1;
    REQUIRE(read_varint(b, chunk_count_off) == 1);
    REQUIRE(read_varint(b, chunk_count_off - 1) == 0); // the empty value's length
    replace_varint(b, chunk_count_off, k_huge);
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:") && Contains("count"));
}

TEST_CASE("codec: invalid kind, dtype, rank and negative extents are refused", "[codec]")
{
    const auto sp = encode(sample_save_plan());
    // magic, the name table (count, then each name: length, bytes), the
    // item count, the first item's name index, then its kind (few items:
    // the counts and indices take one byte; a name's length one or two)
    std::size_t table = 1;
    std::set<std::string> names;
    for (const auto& it : sample_save_plan().items)
        if (names.insert(it.fqn).second)
            table += (it.fqn.size() < 128 ? 1 : 2) + it.fqn.size();
    const std::size_t kind_off = 4 + table + 1 + 1, dtype_off = kind_off + 1, rank_off = kind_off + 2;
    REQUIRE(std::to_integer<int>(sp[kind_off]) == static_cast<int>(ItemKind::array));
    REQUIRE(std::to_integer<int>(sp[dtype_off]) == static_cast<int>(DType::f32));
    REQUIRE(std::to_integer<int>(sp[rank_off]) == 3);

    for (int k : {4, 5, 0x7F, 0xFF}) {
        auto b = sp;
        b[kind_off] = std::byte(static_cast<std::uint8_t>(k));
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:") && Contains("kind"));
    }
    for (int t : {13, 14, 0x80, 0xFF}) {
        auto b = sp;
        b[dtype_off] = std::byte(static_cast<std::uint8_t>(t));
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:") && Contains("dtype"));
    }
    for (int r : {65, 0xFF}) {
        auto b = sp;
        b[rank_off] = std::byte(static_cast<std::uint8_t>(r));
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:") && Contains("rank"));
    }
    {
        auto b = sp;
        replace_varint(b, rank_off + 1, static_cast<std::uint64_t>(-1)); // first extent of global_shape
        CHECK_THAT(message_of<error::FormatError>([&] { decode_save_plan(b); }), StartsWith("OK:") && Contains("negative"));
    }

    // load plan: kind right after the first fqn
    const auto lp = encode(sample_load_plan());
    const auto lkind = 4 + 1 + 1 + sample_load_plan().items[0].fqn.size();
    REQUIRE(std::to_integer<int>(lp[lkind]) == 0);
    auto b = lp;
    b[lkind] = std::byte{9};
    CHECK_THROWS_AS(decode_load_plan(b), error::FormatError);

    // metadata: kind and dtype of the first entry (in name order)
    const auto md = sample_metadata();
    const auto mkind = metadata_prefix(md) + 1 + md.entries.begin()->first.size();
    const auto mb = encode(md);
    REQUIRE(std::to_integer<int>(mb[mkind]) == static_cast<int>(md.entries.begin()->second.kind));
    b = mb;
    b[mkind] = std::byte{4};
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:") && Contains("kind"));
    b = mb;
    b[mkind + 1] = std::byte{13};
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(b); }), StartsWith("OK:") && Contains("dtype"));
}

TEST_CASE("codec: hand-made encodings: box ranks and duplicate names", "[codec]")
{
    const auto load_plan_with_box = [](const Shape& offsets, const Shape& extents) {
        Encoder e;
        e.u32(0x434c5033); // "CLP3"
        e.count(1);
        e.str("x");
        e.u8(0);
        e.uv(0);
        e.shape(offsets);
        e.shape(extents);
        e.uv(1); // box number
        e.bytes({});
        e.bytes({});
        return e.take();
    };
    // control: a consistent box decodes
    const auto ok = decode_load_plan(load_plan_with_box({1, 2}, {3, 4}));
    REQUIRE(ok.items.size() == 1);
    CHECK(ok.items[0].box == Box{{1, 2}, {3, 4}});
    CHECK(ok.items[0].shard == 1);
    // offsets and extents of different ranks
    CHECK_THAT(message_of<error::FormatError>([&] { decode_load_plan(load_plan_with_box({1, 2}, {3})); }),
               StartsWith("OK:") && Contains("box"));

    const auto header = [](Encoder& e, std::size_t entries, const std::vector<std::string>& files) {
        e.u32(0x434d4433); // "CMD3"
        e.u32(1);
        e.str("v");
        e.u32(1);
        e.str("distcp");
        e.str("now");
        e.u64(0); // checksum block: none
        e.count(entries);
        e.count(files.size());
        for (const auto& f : files)
            e.str(f);
    };
    const auto metadata_with = [&](const std::string& n1, const std::string& n2) {
        Encoder e;
        header(e, 2, {});
        for (const auto& n : {n1, n2}) {
            e.str(n);
            e.u8(static_cast<std::uint8_t>(ItemKind::string));
            e.u8(0);
            e.shape({});
            e.str("value");
            e.count(0);
        }
        return e.take();
    };
    CHECK(decode_metadata(metadata_with("a", "b")).entries.size() == 2);
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(metadata_with("a", "a")); }),
               StartsWith("OK:") && Contains("duplicate"));

    // Chunk files: indices into the table, numbered in order of first use,
    // every file used (the one encoding of a content).
    const auto metadata_with_files = [&](const std::vector<std::string>& files, const std::vector<unsigned>& refs) {
        Encoder e;
        header(e, 1, files);
        e.str("x");
        e.u8(static_cast<std::uint8_t>(ItemKind::array));
        e.u8(static_cast<std::uint8_t>(DType::u8));
        e.shape(Shape{static_cast<std::int64_t>(refs.size())});
        e.str("");
        e.count(refs.size());
        for (std::size_t k = 0; k < refs.size(); ++k) {
            e.shape(Shape{static_cast<std::int64_t>(k)});
            e.shape(Shape{1});
            e.uv(refs[k]);
            e.uv(k); // offset
            e.uv(1); // length
            e.count(0);
        }
        return e.take();
    };
    const auto good = decode_metadata(metadata_with_files({"f", "g"}, {0, 1, 0, 1}));
    const auto& chunks = good.entries.at("x").chunks;
    REQUIRE(chunks.size() == 4);
    CHECK(chunks[0].storage.path == "f");
    CHECK(chunks[1].storage.path == "g");
    CHECK(chunks[2].storage.path == "f");
    CHECK(chunks[3].storage.path == "g");
    CHECK(encode(good) == metadata_with_files({"f", "g"}, {0, 1, 0, 1}));
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(metadata_with_files({"f", "g"}, {1, 0})); }),
               StartsWith("OK:") && Contains("file index 1 out of order"));
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(metadata_with_files({"f", "g"}, {0, 2})); }),
               StartsWith("OK:") && Contains("file index 2 beyond the table"));
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(metadata_with_files({"f", "g"}, {0, 0})); }),
               StartsWith("OK:") && Contains("unused"));
    CHECK_THAT(message_of<error::FormatError>([&] { decode_metadata(metadata_with_files({"f", "f"}, {0, 1})); }),
               StartsWith("OK:") && Contains("twice"));
}

TEST_CASE("codec: random corruption decodes or throws FormatError, nothing else", "[codec]")
{
    std::mt19937 rng(4242);
    struct Target {
        const char* name;
        Bytes good;
        std::function<Bytes(const Bytes&)> roundtrip; // decode then encode
    };
    const Target targets[] = {
        {"save plan", encode(sample_save_plan()), [](const Bytes& b) { return encode(decode_save_plan(b)); }},
        {"load plan", encode(sample_load_plan()), [](const Bytes& b) { return encode(decode_load_plan(b)); }},
        {"write results", encode(sample_results()), [](const Bytes& b) { return encode(decode_write_results(b)); }},
        {"metadata", encode(sample_metadata()), [](const Bytes& b) { return encode(decode_metadata(b)); }},
    };
    for (const auto& t : targets) {
        std::vector<std::string> bad;
        int decoded = 0, refused = 0;
        std::uniform_int_distribution<std::size_t> pos(0, t.good.size() - 1);
        std::uniform_int_distribution<int> byte(0, 255), nflips(1, 4), mode(0, 3);
        for (int iter = 0; iter < 2000; ++iter) {
            auto b = t.good;
            const int m = mode(rng);
            if (m == 3 && b.size() >= 8) {
                // a random 64-bit value anywhere (hits counts and lengths)
                const auto p = std::min(pos(rng), b.size() - 8);
                patch_u64(b, p, (std::uint64_t(rng()) << 32 | rng()) >> (rng() % 64));
            } else {
                for (int k = nflips(rng); k-- > 0;)
                    b[pos(rng)] = std::byte(static_cast<std::uint8_t>(byte(rng)));
            }
            try {
                const auto again = t.roundtrip(b);
                ++decoded;
                // what decodes re-encodes to the same bytes (metadata entries
                // may be reordered by name, so only its size is compared)
                if (std::string(t.name) == "metadata" ? again.size() != b.size() : again != b)
                    bad.push_back("iteration " + std::to_string(iter) + ": re-encoding differs");
            } catch (const error::FormatError&) {
                ++refused;
            } catch (const std::exception& e) {
                bad.push_back("iteration " + std::to_string(iter) + ": " + e.what());
            }
        }
        INFO(t.name << ": " << decoded << " decoded, " << refused << " refused");
        CHECK(bad.empty());
        CHECK(refused > 0);
        CHECK(decoded + refused + static_cast<int>(bad.size()) == 2000);
    }
}

TEST_CASE("codec: varints take 1 to 10 bytes, one encoding per value", "[codec]")
{
    const std::pair<std::uint64_t, std::size_t> cases[] = {
        {0, 1}, {1, 1}, {127, 1}, {128, 2}, {16383, 2}, {16384, 3}, {std::uint64_t(1) << 32, 5},
        {std::uint64_t(1) << 63, 10}, {std::numeric_limits<std::uint64_t>::max(), 10}};
    for (const auto& [v, len] : cases) {
        INFO(v);
        Encoder e;
        e.uv(v);
        e.u8(0xAB); // what follows is left where it is
        const auto b = e.take();
        CHECK(b.size() == len + 1);
        Decoder d(b, "test");
        CHECK(d.uv() == v);
        CHECK(d.u8() == 0xAB);
        CHECK(d.done());
    }
    const auto refused = [](std::initializer_list<int> bytes) {
        Bytes b;
        for (int x : bytes)
            b.push_back(std::byte(static_cast<std::uint8_t>(x)));
        return message_of<error::FormatError>([&] {
            Decoder d(b, "test");
            d.uv();
        });
    };
    CHECK_THAT(refused({}), StartsWith("OK:") && Contains("truncated"));
    CHECK_THAT(refused({0x80}), StartsWith("OK:") && Contains("truncated"));
    CHECK_THAT(refused({0x80, 0x00}), StartsWith("OK:") && Contains("trailing zero"));
    CHECK_THAT(refused({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02}), StartsWith("OK:") && Contains("64 bits"));
    CHECK_THAT(refused({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x01}),
               StartsWith("OK:") && Contains("64 bits"));
    // uv32 refuses what does not fit in 32 bits.
    Encoder e;
    e.uv(std::uint64_t(1) << 32);
    const auto b = e.take();
    Decoder d(b, "test");
    CHECK_THAT(message_of<error::FormatError>([&] { d.uv32(); }), StartsWith("OK:") && Contains("32 bits"));
}

TEST_CASE("hash64", "[codec]")
{
    std::vector<unsigned char> base(37);
    for (std::size_t i = 0; i < base.size(); ++i)
        base[i] = static_cast<unsigned char>(i * 7 + 1);
    const auto h = hash64(base.data(), base.size());

    SECTION("equal inputs hash equal, wherever they are in memory")
    {
        auto copy = base;
        CHECK(hash64(copy.data(), copy.size()) == h);
        std::vector<unsigned char> shifted(base.size() + 3);
        std::copy(base.begin(), base.end(), shifted.begin() + 3); // unaligned
        CHECK(hash64(shifted.data() + 3, base.size()) == h);
        CHECK(hash64(nullptr, 0) == hash64(base.data(), 0));
    }
    SECTION("a change of any single byte changes the hash")
    {
        std::set<std::uint64_t> seen{h};
        for (std::size_t i = 0; i < base.size(); ++i) {
            auto m = base;
            m[i] ^= 0x01;
            INFO("byte " << i);
            CHECK(seen.insert(hash64(m.data(), m.size())).second);
        }
    }
    SECTION("the length matters, also for trailing zero bytes")
    {
        std::vector<unsigned char> zeros(65, 0);
        std::set<std::uint64_t> seen;
        for (std::size_t n = 0; n <= 64; ++n) {
            INFO("length " << n);
            CHECK(seen.insert(hash64(zeros.data(), n)).second);
        }
        CHECK(hash64("abc", 3) != hash64("abc\0", 4));
        CHECK(hash64(base.data(), 36) != h);
    }
    SECTION("a few different inputs")
    {
        CHECK(hash64("a", 1) != hash64("b", 1));
        CHECK(hash64("abcdefgh", 8) != hash64("hgfedcba", 8));
        CHECK(hash64("abcdefghi", 9) != hash64("abcdefghj", 9));
        const double x = 1.0, y = -1.0;
        CHECK(hash64(&x, 8) != hash64(&y, 8));
    }
}
