# Finds moelab's dependencies and gathers them into one interface target,
# `moelab_deps`. LibTorch is the one inside a PyTorch wheel: by default the
# project's .venv (launch/install-deps.sh), or whichever Python MOELAB_PYTHON names
# (e.g. a machine's own PyTorch install); a LibTorch already on CMAKE_PREFIX_PATH
# or Torch_DIR wins over both.
include(MoelabTorch)
# Parquet input (`moelab prep --format parquet`) needs pyarrow beside torch; a
# machine's own PyTorch install (launch/gpu-check.sh) may lack it, so it can be
# left out, and `--format parquet` then says so.
option(MOELAB_WITH_PARQUET "Read Parquet corpora with Arrow from the pyarrow wheel" ON)
if(MOELAB_WITH_PARQUET)
  include(MoelabArrow)
endif()
find_package(MPI REQUIRED COMPONENTS C)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(tomlplusplus REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
find_package(zstd CONFIG REQUIRED)
find_library(XXHASH_LIBRARY NAMES xxhash REQUIRED)
# PCRE2 (UTF, Unicode properties, JIT) runs the pre-tokenizer regexes of
# tokenizer.json and tiktoken tokenizers.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# ICU (Debian's libicu) gives tokenizer.json normalizers their Unicode
# normalization forms (its filtered normalizer can hold them to the Unicode
# version `tokenizers` uses) and character classes.
find_package(ICU REQUIRED COMPONENTS uc)
# SentencePiece is not linked: Debian's libsentencepiece carries its own
# protobuf-lite 3.14, which cannot share a process with LibTorch's protobuf 3.21
# (version checks fail or static initialisation crashes). The tokenizer runs
# SentencePiece's own tools (spm_train, spm_encode, ...) instead; see src/data/tokenizer.h.
find_path(XXHASH_INCLUDE_DIR NAMES xxhash.h REQUIRED)

add_library(moelab_deps INTERFACE)
# LibTorch's include folder carries its own {fmt} (12.x), which would shadow the
# Debian fmt 9 that spdlog is built against. A folder holding only a link to
# Debian's fmt, searched before LibTorch's, keeps moelab on the fmt it links.
find_path(FMT_INCLUDE_DIR fmt/format.h HINTS /usr/include NO_CMAKE_PATH NO_CMAKE_ENVIRONMENT_PATH)
set(_fmt_first ${CMAKE_BINARY_DIR}/fmt-first)
file(MAKE_DIRECTORY ${_fmt_first})
file(CREATE_LINK ${FMT_INCLUDE_DIR}/fmt ${_fmt_first}/fmt SYMBOLIC)
target_include_directories(moelab_deps SYSTEM BEFORE INTERFACE ${_fmt_first})
target_link_libraries(moelab_deps INTERFACE
  ${TORCH_LIBRARIES} MPI::MPI_C ${HDF5_C_LIBRARIES} tomlplusplus::tomlplusplus
  spdlog::spdlog fmt::fmt CLI11::CLI11 nlohmann_json::nlohmann_json ZLIB::ZLIB zstd::libzstd_shared
  ${XXHASH_LIBRARY} PkgConfig::PCRE2 ICU::uc)
target_include_directories(moelab_deps SYSTEM INTERFACE
  ${TORCH_INCLUDE_DIRS} ${HDF5_C_INCLUDE_DIRS} ${XXHASH_INCLUDE_DIR})
# Only MPI's C API is used; without these, <mpi.h> drags in the C++ bindings.
target_compile_definitions(moelab_deps INTERFACE ${HDF5_C_DEFINITIONS} OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
# Torch's own flags (e.g. the C++ ABI define) must reach every translation unit.
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(moelab_deps INTERFACE ${_torch_flags})
# The CPU kernels split rows with at::parallel_for, which LibTorch implements
# with OpenMP in the caller's code: without -fopenmp they would run on one
# thread. The runtime is the one LibTorch loads (libgomp). Every translation
# unit gets the flag, so that one precompiled header serves the kernels too
# (GCC refuses a header built without it); nothing else has OpenMP pragmas.
find_package(OpenMP)
if(OpenMP_CXX_FOUND)
  target_link_libraries(moelab_deps INTERFACE OpenMP::OpenMP_CXX)
else()
  message(WARNING "No OpenMP for the compiler: moelab's CPU kernels will run on one thread")
  target_compile_options(moelab_deps INTERFACE -fopenmp-simd)
endif()

# CUDA + NCCL, on when LibTorch is a CUDA build. The NCCL backend links the very
# libnccl.so.2 that the torch wheel's libtorch_cuda loads (its nvidia/nccl
# folder), so the process holds one NCCL; CUDA runtime calls go through c10::cuda.
# It compiles and links on any machine with the toolkit; it runs where a GPU is.
get_filename_component(_wheel_site ${TORCH_INSTALL_PREFIX} DIRECTORY)
find_path(NCCL_INCLUDE_DIR nccl.h NO_DEFAULT_PATH
  HINTS ${_wheel_site}/nvidia/nccl/include ENV NCCL_HOME PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NO_DEFAULT_PATH
  HINTS ${_wheel_site}/nvidia/nccl/lib ENV NCCL_HOME PATH_SUFFIXES lib lib64)
if(TORCH_CUDA_LIBRARIES AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(_nccl_found ON)
else()
  set(_nccl_found OFF)
endif()
option(MOELAB_WITH_NCCL "Build the NCCL communicator and the CUDA paths" ${_nccl_found})
if(MOELAB_WITH_NCCL)
  if(NOT _nccl_found)
    message(FATAL_ERROR "MOELAB_WITH_NCCL=ON needs a CUDA LibTorch and the NCCL it loads "
                        "(nccl.h, libnccl.so.2 under ${_wheel_site}/nvidia/nccl, or $NCCL_HOME)")
  endif()
  target_include_directories(moelab_deps SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(moelab_deps INTERFACE ${NCCL_LIBRARY})
  target_compile_definitions(moelab_deps INTERFACE MOELAB_WITH_NCCL=1)
  # The wheel's CUDA libraries first: the toolkit's libcudart (older) must not be
  # the one loaded for libtorch_cuda.
  file(GLOB _wheel_cuda_libs LIST_DIRECTORIES true ${_wheel_site}/nvidia/*/lib)
  set(CMAKE_BUILD_RPATH ${_wheel_cuda_libs})
  message(STATUS "moelab: NCCL backend ON (${NCCL_LIBRARY})")
else()
  message(STATUS "moelab: NCCL backend OFF (LibTorch without CUDA, or no NCCL beside it)")
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

