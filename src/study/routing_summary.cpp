#include "study/routing_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "study/stats.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {

namespace {

using Json = nlohmann::json;

// Mean ± std over the runs of one number each run's report holds.
Json over_runs(const std::vector<const Json*>& reports,
               const std::function<double(const Json&)>& value) {
  std::vector<double> values;
  for (const Json* report : reports) values.push_back(value(*report));
  return mean_std_json(mean_std(values));
}

// [{"sets": [a, b], "jsd": mean_std}] from each run's pair list at `pairs_of`.
Json pairs_over_runs(const std::vector<const Json*>& reports,
                     const std::function<const Json&(const Json&)>& pairs_of) {
  Json pairs = Json::array();
  const Json& first = pairs_of(*reports.front());
  for (size_t p = 0; p < first.size(); ++p) {
    pairs.push_back({{"sets", first[p]["sets"]}, {"jsd", over_runs(reports, [&](const Json& r) {
                                                    return pairs_of(r)[p]["jsd"].get<double>();
                                                  })}});
  }
  return pairs;
}

// Every run of a variant must have routed the same sets through the same layers.
void check_same_shape(const std::string& variant, const std::vector<const Json*>& reports,
                      const std::vector<int64_t>& seeds) {
  const Json& first = *reports.front();
  for (size_t k = 1; k < reports.size(); ++k) {
    const Json& other = *reports[k];
    bool same = other["sets"] == first["sets"] && other["layers"].size() == first["layers"].size();
    for (size_t i = 0; same && i < first["layers"].size(); ++i) {
      same = other["layers"][i]["layer"] == first["layers"][i]["layer"];
    }
    if (!same) {
      throw InputError(fmt::format(
          "analyze routing: variant {}: seed {} reports other sets or MoE layers than seed {}",
          variant, seeds[k], seeds.front()));
    }
  }
}

Json summarize_variant(const std::string& variant, const std::vector<const Json*>& reports,
                       const std::vector<int64_t>& seeds, const std::vector<SetGroup>& groups) {
  check_same_shape(variant, reports, seeds);
  Json layers = Json::array();
  const Json& first = *reports.front();
  for (size_t i = 0; i < first["layers"].size(); ++i) {
    Json entropy = Json::object();
    for (const Json& set : first["sets"]) {
      const std::string name = set.get<std::string>();
      entropy[name] = over_runs(reports, [&](const Json& r) {
        return r["layers"][i]["sets"][name]["entropy"].get<double>();
      });
    }
    layers.push_back({{"layer", first["layers"][i]["layer"]},
                      {"entropy", entropy},
                      {"jsd", pairs_over_runs(reports, [&](const Json& r) -> const Json& {
                         return r["layers"][i]["jsd"];
                       })}});
  }
  return {{"variant", variant},
          {"seeds", seeds},
          {"layers", layers},
          {"mean_jsd",
           pairs_over_runs(reports, [](const Json& r) -> const Json& { return r["mean_jsd"]; })},
          {"groups", group_contrasts(reports, groups)}};
}

std::string csv_mean_std(const Json& m) {
  return fmt::format("{},{:.17g},{}", m["n"].get<int64_t>(), m["mean"].get<double>(),
                     m["std"].is_null() ? "" : fmt::format("{:.17g}", m["std"].get<double>()));
}

std::string jsd_rows(const std::string& variant, const std::string& layer, const Json& pairs) {
  std::string rows;
  for (const Json& pair : pairs) {
    rows += fmt::format("{},{},{},{},{}\n", variant, layer, pair["sets"][0].get<std::string>(),
                        pair["sets"][1].get<std::string>(), csv_mean_std(pair["jsd"]));
  }
  return rows;
}

std::string group_rows(const std::string& variant, const Json& groups) {
  std::string rows;
  for (const Json& g : groups) {
    std::string sets;
    for (const Json& set : g["sets"]) sets += (sets.empty() ? "" : " ") + set.get<std::string>();
    const auto mean_std_only = [](const Json& m) {
      const std::string n_mean_std = csv_mean_std(m);
      return n_mean_std.substr(n_mean_std.find(',') + 1);
    };
    rows += fmt::format("{},{},{},{},{},{},{}\n", variant, g["group"].get<std::string>(), sets,
                        g["gap"]["n"].get<int64_t>(), mean_std_only(g["within"]),
                        mean_std_only(g["outside"]), mean_std_only(g["gap"]));
  }
  return rows;
}

}  // namespace

Json summarize_routing(const std::vector<RunRouting>& runs, const std::vector<SetGroup>& groups) {
  std::vector<std::string> order;
  for (const RunRouting& run : runs) {
    if (std::find(order.begin(), order.end(), run.variant) == order.end()) {
      order.push_back(run.variant);
    }
  }
  Json summary = {{"sets", runs.empty() ? Json::array() : runs.front().report["sets"]},
                  {"variants", Json::array()}};
  for (const std::string& variant : order) {
    std::vector<const Json*> reports;
    std::vector<int64_t> seeds;
    for (const RunRouting& run : runs) {
      if (run.variant != variant) continue;
      reports.push_back(&run.report);
      seeds.push_back(run.seed);
    }
    summary["variants"].push_back(summarize_variant(variant, reports, seeds, groups));
  }
  return summary;
}

void write_routing_summary(const Json& summary, const std::string& dir) {
  std::string sets = "variant,layer,set,n,entropy_mean,entropy_std\n";
  std::string jsd = "variant,layer,set_a,set_b,n,jsd_mean,jsd_std\n";
  std::string groups =
      "variant,group,sets,n,within_mean,within_std,outside_mean,outside_std,gap_mean,gap_std\n";
  bool any_group = false;
  for (const Json& v : summary["variants"]) {
    const std::string variant = v["variant"];
    for (const Json& layer : v["layers"]) {
      const std::string l = std::to_string(layer["layer"].get<int64_t>());
      for (const auto& [name, m] : layer["entropy"].items()) {
        sets += fmt::format("{},{},{},{}\n", variant, l, name, csv_mean_std(m));
      }
      jsd += jsd_rows(variant, l, layer["jsd"]);
    }
    jsd += jsd_rows(variant, "mean", v["mean_jsd"]);
    groups += group_rows(variant, v["groups"]);
    any_group |= !v["groups"].empty();
  }
  std::filesystem::create_directories(dir);
  write_file_atomically(dir + "/routing_summary.json", summary.dump(1) + "\n");
  write_file_atomically(dir + "/routing_summary_sets.csv", sets);
  write_file_atomically(dir + "/routing_summary_jsd.csv", jsd);
  if (any_group) write_file_atomically(dir + "/routing_summary_groups.csv", groups);
}

}  // namespace moelab
