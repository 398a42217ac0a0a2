#include "comm/protocol.hpp"

#include "cairn/errors.hpp"
#include "cairn/testing.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

namespace cairn::detail {

namespace {

void check_mpi(int rc, const char* call)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(Error::Kind::generic,
                std::string(call) + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
}

int to_int_count(std::size_t n, const char* what)
{
    if (n > static_cast<std::size_t>(INT_MAX))
        throw error::WrongAPIUsage(std::string(what) + " of " + std::to_string(n) +
                                   " bytes exceeds the 2 GiB limit of one MPI message");
    return static_cast<int>(n);
}

std::vector<int> displacements(const std::vector<int>& counts, const char* what)
{
    std::vector<int> displs(counts.size(), 0);
    std::size_t total = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        displs[i] = to_int_count(total, what);
        total += static_cast<std::size_t>(counts[i]);
    }
    to_int_count(total, what);
    return displs;
}

} // namespace

Comm::Comm(MPI_Comm c) : comm(c)
{
    if (c == MPI_COMM_NULL)
        throw error::WrongAPIUsage("MPI_COMM_NULL passed as the communicator");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        throw error::WrongAPIUsage("MPI is not initialized (call MPI_Init before Cairn)");
    check_mpi(MPI_Comm_rank(c, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(c, &size), "MPI_Comm_size");
}

std::vector<Bytes> gather_bytes(const Comm& c, const Bytes& mine)
{
    int n = to_int_count(mine.size(), "a plan");
    std::vector<int> counts(c.coordinator() ? static_cast<std::size_t>(c.size) : 0);
    check_mpi(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, c.comm), "MPI_Gather");
    std::vector<int> displs;
    Bytes all;
    if (c.coordinator()) {
        displs = displacements(counts, "the gathered plans");
        all.resize(static_cast<std::size_t>(displs.back()) + static_cast<std::size_t>(counts.back()));
    }
    check_mpi(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, 0, c.comm),
              "MPI_Gatherv");
    std::vector<Bytes> out;
    if (c.coordinator()) {
        out.resize(static_cast<std::size_t>(c.size));
        for (std::size_t r = 0; r < out.size(); ++r)
            out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
    }
    return out;
}

Bytes scatter_bytes(const Comm& c, const std::vector<Bytes>& all)
{
    std::vector<int> counts, displs;
    Bytes flat;
    if (c.coordinator()) {
        if (all.size() != static_cast<std::size_t>(c.size))
            throw error::Internal("internal: scatter of " + std::to_string(all.size()) + " plans to " +
                                  std::to_string(c.size) + " ranks");
        for (const auto& b : all)
            counts.push_back(to_int_count(b.size(), "a plan"));
        displs = displacements(counts, "the scattered plans");
        for (const auto& b : all)
            flat.insert(flat.end(), b.begin(), b.end());
    }
    int n = 0;
    check_mpi(MPI_Scatter(counts.data(), 1, MPI_INT, &n, 1, MPI_INT, 0, c.comm), "MPI_Scatter");
    Bytes mine(static_cast<std::size_t>(n));
    check_mpi(MPI_Scatterv(flat.data(), counts.data(), displs.data(), MPI_BYTE, mine.data(), n, MPI_BYTE, 0, c.comm),
              "MPI_Scatterv");
    return mine;
}

namespace {
// Broadcasts the coordinator's `n` bytes at `data` (room for them
// elsewhere), in pieces below the int limit.
void bcast_pieces(const Comm& c, std::byte* data, std::uint64_t n)
{
    constexpr std::uint64_t piece = std::uint64_t(1) << 30;
    for (std::uint64_t off = 0; off < n; off += piece) {
        const auto len = static_cast<int>(std::min(piece, n - off));
        check_mpi(MPI_Bcast(data + off, len, MPI_BYTE, 0, c.comm), "MPI_Bcast");
    }
}
} // namespace

void bcast_bytes(const Comm& c, Bytes& bytes)
{
    std::uint64_t n = bytes.size();
    check_mpi(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, c.comm), "MPI_Bcast");
    if (!c.coordinator())
        bytes.resize(static_cast<std::size_t>(n));
    bcast_pieces(c, bytes.data(), n);
}

void bcast_frames(const Comm& c, const std::function<Bytes()>& next, const std::function<void(const Bytes&)>& take)
{
    constexpr std::uint64_t failed = ~std::uint64_t(0); // the coordinator's next() threw
    std::exception_ptr err;                             // the first throw of next() or take() here
    Bytes frame;
    for (;;) {
        std::uint64_t n = 0;
        if (c.coordinator()) {
            try {
                frame = next();
                n = frame.size();
            } catch (...) {
                err = std::current_exception();
                n = failed;
            }
        }
        check_mpi(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, c.comm), "MPI_Bcast");
        if (n == failed) {
            if (c.coordinator())
                std::rethrow_exception(err);
            throw Error(Error::Kind::generic, "the coordinator failed while broadcasting (rank 0 reports why)");
        }
        if (n == 0)
            break;
        if (!c.coordinator())
            frame.resize(static_cast<std::size_t>(n));
        bcast_pieces(c, frame.data(), n);
        if (!err) {
            try {
                take(frame);
            } catch (...) {
                err = std::current_exception();
            }
        }
    }
    if (err)
        std::rethrow_exception(err);
}

namespace {
std::atomic<std::size_t> g_frame_bytes{0}; // 0: the default
} // namespace

std::size_t metadata_frame_bytes() noexcept
{
    const std::size_t n = g_frame_bytes.load(std::memory_order_relaxed);
    return n ? n : std::size_t(8) << 20;
}

void share_metadata(const Comm& c, MetadataFrames* frames, MetadataDecoder* dec, std::size_t frame_bytes)
{
    if (frame_bytes == 0)
        frame_bytes = metadata_frame_bytes();
    bcast_frames(
        c,
        [&] {
            if (!frames)
                throw error::Internal("internal: share_metadata without the coordinator's metadata");
            return frames->next(frame_bytes);
        },
        [&](const Bytes& f) {
            if (dec)
                dec->add(f);
        });
}

void agree(const Comm& c, const char* phase, std::exception_ptr local)
{
    agree(c, phase, local, nullptr, 0);
}

namespace {

// agree(); with `args`, their hashes ride on the same allreduce, and ranks
// that disagree on them throw arguments_differ()'s error before any failure
// of the phase is reported (it may come from the disagreement).
void agree_impl(const Comm& c, const char* phase, std::exception_ptr local, std::uint64_t* mins, int count,
                const CallArguments* args)
{
    // Lowest failing rank, or `size` when every rank succeeded; then the
    // arguments' hashes; then `mins`.
    const std::size_t at = args ? 3 : 1;
    std::vector<std::uint64_t> v(static_cast<std::size_t>(count) + at);
    v[0] = static_cast<std::uint64_t>(local ? c.rank : c.size);
    if (args)
        args->hashes(v.data() + 1);
    std::copy(mins, mins + count, v.begin() + static_cast<std::ptrdiff_t>(at));
    allreduce_min(c, v.data(), count + static_cast<int>(at));
    std::copy(v.begin() + static_cast<std::ptrdiff_t>(at), v.end(), mins);
    if (args && !CallArguments::same(v.data() + 1))
        arguments_differ(c, *args);
    const int first = static_cast<int>(v[0]);
    if (first == c.size)
        return;
    Error::Kind kind = Error::Kind::generic;
    std::string what;
    if (c.rank == first) {
        std::tie(kind, what) = describe_exception(local);
        what = "rank " + std::to_string(first) + " (" + phase + "): " + what;
    }
    // Every rank, the failing one included, throws the same error.
    bcast_error(c.comm, first, kind, what);
    error::throw_error(kind, what);
}

} // namespace

std::pair<Error::Kind, std::string> describe_exception(std::exception_ptr e)
{
    try {
        std::rethrow_exception(e);
    } catch (const Error& x) {
        return {x.kind(), x.what()};
    } catch (const std::bad_alloc&) {
        return {Error::Kind::generic, "out of memory"};
    } catch (const std::exception& x) {
        return {Error::Kind::generic, x.what()};
    } catch (...) {
        return {Error::Kind::generic, "unknown exception"};
    }
}

void bcast_error(MPI_Comm comm, int root, Error::Kind& kind, std::string& what)
{
    int k = static_cast<int>(kind);
    MPI_Bcast(&k, 1, MPI_INT, root, comm);
    kind = static_cast<Error::Kind>(k);
    std::uint64_t n = what.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm);
    what.resize(static_cast<std::size_t>(n));
    MPI_Bcast(what.data(), static_cast<int>(n), MPI_BYTE, root, comm);
}

void agree(const Comm& c, const char* phase, std::exception_ptr local, std::uint64_t* mins, int count)
{
    agree_impl(c, phase, local, mins, count, nullptr);
}

void agree(const Comm& c, const char* phase, std::exception_ptr local, const CallArguments& args)
{
    agree_impl(c, phase, local, nullptr, 0, &args);
}

namespace {

// The values of `args` as bytes: each value's length (8 bytes) and bytes.
Bytes encode_values(const CallArguments& args)
{
    Bytes out;
    for (const auto& [what, value] : args.values) {
        const std::uint64_t n = value.size();
        const auto* p = reinterpret_cast<const std::byte*>(&n);
        out.insert(out.end(), p, p + sizeof n);
        const auto* v = reinterpret_cast<const std::byte*>(value.data());
        out.insert(out.end(), v, v + value.size());
    }
    return out;
}

// The values encode_values() wrote; fewer when the bytes end early.
std::vector<std::string> decode_values(const Bytes& b)
{
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at + 8 <= b.size()) {
        std::uint64_t n = 0;
        std::memcpy(&n, b.data() + at, sizeof n);
        at += 8;
        if (n > b.size() - at)
            break;
        out.emplace_back(reinterpret_cast<const char*>(b.data() + at), static_cast<std::size_t>(n));
        at += static_cast<std::size_t>(n);
    }
    return out;
}

std::string quoted(const std::string& v, std::size_t limit = 200)
{
    return "'" + (v.size() > limit ? v.substr(0, limit) + "..." : v) + "'";
}

} // namespace

void CallArguments::hashes(std::uint64_t* out) const
{
    const Bytes b = encode_values(*this);
    const std::uint64_t h = hash64(b.data(), b.size());
    out[0] = h;
    out[1] = ~h;
}

void arguments_differ(const Comm& c, const CallArguments& args)
{
    const auto all = gather_bytes(c, encode_values(args));
    std::string what;
    if (c.coordinator()) {
        std::vector<std::vector<std::string>> values;
        values.reserve(all.size());
        for (const auto& b : all)
            values.push_back(decode_values(b));
        // The first argument whose values differ; then each distinct value
        // with the lowest rank that passed it (at most 8 of them).
        for (std::size_t a = 0; a < args.values.size() && what.empty(); ++a) {
            std::vector<std::pair<int, const std::string*>> distinct;
            std::size_t more = 0;
            static const std::string none = "(nothing)";
            for (std::size_t r = 0; r < values.size(); ++r) {
                const std::string* v = a < values[r].size() ? &values[r][a] : &none;
                bool seen = false;
                for (const auto& d : distinct)
                    seen = seen || *d.second == *v;
                if (seen)
                    continue;
                if (distinct.size() < 8)
                    distinct.emplace_back(static_cast<int>(r), v);
                else
                    ++more;
            }
            if (distinct.size() < 2)
                continue;
            what = std::string(args.call) + ": ranks disagree on " + args.values[a].first + ": ";
            for (std::size_t i = 0; i < distinct.size(); ++i)
                what +=
                    (i ? ", rank " : "rank ") + std::to_string(distinct[i].first) + " " + quoted(*distinct[i].second);
            if (more)
                what += " and " + std::to_string(more) + " other values";
            what += " (every rank must pass the same)";
        }
        if (what.empty()) // the hashes differed, the values compare equal: cannot happen
            what = std::string(args.call) + ": ranks disagree on the call's arguments";
    }
    Bytes msg(reinterpret_cast<const std::byte*>(what.data()),
              reinterpret_cast<const std::byte*>(what.data() + what.size()));
    bcast_bytes(c, msg);
    throw error::Mismatch(std::string(reinterpret_cast<const char*>(msg.data()), msg.size()));
}

void agree_arguments(const Comm& c, const CallArguments& args, std::uint64_t* mins, int n)
{
    agree_impl(c, args.call, nullptr, mins, n, &args);
}

std::uint64_t allreduce_sum(const Comm& c, std::uint64_t v)
{
    std::uint64_t r = 0;
    check_mpi(MPI_Allreduce(&v, &r, 1, MPI_UINT64_T, MPI_SUM, c.comm), "MPI_Allreduce");
    return r;
}

void allreduce_sum(const Comm& c, std::uint64_t* v, int n)
{
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, MPI_SUM, c.comm), "MPI_Allreduce");
}

void allreduce_min(const Comm& c, std::uint64_t* v, int n)
{
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, MPI_MIN, c.comm), "MPI_Allreduce");
}

std::uint64_t bcast_u64(const Comm& c, std::uint64_t v)
{
    check_mpi(MPI_Bcast(&v, 1, MPI_UINT64_T, 0, c.comm), "MPI_Bcast");
    return v;
}

} // namespace cairn::detail

namespace cairn::testing {

void set_metadata_frame_bytes(std::size_t bytes) noexcept
{
    detail::g_frame_bytes.store(bytes, std::memory_order_relaxed);
}

} // namespace cairn::testing
