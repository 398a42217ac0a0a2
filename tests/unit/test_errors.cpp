// The exception types (include/cairn/errors.hpp): each is re-created from its
// kind (the error agreement between ranks) and reaches the C API with its
// own code and its message.
#include "unit_common.hpp"

#include "capi/capi_internal.hpp"
#include "cairn/cairn.h"
#include "cairn/errors.hpp"

#include <stdexcept>
#include <string>

using namespace cairn;
using Catch::Matchers::Contains;

TEST_CASE("error::throw_error re-creates each exception type", "[errors]")
{
    using K = Error::Kind;
    const auto rethrown_kind = [](K k) {
        try {
            error::throw_error(k, "message " + std::to_string(static_cast<int>(k)));
        } catch (const Error& e) {
            CHECK(std::string(e.what()) == "message " + std::to_string(static_cast<int>(k)));
            return e.kind();
        }
        return static_cast<K>(-1);
    };
    for (K k : {K::generic, K::usage, K::mismatch, K::read, K::write, K::format, K::not_found, K::integrity,
                K::concurrent, K::internal})
        CHECK(rethrown_kind(k) == k);
    CHECK_THROWS_AS(error::throw_error(K::usage, "x"), error::WrongAPIUsage);
    CHECK_THROWS_AS(error::throw_error(K::mismatch, "x"), error::Mismatch);
    CHECK_THROWS_AS(error::throw_error(K::read, "x"), error::ReadError);
    CHECK_THROWS_AS(error::throw_error(K::write, "x"), error::WriteError);
    CHECK_THROWS_AS(error::throw_error(K::format, "x"), error::FormatError);
    CHECK_THROWS_AS(error::throw_error(K::not_found, "x"), error::NotFound);
    CHECK_THROWS_AS(error::throw_error(K::integrity, "x"), error::IntegrityError);
    CHECK_THROWS_AS(error::throw_error(K::concurrent, "x"), error::ConcurrentAccess);
    CHECK_THROWS_AS(error::throw_error(K::internal, "x"), error::Internal);
}

TEST_CASE("error::Internal reaches the C API as CAIRN_ERR_INTERNAL with its message", "[errors]")
{
    cairn_clear_error();
    const int rc = capi::guarded("cairn_test_call", [] { throw error::Internal("internal: rows out of order"); });
    CHECK(rc == CAIRN_ERR_INTERNAL);
    CHECK(cairn_last_error_code() == CAIRN_ERR_INTERNAL);
    CHECK_THAT(std::string(cairn_last_error()), Contains("cairn_test_call") && Contains("rows out of order"));
    CHECK(std::string(cairn_error_name(rc)) == "CAIRN_ERR_INTERNAL");

    // the other classes keep their own codes; a plain cairn::Error is "other"
    CHECK(capi::guarded("f", [] { throw error::IntegrityError("x"); }) == CAIRN_ERR_INTEGRITY);
    CHECK(capi::guarded("f", [] { throw error::ConcurrentAccess("x"); }) == CAIRN_ERR_CONCURRENT);
    CHECK(capi::guarded("f", [] { throw Error(Error::Kind::generic, "x"); }) == CAIRN_ERR_OTHER);
    CHECK(capi::guarded("f", [] { throw std::logic_error("x"); }) == CAIRN_ERR_INTERNAL);
    cairn_clear_error();
}
