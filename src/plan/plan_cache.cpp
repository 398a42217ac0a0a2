#include "plan/plan_cache.hpp"

#include "core/checksum.hpp"
#include "core/codec.hpp"

#include <atomic>
#include <mutex>
#include <random>
#include <string>

namespace cairn::detail {

namespace {

// What this process kept from the last save that planned from scratch with
// every rank asking for reuse.
struct Kept {
    std::mutex mutex;
    Bytes key;              // this rank's plan key
    std::uint64_t gen = 0;  // the save's generation (the coordinator's draw); 0: nothing kept
    int size = 0;           // the communicator's size and this rank's rank in it
    int rank = -1;
    std::shared_ptr<ColumnarSavePlan> plan; // the coordinator's

    void forget()
    {
        Bytes().swap(key);
        gen = 0;
        size = 0;
        rank = -1;
        plan.reset();
    }
};

Kept& kept()
{
    static Kept k;
    return k;
}

// A generation no other save of this process (or, with overwhelming
// probability, of another process) draws: never 0.
std::uint64_t new_generation()
{
    static const std::uint64_t seed = [] {
        std::random_device rd;
        return (std::uint64_t(rd()) << 32) ^ rd();
    }();
    static std::atomic<std::uint64_t> counter{0};
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * ++counter; // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 1;
}

bool is_value(ItemKind k) noexcept { return k == ItemKind::scalar || k == ItemKind::string; }

} // namespace

PlanKey plan_key(const SavePlan& local)
{
    SavePlan blanked = local;
    Encoder left_out; // what the key leaves out, with the item it belongs to
    for (std::size_t i = 0; i < blanked.items.size(); ++i) {
        auto& it = blanked.items[i];
        if (is_value(it.kind)) {
            left_out.u64(i);
            left_out.str(it.value);
            it.value.clear();
        } else if (it.kind == ItemKind::bytes) {
            left_out.u64(i);
            left_out.u64(it.digest);
            it.digest = 0;
        }
    }
    PlanKey k;
    k.want = true;
    k.key = encode(blanked);
    const Bytes b = left_out.take();
    k.values = checksum(b.data(), b.size());
    return k;
}

PlanReuse negotiate_plan_reuse(const Comm& c, PlanKey mine)
{
    PlanReuse out;
    const bool want = mine.want;
    Bytes& key = mine.key;
    const std::uint64_t values = mine.values;
    std::uint64_t gen = 0;
    bool hit = false;
    {
        auto& k = kept();
        std::lock_guard<std::mutex> lock(k.mutex);
        hit = want && k.gen != 0 && k.size == c.size && k.rank == c.rank && k.key == key &&
              (!c.coordinator() || (k.plan && k.plan.use_count() == 1));
        gen = k.gen;
        if (hit && c.coordinator())
            out.plan = k.plan;
    }
    // Every rank: wants, has a kept plan that fits, the same generation, the
    // same values (minimum of v and of its complement: equal everywhere
    // when min(v) == ~min(~v)).
    // The name tables, the plan skeletons: all alike when min(h) == ~min(~h).
    std::uint64_t v[10] = {want ? 1u : 0u, hit ? 1u : 0u,   gen,           ~gen,
                           values,         ~values,         mine.names,    ~mine.names,
                           mine.skeleton,  ~mine.skeleton};
    allreduce_min(c, v, 10);
    out.same_names = v[6] == ~v[7];
    out.same_skeleton = v[8] == ~v[9];
    out.all_want = v[0] == 1;
    out.reuse = out.all_want && v[1] == 1 && v[2] == ~v[3] && v[4] == ~v[5];
    if (!out.reuse)
        out.plan.reset();
    if (!out.all_want) {
        auto& k = kept();
        std::lock_guard<std::mutex> lock(k.mutex);
        k.forget();
    }
    out.key = std::move(key);
    return out;
}

void remember_plan(const Comm& c, PlanReuse& reuse, std::shared_ptr<ColumnarSavePlan> plan)
{
    if (!reuse.all_want || reuse.reuse)
        return;
    const std::uint64_t gen = bcast_u64(c, c.coordinator() && plan ? new_generation() : 0);
    auto& k = kept();
    std::lock_guard<std::mutex> lock(k.mutex);
    k.forget();
    if (gen == 0)
        return;
    k.key = std::move(reuse.key);
    k.gen = gen;
    k.size = c.size;
    k.rank = c.rank;
    if (c.coordinator())
        k.plan = std::move(plan);
}

} // namespace cairn::detail
