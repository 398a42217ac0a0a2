// The per-rank layout on disk: file names, several files per rank, alignment,
// coalescing of small items, metadata readable by h5dump.
#include "fixtures.hpp"
#include "outcome.hpp"
#include "../damage.hpp"
#include "runs_checkpoint.hpp"

#include <catch2/catch.hpp>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <set>

using namespace cairn_test;

TEST_CASE("per-rank files, alignment and several files per rank", "[storage]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("layout_" + std::to_string(w)) + "/ckpt";
    // Six large arrays (8 KiB per rank each) and 50 small ones per rank.
    std::vector<std::unique_ptr<LocalArray>> arrays;
    cairn::StateDict sd;
    for (int i = 0; i < 6; ++i) {
        arrays.push_back(std::make_unique<LocalArray>("big" + std::to_string(i), cairn::DType::f64,
                                                      cairn::Shape{w * 1024}, cairn::Box{{r * 1024}, {1024}}, 0, i));
        arrays.back()->fill();
        sd.add_array("big" + std::to_string(i), arrays.back()->shard());
    }
    for (int i = 0; i < 50; ++i) {
        arrays.push_back(std::make_unique<LocalArray>("small" + std::to_string(i), cairn::DType::i16,
                                                      cairn::Shape{w * 3}, cairn::Box{{r * 3}, {3}}, 1, 100 + i));
        arrays.back()->fill();
        sd.add_array("small" + std::to_string(i), arrays.back()->shard());
    }
    cairn::SaveOptions o;
    o.files_per_rank = 3;
    o.alignment = 4096;
    o.staging_bytes = 16384; // forces several flushes of the staging buffer
    const auto res = cairn::save(sd, dir, MPI_COMM_WORLD, o);
    CHECK(res.bytes_written == static_cast<std::uint64_t>(w) * (6 * 1024 * 8 + 50 * 3 * 2));

    const auto md = cairn::read_metadata(dir);
    CHECK(md.layout == "distcp");
    CHECK(md.world_size == w);
    std::set<std::string> files;
    bool aligned = true;
    for (const auto& [fqn, e] : md.entries) {
        CHECK(e.chunks.size() == static_cast<std::size_t>(w));
        for (const auto& c : e.chunks) {
            files.insert(c.storage.path);
            if (c.storage.length >= 4096)
                aligned = aligned && c.storage.offset % 4096 == 0;
        }
    }
    CHECK(aligned);
    CHECK(files.size() == static_cast<std::size_t>(3 * w));
    for (int rank = 0; rank < w; ++rank)
        for (int k = 0; k < 3; ++k)
            CHECK(files.count("__" + std::to_string(rank) + "_" + std::to_string(k) + ".distcp") == 1);

    // Everything loads back on a different decomposition.
    for (auto& a : arrays)
        std::fill(a->buf.begin(), a->buf.end(), 0xAB);
    std::vector<std::unique_ptr<LocalArray>> back;
    cairn::StateDict in;
    for (auto& a : arrays) {
        back.push_back(std::make_unique<LocalArray>(a->name, a->dtype, a->global,
                                                    decompose(a->global, Decomp::dim0, w, w - 1 - r), 1, a->salt));
        in.add_array(a->name, back.back()->shard());
    }
    cairn::load(in, dir, MPI_COMM_WORLD);
    std::int64_t bad = 0;
    for (auto& b : back)
        bad += b->errors();
    CHECK(all(bad == 0));
}

TEST_CASE("per-rank files take MPI-IO hints; a hint MPI cannot hold fails every rank", "[storage][hints]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("hints_" + std::to_string(w));
    LocalArray a("a", cairn::DType::f64, cairn::Shape{w * 512}, cairn::Box{{r * 512}, {512}}, 0, 7);
    a.fill();
    cairn::StateDict sd;
    sd.add_array("a", a.shard());
    cairn::SaveOptions o;
    o.files_per_rank = 2;
    o.per_rank.mpi_hints = {{"cb_buffer_size", "1048576"}, {"cairn_unknown_hint", "1"}};
    cairn::save(sd, dir + "/ok", MPI_COMM_WORLD, o);
    LocalArray b("a", cairn::DType::f64, cairn::Shape{w * 512}, decompose(cairn::Shape{w * 512}, Decomp::dim0, w, w - 1 - r),
                 1, 7);
    cairn::StateDict in;
    in.add_array("a", b.shard());
    cairn::LoadOptions lo;
    lo.per_rank.mpi_hints = {{"romio_ds_read", "disable"}};
    cairn::load(in, dir + "/ok", MPI_COMM_WORLD, lo);
    CHECK(all(b.errors() == 0));

    // One rank's options hold a key longer than MPI_MAX_INFO_KEY: every rank
    // fails with the hint named, before anything is written.
    cairn::SaveOptions bad;
    if (r == w - 1)
        bad.per_rank.mpi_hints = {{"cb_nodes", "1"}, {std::string(300, 'k'), "1"}};
    auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, dir + "/bad", MPI_COMM_WORLD, bad); });
    CHECK(contains(msg, "MPI-IO hint 'kkkk"));
    CHECK(all(!std::filesystem::exists(dir + "/bad")));
    // The same for a load, and for a value longer than MPI_MAX_INFO_VAL; the
    // checkpoint stays loadable.
    cairn::LoadOptions bad_load;
    if (r == 0)
        bad_load.per_rank.mpi_hints = {{"striping_factor", std::string(MPI_MAX_INFO_VAL + 10, '1')}};
    msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::load(in, dir + "/ok", MPI_COMM_WORLD, bad_load); });
    CHECK(contains(msg, "MPI-IO hint 'striping_factor'"));
    cairn::load(in, dir + "/ok", MPI_COMM_WORLD);
    CHECK(all(b.errors() == 0));
}

TEST_CASE("the metadata is an HDF5 attribute group h5dump can read", "[storage][hdf5]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("h5dump_" + std::to_string(w)) + "/ckpt";
    TestState s(standard_arrays(), Decomp::dim0, w, r, 0, true);
    cairn::save(s.dict, dir, MPI_COMM_WORLD);
    if (r == 0) {
        const std::string out = dir + "/../h5dump.txt";
        const int rc = std::system(("h5dump -A " + dir + "/metadata.h5 > " + out + " 2>&1").c_str());
        CHECK(rc == 0);
        std::ifstream f(out);
        const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        CHECK(text.find("ATTRIBUTE \"names\"") != std::string::npos);
        CHECK(text.find("\"fluid.a2\"") != std::string::npos);
        CHECK(text.find("\"format_version\"") != std::string::npos);
        CHECK(text.find("\"chunk_boxes\"") != std::string::npos);
        // Everything the metadata records: versions, world size, per array
        // its dtype, global shape, chunk boxes and where each chunk lives.
        for (const char* attr : {"library_version", "world_size", "layout", "created", "entry_count", "files", "kinds",
                                 "dtypes", "ndims", "global_shapes", "chunk_counts", "chunk_files", "chunk_offsets",
                                 "chunk_lengths", "checksum_algorithm", "checksum_block_bytes", "chunk_checksums"})
            CHECK(text.find("ATTRIBUTE \"" + std::string(attr) + "\"") != std::string::npos);
        CHECK(text.find("\"" + std::string(cairn::version()) + "\"") != std::string::npos);
        CHECK(text.find("\"__0_0.distcp\"") != std::string::npos);
        CHECK(text.find("\"distcp\"") != std::string::npos);
        CHECK(text.find("GROUP \"values\"") != std::string::npos);
        CHECK(text.find("(0): 4711") != std::string::npos); // the scalar "step"
        CHECK(text.find(" run/1\"") != std::string::npos);  // the string "label"
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

namespace {
// A bit flip at `pos` of `file`, which must succeed.
void flip(const std::string& file, std::streamoff pos, char mask)
{
    CHECK(cairn_test::flip_bits(file, pos, mask)); // no REQUIRE: called on one rank, the others would wait
}

// cairn_test::chunk_start, which must find the byte.
std::pair<std::string, std::streamoff> first_byte(const std::string& id, const cairn::EntryMeta& entry,
                                                  const cairn::ChunkMeta& chunk, bool container)
{
    auto at = cairn_test::chunk_start(id, entry, chunk, container);
    REQUIRE(at.second >= 0);
    return at;
}
} // namespace

TEST_CASE("checksums catch a flipped bit on load and in verify", "[storage][checksum]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("bitflip_" + std::to_string(w)) + "/ckpt";
    TestState s(standard_arrays(), Decomp::dim0, w, r, 0, true);
    cairn::SaveOptions so;
    so.checksum_block = 256; // many blocks per chunk
    cairn::save(s.dict, dir, MPI_COMM_WORLD, so);

    auto clean = cairn::verify(dir, MPI_COMM_WORLD);
    CHECK(clean.ok());
    CHECK(clean.checksums);
    CHECK(clean.chunks > 0);

    // Flip one bit in the middle of the chunk of "a3" stored by rank 0.
    const auto md = cairn::read_metadata(dir);
    const auto& chunk = md.entries.at("a3").chunks.at(0);
    const std::string file = dir + "/" + chunk.storage.path;
    const auto pos = static_cast<std::streamoff>(chunk.storage.offset + chunk.storage.length / 2);
    if (r == 0) {
        flip(file, pos, 0x10);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    const auto bad = cairn::verify(dir, MPI_COMM_WORLD);
    REQUIRE(bad.problems.size() == 1);
    CHECK(bad.problems[0].find("'a3'") != std::string::npos);
    CHECK(bad.problems[0].find(chunk.storage.path) != std::string::npos);

    // Every rank whose box overlaps the damaged block... and so every rank,
    // by agreement, gets the error naming the array, file and byte range.
    TestState back(standard_arrays(), Decomp::dim0, w, r, 0, false);
    std::string msg;
    try {
        cairn::load(back.dict, dir, MPI_COMM_WORLD);
    } catch (const cairn::error::IntegrityError& e) {
        msg = e.what();
    }
    CHECK(all(msg.find("checksum mismatch in 'a3'") != std::string::npos));
    CHECK(all(msg.find(chunk.storage.path) != std::string::npos));
    CHECK(all(msg.find("bytes [") != std::string::npos));

    // Verification can be turned off: the load then completes.
    cairn::LoadOptions lo;
    lo.verify_checksums = false;
    CHECK_NOTHROW(cairn::load(back.dict, dir, MPI_COMM_WORLD, lo));
}

TEST_CASE("direct reads of a large chunk in pieces of the staging bound verify every piece", "[storage][checksum]")
{
    // A dense chunk (runs of 1 MiB and more) is read straight into the
    // destination in pieces of LoadOptions::staging_bytes, each verified
    // after its read: with a bound of 4096 bytes a chunk of 2 MiB takes
    // hundreds of pieces; a flipped bit in its last eighth must still be
    // caught, and a clean checkpoint must load exactly.
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("pieces_" + std::to_string(w)) + "/ckpt";
    const std::vector<ArraySpec> specs = {{"big", cairn::DType::f64, {2048, 512}, 9}}; // 8 MiB
    TestState s(specs, Decomp::dim0, w, r, 0, true);
    cairn::SaveOptions so;
    so.checksum_block = 4096; // one row per block
    cairn::save(s.dict, dir, MPI_COMM_WORLD, so);
    cairn::LoadOptions small;
    small.staging_bytes = 4096;
    {
        TestState back(specs, Decomp::dim0, w, r, 0, false);
        cairn::load(back.dict, dir, MPI_COMM_WORLD, small);
        CHECK(all(back.errors() == 0));
    }
    const auto md = cairn::read_metadata(dir);
    const auto& chunk = md.entries.at("big").chunks.at(0);
    REQUIRE(chunk.storage.length >= std::uint64_t(2) << 20);
    if (r == 0) {
        const auto pos = static_cast<std::streamoff>(chunk.storage.offset + chunk.storage.length * 7 / 8);
        flip(dir + "/" + chunk.storage.path, pos, 0x08);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (const std::size_t bound : {std::size_t(4096), std::size_t(64) << 20}) {
        INFO("staging bound " << bound);
        TestState back(specs, Decomp::dim0, w, r, 0, false);
        cairn::LoadOptions lo;
        lo.staging_bytes = bound;
        std::string msg;
        try {
            cairn::load(back.dict, dir, MPI_COMM_WORLD, lo);
        } catch (const cairn::error::IntegrityError& e) {
            msg = e.what();
        }
        CHECK(all(msg.find("checksum mismatch in 'big'") != std::string::npos));
        CHECK(all(msg.find(chunk.storage.path) != std::string::npos));
    }
}

TEST_CASE("durable saves: chunks written straight from memory are hashed during the sync", "[storage][checksum]")
{
    // Dense chunks (no ghost cells) of at least an eighth of the staging
    // bound go straight from the caller's memory and are hashed while the
    // sync runs; with fsync (the default) their checksums must be complete
    // and right in both layouts.
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("hash_sync_" + std::to_string(w));
    auto specs = standard_arrays();
    specs.push_back({"big", cairn::DType::f64, {64, 32}, 8}); // 4 KiB and more per rank: direct
    for (const std::string id : {dir + "/ckpt", dir + "/ckpt.h5"}) {
        INFO(id);
        TestState s(specs, Decomp::dim0, w, r, 0, true);
        cairn::SaveOptions so;
        so.checksum_block = 512;  // several blocks per chunk
        so.staging_bytes = 4096;  // direct from 512 bytes on
        REQUIRE(so.fsync);
        cairn::save(s.dict, id, MPI_COMM_WORLD, so);
        const auto md = cairn::read_metadata(id);
        std::size_t blocks = 0;
        for (const auto& [name, e] : md.entries)
            for (const auto& c : e.chunks)
                blocks += c.storage.checksums.size();
        CHECK(blocks > 0);
        const auto v = cairn::verify(id, MPI_COMM_WORLD);
        CHECK(v.ok());
        CHECK(v.checksums);
        TestState back(specs, Decomp::last_dim, w, w - 1 - r, 0, false);
        cairn::load(back.dict, id, MPI_COMM_WORLD);
        CHECK(all(back.errors() == 0));
    }
}

TEST_CASE("durable saves with early writeback: large chunks written in pieces keep every value", "[storage][writeback]")
{
    // SaveOptions::writeback_bytes of 1 MiB: pieces of 1 MiB. Dense chunks of
    // more than that are written in pieces straight from memory (container:
    // one HDF5 write per piece, collective or, with one writer, independent;
    // ranks with fewer pieces take part with empty selections); strided ones
    // (ghost cells) through the staging buffer. Every layout, with and
    // without writeback, on uneven shards, loaded with another decomposition
    // and checksums verified.
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("writeback_" + std::to_string(w));
    auto specs = standard_arrays();
    specs.push_back({"wb.cube", cairn::DType::f64, {97, 40, 100}, 31});   // 3.0 MiB
    specs.push_back({"wb.plane", cairn::DType::f32, {1501, 1000}, 32});  // 5.7 MiB
    specs.push_back({"rep.wb", cairn::DType::i64, {300, 500}, 33});      // 1.1 MiB, replicated
    int k = 0;
    for (const std::size_t writeback : {std::size_t(1) << 20, std::size_t(0)})
        for (const int ghost : {0, 1})
            for (const std::string ext : {"", ".h5"}) {
                const std::string id = dir + "/ckpt" + std::to_string(k++) + ext;
                INFO(id << ": writeback " << writeback << " bytes, ghost " << ghost);
                TestState s(specs, Decomp::dim0, w, r, ghost, true);
                cairn::SaveOptions so;
                so.writeback_bytes = writeback;
                REQUIRE(so.fsync);
                cairn::save(s.dict, id, MPI_COMM_WORLD, so);
                TestState back(specs, Decomp::grid, w, w - 1 - r, 1 - ghost, false);
                cairn::load(back.dict, id, MPI_COMM_WORLD);
                CHECK(all(back.errors() == 0));
                const auto v = cairn::verify(id, MPI_COMM_WORLD);
                CHECK(v.ok());
            }
}

TEST_CASE("container checksums catch a flipped bit on load and in verify", "[storage][checksum][container]")
{
    const int w = world_size(), r = world_rank();
    const std::string id = fresh_dir("bitflip_c_" + std::to_string(w)) + "/ckpt.h5";
    TestState s(standard_arrays(), Decomp::dim0, w, r, 1, true); // ghost cells: strided chunks
    cairn::SaveOptions so;
    so.checksum_block = 256; // many blocks per chunk
    cairn::save(s.dict, id, MPI_COMM_WORLD, so);
    const auto md = cairn::read_metadata(id);
    CHECK(md.checksum_block == 256);
    const auto& entry = md.entries.at("a3");
    const auto& chunk = entry.chunks.at(0);
    // Blocks are whole rows along dimension 0 when one fits in 256 bytes.
    const auto es = cairn::dtype_size(entry.dtype);
    const std::uint64_t row = static_cast<std::uint64_t>(chunk.box.shape[1] * chunk.box.shape[2]) * es;
    const std::uint64_t span = row <= 256 ? 256 / row * row : 256;
    CHECK(chunk.storage.checksums.size() == (chunk.storage.length + span - 1) / span);
    const std::string first_block = "bytes [0, " + std::to_string(std::min(span, chunk.storage.length)) + ")";

    auto clean = cairn::verify(id, MPI_COMM_WORLD);
    CHECK(clean.ok());
    CHECK(clean.checksums);
    CHECK(clean.chunks == [&] {
        std::size_t n = 0;
        for (const auto& [name, e] : md.entries)
            n += e.chunks.size();
        return n;
    }());
    {   // Reshard-load the clean container, verified, on another decomposition.
        TestState back(standard_arrays(), Decomp::last_dim, w, w - 1 - r, 1, false);
        cairn::load(back.dict, id, MPI_COMM_WORLD);
        CHECK(all(back.errors() == 0));
    }

    // Flip one bit of the first element of chunk 0 of "a3": the dataset is
    // contiguous, so the element lies at the dataset's file offset plus its
    // row-major index times the element size.
    if (r == 0) {
        const auto [file, pos] = first_byte(id, entry, chunk, true);
        flip(file, pos, 0x10);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    const auto bad = cairn::verify(id, MPI_COMM_WORLD);
    REQUIRE(bad.problems.size() == 1);
    CHECK(bad.problems[0].find("'a3'") != std::string::npos);
    CHECK(bad.problems[0].find(chunk.storage.path) != std::string::npos);
    CHECK(bad.problems[0].find(first_block) != std::string::npos);

    TestState back(standard_arrays(), Decomp::dim0, w, r, 0, false);
    std::string msg;
    try {
        cairn::load(back.dict, id, MPI_COMM_WORLD);
    } catch (const cairn::error::IntegrityError& e) {
        msg = e.what();
    }
    CHECK(all(msg.find("checksum mismatch in 'a3'") != std::string::npos));
    CHECK(all(msg.find(id) != std::string::npos));
    CHECK(all(msg.find(first_block) != std::string::npos));

    cairn::LoadOptions lo;
    lo.verify_checksums = false;
    CHECK_NOTHROW(cairn::load(back.dict, id, MPI_COMM_WORLD, lo));
}

TEST_CASE("a checkpoint saved by 20,000 ranks (chunk columns as runs, format 2) loads on this communicator",
          "[storage][runs]")
{
    // As a 20,000-rank save of a 20,000 x 4 f64 array split by rows would
    // leave it, written here by rank 0: row k is chunk k, in file k % 64 at
    // offset (k / 64) * 32, holding 10 k + column. The chunk columns are
    // arithmetic runs (files and offsets: one run per 64 chunks).
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("runs_" + std::to_string(w)) + "/ckpt";
    constexpr std::int64_t rows = 20000, cols = 4, nfiles = 64;
    if (r == 0) {
        const cairn::Metadata md = write_row_files(dir, rows, cols, nfiles);
        cairn::write_metadata_file(dir + "/metadata.h5", md);
        const hid_t f = H5Fopen((dir + "/metadata.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(f >= 0);
        for (const char* a : {"chunk_boxes_runs", "chunk_files_runs", "chunk_offsets_runs", "chunk_lengths_runs"})
            CHECK(H5Aexists_by_name(f, "/cairn", a, H5P_DEFAULT) > 0);
        H5Fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(cairn::read_metadata(dir).format_version == 2);

    // This rank's band of rows, whatever the communicator's size.
    const std::int64_t first = rows * r / w, last = rows * (r + 1) / w;
    LocalArray a("u", cairn::DType::f64, {rows, cols}, cairn::Box{{first, 0}, {last - first, cols}}, 0, 0);
    cairn::StateDict sd;
    sd.add_array("u", a.shard());
    cairn::LoadOptions l;
    l.verify_checksums = false; // written without checksums (checksum_block 0)
    cairn::load(sd, dir, MPI_COMM_WORLD, l);
    const auto* v = static_cast<const double*>(a.data());
    std::int64_t wrong = 0;
    for (std::int64_t k = first; k < last; ++k)
        for (std::int64_t c = 0; c < cols; ++c)
            wrong += v[(k - first) * cols + c] != static_cast<double>(10 * k + c);
    CHECK(wrong == 0);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("checksums of more than 8 MiB are stored as a dataset (format 3) and still guard every block",
          "[storage][format3]")
{
    // 2 Mi doubles (16 MiB) with a checksum every 8 bytes: 16 MiB of
    // checksums, above the 8 MiB past which /cairn keeps an integer array as
    // a dataset instead of an attribute (FORMAT.md 2.6).
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("format3_" + std::to_string(w));
    const cairn::Shape global{2048, 1024};
    for (const auto layout : {cairn::Layout::per_rank, cairn::Layout::container}) {
        const bool container = layout == cairn::Layout::container;
        INFO((container ? "container" : "per-rank") << " layout");
        const std::string id = dir + (container ? "/ckpt.h5" : "/ckpt");
        {
            LocalArray a("u", cairn::DType::f64, global, decompose(global, Decomp::dim0, w, r), 0, 3);
            a.fill();
            cairn::StateDict sd;
            sd.add_array("u", a.shard());
            cairn::SaveOptions o;
            o.layout = layout;
            o.fsync = false;
            o.checksum_block = 8;
            cairn::save(sd, id, MPI_COMM_WORLD, o);
        }
        const auto md = cairn::read_metadata(id);
        CHECK(md.format_version == 3);
        std::size_t sums = 0;
        for (const auto& c : md.entries.at("u").chunks)
            sums += c.storage.checksums.size();
        CHECK(sums == std::size_t(2048) * 1024);
        if (r == 0) {
            const std::string file = container ? id : id + "/metadata.h5";
            const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
            CHECK(f >= 0);
            CHECK(H5Lexists(f, "/cairn/chunk_checksums", H5P_DEFAULT) > 0);
            CHECK(H5Aexists_by_name(f, "/cairn", "chunk_checksums", H5P_DEFAULT) == 0);
            CHECK(H5Aexists_by_name(f, "/cairn", "chunk_lengths", H5P_DEFAULT) > 0); // small arrays stay attributes
            H5Fclose(f);
        }
        {   // Loaded, checksums verified, on another decomposition and rank order.
            LocalArray b("u", cairn::DType::f64, global, decompose(global, Decomp::last_dim, w, w - 1 - r), 0, 3);
            cairn::StateDict sd;
            sd.add_array("u", b.shard());
            cairn::load(sd, id, MPI_COMM_WORLD);
            CHECK(all(b.errors() == 0));
        }
        // One flipped bit in the first chunk is caught by its 8-byte block.
        const auto& entry = md.entries.at("u");
        if (r == 0) {
            const auto [file, pos] = first_byte(id, entry, entry.chunks.at(0), container);
            flip(file, pos + 8 * 5, 0x01); // element 5 of its first row
        }
        MPI_Barrier(MPI_COMM_WORLD);
        LocalArray b("u", cairn::DType::f64, global, decompose(global, Decomp::dim0, w, r), 0, 3);
        cairn::StateDict sd;
        sd.add_array("u", b.shard());
        std::string msg;
        try {
            cairn::load(sd, id, MPI_COMM_WORLD);
        } catch (const cairn::error::IntegrityError& e) {
            msg = e.what();
        }
        CHECK(all(msg.find("checksum mismatch in 'u'") != std::string::npos));
        CHECK(all(msg.find("bytes [40, 48)") != std::string::npos));
    }
}
