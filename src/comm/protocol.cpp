#include "comm/protocol.hpp"

#include "cairn/errors.hpp"
#include "cairn/testing.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <numeric>
#include <string>
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
    throw Error(Error::Kind::generic, std::string(call) + " failed: " + std::string(msg, static_cast<std::size_t>(len)));
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
            throw Error(Error::Kind::generic, "internal: scatter of " + std::to_string(all.size()) + " plans to " +
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
                throw Error(Error::Kind::generic, "internal: share_metadata without the coordinator's metadata");
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

void agree(const Comm& c, const char* phase, std::exception_ptr local, std::uint64_t* mins, int count)
{
    // Lowest failing rank, or `size` when every rank succeeded; then `mins`.
    std::vector<std::uint64_t> v(static_cast<std::size_t>(count) + 1);
    v[0] = static_cast<std::uint64_t>(local ? c.rank : c.size);
    std::copy(mins, mins + count, v.begin() + 1);
    allreduce_min(c, v.data(), count + 1);
    std::copy(v.begin() + 1, v.end(), mins);
    const int first = static_cast<int>(v[0]);
    if (first == c.size)
        return;
    int kind = static_cast<int>(Error::Kind::generic);
    std::string what;
    if (c.rank == first) {
        try {
            std::rethrow_exception(local);
        } catch (const Error& e) {
            kind = static_cast<int>(e.kind());
            what = e.what();
        } catch (const std::bad_alloc&) {
            what = "out of memory";
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
            what = "unknown exception";
        }
        what = "rank " + std::to_string(first) + " (" + phase + "): " + what;
    }
    // Every rank learns the error; the failing rank rethrows its own.
    Bytes msg(what.size());
    if (!what.empty()) // empty on the other ranks: memcpy from/to null is undefined
        std::memcpy(msg.data(), what.data(), what.size());
    MPI_Bcast(&kind, 1, MPI_INT, first, c.comm);
    std::uint64_t n = msg.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, first, c.comm);
    msg.resize(static_cast<std::size_t>(n));
    MPI_Bcast(msg.data(), static_cast<int>(n), MPI_BYTE, first, c.comm);
    error::throw_error(static_cast<Error::Kind>(kind),
                       std::string(reinterpret_cast<const char*>(msg.data()), msg.size()));
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
