# Finds moelab's dependencies and gathers them into one interface target,
# `moelab_deps`. LibTorch comes from Debian's libtorch-dev by default, or from any
# other LibTorch put on CMAKE_PREFIX_PATH (e.g. a PyTorch wheel's torch/share/cmake).

find_package(Torch REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(tomlplusplus REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
find_library(XXHASH_LIBRARY NAMES xxhash REQUIRED)
# SentencePiece is not linked: Debian's libsentencepiece carries its own
# protobuf-lite 3.14, which cannot share a process with LibTorch's protobuf 3.21
# (version checks fail or static initialisation crashes). The tokenizer runs
# SentencePiece's own tools (spm_train, spm_encode, ...) instead; see src/data/tokenizer.h.
find_path(XXHASH_INCLUDE_DIR NAMES xxhash.h REQUIRED)

add_library(moelab_deps INTERFACE)
target_link_libraries(moelab_deps INTERFACE
  ${TORCH_LIBRARIES} MPI::MPI_C ${HDF5_C_LIBRARIES} tomlplusplus::tomlplusplus
  spdlog::spdlog fmt::fmt CLI11::CLI11 nlohmann_json::nlohmann_json ZLIB::ZLIB
  ${XXHASH_LIBRARY})
target_include_directories(moelab_deps SYSTEM INTERFACE
  ${TORCH_INCLUDE_DIRS} ${HDF5_C_INCLUDE_DIRS} ${XXHASH_INCLUDE_DIR})
# Only MPI's C API is used; without these, <mpi.h> drags in the C++ bindings.
target_compile_definitions(moelab_deps INTERFACE ${HDF5_C_DEFINITIONS} OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
# Torch's own flags (e.g. the C++ ABI define) must reach every translation unit.
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(moelab_deps INTERFACE ${_torch_flags})

# CUDA + NCCL: optional, auto-detected. The NCCL backend compiles wherever the
# headers and library exist; it runs only where a GPU does.
set(MOELAB_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root searched for NCCL")
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${MOELAB_CUDA_ROOT}/include ENV NCCL_HOME PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl HINTS ${MOELAB_CUDA_ROOT}/lib64 ${MOELAB_CUDA_ROOT}/lib ENV NCCL_HOME PATH_SUFFIXES lib lib64)
find_path(CUDART_INCLUDE_DIR cuda_runtime_api.h HINTS ${MOELAB_CUDA_ROOT}/include)
find_library(CUDART_LIBRARY cudart HINTS ${MOELAB_CUDA_ROOT}/lib64 ${MOELAB_CUDA_ROOT}/lib)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND CUDART_INCLUDE_DIR AND CUDART_LIBRARY)
  set(_nccl_found ON)
else()
  set(_nccl_found OFF)
endif()
option(MOELAB_WITH_NCCL "Build the NCCL communicator" ${_nccl_found})
if(MOELAB_WITH_NCCL)
  if(NOT _nccl_found)
    message(FATAL_ERROR "MOELAB_WITH_NCCL=ON but nccl.h/libnccl/cudart were not found under ${MOELAB_CUDA_ROOT}")
  endif()
  target_include_directories(moelab_deps SYSTEM INTERFACE ${NCCL_INCLUDE_DIR} ${CUDART_INCLUDE_DIR})
  target_link_libraries(moelab_deps INTERFACE ${NCCL_LIBRARY} ${CUDART_LIBRARY})
  target_compile_definitions(moelab_deps INTERFACE MOELAB_WITH_NCCL=1)
  message(STATUS "moelab: NCCL backend ON (${NCCL_LIBRARY})")
else()
  message(STATUS "moelab: NCCL backend OFF")
endif()

# Git commit recorded in every run's outputs.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  OUTPUT_VARIABLE MOELAB_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT MOELAB_GIT_COMMIT)
  set(MOELAB_GIT_COMMIT "unknown")
endif()
# Only one generated translation unit carries it, so a new commit rebuilds one file.
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/src/util/version.cpp.in ${CMAKE_BINARY_DIR}/generated/version.cpp @ONLY)

