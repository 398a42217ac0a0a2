// The copy with non-temporal stores (src/core/stream_copy.hpp): every byte
// lands where memcpy would put it, whatever the alignment of either end and
// the length, and no byte outside the destination is written.
#include "unit_common.hpp"

#include "core/stream_copy.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

TEST_CASE("copy_streaming copies like memcpy at every alignment and length", "[stream_copy]")
{
    constexpr std::size_t guard = 64;
    std::vector<unsigned char> src(4096 + 2 * guard);
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = static_cast<unsigned char>(i * 131 + 7);
    const std::size_t dst_offsets[] = {0, 1, 8, 15, 16, 17, 63};
    const std::size_t src_offsets[] = {0, 3, 16, 33};
    const std::size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 200, 1000, 4096};
    for (const std::size_t dst_off : dst_offsets) {
        for (const std::size_t src_off : src_offsets) {
            for (const std::size_t n : lengths) {
                std::vector<unsigned char> dst(n + dst_off + 2 * guard, 0xEE);
                unsigned char* to = dst.data() + guard + dst_off;
                cairn::detail::copy_streaming(to, src.data() + src_off, n);
                std::size_t wrong = 0;
                for (std::size_t i = 0; i < dst.size(); ++i) {
                    const auto at = static_cast<std::ptrdiff_t>(i) - static_cast<std::ptrdiff_t>(guard + dst_off);
                    const bool inside = at >= 0 && static_cast<std::size_t>(at) < n;
                    const unsigned char want = inside ? src[src_off + static_cast<std::size_t>(at)] : 0xEE;
                    wrong += dst[i] != want;
                }
                INFO("dst offset " << dst_off << ", src offset " << src_off << ", " << n << " bytes");
                CHECK(wrong == 0);
            }
        }
    }
}
