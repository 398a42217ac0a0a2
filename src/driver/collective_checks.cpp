#include "driver/collective_checks.hpp"

#include "cairn/container.hpp"
#include "cairn/errors.hpp"
#include "core/checksum.hpp"
#include "core/strided.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <typeinfo>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

namespace cairn::detail {

namespace {

// The name of a type, demangled where the compiler allows.
std::string type_name(const std::type_info& t)
{
#if defined(__GNUG__)
    int status = 0;
    char* n = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
    if (status == 0 && n) {
        std::string out(n);
        std::free(n);
        return out;
    }
    std::free(n);
#endif
    return t.name();
}

std::string hints_text(const MpiHints& hints)
{
    std::string out;
    for (const auto& [k, v] : hints)
        out += (out.empty() ? "" : ",") + k + "=" + v;
    return "{" + out + "}";
}

std::string tuning_text(const ContainerTuning& t)
{
    return "mpi_hints " + hints_text(t.mpi_hints) + ", file_locking " +
           std::to_string(static_cast<int>(t.file_locking)) + ", metadata_cache_bytes " +
           std::to_string(t.metadata_cache_bytes) + ", collective_metadata " +
           (t.collective_metadata ? "true" : "false") + ", independent_below " + std::to_string(t.independent_below);
}

const char* yes_no(bool b) { return b ? "true" : "false"; }

} // namespace

// Whether save writes a container: Layout::container, or Layout::automatic
// with an id the container writer takes (ends in .h5 or .hdf5).
bool saves_container(const SaveOptions& o, const std::string& id)
{
    if (o.layout == Layout::automatic) {
        try {
            return ContainerWriter().validate_checkpoint_id(id);
        } catch (...) {
            return false; // the per-rank writer reports what is wrong with the id
        }
    }
    return o.layout == Layout::container;
}

// What a save's ranks must agree on (the rest of SaveOptions is per rank:
// staging and writeback bounds, how async_save stages, the per-rank files'
// MPI-IO hints, progress callbacks, reuse_plan, which is negotiated).
CallArguments save_arguments(const std::string& id, const SaveOptions& o)
{
    CallArguments a{"save", {}};
    a.add("the checkpoint id", id);
    if (o.storage) {
        const auto& storage = *o.storage; // typeid of a plain reference: no side effects in it
        a.add("the layout", "storage " + type_name(typeid(storage)));
        return a;
    }
    const bool container = saves_container(o, id);
    a.add("the layout", container ? "container" : "per-rank");
    a.add("overwrite", yes_no(o.overwrite));
    a.add("fsync", yes_no(o.fsync));
    a.add("checksum_block", std::to_string(o.checksum_block));
    a.add("alignment", std::to_string(o.alignment));
    if (container)
        a.add("the container tuning", tuning_text(o.container));
    else {
        a.add("files_per_rank", std::to_string(o.files_per_rank));
        a.add("the data files", o.per_rank.files.str());
    }
    return a;
}

// What the ranks of a load or verify must agree on (the rest of LoadOptions
// is per rank: partial, staging bytes, the per-rank files' MPI-IO hints,
// progress callbacks, the planner).
CallArguments read_arguments(const char* call, const std::string& id, const LoadOptions& o)
{
    CallArguments a{call, {}};
    a.add("the checkpoint id", id);
    if (o.storage) {
        const auto& storage = *o.storage; // typeid of a plain reference: no side effects in it
        a.add("the layout", "storage " + type_name(typeid(storage)));
        return a;
    }
    a.add("the layout", o.layout == Layout::container  ? "container"
                        : o.layout == Layout::per_rank ? "per-rank"
                                                       : "automatic");
    a.add("verify_checksums", yes_no(o.verify_checksums));
    a.add("cooperative", yes_no(o.cooperative));
    if (o.layout != Layout::per_rank)
        a.add("the container tuning", tuning_text(o.container));
    return a;
}

// XXH3-64 of the elements of a host view, in row-major order (the bytes a
// chunk of it stores, whatever the strides).
std::uint64_t view_digest(const StridedView& view)
{
    ChunkHasher h(~std::uint64_t(0)); // one block
    std::int64_t n = 1;
    for (auto e : view.shape)
        n *= e;
    if (n == 0)
        return 0;
    if (is_dense(view)) {
        h.update(view.data, static_cast<std::size_t>(n) * view.elem_size);
    } else {
        const std::int64_t step =
            std::max<std::int64_t>(1, static_cast<std::int64_t>((std::size_t(1) << 20) / view.elem_size));
        std::vector<char> buf(static_cast<std::size_t>(std::min(step, n)) * view.elem_size);
        for (std::int64_t first = 0; first < n; first += step) {
            const std::int64_t count = std::min(step, n - first);
            pack_range(view, first, count, buf.data());
            h.update(buf.data(), static_cast<std::size_t>(count) * view.elem_size);
        }
    }
    const auto sums = h.finish();
    return sums.empty() ? 0 : sums.front();
}

// The digests of this rank's whole-array shards in host memory (replicated
// arrays: add_replicated, or any shard whose box is its whole array), for the
// coordinator to compare between the ranks that hold them.
std::vector<std::pair<std::string, std::uint64_t>> replica_digests(const SavePlan& local, SavePlanner& planner)
{
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const auto& it : local.items) {
        if (it.kind != ItemKind::array || it.box.volume() == 0 || it.box != whole(it.global_shape))
            continue;
        const DataRef d = planner.resolve_data(it);
        if (d.space != MemorySpace::host)
            continue;
        out.emplace_back(it.fqn, view_digest(d.view));
    }
    return out;
}

// Appends the digests to a rank's encoded write results: each name's length
// (8 bytes), the name, the digest (8 bytes), then the bytes of all that (8
// bytes, also when there are none).
void append_digests(Bytes& b, const std::vector<std::pair<std::string, std::uint64_t>>& digests)
{
    const auto put = [&b](std::uint64_t v) {
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        b.insert(b.end(), p, p + sizeof v);
    };
    const std::size_t start = b.size();
    for (const auto& [name, digest] : digests) {
        put(name.size());
        const auto* p = reinterpret_cast<const std::byte*>(name.data());
        b.insert(b.end(), p, p + name.size());
        put(digest);
    }
    put(b.size() - start);
}

// The coordinator: takes the digests off every rank's results (append_digests)
// and throws error::Mismatch when two ranks' copies of a replicated array
// differ, naming the array and the lowest two such ranks.
void check_replicas(std::vector<Bytes>& results)
{
    std::map<std::string, std::vector<std::pair<int, std::uint64_t>>> by_name;
    for (std::size_t r = 0; r < results.size(); ++r) {
        auto& b = results[r];
        std::uint64_t n = 0;
        if (b.size() < 8)
            throw error::FormatError("rank " + std::to_string(r) + " sent write results without replica digests");
        std::memcpy(&n, b.data() + b.size() - 8, 8);
        if (n > b.size() - 8)
            throw error::FormatError("rank " + std::to_string(r) + " sent a bad replica digest list");
        const std::size_t start = b.size() - 8 - static_cast<std::size_t>(n), end = b.size() - 8;
        for (std::size_t at = start; at < end;) {
            std::uint64_t len = 0, digest = 0;
            if (end - at < 8)
                throw error::FormatError("rank " + std::to_string(r) + " sent a bad replica digest list");
            std::memcpy(&len, b.data() + at, 8);
            at += 8;
            if (len > end - at || end - at - len < 8)
                throw error::FormatError("rank " + std::to_string(r) + " sent a bad replica digest list");
            std::string name(reinterpret_cast<const char*>(b.data() + at), static_cast<std::size_t>(len));
            at += static_cast<std::size_t>(len);
            std::memcpy(&digest, b.data() + at, 8);
            at += 8;
            by_name[std::move(name)].emplace_back(static_cast<int>(r), digest);
        }
        b.resize(start);
    }
    for (const auto& [name, holders] : by_name)
        for (const auto& [rank, digest] : holders)
            if (digest != holders.front().second)
                throw error::Mismatch("replicated array '" + name + "' differs between ranks " +
                                      std::to_string(holders.front().first) + " and " + std::to_string(rank) +
                                      " (ranks that hold the whole array must hold the same bytes)");
}

} // namespace cairn::detail
