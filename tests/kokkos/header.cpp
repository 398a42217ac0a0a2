// <cairn/kokkos.hpp> must compile on its own (tests/headers leaves it out
// because it needs Kokkos), and twice (its include guard).
#include <cairn/kokkos.hpp>
#include <cairn/kokkos.hpp>
