// Cairn: element types of stored arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace cairn {

/// Element type of an array. The numeric value is part of the on-disk
/// format (docs/FORMAT.md): never renumber, only append.
enum class DType : std::uint8_t {
    f16 = 0,
    bf16 = 1,
    f32 = 2,
    f64 = 3,
    i8 = 4,
    i16 = 5,
    i32 = 6,
    i64 = 7,
    u8 = 8,
    u16 = 9,
    u32 = 10,
    u64 = 11,
    boolean = 12,
};

/// Number of dtypes; valid codes are 0 .. dtype_count-1.
inline constexpr int dtype_count = 13;

/// Size of one element in bytes. Local.
std::size_t dtype_size(DType t) noexcept;

/// Canonical name ("f32", "bool", ...), as written in metadata. Local.
std::string_view dtype_name(DType t) noexcept;

/// Inverse of dtype_name. Throws error::FormatError for an unknown name.
DType dtype_from_name(std::string_view name);

/// True when `code` is a valid DType code. Local.
bool dtype_valid(int code) noexcept;

/// IEEE-754 binary16, stored as its bit pattern.
struct half {
    std::uint16_t bits;
};
/// bfloat16, stored as its bit pattern.
struct bfloat16 {
    std::uint16_t bits;
};

namespace detail {
template <class T>
struct dtype_of_impl;
template <> struct dtype_of_impl<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of_impl<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of_impl<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of_impl<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of_impl<std::int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of_impl<std::int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of_impl<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of_impl<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of_impl<std::uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of_impl<std::uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of_impl<std::uint32_t> { static constexpr DType value = DType::u32; };
template <> struct dtype_of_impl<std::uint64_t> { static constexpr DType value = DType::u64; };
template <> struct dtype_of_impl<bool> { static constexpr DType value = DType::boolean; };
// Never defined: the compiler's error for an element type Cairn cannot
// store names the type as this template's argument.
template <class T>
struct unsupported_element_type;
template <class T, bool integral = std::is_integral_v<T>>
struct integral_dtype {
    static constexpr DType value = unsupported_element_type<T>::value;
};
// `long long` / `long` are distinct types from int64_t on some ABIs.
template <class T>
struct integral_dtype<T, true> {
    static constexpr DType value =
        std::is_signed_v<T>
            ? (sizeof(T) == 8 ? DType::i64 : sizeof(T) == 4 ? DType::i32 : sizeof(T) == 2 ? DType::i16 : DType::i8)
            : (sizeof(T) == 8 ? DType::u64 : sizeof(T) == 4 ? DType::u32 : sizeof(T) == 2 ? DType::u16 : DType::u8);
};
template <class T>
struct dtype_of_impl {
    static_assert(std::is_integral_v<T>,
                  "cairn: unsupported element type (the type is named in 'unsupported_element_type<T>' below): "
                  "arrays hold float, double, cairn::half, cairn::bfloat16, bool and integer types; for a struct, "
                  "add one array per field, or its bytes as a u8 array with a last dimension of sizeof(T)");
    static constexpr DType value = integral_dtype<T>::value;
};
} // namespace detail

/// The DType of a C++ element type (float -> f32, std::int64_t -> i64, ...).
template <class T>
inline constexpr DType dtype_of = detail::dtype_of_impl<std::remove_cv_t<T>>::value;

} // namespace cairn
