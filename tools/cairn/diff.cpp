// cairn diff: compares two checkpoints value by value, whatever their
// layouts and decompositions. Arrays are read in passes split along dim 0
// over the ranks; elements are compared bitwise (NaN equals the same NaN,
// 0.0 differs from -0.0), or numerically within --abs / --rel.
#include "tool.hpp"

#include <cairn/state_dict.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace cairn_tool {

namespace {

// Whether the element a differs from b under `tol`; `delta` gets |a - b|
// for two numbers that are not NaN (else -1).
bool differs(cairn::DType dtype, const std::byte* a, const std::byte* b, const Tolerance& tol, long double& delta)
{
    delta = -1;
    const std::size_t es = cairn::dtype_size(dtype);
    if (std::memcmp(a, b, es) == 0) {
        delta = 0;
        return false;
    }
    long double va = 0, vb = 0;
    if (!numeric_value(dtype, a, va) || !numeric_value(dtype, b, vb))
        return true;
    if (std::isnan(va) || std::isnan(vb)) // two NaNs are equal within any tolerance
        return !(tol.any() && std::isnan(va) && std::isnan(vb));
    if (std::isinf(va) || std::isinf(vb)) {
        if (va != vb)
            delta = INFINITY;
        return va != vb || !tol.any();
    }
    delta = std::fabs(va - vb);
    if (!tol.any())
        return true; // bitwise: 0.0 differs from -0.0
    if (tol.abs && delta <= static_cast<long double>(*tol.abs))
        return false;
    if (tol.rel && delta <= static_cast<long double>(*tol.rel) * std::fabs(va))
        return false;
    return true;
}

// What one rank found in one array.
struct ArrayDiff {
    std::uint64_t count = 0;
    std::int64_t first = -1; ///< global row-major index of the first difference
    std::string index, a, b; ///< its multi-index and values
    double largest = -1;     ///< the largest |a - b| of two numbers (not NaN); -1: none
    std::int64_t largest_at = -1;
    std::string largest_index;
};

std::int64_t flat_index(const cairn::Shape& shape, const cairn::Shape& idx)
{
    std::int64_t f = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
        f = f * shape[d] + idx[d];
    return f;
}

// The earlier of two positions wins a tie, so that every rank count gives
// the same answer.
void take_largest(ArrayDiff& d, double delta, std::int64_t at, const std::string& index)
{
    if (delta > d.largest || (delta == d.largest && at < d.largest_at)) {
        d.largest = delta;
        d.largest_at = at;
        d.largest_index = index;
    }
}

// Compares the regions of one piece of A and B (same box) into `diff`.
void compare(const Region& ra, const Region& rb, const Tolerance& tol, ArrayDiff& diff)
{
    if (ra.data.size() != rb.data.size() || std::memcmp(ra.data.data(), rb.data.data(), ra.data.size()) == 0)
        return;
    const auto& e = *ra.entry;
    const std::size_t es = cairn::dtype_size(e.dtype);
    const std::size_t n = ra.data.size() / es;
    const std::size_t nd = ra.box.ndim();
    for (std::size_t k = 0; k < n; ++k) {
        long double delta = -1;
        const std::byte* pa = ra.data.data() + k * es;
        const std::byte* pb = rb.data.data() + k * es;
        const bool different = differs(e.dtype, pa, pb, tol, delta);
        if (!different && delta <= 0)
            continue;
        // Multi-index of element k of the box (row-major).
        cairn::Shape idx(nd);
        std::size_t rest = k;
        for (std::size_t d = nd; d-- > 0;) {
            const auto ext = static_cast<std::size_t>(ra.box.shape[d]);
            idx[d] = ra.box.offsets[d] + static_cast<std::int64_t>(rest % ext);
            rest /= ext;
        }
        const std::int64_t f = flat_index(e.global_shape, idx);
        if (delta > 0)
            take_largest(diff, static_cast<double>(delta), f, index_str(idx));
        if (!different)
            continue;
        ++diff.count;
        if (diff.first < 0 || f < diff.first) {
            diff.first = f;
            diff.index = index_str(idx);
            diff.a = format_value(e.dtype, pa);
            diff.b = format_value(e.dtype, pb);
        }
    }
}

constexpr char sep = '\x1f';

std::string encode(const std::map<std::string, ArrayDiff>& diffs)
{
    char largest[40];
    std::string s;
    for (const auto& [name, d] : diffs) {
        std::snprintf(largest, sizeof largest, "%.17g", d.largest);
        s += name + sep + std::to_string(d.count) + sep + std::to_string(d.first) + sep + d.index + sep + d.a + sep +
             d.b + sep + largest + sep + std::to_string(d.largest_at) + sep + d.largest_index + '\n';
    }
    return s;
}

void merge(std::map<std::string, ArrayDiff>& into, const std::string& text)
{
    for (std::size_t p = 0; p < text.size();) {
        const auto nl = text.find('\n', p);
        const std::string line = text.substr(p, nl - p);
        p = nl + 1;
        std::vector<std::string> f;
        for (std::size_t q = 0;;) {
            const auto s = line.find(sep, q);
            f.push_back(line.substr(q, s == std::string::npos ? std::string::npos : s - q));
            if (s == std::string::npos)
                break;
            q = s + 1;
        }
        if (f.size() != 9)
            continue;
        ArrayDiff& d = into[f[0]];
        d.count += std::stoull(f[1]);
        const std::int64_t first = std::stoll(f[2]);
        if (first >= 0 && (d.first < 0 || first < d.first)) {
            d.first = first;
            d.index = f[3];
            d.a = f[4];
            d.b = f[5];
        }
        const double largest = std::strtod(f[6].c_str(), nullptr);
        if (largest >= 0)
            take_largest(d, largest, std::stoll(f[7]), f[8]);
    }
}

std::string plural(std::size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

std::string kind_dtype(const cairn::EntryMeta& e)
{
    std::string s = cairn::item_kind_name(e.kind);
    if (e.kind == cairn::ItemKind::array || e.kind == cairn::ItemKind::scalar)
        s += " " + std::string(cairn::dtype_name(e.dtype));
    return s;
}

} // namespace

int cmd_diff(const Context& ctx, const DiffArgs& args)
{
    const cairn::Metadata ma = open_checkpoint(ctx, args.a);
    const cairn::Metadata mb = open_checkpoint(ctx, args.b);

    // Differences by entry name, in name order, as text and as JSON
    // (docs/CLI.md); complete only on rank 0.
    std::map<std::string, std::string> lines;
    std::map<std::string, nlohmann::ordered_json> records;
    auto record = [&records](const std::string& name, const char* what) -> nlohmann::ordered_json& {
        auto& r = records[name];
        r["name"] = name;
        r["what"] = what;
        return r;
    };
    cairn::Metadata arrays; // arrays to compare element by element (A's entries)
    std::vector<std::string> blobs;
    for (const auto& [name, ea] : ma.entries) {
        const auto it = mb.entries.find(name);
        if (it == mb.entries.end()) {
            lines[name] = name + ": only in " + args.a;
            record(name, "only_in_a");
            continue;
        }
        const cairn::EntryMeta& eb = it->second;
        if (ea.kind != eb.kind || (ea.kind != cairn::ItemKind::string && ea.kind != cairn::ItemKind::bytes &&
                                   ea.dtype != eb.dtype)) {
            lines[name] = name + ": " + kind_dtype(ea) + " vs " + kind_dtype(eb);
            auto& r = record(name, "type");
            r["a"] = kind_dtype(ea);
            r["b"] = kind_dtype(eb);
            continue;
        }
        if (ea.global_shape != eb.global_shape) {
            lines[name] = name + ": shape " + cairn::shape_str(ea.global_shape) + " vs " + cairn::shape_str(eb.global_shape);
            auto& r = record(name, "shape");
            r["a"] = ea.global_shape;
            r["b"] = eb.global_shape;
            continue;
        }
        switch (ea.kind) {
        case cairn::ItemKind::scalar: {
            const bool sized = ea.value.size() == cairn::dtype_size(ea.dtype) && eb.value.size() == ea.value.size();
            long double delta = 0;
            if (sized ? differs(ea.dtype, reinterpret_cast<const std::byte*>(ea.value.data()),
                                reinterpret_cast<const std::byte*>(eb.value.data()), args.tolerance, delta)
                      : ea.value != eb.value) {
                const std::string va = sized ? format_value(ea.dtype, ea.value.data()) : "?";
                const std::string vb = sized ? format_value(eb.dtype, eb.value.data()) : "?";
                lines[name] = name + ": " + va + " vs " + vb;
                auto& r = record(name, "value");
                r["a"] = json_from_text(va);
                r["b"] = json_from_text(vb);
            }
            break;
        }
        case cairn::ItemKind::string:
            if (ea.value != eb.value) {
                lines[name] = name + ": " + quoted(ea.value) + " vs " + quoted(eb.value);
                auto& r = record(name, "value");
                r["a"] = ea.value;
                r["b"] = eb.value;
            }
            break;
        case cairn::ItemKind::bytes: blobs.push_back(name); break;
        case cairn::ItemKind::array: arrays.entries.emplace(name, ea); break;
        }
    }
    std::size_t all_names = ma.entries.size(); // the union of both checkpoints' entries
    for (const auto& kv : mb.entries)
        if (!ma.entries.count(kv.first)) {
            lines[kv.first] = kv.first + ": only in " + args.b;
            record(kv.first, "only_in_b");
            ++all_names;
        }

    // Arrays, pass by pass; each rank compares its rows.
    std::uint64_t total = 0;
    const auto passes = plan_passes(ctx, arrays);
    for (const auto& pass : passes)
        for (const auto& piece : pass)
            if (const auto box = piece_box(ctx, piece))
                total += 2 * static_cast<std::uint64_t>(box->volume()) * cairn::dtype_size(piece.entry->dtype);
    ProgressBar bar(ctx, "diff", total);
    std::map<std::string, ArrayDiff> diffs;
    std::uint64_t done = 0;
    for (const auto& pass : passes) {
        std::vector<Region> ra, rb;
        for (const auto& piece : pass)
            if (const auto box = piece_box(ctx, piece)) {
                ra.push_back(Region{piece.name, piece.entry, *box, {}});
                rb.push_back(Region{piece.name, piece.entry, *box, {}});
            }
        std::uint64_t bytes = 0;
        for (const auto& r : ra)
            bytes += static_cast<std::uint64_t>(r.box.volume()) * cairn::dtype_size(r.entry->dtype);
        load_regions(ctx, args.a, ra, bar.callback(done));
        load_regions(ctx, args.b, rb, bar.callback(done + bytes));
        for (std::size_t k = 0; k < ra.size(); ++k)
            compare(ra[k], rb[k], args.tolerance, diffs[ra[k].name]);
        done += 2 * bytes;
        bar.update(done);
    }
    bar.finish();
    for (auto it = diffs.begin(); it != diffs.end();)
        it = it->second.count || it->second.largest > 0 ? std::next(it) : diffs.erase(it);
    const auto gathered = gather_strings(ctx, encode(diffs));
    std::map<std::string, ArrayDiff> all;
    for (const auto& g : gathered)
        merge(all, g);
    for (const auto& [name, d] : all) {
        if (!d.count)
            continue;
        const auto n = cairn::volume(arrays.entries.at(name).global_shape);
        lines[name] = name + ": " + std::to_string(d.count) + " of " + plural(static_cast<std::size_t>(n), "element", "elements") +
                      (n == 1 ? " differs" : " differ") + ", first at " + d.index + ": " + d.a + " vs " + d.b;
        if (d.largest > 0)
            lines[name] += "; largest difference " + format_double(d.largest) + " at " + d.largest_index;
        auto& r = record(name, "elements");
        r["count"] = d.count;
        r["of"] = n;
        r["first"] = {{"index", nlohmann::ordered_json::parse(d.index)},
                      {"a", json_from_text(d.a)},
                      {"b", json_from_text(d.b)}};
        if (d.largest > 0)
            r["largest"] = {{"difference", d.largest}, {"index", nlohmann::ordered_json::parse(d.largest_index)}};
    }

    // Byte blobs: rank 0 reads both sides.
    if (!blobs.empty()) {
        std::vector<std::vector<std::byte>> va(blobs.size()), vb(blobs.size());
        cairn::StateDict sa, sb;
        if (ctx.root())
            for (std::size_t k = 0; k < blobs.size(); ++k) {
                sa.add_bytes(blobs[k], &va[k]);
                sb.add_bytes(blobs[k], &vb[k]);
            }
        cairn::LoadOptions options;
        options.partial = true;
        cairn::load(sa, args.a, ctx.comm, options);
        cairn::load(sb, args.b, ctx.comm, options);
        for (std::size_t k = 0; ctx.root() && k < blobs.size(); ++k) {
            if (va[k] == vb[k])
                continue;
            std::size_t first = 0, count = 0;
            for (std::size_t i = va[k].size(); i-- > 0;)
                if (va[k][i] != vb[k][i]) {
                    first = i;
                    ++count;
                }
            char buf[96];
            std::snprintf(buf, sizeof buf, ": %zu of %zu bytes differ, first at offset %zu: 0x%02x vs 0x%02x", count,
                          va[k].size(), first, static_cast<unsigned>(va[k][first]), static_cast<unsigned>(vb[k][first]));
            lines[blobs[k]] = blobs[k] + buf;
            auto& r = record(blobs[k], "bytes");
            r["count"] = count;
            r["of"] = va[k].size();
            r["first"] = {{"offset", first},
                          {"a", static_cast<unsigned>(va[k][first])},
                          {"b", static_cast<unsigned>(vb[k][first])}};
        }
    }

    if (ctx.root() && args.json) {
        nlohmann::ordered_json doc;
        doc["a"] = args.a;
        doc["b"] = args.b;
        doc["equal"] = lines.empty();
        doc["tolerance"] = {{"abs", args.tolerance.abs ? nlohmann::ordered_json(*args.tolerance.abs) : nullptr},
                            {"rel", args.tolerance.rel ? nlohmann::ordered_json(*args.tolerance.rel) : nullptr}};
        doc["entries"] = all_names;
        doc["different"] = records.size();
        auto& list = doc["differences"] = nlohmann::ordered_json::array();
        for (auto& kv : records)
            list.push_back(std::move(kv.second));
        const std::string text = json_text(doc);
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
    } else if (ctx.root()) {
        std::size_t shown = 0;
        for (const auto& kv : lines) {
            if (shown++ == args.max_lines) {
                std::printf("... and %zu more\n", lines.size() - args.max_lines);
                break;
            }
            std::printf("%s\n", printable(kv.second).c_str());
        }
        const std::string a = printable(args.a), b = printable(args.b);
        std::string within;
        if (args.tolerance.abs)
            within += " --abs " + format_double(*args.tolerance.abs);
        if (args.tolerance.rel)
            within += " --rel " + format_double(*args.tolerance.rel);
        if (!within.empty())
            within = " within" + within;
        if (lines.empty())
            std::printf("%s and %s are equal%s (%s)\n", a.c_str(), b.c_str(), within.c_str(),
                        plural(all_names, "entry", "entries").c_str());
        else
            std::printf("%s and %s differ%s in %zu of %s\n", a.c_str(), b.c_str(), within.c_str(), lines.size(),
                        plural(all_names, "entry", "entries").c_str());
        std::fflush(stdout);
    }
    // Every rank returns rank 0's verdict (only rank 0 has the scalar, string
    // and blob lines).
    int different = lines.empty() ? 0 : 1;
    MPI_Bcast(&different, 1, MPI_INT, 0, ctx.comm);
    return different ? exit_different : exit_ok;
}

} // namespace cairn_tool
