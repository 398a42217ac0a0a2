// The staging bound of a synchronous save: saving a strided state several
// times larger than staging_bytes raises the process's peak resident memory
// by at most the bound + 16 MiB. Run alone in its own process, since the
// peak (VmHWM) is process-wide. Skipped (exit 77) under ThreadSanitizer,
// whose shadow memory grows with every byte the save reads.
#include <cairn/cairn.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace {
long hwm_kib()
{
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0)
            return std::stol(line.substr(6));
    return -1;
}
} // namespace

#if defined(__SANITIZE_THREAD__)
#define CAIRN_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAIRN_TEST_TSAN 1
#endif
#endif

int main(int argc, char** argv)
{
#ifdef CAIRN_TEST_TSAN
    (void)argc;
    (void)argv;
    std::puts("skipped: peak resident memory cannot be measured under ThreadSanitizer");
    return 77;
#endif
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const std::string dir = std::string(argc > 1 ? argv[1] : "staging_bound_tmp") + "/ckpt";
    const std::size_t bound = std::size_t(8) << 20;
    // 128 MiB per rank held with a ghost layer: 4096 x 4096 doubles interior.
    const std::int64_t n = 4096, ld = n + 2;
    std::vector<double> field(static_cast<std::size_t>(ld * ld));
    for (std::size_t i = 0; i < field.size(); ++i)
        field[i] = static_cast<double>(i % 1000);
    cairn::StateDict sd;
    sd.add_array<double>("field", &field[static_cast<std::size_t>(ld + 1)], {n * size, n},
                         cairn::Box{{n * rank, 0}, {n, n}}, {ld, 1});
    cairn::SaveOptions o;
    o.staging_bytes = bound;
    o.overwrite = true;
    o.fsync = false;
    MPI_Barrier(MPI_COMM_WORLD);
    const long before = hwm_kib();
    const auto r = cairn::save(sd, dir, MPI_COMM_WORLD, o);
    const long after = hwm_kib();
    const double extra_mib = static_cast<double>(after - before) / 1024.0;
    const double limit_mib = static_cast<double>(bound >> 20) + 16.0;
    const double state_mib = static_cast<double>(n * n * 8) / (1 << 20);
    int ok = before > 0 && extra_mib <= limit_mib && r.bytes_written == std::uint64_t(n * n * 8 * size);
    std::printf("rank %d: state %.0f MiB, staging bound %.0f MiB, peak resident memory grew by %.1f MiB (limit %.0f)\n",
                rank, state_mib, static_cast<double>(bound >> 20), extra_mib, limit_mib);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("%s\n", all_ok ? "1 passed, 0 failed" : "0 passed, 1 failed");
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
