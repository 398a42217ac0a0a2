// The C API (include/cairn/cairn.h) over the C++ library. No exception leaves
// this file: every function runs its body through guarded(), which turns an
// exception into an error code and the thread-local message.
#include "capi/capi_internal.hpp"

#include "cairn/dtype.hpp"
#include "cairn/log.hpp"
#include "io/mpi_hints.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

using cairn::capi::Binding;
using cairn::capi::fail;
using cairn::capi::guarded;
using cairn::capi::require;
using cairn::capi::string_arg;

// ---- errors ------------------------------------------------------------------

namespace {

thread_local std::string t_message;
thread_local int t_code = CAIRN_SUCCESS;

// The code of an exception is its cairn::Error::Kind: the enumerations
// hold the same numbers (a kind added in C++ is a code at once; its
// CAIRN_ERR_* name is added to cairn.h, cairn_error_name and the checks here).
constexpr bool same_code(cairn::Error::Kind kind, int code) { return static_cast<int>(kind) == code; }
static_assert(same_code(cairn::Error::Kind::usage, CAIRN_ERR_USAGE), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::mismatch, CAIRN_ERR_MISMATCH), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::read, CAIRN_ERR_READ), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::write, CAIRN_ERR_WRITE), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::format, CAIRN_ERR_FORMAT), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::not_found, CAIRN_ERR_NOT_FOUND), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::integrity, CAIRN_ERR_INTEGRITY), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::concurrent, CAIRN_ERR_CONCURRENT), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::generic, CAIRN_ERR_OTHER), "Error::Kind and CAIRN_ERR_* differ");
static_assert(same_code(cairn::Error::Kind::internal, CAIRN_ERR_INTERNAL), "Error::Kind and CAIRN_ERR_* differ");

// The code and message of the exception in flight, without recording them.
void describe_current(int& code, std::string& message) noexcept
{
    try {
        try {
            throw;
        } catch (const cairn::Error& e) {
            code = static_cast<int>(e.kind());
            message = e.what();
        } catch (const std::bad_alloc&) {
            code = CAIRN_ERR_NO_MEMORY;
            message = "out of memory";
        } catch (const std::exception& e) {
            code = CAIRN_ERR_INTERNAL;
            message = std::string("internal error: ") + e.what();
        } catch (...) {
            code = CAIRN_ERR_INTERNAL;
            message = "internal error: unknown exception";
        }
    } catch (...) { // building the message ran out of memory
        code = CAIRN_ERR_NO_MEMORY;
        message.clear();
    }
}

} // namespace

namespace cairn::capi {

int fail(int code, const std::string& message) noexcept
{
    t_code = code;
    try {
        t_message = message;
    } catch (...) {
        t_message.clear(); // cairn_last_error() falls back on the code's name
    }
    return code;
}

int fail_current(const char* function) noexcept
{
    int code = CAIRN_ERR_INTERNAL;
    std::string message;
    describe_current(code, message);
    try {
        return fail(code, std::string(function) + ": " + message);
    } catch (...) {
        return fail(code, message);
    }
}

void require(bool cond, const std::string& what)
{
    if (!cond)
        throw error::WrongAPIUsage(what);
}

} // namespace cairn::capi

extern "C" {

const char* cairn_last_error(void)
{
    if (t_code != CAIRN_SUCCESS && t_message.empty())
        return cairn_error_name(t_code);
    return t_message.c_str();
}

int cairn_last_error_code(void) { return t_code; }

void cairn_clear_error(void)
{
    t_code = CAIRN_SUCCESS;
    t_message.clear();
}

const char* cairn_error_name(int code)
{
    switch (code) {
    case CAIRN_SUCCESS: return "CAIRN_SUCCESS";
    case CAIRN_ERR_USAGE: return "CAIRN_ERR_USAGE";
    case CAIRN_ERR_MISMATCH: return "CAIRN_ERR_MISMATCH";
    case CAIRN_ERR_READ: return "CAIRN_ERR_READ";
    case CAIRN_ERR_WRITE: return "CAIRN_ERR_WRITE";
    case CAIRN_ERR_FORMAT: return "CAIRN_ERR_FORMAT";
    case CAIRN_ERR_NOT_FOUND: return "CAIRN_ERR_NOT_FOUND";
    case CAIRN_ERR_INTEGRITY: return "CAIRN_ERR_INTEGRITY";
    case CAIRN_ERR_CONCURRENT: return "CAIRN_ERR_CONCURRENT";
    case CAIRN_ERR_OTHER: return "CAIRN_ERR_OTHER";
    case CAIRN_ERR_NO_MEMORY: return "CAIRN_ERR_NO_MEMORY";
    case CAIRN_ERR_INTERNAL: return "CAIRN_ERR_INTERNAL";
    default: return "CAIRN_ERR_UNKNOWN";
    }
}

const char* cairn_version(void) { return cairn::version(); }

size_t cairn_dtype_size(int dtype) { return cairn::dtype_valid(dtype) ? cairn::dtype_size(cairn::DType(dtype)) : 0; }

} // extern "C"

// ---- bindings ---------------------------------------------------------------

namespace {

using cairn::Shape;

class BytesBinding final : public Binding {
public:
    BytesBinding(std::string name, void* data, std::size_t capacity, std::size_t* size)
        : Binding(std::move(name)), m_data(static_cast<std::byte*>(data)), m_capacity(capacity), m_size(size)
    {
    }
    std::vector<std::byte>* blob() { return &m_blob; }
    void before_save() override
    {
        if (*m_size > m_capacity)
            throw cairn::error::WrongAPIUsage("bytes '" + name() + "': size " + std::to_string(*m_size) +
                                              " is larger than its capacity " + std::to_string(m_capacity));
        m_blob.assign(m_data, m_data + *m_size);
    }
    void after_load() override
    {
        if (m_blob.size() > m_capacity)
            throw cairn::error::WrongAPIUsage("bytes '" + name() + "': the checkpoint holds " +
                                              std::to_string(m_blob.size()) + " bytes, more than the capacity " +
                                              std::to_string(m_capacity) + " of the buffer");
        if (!m_blob.empty())
            std::memcpy(m_data, m_blob.data(), m_blob.size());
        *m_size = m_blob.size();
    }

private:
    std::byte* m_data;
    std::size_t m_capacity;
    std::size_t* m_size;
    std::vector<std::byte> m_blob;
};

class StringBinding final : public Binding {
public:
    StringBinding(std::string name, char* buffer, std::size_t capacity, bool fortran)
        : Binding(std::move(name)), m_buffer(buffer), m_capacity(capacity), m_fortran(fortran)
    {
    }
    std::string* value() { return &m_value; }
    void before_save() override
    {
        std::size_t n = 0;
        if (m_fortran) { // blank-padded: trailing blanks are not part of the value
            n = m_capacity;
            while (n > 0 && m_buffer[n - 1] == ' ')
                --n;
        } else if (m_capacity > 0) {
            const void* nul = std::memchr(m_buffer, '\0', m_capacity);
            n = nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - m_buffer) : m_capacity;
        }
        if (n > 0)
            m_value.assign(m_buffer, n);
        else
            m_value.clear();
    }
    void after_load() override
    {
        const std::size_t room = m_fortran ? m_capacity : (m_capacity > 0 ? m_capacity - 1 : 0);
        if (m_value.size() > room || (!m_fortran && m_capacity == 0))
            throw cairn::error::WrongAPIUsage("string '" + name() + "': the checkpoint holds " +
                                              std::to_string(m_value.size()) +
                                              " characters, the buffer has room for " + std::to_string(room) +
                                              (m_fortran ? "" : " (plus the NUL)"));
        // m_buffer is null for a zero-length Fortran string: no memcpy or
        // memset on it, not even of 0 bytes (undefined behaviour).
        if (!m_value.empty())
            std::memcpy(m_buffer, m_value.data(), m_value.size());
        if (m_fortran) {
            if (m_capacity > m_value.size())
                std::memset(m_buffer + m_value.size(), ' ', m_capacity - m_value.size());
        } else {
            m_buffer[m_value.size()] = '\0';
        }
    }

private:
    char* m_buffer;
    std::size_t m_capacity;
    bool m_fortran;
    std::string m_value;
};

// Logical values of `elem_size` bytes (Fortran's default logical) kept as
// Cairn bools: false is the bit pattern `false_value`, anything else is true;
// loaded values are written as `true_value` / `false_value`.
class LogicalPatterns {
public:
    LogicalPatterns(std::size_t elem_size, const void* true_value, const void* false_value) : m_size(elem_size)
    {
        const auto* t = static_cast<const std::byte*>(true_value);
        const auto* f = static_cast<const std::byte*>(false_value);
        m_true.assign(t, t + elem_size);
        m_false.assign(f, f + elem_size);
    }
    bool get(const std::byte* p) const { return std::memcmp(p, m_false.data(), m_size) != 0; }
    void set(std::byte* p, bool v) const { std::memcpy(p, v ? m_true.data() : m_false.data(), m_size); }

private:
    std::size_t m_size;
    std::vector<std::byte> m_true, m_false;
};

class LogicalArrayBinding final : public Binding {
public:
    LogicalArrayBinding(std::string name, void* data, Shape shape, Shape strides, std::size_t elem_size,
                        const void* true_value, const void* false_value)
        : Binding(std::move(name)), m_data(static_cast<std::byte*>(data)), m_shape(std::move(shape)),
          m_strides(std::move(strides)), m_elem(elem_size), m_patterns(elem_size, true_value, false_value),
          m_dense(static_cast<std::size_t>(cairn::volume(m_shape)))
    {
        if (m_strides.empty())
            m_strides = cairn::row_major_strides(m_shape);
    }
    /// The one-byte bools Cairn saves from and loads into (null when empty).
    void* dense() { return m_dense.empty() ? nullptr : m_dense.data(); }
    void before_save() override
    {
        visit([&](std::size_t k, std::byte* p) { m_dense[k] = m_patterns.get(p) ? 1 : 0; });
    }
    void after_load() override
    {
        visit([&](std::size_t k, std::byte* p) { m_patterns.set(p, m_dense[k] != 0); });
    }

private:
    // Calls f(row-major index in the box, address of the element) for every element.
    template <class F>
    void visit(F&& f)
    {
        const std::size_t n = m_shape.size();
        const std::size_t total = m_dense.size();
        Shape idx(n, 0);
        for (std::size_t k = 0; k < total; ++k) {
            std::int64_t off = 0;
            for (std::size_t d = 0; d < n; ++d)
                off += idx[d] * m_strides[d];
            f(k, m_data + off * static_cast<std::int64_t>(m_elem));
            for (std::size_t d = n; d-- > 0;) {
                if (++idx[d] < m_shape[d])
                    break;
                idx[d] = 0;
            }
        }
    }
    std::byte* m_data;
    Shape m_shape, m_strides;
    std::size_t m_elem;
    LogicalPatterns m_patterns;
    std::vector<std::uint8_t> m_dense;
};

class LogicalScalarBinding final : public Binding {
public:
    LogicalScalarBinding(std::string name, void* value, std::size_t elem_size, const void* true_value,
                         const void* false_value)
        : Binding(std::move(name)), m_data(static_cast<std::byte*>(value)),
          m_patterns(elem_size, true_value, false_value)
    {
    }
    bool* value() { return &m_value; }
    void before_save() override { m_value = m_patterns.get(m_data); }
    void after_load() override { m_patterns.set(m_data, m_value); }

private:
    std::byte* m_data;
    LogicalPatterns m_patterns;
    bool m_value = false;
};

static_assert(sizeof(bool) == 1, "Cairn's bool dtype is one byte");

std::string name_arg(const char* name)
{
    require(name != nullptr, "the entry name is NULL");
    return name;
}

template <class B, class Add>
void add_bound(cairn_state& state, std::unique_ptr<B> binding, Add&& add)
{
    state.bindings.reserve(state.bindings.size() + 1); // so push_back cannot fail after add()
    add(*binding);
    state.bindings.push_back(std::move(binding));
}

// The load planner of the C API: the default one, then the bindings' copies
// to the caller, inside Cairn's error agreement of the read phase.
class CapiLoadPlanner final : public cairn::DefaultLoadPlanner {
public:
    CapiLoadPlanner(cairn_state& state, bool partial, std::vector<std::string> may_be_missing)
        : DefaultLoadPlanner(partial, std::move(may_be_missing)), m_state(state)
    {
    }
    void finish() override
    {
        DefaultLoadPlanner::finish();
        for (auto& b : m_state.bindings)
            if (m_metadata->entries.count(b->name()))
                b->after_load();
    }

private:
    cairn_state& m_state;
};

// An argument error on any rank fails the call on every rank: the code and
// message of the lowest failing rank are broadcast. Returns the agreed code.
int agree_arguments(const char* function, MPI_Comm comm, int code, const std::string& message) noexcept
{
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int mine = code != CAIRN_SUCCESS ? rank : size;
    int first = size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size)
        return CAIRN_SUCCESS;
    std::string what;
    try {
        if (rank == first)
            what = std::string(function) + ": rank " + std::to_string(rank) + " (arguments): " + message;
    } catch (...) {
        code = CAIRN_ERR_NO_MEMORY;
    }
    int header[2] = {code, static_cast<int>(std::min<std::size_t>(what.size(), 1 << 20))};
    MPI_Bcast(header, 2, MPI_INT, first, comm);
    try {
        what.resize(static_cast<std::size_t>(header[1]));
    } catch (...) {
        what.clear();
    }
    MPI_Bcast(what.empty() ? nullptr : &what[0], static_cast<int>(what.size()), MPI_CHAR, first, comm);
    return fail(header[0], what);
}

// Local checks of a communicator, before anything collective.
int check_comm(const char* function, MPI_Comm comm) noexcept
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return fail(CAIRN_ERR_USAGE, std::string(function) + ": MPI is not initialized (or already finalized)");
    if (comm == MPI_COMM_NULL)
        return fail(CAIRN_ERR_USAGE, std::string(function) + ": the communicator is MPI_COMM_NULL");
    return CAIRN_SUCCESS;
}

} // namespace

namespace cairn::capi {

std::string dtype_error(int dtype)
{
    return "invalid dtype code " + std::to_string(dtype) + " (the cairn_dtype_t codes are 0..12, CAIRN_F16.." +
           "CAIRN_BOOL)";
}

void add_array(cairn_state& state, const std::string& name, int dtype, int ndim, const std::int64_t* global_shape,
               const std::int64_t* offsets, const std::int64_t* shape, void* data, const std::int64_t* strides,
               std::size_t elem_size, const void* true_value, const void* false_value, MemorySpace space)
{
    settle_staged(state);
    const std::string what = "array '" + name + "': ";
    require(dtype_valid(dtype), what + dtype_error(dtype));
    require(ndim >= 0 && ndim <= CAIRN_MAX_NDIM,
            what + "ndim " + std::to_string(ndim) + " is not in 0.." + std::to_string(CAIRN_MAX_NDIM));
    require(ndim == 0 || (global_shape && offsets && shape), what + "global_shape, offsets or shape is NULL");
    const auto n = static_cast<std::size_t>(ndim);
    Shape gs(global_shape, global_shape + (ndim ? n : 0));
    Box box{Shape(offsets, offsets + (ndim ? n : 0)), Shape(shape, shape + (ndim ? n : 0))};
    Shape st = strides ? Shape(strides, strides + n) : Shape{};
    if (!true_value) {
        state.dict.add_array(name, ArrayShard{DType(dtype), std::move(gs), std::move(box), data, std::move(st), space});
        return;
    }
    require(space == MemorySpace::host, what + "converted logical arrays are host memory");
    require(DType(dtype) == DType::boolean, what + "a converted logical array must have the dtype bool");
    require(data != nullptr || box.empty(), what + "null data pointer for the non-empty box " + box.str());
    for (auto e : box.shape)
        require(e >= 0, what + "negative extent in box " + box.str());
    for (auto s : st)
        require(s >= 0, what + "negative stride in " + shape_str(st));
    auto b = std::make_unique<LogicalArrayBinding>(name, data, box.shape, st, elem_size, true_value, false_value);
    add_bound(state, std::move(b), [&](LogicalArrayBinding& lb) {
        state.dict.add_array(name, ArrayShard{DType::boolean, gs, box, lb.dense(), {}, MemorySpace::host});
    });
}

void add_scalar(cairn_state& state, const std::string& name, int dtype, void* value, std::size_t elem_size,
                const void* true_value, const void* false_value)
{
    settle_staged(state);
    require(dtype_valid(dtype), "scalar '" + name + "': " + dtype_error(dtype));
    require(value != nullptr, "scalar '" + name + "': null pointer");
    if (!true_value) {
        state.dict.add_scalar_ref(name, ScalarRef{DType(dtype), value});
        return;
    }
    require(DType(dtype) == DType::boolean, "scalar '" + name + "': a converted logical must have the dtype bool");
    auto b = std::make_unique<LogicalScalarBinding>(name, value, elem_size, true_value, false_value);
    add_bound(state, std::move(b), [&](LogicalScalarBinding& lb) {
        state.dict.add_scalar_ref(name, ScalarRef{DType::boolean, lb.value()});
    });
}

void add_string(cairn_state& state, const std::string& name, char* buffer, std::size_t capacity, bool fortran)
{
    settle_staged(state);
    require(buffer != nullptr || capacity == 0, "string '" + name + "': null buffer");
    add_bound(state, std::make_unique<StringBinding>(name, buffer, capacity, fortran),
              [&](StringBinding& b) { state.dict.add_string(name, b.value()); });
}

void settle_staged(cairn_state& state) noexcept
{
    if (state.async_staged.valid()) {
        state.async_staged.wait(); // its error, if any, is the async handle's to report
        state.async_staged = {};
    }
}

int agree(const char* function, MPI_Comm comm, int code, const std::string& message) noexcept
{
    return agree_arguments(function, comm, code, message);
}

int check_communicator(const char* function, MPI_Comm comm) noexcept { return check_comm(function, comm); }

int prepare_save(const char* function, cairn_state* state, MPI_Comm comm, std::string arg_error) noexcept
{
    if (int rc = check_comm(function, comm))
        return rc;
    int code = arg_error.empty() ? CAIRN_SUCCESS : CAIRN_ERR_USAGE;
    if (code == CAIRN_SUCCESS && !state)
        code = CAIRN_ERR_USAGE, arg_error = "the state is NULL";
    if (code == CAIRN_SUCCESS) {
        settle_staged(*state); // the bindings' copies may still be read by an async save
        try {
            for (auto& b : state->bindings)
                b->before_save();
        } catch (...) {
            describe_current(code, arg_error);
        }
    }
    return agree_arguments(function, comm, code, arg_error);
}

int prepare_load(const char* function, cairn_state* state, MPI_Comm comm, std::string arg_error) noexcept
{
    if (int rc = check_comm(function, comm))
        return rc;
    int code = arg_error.empty() ? CAIRN_SUCCESS : CAIRN_ERR_USAGE;
    if (code == CAIRN_SUCCESS && !state)
        code = CAIRN_ERR_USAGE, arg_error = "the state is NULL";
    if (code == CAIRN_SUCCESS)
        settle_staged(*state);
    return agree_arguments(function, comm, code, arg_error);
}

LoadOptions load_options_for(cairn_state& state, const cairn_load_options* options)
{
    state.missing.clear();
    state.skipped.clear();
    LoadOptions o = options ? options->options : LoadOptions{};
    o.planner = std::make_shared<CapiLoadPlanner>(state, o.partial, o.may_be_missing);
    return o;
}

int save(const char* function, cairn_state* state, const std::string* checkpoint_id, MPI_Comm comm,
         const cairn_save_options* options, cairn_save_result_t* result, std::string arg_error) noexcept
{
    if (int rc = prepare_save(function, state, comm, std::move(arg_error)))
        return rc;
    return guarded(function, [&] {
        const SaveResult r = cairn::save(state->dict, *checkpoint_id, comm, options ? options->options : SaveOptions{});
        if (result)
            *result = cairn_save_result_t{r.bytes_written, r.entries, r.seconds, r.plan_reused ? 1 : 0};
    });
}

int load(const char* function, cairn_state* state, const std::string* checkpoint_id, MPI_Comm comm,
         const cairn_load_options* options, cairn_load_result_t* result, std::string arg_error) noexcept
{
    if (int rc = prepare_load(function, state, comm, std::move(arg_error)))
        return rc;
    return guarded(function, [&] {
        LoadOptions o = load_options_for(*state, options);
        LoadResult r = cairn::load(state->dict, *checkpoint_id, comm, o);
        state->missing = std::move(r.missing);
        state->skipped = std::move(r.skipped);
        if (result)
            *result = cairn_load_result_t{r.bytes_read, state->missing.size(), state->skipped.size(), r.seconds,
                                          r.bytes_received};
    });
}

int string_arg(const char* function, const char* s, const char* what, std::string& out, std::string& bad) noexcept
{
    return guarded(function, [&] {
        if (s)
            out = s;
        else
            bad = std::string("the ") + what + " is NULL";
    });
}

int verify(const char* function, const std::string& checkpoint_id, MPI_Comm comm, const cairn_load_options* options,
           cairn_verify_result_t* result, std::string arg_error) noexcept
{
    if (int rc = check_comm(function, comm))
        return rc;
    if (int rc = agree_arguments(function, comm, arg_error.empty() ? CAIRN_SUCCESS : CAIRN_ERR_USAGE, arg_error))
        return rc;
    return guarded(function, [&] {
        // Every rank gets every problem: the same result and error everywhere.
        const VerifyReport r = cairn::verify(checkpoint_id, comm, options ? options->options : LoadOptions{});
        if (result)
            *result = cairn_verify_result_t{r.chunks, r.bytes, r.checksums ? 1 : 0, r.problems.size()};
        if (r.ok())
            return;
        std::string lines;
        for (const auto& p : r.problems)
            lines += "\n" + p;
        throw error::IntegrityError(checkpoint_id + ": " + std::to_string(r.problems.size()) + " damaged chunk" +
                                    (r.problems.size() == 1 ? "" : "s") + ":" + lines);
    });
}

} // namespace cairn::capi

// ---- the C functions ----------------------------------------------------------

namespace {

// Checks a handle argument.
template <class T>
T& handle(T* h, const char* what)
{
    require(h != nullptr, std::string(what) + " is NULL");
    return *h;
}

template <class T>
int create(const char* function, T** out)
{
    return guarded(function, [&] {
        require(out != nullptr, "the output pointer is NULL");
        *out = nullptr;
        *out = new T();
    });
}

template <class T>
int destroy(T** h)
{
    if (h) {
        delete *h;
        *h = nullptr;
    }
    return CAIRN_SUCCESS;
}

} // namespace

namespace {

cairn::Layout layout_arg(int layout)
{
    switch (layout) {
    case CAIRN_LAYOUT_AUTOMATIC:
        return cairn::Layout::automatic;
    case CAIRN_LAYOUT_PER_RANK:
        return cairn::Layout::per_rank;
    case CAIRN_LAYOUT_CONTAINER:
        return cairn::Layout::container;
    default:
        throw cairn::error::WrongAPIUsage("invalid layout " + std::to_string(layout) +
                                   " (CAIRN_LAYOUT_PER_RANK = 0, CAIRN_LAYOUT_CONTAINER = 1 or "
                                   "CAIRN_LAYOUT_AUTOMATIC = 2)");
    }
}

// An MPI-IO hint of save and load options alike (either layout): a key set
// again gets the new value, a NULL value removes it.
void set_hint(cairn::MpiHints& hints, const char* key, const char* value)
{
    require(key != nullptr && *key != '\0', "MPI-IO hint: the key is NULL or empty");
    const std::string k(key);
    const auto at = std::find_if(hints.begin(), hints.end(), [&](const auto& h) { return h.first == k; });
    if (!value) {
        if (at != hints.end())
            hints.erase(at);
        return;
    }
    cairn::detail::check_mpi_hints({{k, value}}); // the key's and value's lengths, named
    if (at != hints.end())
        at->second = value;
    else
        hints.emplace_back(k, value);
}

cairn::FileLocking file_locking_arg(int locking)
{
    switch (locking) {
    case CAIRN_FILE_LOCKING_BEST_EFFORT:
        return cairn::FileLocking::best_effort;
    case CAIRN_FILE_LOCKING_ON:
        return cairn::FileLocking::on;
    case CAIRN_FILE_LOCKING_OFF:
        return cairn::FileLocking::off;
    default:
        throw cairn::error::WrongAPIUsage("invalid file locking " + std::to_string(locking) +
                                   " (CAIRN_FILE_LOCKING_BEST_EFFORT = 0, CAIRN_FILE_LOCKING_ON = 1 or "
                                   "CAIRN_FILE_LOCKING_OFF = 2)");
    }
}

// A C progress callback as a cairn::ProgressCallback (empty without one): a
// nonzero return cancels, as an exception would.
cairn::ProgressCallback progress_arg(cairn_progress_fn callback, void* user)
{
    if (!callback)
        return {};
    return [callback, user](const cairn::Progress& p) {
        if (const int rc = callback(static_cast<int>(p.phase), p.done, p.total, user))
            throw cairn::Error(cairn::Error::Kind::generic, "progress callback returned " + std::to_string(rc) +
                                                                " in phase '" + cairn::phase_name(p.phase) + "'");
    };
}

// Applies `set` to the container settings of `options` (save or load).
template <class Options, class Set>
int set_container(const char* function, Options* options, Set&& set)
{
    return guarded(function, [&] { set(handle(options, "the options handle").options.container); });
}

} // namespace

extern "C" {

int cairn_state_create(cairn_state_t** state) { return create("cairn_state_create", state); }
int cairn_state_free(cairn_state_t** state)
{
    if (state && *state)
        cairn::capi::settle_staged(**state); // an async save may still copy out of the handle's buffers
    return destroy(state);
}

int cairn_state_size(const cairn_state_t* state, size_t* size)
{
    return guarded("cairn_state_size", [&] {
        require(size != nullptr, "the output pointer is NULL");
        *size = handle(state, "the state").dict.size();
    });
}

int cairn_state_add_array(cairn_state_t* state, const char* name, int dtype, int ndim,
                          const int64_t* global_shape, const int64_t* offsets, const int64_t* shape, void* data,
                          const int64_t* strides)
{
    return guarded("cairn_state_add_array", [&] {
        cairn::capi::add_array(handle(state, "the state"), name_arg(name), dtype, ndim, global_shape,
                               offsets, shape, data, strides, 0, nullptr, nullptr);
    });
}

int cairn_state_add_device_array(cairn_state_t* state, const char* name, int dtype, int ndim,
                                 const int64_t* global_shape, const int64_t* offsets, const int64_t* shape, void* data,
                                 const int64_t* strides)
{
    return guarded("cairn_state_add_device_array", [&] {
        cairn::capi::add_array(handle(state, "the state"), name_arg(name), dtype, ndim, global_shape, offsets, shape,
                               data, strides, 0, nullptr, nullptr, cairn::MemorySpace::cuda);
    });
}

int cairn_cuda_device_available(void) { return cairn::cuda_device_available() ? 1 : 0; }

int cairn_state_add_replicated(cairn_state_t* state, const char* name, int dtype, int ndim,
                               const int64_t* shape, void* data)
{
    return guarded("cairn_state_add_replicated", [&] {
        require(ndim >= 0 && ndim <= CAIRN_MAX_NDIM,
                "ndim " + std::to_string(ndim) + " is not in 0.." + std::to_string(CAIRN_MAX_NDIM));
        require(ndim == 0 || shape, "shape is NULL");
        const std::vector<int64_t> zeros(static_cast<std::size_t>(ndim) + 1, 0);
        cairn::capi::add_array(handle(state, "the state"), name_arg(name), dtype, ndim, shape,
                               zeros.data(), shape, data, nullptr, 0, nullptr, nullptr);
    });
}

int cairn_state_add_scalar(cairn_state_t* state, const char* name, int dtype, void* value)
{
    return guarded("cairn_state_add_scalar", [&] {
        cairn::capi::add_scalar(handle(state, "the state"), name_arg(name), dtype, value, 0, nullptr,
                                nullptr);
    });
}

int cairn_state_add_string(cairn_state_t* state, const char* name, char* buffer, size_t capacity)
{
    return guarded("cairn_state_add_string", [&] {
        cairn::capi::add_string(handle(state, "the state"), name_arg(name), buffer, capacity, false);
    });
}

int cairn_state_add_bytes(cairn_state_t* state, const char* name, void* data, size_t capacity, size_t* size)
{
    return guarded("cairn_state_add_bytes", [&] {
        cairn_state& s = handle(state, "the state");
        const std::string n = name_arg(name);
        require(size != nullptr, "bytes '" + n + "': the size pointer is NULL");
        require(data != nullptr || capacity == 0, "bytes '" + n + "': null buffer");
        cairn::capi::settle_staged(s);
        add_bound(s, std::make_unique<BytesBinding>(n, data, capacity, size),
                  [&](BytesBinding& b) { s.dict.add_bytes(n, b.blob()); });
    });
}

// ---- options ----

int cairn_save_options_create(cairn_save_options_t** options) { return create("cairn_save_options_create", options); }
int cairn_save_options_free(cairn_save_options_t** options) { return destroy(options); }

int cairn_save_options_set_fsync(cairn_save_options_t* options, int fsync)
{
    return guarded("cairn_save_options_set_fsync",
                   [&] { handle(options, "the options handle").options.fsync = fsync != 0; });
}

int cairn_save_options_set_overwrite(cairn_save_options_t* options, int overwrite)
{
    return guarded("cairn_save_options_set_overwrite",
                   [&] { handle(options, "the options handle").options.overwrite = overwrite != 0; });
}

int cairn_save_options_set_check_replicas(cairn_save_options_t* options, int check)
{
    return guarded("cairn_save_options_set_check_replicas",
                   [&] { handle(options, "the options handle").options.check_replicas = check != 0; });
}

int cairn_save_options_set_data_files(cairn_save_options_t* options, int files)
{
    return guarded("cairn_save_options_set_data_files", [&] {
        require(files >= CAIRN_FILES_PER_NODE, "data files must be CAIRN_FILES_PER_RANK, CAIRN_FILES_PER_NODE or a "
                                               "number of files of at least 1, not " + std::to_string(files));
        handle(options, "the options handle").options.per_rank.files =
            files == CAIRN_FILES_PER_RANK   ? cairn::DataFiles::per_rank()
            : files == CAIRN_FILES_PER_NODE ? cairn::DataFiles::per_node()
                                            : cairn::DataFiles::in_all(files);
    });
}

int cairn_save_options_set_files_per_rank(cairn_save_options_t* options, int files_per_rank)
{
    return guarded("cairn_save_options_set_files_per_rank", [&] {
        require(files_per_rank >= 1, "files_per_rank must be at least 1, not " + std::to_string(files_per_rank));
        handle(options, "the options handle").options.files_per_rank = files_per_rank;
    });
}

int cairn_save_options_set_alignment(cairn_save_options_t* options, size_t alignment)
{
    return guarded("cairn_save_options_set_alignment",
                   [&] { handle(options, "the options handle").options.alignment = alignment; });
}

int cairn_save_options_set_staging_bytes(cairn_save_options_t* options, size_t staging_bytes)
{
    return guarded("cairn_save_options_set_staging_bytes",
                   [&] { handle(options, "the options handle").options.staging_bytes = staging_bytes; });
}

int cairn_save_options_set_writeback_bytes(cairn_save_options_t* options, size_t writeback_bytes)
{
    return guarded("cairn_save_options_set_writeback_bytes",
                   [&] { handle(options, "the options handle").options.writeback_bytes = writeback_bytes; });
}

int cairn_save_options_set_reuse_plan(cairn_save_options_t* options, int reuse_plan)
{
    return guarded("cairn_save_options_set_reuse_plan",
                   [&] { handle(options, "the options handle").options.reuse_plan = reuse_plan != 0; });
}

int cairn_save_options_set_layout(cairn_save_options_t* options, int layout)
{
    return guarded("cairn_save_options_set_layout",
                   [&] { handle(options, "the options handle").options.layout = layout_arg(layout); });
}

int cairn_save_options_set_checksum_block(cairn_save_options_t* options, uint64_t checksum_block)
{
    return guarded("cairn_save_options_set_checksum_block",
                   [&] { handle(options, "the options handle").options.checksum_block = checksum_block; });
}

int cairn_save_options_set_async_staging(cairn_save_options_t* options, int async_staging)
{
    return guarded("cairn_save_options_set_async_staging", [&] {
        require(async_staging == CAIRN_ASYNC_STAGING_FULL_COPY || async_staging == CAIRN_ASYNC_STAGING_BOUNDED,
                "invalid async staging " + std::to_string(async_staging) +
                    " (CAIRN_ASYNC_STAGING_FULL_COPY = 0 or CAIRN_ASYNC_STAGING_BOUNDED = 1)");
        handle(options, "the options handle").options.async_staging = async_staging == CAIRN_ASYNC_STAGING_BOUNDED
                                                                          ? cairn::AsyncStaging::bounded
                                                                          : cairn::AsyncStaging::full_copy;
    });
}

int cairn_set_log_level(int level)
{
    return guarded("cairn_set_log_level", [&] {
        require(level >= CAIRN_LOG_OFF && level <= CAIRN_LOG_DEBUG,
                "invalid log level " + std::to_string(level) +
                    " (CAIRN_LOG_OFF = 0, CAIRN_LOG_INFO = 1 or CAIRN_LOG_DEBUG = 2)");
        cairn::set_log_level(static_cast<cairn::LogLevel>(level));
    });
}

int cairn_save_options_set_progress(cairn_save_options_t* options, cairn_progress_fn callback, void* user)
{
    return guarded("cairn_save_options_set_progress",
                   [&] { handle(options, "the options handle").options.progress = progress_arg(callback, user); });
}

int cairn_save_options_set_per_rank_hint(cairn_save_options_t* options, const char* key, const char* value)
{
    return guarded("cairn_save_options_set_per_rank_hint",
                   [&] { set_hint(handle(options, "the options handle").options.per_rank.mpi_hints, key, value); });
}

int cairn_save_options_set_container_hint(cairn_save_options_t* options, const char* key, const char* value)
{
    return set_container("cairn_save_options_set_container_hint", options,
                         [&](cairn::ContainerTuning& t) { set_hint(t.mpi_hints, key, value); });
}

int cairn_save_options_set_container_file_locking(cairn_save_options_t* options, int file_locking)
{
    return set_container("cairn_save_options_set_container_file_locking", options,
                         [&](cairn::ContainerTuning& t) { t.file_locking = file_locking_arg(file_locking); });
}

int cairn_save_options_set_container_independent_below(cairn_save_options_t* options, size_t bytes)
{
    return set_container("cairn_save_options_set_container_independent_below", options,
                         [&](cairn::ContainerTuning& t) { t.independent_below = bytes; });
}

int cairn_save_options_set_container_collective_metadata(cairn_save_options_t* options, int collective)
{
    return set_container("cairn_save_options_set_container_collective_metadata", options,
                         [&](cairn::ContainerTuning& t) { t.collective_metadata = collective != 0; });
}

int cairn_save_options_set_container_metadata_cache_bytes(cairn_save_options_t* options, size_t bytes)
{
    return set_container("cairn_save_options_set_container_metadata_cache_bytes", options,
                         [&](cairn::ContainerTuning& t) { t.metadata_cache_bytes = bytes; });
}

int cairn_load_options_create(cairn_load_options_t** options) { return create("cairn_load_options_create", options); }
int cairn_load_options_free(cairn_load_options_t** options) { return destroy(options); }

int cairn_load_options_set_partial(cairn_load_options_t* options, int partial)
{
    return guarded("cairn_load_options_set_partial",
                   [&] { handle(options, "the options handle").options.partial = partial != 0; });
}

int cairn_load_options_add_may_be_missing(cairn_load_options_t* options, const char* key)
{
    return guarded("cairn_load_options_add_may_be_missing", [&] {
        auto& h = handle(options, "the options handle");
        require(key != nullptr && *key != '\0', "the key is NULL or empty");
        h.options.may_be_missing.emplace_back(key);
    });
}

int cairn_load_options_set_staging_bytes(cairn_load_options_t* options, size_t staging_bytes)
{
    return guarded("cairn_load_options_set_staging_bytes",
                   [&] { handle(options, "the options handle").options.staging_bytes = staging_bytes; });
}

int cairn_load_options_set_layout(cairn_load_options_t* options, int layout)
{
    return guarded("cairn_load_options_set_layout",
                   [&] { handle(options, "the options handle").options.layout = layout_arg(layout); });
}

int cairn_load_options_set_verify_checksums(cairn_load_options_t* options, int verify)
{
    return guarded("cairn_load_options_set_verify_checksums",
                   [&] { handle(options, "the options handle").options.verify_checksums = verify != 0; });
}

int cairn_load_options_set_cooperative(cairn_load_options_t* options, int cooperative)
{
    return guarded("cairn_load_options_set_cooperative",
                   [&] { handle(options, "the options handle").options.cooperative = cooperative != 0; });
}

int cairn_load_options_set_progress(cairn_load_options_t* options, cairn_progress_fn callback, void* user)
{
    return guarded("cairn_load_options_set_progress",
                   [&] { handle(options, "the options handle").options.progress = progress_arg(callback, user); });
}

int cairn_load_options_set_per_rank_hint(cairn_load_options_t* options, const char* key, const char* value)
{
    return guarded("cairn_load_options_set_per_rank_hint",
                   [&] { set_hint(handle(options, "the options handle").options.per_rank.mpi_hints, key, value); });
}

int cairn_load_options_set_container_hint(cairn_load_options_t* options, const char* key, const char* value)
{
    return set_container("cairn_load_options_set_container_hint", options,
                         [&](cairn::ContainerTuning& t) { set_hint(t.mpi_hints, key, value); });
}

int cairn_load_options_set_container_file_locking(cairn_load_options_t* options, int file_locking)
{
    return set_container("cairn_load_options_set_container_file_locking", options,
                         [&](cairn::ContainerTuning& t) { t.file_locking = file_locking_arg(file_locking); });
}

int cairn_load_options_set_container_independent_below(cairn_load_options_t* options, size_t bytes)
{
    return set_container("cairn_load_options_set_container_independent_below", options,
                         [&](cairn::ContainerTuning& t) { t.independent_below = bytes; });
}

int cairn_load_options_set_container_collective_metadata(cairn_load_options_t* options, int collective)
{
    return set_container("cairn_load_options_set_container_collective_metadata", options,
                         [&](cairn::ContainerTuning& t) { t.collective_metadata = collective != 0; });
}

int cairn_load_options_set_container_metadata_cache_bytes(cairn_load_options_t* options, size_t bytes)
{
    return set_container("cairn_load_options_set_container_metadata_cache_bytes", options,
                         [&](cairn::ContainerTuning& t) { t.metadata_cache_bytes = bytes; });
}

// ---- save and load ----

int cairn_save(cairn_state_t* state, const char* checkpoint_id, MPI_Comm comm, const cairn_save_options_t* options,
               cairn_save_result_t* result)
{
    std::string id, bad;
    if (int rc = string_arg("cairn_save", checkpoint_id, "checkpoint id", id, bad))
        return rc;
    return cairn::capi::save("cairn_save", state, &id, comm, options, result, std::move(bad));
}

int cairn_load(cairn_state_t* state, const char* checkpoint_id, MPI_Comm comm, const cairn_load_options_t* options,
               cairn_load_result_t* result)
{
    std::string id, bad;
    if (int rc = string_arg("cairn_load", checkpoint_id, "checkpoint id", id, bad))
        return rc;
    return cairn::capi::load("cairn_load", state, &id, comm, options, result, std::move(bad));
}

int cairn_verify(const char* checkpoint_id, MPI_Comm comm, const cairn_load_options_t* options,
                 cairn_verify_result_t* result)
{
    std::string id, bad;
    if (int rc = string_arg("cairn_verify", checkpoint_id, "checkpoint id", id, bad))
        return rc;
    return cairn::capi::verify("cairn_verify", id, comm, options, result, std::move(bad));
}

namespace {
int list_item(const char* function, const std::vector<std::string>* list, size_t index, const char** name)
{
    return guarded(function, [&] {
        require(name != nullptr, "the output pointer is NULL");
        require(index < list->size(),
                "index " + std::to_string(index) + " is out of range (the list has " + std::to_string(list->size()) +
                    " names)");
        *name = (*list)[index].c_str();
    });
}
} // namespace

int cairn_state_missing(const cairn_state_t* state, size_t index, const char** name)
{
    if (!state)
        return fail(CAIRN_ERR_USAGE, "cairn_state_missing: the state is NULL");
    return list_item("cairn_state_missing", &state->missing, index, name);
}

int cairn_state_skipped(const cairn_state_t* state, size_t index, const char** name)
{
    if (!state)
        return fail(CAIRN_ERR_USAGE, "cairn_state_skipped: the state is NULL");
    return list_item("cairn_state_skipped", &state->skipped, index, name);
}

// ---- metadata ----

int cairn_metadata_read(const char* checkpoint_id, cairn_metadata_t** metadata)
{
    return guarded("cairn_metadata_read", [&] {
        require(metadata != nullptr, "the output pointer is NULL");
        *metadata = nullptr;
        require(checkpoint_id != nullptr, "the checkpoint id is NULL");
        auto md = std::make_unique<cairn_metadata>();
        md->metadata = cairn::read_metadata(checkpoint_id);
        md->entries.reserve(md->metadata.entries.size());
        for (const auto& e : md->metadata.entries)
            md->entries.push_back(&e);
        *metadata = md.release();
    });
}

int cairn_metadata_free(cairn_metadata_t** metadata) { return destroy(metadata); }

int cairn_metadata_info(const cairn_metadata_t* metadata, int* format_version, int* world_size, size_t* num_entries)
{
    return guarded("cairn_metadata_info", [&] {
        const auto& md = handle(metadata, "the metadata handle");
        if (format_version)
            *format_version = md.metadata.format_version;
        if (world_size)
            *world_size = md.metadata.world_size;
        if (num_entries)
            *num_entries = md.entries.size();
    });
}

int cairn_metadata_strings(const cairn_metadata_t* metadata, const char** library_version, const char** layout,
                           const char** created)
{
    return guarded("cairn_metadata_strings", [&] {
        const auto& md = handle(metadata, "the metadata handle");
        if (library_version)
            *library_version = md.metadata.library_version.c_str();
        if (layout)
            *layout = md.metadata.layout.c_str();
        if (created)
            *created = md.metadata.created.c_str();
    });
}

} // extern "C"

namespace {
const std::pair<const std::string, cairn::EntryMeta>& entry_at(const cairn_metadata* metadata, size_t index)
{
    const auto& md = handle(metadata, "the metadata handle");
    require(index < md.entries.size(), "entry index " + std::to_string(index) +
                                           " is out of range (the checkpoint has " + std::to_string(md.entries.size()) +
                                           " entries)");
    return *md.entries[index];
}
} // namespace

extern "C" {

int cairn_metadata_entry(const cairn_metadata_t* metadata, size_t index, const char** name, int* kind, int* dtype,
                         int* ndim)
{
    return guarded("cairn_metadata_entry", [&] {
        const auto& [fqn, e] = entry_at(metadata, index);
        if (name)
            *name = fqn.c_str();
        if (kind)
            *kind = static_cast<int>(e.kind);
        if (dtype)
            *dtype = static_cast<int>(e.dtype);
        if (ndim)
            *ndim = static_cast<int>(e.global_shape.size());
    });
}

int cairn_metadata_find(const cairn_metadata_t* metadata, const char* name, size_t* index)
{
    return guarded("cairn_metadata_find", [&] {
        const auto& md = handle(metadata, "the metadata handle");
        require(name != nullptr, "the entry name is NULL");
        require(index != nullptr, "the output pointer is NULL");
        auto it = md.metadata.entries.find(name);
        if (it == md.metadata.entries.end())
            throw cairn::error::NotFound(std::string("entry '") + name + "' is not in the checkpoint");
        *index = static_cast<size_t>(std::distance(md.metadata.entries.begin(), it));
    });
}

int cairn_metadata_entry_shape(const cairn_metadata_t* metadata, size_t index, int64_t* global_shape)
{
    return guarded("cairn_metadata_entry_shape", [&] {
        const auto& e = entry_at(metadata, index).second;
        require(global_shape != nullptr || e.global_shape.empty(), "the output pointer is NULL");
        std::copy(e.global_shape.begin(), e.global_shape.end(), global_shape);
    });
}

int cairn_metadata_entry_value(const cairn_metadata_t* metadata, size_t index, const void** value, size_t* size)
{
    return guarded("cairn_metadata_entry_value", [&] {
        const auto& [fqn, e] = entry_at(metadata, index);
        require(e.kind == cairn::ItemKind::scalar || e.kind == cairn::ItemKind::string,
                "entry '" + fqn + "' is " + cairn::item_kind_name(e.kind) + ", not a scalar or a string");
        if (value)
            *value = e.value.data();
        if (size)
            *size = e.value.size();
    });
}

} // extern "C"
