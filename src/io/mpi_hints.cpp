#include "io/mpi_hints.hpp"

#include "cairn/errors.hpp"
#include "cairn/log.hpp"

#include <cstdio>
#include <vector>

namespace cairn::detail {

void check_mpi_hints(const MpiHints& hints)
{
    for (const auto& [key, value] : hints)
        if (key.empty() || key.size() >= MPI_MAX_INFO_KEY || value.size() >= MPI_MAX_INFO_VAL)
            throw error::WrongAPIUsage("MPI-IO hint '" + key + "' = '" + value + "': the key must have 1 to " +
                                       std::to_string(MPI_MAX_INFO_KEY - 1) + " characters and the value at most " +
                                       std::to_string(MPI_MAX_INFO_VAL - 1));
}

MpiInfo::MpiInfo(const MpiHints& hints)
{
    check_mpi_hints(hints);
    if (hints.empty())
        return;
    MPI_Info_create(&m_info);
    for (const auto& [key, value] : hints)
        MPI_Info_set(m_info, key.c_str(), value.c_str());
}

MpiInfo::~MpiInfo()
{
    if (m_info != MPI_INFO_NULL)
        MPI_Info_free(&m_info);
}

void log_hints(MPI_File file, const MpiHints& hints, const std::string& path) noexcept
{
    if (hints.empty() || file == MPI_FILE_NULL || log_level() != LogLevel::debug)
        return;
    try {
        MPI_Info info = MPI_INFO_NULL;
        if (MPI_File_get_info(file, &info) != MPI_SUCCESS)
            info = MPI_INFO_NULL;
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        std::string text = "cairn: [world rank " + std::to_string(rank) + "] " + path + ": MPI-IO hints:";
        std::vector<char> value(MPI_MAX_INFO_VAL + 1);
        const char* sep = " ";
        for (const auto& [key, asked] : hints) {
            int flag = 0;
            if (info != MPI_INFO_NULL)
                MPI_Info_get(info, key.c_str(), MPI_MAX_INFO_VAL, value.data(), &flag);
            text += sep + key + (flag ? "=" + std::string(value.data()) : " not taken");
            sep = ", ";
        }
        if (info != MPI_INFO_NULL)
            MPI_Info_free(&info);
        text += "\n";
        std::fputs(text.c_str(), stderr); // one call per line
    } catch (...) {
    }
}

} // namespace cairn::detail
