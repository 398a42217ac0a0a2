// Fuzz target: Cairn's metadata reader (read_metadata_file, HDF5 underneath)
// on arbitrary file contents. Every input must read or throw a cairn::Error.
// The seeds are sealed metadata files (docs/FORMAT.md 2.4): a mutation must
// be refused by the integrity header before HDF5 parses anything, so HDF5's
// own crashes on damaged files (1.10.8: H5HG_read) must not be reachable.
// Inputs without the header (an HDF5 signature at byte 0: files written
// before it existed, which Cairn parses unchecked) are skipped: that path is
// unprotected by design.
#include "cairn/errors.hpp"
#include "cairn/storage.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace {

// One scratch file per process (several fuzzers may run side by side).
const std::string& scratch()
{
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/cairn-fuzz-metadata-" + std::to_string(::getpid()) + ".h5";
    }();
    return path;
}

struct RemoveAtExit {
    ~RemoveAtExit() { std::remove(scratch().c_str()); }
} g_remove_at_exit;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const std::uint8_t hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (size >= 8 && std::memcmp(data, hdf5_signature, 8) == 0)
        return 0; // a headerless (pre-header) file: parsed by HDF5 unchecked, see above
    {
        std::FILE* f = std::fopen(scratch().c_str(), "wb");
        if (!f)
            std::abort();
        if (size && std::fwrite(data, 1, size, f) != size)
            std::abort();
        std::fclose(f);
    }
    try {
        const cairn::Metadata md = cairn::read_metadata_file(scratch());
        (void)md;
    } catch (const cairn::Error&) {
    }
    return 0;
}
