#include "config/data_sets.h"

#include <algorithm>
#include <cctype>

namespace moelab {
namespace {

std::string last_component(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir.substr(dir.rfind('/') + 1);
}

}  // namespace

std::vector<DataSource> training_sources(const Config& cfg) {
  std::vector<DataSource> sources = cfg.data.sources;
  if (sources.empty()) {
    DataSource only;
    only.dir = cfg.data.dir;
    only.max_unique_tokens = cfg.data.max_unique_tokens;
    sources.push_back(only);
  }
  for (auto& s : sources) {
    if (s.name.empty()) s.name = last_component(s.dir);
  }
  return sources;
}

std::vector<EvalSet> validation_sets(const Config& cfg) {
  if (!cfg.eval.sets.empty()) return cfg.eval.sets;
  EvalSet set;
  set.name = "val";
  set.dir = training_sources(cfg).front().dir;
  set.split = cfg.data.val_split;
  return {set};
}

bool is_plain_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace moelab
