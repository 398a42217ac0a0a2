// Fuzz target: Cairn's metadata reader (read_metadata_file, HDF5 underneath)
// on arbitrary file contents. Every input must read or throw a cairn::Error.
// A crash inside HDF5 itself is a finding about HDF5 (report it upstream);
// one in Cairn's code is ours.
#include "cairn/errors.hpp"
#include "cairn/storage.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
