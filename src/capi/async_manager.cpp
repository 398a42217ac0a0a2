// The C API of async_save (cairn_async_*) and of the CheckpointManager
// (cairn_manager_*), over <cairn/async.hpp> and <cairn/manager.hpp>. As in
// capi.cpp, no exception leaves this file.
#include "capi/capi_internal.hpp"

#include "cairn/async.hpp"
#include "cairn/manager.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <utility>

using cairn::capi::guarded;
using cairn::capi::require;
using cairn::capi::string_arg;

namespace {

// Counts the background saves started through the C API. A handle whose
// save is the newest may join the process's background thread once its
// commit is ready; an older handle's thread was joined already by the save
// that followed it (saves never interleave), and joining now would wait for
// the newer save instead.
std::atomic<std::uint64_t> g_generation{0};

} // namespace

struct cairn_async {
    cairn::AsyncSave save;
    std::uint64_t generation = 0;
    bool joined = false;
};

struct cairn_manager {
    std::unique_ptr<cairn::CheckpointManager> manager;
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<cairn::Leftover> leftovers; // of the last cairn_manager_leftovers
};

namespace {

cairn_async& async_arg(cairn_async_save_t* h)
{
    require(h != nullptr, "the async save handle is NULL");
    require(h->save.valid(), "the async save handle holds no save");
    return *h;
}

// Waits for the commit (or failure) of `h`, then for the background thread
// to end when it is `h`'s: after that nothing of the save runs (no HDF5 call
// in the background that could race with the caller's next load).
void settle(cairn_async& h) noexcept
{
    h.save.committed().wait();
    if (!h.joined) {
        if (h.generation == g_generation.load())
            cairn::wait_for_async_saves();
        h.joined = true;
    }
}

template <class T>
bool ready(const std::shared_future<T>& f)
{
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

void put_result(cairn_save_result_t* out, const cairn::SaveResult& r)
{
    if (out)
        *out = cairn_save_result_t{r.bytes_written, r.entries, r.seconds, r.plan_reused ? 1 : 0};
}

void zero_result(cairn_save_result_t* out)
{
    if (out)
        *out = cairn_save_result_t{0, 0, 0.0, 0};
}

cairn_manager& manager_arg(cairn_manager_t* m)
{
    require(m != nullptr && m->manager, "the manager handle is NULL (call cairn_manager_create first)");
    return *m;
}

} // namespace

namespace cairn::capi {

int async_save(const char* function, cairn_state* state, const std::string& checkpoint_id, MPI_Comm comm,
               const cairn_save_options* options, cairn_async_save_t** handle, std::string arg_error) noexcept
{
    std::unique_ptr<cairn_async> h;
    if (handle)
        *handle = nullptr;
    else if (arg_error.empty())
        arg_error = "the handle pointer is NULL";
    if (arg_error.empty()) {
        h.reset(new (std::nothrow) cairn_async);
        if (!h)
            arg_error = "out of memory";
    }
    if (int rc = prepare_save(function, state, comm, std::move(arg_error)))
        return rc;
    return guarded(function, [&] {
        h->generation = ++g_generation;
        h->save = cairn::async_save(state->dict, checkpoint_id, comm, options ? options->options : SaveOptions{});
        state->async_staged = h->save.staged();
        *handle = h.release();
    });
}

int manager_create(const char* function, const std::string* root, MPI_Comm comm,
                   const cairn_manager_options_t* options, cairn_manager_t** manager, std::string arg_error) noexcept
{
    if (int rc = check_communicator(function, comm))
        return rc;
    int code = CAIRN_SUCCESS;
    std::unique_ptr<cairn_manager> m;
    if (manager)
        *manager = nullptr;
    else if (arg_error.empty())
        arg_error = "the output pointer is NULL";
    if (!arg_error.empty()) {
        code = CAIRN_ERR_USAGE;
    } else {
        // The constructor is local (it checks the options): its error is
        // agreed like an argument error, so that every rank gets a manager
        // or none does.
        code = guarded(function, [&] {
            m = std::make_unique<cairn_manager>();
            m->comm = comm;
            m->manager = std::make_unique<cairn::CheckpointManager>(
                *root, comm, options ? options->options : cairn::ManagerOptions{});
        });
        if (code != CAIRN_SUCCESS) {
            arg_error = cairn_last_error();
            const std::string prefix = std::string(function) + ": ";
            if (arg_error.compare(0, prefix.size(), prefix) == 0)
                arg_error.erase(0, prefix.size());
        }
    }
    if (int rc = agree(function, comm, code, arg_error))
        return rc;
    *manager = m.release();
    return CAIRN_SUCCESS;
}

} // namespace cairn::capi

extern "C" {

// ---- async save ----

int cairn_async_save(cairn_state_t* state, const char* checkpoint_id, MPI_Comm comm,
                     const cairn_save_options_t* options, cairn_async_save_t** handle)
{
    std::string id, bad;
    if (int rc = string_arg("cairn_async_save", checkpoint_id, "checkpoint id", id, bad))
        return rc;
    return cairn::capi::async_save("cairn_async_save", state, id, comm, options, handle, std::move(bad));
}

int cairn_async_wait_staged(cairn_async_save_t* handle)
{
    return guarded("cairn_async_wait_staged", [&] { async_arg(handle).save.staged().get(); });
}

int cairn_async_test_staged(cairn_async_save_t* handle, int* flag)
{
    if (flag)
        *flag = 0;
    return guarded("cairn_async_test_staged", [&] {
        require(flag != nullptr, "the flag pointer is NULL");
        const auto staged = async_arg(handle).save.staged();
        if (!ready(staged))
            return;
        *flag = 1;
        staged.get();
    });
}

int cairn_async_wait_committed(cairn_async_save_t* handle, cairn_save_result_t* result)
{
    zero_result(result);
    return guarded("cairn_async_wait_committed", [&] {
        auto& h = async_arg(handle);
        settle(h);
        put_result(result, h.save.committed().get());
    });
}

int cairn_async_test_committed(cairn_async_save_t* handle, int* flag, cairn_save_result_t* result)
{
    if (flag)
        *flag = 0;
    zero_result(result);
    return guarded("cairn_async_test_committed", [&] {
        require(flag != nullptr, "the flag pointer is NULL");
        auto& h = async_arg(handle);
        if (!ready(h.save.committed()))
            return;
        *flag = 1;
        settle(h);
        put_result(result, h.save.committed().get());
    });
}

int cairn_async_free(cairn_async_save_t** handle)
{
    if (handle && *handle) {
        if ((*handle)->save.valid())
            settle(**handle);
        delete *handle;
        *handle = nullptr;
    }
    return CAIRN_SUCCESS;
}

// ---- manager options ----

int cairn_manager_options_create(cairn_manager_options_t** options)
{
    return guarded("cairn_manager_options_create", [&] {
        require(options != nullptr, "the output pointer is NULL");
        *options = nullptr;
        *options = new cairn_manager_options();
    });
}

int cairn_manager_options_free(cairn_manager_options_t** options)
{
    if (options) {
        delete *options;
        *options = nullptr;
    }
    return CAIRN_SUCCESS;
}

int cairn_manager_options_set_keep_last(cairn_manager_options_t* options, int keep_last)
{
    return guarded("cairn_manager_options_set_keep_last", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(keep_last >= 0, "keep_last must be at least 0 (0: keep all), not " + std::to_string(keep_last));
        options->options.keep_last = keep_last;
    });
}

int cairn_manager_options_set_keep_every(cairn_manager_options_t* options, int64_t keep_every)
{
    return guarded("cairn_manager_options_set_keep_every", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(keep_every >= 0, "keep_every must be at least 0 (0: none), not " + std::to_string(keep_every));
        options->options.keep_every = keep_every;
    });
}

int cairn_manager_options_set_async(cairn_manager_options_t* options, int async)
{
    return guarded("cairn_manager_options_set_async", [&] {
        require(options != nullptr, "the options handle is NULL");
        options->options.async = async != 0;
    });
}

int cairn_manager_options_set_layout(cairn_manager_options_t* options, int layout)
{
    return guarded("cairn_manager_options_set_layout", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(layout == CAIRN_LAYOUT_PER_RANK || layout == CAIRN_LAYOUT_CONTAINER,
                "invalid layout " + std::to_string(layout) +
                    " (CAIRN_LAYOUT_PER_RANK = 0 or CAIRN_LAYOUT_CONTAINER = 1)");
        options->options.layout = layout == CAIRN_LAYOUT_CONTAINER ? cairn::Layout::container : cairn::Layout::per_rank;
    });
}

int cairn_manager_options_set_save_options(cairn_manager_options_t* options, const cairn_save_options_t* save_options)
{
    return guarded("cairn_manager_options_set_save_options", [&] {
        require(options != nullptr, "the options handle is NULL");
        options->options.save_options = save_options ? save_options->options : cairn::SaveOptions{};
    });
}

int cairn_manager_options_set_local_dir(cairn_manager_options_t* options, const char* dir)
{
    return guarded("cairn_manager_options_set_local_dir", [&] {
        require(options != nullptr, "the options handle is NULL");
        options->options.local.dir = dir ? dir : "";
    });
}

int cairn_manager_options_set_redundancy(cairn_manager_options_t* options, const char* redundancy)
{
    return guarded("cairn_manager_options_set_redundancy", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(redundancy != nullptr, "the redundancy is NULL");
        options->options.local.redundancy = cairn::Redundancy::parse(redundancy);
    });
}

int cairn_manager_options_set_local_keep_last(cairn_manager_options_t* options, int keep_last)
{
    return guarded("cairn_manager_options_set_local_keep_last", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(keep_last >= 1, "the node-local keep_last must be at least 1, not " + std::to_string(keep_last));
        options->options.local.keep_last = keep_last;
    });
}

int cairn_manager_options_set_flush_every(cairn_manager_options_t* options, int flush_every)
{
    return guarded("cairn_manager_options_set_flush_every", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(flush_every >= 0,
                "flush_every must be at least 0 (0: only on demand), not " + std::to_string(flush_every));
        options->options.local.flush_every = flush_every;
    });
}

int cairn_manager_options_set_ranks_per_node(cairn_manager_options_t* options, int ranks_per_node)
{
    return guarded("cairn_manager_options_set_ranks_per_node", [&] {
        require(options != nullptr, "the options handle is NULL");
        require(ranks_per_node >= 0, "ranks_per_node must be at least 0 (0: the ranks that share memory), not " +
                                         std::to_string(ranks_per_node));
        options->options.local.ranks_per_node = ranks_per_node;
    });
}

// ---- manager ----

int cairn_manager_create(const char* root, MPI_Comm comm, const cairn_manager_options_t* options,
                         cairn_manager_t** manager)
{
    std::string r, bad;
    if (int rc = string_arg("cairn_manager_create", root, "root directory", r, bad))
        return rc;
    return cairn::capi::manager_create("cairn_manager_create", &r, comm, options, manager, std::move(bad));
}

int cairn_manager_save(cairn_manager_t* manager, int64_t step, cairn_state_t* state, int* committed,
                       cairn_save_result_t* result)
{
    const char* fn = "cairn_manager_save";
    if (committed)
        *committed = 0;
    zero_result(result);
    if (int rc = guarded(fn, [&] { manager_arg(manager); }))
        return rc;
    if (int rc = cairn::capi::prepare_save(fn, state, manager->comm, {}))
        return rc;
    return guarded(fn, [&] {
        auto& m = *manager->manager;
        if (m.options().async)
            ++g_generation;
        const auto r = m.save(step, state->dict);
        if (r) {
            if (committed)
                *committed = 1;
            put_result(result, *r);
        }
    });
}

int cairn_manager_wait(cairn_manager_t* manager, int* saved, cairn_save_result_t* result)
{
    if (saved)
        *saved = 0;
    zero_result(result);
    return guarded("cairn_manager_wait", [&] {
        const auto r = manager_arg(manager).manager->wait();
        if (r) {
            if (saved)
                *saved = 1;
            put_result(result, *r);
        }
    });
}

int cairn_manager_latest(cairn_manager_t* manager, int64_t* step, int* found)
{
    if (step)
        *step = -1;
    if (found)
        *found = 0;
    return guarded("cairn_manager_latest", [&] {
        const auto s = manager_arg(manager).manager->latest();
        if (s) {
            if (step)
                *step = *s;
            if (found)
                *found = 1;
        }
    });
}

int cairn_manager_restore_latest(cairn_manager_t* manager, cairn_state_t* state, const cairn_load_options_t* options,
                                 int64_t* step, int* found)
{
    const char* fn = "cairn_manager_restore_latest";
    if (step)
        *step = -1;
    if (found)
        *found = 0;
    if (int rc = guarded(fn, [&] { manager_arg(manager); }))
        return rc;
    if (int rc = cairn::capi::prepare_load(fn, state, manager->comm, {}))
        return rc;
    return guarded(fn, [&] {
        const auto s = manager->manager->restore_latest(state->dict, cairn::capi::load_options_for(*state, options));
        if (s) {
            if (step)
                *step = *s;
            if (found)
                *found = 1;
        }
    });
}

int cairn_manager_flush(cairn_manager_t* manager, int64_t* step, int* started)
{
    if (step)
        *step = -1;
    if (started)
        *started = 0;
    return guarded("cairn_manager_flush", [&] {
        const auto s = manager_arg(manager).manager->flush();
        if (s) {
            if (step)
                *step = *s;
            if (started)
                *started = 1;
        }
    });
}

int cairn_manager_levels(cairn_manager_t* manager, int64_t* steps, int* levels, size_t capacity, size_t* count)
{
    const char* fn = "cairn_manager_levels";
    if (count)
        *count = 0;
    if (int rc = guarded(fn, [&] { manager_arg(manager); }))
        return rc;
    if (int rc = cairn::capi::agree(fn, manager->comm,
                                    (steps == nullptr || levels == nullptr) && capacity > 0 ? CAIRN_ERR_USAGE
                                                                                             : CAIRN_SUCCESS,
                                    "steps or levels is NULL with a capacity of " + std::to_string(capacity)))
        return rc;
    return guarded(fn, [&] {
        const auto all = manager->manager->levels();
        for (std::size_t i = 0; i < all.size() && i < capacity; ++i) {
            steps[i] = all[i].step;
            levels[i] = (all[i].node_local ? CAIRN_STEP_NODE_LOCAL : 0) |
                        (all[i].needs_rebuild ? CAIRN_STEP_NEEDS_REBUILD : 0) |
                        (all[i].file_system ? CAIRN_STEP_FILE_SYSTEM : 0);
        }
        if (count)
            *count = all.size();
    });
}

int cairn_manager_last_restore(const cairn_manager_t* manager, int* level, int64_t* step, size_t* rebuilt,
                               uint64_t* bytes_moved)
{
    if (level)
        *level = CAIRN_LEVEL_NONE;
    if (step)
        *step = -1;
    if (rebuilt)
        *rebuilt = 0;
    if (bytes_moved)
        *bytes_moved = 0;
    return guarded("cairn_manager_last_restore", [&] {
        require(manager != nullptr, "the manager handle is NULL");
        const cairn::RestoreReport& r = manager->manager->last_restore();
        if (level)
            *level = r.level == cairn::RestoreReport::Level::node_local    ? CAIRN_LEVEL_NODE_LOCAL
                     : r.level == cairn::RestoreReport::Level::file_system ? CAIRN_LEVEL_FILE_SYSTEM
                                                                           : CAIRN_LEVEL_NONE;
        if (step)
            *step = r.step;
        if (rebuilt)
            *rebuilt = r.rebuilt.size();
        if (bytes_moved)
            *bytes_moved = r.bytes_moved;
    });
}

int cairn_manager_steps(cairn_manager_t* manager, int64_t* steps, size_t capacity, size_t* count)
{
    const char* fn = "cairn_manager_steps";
    if (count)
        *count = 0;
    if (int rc = guarded(fn, [&] { manager_arg(manager); }))
        return rc;
    if (int rc = cairn::capi::agree(fn, manager->comm,
                                    steps == nullptr && capacity > 0 ? CAIRN_ERR_USAGE : CAIRN_SUCCESS,
                                    "steps is NULL with a capacity of " + std::to_string(capacity)))
        return rc;
    return guarded(fn, [&] {
        const auto all = manager->manager->steps();
        for (std::size_t i = 0; i < all.size() && i < capacity; ++i)
            steps[i] = all[i];
        if (count)
            *count = all.size();
    });
}

int cairn_manager_leftovers(cairn_manager_t* manager, int remove, size_t* count)
{
    if (count)
        *count = 0;
    return guarded("cairn_manager_leftovers", [&] {
        auto& m = manager_arg(manager);
        m.leftovers.clear();
        m.leftovers = remove ? m.manager->remove_leftovers() : m.manager->find_leftovers();
        if (count)
            *count = m.leftovers.size();
    });
}

int cairn_manager_leftover(const cairn_manager_t* manager, size_t index, const char** path, const char** reason)
{
    if (path)
        *path = nullptr;
    if (reason)
        *reason = nullptr;
    return guarded("cairn_manager_leftover", [&] {
        require(manager != nullptr, "the manager handle is NULL");
        require(index < manager->leftovers.size(), "leftover " + std::to_string(index) + " of " +
                                                       std::to_string(manager->leftovers.size()) +
                                                       " (from the last cairn_manager_leftovers)");
        if (path)
            *path = manager->leftovers[index].path.c_str();
        if (reason)
            *reason = manager->leftovers[index].reason.c_str();
    });
}

int cairn_manager_free(cairn_manager_t** manager)
{
    if (manager) {
        delete *manager; // ~CheckpointManager settles a save in flight, without MPI calls
        *manager = nullptr;
    }
    return CAIRN_SUCCESS;
}

} // extern "C"
