// Saves, loads and verifies for profile_test.py, which sets CAIRN_PROFILE
// (and CAIRN_LOG) and checks what they give against what this prints: one
// JSON object per operation on rank 0's stdout.
//
//   mpiexec -n N cairn_profile_run DIR run      both layouts: save, load, verify; an async_save
//   mpiexec -n N cairn_profile_run DIR fail     a save failing on the last rank, then one that succeeds
//   mpiexec -n N cairn_profile_run DIR mixed    set_profile_path on rank 0 only, then on all ranks but 0
//   cairn_profile_run DIR partial               1 rank: a load of a few elements of a large array
#include <cairn/async.hpp>
#include <cairn/checkpoint.hpp>
#include <cairn/errors.hpp>
#include <cairn/log.hpp>
#include <cairn/state_dict.hpp>

#include <mpi.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int rank = 0, size = 1;

void record(const char* op, const std::string& path, std::uint64_t bytes, const char* extra = "")
{
    if (rank == 0)
        std::printf("{\"operation\": \"%s\", \"path\": \"%s\", \"bytes\": %" PRIu64 "%s}\n", op, path.c_str(), bytes,
                    extra);
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv)
{
    int provided = 0; // async_save needs MPI_THREAD_MULTIPLE
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        std::fprintf(stderr, "usage: cairn_profile_run DIR run|fail|partial\n");
        MPI_Finalize();
        return 2;
    }
    const std::string dir = argv[1], mode = argv[2];
    int rc = 0;
    try {
        if (mode == "run") {
            // Rank r owns 1000 * (r + 1) doubles of "a": the ranks' bytes differ.
            std::int64_t global = 0, offset = 0;
            for (int r = 0; r < size; ++r) {
                if (r == rank)
                    offset = global;
                global += 1000 * (r + 1);
            }
            const std::int64_t n = 1000 * (rank + 1);
            std::vector<double> a(static_cast<std::size_t>(n), 0.5 + rank);
            std::vector<std::int32_t> b(64, rank);
            std::int64_t step = 7;
            cairn::StateDict state;
            state.add_array<double>("a", a.data(), {global}, cairn::Box{{offset}, {n}});
            state.add_array<std::int32_t>("b", b.data(), {size, 64}, cairn::Box{{rank, 0}, {1, 64}});
            state.add_scalar("step", &step);
            for (const bool container : {false, true}) {
                const std::string path = dir + (container ? "/ckpt.h5" : "/ckpt");
                cairn::SaveOptions so;
                so.overwrite = true;
                so.layout = container ? cairn::Layout::container : cairn::Layout::per_rank;
                record("save", path, cairn::save(state, path, MPI_COMM_WORLD, so).bytes_written);
                record("load", path, cairn::load(state, path, MPI_COMM_WORLD).bytes_read_all);
                const auto report = cairn::verify(path, MPI_COMM_WORLD);
                if (!report.ok())
                    throw std::runtime_error("verify of " + path + " found damage");
                record("verify", path, report.bytes);
            }
            const std::string path = dir + "/async";
            cairn::SaveOptions so;
            so.overwrite = true;
            record("save", path, cairn::async_save(state, path, MPI_COMM_WORLD, so).wait().bytes_written);
        } else if (mode == "fail") {
            std::vector<double> a(1000, 1.0 + rank);
            cairn::StateDict state;
            state.add_array<double>("a", a.data(), {1000 * size}, cairn::Box{{1000 * rank}, {1000}});
            const std::string path = dir + "/failing";
            cairn::SaveOptions so;
            so.overwrite = true;
            so.progress = [](const cairn::Progress& p) {
                if (rank == size - 1 && p.phase == cairn::Phase::write)
                    throw std::runtime_error("rank " + std::to_string(rank) + " stops the write");
            };
            std::string message;
            try {
                cairn::save(state, path, MPI_COMM_WORLD, so);
            } catch (const cairn::Error& e) {
                message = e.what();
            }
            if (message.find("stops the write") == std::string::npos)
                throw std::runtime_error("the failing save did not fail with the callback's error: '" + message + "'");
            record("failed", path, 0);
            so.progress = nullptr;
            record("save", path, cairn::save(state, path, MPI_COMM_WORLD, so).bytes_written);
        } else if (mode == "mixed") {
            // Only the coordinator's setting counts: DIR/mixed0.jsonl gets a
            // record with every rank, DIR/mixed1.jsonl none.
            std::vector<double> a(100, 1.0 + rank);
            cairn::StateDict state;
            state.add_array<double>("a", a.data(), {100 * size}, cairn::Box{{100 * rank}, {100}});
            cairn::SaveOptions so;
            so.overwrite = true;
            const std::string path = dir + "/mixed";
            cairn::set_profile_path(rank == 0 ? dir + "/mixed0.jsonl" : "");
            record("save", path, cairn::save(state, path, MPI_COMM_WORLD, so).bytes_written);
            cairn::set_profile_path(rank == 0 ? "" : dir + "/mixed1.jsonl");
            if (cairn::profile_path() != (rank == 0 ? "" : dir + "/mixed1.jsonl"))
                throw std::runtime_error("profile_path() is not what set_profile_path() set");
            record("load", path, cairn::load(state, path, MPI_COMM_WORLD).bytes_read_all);
        } else if (mode == "partial") {
            // One array of 1 MiB in one chunk, checksummed by 64 KiB blocks;
            // a load of 10 elements reads a whole block: more than it needs.
            const std::int64_t n = 1 << 17;
            std::vector<double> a(static_cast<std::size_t>(n), 2.5);
            cairn::StateDict state;
            state.add_array<double>("a", a.data(), {n}, cairn::Box{{0}, {n}});
            const std::string path = dir + "/partial.h5";
            cairn::SaveOptions so;
            so.overwrite = true;
            so.layout = cairn::Layout::container;
            so.checksum_block = 64 * 1024;
            cairn::save(state, path, MPI_COMM_WORLD, so);
            std::vector<double> few(10, 0.0);
            cairn::StateDict in;
            in.add_array<double>("a", few.data(), {n}, cairn::Box{{1000}, {10}});
            const auto r = cairn::load(in, path, MPI_COMM_WORLD);
            if (few != std::vector<double>(10, 2.5))
                throw std::runtime_error("the partial load read wrong values");
            const std::string extra = ", \"bytes_read\": " + std::to_string(r.bytes_read) + ", \"planned\": 80";
            record("load", path, r.bytes_read_all, extra.c_str());
        } else {
            throw std::runtime_error("unknown mode " + mode);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cairn_profile_run: rank %d: %s\n", rank, e.what());
        rc = 1;
    }
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
