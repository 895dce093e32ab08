#include "study/stats.h"

#include <cmath>

#include <fmt/format.h>

namespace moelab {

MeanStd mean_std(const std::vector<double>& values) {
  MeanStd m;
  m.n = values.size();
  if (m.n == 0) return m;
  double sum = 0;
  for (double v : values) sum += v;
  m.mean = sum / double(m.n);
  if (m.n >= 2) {
    double squares = 0;
    for (double v : values) squares += (v - m.mean) * (v - m.mean);
    m.std = std::sqrt(squares / double(m.n - 1));
  }
  return m;
}

std::string format_mean_std(const MeanStd& m, int decimals) {
  if (m.n == 0) return "—";
  if (!m.std) return fmt::format("{:.{}f} (n=1)", m.mean, decimals);
  return fmt::format("{:.{}f} ± {:.{}f}", m.mean, decimals, *m.std, decimals);
}

nlohmann::json mean_std_json(const MeanStd& m) {
  return {{"n", m.n},
          {"mean", m.n ? nlohmann::json(m.mean) : nlohmann::json(nullptr)},
          {"std", m.std ? nlohmann::json(*m.std) : nlohmann::json(nullptr)}};
}

MeanStd mean_std_from_json(const nlohmann::json& j) {
  MeanStd m;
  m.n = j.at("n").get<size_t>();
  if (!j.at("mean").is_null()) m.mean = j["mean"].get<double>();
  if (!j.at("std").is_null()) m.std = j["std"].get<double>();
  return m;
}

}  // namespace moelab
