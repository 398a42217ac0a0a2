// RowGroup (include/cairn/rows.hpp) and the step of save and load that
// places its rows (driver/rows.hpp).
#include "cairn/rows.hpp"

#include "cairn/errors.hpp"
#include "core/codec.hpp"
#include "driver/rows.hpp"
#include "plan/own_planners.hpp"

#include <mpi.h>

#include <algorithm>
#include <exception>
#include <string>
#include <tuple>

namespace cairn {

namespace {

std::string shape_text(const Shape& s)
{
    std::string t = "{";
    for (std::size_t i = 0; i < s.size(); ++i)
        t += (i ? "," : "") + std::to_string(s[i]);
    return t + "}";
}

} // namespace

std::uint64_t RowGroup::row_elements(const Shape& row_shape) noexcept
{
    std::uint64_t n = 1;
    for (const auto d : row_shape)
        n *= d < 0 ? 0 : static_cast<std::uint64_t>(d);
    return n;
}

RowGroup& RowGroup::add(const std::string& name, DType dtype, void* data, std::uint64_t rows, const Shape& row_shape,
                        RowResize resize)
{
    auto fail = [&](const std::string& why) { throw error::WrongAPIUsage("row array '" + name + "': " + why); };
    if (name.empty())
        throw error::WrongAPIUsage("row group: empty array name");
    if (name.find('.') != std::string::npos || name.find('\0') != std::string::npos)
        fail("the name has a '.' or a NUL byte");
    for (const auto& a : m_arrays)
        if (a.name == name)
            fail("the name is taken in this row group");
    for (const auto d : row_shape)
        if (d < 0)
            fail("negative extent in row shape " + shape_text(row_shape));
    if (!data && rows > 0)
        fail("null data for " + std::to_string(rows) + " rows");
    m_arrays.push_back(Array{name, dtype, data, rows, row_shape, std::move(resize), {}});
    return *this;
}

RowGroup& RowGroup::source(const std::string& name, RowSource source)
{
    for (auto& a : m_arrays) {
        if (a.name == name) {
            a.source = std::move(source);
            return *this;
        }
    }
    throw error::WrongAPIUsage("row group: no array '" + name + "' to set the source of");
}

RowGroup& RowGroup::split_counts(std::uint64_t rows)
{
    m_split = nullptr;
    m_given = true;
    m_given_rows = rows;
    return *this;
}

RowGroup& RowGroup::split(RowSplit split)
{
    m_split = std::move(split);
    m_given = false;
    return *this;
}

RowGroup& RowGroup::split_even()
{
    m_split = nullptr;
    m_given = false;
    return *this;
}

std::uint64_t RowGroup::even_share(std::uint64_t global_rows, int rank, int size) noexcept
{
    const auto p = static_cast<std::uint64_t>(size), r = static_cast<std::uint64_t>(rank);
    return global_rows / p + (r < global_rows % p ? 1 : 0);
}

std::uint64_t RowGroup::rows_to_save(const std::string& group)
{
    if (m_arrays.empty())
        throw error::WrongAPIUsage("row group '" + group + "' has no arrays");
    for (auto& a : m_arrays) {
        if (!a.source)
            continue;
        std::tie(a.data, a.rows) = a.source();
        if (!a.data && a.rows > 0 && row_elements(a.row_shape) > 0)
            throw error::WrongAPIUsage("row array '" + group + "." + a.name + "': null data for " +
                                       std::to_string(a.rows) + " rows");
    }
    const Array& first = m_arrays.front();
    for (const auto& a : m_arrays)
        if (a.rows != first.rows)
            throw error::WrongAPIUsage("row group '" + group + "': its arrays disagree in rows: '" + group + "." +
                                       first.name + "' has " + std::to_string(first.rows) + ", '" + group + "." +
                                       a.name + "' has " + std::to_string(a.rows));
    return first.rows;
}

std::uint64_t RowGroup::rows_to_load(std::uint64_t global_rows, int rank, int size) const
{
    if (m_given)
        return m_given_rows;
    if (m_split)
        return m_split(global_rows, rank, size);
    return even_share(global_rows, rank, size);
}

void RowGroup::place(const std::string& group, std::uint64_t rows, std::uint64_t offset, std::uint64_t global,
                     bool resize)
{
    m_placed = false;
    if (resize) {
        for (auto& a : m_arrays) {
            if (!a.resize)
                throw error::WrongAPIUsage("row array '" + group + "." + a.name +
                                           "': no resize callback to give the buffer on load");
            a.data = a.resize(rows);
            a.rows = rows;
            if (!a.data && rows > 0 && row_elements(a.row_shape) > 0)
                throw error::WrongAPIUsage("row array '" + group + "." + a.name +
                                           "': the resize callback returned null for " + std::to_string(rows) +
                                           " rows");
        }
    }
    m_rows = rows;
    m_offset = offset;
    m_global = global;
    m_placed = true;
}

StateDict RowGroup::state_dict()
{
    if (!m_placed)
        throw error::WrongAPIUsage("row group: its rows are placed by save() and load(); add it to the state dict "
                                   "with add_rows() at the top level or in a nested dict");
    StateDict d;
    for (const auto& a : m_arrays) {
        ArrayShard s;
        s.dtype = a.dtype;
        s.global_shape.push_back(static_cast<std::int64_t>(m_global));
        s.box.offsets.push_back(static_cast<std::int64_t>(m_offset));
        s.box.shape.push_back(static_cast<std::int64_t>(m_rows));
        for (const auto t : a.row_shape) {
            s.global_shape.push_back(t);
            s.box.offsets.push_back(0);
            s.box.shape.push_back(t);
        }
        s.data = a.data;
        d.add_array(a.name, s);
    }
    return d;
}

namespace detail {

namespace {

struct Found {
    std::string name;
    RowGroup* group;
};

void collect(StateDict& d, const std::string& prefix, std::vector<Found>& out)
{
    for (auto& [name, e] : d.entries()) {
        if (auto* s = std::get_if<Stateful*>(&e)) {
            if (auto* g = dynamic_cast<RowGroup*>(*s))
                out.push_back({prefix + name, g});
        } else if (auto* n = std::get_if<std::shared_ptr<StateDict>>(&e)) {
            if (*n)
                collect(**n, prefix + name + ".", out);
        }
    }
}

// The groups, their arrays, dtypes and row shapes, in a form that is the
// same on ranks that add the same groups.
std::string describe(const std::vector<Found>& groups)
{
    std::string t;
    for (const auto& f : groups) {
        t += f.name + "(";
        auto arrays = f.group->arrays();
        std::sort(arrays.begin(), arrays.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
        for (const auto& a : arrays)
            t += a.name + ":" + std::string(dtype_name(a.dtype)) + shape_text(a.row_shape) + ";";
        t += ") ";
    }
    return t;
}

// Collective: the groups of `state`, agreed on by every rank; `local` runs
// on this rank's groups before the agreement (its failure fails every rank).
std::vector<Found> agreed_groups(const Comm& c, StateDict& state, const char* call,
                                 const std::function<void(const std::vector<Found>&)>& local)
{
    std::vector<Found> groups;
    std::exception_ptr err;
    std::string text;
    try {
        collect(state, "", groups);
        std::sort(groups.begin(), groups.end(), [](const Found& a, const Found& b) { return a.name < b.name; });
        text = describe(groups);
        if (!groups.empty())
            local(groups);
    } catch (...) {
        err = std::current_exception();
    }
    // {n, ~n, h, ~h}: after the minimum (signed or unsigned alike), equal
    // on every rank exactly when min == max for both.
    const std::uint64_t n = groups.size(), h = hash64(text.data(), text.size());
    std::uint64_t mins[4] = {n, ~n, h, ~h};
    agree(c, "rows", err, mins, 4);
    if (mins[0] != ~mins[1] || mins[2] != ~mins[3])
        throw error::Mismatch(std::string(call) +
                              ": ranks add different row groups (names, arrays, dtypes or row shapes differ); rank " +
                              std::to_string(c.rank) + " adds: " + (groups.empty() ? std::string("none") : text));
    return groups;
}

void check_mpi(int rc, const char* what)
{
    if (rc != MPI_SUCCESS)
        throw Error(Error::Kind::generic,
                    std::string("rows: ") + what + " failed (MPI error " + std::to_string(rc) + ")");
}

// Every rank's offset and the sum of `counts` over the ranks.
void prefix_sums(const Comm& c, const std::vector<std::uint64_t>& counts, std::vector<std::uint64_t>& offsets,
                 std::vector<std::uint64_t>& totals)
{
    const int g = static_cast<int>(counts.size());
    offsets.assign(counts.size(), 0);
    totals.assign(counts.size(), 0);
    check_mpi(MPI_Exscan(counts.data(), offsets.data(), g, MPI_UINT64_T, MPI_SUM, c.comm), "MPI_Exscan");
    if (c.rank == 0)
        std::fill(offsets.begin(), offsets.end(), 0); // undefined on rank 0
    check_mpi(MPI_Allreduce(counts.data(), totals.data(), g, MPI_UINT64_T, MPI_SUM, c.comm), "MPI_Allreduce");
}

// The coordinator: the stored rows of each group (their arrays must agree).
std::vector<std::uint64_t> stored_rows(const std::vector<Found>& groups, const Metadata& md, const LoadOptions& o)
{
    std::vector<std::uint64_t> out;
    for (const auto& f : groups) {
        std::string have; // the first array found
        std::uint64_t rows = 0;
        bool any = false, all_may_miss = true;
        for (const auto& a : f.group->arrays()) {
            const std::string key = f.name + "." + a.name;
            const auto e = md.entries.find(key);
            if (e == md.entries.end()) {
                all_may_miss = all_may_miss && may_be_missing(key, o.partial, o.may_be_missing);
                continue;
            }
            const EntryMeta& m = e->second;
            Shape want_rows(m.global_shape.begin() + (m.global_shape.empty() ? 0 : 1), m.global_shape.end());
            if (m.kind != ItemKind::array || m.global_shape.empty() || want_rows != a.row_shape)
                throw error::Mismatch("row array '" + key + "': stored with global shape " +
                                      shape_text(m.global_shape) + ", which is not rows of " + shape_text(a.row_shape));
            if (m.dtype != a.dtype)
                throw error::Mismatch("row array '" + key + "': stored as " + std::string(dtype_name(m.dtype)) +
                                      ", the state has " + std::string(dtype_name(a.dtype)));
            const auto r = static_cast<std::uint64_t>(m.global_shape[0]);
            if (any && r != rows)
                throw error::Mismatch("row group '" + f.name + "': its stored arrays disagree in rows: '" + have +
                                      "' has " + std::to_string(rows) + ", '" + key + "' has " + std::to_string(r));
            if (!any)
                have = key;
            any = true;
            rows = r;
        }
        if (!any && !all_may_miss)
            throw error::NotFound("row group '" + f.name + "': the checkpoint has none of its arrays");
        out.push_back(rows);
    }
    return out;
}

} // namespace

void place_rows_for_save(const Comm& c, StateDict& state)
{
    std::vector<std::uint64_t> counts;
    const auto groups = agreed_groups(c, state, "save", [&](const std::vector<Found>& gs) {
        for (const auto& f : gs)
            counts.push_back(f.group->rows_to_save(f.name));
    });
    if (groups.empty())
        return;
    std::vector<std::uint64_t> offsets, totals;
    prefix_sums(c, counts, offsets, totals);
    for (std::size_t i = 0; i < groups.size(); ++i)
        groups[i].group->place(groups[i].name, counts[i], offsets[i], totals[i], false);
}

void place_rows_for_load(const Comm& c, StateDict& state, StorageReader* storage, const LoadOptions& options)
{
    const auto groups = agreed_groups(c, state, "load", [](const std::vector<Found>&) {});
    if (groups.empty())
        return;
    std::vector<std::uint64_t> global(groups.size(), 0);
    run_phase(c, "rows", [&] {
        if (!c.coordinator())
            return;
        if (!storage)
            throw error::Internal("rows: no storage reader on the coordinator");
        global = stored_rows(groups, storage->read_metadata(), options);
    });
    check_mpi(MPI_Bcast(global.data(), static_cast<int>(global.size()), MPI_UINT64_T, 0, c.comm), "MPI_Bcast");
    std::vector<std::uint64_t> mine(groups.size(), 0);
    run_phase(c, "rows", [&] {
        for (std::size_t i = 0; i < groups.size(); ++i)
            mine[i] = groups[i].group->rows_to_load(global[i], c.rank, c.size);
    });
    std::vector<std::uint64_t> offsets, totals;
    prefix_sums(c, mine, offsets, totals);
    for (std::size_t i = 0; i < groups.size(); ++i)
        if (totals[i] != global[i])
            throw error::Mismatch("load: row group '" + groups[i].name + "': the ranks ask for " +
                                  std::to_string(totals[i]) + " rows in all, the checkpoint has " +
                                  std::to_string(global[i]));
    run_phase(c, "rows", [&] {
        for (std::size_t i = 0; i < groups.size(); ++i)
            groups[i].group->place(groups[i].name, mine[i], offsets[i], global[i], true);
    });
}

} // namespace detail

} // namespace cairn
