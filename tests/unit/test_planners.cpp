// The default planners on their own, with the ranks simulated in one process:
// the save planner's deduplication of replicated data (bytes balanced over
// the holders) and its validation of the global state; the load planner's
// resharding (read items = the rank's box intersected with the stored
// chunks, into strided destinations) and its errors.
#include "unit_common.hpp"

#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "cairn/state_dict.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace cairn;
using cairn_test::message_of;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// The local plans of `states` (one per rank), then the coordinator's global plan.
std::pair<std::vector<SavePlan>, Metadata> global_plan(std::vector<StateDict>& states)
{
    std::vector<SavePlan> plans;
    for (std::size_t r = 0; r < states.size(); ++r) {
        DefaultSavePlanner p;
        p.set_up_planner(states[r], r == 0);
        plans.push_back(p.create_local_plan());
    }
    DefaultSavePlanner coordinator;
    coordinator.set_up_planner(states[0], true);
    return coordinator.create_global_plan(std::move(plans));
}

std::uint64_t bytes_of(const SavePlan& p)
{
    std::uint64_t n = 0;
    for (const auto& it : p.items)
        n += it.nbytes;
    return n;
}

// Which ranks write entry `fqn`.
std::vector<int> writers_of(const std::vector<SavePlan>& plans, const std::string& fqn)
{
    std::vector<int> out;
    for (std::size_t r = 0; r < plans.size(); ++r)
        for (const auto& it : plans[r].items)
            if (it.fqn == fqn)
                out.push_back(static_cast<int>(r));
    return out;
}

WriteItem array_item(const std::string& fqn, DType t, Shape global, Box box)
{
    WriteItem it;
    it.fqn = fqn;
    it.kind = ItemKind::array;
    it.dtype = t;
    it.global_shape = std::move(global);
    it.box = std::move(box);
    it.nbytes = static_cast<std::uint64_t>(it.box.volume()) * dtype_size(t);
    return it;
}

// The global plan of one array item per rank; the error message ("OK: ..."
// for an exception of type E).
template <class E>
std::string plan_error(const std::vector<WriteItem>& per_rank)
{
    std::vector<SavePlan> plans(per_rank.size());
    for (std::size_t r = 0; r < per_rank.size(); ++r)
        plans[r].items.push_back(per_rank[r]);
    return message_of<E>([&] { DefaultSavePlanner().create_global_plan(plans); });
}

} // namespace

TEST_CASE("save planner: replicated arrays and blobs are written once, bytes balanced over their holders", "[planners]")
{
    SECTION("equal replicas on 4 ranks: two each")
    {
        const int nranks = 4;
        std::vector<std::vector<double>> data(8, std::vector<double>(16, 1.0));
        std::vector<StateDict> states(nranks);
        for (auto& sd : states)
            for (std::size_t i = 0; i < data.size(); ++i)
                sd.add_replicated("rep" + std::to_string(i), data[i].data(), {16});
        const auto [plans, md] = global_plan(states);
        for (std::size_t i = 0; i < data.size(); ++i) {
            CHECK(writers_of(plans, "rep" + std::to_string(i)).size() == 1);
            const auto& e = md.entries.at("rep" + std::to_string(i));
            REQUIRE(e.chunks.size() == 1);
            CHECK(e.chunks[0].box == whole({16}));
        }
        for (const auto& p : plans)
            CHECK(bytes_of(p) == 2 * 16 * 8);
    }
    SECTION("replicas go to the holders with the fewest bytes of their own shards")
    {
        // "u": rank 0 holds 600 doubles, rank 1 200, rank 2 none (an empty
        // box); six replicated 100-double arrays and a 400-byte blob held by all.
        std::vector<double> u0(600), u1(200), rep(100);
        std::vector<std::byte> blob(400, std::byte{3});
        std::vector<StateDict> states(3);
        states[0].add_array<double>("u", u0.data(), {800}, Box{{0}, {600}});
        states[1].add_array<double>("u", u1.data(), {800}, Box{{600}, {200}});
        states[2].add_array<double>("u", nullptr, {800}, Box{{800}, {0}});
        for (auto& sd : states) {
            for (int i = 0; i < 6; ++i)
                sd.add_replicated("rep" + std::to_string(i), rep.data(), {100});
            sd.add_bytes("blob", &blob);
        }
        const auto [plans, md] = global_plan(states);
        // Greedy, largest first: the 800-byte replicas go to rank 2 (0 bytes),
        // then alternate between ranks 2 and 1 (1600 bytes) as their totals
        // meet; rank 0 (4800 bytes) gets none; the blob goes last.
        CHECK(writers_of(plans, "u") == std::vector<int>{0, 1});
        CHECK(md.entries.at("u").chunks.size() == 2); // the empty box is no chunk
        for (int i = 0; i < 6; ++i)
            CHECK(writers_of(plans, "rep" + std::to_string(i)).size() == 1);
        CHECK(writers_of(plans, "blob").size() == 1);
        CHECK(bytes_of(plans[0]) == 600 * 8);
        CHECK(bytes_of(plans[1]) + bytes_of(plans[2]) == 200 * 8 + 6 * 800 + 400);
        const auto diff = std::max(bytes_of(plans[1]), bytes_of(plans[2])) -
                          std::min(bytes_of(plans[1]), bytes_of(plans[2]));
        CHECK(diff <= 800); // at most one replica apart
        CHECK(bytes_of(plans[2]) >= 4 * 800);
    }
    SECTION("a replica held by some ranks only goes to one of them")
    {
        // Rows of "t" replicated pairwise: ranks {0,1} hold rows [0,2), ranks {2,3} rows [2,4).
        std::vector<float> t(2 * 5, 1.0f);
        std::vector<StateDict> states(4);
        for (int r = 0; r < 4; ++r)
            states[static_cast<std::size_t>(r)].add_array<float>("t", t.data(), {4, 5}, Box{{r / 2 * 2, 0}, {2, 5}});
        const auto [plans, md] = global_plan(states);
        CHECK(md.entries.at("t").chunks.size() == 2);
        const auto w = writers_of(plans, "t");
        REQUIRE(w.size() == 2);
        CHECK(w[0] / 2 == 0); // one of ranks 0, 1
        CHECK(w[1] / 2 == 1); // one of ranks 2, 3
    }
}

TEST_CASE("save planner: the global plan validates the whole state", "[planners]")
{
    const DType f64 = DType::f64;
    SECTION("a consistent state passes")
    {
        CHECK(plan_error<Error>({array_item("u", f64, {8}, Box{{0}, {4}}), array_item("u", f64, {8}, Box{{4}, {4}})}) ==
              "NO EXCEPTION");
    }
    SECTION("a box outside the global shape")
    {
        CHECK_THAT(plan_error<error::WrongAPIUsage>(
                       {array_item("u", f64, {8}, Box{{0}, {4}}), array_item("u", f64, {8}, Box{{6}, {4}})}),
                   StartsWith("OK:") && Contains("array 'u': box") && Contains("of rank 1 lies outside the global shape [8]"));
    }
    SECTION("overlapping boxes")
    {
        CHECK_THAT(plan_error<error::WrongAPIUsage>(
                       {array_item("u", f64, {8}, Box{{0}, {5}}), array_item("u", f64, {8}, Box{{4}, {4}})}),
                   StartsWith("OK:") && Contains("array 'u'") && Contains("overlaps"));
    }
    SECTION("boxes that do not cover the array")
    {
        CHECK_THAT(plan_error<error::WrongAPIUsage>(
                       {array_item("u", f64, {4, 4}, Box{{0, 0}, {2, 4}}), array_item("u", f64, {4, 4}, Box{{2, 0}, {1, 4}})}),
                   StartsWith("OK:") && Contains("array 'u': the ranks' boxes cover 12 of 16 elements"));
    }
    SECTION("dtypes that differ across ranks")
    {
        CHECK_THAT(plan_error<error::Mismatch>(
                       {array_item("u", f64, {8}, Box{{0}, {4}}), array_item("u", DType::f32, {8}, Box{{4}, {4}})}),
                   StartsWith("OK:") && Contains("array 'u': dtype f64 on rank 0 vs. f32 on rank 1"));
    }
    SECTION("global shapes that differ across ranks")
    {
        CHECK_THAT(plan_error<error::Mismatch>(
                       {array_item("u", f64, {8}, Box{{0}, {4}}), array_item("u", f64, {9}, Box{{4}, {4}})}),
                   StartsWith("OK:") && Contains("array 'u': global shape [8] on rank 0 vs. [9] on rank 1"));
    }
    SECTION("a box of the wrong rank")
    {
        CHECK_THAT(plan_error<error::WrongAPIUsage>(
                       {array_item("u", f64, {8}, Box{{0}, {4}}), array_item("u", f64, {8}, Box{{4, 0}, {4, 1}})}),
                   StartsWith("OK:") && Contains("array 'u'") && Contains("rank 1"));
    }
}

namespace {

// Metadata of a 6 x 4 f64 array "u" stored as three row blocks, a blob, a scalar.
Metadata three_row_blocks()
{
    Metadata md;
    md.world_size = 3;
    EntryMeta u;
    u.kind = ItemKind::array;
    u.dtype = DType::f64;
    u.global_shape = {6, 4};
    for (std::int64_t b = 0; b < 3; ++b)
        u.chunks.push_back(ChunkMeta{Box{{2 * b, 0}, {2, 4}}, StorageInfo{"__" + std::to_string(b) + "_0.distcp", 0, 64, {}}});
    md.entries["u"] = u;
    EntryMeta blob;
    blob.kind = ItemKind::bytes;
    blob.global_shape = {3};
    blob.chunks.push_back(ChunkMeta{Box{{0}, {3}}, StorageInfo{"__0_0.distcp", 64, 3, {}}});
    md.entries["blob"] = blob;
    EntryMeta step;
    step.kind = ItemKind::scalar;
    step.dtype = DType::i64;
    const std::int64_t v = 42;
    step.value.assign(reinterpret_cast<const char*>(&v), 8);
    md.entries["step"] = step;
    return md;
}

} // namespace

TEST_CASE("load planner: a rank's box intersected with the stored chunks, into a strided window", "[planners]")
{
    const Metadata md = three_row_blocks();
    // Rows [1, 5), columns [1, 3) of u, in a 6 x 4 local buffer with one ghost layer.
    std::vector<double> local(6 * 4, -1.0);
    std::vector<std::byte> blob;
    std::int64_t step = 0;
    StateDict sd;
    sd.add_array<double>("u", &local[1 * 4 + 1], {6, 4}, Box{{1, 1}, {4, 2}}, {4, 1});
    sd.add_bytes("blob", &blob);
    sd.add_scalar("step", &step);

    DefaultLoadPlanner p;
    p.set_up_planner(sd, md, false);
    const LoadPlan plan = p.create_local_plan();
    std::map<std::uint32_t, Box> items;
    for (const auto& it : plan.items)
        if (it.fqn == "u")
            items[it.chunk] = it.box;
    REQUIRE(items.size() == 3);
    CHECK(items.at(0) == Box{{1, 1}, {1, 2}});
    CHECK(items.at(1) == Box{{2, 1}, {2, 2}});
    CHECK(items.at(2) == Box{{4, 1}, {1, 2}});
    // Each destination is the window of its region in the local buffer.
    for (const auto& it : plan.items) {
        if (it.fqn != "u")
            continue;
        const DataRef d = p.resolve_destination(it);
        const auto row = it.box.offsets[0] - 1, col = it.box.offsets[1] - 1;
        CHECK(d.view.data == &local[static_cast<std::size_t>((1 + row) * 4 + 1 + col)]);
        CHECK(d.view.shape == it.box.shape);
        CHECK(d.view.strides == Shape{4, 1});
    }
    CHECK(std::count_if(plan.items.begin(), plan.items.end(), [](const ReadItem& it) { return it.fqn == "blob"; }) == 1);
    p.finish();
    CHECK(step == 42);
}

TEST_CASE("load planner: missing names, dtype and shape mismatches name the entry and both values", "[planners]")
{
    const Metadata md = three_row_blocks();
    std::vector<double> u(24);
    std::vector<float> f(24);
    std::vector<std::byte> blob;
    std::int64_t step = 0;
    auto plan_with = [&](StateDict& sd, bool partial = false) {
        DefaultLoadPlanner p(partial);
        p.set_up_planner(sd, md, false);
        p.create_local_plan();
        return std::make_pair(p.missing(), p.skipped());
    };
    SECTION("a name the checkpoint lacks")
    {
        StateDict sd;
        sd.add_array<double>("v", u.data(), {6, 4}, whole({6, 4}));
        sd.add_bytes("blob", &blob).add_scalar("step", &step);
        CHECK_THAT(message_of<error::NotFound>([&] { plan_with(sd); }),
                   StartsWith("OK:") && Contains("'v' is not in the checkpoint"));
    }
    SECTION("an entry of the checkpoint the state lacks")
    {
        StateDict sd;
        sd.add_array<double>("u", u.data(), {6, 4}, whole({6, 4}));
        sd.add_scalar("step", &step);
        CHECK_THAT(message_of<error::NotFound>([&] { plan_with(sd); }),
                   StartsWith("OK:") && Contains("checkpoint entry 'blob' (bytes) is not in the state dict"));
    }
    SECTION("a dtype mismatch")
    {
        StateDict sd;
        sd.add_array<float>("u", f.data(), {6, 4}, whole({6, 4}));
        sd.add_bytes("blob", &blob).add_scalar("step", &step);
        CHECK_THAT(message_of<error::Mismatch>([&] { plan_with(sd); }),
                   StartsWith("OK:") && Contains("array 'u': dtype f32 in the state vs. f64 in the checkpoint"));
    }
    SECTION("a global shape mismatch")
    {
        StateDict sd;
        sd.add_array<double>("u", u.data(), {4, 6}, whole({4, 6}));
        sd.add_bytes("blob", &blob).add_scalar("step", &step);
        CHECK_THAT(message_of<error::Mismatch>([&] { plan_with(sd); }),
                   StartsWith("OK:") && Contains("array 'u': global shape [4, 6] in the state vs. [6, 4] in the checkpoint"));
    }
    SECTION("partial: both sides' extra keys are reported, not thrown")
    {
        double extra = 0;
        StateDict sd;
        sd.add_array<double>("u", u.data(), {6, 4}, whole({6, 4}));
        sd.add_scalar("extra", &extra);
        const auto [missing, skipped] = plan_with(sd, true);
        CHECK(missing == std::vector<std::string>{"extra"});
        CHECK(skipped == std::vector<std::string>{"blob", "step"});
    }
}

TEST_CASE("save planner: several boxes of one array per rank are one chunk each, written by their holder", "[planners][boxes]")
{
    // Rank 0 holds rows [0, 2) and [4, 6) of a 6 x 4 array, rank 1 rows [2, 4).
    std::vector<double> a(8), b(8), c(8);
    std::vector<StateDict> states(2);
    states[0].add_array<double>("u", a.data(), {6, 4}, Box{{0, 0}, {2, 4}});
    states[0].add_array<double>("u", b.data(), {6, 4}, Box{{4, 0}, {2, 4}});
    states[1].add_array<double>("u", c.data(), {6, 4}, Box{{2, 0}, {2, 4}});
    auto [plans, md] = global_plan(states);
    REQUIRE(md.entries.at("u").chunks.size() == 3);
    REQUIRE(plans[0].items.size() == 2);
    REQUIRE(plans[1].items.size() == 1);
    // Each item resolves to the buffer of its own box.
    DefaultSavePlanner p;
    p.set_up_planner(states[0], true);
    for (const auto& it : plans[0].items)
        CHECK(p.resolve_data(it).view.data == (it.box.offsets[0] == 0 ? a.data() : b.data()));

    // Overlapping boxes of one rank, and one box twice, name the array and both boxes.
    std::vector<StateDict> bad(2);
    bad[0].add_array<double>("u", a.data(), {6, 4}, Box{{0, 0}, {3, 4}});
    bad[0].add_array<double>("u", b.data(), {6, 4}, Box{{2, 0}, {4, 4}});
    bad[1].add_array<double>("u", c.data(), {6, 4}, Box{{0, 0}, {0, 0}});
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { global_plan(bad); }),
               StartsWith("OK:") && Contains("'u'") && Contains("[0:3, 0:4]") && Contains("[2:6, 0:4]"));
    std::vector<StateDict> twice(1);
    twice[0].add_array<double>("u", a.data(), {6, 4}, Box{{0, 0}, {6, 4}});
    twice[0].add_array<double>("u", b.data(), {6, 4}, Box{{0, 0}, {6, 4}});
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { global_plan(twice); }),
               StartsWith("OK:") && Contains("'u'") && Contains("twice"));
}

TEST_CASE("load planner: overlapping boxes of one rank are each filled from the chunks they need", "[planners][boxes]")
{
    const Metadata md = three_row_blocks();
    std::vector<double> top(3 * 4, -1.0), all(6 * 4, -1.0);
    std::vector<std::byte> blob;
    std::int64_t step = 0;
    StateDict sd;
    sd.add_array<double>("u", top.data(), {6, 4}, Box{{0, 0}, {3, 4}});
    sd.add_array<double>("u", all.data(), {6, 4}, Box{{0, 0}, {6, 4}});
    sd.add_bytes("blob", &blob);
    sd.add_scalar("step", &step);
    DefaultLoadPlanner p;
    p.set_up_planner(sd, md, false);
    // The chunk filter gets the box that holds both.
    REQUIRE(p.requested_box("u") != nullptr);
    CHECK(*p.requested_box("u") == Box{{0, 0}, {6, 4}});
    const LoadPlan plan = p.create_local_plan();
    std::int64_t into_top = 0, into_all = 0;
    for (const auto& it : plan.items) {
        if (it.fqn != "u")
            continue;
        const DataRef d = p.resolve_destination(it);
        const bool is_top = it.shard == 0;
        const double* base = is_top ? top.data() : all.data();
        CHECK(d.view.data == base + it.box.offsets[0] * 4 + it.box.offsets[1]);
        (is_top ? into_top : into_all) += it.box.volume();
    }
    CHECK(into_top == 12);
    CHECK(into_all == 24);
    ReadItem beyond{"u", ItemKind::array, 0, Box{{0, 0}, {1, 4}}, 2};
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { p.resolve_destination(beyond); }),
               StartsWith("OK:") && Contains("'u'") && Contains("2 boxes"));
}

TEST_CASE("load planner: many boxes against many chunks read every chunk each box meets", "[planners][boxes]")
{
    // 20 chunks of two rows each of a 40 x 4 array; boxes that start and
    // end inside chunks, one row wide, and the whole array.
    Metadata md;
    md.world_size = 20;
    EntryMeta u;
    u.kind = ItemKind::array;
    u.dtype = DType::f64;
    u.global_shape = {40, 4};
    for (std::int64_t b = 19; b >= 0; --b) // stored out of row order
        u.chunks.push_back(ChunkMeta{Box{{2 * b, 0}, {2, 4}}, StorageInfo{"__0_0.distcp", 0, 64, {}}});
    md.entries["u"] = u;
    const std::vector<Box> boxes = {Box{{3, 1}, {4, 2}}, Box{{1, 0}, {1, 4}}, Box{{39, 0}, {1, 4}},
                                    Box{{0, 0}, {40, 4}}, Box{{10, 0}, {0, 4}}, Box{{17, 3}, {20, 1}}};
    std::vector<std::vector<double>> bufs;
    StateDict sd;
    for (const auto& b : boxes) {
        bufs.emplace_back(static_cast<std::size_t>(std::max<std::int64_t>(b.volume(), 1)));
        sd.add_array<double>("u", bufs.back().data(), {40, 4}, b);
    }
    DefaultLoadPlanner p;
    p.set_up_planner(sd, md, false);
    const LoadPlan plan = p.create_local_plan(); // throws where a box is not covered
    std::vector<std::int64_t> read(boxes.size(), 0);
    for (const auto& it : plan.items) {
        REQUIRE(it.shard < boxes.size());
        CHECK(p.resolve_destination(it).view.shape == it.box.shape);
        read[it.shard] += it.box.volume();
    }
    for (std::size_t k = 0; k < boxes.size(); ++k)
        CHECK(read[k] == boxes[k].volume());
    // Box [3, 7) meets the chunks of rows [2, 4), [4, 6) and [6, 8).
    CHECK(std::count_if(plan.items.begin(), plan.items.end(), [](const ReadItem& it) { return it.shard == 0; }) == 3);
}
