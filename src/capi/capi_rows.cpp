// The C API of rows that vary per rank (cairn_state_add_rows and its
// companions, include/cairn/cairn.h): each group a cairn::RowGroup owned by
// the state handle.
#include "capi/capi_rows.hpp"

#include <string>

namespace {

using cairn::capi::guarded;
using cairn::capi::require;

// A RowGroup owned by the state; nothing to copy before save or after load.
class RowsBinding final : public cairn::capi::Binding {
public:
    using Binding::Binding;
    cairn::RowGroup group;
    void before_save() override {}
    void after_load() override {}
};

std::string text_arg(const char* s, const char* what)
{
    require(s != nullptr, std::string("the ") + what + " is NULL");
    return s;
}

cairn_state& state_arg(const cairn_state* state)
{
    require(state != nullptr, "the state is NULL");
    return const_cast<cairn_state&>(*state);
}

// The group `name` of `state`; null when there is none.
RowsBinding* find_group(cairn_state& state, const std::string& name)
{
    for (auto& b : state.bindings)
        if (auto* r = dynamic_cast<RowsBinding*>(b.get()); r && r->name() == name)
            return r;
    return nullptr;
}

RowsBinding& existing_group(cairn_state& state, const std::string& name)
{
    RowsBinding* g = find_group(state, name);
    require(g != nullptr, "no row group '" + name + "' in this state (cairn_state_add_rows adds one)");
    return *g;
}

} // namespace

namespace cairn::capi {

void add_rows(cairn_state& s, const std::string& g, const std::string& a, int dtype, std::uint64_t rows,
              const Shape& row_shape, void* data, RowResize resize)
{
    require(dtype >= 0 && dtype < cairn::dtype_count, cairn::capi::dtype_error(dtype));
    require(row_shape.size() < CAIRN_MAX_NDIM, "row array '" + g + "." + a + "': " +
                                                   std::to_string(row_shape.size()) + " trailing dimensions, at most " +
                                                   std::to_string(CAIRN_MAX_NDIM - 1));
    cairn::capi::settle_staged(s);
    if (RowsBinding* existing = find_group(s, g)) {
        existing->group.add(a, static_cast<cairn::DType>(dtype), data, rows, row_shape, std::move(resize));
        return;
    }
    auto b = std::make_unique<RowsBinding>(g);
    b->group.add(a, static_cast<cairn::DType>(dtype), data, rows, row_shape, std::move(resize));
    s.bindings.reserve(s.bindings.size() + 1);
    cairn::add_rows(s.dict, g, b->group);
    s.bindings.push_back(std::move(b));
}

RowGroup& row_group(cairn_state& state, const std::string& group) { return existing_group(state, group).group; }

} // namespace cairn::capi

int cairn_state_add_rows(cairn_state_t* state, const char* group, const char* array, int dtype, uint64_t rows,
                         int row_ndim, const int64_t* row_shape, void* data, cairn_rows_resize_fn resize, void* user)
{
    return guarded("cairn_state_add_rows", [&] {
        cairn_state& s = state_arg(state);
        const std::string g = text_arg(group, "row group name"), a = text_arg(array, "row array name");
        require(row_ndim >= 0 && row_ndim < CAIRN_MAX_NDIM,
                "row array '" + g + "." + a + "': row_ndim " + std::to_string(row_ndim) + " is not in 0.." +
                    std::to_string(CAIRN_MAX_NDIM - 1));
        require(row_ndim == 0 || row_shape != nullptr, "row array '" + g + "." + a + "': row_shape is NULL");
        cairn::RowResize fn;
        if (resize) {
            const std::string name = a;
            fn = [resize, user, name](std::uint64_t n) { return resize(name.c_str(), n, user); };
        }
        cairn::capi::add_rows(s, g, a, dtype, rows, cairn::Shape(row_shape, row_shape + row_ndim), data,
                              std::move(fn));
    });
}

int cairn_state_rows_split_counts(cairn_state_t* state, const char* group, uint64_t rows)
{
    return guarded("cairn_state_rows_split_counts", [&] {
        cairn_state& s = state_arg(state);
        existing_group(s, text_arg(group, "row group name")).group.split_counts(rows);
    });
}

int cairn_state_rows_split(cairn_state_t* state, const char* group, cairn_rows_split_fn split, void* user)
{
    return guarded("cairn_state_rows_split", [&] {
        cairn_state& s = state_arg(state);
        RowsBinding& b = existing_group(s, text_arg(group, "row group name"));
        if (!split)
            b.group.split_even();
        else
            b.group.split([split, user](std::uint64_t n, int rank, int size) { return split(n, rank, size, user); });
    });
}

int cairn_state_rows(const cairn_state_t* state, const char* group, uint64_t* local_rows, uint64_t* offset,
                     uint64_t* global_rows)
{
    return guarded("cairn_state_rows", [&] {
        cairn_state& s = state_arg(state);
        const RowsBinding& b = existing_group(s, text_arg(group, "row group name"));
        if (local_rows)
            *local_rows = b.group.local_rows();
        if (offset)
            *offset = b.group.row_offset();
        if (global_rows)
            *global_rows = b.group.global_rows();
    });
}
