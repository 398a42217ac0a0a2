#include "format/column_runs.hpp"

#include "cairn/errors.hpp"

#include <limits>
#include <type_traits>

namespace cairn::detail {

namespace {

// A column of more values than this is refused on read: a crafted run
// count must not make a reader allocate without bound (16 Gi values: far
// beyond the metadata of any checkpoint a rank can hold in memory).
constexpr std::uint64_t max_expanded_values = std::uint64_t(1) << 34;

template <class T>
bool as_i64(T v, std::int64_t& out)
{
    if constexpr (std::is_unsigned_v<T>) {
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return false;
    }
    out = static_cast<std::int64_t>(v);
    return true;
}

} // namespace

template <class T>
bool encode_runs(const std::vector<T>& values, const std::vector<RowBlock>& blocks, std::size_t max_runs,
                 std::vector<std::int64_t>& runs)
{
    std::size_t at = 0; // the block's first value
    for (const auto& b : blocks) {
        const std::size_t k = b.rows, w = b.width;
        if (w && (k > (values.size() - at) / w))
            return false;
        const T* base = values.data() + at;
        for (std::size_t j = 0; j < w; ++j) {
            std::size_t c = 0;
            while (c < k) {
                std::int64_t first = 0, prev = 0, step = 0, next = 0;
                if (!as_i64(base[c * w + j], first))
                    return false;
                std::size_t n = 1;
                prev = first;
                for (; c + n < k; ++n) {
                    if (!as_i64(base[(c + n) * w + j], next))
                        return false;
                    std::int64_t d = 0;
                    if (__builtin_sub_overflow(next, prev, &d))
                        return false;
                    if (n == 1)
                        step = d;
                    else if (d != step)
                        break;
                    prev = next;
                }
                if (runs.size() / 3 >= max_runs)
                    return false;
                runs.push_back(first);
                runs.push_back(n == 1 ? 0 : step);
                runs.push_back(static_cast<std::int64_t>(n));
                c += n;
            }
        }
        at += k * w;
    }
    return at == values.size();
}

bool too_many_values(const std::vector<RowBlock>& blocks)
{
    std::uint64_t total = 0;
    for (const auto& b : blocks) {
        if (b.width && b.rows > (max_expanded_values - total) / b.width)
            return true;
        total += b.rows * b.width;
    }
    return false;
}

template <class T>
void decode_run_block(const std::vector<std::int64_t>& runs, std::size_t& r, std::uint64_t rows, std::uint32_t width,
                      T* out, const std::string& what, const std::string& entry)
{
    const auto fail = [&](const std::string& why) { throw error::FormatError(what + ": " + why); };
    const std::size_t k = rows, w = width;
    for (std::size_t j = 0; j < w; ++j) {
        for (std::size_t c = 0; c < k;) {
            if (3 * r + 3 > runs.size())
                fail("the runs end inside " + entry + " (" + std::to_string(r) + " runs)");
            const std::int64_t first = runs[3 * r], step = runs[3 * r + 1], count = runs[3 * r + 2];
            if (count < 1 || static_cast<std::uint64_t>(count) > k - c)
                fail("run " + std::to_string(r) + " has count " + std::to_string(count) + " where lane " +
                     std::to_string(j) + " of " + entry + " has " + std::to_string(k - c) + " values left");
            std::int64_t last = 0, span = 0;
            if (__builtin_mul_overflow(step, count - 1, &span) || __builtin_add_overflow(first, span, &last))
                fail("run " + std::to_string(r) + " overflows 64 bits");
            if (std::is_unsigned_v<T> && (first < 0 || last < 0))
                fail("run " + std::to_string(r) + " holds negative values in an unsigned column");
            for (std::int64_t t = 0; t < count; ++t) // first + step * t lies between first and last
                out[(c + static_cast<std::size_t>(t)) * w + j] = static_cast<T>(first + step * t);
            c += static_cast<std::size_t>(count);
            ++r;
        }
    }
}

template <class T>
std::vector<T> decode_runs(const std::vector<std::int64_t>& runs, const std::vector<RowBlock>& blocks,
                           const std::string& what, const std::vector<std::string>* names)
{
    const auto fail = [&](const std::string& why) { throw error::FormatError(what + ": " + why); };
    const auto entry = [&](std::size_t i) {
        return names && i < names->size() ? "entry '" + (*names)[i] + "'" : "entry " + std::to_string(i);
    };
    if (runs.size() % 3)
        fail(std::to_string(runs.size()) + " values, not (first, step, count) triples");
    if (too_many_values(blocks))
        fail("more than " + std::to_string(max_expanded_values) + " values");
    std::uint64_t total = 0;
    for (const auto& b : blocks)
        total += b.rows * b.width;
    std::vector<T> out(static_cast<std::size_t>(total));
    std::size_t r = 0, at = 0; // next run; the block's first value
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        decode_run_block(runs, r, blocks[i].rows, blocks[i].width, out.data() + at, what, entry(i));
        at += blocks[i].rows * blocks[i].width;
    }
    if (3 * r != runs.size())
        fail(std::to_string(runs.size() / 3 - r) + " runs beyond the last entry's values");
    return out;
}

template bool encode_runs<std::int64_t>(const std::vector<std::int64_t>&, const std::vector<RowBlock>&, std::size_t,
                                        std::vector<std::int64_t>&);
template bool encode_runs<std::uint64_t>(const std::vector<std::uint64_t>&, const std::vector<RowBlock>&, std::size_t,
                                         std::vector<std::int64_t>&);
template std::vector<std::int64_t> decode_runs<std::int64_t>(const std::vector<std::int64_t>&,
                                                             const std::vector<RowBlock>&, const std::string&,
                                                             const std::vector<std::string>*);
template void decode_run_block<std::int64_t>(const std::vector<std::int64_t>&, std::size_t&, std::uint64_t,
                                             std::uint32_t, std::int64_t*, const std::string&, const std::string&);
template void decode_run_block<std::uint64_t>(const std::vector<std::int64_t>&, std::size_t&, std::uint64_t,
                                              std::uint32_t, std::uint64_t*, const std::string&, const std::string&);
template std::vector<std::uint64_t> decode_runs<std::uint64_t>(const std::vector<std::int64_t>&,
                                                               const std::vector<RowBlock>&, const std::string&,
                                                               const std::vector<std::string>*);

} // namespace cairn::detail
