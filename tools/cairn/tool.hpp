// The `cairn` command-line tool: what its verbs share. Every verb runs on
// every rank of MPI_COMM_WORLD (one rank when started without mpiexec) and
// goes through Cairn's public API only; rank 0 prints.
#pragma once

#include <cairn/checkpoint.hpp>
#include <cairn/plan.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cairn_tool {

/// Exit statuses (documented in `cairn --help` and docs/CLI.md).
constexpr int exit_ok = 0;        ///< done; diff: equal; verify: intact
constexpr int exit_different = 1; ///< diff: the checkpoints differ; verify: damage found
constexpr int exit_error = 2;     ///< bad arguments, missing or unreadable checkpoint, unknown array

/// A failure of the tool itself (bad slice, unknown array), raised on every rank.
struct ToolError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// What every verb gets.
struct Context {
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank = 0;
    int size = 1;
    bool quiet = false;             ///< --quiet: no progress bar, no summary lines on stderr
    std::uint64_t memory = 256ull << 20; ///< --memory: bytes of array data per rank and pass
    std::optional<std::int64_t> step;    ///< --step: the step of a checkpoint manager directory
    bool root() const { return rank == 0; }
};

/// Runs `f` on every rank; when it throws on any rank, every rank throws a
/// ToolError with the message of the lowest failing rank. Collective.
void agree(const Context& ctx, const std::function<void()>& f);

/// The checkpoint's metadata without its chunks, on every rank, agreed:
/// rank 0 reads it (read_metadata) and sends every rank its fields and
/// entries (kind, dtype, global shape, value) with `chunks` empty, so that
/// no rank holds a large checkpoint's chunk table after this returns. The
/// same metadata or the same error everywhere. Collective.
cairn::Metadata open_checkpoint(const Context& ctx, const std::string& path);
/// The same, read on rank 0 only (the other ranks get an empty Metadata):
/// for verbs whose other ranks need none of it (ls), so that they do not
/// each hold a large checkpoint's metadata.
cairn::Metadata open_checkpoint_on_root(const Context& ctx, const std::string& path);

// ---- checkpoint manager directories (manager.cpp) ----------------------------

/// A committed checkpoint of a manager directory.
struct ManagedStep {
    std::int64_t step = 0;
    std::string name; ///< step_<N> or step_<N>.h5
    std::string path; ///< root/name
};

/// Whether `path` is a checkpoint manager directory: a directory without
/// metadata.h5 that holds LATEST or a checkpoint named step_<N>[.h5]. Local.
bool is_manager_dir(const std::string& path);
/// The committed checkpoints of a manager directory, by step. Local.
std::vector<ManagedStep> manager_steps(const std::string& root);
/// The step a verb takes without --step: the one LATEST names when it is
/// committed, else the highest. `steps` must not be empty.
const ManagedStep& default_step(const std::string& root, const std::vector<ManagedStep>& steps);
/// The checkpoint `path` names, agreed on every rank: for a manager
/// directory the checkpoint of ctx.step (default: default_step), for a
/// manager's LATEST file the checkpoint it names, for a per-rank
/// checkpoint's metadata.h5 its directory, else `path` itself
/// (ToolError for --step with anything but a manager directory, unless
/// `manager` is given: then it tells whether `path` is one, and --step
/// applies to manager directories only). Collective.
std::string resolve_checkpoint(const Context& ctx, const std::string& path, bool* manager = nullptr);
/// `dir` for the per-rank layout's metadata file `dir/metadata.h5` (not for
/// a container file of that name), else `path`; resolve_checkpoint does the
/// same. Collective.
std::string resolve_metadata_file(const Context& ctx, const std::string& path);

/// The entry `name` of `md`, or a ToolError naming the checkpoint and the entry.
const cairn::EntryMeta& find_entry(const cairn::Metadata& md, const std::string& path, const std::string& name);

/// Bytes of stored data of an entry: its chunk lengths summed, which for
/// the disjoint chunks that cover an array or blob (what read_metadata
/// checks) is its global volume times the element size; 0 for scalars and
/// strings (no chunks). Needs no chunk.
std::uint64_t stored_bytes(const cairn::EntryMeta& e);

// ---- formatting ----------------------------------------------------------

/// One element of `dtype` at `p` as text: shortest round-trip form for
/// floats ("nan", "inf", "-inf"), decimal integers, "true"/"false".
std::string format_value(cairn::DType dtype, const void* p);
/// One element of a numeric `dtype` at `p` as a number (floats, integers;
/// 64-bit integers exactly); false for booleans.
bool numeric_value(cairn::DType dtype, const void* p, long double& v);
/// A double in its shortest round-trip form ("nan", "inf", "-inf").
std::string format_double(double v);
/// A number of `dtype` held as a long double (what numeric_value gave, or 0 /
/// 1 for bool) in the dtype's form: integers exactly, f32, f16 and bf16 as
/// floats, f64 as a double, "false" / "true".
std::string format_number(cairn::DType dtype, long double v);
/// The same, as a JSON value: a number (integers exactly, floats in their
/// shortest form), true / false, or the string "nan", "inf", "-inf".
nlohmann::ordered_json json_value(cairn::DType dtype, const void* p);
/// A value printed by format_value as JSON (the same forms).
nlohmann::ordered_json json_from_text(const std::string& text);
/// `j` as text for stdout: indented by 2, a newline at the end; bytes of
/// strings that are not UTF-8 become U+FFFD.
std::string json_text(const nlohmann::ordered_json& j);
/// A quoted string with C escapes for control characters, for text output.
std::string quoted(const std::string& s);
/// `s` made safe for a terminal, for text output of names, paths and
/// messages: control characters (C0, DEL and the C1 range U+0080-U+009F)
/// as C escapes (\n, \t, \r, \x1b, \u009b), bytes that are not UTF-8 as
/// \xNN; everything else, backslashes included, as it is.
std::string printable(const std::string& s);
/// "1.5 MiB".
std::string human_bytes(std::uint64_t n);
/// "[3, 4]" from a multi-index.
std::string index_str(const cairn::Shape& index);

// ---- progress --------------------------------------------------------------

/// A progress bar on stderr, drawn by rank 0 only and only when stderr is a
/// terminal and --quiet is not given; otherwise every call does nothing.
class ProgressBar {
public:
    ProgressBar(const Context& ctx, std::string label, std::uint64_t total);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;
    /// `done` of `total` bytes; redrawn at most ten times a second.
    void update(std::uint64_t done);
    std::uint64_t done() const { return m_done; }
    void set_total(std::uint64_t total) { m_total = total; }
    /// Whether this rank draws the bar.
    bool on() const { return m_on; }
    /// A callback for Save/LoadOptions::progress drawing `base` plus this
    /// rank's bytes of the data phase of one call; empty when the bar is off.
    cairn::ProgressCallback callback(std::uint64_t base);
    /// Erases the bar.
    void finish();

private:
    bool m_on = false;
    std::string m_label;
    std::uint64_t m_total = 0;
    std::uint64_t m_done = 0;
    double m_last = -1.0;
    bool m_drawn = false;
};

// ---- reading arrays in passes --------------------------------------------

/// One region of one array that this rank loads in a pass (box may be empty).
struct Region {
    std::string name;
    const cairn::EntryMeta* entry = nullptr;
    cairn::Box box;
    std::vector<std::byte> data; ///< box.volume() * element size bytes after load_regions
};

/// The row range [begin, end) of dim 0 of one array that a pass covers, split
/// over the ranks (0-d arrays: rank 0 holds the element).
struct Piece {
    std::string name;
    const cairn::EntryMeta* entry = nullptr;
    std::int64_t begin = 0, end = 0;
};

/// Cuts every array with elements of `md` (in name order) into pieces split
/// along dim 0 over the ranks and groups them into passes, each holding at
/// most about ctx.memory bytes per rank (at least one row per rank and pass).
std::vector<std::vector<Piece>> plan_passes(const Context& ctx, const cairn::Metadata& md);

/// This rank's box of a piece: rows [begin, end) split evenly over the
/// ranks; none when this rank gets no element.
std::optional<cairn::Box> piece_box(const Context& ctx, const Piece& piece);

/// The box of rows [begin, end) of an array of `shape` split evenly along dim
/// 0 over `parts`, part `k` (empty box when it gets no rows).
cairn::Box split_rows(const cairn::Shape& shape, std::int64_t begin, std::int64_t end, int parts, int k);

/// Loads the regions from `path` (a partial load; collective over ctx.comm).
cairn::LoadResult load_regions(const Context& ctx, const std::string& path, std::vector<Region>& regions,
                               const cairn::ProgressCallback& progress = {});

/// Gathers one string from every rank to rank 0 (rank order). Collective.
std::vector<std::string> gather_strings(const Context& ctx, const std::string& mine);

// ---- verbs -----------------------------------------------------------------

struct LsArgs {
    std::string path;
    bool json = false;
    bool decomposition = false; ///< -D: every chunk of every entry (box, file, offset, bytes)
    bool extremes = false;      ///< -l: min and max of every array (reads the data)
};
int cmd_ls(const Context& ctx, const LsArgs& args);
/// `ls` of a manager directory without --step: its steps.
int cmd_ls_manager(const Context& ctx, const LsArgs& args);

struct CatArgs {
    std::string path;
    std::string name;
    std::string slice;
};
int cmd_cat(const Context& ctx, const CatArgs& args);

struct VerifyArgs {
    std::string path;
    bool strict = false;
    bool json = false;
};
int cmd_verify(const Context& ctx, const VerifyArgs& args);

/// Tolerances of `cairn diff` for numeric values (h5diff's -d and -p): two
/// values are equal when bitwise equal, or when |a - b| <= abs (with
/// --abs), or when |a - b| <= rel * |a| (with --rel).
struct Tolerance {
    std::optional<double> abs, rel;
    bool any() const { return abs.has_value() || rel.has_value(); }
};

struct DiffArgs {
    std::string a, b;
    std::size_t max_lines = 20;
    Tolerance tolerance;
    bool json = false;
};
int cmd_diff(const Context& ctx, const DiffArgs& args);

struct ConvertArgs {
    std::string src, dst;
    std::string layout = "auto";
    bool force = false;
    std::vector<std::string> hints;          ///< KEY=VALUE: MPI-IO hints of the containers read and written
    std::uint64_t checksum_block = 1u << 20; ///< of DST; 0: no checksums
    bool cooperative = false;                ///< read SRC with LoadOptions::cooperative
};
int cmd_convert(const Context& ctx, const ConvertArgs& args);

struct RepairArgs {
    std::string path; ///< a checkpoint path or a root directory of checkpoints
};
/// Finishes interrupted replacements and removes leftovers (rank 0 alone):
/// repair_checkpoint(path) for a checkpoint path, remove_leftovers(path)
/// for a directory of checkpoints.
int cmd_repair(const Context& ctx, const RepairArgs& args);

struct StepsArgs {
    std::string root; ///< a checkpoint manager's root directory
    bool json = false;
};
/// The committed steps of a manager's root and, from its levels record
/// (root/.cairn-levels), the levels that hold each; exit_different when the
/// record names a step in the file system that is not committed there.
int cmd_steps(const Context& ctx, const StepsArgs& args);

struct ProfileArgs {
    std::string file; ///< a profile written with CAIRN_PROFILE (JSON Lines)
    bool json = false;
};
/// Summarises every record of a profile file (rank 0 reads it).
int cmd_profile(const Context& ctx, const ProfileArgs& args);

} // namespace cairn_tool
