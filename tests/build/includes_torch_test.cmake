# Which sources get the torch precompiled header (cmake/MoelabTargets.cmake's
# scan), on real files: a file reaches torch's API through moelab's headers or
# not at all, and the command line's entry headers stay free of it (a torch
# include added to one of them would cost every command's file the whole of
# torch). Run: cmake -DPROJECT_SOURCE_DIR=<checkout> -P includes_torch_test.cmake
include(${PROJECT_SOURCE_DIR}/cmake/MoelabTargets.cmake)

function(expect file expected)
  moelab_includes_torch(${PROJECT_SOURCE_DIR}/${file} actual)
  if(NOT actual STREQUAL expected)
    message(SEND_ERROR "${file}: includes torch's API = ${actual}, expected ${expected}")
  endif()
endfunction()

# Directly, and only through a chain of moelab headers
# (initial_weights.h -> checkpoint/run_checkpoint.h -> <torch/torch.h>).
expect(src/model/transformer.h TRUE)
expect(src/train/initial_weights.cpp TRUE)
expect(tests/model/reference_test.cpp TRUE)
# Tensors in declarations only: ATen's tensor header does not count.
expect(src/comm/communicator.h FALSE)
expect(src/checkpoint/checkpoint_io.h FALSE)
# The command line and its entry headers.
foreach(file src/cli/train_cmd.cpp src/cli/eval_cmd.cpp src/cli/analyze_cmd.cpp
        src/cli/convert_cmd.cpp src/cli/study_cmd.cpp src/train/run_training.h
        src/train/evaluate_checkpoint.h src/train/routing_analysis.h src/convert/convert.h)
  expect(${file} FALSE)
endforeach()
