// cairn ls, cairn cat: what a checkpoint holds, and the values of one entry.
#include "tool.hpp"

#include <cairn/state_dict.hpp>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <cmath>

namespace cairn_tool {

namespace {

std::string layout_words(const std::string& layout)
{
    if (layout == "distcp")
        return "per-rank layout";
    if (layout == "container")
        return "container layout";
    return "layout '" + layout + "'";
}

// The value of a scalar, checked against its dtype's size.
std::string scalar_text(const std::string& path, const std::string& name, const cairn::EntryMeta& e)
{
    if (e.value.size() != cairn::dtype_size(e.dtype))
        throw ToolError(path + ": scalar '" + name + "' holds " + std::to_string(e.value.size()) + " bytes, its dtype " +
                        std::string(cairn::dtype_name(e.dtype)) + " has " + std::to_string(cairn::dtype_size(e.dtype)));
    return format_value(e.dtype, e.value.data());
}

// The box of a chunk as "[0:30, 5:10]" (start:stop per dimension).
std::string box_text(const cairn::Box& box)
{
    std::string s = "[";
    for (std::size_t d = 0; d < box.ndim(); ++d)
        s += (d ? ", " : "") + std::to_string(box.offsets[d]) + ":" + std::to_string(box.offsets[d] + box.shape[d]);
    return s + "]";
}

nlohmann::ordered_json box_json(const cairn::Box& box)
{
    auto j = nlohmann::ordered_json::array();
    for (std::size_t d = 0; d < box.ndim(); ++d)
        j.push_back({box.offsets[d], box.offsets[d] + box.shape[d]});
    return j;
}

// The smallest and largest value of every array with elements (NaNs left
// out; none for an array of NaNs only), read in passes over the ranks, as
// text on rank 0. Collective.
std::map<std::string, std::pair<std::string, std::string>> array_extremes(const Context& ctx, const std::string& path)
{
    const cairn::Metadata md = open_checkpoint(ctx, path);
    std::map<std::string, std::pair<long double, long double>> mine; // every array, in name order
    for (const auto& [name, e] : md.entries)
        if (e.kind == cairn::ItemKind::array && cairn::volume(e.global_shape) > 0)
            mine.emplace(name, std::make_pair(static_cast<long double>(INFINITY), -static_cast<long double>(INFINITY)));
    std::uint64_t total = 0;
    const auto passes = plan_passes(ctx, md);
    for (const auto& pass : passes)
        for (const auto& piece : pass)
            if (const auto box = piece_box(ctx, piece))
                total += static_cast<std::uint64_t>(box->volume()) * cairn::dtype_size(piece.entry->dtype);
    ProgressBar bar(ctx, "ls -l", total);
    std::uint64_t done = 0;
    for (const auto& pass : passes) {
        std::vector<Region> regions;
        for (const auto& piece : pass)
            if (const auto box = piece_box(ctx, piece))
                regions.push_back(Region{piece.name, piece.entry, *box, {}});
        load_regions(ctx, path, regions, bar.callback(done));
        for (const auto& r : regions) {
            auto& [lo, hi] = mine.at(r.name);
            const std::size_t es = cairn::dtype_size(r.entry->dtype);
            for (std::size_t k = 0; k < r.data.size(); k += es) {
                long double v = 0;
                if (!numeric_value(r.entry->dtype, r.data.data() + k, v))
                    v = r.data[k] != std::byte{0} ? 1 : 0; // bool
                if (std::isnan(v))
                    continue;
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
            done += r.data.size();
        }
        bar.update(done);
    }
    bar.finish();
    std::vector<long double> lo, hi, all_lo(mine.size()), all_hi(mine.size());
    for (const auto& kv : mine) {
        lo.push_back(kv.second.first);
        hi.push_back(kv.second.second);
    }
    const int n = static_cast<int>(mine.size());
    MPI_Reduce(lo.data(), all_lo.data(), n, MPI_LONG_DOUBLE, MPI_MIN, 0, ctx.comm);
    MPI_Reduce(hi.data(), all_hi.data(), n, MPI_LONG_DOUBLE, MPI_MAX, 0, ctx.comm);
    std::map<std::string, std::pair<std::string, std::string>> out;
    std::size_t k = 0;
    for (const auto& kv : mine) {
        const cairn::DType dtype = md.entries.at(kv.first).dtype;
        if (ctx.root() && all_lo[k] <= all_hi[k])
            out[kv.first] = {format_number(dtype, all_lo[k]), format_number(dtype, all_hi[k])};
        ++k;
    }
    return out;
}

using Extremes = std::map<std::string, std::pair<std::string, std::string>>;

// `ls --json` (docs/CLI.md).
nlohmann::ordered_json ls_json(const LsArgs& args, const cairn::Metadata& md, const Extremes& extremes)
{
    const std::string& path = args.path;
    nlohmann::ordered_json doc;
    doc["checkpoint"] = path;
    doc["layout"] = md.layout;
    doc["format_version"] = md.format_version;
    doc["library_version"] = md.library_version;
    doc["world_size"] = md.world_size;
    doc["created"] = md.created;
    doc["checksum_block"] = md.checksum_block;
    auto& entries = doc["entries"] = nlohmann::ordered_json::array();
    for (const auto& [name, e] : md.entries) {
        nlohmann::ordered_json j;
        j["name"] = name;
        j["kind"] = cairn::item_kind_name(e.kind);
        switch (e.kind) {
        case cairn::ItemKind::array:
            j["dtype"] = cairn::dtype_name(e.dtype);
            j["shape"] = e.global_shape;
            j["chunks"] = e.chunks.size();
            j["bytes"] = stored_bytes(e);
            if (args.extremes) {
                const auto x = extremes.find(name);
                j["min"] = x == extremes.end() ? nullptr : json_from_text(x->second.first);
                j["max"] = x == extremes.end() ? nullptr : json_from_text(x->second.second);
            }
            break;
        case cairn::ItemKind::bytes: j["length"] = e.global_shape.empty() ? 0 : e.global_shape[0]; break;
        case cairn::ItemKind::scalar:
            j["dtype"] = cairn::dtype_name(e.dtype);
            j["value"] = json_from_text(scalar_text(path, name, e));
            break;
        case cairn::ItemKind::string: j["value"] = e.value; break;
        }
        if (args.decomposition && (e.kind == cairn::ItemKind::array || e.kind == cairn::ItemKind::bytes)) {
            auto& list = j["decomposition"] = nlohmann::ordered_json::array();
            for (const auto& c : e.chunks)
                list.push_back({{"box", box_json(c.box)},
                                {"file", c.storage.path},
                                {"offset", c.storage.offset},
                                {"bytes", c.storage.length}});
        }
        entries.push_back(std::move(j));
    }
    return doc;
}

void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

} // namespace

int cmd_ls(const Context& ctx, const LsArgs& args)
{
    Extremes extremes; // -l: read every array first (collective), then list
    if (args.extremes)
        extremes = array_extremes(ctx, args.path);
    const cairn::Metadata md = open_checkpoint_on_root(ctx, args.path); // only rank 0 prints
    std::string out;
    agree(ctx, [&] {
        if (!ctx.root())
            return;
        if (args.json) {
            out = json_text(ls_json(args, md, extremes));
            return;
        }
        std::uint64_t total = 0;
        for (const auto& kv : md.entries)
            total += stored_bytes(kv.second);
        // Names and the path as the terminal should show them (printable):
        // an entry name may hold any byte but NUL.
        out += printable(args.path) + ": " + layout_words(printable(md.layout)) + ", format " + std::to_string(md.format_version) +
               ", Cairn " + printable(md.library_version) + ", " + std::to_string(md.world_size) + " rank" +
               (md.world_size == 1 ? "" : "s") + ", " + printable(md.created) + "\n";
        out += "  " + std::to_string(md.entries.size()) + " entries, " + human_bytes(total) + " of data, " +
               (md.checksum_block ? "XXH3 checksums per " + human_bytes(md.checksum_block) + " block"
                                  : std::string("no checksums")) +
               "\n";
        std::size_t w = 4;
        for (const auto& kv : md.entries)
            w = std::max(w, printable(kv.first).size());
        for (const auto& [name, e] : md.entries) {
            const bool typed = e.kind == cairn::ItemKind::array || e.kind == cairn::ItemKind::scalar;
            const std::string shown = printable(name);
            std::string line = "  " + shown + std::string(w - shown.size() + 2, ' ');
            std::string kind = cairn::item_kind_name(e.kind);
            kind.resize(8, ' ');
            std::string dtype = typed ? std::string(cairn::dtype_name(e.dtype)) : std::string();
            dtype.resize(6, ' ');
            line += kind + dtype;
            switch (e.kind) {
            case cairn::ItemKind::array:
                line += cairn::shape_str(e.global_shape) + "  " + std::to_string(e.chunks.size()) + " chunk" +
                        (e.chunks.size() == 1 ? "" : "s") + ", " + std::to_string(stored_bytes(e)) + " bytes";
                if (args.extremes) {
                    const auto x = extremes.find(name);
                    if (x != extremes.end())
                        line += ", min " + x->second.first + ", max " + x->second.second;
                }
                break;
            case cairn::ItemKind::bytes:
                line += std::to_string(e.global_shape.empty() ? 0 : e.global_shape[0]) + " bytes";
                break;
            case cairn::ItemKind::scalar: line += "= " + scalar_text(args.path, name, e); break;
            case cairn::ItemKind::string: line += "= " + quoted(e.value); break;
            }
            out += line + "\n";
            if (args.decomposition && (e.kind == cairn::ItemKind::array || e.kind == cairn::ItemKind::bytes))
                for (const auto& c : e.chunks)
                    out += "      " + box_text(c.box) + "  " + printable(c.storage.path) + "  offset " +
                           std::to_string(c.storage.offset) + ", " + std::to_string(c.storage.length) + " bytes\n";
        }
    });
    if (ctx.root())
        print(out);
    return exit_ok;
}

// ---- cat ---------------------------------------------------------------------

namespace {

// One dimension of a slice: the indices start, start + step, ... below stop.
struct DimSlice {
    std::int64_t start = 0, stop = 0, step = 1;
    std::int64_t count() const { return stop > start ? (stop - start + step - 1) / step : 0; }
};

std::vector<std::string> split(const std::string& text, char sep)
{
    std::vector<std::string> parts;
    for (std::size_t p = 0;;) {
        const auto at = text.find(sep, p);
        parts.push_back(text.substr(p, at == std::string::npos ? std::string::npos : at - p));
        if (at == std::string::npos)
            return parts;
        p = at + 1;
    }
}

bool parse_int(const std::string& s, std::int64_t& v)
{
    if (s.empty())
        return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtoll(s.c_str(), &end, 10);
    return errno == 0 && end == s.c_str() + s.size();
}

// numpy's basic indexing per dimension: "i", "a:b", "a:b:s", ":", with
// negative indices counted from the end; a single index keeps its dimension
// here (the output names every element by its full index anyway).
std::vector<DimSlice> parse_slice(const std::string& text, const cairn::Shape& shape, const std::string& what)
{
    std::vector<DimSlice> out;
    for (const auto n : shape)
        out.push_back(DimSlice{0, n, 1});
    if (text.empty())
        return out;
    const std::vector<std::string> parts = split(text, ',');
    auto bad = [&](const std::string& why) {
        return ToolError("bad slice '" + text + "' for " + what + " of shape " + cairn::shape_str(shape) + ": " + why);
    };
    if (parts.size() > shape.size())
        throw bad(std::to_string(parts.size()) + " dimensions given, the array has " + std::to_string(shape.size()));
    for (std::size_t d = 0; d < parts.size(); ++d) {
        std::string p = parts[d];
        p.erase(std::remove(p.begin(), p.end(), ' '), p.end());
        const std::int64_t n = shape[d];
        const std::vector<std::string> f = split(p, ':');
        if (f.size() > 3)
            throw bad("dimension " + std::to_string(d) + ": '" + p + "' has more than two ':'");
        std::int64_t v[3] = {0, n, 1};
        for (std::size_t k = 0; k < f.size(); ++k)
            if (!f[k].empty() && !parse_int(f[k], v[k]))
                throw bad("dimension " + std::to_string(d) + ": '" + f[k] + "' is not an integer");
        if (f.size() == 1) { // a single index
            if (f[0].empty())
                throw bad("dimension " + std::to_string(d) + " is empty");
            std::int64_t i = v[0] < 0 ? v[0] + n : v[0];
            if (i < 0 || i >= n)
                throw bad("index " + f[0] + " is out of range for dimension " + std::to_string(d) + " of extent " +
                          std::to_string(n));
            out[d] = DimSlice{i, i + 1, 1};
            continue;
        }
        if (v[2] <= 0)
            throw bad("dimension " + std::to_string(d) + ": the step must be positive");
        auto clamp = [n](std::int64_t i) { return std::min(std::max(i < 0 ? i + n : i, std::int64_t(0)), n); };
        out[d] = DimSlice{f[0].empty() ? 0 : clamp(v[0]), f.size() < 2 || f[1].empty() ? n : clamp(v[1]), v[2]};
    }
    return out;
}

constexpr std::int64_t values_per_line = 10;

// Prints the selected elements of `box` (a block of whole selected rows of
// dim 0), whose elements are in `data`, row-major.
void print_block(std::string& out, const cairn::EntryMeta& e, const std::vector<DimSlice>& sl, const cairn::Box& box,
                 const std::byte* data)
{
    const std::size_t nd = e.global_shape.size();
    const std::size_t es = cairn::dtype_size(e.dtype);
    if (nd == 0) {
        out += format_value(e.dtype, data) + "\n";
        return;
    }
    const cairn::Shape strides = cairn::row_major_strides(box.shape);
    // Outer indices (all dims but the last) walk the selection inside the box.
    cairn::Shape idx(nd);
    for (std::size_t d = 0; d < nd; ++d)
        idx[d] = sl[d].start;
    idx[0] = box.offsets[0]; // the block starts at a selected row
    for (std::size_t d = 0; d < nd; ++d)
        if (sl[d].count() == 0)
            return;
    const DimSlice& last = sl[nd - 1];
    while (true) {
        std::int64_t base = 0;
        for (std::size_t d = 0; d + 1 < nd; ++d)
            base += (idx[d] - box.offsets[d]) * strides[d];
        std::int64_t k = 0;
        for (std::int64_t j = last.start; j < last.stop; j += last.step, ++k) {
            if (k % values_per_line == 0) {
                if (k)
                    out += "\n";
                idx[nd - 1] = j;
                out += "(";
                for (std::size_t d = 0; d < nd; ++d)
                    out += (d ? "," : "") + std::to_string(idx[d]);
                out += ")";
            }
            const std::int64_t off = base + (j - box.offsets[nd - 1]) * strides[nd - 1];
            out += " " + format_value(e.dtype, data + static_cast<std::size_t>(off) * es);
        }
        out += "\n";
        // Next outer index, odometer style, inside the block for dim 0.
        std::size_t d = nd - 1;
        while (d-- > 0) {
            idx[d] += sl[d].step;
            const std::int64_t stop = d == 0 ? box.offsets[0] + box.shape[0] : sl[d].stop;
            if (idx[d] < stop)
                break;
            if (d == 0)
                return;
            idx[d] = sl[d].start;
        }
        if (nd == 1)
            return;
    }
}

void print_hex(std::string& out, const std::vector<std::byte>& blob, const DimSlice& sl)
{
    std::int64_t k = 0;
    for (std::int64_t i = sl.start; i < sl.stop; i += sl.step, ++k) {
        if (k % 16 == 0) {
            char head[32];
            std::snprintf(head, sizeof head, "%s%08" PRIx64 ":", k ? "\n" : "", static_cast<std::uint64_t>(i));
            out += head;
        }
        char buf[4];
        std::snprintf(buf, sizeof buf, " %02x", static_cast<unsigned>(blob[static_cast<std::size_t>(i)]));
        out += buf;
    }
    if (k)
        out += "\n";
}

} // namespace

int cmd_cat(const Context& ctx, const CatArgs& args)
{
    const cairn::Metadata md = open_checkpoint(ctx, args.path);
    const cairn::EntryMeta* entry = nullptr;
    std::vector<DimSlice> sl;
    agree(ctx, [&] {
        entry = &find_entry(md, args.path, args.name);
        const std::string what = std::string(cairn::item_kind_name(entry->kind)) + " '" + args.name + "'";
        if (entry->kind == cairn::ItemKind::array || entry->kind == cairn::ItemKind::bytes)
            sl = parse_slice(args.slice, entry->global_shape, what);
        else if (!args.slice.empty())
            throw ToolError("--slice: " + what + " of " + args.path + " is not an array");
    });
    const cairn::EntryMeta& e = *entry;
    std::string out;
    switch (e.kind) {
    case cairn::ItemKind::scalar:
        agree(ctx, [&] { out = scalar_text(args.path, args.name, e) + "\n"; });
        break;
    case cairn::ItemKind::string: out = e.value + "\n"; break;
    case cairn::ItemKind::bytes: {
        std::vector<std::byte> blob;
        cairn::StateDict state;
        if (ctx.root())
            state.add_bytes(args.name, &blob);
        cairn::LoadOptions options;
        options.partial = true;
        cairn::load(state, args.path, ctx.comm, options);
        if (ctx.root())
            print_hex(out, blob, sl.at(0));
        break;
    }
    case cairn::ItemKind::array: {
        // Rank 0 loads the bounding box of the selection in blocks of rows
        // of at most --memory bytes, and prints as it goes.
        const std::size_t nd = e.global_shape.size();
        cairn::Box bound{cairn::Shape(nd), cairn::Shape(nd)};
        bool empty = false;
        std::uint64_t row = cairn::dtype_size(e.dtype);
        for (std::size_t d = 0; d < nd; ++d) {
            const auto c = sl[d].count();
            empty = empty || c == 0;
            bound.offsets[d] = sl[d].start;
            bound.shape[d] = c == 0 ? 0 : (c - 1) * sl[d].step + 1;
            if (d > 0)
                row *= static_cast<std::uint64_t>(bound.shape[d]);
        }
        if (empty)
            break;
        const std::int64_t rows = nd == 0 ? 1 : sl[0].count();
        const auto per_block = static_cast<std::int64_t>(std::max<std::uint64_t>(1, ctx.memory / std::max<std::uint64_t>(row, 1)));
        ProgressBar bar(ctx, "cat " + args.name, static_cast<std::uint64_t>(rows) * row);
        for (std::int64_t r = 0; r < rows; r += per_block) {
            Region region{args.name, &e, bound, {}};
            const std::int64_t n = std::min(per_block, rows - r);
            if (nd > 0) {
                region.box.offsets[0] = sl[0].start + r * sl[0].step;
                region.box.shape[0] = (n - 1) * sl[0].step + 1;
            }
            std::vector<Region> regions;
            if (ctx.root())
                regions.push_back(std::move(region));
            load_regions(ctx, args.path, regions, bar.callback(static_cast<std::uint64_t>(r) * row));
            bar.update(static_cast<std::uint64_t>(r + n) * row);
            if (ctx.root()) {
                bar.finish();
                out.clear();
                print_block(out, e, sl, regions[0].box, regions[0].data.data());
                print(out);
                out.clear();
            }
        }
        break;
    }
    }
    if (ctx.root())
        print(out);
    return exit_ok;
}

} // namespace cairn_tool
