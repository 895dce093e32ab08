#include "study/routing_groups.h"

#include <algorithm>
#include <sstream>

#include "study/stats.h"
#include "util/error.h"

namespace moelab {

namespace {

using Json = nlohmann::json;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  if (text.empty() || text.back() == ',') parts.push_back("");  // an empty name, refused
  return parts;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct GroupJsd {
  double within = 0, outside = 0;
};

// One run's within and outside means from its mean-over-layers pair list.
GroupJsd group_jsd(const Json& report, const SetGroup& group) {
  double within = 0, outside = 0;
  int within_n = 0, outside_n = 0;
  for (const Json& pair : report["mean_jsd"]) {
    const int inside = int(contains(group.sets, pair["sets"][0].get<std::string>())) +
                       int(contains(group.sets, pair["sets"][1].get<std::string>()));
    const double jsd = pair["jsd"].get<double>();
    if (inside == 2) within += jsd, ++within_n;
    if (inside == 1) outside += jsd, ++outside_n;
  }
  return {within / within_n, outside / outside_n};
}

}  // namespace

SetGroup parse_set_group(const std::string& arg, const std::vector<std::string>& sets) {
  const std::string at = "--group " + arg + ": ";
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(at + "expected NAME=SET,SET,... (e.g. romance=es,it,pt)");
  }
  SetGroup group{arg.substr(0, eq), split_commas(arg.substr(eq + 1))};
  for (size_t i = 0; i < group.sets.size(); ++i) {
    const std::string& set = group.sets[i];
    if (!contains(sets, set)) {
      throw InputError(at + "'" + set + "' is not one of the --set names");
    }
    if (std::find(group.sets.begin(), group.sets.begin() + i, set) != group.sets.begin() + i) {
      throw InputError(at + "'" + set + "' is named twice");
    }
  }
  if (group.sets.size() < 2 || group.sets.size() == sets.size()) {
    throw InputError(at + "a group needs two sets or more and at least one set outside it");
  }
  return group;
}

Json group_contrasts(const std::vector<const Json*>& reports, const std::vector<SetGroup>& groups) {
  Json contrasts = Json::array();
  for (const SetGroup& group : groups) {
    std::vector<double> within, outside, gap;
    for (const Json* report : reports) {
      const GroupJsd g = group_jsd(*report, group);
      within.push_back(g.within);
      outside.push_back(g.outside);
      gap.push_back(g.outside - g.within);
    }
    contrasts.push_back({{"group", group.name},
                         {"sets", group.sets},
                         {"within", mean_std_json(mean_std(within))},
                         {"outside", mean_std_json(mean_std(outside))},
                         {"gap", mean_std_json(mean_std(gap))}});
  }
  return contrasts;
}

}  // namespace moelab
