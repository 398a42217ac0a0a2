// The save and load sequences, top to bottom (DESIGN.md §2). Every phase that
// can fail on one rank ends in an error agreement (run_phase), so all ranks
// leave together with the same exception.
#include "cairn/checkpoint.hpp"

#include "cairn/config.hpp"
#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "comm/protocol.hpp"
#include "core/codec.hpp"

#include <chrono>

namespace cairn {

using detail::Bytes;
using detail::Comm;
using detail::run_phase;

const char* version() noexcept { return CAIRN_VERSION_STRING; }

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<StorageWriter> default_writer(const SaveOptions& o)
{
    return std::make_shared<DistcpWriter>(
        DistcpWriterOptions{o.fsync, o.files_per_rank, o.alignment, o.overwrite, o.staging_bytes});
}

std::shared_ptr<StorageReader> default_reader(const LoadOptions& o)
{
    return std::make_shared<DistcpReader>(o.staging_bytes);
}

// Puts each rank's write results into the metadata's chunk table; every
// chunk must have been written exactly once.
void attach_results(Metadata& md, const std::vector<std::vector<WriteResult>>& results)
{
    std::size_t expected = 0, got = 0;
    for (const auto& [fqn, e] : md.entries)
        expected += e.chunks.size();
    for (std::size_t r = 0; r < results.size(); ++r) {
        for (const auto& w : results[r]) {
            auto e = md.entries.find(w.fqn);
            if (e == md.entries.end() || w.chunk >= e->second.chunks.size())
                throw error::WriteError("rank " + std::to_string(r) + " reported a write of '" + w.fqn + "' chunk " +
                                        std::to_string(w.chunk) + ", which the global plan does not have");
            e->second.chunks[w.chunk].storage = w.storage;
            ++got;
        }
    }
    if (got != expected)
        throw error::WriteError("the ranks wrote " + std::to_string(got) + " chunks, the global plan has " +
                                std::to_string(expected));
}

} // namespace

SaveResult save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const SaveOptions& options)
{
    const auto t0 = std::chrono::steady_clock::now();
    const Comm c(comm);
    const bool coord = c.coordinator();
    std::shared_ptr<SavePlanner> planner;
    std::shared_ptr<StorageWriter> storage;

    // 1. Every rank: its local plan.
    const Bytes local = run_phase(c, "local plan", [&] {
        planner = options.planner ? options.planner : std::make_shared<DefaultSavePlanner>();
        storage = options.storage ? options.storage : default_writer(options);
        storage->reset(checkpoint_id);
        storage->set_up_storage_writer(coord, comm);
        planner->set_up_planner(state, coord);
        return detail::encode(storage->prepare_local_plan(planner->create_local_plan()));
    });

    // 2. Plans to the coordinator, which builds the global plan and metadata.
    const std::vector<Bytes> gathered = detail::gather_bytes(c, local);
    Metadata metadata;
    std::vector<Bytes> finals;
    run_phase(c, "global plan", [&] {
        if (!coord)
            return;
        std::vector<SavePlan> plans;
        plans.reserve(gathered.size());
        for (const auto& g : gathered)
            plans.push_back(detail::decode_save_plan(g));
        auto [global, md] = planner->create_global_plan(std::move(plans));
        global = storage->prepare_global_plan(std::move(global));
        if (global.size() != static_cast<std::size_t>(c.size))
            throw Error(Error::Kind::generic, "the global plan has " + std::to_string(global.size()) + " plans for " +
                                                  std::to_string(c.size) + " ranks");
        metadata = std::move(md);
        for (const auto& p : global)
            finals.push_back(detail::encode(p));
    });

    try {
        // 3. The final plans back to the ranks; each writes its items.
        const Bytes mine = detail::scatter_bytes(c, finals);
        std::uint64_t written = 0;
        const Bytes results = run_phase(c, "write", [&] {
            const SavePlan plan = planner->finish_plan(detail::decode_save_plan(mine));
            for (const auto& it : plan.items)
                written += it.nbytes;
            return detail::encode(storage->write_data(plan, *planner));
        });

        // 4. Write results to the coordinator, which commits.
        const std::vector<Bytes> all_results = detail::gather_bytes(c, results);
        run_phase(c, "commit", [&] {
            if (!coord)
                return;
            std::vector<std::vector<WriteResult>> rs;
            for (const auto& r : all_results)
                rs.push_back(detail::decode_write_results(r));
            attach_results(metadata, rs);
            storage->finish(metadata, rs);
        });

        SaveResult result;
        result.bytes_written = detail::allreduce_sum(c, written);
        result.entries = static_cast<std::size_t>(detail::allreduce_sum(c, coord ? metadata.entries.size() : 0));
        result.seconds = seconds_since(t0);
        return result;
    } catch (...) {
        if (coord)
            storage->abort();
        throw;
    }
}

LoadResult load(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options)
{
    const auto t0 = std::chrono::steady_clock::now();
    const Comm c(comm);
    const bool coord = c.coordinator();
    std::shared_ptr<LoadPlanner> planner;
    std::shared_ptr<StorageReader> storage;

    // 1. The coordinator reads the metadata once; every rank gets a copy.
    Bytes encoded = run_phase(c, "read metadata", [&] {
        planner = options.planner ? options.planner : std::make_shared<DefaultLoadPlanner>(options.partial);
        storage = options.storage ? options.storage : default_reader(options);
        storage->reset(checkpoint_id);
        return coord ? detail::encode(storage->read_metadata()) : Bytes{};
    });
    detail::bcast_bytes(c, encoded);

    // 2. Every rank: which stored regions overlap its boxes.
    Metadata metadata;
    LoadPlan plan = run_phase(c, "local plan", [&] {
        metadata = detail::decode_metadata(encoded);
        storage->set_up_storage_reader(metadata, coord, comm);
        planner->set_up_planner(state, metadata, coord);
        return storage->prepare_local_plan(planner->create_local_plan());
    });

    // 3. Optional global step (the defaults need none).
    if (planner->needs_global_plan() || storage->needs_global_plan()) {
        const auto gathered = detail::gather_bytes(c, detail::encode(plan));
        std::vector<Bytes> finals;
        run_phase(c, "global plan", [&] {
            if (!coord)
                return;
            std::vector<LoadPlan> plans;
            for (const auto& g : gathered)
                plans.push_back(detail::decode_load_plan(g));
            plans = storage->prepare_global_plan(planner->create_global_plan(std::move(plans)));
            for (const auto& p : plans)
                finals.push_back(detail::encode(p));
        });
        const Bytes mine = detail::scatter_bytes(c, finals);
        plan = run_phase(c, "finish plan", [&] { return planner->finish_plan(detail::decode_load_plan(mine)); });
    }

    // 4. Every rank reads what it needs, then scalars, strings and Stateful
    //    objects are set.
    LoadResult result;
    run_phase(c, "read", [&] {
        storage->read_data(plan, *planner);
        planner->finish();
    });
    if (auto* dr = dynamic_cast<DistcpReader*>(storage.get()))
        result.bytes_read = dr->bytes_read();
    if (auto* dp = dynamic_cast<DefaultLoadPlanner*>(planner.get())) {
        result.missing = dp->missing();
        result.skipped = dp->skipped();
    }
    result.seconds = seconds_since(t0);
    return result;
}

Metadata read_metadata(const std::string& checkpoint_id)
{
    DistcpReader reader;
    reader.reset(checkpoint_id);
    return reader.read_metadata();
}

} // namespace cairn
