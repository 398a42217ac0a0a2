// cairn profile: summarises a profile file written by Cairn with
// CAIRN_PROFILE (JSON Lines, one record per save / load / verify).
#include "tool.hpp"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

namespace cairn_tool {

namespace {

using Json = nlohmann::ordered_json;

// A field of a record, or a ToolError naming the file, the line and the field.
const Json& field(const Json& j, const char* key, const std::string& where)
{
    if (!j.is_object() || !j.contains(key))
        throw ToolError(where + ": no field \"" + key + "\"");
    return j.at(key);
}

double number(const Json& j, const char* key, const std::string& where)
{
    const Json& v = field(j, key, where);
    if (!v.is_number())
        throw ToolError(where + ": \"" + key + "\" is not a number");
    return v.get<double>();
}

std::uint64_t count(const Json& j, const char* key, const std::string& where)
{
    const Json& v = field(j, key, where);
    if (!v.is_number_unsigned())
        throw ToolError(where + ": \"" + key + "\" is not a non-negative integer");
    return v.get<std::uint64_t>();
}

std::string text(const Json& j, const char* key, const std::string& where)
{
    const Json& v = field(j, key, where);
    if (!v.is_string())
        throw ToolError(where + ": \"" + key + "\" is not a string");
    return v.get<std::string>();
}

// One phase (or the total) of a record, summarised.
Json phase_summary(const std::string& name, const Json& seconds, const Json* bytes, double bandwidth,
                   const std::string& where)
{
    Json s;
    s["phase"] = name;
    s["min"] = number(seconds, "min", where);
    s["mean"] = number(seconds, "mean", where);
    s["max"] = number(seconds, "max", where);
    s["imbalance"] = number(seconds, "imbalance", where);
    s["slowest_rank"] = count(seconds, "slowest_rank", where);
    if (bytes) {
        s["bytes"] = count(*bytes, "sum", where);
        s["bytes_imbalance"] = number(*bytes, "imbalance", where);
        s["bandwidth"] = bandwidth;
    }
    return s;
}

// The summary of one record (line `line` of `file`).
Json summarise(const Json& rec, const std::string& where)
{
    if (!rec.is_object() || !rec.contains("cairn_profile"))
        throw ToolError(where + ": not a Cairn profile record (no \"cairn_profile\")");
    if (count(rec, "cairn_profile", where) != 1)
        throw ToolError(where + ": profile record version " + rec.at("cairn_profile").dump() +
                        ", this cairn reads version 1");
    Json s;
    s["operation"] = text(rec, "operation", where);
    s["path"] = text(rec, "path", where);
    s["layout"] = text(rec, "layout", where);
    s["ranks"] = count(rec, "ranks", where);
    s["start"] = text(rec, "start", where);
    s["seconds"] = number(rec, "seconds", where);
    s["bytes"] = count(rec, "bytes", where);
    s["bandwidth"] = number(rec, "bandwidth", where);
    const Json& phases = field(rec, "phases", where);
    if (!phases.is_array())
        throw ToolError(where + ": \"phases\" is not an array");
    Json out = Json::array();
    for (const Json& p : phases) {
        const std::string name = text(p, "phase", where);
        const Json& bytes = field(p, "bytes", where);
        const bool data = count(bytes, "sum", where) > 0;
        out.push_back(phase_summary(name, field(p, "seconds", where), data ? &bytes : nullptr,
                                    number(p, "bandwidth", where), where + ", phase " + name));
        out.back()["wall"] = number(p, "wall", where);
    }
    s["phases"] = std::move(out);
    s["total"] = phase_summary("total", field(rec, "total", where), nullptr, 0, where + ", total");
    return s;
}

std::string seconds_text(double s)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6f", s);
    return buf;
}

void print_phase(const Json& p)
{
    char line[256];
    std::snprintf(line, sizeof line, "  %-9s %10s %10s %10s %9.2f %8" PRIu64, p["phase"].get<std::string>().c_str(),
                  seconds_text(p["min"].get<double>()).c_str(), seconds_text(p["mean"].get<double>()).c_str(),
                  seconds_text(p["max"].get<double>()).c_str(), p["imbalance"].get<double>(),
                  p["slowest_rank"].get<std::uint64_t>());
    std::string out = line;
    if (p.contains("bytes")) {
        std::snprintf(line, sizeof line, " %11s %11s/s", human_bytes(p["bytes"].get<std::uint64_t>()).c_str(),
                      human_bytes(static_cast<std::uint64_t>(p["bandwidth"].get<double>())).c_str());
        out += line;
    }
    std::printf("%s\n", out.c_str());
}

void print_summary(const Json& s)
{
    std::printf("%s %s (%s, %" PRIu64 " ranks, %s): %s in %s s, %s/s\n", s["operation"].get<std::string>().c_str(),
                quoted(s["path"].get<std::string>()).c_str(), s["layout"].get<std::string>().c_str(),
                s["ranks"].get<std::uint64_t>(), s["start"].get<std::string>().c_str(),
                human_bytes(s["bytes"].get<std::uint64_t>()).c_str(), seconds_text(s["seconds"].get<double>()).c_str(),
                human_bytes(static_cast<std::uint64_t>(s["bandwidth"].get<double>())).c_str());
    std::printf("  %-9s %10s %10s %10s %9s %8s %11s %13s\n", "phase", "min s", "mean s", "max s", "imbalance",
                "slowest", "bytes", "bandwidth");
    for (const Json& p : s["phases"])
        print_phase(p);
    print_phase(s["total"]);
}

} // namespace

int cmd_profile(const Context& ctx, const ProfileArgs& args)
{
    Json summaries = Json::array();
    agree(ctx, [&] {
        if (!ctx.root())
            return;
        std::ifstream in(args.file);
        if (!in)
            throw ToolError("cannot open the profile " + args.file);
        std::string line;
        for (std::size_t n = 1; std::getline(in, line); ++n) {
            if (line.find_first_not_of(" \t\r") == std::string::npos)
                continue;
            const std::string where = args.file + ":" + std::to_string(n);
            Json rec;
            try {
                rec = Json::parse(line);
            } catch (const nlohmann::json::exception& e) {
                throw ToolError(where + ": not JSON: " + e.what());
            }
            summaries.push_back(summarise(rec, where));
        }
        if (in.bad())
            throw ToolError("cannot read the profile " + args.file);
        if (summaries.empty())
            throw ToolError("no profile record in " + args.file +
                            " (CAIRN_PROFILE=FILE makes each save, load and verify append one)");
    });
    if (!ctx.root())
        return exit_ok;
    if (args.json) {
        std::fputs(json_text(summaries).c_str(), stdout);
        return exit_ok;
    }
    bool first = true;
    for (const Json& s : summaries) {
        if (!first)
            std::printf("\n");
        first = false;
        print_summary(s);
    }
    return exit_ok;
}

} // namespace cairn_tool
