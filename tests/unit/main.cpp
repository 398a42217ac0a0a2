// Catch2 main of the Cairn unit tests (serial: nothing here needs MPI_Init).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
