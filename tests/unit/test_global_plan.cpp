// The global plan (src/plan/columnar.hpp) on both its entry points,
// DefaultSavePlanner::create_global_plan on structs (detail::global_plan)
// and the coordinator's path on encoded plans (ColumnarSavePlan), against
// the reference global plan (tests/oracle/, a test oracle) on random valid
// and invalid plans, some with several boxes of an array per rank: the same
// final plans and metadata, or the same error (type and message); the
// encoded path declines what it does not take.
#include "plan_compare.hpp"
#include "reference_global_plan.hpp"
#include "unit_common.hpp"

#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "core/codec.hpp"
#include "core/metadata_adapter.hpp"
#include "plan/columnar.hpp"

#include <algorithm>
#include <map>
#include <memory>
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
// replicated, some ranks holding nothing, some ranks holding several
// blocks), bytes, scalars and strings; then, sometimes, one defect.
std::vector<SavePlan> random_plans(std::mt19937_64& rng, std::size_t nranks)
{
    const std::size_t nentries = 1 + rng() % 6;
    std::vector<std::vector<WriteItem>> per_entry(nentries); // [entry][rank]
    std::vector<std::vector<WriteItem>> more(nranks);         // [rank]: further boxes of arrays
    for (std::size_t e = 0; e < nentries; ++e) {
        WriteItem proto;
        proto.fqn = "e" + std::to_string(rng() % 3) + "." + std::to_string(e);
        const auto kind = rng() % 6;
        proto.kind = kind < 3 ? ItemKind::array : static_cast<ItemKind>(kind - 2);
        proto.dtype = kind == 1 ? DType::f32 : DType::f64;
        // arrays: rows, columns, replicated, 0-d, rows in reverse rank order, 3-d slabs, two row blocks per rank
        const auto layout = rng() % 7;
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
                } else if (layout == 6) {
                    // Rows [4i, 4i + 2) and [4i + 2, 4i + 4); rank 1 (of
                    // three or more) also holds rank 0's second block.
                    const auto n = static_cast<std::int64_t>(nranks), i = static_cast<std::int64_t>(r);
                    it.global_shape = {4 * n, 3};
                    it.box = Box{{4 * i, 0}, {2, 3}};
                    WriteItem second = it;
                    second.box = Box{{4 * i + 2, 0}, {2, 3}};
                    second.nbytes = 6 * dtype_size(it.dtype);
                    more[r].push_back(second);
                    if (r == 0 && nranks > 2) {
                        more[1].push_back(second);
                        more[1].back().nbytes = 0; // the global plan computes it
                    }
                } else if (layout == 5) {
                    const auto n = static_cast<std::int64_t>(nranks), i = static_cast<std::int64_t>(r);
                    it.global_shape = {2, 2 * n, 3};
                    it.box = Box{{0, 2 * i, 0}, {2, 2, 3}};
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
        plans[r].items.insert(plans[r].items.begin() + static_cast<std::ptrdiff_t>(rng() % (plans[r].items.size() + 1)),
                              more[r].begin(), more[r].end());
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

namespace {

// Whether some rank lists an array more than once (one item per box): the
// encoded path declines such plans.
bool several_boxes(const std::vector<SavePlan>& plans)
{
    for (const auto& p : plans)
        for (std::size_t i = 0; i < p.items.size(); ++i)
            for (std::size_t j = 0; j < i; ++j)
                if (p.items[i].fqn == p.items[j].fqn)
                    return true;
    return false;
}

} // namespace

TEST_CASE("create_global_plan agrees with the reference", "[plan]")
{
    std::mt19937_64 rng(20260705);
    int failures = 0, taken = 0, several = 0, several_failures = 0;
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
        const auto ref = run([&] { return cairn_test::reference_global_plan(plans); });
        CHECK(fast.error == ref.error);
        const auto direct = run([&] { return detail::global_plan(plans); });
        CHECK(direct.error == ref.error);
        failures += !ref.error.empty();
        taken += ref.error.empty();
        if (several_boxes(plans)) {
            ++several;
            several_failures += !ref.error.empty();
        }
        if (direct.error.empty() && ref.error.empty()) {
            REQUIRE(direct.plans.size() == ref.plans.size());
            for (std::size_t r = 0; r < ref.plans.size(); ++r)
                check_same(direct.plans[r], ref.plans[r]);
            check_same(direct.md, ref.md);
        }
        if (fast.error.empty() && ref.error.empty()) {
            REQUIRE(fast.plans.size() == ref.plans.size());
            for (std::size_t r = 0; r < ref.plans.size(); ++r)
                check_same(fast.plans[r], ref.plans[r]);
            check_same(fast.md, ref.md);
        }
    }
    {
        // No ranks: no entries, as the reference.
        const auto none = run([] { return detail::global_plan({}); });
        const auto ref = run([] { return cairn_test::reference_global_plan({}); });
        CHECK(none.error == ref.error);
        CHECK(none.plans.empty());
        check_same(none.md, ref.md);
    }
    CHECK(failures > 300); // the defects are exercised
    CHECK(taken > 1000);
    INFO("several boxes of an array on a rank: " << several << ", refused " << several_failures);
    CHECK(several > 500);
    CHECK(several_failures > 30);
    CHECK(several - several_failures > 200);
}

namespace {

// Whether the reference's final plans take a field from rank 0's item that
// another holder's item has different (array digests and values; a blob's
// dtype, shape, box or value): the columnar path, which sends each rank an
// assignment of its own items, declines such plans, and a blob whose box
// does not have the rank of its shape (no metadata can hold it).
bool overwritten(const std::vector<SavePlan>& plans)
{
    std::map<std::string, const WriteItem*> first;
    for (const auto& it : plans[0].items)
        first.emplace(it.fqn, &it);
    for (const auto& p : plans)
        for (const auto& it : p.items) {
            const auto f = first.find(it.fqn);
            if (f == first.end() || f->second->kind != it.kind)
                continue;
            const WriteItem& a = *f->second;
            if (it.kind == ItemKind::array && (it.digest != a.digest || it.value != a.value))
                return true;
            if (it.kind == ItemKind::bytes && (it.dtype != a.dtype || it.global_shape != a.global_shape ||
                                               it.box != a.box || it.value != a.value ||
                                               it.box.ndim() != it.global_shape.size()))
                return true;
        }
    return false;
}

// Whether there are several encodings (plans or results) and every one's
// name table hashes as the first one's: a save sends them without it then.
bool name_tables_alike(const std::vector<detail::Bytes>& v)
{
    bool alike = v.size() > 1;
    for (const auto& b : v)
        alike = alike && detail::name_table_hash(b) == detail::name_table_hash(v.front());
    return alike;
}

std::vector<detail::Bytes> results_of(const std::vector<SavePlan>& finals)
{
    std::vector<detail::Bytes> out;
    for (std::size_t r = 0; r < finals.size(); ++r) {
        std::vector<WriteResult> rs;
        std::uint64_t off = 0;
        std::size_t k = r;
        for (const auto& it : finals[r].items) {
            // No, one or two checksums (the pool takes a chunk of one at its row, others after the rows).
            std::vector<std::uint64_t> sums;
            for (std::size_t j = 0; j < k % 3; ++j)
                sums.push_back(off + 1 + j);
            ++k;
            rs.push_back(WriteResult{it.fqn, it.chunk, StorageInfo{"f" + std::to_string(r % 2), off, it.nbytes, sums}});
            off += it.nbytes + 1;
        }
        out.push_back(detail::encode(rs));
    }
    return out;
}

} // namespace

TEST_CASE("the columnar global plan agrees with the reference", "[plan]")
{
    std::mt19937_64 rng(20260706);
    int declined = 0, taken = 0, shared_checked = 0, results_shared_checked = 0, boxes_checked = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const std::size_t nranks = 1 + rng() % 5;
        std::vector<SavePlan> plans;
        try {
            plans = random_plans(rng, nranks);
        } catch (const std::out_of_range&) {
            continue;
        }
        INFO("trial " << trial << ", " << nranks << " ranks");
        const auto ref = run([&] { return cairn_test::reference_global_plan(plans); });
        std::vector<detail::Bytes> gathered;
        for (const auto& p : plans)
            gathered.push_back(detail::encode(p));
        detail::ColumnarSavePlan cp;
        const bool ok = cp.ingest(gathered) && cp.plan();
        // The gathered plans sent in a shorter form (`sent`): taken as cp
        // took the whole ones, with the same assignments and boxes.
        const auto same_as_whole = [&](const std::vector<detail::Bytes>& sent) {
            detail::ColumnarSavePlan cs;
            const bool ok_sent = cs.ingest(sent) && cs.plan();
            CHECK(ok_sent == ok);
            if (ok && ok_sent) {
                const auto a = cp.storage_shells(), b = cs.storage_shells();
                for (std::size_t r = 0; r < nranks; ++r)
                    CHECK(cp.encode_final(r, a[r]) == cs.encode_final(r, b[r]));
                CHECK(cp.metadata().boxes == cs.metadata().boxes);
                CHECK(cp.total_bytes() == cs.total_bytes());
            }
        };
        // As the ranks send them when every name table is the same bytes:
        // rank 0's plan whole, the others without their table. The same
        // outcome, and each one restores to what it was.
        if (name_tables_alike(gathered)) {
            ++shared_checked;
            std::vector<detail::Bytes> sent{gathered.front()};
            for (std::size_t r = 1; r < nranks; ++r) {
                sent.push_back(detail::strip_name_table(gathered[r]));
                CHECK(detail::has_shared_names(sent.back()));
                CHECK(sent.back().size() < gathered[r].size());
                CHECK(detail::restore_name_table(sent.back(), gathered.front()) == gathered[r]);
            }
            same_as_whole(sent);
        }
        // As the ranks send them when every plan's skeleton is alike (the
        // same plan but for array boxes, sizes, storage and planner data):
        // rank 0's whole, the others their array boxes. The same outcome,
        // and each one restores to what it was.
        {
            bool skeletons_alike = nranks > 1;
            std::vector<detail::Bytes> sent{gathered.front()};
            std::uint64_t h0 = 0;
            try {
                (void)detail::boxes_form(gathered.front(), h0);
                for (std::size_t r = 1; r < nranks && skeletons_alike; ++r) {
                    std::uint64_t h = 0;
                    sent.push_back(detail::boxes_form(gathered[r], h));
                    skeletons_alike = h == h0;
                }
            } catch (const error::FormatError&) {
                skeletons_alike = false; // a plan the encoder made but its decoder refuses (a defect)
            }
            if (skeletons_alike) {
                ++boxes_checked;
                for (std::size_t r = 1; r < nranks; ++r)
                    CHECK(detail::restore_save_plan(sent[r], gathered.front()) == gathered[r]);
                same_as_whole(sent);
            }
        }
        bool encodable = true; // else the struct-based path refuses the encoding (error::FormatError)
        for (const auto& g : gathered)
            try {
                detail::decode_save_plan(g);
            } catch (const error::FormatError&) {
                encodable = false;
            }
        if (!ref.error.empty() || !encodable) {
            CHECK_FALSE(ok);
            continue;
        }
        CHECK(ok == (!overwritten(plans) && !several_boxes(plans))); // no needless fallback
        if (!ok) {
            ++declined;
            continue;
        }
        ++taken;
        auto shells = cp.storage_shells();
        REQUIRE(shells.size() == nranks);
        std::uint64_t total = 0;
        std::vector<SavePlan> finals;
        for (std::size_t r = 0; r < nranks; ++r) {
            const auto a = cp.encode_final(r, shells[r]);
            CHECK(detail::is_assignment(a));
            finals.push_back(detail::apply_assignment(plans[r], a));
            check_same(finals.back(), ref.plans[r]);
            for (const auto& it : ref.plans[r].items)
                total += it.nbytes;
        }
        CHECK(cp.total_bytes() == total);
        cp.release_plan_tables();
        // The write results into the columns, as attach_results into the structs.
        Metadata expect = ref.md;
        const auto rs = results_of(ref.plans);
        for (std::size_t r = 0; r < nranks; ++r)
            for (const auto& w : detail::decode_write_results(rs[r]))
                expect.entries.at(w.fqn).chunks.at(w.chunk).storage = w.storage;
        cp.attach_results(rs);
        const Metadata got = detail::to_metadata(cp.metadata());
        check_same(got, expect);
        // As the ranks send their results when every name table is the same
        // bytes: rank 0's whole, the others without their table.
        if (name_tables_alike(rs)) {
            ++results_shared_checked;
            std::vector<detail::Bytes> sent{rs.front()};
            for (std::size_t r = 1; r < nranks; ++r) {
                sent.push_back(detail::strip_name_table(rs[r]));
                CHECK(detail::has_shared_names(sent.back()));
                CHECK(detail::restore_name_table(sent.back(), rs.front()) == rs[r]);
                CHECK_THROWS_AS(detail::restore_name_table(sent.back(), gathered.front()), error::FormatError);
            }
            detail::ColumnarSavePlan cr;
            REQUIRE((cr.ingest(gathered) && cr.plan()));
            cr.attach_results(sent);
            check_same(detail::to_metadata(cr.metadata()), expect);
            detail::ColumnarSavePlan c0; // rank 0's without its table: refused
            REQUIRE((c0.ingest(gathered) && c0.plan()));
            sent.front() = detail::strip_name_table(rs.front());
            CHECK_THROWS_AS(c0.attach_results(sent), error::FormatError);
        }
        // The columns convert back to themselves.
        const auto again = detail::to_columns(got);
        CHECK(again.boxes == cp.metadata().boxes);
        CHECK(again.chunk_offset == cp.metadata().chunk_offset);
    }
    CHECK(taken > 1000);
    CHECK(declined > 20);
    CHECK(shared_checked > 500);
    INFO("plans sent as their boxes: " << boxes_checked);
    CHECK(boxes_checked > 300);
    INFO("results sent without name tables: " << results_shared_checked);
    CHECK(results_shared_checked > 100);
}

TEST_CASE("columnar path: write results that do not match the plan are refused", "[plan]")
{
    // Two ranks, one array of two row blocks, one blob held by both.
    std::vector<SavePlan> plans(2);
    for (int r = 0; r < 2; ++r) {
        WriteItem a;
        a.fqn = "a";
        a.dtype = DType::f64;
        a.global_shape = {4, 2};
        a.box = Box{{2 * r, 0}, {2, 2}};
        a.nbytes = 32;
        WriteItem b;
        b.fqn = "b";
        b.kind = ItemKind::bytes;
        b.global_shape = {3};
        b.box = whole(b.global_shape);
        b.nbytes = 3;
        b.digest = 9;
        plans[static_cast<std::size_t>(r)].items = {a, b};
    }
    const auto ref = cairn_test::reference_global_plan(plans).first;
    const auto fresh = [&] {
        auto cp = std::make_unique<detail::ColumnarSavePlan>();
        std::vector<detail::Bytes> gathered{detail::encode(plans[0]), detail::encode(plans[1])};
        REQUIRE(cp->ingest(gathered));
        REQUIRE(cp->plan());
        return cp;
    };
    const auto message = [](auto&& f) {
        try {
            f();
        } catch (const error::WriteError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    {
        auto cp = fresh();
        CHECK_NOTHROW(cp->attach_results(results_of(ref)));
        CHECK(cp->metadata().chunk_count() == 3);
    }
    {
        // Without checksums (SaveOptions::checksum_block 0): an empty pool.
        std::vector<detail::Bytes> rs;
        for (const auto& f : ref) {
            std::vector<WriteResult> w;
            for (const auto& it : f.items)
                w.push_back(WriteResult{it.fqn, it.chunk, StorageInfo{"f", 0, it.nbytes, {}}});
            rs.push_back(detail::encode(w));
        }
        auto cp = fresh();
        cp->attach_results(rs);
        const auto& md = cp->metadata();
        CHECK(md.sums.empty());
        for (std::size_t k = 0; k < md.chunk_count(); ++k)
            CHECK((md.sum_count[k] == 0 && md.sum_begin[k] == 0));
        // One checksum each: the pool in chunk order, each at its row.
        for (auto& b : rs) {
            auto w = detail::decode_write_results(b);
            for (auto& x : w)
                x.storage.checksums = {1000 + x.chunk};
            b = detail::encode(w);
        }
        auto c1 = fresh();
        c1->attach_results(rs);
        const auto& m1 = c1->metadata();
        REQUIRE(m1.sums.size() == m1.chunk_count());
        for (std::size_t k = 0; k < m1.chunk_count(); ++k)
            CHECK((m1.sum_count[k] == 1 && m1.sum_begin[k] == k));
    }
    {
        auto bad = ref;
        bad[0].items[0].chunk = 7;
        auto cp = fresh();
        CHECK(message([&] { cp->attach_results(results_of(bad)); }).find("chunk 7, which the global plan does not have") !=
              std::string::npos);
    }
    {
        auto bad = ref;
        bad[1].items.push_back(bad[0].items[0]); // rank 1 also reports rank 0's chunk
        auto cp = fresh();
        CHECK(message([&] { cp->attach_results(results_of(bad)); }).find("which was reported before") !=
              std::string::npos);
    }
    {
        auto bad = ref;
        bad[1].items.pop_back();
        auto cp = fresh();
        CHECK(message([&] { cp->attach_results(results_of(bad)); }).find("the global plan has 3") != std::string::npos);
    }
    {
        auto bad = ref;
        bad[0].items[0].fqn = "zz";
        auto cp = fresh();
        CHECK(message([&] { cp->attach_results(results_of(bad)); }).find("'zz'") != std::string::npos);
    }
}

TEST_CASE("columnar path: many ranks sent as their boxes, some whole", "[plan]")
{
    // 40 ranks, rows of two arrays (one of them 3-d) and a scalar; ranks but
    // 0 as their boxes except rank 17 (whole) and rank 30 (without its name
    // table).
    constexpr std::size_t n = 40;
    std::vector<detail::Bytes> whole, sent;
    std::uint64_t h0 = 0;
    for (std::size_t r = 0; r < n; ++r) {
        const auto i = static_cast<std::int64_t>(r);
        SavePlan p;
        WriteItem a;
        a.fqn = "a";
        a.dtype = DType::f64;
        a.global_shape = {2 * static_cast<std::int64_t>(n), 3};
        a.box = Box{{2 * i, 0}, {2, 3}};
        a.nbytes = 48;
        WriteItem c = a;
        c.fqn = "c";
        c.global_shape = {2, static_cast<std::int64_t>(n), 5};
        c.box = Box{{0, i, 0}, {2, 1, 5}};
        c.nbytes = 80;
        WriteItem s;
        s.fqn = "step";
        s.kind = ItemKind::scalar;
        s.dtype = DType::i64;
        s.value = std::string(8, '\1');
        p.items = {c, s, a};
        p.storage_data.assign(r % 4, std::byte{1});
        whole.push_back(detail::encode(p));
        std::uint64_t h = 0;
        const auto b = detail::boxes_form(whole.back(), h);
        if (r == 0)
            h0 = h;
        CHECK(h == h0);
        sent.push_back(r == 0 || r == 17 ? whole.back() : r == 30 ? detail::strip_name_table(whole.back()) : b);
    }
    detail::ColumnarSavePlan cw, cs;
    REQUIRE((cw.ingest(whole) && cw.plan()));
    REQUIRE((cs.ingest(sent) && cs.plan()));
    const auto x = cw.storage_shells(), y = cs.storage_shells();
    for (std::size_t r = 0; r < n; ++r)
        CHECK(cw.encode_final(r, x[r]) == cs.encode_final(r, y[r]));
    CHECK(cw.metadata().boxes == cs.metadata().boxes);
    CHECK(cw.metadata().chunk_count() == 2 * n);
    // One rank's boxes of the wrong rank (a 3-d box for the 2-d array): declined.
    auto bad = sent;
    {
        SavePlan p = detail::decode_save_plan(whole[5]);
        p.items[2].box = Box{{10, 0, 0}, {2, 3, 1}};
        std::uint64_t h = 0;
        bad[5] = detail::boxes_form(detail::encode(p), h);
    }
    detail::ColumnarSavePlan cb;
    CHECK_FALSE((cb.ingest(bad) && cb.plan()));
    // Rank 0's as its boxes: declined (rank 0's plan must be whole).
    bad = sent;
    bad[0] = sent[1];
    detail::ColumnarSavePlan c0;
    CHECK_FALSE(c0.ingest(bad));
}
