// Cairn: Kokkos::View adapter. Header-only and opt-in: it is not part of the
// umbrella cairn/cairn.hpp. Link the CMake target Cairn::kokkos (Cairn::cairn
// plus Kokkos::kokkos) to use it; it is defined when Cairn was configured with
// Kokkos (CAIRN_USE_KOKKOS=ON or AUTO and Kokkos found).
//
// A Kokkos::View of rank 0 to 8, of any layout (LayoutRight, LayoutLeft,
// LayoutStride subviews) and any memory space Cairn can read, is added to a
// StateDict as the shard of a global array. No data is copied by the adapter:
// the shard is the view's data pointer with the view's own element strides,
// and save / load gather and scatter through those strides.
//
// Index order (the mapping to the global array, the same for every layout):
//
//   The global array's dimensions are the view's dimensions in index order.
//   Element view(i0, i1, ..., iR-1) is element
//   [offsets[0] + i0][offsets[1] + i1]...[offsets[R-1] + iR-1] of the global
//   array, whatever the view's layout. Checkpoints store every chunk
//   row-major over this index order (docs/FORMAT.md), so:
//   - a LayoutRight view is stored in its memory order;
//   - a LayoutLeft view (column-major: i0 varies fastest in memory, the
//     default layout of Kokkos' CUDA and HIP spaces and the order of Fortran
//     arrays) is stored with its index order kept, i.e. in the reverse of its
//     memory order; a Fortran-order view v(i,j) reads back in h5py / numpy as
//     a[i, j], and a checkpoint saved from LayoutLeft views loads into
//     LayoutRight views, plain C buffers or subviews, and vice versa.
//   LayoutLeft and strided shards are gathered (on save) and scattered (on
//   load) element by element through the view's strides, which costs more
//   than the contiguous runs of a LayoutRight view but needs no extra copy of
//   the field.
//
// Ghost cells: add the subview of the owned cells, e.g.
//
//   Kokkos::View<double**> t("t", lnx + 2, lny + 2);          // one ghost layer
//   auto interior = Kokkos::subview(t, Kokkos::pair<int, int>(1, lnx + 1),
//                                      Kokkos::pair<int, int>(1, lny + 1));
//   cairn::kokkos::add_view(state, "temperature", interior, {nx, ny}, {i0, j0});
//
// The ghost layers are neither saved nor overwritten by a load.
//
// Several views per rank: add_view called again with the same name adds
// another box of the array, a view of its own (tiles, AMR patches), of any
// layout and memory space; the views of one array share its element type
// and global shape. Saved boxes must be disjoint; load boxes may overlap
// (StateDict::add_array).
//
//   for (auto& tile : tiles)   // each tile a View of its own
//       cairn::kokkos::add_view(state, "temperature", tile.interior, {nx, ny}, {tile.i0, tile.j0});
//
// Memory spaces: views in a host-accessible space (HostSpace, and e.g.
// CudaUVMSpace, CudaHostPinnedSpace) are MemorySpace::host. Views only the
// device can access are MemorySpace::cuda when Kokkos' CUDA backend is enabled
// and the space is CUDA memory; save / load need a Cairn built with CUDA
// staging for them. Other device-only spaces (HIP, SYCL, ...) are rejected
// with error::WrongAPIUsage.
//
// Rows that vary per rank (particles): add_rows() adds a view to a
// cairn::RowGroup; load reallocates it to this rank's share of the rows.
//
// Synchronisation and lifetime: the state dict keeps a raw pointer. Keep the
// view (its allocation) alive while the state dict is used, and call
// Kokkos::fence() before a save so that kernels writing the view are done. A
// load has finished writing the view when it returns.
#pragma once

#if defined(__has_include)
#if !__has_include(<Kokkos_Core.hpp>)
#error "cairn/kokkos.hpp needs Kokkos: link the CMake target Cairn::kokkos (Cairn::cairn and Kokkos::kokkos)"
#endif
#endif

#include "cairn/box.hpp"
#include "cairn/dtype.hpp"
#include "cairn/errors.hpp"
#include "cairn/rows.hpp"
#include "cairn/state_dict.hpp"

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace cairn {
namespace kokkos {

namespace detail {

/// Cairn's memory space of a Kokkos memory space; `what` names the entry in
/// the error. Throws error::WrongAPIUsage for a device-only space Cairn
/// cannot read.
template <class KokkosSpace>
MemorySpace memory_space_of(const std::string& what)
{
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, KokkosSpace>::accessible) {
        (void)what;
        return MemorySpace::host;
    } else {
#if defined(KOKKOS_ENABLE_CUDA)
        if constexpr (Kokkos::SpaceAccessibility<Kokkos::CudaSpace, KokkosSpace>::accessible)
            return MemorySpace::cuda;
#endif
        throw error::WrongAPIUsage(what + ": the view's memory space " + std::string(KokkosSpace::name()) +
                                   " is neither host-accessible nor CUDA memory");
    }
}

/// "[4, 5]" of a view's extents, for messages.
template <class View>
Shape extents_of(const View& view)
{
    Shape e(static_cast<std::size_t>(View::rank));
    for (std::size_t d = 0; d < e.size(); ++d)
        e[d] = static_cast<std::int64_t>(view.extent(d));
    return e;
}

} // namespace detail

/// The shard of a global array of `global_shape` held by `view`: the box
/// starting at `offsets` with the view's extents (in index order, see the
/// top of this header), the view's data pointer and element strides, its
/// dtype and memory space. **Local**, copies no data. Throws
/// error::WrongAPIUsage when the rank of `global_shape` or `offsets` is not
/// the view's rank, or the memory space is not supported. (Whether the box
/// lies inside `global_shape` is checked by StateDict::add_array.)
template <class DataType, class... Properties>
ArrayShard shard(const Kokkos::View<DataType, Properties...>& view, const Shape& global_shape, const Shape& offsets)
{
    using View = Kokkos::View<DataType, Properties...>;
    using T = typename View::non_const_value_type;
    constexpr std::size_t rank = static_cast<std::size_t>(View::rank);
    const std::string what = "Kokkos view '" + view.label() + "' of extents " + shape_str(detail::extents_of(view));
    if (global_shape.size() != rank || offsets.size() != rank)
        throw error::WrongAPIUsage(what + ": a rank-" + std::to_string(rank) +
                                   " view needs a global shape and offsets of " + std::to_string(rank) +
                                   " dimensions, not " + shape_str(global_shape) + " and " + shape_str(offsets));
    ArrayShard s;
    s.dtype = dtype_of<T>;
    s.global_shape = global_shape;
    s.box.offsets = offsets;
    s.box.shape.resize(rank);
    s.strides.resize(rank);
    for (std::size_t d = 0; d < s.box.shape.size(); ++d) { // not `d < rank`: nvcc warns of it for rank 0
        s.box.shape[d] = static_cast<std::int64_t>(view.extent(d));
        s.strides[d] = static_cast<std::int64_t>(view.stride(d));
    }
    s.data = const_cast<T*>(view.data());
    s.space = detail::memory_space_of<typename View::memory_space>(what);
    return s;
}

/// The shard of a replicated array: the whole array, of the view's extents.
/// **Local**, same contract as above.
template <class DataType, class... Properties>
ArrayShard shard(const Kokkos::View<DataType, Properties...>& view)
{
    const Shape extents = detail::extents_of(view);
    return shard(view, extents, Shape(extents.size(), 0));
}

/// Adds `view` to `state` as the box at `offsets` of the global array `name`
/// of `global_shape`; the box's extents are the view's. On save the view's
/// elements are read, on load they are written (ghost cells outside a
/// subview are untouched). Called again with the same name, adds another
/// box of the array (a view per box). **Local**. Throws
/// error::WrongAPIUsage as shard() and StateDict::add_array do (name taken
/// by another kind of entry, another element type or global shape than the
/// array's other boxes, box outside the global shape, ...).
template <class DataType, class... Properties>
StateDict& add_view(StateDict& state, const std::string& name, const Kokkos::View<DataType, Properties...>& view,
                    const Shape& global_shape, const Shape& offsets)
{
    return state.add_array(name, shard(view, global_shape, offsets));
}

/// Adds `view` as a replicated array `name` (the whole array, of the view's
/// extents, held identically by every rank that adds it; stored once).
/// **Local**, same contract as above.
template <class DataType, class... Properties>
StateDict& add_view(StateDict& state, const std::string& name, const Kokkos::View<DataType, Properties...>& view)
{
    return state.add_array(name, shard(view));
}

/// Adds `view` to the row group `group` as the array `name`: rows that vary
/// per rank (cairn/rows.hpp). Its extent(0) is this rank's rows, its other
/// extents the row shape. On load the view is reallocated
/// (Kokkos::realloc, keeping its label; its old contents are dropped) to the
/// rows this rank gets, before anything is read. The view is held by
/// reference and read when each save starts: it may be resized
/// (Kokkos::resize) between saves; keep it alive while the group is used. A LayoutRight (or rank-1) managed view in
/// host-accessible memory. **Local**. Throws error::WrongAPIUsage for a
/// device-only memory space, and as RowGroup::add does.
template <class DataType, class... Properties>
RowGroup& add_rows(RowGroup& group, const std::string& name, Kokkos::View<DataType, Properties...>& view)
{
    using View = Kokkos::View<DataType, Properties...>;
    using T = typename View::non_const_value_type;
    constexpr std::size_t rank = static_cast<std::size_t>(View::rank);
    static_assert(rank >= 1, "cairn::kokkos::add_rows: a view of rank 1 or more (its first extent is the rows)");
    static_assert(rank == 1 || std::is_same_v<typename View::array_layout, Kokkos::LayoutRight>,
                  "cairn::kokkos::add_rows: a LayoutRight view, so that each row is contiguous");
    static_assert(View::traits::is_managed, "cairn::kokkos::add_rows: a managed view (load reallocates it)");
    const std::string what = "Kokkos view '" + view.label() + "' of extents " + shape_str(detail::extents_of(view));
    if (detail::memory_space_of<typename View::memory_space>(what) != MemorySpace::host)
        throw error::WrongAPIUsage(what + ": rows (add_rows) need a host-accessible memory space");
    Shape row_shape;
    for (std::size_t d = 1; d < rank; ++d)
        row_shape.push_back(static_cast<std::int64_t>(view.extent(d)));
    View* v = &view;
    group.add(name, dtype_of<T>, const_cast<T*>(view.data()), static_cast<std::uint64_t>(view.extent(0)), row_shape,
              [v](std::uint64_t rows) -> void* {
                  typename View::array_layout layout = v->layout();
                  layout.dimension[0] = static_cast<std::size_t>(rows);
                  Kokkos::realloc(*v, layout);
                  return const_cast<T*>(v->data());
              });
    // Each save takes the view as it is then (Kokkos::resize between saves is fine).
    return group.source(name, [v]() -> std::pair<void*, std::uint64_t> {
        return {const_cast<T*>(v->data()), static_cast<std::uint64_t>(v->extent(0))};
    });
}

} // namespace kokkos
} // namespace cairn
