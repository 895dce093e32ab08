// What writing and reading tensor files share (tensor_file.cpp,
// tensor_file_reader.cpp): the attribute that marks bfloat16, and HDF5's own
// error printing silenced while moelab reports errors itself.
#pragma once

#include <hdf5.h>

namespace moelab {

inline constexpr const char* kDtypeAttribute = "torch_dtype";

// HDF5 prints its whole error stack to stderr by default; our exceptions already
// say what went wrong, so the stack is silenced while we work and then restored.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &handler_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, handler_, data_); }

 private:
  H5E_auto2_t handler_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace moelab
