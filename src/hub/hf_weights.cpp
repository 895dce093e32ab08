#include "hub/hf_weights.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

using json = nlohmann::json;

const std::string kFusedGateUp = ".mlp.experts.gate_up_proj";
const std::string kFusedDown = ".mlp.experts.down_proj";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The index's weight_map as file -> tensor names.
std::map<std::string, std::set<std::string>> names_by_file(const std::string& index) {
  json parsed;
  try {
    parsed = json::parse(read_text_file(index, "safetensors index"));
  } catch (const json::exception& e) {
    throw InputError(index + ": not JSON (" + e.what() + ")");
  }
  if (!parsed.is_object() || !parsed.contains("weight_map") || !parsed["weight_map"].is_object()) {
    throw InputError(index + ": expected an object with a \"weight_map\" object");
  }
  std::map<std::string, std::set<std::string>> by_file;
  for (const auto& [name, file] : parsed["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
      throw InputError(index + ": weight_map[\"" + name + "\"] is not a file name of the folder");
    }
    by_file[file.get<std::string>()].insert(name);
  }
  return by_file;
}

}  // namespace

std::vector<SafetensorsFile> hf_weight_files(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  std::vector<SafetensorsFile> files;
  if (!std::filesystem::exists(index)) {
    files.emplace_back(dir + "/model.safetensors");
    return files;
  }
  std::set<std::string> seen;
  for (const auto& [file, names] : names_by_file(index)) {
    files.emplace_back(dir + "/" + file);
    for (const auto& [name, entry] : files.back().entries()) {
      if (!seen.insert(name).second) {
        throw InputError(files.back().path() + ": tensor '" + name + "' is in another shard too");
      }
    }
    for (const auto& name : names) {
      if (!files.back().entries().count(name)) {
        throw InputError(index + ": tensor '" + name + "' is mapped to " + file +
                         ", which lacks it");
      }
    }
  }
  return files;
}

std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir) {
  std::map<std::string, torch::Tensor> all;
  for (const SafetensorsFile& file : hf_weight_files(dir)) {
    for (const auto& [name, entry] : file.entries())
      all[name] = file.read(name).to(torch::kFloat32);
  }
  return all;
}

HfWeights::HfWeights(const std::string& dir, const HubFamily& family)
    : files_(hf_weight_files(dir)) {
  std::vector<std::string> fused_layers;
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const auto& [name, entry] : files_[f].entries()) {
      sources_[name] = Source{f, name};
      shapes_[name] = entry.shape;
      if (ends_with(name, kFusedGateUp)) {
        fused_layers.push_back(name.substr(0, name.size() - kFusedGateUp.size()));
      }
    }
  }
  for (const auto& layer : fused_layers) add_fused_experts(layer, family);
}

void HfWeights::add_fused_experts(const std::string& layer, const HubFamily& family) {
  const auto gate_up = shapes_.at(layer + kFusedGateUp);
  const auto down = shapes_.find(layer + kFusedDown);
  if (down == shapes_.end() || gate_up.size() != 3 || gate_up[1] % 2 != 0 ||
      down->second.size() != 3 || down->second[0] != gate_up[0]) {
    throw InputError(layer + kFusedGateUp + ": expected [experts, 2 * width, hidden] beside " +
                     layer + kFusedDown + " [experts, hidden, width]");
  }
  const int64_t width = gate_up[1] / 2;
  const std::string prefix = layer + "." + family.moe_module + ".experts.";
  const auto& names = family.expert_projections;
  for (int64_t e = 0; e < gate_up[0]; ++e) {
    const std::string expert = prefix + std::to_string(e) + ".";
    const Source fused_gate_up = sources_.at(layer + kFusedGateUp);
    const Source fused_down = sources_.at(layer + kFusedDown);
    sources_[expert + names[0] + ".weight"] = {fused_gate_up.file, fused_gate_up.tensor, e, 0,
                                               width};
    sources_[expert + names[1] + ".weight"] = {fused_gate_up.file, fused_gate_up.tensor, e, width,
                                               width};
    sources_[expert + names[2] + ".weight"] = {fused_down.file, fused_down.tensor, e, 0,
                                               down->second[1]};
    shapes_[expert + names[0] + ".weight"] = {width, gate_up[2]};
    shapes_[expert + names[1] + ".weight"] = {width, gate_up[2]};
    shapes_[expert + names[2] + ".weight"] = {down->second[1], down->second[2]};
  }
  for (const std::string& fused : {layer + kFusedGateUp, layer + kFusedDown}) {
    sources_.erase(fused);
    shapes_.erase(fused);
  }
  // The router too sits under the family's module name on the Hub.
  const std::string router = layer + ".mlp.gate.weight";
  const std::string hub_router = layer + "." + family.moe_module + ".gate.weight";
  if (router != hub_router && sources_.count(router)) {
    sources_[hub_router] = sources_.at(router);
    shapes_[hub_router] = shapes_.at(router);
    sources_.erase(router);
    shapes_.erase(router);
  }
}

torch::Tensor HfWeights::read(const std::string& name) {
  const Source& source = sources_.at(name);
  const SafetensorsFile& file = files_[source.file];
  if (source.expert < 0) {
    const torch::Tensor t = file.read(source.tensor);
    return t.scalar_type() == torch::kFloat16 ? t.to(torch::kFloat32) : t;
  }
  if (cached_name_ != source.tensor) {
    cached_ = file.read(source.tensor);
    if (cached_.scalar_type() == torch::kFloat16) cached_ = cached_.to(torch::kFloat32);
    cached_name_ = source.tensor;
  }
  return cached_[source.expert].narrow(0, source.row, source.rows).clone();
}

}  // namespace moelab
