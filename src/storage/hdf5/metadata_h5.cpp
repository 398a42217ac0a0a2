#include "storage/hdf5/metadata_h5.hpp"

#include "cairn/errors.hpp"
#include "storage/fs.hpp"
#include "storage/hdf5/h5.hpp"

#include <cstdio>
#include <map>

namespace cairn::detail {

using h5::check;
using h5::check_status;
using h5::Handle;

std::string escape_name(const std::string& fqn)
{
    std::string out;
    out.reserve(fqn.size());
    for (std::size_t i = 0; i < fqn.size(); ++i) {
        const char ch = fqn[i];
        if (ch == '%')
            out += "%25";
        else if (ch == '/')
            out += "%2F";
        else if (ch == '.' && i == 0)
            out += "%2E";
        else
            out += ch;
    }
    return out;
}

void write_metadata_group(hid_t loc, const Metadata& md)
{
    Handle gcpl(check(H5Pcreate(H5P_GROUP_CREATE), "metadata", true));
    // Groups keep their entries in creation order for h5dump; large
    // attribute sets go to dense storage.
    check_status(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED), "metadata", true);
    Handle root(check(H5Gcreate2(loc, "cairn", H5P_DEFAULT, gcpl, H5P_DEFAULT), "creating group /cairn", true));
    h5::write_i64_attr(root, "format_version", {md.format_version}, {});
    h5::write_string_attr(root, "library_version", md.library_version);
    h5::write_i64_attr(root, "world_size", {md.world_size}, {});
    h5::write_string_attr(root, "layout", md.layout);
    h5::write_string_attr(root, "created", md.created);
    h5::write_i64_attr(root, "entry_count", {static_cast<std::int64_t>(md.entries.size())}, {});

    // The table of data files; chunks refer to it by index.
    std::map<std::string, std::int64_t> file_index;
    std::vector<const char*> files;
    for (const auto& [fqn, em] : md.entries)
        for (const auto& c : em.chunks)
            if (file_index.emplace(c.storage.path, static_cast<std::int64_t>(files.size())).second)
                files.push_back(c.storage.path.c_str());
    {
        const std::string what = "writing attribute 'files'";
        Handle type(check(H5Tcopy(H5T_C_S1), what, true));
        H5Tset_size(type, H5T_VARIABLE);
        H5Tset_cset(type, H5T_CSET_UTF8);
        const hsize_t n = files.size();
        Handle space(check(n ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_NULL), what, true));
        Handle attr(check(H5Acreate2(root, "files", type, space, H5P_DEFAULT, H5P_DEFAULT), what, true));
        if (n)
            check_status(H5Awrite(attr, type, files.data()), what, true);
    }

    Handle entries(check(H5Gcreate2(root, "entries", H5P_DEFAULT, gcpl, H5P_DEFAULT), "creating /cairn/entries", true));
    for (const auto& [fqn, em] : md.entries) {
        Handle g(check(H5Gcreate2(entries, escape_name(fqn).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                       "creating the metadata group of '" + fqn + "'", true));
        h5::write_string_attr(g, "name", fqn);
        h5::write_string_attr(g, "kind", item_kind_name(em.kind));
        if (em.kind == ItemKind::string) {
            h5::write_string_attr(g, "value", em.value);
            continue;
        }
        h5::write_string_attr(g, "dtype", std::string(dtype_name(em.dtype)));
        if (em.kind == ItemKind::scalar) {
            h5::write_raw_attr(g, "value", h5::native_type(static_cast<int>(em.dtype)), em.value.data());
            continue;
        }
        const auto nd = em.global_shape.size();
        const auto nc = em.chunks.size();
        h5::write_i64_attr(g, "global_shape", em.global_shape, {nd});
        std::vector<std::int64_t> offs, shapes, fidx;
        std::vector<std::uint64_t> off, len;
        for (const auto& c : em.chunks) {
            offs.insert(offs.end(), c.box.offsets.begin(), c.box.offsets.end());
            shapes.insert(shapes.end(), c.box.shape.begin(), c.box.shape.end());
            fidx.push_back(file_index.at(c.storage.path));
            off.push_back(c.storage.offset);
            len.push_back(c.storage.length);
        }
        h5::write_i64_attr(g, "chunk_offsets", offs, {nc, nd});
        h5::write_i64_attr(g, "chunk_shapes", shapes, {nc, nd});
        h5::write_i64_attr(g, "chunk_file", fidx, {nc});
        h5::write_u64_attr(g, "chunk_offset", off);
        h5::write_u64_attr(g, "chunk_length", len);
    }
}

namespace {

struct IterState {
    std::vector<std::string> names;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* data)
{
    static_cast<IterState*>(data)->names.emplace_back(name);
    return 0;
}

ItemKind kind_from_name(const std::string& s, const std::string& where)
{
    for (auto k : {ItemKind::array, ItemKind::bytes, ItemKind::scalar, ItemKind::string})
        if (s == item_kind_name(k))
            return k;
    throw error::FormatError(where + ": unknown kind '" + s + "'");
}

} // namespace

Metadata read_metadata_group(hid_t loc, const std::string& where)
{
    if (H5Lexists(loc, "cairn", H5P_DEFAULT) <= 0)
        throw error::FormatError(where + ": no group /cairn (not a Cairn checkpoint)");
    Handle root(check(H5Gopen2(loc, "cairn", H5P_DEFAULT), where + ": opening /cairn", false));
    Metadata md;
    const std::string rw = where + ": /cairn";
    const auto fv = h5::read_i64_attr(root, "format_version", rw);
    if (fv.size() != 1)
        throw error::FormatError(rw + ": attribute 'format_version' is not a single integer");
    if (fv[0] < 1 || fv[0] > Metadata::current_format_version)
        throw error::FormatError(rw + ": format version " + std::to_string(fv[0]) + ", this Cairn reads versions 1 to " +
                                 std::to_string(Metadata::current_format_version) +
                                 (fv[0] > Metadata::current_format_version ? " (written by a newer Cairn)" : ""));
    md.format_version = static_cast<int>(fv[0]);
    md.library_version = h5::read_string_attr(root, "library_version", rw);
    const auto ws = h5::read_i64_attr(root, "world_size", rw);
    if (ws.size() != 1 || ws[0] < 1 || ws[0] > (std::int64_t(1) << 30))
        throw error::FormatError(rw + ": invalid world_size");
    md.world_size = static_cast<int>(ws[0]);
    md.layout = h5::read_string_attr(root, "layout", rw);
    md.created = h5::read_string_attr(root, "created", rw);

    // The file table.
    std::vector<std::string> files;
    {
        if (!h5::has_attr(root, "files"))
            throw error::FormatError(rw + ": attribute 'files' is missing");
        Handle attr(check(H5Aopen(root, "files", H5P_DEFAULT), rw + ": attribute 'files'", false));
        Handle space(check(H5Aget_space(attr), rw, false));
        Handle ftype(check(H5Aget_type(attr), rw, false));
        if (H5Sget_simple_extent_type(space) == H5S_SIMPLE) {
            if (H5Tget_class(ftype) != H5T_STRING || H5Tis_variable_str(ftype) <= 0)
                throw error::FormatError(rw + ": attribute 'files' is not an array of strings");
            const auto n = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space));
            std::vector<char*> p(n, nullptr);
            Handle mtype(H5Tcopy(H5T_C_S1));
            H5Tset_size(mtype, H5T_VARIABLE);
            H5Tset_cset(mtype, H5Tget_cset(ftype));
            check_status(H5Aread(attr, mtype, p.data()), rw + ": attribute 'files'", false);
            for (auto* s : p)
                files.emplace_back(s ? s : "");
            H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, p.data());
        }
    }

    if (H5Lexists(root, "entries", H5P_DEFAULT) <= 0)
        throw error::FormatError(rw + ": group 'entries' is missing");
    Handle entries(check(H5Gopen2(root, "entries", H5P_DEFAULT), rw + "/entries", false));
    IterState st;
    hsize_t idx = 0;
    check_status(H5Literate(entries, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, collect_link, &st),
                 rw + ": listing /cairn/entries", false);
    const auto count = h5::read_i64_attr(root, "entry_count", rw);
    if (count.size() != 1 || count[0] != static_cast<std::int64_t>(st.names.size()))
        throw error::FormatError(rw + ": entry_count does not match the " + std::to_string(st.names.size()) +
                                 " groups in /cairn/entries (truncated metadata?)");

    for (const auto& link : st.names) {
        const std::string ew = where + ": /cairn/entries/" + link;
        Handle g(check(H5Gopen2(entries, link.c_str(), H5P_DEFAULT), ew, false));
        const std::string fqn = h5::read_string_attr(g, "name", ew);
        if (escape_name(fqn) != link)
            throw error::FormatError(ew + ": attribute 'name' (\"" + fqn + "\") does not match the group name");
        EntryMeta em;
        em.kind = kind_from_name(h5::read_string_attr(g, "kind", ew), ew);
        if (em.kind == ItemKind::string) {
            em.value = h5::read_string_attr(g, "value", ew);
        } else {
            em.dtype = dtype_from_name(h5::read_string_attr(g, "dtype", ew));
        }
        if (em.kind == ItemKind::scalar) {
            em.value.resize(dtype_size(em.dtype));
            h5::read_raw_attr(g, "value", h5::native_type(static_cast<int>(em.dtype)), em.value.data(), ew);
        }
        if (em.kind == ItemKind::array || em.kind == ItemKind::bytes) {
            em.global_shape = h5::read_i64_attr(g, "global_shape", ew);
            const auto nd = em.global_shape.size();
            if (nd > 32)
                throw error::FormatError(ew + ": rank " + std::to_string(nd) + " exceeds 32");
            for (auto s : em.global_shape)
                if (s < 0)
                    throw error::FormatError(ew + ": negative extent in global_shape");
            if (em.kind == ItemKind::bytes && nd != 1)
                throw error::FormatError(ew + ": a bytes entry must have a 1-d global_shape");
            const auto fidx = h5::read_i64_attr(g, "chunk_file", ew);
            const auto off = h5::read_u64_attr(g, "chunk_offset", ew);
            const auto len = h5::read_u64_attr(g, "chunk_length", ew);
            const auto offs = h5::read_i64_attr(g, "chunk_offsets", ew);
            const auto shapes = h5::read_i64_attr(g, "chunk_shapes", ew);
            const auto nc = fidx.size();
            if (off.size() != nc || len.size() != nc || offs.size() != nc * nd || shapes.size() != nc * nd)
                throw error::FormatError(ew + ": chunk attributes disagree on the number of chunks");
            em.chunks.resize(nc);
            for (std::size_t c = 0; c < nc; ++c) {
                auto& ch = em.chunks[c];
                ch.box.offsets.assign(offs.begin() + static_cast<std::ptrdiff_t>(c * nd),
                                      offs.begin() + static_cast<std::ptrdiff_t>((c + 1) * nd));
                ch.box.shape.assign(shapes.begin() + static_cast<std::ptrdiff_t>(c * nd),
                                    shapes.begin() + static_cast<std::ptrdiff_t>((c + 1) * nd));
                if (!ch.box.inside(em.global_shape))
                    throw error::FormatError(ew + ": chunk " + std::to_string(c) + " box " + ch.box.str() +
                                             " lies outside the global shape " + shape_str(em.global_shape));
                if (fidx[c] < 0 || static_cast<std::size_t>(fidx[c]) >= files.size())
                    throw error::FormatError(ew + ": chunk " + std::to_string(c) + " names file " +
                                             std::to_string(fidx[c]) + " of " + std::to_string(files.size()));
                const auto expect = static_cast<std::uint64_t>(ch.box.volume()) *
                                    (em.kind == ItemKind::bytes ? 1 : dtype_size(em.dtype));
                if (len[c] != expect)
                    throw error::FormatError(ew + ": chunk " + std::to_string(c) + " has length " +
                                             std::to_string(len[c]) + ", its box needs " + std::to_string(expect));
                ch.storage = StorageInfo{files[static_cast<std::size_t>(fidx[c])], off[c], len[c]};
            }
        }
        md.entries.emplace(fqn, std::move(em));
    }
    return md;
}

void write_metadata_file(const std::string& path, const Metadata& md, bool durable)
{
    h5::ErrorSilencer quiet;
    Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), path, true));
    check_status(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST), path, true);
    {
        Handle file(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "creating " + path, true));
        write_metadata_group(file, md);
        if (!file.reset())
            throw error::WriteError("closing " + path + ": " + h5::last_error());
    }
    if (durable)
        fs::fsync_path(path);
}

Metadata read_metadata_file(const std::string& path)
{
    if (!fs::exists(path))
        throw error::NotFound("no checkpoint metadata at " + path);
    h5::ErrorSilencer quiet;
    if (H5Fis_hdf5(path.c_str()) <= 0)
        throw error::FormatError(path + ": not an HDF5 file");
    Handle file(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "opening " + path, false));
    return read_metadata_group(file, path);
}

} // namespace cairn::detail

namespace cairn {

void write_metadata_file(const std::string& path, const Metadata& metadata, bool durable)
{
    detail::write_metadata_file(path, metadata, durable);
}

Metadata read_metadata_file(const std::string& path) { return detail::read_metadata_file(path); }

} // namespace cairn
