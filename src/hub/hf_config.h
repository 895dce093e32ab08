// A Hugging Face config.json as a moelab Config and back, for any family of
// hub_families(). The keys every family shares map one to one onto
// [model] keys (kIntegerKeys, kRealKeys in hf_config.cpp); a family's row says
// the rest (latent attention, expert count and width keys, gate, shared
// experts, dense layers, routing, windows, the keys it fixes). Keys that
// change the computation in a way moelab has not are refused by name.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "hub/family.h"

namespace moelab {

// model.rope_theta and model.rope_scaling as transformers 5's rope_parameters.
nlohmann::json rope_parameters_json(const ModelConfig& model);

// The config.json of cfg written as `family` (which must express it).
nlohmann::json hf_config_json(const Config& cfg, const HubFamily& family);

// The family a config.json's "architectures" names; InputError otherwise.
const HubFamily& family_of(const nlohmann::json& j, const std::string& path);

// The moelab model a config.json describes; InputError naming the key for what
// moelab cannot express.
Config config_from_hf(const nlohmann::json& j, const HubFamily& family, const std::string& path);

}  // namespace moelab
