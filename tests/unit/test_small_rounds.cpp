// The rounds of a container's small-dataset aggregation
// (src/storage/container/container_h5.hpp, small_rounds): at most one group per
// rank in a round, at most the send limit from any rank past a round's first
// group, and as few rounds as those two bounds allow, at any scale.
#include "unit_common.hpp"

#include "storage/container/container_h5.hpp"

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

using cairn::detail::container::small_rounds;

namespace {

constexpr std::uint64_t MiB = std::uint64_t(1) << 20;

// Checks the bounds of `starts` for `most`, and that each round ends only
// where the next group would break one of them (greedy, so no fewer rounds
// are possible in order).
void check_rounds(const std::vector<std::size_t>& starts, const std::vector<std::uint64_t>& most, int ranks,
                  std::uint64_t limit)
{
    REQUIRE(!starts.empty());
    CHECK(starts.front() == 0);
    CHECK(starts.back() == most.size());
    for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
        const std::size_t a = starts[k], b = starts[k + 1];
        REQUIRE(a < b);
        CHECK(b - a <= static_cast<std::size_t>(ranks));
        const std::uint64_t sent = std::accumulate(most.begin() + a, most.begin() + b, std::uint64_t(0));
        CHECK((b - a == 1 || sent <= limit));
        if (b < most.size())
            CHECK((b - a == static_cast<std::size_t>(ranks) || sent + most[b] > limit));
    }
}

} // namespace

TEST_CASE("small_rounds: every rank holds a little of each group: one round at scale", "[small_rounds]")
{
    const int ranks = 16384;
    const std::vector<std::uint64_t> most(500, 2 * MiB / ranks + 1); // 1 GB of small datasets
    const auto starts = small_rounds(most, ranks, 8 * MiB);
    check_rounds(starts, most, ranks, 8 * MiB);
    CHECK(starts == std::vector<std::size_t>{0, 500});
}

TEST_CASE("small_rounds: one rank sends everything: four groups of 2 MiB a round", "[small_rounds]")
{
    const std::vector<std::uint64_t> most(10, 2 * MiB);
    const auto starts = small_rounds(most, 16384, 8 * MiB);
    check_rounds(starts, most, 16384, 8 * MiB);
    CHECK(starts == std::vector<std::size_t>{0, 4, 8, 10});
}

TEST_CASE("small_rounds: no more groups in a round than ranks", "[small_rounds]")
{
    const std::vector<std::uint64_t> most(5, 1 * MiB); // 2 ranks, each half of every group
    const auto starts = small_rounds(most, 2, 8 * MiB);
    check_rounds(starts, most, 2, 8 * MiB);
    CHECK(starts == std::vector<std::size_t>{0, 2, 4, 5});
    CHECK(small_rounds(most, 1, 8 * MiB) == std::vector<std::size_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("small_rounds: a group above the limit goes alone; nothing to send, no round", "[small_rounds]")
{
    const std::vector<std::uint64_t> most{9 * MiB, 1, 1, 0, 8 * MiB};
    const auto starts = small_rounds(most, 64, 8 * MiB);
    check_rounds(starts, most, 64, 8 * MiB);
    CHECK(starts == std::vector<std::size_t>{0, 1, 4, 5});
    CHECK(small_rounds({}, 4, 8 * MiB) == std::vector<std::size_t>{0});
}

TEST_CASE("small_rounds: random loads keep both bounds", "[small_rounds]")
{
    std::mt19937_64 rng(17);
    for (int trial = 0; trial < 200; ++trial) {
        const int ranks = 1 + static_cast<int>(rng() % 300);
        std::vector<std::uint64_t> most(1 + rng() % 400);
        for (auto& m : most)
            m = rng() % (3 * MiB);
        const std::uint64_t limit = 1 + rng() % (16 * MiB);
        check_rounds(small_rounds(most, ranks, limit), most, ranks, limit);
    }
}
