// Fuzz target: Cairn's metadata writer and reader on metadata of arbitrary
// content (decoded from the input with decode_metadata), through a real HDF5
// file: write_metadata_file then read_metadata_file. The files are valid
// HDF5, so this reaches the reader's own checks (counts, shapes, boxes,
// lengths, checksums) with hostile values, which raw file mutations
// (fuzz/metadata_h5.cpp) rarely get past HDF5 to. Every input must be
// refused with a cairn::Error or read back; what reads back must write and
// read again to the same metadata, and read as columns (what a load's
// coordinator encodes) encode to the same bytes.
#include "cairn/errors.hpp"
#include "cairn/storage.hpp"
#include "core/codec.hpp"
#include "format/metadata_h5.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {

using cairn::detail::Bytes;

const std::string& scratch()
{
    static const std::string path = [] {
        const char* dir = std::getenv("TMPDIR");
        return std::string(dir && *dir ? dir : "/tmp") + "/cairn-fuzz-metadata-file-" + std::to_string(::getpid()) +
               ".h5";
    }();
    return path;
}

// The frames a load's coordinator broadcasts (small ones), concatenated.
Bytes framed(const std::string& path)
{
    cairn::detail::MetadataFrames frames(cairn::detail::read_metadata_rows_file(path));
    Bytes all;
    for (Bytes b; !(b = frames.next(256)).empty();)
        all.insert(all.end(), b.begin(), b.end());
    return all;
}

struct RemoveAtExit {
    ~RemoveAtExit() { std::remove(scratch().c_str()); }
} g_remove_at_exit;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto* p = reinterpret_cast<const std::byte*>(data);
    cairn::Metadata md;
    try {
        md = cairn::detail::decode_metadata(Bytes(p, p + size));
    } catch (const cairn::error::FormatError&) {
        return -1;
    }
    try {
        cairn::write_metadata_file(scratch(), md, false);
    } catch (const cairn::Error&) {
        return 0;
    }
    Bytes once;
    try {
        once = cairn::detail::encode(cairn::read_metadata_file(scratch()));
    } catch (const cairn::Error& e) {
        // A load's coordinator, framing the rows entry by entry, refuses it too.
        try {
            framed(scratch());
        } catch (const cairn::Error&) {
            return 0;
        }
        std::fprintf(stderr, "metadata_file: refused when read whole (%s), not when framed\n", e.what());
        std::abort();
    }
    try {
        cairn::write_metadata_file(scratch(), cairn::detail::decode_metadata(once), false);
        const Bytes twice = cairn::detail::encode(cairn::read_metadata_file(scratch()));
        if (twice != once) {
            std::fprintf(stderr, "metadata_file: writing what was read changes it\n");
            std::abort();
        }
        if (cairn::detail::encode(cairn::detail::read_metadata_columns_file(scratch())) != twice) {
            std::fprintf(stderr, "metadata_file: the columns read encode to other bytes than the structs\n");
            std::abort();
        }
        if (framed(scratch()) != twice) {
            std::fprintf(stderr, "metadata_file: the frames of the rows read entry by entry differ\n");
            std::abort();
        }
    } catch (const cairn::Error& e) {
        std::fprintf(stderr, "metadata_file: metadata read back is refused when written again: %s\n", e.what());
        std::abort();
    }
    return 0;
}
