#include "checkpoint/stacked_tensors.h"

#include <map>
#include <vector>

#include "checkpoint/optimizer_state.h"
#include "util/error.h"

namespace moelab {
namespace {

const char* const kMomentFields[] = {"exp_avg", "exp_avg_sq"};

// A name a stack's parts carry, and the names its rows' parts get.
struct StackedName {
  std::vector<std::string> rows;
  bool is_step = false;
};

std::map<std::string, StackedName> stacked_names(const StackedParams& stacked) {
  std::map<std::string, StackedName> names;
  for (const auto& param : stacked) {
    names[param.name].rows = param.row_names;
    for (const char* field : kMomentFields) {
      auto& rows = names[optimizer_state_name(param.name, field)].rows;
      for (const auto& row : param.row_names) rows.push_back(optimizer_state_name(row, field));
    }
    auto& step = names[optimizer_state_name(param.name, "step")];
    step.is_step = true;
    for (const auto& row : param.row_names) step.rows.push_back(optimizer_state_name(row, "step"));
  }
  return names;
}

// The parts of the rows that `part`'s range of a [rows, ...] tensor covers.
void split_rows(const TensorPart& part, const std::vector<std::string>& rows, TensorParts& out) {
  const std::vector<int64_t> row_shape(part.shape.begin() + 1, part.shape.end());
  const int64_t row_numel = numel_of(row_shape);
  const int64_t end = part.begin + part.data.numel();
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t row_begin = int64_t(r) * row_numel;
    const int64_t lo = std::max(part.begin, row_begin);
    const int64_t hi = std::min(end, row_begin + row_numel);
    if (lo >= hi) continue;
    out.push_back({rows[r], row_shape, lo - row_begin,
                   part.data.narrow(0, lo - part.begin, hi - lo), part.optional});
  }
}

}  // namespace

TensorParts split_stacked_parts(const TensorParts& parts, const StackedParams& stacked,
                                bool separate_steps) {
  const auto names = stacked_names(stacked);
  TensorParts out;
  for (const auto& part : parts) {
    const auto it = names.find(part.name);
    if (it == names.end()) {
      out.push_back(part);
    } else if (!it->second.is_step) {
      split_rows(part, it->second.rows, out);
    } else {
      for (const auto& row : it->second.rows) {
        const torch::Tensor data = separate_steps ? torch::empty_like(part.data) : part.data;
        out.push_back({row, part.shape, part.begin, data, part.optional});
      }
    }
  }
  return out;
}

void join_stacked_steps(const TensorParts& stack_parts, const TensorParts& row_parts,
                        const StackedParams& stacked, const std::string& source) {
  const auto names = stacked_names(stacked);
  std::map<std::string, torch::Tensor> read;
  for (const auto& part : row_parts) read[part.name] = part.data;
  for (const auto& part : stack_parts) {
    const auto it = names.find(part.name);
    if (it == names.end() || !it->second.is_step) continue;
    const auto& rows = it->second.rows;
    for (const auto& row : rows) {
      if (!torch::equal(read.at(row), read.at(rows.front()))) {
        throw InputError(source + ": optimizer step '" + row + "' differs from '" + rows.front() +
                         "'; experts stacked into one parameter share one step count");
      }
    }
    part.data.copy_(read.at(rows.front()));
  }
}

}  // namespace moelab
