// Private: the C API's handles and its error plumbing, shared by capi.cpp
// (the public C functions) and fortran_support.cpp (the cairn_f_* helpers of
// the Fortran module).
#pragma once

#include "cairn/cairn.h"
#include "cairn/checkpoint.hpp"
#include "cairn/errors.hpp"
#include "cairn/manager.hpp"
#include "cairn/planner.hpp"
#include "cairn/state_dict.hpp"

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace cairn::capi {

/// An entry whose memory is not handed to the C++ state dict as is: Cairn
/// saves from and loads into a copy owned by the handle (byte blobs, strings,
/// Fortran default-kind logicals), and the binding moves values between that
/// copy and the caller's memory.
class Binding {
public:
    explicit Binding(std::string name) : m_name(std::move(name)) {}
    virtual ~Binding() = default;
    const std::string& name() const noexcept { return m_name; }
    /// Local, before a save: copies the caller's values into the handle's
    /// copy. Throws error::WrongAPIUsage (agreed between the ranks by the caller).
    virtual void before_save() = 0;
    /// Local, at the end of a load (inside Cairn's error agreement): copies
    /// the loaded values to the caller. Throws error::WrongAPIUsage.
    virtual void after_load() = 0;

private:
    std::string m_name;
};

} // namespace cairn::capi

/// The C handle of a state dict.
struct cairn_state {
    cairn::StateDict dict;
    std::vector<std::unique_ptr<cairn::capi::Binding>> bindings;
    std::vector<std::string> missing; ///< of the last load
    std::vector<std::string> skipped; ///< of the last load
    /// `staged` of the last async save of this state (cairn_async_save):
    /// until it is ready, the background thread may read the bindings'
    /// copies, so every call that changes the state waits for it first.
    std::shared_future<void> async_staged;
};

struct cairn_save_options {
    cairn::SaveOptions options;
};

struct cairn_load_options {
    cairn::LoadOptions options;
};

struct cairn_manager_options {
    cairn::ManagerOptions options;
};

struct cairn_metadata {
    cairn::Metadata metadata;
    std::vector<const std::pair<const std::string, cairn::EntryMeta>*> entries; ///< in name order
};

namespace cairn::capi {

/// Records a failure of the calling thread (code and message) and returns the code.
int fail(int code, const std::string& message) noexcept;

/// The C code of an exception in flight (call inside a catch block) after
/// recording it with `function` as a prefix of the message.
int fail_current(const char* function) noexcept;

/// Runs `f`, turning any exception into an error code and message.
template <class F>
int guarded(const char* function, F&& f) noexcept
{
    try {
        f();
        return CAIRN_SUCCESS;
    } catch (...) {
        return fail_current(function);
    }
}

/// "invalid dtype code <dtype> (...)": the message for a dtype that is not a
/// cairn_dtype_t value. The C functions take dtypes as int and check them
/// before converting to an enum (an out-of-range enum value is undefined
/// behaviour in C++).
std::string dtype_error(int dtype);

/// Throws error::WrongAPIUsage("<what>") when `cond` is false.
void require(bool cond, const std::string& what);

/// Adds an array of the Fortran module: like cairn_state_add_array, with the
/// strides computed from element addresses and an optional conversion of
/// logicals. See cairn_f_state_add_array.
void add_array(cairn_state& state, const std::string& name, int dtype, int ndim, const std::int64_t* global_shape,
               const std::int64_t* offsets, const std::int64_t* shape, void* data, const std::int64_t* strides,
               std::size_t elem_size, const void* true_value, const void* false_value,
               MemorySpace space = MemorySpace::host);

/// Adds a scalar, with an optional conversion of logicals.
void add_scalar(cairn_state& state, const std::string& name, int dtype, void* value, std::size_t elem_size,
                const void* true_value, const void* false_value);

/// Adds a string held in `buffer` of `capacity` bytes: NUL-terminated (C) or
/// blank-padded (Fortran).
void add_string(cairn_state& state, const std::string& name, char* buffer, std::size_t capacity, bool fortran);

/// Waits until no async save reads from `state` any more (its staged()).
void settle_staged(cairn_state& state) noexcept;

/// Local checks of a communicator (MPI initialized, not MPI_COMM_NULL).
int check_communicator(const char* function, MPI_Comm comm) noexcept;

/// Agrees an argument error between the ranks of `comm` (one
/// MPI_Allreduce): when any rank has `code` != CAIRN_SUCCESS, every rank
/// returns the code of the lowest such rank with "<function>: rank <r>
/// (arguments): <message>". Collective.
int agree(const char* function, MPI_Comm comm, int code, const std::string& message) noexcept;

/// Before a collective save of the C API: checks `comm`, waits for an async
/// save still staging from `state`, copies the bindings' values (blobs,
/// strings, logicals) and agrees an argument error (`arg_error`, a NULL
/// state, a blob over its capacity) between the ranks. Collective.
int prepare_save(const char* function, cairn_state* state, MPI_Comm comm, std::string arg_error) noexcept;

/// The same before a collective load (no copies).
int prepare_load(const char* function, cairn_state* state, MPI_Comm comm, std::string arg_error) noexcept;

/// Load options with the C API's planner, which copies loaded values to the
/// bindings' memory inside the load's error agreement; clears the state's
/// lists of missing and skipped keys.
LoadOptions load_options_for(cairn_state& state, const cairn_load_options* options);

/// A string argument of a collective call (checkpoint id, root directory):
/// copied into `out`; NULL leaves it empty and sets `bad` to "the <what> is
/// NULL", the argument error that the call then agrees on between the ranks.
/// Nonzero only when the copy fails (out of memory), as `function`'s error.
int string_arg(const char* function, const char* s, const char* what, std::string& out, std::string& bad) noexcept;

/// The collective save and load of the C API and the Fortran module.
/// `arg_error` is a local argument error found by the caller (empty: none):
/// it is agreed between the ranks first, so that a bad argument on one rank
/// fails the call on every rank instead of hanging the others.
int save(const char* function, cairn_state* state, const std::string* checkpoint_id, MPI_Comm comm,
         const cairn_save_options* options, cairn_save_result_t* result, std::string arg_error) noexcept;
int load(const char* function, cairn_state* state, const std::string* checkpoint_id, MPI_Comm comm,
         const cairn_load_options* options, cairn_load_result_t* result, std::string arg_error) noexcept;
/// cairn_verify (also from the Fortran module); `arg_error` as for save().
int verify(const char* function, const std::string& checkpoint_id, MPI_Comm comm, const cairn_load_options* options,
           cairn_verify_result_t* result, std::string arg_error) noexcept;

/// cairn_async_save and cairn_manager_create with the checkpoint id / root
/// as a string (also from the Fortran module); `arg_error` as for save().
int async_save(const char* function, cairn_state* state, const std::string& checkpoint_id, MPI_Comm comm,
               const cairn_save_options* options, cairn_async_save_t** handle, std::string arg_error) noexcept;
int manager_create(const char* function, const std::string* root, MPI_Comm comm,
                   const cairn_manager_options_t* options, cairn_manager_t** manager, std::string arg_error) noexcept;

} // namespace cairn::capi
