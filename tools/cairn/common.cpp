// What the verbs of the `cairn` tool share: agreement, formatting, the
// progress bar, and reading arrays in passes of bounded memory.
#include "tool.hpp"

#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

namespace cairn_tool {

using cairn::DType;

void agree(const Context& ctx, const std::function<void()>& f)
{
    std::string message;
    bool failed = false;
    try {
        f();
    } catch (const std::exception& e) {
        message = e.what();
        failed = true;
    }
    int mine = failed ? ctx.rank : ctx.size, first = ctx.size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, ctx.comm);
    if (first == ctx.size)
        return;
    int n = static_cast<int>(message.size());
    MPI_Bcast(&n, 1, MPI_INT, first, ctx.comm);
    message.resize(static_cast<std::size_t>(n));
    MPI_Bcast(message.data(), n, MPI_CHAR, first, ctx.comm);
    if (first != 0 && ctx.size > 1)
        message = "rank " + std::to_string(first) + ": " + message;
    throw ToolError(message);
}

namespace {

// The metadata's fields and entries without chunks, as bytes for a
// broadcast (the tool's own: both ends are this build).
class Packer {
public:
    void u64(std::uint64_t v) { raw(&v, sizeof v); }
    void str(const std::string& s)
    {
        u64(s.size());
        raw(s.data(), s.size());
    }
    std::vector<char> bytes;

private:
    void raw(const void* p, std::size_t n)
    {
        const auto* c = static_cast<const char*>(p);
        bytes.insert(bytes.end(), c, c + n);
    }
};

class Unpacker {
public:
    explicit Unpacker(const std::vector<char>& b) : m_b(b) {}
    std::uint64_t u64()
    {
        std::uint64_t v = 0;
        take(&v, sizeof v);
        return v;
    }
    std::string str()
    {
        std::string s(static_cast<std::size_t>(u64()), '\0');
        take(s.data(), s.size());
        return s;
    }

private:
    void take(void* p, std::size_t n)
    {
        if (m_b.size() - m_at < n)
            throw ToolError("internal: short metadata broadcast");
        std::memcpy(p, m_b.data() + m_at, n);
        m_at += n;
    }
    const std::vector<char>& m_b;
    std::size_t m_at = 0;
};

std::vector<char> pack_entries(const cairn::Metadata& md)
{
    Packer p;
    p.u64(static_cast<std::uint64_t>(md.format_version));
    p.str(md.library_version);
    p.u64(static_cast<std::uint64_t>(md.world_size));
    p.str(md.layout);
    p.str(md.created);
    p.u64(md.checksum_block);
    p.u64(md.entries.size());
    for (const auto& [name, e] : md.entries) {
        p.str(name);
        p.u64(static_cast<std::uint64_t>(e.kind));
        p.u64(static_cast<std::uint64_t>(e.dtype));
        p.u64(e.global_shape.size());
        for (const auto x : e.global_shape)
            p.u64(static_cast<std::uint64_t>(x));
        p.str(e.value);
    }
    return std::move(p.bytes);
}

cairn::Metadata unpack_entries(const std::vector<char>& b)
{
    Unpacker u(b);
    cairn::Metadata md;
    md.format_version = static_cast<int>(u.u64());
    md.library_version = u.str();
    md.world_size = static_cast<int>(u.u64());
    md.layout = u.str();
    md.created = u.str();
    md.checksum_block = u.u64();
    const auto n = u.u64();
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::string name = u.str();
        cairn::EntryMeta e;
        e.kind = static_cast<cairn::ItemKind>(u.u64());
        e.dtype = static_cast<cairn::DType>(u.u64());
        e.global_shape.resize(static_cast<std::size_t>(u.u64()));
        for (auto& x : e.global_shape)
            x = static_cast<std::int64_t>(u.u64());
        e.value = u.str();
        md.entries.emplace(name, std::move(e));
    }
    return md;
}

} // namespace

cairn::Metadata open_checkpoint(const Context& ctx, const std::string& path)
{
    std::vector<char> packed;
    agree(ctx, [&] {
        if (ctx.root())
            packed = pack_entries(cairn::read_metadata(path)); // the chunks go with the full metadata
    });
    std::uint64_t n = packed.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, ctx.comm);
    packed.resize(static_cast<std::size_t>(n));
    for (std::uint64_t at = 0; at < n;) { // in pieces below the int limit
        const auto piece = static_cast<int>(std::min<std::uint64_t>(n - at, std::uint64_t(1) << 30));
        MPI_Bcast(packed.data() + at, piece, MPI_CHAR, 0, ctx.comm);
        at += static_cast<std::uint64_t>(piece);
    }
    return unpack_entries(packed);
}

cairn::Metadata open_checkpoint_on_root(const Context& ctx, const std::string& path)
{
    cairn::Metadata md;
    agree(ctx, [&] {
        if (ctx.root())
            md = cairn::read_metadata(path);
    });
    return md;
}

const cairn::EntryMeta& find_entry(const cairn::Metadata& md, const std::string& path, const std::string& name)
{
    const auto e = md.entries.find(name);
    if (e != md.entries.end())
        return e->second;
    std::string known;
    std::size_t n = 0;
    for (const auto& kv : md.entries) {
        if (n++ == 8) {
            known += ", ...";
            break;
        }
        known += (known.empty() ? "" : ", ") + kv.first;
    }
    throw ToolError(path + ": no entry '" + name + "' (it has " + std::to_string(md.entries.size()) +
                    " entries: " + known + ")");
}

std::uint64_t stored_bytes(const cairn::EntryMeta& e)
{
    if (e.kind == cairn::ItemKind::bytes)
        return e.global_shape.empty() ? 0 : static_cast<std::uint64_t>(e.global_shape[0]);
    if (e.kind != cairn::ItemKind::array)
        return 0;
    return static_cast<std::uint64_t>(cairn::volume(e.global_shape)) * cairn::dtype_size(e.dtype);
}

// ---- formatting ------------------------------------------------------------

namespace {

float half_to_float(std::uint16_t h)
{
    const std::uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    float v;
    if (exp == 0)
        v = std::ldexp(static_cast<float>(man), -24);
    else if (exp == 31)
        v = man ? std::nanf("") : INFINITY;
    else
        v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
    return sign ? -v : v;
}

float bf16_to_float(std::uint16_t b)
{
    const std::uint32_t bits = std::uint32_t(b) << 16;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

template <class T>
T load_as(const void* p)
{
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class F>
std::string float_str(F v)
{
    if (std::isnan(v))
        return "nan";
    if (std::isinf(v))
        return v < 0 ? "-inf" : "inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

} // namespace

std::string format_value(DType dtype, const void* p)
{
    switch (dtype) {
    case DType::f16: return float_str(half_to_float(load_as<std::uint16_t>(p)));
    case DType::bf16: return float_str(bf16_to_float(load_as<std::uint16_t>(p)));
    case DType::f32: return float_str(load_as<float>(p));
    case DType::f64: return float_str(load_as<double>(p));
    case DType::i8: return std::to_string(load_as<std::int8_t>(p));
    case DType::i16: return std::to_string(load_as<std::int16_t>(p));
    case DType::i32: return std::to_string(load_as<std::int32_t>(p));
    case DType::i64: return std::to_string(load_as<std::int64_t>(p));
    case DType::u8: return std::to_string(load_as<std::uint8_t>(p));
    case DType::u16: return std::to_string(load_as<std::uint16_t>(p));
    case DType::u32: return std::to_string(load_as<std::uint32_t>(p));
    case DType::u64: return std::to_string(load_as<std::uint64_t>(p));
    case DType::boolean: return load_as<std::uint8_t>(p) ? "true" : "false";
    }
    return "?";
}

bool numeric_value(DType dtype, const void* p, long double& v)
{
    switch (dtype) {
    case DType::f16: v = half_to_float(load_as<std::uint16_t>(p)); return true;
    case DType::bf16: v = bf16_to_float(load_as<std::uint16_t>(p)); return true;
    case DType::f32: v = load_as<float>(p); return true;
    case DType::f64: v = load_as<double>(p); return true;
    case DType::i8: v = load_as<std::int8_t>(p); return true;
    case DType::i16: v = load_as<std::int16_t>(p); return true;
    case DType::i32: v = load_as<std::int32_t>(p); return true;
    case DType::i64: v = static_cast<long double>(load_as<std::int64_t>(p)); return true;
    case DType::u8: v = load_as<std::uint8_t>(p); return true;
    case DType::u16: v = load_as<std::uint16_t>(p); return true;
    case DType::u32: v = load_as<std::uint32_t>(p); return true;
    case DType::u64: v = static_cast<long double>(load_as<std::uint64_t>(p)); return true;
    case DType::boolean: return false;
    }
    return false;
}

std::string format_double(double v) { return float_str(v); }

std::string format_number(DType dtype, long double v)
{
    switch (dtype) {
    case DType::f64: return float_str(static_cast<double>(v));
    case DType::f32:
    case DType::f16:
    case DType::bf16: return float_str(static_cast<float>(v));
    case DType::boolean: return v != 0 ? "true" : "false";
    case DType::u8:
    case DType::u16:
    case DType::u32:
    case DType::u64: return std::to_string(static_cast<std::uint64_t>(v));
    default: return std::to_string(static_cast<std::int64_t>(v));
    }
}

nlohmann::ordered_json json_value(DType dtype, const void* p) { return json_from_text(format_value(dtype, p)); }

nlohmann::ordered_json json_from_text(const std::string& text)
{
    if (text == "nan" || text == "inf" || text == "-inf" || text == "?")
        return text;
    if (text == "true" || text == "false")
        return text == "true";
    // Integers of 64 bits stay exact; floats keep their shortest form
    // (parsed as the double nearest to it).
    auto j = nlohmann::ordered_json::parse(text, nullptr, false);
    return j.is_discarded() ? nlohmann::ordered_json(text) : j;
}

std::string json_text(const nlohmann::ordered_json& j)
{
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

namespace {

// The length of the valid UTF-8 sequence at b[i] (of n bytes), 0 if none.
std::size_t utf8_length(const unsigned char* b, std::size_t i, std::size_t n)
{
    const unsigned char ch = b[i];
    if (ch < 0x80)
        return 1;
    const std::size_t len = ch >= 0xf0 && ch < 0xf5 ? 4 : ch >= 0xe0 && ch < 0xf0 ? 3 : ch >= 0xc2 && ch < 0xe0 ? 2 : 0;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k)
        ok = (b[i + k] & 0xc0) == 0x80;
    if (ok && len == 3 && ch == 0xe0 && b[i + 1] < 0xa0)
        ok = false; // overlong
    if (ok && len == 3 && ch == 0xed && b[i + 1] >= 0xa0)
        ok = false; // surrogate
    if (ok && len == 4 && ((ch == 0xf0 && b[i + 1] < 0x90) || (ch == 0xf4 && b[i + 1] >= 0x90)))
        ok = false;
    return ok ? len : 0;
}

// `s` with control characters and bytes that are not UTF-8 escaped; with
// `quote`, also '"' and '\\', and enclosed in quotes.
std::string escaped(const std::string& s, bool quote)
{
    std::string out = quote ? "\"" : "";
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    const std::size_t n = s.size();
    char buf[8];
    for (std::size_t i = 0; i < n;) {
        const unsigned char ch = b[i];
        const std::size_t len = utf8_length(b, i, n);
        if (quote && (ch == '"' || ch == '\\')) {
            out += '\\';
            out += static_cast<char>(ch);
        } else if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch == '\r') {
            out += "\\r";
        } else if (ch < 0x20 || ch == 0x7f || len == 0) {
            std::snprintf(buf, sizeof buf, "\\x%02x", ch);
            out += buf;
            ++i;
            continue;
        } else if (len == 2 && ch == 0xc2 && b[i + 1] < 0xa0) { // C1 control, U+0080-U+009F
            std::snprintf(buf, sizeof buf, "\\u%04x", b[i + 1]);
            out += buf;
        } else {
            out.append(s, i, len);
        }
        i += len;
    }
    return quote ? out + "\"" : out;
}

} // namespace

std::string quoted(const std::string& s) { return escaped(s, true); }

std::string printable(const std::string& s) { return escaped(s, false); }

std::string human_bytes(std::uint64_t n)
{
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double b = static_cast<double>(n);
    int u = 0;
    while (b >= 1024.0 && u < 5) {
        b /= 1024.0;
        ++u;
    }
    char buf[48];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
    return buf;
}

std::string index_str(const cairn::Shape& index)
{
    std::string s = "[";
    for (std::size_t d = 0; d < index.size(); ++d)
        s += (d ? ", " : "") + std::to_string(index[d]);
    return s + "]";
}

// ---- progress --------------------------------------------------------------

namespace {

double now_seconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

ProgressBar::ProgressBar(const Context& ctx, std::string label, std::uint64_t total)
    : m_on(ctx.root() && !ctx.quiet && isatty(STDERR_FILENO) == 1), m_label(std::move(label)), m_total(total)
{
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(std::uint64_t done)
{
    m_done = done;
    if (!m_on)
        return;
    const double t = now_seconds();
    if (m_drawn && t - m_last < 0.1 && done < m_total)
        return;
    m_last = t;
    const double f = m_total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(m_total)) : 1.0;
    constexpr int width = 30;
    const int full = static_cast<int>(f * width);
    std::string bar(static_cast<std::size_t>(full), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%s [%s] %3d%% %s / %s ", m_label.c_str(), bar.c_str(), static_cast<int>(f * 100.0),
                 human_bytes(done).c_str(), human_bytes(m_total).c_str());
    std::fflush(stderr);
    m_drawn = true;
}

cairn::ProgressCallback ProgressBar::callback(std::uint64_t base)
{
    if (!m_on)
        return {};
    return [this, base](const cairn::Progress& p) {
        if (p.phase == cairn::Phase::write || p.phase == cairn::Phase::read || p.phase == cairn::Phase::verify)
            update(base + p.done);
    };
}

void ProgressBar::finish()
{
    if (m_on && m_drawn) {
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
    }
    m_drawn = false;
}

// ---- passes ------------------------------------------------------------------

namespace {

std::uint64_t row_bytes(const cairn::EntryMeta& e)
{
    std::uint64_t n = cairn::dtype_size(e.dtype);
    for (std::size_t d = 1; d < e.global_shape.size(); ++d)
        n *= static_cast<std::uint64_t>(e.global_shape[d]);
    return n;
}

} // namespace

cairn::Box split_rows(const cairn::Shape& shape, std::int64_t begin, std::int64_t end, int parts, int k)
{
    const std::int64_t n = end - begin;
    const std::int64_t lo = begin + n * k / parts, hi = begin + n * (k + 1) / parts;
    cairn::Box box{cairn::Shape(shape.size(), 0), shape};
    box.offsets[0] = lo;
    box.shape[0] = hi - lo;
    return box;
}

std::optional<cairn::Box> piece_box(const Context& ctx, const Piece& piece)
{
    const auto& shape = piece.entry->global_shape;
    if (shape.empty()) // 0-d: rank 0 holds the element
        return ctx.rank == 0 ? std::optional<cairn::Box>(cairn::Box{}) : std::nullopt;
    cairn::Box box = split_rows(shape, piece.begin, piece.end, ctx.size, ctx.rank);
    if (box.empty())
        return std::nullopt;
    return box;
}

std::vector<std::vector<Piece>> plan_passes(const Context& ctx, const cairn::Metadata& md)
{
    std::vector<std::vector<Piece>> passes(1);
    std::uint64_t used = 0; // per rank, in the current pass
    const auto P = static_cast<std::uint64_t>(ctx.size);
    for (const auto& [name, e] : md.entries) {
        if (e.kind != cairn::ItemKind::array || cairn::volume(e.global_shape) == 0)
            continue;
        const std::uint64_t row = row_bytes(e);
        const auto n = e.global_shape.empty() ? std::int64_t(1) : e.global_shape[0];
        const std::uint64_t rows_per_rank = std::max<std::uint64_t>(1, ctx.memory / row);
        const auto slab = static_cast<std::int64_t>(std::min<std::uint64_t>(rows_per_rank * P, std::uint64_t(n)));
        for (std::int64_t s = 0; s < n; s += slab) {
            const std::int64_t t = std::min(n, s + slab);
            const std::uint64_t cost = (static_cast<std::uint64_t>(t - s) + P - 1) / P * row;
            if (!passes.back().empty() && used + cost > ctx.memory) {
                passes.emplace_back();
                used = 0;
            }
            passes.back().push_back(Piece{name, &e, s, t});
            used += cost;
        }
    }
    if (passes.back().empty())
        passes.pop_back();
    return passes;
}

cairn::LoadResult load_regions(const Context& ctx, const std::string& path, std::vector<Region>& regions,
                               const cairn::ProgressCallback& progress)
{
    cairn::StateDict state;
    for (auto& r : regions) {
        const auto es = cairn::dtype_size(r.entry->dtype);
        r.data.assign(static_cast<std::size_t>(std::max<std::int64_t>(r.box.volume(), 0)) * es, std::byte{0});
        state.add_array(r.name, cairn::ArrayShard{r.entry->dtype, r.entry->global_shape, r.box,
                                                  r.data.empty() ? nullptr : r.data.data(), {}, cairn::MemorySpace::host});
    }
    cairn::LoadOptions options;
    options.partial = true; // only the regions asked for
    options.progress = progress;
    return cairn::load(state, path, ctx.comm, options);
}

std::vector<std::string> gather_strings(const Context& ctx, const std::string& mine)
{
    int n = static_cast<int>(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(ctx.size)), displs(static_cast<std::size_t>(ctx.size));
    MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, ctx.comm);
    std::string all;
    if (ctx.root()) {
        int total = 0;
        for (int r = 0; r < ctx.size; ++r) {
            displs[static_cast<std::size_t>(r)] = total;
            total += sizes[static_cast<std::size_t>(r)];
        }
        all.resize(static_cast<std::size_t>(total));
    }
    MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, 0, ctx.comm);
    std::vector<std::string> out;
    if (ctx.root())
        for (int r = 0; r < ctx.size; ++r)
            out.push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                                     static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)])));
    return out;
}

} // namespace cairn_tool
