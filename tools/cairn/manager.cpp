// Checkpoint manager directories (cairn/manager.hpp, docs/FORMAT.md 6) and
// what a verb's CKPT argument names: a checkpoint, a manager directory and
// one of its steps, or a manager's LATEST file.
#include "tool.hpp"

#include <cairn/errors.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace cairn_tool {

namespace {

// The step of a manager's checkpoint name, `step_<N>` or `step_<N>.h5` with N
// in decimal zero-padded to at least 8 digits (only these exact spellings);
// none for any other name.
std::optional<std::int64_t> step_of(const std::string& name)
{
    std::string stem = name;
    if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".h5") == 0)
        stem.resize(stem.size() - 3);
    if (stem.rfind("step_", 0) != 0)
        return std::nullopt;
    const std::string digits = stem.substr(5);
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    const std::int64_t step = std::stoll(digits);
    char canonical[32];
    std::snprintf(canonical, sizeof canonical, "%08lld", static_cast<long long>(step));
    if (digits != canonical)
        return std::nullopt;
    return step;
}

bool regular_file(const fs::path& p)
{
    std::error_code ec;
    return fs::is_regular_file(fs::symlink_status(p, ec));
}

// A committed checkpoint of the manager: a directory holding metadata.h5, or
// a container file.
bool committed(const fs::path& p)
{
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (fs::is_directory(st))
        return regular_file(p / "metadata.h5");
    return fs::is_regular_file(st) && p.extension() == ".h5";
}

// The first line of root/LATEST; empty when there is none.
std::string read_latest(const fs::path& root)
{
    const fs::path file = root / "LATEST";
    if (!regular_file(file))
        return {};
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    return line;
}

// The per-rank layout's metadata file `dir/metadata.h5` stands for its
// checkpoint `dir`; a container file of that name stays itself.
std::string checkpoint_of_file(const std::string& path)
{
    const fs::path p(path);
    if (p.filename() != "metadata.h5" || !regular_file(p))
        return path;
    try {
        cairn::read_metadata(path); // a container named metadata.h5
        return path;
    } catch (const cairn::Error&) {
        return p.parent_path().empty() ? std::string(".") : p.parent_path().string();
    }
}

// Runs on rank 0: what `path` names, given --step.
std::string resolve_on_root(const std::string& path, const std::optional<std::int64_t>& step, bool step_of_managers_only,
                            bool& manager)
{
    manager = false;
    const fs::path p(path);
    if (p.filename() == "LATEST" && regular_file(p)) {
        if (step && !step_of_managers_only)
            throw ToolError("--step " + std::to_string(*step) + ": " + path +
                            " names one checkpoint; pass its manager directory " + p.parent_path().string());
        std::string name = read_latest(p.parent_path());
        if (!step_of(name))
            throw ToolError(path + ": names '" + name + "', not a checkpoint of the manager (step_<N> or step_<N>.h5)");
        const fs::path target = p.parent_path() / name;
        if (!committed(target))
            throw ToolError(path + ": names " + target.string() + ", which is not a committed checkpoint");
        return target.string();
    }
    if (!step) {
        const std::string dir = checkpoint_of_file(path);
        if (dir != path)
            return dir;
    }
    if (!is_manager_dir(path)) {
        if (step && !step_of_managers_only)
            throw ToolError("--step " + std::to_string(*step) + ": " + path +
                            " is not a checkpoint manager directory (step_<N> checkpoints, LATEST)");
        return path;
    }
    manager = true;
    const std::vector<ManagedStep> steps = manager_steps(path);
    if (steps.empty())
        throw ToolError(path + ": a checkpoint manager directory without a committed checkpoint");
    if (step) {
        for (const auto& s : steps)
            if (s.step == *step)
                return s.path;
        std::string known;
        for (const auto& s : steps)
            known += (known.empty() ? "" : ", ") + std::to_string(s.step);
        throw ToolError(path + ": no checkpoint of step " + std::to_string(*step) + " (steps: " + known + ")");
    }
    return default_step(path, steps).path;
}

} // namespace

bool is_manager_dir(const std::string& path)
{
    std::error_code ec;
    const fs::path p(path);
    if (!fs::is_directory(p, ec) || fs::exists(fs::symlink_status(p / "metadata.h5", ec)))
        return false;
    if (regular_file(p / "LATEST"))
        return true;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
        if (step_of(it->path().filename().string()))
            return true;
    return false;
}

std::vector<ManagedStep> manager_steps(const std::string& root)
{
    std::vector<ManagedStep> steps;
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const auto step = step_of(name);
        if (step && committed(it->path()))
            steps.push_back(ManagedStep{*step, name, it->path().string()});
    }
    if (ec)
        throw ToolError(root + ": cannot list the directory: " + ec.message());
    std::sort(steps.begin(), steps.end(),
              [](const ManagedStep& a, const ManagedStep& b) { return a.step != b.step ? a.step < b.step : a.name < b.name; });
    return steps;
}

const ManagedStep& default_step(const std::string& root, const std::vector<ManagedStep>& steps)
{
    const std::string latest = read_latest(root);
    for (const auto& s : steps)
        if (s.name == latest)
            return s;
    return steps.back();
}

std::string resolve_checkpoint(const Context& ctx, const std::string& path, bool* manager)
{
    std::string resolved;
    int is_manager = 0;
    agree(ctx, [&] {
        bool m = false;
        if (ctx.root())
            resolved = resolve_on_root(path, ctx.step, manager != nullptr, m);
        is_manager = m;
    });
    MPI_Bcast(&is_manager, 1, MPI_INT, 0, ctx.comm);
    if (manager)
        *manager = is_manager != 0;
    int n = static_cast<int>(resolved.size());
    MPI_Bcast(&n, 1, MPI_INT, 0, ctx.comm);
    resolved.resize(static_cast<std::size_t>(n));
    MPI_Bcast(resolved.data(), n, MPI_CHAR, 0, ctx.comm);
    return resolved;
}

std::string resolve_metadata_file(const Context& ctx, const std::string& path)
{
    std::string resolved;
    agree(ctx, [&] {
        if (ctx.root())
            resolved = checkpoint_of_file(path);
    });
    int n = static_cast<int>(resolved.size());
    MPI_Bcast(&n, 1, MPI_INT, 0, ctx.comm);
    resolved.resize(static_cast<std::size_t>(n));
    MPI_Bcast(resolved.data(), n, MPI_CHAR, 0, ctx.comm);
    return resolved;
}

int cmd_ls_manager(const Context& ctx, const LsArgs& args)
{
    std::string out;
    agree(ctx, [&] {
        if (!ctx.root())
            return;
        const std::vector<ManagedStep> steps = manager_steps(args.path);
        const std::string latest_file = read_latest(args.path);
        const ManagedStep* chosen = steps.empty() ? nullptr : &default_step(args.path, steps);
        nlohmann::ordered_json doc;
        doc["manager"] = args.path;
        doc["default_step"] = chosen ? nlohmann::ordered_json(chosen->step) : nullptr;
        doc["LATEST"] = latest_file.empty() ? nullptr : nlohmann::ordered_json(latest_file);
        auto& list = doc["steps"] = nlohmann::ordered_json::array();
        std::string text = printable(args.path) + ": checkpoint manager directory, " + std::to_string(steps.size()) +
                           (steps.size() == 1 ? " step" : " steps") +
                           (latest_file.empty() ? ", no LATEST" : ", LATEST " + printable(latest_file)) + "\n";
        std::size_t w = 4, sw = 1; // widths of the names and of the steps
        for (const auto& s : steps) {
            w = std::max(w, s.name.size());
            sw = std::max(sw, std::to_string(s.step).size());
        }
        for (const auto& s : steps) {
            nlohmann::ordered_json j;
            j["step"] = s.step;
            j["name"] = s.name;
            std::string step = std::to_string(s.step);
            std::string line = "  " + std::string(sw - step.size(), ' ') + step + "  " + s.name +
                               std::string(w - s.name.size() + 2, ' ');
            try {
                const cairn::Metadata md = cairn::read_metadata(s.path);
                std::uint64_t bytes = 0;
                for (const auto& kv : md.entries)
                    bytes += stored_bytes(kv.second);
                j["layout"] = md.layout;
                j["world_size"] = md.world_size;
                j["entries"] = md.entries.size();
                j["bytes"] = bytes;
                j["created"] = md.created;
                line += (md.layout == "distcp" ? std::string("per-rank") : printable(md.layout)) + ", " +
                        std::to_string(md.world_size) + (md.world_size == 1 ? " rank, " : " ranks, ") +
                        std::to_string(md.entries.size()) + (md.entries.size() == 1 ? " entry, " : " entries, ") +
                        human_bytes(bytes) + ", " + printable(md.created);
            } catch (const cairn::Error& e) {
                j["error"] = e.what();
                line += "unreadable: " + printable(e.what());
            }
            if (chosen == &s)
                line += "  (default)";
            list.push_back(std::move(j));
            text += line + "\n";
        }
        out = args.json ? json_text(doc) : text;
    });
    if (ctx.root()) {
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::fflush(stdout);
    }
    return exit_ok;
}

} // namespace cairn_tool
