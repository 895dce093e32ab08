// Arrow's Result<T> unwrapped, or an InputError naming what was being read.
#pragma once

#include <arrow/result.h>

#include <string>
#include <utility>

#include "util/error.h"

namespace moelab {

template <typename Value>
Value checked(arrow::Result<Value> result, const std::string& context) {
  if (!result.ok()) throw InputError(context + ": " + result.status().ToString());
  return std::move(result).ValueUnsafe();
}

}  // namespace moelab
