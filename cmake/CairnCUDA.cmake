# CAIRN_USE_CUDA (ON/OFF/AUTO): CUDA staging of device-memory shards. The
# CUDA code is one file (src/stage/cuda_stage.cpp) behind a header without
# CUDA includes; the rest of Cairn never sees cuda_runtime_api.h, and
# libcairn does not link the CUDA runtime (it loads it on first device use).
cairn_option(CAIRN_USE_CUDA "Stage CUDA device memory (needs the CUDA toolkit)" AUTO)
set(CAIRN_HAVE_CUDA 0)
string(TOUPPER "${CAIRN_USE_CUDA}" _cairn_cuda)
if(NOT _cairn_cuda STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Only host-side runtime calls, no kernels: any architecture will do.
      set(CMAKE_CUDA_ARCHITECTURES 80)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CAIRN_HAVE_CUDA 1)
  elseif(_cairn_cuda STREQUAL "ON")
    message(FATAL_ERROR "CAIRN_USE_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()

function(cairn_add_cuda_staging target)
  if(NOT CAIRN_HAVE_CUDA)
    return()
  endif()
  # Plain C++ against the runtime's headers: the runtime itself is loaded
  # with dlopen on the first use of device memory (src/stage/cuda_stage.cpp),
  # so libcairn does not need libcudart to start. Its soname is the one of
  # the toolkit built against; the toolkit's library directory is the last
  # place looked in.
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src/stage/cuda_stage.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/stage/cuda_stage.cpp PROPERTIES
    INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}"
    COMPILE_DEFINITIONS "CAIRN_CUDART_SONAME=\"libcudart.so.${CUDAToolkit_VERSION_MAJOR}\";CAIRN_CUDART_DIR=\"${CUDAToolkit_LIBRARY_DIR}\"")
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
endfunction()
