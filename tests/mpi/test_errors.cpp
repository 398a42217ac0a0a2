// Bad input: every rank gets the same exception, names what is wrong, and no
// rank hangs; nothing is committed by a failed save.
#include "fixtures.hpp"
#include "outcome.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace cairn_test;

TEST_CASE("inconsistent shards are refused before anything is written", "[errors]")
{
    const int w = world_size(), r = world_rank();
    const std::string base = fresh_dir("bad_shards_" + std::to_string(w));
    std::vector<double> buf(100, 1.0);

    SECTION("overlapping boxes")
    {
        cairn::StateDict sd;
        // Every rank claims rows [r, r+2) of a (w+1)-row array: neighbours overlap.
        sd.add_array<double>("u", buf.data(), {w + 1, 4}, cairn::Box{{r, 0}, {w > 1 ? 2 : 2, 4}});
        const auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, base + "/c", MPI_COMM_WORLD); });
        if (w > 1) {
            CHECK(contains(msg, "overlaps"));
            CHECK_FALSE(cairn::is_distcp_checkpoint(base + "/c"));
        } else {
            CHECK(msg.empty()); // alone, [0:2] covers a 2-row array
        }
    }
    SECTION("incomplete coverage")
    {
        cairn::StateDict sd;
        sd.add_array<double>("u", buf.data(), {w * 4 + 1}, cairn::Box{{r * 4}, {4}});
        const auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, base + "/c", MPI_COMM_WORLD); });
        CHECK(contains(msg, "'u'"));
        CHECK(contains(msg, "cover " + std::to_string(w * 4) + " of " + std::to_string(w * 4 + 1)));
        CHECK_FALSE(cairn::is_distcp_checkpoint(base + "/c"));
    }
    SECTION("dtype differs across ranks")
    {
        std::vector<float> fbuf(4);
        cairn::StateDict sd;
        if (r == w - 1 && w > 1)
            sd.add_array<float>("u", fbuf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        else
            sd.add_array<double>("u", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::save(sd, base + "/c", MPI_COMM_WORLD); });
        if (w > 1) {
            CHECK(contains(msg, "dtype f64 on rank 0 vs. f32 on rank " + std::to_string(w - 1)));
        } else {
            CHECK(msg.empty());
        }
    }
    SECTION("global shape differs across ranks")
    {
        cairn::StateDict sd;
        const std::int64_t extra = (r == w - 1 && w > 1) ? 1 : 0;
        sd.add_array<double>("u", buf.data(), {w * 4 + extra}, cairn::Box{{r * 4}, {4}});
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::save(sd, base + "/c", MPI_COMM_WORLD); });
        if (w > 1)
            CHECK(contains(msg, "global shape [" + std::to_string(w * 4) + "] on rank 0 vs. [" + std::to_string(w * 4 + 1)));
    }
    SECTION("a key missing on one rank")
    {
        cairn::StateDict sd;
        double x = 1;
        if (r != w - 1 || w == 1)
            sd.add_scalar("x", &x);
        std::int64_t y = 2;
        sd.add_scalar("y", &y);
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::save(sd, base + "/c", MPI_COMM_WORLD); });
        if (w > 1)
            CHECK(contains(msg, "entry 'x' is missing on rank(s) " + std::to_string(w - 1)));
    }
    SECTION("scalars that differ across ranks")
    {
        std::int64_t step = r == w - 1 ? 11 : 10;
        cairn::StateDict sd;
        sd.add_scalar("step", &step);
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::save(sd, base + "/c", MPI_COMM_WORLD); });
        if (w > 1)
            CHECK(contains(msg, "scalar 'step': 10 on rank 0 vs. 11 on rank " + std::to_string(w - 1)));
    }
    SECTION("a box outside the array is refused while building the state dict")
    {
        // Rank w-1 describes a box outside the array: it throws while
        // building its state dict, before any collective.
        bool local_error = false;
        try {
            cairn::StateDict sd;
            sd.add_array<double>("u", buf.data(), {4}, cairn::Box{{2}, {3}});
        } catch (const cairn::error::WrongAPIUsage& e) {
            local_error = contains(e.what(), "'u'") && contains(e.what(), "outside");
        }
        CHECK(all(local_error));
    }
}

TEST_CASE("loading checks names, dtypes and shapes against the checkpoint", "[errors]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("bad_load_" + std::to_string(w)) + "/ckpt";
    std::vector<double> buf(4, 3.0);
    {
        cairn::StateDict sd;
        sd.add_array<double>("u", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        cairn::save(sd, dir, MPI_COMM_WORLD);
    }
    SECTION("missing checkpoint")
    {
        cairn::StateDict sd;
        sd.add_array<double>("u", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        const auto msg =
            agreed_error<cairn::error::NotFound>([&] { cairn::load(sd, dir + "_nowhere", MPI_COMM_WORLD); });
        CHECK(contains(msg, "_nowhere"));
    }
    SECTION("dtype mismatch names both")
    {
        std::vector<float> f(4);
        cairn::StateDict sd;
        sd.add_array<float>("u", f.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "array 'u': dtype f32 in the state vs. f64 in the checkpoint"));
    }
    SECTION("global shape mismatch names both")
    {
        cairn::StateDict sd;
        sd.add_array<double>("u", buf.data(), {w * 4 + 4}, cairn::Box{{r * 4}, {4}});
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "global shape [" + std::to_string(w * 4 + 4) + "] in the state vs. [" +
                                std::to_string(w * 4) + "] in the checkpoint"));
    }
    SECTION("missing name")
    {
        cairn::StateDict sd;
        sd.add_array<double>("v", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
        const auto msg = agreed_error<cairn::error::NotFound>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "'v' is not in the checkpoint"));
    }
    SECTION("kind mismatch")
    {
        double u = 0;
        cairn::StateDict sd;
        sd.add_scalar("u", &u);
        const auto msg = agreed_error<cairn::error::Mismatch>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "entry 'u': scalar in the state vs. array in the checkpoint"));
    }
}

TEST_CASE("an existing checkpoint is replaced only on request and never damaged", "[errors][commit]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("overwrite_" + std::to_string(w)) + "/ckpt";
    std::vector<double> buf(4, 1.0);
    cairn::StateDict sd;
    sd.add_array<double>("u", buf.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
    cairn::save(sd, dir, MPI_COMM_WORLD);

    const auto msg = agreed_error<cairn::error::WrongAPIUsage>([&] { cairn::save(sd, dir, MPI_COMM_WORLD); });
    CHECK(contains(msg, "already exists"));

    // A replacement that fails (overlapping boxes) leaves the old one loadable.
    std::vector<double> two(4, 2.0);
    cairn::StateDict bad;
    bad.add_array<double>("u", two.data(), {w * 4}, cairn::Box{{0}, {4}});
    cairn::SaveOptions o;
    o.overwrite = true;
    if (w > 1)
        CHECK_THROWS_AS(cairn::save(bad, dir, MPI_COMM_WORLD, o), cairn::error::WrongAPIUsage);
    std::vector<double> got(4, 0.0);
    cairn::StateDict in;
    in.add_array<double>("u", got.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
    cairn::load(in, dir, MPI_COMM_WORLD);
    CHECK(all(got == buf));

    // A successful replacement.
    cairn::StateDict good;
    good.add_array<double>("u", two.data(), {w * 4}, cairn::Box{{r * 4}, {4}});
    cairn::save(good, dir, MPI_COMM_WORLD, o);
    cairn::load(in, dir, MPI_COMM_WORLD);
    CHECK(all(got == two));
    CHECK_FALSE(std::filesystem::exists(dir + ".cairn-staging"));
    CHECK_FALSE(std::filesystem::exists(dir + ".cairn-old"));
}

TEST_CASE("damaged checkpoints give clear errors on every rank", "[errors][corrupt]")
{
    const int w = world_size(), r = world_rank();
    const std::string dir = fresh_dir("corrupt_" + std::to_string(w)) + "/ckpt";
    std::vector<double> buf(1000, 1.0);
    cairn::StateDict sd;
    sd.add_array<double>("u", buf.data(), {w * 1000}, cairn::Box{{r * 1000}, {1000}});

    SECTION("a truncated data file")
    {
        cairn::save(sd, dir, MPI_COMM_WORLD);
        if (r == 0)
            std::filesystem::resize_file(dir + "/__0_0.distcp", 100);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = agreed_error<cairn::error::ReadError>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "__0_0.distcp"));
        CHECK(contains(msg, "short read"));
    }
    SECTION("metadata that is not HDF5")
    {
        cairn::save(sd, dir, MPI_COMM_WORLD);
        if (r == 0)
            std::ofstream(dir + "/metadata.h5", std::ios::trunc) << "this is not a checkpoint";
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = agreed_error<cairn::error::FormatError>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "metadata.h5"));
    }
    SECTION("a directory without committed metadata is not a checkpoint")
    {
        cairn::save(sd, dir, MPI_COMM_WORLD);
        if (r == 0)
            std::filesystem::remove(dir + "/metadata.h5");
        MPI_Barrier(MPI_COMM_WORLD);
        const auto msg = agreed_error<cairn::error::NotFound>([&] { cairn::load(sd, dir, MPI_COMM_WORLD); });
        CHECK(contains(msg, "not a committed checkpoint"));
        // ... and saving there again works (leftovers are replaced).
        cairn::save(sd, dir, MPI_COMM_WORLD);
        cairn::load(sd, dir, MPI_COMM_WORLD);
    }
}
