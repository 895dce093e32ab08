// Mean and sample standard deviation over seeds.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

struct MeanStd {
  size_t n = 0;
  double mean = 0.0;
  std::optional<double> std;  // sample std (n - 1); undefined for n < 2
};

// n = 0 gives mean 0 and no std; callers report n alongside.
MeanStd mean_std(const std::vector<double>& values);

// "3.4521 ± 0.0123", "3.4521 (n=1)" or "—" for no values.
std::string format_mean_std(const MeanStd& m, int decimals = 4);

// {"n", "mean", "std"}, null where undefined (summary.json).
nlohmann::json mean_std_json(const MeanStd& m);
// Its inverse.
MeanStd mean_std_from_json(const nlohmann::json& j);

}  // namespace moelab
