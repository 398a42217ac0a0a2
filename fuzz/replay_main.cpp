// A libFuzzer-compatible driver for builds without libFuzzer (gcc, no
// CAIRN_BUILD_FUZZERS): runs a fuzz target's LLVMFuzzerTestOneInput over
// every file given (directories: every regular file inside, in name order),
// then over deterministic random mutations of them. CI thus exercises the
// decoders on every build; a crash file found by libFuzzer replays with
// `cairn_replay_<target> crash-<sha1>`.
//
//   cairn_replay_<target> [--mutations N] [--seed S] [--max-len L] [--crash-file F] PATH...
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Input = std::vector<std::uint8_t>;

Input read_all(const std::filesystem::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return Input(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The input being run, written to `g_crash_file` if the target crashes, so
// that the failure replays: `cairn_replay_<target> <that file>`.
const Input* g_current = nullptr;
char g_crash_file[4096] = "replay-crash-input";

extern "C" void on_crash(int sig)
{
    if (g_current) {
        const int fd = ::open(g_crash_file, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd >= 0) {
            const ssize_t n = ::write(fd, g_current->data(), g_current->size());
            (void)n;
            ::close(fd);
        }
        const char msg[] = "replay: the crashing input was written to ";
        ssize_t n = ::write(2, msg, sizeof msg - 1);
        n = ::write(2, g_crash_file, std::strlen(g_crash_file));
        n = ::write(2, "\n", 1);
        (void)n;
    }
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

void run(const Input& in)
{
    g_current = &in;
    // A copy of exactly the input's size, so ASan sees reads past its end.
    std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[in.size() ? in.size() : 1]);
    if (!in.empty())
        std::memcpy(copy.get(), in.data(), in.size());
    LLVMFuzzerTestOneInput(copy.get(), in.size());
    g_current = nullptr;
}

// Values that make counts, lengths, offsets and extents interesting.
const std::uint64_t k_interesting[] = {0,
                                       1,
                                       2,
                                       7,
                                       8,
                                       64,
                                       65,
                                       255,
                                       256,
                                       0x7FFF,
                                       0xFFFF,
                                       0x7FFFFFFF,
                                       0x80000000,
                                       0xFFFFFFFF,
                                       std::uint64_t(1) << 32,
                                       std::uint64_t(1) << 40,
                                       std::uint64_t(1) << 60,
                                       std::uint64_t(1) << 61,
                                       std::uint64_t(1) << 62,
                                       0x7FFFFFFFFFFFFFFF,
                                       0x8000000000000000,
                                       0xFFFFFFFFFFFFFFFF,
                                       0xFFFFFFFFFFFFFFFE};

Input mutate(const std::vector<Input>& seeds, std::mt19937_64& rng, std::size_t max_len)
{
    auto pick = [&](std::size_t n) { return n == 0 ? std::size_t(0) : static_cast<std::size_t>(rng() % n); };
    Input x = seeds[pick(seeds.size())];
    const int steps = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < steps; ++s) {
        switch (rng() % 9) {
        case 0: // flip a bit
            if (!x.empty())
                x[pick(x.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
            break;
        case 1: // a random byte
            if (!x.empty())
                x[pick(x.size())] = static_cast<std::uint8_t>(rng());
            break;
        case 2: // an interesting little-endian 8-, 4- or 1-byte value
            if (!x.empty()) {
                const std::uint64_t v = k_interesting[pick(std::size(k_interesting))];
                const std::size_t width = std::size_t(1) << (rng() % 4); // 1, 2, 4, 8
                const std::size_t at = pick(x.size());
                for (std::size_t i = 0; i < width && at + i < x.size(); ++i)
                    x[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
            }
            break;
        case 3: // truncate
            x.resize(pick(x.size() + 1));
            break;
        case 4: { // insert random bytes
            const std::size_t n = 1 + pick(16);
            Input ins(n);
            for (auto& b : ins)
                b = static_cast<std::uint8_t>(rng());
            x.insert(x.begin() + static_cast<std::ptrdiff_t>(pick(x.size() + 1)), ins.begin(), ins.end());
            break;
        }
        case 5: // erase a range
            if (!x.empty()) {
                const std::size_t at = pick(x.size());
                const std::size_t n = 1 + pick(std::min<std::size_t>(x.size() - at, 32));
                x.erase(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + n));
            }
            break;
        case 6: // duplicate a range
            if (!x.empty()) {
                const std::size_t at = pick(x.size());
                const std::size_t n = 1 + pick(std::min<std::size_t>(x.size() - at, 64));
                const Input piece(x.begin() + static_cast<std::ptrdiff_t>(at),
                                  x.begin() + static_cast<std::ptrdiff_t>(at + n));
                x.insert(x.begin() + static_cast<std::ptrdiff_t>(pick(x.size() + 1)), piece.begin(), piece.end());
            }
            break;
        case 7: { // splice: head of this, tail of another seed
            const Input& other = seeds[pick(seeds.size())];
            const std::size_t cut = pick(x.size() + 1), from = pick(other.size() + 1);
            x.resize(cut);
            x.insert(x.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
            break;
        }
        default: // add or subtract a small number from a byte
            if (!x.empty()) {
                auto& b = x[pick(x.size())];
                b = static_cast<std::uint8_t>(b + static_cast<std::uint8_t>(rng() % 2 ? 1 : 255));
            }
        }
    }
    if (x.size() > max_len)
        x.resize(max_len);
    return x;
}

[[noreturn]] void usage(const char* argv0)
{
    std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--max-len L] [--crash-file F] PATH...\n", argv0);
    std::exit(2);
}

} // namespace

int main(int argc, char** argv)
{
    std::uint64_t mutations = 0, seed = 1;
    std::size_t max_len = 1 << 20;
    std::vector<std::filesystem::path> files;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--crash-file" && i + 1 < argc) {
            std::snprintf(g_crash_file, sizeof g_crash_file, "%s", argv[++i]);
        } else if ((a == "--mutations" || a == "--seed" || a == "--max-len") && i + 1 < argc) {
            const auto v = std::strtoull(argv[++i], nullptr, 10);
            if (a == "--mutations")
                mutations = v;
            else if (a == "--seed")
                seed = v;
            else
                max_len = static_cast<std::size_t>(v);
        } else if (!a.empty() && a[0] == '-') {
            usage(argv[0]);
        } else if (std::filesystem::is_directory(a)) {
            std::vector<std::filesystem::path> in;
            for (const auto& e : std::filesystem::directory_iterator(a))
                if (e.is_regular_file())
                    in.push_back(e.path());
            std::sort(in.begin(), in.end());
            files.insert(files.end(), in.begin(), in.end());
        } else if (std::filesystem::is_regular_file(a)) {
            files.push_back(a);
        } else {
            std::fprintf(stderr, "%s: no such file or directory: %s\n", argv[0], a.c_str());
            return 2;
        }
    }
    if (files.empty()) {
        std::fprintf(stderr, "%s: no inputs\n", argv[0]);
        return 2;
    }
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL})
        std::signal(sig, on_crash);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Input> seeds;
    for (const auto& f : files) {
        seeds.push_back(read_all(f));
        run(seeds.back());
    }
    std::mt19937_64 rng(seed);
    for (std::uint64_t m = 0; m < mutations; ++m)
        run(mutate(seeds, rng, max_len));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu inputs and %llu mutations (seed %llu) in %.2f s, no crash\n", argv[0], files.size(),
                static_cast<unsigned long long>(mutations), static_cast<unsigned long long>(seed), s);
    return 0;
}
