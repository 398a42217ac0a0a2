// A checkpoint as a save on many ranks of an array split by rows leaves it,
// written by one process: for tests of the metadata's run form (FORMAT.md
// 2.5) without that many processes.
#pragma once

#include <cairn/cairn.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cairn_test {

/// Writes into `dir` the data files of a `rows`-rank save of array "u",
/// rows x cols f64 split by rows: row k is chunk k, in file
/// "__<k % nfiles>_0.distcp" at offset (k / nfiles) * cols * 8, holding
/// 10 k + column. Returns its metadata (entry "u", no checksums), to which a
/// caller may add entries before write_metadata_file.
inline cairn::Metadata write_row_files(const std::string& dir, std::int64_t rows, std::int64_t cols,
                                       std::int64_t nfiles)
{
    std::filesystem::create_directories(dir);
    cairn::Metadata md;
    md.world_size = static_cast<int>(rows);
    md.layout = "distcp";
    md.library_version = cairn::version();
    cairn::EntryMeta e;
    e.kind = cairn::ItemKind::array;
    e.dtype = cairn::DType::f64;
    e.global_shape = {rows, cols};
    std::vector<std::vector<double>> files(static_cast<std::size_t>(nfiles));
    for (std::int64_t k = 0; k < rows; ++k) {
        auto& f = files[static_cast<std::size_t>(k % nfiles)];
        const auto offset = static_cast<std::uint64_t>(f.size() * sizeof(double));
        for (std::int64_t c = 0; c < cols; ++c)
            f.push_back(static_cast<double>(10 * k + c));
        e.chunks.push_back(cairn::ChunkMeta{cairn::Box{{k, 0}, {1, cols}},
                                            cairn::StorageInfo{"__" + std::to_string(k % nfiles) + "_0.distcp",
                                                               offset, cols * sizeof(double), {}}});
    }
    md.entries["u"] = e;
    for (std::int64_t k = 0; k < nfiles; ++k) {
        std::ofstream f(dir + "/__" + std::to_string(k) + "_0.distcp", std::ios::binary);
        const auto& v = files[static_cast<std::size_t>(k)];
        f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
    }
    return md;
}

} // namespace cairn_test
