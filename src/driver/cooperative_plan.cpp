// Who reads what in a cooperative read (driver/cooperative_plan.hpp): the
// records the ranks exchange and the assignment of checksum blocks to
// reading ranks, in exchange rounds.
#include "driver/cooperative_plan.hpp"

#include <algorithm>

namespace cairn::detail {

namespace {

constexpr std::uint64_t default_block = std::uint64_t(1) << 20; // rows per unit when the checkpoint has no checksums
constexpr std::uint64_t piece_bytes = std::uint64_t(8) << 20;   // about the bytes of one cooperative piece

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

// How a stored chunk's rows are cut.
struct Units {
    std::int64_t rows = 1;      // rows per unit
    std::int64_t per_piece = 1; // units per cooperative piece
};

// Rows [a, e) of a chunk in which the same ranks need the same kind of read.
struct Run {
    std::int64_t a, e;
    std::vector<int> ranks; // that need them
    bool together;          // read by one of them for all
};

// The records of every rank, grouped by the stored chunk they read.
std::map<std::pair<std::string, Shape>, std::vector<std::size_t>> by_chunk(const std::vector<Rec>& recs)
{
    std::map<std::pair<std::string, Shape>, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < recs.size(); ++i)
        groups[{recs[i].fqn, recs[i].chunk.offsets}].push_back(i); // in rank order
    return groups;
}

// A unit: the rows of one checksum block (FORMAT.md 2.3: whole rows when a
// row fits in a block), else one row; then a block across the end of a row
// may be read by two ranks: at piece ends (pieces of at least 32 blocks)
// and where the ranks that need the rows change. Without verification, a
// unit is read together only where one rank's box holds the others'
// (identical boxes: replicas), one unit a piece: the reads are then
// exactly the bytes needed.
Units units_of(const Rec& r, std::uint64_t checksum_block, bool verify)
{
    std::uint64_t row = r.es;
    for (std::size_t d = 1; d < r.chunk.ndim(); ++d)
        row *= static_cast<std::uint64_t>(r.chunk.shape[d]);
    const std::uint64_t block = checksum_block ? checksum_block : default_block;
    Units u;
    std::uint64_t piece = piece_bytes;
    if (row && row <= block)
        u.rows = static_cast<std::int64_t>(block / row);
    else
        piece = std::max(piece, 32 * block);
    if (verify)
        u.per_piece = std::max<std::int64_t>(
            1, static_cast<std::int64_t>(piece / std::max<std::uint64_t>(1, row * static_cast<std::uint64_t>(u.rows))));
    return u;
}

// Computes the assignment chunk by chunk, keeping each rank's bytes to read
// so far (a piece goes to the least loaded of the ranks that need it).
class Assigner {
public:
    Assigner(const std::vector<Rec>& recs, int size, int me, std::uint64_t checksum_block, bool verify)
        : m_recs(recs), m_me(me), m_block(checksum_block), m_verify(verify),
          m_load(static_cast<std::size_t>(size), 0)
    {
    }

    // The records `idx` of one stored chunk (in rank order).
    void chunk(const std::vector<std::size_t>& idx)
    {
        if (m_recs[idx.back()].rank == m_recs[idx.front()].rank) { // one rank
            for (auto i : idx)
                read_alone(i, m_recs[i].box);
            return;
        }
        const Units u = units_of(m_recs[idx.front()], m_block, m_verify);
        for (const auto& run : runs_of(idx, u)) {
            if (!run.together) {
                keep_alone(idx, run);
                continue;
            }
            flush_alone();
            cut_into_pieces(idx, run, u);
        }
        flush_alone();
    }

    Schedule& schedule() { return m_s; }

private:
    // Counts record i's rows `sub` to its rank; this rank's go to the plan.
    void read_alone(std::size_t i, const Box& sub)
    {
        const Rec& r = m_recs[i];
        m_load[static_cast<std::size_t>(r.rank)] += bytes_of(sub, r.es);
        if (r.rank != m_me)
            return;
        m_s.plain[r.item].emplace_back(r.local, sub);
        if (sub == r.box)
            m_s.whole[r.item] += sub.volume();
    }

    // The chunk's units from the first row any record needs to the last,
    // as runs of units the same ranks need.
    std::vector<Run> runs_of(const std::vector<std::size_t>& idx, const Units& u) const
    {
        const Box& C = m_recs[idx.front()].chunk;
        std::int64_t lo = lo0(m_recs[idx.front()].box), hi = hi0(m_recs[idx.front()].box);
        for (auto i : idx) {
            lo = std::min(lo, lo0(m_recs[i].box));
            hi = std::max(hi, hi0(m_recs[i].box));
        }
        const std::int64_t end = C.offsets[0] + C.shape[0];
        std::vector<Run> runs;
        for (std::int64_t k = (lo - C.offsets[0]) / u.rows; C.offsets[0] + k * u.rows < hi; ++k) {
            const std::int64_t a = C.offsets[0] + k * u.rows, e = std::min(end, a + u.rows);
            std::vector<int> ranks = ranks_needing(idx, a, e);
            const bool together = ranks.size() >= 2 && (m_verify || one_holds_all(idx, a, e));
            if (!runs.empty() && runs.back().e == a && runs.back().ranks == ranks && runs.back().together == together)
                runs.back().e = e;
            else
                runs.push_back({a, e, std::move(ranks), together});
        }
        return runs;
    }

    // The ranks whose records need rows [a, e), in rank order.
    std::vector<int> ranks_needing(const std::vector<std::size_t>& idx, std::int64_t a, std::int64_t e) const
    {
        std::vector<int> ranks;
        for (auto i : idx)
            if (lo0(m_recs[i].box) < e && hi0(m_recs[i].box) > a && (ranks.empty() || ranks.back() != m_recs[i].rank))
                ranks.push_back(m_recs[i].rank);
        return ranks;
    }

    // Whether one record's part of rows [a, e) holds every other's.
    bool one_holds_all(const std::vector<std::size_t>& idx, std::int64_t a, std::int64_t e) const
    {
        Box all;
        for (auto i : idx) {
            const Box sub = rows_of(m_recs[i].box, a, e);
            if (!sub.empty())
                all = bounding(all, sub);
        }
        for (auto i : idx)
            if (rows_of(m_recs[i].box, a, e) == all)
                return true;
        return false;
    }

    // Notes each record's part of `run`, read alone, merged with its part
    // of the run before when they meet.
    void keep_alone(const std::vector<std::size_t>& idx, const Run& run)
    {
        for (auto i : idx) {
            const Box sub = rows_of(m_recs[i].box, run.a, run.e);
            if (sub.empty())
                continue;
            auto it = m_alone.find(i);
            if (it != m_alone.end() && hi0(it->second) == lo0(sub)) {
                it->second.shape[0] += sub.shape[0];
                continue;
            }
            if (it != m_alone.end())
                read_alone(i, it->second);
            m_alone[i] = sub;
        }
    }

    void flush_alone()
    {
        for (auto& [i, b] : m_alone)
            read_alone(i, b);
        m_alone.clear();
    }

    // Cuts `run` into pieces of u.per_piece units, each read by the least
    // loaded rank that needs it.
    void cut_into_pieces(const std::vector<std::size_t>& idx, const Run& run, const Units& u)
    {
        const std::int64_t step = u.per_piece * u.rows;
        for (std::int64_t a = run.a; a < run.e; a += step) {
            Piece p = piece_of(idx, a, std::min(run.e, a + step), least_loaded(run.ranks));
            m_load[static_cast<std::size_t>(p.reader)] += bytes_of(p.bbox, m_recs[idx.front()].es);
            m_s.pieces.push_back(std::move(p));
        }
    }

    int least_loaded(const std::vector<int>& ranks) const
    {
        int best = ranks.front();
        for (int r : ranks)
            if (m_load[static_cast<std::size_t>(r)] < m_load[static_cast<std::size_t>(best)])
                best = r;
        return best;
    }

    // The piece of rows [a, e) that `reader` reads: every record's part.
    Piece piece_of(const std::vector<std::size_t>& idx, std::int64_t a, std::int64_t e, int reader) const
    {
        Piece p;
        p.reader = reader;
        for (auto i : idx) {
            const Box sub = rows_of(m_recs[i].box, a, e);
            if (sub.empty())
                continue;
            p.parts.push_back({i, sub});
            p.bbox = bounding(p.bbox, sub);
            if (m_recs[i].rank == reader)
                p.first = i;
        }
        return p;
    }

    const std::vector<Rec>& m_recs;
    int m_me;
    std::uint64_t m_block;
    bool m_verify;
    std::vector<std::uint64_t> m_load; // bytes each rank reads so far
    std::map<std::size_t, Box> m_alone; // parts of the current chunk read alone, by record
    Schedule m_s;
};

// The buffer bytes each rank needs for piece `p` (read, sent, received).
void buffers_of(const Piece& p, const std::vector<Rec>& recs, std::vector<std::uint64_t>& need)
{
    std::fill(need.begin(), need.end(), 0);
    const std::uint64_t es = recs[p.first].es;
    need[static_cast<std::size_t>(p.reader)] += bytes_of(p.bbox, es);
    for (const auto& part : p.parts)
        if (recs[part.rec].rank != p.reader) {
            need[static_cast<std::size_t>(p.reader)] += bytes_of(part.sub, es);
            need[static_cast<std::size_t>(recs[part.rec].rank)] += bytes_of(part.sub, es);
        }
}

// The ends of the rounds: each rank's buffers (pieces read, sent,
// received) within the budget, at least one piece a round.
std::vector<std::size_t> rounds_of(const std::vector<Piece>& pieces, const std::vector<Rec>& recs, int size,
                                   std::size_t budget)
{
    const std::uint64_t cap = std::min<std::uint64_t>(std::max<std::size_t>(budget, std::size_t(1) << 20), max_round);
    std::vector<std::size_t> ends;
    std::vector<std::uint64_t> used(static_cast<std::size_t>(size), 0), need(used.size());
    for (std::size_t k = 0; k < pieces.size(); ++k) {
        buffers_of(pieces[k], recs, need);
        bool over = false;
        for (std::size_t r = 0; r < used.size(); ++r)
            over = over || (need[r] && used[r] + need[r] > cap);
        if (over && (ends.empty() ? k > 0 : ends.back() < k)) {
            ends.push_back(k);
            std::fill(used.begin(), used.end(), 0);
        }
        for (std::size_t r = 0; r < used.size(); ++r)
            used[r] += need[r];
    }
    if (!pieces.empty())
        ends.push_back(pieces.size());
    return ends;
}

} // namespace

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

Schedule assign(const std::vector<Rec>& recs, int size, int me, std::uint64_t checksum_block, bool verify,
                std::size_t budget)
{
    Assigner a(recs, size, me, checksum_block, verify);
    for (const auto& [chunk, idx] : by_chunk(recs))
        a.chunk(idx);
    Schedule s = std::move(a.schedule());
    s.round_end = rounds_of(s.pieces, recs, size, budget);
    return s;
}

} // namespace cairn::detail
