// Cooperative reads (driver/cooperative.hpp): the assignment of checksum
// blocks to reading ranks and the exchange of what they read.
#include "driver/cooperative.hpp"

#include "cairn/errors.hpp"
#include "core/codec.hpp"
#include "core/strided.hpp"
#include "stage/stage.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cairn::detail {

namespace {

constexpr std::uint64_t default_block = std::uint64_t(1) << 20; // rows per unit when the checkpoint has no checksums
constexpr std::uint64_t piece_bytes = std::uint64_t(8) << 20;   // about the bytes of one cooperative piece
constexpr std::size_t max_gathered = std::size_t(256) << 20;    // larger exchanged plans: read as usual
constexpr std::size_t max_round = std::size_t(1) << 30;         // MPI_Alltoallv counts are ints

// The part of one array item of some rank's plan in one stored chunk, as
// exchanged.
struct Rec {
    int rank = 0;
    std::uint32_t item = 0;  // index in that rank's plan
    std::uint32_t local = 0; // the chunk's number in that rank's metadata
    std::uint64_t es = 0;    // element size
    std::string fqn;
    Box chunk; // the stored chunk
    Box box;   // what the item reads of it
};

// What one rank receives (or keeps) of a piece.
struct Part {
    std::size_t rec;
    Box sub;
};

// Rows of a chunk that one rank reads for several.
struct Piece {
    std::size_t first = 0; // a record of the chunk read by `reader`
    int reader = 0;
    Box bbox; // what `reader` reads: the bounding box of the parts
    std::vector<Part> parts;
};

std::int64_t lo0(const Box& b) { return b.offsets[0]; }
std::int64_t hi0(const Box& b) { return b.offsets[0] + b.shape[0]; }

// `b` restricted to the rows [a, e) of dimension 0 (possibly empty).
Box rows_of(const Box& b, std::int64_t a, std::int64_t e)
{
    Box r = b;
    const auto l = std::max(a, lo0(b)), h = std::min(e, hi0(b));
    r.offsets[0] = l;
    r.shape[0] = std::max<std::int64_t>(0, h - l);
    return r;
}

Box bounding(const Box& a, const Box& b)
{
    if (a.ndim() == 0) // none yet
        return b;
    Box r = a;
    for (std::size_t d = 0; d < a.ndim(); ++d) {
        const auto l = std::min(a.offsets[d], b.offsets[d]);
        const auto h = std::max(a.offsets[d] + a.shape[d], b.offsets[d] + b.shape[d]);
        r.offsets[d] = l;
        r.shape[d] = h - l;
    }
    return r;
}

std::uint64_t bytes_of(const Box& b, std::uint64_t es) { return static_cast<std::uint64_t>(b.volume()) * es; }

StridedView dense_view(void* data, std::uint64_t es, const Shape& shape)
{
    return StridedView{data, static_cast<std::size_t>(es), shape, row_major_strides(shape)};
}

// The destinations the reader asks for in one read_data call: views
// resolved before (this rank's items, whole or in parts, and buffers of
// pieces), by entry, chunk and box; anything else goes to the planner.
class Destinations final : public LoadPlanner {
public:
    explicit Destinations(LoadPlanner& inner) : m_inner(inner) {}
    void add(const ReadItem& item, DataRef ref) { m_refs[key(item)].push_back(std::move(ref)); }
    void set_up_planner(StateDict&, const Metadata&, bool) override {}
    LoadPlan create_local_plan() override { return {}; }
    DataRef resolve_destination(const ReadItem& item) override
    {
        const auto it = m_refs.find(key(item));
        if (it == m_refs.end())
            return m_inner.resolve_destination(item);
        auto& [refs, next] = it->second;
        return refs[next++ % refs.size()]; // identical items: in turn
    }
    void load_bytes(const ReadItem& item, std::vector<std::byte> data) override
    {
        m_inner.load_bytes(item, std::move(data));
    }
    void finish() override {}

private:
    using Key = std::tuple<std::string, std::uint32_t, Shape, Shape>;
    struct Refs {
        std::vector<DataRef> refs;
        std::size_t next = 0;
        void push_back(DataRef r) { refs.push_back(std::move(r)); }
    };
    static Key key(const ReadItem& i) { return {i.fqn, i.chunk, i.box.offsets, i.box.shape}; }
    LoadPlanner& m_inner;
    std::map<Key, Refs> m_refs;
};

// Runs `f` on this rank, then one allreduce: throws this rank's error,
// returns whether every rank succeeded.
template <class F>
bool all_ok(const Comm& c, F&& f)
{
    std::exception_ptr err;
    try {
        f();
    } catch (...) {
        err = std::current_exception();
    }
    int flag = err ? 1 : 0;
    if (MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, c.comm) != MPI_SUCCESS)
        throw error::ReadError("load: MPI_Allreduce of the cooperative read's status failed");
    if (err)
        std::rethrow_exception(err);
    return flag == 0;
}

// Whether this rank's item takes part: an array of at least one
// dimension, inside the array.
bool takes_part(const Metadata& md, const ReadItem& item)
{
    if (item.kind != ItemKind::array || item.box.ndim() == 0 || item.box.empty())
        return false;
    const auto e = md.entries.find(item.fqn);
    if (e == md.entries.end() || e->second.kind != ItemKind::array || e->second.chunks.empty())
        return false;
    return item.box.inside(e->second.global_shape) && e->second.chunks.front().box.ndim() == item.box.ndim() &&
           dtype_size(e->second.dtype) > 0;
}

// This rank's records: each taking item, in each stored chunk it overlaps
// (an item names one chunk in the per-rank layout, the whole region of a
// dataset in the container's).
Bytes encode_records(const Metadata& md, const LoadPlan& plan, const std::vector<char>& take)
{
    Encoder body;
    std::size_t n = 0;
    for (std::size_t i = 0; i < plan.items.size(); ++i) {
        if (!take[i])
            continue;
        const ReadItem& it = plan.items[i];
        const EntryMeta& em = md.entries.at(it.fqn);
        for (std::size_t k = 0; k < em.chunks.size(); ++k) {
            const auto x = intersect(em.chunks[k].box, it.box);
            if (!x || x->empty())
                continue;
            ++n;
            body.uv(i);
            body.uv(k);
            body.str(it.fqn);
            body.uv(dtype_size(em.dtype));
            body.shape(em.chunks[k].box.offsets);
            body.shape(em.chunks[k].box.shape);
            body.shape(x->offsets);
            body.shape(x->shape);
        }
    }
    Encoder e;
    e.count(n);
    Bytes out = e.take();
    const Bytes b = body.take();
    out.insert(out.end(), b.begin(), b.end());
    return out;
}

void decode_records(const std::byte* p, std::size_t n, int rank, std::vector<Rec>& out)
{
    Decoder d(p, n, "cooperative read plans");
    const std::size_t count = d.count(6);
    for (std::size_t k = 0; k < count; ++k) {
        Rec r;
        r.rank = rank;
        r.item = d.uv32();
        r.local = d.uv32();
        r.fqn = d.str();
        r.es = d.uv();
        r.chunk.offsets = d.shape();
        r.chunk.shape = d.shape();
        r.box.offsets = d.shape();
        r.box.shape = d.shape();
        out.push_back(std::move(r));
    }
    d.expect_done();
}

// The assignment, the same on every rank.
struct Schedule {
    std::vector<Piece> pieces;
    std::vector<std::size_t> round_end;    // round k: pieces [round_end[k-1], round_end[k])
    std::map<std::uint32_t, std::vector<std::pair<std::uint32_t, Box>>> plain; // this rank's items: (chunk, part) read alone
    std::map<std::uint32_t, std::int64_t> whole; // this rank's items: elements of them read alone in whole records
};

Schedule assign(const std::vector<Rec>& recs, int size, int me, std::uint64_t checksum_block, bool verify,
                std::size_t budget)
{
    Schedule s;
    std::vector<std::uint64_t> load(static_cast<std::size_t>(size), 0);
    // Records by stored chunk (entry, chunk offsets), in rank order.
    std::map<std::pair<std::string, Shape>, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < recs.size(); ++i)
        groups[{recs[i].fqn, recs[i].chunk.offsets}].push_back(i);
    auto read_alone = [&](std::size_t i, const Box& sub) {
        load[static_cast<std::size_t>(recs[i].rank)] += bytes_of(sub, recs[i].es);
        if (recs[i].rank == me) {
            s.plain[recs[i].item].emplace_back(recs[i].local, sub);
            if (sub == recs[i].box)
                s.whole[recs[i].item] += sub.volume();
        }
    };
    for (const auto& [key, idx] : groups) {
        const Rec& r0 = recs[idx.front()];
        if (recs[idx.back()].rank == r0.rank) { // one rank
            for (auto i : idx)
                read_alone(i, recs[i].box);
            continue;
        }
        const Box& C = r0.chunk;
        std::uint64_t row = r0.es;
        for (std::size_t d = 1; d < C.ndim(); ++d)
            row *= static_cast<std::uint64_t>(C.shape[d]);
        const std::uint64_t block = checksum_block ? checksum_block : default_block;
        // A unit: the rows of one checksum block (FORMAT.md 2.3: whole rows
        // when a row fits in a block), else one row; then a block across
        // the end of a row may be read by two ranks: at piece ends (pieces
        // of at least 32 blocks) and where the ranks that need the rows change.
        std::int64_t ur = 1;
        std::uint64_t piece = piece_bytes;
        if (row && row <= block)
            ur = static_cast<std::int64_t>(block / row);
        else
            piece = std::max(piece, 32 * block);
        // Without verification, a unit is read together only where one
        // rank's box holds the others' (identical boxes: replicas), one unit
        // a piece: the reads are then exactly the bytes needed.
        const std::int64_t per_piece =
            verify ? std::max<std::int64_t>(1, static_cast<std::int64_t>(piece / std::max<std::uint64_t>(1, row * ur)))
                   : 1;
        std::int64_t lo = lo0(recs[idx.front()].box), hi = hi0(recs[idx.front()].box);
        for (auto i : idx) {
            lo = std::min(lo, lo0(recs[i].box));
            hi = std::max(hi, hi0(recs[i].box));
        }
        const std::int64_t end = C.offsets[0] + C.shape[0];
        struct Run {
            std::int64_t a, e;
            std::vector<int> ranks;
            bool together;
        };
        std::vector<Run> runs;
        for (std::int64_t u = (lo - C.offsets[0]) / ur; C.offsets[0] + u * ur < hi; ++u) {
            const std::int64_t a = C.offsets[0] + u * ur, e = std::min(end, a + ur);
            std::vector<int> ranks;
            for (auto i : idx)
                if (lo0(recs[i].box) < e && hi0(recs[i].box) > a && (ranks.empty() || ranks.back() != recs[i].rank))
                    ranks.push_back(recs[i].rank);
            bool together = ranks.size() >= 2;
            if (together && !verify) { // only where one rank's part holds all others
                Box all;
                for (auto i : idx) {
                    const Box sub = rows_of(recs[i].box, a, e);
                    if (!sub.empty())
                        all = bounding(all, sub);
                }
                together = false;
                for (auto i : idx)
                    together = together || rows_of(recs[i].box, a, e) == all;
            }
            if (!runs.empty() && runs.back().e == a && runs.back().ranks == ranks && runs.back().together == together)
                runs.back().e = e;
            else
                runs.push_back({a, e, std::move(ranks), together});
        }
        // This rank's parts read alone, merged per record.
        std::map<std::size_t, Box> alone;
        auto flush_alone = [&] {
            for (auto& [i, b] : alone)
                read_alone(i, b);
            alone.clear();
        };
        for (const auto& run : runs) {
            if (!run.together) {
                for (auto i : idx) {
                    const Box sub = rows_of(recs[i].box, run.a, run.e);
                    if (sub.empty())
                        continue;
                    auto it = alone.find(i);
                    if (it != alone.end() && hi0(it->second) == lo0(sub))
                        it->second.shape[0] += sub.shape[0];
                    else {
                        if (it != alone.end())
                            read_alone(i, it->second);
                        alone[i] = sub;
                    }
                }
                continue;
            }
            flush_alone();
            for (std::int64_t a = run.a; a < run.e; a += per_piece * ur) {
                const std::int64_t e = std::min(run.e, a + per_piece * ur);
                Piece p;
                p.reader = run.ranks.front();
                for (int r : run.ranks)
                    if (load[static_cast<std::size_t>(r)] < load[static_cast<std::size_t>(p.reader)])
                        p.reader = r;
                for (auto i : idx) {
                    const Box sub = rows_of(recs[i].box, a, e);
                    if (sub.empty())
                        continue;
                    p.parts.push_back({i, sub});
                    p.bbox = bounding(p.bbox, sub);
                    if (recs[i].rank == p.reader)
                        p.first = i;
                }
                load[static_cast<std::size_t>(p.reader)] += bytes_of(p.bbox, r0.es);
                s.pieces.push_back(std::move(p));
            }
        }
        flush_alone();
    }
    // Rounds: each rank's buffers (pieces read, sent, received) within the budget.
    const std::uint64_t cap = std::min<std::uint64_t>(std::max<std::size_t>(budget, std::size_t(1) << 20), max_round);
    std::vector<std::uint64_t> used(static_cast<std::size_t>(size), 0), need(used.size());
    for (std::size_t k = 0; k < s.pieces.size(); ++k) {
        const Piece& p = s.pieces[k];
        std::fill(need.begin(), need.end(), 0);
        const std::uint64_t es = recs[p.first].es;
        need[static_cast<std::size_t>(p.reader)] += bytes_of(p.bbox, es);
        for (const auto& part : p.parts)
            if (recs[part.rec].rank != p.reader) {
                need[static_cast<std::size_t>(p.reader)] += bytes_of(part.sub, es);
                need[static_cast<std::size_t>(recs[part.rec].rank)] += bytes_of(part.sub, es);
            }
        bool over = false;
        for (std::size_t r = 0; r < used.size(); ++r)
            over = over || (need[r] && used[r] + need[r] > cap);
        if (over && (s.round_end.empty() ? k > 0 : s.round_end.back() < k)) {
            s.round_end.push_back(k);
            std::fill(used.begin(), used.end(), 0);
        }
        for (std::size_t r = 0; r < used.size(); ++r)
            used[r] += need[r];
    }
    if (!s.pieces.empty())
        s.round_end.push_back(s.pieces.size());
    return s;
}

} // namespace

bool read_cooperatively(const Comm& c, StorageReader& storage, const Metadata& md, const LoadPlan& plan,
                        LoadPlanner& planner, bool verify, std::size_t budget,
                        const std::function<std::uint64_t()>& read_bytes, CooperativeCounts& counts)
{
    verify = verify && md.checksum_block != 0; // no blocks to verify: exact reads
    const std::size_t n = plan.items.size();
    std::vector<char> take(n, 0);
    std::vector<DataRef> dest(n); // of the items that take part, resolved once
    Bytes mine;
    // 1. This rank's destinations and records; then the sizes, with each rank's status.
    std::exception_ptr failed;
    try {
        for (std::size_t i = 0; i < n; ++i) {
            if (!takes_part(md, plan.items[i]))
                continue;
            dest[i] = planner.resolve_destination(plan.items[i]);
            take[i] = dest[i].space == MemorySpace::host ? 1 : 2; // 2: resolved, read as usual
            bool stored = false; // in chunks this rank knows (else the reader says what is wrong)
            for (const auto& ch : md.entries.at(plan.items[i].fqn).chunks) {
                const auto x = intersect(ch.box, plan.items[i].box);
                stored = stored || (x && !x->empty());
            }
            if (!stored)
                take[i] = 2;
        }
        std::vector<char> host(n);
        for (std::size_t i = 0; i < n; ++i)
            host[i] = take[i] == 1;
        mine = encode_records(md, plan, host);
    } catch (...) {
        failed = std::current_exception();
    }
    std::vector<long long> sizes(2 * static_cast<std::size_t>(c.size));
    const long long my[2] = {static_cast<long long>(mine.size()), failed ? 1 : 0};
    if (MPI_Allgather(my, 2, MPI_LONG_LONG, sizes.data(), 2, MPI_LONG_LONG, c.comm) != MPI_SUCCESS)
        throw error::ReadError("load: MPI_Allgather of the cooperative read plans' sizes failed");
    if (failed)
        std::rethrow_exception(failed);
    std::size_t total = 0;
    for (int r = 0; r < c.size; ++r) {
        if (sizes[2 * r + 1])
            return false;
        total += static_cast<std::size_t>(sizes[2 * r]);
    }

    // Views of what this rank reads alone, for the reader.
    auto add_whole = [&](Destinations& to, LoadPlan& p, std::size_t i) {
        p.items.push_back(plan.items[i]);
        if (take[i])
            to.add(plan.items[i], dest[i]);
    };
    LoadPlan alone{{}, plan.storage_data, plan.planner_data};
    Destinations alone_dest(planner);
    if (total > max_gathered) { // too much to share: every rank reads as usual
        for (std::size_t i = 0; i < n; ++i)
            add_whole(alone_dest, alone, i);
        return all_ok(c, [&] {
            storage.read_data(alone, alone_dest);
            counts.bytes_read += read_bytes();
        });
    }

    // 2. Every rank's records, and the same assignment on every rank.
    std::vector<int> rcounts(static_cast<std::size_t>(c.size)), displs(rcounts.size());
    for (int r = 0; r < c.size; ++r) {
        rcounts[r] = static_cast<int>(sizes[2 * r]);
        displs[r] = r ? displs[r - 1] + rcounts[r - 1] : 0;
    }
    Bytes all(total);
    if (MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), rcounts.data(), displs.data(),
                       MPI_BYTE, c.comm) != MPI_SUCCESS)
        throw error::ReadError("load: MPI_Allgatherv of the cooperative read plans failed");
    std::vector<Rec> recs;
    for (int r = 0; r < c.size; ++r)
        decode_records(all.data() + displs[r], static_cast<std::size_t>(rcounts[r]), r, recs);
    Bytes().swap(all);
    const Schedule sched = assign(recs, c.size, c.rank, md.checksum_block, verify, budget);

    // 3. What this rank reads alone: in the first round's read_data call
    // (one call fewer: a collective open of the container), or alone when
    // there is no round.
    auto plan_alone = [&](LoadPlan& into, Destinations& into_dest) {
        for (std::size_t i = 0; i < n; ++i) {
            if (take[i] != 1) {
                add_whole(into_dest, into, i);
                continue;
            }
            const auto it = sched.plain.find(static_cast<std::uint32_t>(i));
            if (it == sched.plain.end())
                continue;
            const auto w = sched.whole.find(static_cast<std::uint32_t>(i));
            if (w != sched.whole.end() && w->second == plan.items[i].box.volume()) { // all of it alone
                add_whole(into_dest, into, i);
                continue;
            }
            for (const auto& [chunk, sub] : it->second) {
                ReadItem part = plan.items[i];
                part.chunk = chunk;
                part.box = sub;
                into.items.push_back(part);
                into_dest.add(part, DataRef{subview(dest[i].view, plan.items[i].box, sub), MemorySpace::host});
            }
        }
    };
    if (sched.round_end.empty())
        return all_ok(c, [&] {
            plan_alone(alone, alone_dest);
            storage.read_data(alone, alone_dest);
            counts.bytes_read += read_bytes();
        });

    // 4. The rounds: read the pieces, exchange, copy out. The buffers come
    // from the pool and are kept from round to round (fresh memory costs
    // its page faults on every use).
    HostBuffer read_buf, send_buf, recv_buf;
    std::size_t begin = 0;
    for (std::size_t round = 0; round < sched.round_end.size(); ++round) {
        const std::size_t end = sched.round_end[round];
        std::vector<std::size_t> at_read; // where each piece this rank reads lands in read_buf
        std::size_t read_total = 0;
        std::vector<std::size_t> mine_read; // pieces this rank reads
        std::vector<int> scount(static_cast<std::size_t>(c.size), 0), rcount(scount.size(), 0);
        for (std::size_t k = begin; k < end; ++k) {
            const Piece& p = sched.pieces[k];
            const std::uint64_t es = recs[p.first].es;
            if (p.reader == c.rank) {
                mine_read.push_back(k);
                at_read.push_back(read_total);
                read_total += bytes_of(p.bbox, es);
            }
            for (const auto& part : p.parts) {
                const int to = recs[part.rec].rank;
                if (to == p.reader)
                    continue;
                if (p.reader == c.rank)
                    scount[static_cast<std::size_t>(to)] += static_cast<int>(bytes_of(part.sub, es));
                if (to == c.rank)
                    rcount[static_cast<std::size_t>(p.reader)] += static_cast<int>(bytes_of(part.sub, es));
            }
        }
        std::vector<int> sdispl(scount.size(), 0), rdispl(rcount.size(), 0);
        for (std::size_t r = 1; r < scount.size(); ++r) {
            sdispl[r] = sdispl[r - 1] + scount[r - 1];
            rdispl[r] = rdispl[r - 1] + rcount[r - 1];
        }
        std::byte* sendbuf = reinterpret_cast<std::byte*>(
            grow(send_buf, static_cast<std::size_t>(sdispl.back() + scount.back()), max_round));
        std::byte* recvbuf = reinterpret_cast<std::byte*>(
            grow(recv_buf, static_cast<std::size_t>(rdispl.back() + rcount.back()), max_round));
        std::byte* readbuf = reinterpret_cast<std::byte*>(grow(read_buf, read_total, max_round));
        const bool read_ok = all_ok(c, [&] {
            LoadPlan reads{{}, plan.storage_data, plan.planner_data};
            Destinations to(planner);
            if (round == 0)
                plan_alone(reads, to);
            for (std::size_t j = 0; j < mine_read.size(); ++j) {
                const Piece& p = sched.pieces[mine_read[j]];
                const Rec& own = recs[p.first];
                ReadItem item = plan.items[own.item];
                item.chunk = own.local;
                item.box = p.bbox;
                reads.items.push_back(item);
                to.add(item, DataRef{dense_view(readbuf + at_read[j], own.es, p.bbox.shape), MemorySpace::host});
            }
            storage.read_data(reads, to);
            counts.bytes_read += read_bytes();
            // Copy out this rank's parts; pack the others'.
            std::vector<int> at = sdispl;
            for (std::size_t j = 0; j < mine_read.size(); ++j) {
                const Piece& p = sched.pieces[mine_read[j]];
                const std::uint64_t es = recs[p.first].es;
                const StridedView read = dense_view(readbuf + at_read[j], es, p.bbox.shape);
                for (const auto& part : p.parts) {
                    const Rec& r = recs[part.rec];
                    const StridedView from = subview(read, p.bbox, part.sub);
                    if (r.rank == c.rank) {
                        copy_strided(subview(dest[r.item].view, plan.items[r.item].box, part.sub), from);
                        continue;
                    }
                    auto& pos = at[static_cast<std::size_t>(r.rank)];
                    copy_strided(dense_view(sendbuf + pos, es, part.sub.shape), from);
                    pos += static_cast<int>(bytes_of(part.sub, es));
                }
            }
        });
        if (!read_ok)
            return false;
        if (MPI_Alltoallv(sendbuf, scount.data(), sdispl.data(), MPI_BYTE, recvbuf, rcount.data(),
                          rdispl.data(), MPI_BYTE, c.comm) != MPI_SUCCESS)
            throw error::ReadError("load: MPI_Alltoallv of cooperative read round " + std::to_string(round) +
                                   " failed");
        std::vector<int> at = rdispl;
        for (std::size_t k = begin; k < end; ++k) {
            const Piece& p = sched.pieces[k];
            if (p.reader == c.rank)
                continue;
            const std::uint64_t es = recs[p.first].es;
            for (const auto& part : p.parts) {
                const Rec& r = recs[part.rec];
                if (r.rank != c.rank)
                    continue;
                auto& pos = at[static_cast<std::size_t>(p.reader)];
                copy_strided(subview(dest[r.item].view, plan.items[r.item].box, part.sub),
                             dense_view(recvbuf + pos, es, part.sub.shape));
                pos += static_cast<int>(bytes_of(part.sub, es));
            }
        }
        for (int v : rcount)
            counts.bytes_received += static_cast<std::uint64_t>(v);
        for (int v : scount)
            counts.bytes_sent += static_cast<std::uint64_t>(v);
        ++counts.rounds;
        begin = end;
    }
    return true;
}

} // namespace cairn::detail
