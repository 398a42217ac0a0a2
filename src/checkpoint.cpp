// The save and load sequences, top to bottom (DESIGN.md §2). Every phase that
// can fail on one rank ends in an error agreement (run_phase), so all ranks
// leave together with the same exception.
#include "cairn/checkpoint.hpp"

#include "cairn/async.hpp"

#include "cairn/config.hpp"
#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "collective_checks.hpp"
#include "comm/protocol.hpp"
#include "core/codec.hpp"
#include "core/phase_log.hpp"
#include "plan/plan_cache.hpp"
#include "save_session.hpp"
#include "storage/builtin_readers.hpp"
#include "storage/builtin_writers.hpp"
#include "storage/fs.hpp"
#include "storage/path_lock.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <queue>
#include <string_view>
#include <typeinfo>
#include <unordered_map>


namespace cairn {

using detail::Bytes;
using detail::Comm;
using detail::PhaseLog;
using detail::run_phase;
using detail::append_digests;
using detail::check_replicas;
using detail::read_arguments;
using detail::replica_digests;
using detail::save_arguments;
using detail::saves_container;

const char* version() noexcept { return CAIRN_VERSION_STRING; }

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The built-in storage of `o.layout`; Layout::automatic: the first of the
// container and the per-rank writer whose validate_checkpoint_id accepts the
// id (asked of a default-constructed writer, so that options meant for the
// other layout are not checked), else the per-rank writer, which reports
// what is wrong with the id.
std::shared_ptr<StorageWriter> default_writer(const SaveOptions& o, const std::string& id)
{
    if (saves_container(o, id)) {
        ContainerWriterOptions co;
        static_cast<WriteOptions&>(co) = o; // the settings both writers share with SaveOptions
        co.tuning = o.container;
        return std::make_shared<ContainerWriter>(std::move(co));
    }
    DistcpWriterOptions po;
    static_cast<WriteOptions&>(po) = o;
    po.files_per_rank = o.files_per_rank;
    po.mpi_hints = o.per_rank.mpi_hints;
    return std::make_shared<DistcpWriter>(std::move(po));
}

// Collective over `c`, before anything else of a load or verify: one
// allreduce agrees on the call's arguments (read_arguments; every rank
// throws error::Mismatch naming them when they differ) and, for
// Layout::automatic, carries the coordinator's answer of the container
// reader's validate_checkpoint_id (one stat), so that all ranks pick the same
// reader (the container's is collective). Returns whether to read a
// container.
bool agree_to_read(const Comm& c, const std::string& id, const LoadOptions& o, const char* call)
{
    // The minimum is the coordinator's 0 or 1. (Not ~0 on the others: MPICH
    // 4.0's MPI_MIN on MPI_UINT64_T compares as signed, where ~0 is -1.)
    std::uint64_t flag = 2;
    if (c.coordinator()) {
        flag = 0;
        if (o.layout == Layout::automatic && !o.storage) {
            try {
                flag = ContainerReader().validate_checkpoint_id(id) ? 1 : 0;
            } catch (...) {
                flag = 0; // the per-rank reader reports what is wrong
            }
        }
    }
    detail::agree_arguments(c, read_arguments(call, id, o), &flag, 1);
    return o.layout == Layout::container || (o.layout == Layout::automatic && flag == 1);
}

// The built-in reader: the container's when `container`.
std::shared_ptr<StorageReader> default_reader(const LoadOptions& o, bool container)
{
    if (container)
        return std::make_shared<ContainerReader>(o.staging_bytes, o.container, o.verify_checksums);
    return std::make_shared<DistcpReader>(o.staging_bytes, o.verify_checksums, o.per_rank.mpi_hints);
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
    void set_up_planner(StateDict& state, bool is_coordinator) override { m_inner.set_up_planner(state, is_coordinator); }
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

} // namespace

namespace detail {

std::unique_ptr<SaveSession> plan_save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm,
                                       const SaveOptions& options)
{
    auto session = std::make_unique<SaveSession>(comm, checkpoint_id, options.progress);
    auto& s = *session;
    const Comm& c = s.comm;
    const bool coord = c.coordinator();

    // 1. Every rank: its local plan (and, for SaveOptions::reuse_plan, its
    //    key: plan/plan_cache.hpp).
    s.log.begin(Phase::plan);
    bool columnar = false; // the default planner with Cairn's own storage
    PlanKey key;
    Bytes stripped; // ranks but 0: the plan without its name table, sent when every rank's is alike
    Bytes boxes;    // ranks but 0: the plan's array boxes, sent when every rank's skeleton is alike
    // Its end agrees, in the same allreduce, on the call's arguments
    // (save_arguments): ranks that disagree all throw error::Mismatch
    // naming them, before the coordinator touches the storage.
    const Bytes local = run_phase(c, "local plan", save_arguments(checkpoint_id, options), [&] {
        s.planner = options.planner ? options.planner : std::make_shared<DefaultSavePlanner>();
        s.storage = options.storage ? options.storage : default_writer(options, checkpoint_id);
        s.storage->reset(checkpoint_id);
        s.storage->set_up_storage_writer(coord, comm);
        s.log.started();
        s.planner->set_up_planner(state, coord);
        s.local = s.storage->prepare_local_plan(s.planner->create_local_plan());
        // Replicas are written by one holder: the others' bytes are compared
        // at the commit (check_replicas), hashed now, before async_save
        // returns and the caller may change them.
        if (options.check_replicas && c.size > 1 && dynamic_cast<DefaultSavePlanner*>(s.planner.get()))
            s.replica_digests = replica_digests(s.local, *s.planner);
        auto plan = encode(s.local);
        const SavePlanner& planner = *s.planner;
        columnar = typeid(planner) == typeid(DefaultSavePlanner) && detail::BuiltinWriters::is_builtin(*s.storage);
        if (options.reuse_plan && columnar)
            key = plan_key(s.local);
        key.names = name_table_hash(plan);
        if (coord) {
            key.skeleton = plan_skeleton_hash(plan); // rank 0 sends its plan whole
        } else {
            boxes = boxes_form(plan, key.skeleton);
            stripped = strip_name_table(plan);
        }
        s.log.finished();
        return plan;
    });
    s.log.end();

    // 2. Plans to the coordinator, which validates, dedups, builds the
    //    metadata and lets the storage assign places; or, when every rank
    //    asked for it and the plans are those of the save that kept it, the
    //    kept plan (plan/plan_cache.hpp) without gathering the plans.
    s.log.begin(Phase::exchange);
    auto reuse = negotiate_plan_reuse(c, std::move(key));
    s.plan_reused = reuse.reuse;
    // The shortest form of its plan a rank may send (rank 0's whole).
    const Bytes& sent = coord ? local : reuse.same_skeleton ? boxes : reuse.same_names ? stripped : local;
    const std::vector<Bytes> gathered = reuse.reuse ? std::vector<Bytes>{} : gather_bytes(c, sent);
    s.plan_bytes_sent = reuse.reuse ? 0 : sent.size();
    std::vector<Bytes> finals;
    try {
        run_phase(c, "global plan", [&] {
            s.log.started();
            if (!coord)
                return;
            // One writer per path: the coordinator claims it before the
            // storage touches anything there (docs/robustness.md).
            if (detail::BuiltinWriters::is_builtin(*s.storage)) {
                s.may_clean = false;
                s.lock = std::make_unique<PathLock>(checkpoint_id);
                s.may_clean = true;
            }
            // The default planner with Cairn's own storage: on columns, when
            // the plans are what that path takes (else the general path
            // below runs and reports any problem).
            std::shared_ptr<detail::ColumnarSavePlan> cp = reuse.plan;
            if (cp)
                cp->reuse(s.local);
            else if (columnar) {
                cp = std::make_shared<detail::ColumnarSavePlan>();
                if (!cp->ingest(gathered) || !cp->plan())
                    cp.reset();
            }
            if (cp) {
                auto shells = s.storage->prepare_global_plan(cp->storage_shells());
                if (shells.size() != static_cast<std::size_t>(c.size))
                    throw Error(Error::Kind::generic, "the global plan has " + std::to_string(shells.size()) +
                                                          " plans for " + std::to_string(c.size) + " ranks");
                s.all_bytes = cp->total_bytes();
                finals.reserve(shells.size());
                for (std::size_t r = 0; r < shells.size(); ++r)
                    finals.push_back(cp->encode_final(r, shells[r]));
                if (!reuse.all_want)
                    cp->release_plan_tables();
                else if (!reuse.reuse)
                    cp->keep(); // a reused plan is kept already
                s.columnar = std::move(cp);
                return;
            }
            std::vector<SavePlan> plans;
            plans.reserve(gathered.size());
            for (const auto& g : gathered) // a plan sent in a shorter form is put back together with rank 0's
                plans.push_back(decode_save_plan(restore_save_plan(g, gathered.front())));
            auto [global, md] = s.planner->create_global_plan(std::move(plans));
            global = s.storage->prepare_global_plan(std::move(global));
            if (global.size() != static_cast<std::size_t>(c.size))
                throw Error(Error::Kind::generic, "the global plan has " + std::to_string(global.size()) +
                                                      " plans for " + std::to_string(c.size) + " ranks");
            s.metadata = std::move(md);
            for (const auto& p : global) {
                for (const auto& it : p.items)
                    s.all_bytes += it.nbytes;
                finals.push_back(encode(p));
            }
        });

        remember_plan(c, reuse, s.columnar);

        // 3. The final plans back to the ranks.
        const Bytes mine = scatter_bytes(c, finals);
        s.plan = run_phase(c, "finish plan", [&] {
            auto central = detail::is_assignment(mine) ? detail::apply_assignment(s.local, mine) : decode_save_plan(mine);
            s.local = SavePlan{};
            auto plan = s.planner->finish_plan(std::move(central));
            s.log.finished();
            return plan;
        });
        s.log.end();
    } catch (...) {
        if (coord && s.storage && s.may_clean)
            s.storage->abort();
        throw;
    }
    return session;
}

SaveResult write_and_commit(SaveSession& s, SavePlanner& source, const std::function<void()>& on_written)
{
    const Comm& c = s.comm;
    const bool coord = c.coordinator();
    try {
        // 4. Every rank writes its items.
        std::uint64_t written = 0;
        for (const auto& it : s.plan.items)
            written += it.nbytes;
        s.log.begin(Phase::write);
        std::uint64_t names_hash = 0; // of the results' name table (step 5)
        const Bytes results = run_phase(c, "write", [&] {
            s.log.started(written);
            // Progress item by item where the writer streams items in turn.
            ProgressSource counted(source, s.log);
            const bool per_item = s.log.reporting() && dynamic_cast<DistcpWriter*>(s.storage.get());
            auto r = encode(s.storage->write_data(s.plan, per_item ? counted : source));
            names_hash = name_table_hash(r);
            s.log.finished();
            if (on_written)
                on_written();
            return r;
        });
        s.log.end(s.all_bytes);

        // 5. Write results to the coordinator, which commits. Ranks but 0
        //    leave out their name table when every rank's is the same bytes
        //    (the names of what each wrote: usually those of its plan).
        s.log.begin(Phase::commit);
        // A progress callback may cancel as the commit begins, on any rank:
        // that is agreed before the coordinator commits, in the allreduce
        // that also tells whether every rank's name table is the same.
        std::exception_ptr cancelled;
        try {
            s.log.started();
            s.log.raise();
        } catch (...) {
            cancelled = std::current_exception();
        }
        // Both minimums are this rank's values exactly when every rank's hash is the same.
        std::uint64_t names[2] = {names_hash, ~names_hash};
        agree(c, "commit", cancelled, names, 2);
        const bool same_names = c.size > 1 && names[0] == names_hash && names[1] == ~names_hash;
        Bytes sent = same_names && !coord ? strip_name_table(results) : results;
        append_digests(sent, s.replica_digests);
        std::vector<Bytes> all_results = gather_bytes(c, sent);
        run_phase(c, "commit", [&] {
            if (coord)
                check_replicas(all_results);
            if (coord && s.lock)
                s.lock->check(); // still this save's path
            if (coord && s.columnar) {
                s.columnar->attach_results(all_results);
                detail::BuiltinWriters::finish(*s.storage, s.columnar->metadata());
            } else if (coord) {
                std::vector<std::vector<WriteResult>> rs;
                for (const auto& r : all_results) // sent without its name table: rank 0's
                    rs.push_back(decode_write_results(restore_name_table(r, all_results.front())));
                attach_results(s.metadata, rs);
                s.storage->finish(s.metadata, rs);
            }
        });
        s.log.finished_after_commit();
        s.log.end();

        SaveResult result;
        const std::size_t entries = !coord ? 0
                                    : s.columnar ? s.columnar->metadata().entries.size()
                                                 : s.metadata.entries.size();
        std::uint64_t sums[2] = {written, entries}; // one allreduce for both
        allreduce_sum(c, sums, 2);
        result.bytes_written = sums[0];
        result.entries = static_cast<std::size_t>(sums[1]);
        result.seconds = seconds_since(s.t0);
        result.plan_reused = s.plan_reused;
        result.plan_bytes_sent = s.plan_bytes_sent;
        s.log.finish(result.bytes_written);
        return result;
    } catch (...) {
        if (coord)
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

namespace {

error::ConcurrentAccess replaced_error(const std::string& id, const char* call)
{
    return error::ConcurrentAccess("checkpoint " + id + " was replaced by another job during this " + call +
                                   " (a save to the same path): what was read mixes two checkpoints; " + call +
                                   " it again once that save is over");
}

// After an error agreed on every rank, with Cairn's own readers (`builtin`,
// the same everywhere): throws replaced_error() on every rank when the
// coordinator finds the checkpoint replaced since it noted `seen` (the
// error, say a checksum mismatch, then comes from the replacement).
// Collective (one broadcast) when `builtin`.
void check_not_replaced(const Comm& c, const detail::CheckpointIdentity& seen, const std::string& id,
                        const char* call, bool builtin)
{
    if (builtin && detail::bcast_u64(c, c.coordinator() && detail::replaced(seen) ? 1 : 0) != 0)
        throw replaced_error(id, call);
}

// The coordinator's metadata, to broadcast (share_metadata). Cairn's own
// readers hand it over as columns, encoded without a per-chunk object, their
// chunk rows expanded and checked one entry at a time as they are framed.
std::unique_ptr<detail::MetadataFrames> metadata_frames(StorageReader& storage)
{
    if (detail::BuiltinReaders::is_builtin(storage))
        return std::make_unique<detail::MetadataFrames>(detail::BuiltinReaders::read_metadata_rows(storage));
    return std::make_unique<detail::MetadataFrames>(storage.read_metadata());
}

} // namespace

LoadResult load(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options)
{
    wait_for_async_saves(); // HDF5 (usually not thread-safe) is never called from two threads at once
    const auto t0 = std::chrono::steady_clock::now();
    const Comm c(comm);
    const bool coord = c.coordinator();
    const bool container = agree_to_read(c, checkpoint_id, options, "load");
    PhaseLog log("load", checkpoint_id, c.rank, options.progress);
    detail::CheckpointIdentity watch; // the coordinator's, with Cairn's own readers
    std::shared_ptr<LoadPlanner> planner;
    std::shared_ptr<StorageReader> storage;

    // 1. The coordinator reads the metadata once (metadata_frames).
    log.begin(Phase::plan);
    std::unique_ptr<detail::MetadataFrames> frames;
    run_phase(c, "read metadata", [&] {
        log.started();
        planner = options.planner ? options.planner : std::make_shared<DefaultLoadPlanner>(options.partial);
        storage = options.storage ? options.storage : default_reader(options, container);
        storage->reset(checkpoint_id);
        if (!coord)
            return;
        if (!options.storage)
            watch = detail::checkpoint_identity(checkpoint_id, container);
        frames = metadata_frames(*storage);
    });

    // A checkpoint replaced while this load reads (another job's save with
    // overwrite) shows as a checksum mismatch or a mix of two checkpoints:
    // the coordinator notes the checkpoint's identity as it reads the
    // metadata and compares it once every rank is done (or failed).
    Metadata metadata;
    LoadPlan plan;
    LoadResult result;
    try {
        // 2. Every rank gets the metadata in frames of whole entries, decoded
        //    as they arrive (detail::share_metadata), and plans which stored
        //    regions overlap its boxes. With the default planner and Cairn's own
        //    readers a rank keeps only the chunks its state's boxes overlap (and
        //    each entry's first): chunk numbers in its plan index those, and
        //    nothing else sees them. A rank then holds one frame of the
        //    broadcast at a time, and of the metadata what it reads, not the
        //    checkpoint's chunk count.
        plan = run_phase(c, "local plan", [&] {
            const LoadPlanner& p = *planner;
            const bool own = typeid(p) == typeid(DefaultLoadPlanner) && detail::BuiltinReaders::is_builtin(*storage);
            // The filter needs the flattened state; a rank that fails here still
            // takes part in the broadcast.
            std::exception_ptr failed;
            detail::WantedBox wanted;
            if (own) {
                try {
                    // Flattens the state; it reads `metadata` only once it is set.
                    planner->set_up_planner(state, metadata, coord);
                    const auto& dp = static_cast<const DefaultLoadPlanner&>(p);
                    wanted = [&dp](const std::string& fqn) { return dp.requested_box(fqn); };
                } catch (...) {
                    failed = std::current_exception();
                }
            }
            detail::MetadataDecoder dec(std::move(wanted));
            detail::share_metadata(c, frames.get(), failed ? nullptr : &dec);
            frames.reset();
            if (failed)
                std::rethrow_exception(failed);
            metadata = dec.finish();
            storage->set_up_storage_reader(metadata, coord, comm);
            if (!own)
                planner->set_up_planner(state, metadata, coord);
            auto local = storage->prepare_local_plan(planner->create_local_plan());
            if (!planner->needs_global_plan() && !storage->needs_global_plan())
                log.finished();
            return local;
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
            plan = run_phase(c, "finish plan", [&] {
                auto final_plan = planner->finish_plan(detail::decode_load_plan(mine));
                log.finished();
                return final_plan;
            });
        }
        log.end();

        // 4. Every rank reads what it needs, then scalars, strings and Stateful
        //    objects are set.
        log.begin(Phase::read);
        run_phase(c, "read", [&] {
            std::uint64_t to_read = 0;
            if (log.active())
                for (const auto& it : plan.items)
                    to_read += read_item_bytes(metadata, it);
            log.started(to_read);
            // Progress item by item where the reader reads items in turn.
            ProgressDestination counted(*planner, metadata, log);
            const bool per_item = log.reporting() && dynamic_cast<DistcpReader*>(storage.get());
            storage->read_data(plan, per_item ? counted : *planner);
            planner->finish();
            log.finished();
        });
    } catch (const Error&) {
        check_not_replaced(c, watch, checkpoint_id, "load", !options.storage);
        throw;
    }
    if (auto* dr = dynamic_cast<DistcpReader*>(storage.get()))
        result.bytes_read = dr->bytes_read();
    else if (auto* cr = dynamic_cast<ContainerReader*>(storage.get()))
        result.bytes_read = cr->bytes_read();
    if (auto* dp = dynamic_cast<DefaultLoadPlanner*>(planner.get())) {
        result.missing = dp->missing();
        result.skipped = dp->skipped();
    }
    // With the sum of the bytes read: whether the checkpoint was replaced.
    std::uint64_t sums[2] = {result.bytes_read, coord && detail::replaced(watch) ? 1u : 0u};
    detail::allreduce_sum(c, sums, 2);
    if (sums[1] != 0)
        throw replaced_error(checkpoint_id, "load");
    result.bytes_read_all = sums[0];
    log.count(result.bytes_read); // the per-rank line, like the total: bytes read, not planned
    log.end(result.bytes_read_all);
    result.seconds = seconds_since(t0);
    log.finish(result.bytes_read_all);
    return result;
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

namespace cairn {

std::uint64_t StorageReader::verify_chunk(const std::string& fqn, const EntryMeta&, const ChunkMeta&)
{
    throw error::WrongAPIUsage("this storage cannot verify checkpoints (entry '" + fqn + "')");
}

VerifyReport verify(const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options)
{
    wait_for_async_saves(); // HDF5 (usually not thread-safe) is never called from two threads at once
    const Comm c(comm);
    const bool coord = c.coordinator();
    const bool container = agree_to_read(c, checkpoint_id, options, "verify");
    PhaseLog log("verify", checkpoint_id, c.rank, options.progress);
    detail::CheckpointIdentity watch; // as load's: damage found in a replaced checkpoint is not damage
    std::shared_ptr<StorageReader> storage;
    // The metadata, read once and broadcast, as for a load.
    log.begin(Phase::plan);
    std::unique_ptr<detail::MetadataFrames> frames;
    run_phase(c, "read metadata", [&] {
        log.started();
        storage = options.storage ? options.storage : default_reader(options, container);
        storage->reset(checkpoint_id);
        if (coord && !options.storage)
            watch = detail::checkpoint_identity(checkpoint_id, container);
        if (coord)
            frames = metadata_frames(*storage);
    });
    // Chunks to ranks as they arrive, each to the rank with the fewest bytes
    // so far (the lowest of equals): every rank makes the same choices from
    // the same stream and keeps only its own chunks (and each entry's first,
    // which names a container's dataset). Memory per rank follows its share.
    struct Job {
        std::string fqn;
        std::size_t kept; // index among the entry's kept chunks
    };
    std::vector<Job> jobs;
    std::uint64_t my_bytes = 0;
    using Load = std::pair<std::uint64_t, int>; // bytes so far, rank
    std::priority_queue<Load, std::vector<Load>, std::greater<>> least;
    for (int r = 0; r < c.size; ++r)
        least.emplace(0, r);
    std::size_t kept_of_entry = 0;
    detail::MetadataDecoder dec([&](const std::string& fqn, std::size_t k, std::uint64_t length) {
        if (k == 0)
            kept_of_entry = 0;
        auto [bytes, r] = least.top();
        least.pop();
        least.emplace(bytes + length + 1, r);
        const bool mine = r == c.rank;
        if (mine) {
            jobs.push_back(Job{fqn, kept_of_entry});
            my_bytes += length;
        }
        if (mine || k == 0)
            ++kept_of_entry;
        return mine;
    });
    Metadata md;
    run_phase(c, "set up", [&] {
        detail::share_metadata(c, frames.get(), &dec);
        frames.reset();
        md = dec.finish();
        storage->set_up_storage_reader(md, coord, comm);
        log.finished();
    });
    log.end();

    log.begin(Phase::verify);
    VerifyReport report;
    std::string mine; // this rank's problems, one per line
    std::uint64_t chunks = 0, bytes = 0, done = 0;
    // Damage is reported; a storage that cannot verify (a usage error) fails
    // on every rank, also on those with nothing to check.
    run_phase(c, "verify", [&] {
        log.started(my_bytes);
        for (const Job& j : jobs) {
            const EntryMeta& entry = md.entries.at(j.fqn);
            const ChunkMeta& chunk = entry.chunks.at(j.kept);
            try {
                bytes += storage->verify_chunk(j.fqn, entry, chunk);
                ++chunks;
            } catch (const Error& e) {
                if (e.kind() == Error::Kind::usage)
                    throw;
                mine += "rank " + std::to_string(c.rank) + ": " + e.what() + "\n";
            }
            done += chunk.storage.length;
            log.progress(done);
        }
        // A container also holds each scalar and string as a dataset, for
        // other readers (h5py): each must hold the metadata's value. Shared
        // out like check_datasets: every size-th one from this rank's.
        if (typeid(*storage) == typeid(ContainerReader)) {
            std::size_t n = 0;
            for (const auto& [fqn, entry] : md.entries) {
                if (entry.kind != ItemKind::scalar && entry.kind != ItemKind::string)
                    continue;
                if (static_cast<int>(n++ % static_cast<std::size_t>(c.size)) != c.rank)
                    continue;
                try {
                    detail::BuiltinReaders::verify_value(static_cast<ContainerReader&>(*storage), fqn, entry);
                } catch (const Error& e) {
                    if (e.kind() == Error::Kind::usage)
                        throw;
                    mine += "rank " + std::to_string(c.rank) + ": " + e.what() + "\n";
                }
            }
        }
        log.finished();
    });
    // Everyone gets every problem, in rank order.
    const auto all = detail::gather_bytes(c, Bytes(reinterpret_cast<const std::byte*>(mine.data()),
                                                   reinterpret_cast<const std::byte*>(mine.data() + mine.size())));
    Bytes text;
    if (coord)
        for (const auto& b : all)
            text.insert(text.end(), b.begin(), b.end());
    detail::bcast_bytes(c, text);
    std::string lines(reinterpret_cast<const char*>(text.data()), text.size());
    for (std::size_t p = 0; p < lines.size();) {
        const auto nl = lines.find('\n', p);
        report.problems.push_back(lines.substr(p, nl - p));
        p = nl + 1;
    }
    std::uint64_t sums[3] = {chunks, bytes, coord && detail::replaced(watch) ? 1u : 0u};
    detail::allreduce_sum(c, sums, 3);
    if (sums[2] != 0)
        throw replaced_error(checkpoint_id, "verify");
    report.chunks = sums[0];
    report.bytes = sums[1];
    report.checksums = md.checksum_block != 0;
    log.end(report.bytes);
    log.finish(report.bytes);
    return report;
}

} // namespace cairn
