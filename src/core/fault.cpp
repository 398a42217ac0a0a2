// Fault injection registry (src/core/fault.hpp, include/cairn/testing.hpp).
#include "core/fault.hpp"

#include "cairn/errors.hpp"
#include "cairn/testing.hpp"

#include <mpi.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace cairn::detail::fault {

std::atomic<bool> g_armed{false};

namespace {

const char* const k_points[] = {mpiio_open, mpiio_write, mpiio_read, mpiio_set_size, mpiio_sync, mpiio_close,
                                fs_mkdir,   fs_fsync,    fs_rename,  fs_remove,      fs_reserve, fs_write,
                                h5_create,  h5_open,     h5_write,   h5_read,        h5_flush,   h5_close,
                                drain_copy, drain_range};

struct ErrnoName {
    const char* name;
    int value;
};

const ErrnoName k_errnos[] = {
    {"ENOSPC", ENOSPC}, {"EIO", EIO},       {"EACCES", EACCES},   {"EPERM", EPERM},   {"EROFS", EROFS},
    {"EDQUOT", EDQUOT}, {"ENOENT", ENOENT}, {"EEXIST", EEXIST},   {"EBUSY", EBUSY},   {"EINTR", EINTR},
    {"EAGAIN", EAGAIN}, {"ENOMEM", ENOMEM}, {"EFBIG", EFBIG},     {"EINVAL", EINVAL}, {"EMFILE", EMFILE},
    {"ENFILE", ENFILE}, {"ESTALE", ESTALE}, {"ENOTDIR", ENOTDIR}, {"EISDIR", EISDIR}, {"EXDEV", EXDEV},
    {"ENAMETOOLONG", ENAMETOOLONG}, {"EOPNOTSUPP", EOPNOTSUPP},
};

const char* errno_name(int e)
{
    for (const auto& n : k_errnos)
        if (n.value == e)
            return n.name;
    return "errno";
}

struct Armed {
    testing::Fault fault;
    std::uint64_t calls = 0; // calls of the point on this process since arming
    std::uint64_t fired = 0;
};

struct Registry {
    std::mutex mutex;
    std::vector<Armed> faults;
    std::atomic<std::uint64_t> fired{0};
};

// Never destroyed: points may be reached from other static destructors.
Registry& registry()
{
    static Registry* r = new Registry;
    return *r;
}

// This process's rank in MPI_COMM_WORLD, -1 without MPI (not initialized, or
// finalized). Cached once known: it never changes.
int world_rank() noexcept
{
    static std::atomic<int> cached{-1};
    int r = cached.load(std::memory_order_relaxed);
    if (r >= 0)
        return r;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return -1;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &r) != MPI_SUCCESS)
        return -1;
    cached.store(r, std::memory_order_relaxed);
    return r;
}

bool known_point(const std::string& p)
{
    for (const char* k : k_points)
        if (p == k)
            return true;
    return false;
}

std::uint64_t parse_uint(const std::string& key, const std::string& v, const std::string& spec)
{
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 18)
        throw error::WrongAPIUsage("fault '" + spec + "': " + key + "=" + v + " is not a non-negative integer");
    return std::stoull(v);
}

// Arms the faults of CAIRN_FAULT when the library is loaded. A bad value is
// reported and ignored (a test expecting the failure then fails visibly).
struct FromEnvironment {
    FromEnvironment()
    {
        const char* env = std::getenv("CAIRN_FAULT");
        if (!env || !*env)
            return;
        const std::string all(env);
        std::size_t start = 0;
        while (start <= all.size()) {
            auto end = all.find(';', start);
            if (end == std::string::npos)
                end = all.size();
            const auto one = all.substr(start, end - start);
            if (one.find_first_not_of(" \t") != std::string::npos) {
                try {
                    testing::arm_fault(testing::parse_fault(one));
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "cairn: ignoring CAIRN_FAULT: %s\n", e.what());
                }
            }
            start = end + 1;
        }
    }
};

const FromEnvironment g_from_environment;

} // namespace

int inject_slow(const char* point, const std::string& object) noexcept
{
    auto& reg = registry();
    int err = 0;
    std::uint64_t call = 0;
    bool kill = false;
    int rank = -2;
    {
        std::lock_guard<std::mutex> lock(reg.mutex);
        for (auto& a : reg.faults) {
            if (a.fault.point != point)
                continue;
            if (a.fault.rank >= 0) {
                if (rank == -2)
                    rank = world_rank();
                if (rank != a.fault.rank)
                    continue;
            }
            const auto n = a.calls++;
            if (err == 0 && n >= a.fault.after && (a.fault.times == 0 || a.fired < a.fault.times)) {
                ++a.fired;
                err = a.fault.error;
                kill = a.fault.kill;
                call = n + 1;
            }
        }
    }
    if (err != 0) {
        reg.fired.fetch_add(1, std::memory_order_relaxed);
        if (rank == -2)
            rank = world_rank();
        if (kill) {
            std::fprintf(stderr, "cairn: injected fault at %s (call %llu) on rank %d: SIGKILL: %s\n", point,
                         static_cast<unsigned long long>(call), rank, object.c_str());
            std::fflush(stderr);
            ::kill(::getpid(), SIGKILL);
            for (;;)
                ::pause();
        }
        std::fprintf(stderr, "cairn: injected fault at %s (call %llu) on rank %d: %s (%s): %s\n", point,
                     static_cast<unsigned long long>(call), rank, errno_name(err), std::strerror(err), object.c_str());
    }
    return err;
}

} // namespace cairn::detail::fault

namespace cairn::testing {

namespace fault = detail::fault;

void arm_fault(const Fault& f)
{
    if (!fault::known_point(f.point)) {
        std::string known;
        for (const char* k : fault::k_points)
            known += std::string(known.empty() ? "" : ", ") + k;
        throw error::WrongAPIUsage("unknown fault point '" + f.point + "' (known: " + known + ")");
    }
    if (f.error <= 0)
        throw error::WrongAPIUsage("fault at " + f.point + ": the error must be a positive errno value, not " +
                                   std::to_string(f.error));
    if (f.rank < -1)
        throw error::WrongAPIUsage("fault at " + f.point + ": rank must be -1 (every rank) or a rank, not " +
                                   std::to_string(f.rank));
    auto& reg = fault::registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.faults.push_back(fault::Armed{f, 0, 0});
    fault::g_armed.store(true, std::memory_order_relaxed);
}

void disarm_faults() noexcept
{
    auto& reg = fault::registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    fault::g_armed.store(false, std::memory_order_relaxed);
    reg.faults.clear();
    reg.fired.store(0, std::memory_order_relaxed);
}

std::uint64_t faults_fired() noexcept { return fault::registry().fired.load(std::memory_order_relaxed); }

Fault parse_fault(const std::string& spec)
{
    Fault f;
    bool have_point = false;
    std::size_t start = 0;
    while (start <= spec.size()) {
        auto end = spec.find(',', start);
        if (end == std::string::npos)
            end = spec.size();
        auto item = spec.substr(start, end - start);
        start = end + 1;
        const auto a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
        if (a == std::string::npos)
            continue;
        item = item.substr(a, b - a + 1);
        const auto eq = item.find('=');
        if (eq == std::string::npos)
            throw error::WrongAPIUsage("fault '" + spec + "': '" + item + "' is not key=value");
        const auto key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "point") {
            f.point = value;
            have_point = true;
        } else if (key == "rank") {
            if (value == "-1" || value == "all" || value == "*")
                f.rank = -1;
            else
                f.rank = static_cast<int>(std::min<std::uint64_t>(fault::parse_uint(key, value, spec), 1u << 30));
        } else if (key == "after") {
            f.after = fault::parse_uint(key, value, spec);
        } else if (key == "times") {
            f.times = fault::parse_uint(key, value, spec);
        } else if (key == "errno" || key == "error") {
            f.error = 0;
            for (const auto& n : fault::k_errnos)
                if (value == n.name)
                    f.error = n.value;
            if (f.error == 0) {
                if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 6)
                    throw error::WrongAPIUsage("fault '" + spec + "': unknown errno '" + value + "'");
                f.error = std::stoi(value);
            }
        } else if (key == "action") {
            if (value != "fail" && value != "kill")
                throw error::WrongAPIUsage("fault '" + spec + "': action=" + value + " is neither fail nor kill");
            f.kill = value == "kill";
        } else {
            throw error::WrongAPIUsage("fault '" + spec + "': unknown key '" + key +
                                       "' (keys: point, rank, after, times, errno, action)");
        }
    }
    if (!have_point)
        throw error::WrongAPIUsage("fault '" + spec + "': no point=... given");
    if (!fault::known_point(f.point))
        throw error::WrongAPIUsage("fault '" + spec + "': unknown point '" + f.point + "'");
    return f;
}

std::vector<std::string> fault_points()
{
    return std::vector<std::string>(std::begin(fault::k_points), std::end(fault::k_points));
}

} // namespace cairn::testing
