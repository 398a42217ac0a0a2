// Builds the odd and hostile checkpoints of the tests of the cairn tool
// (tests/cli/cli_test.py), serially, with Cairn and the HDF5 C API:
//
//   cairn_cli_make_hostile names PATH
//       a per-rank checkpoint whose entry names hold an escape sequence, a
//       newline and a byte that is not UTF-8 (scalars: 1, 2, 3)
//   cairn_cli_make_hostile external-storage FILE DATASET RAW
//       replaces DATASET of the container FILE by one of the same type and
//       shape whose bytes are those of the existing file RAW (external raw
//       storage, H5Pset_external; RAW is not written)
//   cairn_cli_make_hostile set-i64 FILE DATASET VALUE
//       writes VALUE into the scalar dataset DATASET of the container FILE
#include <cairn/checkpoint.hpp>
#include <cairn/state_dict.hpp>

#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

void require(bool ok, const std::string& what)
{
    if (!ok)
        throw std::runtime_error(what);
}

void names(const std::string& path)
{
    std::int64_t a = 1, b = 2, c = 3;
    cairn::StateDict state;
    state.add_scalar("esc\x1b[31mred", &a);
    state.add_scalar("two\nlines", &b);
    state.add_scalar("bad\xff", &c);
    cairn::SaveOptions o;
    o.overwrite = true;
    o.fsync = false;
    cairn::save(state, path, MPI_COMM_WORLD, o);
}

void external_storage(const std::string& file, const std::string& name, const std::string& raw)
{
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    require(f >= 0, "cannot open " + file);
    const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    require(d >= 0, "cannot open " + name);
    const hid_t type = H5Dget_type(d);
    const hid_t space = H5Dget_space(d);
    H5Dclose(d);
    require(H5Ldelete(f, name.c_str(), H5P_DEFAULT) >= 0, "cannot delete " + name);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    require(H5Pset_external(dcpl, raw.c_str(), 0, H5F_UNLIMITED) >= 0, "H5Pset_external");
    const hid_t e = H5Dcreate2(f, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    require(e >= 0, "cannot create " + name);
    H5Dclose(e);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
    require(H5Fclose(f) >= 0, "cannot close " + file);
}

void set_i64(const std::string& file, const std::string& name, std::int64_t value)
{
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    require(f >= 0, "cannot open " + file);
    const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    require(d >= 0, "cannot open " + name);
    require(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) >= 0, "cannot write " + name);
    H5Dclose(d);
    require(H5Fclose(f) >= 0, "cannot close " + file);
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rc = 0;
    try {
        const std::string mode = argc > 1 ? argv[1] : "";
        if (mode == "names" && argc == 3)
            names(argv[2]);
        else if (mode == "external-storage" && argc == 5)
            external_storage(argv[2], argv[3], argv[4]);
        else if (mode == "set-i64" && argc == 5)
            set_i64(argv[2], argv[3], std::strtoll(argv[4], nullptr, 10));
        else
            throw std::runtime_error("usage: names PATH | external-storage FILE DATASET RAW | set-i64 FILE DATASET VALUE");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
