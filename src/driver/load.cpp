// load(), phase by phase (docs/DESIGN.md, "The save and load sequences"):
//   metadata (the coordinator reads it) -> local plan (the metadata
//   broadcast in frames, each rank plans its reads) -> [global plan, when
//   the planner or storage asks] -> read -> finish (counts, replaced?).
// Every phase that can fail on one rank ends in an error agreement
// (run_phase), so all ranks leave together with the same exception.
#include "cairn/checkpoint.hpp"

#include "cairn/async.hpp"
#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "driver/capabilities.hpp"
#include "driver/rows.hpp"
#include "driver/cooperative.hpp"
#include "driver/read_session.hpp"

#include <exception>
#include <memory>

namespace cairn {

namespace {

using detail::Bytes;
using detail::PhaseLog;
using detail::ReadSession;
using detail::run_phase;

// The bytes a read item brings in.
std::uint64_t read_item_bytes(const Metadata& md, const ReadItem& item)
{
    const auto e = md.entries.find(item.fqn);
    if (e == md.entries.end())
        return 0;
    if (item.kind == ItemKind::bytes)
        return e->second.global_shape.empty() ? 0 : static_cast<std::uint64_t>(e->second.global_shape[0]);
    return static_cast<std::uint64_t>(item.box.volume()) * dtype_size(e->second.dtype);
}

// Forwards to the load planner and reports the bytes of the items read so
// far: the per-rank reader asks for each destination just before reading it.
class ProgressDestination final : public LoadPlanner {
public:
    ProgressDestination(LoadPlanner& inner, const Metadata& md, PhaseLog& log) : m_inner(inner), m_md(md), m_log(log) {}
    void set_up_planner(StateDict& state, const Metadata& metadata, bool is_coordinator) override
    {
        m_inner.set_up_planner(state, metadata, is_coordinator);
    }
    LoadPlan create_local_plan() override { return m_inner.create_local_plan(); }
    DataRef resolve_destination(const ReadItem& item) override
    {
        m_log.progress(m_done);
        m_done += read_item_bytes(m_md, item);
        return m_inner.resolve_destination(item);
    }
    void load_bytes(const ReadItem& item, std::vector<std::byte> data) override
    {
        m_done += data.size();
        m_inner.load_bytes(item, std::move(data));
        m_log.progress(m_done);
    }
    void finish() override { m_inner.finish(); }

private:
    LoadPlanner& m_inner;
    const Metadata& m_md;
    PhaseLog& m_log;
    std::uint64_t m_done = 0;
};

// A load between its phases.
struct Load : ReadSession {
    using ReadSession::ReadSession;
    std::shared_ptr<LoadPlanner> planner;
    Metadata metadata; ///< as this rank keeps it (see local_plan)
    LoadPlan plan;
    bool cooperative = false;           ///< read with driver/cooperative.hpp
    detail::CooperativeCounts together; ///< what it moved
    bool global_step() const { return planner->needs_global_plan() || storage->needs_global_plan(); }
};

// Phase "local plan", collective: every rank gets the metadata in frames of
// whole entries, decoded as they arrive (detail::share_metadata), and plans
// which stored regions overlap its boxes. Where the planner and reader offer
// it (LoadForms::filtered) a rank keeps only the chunks its state's boxes
// overlap (and each entry's first): chunk numbers in its plan index those,
// and nothing else sees them. A rank then holds one frame of the broadcast
// at a time, and of the metadata what it reads, not the checkpoint's chunk
// count.
LoadPlan local_plan(Load& s, StateDict& state, std::unique_ptr<detail::MetadataFrames> frames)
{
    return run_phase(s.comm, "local plan", [&] {
        const bool coord = s.comm.coordinator();
        const detail::LoadForms forms = detail::load_forms(*s.planner, *s.storage);
        // The filter needs the flattened state; a rank that fails here still
        // takes part in the broadcast.
        std::exception_ptr failed;
        detail::WantedBox wanted;
        if (forms.filtered()) {
            try {
                wanted = forms.planner->set_up_before_metadata(state, s.metadata, coord);
            } catch (...) {
                failed = std::current_exception();
            }
        }
        detail::MetadataDecoder dec(std::move(wanted));
        detail::share_metadata(s.comm, frames.get(), failed ? nullptr : &dec);
        frames.reset();
        if (failed)
            std::rethrow_exception(failed);
        s.metadata = dec.finish();
        s.storage->set_up_storage_reader(s.metadata, coord, s.comm.comm);
        if (!forms.filtered())
            s.planner->set_up_planner(state, s.metadata, coord);
        auto local = s.storage->prepare_local_plan(s.planner->create_local_plan());
        if (!s.global_step())
            s.log.finished();
        return local;
    });
}

// The optional global step (the defaults need none), collective: plans to
// the coordinator, which lets the planner and storage adjust them, and back.
LoadPlan global_plan(Load& s)
{
    const bool coord = s.comm.coordinator();
    const auto gathered = detail::gather_bytes(s.comm, detail::encode(s.plan));
    std::vector<Bytes> finals;
    run_phase(s.comm, "global plan", [&] {
        if (!coord)
            return;
        std::vector<LoadPlan> plans;
        for (const auto& g : gathered)
            plans.push_back(detail::decode_load_plan(g));
        plans = s.storage->prepare_global_plan(s.planner->create_global_plan(std::move(plans)));
        for (const auto& p : plans)
            finals.push_back(detail::encode(p));
    });
    const Bytes mine = detail::scatter_bytes(s.comm, finals);
    return run_phase(s.comm, "finish plan", [&] {
        auto final_plan = s.planner->finish_plan(detail::decode_load_plan(mine));
        s.log.finished();
        return final_plan;
    });
}

// Phase "read", collective: every rank reads what it needs (cooperatively:
// driver/cooperative.hpp), then scalars, strings and Stateful objects are
// set (LoadPlanner::finish).
void read(Load& s)
{
    run_phase(s.comm, "read", [&] {
        std::uint64_t to_read = 0;
        if (s.log.active())
            for (const auto& it : s.plan.items)
                to_read += read_item_bytes(s.metadata, it);
        s.log.started(to_read);
        // Progress item by item where the reader reads items in turn.
        ProgressDestination counted(*s.planner, s.metadata, s.log);
        const bool per_item = s.log.reporting() && s.storage->reads_items_in_turn();
        if (s.cooperative) {
            // false: another rank failed; the agreement throws its error here too
            if (!detail::read_cooperatively(s.comm, *s.storage, s.metadata, s.plan, per_item ? counted : *s.planner,
                                            s.options.verify_checksums, s.options.staging_bytes,
                                            [&] { return s.storage->bytes_read(); }, s.together))
                return;
        } else {
            s.storage->read_data(s.plan, per_item ? counted : *s.planner);
        }
        s.planner->finish();
        s.log.finished();
    });
}

// Collective: the result, with the sums over all ranks; throws
// error::ConcurrentAccess on every rank when the checkpoint was replaced
// while it was read.
LoadResult finish(Load& s)
{
    LoadResult result;
    result.bytes_read = s.cooperative ? s.together.bytes_read : s.storage->bytes_read();
    result.bytes_received = s.together.bytes_received;
    result.missing = s.planner->missing();
    result.skipped = s.planner->skipped();
    // With the sum of the bytes read: whether the checkpoint was replaced,
    // whether the coordinator profiles.
    std::uint64_t sums[3] = {result.bytes_read, detail::replaced_meanwhile(s) ? 1u : 0u, s.log.profile_flag()};
    detail::allreduce_sum(s.comm, sums, 3);
    if (sums[1] != 0)
        throw detail::replaced_error(s);
    result.bytes_read_all = sums[0];
    s.log.count(result.bytes_read); // the per-rank line, like the total: bytes read, not planned
    s.log.end(result.bytes_read_all);
    result.seconds = s.seconds();
    s.log.finish(result.bytes_read_all);
    if (sums[2] != 0)
        s.log.profile(s.comm.comm, detail::layout_name(s));
    return result;
}

} // namespace

LoadResult load(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options)
{
    wait_for_async_saves(); // HDF5 (usually not thread-safe) is never called from two threads at once
    Load s(comm, checkpoint_id, options, "load");
    s.planner = options.planner ? options.planner
                                : std::make_shared<detail::OwnLoadPlanner>(options.partial, options.may_be_missing);
    // Cooperative reads with Cairn's own readers (options agreed on every rank).
    s.cooperative = options.cooperative && !options.storage && s.comm.size > 1;

    s.log.begin(Phase::plan);
    auto frames = detail::open_and_read_metadata(s);
    try {
        detail::place_rows_for_load(s.comm, state, s.storage.get(), options); // RowGroups: shares, buffers
        s.plan = local_plan(s, state, std::move(frames));
        if (s.global_step())
            s.plan = global_plan(s);
        s.log.end();

        s.log.begin(Phase::read);
        read(s);
    } catch (const Error&) {
        detail::check_not_replaced(s);
        throw;
    }
    return finish(s);
}

Metadata read_metadata(const std::string& checkpoint_id)
{
    wait_for_async_saves(); // HDF5 (usually not thread-safe) is never called from two threads at once
    if (ContainerReader container; container.validate_checkpoint_id(checkpoint_id)) {
        container.reset(checkpoint_id);
        auto md = container.read_metadata();
        container.check_datasets(md);
        return md;
    }
    DistcpReader reader;
    reader.reset(checkpoint_id);
    return reader.read_metadata();
}

} // namespace cairn
