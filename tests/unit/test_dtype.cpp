// Element types (include/cairn/dtype.hpp).
#include "unit_common.hpp"

#include "cairn/dtype.hpp"
#include "cairn/errors.hpp"

#include <cstdint>
#include <string>
#include <type_traits>

using namespace cairn;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using cairn_test::message_of;

TEST_CASE("dtype size, name and from_name for all 13 dtypes", "[dtype]")
{
    struct Row {
        DType t;
        const char* name;
        std::size_t size;
    };
    const Row rows[] = {
        {DType::f16, "f16", 2}, {DType::bf16, "bf16", 2}, {DType::f32, "f32", 4}, {DType::f64, "f64", 8},
        {DType::i8, "i8", 1},   {DType::i16, "i16", 2},   {DType::i32, "i32", 4}, {DType::i64, "i64", 8},
        {DType::u8, "u8", 1},   {DType::u16, "u16", 2},   {DType::u32, "u32", 4}, {DType::u64, "u64", 8},
        {DType::boolean, "bool", 1},
    };
    REQUIRE(std::size(rows) == static_cast<std::size_t>(dtype_count));
    for (int code = 0; code < dtype_count; ++code) {
        const auto& r = rows[code];
        INFO("code " << code);
        CHECK(static_cast<int>(r.t) == code); // on-disk codes never change
        CHECK(dtype_valid(code));
        CHECK(dtype_size(r.t) == r.size);
        CHECK(dtype_name(r.t) == r.name);
        CHECK(dtype_from_name(r.name) == r.t);
        CHECK(dtype_from_name(dtype_name(r.t)) == r.t);
    }
}

TEST_CASE("invalid dtype codes", "[dtype]")
{
    CHECK_FALSE(dtype_valid(-1));
    CHECK_FALSE(dtype_valid(dtype_count));
    CHECK_FALSE(dtype_valid(255));
    CHECK(dtype_size(static_cast<DType>(13)) == 0);
    CHECK(dtype_size(static_cast<DType>(255)) == 0);
    CHECK(dtype_name(static_cast<DType>(200)) == "invalid");
}

TEST_CASE("dtype_from_name refuses unknown names with FormatError", "[dtype]")
{
    for (const char* bad : {"", "F32", "float", "f32 ", " f32", "boolean", "invalid", "f128", "i"}) {
        INFO("name '" << bad << "'");
        const auto msg = message_of<error::FormatError>([&] { dtype_from_name(bad); });
        CHECK_THAT(msg, StartsWith("OK:") && Contains(std::string("'") + bad + "'"));
    }
    // a FormatError is a cairn::Error of kind format
    try {
        dtype_from_name("nope");
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.kind() == Error::Kind::format);
    }
    // a name with an embedded NUL is not "f32"
    CHECK_THROWS_AS(dtype_from_name(std::string_view("f32\0", 4)), error::FormatError);
}

TEST_CASE("dtype_of maps C++ types", "[dtype]")
{
    CHECK(dtype_of<float> == DType::f32);
    CHECK(dtype_of<double> == DType::f64);
    CHECK(dtype_of<std::int8_t> == DType::i8);
    CHECK(dtype_of<std::int16_t> == DType::i16);
    CHECK(dtype_of<std::int32_t> == DType::i32);
    CHECK(dtype_of<std::int64_t> == DType::i64);
    CHECK(dtype_of<std::uint8_t> == DType::u8);
    CHECK(dtype_of<std::uint16_t> == DType::u16);
    CHECK(dtype_of<std::uint32_t> == DType::u32);
    CHECK(dtype_of<std::uint64_t> == DType::u64);
    CHECK(dtype_of<bool> == DType::boolean);
    CHECK(dtype_of<half> == DType::f16);
    CHECK(dtype_of<bfloat16> == DType::bf16);
    CHECK(dtype_of<long long> == DType::i64);
    CHECK(dtype_of<unsigned long long> == DType::u64);
    CHECK(dtype_of<long> == (sizeof(long) == 8 ? DType::i64 : DType::i32));
    CHECK(dtype_of<unsigned long> == (sizeof(long) == 8 ? DType::u64 : DType::u32));
    CHECK(dtype_of<signed char> == DType::i8);
    CHECK(dtype_of<const double> == DType::f64);
    CHECK(dtype_of<const volatile std::int32_t> == DType::i32);
    // the size of the mapped dtype is the size of the type
    CHECK(dtype_size(dtype_of<long long>) == sizeof(long long));
    CHECK(dtype_size(dtype_of<half>) == sizeof(half));
    CHECK(dtype_size(dtype_of<bool>) == sizeof(bool));
}

