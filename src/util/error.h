// Error types that map to the CLI's exit codes: InputError (bad usage, config or
// input data) exits 2; anything else that escapes exits 1.
#pragma once

#include <stdexcept>
#include <string>

namespace moelab {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace moelab
