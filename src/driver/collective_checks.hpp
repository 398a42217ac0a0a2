// Private: the checks that every rank called save, load or verify alike
// (the collective arguments, compared in an allreduce the call makes
// anyway: comm/protocol.hpp, agree_arguments) and that the ranks holding a
// replicated array hold the same bytes (digests sent with the write
// results, compared by the coordinator before the commit).
#pragma once

#include "cairn/checkpoint.hpp"
#include "cairn/planner.hpp"
#include "comm/protocol.hpp"
#include "core/codec.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cairn::detail {

/// Whether save writes a container: Layout::container, or Layout::automatic
/// with an id the container writer takes (ends in .h5 or .hdf5).
bool saves_container(const SaveOptions& o, const std::string& id);

/// What a save's ranks must agree on (the rest of SaveOptions is per rank).
CallArguments save_arguments(const std::string& id, const SaveOptions& o);

/// What the ranks of a load or verify (`call`) must agree on.
CallArguments read_arguments(const char* call, const std::string& id, const LoadOptions& o);

/// The digests of this rank's whole-array shards in host memory, by name.
std::vector<std::pair<std::string, std::uint64_t>> replica_digests(const SavePlan& local, SavePlanner& planner);

/// Appends the digests to a rank's encoded write results.
void append_digests(Bytes& b, const std::vector<std::pair<std::string, std::uint64_t>>& digests);

/// The coordinator: takes the digests off every rank's results and throws
/// error::Mismatch when two ranks' copies of a replicated array differ.
void check_replicas(std::vector<Bytes>& results);

} // namespace cairn::detail
