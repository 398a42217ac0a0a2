// cairn_check_root: inspects a CheckpointManager root after a crash, for
// kill_test.py. Runs on one process (MPI_COMM_SELF).
//
//   cairn_check_root ROOT [--remove-leftovers]
//
// Prints one line per finding:
//   latest <name>|none              what CheckpointManager::latest() picks
//   pointer <name>|none             what LATEST holds (it must name a committed checkpoint)
//   committed <name> <hash>         every complete checkpoint, with a hash of all its bytes
//   leftover <name> <reason>        what find_leftovers() reports
//   removed <name>                  with --remove-leftovers
//   BAD <what>                      a violation; the exit status is then 1
// Everything in ROOT must be a complete checkpoint, LATEST, the levels record
// or a leftover.
#include <cairn/manager.hpp>

#include <mpi.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace stdfs = std::filesystem;

namespace {

int g_status = 0;

void bad(const std::string& what)
{
    std::printf("BAD %s\n", what.c_str());
    g_status = 1;
}

// FNV-1a over the names and bytes of a file or of a directory's files,
// except the leftovers listed in `skip` (MPI-IO lock-test files that a load
// killed while opening a data file leaves inside a committed checkpoint).
std::uint64_t hash_path(const stdfs::path& p, const std::set<std::string>& skip)
{
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](const char* d, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            h ^= static_cast<unsigned char>(d[i]);
            h *= 1099511628211ull;
        }
    };
    std::vector<stdfs::path> files;
    if (stdfs::is_directory(p)) {
        for (const auto& e : stdfs::directory_iterator(p))
            if (!skip.count(e.path().string()))
                files.push_back(e.path());
        std::sort(files.begin(), files.end());
    } else {
        files.push_back(p);
    }
    std::vector<char> buf(1 << 20);
    for (const auto& f : files) {
        const auto name = f.filename().string();
        mix(name.data(), name.size() + 1);
        std::ifstream in(f, std::ios::binary);
        while (in) {
            in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
            mix(buf.data(), static_cast<std::size_t>(in.gcount()));
        }
    }
    return h;
}

std::string name_of_step(const std::string& root, std::int64_t step)
{
    char buf[40];
    std::snprintf(buf, sizeof buf, "step_%08" PRId64, step);
    const std::string dir = buf;
    if (stdfs::is_directory(stdfs::path(root) / dir))
        return dir;
    return dir + ".h5";
}

// Checks ROOT; returns the hashes of the complete checkpoints.
std::map<std::string, std::uint64_t> check(cairn::CheckpointManager& m, bool print)
{
    const std::string& root = m.root();
    const auto leftovers = m.find_leftovers();
    std::set<std::string> leftover_paths;
    for (const auto& l : leftovers)
        leftover_paths.insert(l.path);
    std::map<std::string, std::uint64_t> committed;
    for (const auto s : m.steps()) {
        const auto name = name_of_step(root, s);
        committed[name] = hash_path(stdfs::path(root) / name, leftover_paths);
        if (print)
            std::printf("committed %s %016" PRIx64 "\n", name.c_str(), committed[name]);
    }
    const auto latest = m.latest();
    const std::string latest_name = latest ? name_of_step(root, *latest) : "none";
    if (print)
        std::printf("latest %s\n", latest_name.c_str());
    if (!committed.empty() && (latest_name != committed.rbegin()->first))
        bad("latest() is " + latest_name + ", the newest committed checkpoint is " + committed.rbegin()->first);

    std::string pointer = "none";
    if (stdfs::exists(stdfs::path(root) / "LATEST")) {
        std::ifstream in(stdfs::path(root) / "LATEST", std::ios::binary);
        std::getline(in, pointer);
        if (!committed.count(pointer))
            bad("LATEST holds '" + pointer + "', which is not a committed checkpoint");
    }
    if (print)
        std::printf("pointer %s\n", pointer.c_str());

    // The levels record of a manager with a node-local level, and the
    // temporary name it is written under (docs/FORMAT.md section 6.1).
    std::set<std::string> known{"LATEST", ".cairn-levels", ".cairn-levels.cairn-tmp"};
    for (const auto& [n, h] : committed)
        known.insert(n);
    for (const auto& l : leftovers) {
        if (committed.count(stdfs::path(l.path).parent_path().filename().string()))
            continue; // inside a committed checkpoint: not a root entry
        const auto n = stdfs::path(l.path).filename().string();
        known.insert(n);
        if (committed.count(n))
            bad("find_leftovers() lists the committed checkpoint " + n);
        if (print)
            std::printf("leftover %s %s\n", n.c_str(), l.reason.c_str());
    }
    if (stdfs::exists(root))
        for (const auto& e : stdfs::directory_iterator(root)) {
            const auto n = e.path().filename().string();
            if (!known.count(n))
                bad("'" + n + "' is neither a complete checkpoint, nor LATEST, nor a recognised leftover");
        }
    return committed;
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2 || argc > 3 || (argc == 3 && std::string(argv[2]) != "--remove-leftovers")) {
        std::fprintf(stderr, "usage: cairn_check_root ROOT [--remove-leftovers]\n");
        MPI_Finalize();
        return 2;
    }
    try {
        cairn::CheckpointManager m(argv[1], MPI_COMM_SELF);
        const auto before = check(m, true);
        if (argc == 3) {
            for (const auto& l : m.remove_leftovers())
                std::printf("removed %s\n", stdfs::path(l.path).filename().string().c_str());
            const auto after = check(m, false);
            for (const auto& [name, h] : before)
                if (!after.count(name) || after.at(name) != h)
                    bad("removing the leftovers changed or removed the committed checkpoint " + name);
            if (!m.find_leftovers().empty())
                bad("leftovers remain after remove_leftovers()");
        }
    } catch (const std::exception& e) {
        bad(std::string("exception: ") + e.what());
    }
    std::fflush(stdout);
    MPI_Finalize();
    return g_status;
}
