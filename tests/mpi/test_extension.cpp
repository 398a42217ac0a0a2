// The extension points: a custom planner (casting on save), a custom storage
// (one POSIX file per chunk) and a storage that fails on one rank.
#include "fixtures.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

using namespace cairn_test;

namespace {

// Saves every f64 array as f32.
class CastingPlanner : public cairn::DefaultSavePlanner {
public:
    cairn::SavePlan create_local_plan() override
    {
        auto plan = DefaultSavePlanner::create_local_plan();
        for (auto& it : plan.items) {
            if (it.kind != cairn::ItemKind::array || it.dtype != cairn::DType::f64)
                continue;
            const auto& shard = std::get<cairn::ArrayShard>(lookup(it.fqn));
            std::vector<double> dense(static_cast<std::size_t>(shard.box.volume()));
            cairn::copy_strided(cairn::StridedView{dense.data(), 8, shard.box.shape, cairn::row_major_strides(shard.box.shape)},
                                shard.view());
            auto& f = m_cast[it.fqn];
            f.assign(dense.begin(), dense.end());
            it.dtype = cairn::DType::f32;
            it.nbytes = f.size() * 4;
        }
        return plan;
    }
    cairn::DataRef resolve_data(const cairn::WriteItem& item) override
    {
        auto c = m_cast.find(item.fqn);
        if (c == m_cast.end())
            return DefaultSavePlanner::resolve_data(item);
        return cairn::DataRef{cairn::StridedView{c->second.data(), 4, item.box.shape, cairn::row_major_strides(item.box.shape)},
                              cairn::MemorySpace::host};
    }

private:
    std::map<std::string, std::vector<float>> m_cast;
};

// A storage that writes every chunk to its own file with iostreams and
// keeps Cairn's metadata file.
class FilePerChunkWriter : public cairn::StorageWriter {
public:
    void reset(const std::string& id) override { m_dir = id; }
    void set_up_storage_writer(bool, MPI_Comm) override {}
    std::vector<cairn::SavePlan> prepare_global_plan(std::vector<cairn::SavePlan> plans) override
    {
        std::filesystem::create_directories(m_dir);
        return plans;
    }
    std::vector<cairn::WriteResult> write_data(const cairn::SavePlan& plan, cairn::SavePlanner& planner) override
    {
        std::vector<cairn::WriteResult> out;
        for (const auto& it : plan.items) {
            const auto ref = planner.resolve_data(it);
            std::vector<char> dense(it.nbytes);
            cairn::copy_strided(cairn::StridedView{dense.data(), ref.view.elem_size, ref.view.shape,
                                                   cairn::row_major_strides(ref.view.shape)},
                                ref.view);
            const auto name = "chunk_" + std::to_string(m_files++) + "_" + std::to_string(world_rank()) + ".bin";
            std::ofstream(m_dir + "/" + name, std::ios::binary).write(dense.data(), static_cast<std::streamsize>(dense.size()));
            out.push_back(cairn::WriteResult{it.fqn, it.chunk, cairn::StorageInfo{name, 0, it.nbytes}});
        }
        return out;
    }
    void finish(const cairn::Metadata& md, const std::vector<std::vector<cairn::WriteResult>>&) override
    {
        auto m = md;
        m.layout = "file-per-chunk";
        cairn::write_metadata_file(m_dir + "/meta.h5", m);
    }

private:
    std::string m_dir;
    int m_files = 0;
};

class FilePerChunkReader : public cairn::StorageReader {
public:
    void reset(const std::string& id) override { m_dir = id; }
    cairn::Metadata read_metadata() override { return cairn::read_metadata_file(m_dir + "/meta.h5"); }
    void set_up_storage_reader(const cairn::Metadata& md, bool, MPI_Comm) override { m_md = md; }
    void read_data(const cairn::LoadPlan& plan, cairn::LoadPlanner& planner) override
    {
        for (const auto& it : plan.items) {
            const auto& em = m_md.entries.at(it.fqn);
            const auto& chunk = em.chunks.at(it.chunk);
            std::vector<char> data(chunk.storage.length);
            std::ifstream(m_dir + "/" + chunk.storage.path, std::ios::binary)
                .read(data.data(), static_cast<std::streamsize>(data.size()));
            if (it.kind == cairn::ItemKind::bytes) {
                std::vector<std::byte> b(data.size());
                std::memcpy(b.data(), data.data(), data.size());
                planner.load_bytes(it, std::move(b));
                continue;
            }
            const auto es = cairn::dtype_size(em.dtype);
            const auto cs = cairn::row_major_strides(chunk.box.shape);
            std::int64_t first = 0;
            for (std::size_t d = 0; d < cs.size(); ++d)
                first += (it.box.offsets[d] - chunk.box.offsets[d]) * cs[d];
            const cairn::StridedView src{data.data() + first * static_cast<std::int64_t>(es), es, it.box.shape, cs};
            cairn::copy_strided(planner.resolve_destination(it).view, src);
        }
    }

private:
    std::string m_dir;
    cairn::Metadata m_md;
};

} // namespace

TEST_CASE("a custom save planner can cast on save", "[extension]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("casting_" + std::to_string(w)) + "/ckpt";
    LocalArray a("u", cairn::DType::f64, {10, 6}, decompose({10, 6}, Decomp::dim0, w, r), 1, 3);
    a.fill();
    cairn::StateDict sd;
    sd.add_array("u", a.shard());
    cairn::SaveOptions o;
    o.planner = std::make_shared<CastingPlanner>();
    cairn::save(sd, dir, MPI_COMM_WORLD, o);
    CHECK(cairn::read_metadata(dir).entries.at("u").dtype == cairn::DType::f32);

    LocalArray b("u", cairn::DType::f32, {10, 6}, decompose({10, 6}, Decomp::grid, w, r), 0, 3);
    cairn::StateDict in;
    in.add_array("u", b.shard());
    cairn::load(in, dir, MPI_COMM_WORLD);
    CHECK(all(b.errors() == 0));
}

TEST_CASE("a custom storage plugs into save and load", "[extension]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("custom_storage_" + std::to_string(w)) + "/ckpt";
    {
        TestState s(standard_arrays(), Decomp::grid, w, r, 1, true);
        cairn::SaveOptions o;
        o.storage = std::make_shared<FilePerChunkWriter>();
        cairn::save(s.dict, dir, MPI_COMM_WORLD, o);
    }
    CHECK(std::filesystem::exists(dir + "/meta.h5"));
    CHECK_FALSE(cairn::is_distcp_checkpoint(dir));
    TestState s(standard_arrays(), Decomp::last_dim, w, r, 0, false);
    cairn::LoadOptions o;
    o.storage = std::make_shared<FilePerChunkReader>();
    cairn::load(s.dict, dir, MPI_COMM_WORLD, o);
    CHECK(all(s.errors() == 0));
}

TEST_CASE("a write failure on one rank reaches every rank and commits nothing", "[errors][commit]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("fail_write_" + std::to_string(w)) + "/ckpt";
    std::vector<double> buf(8, 1.0);
    cairn::StateDict sd;
    sd.add_array<double>("u", buf.data(), {w * 8}, cairn::Box{{r * 8}, {8}});

    cairn::SaveOptions o;
    o.storage = std::make_shared<FailingWriter>(w - 1, cairn::DistcpWriterOptions{});
    std::string msg;
    try {
        cairn::save(sd, dir, MPI_COMM_WORLD, o);
    } catch (const cairn::error::WriteError& e) {
        msg = e.what();
    }
    CHECK(all(msg.find("rank " + std::to_string(w - 1) + " (write): injected: disk full") != std::string::npos));
    CHECK_FALSE(cairn::is_distcp_checkpoint(dir));

    // With a good checkpoint in place, a failing overwrite keeps it.
    cairn::save(sd, dir, MPI_COMM_WORLD);
    std::vector<double> two(8, 2.0);
    cairn::StateDict sd2;
    sd2.add_array<double>("u", two.data(), {w * 8}, cairn::Box{{r * 8}, {8}});
    cairn::DistcpWriterOptions wo;
    wo.overwrite = true;
    o.storage = std::make_shared<FailingWriter>(0, wo);
    CHECK_THROWS_AS(cairn::save(sd2, dir, MPI_COMM_WORLD, o), cairn::error::WriteError);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_FALSE(std::filesystem::exists(dir + ".cairn-staging"));
    std::vector<double> got(8, 0.0);
    cairn::StateDict in;
    in.add_array<double>("u", got.data(), {w * 8}, cairn::Box{{r * 8}, {8}});
    cairn::load(in, dir, MPI_COMM_WORLD);
    CHECK(all(got == buf));
}

namespace {

// FilePerChunkWriter / Reader for ids "chunks:<dir>": validate_checkpoint_id
// says which ids are theirs.
constexpr const char* chunks_scheme = "chunks:";

bool has_chunks_scheme(const std::string& id) { return id.rfind(chunks_scheme, 0) == 0; }

class SchemeWriter : public FilePerChunkWriter {
public:
    bool validate_checkpoint_id(const std::string& id) const override { return has_chunks_scheme(id); }
    void reset(const std::string& id) override { FilePerChunkWriter::reset(id.substr(std::strlen(chunks_scheme))); }
};

class SchemeReader : public FilePerChunkReader {
public:
    bool validate_checkpoint_id(const std::string& id) const override { return has_chunks_scheme(id); }
    void reset(const std::string& id) override { FilePerChunkReader::reset(id.substr(std::strlen(chunks_scheme))); }
};

// An application's own storage selection from an id, as the seeds'
// automatic selection: the first storage that accepts the id.
template <class S>
std::shared_ptr<S> choose(const std::vector<std::shared_ptr<S>>& candidates, const std::string& id)
{
    for (const auto& s : candidates)
        if (s->validate_checkpoint_id(id))
            return s;
    return nullptr;
}

} // namespace

TEST_CASE("validate_checkpoint_id: built-in storages and a custom one chosen from the id", "[extension][storage_id]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("storage_id_" + std::to_string(w));

    // The built-in storages, on ids and on what is on disk.
    std::vector<double> u(4, 1.0);
    cairn::StateDict sd;
    sd.add_array<double>("u", u.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
    cairn::SaveOptions so;
    so.fsync = false;
    cairn::save(sd, dir + "/c.h5", MPI_COMM_WORLD, so);
    cairn::save(sd, dir + "/d", MPI_COMM_WORLD, so);
    const cairn::ContainerWriter cw;
    const cairn::DistcpWriter dw;
    const cairn::ContainerReader cr;
    const cairn::DistcpReader dr;
    CHECK(cw.validate_checkpoint_id("run/step_000100.h5"));
    CHECK(cw.validate_checkpoint_id("run/step_000100.hdf5"));
    CHECK(cw.validate_checkpoint_id("run/step.h5/"));
    CHECK_FALSE(cw.validate_checkpoint_id("run/step_000100"));
    CHECK_FALSE(cw.validate_checkpoint_id(".h5"));
    CHECK(dw.validate_checkpoint_id("run/step_000100"));
    CHECK(dw.validate_checkpoint_id(dir + "/d"));
    CHECK_FALSE(dw.validate_checkpoint_id(dir + "/c.h5")); // a regular file is no directory
    CHECK_FALSE(dw.validate_checkpoint_id(""));
    CHECK(cr.validate_checkpoint_id(dir + "/c.h5"));
    CHECK(cr.validate_checkpoint_id(dir + "/missing.h5")); // so that load names the missing file
    CHECK_FALSE(cr.validate_checkpoint_id(dir + "/d"));
    CHECK_FALSE(cr.validate_checkpoint_id(dir + "/missing"));
    CHECK(dr.validate_checkpoint_id(dir + "/d"));
    CHECK(dr.validate_checkpoint_id(dir + "/missing"));
    CHECK_FALSE(dr.validate_checkpoint_id(dir + "/c.h5"));
    // Layout::automatic chose by them.
    CHECK(cairn::read_metadata(dir + "/c.h5").layout == "container");
    CHECK(cairn::read_metadata(dir + "/d").layout == "distcp");
    // The interfaces' default accepts every id.
    CHECK(FilePerChunkWriter().validate_checkpoint_id("anything"));
    CHECK(FilePerChunkReader().validate_checkpoint_id("anything"));

    // An application chooses among its own storage and the built-in ones.
    auto writers = [] {
        return std::vector<std::shared_ptr<cairn::StorageWriter>>{
            std::make_shared<SchemeWriter>(), std::make_shared<cairn::ContainerWriter>(),
            std::make_shared<cairn::DistcpWriter>()};
    };
    auto readers = [] {
        return std::vector<std::shared_ptr<cairn::StorageReader>>{
            std::make_shared<SchemeReader>(), std::make_shared<cairn::ContainerReader>(),
            std::make_shared<cairn::DistcpReader>()};
    };
    CHECK(dynamic_cast<cairn::ContainerWriter*>(choose(writers(), dir + "/x.h5").get()));
    CHECK(dynamic_cast<cairn::DistcpWriter*>(choose(writers(), dir + "/x").get()));
    for (const std::string id : {"chunks:" + dir + "/fpc", dir + "/c2.h5", dir + "/d2"}) {
        INFO(id);
        {
            TestState s(standard_arrays(), Decomp::grid, w, r, 1, true);
            cairn::SaveOptions o;
            o.storage = choose(writers(), id);
            REQUIRE(o.storage);
            cairn::save(s.dict, id, MPI_COMM_WORLD, o);
        }
        TestState back(standard_arrays(), Decomp::last_dim, w, r, 0, false);
        cairn::LoadOptions lo;
        lo.storage = choose(readers(), id);
        REQUIRE(lo.storage);
        cairn::load(back.dict, id, MPI_COMM_WORLD, lo);
        CHECK(all(back.errors() == 0));
    }
    CHECK(std::filesystem::is_regular_file(dir + "/c2.h5"));
    CHECK(cairn::is_distcp_checkpoint(dir + "/d2"));
    CHECK(std::filesystem::exists(dir + "/fpc/meta.h5"));
    CHECK(dynamic_cast<SchemeReader*>(choose(readers(), "chunks:" + dir + "/fpc").get()));
}
