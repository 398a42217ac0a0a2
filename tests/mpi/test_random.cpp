// Randomised round trips. Each case draws, from a seed shared by every rank:
// arrays of 1 to 3 dimensions and several dtypes (now and then one of a few
// MiB, so that loads take the in-place and the overlapped paths too), a partition of each array
// over the N saving ranks (uneven cuts, empty shards, ranks that hold
// nothing, pieces held by two ranks, whole replicated arrays, several
// pieces per rank of very different sizes: a coarse partition with one
// piece refined, dealt out at random), ghost padding
// around every shard, the checksum block, the staging bounds, the layout,
// the files per rank and which ranks share a data file (per rank, per node,
// M in all), and save or async_save (full copy or bounded, the
// caller overwriting its buffers once staged); then, on M ranks, arbitrary
// (overlapping) boxes to load, none to several per rank and array (tiny and
// large ones), with their own padding and whether to verify.
// Every loaded element is checked against a function of its global index,
// the padding must be left untouched, and each rank must have read no more
// than its boxes need, rounded out to whole checksum blocks (read_bound.hpp;
// each box counted on its own).
#include "fixtures.hpp"
#include "read_bound.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>

using namespace cairn_test;

namespace {

using Rng = std::mt19937_64;

std::int64_t draw(Rng& rng, std::int64_t lo, std::int64_t hi) // uniform in [lo, hi]
{
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

const cairn::DType k_dtypes[] = {cairn::DType::f64, cairn::DType::f32, cairn::DType::i32, cairn::DType::u8,
                                 cairn::DType::i64};

struct Array {
    std::string name;
    cairn::DType dtype;
    cairn::Shape global;
};

// This rank's shards of `arrays` (boxes[a] of array a, each in a buffer of
// its own with `ghost` elements of padding around it, salt a), filled with
// their values or left blank, and named in `sd` (a box per add_array). The
// shards' buffers do not move after.
std::vector<std::unique_ptr<LocalArray>> hold(const std::vector<Array>& arrays,
                                              const std::vector<std::vector<cairn::Box>>& boxes, std::int64_t ghost,
                                              bool fill, cairn::StateDict& sd)
{
    std::vector<std::unique_ptr<LocalArray>> held;
    for (std::size_t a = 0; a < arrays.size(); ++a) {
        for (const auto& box : boxes[a]) {
            held.push_back(std::make_unique<LocalArray>(arrays[a].name, arrays[a].dtype, arrays[a].global, box,
                                                        static_cast<int>(ghost), static_cast<int>(a)));
            if (fill)
                held.back()->fill();
            sd.add_array(arrays[a].name, held.back()->shard());
        }
    }
    return held;
}

// One box for each of this rank's arrays (the single-box helpers below).
std::vector<std::vector<cairn::Box>> one_each(const std::vector<cairn::Box>& boxes)
{
    std::vector<std::vector<cairn::Box>> out;
    for (const auto& b : boxes)
        out.push_back({b});
    return out;
}

// Elements that differ from their values, plus padding bytes overwritten.
std::int64_t errors_in(const std::vector<std::unique_ptr<LocalArray>>& held)
{
    std::int64_t bad = 0;
    for (const auto& a : held)
        bad += a->errors();
    return bad;
}

// A random partition of `g` into at most `n` boxes (a grid of uneven cuts,
// some pieces possibly empty).
std::vector<cairn::Box> partition(Rng& rng, const cairn::Shape& g, int n)
{
    const std::size_t nd = g.size();
    std::vector<std::int64_t> parts(nd, 1);
    for (int tries = static_cast<int>(draw(rng, 0, 4)); tries > 0; --tries) {
        const auto d = static_cast<std::size_t>(draw(rng, 0, static_cast<std::int64_t>(nd) - 1));
        std::int64_t product = 1;
        for (std::size_t k = 0; k < nd; ++k)
            product *= parts[k] + (k == d ? 1 : 0);
        if (product <= n)
            ++parts[d];
    }
    std::vector<std::vector<std::int64_t>> cuts(nd);
    for (std::size_t d = 0; d < nd; ++d) {
        cuts[d] = {0, g[d]};
        for (std::int64_t c = 1; c < parts[d]; ++c)
            cuts[d].push_back(draw(rng, 0, g[d]));
        std::sort(cuts[d].begin(), cuts[d].end());
    }
    std::vector<cairn::Box> boxes;
    cairn::Shape idx(nd, 0);
    while (true) {
        cairn::Box b{cairn::Shape(nd), cairn::Shape(nd)};
        for (std::size_t d = 0; d < nd; ++d) {
            b.offsets[d] = cuts[d][static_cast<std::size_t>(idx[d])];
            b.shape[d] = cuts[d][static_cast<std::size_t>(idx[d]) + 1] - b.offsets[d];
        }
        boxes.push_back(b);
        std::size_t d = nd;
        while (d-- > 0) {
            if (++idx[d] < parts[d])
                break;
            idx[d] = 0;
        }
        if (d == static_cast<std::size_t>(-1))
            break;
    }
    return boxes;
}

cairn::Box empty_box(std::size_t nd) { return cairn::Box{cairn::Shape(nd, 0), cairn::Shape(nd, 0)}; }

struct Case {
    std::vector<Array> arrays;
    int n = 1, m = 1;
    // [rank][array]: the boxes each saving / loading rank holds (at least
    // one, maybe empty).
    std::vector<std::vector<std::vector<cairn::Box>>> save_boxes, load_boxes;
    std::vector<std::int64_t> save_ghost, load_ghost; // per rank
    int api = 0; // save, async_save with a full copy, async_save bounded
    cairn::SaveOptions save;
    cairn::LoadOptions load;
    std::string text; // for the failure message
};

Case draw_case(Rng& rng, int world)
{
    Case c;
    c.n = static_cast<int>(draw(rng, 1, world));
    c.m = static_cast<int>(draw(rng, 1, world));
    std::ostringstream os;
    os << "save on " << c.n << ", load on " << c.m;
    const int count = static_cast<int>(draw(rng, 1, 4));
    const bool big = draw(rng, 0, 1) == 0;
    for (int a = 0; a < count; ++a) {
        Array arr;
        arr.name = "a" + std::to_string(a);
        arr.dtype = k_dtypes[draw(rng, 0, std::size(k_dtypes) - 1)];
        const auto nd = static_cast<std::size_t>(draw(rng, 1, 3));
        for (std::size_t d = 0; d < nd; ++d)
            arr.global.push_back(draw(rng, 1, nd == 1 ? 5000 : nd == 2 ? 70 : 18));
        if (big && a == 0) { // runs of over 1 MiB: the readers' in-place path
            arr.dtype = cairn::DType::f64;
            arr.global = nd != 2 ? cairn::Shape{draw(rng, 600000, 1200000)}
                                 : cairn::Shape{draw(rng, 2, 8), draw(rng, 140000, 200000)};
        }
        os << "; " << arr.name << " " << cairn::dtype_name(arr.dtype) << " [";
        for (auto e : arr.global)
            os << " " << e;
        os << " ]";
        c.arrays.push_back(arr);
    }
    c.save_boxes.assign(static_cast<std::size_t>(c.n), {});
    c.load_boxes.assign(static_cast<std::size_t>(c.m), {});
    for (const auto& arr : c.arrays) {
        const std::size_t nd = arr.global.size();
        const auto mode = draw(rng, 0, 7);
        std::vector<std::vector<cairn::Box>> held(static_cast<std::size_t>(c.n), {empty_box(nd)});
        if (mode == 0) { // replicated everywhere
            std::fill(held.begin(), held.end(), std::vector<cairn::Box>{cairn::whole(arr.global)});
            os << " replicated";
        } else if (mode >= 6) {
            // Several pieces per rank: a coarse partition, one piece of it
            // refined into small ones, dealt to random ranks (some get none).
            auto pieces = partition(rng, arr.global, c.n * static_cast<int>(draw(rng, 2, 6)));
            const auto fine = static_cast<std::size_t>(draw(rng, 0, static_cast<std::int64_t>(pieces.size()) - 1));
            const cairn::Box coarse = pieces[fine];
            if (coarse.volume() > 0) {
                pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(fine));
                for (auto sub : partition(rng, coarse.shape, static_cast<int>(draw(rng, 2, 12)))) {
                    for (std::size_t d = 0; d < nd; ++d)
                        sub.offsets[d] += coarse.offsets[d];
                    pieces.push_back(sub);
                }
            }
            std::vector<std::vector<cairn::Box>> dealt(static_cast<std::size_t>(c.n));
            for (const auto& p : pieces)
                dealt[static_cast<std::size_t>(draw(rng, 0, c.n - 1))].push_back(p);
            int none = 0;
            for (int r = 0; r < c.n; ++r) {
                auto& mine = dealt[static_cast<std::size_t>(r)];
                std::shuffle(mine.begin(), mine.end(), rng);
                if (mine.empty())
                    ++none;
                else
                    held[static_cast<std::size_t>(r)] = mine;
            }
            os << " " << pieces.size() << " pieces dealt out (" << none << " ranks none)";
        } else {
            auto pieces = partition(rng, arr.global, c.n);
            std::vector<int> ranks(static_cast<std::size_t>(c.n));
            for (int r = 0; r < c.n; ++r)
                ranks[static_cast<std::size_t>(r)] = r;
            std::shuffle(ranks.begin(), ranks.end(), rng);
            for (std::size_t p = 0; p < pieces.size(); ++p)
                held[static_cast<std::size_t>(ranks[p])] = {pieces[p]};
            // A piece held by a second rank too (stored once).
            if (mode == 1 && pieces.size() < ranks.size())
                held[static_cast<std::size_t>(ranks[pieces.size()])] = {pieces[0]};
            os << " " << pieces.size() << " pieces" << (mode == 1 && pieces.size() < ranks.size() ? " +1 twice" : "");
        }
        for (int r = 0; r < c.n; ++r)
            c.save_boxes[static_cast<std::size_t>(r)].push_back(held[static_cast<std::size_t>(r)]);
        const bool long_runs = big && &arr == &c.arrays.front();
        for (int r = 0; r < c.m; ++r) { // any boxes, overlapping others (and each other)
            // Mostly one; else none (an empty box) to four, some tiny.
            const auto nboxes = draw(rng, 0, 1) ? 1 : draw(rng, 0, 4);
            std::vector<cairn::Box> mine;
            for (std::int64_t k = 0; k < nboxes; ++k) {
                const bool tiny = nboxes > 1 && draw(rng, 0, 2) == 0;
                cairn::Box b{cairn::Shape(nd), cairn::Shape(nd)};
                for (std::size_t d = 0; d < nd; ++d) {
                    auto lo = draw(rng, 0, arr.global[d]), hi = draw(rng, 0, arr.global[d]);
                    if (draw(rng, 0, 2) == 0) // often the whole extent
                        lo = 0, hi = arr.global[d];
                    if (tiny) // one to three elements wide
                        lo = draw(rng, 0, arr.global[d] - 1), hi = std::min(arr.global[d], lo + draw(rng, 1, 3));
                    if (long_runs && d == nd - 1 && !tiny) // runs of over 1 MiB, starting anywhere
                        lo = draw(rng, 0, arr.global[d] / 3), hi = draw(rng, lo + arr.global[d] / 3, arr.global[d]);
                    b.offsets[d] = std::min(lo, hi);
                    b.shape[d] = std::max(lo, hi) - b.offsets[d];
                }
                mine.push_back(b);
            }
            if (mine.empty())
                mine.push_back(empty_box(nd));
            c.load_boxes[static_cast<std::size_t>(r)].push_back(mine);
        }
    }
    for (int r = 0; r < c.n; ++r)
        c.save_ghost.push_back(draw(rng, 0, 2));
    for (int r = 0; r < c.m; ++r) // dense (in-place reads) more often with a big array
        c.load_ghost.push_back(big && draw(rng, 0, 2) != 0 ? 0 : draw(rng, 0, 2));
    const std::uint64_t blocks[] = {0, 64, 1000, 4096, std::uint64_t(1) << 20};
    const std::size_t staging[] = {4096, 8192, 65536, std::size_t(64) << 20};
    c.save.layout = draw(rng, 0, 1) ? cairn::Layout::container : cairn::Layout::per_rank;
    c.save.checksum_block = blocks[draw(rng, 0, std::size(blocks) - 1)];
    c.save.staging_bytes = staging[draw(rng, 0, std::size(staging) - 1)];
    c.save.files_per_rank = static_cast<int>(draw(rng, 1, 2));
    c.save.fsync = false;
    c.api = static_cast<int>(draw(rng, 0, 2));
    c.save.async_staging = c.api == 2 ? cairn::AsyncStaging::bounded : cairn::AsyncStaging::full_copy;
    c.load.layout = c.save.layout;
    c.load.staging_bytes = staging[draw(rng, 0, std::size(staging) - 1)];
    c.load.verify_checksums = draw(rng, 0, 3) != 0;
    c.load.cooperative = draw(rng, 0, 3) != 0;
    if (c.save.layout == cairn::Layout::per_rank) {
        // Which ranks share a data file: per rank, per node (one group of
        // every rank on one host), or M files in all for M in 1..n.
        const auto f = static_cast<int>(draw(rng, 0, c.n + 1));
        c.save.per_rank.files = f == 0   ? cairn::DataFiles::per_rank()
                                : f == 1 ? cairn::DataFiles::per_node()
                                         : cairn::DataFiles::in_all(f - 1);
    }
    const char* apis[] = {"save", "async_save full copy", "async_save bounded"};
    os << "; " << apis[c.api] << ", " << (c.save.layout == cairn::Layout::container ? "container" : "per-rank")
       << ", checksum block "
       << c.save.checksum_block << ", staging " << c.save.staging_bytes << " / " << c.load.staging_bytes
       << ", files per rank " << c.save.files_per_rank << ", data files " << c.save.per_rank.files.str()
       << ", verify " << c.load.verify_checksums << ", cooperative "
       << c.load.cooperative;
    c.text = os.str();
    return c;
}

} // namespace

// CAIRN_RANDOM_CASES (default 40) and CAIRN_RANDOM_SEED (default 0) draw
// other cases, for longer hunts than the suite's:
//   CAIRN_RANDOM_CASES=2000 CAIRN_RANDOM_SEED=7 mpiexec -n 3 cairn_mpi_tests '[random]'
// A failure names its case number; the same seed and count repeat it.
TEST_CASE("random partitions, paddings, blocks and staging bounds round-trip N -> M", "[reshard][random]")
{
    const int w = world_size();
    const char* cases_env = std::getenv("CAIRN_RANDOM_CASES");
    const char* seed_env = std::getenv("CAIRN_RANDOM_SEED");
    const int cases = cases_env ? std::atoi(cases_env) : 40;
    const unsigned long long seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : 0;
    const std::string base = fresh_dir("random_" + std::to_string(w));
    for (int it = 0; it < cases; ++it) {
        Rng rng(0xCA124u + static_cast<unsigned>(it) * 7919u + static_cast<unsigned>(w) + seed * 1000003u);
        Case c = draw_case(rng, w);
        const std::string path = base + "/c" + std::to_string(it) + (c.save.layout == cairn::Layout::container ? ".h5" : "");
        INFO("case " << it << " (seed " << seed << "): " << c.text);
        const bool saved = run_on(c.n, [&](const SubComm& comm) {
            const auto r = static_cast<std::size_t>(comm.rank());
            cairn::StateDict sd;
            const auto held = hold(c.arrays, c.save_boxes[r], c.save_ghost[r], true, sd);
            if (c.api == 0) {
                cairn::save(sd, path, comm.get(), c.save);
                return true;
            }
            auto h = cairn::async_save(sd, path, comm.get(), c.save);
            h.staged().get();
            for (auto& x : held) // the data may change once staged
                std::fill(x->buf.begin(), x->buf.end(), static_cast<unsigned char>(0x5A));
            h.wait();
            return true;
        });
        REQUIRE(saved);
        const bool loaded = run_on(c.m, [&](const SubComm& comm) {
            const auto r = static_cast<std::size_t>(comm.rank());
            cairn::StateDict sd;
            const auto held = hold(c.arrays, c.load_boxes[r], c.load_ghost[r], false, sd);
            const auto res = cairn::load(sd, path, comm.get(), c.load);
            const std::int64_t bad = errors_in(held);
            if (bad)
                std::printf("rank %zu: %lld wrong elements or padding bytes\n", r, static_cast<long long>(bad));
            // No more read than the boxes need, rounded out to checksum
            // blocks: by this rank, each box's own (a rank's boxes are filled
            // one by one, so bytes that two of them share may be read twice);
            // with cooperative reads, by all ranks together, each block once
            // (without checksums to verify, where reads are exact, no more
            // than the ranks alone).
            const auto md = cairn::read_metadata(path);
            const bool blocks = c.load.verify_checksums && md.checksum_block != 0;
            // A block that only one rank needs is read by that rank, once
            // for each of its boxes that needs it: `own` is what a rank's
            // boxes read beyond their union.
            std::uint64_t bound = 0, sum = 0, all = 0, own = 0;
            for (std::size_t a = 0; a < c.arrays.size(); ++a) {
                for (const auto& box : c.load_boxes[r][a])
                    bound += read_bound(md, c.arrays[a].name, {box}, c.load.verify_checksums);
                std::vector<cairn::Box> boxes;
                for (int q = 0; q < c.m; ++q) {
                    const auto& mine = c.load_boxes[static_cast<std::size_t>(q)][a];
                    std::uint64_t each = 0;
                    for (const auto& box : mine) {
                        boxes.push_back(box);
                        each += read_bound(md, c.arrays[a].name, {box}, c.load.verify_checksums);
                    }
                    sum += each;
                    own += each - read_bound(md, c.arrays[a].name, mine, c.load.verify_checksums);
                }
                all += read_bound(md, c.arrays[a].name, boxes, c.load.verify_checksums);
            }
            // A row longer than a block: blocks across row ends may be read
            // by two ranks, as the ranks alone would.
            bool long_rows = false;
            for (const auto& kv : md.entries)
                for (const auto& ch : kv.second.chunks)
                    long_rows = long_rows || (ch.box.ndim() > 1 && md.checksum_block &&
                                              block_span(ch.box.shape, cairn::dtype_size(kv.second.dtype),
                                                         md.checksum_block) == md.checksum_block &&
                                              ch.box.volume() / ch.box.shape[0] * cairn::dtype_size(kv.second.dtype) >
                                                  static_cast<std::int64_t>(md.checksum_block));
            const std::uint64_t got = c.load.cooperative && c.m > 1 ? res.bytes_read_all : res.bytes_read;
            if (c.load.cooperative && c.m > 1)
                bound = blocks && !long_rows ? all + own : sum;
            if (got > bound)
                std::printf("rank %zu: read %llu bytes, bound %llu\n", r, static_cast<unsigned long long>(got),
                            static_cast<unsigned long long>(bound));
            return bad == 0 && got <= bound;
        });
        CHECK(loaded);
        if (loaded && world_rank() == 0)
            std::filesystem::remove_all(path);
    }
}

TEST_CASE("in-place reads of runs that start and end inside checksum blocks", "[reshard][io]")
{
    // Dense destinations with runs of over 1 MiB are read straight into
    // place; a run whose ends fall inside checksum blocks reads those blocks
    // through the buffer and the whole blocks between them in place.
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("inplace_" + std::to_string(w));
    const Array arr{"x", cairn::DType::f64, {1600000}}; // chunks of over 1 MiB on up to 4 ranks
    for (auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        for (std::uint64_t block : {std::uint64_t(1000), std::uint64_t(4096), std::uint64_t(1) << 20}) {
            const std::string path = base + "/b" + std::to_string(block) +
                                     (layout == cairn::Layout::container ? ".h5" : "");
            INFO((layout == cairn::Layout::container ? "container" : "per-rank") << ", checksum block " << block);
            {
                const std::int64_t per = arr.global[0] / w;
                const cairn::Box mine{{per * r}, {r == w - 1 ? arr.global[0] - per * r : per}};
                cairn::StateDict sd;
                const auto held = hold({arr}, one_each({mine}), 0, true, sd);
                cairn::SaveOptions o;
                o.layout = layout;
                o.checksum_block = block;
                o.fsync = false;
                cairn::save(sd, path, MPI_COMM_WORLD, o);
            }
            // Every rank loads an odd-sized stretch starting at an odd
            // element: both ends inside blocks, across the savers' chunks.
            const cairn::Box want{{1237 + 5003 * r}, {400001 + 17 * r}};
            cairn::StateDict sd;
            const auto held = hold({arr}, one_each({want}), 0, false, sd);
            cairn::LoadOptions lo;
            lo.layout = layout;
            lo.staging_bytes = 1 << 20; // several pieces per run
            cairn::load(sd, path, MPI_COMM_WORLD, lo);
            CHECK(all(errors_in(held) == 0));
        }
    }
}

TEST_CASE("loads into padded host arrays verify and copy one read while the next is read", "[reshard][io]")
{
    // Rows of 1.6 MB with a ghost layer around them: not dense, so the
    // per-rank reader gathers rows into reads of up to half its buffer (8 MiB
    // of 16) and verifies and copies each on a helper thread while it reads
    // the next.
    const int w = world_size(), r = world_rank();
    const std::string path = fresh_dir("overlap_" + std::to_string(w)) + "/ckpt";
    const Array arr{"field", cairn::DType::f64, {24, 200000}};
    {
        const std::int64_t rows = 24 / w + (r < 24 % w ? 1 : 0), first = r * (24 / w) + std::min(r, 24 % w);
        cairn::StateDict sd;
        const auto held = hold({arr}, one_each({cairn::Box{{first, 0}, {rows, 200000}}}), 0, true, sd);
        cairn::SaveOptions o;
        o.fsync = false;
        o.checksum_block = 1000; // reads start inside blocks: widened
        cairn::save(sd, path, MPI_COMM_WORLD, o);
    }
    for (bool verify : {true, false}) {
        INFO("verify " << verify);
        cairn::StateDict sd;
        const auto held = hold({arr}, one_each({cairn::whole(arr.global)}), 1, false, sd); // every rank the whole field, padded
        cairn::LoadOptions lo;
        lo.staging_bytes = std::size_t(16) << 20;
        lo.verify_checksums = verify;
        cairn::load(sd, path, MPI_COMM_WORLD, lo);
        CHECK(all(errors_in(held) == 0));
    }
}
