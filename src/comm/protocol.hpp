// Private: the MPI collectives of the save/load protocol and error agreement.
#pragma once

#include "cairn/errors.hpp"
#include "core/codec.hpp"

#include <mpi.h>

#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cairn::detail {

/// A communicator with its rank and size. The coordinator is rank 0.
struct Comm {
    explicit Comm(MPI_Comm c);
    MPI_Comm comm;
    int rank = 0;
    int size = 1;
    bool coordinator() const noexcept { return rank == 0; }
};

/// Gathers every rank's bytes at the coordinator (index = rank; empty
/// elsewhere). Collective.
std::vector<Bytes> gather_bytes(const Comm& c, const Bytes& mine);

/// Scatters one blob per rank from the coordinator. Collective.
Bytes scatter_bytes(const Comm& c, const std::vector<Bytes>& all);

/// Broadcasts the coordinator's bytes. Collective.
void bcast_bytes(const Comm& c, Bytes& bytes);

/// Streams frames from the coordinator to every rank. Collective: `next`
/// (called on the coordinator only) gives each frame, an empty one ending
/// the stream; every rank, the coordinator included, hands each frame to
/// `take` in order. A throw from `next` ends the stream everywhere: the
/// coordinator rethrows it, the other ranks throw cairn::Error. A throw
/// from `take` stops that rank taking frames, not receiving them, and is
/// rethrown once the stream has ended, so that no rank is left waiting in a
/// broadcast.
void bcast_frames(const Comm& c, const std::function<Bytes()>& next, const std::function<void(const Bytes&)>& take);

/// About the most bytes of a metadata broadcast a rank holds at once: 8 MiB,
/// or what cairn::testing::set_metadata_frame_bytes() set.
std::size_t metadata_frame_bytes() noexcept;

/// The coordinator's metadata on every rank. Collective: `frames` (the
/// coordinator's; null elsewhere) are broadcast with bcast_frames() in
/// frames of about `frame_bytes` (0: metadata_frame_bytes(); the same on
/// every rank), each added to `dec` as it arrives and then dropped; `dec`
/// is not finished. A rank that failed already passes a null `dec`: it only
/// receives. Throws as bcast_frames() does: error::FormatError from `dec`,
/// cairn::Error when the coordinator has no `frames` or fails to encode.
void share_metadata(const Comm& c, MetadataFrames* frames, MetadataDecoder* dec, std::size_t frame_bytes = 0);

/// The kind and message of a caught exception: an Error's own, "out of
/// memory" for std::bad_alloc, what() for another std::exception, else
/// "unknown exception" (all but Error: Error::Kind::generic). Local.
std::pair<Error::Kind, std::string> describe_exception(std::exception_ptr e);

/// Collective over `comm`: `root`'s `kind` and `what` on every rank (the
/// others' are replaced). Throws nothing of its own.
void bcast_error(MPI_Comm comm, int root, Error::Kind& kind, std::string& what);

/// Error agreement at a phase boundary. Collective: every rank passes the
/// exception it caught in the phase (or null). If any rank failed, every rank
/// throws the same exception type with the message of the lowest failing rank,
/// prefixed by its rank and the phase name.
void agree(const Comm& c, const char* phase, std::exception_ptr local);

/// agree(), with the element-wise minimum of `n` values over all ranks
/// computed in the same allreduce, in place (meaningful only when no rank
/// failed: then agree() throws).
void agree(const Comm& c, const char* phase, std::exception_ptr local, std::uint64_t* mins, int n);

struct CallArguments;
/// agree(), with the ranks' agreement on `args` in the same allreduce: when
/// they disagree, every rank throws arguments_differ()'s error instead of
/// any failure of the phase (which may come from the disagreement).
void agree(const Comm& c, const char* phase, std::exception_ptr local, const CallArguments& args);

/// The arguments of a collective call that must be the same on every rank
/// (the checkpoint id, the layout, options that every rank must share), as
/// (what, value) pairs in the same order on every rank.
struct CallArguments {
    const char* call; ///< "save", "load", "verify"
    std::vector<std::pair<const char*, std::string>> values;
    void add(const char* what, std::string value) { values.emplace_back(what, std::move(value)); }
    /// The pair {h, ~h} of the hash h of every value, in `out[0..1]`: after
    /// an element-wise minimum over the ranks, same() tells whether every
    /// rank's hash was the same.
    void hashes(std::uint64_t* out) const;
    static bool same(const std::uint64_t* mins) noexcept { return mins[0] == ~mins[1]; }
};

/// Collective over `c` (a gather and a broadcast); for after the hashes of
/// CallArguments::hashes differed. Throws error::Mismatch on every rank,
/// naming the call, the first argument whose values differ and those values
/// with the lowest rank passing each: "save: ranks disagree on the
/// checkpoint id: rank 0 'a', rank 1 'b'".
[[noreturn]] void arguments_differ(const Comm& c, const CallArguments& args);

/// Collective over `c`: one MPI_Allreduce agrees on `args` (arguments_differ
/// when they differ) and computes the element-wise minimum of `n` more
/// values, in place.
void agree_arguments(const Comm& c, const CallArguments& args, std::uint64_t* mins = nullptr, int n = 0);

/// Runs `f` on this rank, then agrees on success across `c`. Returns f's result.
template <class F>
auto run_phase(const Comm& c, const char* phase, F&& f)
{
    using R = decltype(f());
    std::exception_ptr err;
    if constexpr (std::is_void_v<R>) {
        try {
            f();
        } catch (...) {
            err = std::current_exception();
        }
        agree(c, phase, err);
    } else {
        R result{};
        try {
            result = f();
        } catch (...) {
            err = std::current_exception();
        }
        agree(c, phase, err);
        return result;
    }
}

/// run_phase(), agreeing on `args` too (agree() with CallArguments).
template <class F>
auto run_phase(const Comm& c, const char* phase, const CallArguments& args, F&& f)
{
    using R = decltype(f());
    R result{};
    std::exception_ptr err;
    try {
        result = f();
    } catch (...) {
        err = std::current_exception();
    }
    agree(c, phase, err, args);
    return result;
}

/// Sum of a value over all ranks. Collective.
std::uint64_t allreduce_sum(const Comm& c, std::uint64_t v);

/// Element-wise sum of `n` values over all ranks, in place. Collective;
/// throws cairn::Error when MPI reports an error.
void allreduce_sum(const Comm& c, std::uint64_t* v, int n);

/// Element-wise minimum of `n` values over all ranks, in place. Collective;
/// throws cairn::Error when MPI reports an error.
void allreduce_min(const Comm& c, std::uint64_t* v, int n);

/// Broadcasts the coordinator's value. Collective; throws cairn::Error when
/// MPI reports an error.
std::uint64_t bcast_u64(const Comm& c, std::uint64_t v);

} // namespace cairn::detail
