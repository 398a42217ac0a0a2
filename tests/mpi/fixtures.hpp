// Test states: arrays of any dtype decomposed in several ways, held in local
// buffers with ghost layers, filled with known values and checked after a load.
#pragma once

#include "common.hpp"

#include <cstring>
#include <memory>

namespace cairn_test {

inline void put_value(cairn::DType t, void* p, std::int64_t v)
{
    using cairn::DType;
    switch (t) {
    case DType::f16:
    case DType::bf16:
    case DType::u16: { auto x = static_cast<std::uint16_t>(v); std::memcpy(p, &x, 2); break; }
    case DType::f32: { auto x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case DType::f64: { auto x = static_cast<double>(v); std::memcpy(p, &x, 8); break; }
    case DType::i8: { auto x = static_cast<std::int8_t>(v); std::memcpy(p, &x, 1); break; }
    case DType::i16: { auto x = static_cast<std::int16_t>(v); std::memcpy(p, &x, 2); break; }
    case DType::i32: { auto x = static_cast<std::int32_t>(v); std::memcpy(p, &x, 4); break; }
    case DType::i64: { std::memcpy(p, &v, 8); break; }
    case DType::u8: { auto x = static_cast<std::uint8_t>(v); std::memcpy(p, &x, 1); break; }
    case DType::u32: { auto x = static_cast<std::uint32_t>(v); std::memcpy(p, &x, 4); break; }
    case DType::u64: { auto x = static_cast<std::uint64_t>(v); std::memcpy(p, &x, 8); break; }
    case DType::boolean: { bool x = (v % 2) != 0; std::memcpy(p, &x, 1); break; }
    }
}

/// How the ranks of a communicator split an array.
enum class Decomp { dim0, last_dim, grid, replicated, single_owner };

inline cairn::Box decompose(const cairn::Shape& g, Decomp d, int p, int r)
{
    cairn::Box b = cairn::whole(g);
    const std::size_t nd = g.size();
    if (nd == 0 || d == Decomp::replicated)
        return b;
    switch (d) {
    case Decomp::dim0: std::tie(b.offsets[0], b.shape[0]) = block(g[0], p, r); break;
    case Decomp::last_dim: std::tie(b.offsets[nd - 1], b.shape[nd - 1]) = block(g[nd - 1], p, r); break;
    case Decomp::grid: {
        if (nd < 2) {
            std::tie(b.offsets[0], b.shape[0]) = block(g[0], p, r);
            break;
        }
        int dims[2] = {0, 0};
        MPI_Dims_create(p, 2, dims);
        std::tie(b.offsets[0], b.shape[0]) = block(g[0], dims[0], r / dims[1]);
        std::tie(b.offsets[1], b.shape[1]) = block(g[1], dims[1], r % dims[1]);
        break;
    }
    case Decomp::single_owner:
        if (r != 0)
            b.shape.assign(nd, 0);
        break;
    case Decomp::replicated: break;
    }
    return b;
}

/// One array shard in a buffer with `ghost` extra elements on each side of
/// every dimension.
struct LocalArray {
    std::string name;
    cairn::DType dtype;
    cairn::Shape global;
    cairn::Box box;
    int ghost;
    int salt;
    std::vector<unsigned char> buf;
    cairn::Shape strides;
    std::size_t origin = 0; // byte offset of the box's first element

    LocalArray(std::string n, cairn::DType t, cairn::Shape g, cairn::Box b, int gh, int s)
        : name(std::move(n)), dtype(t), global(std::move(g)), box(std::move(b)), ghost(gh), salt(s)
    {
        cairn::Shape local = box.shape;
        for (auto& e : local)
            e += 2 * ghost;
        strides = cairn::row_major_strides(local);
        const auto es = cairn::dtype_size(dtype);
        buf.assign(static_cast<std::size_t>(cairn::volume(local)) * es + 1, 0xAB);
        std::int64_t o = 0;
        for (auto s2 : strides)
            o += ghost * s2;
        origin = static_cast<std::size_t>(o) * es;
    }

    void* data() { return buf.data() + origin; }

    cairn::ArrayShard shard() { return cairn::ArrayShard{dtype, global, box, data(), strides, cairn::MemorySpace::host}; }

    template <class F>
    void for_each(F&& f)
    {
        const std::size_t nd = box.ndim();
        const auto gstr = cairn::row_major_strides(global);
        const auto es = cairn::dtype_size(dtype);
        if (box.empty())
            return;
        cairn::Shape idx(nd, 0);
        for (std::int64_t n = 0; n < box.volume(); ++n) {
            std::int64_t lin = 0, loc = 0;
            for (std::size_t d = 0; d < nd; ++d) {
                lin += (box.offsets[d] + idx[d]) * gstr[d];
                loc += idx[d] * strides[d];
            }
            f(static_cast<unsigned char*>(data()) + loc * static_cast<std::int64_t>(es), lin);
            for (std::size_t d = nd; d-- > 0;) {
                if (++idx[d] < box.shape[d])
                    break;
                idx[d] = 0;
            }
        }
    }

    void fill() { for_each([&](unsigned char* p, std::int64_t lin) { put_value(dtype, p, value_at(lin, salt)); }); }

    /// Number of elements of the box that differ from the expected values,
    /// plus ghost bytes that were touched.
    std::int64_t errors()
    {
        std::int64_t bad = 0;
        const auto es = cairn::dtype_size(dtype);
        std::vector<unsigned char> expect(es);
        std::vector<bool> inside(buf.size(), false);
        for_each([&](unsigned char* p, std::int64_t lin) {
            put_value(dtype, expect.data(), value_at(lin, salt));
            if (std::memcmp(p, expect.data(), es) != 0)
                ++bad;
            for (std::size_t k = 0; k < es; ++k)
                inside[static_cast<std::size_t>(p - buf.data()) + k] = true;
        });
        for (std::size_t i = 0; i < buf.size(); ++i)
            if (!inside[i] && buf[i] != 0xAB)
                ++bad;
        return bad;
    }
};

struct ArraySpec {
    std::string name;
    cairn::DType dtype;
    cairn::Shape global;
    int salt;
};

/// A full test state on one rank: arrays plus bytes, scalars and a string.
struct TestState {
    std::vector<std::unique_ptr<LocalArray>> arrays;
    std::vector<std::byte> blob;
    std::int64_t step = 0;
    double dt = 0;
    std::string label;
    cairn::StateDict dict;

    TestState(const std::vector<ArraySpec>& specs, Decomp decomp, int p, int r, int ghost, bool filled)
    {
        for (const auto& s : specs) {
            const auto d = s.name.rfind("rep", 0) == 0 ? Decomp::replicated : decomp;
            arrays.push_back(std::make_unique<LocalArray>(s.name, s.dtype, s.global, decompose(s.global, d, p, r), ghost,
                                                          s.salt));
            if (filled)
                arrays.back()->fill();
            dict.add_array(s.name, arrays.back()->shard());
        }
        if (filled) {
            for (int i = 0; i < 1000; ++i)
                blob.push_back(std::byte(static_cast<unsigned char>(i * 31 + 7)));
            step = 4711;
            dt = 0.125;
            label = "heat \xce\xb1 run/1";
        }
        dict.add_bytes("blob", &blob);
        dict.add_scalar("step", &step);
        dict.add_scalar("dt", &dt);
        dict.add_string("label", &label);
    }

    /// Total wrong elements / ghost bytes / non-array values on this rank.
    std::int64_t errors()
    {
        std::int64_t bad = 0;
        for (auto& a : arrays)
            bad += a->errors();
        TestState ref({}, Decomp::dim0, 1, 0, 0, true);
        bad += blob != ref.blob;
        bad += step != ref.step;
        bad += dt != ref.dt;
        bad += label != ref.label;
        return bad;
    }
};

inline std::vector<ArraySpec> standard_arrays()
{
    using cairn::DType;
    return {
        {"a1", DType::f64, {37}, 1},
        {"fluid.a2", DType::f32, {13, 11}, 2},
        {"a3", DType::i32, {5, 6, 7}, 3},
        {"tiny", DType::i64, {3}, 4},
        {"rep.table", DType::u16, {4, 5}, 5},
        {"empty", DType::f64, {0}, 6},
        {"rep.zero_d", DType::f64, {}, 7},
    };
}

/// Saves the standard state on the first `n` ranks (decomposition `save_d`,
/// `save_ghost` ghost layers) as `id`, loads it on the first `m` ranks with
/// another decomposition; true on every rank when every rank of the load got
/// every value. `layout` selects the storage of both (automatic: by the id).
/// `verify`: check checksums on load (the container reads collectively only
/// without: verified reads are independent, whole checksum blocks).
inline bool round_trip(const std::vector<ArraySpec>& specs, const std::string& id, int n, Decomp save_d, int m,
                       Decomp load_d, int save_ghost, int load_ghost, cairn::Layout layout = cairn::Layout::automatic,
                       bool verify = true)
{
    const bool saved = run_on(n, [&](SubComm& c) {
        TestState s(specs, save_d, c.size(), c.rank(), save_ghost, true);
        cairn::SaveOptions o;
        o.fsync = false;
        o.layout = layout;
        return cairn::save(s.dict, id, c.get(), o).entries == specs.size() + 4;
    });
    return saved && run_on(m, [&](SubComm& c) {
        TestState s(specs, load_d, c.size(), c.rank(), load_ghost, false);
        cairn::LoadOptions o;
        o.layout = layout;
        o.verify_checksums = verify;
        cairn::load(s.dict, id, c.get(), o);
        return s.errors() == 0;
    });
}

/// round_trip of the standard arrays.
inline bool round_trip(const std::string& id, int n, Decomp save_d, int m, Decomp load_d, int save_ghost, int load_ghost,
                       cairn::Layout layout = cairn::Layout::automatic)
{
    return round_trip(standard_arrays(), id, n, save_d, m, load_d, save_ghost, load_ghost, layout);
}

/// One array of every dtype, 1-d, 2-d and 3-d in turn, of uneven extents (a
/// rank of a 4-rank decomposition may get nothing along a dimension).
inline std::vector<ArraySpec> every_dtype_arrays()
{
    std::vector<ArraySpec> specs;
    const std::vector<cairn::Shape> shapes{{23}, {9, 5}, {3, 5, 7}};
    for (int t = 0; t < cairn::dtype_count; ++t)
        specs.push_back({"dt." + std::string(cairn::dtype_name(static_cast<cairn::DType>(t))),
                         static_cast<cairn::DType>(t), shapes[static_cast<std::size_t>(t) % shapes.size()], 20 + t});
    // ... and, of the 16-bit floats and bool, a replicated 2-d array each.
    for (auto t : {cairn::DType::f16, cairn::DType::bf16, cairn::DType::boolean})
        specs.push_back({"rep." + std::string(cairn::dtype_name(t)), t, {2, 3}, 40 + static_cast<int>(t)});
    return specs;
}

// Per-rank storage that fails on one rank after writing its data.
class FailingWriter : public cairn::DistcpWriter {
public:
    explicit FailingWriter(int bad_rank, cairn::DistcpWriterOptions o) : DistcpWriter(o), m_bad(bad_rank) {}
    std::vector<cairn::WriteResult> write_data(const cairn::SavePlan& plan, cairn::SavePlanner& planner) override
    {
        auto r = DistcpWriter::write_data(plan, planner);
        if (world_rank() == m_bad)
            throw cairn::error::WriteError("injected: disk full on rank " + std::to_string(m_bad));
        return r;
    }

private:
    int m_bad;
};

} // namespace cairn_test
