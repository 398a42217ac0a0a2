// save(), phase by phase (docs/DESIGN.md, "The save and load sequences"):
//   plan_save:        local plan -> exchange -> global plan -> final plan
//   write_and_commit: write -> commit -> result
// async_save (src/driver/async.cpp) runs the same two halves, the second on a
// helper thread. Every phase that can fail on one rank ends in an error
// agreement (run_phase), so all ranks leave together with the same
// exception.
#include "cairn/checkpoint.hpp"

#include "cairn/async.hpp"
#include "cairn/config.hpp"
#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "core/codec.hpp"
#include "driver/rows.hpp"
#include "driver/collective_checks.hpp"
#include "driver/save_session.hpp"
#include "plan/plan_cache.hpp"

#include <chrono>
#include <string_view>
#include <unordered_map>

namespace cairn {

using detail::Bytes;
using detail::Comm;
using detail::PhaseLog;
using detail::SaveSession;
using detail::run_phase;

const char* version() noexcept { return CAIRN_VERSION_STRING; }

namespace {

// The built-in storage of `o.layout`; Layout::automatic: the first of the
// container and the per-rank writer whose validate_checkpoint_id accepts the
// id (asked of a default-constructed writer, so that options meant for the
// other layout are not checked), else the per-rank writer, which reports
// what is wrong with the id.
std::shared_ptr<StorageWriter> default_writer(const SaveOptions& o, const std::string& id)
{
    if (detail::saves_container(o, id)) {
        ContainerWriterOptions co;
        static_cast<WriteOptions&>(co) = o; // the settings both writers share with SaveOptions
        co.tuning = o.container;
        return std::make_shared<ContainerWriter>(std::move(co));
    }
    DistcpWriterOptions po;
    static_cast<WriteOptions&>(po) = o;
    po.files_per_rank = o.files_per_rank;
    po.mpi_hints = o.per_rank.mpi_hints;
    po.files = o.per_rank.files;
    return std::make_shared<DistcpWriter>(std::move(po));
}

// Puts each rank's write results into the metadata's chunk table; every
// chunk must have been written exactly once.
void attach_results(Metadata& md, const std::vector<std::vector<WriteResult>>& results)
{
    std::size_t expected = 0, got = 0;
    std::unordered_map<std::string_view, EntryMeta*> by_name; // one hash per result, not a tree walk
    by_name.reserve(md.entries.size());
    for (auto& [fqn, e] : md.entries) {
        expected += e.chunks.size();
        by_name.emplace(fqn, &e);
    }
    for (std::size_t r = 0; r < results.size(); ++r) {
        for (const auto& w : results[r]) {
            auto e = by_name.find(w.fqn);
            if (e == by_name.end() || w.chunk >= e->second->chunks.size())
                throw error::WriteError("rank " + std::to_string(r) + " reported a write of '" + w.fqn + "' chunk " +
                                        std::to_string(w.chunk) + ", which the global plan does not have");
            e->second->chunks[w.chunk].storage = w.storage;
            ++got;
        }
    }
    if (got != expected)
        throw error::WriteError("the ranks wrote " + std::to_string(got) + " chunks, the global plan has " +
                                std::to_string(expected));
}

// Hands out the data of the planner that holds it and reports, before each
// item, the bytes of the items handed out before: the per-rank writer asks
// for each item's data just before writing it.
class ProgressSource final : public SavePlanner {
public:
    ProgressSource(SavePlanner& inner, PhaseLog& log) : m_inner(inner), m_log(log) {}
    void set_up_planner(StateDict& state, bool is_coordinator) override
    {
        m_inner.set_up_planner(state, is_coordinator);
    }
    SavePlan create_local_plan() override { return m_inner.create_local_plan(); }
    std::pair<std::vector<SavePlan>, Metadata> create_global_plan(std::vector<SavePlan> plans) override
    {
        return m_inner.create_global_plan(std::move(plans));
    }
    DataRef resolve_data(const WriteItem& item) override
    {
        m_log.progress(m_done);
        m_done += item.nbytes;
        return m_inner.resolve_data(item);
    }

private:
    SavePlanner& m_inner;
    PhaseLog& m_log;
    std::uint64_t m_done = 0;
};

// A rank's local plan, encoded, with the shorter forms it may be sent in.
struct LocalPlan {
    Bytes whole;
    detail::PlanKey key;
    Bytes stripped; ///< ranks but 0: without its name table, sent when every rank's is alike
    Bytes boxes;    ///< ranks but 0: its array boxes, sent when every rank's skeleton is alike
};

// Phase "local plan", collective: every rank sets up its planner and
// storage and makes its local plan (and, for SaveOptions::reuse_plan, its
// key: plan/plan_cache.hpp). Its end agrees, in the same allreduce, on the
// call's arguments (save_arguments): ranks that disagree all throw
// error::Mismatch naming them, before the coordinator touches the storage.
LocalPlan local_plan(SaveSession& s, StateDict& state, const std::string& id, const SaveOptions& o)
{
    const Comm& c = s.comm;
    LocalPlan out;
    out.whole = run_phase(c, "local plan", detail::save_arguments(id, o), [&] {
        s.planner = o.planner ? o.planner : std::make_shared<detail::OwnSavePlanner>();
        s.storage = o.storage ? o.storage : default_writer(o, id);
        s.forms = detail::save_forms(*s.planner, *s.storage);
        s.storage->reset(id);
        s.storage->set_up_storage_writer(c.coordinator(), c.comm);
        s.log.started();
        s.planner->set_up_planner(state, c.coordinator());
        s.local = s.storage->prepare_local_plan(s.planner->create_local_plan());
        // Replicas are written by one holder: the others' bytes are compared
        // at the commit (check_replicas), hashed now, before async_save
        // returns and the caller may change them.
        if (o.check_replicas && c.size > 1 && s.planner->stores_replicas_once())
            s.replica_digests = detail::replica_digests(s.local, *s.planner);
        auto plan = detail::encode(s.local);
        if (o.reuse_plan && s.forms.columnar())
            out.key = detail::plan_key(s.local);
        out.key.names = detail::name_table_hash(plan);
        if (c.coordinator()) {
            out.key.skeleton = detail::plan_skeleton_hash(plan); // rank 0 sends its plan whole
        } else {
            out.boxes = detail::boxes_form(plan, out.key.skeleton);
            out.stripped = detail::strip_name_table(plan);
        }
        s.log.finished();
        return plan;
    });
    return out;
}

// The local plans at the coordinator (or the kept plan, reused).
struct Exchanged {
    detail::PlanReuse reuse;
    std::vector<Bytes> gathered; ///< the coordinator's, index = rank, as sent
};

// Collective, no error to agree on: whether the kept plan is reused (when
// every rank asked for it and the plans are those of the save that kept it:
// plan/plan_cache.hpp), else every rank's local plan to the coordinator, in
// the shortest form it may send (rank 0's whole).
Exchanged exchange(SaveSession& s, LocalPlan local)
{
    const Comm& c = s.comm;
    Exchanged out;
    out.reuse = detail::negotiate_plan_reuse(c, std::move(local.key));
    s.plan_reused = out.reuse.reuse;
    const Bytes& sent = c.coordinator()         ? local.whole
                        : out.reuse.same_skeleton ? local.boxes
                        : out.reuse.same_names    ? local.stripped
                                                  : local.whole;
    if (!out.reuse.reuse)
        out.gathered = detail::gather_bytes(c, sent);
    s.plan_bytes_sent = out.reuse.reuse ? 0 : sent.size();
    return out;
}

void check_plan_count(const Comm& c, std::size_t plans)
{
    if (plans != static_cast<std::size_t>(c.size))
        throw Error(Error::Kind::generic, "the global plan has " + std::to_string(plans) + " plans for " +
                                              std::to_string(c.size) + " ranks");
}

// Coordinator: the global plan on columns (SaveForms::columnar), when the
// plans are what that path takes: the final plans to send, or false (the
// general path then runs and reports any problem).
bool columnar_global_plan(SaveSession& s, const Exchanged& x, std::vector<Bytes>& finals)
{
    std::shared_ptr<detail::ColumnarSavePlan> cp = x.reuse.plan;
    if (cp)
        cp->reuse(s.local);
    else if (s.forms.columnar())
        cp = s.forms.planner->plan_columns(x.gathered);
    if (!cp)
        return false;
    auto shells = s.storage->prepare_global_plan(cp->storage_shells());
    check_plan_count(s.comm, shells.size());
    s.all_bytes = cp->total_bytes();
    finals.reserve(shells.size());
    for (std::size_t r = 0; r < shells.size(); ++r)
        finals.push_back(cp->encode_final(r, shells[r]));
    if (!x.reuse.all_want)
        cp->release_plan_tables();
    else if (!x.reuse.reuse)
        cp->keep(); // a reused plan is kept already
    s.columnar = std::move(cp);
    return true;
}

// Coordinator: the global plan through SavePlanner::create_global_plan and
// StorageWriter::prepare_global_plan; the final plans to send.
std::vector<Bytes> general_global_plan(SaveSession& s, const std::vector<Bytes>& gathered)
{
    std::vector<SavePlan> plans;
    plans.reserve(gathered.size());
    for (const auto& g : gathered) // a plan sent in a shorter form is put back together with rank 0's
        plans.push_back(detail::decode_save_plan(detail::restore_save_plan(g, gathered.front())));
    auto [global, md] = s.planner->create_global_plan(std::move(plans));
    global = s.storage->prepare_global_plan(std::move(global));
    check_plan_count(s.comm, global.size());
    s.metadata = std::move(md);
    std::vector<Bytes> finals;
    for (const auto& p : global) {
        for (const auto& it : p.items)
            s.all_bytes += it.nbytes;
        finals.push_back(detail::encode(p));
    }
    return finals;
}

// Phase "global plan", collective: the coordinator claims the path (one
// writer per path, before the storage touches anything there:
// docs/robustness.md), validates and dedups the plans, builds the metadata
// and lets the storage assign places. Returns the coordinator's final plans
// (empty elsewhere).
std::vector<Bytes> global_plan(SaveSession& s, const Exchanged& x)
{
    std::vector<Bytes> finals;
    run_phase(s.comm, "global plan", [&] {
        s.log.started();
        if (!s.comm.coordinator())
            return;
        if (const auto path = s.storage->lock_path(); !path.empty()) {
            s.may_clean = false;
            s.lock = std::make_unique<detail::PathLock>(path);
            s.may_clean = true;
        }
        if (!columnar_global_plan(s, x, finals))
            finals = general_global_plan(s, x.gathered);
    });
    return finals;
}

// Phase "finish plan", collective: the final plans back to the ranks, each
// finished by its planner.
SavePlan final_plan(SaveSession& s, const std::vector<Bytes>& finals)
{
    const Bytes mine = detail::scatter_bytes(s.comm, finals);
    return run_phase(s.comm, "finish plan", [&] {
        auto central = detail::is_assignment(mine) ? detail::apply_assignment(s.local, mine)
                                                   : detail::decode_save_plan(mine);
        s.local = SavePlan{};
        auto plan = s.planner->finish_plan(std::move(central));
        s.log.finished();
        return plan;
    });
}

// What a rank wrote.
struct Written {
    Bytes results;                ///< its write results, encoded
    std::uint64_t names_hash = 0; ///< of the results' name table
    std::uint64_t bytes = 0;      ///< its data bytes
};

// Phase "write", collective: every rank writes its items with data from
// `source`.
Written write(SaveSession& s, SavePlanner& source, const std::function<void()>& on_written)
{
    Written out;
    for (const auto& it : s.plan.items)
        out.bytes += it.nbytes;
    out.results = run_phase(s.comm, "write", [&] {
        s.log.started(out.bytes);
        // Progress item by item where the writer streams items in turn.
        ProgressSource counted(source, s.log);
        const bool per_item = s.log.reporting() && s.storage->writes_items_in_turn();
        auto r = detail::encode(s.storage->write_data(s.plan, per_item ? counted : source));
        out.names_hash = detail::name_table_hash(r);
        s.log.finished();
        if (on_written)
            on_written();
        return r;
    });
    return out;
}

// Collective: every rank's write results to the coordinator. Ranks but 0
// leave out their name table when every rank's is the same bytes (the names
// of what each wrote: usually those of its plan). A progress callback may
// cancel as the commit begins, on any rank: that is agreed before the
// coordinator commits, in the allreduce that also tells whether every
// rank's name table is the same.
std::vector<Bytes> gather_results(SaveSession& s, const Written& w)
{
    const Comm& c = s.comm;
    std::exception_ptr cancelled;
    try {
        s.log.started();
        s.log.raise();
    } catch (...) {
        cancelled = std::current_exception();
    }
    // Both minimums are this rank's values exactly when every rank's hash is the same.
    std::uint64_t names[2] = {w.names_hash, ~w.names_hash};
    detail::agree(c, "commit", cancelled, names, 2);
    const bool same_names = c.size > 1 && names[0] == w.names_hash && names[1] == ~w.names_hash;
    Bytes sent = same_names && !c.coordinator() ? detail::strip_name_table(w.results) : w.results;
    detail::append_digests(sent, s.replica_digests);
    return detail::gather_bytes(c, sent);
}

// Phase "commit", collective: the coordinator checks the replicas and that
// the path is still this save's, puts the results into the metadata and has
// the storage commit it.
void commit(SaveSession& s, std::vector<Bytes> all_results)
{
    run_phase(s.comm, "commit", [&] {
        if (!s.comm.coordinator())
            return;
        detail::check_replicas(all_results);
        if (s.lock)
            s.lock->check(); // still this save's path
        if (s.columnar) {
            s.columnar->attach_results(all_results);
            s.forms.storage->commit(s.columnar->metadata());
            return;
        }
        std::vector<std::vector<WriteResult>> rs;
        for (const auto& r : all_results) // sent without its name table: rank 0's
            rs.push_back(detail::decode_write_results(detail::restore_name_table(r, all_results.front())));
        attach_results(s.metadata, rs);
        s.storage->finish(s.metadata, rs);
    });
}

// Collective: the result, with the sums over all ranks; `profile`: whether
// the coordinator profiles (PhaseLog::profile_flag).
SaveResult result(SaveSession& s, std::uint64_t written, bool& profile)
{
    const Comm& c = s.comm;
    SaveResult result;
    const std::size_t entries = !c.coordinator() ? 0
                                : s.columnar     ? s.columnar->metadata().entries.size()
                                                 : s.metadata.entries.size();
    std::uint64_t sums[3] = {written, entries, s.log.profile_flag()}; // one allreduce for all
    detail::allreduce_sum(c, sums, 3);
    profile = sums[2] != 0;
    result.bytes_written = sums[0];
    result.entries = static_cast<std::size_t>(sums[1]);
    result.seconds = s.seconds();
    result.plan_reused = s.plan_reused;
    result.plan_bytes_sent = s.plan_bytes_sent;
    return result;
}

} // namespace

namespace detail {

std::unique_ptr<SaveSession> plan_save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm,
                                       const SaveOptions& options)
{
    auto session = std::make_unique<SaveSession>(comm, checkpoint_id, options.progress);
    SaveSession& s = *session;

    s.log.begin(Phase::plan);
    detail::place_rows_for_save(s.comm, state); // RowGroups: offsets and global rows
    LocalPlan local = local_plan(s, state, checkpoint_id, options);
    s.log.end();

    s.log.begin(Phase::exchange);
    Exchanged exchanged = exchange(s, std::move(local));
    try {
        const std::vector<Bytes> finals = global_plan(s, exchanged);
        remember_plan(s.comm, exchanged.reuse, s.columnar);
        s.plan = final_plan(s, finals);
        s.log.end();
    } catch (...) {
        if (s.comm.coordinator() && s.storage && s.may_clean)
            s.storage->abort();
        throw;
    }
    return session;
}

SaveResult write_and_commit(SaveSession& s, SavePlanner& source, const std::function<void()>& on_written)
{
    try {
        s.log.begin(Phase::write);
        const Written written = write(s, source, on_written);
        s.log.end(s.all_bytes);

        s.log.begin(Phase::commit);
        commit(s, gather_results(s, written));
        s.log.finished_after_commit();
        s.log.end();

        bool profile = false;
        const SaveResult r = result(s, written.bytes, profile);
        s.log.finish(r.bytes_written);
        if (profile)
            s.log.profile(s.comm.comm, s.storage->layout_name());
        return r;
    } catch (...) {
        if (s.comm.coordinator())
            s.storage->abort();
        throw;
    }
}

} // namespace detail

SaveResult save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const SaveOptions& options)
{
    wait_for_async_saves(); // never interleave with a save in the background
    auto session = detail::plan_save(state, checkpoint_id, comm, options);
    return detail::write_and_commit(*session, *session->planner);
}

} // namespace cairn
