// Private: the compact binary encoding of plans, write results and metadata
// exchanged between ranks. Little-endian fixed-width integers, length-prefixed
// strings; every decoder checks bounds and counts before allocating and
// throws error::FormatError on anything malformed. Save plans and write
// results carry a table of the distinct entry names (and, for results, of
// the file paths) that their items refer to by index, so that a name is
// decoded (and, by the coordinator, looked up) once per plan, not once per
// item; the coordinator compares a rank's table name by name with the
// previous rank's before any hashing (src/plan/columnar.cpp).
#pragma once

#include "cairn/plan.hpp"
#include "core/metadata_columns.hpp"

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::detail {

using Bytes = std::vector<std::byte>;

/// Most dimensions an encoded shape may have.
inline constexpr std::size_t max_encoded_ndim = 64;
/// Magic numbers of the encodings read outside codec.cpp (the coordinator's
/// columnar path, src/plan/columnar.cpp): little-endian, first in the bytes.
inline constexpr std::uint32_t magic_save_plan = 0x43535033;        // "CSP3": with a name table, varints
inline constexpr std::uint32_t magic_save_plan_shared = 0x43534e33; // "CSN3": CSP3 without its name table
inline constexpr std::uint32_t magic_save_plan_boxes = 0x43534233;  // "CSB3": CSP3's array boxes and sizes only
inline constexpr std::uint32_t magic_results = 0x43575233;          // "CWR3": with name and path tables, varints
inline constexpr std::uint32_t magic_results_shared = 0x43574e33;   // "CWN3": CWR3 without its name table

/// The fewest bytes an encoded save plan item takes (name, kind, dtype,
/// three shapes, nbytes, digest, value, chunk), and a write result (name,
/// chunk, path, offset, length, checksum count): Decoder::count's guard.
inline constexpr std::size_t save_item_min_bytes = 10;
inline constexpr std::size_t result_min_bytes = 6;

class Encoder {
public:
    /// Room for n more bytes without growing.
    void reserve(std::size_t n)
    {
        if (m_buf.size() - m_n < n)
            grow(n);
    }
    void u8(std::uint8_t v)
    {
        reserve(1);
        m_buf[m_n++] = std::byte{v};
    }
    void u32(std::uint32_t v)
    {
        std::byte b[4];
        for (int i = 0; i < 4; ++i)
            b[i] = std::byte(static_cast<std::uint8_t>(v >> (8 * i)));
        raw(b, 4);
    }
    void u64(std::uint64_t v)
    {
        std::byte b[8];
        for (int i = 0; i < 8; ++i)
            b[i] = std::byte(static_cast<std::uint8_t>(v >> (8 * i)));
        raw(b, 8);
    }
    void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
    /// An unsigned integer in 1 to 10 bytes (LEB128: 7 bits a byte, low
    /// first, the high bit set on every byte but the last).
    void uv(std::uint64_t v)
    {
        reserve(10);
        put_uv(v);
    }
    /// A count of what follows (Decoder::count).
    void count(std::size_t n) { uv(n); }
    void str(const std::string& s);
    void bytes(const Bytes& b);
    void shape(const Shape& s) { shape(s.data(), s.size()); }
    /// The same encoding as shape() of `n` values at `v` (a byte, then
    /// each value as uv(); a negative one takes 10 bytes and is refused on
    /// decoding).
    void shape(const std::int64_t* v, std::size_t n)
    {
        reserve(1 + 10 * n);
        m_buf[m_n++] = std::byte(static_cast<std::uint8_t>(n));
        for (std::size_t i = 0; i < n; ++i)
            put_uv(static_cast<std::uint64_t>(v[i]));
    }
    /// Bytes written so far.
    std::size_t size() const noexcept { return m_n; }
    Bytes take()
    {
        m_buf.resize(m_n);
        m_n = 0;
        return std::move(m_buf);
    }

private:
    // m_buf[0, m_n) is written; the rest is room (sized, so appends are
    // plain copies).
    void raw(const std::byte* p, std::size_t n)
    {
        if (n == 0)
            return; // p may be null (an empty vector's data())
        reserve(n);
        std::memcpy(m_buf.data() + m_n, p, n);
        m_n += n;
    }
    // uv() into room already reserved.
    void put_uv(std::uint64_t v)
    {
        while (v >= 0x80) {
            m_buf[m_n++] = std::byte(static_cast<std::uint8_t>(v | 0x80));
            v >>= 7;
        }
        m_buf[m_n++] = std::byte(static_cast<std::uint8_t>(v));
    }
    void grow(std::size_t n) { m_buf.resize(std::max<std::size_t>({2 * m_buf.size(), m_n + n, 256})); }
    Bytes m_buf;
    std::size_t m_n = 0;
};

class Decoder {
public:
    Decoder(const std::byte* data, std::size_t size, const char* what) : m_p(data), m_end(data + size), m_what(what) {}
    explicit Decoder(const Bytes& b, const char* what) : Decoder(b.data(), b.size(), what) {}
    std::uint8_t u8()
    {
        need(1);
        return std::to_integer<std::uint8_t>(*m_p++);
    }
    std::uint32_t u32()
    {
        need(4);
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i)
            v |= std::uint32_t(std::to_integer<std::uint8_t>(m_p[i])) << (8 * i);
        m_p += 4;
        return v;
    }
    std::uint64_t u64()
    {
        need(8);
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i)
            v |= std::uint64_t(std::to_integer<std::uint8_t>(m_p[i])) << (8 * i);
        m_p += 8;
        return v;
    }
    std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
    /// Encoder::uv; fails on a truncated or over-long encoding.
    std::uint64_t uv()
    {
        // One byte (most counts, kinds, small values): inline; longer ones
        // in uv_more(), so that callers inline this much.
        if (m_p != m_end && std::to_integer<std::uint8_t>(*m_p) < 0x80)
            return std::to_integer<std::uint8_t>(*m_p++);
        return uv_more();
    }
    /// uv() that must fit in 32 bits.
    std::uint32_t uv32()
    {
        const auto v = uv();
        if (v > UINT32_MAX)
            too_wide(v);
        return static_cast<std::uint32_t>(v);
    }
    std::string str();
    /// A string as a view into the input (valid as long as the input).
    std::string_view view_str()
    {
        const auto n = uv();
        need(n);
        std::string_view s(reinterpret_cast<const char*>(m_p), static_cast<std::size_t>(n));
        m_p += n;
        return s;
    }
    Bytes bytes();
    Shape shape();
    /// A shape into `out` (room for max_encoded_ndim values); returns its
    /// number of dimensions. Same checks as shape(), no allocation.
    std::size_t shape_into(std::int64_t* out)
    {
        const std::size_t n = u8();
        if (n > max_encoded_ndim)
            bad_rank(n);
        need(n);
        for (std::size_t i = 0; i < n; ++i) {
            out[i] = static_cast<std::int64_t>(uv());
            if (out[i] < 0)
                negative();
        }
        return n;
    }
    /// The next byte to be read.
    const std::byte* position() const noexcept { return m_p; }
    /// Skips to `p`, a position between position() and the end.
    void skip_to(const std::byte* p) noexcept { m_p = p; }
    std::size_t left() const noexcept { return static_cast<std::size_t>(m_end - m_p); }
    /// A count of items each at least `min_item_bytes` long; refused when the
    /// remaining input cannot hold that many.
    std::size_t count(std::size_t min_item_bytes)
    {
        const auto n = uv();
        if (n > static_cast<std::uint64_t>(m_end - m_p) / (min_item_bytes ? min_item_bytes : 1))
            too_many(n);
        return static_cast<std::size_t>(n);
    }
    bool done() const noexcept { return m_p == m_end; }
    void expect_done();
    [[noreturn]] void fail(const std::string& why) const;

private:
    void need(std::size_t n)
    {
        if (static_cast<std::size_t>(m_end - m_p) < n)
            truncated(n);
    }
    // The failures, out of line (the checks above stay small enough to inline).
    [[noreturn]] void truncated(std::size_t n) const;
    [[noreturn]] void too_wide(std::uint64_t v) const;
    [[noreturn]] void bad_rank(std::size_t n) const;
    [[noreturn]] void negative() const;
    [[noreturn]] void too_many(std::uint64_t n) const;
    std::uint64_t uv_more();
    std::uint64_t uv_long();
    const std::byte* m_p;
    const std::byte* m_end;
    const char* m_what;
};

Bytes encode(const SavePlan& plan);
SavePlan decode_save_plan(const Bytes& b);
SavePlan decode_save_plan(const std::byte* data, std::size_t size);

/// An encoded save plan (or write results) as a rank sends it when every
/// rank's name table is the same bytes (agreed with a hash): without the
/// table, which the coordinator takes from rank 0's. strip_name_table()
/// makes that form from encode()'s (throws FormatError on anything else);
/// has_shared_names() tells it; restore_name_table() puts back the table of
/// `with_names` (an encode() form of the same kind), giving what encode()
/// made.
/// The first four bytes of an encoding as its little-endian magic number (0 when shorter).
std::uint32_t leading_magic(const Bytes& b) noexcept;
/// Reads the magic number; throws FormatError ("bad magic number") unless it is `magic`.
void expect_magic(Decoder& d, std::uint32_t magic);
Bytes strip_name_table(const Bytes& plan);
bool has_shared_names(const Bytes& plan) noexcept;
Bytes restore_name_table(const Bytes& shared, const Bytes& with_names);
/// XXH3 of the name table bytes of an encode() form (save plan or write results).
std::uint64_t name_table_hash(const Bytes& plan);
/// An encoded save plan as a rank sends it when every rank's plan is rank
/// 0's but for the boxes and sizes of its arrays and its storage and planner
/// data (the usual save: the same arrays everywhere, each rank its own part
/// of them; agreed with a hash of the rest, the plan's "skeleton"): for
/// each item in order, an array's box and byte count (nothing for other
/// kinds), then the storage and planner data. `plan` is an encode() form;
/// its skeleton's hash (everything but those fields, the name table
/// included) goes to `skeleton_hash`. Throws FormatError on anything else.
Bytes boxes_form(const Bytes& plan, std::uint64_t& skeleton_hash);
/// boxes_form()'s skeleton hash alone, without building the form (what
/// rank 0, which sends its plan whole, needs). Local; the same FormatError.
std::uint64_t plan_skeleton_hash(const Bytes& plan);
/// The encode() form of a plan as it was sent: a boxes_form() or
/// strip_name_table() form is put back together with `rank0` (rank 0's plan
/// as encode() made it); any other form is returned as it is. Throws
/// FormatError when they do not fit together.
Bytes restore_save_plan(const Bytes& sent, const Bytes& rank0);
Bytes encode(const LoadPlan& plan);
LoadPlan decode_load_plan(const Bytes& b);
Bytes encode(const std::vector<WriteResult>& results);
std::vector<WriteResult> decode_write_results(const Bytes& b);
/// Checkpoint metadata as ranks exchange it: the checkpoint-wide fields,
/// the entry count and the table of data files (in order of first use by
/// the chunks), then the entries in name order, each with its chunks (box,
/// file index, offset, length, checksums). encode() of the structs and of
/// the columns give the same bytes.
Bytes encode(const Metadata& md);
Bytes encode(const MetadataColumns& md);
Metadata decode_metadata(const Bytes& b);
/// What a rank reads of an entry (load): its box, or nullptr for none.
/// Called once per array entry, in entry order; the box must stay valid
/// during the call.
using WantedBox = std::function<const Box*(const std::string& fqn)>;
/// The metadata as one rank needs it to load (local): every entry (kind,
/// dtype, shape, value) but, of each array's chunks, only those that share
/// an element with `wanted(fqn)` (detail::overlaps: for the non-negative
/// boxes of a state and a decoded chunk, what intersect() decides) and the
/// first (which names the array's dataset in a container), in stored
/// order. Chunk numbers are then indices into these, not the stored ones.
/// Every chunk is still parsed and checked as decode_metadata() does;
/// entries of other kinds, and arrays whose wanted box has another number
/// of dimensions, keep all their chunks. Throws error::FormatError exactly
/// where decode_metadata() does; an empty `wanted` is decode_metadata().
Metadata decode_metadata(const Bytes& b, const WantedBox& wanted);

/// encode()'s bytes in pieces, as the coordinator broadcasts them: the
/// first frame holds the header and the file table, every frame whole
/// entries; the frames concatenated are encode()'s bytes. A frame ends at
/// the first entry boundary at or after `max_bytes` (so it holds at least
/// one entry, however large). Local; the content is encoded lazily, one
/// frame per call.
class MetadataFrames {
public:
    explicit MetadataFrames(MetadataColumns md);
    /// Columns whose rows come entry by entry (a reader that expands them
    /// as they are framed): next() throws error::FormatError where the
    /// source finds rows that break the format.
    explicit MetadataFrames(std::unique_ptr<ChunkRowSource> rows);
    explicit MetadataFrames(Metadata md);
    ~MetadataFrames();
    MetadataFrames(MetadataFrames&&) noexcept;
    MetadataFrames& operator=(MetadataFrames&&) noexcept;
    /// The next frame; empty once every entry has been framed.
    Bytes next(std::size_t max_bytes);

    /// Internal; named here so that encode() can frame content it only
    /// borrows, in one piece, without a copy.
    struct State;

private:
    std::unique_ptr<State> m;
};

/// Which chunks a rank keeps (verify): asked of every chunk of every entry,
/// in stored order, with the entry's name, the chunk's stored index and its
/// byte length. Each entry's first chunk is kept whatever the answer (it
/// names a container's dataset): a rank tells its own by its answers.
using KeepChunk = std::function<bool(const std::string& fqn, std::size_t chunk, std::uint64_t length)>;

/// Decodes encode()'s bytes frame by frame (MetadataFrames: each frame
/// whole, in order), keeping of each entry what decode_metadata(b,
/// `wanted`) keeps (or what a KeepChunk selects); a frame's bytes may be
/// dropped once add() returns.
/// Throws error::FormatError where decode_metadata() of the concatenation
/// does (the same checks; a count short of the header's at finish()).
class MetadataDecoder {
public:
    explicit MetadataDecoder(WantedBox wanted = {});
    /// Keeps, of every entry, the first chunk and those `keep` accepts.
    explicit MetadataDecoder(KeepChunk keep);
    ~MetadataDecoder();
    void add(const std::byte* data, std::size_t size);
    void add(const Bytes& frame) { add(frame.data(), frame.size()); }
    /// The metadata once every frame has been added.
    Metadata finish();

private:
    struct State;
    std::unique_ptr<State> m;
};

/// 64-bit content hash (not cryptographic), used to compare replicas.
std::uint64_t hash64(const void* data, std::size_t size) noexcept;

} // namespace cairn::detail
