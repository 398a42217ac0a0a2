// Test helpers that damage stored bytes on purpose: where a stored chunk's
// first byte lies (per-rank data file or container), and a bit flip there.
// Header-only; the including test links HDF5. Plain results, no test
// framework: the caller checks them.
#pragma once

#include <cairn/cairn.hpp>

#include <hdf5.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

namespace cairn_test {

/// XORs the byte at `pos` of `file` with `mask`; false when the file cannot
/// be opened, read or written there.
inline bool flip_bits(const std::string& file, std::streamoff pos, char mask)
{
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    if (!f.seekg(pos).read(&c, 1))
        return false;
    c = static_cast<char>(c ^ mask);
    return static_cast<bool>(f.seekp(pos).write(&c, 1).flush());
}

/// The file holding the first byte of stored chunk `chunk` of `entry` in
/// checkpoint `id`, and that byte's position: a per-rank data file at the
/// chunk's offset, or the container at its (contiguous) dataset's address
/// plus the row-major index of the box's first element times the element
/// size. Position -1 when the container's dataset cannot be found.
inline std::pair<std::string, std::streamoff> chunk_start(const std::string& id, const cairn::EntryMeta& entry,
                                                          const cairn::ChunkMeta& chunk, bool container)
{
    if (!container)
        return {id + "/" + chunk.storage.path, static_cast<std::streamoff>(chunk.storage.offset)};
    haddr_t base = HADDR_UNDEF;
    const hid_t f = H5Fopen(id.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f >= 0) {
        const hid_t d = H5Dopen2(f, chunk.storage.path.c_str(), H5P_DEFAULT);
        if (d >= 0) {
            base = H5Dget_offset(d);
            H5Dclose(d);
        }
        H5Fclose(f);
    }
    if (base == HADDR_UNDEF)
        return {id, -1};
    std::int64_t lin = 0;
    for (std::size_t d = 0; d < entry.global_shape.size(); ++d)
        lin = lin * entry.global_shape[d] + chunk.box.offsets[d];
    return {id, static_cast<std::streamoff>(base + static_cast<haddr_t>(lin) * cairn::dtype_size(entry.dtype))};
}

} // namespace cairn_test
