// Groups of data sets in a routing analysis over a study (`moelab analyze
// routing STUDY_DIR --group romance=es,it,pt`): do a group's sets share experts
// more with each other than with the rest? Per run, from its mean divergence
// over the MoE layers (train/routing_analysis.h): `within` = the mean JSD of
// the pairs inside the group, `outside` = the mean JSD of the pairs with one
// set inside and one outside, `gap` = outside - within; each over the seeds as
// mean ± std (the gap paired by seed, so a gap larger than its std is beyond
// the seed spread).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moelab {

struct SetGroup {
  std::string name;
  std::vector<std::string> sets;
};

// "NAME=SET,SET,..." with at least two sets, each one of `sets` (the analysed
// sets' names), at least one of `sets` left outside; InputError naming the
// --group argument otherwise.
SetGroup parse_set_group(const std::string& arg, const std::vector<std::string>& sets);

// [{"group", "sets", "within", "outside", "gap"}] (each {"n", "mean", "std"})
// over the runs' reports, one entry per group.
nlohmann::json group_contrasts(const std::vector<const nlohmann::json*>& reports,
                               const std::vector<SetGroup>& groups);

}  // namespace moelab
