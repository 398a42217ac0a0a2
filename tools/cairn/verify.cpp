// cairn verify: checks every stored block of a checkpoint.
#include "tool.hpp"

#include <cairn/errors.hpp>
#include <cairn/state_dict.hpp>

#include <cstdio>

namespace cairn_tool {

namespace {

// A container saved without checksums (checksum_block = 0): read every
// dataset through load() in passes, so that unreadable or truncated data
// shows. Returns the bytes read; throws what load() throws.
std::uint64_t read_everything(const Context& ctx, const std::string& path, const cairn::Metadata& md)
{
    std::uint64_t total = 0;
    for (const auto& kv : md.entries)
        total += stored_bytes(kv.second);
    ProgressBar bar(ctx, "verify", total / static_cast<std::uint64_t>(ctx.size)); // rank 0's share, about
    std::uint64_t read = 0, done = 0;
    for (const auto& pass : plan_passes(ctx, md)) {
        std::vector<Region> regions;
        for (const auto& piece : pass)
            if (const auto box = piece_box(ctx, piece))
                regions.push_back(Region{piece.name, piece.entry, *box, {}});
        std::uint64_t mine = 0;
        for (const auto& r : regions)
            mine += static_cast<std::uint64_t>(r.box.volume()) * cairn::dtype_size(r.entry->dtype);
        read += load_regions(ctx, path, regions, bar.callback(done)).bytes_read_all;
        done += mine;
        bar.update(done);
    }
    // Byte blobs, each read by one rank in turn.
    cairn::StateDict blobs;
    std::vector<std::vector<std::byte>> data;
    data.reserve(md.entries.size());
    int next = 0;
    for (const auto& [name, e] : md.entries) {
        if (e.kind != cairn::ItemKind::bytes)
            continue;
        if (next++ % ctx.size == ctx.rank) {
            data.emplace_back();
            blobs.add_bytes(name, &data.back());
        }
    }
    cairn::LoadOptions options;
    options.partial = true;
    read += cairn::load(blobs, path, ctx.comm, options).bytes_read_all;
    return read;
}

} // namespace

int cmd_verify(const Context& ctx, const VerifyArgs& args)
{
    const cairn::Metadata md = open_checkpoint(ctx, args.path);
    std::uint64_t total = 0;
    for (const auto& kv : md.entries)
        total += stored_bytes(kv.second);

    nlohmann::ordered_json doc;
    doc["checkpoint"] = args.path;
    doc["layout"] = md.layout;
    auto print_json = [&] {
        if (ctx.root() && args.json) {
            const std::string text = json_text(doc);
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
        }
    };

    if (md.layout == "container" && md.checksum_block == 0) {
        std::uint64_t read = 0;
        doc["checksums"] = false;
        try {
            read = read_everything(ctx, args.path, md);
        } catch (const cairn::Error& e) {
            doc["status"] = "damaged";
            doc["problems"] = nlohmann::ordered_json::array({std::string(e.what())});
            print_json();
            if (ctx.root() && !args.json) {
                std::printf("%s: DAMAGED: %s\n", printable(args.path).c_str(), printable(e.what()).c_str());
                std::fflush(stdout);
            }
            return exit_different;
        }
        doc["status"] = "readable";
        doc["bytes_read"] = read;
        doc["problems"] = nlohmann::ordered_json::array();
        print_json();
        if (ctx.root() && !args.json) {
            std::printf("%s: container saved without checksums: read every dataset, %s: readable\n",
                        printable(args.path).c_str(), human_bytes(read).c_str());
            std::fflush(stdout);
        }
        return args.strict ? exit_different : exit_ok;
    }

    // The bar shows rank 0's share of the chunks.
    ProgressBar bar(ctx, "verify", total);
    cairn::LoadOptions options;
    if (bar.on())
        options.progress = [&bar](const cairn::Progress& p) {
            if (p.phase == cairn::Phase::verify) {
                bar.set_total(p.total);
                bar.update(p.done);
            }
        };
    const cairn::VerifyReport report = cairn::verify(args.path, ctx.comm, options);
    bar.finish();
    doc["checksums"] = report.checksums;
    doc["status"] = !report.ok() ? "damaged" : report.checksums ? "ok" : "no_checksums";
    doc["chunks"] = report.chunks;
    doc["bytes"] = report.bytes;
    doc["problems"] = report.problems;
    print_json();
    if (ctx.root() && !args.json) {
        const std::string path = printable(args.path);
        for (const auto& p : report.problems)
            std::printf("%s: %s\n", path.c_str(), printable(p).c_str());
        const std::string checked = std::to_string(report.chunks) + " chunk" + (report.chunks == 1 ? "" : "s") + ", " +
                                    human_bytes(report.bytes);
        if (!report.ok())
            std::printf("%s: DAMAGED: %zu problem%s (%s intact)\n", path.c_str(), report.problems.size(),
                        report.problems.size() == 1 ? "" : "s", checked.c_str());
        else if (!report.checksums)
            std::printf("%s: no checksums: read %s, could not check them\n", path.c_str(), checked.c_str());
        else
            std::printf("%s: OK: %s, every block matches its XXH3 checksum\n", path.c_str(), checked.c_str());
        std::fflush(stdout);
    }
    if (!report.ok())
        return exit_different;
    return args.strict && !report.checksums ? exit_different : exit_ok;
}

} // namespace cairn_tool
