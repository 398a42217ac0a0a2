// async_save: planning on the caller's thread, then writing and committing on
// a background thread over a duplicate of the caller's communicator, kept on
// it for the next async_save (see async.hpp).
#include "cairn/async.hpp"

#include "cairn/errors.hpp"
#include "driver/background.hpp"
#include "driver/save_session.hpp"
#include "stage/stage.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

namespace cairn {

struct AsyncSave::State {
    std::promise<void> staged_promise;
    std::promise<SaveResult> committed_promise;
    std::shared_future<void> staged = staged_promise.get_future().share();
    std::shared_future<SaveResult> committed = committed_promise.get_future().share();
};

std::shared_future<void> AsyncSave::staged() const
{
    if (!m_state)
        throw error::WrongAPIUsage("AsyncSave::staged() on an empty handle");
    return m_state->staged;
}

std::shared_future<SaveResult> AsyncSave::committed() const
{
    if (!m_state)
        throw error::WrongAPIUsage("AsyncSave::committed() on an empty handle");
    return m_state->committed;
}

SaveResult AsyncSave::wait() const { return committed().get(); }

bool AsyncSave::done() const
{
    return committed().wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

namespace {

// The one background save of this process. Never destroyed (a joinable
// std::thread must not be destroyed at exit); MPI_Finalize joins it through
// the attribute callback registered on MPI_COMM_SELF.
struct Inflight {
    std::mutex mutex;
    std::thread worker;
    bool finalize_hook = false;
    std::atomic<bool> finalizing{false}; // MPI_Finalize began (MPI_COMM_SELF's attributes go first)
    std::atomic<std::uint64_t> duplicates{0};
};

Inflight& inflight()
{
    static auto* p = new Inflight;
    return *p;
}

void join_worker() noexcept
{
    auto& in = inflight();
    std::thread t;
    {
        std::lock_guard<std::mutex> lock(in.mutex);
        // The background save itself (reading metadata, a manager's
        // retention) waits for no one: it is the save in flight.
        if (in.worker.get_id() == std::this_thread::get_id())
            return;
        t = std::move(in.worker);
    }
    if (t.joinable())
        t.join();
}

int on_finalize(MPI_Comm, int, void*, void*)
{
    inflight().finalizing = true;
    join_worker();
    return MPI_SUCCESS;
}

// The duplicate of a caller's communicator that async_save works on (its
// background part makes MPI calls while the caller makes its own), kept on
// the caller's communicator as an attribute from one async_save to the next,
// so that what a save caches on its communicator (the file groups of
// grouped data files) is built once. One duplicate serves every save on
// that communicator: saves never interleave (prepare_background waits for
// the previous one before the next plans), and every failure of a save is
// agreed by all its ranks, which leaves no operation pending on it.
struct KeptComm {
    MPI_Comm dup = MPI_COMM_NULL;
};

// Called when the caller's communicator is freed: the save in flight, if
// any, ends first; then the duplicate is freed (left to MPI_Finalize when
// that comes first).
int free_kept_comm(MPI_Comm, int, void* value, void*)
{
    auto* kept = static_cast<KeptComm*>(value);
    join_worker();
    if (kept->dup != MPI_COMM_NULL && !inflight().finalizing)
        MPI_Comm_free(&kept->dup);
    delete kept;
    return MPI_SUCCESS;
}

// Collective over `comm`, on the caller's thread with no save in the
// background: the kept duplicate of `comm`, made by its first async_save.
MPI_Comm kept_duplicate(MPI_Comm comm)
{
    static const int key = [] {
        int k = MPI_KEYVAL_INVALID;
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_kept_comm, &k, nullptr);
        return k;
    }();
    KeptComm* kept = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm, key, &kept, &found);
    if (found && kept)
        return kept->dup;
    auto fresh = std::make_unique<KeptComm>();
    if (MPI_Comm_dup(comm, &fresh->dup) != MPI_SUCCESS)
        throw error::Internal("internal: MPI_Comm_dup failed for async_save");
    MPI_Comm_set_attr(comm, key, fresh.get());
    ++inflight().duplicates;
    return fresh.release()->dup;
}

void install_finalize_hook()
{
    auto& in = inflight();
    std::lock_guard<std::mutex> lock(in.mutex);
    if (in.finalize_hook)
        return;
    int key = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &key, nullptr);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
    in.finalize_hook = true;
}

// A planner that serves the data of a plan from a host copy made up front.
class StagedCopy final : public SavePlanner {
public:
    StagedCopy(const SavePlan& plan, SavePlanner& source)
    {
        std::uint64_t total = 0;
        for (const auto& it : plan.items)
            total += it.nbytes;
        m_buffer = detail::HostBuffer(static_cast<std::size_t>(total));
        std::uint64_t off = 0;
        for (const auto& it : plan.items) {
            const DataRef ref = source.resolve_data(it);
            const auto n = volume(ref.view.shape);
            if (static_cast<std::uint64_t>(n) * ref.view.elem_size != it.nbytes)
                throw error::WriteError("entry '" + it.fqn + "': the planner's data has " +
                                        std::to_string(static_cast<std::uint64_t>(n) * ref.view.elem_size) +
                                        " bytes, the plan expects " + std::to_string(it.nbytes));
            detail::stage_out(ref, 0, n, m_buffer.data() + off);
            m_views[{it.fqn, it.chunk}] = StridedView{m_buffer.data() + off, ref.view.elem_size, ref.view.shape,
                                                      row_major_strides(ref.view.shape)};
            off += it.nbytes;
        }
    }
    void set_up_planner(StateDict&, bool) override { internal(); }
    SavePlan create_local_plan() override { internal(); }
    std::pair<std::vector<SavePlan>, Metadata> create_global_plan(std::vector<SavePlan>) override { internal(); }
    DataRef resolve_data(const WriteItem& item) override
    {
        auto it = m_views.find({item.fqn, item.chunk});
        if (it == m_views.end())
            internal();
        return DataRef{it->second, MemorySpace::host};
    }

private:
    [[noreturn]] static void internal() { throw error::Internal("internal: staged copy used for planning"); }
    detail::HostBuffer m_buffer;
    std::map<std::pair<std::string, std::uint32_t>, StridedView> m_views;
};

std::string thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    }
    return std::to_string(level);
}

} // namespace

void wait_for_async_saves() { join_worker(); }

namespace detail {

struct AsyncAccess {
    static AsyncSave make()
    {
        AsyncSave h;
        h.m_state = std::make_shared<AsyncSave::State>();
        return h;
    }
    static std::shared_ptr<AsyncSave::State> state(const AsyncSave& h) { return h.m_state; }
};

std::uint64_t async_duplicates() noexcept { return inflight().duplicates.load(); }

void prepare_background(const Comm& c, const std::string& who)
{
    // Saves never interleave: the previous one finishes first.
    join_worker();
    run_phase(c, "async set-up", [&] {
        int level = MPI_THREAD_SINGLE;
        MPI_Query_thread(&level);
        if (level < MPI_THREAD_MULTIPLE)
            throw error::WrongAPIUsage(who + " needs MPI initialized with MPI_THREAD_MULTIPLE (MPI_Init_thread); "
                                       "this process has " + thread_level_name(level));
    });
    install_finalize_hook();
}

std::unique_ptr<SavePlanner> stage_copy(const SavePlan& plan, SavePlanner& source)
{
    return std::make_unique<StagedCopy>(plan, source);
}

AsyncSave run_in_background(BackgroundJob job, bool staged_now)
{
    AsyncSave handle = AsyncAccess::make();
    std::shared_ptr<AsyncSave::State> st = AsyncAccess::state(handle);
    if (staged_now)
        st->staged_promise.set_value();
    std::lock_guard<std::mutex> lock(inflight().mutex);
    inflight().worker = std::thread([st, staged_now, job = std::move(job)]() mutable {
        bool staged = staged_now;
        try {
            auto result = job([&] {
                if (!staged) {
                    staged = true;
                    st->staged_promise.set_value();
                }
            });
            if (!staged)
                st->staged_promise.set_value();
            st->committed_promise.set_value(result);
        } catch (...) {
            if (!staged)
                st->staged_promise.set_exception(std::current_exception());
            st->committed_promise.set_exception(std::current_exception());
        }
        job = nullptr; // what the job still holds goes here
    });
    return handle;
}

} // namespace detail

AsyncSave async_save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const SaveOptions& options)
{
    detail::prepare_background(detail::Comm(comm), "async_save");

    const MPI_Comm dup = kept_duplicate(comm);
    std::shared_ptr<detail::SaveSession> session;
    std::shared_ptr<SavePlanner> copy;
    try {
        session = detail::plan_save(state, checkpoint_id, dup, options);
        if (options.async_staging == AsyncStaging::full_copy)
            copy = detail::run_phase(session->comm, "stage", [&] {
                return std::shared_ptr<SavePlanner>(detail::stage_copy(session->plan, *session->planner));
            });
    } catch (...) {
        if (session && session->comm.coordinator())
            session->storage->abort();
        throw;
    }
    const bool staged_now = copy != nullptr;
    auto job = [s = std::move(session), cp = std::move(copy)](const std::function<void()>& staged) mutable {
        // The session (its files, its staging) ends before the result is
        // delivered, also on failure.
        const auto release = [&] {
            cp.reset();
            s.reset();
        };
        try {
            SavePlanner& source = cp ? *cp : *s->planner;
            auto result = detail::write_and_commit(*s, source, staged);
            release();
            return result;
        } catch (...) {
            release();
            throw;
        }
    };
    return detail::run_in_background(std::move(job), staged_now);
}

} // namespace cairn
