// Fuzz target: the binary decoders of src/core/codec.hpp (save plans, load
// plans, write results, metadata) on arbitrary bytes. Every input must either
// decode or throw error::FormatError -- nothing else, no crash, no sanitizer
// report, no allocation beyond what the input can describe. What decodes must
// re-encode to a fixed point: encode(decode(encode(decode(x)))) == encode(decode(x)).
//
// The coordinator's columnar decoders (src/plan/columnar.hpp) on the same
// bytes: as the gathered plans of one and of two ranks, ColumnarSavePlan
// must decline (return false, throw nothing) or plan exactly what the
// reference global plan (tests/oracle/) computes on the decoded plans (final
// plans through the assignments, metadata); global_plan on the decoded
// structs must plan exactly that too, or throw the reference's error (same
// type, same message); as the write results of the ranks of a fixed plan,
// attach_results must attach them or throw error::WriteError or
// error::FormatError, and do the same when rank 1's come without their name
// table (strip_name_table). Plans sent as their array boxes (boxes_form):
// planned as the whole plans, or, as arbitrary bytes next to a fixed plan of
// rank 0, declined or planned as the plan they restore to.
//
// Built as a libFuzzer target with CAIRN_BUILD_FUZZERS=ON (clang), and always
// as a replay program (fuzz/replay_main.cpp) run by CTest.
#include "cairn/errors.hpp"
#include "core/codec.hpp"
#include "core/metadata_adapter.hpp"
#include "plan/columnar.hpp"

#include "boxes_fixture.hpp"
#include "reference_global_plan.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

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

[[noreturn]] void fail(const char* what)
{
    std::fprintf(stderr, "columnar: %s\n", what);
    std::abort();
}

// The input as the gathered plans of `nranks` ranks.
void columnar_plans(const Bytes& in, std::size_t nranks)
{
    using namespace cairn;
    const std::vector<Bytes> gathered(nranks, in);
    detail::ColumnarSavePlan cp;
    bool ok = false;
    try {
        ok = cp.ingest(gathered) && cp.plan();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "columnar: ingest or plan threw: %s\n", e.what());
        std::abort();
    }
    std::vector<SavePlan> plans;
    try {
        plans.assign(nranks, detail::decode_save_plan(in));
    } catch (const error::FormatError&) {
        if (ok)
            fail("planned a save plan that does not decode");
        return;
    }
    std::pair<std::vector<SavePlan>, Metadata> ref;
    try {
        ref = cairn_test::reference_global_plan(plans);
    } catch (const Error& e) {
        if (ok)
            fail("planned what the reference refuses");
        try {
            detail::global_plan(plans);
        } catch (const Error& mine) {
            if (typeid(mine) != typeid(e) || std::string(mine.what()) != e.what()) {
                std::fprintf(stderr, "columnar: global_plan threw \"%s\", the reference \"%s\"\n", mine.what(),
                             e.what());
                std::abort();
            }
            return;
        }
        fail("global_plan planned what the reference refuses");
    }
    const auto same_plans = [&](const std::vector<SavePlan>& got) {
        for (std::size_t r = 0; r < nranks; ++r)
            if (detail::encode(got[r]) != detail::encode(ref.first[r]))
                return false;
        return true;
    };
    {
        std::pair<std::vector<SavePlan>, Metadata> mine;
        try {
            mine = detail::global_plan(plans);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "columnar: global_plan refused what the reference plans: %s\n", e.what());
            std::abort();
        }
        if (!same_plans(mine.first) || detail::encode(mine.second) != detail::encode(ref.second))
            fail("global_plan differs from the reference");
    }
    if (!ok)
        return;
    const auto shells = cp.storage_shells();
    std::vector<SavePlan> finals;
    for (std::size_t r = 0; r < nranks; ++r)
        finals.push_back(detail::apply_assignment(plans[r], cp.encode_final(r, shells[r])));
    cp.release_plan_tables();
    if (!same_plans(finals))
        fail("the assignments differ from the reference's final plans");
    // The write results of those plans into the columns.
    std::vector<Bytes> results;
    for (const auto& f : finals) {
        std::vector<WriteResult> rs;
        for (const auto& it : f.items)
            rs.push_back(WriteResult{it.fqn, it.chunk, StorageInfo{"f", 1, it.nbytes, {2}}});
        results.push_back(detail::encode(rs));
    }
    cp.attach_results(results);
    auto md = ref.second;
    for (auto& [fqn, em] : md.entries)
        for (auto& ch : em.chunks)
            ch.storage = StorageInfo{"f", 1, 0, {2}};
    for (const auto& f : finals)
        for (const auto& it : f.items)
            md.entries.at(it.fqn).chunks.at(it.chunk).storage.length = it.nbytes;
    if (detail::encode(detail::to_metadata(cp.metadata())) != detail::encode(md))
        fail("the metadata with attached results differs from the reference's");
}

// The plans {first, second} and {first, sent} (second in a shorter form) must
// be taken alike by the columnar coordinator and assigned alike.
void plans_alike(const Bytes& first, const Bytes& second, const Bytes& sent, const char* form)
{
    cairn::detail::ColumnarSavePlan whole, shorter;
    bool a = false, b = false;
    try {
        a = whole.ingest({first, second}) && whole.plan();
        b = shorter.ingest({first, sent}) && shorter.plan();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "columnar: ingest or plan threw: %s\n", e.what());
        std::abort();
    }
    if (a != b) {
        std::fprintf(stderr, "columnar: a plan %s is taken differently\n", form);
        std::abort();
    }
    if (!a)
        return;
    const auto x = whole.storage_shells(), y = shorter.storage_shells();
    for (std::size_t r = 0; r < 2; ++r)
        if (whole.encode_final(r, x[r]) != shorter.encode_final(r, y[r])) {
            std::fprintf(stderr, "columnar: a plan %s is assigned differently\n", form);
            std::abort();
        }
}

// The input as the plans of two ranks with the same name table, as a save
// gathers them: rank 1's without its table (strip_name_table). The columnar
// coordinator must plan it exactly as the two whole plans, and rank 1's plan
// must restore to the input.
void shared_names(const Bytes& in)
{
    using namespace cairn;
    Bytes stripped;
    try {
        stripped = detail::strip_name_table(in);
    } catch (const error::FormatError&) {
        return; // not a save plan's encoding up to its table
    }
    if (detail::restore_name_table(stripped, in) != in)
        fail("a stripped plan does not restore to its bytes");
    plans_alike(in, in, stripped, "without its name table");
}

// The input as the plans of two ranks alike but for their array boxes, as a
// save gathers them: rank 1's as its boxes (boxes_form). The columnar
// coordinator must plan it exactly as the two whole plans, and rank 1's plan
// must restore to the input.
void boxes_only(const Bytes& in)
{
    using namespace cairn;
    Bytes boxes;
    try {
        std::uint64_t skeleton = 0;
        boxes = detail::boxes_form(in, skeleton);
    } catch (const error::FormatError&) {
        return; // not a save plan's encoding
    }
    if (detail::restore_save_plan(boxes, in) != in)
        fail("a plan sent as its boxes does not restore to its bytes");
    plans_alike(in, in, boxes, "sent as its boxes");
}

// The input as rank 1's plan in the boxes form next to a fixed plan of rank
// 0: the columnar coordinator must decline it or plan what the plan put back
// together (restore_save_plan) plans, and never throw.
void boxes_form_input(const Bytes& in)
{
    using namespace cairn;
    static const Bytes rank0 = detail::encode(cairn_fuzz::boxes_fixture_plan(0));
    detail::ColumnarSavePlan sent;
    bool ok = false;
    try {
        ok = sent.ingest({rank0, in}) && sent.plan();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "columnar: ingest or plan of a boxes form threw: %s\n", e.what());
        std::abort();
    }
    if (!ok)
        return;
    Bytes whole;
    try {
        whole = detail::restore_save_plan(in, rank0);
        (void)detail::decode_save_plan(whole);
    } catch (const error::FormatError&) {
        fail("planned a boxes form that does not restore");
    }
    detail::ColumnarSavePlan restored;
    if (!(restored.ingest({rank0, whole}) && restored.plan()))
        fail("planned a boxes form whose restored plan is declined");
    const auto x = sent.storage_shells(), y = restored.storage_shells();
    for (std::size_t r = 0; r < 2; ++r)
        if (sent.encode_final(r, x[r]) != restored.encode_final(r, y[r]))
            fail("a boxes form is assigned differently from its restored plan");
}

// The input as the write results of both ranks of a fixed plan.
void columnar_results(const Bytes& in)
{
    using namespace cairn;
    static const std::vector<Bytes> gathered = [] {
        std::vector<Bytes> g;
        for (std::int64_t r = 0; r < 2; ++r) {
            SavePlan p;
            WriteItem a;
            a.fqn = "fluid.velocity";
            a.dtype = DType::f32;
            a.global_shape = {8, 10, 12};
            a.box = Box{{4 * r, 0, 0}, {4, 10, 12}};
            a.nbytes = 4 * 10 * 12 * 4;
            WriteItem b;
            b.fqn = "blob";
            b.kind = ItemKind::bytes;
            b.global_shape = {100};
            b.box = Box{{0}, {100}};
            b.nbytes = 100;
            p.items = {a, b};
            g.push_back(detail::encode(p));
        }
        return g;
    }();
    // What attaching gives: the error kind, or the metadata's encoding.
    const auto attach = [&](const std::vector<Bytes>& results) -> std::string {
        detail::ColumnarSavePlan cp;
        if (!cp.ingest(gathered) || !cp.plan())
            fail("the fixed plan was declined");
        try {
            cp.attach_results(results);
        } catch (const error::WriteError&) {
            return "WriteError";
        } catch (const error::FormatError&) {
            return "FormatError";
        }
        const Bytes md = detail::encode(cp.metadata());
        return std::string(reinterpret_cast<const char*>(md.data()), md.size());
    };
    const std::string both = attach({in, in});
    attach({in, detail::encode(std::vector<WriteResult>{})});
    // Rank 1's sent without its name table (strip_name_table), as when
    // every rank's is the same bytes: the same outcome; rank 0's so sent is
    // refused.
    Bytes stripped;
    try {
        stripped = detail::strip_name_table(in);
    } catch (const error::FormatError&) {
        return;
    }
    if (detail::restore_name_table(stripped, in) != in)
        fail("write results: restoring the stripped name table changes the bytes");
    if (attach({in, stripped}) != both)
        fail("write results without their name table attach otherwise than with it");
    if (attach({stripped, in}) != "FormatError")
        fail("rank 0's write results without their name table were not refused");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto* p = reinterpret_cast<const std::byte*>(data);
    const Bytes in(p, p + size);
    round_trip(in, [](const Bytes& b) { return cairn::detail::decode_save_plan(b); }, "save plan"); // overloaded
    round_trip(in, cairn::detail::decode_load_plan, "load plan");
    round_trip(in, cairn::detail::decode_write_results, "write results");
    round_trip(in, [](const Bytes& b) { return cairn::detail::decode_metadata(b); }, "metadata"); // overloaded
    columnar_plans(in, 1);
    columnar_plans(in, 2);
    shared_names(in);
    boxes_only(in);
    boxes_form_input(in);
    columnar_results(in);
    return 0;
}
