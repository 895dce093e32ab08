# LibTorch from a PyTorch wheel. Sets MOELAB_PYTHON (the interpreter whose torch is
# used; tests run the Python reference model with it), finds Torch, and, for a
# CUDA build, MOELAB_TORCH_NVIDIA_LIBS: the wheel's own CUDA runtime and NCCL
# folders, which must win at run time over the toolkit's (one libcudart, one
# NCCL in the process).

set(_venv_python ${PROJECT_SOURCE_DIR}/.venv/bin/python)
if(EXISTS ${_venv_python})
  set(_default_python ${_venv_python})
else()
  find_program(_default_python NAMES python3 python)
endif()
set(MOELAB_PYTHON ${_default_python} CACHE FILEPATH "Python whose torch wheel provides LibTorch")

if(NOT Torch_DIR)
  execute_process(
    COMMAND ${MOELAB_PYTHON} -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_VARIABLE _torch_error RESULT_VARIABLE _torch_result)
  if(NOT _torch_result EQUAL 0)
    message(FATAL_ERROR "moelab: ${MOELAB_PYTHON} cannot import torch (${_torch_error}). "
                        "Run launch/install-deps.sh, or pass -DMOELAB_PYTHON=/path/to/python "
                        "of an environment that has torch 2.x.")
  endif()
  # The wheel's torch/ folder too: TorchConfig finds c10 and friends with
  # find_library, which would otherwise take a system LibTorch's (e.g. Debian's
  # libtorch-dev, 1.13) before the wheel's own.
  get_filename_component(_torch_root ${_torch_prefix}/../.. ABSOLUTE)
  list(PREPEND CMAKE_PREFIX_PATH ${_torch_root} ${_torch_prefix})
endif()

# Torch's CMake config looks for the CUDA toolkit (headers, nvcc) itself when the
# wheel is a CUDA build; point it at the system toolkit unless told otherwise.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(Torch REQUIRED)
if(Torch_VERSION VERSION_LESS 2.0)
  message(FATAL_ERROR "moelab needs LibTorch 2.x; found ${Torch_VERSION} at ${Torch_DIR}")
endif()
message(STATUS "moelab: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}), python ${MOELAB_PYTHON}")
