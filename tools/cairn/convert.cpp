// cairn convert: rewrites a checkpoint in another layout (or on another
// number of ranks) through load and save. Each rank of the tool holds an even
// share of every array's rows (dim 0), 0-d arrays, blobs, scalars and strings
// are held by every rank (replicas, stored once).
#include "tool.hpp"

#include <cairn/state_dict.hpp>

#include <cstdio>
#include <deque>
#include <filesystem>

namespace cairn_tool {

int cmd_convert(const Context& ctx, const ConvertArgs& args)
{
    cairn::SaveOptions save_options;
    if (args.layout == "per-rank")
        save_options.layout = cairn::Layout::per_rank;
    else if (args.layout == "container")
        save_options.layout = cairn::Layout::container;
    else if (args.layout != "auto")
        throw ToolError("--layout must be auto, per-rank or container, not '" + args.layout + "'");
    save_options.overwrite = args.force;
    save_options.checksum_block = args.checksum_block;
    for (const auto& h : args.hints) {
        const auto eq = h.find('=');
        if (eq == std::string::npos || eq == 0)
            throw ToolError("--hint must be KEY=VALUE, not '" + h + "'");
        save_options.container.mpi_hints.emplace_back(h.substr(0, eq), h.substr(eq + 1));
    }
    save_options.per_rank.mpi_hints = save_options.container.mpi_hints;

    const cairn::Metadata md = open_checkpoint(ctx, args.src);
    agree(ctx, [&] {
        std::error_code ec;
        if (!args.force && std::filesystem::exists(args.dst, ec))
            throw ToolError(args.dst + " already exists (--force replaces it once the new checkpoint is committed)");
    });

    // The state: one buffer per entry, in stable containers (the state dict
    // points into them).
    cairn::StateDict state;
    std::deque<std::vector<std::byte>> buffers;
    std::deque<std::string> strings;
    std::uint64_t mine = 0; // array bytes this rank holds
    agree(ctx, [&] {
        for (const auto& [name, e] : md.entries) {
            switch (e.kind) {
            case cairn::ItemKind::array: {
                const cairn::Box box = e.global_shape.empty() ? cairn::Box{}
                                                              : split_rows(e.global_shape, 0, e.global_shape[0],
                                                                           ctx.size, ctx.rank);
                const auto n = static_cast<std::size_t>(std::max<std::int64_t>(box.volume(), 0)) * cairn::dtype_size(e.dtype);
                buffers.emplace_back(n);
                mine += n;
                state.add_array(name, cairn::ArrayShard{e.dtype, e.global_shape, box,
                                                        n ? buffers.back().data() : nullptr, {}, cairn::MemorySpace::host});
                break;
            }
            case cairn::ItemKind::bytes:
                buffers.emplace_back();
                state.add_bytes(name, &buffers.back());
                break;
            case cairn::ItemKind::scalar:
                buffers.emplace_back(cairn::dtype_size(e.dtype));
                state.add_scalar_ref(name, cairn::ScalarRef{e.dtype, buffers.back().data()});
                break;
            case cairn::ItemKind::string:
                strings.emplace_back();
                state.add_string(name, &strings.back());
                break;
            }
        }
    });

    ProgressBar bar(ctx, "convert", 2 * mine);
    cairn::LoadOptions load_options;
    load_options.container = save_options.container;
    load_options.per_rank = save_options.per_rank;
    load_options.cooperative = args.cooperative;
    load_options.progress = bar.callback(0);
    const cairn::LoadResult loaded = cairn::load(state, args.src, ctx.comm, load_options);
    bar.update(mine);
    save_options.progress = bar.callback(mine);
    const cairn::SaveResult saved = cairn::save(state, args.dst, ctx.comm, save_options);
    bar.finish();
    if (ctx.root() && !ctx.quiet)
        std::fprintf(stderr, "cairn convert: %s (%s, %d ranks) -> %s: %zu entries, %s read, %s written on %d rank%s in %.3f s\n",
                     printable(args.src).c_str(), printable(md.layout).c_str(), md.world_size,
                     printable(args.dst).c_str(), saved.entries,
                     human_bytes(loaded.bytes_read_all).c_str(), human_bytes(saved.bytes_written).c_str(), ctx.size,
                     ctx.size == 1 ? "" : "s", loaded.seconds + saved.seconds);
    return exit_ok;
}

} // namespace cairn_tool
