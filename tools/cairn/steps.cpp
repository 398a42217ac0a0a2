// `cairn steps ROOT`: the committed checkpoints of a checkpoint manager
// directory and, from its levels record (ROOT/.cairn-levels, docs/FORMAT.md),
// which steps are held on the node-local level and with which redundancy.
#include "tool.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;

namespace cairn_tool {

namespace {

using Json = nlohmann::ordered_json;

struct RecordStep {
    bool node_local = false;
    bool file_system = false;
    std::vector<std::int64_t> partial; ///< the nodes holding it, when not every node does
};

struct Record {
    std::string local_dir, redundancy;
    std::int64_t nodes = 0, ranks = 0;
    std::vector<std::string> hosts; ///< per node, when the record has them
    std::map<std::int64_t, RecordStep> steps;
};

// Reads ROOT/.cairn-levels; false when there is none; ToolError naming the
// file when it cannot be read or is not a levels record.
bool read_record(const std::string& root, Record& r)
{
    const std::string file = (fs::path(root) / ".cairn-levels").string();
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(file, ec)))
        return false;
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in)
        throw ToolError("cannot read the levels record " + file);
    const auto bad = [&](const std::string& why) { return ToolError("the levels record " + file + " is damaged: " + why); };
    Json j;
    try {
        j = Json::parse(ss.str());
    } catch (const std::exception& e) {
        throw bad(std::string("not JSON (") + e.what() + ")");
    }
    const auto get = [&](const Json& o, const char* key) -> const Json& {
        if (!o.is_object() || !o.contains(key))
            throw bad(std::string("no \"") + key + "\"");
        return o[key];
    };
    try {
        if (get(j, "format").get<std::string>() != "cairn-levels")
            throw bad("\"format\" is not \"cairn-levels\"");
        if (get(j, "version").get<std::int64_t>() != 1)
            throw bad("version " + get(j, "version").dump() + ", this cairn reads version 1");
        r.local_dir = get(j, "local_dir").get<std::string>();
        r.redundancy = get(j, "redundancy").get<std::string>();
        r.nodes = get(j, "nodes").get<std::int64_t>();
        r.ranks = get(j, "ranks").get<std::int64_t>();
        if (j.contains("hosts"))
            r.hosts = j["hosts"].get<std::vector<std::string>>();
        const Json& steps = get(j, "steps");
        if (!steps.is_array())
            throw bad("\"steps\" is not an array");
        for (const auto& s : steps) {
            RecordStep st{get(s, "node_local").get<bool>(), get(s, "file_system").get<bool>(), {}};
            if (s.contains("partial"))
                st.partial = s["partial"].get<std::vector<std::int64_t>>();
            r.steps[get(s, "step").get<std::int64_t>()] = std::move(st);
        }
    } catch (const nlohmann::json::exception& e) {
        throw bad(e.what());
    }
    return true;
}

// "node 2 (host h)", or "node 2" when the record names no hosts.
std::string node_name(const Record& r, std::int64_t n)
{
    std::string s = "node " + std::to_string(n);
    if (n >= 0 && static_cast<std::size_t>(n) < r.hosts.size())
        s += " (" + printable(r.hosts[static_cast<std::size_t>(n)]) + ")";
    return s;
}

// A step held node-local on some nodes only: which hold it, which lack it.
std::string partial_text(const Record& r, const std::vector<std::int64_t>& held)
{
    std::string on, off;
    std::size_t k = 0;
    for (std::int64_t n = 0; n < r.nodes; ++n) {
        const bool has = k < held.size() && held[k] == n;
        if (has)
            ++k;
        std::string& list = has ? on : off;
        list += (list.empty() ? "" : ", ") + node_name(r, n);
    }
    return "PARTIAL node-local: on " + std::to_string(held.size()) + " of " + std::to_string(r.nodes) +
           " nodes, not on " + off;
}

// Bytes of the files of a checkpoint (a directory's regular files, or a container file).
std::uint64_t disk_bytes(const fs::path& p)
{
    std::error_code ec;
    if (fs::is_regular_file(p, ec))
        return fs::file_size(p, ec);
    std::uint64_t n = 0;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec))
            n += it->file_size(ec);
    return n;
}

} // namespace

int cmd_steps(const Context& ctx, const StepsArgs& args)
{
    std::string out;
    int missing = 0;
    agree(ctx, [&] {
        if (!ctx.root())
            return;
        std::error_code ec;
        if (!fs::is_directory(args.root, ec))
            throw ToolError(args.root + ": not a directory (a checkpoint manager's root)");
        const std::vector<ManagedStep> steps = manager_steps(args.root);
        Record rec;
        const bool has_record = read_record(args.root, rec);

        struct Row {
            std::int64_t step = 0;
            const ManagedStep* committed = nullptr;
            const RecordStep* recorded = nullptr;
        };
        std::map<std::int64_t, Row> rows;
        for (const auto& s : steps)
            rows[s.step].committed = &s;
        for (const auto& kv : rec.steps)
            rows[kv.first].recorded = &kv.second;

        Json doc;
        doc["root"] = args.root;
        if (has_record) {
            doc["levels"] = Json{{"local_dir", rec.local_dir},
                                 {"redundancy", rec.redundancy},
                                 {"nodes", rec.nodes},
                                 {"ranks", rec.ranks}};
            if (!rec.hosts.empty())
                doc["levels"]["hosts"] = rec.hosts;
        } else {
            doc["levels"] = nullptr;
        }
        auto& list = doc["steps"] = Json::array();
        auto& flagged = doc["missing"] = Json::array();

        std::string text = printable(args.root) + ": " + std::to_string(steps.size()) + " committed " +
                           (steps.size() == 1 ? "step" : "steps");
        if (has_record)
            text += "; node-local level " + printable(rec.local_dir) + ", redundancy " + printable(rec.redundancy) +
                    ", " + std::to_string(rec.nodes) + (rec.nodes == 1 ? " node, " : " nodes, ") +
                    std::to_string(rec.ranks) + (rec.ranks == 1 ? " rank" : " ranks");
        else
            text += "; no levels record";
        text += "\n";
        std::vector<std::string> lines;
        std::size_t sw = 4;
        for (const auto& kv : rows)
            sw = std::max(sw, std::to_string(kv.first).size());
        const auto pad = [](std::string s, std::size_t w, bool right) {
            if (s.size() < w)
                s = right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
            return s;
        };
        text += "  " + pad("step", sw, true) + "  " + pad("layout", 9, false) + "  " + pad("size", 10, true) +
                "  " + (has_record ? "levels" : "") + "\n";
        for (const auto& kv : rows) {
            const Row& r = kv.second;
            Json j;
            j["step"] = kv.first;
            j["committed"] = r.committed != nullptr;
            std::string layout = "-", size = "-";
            if (r.committed) {
                const bool container = fs::is_regular_file(r.committed->path, ec);
                const std::uint64_t bytes = disk_bytes(r.committed->path);
                layout = container ? "container" : "per-rank";
                size = human_bytes(bytes);
                j["name"] = r.committed->name;
                j["layout"] = layout;
                j["bytes"] = bytes;
            }
            std::string levels;
            if (has_record) {
                const bool local = r.recorded && r.recorded->node_local;
                const bool in_fs = r.recorded && r.recorded->file_system;
                j["node_local"] = local;
                j["file_system"] = in_fs;
                if (local)
                    levels = "node-local";
                if (r.recorded && !local && !r.recorded->partial.empty()) {
                    j["partial"] = r.recorded->partial;
                    levels = partial_text(rec, r.recorded->partial);
                }
                if (r.committed)
                    levels += std::string(levels.empty() ? "" : ", ") + "file system";
                if (in_fs && !r.committed) {
                    levels += std::string(levels.empty() ? "" : ", ") + "MISSING: recorded in the file system, not "
                                                                        "committed in the root";
                    flagged.push_back(kv.first);
                    ++missing;
                }
                if (r.committed && !r.recorded)
                    levels += " (not in the levels record)";
                j["recorded"] = r.recorded != nullptr;
            }
            list.push_back(std::move(j));
            std::string line = "  " + pad(std::to_string(kv.first), sw, true) + "  " + pad(layout, 9, false) + "  " +
                               pad(size, 10, true) + "  " + levels;
            while (!line.empty() && line.back() == ' ')
                line.pop_back();
            text += line + "\n";
        }
        out = args.json ? json_text(doc) : text;
    });
    MPI_Bcast(&missing, 1, MPI_INT, 0, ctx.comm);
    if (ctx.root()) {
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::fflush(stdout);
        if (missing && !args.json && !ctx.quiet)
            std::fprintf(stderr, "cairn steps: %d step%s of the levels record %s not committed in %s\n", missing,
                         missing == 1 ? "" : "s", missing == 1 ? "is" : "are", printable(args.root).c_str());
    }
    return missing ? exit_different : exit_ok;
}

} // namespace cairn_tool
