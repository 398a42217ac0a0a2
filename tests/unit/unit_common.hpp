// Helpers shared by the Cairn unit tests: printing of Cairn types in Catch2
// messages, exception-message capture and per-test temporary directories.
#pragma once

#include "cairn/box.hpp"
#include "cairn/dtype.hpp"
#include "cairn/errors.hpp"
#include "cairn/plan.hpp"

#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

namespace Catch {
template <>
struct StringMaker<cairn::DType> {
    static std::string convert(cairn::DType t)
    {
        return std::string(cairn::dtype_name(t)) + "(" + std::to_string(static_cast<int>(t)) + ")";
    }
};
template <>
struct StringMaker<cairn::ItemKind> {
    static std::string convert(cairn::ItemKind k) { return "ItemKind(" + std::to_string(static_cast<int>(k)) + ")"; }
};
template <>
struct StringMaker<cairn::Box> {
    static std::string convert(const cairn::Box& b)
    {
        return "Box{offsets " + cairn::shape_str(b.offsets) + ", shape " + cairn::shape_str(b.shape) + "}";
    }
};
} // namespace Catch

namespace cairn_test {

/// Runs `f` and describes what it threw: "OK: <what>" when it threw an `E`,
/// "WRONG TYPE: <what>" for any other exception, "NO EXCEPTION" otherwise.
/// Check the result with CHECK_THAT(msg, StartsWith("OK:") && Contains(...)).
template <class E, class F>
std::string message_of(F&& f)
{
    try {
        f();
    } catch (const E& e) {
        return std::string("OK: ") + e.what();
    } catch (const std::exception& e) {
        return std::string("WRONG TYPE: ") + e.what();
    } catch (...) {
        return "WRONG TYPE: (not a std::exception)";
    }
    return "NO EXCEPTION";
}

/// A fresh directory under the build tree, unique per test case and process
/// (safe under ctest -j); removed on destruction unless CAIRN_KEEP_TEST_FILES
/// is set in the environment.
class TempDir {
public:
    TempDir()
    {
        namespace fs = std::filesystem;
        const fs::path base = CAIRN_UNIT_TMPDIR;
        fs::create_directories(base);
        std::string name = Catch::getResultCapture().getCurrentTestName();
        for (auto& c : name)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
                c = '_';
        if (name.size() > 60)
            name.resize(60);
        std::string templ = (base / (name + "-XXXXXX")).string();
        if (!::mkdtemp(templ.data()))
            FAIL("mkdtemp failed for " << templ);
        m_path = templ;
    }
    ~TempDir()
    {
        if (!std::getenv("CAIRN_KEEP_TEST_FILES")) {
            std::error_code ec;
            std::filesystem::remove_all(m_path, ec);
        }
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return m_path; }
    std::string file(const std::string& name) const { return m_path + "/" + name; }

private:
    std::string m_path;
};

} // namespace cairn_test
