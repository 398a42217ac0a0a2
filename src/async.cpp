// async_save: planning on the caller's thread, then writing and committing on
// a background thread over a duplicated communicator (see async.hpp).
#include "cairn/async.hpp"

#include "cairn/errors.hpp"
#include "driver/save_session.hpp"
#include "stage/stage.hpp"

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
        t = std::move(in.worker);
    }
    if (t.joinable())
        t.join();
}

int on_finalize(MPI_Comm, int, void*, void*)
{
    join_worker();
    return MPI_SUCCESS;
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

AsyncSave async_save(StateDict& state, const std::string& checkpoint_id, MPI_Comm comm, const SaveOptions& options)
{
    // Saves never interleave: the previous one finishes first.
    join_worker();
    const detail::Comm c(comm);
    detail::run_phase(c, "async set-up", [&] {
        int level = MPI_THREAD_SINGLE;
        MPI_Query_thread(&level);
        if (level < MPI_THREAD_MULTIPLE)
            throw error::WrongAPIUsage("async_save needs MPI initialized with MPI_THREAD_MULTIPLE (MPI_Init_thread); "
                                       "this process has " + thread_level_name(level));
    });
    install_finalize_hook();

    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(comm, &dup);
    std::unique_ptr<detail::SaveSession> session;
    std::unique_ptr<StagedCopy> copy;
    try {
        session = detail::plan_save(state, checkpoint_id, dup, options);
        if (options.async_staging == AsyncStaging::full_copy)
            copy = detail::run_phase(session->comm, "stage", [&] {
                return std::make_unique<StagedCopy>(session->plan, *session->planner);
            });
    } catch (...) {
        if (session && session->comm.coordinator())
            session->storage->abort();
        MPI_Comm_free(&dup);
        throw;
    }

    AsyncSave handle;
    handle.m_state = std::make_shared<AsyncSave::State>();
    auto st = handle.m_state;
    if (copy)
        st->staged_promise.set_value();

    std::lock_guard<std::mutex> lock(inflight().mutex);
    inflight().worker = std::thread([st, dup, s = std::move(session), cp = std::move(copy)]() mutable {
        bool staged = cp != nullptr;
        try {
            SavePlanner& source = cp ? static_cast<SavePlanner&>(*cp) : *s->planner;
            auto result = detail::write_and_commit(*s, source, [&] {
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
        cp.reset();
        s.reset();
        MPI_Comm_free(&dup);
    });
    return handle;
}

} // namespace cairn
