// Cairn: the per-rank layout. A checkpoint is a directory holding
// `__<rank>_<k>.distcp` files of raw chunk bytes, written by each rank through
// MPI-IO, and `metadata.h5`, the metadata as an HDF5 attribute group written
// by the coordinator at commit (docs/FORMAT.md).
#pragma once

#include "cairn/storage.hpp"
#include "cairn/write_options.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cairn {

/// Name of the committed metadata file inside a per-rank checkpoint directory.
inline constexpr const char* metadata_file_name = "metadata.h5";

/// How many .distcp files a per-rank save writes: which ranks share a file.
/// A group of ranks writes one file (or SaveOptions::files_per_rank files)
/// together, opened with MPI-IO on the group's communicator, each member
/// writing its own region of it (docs/FORMAT.md section 1).
struct DataFiles {
    enum class Kind {
        per_rank, ///< one file per rank (no group)
        per_node, ///< one file per node: the ranks that share memory
                  ///< (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED)
        count,    ///< `count` files in all: the ranks in `count` contiguous groups
    };
    Kind kind = Kind::per_rank;
    /// Kind::count: the number of files (at least 1; more than the ranks
    /// saving is one file per rank).
    int count = 0;

    static DataFiles per_rank() { return {}; }
    static DataFiles per_node() { return {Kind::per_node, 0}; }
    static DataFiles in_all(int m) { return {Kind::count, m}; }
    /// "per-rank", "per-node" or the count in decimal.
    std::string str() const;
    /// Reads what str() writes; throws error::WrongAPIUsage naming `text`
    /// when it is none of them (or a count below 1).
    static DataFiles parse(const std::string& text);
};

/// Settings of the per-rank layout's .distcp files, used by save
/// (SaveOptions::per_rank) and load (LoadOptions::per_rank).
struct PerRankTuning {
    /// Save only: which ranks share a data file. Default: one file per rank
    /// (docs/API.md says why); DataFiles::per_node() cuts the files to one
    /// per node, what the metadata servers of parallel file systems prefer
    /// at thousands of ranks. Every rank passes the same value (else
    /// error::Mismatch on every rank, nothing written). Loads read every
    /// grouping the same way.
    DataFiles files;
    /// MPI-IO hints given to MPI_File_open of every .distcp file a rank
    /// creates (save) or opens (load). On Lustre through ROMIO, e.g.
    /// {"striping_factor", "1"} keeps each per-rank file on one storage target
    /// (striping hints take effect only when a file is created).
    MpiHints mpi_hints;
};

/// Options of the per-rank writer: the WriteOptions of a save, and the
/// settings of the per-rank layout.
struct DistcpWriterOptions : WriteOptions {
    /// Number of .distcp files each rank (or each group of ranks, `files`)
    /// writes (SaveOptions::files_per_rank).
    int files_per_rank = 1;
    /// Which ranks share a file (PerRankTuning::files).
    DataFiles files;
    /// MPI-IO hints of the files (PerRankTuning::mpi_hints).
    MpiHints mpi_hints;
};

/// Writes the per-rank layout through MPI-IO, each rank its own files (large
/// chunks aligned, WriteOptions::alignment). Commit: data synced, metadata written as
/// `.metadata.h5.tmp`, synced, renamed to `metadata.h5`, directory synced.
/// Overwriting a committed checkpoint writes into a sibling staging directory
/// and swaps it in at commit.
class DistcpWriter : public StorageWriter {
public:
    /// Local; throws error::WrongAPIUsage for files_per_rank below 1, a
    /// DataFiles count below 1,
    /// staging_bytes below 4096 or a hint MPI cannot hold (cairn::MpiHints).
    explicit DistcpWriter(DistcpWriterOptions options = {});
    ~DistcpWriter() override;
    /// Accepts every non-empty id that does not name an existing regular
    /// file (a per-rank checkpoint is a directory).
    bool validate_checkpoint_id(const std::string& checkpoint_id) const override;
    void reset(const std::string& checkpoint_id) override;
    void set_up_storage_writer(bool is_coordinator, MPI_Comm comm) override;
    std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
    std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
    void finish(const Metadata& metadata, const std::vector<std::vector<WriteResult>>& results) override;
    void abort() noexcept override;
    /// The checkpoint id: a save locks it.
    std::string lock_path() const override;
    /// "per_rank".
    const char* layout_name() const noexcept override;
    /// True: each rank writes its items in turn to its own file.
    bool writes_items_in_turn() const noexcept override;
    /// Offers Cairn's faster commit from metadata columns (StorageWriter::columnar).
    detail::ColumnarWriter* columnar() noexcept override;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// Reads the per-rank layout: only the bytes of each chunk that the
/// requested boxes need (and, with `verify`, the whole checksum blocks they
/// touch), through a bounded buffer.
class DistcpReader : public StorageReader {
public:
    /// `verify`: check the checksums of every block read (a mismatch throws
    /// error::IntegrityError naming the entry, file, byte range);
    /// `mpi_hints`: given to MPI_File_open of every file read
    /// (PerRankTuning::mpi_hints). Local; throws error::WrongAPIUsage for a
    /// staging bound below 4096 or a hint MPI cannot hold (cairn::MpiHints).
    explicit DistcpReader(std::size_t staging_bytes = std::size_t(64) << 20, bool verify = true,
                          MpiHints mpi_hints = {});
    ~DistcpReader() override;
    /// Accepts every non-empty id that does not name an existing regular
    /// file: a directory (committed or not: load reports which) or nothing.
    bool validate_checkpoint_id(const std::string& checkpoint_id) const override;
    void reset(const std::string& checkpoint_id) override;
    Metadata read_metadata() override;
    void set_up_storage_reader(const Metadata& metadata, bool is_coordinator, MPI_Comm comm) override;
    void read_data(const LoadPlan& plan, LoadPlanner& planner) override;
    std::uint64_t verify_chunk(const std::string& fqn, const EntryMeta& entry, const ChunkMeta& chunk) override;
    /// Offers Cairn's metadata as columns (StorageReader::columnar).
    detail::ColumnarReader* columnar() noexcept override;

    /// Bytes read from files by the last read_data: per chunk, the bytes
    /// its items need, rounded out to whole checksum blocks when verifying,
    /// each block once, however many items share it. Gaps between needed
    /// runs are read only inside those blocks (data sieving), never
    /// without verification (LoadResult::bytes_read).
    std::uint64_t bytes_read() const noexcept override;
    /// True: items are read in turn.
    bool reads_items_in_turn() const noexcept override;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// True when `path` holds a committed per-rank checkpoint. Local.
bool is_distcp_checkpoint(const std::string& path);

} // namespace cairn
