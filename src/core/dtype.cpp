#include "cairn/dtype.hpp"

#include "cairn/errors.hpp"
#include "core/scalar_text.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace cairn {
namespace {
struct DTypeInfo {
    std::string_view name;
    std::size_t size;
};
constexpr std::array<DTypeInfo, dtype_count> k_info{{
    {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}, {"i8", 1}, {"i16", 2}, {"i32", 4},
    {"i64", 8}, {"u8", 1}, {"u16", 2}, {"u32", 4}, {"u64", 8}, {"bool", 1},
}};
} // namespace

bool dtype_valid(int code) noexcept { return code >= 0 && code < dtype_count; }

std::size_t dtype_size(DType t) noexcept
{
    const int code = static_cast<int>(t);
    return dtype_valid(code) ? k_info[static_cast<std::size_t>(code)].size : 0;
}

std::string_view dtype_name(DType t) noexcept
{
    const int code = static_cast<int>(t);
    return dtype_valid(code) ? k_info[static_cast<std::size_t>(code)].name : std::string_view("invalid");
}

DType dtype_from_name(std::string_view name)
{
    for (int i = 0; i < dtype_count; ++i)
        if (k_info[static_cast<std::size_t>(i)].name == name)
            return static_cast<DType>(i);
    throw error::FormatError("unknown dtype '" + std::string(name) + "'");
}

} // namespace cairn

namespace cairn::detail {

std::string scalar_text(DType t, const void* p, std::size_t n)
{
    if (n != dtype_size(t))
        return "<" + std::to_string(n) + " bytes>";
    auto get = [p](auto v) {
        std::memcpy(&v, p, sizeof v);
        return v;
    };
    std::ostringstream os;
    switch (t) {
    case DType::f32: os << get(float{}); break;
    case DType::f64: os << get(double{}); break;
    case DType::i8: os << int(get(std::int8_t{})); break;
    case DType::i16: os << get(std::int16_t{}); break;
    case DType::i32: os << get(std::int32_t{}); break;
    case DType::i64: os << get(std::int64_t{}); break;
    case DType::u8: os << unsigned(get(std::uint8_t{})); break;
    case DType::u16: os << get(std::uint16_t{}); break;
    case DType::u32: os << get(std::uint32_t{}); break;
    case DType::u64: os << get(std::uint64_t{}); break;
    case DType::boolean: os << (get(std::uint8_t{}) ? "true" : "false"); break;
    case DType::f16:
    case DType::bf16: os << "0x" << std::hex << get(std::uint16_t{}); break;
    }
    return os.str();
}

} // namespace cairn::detail
