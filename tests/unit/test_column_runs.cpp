// The run form of metadata.h5's per-chunk columns (src/format/column_runs.hpp).
#include "unit_common.hpp"

#include "cairn/errors.hpp"
#include "format/column_runs.hpp"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace cairn;
using namespace cairn::detail;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using cairn_test::message_of;

namespace {

template <class T>
std::vector<T> round_trip(const std::vector<T>& values, const std::vector<RowBlock>& blocks, std::size_t* nruns = nullptr)
{
    std::vector<std::int64_t> runs;
    REQUIRE(encode_runs(values, blocks, SIZE_MAX, runs));
    REQUIRE(runs.size() % 3 == 0);
    if (nruns)
        *nruns = runs.size() / 3;
    return decode_runs<T>(runs, blocks, "test column");
}

std::string decode_error(const std::vector<std::int64_t>& runs, const std::vector<RowBlock>& blocks)
{
    return message_of<error::FormatError>([&] { decode_runs<std::uint64_t>(runs, blocks, "test column"); });
}

} // namespace

TEST_CASE("column runs: a row decomposition takes one run per lane", "[runs]")
{
    // 16,384 chunks of a 2-d array split by rows: offsets (32 r, 0), extents (32, 1024).
    const std::size_t k = 16384;
    std::vector<std::int64_t> boxes;
    for (std::size_t r = 0; r < k; ++r)
        boxes.insert(boxes.end(), {static_cast<std::int64_t>(32 * r), 0, 32, 1024});
    std::size_t nruns = 0;
    CHECK(round_trip(boxes, {{k, 4}}, &nruns) == boxes);
    CHECK(nruns == 4);
    // Chunk r in file r, all at offset 0: one run each.
    std::vector<std::int64_t> files(k);
    for (std::size_t r = 0; r < k; ++r)
        files[r] = static_cast<std::int64_t>(r);
    CHECK(round_trip(files, {{k, 1}}, &nruns) == files);
    CHECK(nruns == 1);
    CHECK(round_trip(std::vector<std::uint64_t>(k, 0), {{k, 1}}, &nruns) == std::vector<std::uint64_t>(k, 0));
    CHECK(nruns == 1);
}

TEST_CASE("column runs: any column round-trips, blocks of any width and length", "[runs]")
{
    std::mt19937_64 rng(20261124);
    for (int trial = 0; trial < 300; ++trial) {
        std::vector<RowBlock> blocks(rng() % 6);
        std::vector<std::uint64_t> values;
        for (auto& b : blocks) {
            b.rows = rng() % 40;
            b.width = static_cast<std::uint32_t>(rng() % 7); // 0: a 0-d array, a scalar
            for (std::uint64_t i = 0; i < b.rows * b.width; ++i) {
                // Arithmetic stretches, repeats, random values, the extremes.
                const auto pick = rng() % 5;
                const std::uint64_t prev = values.empty() ? 0 : values.back();
                values.push_back(pick == 0   ? rng() % 1000
                                 : pick == 1 ? prev
                                 : pick == 2 ? prev % 1000000 + 7
                                 : pick == 3 ? static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                                             : 0);
            }
        }
        INFO("trial " << trial);
        CHECK(round_trip(values, blocks) == values);
        std::vector<std::int64_t> signed_values;
        for (std::size_t i = 0; i < values.size(); ++i) { // steps of either sign
            const auto v = static_cast<std::int64_t>(values[i] % (std::uint64_t(1) << 40));
            signed_values.push_back(i % 3 ? v : -v);
        }
        CHECK(round_trip(signed_values, blocks) == signed_values);
    }
}

TEST_CASE("column runs: the encoder gives up where runs do not pay or cannot hold the values", "[runs]")
{
    std::vector<std::int64_t> runs;
    // 1, 2, 4, 8, ...: a run every two values.
    std::vector<std::int64_t> powers;
    for (int i = 0; i < 40; ++i)
        powers.push_back(std::int64_t(1) << i);
    CHECK_FALSE(encode_runs(powers, {{40, 1}}, 10, runs));
    runs.clear();
    CHECK(encode_runs(powers, {{40, 1}}, 20, runs));
    CHECK(runs.size() == 60);
    runs.clear();
    // An unsigned value beyond int64.
    CHECK_FALSE(encode_runs(std::vector<std::uint64_t>{1, std::uint64_t(1) << 63}, {{2, 1}}, 10, runs));
    runs.clear();
    // A step beyond int64.
    const auto lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
    CHECK_FALSE(encode_runs(std::vector<std::int64_t>{lo, hi}, {{2, 1}}, 10, runs));
    runs.clear();
    // Blocks that do not cover the values.
    CHECK_FALSE(encode_runs(std::vector<std::int64_t>{1, 2, 3}, {{1, 2}}, 10, runs));
    runs.clear();
    CHECK_FALSE(encode_runs(std::vector<std::int64_t>{1, 2, 3}, {{2, 2}}, 10, runs));
}

TEST_CASE("column runs: malformed runs are a FormatError naming the column", "[runs]")
{
    const std::vector<RowBlock> two_lanes{{3, 2}}; // 3 rows of 2: lanes of 3 values
    CHECK(decode_runs<std::uint64_t>({0, 1, 3, 5, 0, 3}, two_lanes, "c") ==
          std::vector<std::uint64_t>{0, 5, 1, 5, 2, 5});
    CHECK_THAT(decode_error({0, 1, 3, 5, 0}, two_lanes), StartsWith("OK:") && Contains("test column") &&
                                                             Contains("triples"));
    CHECK_THAT(decode_error({0, 1, 3}, two_lanes), StartsWith("OK:") && Contains("end inside entry 0"));
    CHECK_THAT(decode_error({0, 1, 3, 5, 0, 3, 1, 1, 1}, two_lanes), StartsWith("OK:") && Contains("beyond"));
    CHECK_THAT(decode_error({0, 1, 4, 5, 0, 2}, two_lanes), StartsWith("OK:") && Contains("count 4"));
    CHECK_THAT(decode_error({0, 1, 0, 0, 1, 3, 5, 0, 3}, two_lanes), StartsWith("OK:") && Contains("count 0"));
    CHECK_THAT(decode_error({0, 1, -2, 0, 1, 3, 5, 0, 3}, two_lanes), StartsWith("OK:") && Contains("count -2"));
    CHECK_THAT(decode_error({std::numeric_limits<std::int64_t>::max(), 1, 3, 5, 0, 3}, two_lanes),
               StartsWith("OK:") && Contains("overflows"));
    CHECK_THAT(decode_error({1, -1, 3, 5, 0, 3}, two_lanes), StartsWith("OK:") && Contains("negative"));
    // Signed columns take negative values.
    CHECK(decode_runs<std::int64_t>({2, -2, 3, 5, 0, 3}, two_lanes, "c") ==
          std::vector<std::int64_t>{2, 5, 0, 5, -2, 5});
    // A claimed size beyond any real checkpoint is refused before allocating.
    CHECK_THAT(decode_error({0, 0, std::int64_t(1) << 40}, {{std::uint64_t(1) << 40, 1}}),
               StartsWith("OK:") && Contains("more than"));
}
