// What load() and verify() share: the choice of reader and the metadata.
#include "driver/read_session.hpp"

#include "cairn/container.hpp"
#include "cairn/distcp.hpp"
#include "driver/collective_checks.hpp"
#include "storage/columnar_storage.hpp"

namespace cairn::detail {

namespace {

// Collective over `c`, before anything else of a load or verify: one
// allreduce agrees on the call's arguments (read_arguments; every rank
// throws error::Mismatch naming them when they differ) and, for
// Layout::automatic, carries the coordinator's answer of the container
// reader's validate_checkpoint_id (one stat), so that all ranks pick the same
// reader (the container's is collective). Returns whether to read a
// container.
bool agree_to_read(const Comm& c, const std::string& id, const LoadOptions& o, const char* call)
{
    // The minimum is the coordinator's 0 or 1. (Not ~0 on the others: MPICH
    // 4.0's MPI_MIN on MPI_UINT64_T compares as signed, where ~0 is -1.)
    std::uint64_t flag = 2;
    if (c.coordinator()) {
        flag = 0;
        if (o.layout == Layout::automatic && !o.storage) {
            try {
                flag = ContainerReader().validate_checkpoint_id(id) ? 1 : 0;
            } catch (...) {
                flag = 0; // the per-rank reader reports what is wrong
            }
        }
    }
    agree_arguments(c, read_arguments(call, id, o), &flag, 1);
    return o.layout == Layout::container || (o.layout == Layout::automatic && flag == 1);
}

// The built-in reader: the container's when `container`.
std::shared_ptr<StorageReader> default_reader(const LoadOptions& o, bool container)
{
    if (container)
        return std::make_shared<ContainerReader>(o.staging_bytes, o.container, o.verify_checksums);
    return std::make_shared<DistcpReader>(o.staging_bytes, o.verify_checksums, o.per_rank.mpi_hints);
}

// The coordinator's metadata, to broadcast (share_metadata). A reader that
// offers it (Cairn's own: StorageReader::columnar) hands it over as columns,
// encoded without a per-chunk object, their chunk rows expanded and checked
// one entry at a time as they are framed; any other through read_metadata().
std::unique_ptr<MetadataFrames> metadata_frames(StorageReader& storage)
{
    if (ColumnarReader* columns = storage.columnar())
        return std::make_unique<MetadataFrames>(columns->read_metadata_rows());
    return std::make_unique<MetadataFrames>(storage.read_metadata());
}

} // namespace

ReadSession::ReadSession(MPI_Comm c, const std::string& checkpoint_id, const LoadOptions& o, const char* what)
    : comm(c), id(checkpoint_id), options(o), call(what),
      container(agree_to_read(comm, checkpoint_id, o, what)), log(what, checkpoint_id, comm.rank, o.progress)
{
}

std::unique_ptr<MetadataFrames> open_and_read_metadata(ReadSession& s)
{
    std::unique_ptr<MetadataFrames> frames;
    run_phase(s.comm, "read metadata", [&] {
        s.log.started();
        s.storage = s.options.storage ? s.options.storage : default_reader(s.options, s.container);
        s.storage->reset(s.id);
        if (!s.comm.coordinator())
            return;
        if (!s.options.storage)
            s.watch = checkpoint_identity(s.id, s.container);
        frames = metadata_frames(*s.storage);
    });
    return frames;
}

error::ConcurrentAccess replaced_error(const ReadSession& s)
{
    const std::string call = s.call;
    return error::ConcurrentAccess("checkpoint " + s.id + " was replaced by another job during this " + call +
                                   " (a save to the same path): what was read mixes two checkpoints; " + call +
                                   " it again once that save is over");
}

bool replaced_meanwhile(const ReadSession& s)
{
    return s.comm.coordinator() && replaced(s.watch);
}

void check_not_replaced(const ReadSession& s)
{
    if (!s.options.storage && bcast_u64(s.comm, replaced_meanwhile(s) ? 1 : 0) != 0)
        throw replaced_error(s);
}

} // namespace cairn::detail
