// Writes one per-rank checkpoint of each metadata format version into DIR,
// for format_example.py, which reads them with the h5py code of
// docs/FORMAT.md section 4 (no Cairn involved):
//   DIR/v1  saved by the ranks: array "u", 60 x 7 f64, split by rows;
//           u[i, j] = 0.25 * (7 i + j) + 1                 (format version 1)
//   DIR/v2  as a 20,000-rank save would leave it (written by rank 0): "u",
//           20,000 x 4 f64, row k in file k % 64; u[k, c] = 10 k + c; the
//           chunk columns are stored as runs                (format version 2)
//   DIR/v3  saved by the ranks with a checksum every 8 bytes: "u", 2048 x 1024
//           f64 split by rows, u[i, j] = (1024 i + j) % 1000; 16 MiB of
//           checksums, stored as a dataset                  (format version 3)
//   DIR/v3_boxes  v2 plus an entry "z_big" of 600,000 irregular chunks: the
//           chunk boxes the example reads are a dataset     (format version 3)
// Each directory also holds a small array "a_first" sorted before "u", so
// that the example's offsets into the columns are exercised.
//
//   mpiexec -n 2 cairn_format_samples DIR
#include "../mpi/runs_checkpoint.hpp"

#include <cairn/cairn.hpp>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_size = 1;

std::pair<std::int64_t, std::int64_t> rows_of(std::int64_t rows)
{
    const std::int64_t first = rows * g_rank / g_size, last = rows * (g_rank + 1) / g_size;
    return {first, last - first};
}

template <class F>
void save_rows(const std::string& dir, std::int64_t rows, std::int64_t cols, F value, std::uint64_t checksum_block)
{
    const auto [first, n] = rows_of(rows);
    std::vector<double> u(static_cast<std::size_t>(n * cols));
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
            u[static_cast<std::size_t>(i * cols + j)] = value(first + i, j);
    std::vector<float> a_first = {1.5f, 2.5f, 3.5f};
    cairn::StateDict sd;
    sd.add_array("u", u.data(), cairn::Shape{rows, cols}, cairn::Box{{first, 0}, {n, cols}});
    sd.add_replicated("a_first", a_first.data(), cairn::Shape{3});
    cairn::SaveOptions o;
    o.overwrite = true;
    o.fsync = false;
    o.checksum_block = checksum_block;
    cairn::save(sd, dir, MPI_COMM_WORLD, o);
}

// As a 20,000-rank save of a 20,000 x 4 array split by rows would leave it
// (chunk columns as runs), written by this process alone, plus "a_first" in
// a file of its own. With `big`: also an entry "z_big" of 600,000 chunks of
// irregular heights, so that the chunk boxes fill more than 8 MiB and no
// runs (format version 3, chunk_boxes a dataset). The data of "z_big" is
// not written: the example reads only "u".
void write_synthetic_checkpoint(const std::string& dir, bool big)
{
    std::filesystem::remove_all(dir);
    cairn::Metadata md = cairn_test::write_row_files(dir, 20000, 4, 64);
    cairn::EntryMeta a;
    a.kind = cairn::ItemKind::array;
    a.dtype = cairn::DType::f32;
    a.global_shape = {3};
    const std::vector<float> av = {1.5f, 2.5f, 3.5f};
    a.chunks.push_back(cairn::ChunkMeta{cairn::Box{{0}, {3}}, cairn::StorageInfo{"__a.distcp", 0, 12, {}}});
    md.entries["a_first"] = a;
    std::ofstream(dir + "/__a.distcp", std::ios::binary).write(reinterpret_cast<const char*>(av.data()), 12);
    if (big) {
        cairn::EntryMeta z;
        z.kind = cairn::ItemKind::array;
        z.dtype = cairn::DType::f64;
        std::uint64_t x = 88172645463325252ull, offset = 0;
        std::int64_t row = 0;
        for (int c = 0; c < 600000; ++c) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const std::int64_t h = 1 + static_cast<std::int64_t>(x % 3);
            z.chunks.push_back(cairn::ChunkMeta{cairn::Box{{row, 0}, {h, 1}},
                                                cairn::StorageInfo{"__big.distcp", offset, 8 * std::uint64_t(h), {}}});
            row += h;
            offset += 8 * std::uint64_t(h);
        }
        z.global_shape = {row, 1};
        md.entries["z_big"] = std::move(z);
    }
    cairn::write_metadata_file(dir + "/metadata.h5", md, false);
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int rc = 0;
    try {
        if (argc != 2)
            throw std::runtime_error("usage: cairn_format_samples DIR");
        const std::string dir = argv[1];
        save_rows(
            dir + "/v1", 60, 7, [](std::int64_t i, std::int64_t j) { return 0.25 * double(7 * i + j) + 1; },
            std::uint64_t(1) << 20);
        if (g_rank == 0) {
            write_synthetic_checkpoint(dir + "/v2", false);
            write_synthetic_checkpoint(dir + "/v3_boxes", true);
        }
        save_rows(
            dir + "/v3", 2048, 1024, [](std::int64_t i, std::int64_t j) { return double((1024 * i + j) % 1000); }, 8);
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == 0)
            for (const char* v : {"v1", "v2", "v3", "v3_boxes"})
                std::printf("%s: format version %d\n", v, cairn::read_metadata(dir + "/" + v).format_version);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cairn_format_samples: rank %d: %s\n", g_rank, e.what());
        rc = 1;
    }
    if (rc)
        MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
    return rc;
}
