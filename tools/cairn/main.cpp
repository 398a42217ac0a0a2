// cairn: inspect, check, compare, convert and repair Cairn checkpoints, and summarise profiles (docs/CLI.md).
//
//   cairn ls CKPT [-D] [-l] [--json]  cairn verify CKPT [--strict] [--json]
//   cairn cat CKPT NAME [--slice S]   cairn diff A B [--abs D] [--rel P] [--json]
//   cairn convert SRC DST [--layout L] [--force]
//   cairn repair PATH                 cairn profile FILE [--json]
//   cairn steps ROOT [--json]
//
// Runs on one process or under mpiexec (every rank takes a share of the
// data of verify, diff and convert); rank 0 prints.
#include "tool.hpp"

#include <cairn/errors.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

namespace {

using namespace cairn_tool;

const char* footer = R"(Exit status:
  0  success; diff: the checkpoints are equal; verify: every block is intact
  1  diff: the checkpoints differ; verify: damage found (or no checksums, with --strict);
     steps: the levels record names a file-system step not committed in ROOT
  2  error: bad arguments, no checkpoint at the path, unknown entry, bad slice,
     unreadable metadata (the message on stderr names the file and the entry)

CKPT is a per-rank checkpoint directory or a container file (.h5), or a
checkpoint manager directory (its steps for ls; with --step N, or by default
the checkpoint LATEST names, for every verb) or its LATEST file; a per-rank
checkpoint's metadata.h5 stands for its directory. A CKPT
that is missing beside a complete CKPT.cairn-staging (a replacement
interrupted between its two renames) is an error until `cairn repair CKPT`
puts the newest copy in place. Under
mpiexec, verify, diff and convert spread the data over the ranks.
Environment: CAIRN_LOG=info|debug logs each phase of Cairn's loads and saves;
CAIRN_PROFILE=FILE appends a record of each to FILE, for cairn profile.)";

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    Context ctx;
    MPI_Comm_rank(ctx.comm, &ctx.rank);
    MPI_Comm_size(ctx.comm, &ctx.size);

    CLI::App app{"cairn " + std::string(cairn::version()) +
                     ": inspect, check, compare, convert and repair Cairn checkpoints, and summarise profiles",
                 "cairn"};
    app.footer(footer);
    app.require_subcommand(1);
    app.fallthrough(); // global options after the verb too
    std::uint64_t memory_mib = ctx.memory >> 20;
    app.add_flag("-q,--quiet", ctx.quiet, "No progress bar and no summary on stderr");
    app.add_option("--memory", memory_mib, "MiB of array data per rank held at once by cat, verify, diff and ls -l")
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 30));
    app.set_version_flag("--version", std::string(cairn::version()));

    std::optional<std::int64_t> step;
    const std::string step_help = "With a checkpoint manager directory: the checkpoint of step N "
                                  "(default: the one LATEST names)";
    LsArgs ls;
    auto* c_ls = app.add_subcommand("ls", "List the entries of a checkpoint: arrays with dtype, shape, chunks and "
                                          "bytes; scalars and strings with their values; byte blobs with their length");
    c_ls->add_option("CKPT", ls.path, "Checkpoint (directory or .h5 file), or checkpoint manager directory")->required();
    c_ls->add_flag("--json", ls.json, "Print JSON for scripts");
    c_ls->add_flag("-D,--decomposition", ls.decomposition,
                   "Also list every stored chunk of every array and blob: its box, file, offset and bytes");
    c_ls->add_flag("-l,--long", ls.extremes, "Also give the min and max of every array (reads all data; in "
                                             "parallel under mpiexec)");
    c_ls->add_option("--step", step, step_help + "; without it, ls lists the steps")->type_name("N");

    CatArgs cat;
    auto* c_cat = app.add_subcommand("cat", "Print the values of an array (or part of it), a scalar, a string, or a "
                                            "byte blob as hex");
    c_cat->add_option("CKPT", cat.path, "Checkpoint")->required();
    c_cat->add_option("NAME", cat.name, "Entry name")->required();
    c_cat->add_option("--step", step, step_help)->type_name("N");
    c_cat->add_option("-s,--slice", cat.slice,
                      "numpy-like selection per dimension, e.g. 0:4,2 or ::2,-1 (start:stop:step, negative from the end)");

    VerifyArgs verify;
    auto* c_verify = app.add_subcommand("verify", "Check the checksum of every stored block (in parallel under mpiexec)");
    c_verify->add_option("CKPT", verify.path, "Checkpoint")->required();
    c_verify->add_flag("--strict", verify.strict, "Exit 1 when the checkpoint has no checksums");
    c_verify->add_flag("--json", verify.json, "Print JSON for scripts");
    c_verify->add_option("--step", step, step_help)->type_name("N");

    DiffArgs diff;
    auto* c_diff = app.add_subcommand("diff", "Compare two checkpoints value by value (keys, dtypes, shapes, values "
                                              "bitwise), whatever their layouts and decompositions");
    c_diff->add_option("A", diff.a, "First checkpoint")->required();
    c_diff->add_option("B", diff.b, "Second checkpoint")->required();
    c_diff->add_option("--max-lines", diff.max_lines, "Print at most this many differing entries");
    c_diff->add_option("--abs", diff.tolerance.abs,
                       "Numbers are equal when |a - b| <= D (like h5diff -d)")
        ->type_name("D")
        ->check(CLI::NonNegativeNumber);
    c_diff->add_option("--rel", diff.tolerance.rel,
                       "Numbers are equal when |a - b| <= P * |a| (like h5diff -p); with --abs, either suffices")
        ->type_name("P")
        ->check(CLI::NonNegativeNumber);
    c_diff->add_flag("--json", diff.json, "Print JSON for scripts (every differing entry)");
    c_diff->add_option("--step", step, step_help + " (of A and of B)")->type_name("N");

    ConvertArgs convert;
    auto* c_convert = app.add_subcommand("convert", "Rewrite a checkpoint in another layout, on the ranks of this run");
    c_convert->add_option("SRC", convert.src, "Checkpoint to read")->required();
    c_convert->add_option("DST", convert.dst, "Checkpoint to write (a name ending in .h5: container)")->required();
    c_convert->add_option("--layout", convert.layout, "auto (from DST's name), per-rank or container")
        ->check(CLI::IsMember({"auto", "per-rank", "container"}));
    c_convert->add_flag("-f,--force", convert.force, "Replace an existing DST");
    c_convert->add_option("--step", step, step_help + " (of SRC)")->type_name("N");
    c_convert->add_option("--hint", convert.hints,
                          "KEY=VALUE, repeatable: an MPI-IO hint of the files read and written, "
                          "container or per-rank (e.g. striping_factor=16)");
    c_convert->add_option("--checksum-block", convert.checksum_block,
                          "Bytes per checksum block of DST, 0: no checksums (default 1048576)");
    c_convert->add_flag("--cooperative", convert.cooperative,
                        "Cooperative reads of SRC: each checksum block that several ranks need is read by one of "
                        "them and sent to the others over MPI");

    RepairArgs repair;
    auto* c_repair = app.add_subcommand(
        "repair", "Finish interrupted replacements and remove what interrupted saves left: for a checkpoint path, "
                  "its .cairn-staging/.cairn-old/.cairn-tmp siblings (a missing PATH gets the newest complete one); "
                  "for a directory of checkpoints (a CheckpointManager root), every leftover in it. Prints what it did");
    c_repair->add_option("PATH", repair.path, "Checkpoint, or directory of checkpoints")->required();

    ProfileArgs profile;
    auto* c_profile = app.add_subcommand(
        "profile", "Summarise a profile written with CAIRN_PROFILE=FILE: for each save, load and verify, every "
                   "phase's min, mean and max time over the ranks, imbalance (max / mean), slowest rank, bytes "
                   "and bandwidth");
    c_profile->add_option("FILE", profile.file, "Profile file (JSON Lines, one record per operation)")->required();
    c_profile->add_flag("--json", profile.json, "Print JSON for scripts");

    StepsArgs steps;
    auto* c_steps = app.add_subcommand(
        "steps", "List the committed steps of a checkpoint manager directory (layout, size) and, from its levels "
                 "record (.cairn-levels), which steps are held node-local and with which redundancy; exits 1 when "
                 "the record names a file-system step that is not committed in ROOT");
    c_steps->add_option("ROOT", steps.root, "Checkpoint manager directory")->required();
    c_steps->add_flag("--json", steps.json, "Print JSON for scripts");

    int rc = exit_ok;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        std::ostringstream out, err;
        rc = app.exit(e, out, err);
        if (ctx.root()) {
            std::cout << out.str() << std::flush;
            std::cerr << err.str() << std::flush;
        }
        MPI_Finalize();
        return rc == 0 ? exit_ok : exit_error;
    }
    ctx.memory = memory_mib << 20;
    ctx.step = step;

    std::string verb = app.get_subcommands().front()->get_name();
    try {
        if (verb == "ls") {
            int manager = 0; // a manager directory without --step: its steps
            agree(ctx, [&] { manager = ctx.root() && !ctx.step && is_manager_dir(ls.path); });
            MPI_Bcast(&manager, 1, MPI_INT, 0, ctx.comm);
            if (manager) {
                rc = cmd_ls_manager(ctx, ls);
            } else {
                ls.path = resolve_checkpoint(ctx, ls.path);
                rc = cmd_ls(ctx, ls);
            }
        } else if (verb == "cat") {
            cat.path = resolve_checkpoint(ctx, cat.path);
            rc = cmd_cat(ctx, cat);
        } else if (verb == "verify") {
            verify.path = resolve_checkpoint(ctx, verify.path);
            rc = cmd_verify(ctx, verify);
        } else if (verb == "diff") {
            // --step applies to whichever of A and B is a manager directory.
            bool ma = false, mb = false;
            const std::string a = resolve_checkpoint(ctx, diff.a, &ma);
            const std::string b = resolve_checkpoint(ctx, diff.b, &mb);
            if (ctx.step && !ma && !mb)
                throw ToolError("--step " + std::to_string(*ctx.step) + ": neither " + diff.a + " nor " + diff.b +
                                " is a checkpoint manager directory (step_<N> checkpoints, LATEST)");
            diff.a = a;
            diff.b = b;
            rc = cmd_diff(ctx, diff);
        }
        else if (verb == "steps") {
            rc = cmd_steps(ctx, steps);
        }
        else if (verb == "profile") {
            rc = cmd_profile(ctx, profile);
        }
        else if (verb == "repair") {
            repair.path = resolve_metadata_file(ctx, repair.path);
            rc = cmd_repair(ctx, repair);
        }
        else {
            convert.src = resolve_checkpoint(ctx, convert.src);
            rc = cmd_convert(ctx, convert);
        }
    } catch (const cairn::Error& e) { // the same on every rank (collective calls, agreed reads)
        if (ctx.root())
            std::fprintf(stderr, "cairn %s: %s\n", verb.c_str(), printable(e.what()).c_str());
        rc = exit_error;
    } catch (const ToolError& e) { // likewise
        if (ctx.root())
            std::fprintf(stderr, "cairn %s: %s\n", verb.c_str(), printable(e.what()).c_str());
        rc = exit_error;
    } catch (const std::exception& e) { // on this rank only: the others may wait for it
        std::fprintf(stderr, "cairn %s: rank %d: %s\n", verb.c_str(), ctx.rank, printable(e.what()).c_str());
        if (ctx.size > 1)
            MPI_Abort(ctx.comm, exit_error);
        rc = exit_error;
    }
    MPI_Finalize();
    return rc;
}
