// DefaultSavePlanner::create_global_plan (the fast path) against the
// reference global plan (src/plan/global_plan.hpp) on random valid and
// invalid plans: same final plans and metadata, or the same error.
#include "plan_compare.hpp"
#include "unit_common.hpp"

#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "plan/global_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

using namespace cairn;
using cairn_test::check_same;

namespace {

struct Outcome {
    std::vector<SavePlan> plans;
    Metadata md;
    std::string error; // "<type>: <message>", empty on success
};

template <class F>
Outcome run(F&& f)
{
    Outcome o;
    try {
        std::tie(o.plans, o.md) = f();
    } catch (const std::exception& e) {
        o.error = std::string(typeid(e).name()) + ": " + e.what();
    }
    return o;
}

// Random plans of `nranks` ranks: arrays cut into row or grid blocks (some
// replicated, some ranks holding nothing), bytes, scalars and strings; then,
// sometimes, one defect.
std::vector<SavePlan> random_plans(std::mt19937_64& rng, std::size_t nranks)
{
    const std::size_t nentries = 1 + rng() % 6;
    std::vector<std::vector<WriteItem>> per_entry(nentries); // [entry][rank]
    for (std::size_t e = 0; e < nentries; ++e) {
        WriteItem proto;
        proto.fqn = "e" + std::to_string(rng() % 3) + "." + std::to_string(e);
        const auto kind = rng() % 6;
        proto.kind = kind < 3 ? ItemKind::array : static_cast<ItemKind>(kind - 2);
        proto.dtype = kind == 1 ? DType::f32 : DType::f64;
        const auto layout = rng() % 5; // arrays: rows, columns, replicated, 0-d, rows in reverse rank order
        for (std::size_t r = 0; r < nranks; ++r) {
            WriteItem it = proto;
            switch (it.kind) {
            case ItemKind::array: {
                if (layout == 3) {
                    it.global_shape = {};
                    it.box = Box{};
                } else if (layout == 2) {
                    it.global_shape = {4, 3};
                    it.box = whole(it.global_shape);
                } else {
                    const auto n = static_cast<std::int64_t>(nranks);
                    const auto i = static_cast<std::int64_t>(layout == 4 ? nranks - 1 - r : r);
                    if (layout == 0 || layout == 4) {
                        it.global_shape = {2 * n, 3};
                        it.box = Box{{2 * i, 0}, {2, 3}};
                    } else {
                        it.global_shape = {3, 2 * n};
                        it.box = Box{{0, 2 * i}, {3, 2}};
                    }
                }
                it.nbytes = static_cast<std::uint64_t>(it.box.volume()) * dtype_size(it.dtype);
                break;
            }
            case ItemKind::bytes:
                it.global_shape = {5};
                it.box = whole(it.global_shape);
                it.nbytes = 5;
                it.digest = 77;
                break;
            case ItemKind::scalar: it.value = std::string(8, '\1'); break;
            case ItemKind::string: it.value = "hello"; break;
            }
            per_entry[e].push_back(it);
        }
        // Rows handed to another rank: replicas of some boxes, empty ones elsewhere.
        if (per_entry[e][0].kind == ItemKind::array && per_entry[e][0].global_shape.size() == 2 && nranks > 2 &&
            rng() % 3 == 0) {
            auto& items = per_entry[e];
            items[1].box = items[0].box;
            items[2].box.shape[0] = 0;
            items[2].box.shape[1] = 0;
        }
    }
    std::vector<SavePlan> plans(nranks);
    for (std::size_t r = 0; r < nranks; ++r) {
        for (std::size_t e = 0; e < nentries; ++e)
            plans[r].items.push_back(per_entry[e][r]);
        if (rng() % 3 == 0)
            std::shuffle(plans[r].items.begin(), plans[r].items.end(), rng);
        plans[r].storage_data.resize(r % 3, std::byte{7});
    }
    if (rng() % 2 == 0) {
        auto& p = plans[rng() % nranks];
        auto& it = p.items[rng() % p.items.size()];
        switch (rng() % 12) {
        case 0: p.items.erase(p.items.begin()); break;
        case 1: p.items.push_back(p.items.front()); break;
        case 2: it.dtype = DType::i32; break;
        case 3: it.global_shape.push_back(2); break;
        case 4: it.box.offsets.at(0) += 1; break;
        case 5: it.box.shape.push_back(1); break;
        case 6: it.value += "x"; break;
        case 7: it.digest ^= 1; break;
        case 8: it.kind = ItemKind::string; break;
        case 9: it.fqn += "!"; break;
        case 10: it.box.shape.at(0) += 1; break;
        default: it.global_shape.at(0) = INT64_MAX / 2; break;
        }
    }
    return plans;
}

} // namespace

TEST_CASE("the fast global plan agrees with the reference", "[plan]")
{
    std::mt19937_64 rng(20260705);
    int failures = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const std::size_t nranks = 1 + rng() % 5;
        std::vector<SavePlan> plans;
        try {
            plans = random_plans(rng, nranks);
        } catch (const std::out_of_range&) {
            continue; // a defect that did not apply (no such coordinate)
        }
        INFO("trial " << trial << ", " << nranks << " ranks");
        const auto fast = run([&] { return DefaultSavePlanner().create_global_plan(plans); });
        const auto ref = run([&] { return detail::global_plan_reference(plans); });
        CHECK(fast.error == ref.error);
        {
            auto copy = plans;
            Metadata md;
            CHECK(detail::global_plan_fast(copy, md) == ref.error.empty()); // no needless fallback
        }
        failures += !ref.error.empty();
        if (fast.error.empty() && ref.error.empty()) {
            REQUIRE(fast.plans.size() == ref.plans.size());
            for (std::size_t r = 0; r < ref.plans.size(); ++r)
                check_same(fast.plans[r], ref.plans[r]);
            check_same(fast.md, ref.md);
        }
    }
    CHECK(failures > 300); // the defects are exercised
}
