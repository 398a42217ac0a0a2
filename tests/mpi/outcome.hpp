// Helpers of the failure tests: run a collective call, record how it ended on
// this rank, and check across ranks that every rank ended the same way.
#pragma once

#include "common.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace cairn_test {

/// How a call ended on this rank.
struct Outcome {
    bool threw = false;      ///< a cairn::Error
    bool foreign = false;    ///< anything else (never expected)
    cairn::Error::Kind kind = cairn::Error::Kind::generic;
    std::string what;
    double seconds = 0;      ///< wall time of the call on this rank
};

/// Runs `f` on this rank (a collective call of every world rank), then
/// meets the other ranks (barrier) so that the coordinator's cleanup is done
/// before anyone looks at the file system.
template <class F>
Outcome attempt(F&& f)
{
    Outcome o;
    const double t0 = MPI_Wtime();
    try {
        f();
    } catch (const cairn::Error& e) {
        o.threw = true;
        o.kind = e.kind();
        o.what = e.what();
    } catch (const std::exception& e) {
        o.foreign = true;
        o.what = e.what();
    } catch (...) {
        o.foreign = true;
        o.what = "unknown exception";
    }
    o.seconds = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    return o;
}

/// Longest wall time of the outcomes over the world.
inline double max_seconds(const Outcome& o)
{
    double t = o.seconds, m = 0;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/// True on every rank when every rank threw a cairn::Error of the same kind
/// `kind` with the same message.
inline bool same_error_everywhere(const Outcome& o, cairn::Error::Kind kind)
{
    const std::uint64_t h = std::hash<std::string>{}(o.what);
    std::uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return all(o.threw && !o.foreign && o.kind == kind) && lo == hi;
}

/// True on every rank when every rank threw a cairn::Error, all of the same
/// kind and with the same message.
inline bool same_error_everywhere(const Outcome& o)
{
    int k = static_cast<int>(o.kind), lo = 0, hi = 0;
    MPI_Allreduce(&k, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&k, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi && same_error_everywhere(o, static_cast<cairn::Error::Kind>(lo));
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs `f` on every rank and returns the message of the exception of type E
// it threw (empty when it threw nothing or something else). The result is
// agreed: "" on every rank unless every rank caught an E with the same text.
template <class E, class F>
std::string agreed_error(F&& f)
{
    std::string msg;
    try {
        f();
    } catch (const E& e) {
        msg = e.what();
    } catch (...) {
        msg.clear();
    }
    std::uint64_t h = std::hash<std::string>{}(msg), hmin = 0, hmax = 0;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (!all(!msg.empty()) || hmin != hmax)
        return "";
    return msg;
}

} // namespace cairn_test
