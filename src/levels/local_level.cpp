// The node-local level (levels/local_level.hpp).
//
// A node-local step is a per-rank checkpoint split across the nodes: each
// node's copy of `step_<N>` holds its ranks' data files, the whole metadata
// file and the manifest (both the same on every node) and the redundancy
// data. Saving and loading go through Cairn's own per-rank storage, with
// each rank's path turned to its node's directory (NodeWriter, NodeReader),
// so that the ranks agree on one checkpoint id while each writes and reads
// its node's storage.
#include "levels/local_level.hpp"

#include "cairn/async.hpp"
#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "cairn/planner.hpp"
#include "comm/protocol.hpp"
#include "core/codec.hpp"
#include "driver/save_session.hpp"
#include "io/fs.hpp"
#include "storage/per_rank/mapped_files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <system_error>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cairn::detail {

namespace stdfs = std::filesystem;

namespace {

constexpr const char* staging_suffix = ".cairn-staging";
constexpr const char* old_suffix = ".cairn-old";
constexpr std::size_t piece_bytes = std::size_t(4) << 20; // files move between nodes in pieces of 4 MiB
constexpr int tag_transfer = 0x4341; // on the leaders' communicator, which only this file uses

bool parse_local_step_name(const std::string& name, std::int64_t& step)
{
    if (name.rfind("step_", 0) != 0 || name.size() < 13 || name.size() > 23)
        return false;
    const std::string digits = name.substr(5);
    if (!std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        return false;
    step = std::stoll(digits);
    return local_step_name(step) == name;
}

std::string read_whole_file(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    if (!f)
        throw error::ReadError("cannot open " + path + ": " + std::strerror(errno));
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad())
        throw error::ReadError("cannot read " + path);
    return s;
}

// The relative paths of the regular files under `dir` ("a", "partner/b").
std::set<std::string> list_files(const std::string& dir)
{
    std::set<std::string> out;
    std::error_code ec;
    for (auto it = stdfs::recursive_directory_iterator(dir, ec); !ec && it != stdfs::recursive_directory_iterator();
         it.increment(ec)) {
        std::error_code ec2;
        if (it->is_regular_file(ec2))
            out.insert(stdfs::relative(it->path(), dir, ec2).generic_string());
    }
    if (ec)
        throw error::ReadError("cannot list " + dir + ": " + ec.message());
    return out;
}

Bytes encode_strings(const std::vector<std::string>& v)
{
    Encoder enc;
    enc.count(v.size());
    for (const auto& s : v)
        enc.str(s);
    return enc.take();
}

std::vector<std::string> decode_strings(const Bytes& b, const char* what)
{
    Decoder dec(b, what);
    std::vector<std::string> v(dec.count(1));
    for (auto& s : v)
        s = dec.str();
    dec.expect_done();
    return v;
}

// Every rank's strings on every rank (index: rank). Collective.
std::vector<std::vector<std::string>> allgather_strings(const Comm& c, const std::vector<std::string>& mine,
                                                        const char* what)
{
    const auto all = gather_bytes(c, encode_strings(mine));
    Bytes joined;
    if (c.coordinator()) {
        Encoder enc;
        enc.count(all.size());
        for (const auto& b : all)
            enc.bytes(b);
        joined = enc.take();
    }
    bcast_bytes(c, joined);
    Decoder dec(joined, what);
    std::vector<std::vector<std::string>> out(dec.count(1));
    for (auto& v : out)
        v = decode_strings(dec.bytes(), what);
    dec.expect_done();
    return out;
}

// The per-rank storage reading each rank's node's copy of the step.
class NodeReader : public DistcpReader {
public:
    NodeReader(const LoadOptions& o, std::string dir)
        : DistcpReader(o.staging_bytes, o.verify_checksums, o.per_rank.mpi_hints), m_dir(std::move(dir))
    {
    }
    void reset(const std::string&) override { DistcpReader::reset(m_dir); }

private:
    std::string m_dir;
};

std::string hosts_text(const SavedLayout& l, const std::set<int>& nodes)
{
    std::string s;
    for (int n : nodes) {
        if (!s.empty())
            s += ", ";
        s += "node " + std::to_string(n);
        if (n < static_cast<int>(l.hosts.size()))
            s += " (host " + l.hosts[static_cast<std::size_t>(n)] + ")";
    }
    return s;
}

// Sends file `name` of this node's step directory to node `to` (leaders'
// communicator): its size, then pieces, then whether all was read. A read
// failure still sends every piece (zeros), so that the receiver never waits;
// neither side throws (an error goes to `error_out`).
std::uint64_t send_file(MPI_Comm leaders, int to, const std::string& path, std::string& error_out)
{
    std::uint64_t size = 0;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0)
        error_out = "cannot open " + path + ": " + std::strerror(errno);
    else if (::fstat(fd, &st) != 0)
        error_out = "cannot stat " + path + ": " + std::strerror(errno);
    else
        size = static_cast<std::uint64_t>(st.st_size);
    MPI_Send(&size, 1, MPI_UINT64_T, to, tag_transfer, leaders);
    std::vector<char> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, piece_bytes)));
    for (std::uint64_t off = 0; off < size; off += piece_bytes) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece_bytes, size - off));
        std::size_t got = 0;
        while (error_out.empty() && got < n) {
            const ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(off + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                error_out = "cannot read " + path + (r < 0 ? std::string(": ") + std::strerror(errno) : ": short file");
            else
                got += static_cast<std::size_t>(r);
        }
        MPI_Send(buf.data(), static_cast<int>(n), MPI_BYTE, to, tag_transfer, leaders);
    }
    if (fd >= 0)
        ::close(fd);
    int ok = error_out.empty() ? 1 : 0;
    MPI_Send(&ok, 1, MPI_INT, to, tag_transfer, leaders);
    return size;
}

// Receives a file from node `from` into `path` (fs::AtomicFile: a
// temporary name, renamed when complete). Every piece is received whatever
// fails, so that the sender never waits.
void receive_file(MPI_Comm leaders, int from, const std::string& path, std::string& error_out)
{
    std::uint64_t size = 0;
    MPI_Recv(&size, 1, MPI_UINT64_T, from, tag_transfer, leaders, MPI_STATUS_IGNORE);
    std::unique_ptr<fs::AtomicFile> file;
    const auto attempt = [&](auto&& f) {
        if (!error_out.empty())
            return;
        try {
            f();
        } catch (const std::exception& e) {
            error_out = e.what();
            file.reset();
        }
    };
    attempt([&] { file = std::make_unique<fs::AtomicFile>(path); });
    std::vector<char> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, piece_bytes)));
    for (std::uint64_t off = 0; off < size; off += piece_bytes) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece_bytes, size - off));
        MPI_Recv(buf.data(), static_cast<int>(n), MPI_BYTE, from, tag_transfer, leaders, MPI_STATUS_IGNORE);
        attempt([&] { file->write(buf.data(), n); });
    }
    int ok = 0;
    MPI_Recv(&ok, 1, MPI_INT, from, tag_transfer, leaders, MPI_STATUS_IGNORE);
    if (!ok && error_out.empty())
        error_out = "node " + std::to_string(from) + " could not read its copy of " + path;
    attempt([&] { file->commit(false); });
    file.reset(); // uncommitted: the temporary file is removed
}

} // namespace

// The per-rank storage with every rank's files in its own node's copy of
// the step: the coordinator plans as usual (and commits the metadata in its
// own node's directory), and each rank is told its node's directory.
class NodeWriter : public DistcpWriter {
public:
    NodeWriter(DistcpWriterOptions o, std::string my_dir, std::vector<std::string> dir_of_rank)
        : DistcpWriter(std::move(o)), m_dir(std::move(my_dir)), m_dir_of_rank(std::move(dir_of_rank))
    {
    }
    void reset(const std::string&) override { DistcpWriter::reset(m_dir); }
    std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override
    {
        plans = DistcpWriter::prepare_global_plan(std::move(plans));
        if (plans.size() != m_dir_of_rank.size())
            throw Error(Error::Kind::generic, "node-local save: " + std::to_string(plans.size()) +
                                                         " plans for " + std::to_string(m_dir_of_rank.size()) +
                                                         " ranks");
        for (std::size_t r = 0; r < plans.size(); ++r) {
            Encoder enc;
            enc.str(m_dir_of_rank[r]);
            plans[r].storage_data = enc.take();
        }
        return plans;
    }
    std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override
    {
        auto results = DistcpWriter::write_data(plan, planner);
        for (const auto& r : results)
            if (!r.storage.path.empty())
                files.insert(r.storage.path);
        return results;
    }
    ColumnarWriter* columnar() noexcept override { return nullptr; } // plans pass through prepare_global_plan

    std::set<std::string> files; ///< the data files this rank wrote

private:
    std::string m_dir;
    std::vector<std::string> m_dir_of_rank;
};

std::string local_step_name(std::int64_t step)
{
    char buf[40];
    std::snprintf(buf, sizeof buf, "step_%08" PRId64, step);
    return buf;
}

// ---- manifest ----------------------------------------------------------------

std::string manifest_text(const LocalManifest& m)
{
    nlohmann::json j;
    j["format"] = "cairn-node-local-step";
    j["version"] = 1;
    j["step"] = m.step;
    j["save_id"] = m.save_id;
    j["redundancy"] = m.layout.redundancy.str();
    j["nodes"] = m.layout.nodes;
    j["hosts"] = m.layout.hosts;
    auto ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < m.layout.node_of_rank.size(); ++r) {
        auto files = nlohmann::json::array();
        for (const auto& f : m.layout.files[r])
            files.push_back({{"name", f.name}, {"bytes", f.bytes}});
        ranks.push_back({{"node", m.layout.node_of_rank[r]}, {"files", files}});
    }
    j["ranks"] = ranks;
    return j.dump(1) + "\n";
}

LocalManifest parse_manifest(const std::string& text, const std::string& where)
{
    try {
        const auto j = nlohmann::json::parse(text);
        if (j.at("format").get<std::string>() != "cairn-node-local-step" || j.at("version").get<int>() != 1)
            throw error::FormatError("not a version 1 manifest");
        LocalManifest m;
        m.step = j.at("step").get<std::int64_t>();
        m.save_id = j.at("save_id").get<std::uint64_t>();
        m.layout.redundancy = Redundancy::parse(j.at("redundancy").get<std::string>());
        m.layout.nodes = j.at("nodes").get<int>();
        m.layout.hosts = j.at("hosts").get<std::vector<std::string>>();
        for (const auto& r : j.at("ranks")) {
            const int node = r.at("node").get<int>();
            if (node < 0 || node >= m.layout.nodes)
                throw error::FormatError("a rank on node " + std::to_string(node) + " of " +
                                         std::to_string(m.layout.nodes));
            m.layout.node_of_rank.push_back(node);
            std::vector<SavedFile> files;
            for (const auto& f : r.at("files"))
                files.push_back(SavedFile{f.at("name").get<std::string>(), f.at("bytes").get<std::uint64_t>()});
            m.layout.files.push_back(std::move(files));
        }
        if (m.layout.nodes < 1 || static_cast<int>(m.layout.hosts.size()) != m.layout.nodes)
            throw error::FormatError("nodes and hosts do not match");
        return m;
    } catch (const error::FormatError& e) {
        throw error::FormatError("manifest " + where + ": " + e.what());
    } catch (const std::exception& e) {
        throw error::FormatError("manifest " + where + " does not parse: " + e.what());
    }
}

// ---- NodeLevel -------------------------------------------------------------------

NodeLevel::NodeLevel(MPI_Comm comm, const LocalLevel& options)
    : m_topo(comm, options.ranks_per_node), m_opt(options)
{
}

NodeLevel::~NodeLevel()
{
    wait_for_removal();
    unmap_removed_files(); // the pages of removed files kept mapped by the writer and the redundancy, freed
}

void NodeLevel::wait_for_removal() noexcept
{
    if (m_remover.joinable())
        m_remover.join();
}

std::string NodeLevel::node_dir(int node) const { return fs::strip(expand_node_dir(m_opt.dir, node)); }

std::string NodeLevel::step_dir(std::int64_t step) const
{
    return fs::join(node_dir(m_topo.node), local_step_name(step));
}

bool NodeLevel::same_layout(const LocalManifest& m) const
{
    const auto& l = m.layout;
    return static_cast<int>(l.node_of_rank.size()) == m_topo.size && l.nodes == m_topo.nodes &&
           l.node_of_rank == m_topo.node_of_rank;
}

std::vector<std::string> NodeLevel::own_files(const LocalManifest& m) const
{
    const auto& l = m.layout;
    if (!same_layout(m))
        return {};
    std::vector<std::string> out;
    for (const auto& f : l.files[static_cast<std::size_t>(m_topo.rank)])
        out.push_back(f.name);
    return out;
}

SavePlanner& LocalSave::planner() const { return *session->planner; }

namespace {

// The steps named in `dir` other than `except` (committed or not), newest first.
std::vector<std::int64_t> steps_in(const std::string& dir, std::int64_t except)
{
    std::vector<std::int64_t> steps;
    std::error_code ec;
    for (const auto& e : stdfs::directory_iterator(dir, ec)) {
        std::int64_t s = 0;
        if (parse_local_step_name(e.path().filename().string(), s) && s != except)
            steps.push_back(s);
    }
    std::sort(steps.rbegin(), steps.rend());
    return steps;
}

// Of `newest_first` (the other steps of a node), those the retention of a
// save drops with keep_last `keep`: all but the keep-1 newest.
std::vector<std::int64_t> dropped_by_retention(const std::vector<std::int64_t>& newest_first, int keep)
{
    const std::size_t kept = static_cast<std::size_t>(std::max(keep, 1) - 1);
    if (newest_first.size() <= kept)
        return {};
    return std::vector<std::int64_t>(newest_first.begin() + static_cast<std::ptrdiff_t>(kept), newest_first.end());
}

bool committed_dir(const std::string& path)
{
    return fs::exists(fs::join(path, level_manifest_name)) && fs::exists(fs::join(path, metadata_file_name));
}

bool is_data_file_name(const std::string& n)
{
    return n.size() > 9 && n.rfind("__", 0) == 0 && n.compare(n.size() - 7, 7, ".distcp") == 0;
}

// The save_id in the manifest of committed step directory `dir`; false when
// the manifest cannot be read or parsed (the copy then counts as none).
bool manifest_save_id(const std::string& dir, std::uint64_t& id)
{
    std::ifstream in(fs::join(dir, level_manifest_name), std::ios::binary);
    if (!in)
        return false;
    try {
        id = nlohmann::json::parse(in).at("save_id").get<std::uint64_t>();
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

// What this node's leader tells the others before a save of `step` into
// `my_dir` (`final_dir`: that step's name there) chooses a step to reuse:
// its other step directories, newest first, as "c<N>:<save_id>" (committed)
// or "u<N>", and "s:<save_id>" when `final_dir` is a committed copy of the
// step itself.
std::vector<std::string> reuse_candidates(const std::string& my_dir, std::int64_t step,
                                          const std::string& final_dir)
{
    std::vector<std::string> v;
    std::uint64_t id = 0;
    for (const std::int64_t s : steps_in(my_dir, step)) {
        const std::string dir = fs::join(my_dir, local_step_name(s));
        v.push_back(committed_dir(dir) && manifest_save_id(dir, id)
                        ? "c" + std::to_string(s) + ":" + std::to_string(id)
                        : "u" + std::to_string(s));
    }
    if (committed_dir(final_dir) && manifest_save_id(final_dir, id))
        v.push_back("s:" + std::to_string(id));
    return v;
}

// Every node's steps from every rank's reuse_candidates (`by_rank`; a node's
// are its leader's): committed (with save ids, the step being saved
// included) and the other directories. False when a leader could not list
// its directory ("!") or sent what does not parse.
bool node_steps_of(const Topology& t, const std::vector<std::vector<std::string>>& by_rank, std::int64_t step,
                   NodeSteps& out)
{
    NodeSteps ns;
    ns.known = true;
    ns.saving = step;
    ns.committed.resize(static_cast<std::size_t>(t.nodes));
    ns.others.resize(static_cast<std::size_t>(t.nodes));
    try {
        for (int n = 0; n < t.nodes; ++n) {
            const auto& v = by_rank[static_cast<std::size_t>(t.first_rank[static_cast<std::size_t>(n)])];
            auto& committed = ns.committed[static_cast<std::size_t>(n)];
            for (const auto& e : v) {
                if (e.empty() || e == "!")
                    return false;
                const std::size_t colon = e.find(':');
                const std::uint64_t id = colon == std::string::npos ? 0 : std::stoull(e.substr(colon + 1));
                if (e[0] == 's') {
                    committed[step] = id;
                    continue;
                }
                const std::int64_t s = std::stoll(e.substr(1, colon == std::string::npos ? colon : colon - 1));
                ns.others[static_cast<std::size_t>(n)].push_back(s);
                if (e[0] == 'c')
                    committed[s] = id;
            }
        }
    } catch (const std::exception&) {
        return false;
    }
    out = std::move(ns);
    return true;
}

// The step every node's save of `step` reuses, from every node's steps
// (`ns`, node_steps_of), or -1: the newest step that the retention of this
// save drops on every node (keep_last `keep`) and that is older than the
// newest step committed on every node as one save (the same save_id on every
// node: a stale copy left by another save counts as none), so that a failed
// save keeps that one on every node. The same on every rank.
std::int64_t agreed_reuse(const NodeSteps& ns, int keep)
{
    std::map<std::int64_t, std::uint64_t> committed_everywhere;
    std::set<std::int64_t> dropped_everywhere;
    for (std::size_t n = 0; n < ns.committed.size(); ++n) {
        const auto dropped = dropped_by_retention(ns.others[n], keep);
        if (n == 0) {
            committed_everywhere = ns.committed[n];
            dropped_everywhere.insert(dropped.begin(), dropped.end());
            continue;
        }
        for (auto it = committed_everywhere.begin(); it != committed_everywhere.end();) {
            const auto here = ns.committed[n].find(it->first);
            if (here == ns.committed[n].end() || here->second != it->second)
                it = committed_everywhere.erase(it);
            else
                ++it;
        }
        std::set<std::int64_t> d;
        for (const std::int64_t s : dropped)
            if (dropped_everywhere.count(s))
                d.insert(s);
        dropped_everywhere = std::move(d);
    }
    if (committed_everywhere.empty())
        return -1;
    const std::int64_t newest = committed_everywhere.rbegin()->first;
    for (auto it = dropped_everywhere.rbegin(); it != dropped_everywhere.rend(); ++it)
        if (*it < newest)
            return *it;
    return -1;
}

// Renames step directory `dir` away (`<dir>.cairn-old`: no longer committed)
// and moves its data files, and its redundancy files of `scheme`, into
// `staging` under their names. Returns the renamed remains ("" when the
// step could not be renamed: nothing is moved).
std::string recycle_files(const std::string& dir, const std::string& staging, Redundancy::Scheme scheme)
{
    const std::string remains = dir + old_suffix;
    if (::rename(dir.c_str(), remains.c_str()) != 0)
        return "";
    std::error_code ec;
    for (const auto& e : stdfs::directory_iterator(remains, ec)) {
        const std::string n = e.path().filename().string();
        std::error_code ec2;
        if (is_data_file_name(n) && e.is_regular_file(ec2))
            (void)::rename(e.path().c_str(), fs::join(staging, n).c_str());
    }
    const char* sub = scheme == Redundancy::Scheme::partner      ? "partner"
                      : scheme == Redundancy::Scheme::xor_parity ? "xor"
                                                                 : nullptr;
    if (sub && fs::is_directory(fs::join(remains, sub)))
        (void)::rename(fs::join(remains, sub).c_str(), fs::join(staging, sub).c_str());
    return remains;
}

} // namespace

std::unique_ptr<LocalSave> NodeLevel::plan_save(std::int64_t step, StateDict& state, const SaveOptions& options)
{
    wait_for_removal();
    const Comm c(m_topo.comm);
    auto ls = std::make_unique<LocalSave>();
    ls->step = step;
    ls->options = options;
    ls->t0 = MPI_Wtime();
    const std::string name = local_step_name(step);
    ls->my_dir = node_dir(m_topo.node);
    ls->staging = fs::join(ls->my_dir, name + staging_suffix);
    ls->final_dir = fs::join(ls->my_dir, name);
    prepare_staging(*ls);

    // The per-rank save, each rank's files into its own node's directory.
    DistcpWriterOptions po;
    static_cast<WriteOptions&>(po) = options;
    po.files_per_rank = options.files_per_rank;
    po.mpi_hints = options.per_rank.mpi_hints;
    std::vector<std::string> dir_of_rank;
    for (int r = 0; r < m_topo.size; ++r)
        dir_of_rank.push_back(
            fs::join(node_dir(m_topo.node_of_rank[static_cast<std::size_t>(r)]), name + staging_suffix));
    ls->writer = std::make_shared<NodeWriter>(std::move(po), ls->staging, std::move(dir_of_rank));
    SaveOptions so = options;
    so.layout = Layout::per_rank;
    so.per_rank.files = DataFiles{};
    so.reuse_plan = false;
    so.planner = options.planner;
    so.storage = ls->writer;
    // The id every rank passes (each writes its own node's copy).
    ls->session = detail::plan_save(state, fs::join(node_dir(0), name + staging_suffix), c.comm, so);
    // After the planning: the coordinator's storage has cleared its staging
    // directory of data files by then.
    recycle_older_step(*ls);
    return ls;
}

// Every node's staging directory made fresh by its leader, with what
// interrupted saves left (one job writes a node's directory at a time).
void NodeLevel::prepare_staging(const LocalSave& ls)
{
    run_phase(Comm(m_topo.comm), "node-local save: prepare", [&] {
        if (!m_topo.leader())
            return;
        fs::create_directories(ls.my_dir);
        std::error_code ec;
        for (const auto& e : stdfs::directory_iterator(ls.my_dir, ec)) {
            const std::string n = e.path().filename().string();
            for (const char* suffix : {staging_suffix, old_suffix}) {
                std::int64_t s = 0;
                const std::size_t k = std::strlen(suffix);
                if (n.size() > k && n.compare(n.size() - k, k, suffix) == 0 &&
                    parse_local_step_name(n.substr(0, n.size() - k), s))
                    fs::remove_all(e.path().string());
            }
        }
        fs::create_directories(ls.staging);
    });
}

// When this save's retention will drop an older step anyway on every node,
// and it is older than the newest step committed on every node (so that a
// failed save keeps that one: with keep_last 1 nothing is recycled), every
// leader renames that step away (no longer committed) and moves its data
// files and redundancy files of this save's scheme into the staging
// directory under their names, for the writers to write over in place. The
// step is chosen together (agreed_reuse, from what every leader lists), so
// that no step is reused on some nodes only. Best effort: what cannot be
// listed or moved is not reused. Collective (every rank of a node starts
// writing only once its files are in place).
void NodeLevel::recycle_older_step(LocalSave& ls)
{
    const Comm c(m_topo.comm);
    std::vector<std::string> mine;
    if (m_topo.leader()) {
        try {
            mine = reuse_candidates(ls.my_dir, ls.step, ls.final_dir);
        } catch (const std::exception&) {
            mine = {"!"}; // nothing reused anywhere
        }
    }
    NodeSteps ns;
    const bool listed =
        node_steps_of(m_topo, allgather_strings(c, mine, "node-local save: steps to reuse"), ls.step, ns);
    const std::int64_t victim = listed ? agreed_reuse(ns, m_opt.keep_last) : -1;
    // What the record says until this save is known to be committed: every
    // node's steps less this one and the one it reuses.
    m_known = NodeSteps{};
    if (listed) {
        for (std::size_t n = 0; n < ns.committed.size(); ++n) {
            ns.committed[n].erase(ls.step);
            ns.committed[n].erase(victim);
            auto& o = ns.others[n];
            o.erase(std::remove(o.begin(), o.end(), victim), o.end());
        }
        m_known = std::move(ns);
    }
    run_phase(c, "node-local save: recycle", [&] {
        if (!m_topo.leader() || victim < 0)
            return;
        try {
            ls.recycled = recycle_files(fs::join(ls.my_dir, local_step_name(victim)), ls.staging,
                                        m_opt.redundancy.scheme);
        } catch (const std::exception&) {
            // Nothing reused: the save writes fresh files.
        }
    });
}

// The save committed `ls.step` on every node (one save_id, told apart from
// every other copy by the step being saved) and each node's retention kept
// the keep_last - 1 newest of its other step directories.
void NodeLevel::note_saved(const LocalSave& ls)
{
    if (!m_known.known || m_known.saving != ls.step)
        return;
    for (std::size_t n = 0; n < m_known.committed.size(); ++n) {
        auto& committed = m_known.committed[n];
        for (const std::int64_t s : dropped_by_retention(m_known.others[n], m_opt.keep_last))
            committed.erase(s);
        committed[ls.step] = 0; // the same on every node
    }
    m_known.saving = -1;
}

SaveResult NodeLevel::finish_save(LocalSave& ls, SavePlanner& source, const std::function<void()>& on_written,
                                  std::vector<std::string>* my_files)
{
    const Comm c(m_topo.comm);
    SaveResult result = detail::write_and_commit(*ls.session, source, on_written);
    const LocalManifest m = make_manifest(ls);
    copy_metadata_and_manifest(ls, m);
    if (m_opt.redundancy.scheme != Redundancy::Scheme::none)
        run_phase(c, "node-local save: redundancy", [&] {
            encode_redundancy(m_topo, m.layout, ls.staging);
            if (m_topo.leader() && !ls.recycled.empty())
                remove_stale_redundancy(m_topo, m.layout, ls.staging);
        });
    commit_step(ls);
    apply_retention(ls);
    if (my_files)
        *my_files = own_files(m);
    // The whole node-local save (data, metadata copies, redundancy, commit,
    // retention) as the coordinator timed it.
    result.seconds = MPI_Wtime() - ls.t0;
    MPI_Bcast(&result.seconds, 1, MPI_DOUBLE, 0, c.comm);
    return result;
}

// The manifest: every rank's files and their sizes (the same on every rank).
LocalManifest NodeLevel::make_manifest(const LocalSave& ls)
{
    const Comm c(m_topo.comm);
    const auto files_of = allgather_strings(c, run_phase(c, "node-local save: list files", [&] {
        std::vector<std::string> v;
        for (const auto& f : ls.writer->files) {
            if (!fs::exists(fs::join(ls.staging, f)))
                continue;
            v.push_back(f);
            v.push_back(std::to_string(fs::file_size(fs::join(ls.staging, f))));
        }
        return v;
    }), "node-local save: files");
    LocalManifest m;
    m.step = ls.step;
    m.save_id = bcast_u64(c, static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count()));
    m.layout.nodes = m_topo.nodes;
    m.layout.node_of_rank = m_topo.node_of_rank;
    m.layout.hosts = m_topo.hosts;
    m.layout.redundancy = m_opt.redundancy;
    for (const auto& v : files_of) {
        std::vector<SavedFile> files;
        for (std::size_t i = 0; i + 1 < v.size(); i += 2)
            files.push_back(SavedFile{v[i], static_cast<std::uint64_t>(std::stoull(v[i + 1]))});
        m.layout.files.push_back(std::move(files));
    }
    return m;
}

// The metadata file (committed by the coordinator on its node) and the
// manifest on every node; recycled data files this save did not write again
// removed.
void NodeLevel::copy_metadata_and_manifest(const LocalSave& ls, const LocalManifest& m)
{
    const Comm c(m_topo.comm);
    const std::string manifest = manifest_text(m);
    Bytes md;
    run_phase(c, "node-local save: read metadata", [&] {
        if (c.coordinator()) {
            const std::string s = read_whole_file(fs::join(ls.staging, metadata_file_name));
            md.resize(s.size());
            std::memcpy(md.data(), s.data(), s.size());
        }
    });
    bcast_bytes(c, md);
    run_phase(c, "node-local save: metadata and manifest", [&] {
        if (!m_topo.leader())
            return;
        if (!ls.recycled.empty()) {
            std::set<std::string> written;
            for (std::size_t r = 0; r < m.layout.files.size(); ++r)
                if (m.layout.node_of_rank[r] == m_topo.node)
                    for (const auto& f : m.layout.files[r])
                        written.insert(f.name);
            std::error_code ec;
            for (const auto& e : stdfs::directory_iterator(ls.staging, ec)) {
                const std::string n = e.path().filename().string();
                if (is_data_file_name(n) && !written.count(n))
                    fs::remove_all(e.path().string());
            }
        }
        if (!c.coordinator())
            fs::write_file_atomic(fs::join(ls.staging, metadata_file_name), md.data(), md.size(), ls.options.fsync);
        fs::write_file_atomic(fs::join(ls.staging, level_manifest_name), manifest.data(), manifest.size(),
                              ls.options.fsync);
    });
}

// Commit on every node: the staging directory takes the step's name (an
// older copy of the same step is exchanged, then removed).
void NodeLevel::commit_step(const LocalSave& ls)
{
    run_phase(Comm(m_topo.comm), "node-local save: commit", [&] {
        if (!m_topo.leader())
            return;
        if (ls.options.fsync)
            fs::fsync_path(ls.staging);
        if (fs::exists(ls.final_dir)) {
            if (!fs::exchange(ls.staging, ls.final_dir)) {
                const std::string old = ls.final_dir + old_suffix;
                fs::remove_all(old);
                fs::rename(ls.final_dir, old);
                fs::rename(ls.staging, ls.final_dir);
                fs::remove_all(old);
            } else {
                fs::remove_all(ls.staging); // the old copy, now under the staging name
            }
        } else {
            fs::rename(ls.staging, ls.final_dir);
        }
        if (ls.options.fsync)
            fs::fsync_path(ls.my_dir);
    });
}

// Retention on every node: the keep_last newest committed steps stay. A
// dropped step is renamed to `<name>.cairn-old` (no longer a committed step,
// and a leftover the next save's preparation removes), then removed in the
// background with the remains of a recycled step: freeing a RAM disk's pages
// costs a good part of writing them, and the caller need not wait for it.
void NodeLevel::apply_retention(const LocalSave& ls)
{
    run_phase(Comm(m_topo.comm), "node-local save: retention", [&] {
        if (!m_topo.leader())
            return;
        std::vector<std::string> doomed;
        if (!ls.recycled.empty())
            doomed.push_back(ls.recycled);
        for (const std::int64_t s : dropped_by_retention(steps_in(ls.my_dir, ls.step), m_opt.keep_last)) {
            const std::string dir = fs::join(ls.my_dir, local_step_name(s));
            if (::rename(dir.c_str(), (dir + old_suffix).c_str()) == 0) {
                doomed.push_back(dir + old_suffix);
                continue;
            }
            // Removed here (the manifest first: a removal cut short leaves
            // no committed step).
            fs::remove_all(fs::join(dir, level_manifest_name));
            fs::remove_all(dir);
        }
        const auto remove = [](const std::vector<std::string>& dirs) {
            for (const auto& d : dirs)
                fs::remove_all_noexcept(d); // what stays is a leftover for the next save
        };
        if (!doomed.empty()) {
            try {
                m_remover = std::thread(remove, doomed);
            } catch (const std::system_error&) {
                remove(doomed); // no thread to be had: removed now
            }
        }
    });
}

std::vector<std::int64_t> NodeLevel::committed_here() const
{
    std::vector<std::int64_t> out;
    const std::string dir = node_dir(m_topo.node);
    std::error_code ec;
    if (fs::is_directory(dir))
        for (const auto& e : stdfs::directory_iterator(dir, ec)) {
            std::int64_t s = 0;
            if (parse_local_step_name(e.path().filename().string(), s) && committed_dir(e.path().string()))
                out.push_back(s);
        }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<LocalStep> NodeLevel::scan()
{
    wait_for_removal();
    const Comm c(m_topo.comm);
    const Bytes mine = run_phase(c, "node-local level: scan", [&] { return scan_this_node(); });
    const auto all = gather_bytes(c, mine);
    Bytes joined;
    if (c.coordinator())
        joined = join_scans(all);
    bcast_bytes(c, joined);

    std::vector<LocalStep> out;
    Decoder dec(joined, "node-local scan");
    for (std::size_t k = dec.count(1); k > 0; --k) {
        LocalStep s;
        s.step = dec.i64();
        const std::string text = dec.str();
        s.held.resize(static_cast<std::size_t>(m_topo.nodes));
        for (auto& h : s.held)
            for (auto& p : decode_strings(dec.bytes(), "node-local scan"))
                h.insert(std::move(p));
        out.push_back(judge_step(std::move(s), text));
    }
    dec.expect_done();
    return out;
}

// Each leader: the committed steps of its node (manifest and metadata
// present), with the manifest and the relative paths held; nothing from the
// other ranks.
Bytes NodeLevel::scan_this_node() const
{
    Encoder enc;
    if (!m_topo.leader()) {
        enc.count(0);
        return enc.take();
    }
    const std::string dir = node_dir(m_topo.node);
    std::vector<std::pair<std::int64_t, std::string>> found;
    std::error_code ec;
    if (fs::is_directory(dir))
        for (const auto& e : stdfs::directory_iterator(dir, ec)) {
            std::int64_t s = 0;
            const std::string path = e.path().string();
            if (parse_local_step_name(e.path().filename().string(), s) && committed_dir(path))
                found.emplace_back(s, path);
        }
    if (ec)
        throw error::ReadError("cannot list " + dir + ": " + ec.message());
    enc.count(found.size());
    for (const auto& [s, path] : found) {
        enc.i64(s);
        enc.str(read_whole_file(fs::join(path, level_manifest_name)));
        const auto held = list_files(path);
        enc.count(held.size());
        for (const auto& h : held)
            enc.str(h);
    }
    return enc.take();
}

// The coordinator joins every rank's scan: per step (newest first), the
// newest save's manifest and each node's paths. A node's copy from another
// save of the step (a later job saved the step again on other nodes) is
// stale: it counts as none.
Bytes NodeLevel::join_scans(const std::vector<Bytes>& all) const
{
    struct Found {
        std::string manifest;
        std::uint64_t save_id = 0;
        std::vector<std::vector<std::string>> held;
        std::vector<std::uint64_t> id_of_node;
    };
    const auto save_id_of = [](const std::string& text) -> std::uint64_t {
        try {
            return nlohmann::json::parse(text).at("save_id").get<std::uint64_t>();
        } catch (...) {
            return 0;
        }
    };
    const auto nodes = static_cast<std::size_t>(m_topo.nodes);
    std::map<std::int64_t, Found, std::greater<>> steps;
    for (std::size_t r = 0; r < all.size(); ++r) {
        Decoder dec(all[r], "node-local scan");
        const auto node = static_cast<std::size_t>(m_topo.node_of_rank[r]);
        for (std::size_t k = dec.count(1); k > 0; --k) {
            auto& f = steps[dec.i64()];
            f.held.resize(nodes);
            f.id_of_node.resize(nodes);
            std::string man = dec.str();
            const std::uint64_t id = save_id_of(man);
            f.id_of_node[node] = id;
            if (f.manifest.empty() || id > f.save_id) {
                f.manifest = std::move(man);
                f.save_id = id;
            }
            for (std::size_t n = dec.count(1); n > 0; --n)
                f.held[node].push_back(dec.str());
        }
    }
    Encoder enc;
    enc.count(steps.size());
    for (auto& [s, f] : steps) {
        for (std::size_t n = 0; n < nodes; ++n)
            if (f.id_of_node[n] != f.save_id)
                f.held[n].clear();
        enc.i64(s);
        enc.str(f.manifest);
        for (const auto& h : f.held)
            enc.bytes(encode_strings(h));
    }
    return enc.take();
}

// Step `s` (its held paths filled) with its manifest parsed from `text` and
// whether it can be loaded: every data file held, or rebuilt.
LocalStep NodeLevel::judge_step(LocalStep s, const std::string& text) const
{
    try {
        s.manifest = parse_manifest(text, "of node-local step " + std::to_string(s.step));
    } catch (const Error& e) {
        s.why = e.what();
        return s;
    }
    std::set<std::string> all_held;
    for (const auto& h : s.held)
        all_held.insert(h.begin(), h.end());
    const auto& l = s.manifest.layout;
    std::set<int> lost_nodes;
    for (std::size_t r = 0; r < l.files.size(); ++r)
        for (const auto& f : l.files[r])
            if (!all_held.count(f.name))
                lost_nodes.insert(l.node_of_rank[r]);
    if (lost_nodes.empty()) {
        s.recoverable = true;
    } else if (l.redundancy.scheme == Redundancy::Scheme::none) {
        s.why = "node-local step " + std::to_string(s.step) + ": the data files of " + hosts_text(l, lost_nodes) +
                " are lost (redundancy none)";
    } else {
        std::string why;
        s.recoverable = recoverable(l, all_held, &why);
        s.needs_rebuild = s.recoverable;
        if (!s.recoverable)
            s.why = "node-local step " + std::to_string(s.step) + ": " + why;
    }
    return s;
}

LoadResult NodeLevel::load(const LocalStep& s, StateDict& state, const LoadOptions& options, RestoreReport& report)
{
    wait_for_removal();
    const Comm c(m_topo.comm);
    auto held = s.held;
    share_metadata(s, held);
    std::uint64_t moved = rebuild(s, held, report);
    const auto needs = allgather_strings(c, needed_files(s, state, options), "node-local restore: needed files");
    moved += move_needed_files(s, held, needs);
    report.bytes_moved = allreduce_sum(c, moved);

    // A normal load from every node's copy.
    LoadOptions lo = options;
    lo.layout = Layout::per_rank;
    lo.storage = std::make_shared<NodeReader>(options, step_dir(s.step));
    return cairn::load(state, fs::join(node_dir(0), local_step_name(s.step)), c.comm, lo);
}

// Nodes without step `s` get its metadata and manifest from the first node
// holding it; `held` then says so.
void NodeLevel::share_metadata(const LocalStep& s, std::vector<std::set<std::string>>& held)
{
    const Comm c(m_topo.comm);
    const std::string my_step = step_dir(s.step);
    const auto holds_step = [&](int n) {
        return held[static_cast<std::size_t>(n)].count(metadata_file_name) > 0 &&
               held[static_cast<std::size_t>(n)].count(level_manifest_name) > 0;
    };
    int holder = -1, lacking = 0;
    for (int n = 0; n < m_topo.nodes; ++n) {
        if (holds_step(n) && holder < 0)
            holder = n;
        lacking += holds_step(n) ? 0 : 1;
    }
    if (holder < 0)
        throw error::NotFound("node-local step " + std::to_string(s.step) + ": no node holds its metadata");
    if (lacking == 0)
        return;
    const int root = m_topo.first_rank[static_cast<std::size_t>(holder)];
    std::string md;
    run_phase(c, "node-local restore: read metadata", [&] {
        if (c.rank == root)
            md = read_whole_file(fs::join(my_step, metadata_file_name));
    });
    std::uint64_t size = md.size();
    MPI_Bcast(&size, 1, MPI_UINT64_T, root, c.comm);
    md.resize(static_cast<std::size_t>(size));
    MPI_Bcast(md.data(), static_cast<int>(size), MPI_BYTE, root, c.comm);
    const std::string manifest = manifest_text(s.manifest);
    run_phase(c, "node-local restore: metadata to nodes without the step", [&] {
        if (!m_topo.leader() || holds_step(m_topo.node))
            return;
        fs::remove_all(my_step); // a stale copy of another save of the step, if any
        fs::create_directories(my_step);
        fs::write_file_atomic(fs::join(my_step, metadata_file_name), md.data(), md.size(), false);
        fs::write_file_atomic(fs::join(my_step, level_manifest_name), manifest.data(), manifest.size(), false);
    });
    for (auto& h : held) {
        h.insert(metadata_file_name);
        h.insert(level_manifest_name);
    }
}

// Lost files rebuilt from partner copies or parity; `held` and `report`
// then say where. Returns the bytes this rank sent.
std::uint64_t NodeLevel::rebuild(const LocalStep& s, std::vector<std::set<std::string>>& held,
                                 RestoreReport& report)
{
    report.rebuilt.clear();
    if (!s.needs_rebuild)
        return 0;
    std::uint64_t sent = 0;
    const auto rebuilt = run_phase(Comm(m_topo.comm), "node-local restore: rebuild", [&] {
        return rebuild_lost_files(m_topo, s.manifest.layout, held, step_dir(s.step), &sent);
    });
    for (const auto& [file, node] : rebuilt) {
        report.rebuilt.push_back(file);
        held[static_cast<std::size_t>(node)].insert(file);
    }
    return sent;
}

// The data files this rank's load of `s` needs, from its planner (every
// file when the plan does not fit the metadata: the load reports why).
std::vector<std::string> NodeLevel::needed_files(const LocalStep& s, StateDict& state, const LoadOptions& options)
{
    const Comm c(m_topo.comm);
    return run_phase(c, "node-local restore: plan", [&] {
        std::set<std::string> files;
        bool all_files = false;
        try {
            const Metadata md = cairn::read_metadata(step_dir(s.step));
            std::shared_ptr<LoadPlanner> planner =
                options.planner ? options.planner
                                : std::make_shared<DefaultLoadPlanner>(options.partial, options.may_be_missing);
            planner->set_up_planner(state, md, c.coordinator());
            const LoadPlan plan = planner->create_local_plan();
            for (const auto& item : plan.items) {
                const auto e = md.entries.find(item.fqn);
                if (e == md.entries.end() || item.chunk >= e->second.chunks.size()) {
                    all_files = true;
                    break;
                }
                const auto& st = e->second.chunks[item.chunk].storage;
                if (st.length > 0)
                    files.insert(st.path);
            }
        } catch (const Error&) {
            all_files = true; // the load itself reports what does not fit
        }
        if (all_files)
            for (const auto& fl : s.manifest.layout.files)
                for (const auto& f : fl)
                    files.insert(f.name);
        return std::vector<std::string>(files.begin(), files.end());
    });
}

// The files a node's ranks need (`needs`, per rank) and it lacks, sent by
// the first node holding them. Returns the bytes this rank sent.
std::uint64_t NodeLevel::move_needed_files(const LocalStep& s, const std::vector<std::set<std::string>>& held,
                                           const std::vector<std::vector<std::string>>& needs)
{
    struct Transfer {
        std::string file;
        int from, to;
    };
    std::vector<Transfer> transfers;
    std::vector<std::set<std::string>> node_needs(static_cast<std::size_t>(m_topo.nodes));
    for (std::size_t r = 0; r < needs.size(); ++r)
        node_needs[static_cast<std::size_t>(m_topo.node_of_rank[r])].insert(needs[r].begin(), needs[r].end());
    for (int d = 0; d < m_topo.nodes; ++d)
        for (const auto& f : node_needs[static_cast<std::size_t>(d)]) {
            if (held[static_cast<std::size_t>(d)].count(f))
                continue;
            int from = -1;
            for (int n = 0; n < m_topo.nodes && from < 0; ++n)
                if (held[static_cast<std::size_t>(n)].count(f))
                    from = n;
            if (from < 0)
                throw error::ReadError("node-local step " + std::to_string(s.step) + ": no node holds " + f);
            transfers.push_back(Transfer{f, from, d});
        }
    if (transfers.empty())
        return 0;
    const std::string my_step = step_dir(s.step);
    std::uint64_t sent = 0;
    std::string failed;
    if (m_topo.leader())
        for (const auto& t : transfers) {
            std::string err;
            if (t.from == m_topo.node)
                sent += send_file(m_topo.leaders, t.to, fs::join(my_step, t.file), err);
            else if (t.to == m_topo.node)
                receive_file(m_topo.leaders, t.from, fs::join(my_step, t.file), err);
            if (!err.empty() && failed.empty())
                failed = err;
        }
    run_phase(Comm(m_topo.comm), "node-local restore: move files between nodes", [&] {
        if (!failed.empty())
            throw error::ReadError("node-local step " + std::to_string(s.step) + ": " + failed);
    });
    return sent;
}

} // namespace cairn::detail
