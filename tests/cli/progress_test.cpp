// Progress callbacks and the phase log (cairn/log.hpp), on any number of ranks:
//
//   mpiexec -n 2 cairn_progress_test DIR
//
// Checks the phases reported by save, load and verify, that `done` grows to
// this rank's `total`, that set_log_level() prints (and stops printing) the
// phase lines, and that a callback that throws on one rank, in any phase and
// either layout, fails the save or load on every rank (and leaves the
// committed checkpoint as it was).
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/log.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int rank = 0, size = 1, failures = 0;

void check(bool ok, const std::string& what)
{
    if (!ok) {
        std::fprintf(stderr, "progress_test: rank %d: FAIL: %s\n", rank, what.c_str());
        ++failures;
    }
}

struct Recorder {
    std::vector<cairn::Progress> events;
    cairn::ProgressCallback callback()
    {
        return [this](const cairn::Progress& p) { events.push_back(p); };
    }
    // Phases in the order they began.
    std::vector<cairn::Phase> phases() const
    {
        std::vector<cairn::Phase> out;
        for (const auto& e : events)
            if (out.empty() || out.back() != e.phase)
                out.push_back(e.phase);
        return out;
    }
    // The data phase's events: done never decreases and ends at total.
    void check_phase(cairn::Phase phase, std::uint64_t total, bool intermediate, const std::string& what) const
    {
        std::uint64_t last = 0, n = 0;
        bool monotonic = true, totals = true;
        for (const auto& e : events)
            if (e.phase == phase) {
                monotonic = monotonic && e.done >= last;
                totals = totals && e.total == total;
                last = e.done;
                ++n;
            }
        check(n >= 2, what + ": begin and end reported");
        check(monotonic, what + ": done never decreases");
        check(totals, what + ": total is this rank's " + std::to_string(total) + " bytes");
        check(last == total, what + ": done ends at total");
        if (intermediate)
            check(n >= 3, what + ": progress between begin and end (" + std::to_string(n) + " events)");
    }
};

// Runs f with stderr going to `file`; returns what it printed.
template <class F>
std::string capture_stderr(const std::string& file, F&& f)
{
    std::fflush(stderr);
    const int saved = dup(2);
    FILE* out = std::fopen(file.c_str(), "w");
    dup2(fileno(out), 2);
    f();
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::fclose(out);
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string dir = argc > 1 ? argv[1] : "progress_test";
    const std::string ckpt = dir + "/ckpt";
    if (rank == 0) {
        std::string cmd = "mkdir -p '" + dir + "'";
        check(std::system(cmd.c_str()) == 0, "mkdir");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    // Three arrays of 1000 doubles per rank: 24000 bytes written by each.
    const std::int64_t n = 1000;
    std::vector<std::vector<double>> data(3, std::vector<double>(n, 1.0 + rank));
    std::int64_t step = 3;
    cairn::StateDict state;
    for (int a = 0; a < 3; ++a)
        state.add_array<double>("a" + std::to_string(a), data[a].data(), {n * size}, cairn::Box{{n * rank}, {n}});
    state.add_scalar("step", &step);
    const std::uint64_t mine = 3 * n * sizeof(double);

    try {
        Recorder saved;
        cairn::SaveOptions so;
        so.overwrite = true;
        so.progress = saved.callback();
        cairn::save(state, ckpt, MPI_COMM_WORLD, so);
        check(saved.phases() == std::vector<cairn::Phase>{cairn::Phase::plan, cairn::Phase::exchange,
                                                          cairn::Phase::write, cairn::Phase::commit},
              "save phases: plan, exchange, write, commit");
        saved.check_phase(cairn::Phase::write, mine, true, "save write");

        Recorder loaded;
        cairn::LoadOptions lo;
        lo.progress = loaded.callback();
        const auto lr = cairn::load(state, ckpt, MPI_COMM_WORLD, lo);
        check(loaded.phases() == std::vector<cairn::Phase>{cairn::Phase::plan, cairn::Phase::read},
              "load phases: plan, read");
        loaded.check_phase(cairn::Phase::read, mine, true, "load read");
        check(lr.bytes_read_all >= mine * static_cast<std::uint64_t>(size), "LoadResult::bytes_read_all");

        Recorder verified;
        cairn::LoadOptions vo;
        vo.progress = verified.callback();
        const auto report = cairn::verify(ckpt, MPI_COMM_WORLD, vo);
        check(report.ok(), "verify ok");
        check(verified.phases() == std::vector<cairn::Phase>{cairn::Phase::plan, cairn::Phase::verify},
              "verify phases: plan, verify");
        std::uint64_t my_total = verified.events.back().total, all = 0;
        MPI_Allreduce(&my_total, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        check(all == report.bytes, "verify totals add up to the bytes checked");
        verified.check_phase(cairn::Phase::verify, my_total, false, "verify");

        // The log, switched on and off through the API.
        const std::string log_file = dir + "/stderr." + std::to_string(rank);
        cairn::set_log_level(cairn::LogLevel::debug);
        check(cairn::log_level() == cairn::LogLevel::debug, "log_level() returns the level set");
        std::string text = capture_stderr(log_file, [&] { cairn::save(state, ckpt, MPI_COMM_WORLD, so); });
        check(text.find("cairn: [rank " + std::to_string(rank) + "] save '" + ckpt + "': write ") != std::string::npos,
              "debug: this rank's write line");
        if (rank == 0)
            for (const char* phase : {"plan", "exchange", "write", "commit", "total"})
                check(text.find("cairn: save '" + ckpt + "': " + phase + " ") != std::string::npos,
                      std::string("info line of ") + phase);
        cairn::set_log_level(cairn::LogLevel::off);
        text = capture_stderr(log_file, [&] { cairn::load(state, ckpt, MPI_COMM_WORLD); });
        check(text.find("cairn:") == std::string::npos, "off: no lines");

        // A callback that throws on the last rank fails the save everywhere.
        so.progress = [](const cairn::Progress& p) {
            if (rank == size - 1 && p.phase == cairn::Phase::write && p.done > 0)
                throw std::runtime_error("stop here");
        };
        std::string error;
        try {
            cairn::save(state, ckpt, MPI_COMM_WORLD, so);
        } catch (const cairn::Error& e) {
            error = e.what();
        }
        check(error.find("stop here") != std::string::npos, "a throwing callback fails the save on every rank: '" +
                                                                error + "'");

        // The same in every phase, also as it begins (before the phase's
        // collective calls: the container writes and reads collectively), on
        // one rank, in both layouts: every rank fails with the callback's
        // message, and the committed checkpoint is left as it was.
        for (const bool container : {false, true}) {
            const std::string id = dir + (container ? "/cancel.h5" : "/cancel");
            cairn::SaveOptions base;
            base.overwrite = true;
            base.layout = container ? cairn::Layout::container : cairn::Layout::per_rank;
            cairn::save(state, id, MPI_COMM_WORLD, base);
            const auto stop_in = [](cairn::Phase phase) {
                return [phase](const cairn::Progress& p) {
                    if (rank == size - 1 && p.phase == phase && p.done == 0)
                        throw std::runtime_error(std::string("stop in ") + cairn::phase_name(phase));
                };
            };
            const auto fails = [&](const std::string& what, const std::string& expect, auto&& call) {
                std::string message;
                try {
                    call();
                } catch (const cairn::Error& e) {
                    message = e.what();
                }
                check(message.find(expect) != std::string::npos,
                      what + ": fails on every rank with the callback's message: '" + message + "'");
            };
            const std::string where = container ? "container" : "per-rank";
            for (const auto phase : {cairn::Phase::plan, cairn::Phase::exchange, cairn::Phase::write,
                                     cairn::Phase::commit}) {
                cairn::SaveOptions o = base;
                o.progress = stop_in(phase);
                std::fill(data[0].begin(), data[0].end(), -5.0); // not to be committed
                fails(where + " save, " + cairn::phase_name(phase), std::string("stop in ") + cairn::phase_name(phase),
                      [&] { cairn::save(state, id, MPI_COMM_WORLD, o); });
                std::fill(data[0].begin(), data[0].end(), 1.0 + rank);
            }
            for (const auto phase : {cairn::Phase::plan, cairn::Phase::read}) {
                cairn::LoadOptions o;
                o.progress = stop_in(phase);
                fails(where + " load, " + cairn::phase_name(phase), std::string("stop in ") + cairn::phase_name(phase),
                      [&] { cairn::load(state, id, MPI_COMM_WORLD, o); });
            }
            std::vector<double> back(static_cast<std::size_t>(n), 0.0);
            cairn::StateDict in;
            in.add_array<double>("a0", back.data(), {n * size}, cairn::Box{{n * rank}, {n}});
            cairn::LoadOptions partial;
            partial.partial = true;
            cairn::load(in, id, MPI_COMM_WORLD, partial);
            check(back == std::vector<double>(static_cast<std::size_t>(n), 1.0 + rank),
                  where + ": the checkpoint is the one committed before the cancelled saves");

            // At the end of the commit phase the checkpoint is committed: too
            // late to cancel, the exception is ignored and the save succeeds.
            cairn::SaveOptions late = base;
            auto commit_calls = std::make_shared<int>(0);
            late.progress = [commit_calls](const cairn::Progress& p) {
                // The commit phase has no bytes (done = total = 0): its second call is its end.
                if (p.phase == cairn::Phase::commit && ++*commit_calls == 2 && rank == size - 1)
                    throw std::runtime_error("too late");
            };
            std::fill(data[0].begin(), data[0].end(), 7.0);
            std::string late_error;
            try {
                cairn::save(state, id, MPI_COMM_WORLD, late);
            } catch (const cairn::Error& e) {
                late_error = e.what();
            }
            std::fill(data[0].begin(), data[0].end(), 1.0 + rank);
            check(late_error.empty(), where + ": a throw once committed does not fail the save: '" + late_error + "'");
            cairn::load(in, id, MPI_COMM_WORLD, partial);
            check(back == std::vector<double>(static_cast<std::size_t>(n), 7.0), where + ": that save is committed");
        }
    } catch (const std::exception& e) {
        check(false, std::string("unexpected exception: ") + e.what());
    }

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total ? "progress_test: %d failures\n" : "progress_test: OK\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
