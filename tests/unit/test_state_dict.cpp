// State dicts (include/cairn/state_dict.hpp) and flatten (include/cairn/planner.hpp).
#include "unit_common.hpp"

#include "cairn/planner.hpp"
#include "cairn/state_dict.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace cairn;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using cairn_test::message_of;

namespace {

ArrayShard shard(Shape global, Box box, void* data, Shape strides = {}, DType t = DType::f64)
{
    return ArrayShard{t, std::move(global), std::move(box), data, std::move(strides), MemorySpace::host};
}

// Adds `s` as "temperature" to a dict that already holds one entry and
// checks that the failure left the dict unchanged; returns the message.
std::string add_failure(const ArrayShard& s)
{
    double x = 0;
    StateDict sd;
    sd.add_scalar("before", &x);
    auto msg = message_of<error::WrongAPIUsage>([&] { sd.add_array("temperature", s); });
    CHECK(sd.size() == 1);
    CHECK_FALSE(sd.contains("temperature"));
    return msg;
}

// Checks that `msg` (from add_failure) reports a WrongAPIUsage naming the
// entry and containing `detail`.
void check_usage(const std::string& msg, const char* detail = "")
{
    CHECK_THAT(msg, StartsWith("OK:") && Contains("'temperature'") && Contains(detail));
}

} // namespace

TEST_CASE("add_array rejects inconsistent shards with WrongAPIUsage naming the entry", "[state_dict]")
{
    double buf[64] = {};

    SECTION("box rank differs from the global rank")
    {
        check_usage(add_failure(shard({4, 4}, Box{{0}, {4}}, buf)));
        check_usage(add_failure(shard({4, 4}, Box{{0, 0, 0}, {4, 4, 1}}, buf)));
        check_usage(add_failure(shard({4}, Box{}, buf)));
    }
    SECTION("offsets rank differs from the shape rank")
    {
        check_usage(add_failure(shard({4, 4}, Box{{0}, {4, 4}}, buf)));
        check_usage(add_failure(shard({4, 4}, Box{{0, 0}, {4}}, buf)));
    }
    SECTION("box outside the global shape")
    {
        check_usage(add_failure(shard({4, 4}, Box{{2, 0}, {3, 4}}, buf)), "outside");
        check_usage(add_failure(shard({4, 4}, Box{{0, 4}, {4, 1}}, buf)), "outside");
        check_usage(add_failure(shard({4, 4}, Box{{-1, 0}, {2, 2}}, buf)));
        check_usage(add_failure(shard({4}, Box{{5}, {0}}, buf))); // empty, but beyond the end
    }
    SECTION("negative extents")
    {
        check_usage(add_failure(shard({4, 4}, Box{{0, 0}, {2, -1}}, buf)), "negative");
        check_usage(add_failure(shard({4, -4}, Box{{0, 0}, {0, 0}}, buf)), "negative");
    }
    SECTION("null data with a non-empty box")
    {
        check_usage(add_failure(shard({4, 4}, Box{{0, 0}, {2, 2}}, nullptr)), "null");
        check_usage(add_failure(shard({}, Box{}, nullptr))); // 0-d holds one element
    }
    SECTION("strides of the wrong rank, or negative")
    {
        check_usage(add_failure(shard({4, 4}, Box{{0, 0}, {2, 2}}, buf, {1})), "strides");
        check_usage(add_failure(shard({4, 4}, Box{{0, 0}, {2, 2}}, buf, {8, 4, 1})), "strides");
        check_usage(add_failure(shard({4, 4}, Box{{0, 0}, {2, 2}}, buf, {-4, 1})), "negative");
    }
    SECTION("invalid dtype code")
    {
        check_usage(add_failure(shard({4}, Box{{0}, {4}}, buf, {}, static_cast<DType>(77))), "dtype");
    }
}

TEST_CASE("entry names: empty and duplicate names are refused", "[state_dict]")
{
    double a = 1, b = 2;
    std::string s = "x";
    std::vector<std::byte> blob;
    StateDict sd;
    sd.add_scalar("step", &a);

    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_scalar("step", &b); }), StartsWith("OK:") && Contains("'step'"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_string("step", &s); }), StartsWith("OK:") && Contains("'step'"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_array("step", &b, {}, Box{}); }),
               StartsWith("OK:") && Contains("'step'"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_scalar("", &b); }), StartsWith("OK:") && Contains("empty"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_bytes("", &blob); }), StartsWith("OK:") && Contains("empty"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_array("", &b, {}, Box{}); }), StartsWith("OK:"));
    REQUIRE(sd.size() == 1);
    // the original entry is untouched
    const auto* ref = std::get_if<ScalarRef>(&sd.entries()[0].second);
    REQUIRE(ref != nullptr);
    CHECK(ref->data == &a);
}

TEST_CASE("null pointers for bytes, scalars, strings and Stateful objects are refused", "[state_dict]")
{
    StateDict sd;
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_bytes("blob", nullptr); }), StartsWith("OK:") && Contains("'blob'"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_scalar("dt", static_cast<double*>(nullptr)); }),
               StartsWith("OK:") && Contains("'dt'"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_string("label", nullptr); }),
               StartsWith("OK:") && Contains("'label'"));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_stateful("model", nullptr); }),
               StartsWith("OK:") && Contains("'model'"));
    double x = 0;
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { sd.add_scalar_ref("bad", ScalarRef{static_cast<DType>(99), &x}); }),
               StartsWith("OK:") && Contains("'bad'"));
    CHECK(sd.size() == 0);
}

TEST_CASE("valid shards: strided window, dense, replicated, 0-d, empty", "[state_dict]")
{
    // local 6x7 array with one ghost layer; the 4x5 interior is the box
    // [2:6, 3:8] of a global 8x10 array
    std::vector<double> local(42);
    StateDict sd;
    sd.add_array("fluid.u", &local[7 + 1], {8, 10}, Box{{2, 3}, {4, 5}}, {7, 1});
    std::vector<float> dense(20);
    sd.add_array("dense", dense.data(), {4, 10}, Box{{0, 5}, {4, 5}});
    const std::int32_t rep[3] = {1, 2, 3};
    sd.add_replicated("rep", rep, {3});
    std::uint16_t zero_d = 7;
    sd.add_array("zero_d", &zero_d, {}, Box{});
    sd.add_array("empty", static_cast<double*>(nullptr), {4, 10}, Box{{4, 0}, {0, 10}});

    REQUIRE(sd.size() == 5);
    const char* names[] = {"fluid.u", "dense", "rep", "zero_d", "empty"};
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(sd.entries()[i].first == names[i]); // insertion order
        CHECK(sd.contains(names[i]));
    }
    CHECK_FALSE(sd.contains("fluid"));

    const auto& u = std::get<ArrayShard>(sd.entries()[0].second);
    CHECK(u.dtype == DType::f64);
    CHECK(u.global_shape == Shape{8, 10});
    CHECK(u.box == Box{{2, 3}, {4, 5}});
    CHECK(u.data == static_cast<void*>(&local[8]));
    CHECK(u.space == MemorySpace::host);
    CHECK(u.effective_strides() == Shape{7, 1});
    const auto v = u.view();
    CHECK(v.data == static_cast<void*>(&local[8]));
    CHECK(v.elem_size == 8);
    CHECK(v.shape == Shape{4, 5});
    CHECK(v.strides == Shape{7, 1});

    const auto& d = std::get<ArrayShard>(sd.entries()[1].second);
    CHECK(d.dtype == DType::f32);
    CHECK(d.strides.empty());
    CHECK(d.effective_strides() == Shape{5, 1});
    CHECK(d.view().elem_size == 4);
    CHECK(d.view().strides == Shape{5, 1});

    const auto& r = std::get<ArrayShard>(sd.entries()[2].second);
    CHECK(r.dtype == DType::i32);
    CHECK(r.box == whole({3}));
    CHECK(r.data == static_cast<const void*>(rep));

    const auto& z = std::get<ArrayShard>(sd.entries()[3].second);
    CHECK(z.dtype == DType::u16);
    CHECK(z.effective_strides().empty());
    CHECK(z.view().shape.empty());
    CHECK(z.view().elem_size == 2);

    const auto& e = std::get<ArrayShard>(sd.entries()[4].second);
    CHECK(e.box.empty());
    CHECK(e.data == nullptr);
}

TEST_CASE("scalars, strings and bytes entries keep their pointers and dtypes", "[state_dict]")
{
    bool flag = true;
    long long big = 5;
    std::string label = "x";
    std::vector<std::byte> blob(3);
    StateDict sd;
    sd.add_scalar("flag", &flag).add_scalar("big", &big).add_string("label", &label).add_bytes("blob", &blob);
    REQUIRE(sd.size() == 4);
    CHECK(std::get<ScalarRef>(sd.entries()[0].second).dtype == DType::boolean);
    CHECK(std::get<ScalarRef>(sd.entries()[0].second).data == &flag);
    CHECK(std::get<ScalarRef>(sd.entries()[1].second).dtype == DType::i64);
    CHECK(std::get<std::string*>(sd.entries()[2].second) == &label);
    CHECK(std::get<std::vector<std::byte>*>(sd.entries()[3].second) == &blob);
}

namespace {

// A Stateful with a step counter and a nested optimizer dict.
class Solver : public Stateful {
public:
    StateDict state_dict() override
    {
        ++calls;
        StateDict opt;
        opt.add_scalar("lr", &lr);
        StateDict sd;
        sd.add_scalar("step", &step);
        sd.add_dict("opt", std::move(opt));
        return sd;
    }
    void load_state_dict(StateDict&) override {}
    std::int64_t step = 3;
    double lr = 0.1;
    int calls = 0;
};

// A Stateful whose state contains itself.
class Cycle : public Stateful {
public:
    StateDict state_dict() override
    {
        StateDict sd;
        sd.add_stateful("self", this);
        return sd;
    }
    void load_state_dict(StateDict&) override {}
};

std::vector<std::string> names_of(const std::vector<FlatEntry>& flat)
{
    std::vector<std::string> n;
    for (const auto& f : flat)
        n.push_back(f.fqn);
    return n;
}

} // namespace

TEST_CASE("flatten joins nested dicts and Stateful objects with '.'", "[state_dict]")
{
    std::vector<double> vel(6);
    double dt = 0.01;
    std::string name = "run";
    Solver solver;

    StateDict inner;
    inner.add_array("velocity", vel.data(), {6}, whole({6}));
    inner.add_scalar("dt", &dt);
    StateDict deeper;
    deeper.add_string("tag", &name);
    inner.add_dict("meta", std::move(deeper));
    StateDict outer;
    outer.add_dict("fluid", std::move(inner));
    outer.add_string("name", &name);
    outer.add_stateful("solver", &solver);

    std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> keep;
    const auto flat = flatten(outer, keep);
    CHECK(names_of(flat) ==
          std::vector<std::string>{"fluid.velocity", "fluid.dt", "fluid.meta.tag", "name", "solver.step", "solver.opt.lr"});
    REQUIRE(flat.size() == 6);
    // the flat entries point at the original entries
    CHECK(std::get<ArrayShard>(*flat[0].entry).data == static_cast<void*>(vel.data()));
    CHECK(std::get<ScalarRef>(*flat[1].entry).data == &dt);
    CHECK(std::get<std::string*>(*flat[2].entry) == &name);
    CHECK(std::get<ScalarRef>(*flat[4].entry).data == &solver.step);
    CHECK(std::get<ScalarRef>(*flat[4].entry).dtype == DType::i64);
    CHECK(std::get<ScalarRef>(*flat[5].entry).data == &solver.lr);
    // no nested dict or Stateful survives flattening
    for (const auto& f : flat) {
        CHECK_FALSE(std::holds_alternative<std::shared_ptr<StateDict>>(*f.entry));
        CHECK_FALSE(std::holds_alternative<Stateful*>(*f.entry));
    }
    // the Stateful's dict is kept alive, and state_dict() was called once
    REQUIRE(keep.size() == 1);
    CHECK(keep[0].first == &solver);
    REQUIRE(keep[0].second != nullptr);
    CHECK(keep[0].second->contains("step"));
    CHECK(solver.calls == 1);
}

TEST_CASE("flatten refuses duplicate flattened names", "[state_dict]")
{
    double a = 1, b = 2;
    SECTION("a dotted name and a nested dict")
    {
        StateDict nested;
        nested.add_scalar("b", &b);
        StateDict sd;
        sd.add_scalar("a.b", &a); // allowed by add_*: unique at this level
        sd.add_dict("a", std::move(nested));
        std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> keep;
        CHECK_THAT(message_of<error::WrongAPIUsage>([&] { flatten(sd, keep); }), StartsWith("OK:") && Contains("'a.b'"));
    }
    SECTION("a Stateful and a dotted name")
    {
        Solver solver;
        std::int64_t step = 0;
        StateDict sd;
        sd.add_stateful("solver", &solver);
        sd.add_scalar("solver.step", &step);
        std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> keep;
        CHECK_THAT(message_of<error::WrongAPIUsage>([&] { flatten(sd, keep); }),
                   StartsWith("OK:") && Contains("'solver.step'"));
    }
    SECTION("a Stateful that contains itself")
    {
        Cycle c;
        StateDict sd;
        sd.add_stateful("c", &c);
        std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> keep;
        CHECK_THAT(message_of<error::WrongAPIUsage>([&] { flatten(sd, keep); }), StartsWith("OK:") && Contains("c.self"));
    }
}

TEST_CASE("several boxes of one array flatten to one name each; other kinds may not share it", "[state_dict][boxes]")
{
    double a[4] = {}, b[4] = {}, s = 0;
    StateDict nested;
    nested.add_array<double>("u", a, {8}, Box{{0}, {4}});
    StateDict sd;
    sd.add_array<double>("m.u", b, {8}, Box{{4}, {4}}); // the same array through a dotted name
    sd.add_dict("m", std::move(nested));
    std::vector<std::pair<Stateful*, std::shared_ptr<StateDict>>> keep;
    const auto flat = flatten(sd, keep);
    REQUIRE(flat.size() == 2);
    CHECK(flat[0].fqn == "m.u");
    CHECK(flat[1].fqn == "m.u");

    StateDict other;
    other.add_array<float>("u", nullptr, {8}, Box{{0}, {0}});
    StateDict clash;
    clash.add_array<double>("m.u", b, {8}, Box{{4}, {4}});
    clash.add_dict("m", std::move(other));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { flatten(clash, keep); }),
               StartsWith("OK:") && Contains("'m.u'") && Contains("f32") && Contains("f64"));

    StateDict mixed;
    StateDict inner;
    inner.add_scalar("u", &s);
    mixed.add_array<double>("m.u", b, {8}, Box{{4}, {4}});
    mixed.add_dict("m", std::move(inner));
    CHECK_THAT(message_of<error::WrongAPIUsage>([&] { flatten(mixed, keep); }),
               StartsWith("OK:") && Contains("'m.u'"));
}
