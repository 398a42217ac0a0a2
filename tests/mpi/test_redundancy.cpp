// Redundancy of node-local steps (src/levels/redundancy.hpp): data files
// written into the step directories of fake nodes of this host, encoded with
// partner copies or XOR parity, a node's directory wiped, the lost files
// rebuilt (also by a job of another shape) and compared byte for byte; in
// /dev/shm too (a RAM disk: files received into kept mappings).
#include "common.hpp"

#include "levels/redundancy.hpp"
#include "levels/topology.hpp"
#include "storage/per_rank/mapped_files.hpp"

#include <cairn/testing.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

using namespace cairn_test;
using cairn::Redundancy;
namespace cd = cairn::detail;
namespace stdfs = std::filesystem;

namespace {

/// Byte i of data file `file` of saved rank `rank`.
char byte_of(int rank, int file, std::uint64_t i)
{
    std::uint64_t x = (static_cast<std::uint64_t>(rank) * 1000003u + static_cast<std::uint64_t>(file) * 7919u + 1) *
                          0x9E3779B97F4A7C15ull ^
                      (i / 8) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return static_cast<char>(x >> (8 * (i % 8)));
}

std::vector<char> content(int rank, int file, std::uint64_t bytes)
{
    std::vector<char> v(static_cast<std::size_t>(bytes));
    for (std::uint64_t i = 0; i < bytes; ++i)
        v[static_cast<std::size_t>(i)] = byte_of(rank, file, i);
    return v;
}

/// Data files of `ranks` saved ranks, uneven: rank 0's spans several
/// messages (more than 4 MiB), rank 1 has two files, the second empty, the
/// others random sizes.
std::vector<std::vector<cd::SavedFile>> make_files(int ranks, unsigned seed)
{
    std::mt19937 gen(seed);
    std::uniform_int_distribution<std::uint64_t> small(1, 300000);
    std::vector<std::vector<cd::SavedFile>> files(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        const int count = r == 1 ? 2 : 1;
        for (int k = 0; k < count; ++k) {
            std::uint64_t bytes = small(gen);
            if (r == 0)
                bytes += std::uint64_t{9} << 20;
            if (r == 1 && k == 1)
                bytes = 0;
            files[static_cast<std::size_t>(r)].push_back(
                {"__" + std::to_string(r) + "_" + std::to_string(k) + ".distcp", bytes});
        }
    }
    return files;
}

std::string node_dir(const std::string& base, int node) { return base + "/node" + std::to_string(node) + "/step"; }

cd::SavedLayout layout_of(const cd::Topology& topo, std::vector<std::vector<cd::SavedFile>> files, Redundancy red)
{
    cd::SavedLayout l;
    l.nodes = topo.nodes;
    l.node_of_rank = topo.node_of_rank;
    l.files = std::move(files);
    l.hosts = topo.hosts;
    l.redundancy = red;
    return l;
}

void write_file(const std::string& path, const std::vector<char>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
        throw std::runtime_error("cannot write " + path);
}

std::vector<char> read_file(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// This rank writes its data files into its node's step directory.
void write_own(const cd::Topology& topo, const std::string& base, const cd::SavedLayout& layout)
{
    const std::string dir = node_dir(base, topo.node);
    stdfs::create_directories(dir);
    const auto& files = layout.files[static_cast<std::size_t>(topo.rank)];
    for (std::size_t k = 0; k < files.size(); ++k)
        write_file(dir + "/" + files[k].name, content(topo.rank, static_cast<int>(k), files[k].bytes));
}

/// What the step directories of nodes 0 .. nodes-1 hold (relative paths).
std::vector<std::set<std::string>> held_by(const std::string& base, int nodes)
{
    std::vector<std::set<std::string>> held(static_cast<std::size_t>(nodes));
    for (int n = 0; n < nodes; ++n) {
        const std::string dir = node_dir(base, n);
        if (!stdfs::exists(dir))
            continue;
        for (const auto& e : stdfs::recursive_directory_iterator(dir))
            if (e.is_regular_file())
                held[static_cast<std::size_t>(n)].insert(stdfs::relative(e.path(), dir).generic_string());
    }
    return held;
}

std::set<std::string> union_of(const std::vector<std::set<std::string>>& held)
{
    std::set<std::string> all;
    for (const auto& h : held)
        all.insert(h.begin(), h.end());
    return all;
}

/// Rank 0 of `comm` empties the step directories of `nodes`.
void wipe(MPI_Comm comm, const std::string& base, const std::vector<int>& nodes)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Barrier(comm);
    if (rank == 0)
        for (int n : nodes) {
            stdfs::remove_all(node_dir(base, n));
            stdfs::create_directories(node_dir(base, n));
        }
    MPI_Barrier(comm);
}

/// Every data file of `layout` is in node `where[name]`'s directory (rebuilt
/// ones) or its saved node's, with its original bytes; no temporary file is
/// left in the directories of the `nodes` current nodes.
bool originals_back(const std::string& base, int nodes, const cd::SavedLayout& layout,
                    const std::map<std::string, int>& where)
{
    bool ok = true;
    for (std::size_t r = 0; r < layout.files.size(); ++r)
        for (std::size_t k = 0; k < layout.files[r].size(); ++k) {
            const auto& f = layout.files[r][k];
            const auto it = where.find(f.name);
            const int n = it != where.end() ? it->second : layout.node_of_rank[r];
            const auto got = read_file(node_dir(base, n) + "/" + f.name);
            if (got != content(static_cast<int>(r), static_cast<int>(k), f.bytes) ||
                !stdfs::exists(node_dir(base, n) + "/" + f.name)) {
                UNSCOPED_INFO(f.name << " on node " << n << ": " << got.size() << " bytes, not the original "
                                     << f.bytes);
                ok = false;
            }
        }
    for (const auto& h : held_by(base, nodes))
        for (const auto& name : h)
            if (name.find(".cairn-rebuild") != std::string::npos) {
                UNSCOPED_INFO("temporary file left: " << name);
                ok = false;
            }
    return ok;
}

/// The lost files: those of the saved ranks of `wiped` nodes.
std::set<std::string> files_of_nodes(const cd::SavedLayout& layout, const std::vector<int>& wiped)
{
    std::set<std::string> out;
    for (std::size_t r = 0; r < layout.files.size(); ++r)
        if (std::find(wiped.begin(), wiped.end(), layout.node_of_rank[r]) != wiped.end())
            for (const auto& f : layout.files[r])
                out.insert(f.name);
    return out;
}

/// Saves on `comm` with `ranks_per_node`, encodes, wipes `wiped`, rebuilds on
/// the first `rebuild_ranks` ranks (0: all) grouped `rebuild_per_node` to a
/// node, and checks every byte. True on every rank of `comm` when all is well.
bool round_trip(MPI_Comm comm, const std::string& base, int ranks_per_node, Redundancy red,
                const std::vector<int>& wiped, int rebuild_ranks = 0, int rebuild_per_node = 0)
{
    cd::Topology topo(comm, ranks_per_node);
    const auto layout = layout_of(topo, make_files(topo.size, 17), red);
    write_own(topo, base, layout);
    MPI_Barrier(comm);
    const auto counts = cd::encode_redundancy(topo, layout, node_dir(base, topo.node));
    MPI_Barrier(comm); // the receivers' files are complete
    bool ok = counts.bytes_sent > 0 || red.scheme == Redundancy::Scheme::none;
    // Partner copies are byte for byte the next node's files.
    if (red.scheme == Redundancy::Scheme::partner)
        for (std::size_t k = 0; k < layout.files[static_cast<std::size_t>(topo.rank)].size(); ++k) {
            const auto& f = layout.files[static_cast<std::size_t>(topo.rank)][k];
            const int next = (topo.node + 1) % topo.nodes;
            if (read_file(node_dir(base, next) + "/partner/" + f.name) != content(topo.rank, static_cast<int>(k), f.bytes)) {
                UNSCOPED_INFO("partner copy of " << f.name << " on node " << next << " differs");
                ok = false;
            }
        }
    if (red.scheme == Redundancy::Scheme::xor_parity) {
        const auto sets = cd::xor_sets(layout);
        for (std::size_t si = 0; si < sets.size(); ++si)
            for (std::size_t j = 0; j < sets[si].members.size(); ++j)
                if (sets[si].members[j] == topo.rank) {
                    const std::string p =
                        node_dir(base, topo.node) + "/xor/" + std::to_string(si) + "." + std::to_string(j) + ".xor";
                    if (!stdfs::exists(p) || stdfs::file_size(p) != sets[si].piece) {
                        UNSCOPED_INFO("parity piece " << p << " missing or not " << sets[si].piece << " bytes");
                        ok = false;
                    }
                }
    }
    wipe(comm, base, wiped);
    const int nr = rebuild_ranks > 0 ? rebuild_ranks : topo.size;
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(comm, topo.rank < nr ? 0 : MPI_UNDEFINED, topo.rank, &sub);
    if (sub != MPI_COMM_NULL) {
        try {
            cd::Topology now(sub, rebuild_per_node > 0 ? rebuild_per_node : ranks_per_node);
            const auto held = held_by(base, now.nodes);
            MPI_Barrier(sub); // every rank lists the directories before any rebuilds
            std::string why;
            if (!cd::recoverable(layout, union_of(held), &why)) {
                UNSCOPED_INFO("not recoverable: " << why);
                ok = false;
            }
            std::uint64_t moved = 0;
            const auto where = cd::rebuild_lost_files(now, layout, held, node_dir(base, now.node), &moved);
            MPI_Barrier(sub);
            std::set<std::string> keys;
            for (const auto& [name, node] : where) {
                keys.insert(name);
                if (node < 0 || node >= now.nodes)
                    ok = false;
            }
            if (keys != files_of_nodes(layout, wiped)) {
                UNSCOPED_INFO("rebuilt " << keys.size() << " files, lost " << files_of_nodes(layout, wiped).size());
                ok = false;
            }
            ok = originals_back(base, now.nodes, layout, where) && ok;
            // Everything is there again.
            ok = cd::recoverable(layout, union_of(held_by(base, now.nodes)), nullptr) && ok;
        } catch (const std::exception& e) {
            UNSCOPED_INFO("rank " << topo.rank << ": " << e.what());
            ok = false;
        }
        MPI_Comm_free(&sub);
    }
    return all(ok, comm);
}

cd::SavedLayout pure_layout(const std::vector<int>& ranks_on_node, Redundancy red)
{
    cd::SavedLayout l;
    l.nodes = static_cast<int>(ranks_on_node.size());
    for (int n = 0; n < l.nodes; ++n)
        for (int i = 0; i < ranks_on_node[static_cast<std::size_t>(n)]; ++i)
            l.node_of_rank.push_back(n);
    l.files = make_files(static_cast<int>(l.node_of_rank.size()), 3);
    for (int n = 0; n < l.nodes; ++n)
        l.hosts.push_back(std::string(1, static_cast<char>('a' + n)));
    l.redundancy = red;
    return l;
}

std::set<std::string> all_files(const cd::SavedLayout& l)
{
    std::set<std::string> out;
    for (const auto& fs : l.files)
        for (const auto& f : fs)
            out.insert(f.name);
    return out;
}

} // namespace

TEST_CASE("xor_sets: groups, the remainder, uneven nodes", "[redundancy]")
{
    // 5 nodes in groups of 2: {0,1} and {2,3,4} (a remainder of 1 joins the last group).
    {
        const auto l = pure_layout({1, 1, 1, 1, 1}, Redundancy::xor_parity(2));
        const auto sets = cd::xor_sets(l);
        REQUIRE(sets.size() == 2);
        CHECK(sets[0].members == std::vector<int>{0, 1});
        CHECK(sets[1].members == std::vector<int>{2, 3, 4});
        std::uint64_t largest = 0;
        for (int r : sets[1].members)
            largest = std::max(largest, l.files[static_cast<std::size_t>(r)][0].bytes);
        CHECK(sets[1].piece == (largest + 1) / 2);
    }
    // 7 nodes in groups of 3: {0,1,2}, {3,4,5,6}; 8 in groups of 3: {0,1,2}, {3,4,5}, {6,7}.
    CHECK(cd::xor_sets(pure_layout({1, 1, 1, 1, 1, 1, 1}, Redundancy::xor_parity(3))).size() == 2);
    {
        const auto sets = cd::xor_sets(pure_layout({1, 1, 1, 1, 1, 1, 1, 1}, Redundancy::xor_parity(3)));
        REQUIRE(sets.size() == 3);
        CHECK(sets[2].members == std::vector<int>{6, 7});
    }
    // Nodes of 2, 1 and 3 ranks: set l takes local rank l % (ranks on the
    // node) of each node, so every rank is in a set spanning 3 nodes.
    {
        const auto l = pure_layout({2, 1, 3}, Redundancy::xor_parity(4));
        const auto sets = cd::xor_sets(l);
        REQUIRE(sets.size() == 3);
        CHECK(sets[0].members == std::vector<int>{0, 2, 3});
        CHECK(sets[1].members == std::vector<int>{1, 2, 4});
        CHECK(sets[2].members == std::vector<int>{0, 2, 5});
        std::set<int> covered;
        for (const auto& s : sets) {
            std::set<int> nodes;
            for (int r : s.members) {
                covered.insert(r);
                nodes.insert(l.node_of_rank[static_cast<std::size_t>(r)]);
            }
            CHECK(nodes.size() == s.members.size());
        }
        CHECK(covered.size() == l.node_of_rank.size());
    }
    CHECK_THROWS_AS(cd::xor_sets(pure_layout({2}, Redundancy::xor_parity(2))), cairn::error::WrongAPIUsage);
    CHECK_THROWS_WITH(cd::xor_sets(pure_layout({1}, Redundancy::xor_parity(2))), Catch::Contains("1 node"));
    CHECK_THROWS_AS(cd::xor_sets(pure_layout({1, 1}, Redundancy::xor_parity(1))), cairn::error::WrongAPIUsage);
}

TEST_CASE("recoverable: which losses each scheme covers, and the message", "[redundancy]")
{
    // XOR, one group of 4 nodes: one node's data may go, two may not.
    {
        const auto l = pure_layout({1, 1, 1, 1}, Redundancy::xor_parity(4));
        auto avail = all_files(l);
        for (int j = 0; j < 4; ++j)
            avail.insert("xor/0." + std::to_string(j) + ".xor");
        std::string why;
        CHECK(cd::recoverable(l, avail, &why));
        auto one = avail;
        one.erase("__1_0.distcp");
        one.erase("__1_1.distcp");
        one.erase("xor/0.1.xor");
        CHECK(cd::recoverable(l, one, &why));
        auto two = one;
        two.erase("__2_0.distcp");
        two.erase("xor/0.2.xor");
        CHECK_FALSE(cd::recoverable(l, two, &why));
        CHECK_THAT(why, Catch::Contains("2 nodes of XOR group 0 lost: node 1 (host b), node 2 (host c)"));
        // One node lost, but a parity piece its data needs is gone too.
        auto parity = one;
        parity.erase("xor/0.0.xor");
        CHECK_FALSE(cd::recoverable(l, parity, &why));
        CHECK_THAT(why, Catch::Contains("node 1 (host b)"));
    }
    // Partner over 3 nodes: node 1's copies are on node 2.
    {
        const auto l = pure_layout({1, 1, 1}, Redundancy::partner());
        auto avail = all_files(l);
        for (const auto& f : all_files(l))
            avail.insert("partner/" + f);
        avail.erase("__1_0.distcp");
        avail.erase("__1_1.distcp");
        avail.erase("partner/__0_0.distcp");
        std::string why;
        CHECK(cd::recoverable(l, avail, &why));
        avail.erase("partner/__1_0.distcp");
        CHECK_FALSE(cd::recoverable(l, avail, &why));
        CHECK_THAT(why, Catch::Contains("node 1 (host b)") && Catch::Contains("node 2 (host c)") &&
                            Catch::Contains("__1_0.distcp"));
    }
    // No redundancy: any loss is final.
    {
        const auto l = pure_layout({1, 1}, Redundancy::none());
        auto avail = all_files(l);
        avail.erase("__0_0.distcp");
        std::string why;
        CHECK_FALSE(cd::recoverable(l, avail, &why));
        CHECK_THAT(why, Catch::Contains("node 0 (host a)"));
    }
}

TEST_CASE("partner and XOR need at least 2 nodes", "[redundancy]")
{
    for (const auto red : {Redundancy::partner(), Redundancy::xor_parity(2)}) {
        const std::string base = fresh_dir("redundancy-one-node");
        bool thrown = false;
        std::string what;
        {
            cd::Topology topo(MPI_COMM_WORLD, world_size()); // every rank on one node
            const auto layout = layout_of(topo, make_files(topo.size, 5), red);
            write_own(topo, base, layout);
            try {
                cd::encode_redundancy(topo, layout, node_dir(base, topo.node));
            } catch (const cairn::error::WrongAPIUsage& e) {
                thrown = true;
                what = e.what();
            }
        }
        INFO(what);
        CHECK(all(thrown && what.find("1 node") != std::string::npos));
    }
}

TEST_CASE("partner: a wiped node's files come back from the next node", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("partner needs 2 fake nodes");
        return;
    }
    // One rank per node, every node wiped in turn.
    for (int w = 0; w < world_size(); ++w) {
        const std::string base = fresh_dir("redundancy-partner");
        CHECK(round_trip(MPI_COMM_WORLD, base, 1, Redundancy::partner(), {w}));
    }
    // Nodes of 2 ranks (the last of 1 at 3 ranks): receivers spread over the next node.
    if (world_size() >= 3) {
        const std::string base = fresh_dir("redundancy-partner-2");
        CHECK(round_trip(MPI_COMM_WORLD, base, 2, Redundancy::partner(), {0}));
        const std::string base2 = fresh_dir("redundancy-partner-2b");
        CHECK(round_trip(MPI_COMM_WORLD, base2, 2, Redundancy::partner(), {1}));
    }
}

TEST_CASE("XOR: any one wiped node of a group is rebuilt byte for byte", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("XOR needs 2 fake nodes");
        return;
    }
    for (int k : {2, 3, 4})
        for (int w = 0; w < world_size(); ++w) {
            INFO("groups of " << k << ", node " << w << " wiped");
            const std::string base = fresh_dir("redundancy-xor");
            CHECK(round_trip(MPI_COMM_WORLD, base, 1, Redundancy::xor_parity(k), {w}));
        }
    // Two ranks per node; at 3 ranks nodes of 2 and 1 rank (the lone rank is
    // in both sets).
    if (world_size() >= 3)
        for (int w = 0; w < 2; ++w) {
            INFO("2 ranks per node, node " << w << " wiped");
            const std::string base = fresh_dir("redundancy-xor-2");
            CHECK(round_trip(MPI_COMM_WORLD, base, 2, Redundancy::xor_parity(2), {w}));
        }
    // One node lost in each of two groups.
    if (world_size() == 4) {
        const std::string base = fresh_dir("redundancy-xor-groups");
        CHECK(round_trip(MPI_COMM_WORLD, base, 1, Redundancy::xor_parity(2), {0, 3}));
    }
}

TEST_CASE("XOR: two lost nodes of one group are named, and nothing is rebuilt", "[redundancy]")
{
    if (world_size() < 3) {
        SUCCEED("needs 3 fake nodes");
        return;
    }
    const std::string base = fresh_dir("redundancy-xor-two");
    cd::Topology topo(MPI_COMM_WORLD, 1);
    const auto layout = layout_of(topo, make_files(topo.size, 9), Redundancy::xor_parity(4));
    write_own(topo, base, layout);
    MPI_Barrier(MPI_COMM_WORLD);
    cd::encode_redundancy(topo, layout, node_dir(base, topo.node));
    wipe(MPI_COMM_WORLD, base, {1, 2});
    const auto held = held_by(base, topo.nodes);
    MPI_Barrier(MPI_COMM_WORLD);
    std::string why;
    const bool ok = cd::recoverable(layout, union_of(held), &why);
    INFO(why);
    CHECK(all(!ok && why.find("2 nodes of XOR group 0 lost: node 1 (host ") != std::string::npos &&
              why.find(", node 2 (host ") != std::string::npos));
    std::string what;
    try {
        cd::rebuild_lost_files(topo, layout, held, node_dir(base, topo.node), nullptr);
    } catch (const cairn::error::NotFound& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(all(what.find("node 1") != std::string::npos && what.find("node 2") != std::string::npos));
    CHECK(all(held_by(base, topo.nodes)[1].empty()));
}

TEST_CASE("rebuild by a job of another shape: saved on 4 nodes, rebuilt on 3", "[redundancy]")
{
    if (world_size() < 4) {
        SUCCEED("needs 4 fake nodes");
        return;
    }
    // Node 3 lost; the job restarts on 3 nodes of 1 rank.
    for (const auto red : {Redundancy::xor_parity(4), Redundancy::partner()}) {
        INFO(red.str());
        const std::string base = fresh_dir("redundancy-shape");
        CHECK(round_trip(MPI_COMM_WORLD, base, 1, red, {3}, 3, 1));
    }
    // Saved on 2 nodes of 2 ranks, node 0 lost, rebuilt by 4 ranks on 4
    // nodes (node 0's directory empty, nodes 2 and 3 new and empty).
    for (const auto red : {Redundancy::xor_parity(2), Redundancy::partner()}) {
        INFO(red.str());
        const std::string base = fresh_dir("redundancy-shape-2");
        CHECK(round_trip(MPI_COMM_WORLD, base, 2, red, {0}, 4, 1));
    }
}

TEST_CASE("a rank that cannot read its data file fails alone, naming it, and hangs no one", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("needs 2 fake nodes");
        return;
    }
    for (const auto red : {Redundancy::partner(), Redundancy::xor_parity(4)}) {
        INFO(red.str());
        const std::string base = fresh_dir("redundancy-unreadable");
        cd::Topology topo(MPI_COMM_WORLD, 1);
        const auto layout = layout_of(topo, make_files(topo.size, 23), red);
        write_own(topo, base, layout);
        if (topo.rank == 0)
            stdfs::remove(node_dir(base, 0) + "/__0_0.distcp");
        MPI_Barrier(MPI_COMM_WORLD);
        std::string what;
        try {
            cd::encode_redundancy(topo, layout, node_dir(base, topo.node));
        } catch (const cairn::error::ReadError& e) {
            what = e.what();
        }
        INFO(what);
        // Rank 0 names its file; the others returned (they got zeros from it).
        CHECK(all(topo.rank == 0 ? what.find("__0_0.distcp") != std::string::npos : what.empty()));
    }
}

/// A fresh directory for one test in /dev/shm, where that is a RAM disk (the
/// encoders receive into kept mappings of their files there), else "".
/// Each rank's own where ranks run on hosts of their own. Collective;
/// remove it with remove_ram_dir().
std::string ram_dir(const std::string& name)
{
    return cd::is_ram_disk("/dev/shm") ? fresh_shm_dir(name, true) : std::string();
}

/// Removes a directory of ram_dir() and frees its files' pages (their kept
/// mappings unmapped). Collective.
void remove_ram_dir(const std::string& dir)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0)
        stdfs::remove_all(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    cd::unmap_removed_files();
}

/// Encodes an older step (other sizes, some files longer, some shorter, and
/// other bytes) in `base`, then a new step over its redundancy files
/// (round_trip: copies and parity of its own bytes, every lost byte rebuilt
/// from them); with `twice`, the new step is first encoded over the older
/// files without a loss, then once more over its own (files of the same
/// sizes). Checks that the older files were written over in place. True on
/// every rank.
bool reused_round_trip(const std::string& base, Redundancy red, bool twice)
{
    cd::Topology topo(MPI_COMM_WORLD, 1);
    const auto older = layout_of(topo, make_files(topo.size, 5), red);
    const std::string dir = node_dir(base, topo.node);
    stdfs::create_directories(dir);
    const auto& mine = older.files[static_cast<std::size_t>(topo.rank)];
    for (std::size_t k = 0; k < mine.size(); ++k)
        write_file(dir + "/" + mine[k].name, content(topo.rank + 50, static_cast<int>(k), mine[k].bytes));
    MPI_Barrier(MPI_COMM_WORLD);
    cd::encode_redundancy(topo, older, dir);
    MPI_Barrier(MPI_COMM_WORLD);
    // Its redundancy files (partner/, xor/), to be written over in place.
    std::map<std::string, std::uint64_t> inodes;
    for (const auto& e : stdfs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && e.path().parent_path() != stdfs::path(dir)) {
            struct stat st {};
            if (::stat(e.path().c_str(), &st) == 0)
                inodes[e.path().string()] = static_cast<std::uint64_t>(st.st_ino);
        }
    bool ok = !inodes.empty();
    if (twice)
        ok = round_trip(MPI_COMM_WORLD, base, 1, red, {}) && ok;
    ok = round_trip(MPI_COMM_WORLD, base, 1, red, {topo.size - 1}) && ok;
    for (const auto& [path, ino] : inodes) {
        struct stat st {};
        if (path.find("/node" + std::to_string(topo.size - 1) + "/") == std::string::npos &&
            ::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_ino) != ino) {
            UNSCOPED_INFO(path << " is a new file, not the older one written over");
            ok = false;
        }
    }
    return all(ok);
}

TEST_CASE("encode writes over an older step's redundancy files in place", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("needs 2 fake nodes");
        return;
    }
    for (const auto red : {Redundancy::partner(), Redundancy::xor_parity(3)}) {
        INFO(red.str());
        CHECK(reused_round_trip(fresh_dir("redundancy-reused"), red, false));
    }
}

TEST_CASE("on a RAM disk, encode receives into kept mappings of its files, of any older size", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("needs 2 fake nodes");
        return;
    }
    for (const auto red : {Redundancy::partner(), Redundancy::xor_parity(2), Redundancy::xor_parity(3)}) {
        INFO(red.str());
        // A round trip reads every fake node's files: in a RAM disk that
        // every rank sees, else (ranks on hosts of their own) through
        // write(2) in the shared test directory.
        std::string base = shared_ram_dir("redundancy-mapped");
        if (base.empty())
            base = fresh_dir("redundancy-mapped");
        // The second encode of the new step writes over files of its own
        // sizes: their mappings kept from the first.
        CHECK(reused_round_trip(base, red, true));
        remove_ram_dir(base);
    }
}

TEST_CASE("on a RAM disk, encode reads the data files through kept mappings", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("needs 2 fake nodes");
        return;
    }
    for (const auto red : {Redundancy::partner(), Redundancy::xor_parity(2)}) {
        INFO(red.str());
        const std::string base = shared_ram_dir("redundancy-sent-mapped");
        if (base.empty()) {
            SUCCEED("no RAM disk that every rank sees");
            return;
        }
        cd::Topology topo(MPI_COMM_WORLD, 1);
        // The files of round_trip's layout, with other bytes.
        const auto layout = layout_of(topo, make_files(topo.size, 17), red);
        const std::string dir = node_dir(base, topo.node);
        stdfs::create_directories(dir);
        const auto& files = layout.files[static_cast<std::size_t>(topo.rank)];
        for (std::size_t k = 0; k < files.size(); ++k)
            write_file(dir + "/" + files[k].name, content(topo.rank + 50, static_cast<int>(k), files[k].bytes));
        MPI_Barrier(MPI_COMM_WORLD);
        cd::encode_redundancy(topo, layout, dir);
        // Each non-empty data file of this rank is now mapped and kept, with its bytes.
        bool ok = true;
        for (std::size_t k = 0; k < files.size(); ++k) {
            if (files[k].bytes == 0)
                continue;
            const auto want = content(topo.rank + 50, static_cast<int>(k), files[k].bytes);
            bool same = false;
            const bool kept = cd::use_kept_mapping(dir + "/" + files[k].name, files[k].bytes,
                                                   [&](const char* p) {
                                                       same = std::memcmp(p, want.data(), want.size()) == 0;
                                                   });
            if (!kept || !same) {
                UNSCOPED_INFO(files[k].name << (kept ? ": its kept mapping differs" : ": not mapped"));
                ok = false;
            }
        }
        CHECK(all(ok));
        MPI_Barrier(MPI_COMM_WORLD);
        // Rewritten in place with other bytes of the same sizes (write(2)):
        // the next encode sends the new bytes through the same mappings, and
        // a wiped node is rebuilt from them byte for byte.
        CHECK(round_trip(MPI_COMM_WORLD, base, 1, red, {0}));
        remove_ram_dir(base);
    }
}

TEST_CASE("on a full RAM disk, encode fails naming the file, and hangs no one", "[redundancy]")
{
    if (world_size() < 2) {
        SUCCEED("needs 2 fake nodes");
        return;
    }
    for (const auto red : {Redundancy::partner(), Redundancy::xor_parity(4)}) {
        INFO(red.str());
        const std::string base = ram_dir("redundancy-full");
        if (base.empty()) {
            SUCCEED("/dev/shm is not a RAM disk");
            return;
        }
        cd::Topology topo(MPI_COMM_WORLD, 1);
        // An older step's redundancy files (other sizes), recycled: mapped.
        const auto older = layout_of(topo, make_files(topo.size, 5), red);
        write_own(topo, base, older);
        MPI_Barrier(MPI_COMM_WORLD);
        cd::encode_redundancy(topo, older, node_dir(base, topo.node));
        const auto layout = layout_of(topo, make_files(topo.size, 29), red);
        write_own(topo, base, layout);
        MPI_Barrier(MPI_COMM_WORLD);
        // The space of rank 1's redundancy file cannot be allocated.
        cairn::testing::Fault fault;
        fault.point = "fs.reserve";
        fault.rank = 1;
        fault.error = ENOSPC;
        cairn::testing::arm_fault(fault);
        std::string what;
        try {
            cd::encode_redundancy(topo, layout, node_dir(base, topo.node));
        } catch (const cairn::error::WriteError& e) {
            what = e.what();
        }
        cairn::testing::disarm_faults();
        INFO(what);
        const std::string file = red.scheme == Redundancy::Scheme::partner ? "/partner/__0_0.distcp" : "/xor/0.1.xor";
        CHECK(all(topo.rank == 1 ? what.find(node_dir(base, 1) + file) != std::string::npos &&
                                       what.find(std::strerror(ENOSPC)) != std::string::npos
                                 : what.empty()));
        remove_ram_dir(base);
    }
}
