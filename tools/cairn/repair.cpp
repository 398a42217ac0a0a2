// cairn repair: finishes interrupted replacements and removes what
// interrupted saves left (cairn::repair_checkpoint, cairn::remove_leftovers).
#include "tool.hpp"

#include <cairn/container.hpp>
#include <cairn/distcp.hpp>
#include <cairn/errors.hpp>
#include <cairn/manager.hpp>

#include <cstdio>
#include <filesystem>

namespace cairn_tool {

namespace {

namespace stdfs = std::filesystem;

bool exists(const std::string& p)
{
    std::error_code ec;
    return stdfs::exists(p, ec);
}

// PATH names a checkpoint, committed or being replaced: a file (container),
// a committed per-rank directory, or a name with replacement siblings.
bool names_checkpoint(const std::string& path)
{
    std::error_code ec;
    if (stdfs::is_regular_file(path, ec) || exists(path + "/" + cairn::metadata_file_name))
        return true;
    for (const char* suffix : {".cairn-staging", ".cairn-old", ".cairn-tmp"})
        if (exists(path + suffix))
            return true;
    return false;
}

} // namespace

int cmd_repair(const Context& ctx, const RepairArgs& args)
{
    std::string path = args.path;
    while (path.size() > 1 && path.back() == '/')
        path.pop_back();
    std::vector<cairn::Leftover> done;
    bool root = false;
    agree(ctx, [&] {
        if (!ctx.root())
            return;
        std::error_code ec;
        if (names_checkpoint(path)) {
            done = cairn::repair_checkpoint(path);
        } else if (stdfs::is_directory(path, ec)) {
            root = true;
            done = cairn::remove_leftovers(path);
        } else {
            throw ToolError("nothing at " + path + ": neither a checkpoint, nor a directory of checkpoints, nor "
                            "the leftovers of an interrupted replacement of one");
        }
    });
    if (!ctx.root())
        return exit_ok;
    for (const auto& l : done) {
        const bool renamed = l.reason.find(": renamed to ") != std::string::npos;
        std::printf("%s %s: %s\n", renamed ? "renamed" : "removed", l.path.c_str(), l.reason.c_str());
    }
    if (done.empty())
        std::printf("%s: nothing to repair\n", path.c_str());
    else
        std::printf("%s: repaired (%zu %s)\n", path.c_str(), done.size(),
                    root ? "leftovers in this directory" : "leftovers of this checkpoint");
    std::fflush(stdout);
    return exit_ok;
}

} // namespace cairn_tool
