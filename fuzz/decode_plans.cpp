// Fuzz target: the binary decoders of src/core/codec.hpp (save plans, load
// plans, write results, metadata) on arbitrary bytes. Every input must either
// decode or throw error::FormatError -- nothing else, no crash, no sanitizer
// report, no allocation beyond what the input can describe. What decodes must
// re-encode to a fixed point: encode(decode(encode(decode(x)))) == encode(decode(x)).
//
// Built as a libFuzzer target with CAIRN_BUILD_FUZZERS=ON (clang), and always
// as a replay program (fuzz/replay_main.cpp) run by CTest.
#include "cairn/errors.hpp"
#include "core/codec.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using cairn::detail::Bytes;

template <class Decode>
void round_trip(const Bytes& in, Decode decode, const char* what)
{
    Bytes once;
    try {
        once = cairn::detail::encode(decode(in));
    } catch (const cairn::error::FormatError&) {
        return; // refused: fine
    }
    // What decoded once must decode again, to the same encoding.
    try {
        const Bytes twice = cairn::detail::encode(decode(once));
        if (twice != once) {
            std::fprintf(stderr, "%s: re-encoding is not a fixed point\n", what);
            std::abort();
        }
    } catch (const cairn::error::FormatError& e) {
        std::fprintf(stderr, "%s: the re-encoding of a decoded value does not decode: %s\n", what, e.what());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto* p = reinterpret_cast<const std::byte*>(data);
    const Bytes in(p, p + size);
    round_trip(in, cairn::detail::decode_save_plan, "save plan");
    round_trip(in, cairn::detail::decode_load_plan, "load plan");
    round_trip(in, cairn::detail::decode_write_results, "write results");
    round_trip(in, cairn::detail::decode_metadata, "metadata");
    return 0;
}
