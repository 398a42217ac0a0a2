// CheckpointManager and the fsck-style leftover functions (manager.hpp).
//
// All file-system work of the manager runs on the coordinator, on the
// caller's thread; its outcome is broadcast, and each phase ends in an error
// agreement, so all ranks agree. The manager reads checkpoint metadata (HDF5)
// only while no async save of this process is running: HDF5 builds are
// usually not thread-safe, and the background save writes its metadata with
// HDF5. So an async save is settled (its commit waited for, the background
// thread joined) before anything else, and only then published.
#include "cairn/manager.hpp"

#include "cairn/async.hpp"
#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "comm/protocol.hpp"
#include "driver/background.hpp"
#include "driver/save_session.hpp"
#include "core/codec.hpp"
#include "levels/drain.hpp"
#include "levels/local_level.hpp"
#include "io/fs.hpp"
#include "io/path_lock.hpp"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <thread>
#include <utility>
#include <fcntl.h>
#include <unistd.h>

namespace cairn {

namespace fs = detail::fs;
namespace stdfs = std::filesystem;
using detail::Bytes;
using detail::Comm;
using detail::run_phase;

namespace {

constexpr const char* pointer_name = "LATEST";
constexpr const char* pointer_temp_name = "LATEST.cairn-tmp";
constexpr const char* staging_suffix = ".cairn-staging";
constexpr const char* old_suffix = ".cairn-old";
constexpr const char* temp_suffix = ".cairn-tmp";
constexpr const char* container_suffix = ".h5";

bool ends_with(const std::string& s, const std::string& suffix)
{
    return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string step_name(std::int64_t step, bool container)
{
    char buf[40];
    std::snprintf(buf, sizeof buf, "step_%08" PRId64, step);
    return std::string(buf) + (container ? container_suffix : "");
}

// 1 to `max` decimal digits and nothing else.
bool all_digits(const std::string& s, std::size_t max)
{
    return !s.empty() && s.size() <= max &&
           std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// Parses the name of a managed checkpoint: "step_<N>" or "step_<N>.h5" with
// N written as step_name writes it (at least 8 digits, no extra zeros).
bool parse_step_name(const std::string& name, std::int64_t& step, bool& container)
{
    if (name.rfind("step_", 0) != 0)
        return false;
    std::string digits = name.substr(5);
    container = ends_with(digits, container_suffix);
    if (container)
        digits.resize(digits.size() - std::strlen(container_suffix));
    if (!all_digits(digits, 18))
        return false;
    step = std::stoll(digits);
    return step_name(step, container) == name;
}

// A committed checkpoint of either layout whose metadata reads back valid
// and whose data is all there (per-rank: every data file the chunk table
// names exists and is long enough; container: read_metadata checks that
// every dataset exists with its shape and type). Local; never throws.
bool complete_checkpoint(const std::string& path, bool container) noexcept
{
    try {
        if (container) {
            if (!stdfs::is_regular_file(path))
                return false;
            return read_metadata(path).layout == "container";
        }
        if (!stdfs::is_directory(path) || !fs::exists(fs::join(path, metadata_file_name)))
            return false;
        const Metadata md = read_metadata(path);
        std::map<std::string, std::uint64_t> sizes;
        for (const auto& [fqn, e] : md.entries)
            for (const auto& ch : e.chunks) {
                if (ch.storage.length == 0)
                    continue;
                auto it = sizes.find(ch.storage.path);
                if (it == sizes.end()) {
                    std::error_code ec;
                    const auto n = stdfs::file_size(fs::join(path, ch.storage.path), ec);
                    if (ec)
                        return false;
                    it = sizes.emplace(ch.storage.path, static_cast<std::uint64_t>(n)).first;
                }
                if (ch.storage.offset + ch.storage.length > it->second)
                    return false;
            }
        return true;
    } catch (...) {
        return false;
    }
}

// Committed (its commit happened), without reading the data: what retention
// looks at. Local; never throws.
bool committed_checkpoint(const std::string& path, bool container) noexcept
{
    try {
        return container ? is_container_checkpoint(path) : is_distcp_checkpoint(path);
    } catch (...) {
        return false;
    }
}

struct Candidate {
    std::int64_t step = 0;
    bool container = false;
    std::string path;
};

// The managed names in `root`, steps descending; for one step the entry of
// the preferred layout first. Local.
std::vector<Candidate> scan(const std::string& root, bool prefer_container)
{
    std::vector<Candidate> out;
    std::error_code ec;
    if (!stdfs::is_directory(root, ec))
        return out;
    for (const auto& e : stdfs::directory_iterator(root, ec)) {
        Candidate c;
        if (parse_step_name(e.path().filename().string(), c.step, c.container)) {
            c.path = e.path().string();
            out.push_back(std::move(c));
        }
    }
    if (ec)
        throw error::ReadError("cannot list " + root + ": " + ec.message());
    std::sort(out.begin(), out.end(), [&](const Candidate& a, const Candidate& b) {
        if (a.step != b.step)
            return a.step > b.step;
        return (a.container == prefer_container) > (b.container == prefer_container);
    });
    return out;
}

// The newest complete checkpoint in `root`, skipping `except` (a step, or -1).
std::optional<Candidate> newest_complete(const std::string& root, bool prefer_container, std::int64_t except = -1)
{
    for (auto& c : scan(root, prefer_container))
        if (c.step != except && complete_checkpoint(c.path, c.container))
            return c;
    return std::nullopt;
}

// The name LATEST holds, or empty when it is missing or unreadable.
std::string read_pointer(const std::string& root)
{
    // A regular file only: a FIFO named LATEST would block a plain open.
    int fd = -1;
    try {
        fd = fs::open_regular_file(fs::join(root, pointer_name));
    } catch (const Error&) {
        return {};
    }
    char buf[256];
    ssize_t n = 0;
    do
        n = ::read(fd, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    ::close(fd);
    std::string s(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r'))
        s.pop_back();
    return s;
}

// Replaces root/LATEST atomically with `name`: written to LATEST.cairn-tmp,
// synced, renamed, directory synced.
void write_pointer(const std::string& root, const std::string& name, bool sync)
{
    // <root>/LATEST.cairn-tmp (pointer_temp_name), then renamed over LATEST.
    const std::string text = name + "\n";
    fs::write_file_atomic(fs::join(root, pointer_name), text.data(), text.size(), sync);
    if (sync)
        fs::fsync_path(root);
}

// Removes a committed checkpoint so that no moment of the removal looks
// committed: a directory loses metadata.h5 first (a crash leaves a leftover,
// not a damaged checkpoint); a container file goes in one unlink.
void remove_checkpoint(const Candidate& c)
{
    if (!c.container) {
        std::error_code ec;
        stdfs::remove(fs::join(c.path, metadata_file_name), ec);
        if (ec)
            throw error::WriteError("cannot remove " + fs::join(c.path, metadata_file_name) + ": " + ec.message());
    }
    fs::remove_all(c.path);
}

// Whether `dir` is a node-local step (LocalLevel): it holds the level's
// manifest. Local; never throws.
bool holds_level_manifest(const std::string& dir) noexcept
{
    std::error_code ec;
    return stdfs::exists(fs::join(dir, detail::level_manifest_name), ec);
}

// Whether the directory `dir` is a node-local level's directory: one of its
// `step_<N>` entries is a node-local step. Local; never throws.
bool node_local_directory(const std::string& dir) noexcept
{
    std::error_code ec;
    for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::int64_t step = 0;
        bool container = false;
        if (parse_step_name(it->path().filename().string(), step, container) && !container &&
            holds_level_manifest(it->path().string()))
            return true;
    }
    return false;
}

// Whether the entry `path` (`step_<N>` + `suffix`) is what the node-local
// level leaves, rather than an interrupted replacement in a root: a
// node-local step itself, or in a node-local level's directory
// (`in_level_dir`). The level removes such leftovers itself (its next
// save), never renaming them into place.
bool node_local_leftover(const std::string& path, const char* suffix, bool in_level_dir) noexcept
{
    const std::string name = stdfs::path(path).filename().string();
    std::int64_t step = 0;
    bool container = false;
    if (!ends_with(name, suffix) ||
        !parse_step_name(name.substr(0, name.size() - std::strlen(suffix)), step, container) || container)
        return false;
    return in_level_dir || holds_level_manifest(path);
}

// Finishes the interrupted replacements among the leftovers `found` (of one
// directory): where `<ckpt>` is missing, a complete `<ckpt>.cairn-staging`
// (the new checkpoint, the second rename not done) or else a complete
// `<ckpt>.cairn-old` (the old one, the new one lost) is renamed to
// `<ckpt>`. Returns what it renamed. Local.
std::vector<Leftover> finish_replacements(const std::vector<Leftover>& found)
{
    std::vector<Leftover> done;
    for (const char* suffix : {staging_suffix, old_suffix})
        for (const auto& l : found) {
            if (!ends_with(l.path, suffix) ||
                node_local_leftover(l.path, suffix, node_local_directory(fs::parent(l.path))))
                continue;
            const std::string base = l.path.substr(0, l.path.size() - std::strlen(suffix));
            if (fs::exists(base) || !fs::exists(l.path) || !complete_checkpoint(l.path, false))
                continue;
            fs::rename(l.path, base);
            fs::fsync_path(fs::parent(base));
            const std::string name = stdfs::path(base).filename().string();
            const std::string what = std::strcmp(suffix, staging_suffix) == 0
                                         ? "the new checkpoint of a replacement of " + name +
                                               " interrupted between its two renames"
                                         : "the old checkpoint of an interrupted replacement of " + name +
                                               ", whose new one is not complete";
            done.push_back({l.path, what + ": renamed to " + name});
        }
    return done;
}

Bytes encode_strings(const std::vector<std::string>& v)
{
    detail::Encoder enc;
    enc.count(v.size());
    for (const auto& s : v)
        enc.str(s);
    return enc.take();
}

std::vector<std::string> decode_strings(const Bytes& b)
{
    detail::Decoder dec(b, "manager broadcast");
    std::vector<std::string> v(dec.count(1));
    for (auto& s : v)
        s = dec.str();
    dec.expect_done();
    return v;
}

// Broadcasts the coordinator's strings to every rank. Collective.
std::vector<std::string> bcast_strings(const Comm& c, const std::vector<std::string>& v)
{
    Bytes b = c.coordinator() ? encode_strings(v) : Bytes{};
    detail::bcast_bytes(c, b);
    return decode_strings(b);
}

// The leftovers of one node's node-local directory `dir`, found or
// (`remove`) removed: find_leftovers(dir) and remove_leftovers(dir), with
// `dir` taken as a node-local level's directory even when it holds no
// committed step. Local.
std::vector<Leftover> level_dir_leftovers(const std::string& dir, bool remove);

std::vector<Leftover> bcast_leftovers(const Comm& c, const std::vector<Leftover>& v)
{
    std::vector<std::string> flat;
    for (const auto& l : v) {
        flat.push_back(l.path);
        flat.push_back(l.reason);
    }
    flat = bcast_strings(c, flat);
    std::vector<Leftover> out;
    for (std::size_t i = 0; i + 1 < flat.size(); i += 2)
        out.push_back(Leftover{flat[i], flat[i + 1]});
    return out;
}

} // namespace

// ---- CheckpointManager ---------------------------------------------------------

struct CheckpointManager::Impl {
    std::string root;
    MPI_Comm comm = MPI_COMM_NULL;
    ManagerOptions opt;
    bool container = false;
    // The root's steps are in a layout a drain cannot copy from node-local
    // per-rank files (container, grouped data files): with a node-local
    // level, flush steps are saved into the root directly instead.
    bool root_not_drainable = false;
    int rank = 0;

    // The async save in flight (the same on every rank: save() is collective).
    AsyncSave pending;
    std::int64_t pending_step = -1;
    // The save in flight is a node-local one: its background part commits
    // it on every node (nothing is left to publish in the root).
    bool pending_local = false;
    // With async saves, the node-local level works on a duplicate of `comm`
    // (its background part makes MPI calls while the caller makes its own);
    // freed with the manager.
    MPI_Comm level_comm = MPI_COMM_NULL;

    // The node-local level (LocalLevel::dir set): built by the first
    // collective call that needs it; the drain in flight, if any; the last
    // node-local step this manager saved and this rank's data files of it.
    std::unique_ptr<detail::NodeLevel> local;
    std::unique_ptr<detail::Drain> drain;
    std::int64_t drain_step = -1;
    std::string drain_dst;
    int saves_since_flush = 0;
    RestoreReport report;
    // Coordinator: the levels record of the last synchronous node-local
    // save, written while the caller goes on (write_record_later).
    std::thread recorder;

    bool coordinator() const noexcept { return rank == 0; }
    bool has_local() const noexcept { return !opt.local.dir.empty(); }
    detail::NodeLevel& level()
    {
        if (!local) {
            MPI_Comm on = comm;
            if (opt.async) {
                MPI_Comm_dup(comm, &level_comm);
                on = level_comm;
            }
            local = std::make_unique<detail::NodeLevel>(on, opt.local);
        }
        return *local;
    }

    ~Impl()
    {
        join_recorder();
        local.reset();
        if (level_comm != MPI_COMM_NULL)
            MPI_Comm_free(&level_comm);
    }

    // The node-local save of `ls` after its planning, on the caller's thread
    // (synchronous saves) or on the background one (async saves; `on` is
    // then the level's duplicate communicator): the data written from
    // `source` and committed on every node, the drain of the step started
    // when `drain_it`, and the levels record. Members it sets are read by
    // the caller's thread only after the background thread is joined.
    SaveResult finish_local(detail::LocalSave& ls, SavePlanner& source, const std::function<void()>& on_written,
                            bool drain_it, int flush_count, MPI_Comm on)
    {
        std::vector<std::string> files;
        const SaveResult r = level().finish_save(ls, source, on_written, &files);
        level().note_saved(ls);
        saves_since_flush = flush_count;
        if (drain_it)
            start_drain(ls.step, files, on);
        if (coordinator()) {
            if (on == comm)
                write_record_later(); // a synchronous save: not in the caller's time
            else
                write_record(); // in the background already
        }
        return r;
    }

    // The options of a save into the root: the manager's layout, and a step
    // saved again replaces the committed one.
    SaveOptions root_save_options() const
    {
        SaveOptions so = opt.save_options;
        so.layout = container ? Layout::container : Layout::per_rank;
        so.overwrite = true;
        return so;
    }

    std::string path_of(std::int64_t step) const { return fs::join(root, step_name(step, container)); }

    // Coordinator, before a save of `step` into the root: the root made,
    // interrupted replacements finished, LATEST pointed away from `step`.
    void prepare_root(std::int64_t step)
    {
        fs::create_directories(root);
        repair();
        unpoint(step);
    }

    // Collective, first in save(): the same step on every rank, at least 0;
    // without a node-local level, the root made ready for it.
    void begin_save(std::int64_t step)
    {
        const Comm c(comm);
        std::int64_t in[2] = {step, -step}, out[2] = {0, 0};
        MPI_Allreduce(in, out, 2, MPI_INT64_T, MPI_MAX, comm);
        run_phase(c, "checkpoint manager: save", [&] {
            if (out[0] != -out[1])
                throw error::Mismatch("CheckpointManager::save: the ranks passed different steps (" +
                                      std::to_string(-out[1]) + " to " + std::to_string(out[0]) + ")");
            if (step < 0)
                throw error::WrongAPIUsage("CheckpointManager::save: step must be at least 0, not " +
                                           std::to_string(step));
            if (coordinator() && !has_local())
                prepare_root(step);
        });
    }

    // Collective: a synchronous save into the root, then LATEST and retention.
    SaveResult save_root(std::int64_t step, StateDict& state)
    {
        const SaveResult r = cairn::save(state, path_of(step), comm, root_save_options());
        run_phase(Comm(comm), "checkpoint manager: publish", [&] {
            if (coordinator())
                publish(step);
        });
        return r;
    }

    // Collective: an async save into the root, returning once it is staged;
    // settle() publishes it.
    void save_root_async(std::int64_t step, StateDict& state)
    {
        AsyncSave h = async_save(state, path_of(step), comm, root_save_options());
        pending = h;
        pending_step = step;
        // Staging errors differ between ranks (a rank that staged everything
        // before another failed has a ready `staged`); the agreed error comes
        // with the commit, from the next call that settles this save.
        h.staged().wait();
    }

    // Collective: a save with a node-local level. Every flush_every-th save
    // is also drained into the root (counted when a save succeeds); a
    // container or grouped data files cannot be drained from per-rank files,
    // so on a flush step the state is saved into the root as well,
    // synchronously.
    std::optional<SaveResult> save_local(std::int64_t step, StateDict& state)
    {
        const bool flush_now = opt.local.flush_every > 0 && saves_since_flush + 1 >= opt.local.flush_every;
        const int flush_count = flush_now ? 0 : saves_since_flush + 1;
        const bool into_root = flush_now && root_not_drainable;
        if (opt.async && !into_root) {
            save_local_async(step, state, flush_now, flush_count);
            return std::nullopt;
        }
        wait_for_async_saves(); // never interleave with a save in the background
        SaveResult r;
        try {
            auto ls = level().plan_save(step, state, opt.save_options);
            r = finish_local(*ls, ls->planner(), {}, flush_now && !root_not_drainable, flush_count, comm);
        } catch (...) {
            record_after_failure();
            throw;
        }
        if (into_root) {
            const Comm c(comm);
            run_phase(c, "checkpoint manager: save", [&] {
                if (coordinator())
                    prepare_root(step);
            });
            cairn::save(state, path_of(step), comm, root_save_options());
            run_phase(c, "checkpoint manager: publish", [&] {
                if (coordinator()) {
                    publish(step);
                    join_recorder();
                    write_record();
                }
            });
        }
        return r;
    }

    // Collective: an async node-local save. Planned and staged here;
    // written, committed on every node and drained (when `drain_it`) in the
    // background, by finish_local on the level's own communicator. Returns
    // once the data is staged; the save is pending until settled.
    void save_local_async(std::int64_t step, StateDict& state, bool drain_it, int flush_count)
    {
        detail::NodeLevel& lvl = level();
        const Comm lc(lvl.topology().comm);
        detail::prepare_background(lc, "CheckpointManager::save (async, node-local level)");
        std::shared_ptr<detail::LocalSave> ls;
        try {
            ls = lvl.plan_save(step, state, opt.save_options);
        } catch (...) {
            record_after_failure();
            throw;
        }
        std::shared_ptr<SavePlanner> copy;
        try {
            if (opt.save_options.async_staging == AsyncStaging::full_copy)
                copy = run_phase(lc, "stage", [&] {
                    return std::shared_ptr<SavePlanner>(detail::stage_copy(ls->session->plan, ls->planner()));
                });
        } catch (...) {
            if (lc.coordinator())
                ls->session->storage->abort();
            record_after_failure();
            throw;
        }
        const bool staged_now = copy != nullptr;
        const MPI_Comm on = lc.comm;
        auto job = [this, ls, copy, drain_it, flush_count, on](const std::function<void()>& staged) mutable {
            SavePlanner& source = copy ? *copy : ls->planner();
            auto r = finish_local(*ls, source, staged, drain_it, flush_count, on);
            copy.reset();
            ls.reset();
            return r;
        };
        pending = detail::run_in_background(std::move(job), staged_now);
        pending_step = step;
        pending_local = true;
        pending.staged().wait(); // errors: with the commit, as for a save into the root
    }

    // Coordinator, before looking for checkpoints: a replacement interrupted
    // between its two renames left `step_<N>` missing beside a complete
    // `step_<N>.cairn-staging` (and `.cairn-old`); the newer one is put in
    // place, so that the step is not passed over for an older one. What
    // remains are leftovers (remove_leftovers). Says what it did on stderr.
    void repair()
    {
        for (const auto& l : finish_replacements(cairn::find_leftovers(root)))
            std::fprintf(stderr, "cairn: CheckpointManager(%s): finished an interrupted replacement: %s: %s\n",
                         root.c_str(), l.path.c_str(), l.reason.c_str());
    }

    // Coordinator: after the commit of `step`, points LATEST
    // at the newest complete checkpoint (normally `step`) and removes the
    // committed checkpoints retention does not keep.
    void publish(std::int64_t step)
    {
        const auto newest = newest_complete(root, container);
        if (!newest)
            throw error::WriteError("checkpoint " + step_name(step, container) + " in " + root +
                                    " was committed but no complete checkpoint is there");
        const std::string newest_name = stdfs::path(newest->path).filename().string();
        write_pointer(root, newest_name, opt.save_options.fsync);

        // Retention, steps descending: the first keep_last complete
        // checkpoints stay, and below them whatever keep_every, the step just
        // saved or LATEST keeps. Only complete checkpoints count and are
        // removed; uncommitted ones are leftovers (remove_leftovers), damaged
        // ones are left for a person to look at. Each checkpoint is read once
        // here before it is removed, so the cost does not grow with the
        // number of checkpoints kept forever.
        if (opt.keep_last == 0)
            return;
        int complete_seen = 0;
        for (const auto& c : scan(root, container)) {
            if (!committed_checkpoint(c.path, c.container))
                continue;
            const bool kept = c.step == step || c.step == newest->step ||
                              (opt.keep_every > 0 && c.step % opt.keep_every == 0);
            if (complete_seen < opt.keep_last) {
                if (complete_checkpoint(c.path, c.container))
                    ++complete_seen;
                continue;
            }
            if (!kept && complete_checkpoint(c.path, c.container))
                remove_checkpoint(c);
        }
    }

    // Coordinator, before a save of `step` that may replace a
    // committed checkpoint of that step: LATEST must never name a checkpoint
    // in the middle of being replaced, so it is pointed at the newest other
    // complete checkpoint first (or removed when there is none).
    void unpoint(std::int64_t step)
    {
        if (read_pointer(root) != step_name(step, container))
            return;
        if (const auto other = newest_complete(root, container, step))
            write_pointer(root, stdfs::path(other->path).filename().string(), opt.save_options.fsync);
        else
            fs::remove_all(fs::join(root, pointer_name));
    }

    // Collective: finishes the async save in flight, if any: waits for its
    // commit (every rank gets its result or its agreed error) and for the
    // background thread to end, then publishes it (LATEST, retention).
    std::optional<SaveResult> settle()
    {
        join_recorder();
        auto r = settle_async();
        settle_drain();
        if (local)
            local->wait_for_removal();
        return r;
    }

    std::optional<SaveResult> settle_async()
    {
        if (!pending.valid())
            return std::nullopt;
        const AsyncSave h = std::exchange(pending, AsyncSave{});
        const std::int64_t step = std::exchange(pending_step, -1);
        const bool was_local = std::exchange(pending_local, false);
        std::exception_ptr failed;
        SaveResult r;
        try {
            r = h.wait();
        } catch (...) {
            failed = std::current_exception();
        }
        wait_for_async_saves(); // no HDF5 call in the background from here on
        if (failed) {
            if (was_local)
                record_after_failure();
            std::rethrow_exception(failed); // the same on every rank
        }
        if (was_local)
            return r; // committed on every node, a drain started, in the background
        const Comm c(comm);
        run_phase(c, "checkpoint manager: publish", [&] {
            if (coordinator())
                publish(step);
        });
        return r;
    }

    // After a node-local save failed (the same error on every rank), the
    // coordinator rewrites the levels record: the step the save reused is
    // no longer held. No MPI call; a failure to write the record is a
    // warning, never the error the caller gets.
    void record_after_failure() noexcept
    {
        if (!coordinator() || !local)
            return;
        join_recorder(); // never two writers of the record
        write_record();
    }

    // Coordinator: replaces root/.cairn-levels (which steps each level
    // holds, for `cairn steps ROOT`). Best effort: a failure is a warning,
    // the checkpoints themselves are what restores look at.
    void write_record() noexcept
    {
        try {
            detail::LevelRecord rec;
            rec.local_dir = opt.local.dir;
            rec.redundancy = opt.local.redundancy.str();
            rec.nodes = level().topology().nodes;
            rec.ranks = level().topology().size;
            rec.hosts = level().topology().hosts;
            std::map<std::int64_t, detail::LevelRecord::Step> steps;
            // Per step, the nodes that hold one save's copy of it (the newest
            // save_id's): as every node's leader listed them at the last
            // save (none listed yet: what this node holds).
            const detail::NodeSteps& known = level().known_steps();
            std::map<std::int64_t, std::map<std::uint64_t, std::vector<int>>> holders;
            if (known.known) {
                for (std::size_t n = 0; n < known.committed.size(); ++n)
                    for (const auto& [s, id] : known.committed[n])
                        holders[s][id].push_back(static_cast<int>(n));
            } else {
                for (const std::int64_t s : level().committed_here())
                    holders[s][0].push_back(level().topology().node);
            }
            for (const auto& [s, by_id] : holders) {
                const std::vector<int>& nodes = by_id.rbegin()->second;
                steps[s].step = s;
                if (static_cast<int>(nodes.size()) == rec.nodes)
                    steps[s].node_local = true;
                else
                    steps[s].partial = nodes;
            }
            for (const auto& cand : scan(root, container))
                if (committed_checkpoint(cand.path, cand.container)) {
                    steps[cand.step].step = cand.step;
                    steps[cand.step].file_system = true;
                }
            for (const auto& [s, e] : steps)
                rec.steps.push_back(e);
            fs::create_directories(root);
            detail::write_level_record(root, rec, opt.save_options.fsync);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "cairn: warning: CheckpointManager(%s): the levels record not written: %s\n",
                         root.c_str(), e.what());
        }
    }

    // Coordinator: write_record on a thread of its own (the record goes to
    // the root, often a slower file system than the node-local level, with
    // an fsync), joined by the next call of the manager (settle) and by its
    // destructor; without a thread, at once.
    void write_record_later() noexcept
    {
        join_recorder();
        try {
            recorder = std::thread([this] { write_record(); });
        } catch (const std::system_error&) {
            write_record();
        }
    }

    void join_recorder() noexcept
    {
        if (recorder.joinable())
            recorder.join();
    }

    // Collective: starts draining node-local `step` (this rank's files of
    // it: `files`) into root/step_<N>, in the background.
    void start_drain(std::int64_t step, const std::vector<std::string>& files, MPI_Comm on)
    {
        const Comm c(on);
        const std::string path = fs::join(root, step_name(step, false));
        run_phase(c, "checkpoint manager: drain", [&] {
            if (!coordinator())
                return;
            fs::create_directories(root);
            repair();
        });
        // Into the checkpoint's own directory, or beside a committed one
        // (commit_drain exchanges them).
        drain_dst = detail::drain_destination(c, path);
        drain = std::make_unique<detail::Drain>(level().step_dir(step), drain_dst, files, opt.save_options.fsync);
        drain_step = step;
    }

    // Collective: settles the drain in flight, if any: waits for every
    // rank's copy, commits the root's step, then LATEST and retention. A
    // failure is a warning: the previous root steps stay as they were and
    // the node-local step stays usable.
    void settle_drain()
    {
        if (drain_step < 0)
            return;
        const std::int64_t step = std::exchange(drain_step, -1);
        std::unique_ptr<detail::Drain> d = std::move(drain);
        const Comm c(comm);
        std::exception_ptr err;
        try {
            d->wait();
        } catch (...) {
            err = std::current_exception();
        }
        d.reset();
        const std::string path = fs::join(root, step_name(step, false));
        try {
            detail::agree(c, "checkpoint manager: drain", err);
            detail::commit_drain(c, level().step_dir(step), drain_dst, path, opt.save_options.fsync);
            run_phase(c, "checkpoint manager: publish", [&] {
                if (coordinator()) {
                    publish(step);
                    write_record();
                }
            });
        } catch (const Error& e) {
            if (coordinator())
                std::fprintf(stderr,
                             "cairn: warning: CheckpointManager(%s): the drain of step %lld to the file system "
                             "failed: %s; the node-local step stays\n",
                             root.c_str(), static_cast<long long>(step), e.what());
        }
    }

    // Collective: the leftovers of the root (the coordinator's) and, with a
    // node-local level, of every node's directory (its leader's; a directory
    // that an earlier node of the same host has too is looked at once),
    // found or (`remove`) removed; every rank gets the whole list: the
    // root's, then each node's in node order.
    std::vector<Leftover> leftovers(bool remove)
    {
        const Comm c(comm);
        const char* phase = remove ? "checkpoint manager: remove leftovers" : "checkpoint manager: find leftovers";
        auto list = run_phase(c, phase, [&] {
            if (!coordinator())
                return std::vector<Leftover>{};
            return remove ? cairn::remove_leftovers(root) : cairn::find_leftovers(root);
        });
        list = bcast_leftovers(c, list);
        if (!has_local())
            return list;
        const detail::NodeLevel& lvl = level();
        const detail::Topology& t = lvl.topology();
        const auto mine = run_phase(c, phase, [&] {
            std::vector<std::string> flat;
            if (!t.leader())
                return flat;
            const std::string dir = lvl.node_dir(t.node);
            const auto host = t.hosts[static_cast<std::size_t>(t.node)];
            for (int n = 0; n < t.node; ++n)
                if (t.hosts[static_cast<std::size_t>(n)] == host && lvl.node_dir(n) == dir)
                    return flat;
            if (dir == root && host == t.hosts[0])
                return flat; // the root's, above
            const std::string where =
                " (node-local directory of node " + std::to_string(t.node) + ", host " + host + ")";
            for (const auto& l : level_dir_leftovers(dir, remove)) {
                flat.push_back(l.path);
                flat.push_back(l.reason + where);
            }
            return flat;
        });
        const auto all = detail::gather_bytes(c, encode_strings(mine));
        if (coordinator())
            for (const auto& b : all) {
                const auto flat = decode_strings(b);
                for (std::size_t i = 0; i + 1 < flat.size(); i += 2)
                    list.push_back(Leftover{flat[i], flat[i + 1]});
            }
        return bcast_leftovers(c, list);
    }

    struct Restore;
};

namespace {

// Runs `load`: true when it succeeded. A failure that an older step need not
// share (damaged data or metadata, a read error; with `write_too` also a
// node that could not write the files it needs) is returned in `reason` and
// `kind`; any other error is thrown.
template <class Load>
bool attempt(Load&& load, bool write_too, std::string& reason, Error::Kind& kind)
{
    try {
        load();
        return true;
    } catch (const error::IntegrityError& e) { // damaged data: the same on every rank (error agreement)
        reason = e.what();
        kind = e.kind();
    } catch (const error::FormatError& e) {
        reason = e.what();
        kind = e.kind();
    } catch (const error::ReadError& e) {
        reason = e.what();
        kind = e.kind();
    } catch (const error::WriteError& e) {
        if (!write_too)
            throw;
        reason = e.what();
        kind = e.kind();
    }
    return false;
}

} // namespace

// One restore_latest(): the steps of both levels, newest first, tried in
// turn (a node-local step before a root step that is not newer) until one
// loads. Every member function is collective: every rank tries the same
// steps in the same order.
struct CheckpointManager::Impl::Restore {
    Impl& m;
    StateDict& state;
    const LoadOptions& options;
    const Comm c;
    std::vector<Candidate> root_steps; ///< the managed names, newest first
    std::size_t next_root = 0;          ///< the next complete one (root_steps.size(): none)
    std::vector<detail::LocalStep> local_steps; ///< newest first
    std::size_t next_local = 0;
    double t0 = 0;
    std::vector<SkippedCheckpoint> skips;
    Error::Kind first_kind = Error::Kind::generic;
    RestoreReport report; ///< of the step that loaded

    Restore(Impl& manager, StateDict& st, const LoadOptions& opts)
        : m(manager), state(st), options(opts), c(manager.comm)
    {
        root_steps = list_root();
        t0 = MPI_Wtime();
        if (m.has_local())
            local_steps = m.level().scan();
        next_root = next_complete(0);
    }

    // The managed names in the root, newest first. Whether each is complete
    // is decided on the coordinator when it is its turn, so that a restore
    // reads the metadata of the steps it tries, not of all.
    std::vector<Candidate> list_root()
    {
        const auto names = run_phase(c, "checkpoint manager: latest", [&] {
            std::vector<std::string> v;
            if (!m.coordinator())
                return v;
            m.repair();
            for (const auto& cand : scan(m.root, m.container)) {
                v.push_back(std::to_string(cand.step));
                v.push_back(cand.path);
                v.push_back(cand.container ? "container" : "per_rank");
            }
            return v;
        });
        const auto v = bcast_strings(c, names);
        std::vector<Candidate> out(v.size() / 3);
        for (std::size_t j = 0; j < out.size(); ++j)
            out[j] = Candidate{std::stoll(v[3 * j]), v[3 * j + 2] == "container", v[3 * j + 1]};
        return out;
    }

    // The index of the first complete root checkpoint at or after `from`,
    // root_steps.size() when there is none.
    std::size_t next_complete(std::size_t from)
    {
        const std::size_t n = root_steps.size();
        std::int64_t pick = run_phase(c, "checkpoint manager: latest", [&]() -> std::int64_t {
            if (!m.coordinator())
                return 0;
            for (std::size_t j = from; j < n; ++j)
                if (complete_checkpoint(root_steps[j].path, root_steps[j].container))
                    return static_cast<std::int64_t>(j);
            return static_cast<std::int64_t>(n);
        });
        MPI_Bcast(&pick, 1, MPI_INT64_T, 0, m.comm);
        return static_cast<std::size_t>(pick);
    }

    bool exhausted() const { return next_root >= root_steps.size() && next_local >= local_steps.size(); }
    std::int64_t root_step() const { return next_root < root_steps.size() ? root_steps[next_root].step : -1; }
    std::int64_t local_step() const { return next_local < local_steps.size() ? local_steps[next_local].step : -1; }
    bool local_is_next() const { return next_local < local_steps.size() && local_step() >= root_step(); }

    // What the warning says comes next.
    std::string next_text() const
    {
        const std::int64_t next = std::max(local_step(), root_step());
        return next >= 0 ? "trying step " + std::to_string(next) : std::string("no older checkpoint to try");
    }

    void note_skip(std::int64_t step, const std::string& path, const std::string& reason, Error::Kind kind)
    {
        if (skips.empty())
            first_kind = kind;
        skips.push_back(SkippedCheckpoint{step, path, reason});
        if (m.coordinator())
            std::fprintf(stderr, "cairn: warning: step %lld at %s skipped: %s; %s\n", static_cast<long long>(step),
                         path.c_str(), reason.c_str(), next_text().c_str());
    }

    // Tries the next node-local step; true when it loaded.
    bool try_local()
    {
        const detail::LocalStep& ls = local_steps[next_local++];
        const std::string where =
            detail::expand_node_dir(m.opt.local.dir, 0) + "/" + step_name(ls.step, false) + " (node-local)";
        if (!ls.recoverable) {
            note_skip(ls.step, where, ls.why, Error::Kind::read);
            return false;
        }
        RestoreReport rep;
        std::string reason;
        Error::Kind kind = Error::Kind::generic;
        if (!attempt([&] { m.level().load(ls, state, options, rep); }, true, reason, kind)) {
            note_skip(ls.step, where, reason, kind);
            return false;
        }
        rep.level = RestoreReport::Level::node_local;
        loaded(ls.step, std::move(rep));
        return true;
    }

    // Tries the next complete root step; true when it loaded.
    bool try_root()
    {
        const Candidate cand = root_steps[next_root];
        LoadOptions lo = options;
        if (!lo.storage)
            lo.layout = cand.container ? Layout::container : Layout::per_rank;
        std::string reason;
        Error::Kind kind = Error::Kind::generic;
        if (!attempt([&] { load(state, cand.path, m.comm, lo); }, false, reason, kind)) {
            next_root = next_complete(next_root + 1);
            note_skip(cand.step, cand.path, reason, kind);
            return false;
        }
        RestoreReport rep;
        rep.level = RestoreReport::Level::file_system;
        loaded(cand.step, std::move(rep));
        return true;
    }

    void loaded(std::int64_t step, RestoreReport rep)
    {
        rep.step = step;
        rep.seconds = MPI_Wtime() - t0;
        report = rep;
        m.report = std::move(rep);
    }

    [[noreturn]] void throw_none_loads() const
    {
        std::string what = "CheckpointManager::restore_latest: no checkpoint in " + m.root + " loads; tried";
        for (const auto& s : skips)
            what += "\n  step " + std::to_string(s.step) + " at " + s.path + ": " + s.reason;
        error::throw_error(first_kind, what);
    }
};

CheckpointManager::CheckpointManager(std::string root, MPI_Comm comm, ManagerOptions options)
    : m_impl(std::make_unique<Impl>())
{
    if (root.empty())
        throw error::WrongAPIUsage("CheckpointManager: empty root directory");
    if (comm == MPI_COMM_NULL)
        throw error::WrongAPIUsage("CheckpointManager: MPI_COMM_NULL");
    if (options.keep_last < 0)
        throw error::WrongAPIUsage("CheckpointManager: keep_last must be at least 0 (0: keep all), not " +
                                   std::to_string(options.keep_last));
    if (options.keep_every < 0)
        throw error::WrongAPIUsage("CheckpointManager: keep_every must be at least 0 (0: none), not " +
                                   std::to_string(options.keep_every));
    if (!options.local.dir.empty()) {
        if (options.local.keep_last < 1)
            throw error::WrongAPIUsage("CheckpointManager: the node-local keep_last must be at least 1, not " +
                                       std::to_string(options.local.keep_last));
        if (options.local.flush_every < 0)
            throw error::WrongAPIUsage("CheckpointManager: flush_every must be at least 0 (0: on demand), not " +
                                       std::to_string(options.local.flush_every));
        if (options.local.ranks_per_node < 0)
            throw error::WrongAPIUsage("CheckpointManager: ranks_per_node must be at least 0, not " +
                                       std::to_string(options.local.ranks_per_node));
        if (options.local.redundancy.scheme == Redundancy::Scheme::xor_parity &&
            options.local.redundancy.group_size < 2)
            throw error::WrongAPIUsage("CheckpointManager: an XOR group needs at least 2 nodes, not " +
                                       std::to_string(options.local.redundancy.group_size));
    }
    auto& m = *m_impl;
    m.root = fs::strip(root);
    m.comm = comm;
    m.container = options.layout == Layout::container;
    m.root_not_drainable = m.container || options.save_options.per_rank.files.kind != DataFiles::Kind::per_rank;
    m.opt = std::move(options);
    MPI_Comm_rank(comm, &m.rank);
}

CheckpointManager::~CheckpointManager()
{
    auto& m = *m_impl;
    if (m.pending.valid()) {
        // No MPI call here: wait (the background part commits a node-local
        // save, and may start its drain), then publish a root save on the
        // coordinator alone.
        try {
            m.pending.wait();
            wait_for_async_saves();
            if (m.coordinator() && !m.pending_local)
                m.publish(m.pending_step);
        } catch (const std::exception& e) {
            wait_for_async_saves();
            if (m.coordinator())
                std::fprintf(stderr, "cairn: CheckpointManager(%s): the checkpoint of step %lld: %s\n",
                             m.root.c_str(), static_cast<long long>(m.pending_step), e.what());
            if (m.pending_local)
                m.record_after_failure();
        } catch (...) {
            wait_for_async_saves();
            if (m.pending_local)
                m.record_after_failure();
        }
    }
    if (m.drain) {
        // Committing a drain is collective: without MPI calls here, the copy
        // ends and the step stays node-local only.
        try {
            m.drain->wait();
        } catch (...) {
        }
        m.drain.reset();
        if (m.coordinator())
            std::fprintf(stderr,
                         "cairn: CheckpointManager(%s): the drain of step %lld was not committed (call wait() "
                         "before the manager is destroyed); it stays on node-local storage\n",
                         m.root.c_str(), static_cast<long long>(m.drain_step));
    }
}

std::string CheckpointManager::checkpoint_path(std::int64_t step) const
{
    return fs::join(m_impl->root, step_name(step, m_impl->container));
}

const std::string& CheckpointManager::root() const noexcept { return m_impl->root; }

const ManagerOptions& CheckpointManager::options() const noexcept { return m_impl->opt; }

std::optional<SaveResult> CheckpointManager::save(std::int64_t step, StateDict& state)
{
    auto& m = *m_impl;
    m.settle();
    m.begin_save(step);
    if (m.has_local())
        return m.save_local(step, state);
    if (m.opt.async) {
        m.save_root_async(step, state);
        return std::nullopt;
    }
    return m.save_root(step, state);
}

std::optional<SaveResult> CheckpointManager::wait() { return m_impl->settle(); }

std::optional<std::int64_t> CheckpointManager::latest()
{
    auto& m = *m_impl;
    m.settle();
    const Comm c(m.comm);
    std::int64_t step = run_phase(c, "checkpoint manager: latest", [&]() -> std::int64_t {
        if (!m.coordinator())
            return -1;
        m.repair();
        const auto n = newest_complete(m.root, m.container);
        return n ? n->step : -1;
    });
    MPI_Bcast(&step, 1, MPI_INT64_T, 0, m.comm);
    if (step < 0)
        return std::nullopt;
    return step;
}

std::vector<std::int64_t> CheckpointManager::steps()
{
    auto& m = *m_impl;
    m.settle();
    const Comm c(m.comm);
    const auto names = run_phase(c, "checkpoint manager: steps", [&] {
        std::vector<std::string> v;
        if (!m.coordinator())
            return v;
        m.repair();
        for (const auto& cand : scan(m.root, m.container))
            if (complete_checkpoint(cand.path, cand.container))
                v.push_back(std::to_string(cand.step));
        return v;
    });
    std::vector<std::int64_t> out;
    for (const auto& s : bcast_strings(c, names))
        out.push_back(std::stoll(s));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::optional<std::int64_t> CheckpointManager::restore_latest(StateDict& state, const LoadOptions& options,
                                                             std::vector<SkippedCheckpoint>* skipped)
{
    auto& m = *m_impl;
    m.settle();
    if (skipped)
        skipped->clear();
    Impl::Restore r(m, state, options);
    while (!r.exhausted()) {
        const bool loaded = r.local_is_next() ? r.try_local() : r.try_root();
        if (loaded) {
            if (skipped)
                *skipped = std::move(r.skips);
            return r.report.step;
        }
    }
    if (r.skips.empty())
        return std::nullopt;
    r.throw_none_loads();
}

std::optional<std::int64_t> CheckpointManager::flush()
{
    auto& m = *m_impl;
    m.settle();
    if (!m.has_local())
        throw error::WrongAPIUsage("CheckpointManager::flush: no node-local level (LocalLevel::dir is empty)");
    if (m.root_not_drainable)
        throw error::WrongAPIUsage(std::string("CheckpointManager::flush: the root's layout is ") +
                                   (m.container ? "container" : "per-rank with grouped data files (" +
                                                                    m.opt.save_options.per_rank.files.str() + ")") +
                                   ", which cannot be drained from node-local per-rank files (every "
                                   "flush_every-th save writes it instead)");
    // The newest node-local step that can be loaded (committed on the nodes
    // that hold it), whoever saved it.
    const Comm c(m.comm);
    const std::vector<detail::LocalStep> held = m.level().scan();
    const auto newest =
        std::find_if(held.begin(), held.end(), [](const detail::LocalStep& s) { return s.recoverable; });
    if (newest == held.end())
        return std::nullopt;
    const std::int64_t step = newest->step;
    std::uint64_t have = run_phase(c, "checkpoint manager: flush", [&]() -> std::uint64_t {
        return m.coordinator() && complete_checkpoint(checkpoint_path(step), false) ? 1 : 0;
    });
    if (detail::bcast_u64(c, have) != 0)
        return std::nullopt;
    // Each rank drains its own data files from its own node's copy: the
    // step must have been saved by ranks and nodes laid out as this job's,
    // with every node's copy whole (the same on every rank: scan() is).
    if (!m.level().same_layout(newest->manifest) || newest->needs_rebuild) {
        if (m.coordinator())
            std::fprintf(stderr,
                         "cairn: warning: CheckpointManager(%s): node-local step %lld is not drained: %s\n",
                         m.root.c_str(), static_cast<long long>(step),
                         newest->needs_rebuild ? "some of its files must be rebuilt first"
                                               : "it was saved by another layout of ranks and nodes");
        return std::nullopt;
    }
    m.start_drain(step, m.level().own_files(newest->manifest), m.comm);
    m.saves_since_flush = 0;
    return step;
}

std::vector<StepLevels> CheckpointManager::levels()
{
    auto& m = *m_impl;
    m.settle();
    std::map<std::int64_t, StepLevels> out;
    for (const std::int64_t s : steps()) {
        out[s].step = s;
        out[s].file_system = true;
    }
    if (m.has_local())
        for (const auto& ls : m.level().scan()) {
            auto& e = out[ls.step];
            e.step = ls.step;
            e.node_local = ls.recoverable;
            e.needs_rebuild = ls.needs_rebuild;
        }
    std::vector<StepLevels> v;
    for (const auto& [s, e] : out)
        if (e.node_local || e.file_system)
            v.push_back(e);
    return v;
}

const RestoreReport& CheckpointManager::last_restore() const noexcept { return m_impl->report; }

std::vector<Leftover> CheckpointManager::find_leftovers()
{
    auto& m = *m_impl;
    m.settle();
    return m.leftovers(false);
}

std::vector<Leftover> CheckpointManager::remove_leftovers()
{
    auto& m = *m_impl;
    m.settle();
    return m.leftovers(true);
}

// ---- leftovers -------------------------------------------------------------

namespace {

// Open MPI's OMPIO (its sharedfp/lockedfile component) creates
// "<base>.locktest.<rank>" beside every file it opens, also for reading, to
// test file locking, and removes it right after: a process killed in
// between leaves it. True for such a name, with `base` the file it was for.
bool lock_test_base(const std::string& name, std::string& base)
{
    static constexpr const char* infix = ".locktest.";
    const auto at = name.rfind(infix);
    if (at == std::string::npos || at == 0 || !all_digits(name.substr(at + std::strlen(infix)), 9))
        return false;
    base = name.substr(0, at);
    return true;
}

// A lock-test file in the root: one of a container file of the root,
// committed ("step_<N>.h5") or not ("step_<N>.h5.cairn-tmp").
bool lock_test_of_ours(const std::string& name, std::string& base)
{
    if (!lock_test_base(name, base))
        return false;
    const std::string file =
        ends_with(base, temp_suffix) ? base.substr(0, base.size() - std::strlen(temp_suffix)) : base;
    std::int64_t step = 0;
    bool container = false;
    return parse_step_name(file, step, container) && container;
}

// A drain's partial copy (`__*.distcp.cairn-part`, `.metadata.h5.tmp.cairn-part`)
// or what a per-rank save writes before its commit (`__*.distcp`,
// `.metadata.h5.tmp`): the file name `fn` in a checkpoint directory.
bool unfinished_data_name(const std::string& fn, bool parts_only)
{
    const std::string part = ".cairn-part";
    const bool is_part = ends_with(fn, part);
    if (parts_only && !is_part)
        return false;
    const std::string f = is_part ? fn.substr(0, fn.size() - part.size()) : fn;
    return f == ".metadata.h5.tmp" || (f.rfind("__", 0) == 0 && ends_with(f, ".distcp"));
}

// Whether the directory `dir` holds a drain's partial copies. Never throws.
bool holds_drain_part(const std::string& dir) noexcept
{
    std::error_code ec;
    for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (unfinished_data_name(it->path().filename().string(), true))
            return true;
    return false;
}

// The leftover that the name of root entry `name` (at `path`) makes it, if
// any: true when the name decides (whether or not it is a leftover), false
// when the entry must be looked into.
bool leftover_by_name(const std::string& name, const std::string& path, bool in_level_dir,
                      std::vector<Leftover>& out)
{
    std::string base;
    if (lock_test_of_ours(name, base)) {
        out.push_back(
            {path, "a lock-test file of the MPI-IO library, left by a process killed while it opened " + base});
        return true;
    }
    if (ends_with(name, staging_suffix)) {
        const std::string of = name.substr(0, name.size() - std::strlen(staging_suffix));
        if (node_local_leftover(path, staging_suffix, in_level_dir))
            out.push_back({path, "a node-local step " + of + " being saved when the process stopped (never "
                                 "committed; the next node-local save removes it)"});
        else if (holds_drain_part(path))
            out.push_back({path, "a drain of the node-local step " + of + " into the file system, stopped while it "
                                 "copied (never committed; " + of + " is as it was)"});
        else
            out.push_back({path, "the new checkpoint of an interrupted replacement of " + of +
                                     " (or, once swapped in, the old one)"});
        return true;
    }
    if (ends_with(name, old_suffix)) {
        const std::string of = name.substr(0, name.size() - std::strlen(old_suffix));
        if (node_local_leftover(path, old_suffix, in_level_dir))
            out.push_back({path, "a node-local step " + of + " that retention dropped or a save replaced, not "
                                 "yet removed (the next node-local save removes it)"});
        else
            out.push_back({path, "the old checkpoint of an interrupted replacement of " + of});
        return true;
    }
    if (ends_with(name, detail::lock_suffix)) {
        if (!detail::lock_held(path)) // else a save in flight holds it
            out.push_back({path, "the lock file of an interrupted save to " +
                                     name.substr(0, name.size() - std::strlen(detail::lock_suffix))});
        return true;
    }
    if (ends_with(name, temp_suffix)) {
        out.push_back({path, name == pointer_temp_name ? "LATEST being replaced when the process stopped"
                                                       : "a container file that was never committed"});
        return true;
    }
    return false;
}

// A committed per-rank checkpoint `dir` (named `name`): reading a data file
// through OMPIO also makes "<file>.locktest.<rank>" in it for a moment.
void lock_tests_in_checkpoint(const stdfs::path& dir, const std::string& name, std::vector<Leftover>& out)
{
    std::error_code ec;
    std::string base;
    for (const auto& f : stdfs::directory_iterator(dir, ec)) {
        const std::string fn = f.path().filename().string();
        if (lock_test_base(fn, base) && base.rfind("__", 0) == 0 && ends_with(base, ".distcp"))
            out.push_back({f.path().string(), "a lock-test file of the MPI-IO library inside the committed "
                                              "checkpoint " + name + ", left by a process killed while it opened " +
                                                  base});
    }
}

// Whether the directory `dir` (named `name`, without metadata) is a per-rank
// save that never committed: named like a managed checkpoint or holding
// what a per-rank save writes.
bool uncommitted_checkpoint_dir(const stdfs::path& dir, const std::string& name)
{
    std::int64_t step = 0;
    bool container = false;
    if (parse_step_name(name, step, container) && !container)
        return true;
    std::error_code ec;
    for (const auto& f : stdfs::directory_iterator(dir, ec))
        if (unfinished_data_name(f.path().filename().string(), false))
            return true;
    return false;
}

// find_leftovers(root), with `root` a node-local level's directory when
// `level_dir` is true, else when it looks like one (node_local_directory).
std::vector<Leftover> find_in(const std::string& root_in, bool level_dir)
{
    const std::string root = fs::strip(root_in);
    std::vector<Leftover> out;
    std::error_code ec;
    if (!stdfs::exists(root, ec))
        return out;
    if (!stdfs::is_directory(root, ec))
        throw error::ReadError("cannot look for leftovers in " + root + ": not a directory");
    const bool in_level_dir = level_dir || node_local_directory(root);
    for (const auto& e : stdfs::directory_iterator(root, ec)) {
        const std::string name = e.path().filename().string();
        std::error_code ec2;
        if (leftover_by_name(name, e.path().string(), in_level_dir, out) || !stdfs::is_directory(e.path(), ec2))
            continue;
        if (stdfs::exists(e.path() / metadata_file_name, ec2))
            lock_tests_in_checkpoint(e.path(), name, out);
        else if (uncommitted_checkpoint_dir(e.path(), name))
            out.push_back({e.path().string(), "a per-rank checkpoint directory without metadata.h5 (never committed)"});
    }
    if (ec)
        throw error::ReadError("cannot list " + root + ": " + ec.message());
    std::sort(out.begin(), out.end(), [](const Leftover& a, const Leftover& b) { return a.path < b.path; });
    return out;
}

// Removes what find_in(root, level_dir) lists and returns it; in a root, an
// interrupted replacement whose final name is missing is finished rather
// than lost; a node-local level's leftovers are removed, never renamed.
std::vector<Leftover> remove_in(const std::string& root, bool level_dir)
{
    const auto found = find_in(root, level_dir);
    std::vector<Leftover> done = level_dir ? std::vector<Leftover>{} : finish_replacements(found);
    for (const auto& l : found) {
        if (!fs::exists(l.path))
            continue; // renamed above
        fs::remove_all(l.path);
        done.push_back(l);
    }
    return done;
}

std::vector<Leftover> level_dir_leftovers(const std::string& dir, bool remove)
{
    return remove ? remove_in(dir, true) : find_in(dir, true);
}

} // namespace

std::vector<Leftover> find_leftovers(const std::string& root) { return find_in(root, false); }

std::vector<Leftover> remove_leftovers(const std::string& root) { return remove_in(root, false); }

std::vector<Leftover> repair_checkpoint(const std::string& path_in)
{
    const std::string path = fs::strip(path_in);
    if (path.empty())
        throw error::WrongAPIUsage("repair_checkpoint: empty path");
    const std::string name = stdfs::path(path).filename().string();
    std::vector<Leftover> found;
    for (const auto& l : find_leftovers(fs::parent(path))) {
        const std::string n = stdfs::path(l.path).filename().string();
        for (const char* suffix : {staging_suffix, old_suffix, temp_suffix})
            if (n == name + suffix)
                found.push_back({fs::join(fs::parent(path), n), l.reason});
    }
    std::vector<Leftover> done = finish_replacements(found);
    for (const auto& l : found) {
        if (!fs::exists(l.path))
            continue; // renamed above
        fs::remove_all(l.path);
        done.push_back(l);
    }
    return done;
}

} // namespace cairn
