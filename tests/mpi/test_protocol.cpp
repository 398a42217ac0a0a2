// The metadata broadcast of load and verify (src/comm/protocol.hpp): the
// coordinator's metadata reaches every rank in frames of whole entries,
// decoded as they arrive; a failure of the coordinator's encoding, or of
// one rank's decoding, ends the stream on every rank without a hang.
#include "comm/protocol.hpp"
#include "fixtures.hpp"
#include "outcome.hpp"

#include <cairn/testing.hpp>

#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <stdexcept>

using namespace cairn_test;
namespace cd = cairn::detail;

namespace {

// `entries` arrays of `chunks` row blocks (4 x 3 doubles each, one file per
// block), a scalar and a chunkless array.
cairn::Metadata sample_metadata(int entries, int chunks)
{
    cairn::Metadata md;
    md.library_version = "test";
    md.world_size = chunks;
    md.layout = "distcp";
    md.created = "2026-11-25T00:00:00Z";
    md.checksum_block = 1 << 20;
    for (int e = 0; e < entries; ++e) {
        cairn::EntryMeta em;
        em.kind = cairn::ItemKind::array;
        em.dtype = cairn::DType::f64;
        em.global_shape = {4 * chunks, 3};
        for (int k = 0; k < chunks; ++k)
            em.chunks.push_back(cairn::ChunkMeta{
                cairn::Box{{4 * k, 0}, {4, 3}},
                cairn::StorageInfo{"__" + std::to_string(k) + "_0.distcp", 96u * static_cast<unsigned>(e), 96,
                                   {0x9E3779B97F4A7C15ull * static_cast<unsigned>(e * chunks + k + 1)}}});
        md.entries["field" + std::to_string(e)] = em;
    }
    cairn::EntryMeta step;
    step.kind = cairn::ItemKind::scalar;
    step.dtype = cairn::DType::i64;
    step.value = std::string(8, '\x07');
    md.entries["step"] = step;
    cairn::EntryMeta empty;
    empty.kind = cairn::ItemKind::array;
    empty.dtype = cairn::DType::u8;
    empty.global_shape = {0};
    md.entries["zz_empty"] = empty;
    return md;
}

cd::Bytes filler(std::size_t n, int value) { return cd::Bytes(n, std::byte(static_cast<unsigned char>(value))); }

// share_metadata() into a decoder keeping what `wanted` selects, finished;
// with `drop`, this rank only receives (nothing).
cairn::Metadata shared(const cd::Comm& c, cd::MetadataFrames* frames, const cd::WantedBox& wanted, bool drop = false,
                       std::size_t frame_bytes = 0)
{
    cd::MetadataDecoder dec(wanted);
    cd::share_metadata(c, frames, drop ? nullptr : &dec, frame_bytes);
    return drop ? cairn::Metadata{} : dec.finish();
}

} // namespace

TEST_CASE("metadata broadcast: frames of whole entries, decoded as they arrive", "[protocol]")
{
    const cd::Comm c(MPI_COMM_WORLD);
    const auto md = sample_metadata(40, 7);
    const auto whole = cd::encode(md);
    // One entry a frame, a few, everything in one frame.
    for (const std::size_t frame : {std::size_t(1), std::size_t(300), std::numeric_limits<std::size_t>::max()}) {
        INFO("frame bytes " << frame);
        std::unique_ptr<cd::MetadataFrames> frames;
        if (c.coordinator())
            frames = std::make_unique<cd::MetadataFrames>(md);
        const auto got = shared(c, frames.get(), {}, false, frame);
        CHECK(all(cd::encode(got) == whole));
    }
    // A rank's part: row 4k + 1 of each array, where k = rank % 7.
    const cairn::Box mine{{4 * (c.rank % 7) + 1, 0}, {1, 3}};
    const cd::WantedBox wanted = [&](const std::string&) { return &mine; };
    std::unique_ptr<cd::MetadataFrames> frames;
    if (c.coordinator())
        frames = std::make_unique<cd::MetadataFrames>(md);
    const auto part = shared(c, frames.get(), wanted, false, 300);
    const auto expected = cd::decode_metadata(whole, wanted);
    CHECK(all(cd::encode(part) == cd::encode(expected)));
    CHECK(all(part.entries.at("field3").chunks.size() == (c.rank % 7 == 0 ? 1u : 2u)));
    CHECK(all(part.entries.at("field3").chunks.back().box.offsets[0] == 4 * (c.rank % 7)));
}

TEST_CASE("metadata broadcast: a failure anywhere ends it on every rank", "[protocol]")
{
    const cd::Comm c(MPI_COMM_WORLD);
    const int last = c.size - 1;

    SECTION("the coordinator's encoding fails after two frames")
    {
        int made = 0, taken = 0;
        const Outcome o = attempt([&] {
            cd::bcast_frames(
                c,
                [&] {
                    if (++made == 3)
                        throw cairn::error::FormatError("metadata: broken on purpose");
                    return filler(100, made);
                },
                [&](const cd::Bytes& f) {
                    CHECK(f == filler(100, taken + 1));
                    ++taken;
                });
        });
        CHECK(all(o.threw && !o.foreign));
        CHECK(all(taken == 2));
        if (c.coordinator())
            CHECK((o.kind == cairn::Error::Kind::format && contains(o.what, "broken on purpose")));
        else
            CHECK(contains(o.what, "coordinator failed"));
    }

    SECTION("one rank fails to take a frame; the others get every frame")
    {
        int made = 0, taken = 0;
        const Outcome o = attempt([&] {
            cd::bcast_frames(
                c, [&] { return ++made <= 5 ? filler(1000, made) : cd::Bytes{}; },
                [&](const cd::Bytes& f) {
                    if (c.rank == last && taken == 1)
                        throw std::runtime_error("cannot take frame 2 on rank " + std::to_string(c.rank));
                    CHECK(f == filler(1000, taken + 1));
                    ++taken;
                });
        });
        if (c.rank == last) {
            CHECK(o.foreign);
            CHECK(contains(o.what, "cannot take frame 2"));
            CHECK(taken == 1);
        } else {
            CHECK((!o.threw && !o.foreign));
            CHECK(taken == 5);
        }
        MPI_Barrier(MPI_COMM_WORLD); // the communicator is still in step
    }

    SECTION("a rank that failed before only receives")
    {
        const auto md = sample_metadata(5, 3);
        std::unique_ptr<cd::MetadataFrames> frames;
        if (c.coordinator())
            frames = std::make_unique<cd::MetadataFrames>(md);
        const bool drop = c.rank == last;
        const auto got = shared(c, frames.get(), {}, drop, 64);
        if (drop)
            CHECK(got.entries.empty());
        else
            CHECK(cd::encode(got) == cd::encode(md));
    }

    SECTION("the coordinator without metadata")
    {
        const Outcome o = attempt([&] { shared(c, nullptr, {}); });
        CHECK(all(o.threw));
        if (c.coordinator())
            CHECK(contains(o.what, "without the coordinator's metadata"));
    }
}

namespace {

// A Stateful whose state_dict() throws on one rank once armed.
class Fragile : public cairn::Stateful {
public:
    Fragile(int fail_on, std::int64_t* value) : m_fail_on(fail_on), m_value(value) {}
    bool armed = false;
    cairn::StateDict state_dict() override
    {
        if (armed && world_rank() == m_fail_on)
            throw cairn::error::WrongAPIUsage("fragile: no state on rank " + std::to_string(m_fail_on));
        cairn::StateDict sd;
        sd.add_scalar("value", m_value);
        return sd;
    }
    void load_state_dict(cairn::StateDict&) override {}

private:
    int m_fail_on;
    std::int64_t* m_value;
};

} // namespace

TEST_CASE("load: a rank whose state fails before the metadata broadcast fails every rank the same way",
          "[protocol][errors]")
{
    const int w = world_size();
    const std::string dir = fresh_dir("protocol_fragile_" + std::to_string(w)) + "/ckpt";
    std::int64_t value = 42;
    std::vector<double> u(12, 1.5);
    Fragile fragile(w - 1, &value);
    cairn::StateDict sd;
    sd.add_array<double>("u", u.data(), {12 * w}, cairn::Box{{12 * world_rank()}, {12}});
    sd.add_stateful("obj", &fragile);
    cairn::save(sd, dir, MPI_COMM_WORLD);
    fragile.armed = true;
    const Outcome o = attempt([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
    CHECK(same_error_everywhere(o, cairn::Error::Kind::usage));
    CHECK(all(contains(o.what, "fragile: no state on rank " + std::to_string(w - 1))));
    fragile.armed = false;
    const Outcome again = attempt([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
    CHECK(all(!again.threw && !again.foreign));
}

namespace {
// The metadata broadcast in frames of `bytes` for its lifetime (every rank).
struct ScopedFrameBytes {
    explicit ScopedFrameBytes(std::size_t bytes) { cairn::testing::set_metadata_frame_bytes(bytes); }
    ~ScopedFrameBytes() { cairn::testing::set_metadata_frame_bytes(0); }
};
} // namespace

TEST_CASE("load and verify with the metadata in many small frames", "[protocol]")
{
    const int w = world_size();
    const std::string base = fresh_dir("protocol_frames_" + std::to_string(w));
    // Frames of about one entry: the whole path of load and verify, frame by
    // frame, on a small checkpoint.
    const ScopedFrameBytes frames(64);
    REQUIRE(cd::metadata_frame_bytes() == 64);
    for (const auto* id : {"/ckpt", "/ckpt.h5"}) {
        INFO(id);
        // Saved on every rank by rows, loaded on the first max(1, w - 1) by
        // the last dimension (resharded).
        CHECK(round_trip(base + id, w, Decomp::dim0, std::max(1, w - 1), Decomp::last_dim, 0, 0));
        const auto report = cairn::verify(base + id, MPI_COMM_WORLD);
        CHECK(all(report.ok()));
        std::uint64_t chunks = 0, bytes = 0;
        for (const auto& [fqn, e] : cairn::read_metadata(base + id).entries)
            for (const auto& c : e.chunks) {
                ++chunks;
                bytes += c.storage.length;
            }
        CHECK(all(report.chunks == chunks)); // every chunk, once
        CHECK(all(report.bytes == bytes));
    }
}

TEST_CASE("error agreement: every rank gets the failing rank's exception class and message", "[protocol]")
{
    const cd::Comm c(MPI_COMM_WORLD);
    const int bad = c.size - 1;
    using K = cairn::Error::Kind;
    for (K k : {K::usage, K::mismatch, K::read, K::write, K::format, K::not_found, K::integrity, K::concurrent,
                K::generic, K::internal}) {
        bool thrown = false;
        K got = K::generic;
        std::string what;
        try {
            cd::run_phase(c, "test phase", [&] {
                if (c.rank == bad)
                    cairn::error::throw_error(k, "broken on purpose");
            });
        } catch (const cairn::Error& e) {
            thrown = true;
            got = e.kind();
            what = e.what();
        }
        CHECK(thrown);
        CHECK(got == k);
        CHECK(what == "rank " + std::to_string(bad) + " (test phase): broken on purpose");
    }
    CHECK_THROWS_AS(cd::run_phase(c, "test phase",
                                  [&] {
                                      if (c.rank == bad)
                                          throw cairn::error::Internal("internal: a broken invariant");
                                  }),
                    cairn::error::Internal);
}
