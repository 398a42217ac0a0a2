#include "core/metadata_adapter.hpp"

#include "cairn/errors.hpp"

#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace cairn::detail {

namespace {

// The checkpoint-wide fields, from Metadata to MetadataColumns or back.
template <class To, class From>
void copy_header(To& to, const From& from)
{
    to.format_version = from.format_version;
    to.library_version = from.library_version;
    to.world_size = from.world_size;
    to.layout = from.layout;
    to.created = from.created;
    to.checksum_block = from.checksum_block;
}

} // namespace

MetadataColumns to_columns(const Metadata& md)
{
    MetadataColumns c;
    copy_header(c, md);
    std::size_t nchunks = 0, ncoords = 0, nsums = 0;
    for (const auto& [fqn, em] : md.entries) {
        nchunks += em.chunks.size();
        for (const auto& ch : em.chunks) {
            ncoords += ch.box.offsets.size() + ch.box.shape.size();
            nsums += ch.storage.checksums.size();
        }
    }
    c.entries.reserve(md.entries.size());
    c.boxes.reserve(ncoords);
    c.add_chunks(nchunks);
    c.sums.reserve(nsums);
    std::unordered_map<std::string_view, std::int64_t> file_index; // views of the chunks' paths
    std::size_t k = 0;
    for (const auto& [fqn, em] : md.entries) {
        MetadataColumns::Entry e;
        e.name = fqn;
        e.kind = em.kind;
        e.dtype = em.dtype;
        e.global_shape = em.global_shape;
        e.value = em.value;
        e.first_chunk = k;
        e.chunks = em.chunks.size();
        e.first_coord = c.boxes.size();
        for (const auto& ch : em.chunks) {
            const std::size_t nd = e.global_shape.size();
            if (ch.box.offsets.size() != nd || ch.box.shape.size() != nd)
                throw error::WriteError("metadata: chunk " + ch.box.str() + " of '" + fqn + "' does not have the " +
                                        std::to_string(nd) + " dimensions of its global shape " +
                                        shape_str(e.global_shape));
            c.boxes.insert(c.boxes.end(), ch.box.offsets.begin(), ch.box.offsets.end());
            c.boxes.insert(c.boxes.end(), ch.box.shape.begin(), ch.box.shape.end());
            auto [it, fresh] = file_index.try_emplace(ch.storage.path, static_cast<std::int64_t>(c.files.size()));
            if (fresh)
                c.files.push_back(ch.storage.path);
            c.chunk_file[k] = it->second;
            c.chunk_offset[k] = ch.storage.offset;
            c.chunk_length[k] = ch.storage.length;
            c.sum_begin[k] = c.sums.size();
            c.sum_count[k] = static_cast<std::uint32_t>(ch.storage.checksums.size());
            c.sums.insert(c.sums.end(), ch.storage.checksums.begin(), ch.storage.checksums.end());
            ++k;
        }
        c.entries.push_back(std::move(e));
    }
    return c;
}

namespace {

template <class Columns>
Metadata metadata_of(Columns& c)
{
    Metadata md;
    copy_header(md, c);
    constexpr bool move = !std::is_const_v<Columns>;
    for (auto& e : c.entries) {
        EntryMeta em;
        em.kind = e.kind;
        em.dtype = e.dtype;
        if constexpr (move) {
            em.global_shape = std::move(e.global_shape);
            em.value = std::move(e.value);
        } else {
            em.global_shape = e.global_shape;
            em.value = e.value;
        }
        em.chunks.resize(e.chunks);
        const std::size_t nd = em.global_shape.size();
        for (std::size_t j = 0; j < e.chunks; ++j) {
            auto& ch = em.chunks[j];
            const std::int64_t* b = c.boxes.data() + e.first_coord + 2 * nd * j;
            ch.box.offsets.assign(b, b + nd);
            ch.box.shape.assign(b + nd, b + 2 * nd);
            const std::size_t k = e.first_chunk + j;
            if (c.chunk_file[k] >= 0)
                ch.storage.path = c.files[static_cast<std::size_t>(c.chunk_file[k])];
            ch.storage.offset = c.chunk_offset[k];
            ch.storage.length = c.chunk_length[k];
            const auto* s = c.sums.data() + c.sum_begin[k];
            ch.storage.checksums.assign(s, s + c.sum_count[k]);
        }
        if constexpr (move)
            md.entries.emplace_hint(md.entries.end(), std::move(e.name), std::move(em));
        else
            md.entries.emplace_hint(md.entries.end(), e.name, std::move(em));
    }
    return md;
}

} // namespace

Metadata to_metadata(const MetadataColumns& md) { return metadata_of(md); }

Metadata to_metadata(MetadataColumns&& md) { return metadata_of(md); }

} // namespace cairn::detail
