// verify(), phase by phase (docs/DESIGN.md, "The save and load sequences"):
//   metadata (the coordinator reads it) -> share (broadcast in frames, the
//   chunks dealt out to the ranks as they arrive) -> verify (each rank
//   checks its chunks) -> report (every problem to every rank).
// Every phase that can fail on one rank ends in an error agreement
// (run_phase), so all ranks leave together with the same exception.
#include "cairn/checkpoint.hpp"

#include "cairn/async.hpp"
#include "driver/read_session.hpp"
#include "storage/columnar_storage.hpp"

#include <functional>
#include <queue>

namespace cairn {

std::uint64_t StorageReader::verify_chunk(const std::string& fqn, const EntryMeta&, const ChunkMeta&)
{
    throw error::WrongAPIUsage("this storage cannot verify checkpoints (entry '" + fqn + "')");
}

namespace {

using detail::Bytes;
using detail::ReadSession;
using detail::run_phase;

// A chunk this rank checks.
struct Job {
    std::string fqn;
    std::size_t kept; // index among the entry's kept chunks
};

// Chunks to ranks as they arrive, each to the rank with the fewest bytes so
// far (the lowest of equals): every rank makes the same choices from the
// same stream and keeps only its own chunks (and each entry's first, which
// names a container's dataset). Memory per rank follows its share.
class Dealer {
public:
    explicit Dealer(const detail::Comm& c) : m_rank(c.rank)
    {
        for (int r = 0; r < c.size; ++r)
            m_least.emplace(0, r);
    }
    /// A decoder that deals out the chunks it decodes.
    detail::MetadataDecoder decoder()
    {
        return detail::MetadataDecoder(
            [this](const std::string& fqn, std::size_t k, std::uint64_t length) { return deal(fqn, k, length); });
    }
    std::vector<Job> jobs;     ///< this rank's chunks
    std::uint64_t bytes = 0;   ///< their bytes

private:
    bool deal(const std::string& fqn, std::size_t k, std::uint64_t length)
    {
        if (k == 0)
            m_kept_of_entry = 0;
        auto [sofar, r] = m_least.top();
        m_least.pop();
        m_least.emplace(sofar + length + 1, r);
        const bool mine = r == m_rank;
        if (mine) {
            jobs.push_back(Job{fqn, m_kept_of_entry});
            bytes += length;
        }
        if (mine || k == 0)
            ++m_kept_of_entry;
        return mine;
    }
    using Share = std::pair<std::uint64_t, int>; // bytes so far, rank
    int m_rank;
    std::priority_queue<Share, std::vector<Share>, std::greater<>> m_least;
    std::size_t m_kept_of_entry = 0;
};

// Phase "set up", collective: the metadata broadcast, this rank keeping its
// share of the chunks (`dealer`), and the reader set up with it.
Metadata share_metadata(ReadSession& s, std::unique_ptr<detail::MetadataFrames> frames, Dealer& dealer)
{
    Metadata md;
    auto dec = dealer.decoder();
    run_phase(s.comm, "set up", [&] {
        detail::share_metadata(s.comm, frames.get(), &dec);
        frames.reset();
        md = dec.finish();
        s.storage->set_up_storage_reader(md, s.comm.coordinator(), s.comm.comm);
        s.log.finished();
    });
    return md;
}

// Runs `check`; damage it finds becomes a line of `problems`; a storage that
// cannot verify (a usage error) throws.
template <class F>
void note_damage(const detail::Comm& c, std::string& problems, F&& check)
{
    try {
        check();
    } catch (const Error& e) {
        if (e.kind() == Error::Kind::usage)
            throw;
        problems += "rank " + std::to_string(c.rank) + ": " + e.what() + "\n";
    }
}

// A container also holds each scalar and string as a dataset, for other
// readers (h5py): each must hold the metadata's value
// (ColumnarReader::verify_value). Shared out like check_datasets: every
// size-th one from this rank's.
void verify_values(ReadSession& s, const Metadata& md, std::string& problems)
{
    detail::ColumnarReader* reader = s.storage->columnar();
    if (!reader)
        return;
    std::size_t n = 0;
    for (const auto& [fqn, entry] : md.entries) {
        if (entry.kind != ItemKind::scalar && entry.kind != ItemKind::string)
            continue;
        if (static_cast<int>(n++ % static_cast<std::size_t>(s.comm.size)) != s.comm.rank)
            continue;
        note_damage(s.comm, problems, [&, &fqn = fqn, &entry = entry] {
            reader->verify_value(fqn, entry);
        });
    }
}

// Phase "verify", collective: every rank checks its chunks. Damage is
// reported, one line per problem in `problems`; a storage that cannot
// verify (a usage error) fails on every rank, also on those with nothing to
// check. Returns this rank's chunks and bytes checked.
std::pair<std::uint64_t, std::uint64_t> verify_chunks(ReadSession& s, const Metadata& md, const Dealer& dealer,
                                                      std::string& problems)
{
    std::uint64_t chunks = 0, bytes = 0, done = 0;
    run_phase(s.comm, "verify", [&] {
        s.log.started(dealer.bytes);
        for (const Job& j : dealer.jobs) {
            const EntryMeta& entry = md.entries.at(j.fqn);
            const ChunkMeta& chunk = entry.chunks.at(j.kept);
            note_damage(s.comm, problems, [&] {
                bytes += s.storage->verify_chunk(j.fqn, entry, chunk);
                ++chunks;
            });
            done += chunk.storage.length;
            s.log.progress(done);
        }
        verify_values(s, md, problems);
        s.log.finished();
    });
    return {chunks, bytes};
}

// Collective: every rank's problems to every rank, in rank order.
std::vector<std::string> all_problems(const detail::Comm& c, const std::string& mine)
{
    const auto all = detail::gather_bytes(c, Bytes(reinterpret_cast<const std::byte*>(mine.data()),
                                                   reinterpret_cast<const std::byte*>(mine.data() + mine.size())));
    Bytes text;
    if (c.coordinator())
        for (const auto& b : all)
            text.insert(text.end(), b.begin(), b.end());
    detail::bcast_bytes(c, text);
    std::string lines(reinterpret_cast<const char*>(text.data()), text.size());
    std::vector<std::string> problems;
    for (std::size_t p = 0; p < lines.size();) {
        const auto nl = lines.find('\n', p);
        problems.push_back(lines.substr(p, nl - p));
        p = nl + 1;
    }
    return problems;
}

} // namespace

VerifyReport verify(const std::string& checkpoint_id, MPI_Comm comm, const LoadOptions& options)
{
    wait_for_async_saves(); // HDF5 (usually not thread-safe) is never called from two threads at once
    ReadSession s(comm, checkpoint_id, options, "verify");

    s.log.begin(Phase::plan);
    Dealer dealer(s.comm);
    const Metadata md = share_metadata(s, detail::open_and_read_metadata(s), dealer);
    s.log.end();

    s.log.begin(Phase::verify);
    std::string mine; // this rank's problems, one per line
    const auto [chunks, bytes] = verify_chunks(s, md, dealer, mine);

    VerifyReport report;
    report.problems = all_problems(s.comm, mine);
    std::uint64_t sums[4] = {chunks, bytes, detail::replaced_meanwhile(s) ? 1u : 0u, s.log.profile_flag()};
    detail::allreduce_sum(s.comm, sums, 4);
    if (sums[2] != 0)
        throw detail::replaced_error(s);
    report.chunks = sums[0];
    report.bytes = sums[1];
    report.checksums = md.checksum_block != 0;
    s.log.count(bytes); // the per-rank line, like the total: bytes checked
    s.log.end(report.bytes);
    s.log.finish(report.bytes);
    if (sums[3] != 0)
        s.log.profile(s.comm.comm, detail::layout_name(s));
    return report;
}

} // namespace cairn
