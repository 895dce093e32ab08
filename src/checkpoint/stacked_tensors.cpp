#include "checkpoint/stacked_tensors.h"

#include <vector>

#include "checkpoint/optimizer_state.h"
#include "util/error.h"

namespace moelab {
namespace {

const char* const kStateFields[] = {"exp_avg", "exp_avg_sq", "step"};

// Moves tensors[key] (stacked) into one entry per row: rows[i] <- row i, or
// the whole tensor for a 0-dim one (the step count).
void split_entry(NamedTensors& tensors, const std::string& key,
                 const std::vector<std::string>& rows) {
  const auto it = tensors.find(key);
  if (it == tensors.end()) return;
  const torch::Tensor stacked = it->second;
  tensors.erase(it);
  for (size_t r = 0; r < rows.size(); ++r) {
    tensors[rows[r]] = stacked.dim() == 0 ? stacked : stacked.select(0, static_cast<int64_t>(r));
  }
}

// The step count of a stack: every row's must be the same.
torch::Tensor joined_step(const std::vector<torch::Tensor>& steps,
                          const std::vector<std::string>& rows, const std::string& source) {
  for (size_t r = 1; r < steps.size(); ++r) {
    if (!torch::equal(steps[r], steps[0])) {
      throw InputError(source + ": optimizer step '" + rows[r] + "' differs from '" + rows[0] +
                       "'; experts stacked into one parameter share one step count");
    }
  }
  return steps[0];
}

// Moves the row entries into tensors[key], stacked. Without `required`, a
// checkpoint that holds none of the rows stays as it is.
void join_entry(NamedTensors& tensors, const std::string& key, const std::vector<std::string>& rows,
                bool required, const std::string& source) {
  std::vector<torch::Tensor> parts;
  for (const auto& row : rows) {
    const auto it = tensors.find(row);
    if (it != tensors.end()) parts.push_back(it->second);
  }
  if (parts.empty() && !required) return;
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto it = tensors.find(rows[r]);
    if (it == tensors.end()) {
      throw InputError(source + ": checkpoint has no tensor '" + rows[r] +
                       "'; it was saved from a different model config");
    }
    if (it->second.sizes() != parts.front().sizes()) {
      throw InputError(source + ": tensor '" + rows[r] + "' has shape " +
                       c10::str(it->second.sizes()) + " but '" + rows.front() + "' has " +
                       c10::str(parts.front().sizes()) + " (experts of one width)");
    }
  }
  tensors[key] = parts.front().dim() == 0 ? joined_step(parts, rows, source) : torch::stack(parts);
  for (const auto& row : rows) tensors.erase(row);
}

std::vector<std::string> state_rows(const std::vector<std::string>& rows,
                                    const std::string& field) {
  std::vector<std::string> out;
  for (const auto& row : rows) out.push_back(optimizer_state_name(row, field));
  return out;
}

}  // namespace

NamedTensors split_stacked(NamedTensors tensors, const StackedParams& stacked) {
  for (const auto& param : stacked) {
    split_entry(tensors, param.name, param.row_names);
    for (const char* field : kStateFields) {
      split_entry(tensors, optimizer_state_name(param.name, field),
                  state_rows(param.row_names, field));
    }
  }
  return tensors;
}

NamedTensors join_stacked(NamedTensors tensors, const StackedParams& stacked,
                          const std::string& source) {
  for (const auto& param : stacked) {
    join_entry(tensors, param.name, param.row_names, /*required=*/true, source);
    for (const char* field : kStateFields) {
      join_entry(tensors, optimizer_state_name(param.name, field),
                 state_rows(param.row_names, field),
                 /*required=*/false, source);
    }
  }
  return tensors;
}

}  // namespace moelab
