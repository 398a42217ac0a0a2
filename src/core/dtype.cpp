#include "cairn/dtype.hpp"

#include "cairn/errors.hpp"

#include <array>

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
