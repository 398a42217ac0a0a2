// Cairn: the state dict, the description of what one rank holds.
#pragma once

#include "cairn/box.hpp"
#include "cairn/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace cairn {

/// Where the memory of a shard lives.
///  - host: memory the CPU reads and writes (pageable or page-locked).
///  - cuda: memory a CUDA device can access (cudaMalloc, managed, or
///    page-locked host memory), staged through page-locked host buffers of
///    the staging bound, in both layouts. Call cudaSetDevice before adding
///    such a shard: Cairn's buffers and stream belong to the current device.
///    Where a device is usable, StateDict::add_array throws
///    error::WrongAPIUsage for pageable host memory declared cuda; where none
///    is (or without CAIRN_USE_CUDA), save and load throw it on every rank.
///    Cairn copies on a stream of its own, created non-blocking (it does not
///    wait for the legacy default stream): work that writes the memory must
///    be complete before save or async_save is called (cudaStreamSynchronize,
///    cudaDeviceSynchronize, Kokkos::fence), and the memory may be written
///    again once save returns or async_save's staged future is ready. load's
///    copies into device memory are complete when it returns.
enum class MemorySpace : std::uint8_t { host = 0, cuda = 1 };

/// The part of a global N-d array that this rank holds.
///
/// `box` (offsets + shape inside `global_shape`) is what this rank saves or
/// loads. The local buffer starts at `data` (the element at `box.offsets`) and
/// is addressed with `strides` (in elements, outermost first); empty strides
/// mean a dense row-major buffer of `box.shape`. Strides larger than dense
/// describe a window into a larger local array, e.g. the interior of a field
/// with ghost cells: the ghosts are neither saved nor overwritten on load.
///
/// Several ranks holding the same box hold a replicated array: it is stored
/// once. A shard with an empty box takes part in validation and writes nothing.
/// A rank may hold several shards (boxes) of one array, each with its own
/// buffer, strides and memory space (StateDict::add_array).
struct ArrayShard {
    DType dtype = DType::f64;
    Shape global_shape;
    Box box;
    void* data = nullptr;
    Shape strides;
    MemorySpace space = MemorySpace::host;

    /// Effective element strides (dense row-major when `strides` is empty).
    Shape effective_strides() const;
    /// The local buffer as a strided view.
    StridedView view() const;
};

class StateDict;

/// An object that checkpoints itself through a state dict (as torch's
/// `Stateful`). On save Cairn calls `state_dict()` and saves its entries under
/// "<name>."; on load it calls `state_dict()` to get the destinations, loads
/// into them, then calls `load_state_dict()` with the same dict.
class Stateful {
public:
    virtual ~Stateful() = default;
    virtual StateDict state_dict() = 0;
    virtual void load_state_dict(StateDict& state) = 0;
};

/// A scalar value bound to a variable of the caller. Save reads it, load writes it.
struct ScalarRef {
    DType dtype;
    void* data;
};

/// One entry of a state dict. Pointers are not owned: the caller keeps the
/// referenced objects alive for the duration of a save or load.
using Entry =
    std::variant<ArrayShard, std::vector<std::byte>*, ScalarRef, std::string*, Stateful*, std::shared_ptr<StateDict>>;

/// An ordered map from names to entries: arrays, byte blobs, scalars, strings,
/// Stateful objects and nested dicts. Names of nested entries are joined with
/// '.' ("fluid.velocity"). Names must be non-empty and unique after
/// flattening, but for the boxes of one array: each box of an array is an
/// entry of its own under the array's name (entries() lists them in the
/// order they were added). Building a state dict is Local and does no I/O.
class StateDict {
public:
    /// Adds an array shard. Called again with the name of an array already
    /// added, it adds another box of that array, held in its own buffer (any
    /// number of boxes per rank: tiles, AMR patches, block-cyclic blocks).
    /// The boxes of one array must have the same dtype and global shape.
    /// Saved boxes must be disjoint, on a rank and across ranks (but for
    /// identical boxes on different ranks, replicas), or the save throws
    /// error::WrongAPIUsage naming the array and the two boxes; load boxes
    /// may overlap (each is filled). Throws error::WrongAPIUsage when the
    /// name is empty or taken by another kind of entry, the dtype or global
    /// shape differs from the array's boxes added before (the message names
    /// both), or the shard is inconsistent (rank of offsets, shape, strides
    /// and global shape differ; box outside the global shape; negative
    /// extents; null data for a non-empty box).
    StateDict& add_array(const std::string& name, const ArrayShard& shard);

    /// Adds the shard `box` of a global array of `global_shape`, held in a
    /// buffer of T starting at the box's first element with element `strides`
    /// (empty: dense). Host memory.
    template <class T>
    StateDict& add_array(const std::string& name, T* data, const Shape& global_shape, const Box& box,
                         const Shape& strides = {})
    {
        return add_array(name, ArrayShard{dtype_of<T>, global_shape, box, const_cast<std::remove_const_t<T>*>(data),
                                          strides, MemorySpace::host});
    }

    /// Adds a whole array held (identically) by every rank that adds it: a
    /// replicated array, stored once.
    template <class T>
    StateDict& add_replicated(const std::string& name, T* data, const Shape& shape)
    {
        return add_array(name, data, shape, whole(shape));
    }

    /// Adds a byte blob: saved from its current contents, resized and filled on load.
    StateDict& add_bytes(const std::string& name, std::vector<std::byte>* blob);

    /// Adds a scalar bound to `*value` (any arithmetic type, or bool).
    template <class T>
    StateDict& add_scalar(const std::string& name, T* value)
    {
        return add_scalar_ref(name, ScalarRef{dtype_of<T>, const_cast<std::remove_const_t<T>*>(value)});
    }
    StateDict& add_scalar_ref(const std::string& name, ScalarRef ref);

    /// Adds a string: saved from `*value`, assigned on load.
    StateDict& add_string(const std::string& name, std::string* value);

    /// Adds a Stateful object; its entries are named "<name>.<entry>".
    StateDict& add_stateful(const std::string& name, Stateful* object);

    /// Adds a nested dict; its entries are named "<name>.<entry>".
    StateDict& add_dict(const std::string& name, StateDict dict);

    /// Entries in insertion order (each box of an array is an entry).
    const std::vector<std::pair<std::string, Entry>>& entries() const noexcept { return m_entries; }
    std::vector<std::pair<std::string, Entry>>& entries() noexcept { return m_entries; }
    bool contains(const std::string& name) const noexcept;
    /// The number of boxes of array `name` (other entries: 1; absent: 0).
    std::size_t boxes(const std::string& name) const noexcept;
    std::size_t size() const noexcept { return m_entries.size(); }

private:
    StateDict& add(const std::string& name, Entry entry);
    std::vector<std::pair<std::string, Entry>> m_entries;
    std::map<std::string, std::size_t> m_index;
};

} // namespace cairn
