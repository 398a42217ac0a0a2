// Cooperative reads (driver/cooperative.hpp): the exchange of the ranks'
// records, the reads and the MPI exchange of what they read. Who reads what
// is driver/cooperative_plan.cpp.
#include "driver/cooperative.hpp"

#include "cairn/errors.hpp"
#include "core/strided.hpp"
#include "driver/cooperative_plan.hpp"
#include "stage/stage.hpp"

#include <mpi.h>

#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cairn::detail {

namespace {

constexpr std::size_t max_gathered = std::size_t(256) << 20; // larger exchanged plans: read as usual

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

// Whether some chunk this rank knows holds part of `item` (else the reader
// says what is wrong).
bool stored(const Metadata& md, const ReadItem& item)
{
    for (const auto& ch : md.entries.at(item.fqn).chunks) {
        const auto x = intersect(ch.box, item.box);
        if (x && !x->empty())
            return true;
    }
    return false;
}

// This rank's side of the read.
struct Mine {
    enum Take : char { no = 0, host = 1, usual = 2 }; // not an array; shared; resolved, read as usual
    std::vector<char> take;    // by item
    std::vector<DataRef> dest; // of the items that take part, resolved once
    Bytes records;             // encoded (cooperative_plan.hpp)
};

Mine this_ranks_part(const Metadata& md, const LoadPlan& plan, LoadPlanner& planner)
{
    const std::size_t n = plan.items.size();
    Mine m{std::vector<char>(n, Mine::no), std::vector<DataRef>(n), {}};
    std::vector<char> shared(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        if (!takes_part(md, plan.items[i]))
            continue;
        m.dest[i] = planner.resolve_destination(plan.items[i]);
        const bool coop = m.dest[i].space == MemorySpace::host && stored(md, plan.items[i]);
        m.take[i] = coop ? Mine::host : Mine::usual;
        shared[i] = coop;
    }
    m.records = encode_records(md, plan, shared);
    return m;
}

// Each rank's records' size, gathered with its status: false when another
// rank failed; throws this rank's error `failed`.
bool gather_sizes(const Comm& c, std::size_t mine, const std::exception_ptr& failed, std::vector<int>& sizes,
                  std::size_t& total)
{
    std::vector<long long> all(2 * static_cast<std::size_t>(c.size));
    const long long my[2] = {static_cast<long long>(mine), failed ? 1 : 0};
    if (MPI_Allgather(my, 2, MPI_LONG_LONG, all.data(), 2, MPI_LONG_LONG, c.comm) != MPI_SUCCESS)
        throw error::ReadError("load: MPI_Allgather of the cooperative read plans' sizes failed");
    if (failed)
        std::rethrow_exception(failed);
    total = 0;
    sizes.assign(static_cast<std::size_t>(c.size), 0);
    for (int r = 0; r < c.size; ++r) {
        if (all[2 * r + 1])
            return false;
        sizes[r] = static_cast<int>(all[2 * r]);
        total += static_cast<std::size_t>(all[2 * r]);
    }
    return true;
}

// Every rank's records, of `sizes` bytes each, in rank order.
std::vector<Rec> gather_records(const Comm& c, const Bytes& mine, const std::vector<int>& sizes, std::size_t total)
{
    std::vector<int> displs(sizes.size(), 0);
    for (std::size_t r = 1; r < sizes.size(); ++r)
        displs[r] = displs[r - 1] + sizes[r - 1];
    Bytes all(total);
    if (MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), sizes.data(), displs.data(),
                       MPI_BYTE, c.comm) != MPI_SUCCESS)
        throw error::ReadError("load: MPI_Allgatherv of the cooperative read plans failed");
    std::vector<Rec> recs;
    for (int r = 0; r < c.size; ++r)
        decode_records(all.data() + displs[r], static_cast<std::size_t>(sizes[r]), r, recs);
    return recs;
}

// One round on this rank: the pieces it reads, where each lands in the
// read buffer, and the bytes it sends to and receives from each rank.
struct Round {
    std::size_t begin = 0, end = 0;  // pieces [begin, end) of the schedule
    std::vector<std::size_t> reads;  // pieces this rank reads
    std::vector<std::size_t> at;     // where each lands in the read buffer
    std::size_t read_total = 0;
    std::vector<int> scount, rcount, sdispl, rdispl;
};

Round layout_round(const Schedule& s, const std::vector<Rec>& recs, std::size_t k, const Comm& c)
{
    Round r;
    r.begin = k ? s.round_end[k - 1] : 0;
    r.end = s.round_end[k];
    r.scount.assign(static_cast<std::size_t>(c.size), 0);
    r.rcount.assign(r.scount.size(), 0);
    for (std::size_t j = r.begin; j < r.end; ++j) {
        const Piece& p = s.pieces[j];
        const std::uint64_t es = recs[p.first].es;
        if (p.reader == c.rank) {
            r.reads.push_back(j);
            r.at.push_back(r.read_total);
            r.read_total += bytes_of(p.bbox, es);
        }
        for (const auto& part : p.parts) {
            const int to = recs[part.rec].rank;
            if (to == p.reader)
                continue;
            if (p.reader == c.rank)
                r.scount[static_cast<std::size_t>(to)] += static_cast<int>(bytes_of(part.sub, es));
            if (to == c.rank)
                r.rcount[static_cast<std::size_t>(p.reader)] += static_cast<int>(bytes_of(part.sub, es));
        }
    }
    r.sdispl.assign(r.scount.size(), 0);
    r.rdispl.assign(r.rcount.size(), 0);
    for (std::size_t q = 1; q < r.scount.size(); ++q) {
        r.sdispl[q] = r.sdispl[q - 1] + r.scount[q - 1];
        r.rdispl[q] = r.rdispl[q - 1] + r.rcount[q - 1];
    }
    return r;
}

// A cooperative read on this rank, once the records are known.
class CooperativeRead {
public:
    CooperativeRead(const Comm& c, StorageReader& storage, const LoadPlan& plan, LoadPlanner& planner, Mine& mine,
                    const std::function<std::uint64_t()>& read_bytes, CooperativeCounts& counts)
        : m_c(c), m_storage(storage), m_plan(plan), m_planner(planner), m_mine(mine), m_read_bytes(read_bytes),
          m_counts(counts)
    {
    }

    // Every item read by this rank as usual (nothing shared).
    bool everything_alone()
    {
        return all_ok(m_c, [&] {
            LoadPlan reads = empty_plan();
            Destinations to(m_planner);
            for (std::size_t i = 0; i < m_plan.items.size(); ++i)
                add_whole(reads, to, i);
            read(reads, to);
        });
    }

    // The schedule's reads: alone only when it has no round; else the
    // rounds, the first also reading what this rank reads alone (one
    // read_data call fewer: a collective open of the container).
    bool run(const Schedule& s, const std::vector<Rec>& recs)
    {
        if (s.round_end.empty())
            return all_ok(m_c, [&] {
                LoadPlan reads = empty_plan();
                Destinations to(m_planner);
                add_alone(s, reads, to);
                read(reads, to);
            });
        for (std::size_t k = 0; k < s.round_end.size(); ++k)
            if (!round(s, recs, k))
                return false;
        return true;
    }

private:
    LoadPlan empty_plan() const { return LoadPlan{{}, m_plan.storage_data, m_plan.planner_data}; }

    void read(const LoadPlan& reads, Destinations& to)
    {
        m_storage.read_data(reads, to);
        m_counts.bytes_read += m_read_bytes();
    }

    void add_whole(LoadPlan& reads, Destinations& to, std::size_t i)
    {
        reads.items.push_back(m_plan.items[i]);
        if (m_mine.take[i] != Mine::no)
            to.add(m_plan.items[i], m_mine.dest[i]);
    }

    // What this rank reads alone: whole items, or the parts of shared
    // items the schedule leaves to it, as views of their destinations.
    void add_alone(const Schedule& s, LoadPlan& reads, Destinations& to)
    {
        for (std::size_t i = 0; i < m_plan.items.size(); ++i) {
            if (m_mine.take[i] != Mine::host) {
                add_whole(reads, to, i);
                continue;
            }
            const auto it = s.plain.find(static_cast<std::uint32_t>(i));
            if (it == s.plain.end())
                continue;
            const auto w = s.whole.find(static_cast<std::uint32_t>(i));
            if (w != s.whole.end() && w->second == m_plan.items[i].box.volume()) { // all of it alone
                add_whole(reads, to, i);
                continue;
            }
            for (const auto& [chunk, sub] : it->second) {
                ReadItem part = m_plan.items[i];
                part.chunk = chunk;
                part.box = sub;
                reads.items.push_back(part);
                to.add(part, DataRef{subview(m_mine.dest[i].view, m_plan.items[i].box, sub), MemorySpace::host});
            }
        }
    }

    // Round k: read the pieces, exchange, copy out. The buffers come from
    // the pool and are kept from round to round (fresh memory costs its
    // page faults on every use).
    bool round(const Schedule& s, const std::vector<Rec>& recs, std::size_t k)
    {
        const Round r = layout_round(s, recs, k, m_c);
        std::byte* sendbuf = reinterpret_cast<std::byte*>(
            grow(m_send, static_cast<std::size_t>(r.sdispl.back() + r.scount.back()), max_round));
        std::byte* recvbuf = reinterpret_cast<std::byte*>(
            grow(m_recv, static_cast<std::size_t>(r.rdispl.back() + r.rcount.back()), max_round));
        std::byte* readbuf = reinterpret_cast<std::byte*>(grow(m_read, r.read_total, max_round));
        const bool read_ok = all_ok(m_c, [&] {
            LoadPlan reads = empty_plan();
            Destinations to(m_planner);
            if (k == 0)
                add_alone(s, reads, to);
            add_pieces(s, recs, r, readbuf, reads, to);
            read(reads, to);
            hand_out(s, recs, r, readbuf, sendbuf);
        });
        if (!read_ok)
            return false;
        if (MPI_Alltoallv(sendbuf, r.scount.data(), r.sdispl.data(), MPI_BYTE, recvbuf, r.rcount.data(),
                          r.rdispl.data(), MPI_BYTE, m_c.comm) != MPI_SUCCESS)
            throw error::ReadError("load: MPI_Alltoallv of cooperative read round " + std::to_string(k) + " failed");
        copy_received(s, recs, r, recvbuf);
        for (int v : r.rcount)
            m_counts.bytes_received += static_cast<std::uint64_t>(v);
        for (int v : r.scount)
            m_counts.bytes_sent += static_cast<std::uint64_t>(v);
        ++m_counts.rounds;
        return true;
    }

    // The pieces this rank reads in round `r`, each into its place in the
    // read buffer.
    void add_pieces(const Schedule& s, const std::vector<Rec>& recs, const Round& r, std::byte* readbuf,
                    LoadPlan& reads, Destinations& to) const
    {
        for (std::size_t j = 0; j < r.reads.size(); ++j) {
            const Piece& p = s.pieces[r.reads[j]];
            const Rec& own = recs[p.first];
            ReadItem item = m_plan.items[own.item];
            item.chunk = own.local;
            item.box = p.bbox;
            reads.items.push_back(item);
            to.add(item, DataRef{dense_view(readbuf + r.at[j], own.es, p.bbox.shape), MemorySpace::host});
        }
    }

    // Copies this rank's parts of the pieces it read to their
    // destinations; packs the other ranks' parts into the send buffer.
    void hand_out(const Schedule& s, const std::vector<Rec>& recs, const Round& r, std::byte* readbuf,
                  std::byte* sendbuf) const
    {
        std::vector<int> at = r.sdispl;
        for (std::size_t j = 0; j < r.reads.size(); ++j) {
            const Piece& p = s.pieces[r.reads[j]];
            const std::uint64_t es = recs[p.first].es;
            const StridedView read = dense_view(readbuf + r.at[j], es, p.bbox.shape);
            for (const auto& part : p.parts) {
                const Rec& rec = recs[part.rec];
                const StridedView from = subview(read, p.bbox, part.sub);
                if (rec.rank == m_c.rank) {
                    copy_strided(destination(rec, part.sub), from);
                    continue;
                }
                auto& pos = at[static_cast<std::size_t>(rec.rank)];
                copy_strided(dense_view(sendbuf + pos, es, part.sub.shape), from);
                pos += static_cast<int>(bytes_of(part.sub, es));
            }
        }
    }

    // Copies this rank's parts of the other ranks' pieces of round `r`
    // from the receive buffer to their destinations.
    void copy_received(const Schedule& s, const std::vector<Rec>& recs, const Round& r, std::byte* recvbuf) const
    {
        std::vector<int> at = r.rdispl;
        for (std::size_t k = r.begin; k < r.end; ++k) {
            const Piece& p = s.pieces[k];
            if (p.reader == m_c.rank)
                continue;
            const std::uint64_t es = recs[p.first].es;
            for (const auto& part : p.parts) {
                const Rec& rec = recs[part.rec];
                if (rec.rank != m_c.rank)
                    continue;
                auto& pos = at[static_cast<std::size_t>(p.reader)];
                copy_strided(destination(rec, part.sub), dense_view(recvbuf + pos, es, part.sub.shape));
                pos += static_cast<int>(bytes_of(part.sub, es));
            }
        }
    }

    // The view of part `sub` of this rank's record `rec` in its destination.
    StridedView destination(const Rec& rec, const Box& sub) const
    {
        return subview(m_mine.dest[rec.item].view, m_plan.items[rec.item].box, sub);
    }

    const Comm& m_c;
    StorageReader& m_storage;
    const LoadPlan& m_plan;
    LoadPlanner& m_planner;
    Mine& m_mine;
    const std::function<std::uint64_t()>& m_read_bytes;
    CooperativeCounts& m_counts;
    HostBuffer m_read, m_send, m_recv;
};

} // namespace

bool read_cooperatively(const Comm& c, StorageReader& storage, const Metadata& md, const LoadPlan& plan,
                        LoadPlanner& planner, bool verify, std::size_t budget,
                        const std::function<std::uint64_t()>& read_bytes, CooperativeCounts& counts)
{
    verify = verify && md.checksum_block != 0; // no blocks to verify: exact reads
    // 1. This rank's destinations and records; then the sizes, with each rank's status.
    Mine mine;
    std::exception_ptr failed;
    try {
        mine = this_ranks_part(md, plan, planner);
    } catch (...) {
        failed = std::current_exception();
    }
    std::vector<int> sizes;
    std::size_t total = 0;
    if (!gather_sizes(c, mine.records.size(), failed, sizes, total))
        return false;
    CooperativeRead coop(c, storage, plan, planner, mine, read_bytes, counts);
    if (total > max_gathered) // too much to share: every rank reads as usual
        return coop.everything_alone();
    // 2. Every rank's records, and the same assignment on every rank.
    const std::vector<Rec> recs = gather_records(c, mine.records, sizes, total);
    Bytes().swap(mine.records);
    const Schedule sched = assign(recs, c.size, c.rank, md.checksum_block, verify, budget);
    // 3. The reads and exchanges.
    return coop.run(sched, recs);
}

} // namespace cairn::detail
