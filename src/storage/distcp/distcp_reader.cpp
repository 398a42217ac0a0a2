#include "cairn/distcp.hpp"
#include "cairn/errors.hpp"
#include "core/strided.hpp"
#include "storage/distcp/mpiio.hpp"
#include "storage/fs.hpp"
#include "storage/hdf5/metadata_h5.hpp"

#include <algorithm>
#include <map>
#include <memory>

namespace cairn {

using detail::MpiFile;
namespace fs = detail::fs;

namespace {

// Gaps up to this size between two needed byte runs are read rather than
// skipped (data sieving): one larger read beats two small ones.
constexpr std::uint64_t k_sieve_gap = 128 * 1024;

bool safe_file_name(const std::string& name)
{
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

} // namespace

struct DistcpReader::Impl {
    std::size_t staging;
    std::string path;
    const Metadata* md = nullptr;
    std::uint64_t bytes_read = 0;
    std::map<std::string, std::unique_ptr<MpiFile>> files;
    std::vector<char> buffer;

    MpiFile& open(const std::string& name)
    {
        if (!safe_file_name(name))
            throw error::FormatError(fs::join(path, metadata_file_name) + ": chunk file name '" + name +
                                     "' is not a plain file name inside the checkpoint");
        auto& f = files[name];
        if (!f)
            f = std::make_unique<MpiFile>(fs::join(path, name), MpiFile::Mode::read);
        return *f;
    }

    void read(MpiFile& f, std::uint64_t offset, void* data, std::uint64_t n)
    {
        f.read_at(offset, data, n);
        bytes_read += n;
    }

    void read_array(const ReadItem& item, const ChunkMeta& chunk, DType dtype, LoadPlanner& planner);
};

void DistcpReader::Impl::read_array(const ReadItem& item, const ChunkMeta& chunk, DType dtype, LoadPlanner& planner)
{
    const DataRef dst = planner.resolve_destination(item);
    if (dst.space != MemorySpace::host)
        throw error::WrongAPIUsage("array '" + item.fqn + "': device memory cannot be loaded into by this build");
    const auto es = static_cast<std::uint64_t>(dtype_size(dtype));
    if (dst.view.elem_size != es || dst.view.shape != item.box.shape)
        throw error::WrongAPIUsage("array '" + item.fqn + "': the planner's destination does not match the region " +
                                   item.box.str());
    const Box& C = chunk.box;
    const Box& I = item.box;
    const std::size_t nd = C.ndim();
    if (I.ndim() != nd || !intersect(C, I) || intersect(C, I)->volume() != I.volume())
        throw error::FormatError("array '" + item.fqn + "': region " + I.str() + " is not inside stored chunk " + C.str());
    if (I.volume() == 0)
        return;
    MpiFile& f = open(chunk.storage.path);

    // A run is a stretch of the region contiguous in the file: dimensions
    // k.. of the region, where the region spans the chunk fully beyond k.
    std::size_t k = nd == 0 ? 0 : nd - 1;
    while (k > 0 && I.shape[k] == C.shape[k])
        --k;
    const Shape cs = row_major_strides(C.shape);
    std::uint64_t run_elems = 1;
    for (std::size_t d = k; d < nd; ++d)
        run_elems *= static_cast<std::uint64_t>(d == k ? I.shape[d] : C.shape[d]);
    std::uint64_t nruns = 1;
    for (std::size_t d = 0; d < k; ++d)
        nruns *= static_cast<std::uint64_t>(I.shape[d]);
    const std::uint64_t run_bytes = run_elems * es;
    const std::uint64_t cap = buffer.size();

    Shape idx(k, 0); // outer index of the current run
    auto run_offset = [&]() {
        std::int64_t e = 0;
        for (std::size_t d = 0; d < k; ++d)
            e += (I.offsets[d] - C.offsets[d] + idx[d]) * cs[d];
        if (nd > 0)
            e += (I.offsets[k] - C.offsets[k]) * cs[k];
        return chunk.storage.offset + static_cast<std::uint64_t>(e) * es;
    };
    auto next = [&]() {
        for (std::size_t d = k; d-- > 0;) {
            if (++idx[d] < I.shape[d])
                return;
            idx[d] = 0;
        }
    };

    std::uint64_t r = 0;
    while (r < nruns) {
        const auto first_off = run_offset();
        if (run_bytes > cap) {
            // One run larger than the buffer: read it in pieces.
            for (std::uint64_t e = 0; e < run_elems;) {
                const auto n = std::min<std::uint64_t>(run_elems - e, cap / es);
                read(f, first_off + e * es, buffer.data(), n * es);
                detail::unpack_range(dst.view, static_cast<std::int64_t>(r * run_elems + e), static_cast<std::int64_t>(n),
                                     buffer.data());
                e += n;
            }
            ++r;
            next();
            continue;
        }
        // Gather following runs into one read while the span fits and the
        // gaps are small.
        std::vector<std::uint64_t> offs{first_off};
        std::uint64_t end = first_off + run_bytes;
        auto r2 = r + 1;
        next();
        while (r2 < nruns) {
            const auto o = run_offset();
            if (o < end || o - end > k_sieve_gap || o + run_bytes - first_off > cap)
                break;
            offs.push_back(o);
            end = o + run_bytes;
            ++r2;
            next();
        }
        read(f, first_off, buffer.data(), end - first_off);
        for (std::size_t j = 0; j < offs.size(); ++j)
            detail::unpack_range(dst.view, static_cast<std::int64_t>((r + j) * run_elems),
                                 static_cast<std::int64_t>(run_elems), buffer.data() + (offs[j] - first_off));
        r = r2;
    }
}

DistcpReader::DistcpReader(std::size_t staging_bytes) : m_impl(std::make_unique<Impl>())
{
    if (staging_bytes < 4096)
        throw error::WrongAPIUsage("staging_bytes must be at least 4096, not " + std::to_string(staging_bytes));
    m_impl->staging = staging_bytes;
}

DistcpReader::~DistcpReader() = default;

void DistcpReader::reset(const std::string& checkpoint_id)
{
    if (checkpoint_id.empty())
        throw error::WrongAPIUsage("empty checkpoint id");
    m_impl->path = fs::strip(checkpoint_id);
    m_impl->files.clear();
    m_impl->bytes_read = 0;
}

Metadata DistcpReader::read_metadata()
{
    const auto& path = m_impl->path;
    if (!fs::is_directory(path))
        throw error::NotFound("no checkpoint at " + path + " (not a directory)");
    const auto mdfile = fs::join(path, metadata_file_name);
    if (!fs::exists(mdfile))
        throw error::NotFound(path + " is not a committed checkpoint: " + metadata_file_name +
                              " is missing (an interrupted save?)");
    auto md = detail::read_metadata_file(mdfile);
    if (md.layout != "distcp")
        throw error::FormatError(mdfile + ": layout '" + md.layout + "', expected 'distcp'");
    return md;
}

void DistcpReader::set_up_storage_reader(const Metadata& metadata, bool, MPI_Comm) { m_impl->md = &metadata; }

void DistcpReader::read_data(const LoadPlan& plan, LoadPlanner& planner)
{
    auto& im = *m_impl;
    im.bytes_read = 0;
    if (!im.md)
        throw error::WrongAPIUsage("DistcpReader::read_data before set_up_storage_reader");
    // Visit chunks in file order for sequential access.
    struct Task {
        const ReadItem* item;
        const EntryMeta* entry;
        const ChunkMeta* chunk;
    };
    std::vector<Task> tasks;
    tasks.reserve(plan.items.size());
    std::uint64_t largest = 0;
    for (const auto& item : plan.items) {
        auto e = im.md->entries.find(item.fqn);
        if (e == im.md->entries.end() || item.chunk >= e->second.chunks.size())
            throw error::WrongAPIUsage("read item for '" + item.fqn + "' chunk " + std::to_string(item.chunk) +
                                       " is not in the checkpoint's metadata");
        tasks.push_back(Task{&item, &e->second, &e->second.chunks[item.chunk]});
        largest = std::max(largest, e->second.chunks[item.chunk].storage.length);
    }
    std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) {
        return a.chunk->storage.path != b.chunk->storage.path ? a.chunk->storage.path < b.chunk->storage.path
                                                              : a.chunk->storage.offset < b.chunk->storage.offset;
    });
    im.buffer.resize(static_cast<std::size_t>(std::min<std::uint64_t>(im.staging, std::max<std::uint64_t>(largest, 4096))));
    for (const auto& t : tasks) {
        if (t.item->kind == ItemKind::bytes) {
            std::vector<std::byte> data(static_cast<std::size_t>(t.chunk->storage.length));
            if (!data.empty())
                im.read(im.open(t.chunk->storage.path), t.chunk->storage.offset, data.data(), data.size());
            planner.load_bytes(*t.item, std::move(data));
        } else {
            im.read_array(*t.item, *t.chunk, t.entry->dtype, planner);
        }
    }
    for (auto& [name, f] : im.files)
        f->close();
    im.files.clear();
}

std::uint64_t DistcpReader::bytes_read() const noexcept { return m_impl->bytes_read; }

} // namespace cairn
