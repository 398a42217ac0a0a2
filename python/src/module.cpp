// cairn._cairn: the Python binding of Cairn's C++ API (pybind11). The
// Python package (python/cairn/__init__.py) builds its interface on these
// few calls; every byte is read and written by libcairn itself, so Python
// sees exactly what C++, C and Fortran see (one implementation of the
// format, checksums verified on every read).
#include <cairn/cairn.hpp>

#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// MPI is initialized on the first call that needs it, unless the program
// (say mpi4py) did it already; it is then finalized at exit by this module.
void ensure_mpi()
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
        throw cairn::error::WrongAPIUsage("MPI was finalized already: Cairn cannot run");
    if (initialized)
        return;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    py::module_::import("atexit").attr("register")(py::cpp_function([] {
        int done = 0;
        MPI_Finalized(&done);
        if (!done)
            MPI_Finalize();
    }));
}

// A communicator from its Fortran handle (mpi4py's Comm.py2f()); None: MPI_COMM_SELF.
MPI_Comm comm_of(const py::object& handle)
{
    ensure_mpi();
    if (handle.is_none())
        return MPI_COMM_SELF;
    return MPI_Comm_f2c(handle.cast<MPI_Fint>());
}

cairn::DType dtype_of(const py::dtype& dt, const std::string& name)
{
    const char kind = dt.kind();
    const auto size = dt.itemsize();
    using cairn::DType;
    if (kind == 'f' && size == 2)
        return DType::f16;
    if (kind == 'f' && size == 4)
        return DType::f32;
    if (kind == 'f' && size == 8)
        return DType::f64;
    if (kind == 'i' && size == 1)
        return DType::i8;
    if (kind == 'i' && size == 2)
        return DType::i16;
    if (kind == 'i' && size == 4)
        return DType::i32;
    if (kind == 'i' && size == 8)
        return DType::i64;
    if (kind == 'u' && size == 1)
        return DType::u8;
    if (kind == 'u' && size == 2)
        return DType::u16;
    if (kind == 'u' && size == 4)
        return DType::u32;
    if (kind == 'u' && size == 8)
        return DType::u64;
    if (kind == 'b' && size == 1)
        return DType::boolean;
    throw cairn::error::WrongAPIUsage("array '" + name + "': numpy dtype '" + py::str(py::handle(dt)).cast<std::string>() +
                                      "' has no Cairn dtype (float16/32/64, int8-64, uint8-64, bool)");
}

// Whether the array's bytes are in the machine's byte order (Cairn stores little-endian natively).
void check_native(const py::array& a, const std::string& name)
{
    const char order = a.dtype().attr("byteorder").cast<std::string>()[0];
    if (order == '>')
        throw cairn::error::WrongAPIUsage("array '" + name + "': big-endian numpy arrays are not supported "
                                          "(convert with .astype(dtype.newbyteorder('=')))");
}

// Element strides of `a`, or empty when it is C-contiguous; throws when a
// stride is not a positive multiple of the element size.
cairn::Shape element_strides(const py::array& a, const std::string& name)
{
    if (a.flags() & py::array::c_style)
        return {};
    cairn::Shape s;
    for (py::ssize_t d = 0; d < a.ndim(); ++d) {
        const auto bytes = a.strides(d);
        if (bytes <= 0 || bytes % a.itemsize() != 0)
            throw cairn::error::WrongAPIUsage("array '" + name + "': numpy strides that are not positive multiples "
                                              "of the element size (reversed or byte-offset views) are not supported");
        s.push_back(bytes / a.itemsize());
    }
    return s;
}

cairn::Shape to_shape(const std::vector<std::int64_t>& v) { return cairn::Shape(v.begin(), v.end()); }

// One array shard of a Python request: (name, array, global_shape, offsets).
cairn::ArrayShard shard_of(const std::string& name, const py::array& a, const std::vector<std::int64_t>& global,
                           const std::vector<std::int64_t>& offsets, bool writable)
{
    check_native(a, name);
    if (writable && !a.writeable())
        throw cairn::error::WrongAPIUsage("array '" + name + "': the destination numpy array is read-only");
    cairn::ArrayShard s;
    s.dtype = dtype_of(a.dtype(), name);
    s.global_shape = to_shape(global);
    cairn::Shape shape(a.shape(), a.shape() + a.ndim());
    s.box = cairn::Box{to_shape(offsets), shape};
    s.data = const_cast<void*>(a.data());
    s.strides = element_strides(a, name);
    return s;
}

// Adds the arrays [(name, ndarray, global_shape, offsets)] and scalars
// [(name, 0-d ndarray)] of a Python request to `sd`; `keep` holds the numpy
// arrays alive for the call. `destination`: a load's (must be writable).
void add_arrays_and_scalars(cairn::StateDict& sd, std::vector<py::array>& keep, const py::list& arrays,
                            const py::list& scalars, bool destination)
{
    for (const auto& item : arrays) {
        const auto t = item.cast<py::tuple>();
        const auto name = t[0].cast<std::string>();
        keep.push_back(t[1].cast<py::array>());
        sd.add_array(name, shard_of(name, keep.back(), t[2].cast<std::vector<std::int64_t>>(),
                                    t[3].cast<std::vector<std::int64_t>>(), destination));
    }
    for (const auto& item : scalars) {
        const auto t = item.cast<py::tuple>();
        const auto name = t[0].cast<std::string>();
        keep.push_back(t[1].cast<py::array>());
        check_native(keep.back(), name);
        sd.add_scalar_ref(name, cairn::ScalarRef{dtype_of(keep.back().dtype(), name), keep.back().mutable_data()});
    }
}

py::dict result_dict(std::uint64_t bytes, double seconds)
{
    py::dict d;
    d["bytes"] = bytes;
    d["seconds"] = seconds;
    return d;
}

// save(path, arrays, scalars, strings, blobs, comm, layout, overwrite, data_files)
//   arrays:  [(name, ndarray, global_shape, offsets)]
//   scalars: [(name, 0-d ndarray)]   strings: [(name, str)]   blobs: [(name, bytes)]
//   data_files: "per-rank", "per-node" or a count in decimal (cairn::DataFiles::parse)
py::dict save(const std::string& path, const py::list& arrays, const py::list& scalars, const py::list& strings,
              const py::list& blobs, const py::object& comm, const std::string& layout, bool overwrite,
              const std::string& data_files)
{
    const MPI_Comm c = comm_of(comm);
    cairn::StateDict sd;
    std::vector<py::array> keep; // alive for the save
    add_arrays_and_scalars(sd, keep, arrays, scalars, false);
    std::vector<std::unique_ptr<std::string>> texts;
    for (const auto& item : strings) {
        const auto t = item.cast<py::tuple>();
        texts.push_back(std::make_unique<std::string>(t[1].cast<std::string>()));
        sd.add_string(t[0].cast<std::string>(), texts.back().get());
    }
    std::vector<std::unique_ptr<std::vector<std::byte>>> bytes;
    for (const auto& item : blobs) {
        const auto t = item.cast<py::tuple>();
        const auto b = t[1].cast<std::string>(); // bytes -> std::string copies them
        bytes.push_back(std::make_unique<std::vector<std::byte>>(b.size()));
        std::memcpy(bytes.back()->data(), b.data(), b.size());
        sd.add_bytes(t[0].cast<std::string>(), bytes.back().get());
    }
    cairn::SaveOptions o;
    o.overwrite = overwrite;
    o.per_rank.files = cairn::DataFiles::parse(data_files);
    if (layout == "per_rank")
        o.layout = cairn::Layout::per_rank;
    else if (layout == "container")
        o.layout = cairn::Layout::container;
    else if (layout != "automatic")
        throw cairn::error::WrongAPIUsage("layout '" + layout + "': expected 'automatic', 'per_rank' or 'container'");
    cairn::SaveResult r;
    {
        py::gil_scoped_release unlocked;
        r = cairn::save(sd, path, c, o);
    }
    return result_dict(r.bytes_written, r.seconds);
}

// load(path, arrays, scalars, want, comm, verify, partial, may_be_missing, cooperative) -> (values, result)
//   arrays:  [(name, ndarray destination, global_shape, offsets)]
//   scalars: [(name, 0-d ndarray destination)]
//   want:    [(name, kind)] strings ("string") and blobs ("bytes") to return
py::tuple load(const std::string& path, const py::list& arrays, const py::list& scalars, const py::list& want,
               const py::object& comm, bool verify, bool partial, const std::vector<std::string>& may_be_missing,
               bool cooperative)
{
    const MPI_Comm c = comm_of(comm);
    cairn::StateDict sd;
    std::vector<py::array> keep;
    add_arrays_and_scalars(sd, keep, arrays, scalars, true);
    std::vector<std::pair<std::string, std::unique_ptr<std::string>>> texts;
    std::vector<std::pair<std::string, std::unique_ptr<std::vector<std::byte>>>> blobs;
    for (const auto& item : want) {
        const auto t = item.cast<py::tuple>();
        const auto name = t[0].cast<std::string>();
        if (t[1].cast<std::string>() == "string") {
            texts.emplace_back(name, std::make_unique<std::string>());
            sd.add_string(name, texts.back().second.get());
        } else {
            blobs.emplace_back(name, std::make_unique<std::vector<std::byte>>());
            sd.add_bytes(name, blobs.back().second.get());
        }
    }
    cairn::LoadOptions o;
    o.verify_checksums = verify;
    o.partial = partial;
    o.may_be_missing = may_be_missing;
    o.cooperative = cooperative;
    cairn::LoadResult r;
    {
        py::gil_scoped_release unlocked;
        r = cairn::load(sd, path, c, o);
    }
    py::dict values;
    for (const auto& [name, s] : texts)
        values[py::str(name)] = py::str(*s);
    for (const auto& [name, b] : blobs)
        values[py::str(name)] = py::bytes(reinterpret_cast<const char*>(b->data()), b->size());
    py::dict result = result_dict(r.bytes_read, r.seconds);
    result["bytes_all_ranks"] = r.bytes_read_all;
    result["bytes_received"] = r.bytes_received;
    result["missing"] = r.missing;
    return py::make_tuple(values, result);
}

// The checkpoint's metadata as plain Python values.
py::dict read_metadata(const std::string& path)
{
    ensure_mpi();
    const cairn::Metadata md = cairn::read_metadata(path);
    py::dict d;
    d["format_version"] = md.format_version;
    d["library_version"] = md.library_version;
    d["world_size"] = md.world_size;
    d["layout"] = md.layout == "distcp" ? "per_rank" : md.layout;
    d["created"] = md.created;
    d["checksum_block"] = md.checksum_block;
    py::dict entries;
    for (const auto& [name, e] : md.entries) {
        py::dict x;
        x["kind"] = cairn::item_kind_name(e.kind);
        x["dtype"] = std::string(cairn::dtype_name(e.dtype));
        x["shape"] = std::vector<std::int64_t>(e.global_shape.begin(), e.global_shape.end());
        py::list chunks;
        for (const auto& ch : e.chunks) {
            py::dict cd;
            cd["offsets"] = std::vector<std::int64_t>(ch.box.offsets.begin(), ch.box.offsets.end());
            cd["shape"] = std::vector<std::int64_t>(ch.box.shape.begin(), ch.box.shape.end());
            cd["file"] = ch.storage.path;
            cd["offset"] = ch.storage.offset;
            cd["bytes"] = ch.storage.length;
            chunks.append(cd);
        }
        x["chunks"] = chunks;
        if (e.kind == cairn::ItemKind::scalar)
            x["value"] = py::bytes(e.value);
        else if (e.kind == cairn::ItemKind::string)
            x["value"] = py::str(e.value);
        entries[py::str(name)] = x;
    }
    d["entries"] = entries;
    return d;
}

// A manager directory's committed steps, ascending (CheckpointManager::steps on MPI_COMM_SELF).
std::vector<std::int64_t> manager_steps(const std::string& root)
{
    ensure_mpi();
    cairn::CheckpointManager m(root, MPI_COMM_SELF);
    return m.steps();
}

py::dict verify(const std::string& path, const py::object& comm)
{
    const MPI_Comm c = comm_of(comm);
    cairn::VerifyReport r;
    {
        py::gil_scoped_release unlocked;
        r = cairn::verify(path, c);
    }
    py::dict d;
    d["chunks"] = r.chunks;
    d["bytes"] = r.bytes;
    d["checksums"] = r.checksums;
    d["problems"] = r.problems;
    return d;
}

} // namespace

// Sets the Python exception `type` with `message`.
template <class T>
void raise_as(const py::exception<T>& type, const char* message)
{
    PyErr_SetString(type.ptr(), message);
}

PYBIND11_MODULE(_cairn, m)
{
    m.doc() = "Cairn's C++ library, as the cairn package uses it (see help(cairn))";
    // Cairn's exceptions as Python ones of the same names (cairn.Error and its subclasses).
    static py::exception<cairn::Error> error(m, "Error", PyExc_RuntimeError);
    static py::exception<cairn::error::WrongAPIUsage> usage(m, "WrongAPIUsage", error.ptr());
    static py::exception<cairn::error::Mismatch> mismatch(m, "Mismatch", error.ptr());
    static py::exception<cairn::error::NotFound> not_found(m, "NotFound", error.ptr());
    static py::exception<cairn::error::ReadError> read_error(m, "ReadError", error.ptr());
    static py::exception<cairn::error::WriteError> write_error(m, "WriteError", error.ptr());
    static py::exception<cairn::error::FormatError> format_error(m, "FormatError", error.ptr());
    static py::exception<cairn::error::IntegrityError> integrity(m, "IntegrityError", error.ptr());
    static py::exception<cairn::error::ConcurrentAccess> concurrent(m, "ConcurrentAccess", error.ptr());
    static py::exception<cairn::error::Internal> internal(m, "Internal", error.ptr());
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const cairn::error::WrongAPIUsage& e) {
            raise_as(usage, e.what());
        } catch (const cairn::error::Mismatch& e) {
            raise_as(mismatch, e.what());
        } catch (const cairn::error::NotFound& e) {
            raise_as(not_found, e.what());
        } catch (const cairn::error::ReadError& e) {
            raise_as(read_error, e.what());
        } catch (const cairn::error::WriteError& e) {
            raise_as(write_error, e.what());
        } catch (const cairn::error::FormatError& e) {
            raise_as(format_error, e.what());
        } catch (const cairn::error::IntegrityError& e) {
            raise_as(integrity, e.what());
        } catch (const cairn::error::ConcurrentAccess& e) {
            raise_as(concurrent, e.what());
        } catch (const cairn::error::Internal& e) {
            raise_as(internal, e.what());
        } catch (const cairn::Error& e) {
            raise_as(error, e.what());
        }
    });
    m.def("save", &save);
    m.def("load", &load);
    m.def("read_metadata", &read_metadata);
    m.def("manager_steps", &manager_steps);
    m.def("verify", &verify);
    m.def("version", [] { return std::string(cairn::version()); });
}
