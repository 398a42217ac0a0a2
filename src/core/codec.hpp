// Private: the compact binary encoding of plans, write results and metadata
// exchanged between ranks. Little-endian fixed-width integers, length-prefixed
// strings; every decoder checks bounds and counts before allocating and
// throws error::FormatError on anything malformed.
#pragma once

#include "cairn/plan.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cairn::detail {

using Bytes = std::vector<std::byte>;

class Encoder {
public:
    void u8(std::uint8_t v) { m_out.push_back(std::byte{v}); }
    void u32(std::uint32_t v);
    void u64(std::uint64_t v);
    void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
    void str(const std::string& s);
    void bytes(const Bytes& b);
    void shape(const Shape& s);
    Bytes take() { return std::move(m_out); }

private:
    Bytes m_out;
};

class Decoder {
public:
    Decoder(const std::byte* data, std::size_t size, const char* what) : m_p(data), m_end(data + size), m_what(what) {}
    explicit Decoder(const Bytes& b, const char* what) : Decoder(b.data(), b.size(), what) {}
    std::uint8_t u8();
    std::uint32_t u32();
    std::uint64_t u64();
    std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
    std::string str();
    Bytes bytes();
    Shape shape();
    /// A count of items each at least `min_item_bytes` long; refused when the
    /// remaining input cannot hold that many.
    std::size_t count(std::size_t min_item_bytes);
    bool done() const noexcept { return m_p == m_end; }
    void expect_done();
    [[noreturn]] void fail(const std::string& why) const;

private:
    void need(std::size_t n);
    const std::byte* m_p;
    const std::byte* m_end;
    const char* m_what;
};

Bytes encode(const SavePlan& plan);
SavePlan decode_save_plan(const Bytes& b);
Bytes encode(const LoadPlan& plan);
LoadPlan decode_load_plan(const Bytes& b);
Bytes encode(const std::vector<WriteResult>& results);
std::vector<WriteResult> decode_write_results(const Bytes& b);
Bytes encode(const Metadata& md);
Metadata decode_metadata(const Bytes& b);

/// 64-bit content hash (not cryptographic), used to compare replicas.
std::uint64_t hash64(const void* data, std::size_t size) noexcept;

} // namespace cairn::detail
