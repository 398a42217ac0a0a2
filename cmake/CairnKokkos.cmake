# CAIRN_USE_KOKKOS (ON/OFF/AUTO): the header-only Kokkos::View adapter
# (include/cairn/kokkos.hpp), its tests and the heat2d_kokkos example.
#
# Sets CAIRN_HAVE_KOKKOS (0/1, recorded in cairn/config.hpp) and, when Kokkos
# is found, defines the INTERFACE target cairn_kokkos (Cairn::kokkos: Cairn
# plus Kokkos::kokkos), installed in its own export set CairnKokkosTargets so
# that a Cairn built with Kokkos still works for projects without it.
# Finding Kokkos (and coping with Debian's broken Kokkos config) is done by
# cmake/CairnFindKokkos.cmake, which is installed too.
cairn_option(CAIRN_USE_KOKKOS "Kokkos::View adapter cairn/kokkos.hpp, its tests and example" AUTO)
set(CAIRN_HAVE_KOKKOS 0)
string(TOUPPER "${CAIRN_USE_KOKKOS}" _cairn_kokkos)
if(NOT _cairn_kokkos STREQUAL "OFF")
  include(CairnFindKokkos)
  cairn_find_kokkos(_cairn_kokkos_found)
  if(_cairn_kokkos_found)
    set(CAIRN_HAVE_KOKKOS 1)
    message(STATUS "Cairn: Kokkos ${CAIRN_KOKKOS_VERSION} found: building the Kokkos adapter, its tests and example")
  elseif(_cairn_kokkos STREQUAL "ON")
    message(FATAL_ERROR "CAIRN_USE_KOKKOS=ON but Kokkos was not found (set Kokkos_DIR, or CMAKE_PREFIX_PATH; Debian: apt-get install libtrilinos-kokkos-dev)")
  else()
    message(STATUS "Cairn: Kokkos not found: no Kokkos adapter tests or example (CAIRN_USE_KOKKOS=AUTO)")
  endif()
endif()
unset(_cairn_kokkos)
unset(_cairn_kokkos_found)

if(CAIRN_HAVE_KOKKOS)
  # `cairn` is defined later by the top-level CMakeLists; an INTERFACE link
  # to it is resolved at generation time.
  add_library(cairn_kokkos INTERFACE)
  add_library(Cairn::kokkos ALIAS cairn_kokkos)
  target_link_libraries(cairn_kokkos INTERFACE cairn Kokkos::kokkos)
  set_target_properties(cairn_kokkos PROPERTIES EXPORT_NAME kokkos)
  install(TARGETS cairn_kokkos EXPORT CairnKokkosTargets)
  install(EXPORT CairnKokkosTargets NAMESPACE Cairn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Cairn)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/CairnFindKokkos.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Cairn)
endif()
