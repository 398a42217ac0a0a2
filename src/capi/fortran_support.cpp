// The C helpers behind the Fortran module (src/capi/cairn_fortran.h).
#include "capi/cairn_fortran.h"
#include "capi/capi_internal.hpp"
#include "capi/capi_rows.hpp"

#include "cairn/dtype.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using cairn::capi::guarded;
using cairn::capi::require;

static_assert(sizeof(MPI_Fint) == sizeof(int), "the Fortran module passes MPI_Fint as integer(c_int)");

namespace {

std::string fstring(const char* s, std::size_t len, const char* what)
{
    require(s != nullptr || len == 0, std::string(what) + " is NULL");
    return std::string(s, len);
}

cairn_state& state_arg(cairn_state_t* state)
{
    require(state != nullptr, "the state is not created (call cairn_state_create first)");
    return *state;
}

// MPI_Comm_f2c needs MPI; without it, MPI_COMM_NULL, which cairn::capi::save
// and load report.
MPI_Comm comm_arg(MPI_Fint comm)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized ? MPI_Comm_f2c(comm) : MPI_COMM_NULL;
}

// The arguments every array of the module starts with: the state, the
// entry's name, "array '<name>': " for errors, and the rank (1..CAIRN_MAX_NDIM).
struct ArrayArgs {
    cairn_state& state;
    std::string name;
    std::string what;
    std::size_t nd;
};

ArrayArgs array_args(cairn_state_t* state, const char* name, std::size_t name_len, int ndim)
{
    cairn_state& s = state_arg(state);
    std::string n = fstring(name, name_len, "the entry name");
    std::string what = "array '" + n + "': ";
    require(ndim >= 1 && ndim <= CAIRN_MAX_NDIM, what + "invalid rank " + std::to_string(ndim));
    return {s, std::move(n), std::move(what), static_cast<std::size_t>(ndim)};
}

// The global shape and offsets of a Fortran array of extents `shape`, in
// Fortran order = Cairn order: `global_len` -1, replicated (the global shape
// is the array's, offsets must be absent); `offsets_len` -1, offsets all 0.
// `what` ("array 'u': ") starts every error.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>
global_and_offsets(const std::string& what, std::size_t nd, const std::int64_t* shape, const std::int64_t* global_shape,
                   int global_len, const std::int64_t* offsets, int offsets_len)
{
    const int ndim = static_cast<int>(nd);
    std::vector<std::int64_t> gs(shape, shape + nd), off(nd, 0);
    if (global_len < 0) {
        require(offsets_len < 0, what + "offsets given without a global shape");
    } else {
        require(global_len == ndim, what + "the global shape has " + std::to_string(global_len) +
                                        " extents, the array has rank " + std::to_string(ndim));
        gs.assign(global_shape, global_shape + nd);
    }
    if (offsets_len >= 0) {
        require(offsets_len == ndim,
                what + "offsets has " + std::to_string(offsets_len) + " values, the array has rank " +
                    std::to_string(ndim));
        off.assign(offsets, offsets + nd);
    }
    return {std::move(gs), std::move(off)};
}

} // namespace

namespace {
// Calls `set(options, key, value)` with NUL-terminated copies of the Fortran
// strings (value NULL without one).
template <class Options, class Set>
int set_hint(const char* function, Options* options, const char* key, size_t key_len, const char* value,
             size_t value_len, int has_value, Set set)
{
    std::string k, v;
    if (int rc = guarded(function, [&] {
            k.assign(key ? key : "", key ? key_len : 0);
            if (has_value)
                v.assign(value ? value : "", value ? value_len : 0);
        }))
        return rc;
    return set(options, k.c_str(), has_value ? v.c_str() : nullptr);
}
} // namespace

extern "C" {

int cairn_f_state_add_array(cairn_state_t* state, const char* name, size_t name_len, int dtype, int ndim,
                            const int64_t* shape, void* base, void* const* next, size_t elem_size,
                            const int64_t* global_shape, int global_len, const int64_t* offsets, int offsets_len,
                            const void* true_value, const void* false_value)
{
    return guarded("cairn_state_add_array", [&] {
        const auto [s, n, what, nd] = array_args(state, name, name_len, ndim);
        require(cairn::dtype_valid(dtype), what + cairn::capi::dtype_error(dtype));
        require((true_value == nullptr) == (false_value == nullptr), what + "give both logical patterns or neither");
        if (!true_value)
            require(elem_size == cairn::dtype_size(cairn::DType(dtype)),
                    what + "elements of " + std::to_string(elem_size) + " bytes for dtype " +
                        std::string(cairn::dtype_name(cairn::DType(dtype))));
        require(elem_size > 0, what + "zero element size");

        const auto [gs, off] = global_and_offsets(what, nd, shape, global_shape, global_len, offsets, offsets_len);

        // Element strides from the addresses of neighbouring elements.
        std::int64_t volume = 1;
        for (std::size_t d = 0; d < nd; ++d)
            volume *= shape[d];
        std::vector<std::int64_t> strides(nd, 0);
        std::int64_t dense = 1;
        for (std::size_t d = 0; d < nd; ++d) {
            strides[d] = dense;
            if (volume > 0 && shape[d] >= 2) {
                require(base != nullptr && next != nullptr && next[d] != nullptr,
                        what + "missing element address along dimension " + std::to_string(d + 1));
                const std::ptrdiff_t bytes = static_cast<const char*>(next[d]) - static_cast<const char*>(base);
                const auto es = static_cast<std::ptrdiff_t>(elem_size);
                require(bytes > 0 && bytes % es == 0,
                        what + "dimension " + std::to_string(d + 1) + " has a stride of " + std::to_string(bytes) +
                            " bytes; Cairn needs positive strides, a multiple of the element size (no reversed "
                            "sections)");
                strides[d] = bytes / es;
            }
            dense *= std::max<std::int64_t>(shape[d], 1);
        }
        cairn::capi::add_array(s, n, dtype, ndim, gs.data(), off.data(), shape, volume > 0 ? base : nullptr,
                               strides.data(), elem_size, true_value, false_value);
    });
}

int cairn_f_state_add_device_array(cairn_state_t* state, const char* name, size_t name_len, int dtype, int ndim,
                                   const int64_t* shape, void* data, const int64_t* strides, int strides_len,
                                   const int64_t* global_shape, int global_len, const int64_t* offsets,
                                   int offsets_len)
{
    return guarded("cairn_state_add_device_array", [&] {
        const auto [s, n, what, nd] = array_args(state, name, name_len, ndim);
        const auto [gs, off] = global_and_offsets(what, nd, shape, global_shape, global_len, offsets, offsets_len);
        // Element strides: given, or those of a dense column-major array.
        std::vector<std::int64_t> st(nd, 1);
        if (strides_len >= 0) {
            require(strides_len == ndim, what + "strides has " + std::to_string(strides_len) +
                                             " values, the array has rank " + std::to_string(ndim));
            st.assign(strides, strides + nd);
        } else {
            for (std::size_t d = 1; d < nd; ++d)
                st[d] = st[d - 1] * std::max<std::int64_t>(shape[d - 1], 1);
        }
        cairn::capi::add_array(s, n, dtype, ndim, gs.data(), off.data(), shape, data, st.data(), 0, nullptr, nullptr,
                               cairn::MemorySpace::cuda);
    });
}

int cairn_f_state_add_scalar(cairn_state_t* state, const char* name, size_t name_len, int dtype, void* value,
                             size_t elem_size, const void* true_value, const void* false_value)
{
    return guarded("cairn_state_add_scalar", [&] {
        cairn_state& s = state_arg(state);
        const std::string n = fstring(name, name_len, "the entry name");
        require((true_value == nullptr) == (false_value == nullptr),
                "scalar '" + n + "': give both logical patterns or neither");
        cairn::capi::add_scalar(s, n, dtype, value, elem_size, true_value, false_value);
    });
}

int cairn_f_state_add_string(cairn_state_t* state, const char* name, size_t name_len, char* buffer, size_t len)
{
    return guarded("cairn_state_add_string", [&] {
        cairn::capi::add_string(state_arg(state), fstring(name, name_len, "the entry name"), buffer, len, true);
    });
}

int cairn_f_state_add_bytes(cairn_state_t* state, const char* name, size_t name_len, void* data, size_t capacity,
                            size_t* size)
{
    std::string n;
    if (int rc = guarded("cairn_state_add_bytes", [&] { n = fstring(name, name_len, "the entry name"); }))
        return rc;
    return cairn_state_add_bytes(state, n.c_str(), data, capacity, size);
}

int cairn_f_usage_error(const char* function, size_t function_len, const char* message, size_t message_len)
{
    const std::string f = function ? std::string(function, function_len) : std::string("cairn");
    return guarded(f.c_str(), [&] { require(false, message ? std::string(message, message_len) : std::string()); });
}

int cairn_f_save(cairn_state_t* state, const char* path, size_t path_len, MPI_Fint comm,
                 const cairn_save_options_t* options, cairn_save_result_t* result)
{
    std::string id, bad;
    if (int rc = guarded("cairn_save", [&] { id.assign(path ? path : "", path ? path_len : 0); }))
        return rc;
    if (!state)
        bad = "the state is not created (call cairn_state_create first)";
    return cairn::capi::save("cairn_save", state, &id, comm_arg(comm), options, result, std::move(bad));
}

int cairn_f_save_options_set_hint(cairn_save_options_t* options, int layout, const char* key, size_t key_len,
                                  const char* value, size_t value_len, int has_value)
{
    const bool per_rank = layout == CAIRN_LAYOUT_PER_RANK;
    return set_hint(per_rank ? "cairn_save_options_set_per_rank_hint" : "cairn_save_options_set_container_hint",
                    options, key, key_len, value, value_len, has_value,
                    per_rank ? cairn_save_options_set_per_rank_hint : cairn_save_options_set_container_hint);
}

int cairn_f_load_options_set_hint(cairn_load_options_t* options, int layout, const char* key, size_t key_len,
                                  const char* value, size_t value_len, int has_value)
{
    const bool per_rank = layout == CAIRN_LAYOUT_PER_RANK;
    return set_hint(per_rank ? "cairn_load_options_set_per_rank_hint" : "cairn_load_options_set_container_hint",
                    options, key, key_len, value, value_len, has_value,
                    per_rank ? cairn_load_options_set_per_rank_hint : cairn_load_options_set_container_hint);
}

int cairn_f_load(cairn_state_t* state, const char* path, size_t path_len, MPI_Fint comm,
                 const cairn_load_options_t* options, cairn_load_result_t* result)
{
    std::string id, bad;
    if (int rc = guarded("cairn_load", [&] { id.assign(path ? path : "", path ? path_len : 0); }))
        return rc;
    if (!state)
        bad = "the state is not created (call cairn_state_create first)";
    return cairn::capi::load("cairn_load", state, &id, comm_arg(comm), options, result, std::move(bad));
}

int cairn_f_verify(const char* path, size_t path_len, MPI_Fint comm, const cairn_load_options_t* options,
                   cairn_verify_result_t* result)
{
    std::string id;
    if (int rc = guarded("cairn_verify", [&] { id.assign(path ? path : "", path ? path_len : 0); }))
        return rc;
    return cairn::capi::verify("cairn_verify", id, comm_arg(comm), options, result, {});
}

int cairn_f_metadata_read(const char* path, size_t path_len, cairn_metadata_t** metadata)
{
    std::string id;
    if (int rc = guarded("cairn_metadata_read", [&] { id = fstring(path, path_len, "the checkpoint id"); }))
        return rc;
    return cairn_metadata_read(id.c_str(), metadata);
}

int cairn_f_metadata_find(const cairn_metadata_t* metadata, const char* name, size_t name_len, size_t* index)
{
    std::string n;
    if (int rc = guarded("cairn_metadata_find", [&] { n = fstring(name, name_len, "the entry name"); }))
        return rc;
    return cairn_metadata_find(metadata, n.c_str(), index);
}

int cairn_f_async_save(cairn_state_t* state, const char* path, size_t path_len, MPI_Fint comm,
                       const cairn_save_options_t* options, cairn_async_save_t** handle)
{
    std::string id, bad;
    if (int rc = guarded("cairn_async_save", [&] { id.assign(path ? path : "", path ? path_len : 0); }))
        return rc;
    if (!state)
        bad = "the state is not created (call cairn_state_create first)";
    return cairn::capi::async_save("cairn_async_save", state, id, comm_arg(comm), options, handle, std::move(bad));
}

int cairn_f_manager_create(const char* root, size_t root_len, MPI_Fint comm, const int* keep_last,
                           const int64_t* keep_every, const int* async, const int* layout,
                           const cairn_save_options_t* save_options, const char* local_dir, const char* redundancy,
                           const int* local_keep_last, const int* flush_every, const int* ranks_per_node,
                           cairn_manager_t** manager)
{
    std::string r, bad;
    cairn_manager_options o;
    if (int rc = guarded("cairn_manager_create", [&] {
            r.assign(root ? root : "", root ? root_len : 0);
            if (keep_last)
                o.options.keep_last = *keep_last; // checked by the manager, on every rank
            if (keep_every)
                o.options.keep_every = *keep_every;
            if (async)
                o.options.async = *async != 0;
            if (layout) {
                if (*layout == CAIRN_LAYOUT_CONTAINER)
                    o.options.layout = cairn::Layout::container;
                else if (*layout != CAIRN_LAYOUT_PER_RANK)
                    bad = "invalid layout " + std::to_string(*layout) +
                          " (CAIRN_LAYOUT_PER_RANK = 0 or CAIRN_LAYOUT_CONTAINER = 1)";
            }
            if (save_options)
                o.options.save_options = save_options->options;
            // The node-local level, through the C setters: a refused value
            // is this rank's argument error, agreed on by every rank.
            const auto set = [&](int code) {
                if (code != CAIRN_SUCCESS && bad.empty())
                    bad = cairn_last_error();
            };
            if (local_dir)
                set(cairn_manager_options_set_local_dir(&o, local_dir));
            if (redundancy)
                set(cairn_manager_options_set_redundancy(&o, redundancy));
            if (local_keep_last)
                set(cairn_manager_options_set_local_keep_last(&o, *local_keep_last));
            if (flush_every)
                set(cairn_manager_options_set_flush_every(&o, *flush_every));
            if (ranks_per_node)
                set(cairn_manager_options_set_ranks_per_node(&o, *ranks_per_node));
        }))
        return rc;
    return cairn::capi::manager_create("cairn_manager_create", &r, comm_arg(comm), &o, manager, std::move(bad));
}

} // extern "C"

// ---- rows that vary per rank, may_be_missing ----

int cairn_f_state_add_rows(cairn_state_t* state, const char* group, size_t group_len, const char* array,
                           size_t array_len, int dtype, int64_t rows, int row_ndim, const int64_t* row_shape,
                           void* data, cairn_f_rows_resize_fn resize, void* user)
{
    return guarded("cairn_state_add_rows", [&] {
        cairn_state& s = state_arg(state);
        const std::string g = fstring(group, group_len, "the row group name");
        const std::string a = fstring(array, array_len, "the row array name");
        const std::string what = "row array '" + g + "." + a + "': ";
        require(rows >= 0, what + "negative rows " + std::to_string(rows));
        require(row_ndim >= 0 && row_ndim < CAIRN_MAX_NDIM, what + "invalid row rank " + std::to_string(row_ndim));
        require(row_ndim == 0 || row_shape != nullptr, what + "row_shape is NULL");
        // Fortran x(3, n): rows are the last (slowest) dimension, so the row
        // shape in C order is the Fortran one reversed.
        cairn::Shape shape(row_shape, row_shape + row_ndim);
        std::reverse(shape.begin(), shape.end());
        cairn::RowResize fn;
        if (resize)
            fn = [resize, user](std::uint64_t n) { return resize(static_cast<int64_t>(n), user); };
        cairn::capi::add_rows(s, g, a, dtype, static_cast<std::uint64_t>(rows), shape, data, std::move(fn));
    });
}

int cairn_f_state_rows_split_counts(cairn_state_t* state, const char* group, size_t group_len, int64_t rows)
{
    return guarded("cairn_state_rows_split_counts", [&] {
        const std::string g = fstring(group, group_len, "the row group name");
        require(rows >= 0, "row group '" + g + "': negative rows " + std::to_string(rows));
        cairn::capi::row_group(state_arg(state), g).split_counts(static_cast<std::uint64_t>(rows));
    });
}

int cairn_f_state_rows(cairn_state_t* state, const char* group, size_t group_len, int64_t* local_rows,
                       int64_t* offset, int64_t* global_rows)
{
    return guarded("cairn_state_rows", [&] {
        const cairn::RowGroup& g =
            cairn::capi::row_group(state_arg(state), fstring(group, group_len, "the row group name"));
        if (local_rows)
            *local_rows = static_cast<int64_t>(g.local_rows());
        if (offset)
            *offset = static_cast<int64_t>(g.row_offset());
        if (global_rows)
            *global_rows = static_cast<int64_t>(g.global_rows());
    });
}

int cairn_f_load_options_add_may_be_missing(cairn_load_options_t* options, const char* key, size_t key_len)
{
    std::string k;
    if (int rc = guarded("cairn_load_options_add_may_be_missing", [&] { k = fstring(key, key_len, "the key"); }))
        return rc;
    return cairn_load_options_add_may_be_missing(options, k.c_str());
}
