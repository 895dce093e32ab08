#include "study/run_results.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {

std::vector<ValPoint> read_val_csv(const std::string& path) {
  std::istringstream in(read_text_file(path, "validation log"));
  std::string line;
  std::vector<ValPoint> points;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (number == 1) {
      if (line != "step,tokens,val_loss,best_val_loss") {
        throw InputError(path + ":1: expected the header step,tokens,val_loss,best_val_loss");
      }
      continue;
    }
    if (line.empty()) continue;
    long long step = 0, tokens = 0;
    double loss = 0, best = 0;
    char tail = 0;
    if (std::sscanf(line.c_str(), "%lld,%lld,%lf,%lf%c", &step, &tokens, &loss, &best, &tail) !=
        4) {
      throw InputError(path + ":" + std::to_string(number) + ": '" + line +
                       "': expected step,tokens,val_loss,best_val_loss");
    }
    points.push_back({step, tokens, loss});
  }
  return points;
}

DoneRecord read_done(const std::string& path) {
  const std::string text = read_text_file(path, "DONE record");
  auto optional_number = [](const nlohmann::json& j, const char* key) -> std::optional<double> {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    return j[key].get<double>();
  };
  try {
    const auto j = nlohmann::json::parse(text);
    DoneRecord d;
    d.steps = j.at("steps");
    d.tokens = j.at("tokens");
    d.best_val_loss = optional_number(j, "best_val_loss");
    d.final_val_loss = optional_number(j, "final_val_loss");
    d.nonfinite_steps = j.value("nonfinite_steps", int64_t{0});
    d.wall_seconds = j.value("wall_seconds", 0.0);
    return d;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path +
                     ": expected a JSON object with steps, tokens, best_val_loss, "
                     "final_val_loss, wall_seconds (" +
                     std::string(e.what()) + ")");
  }
}

RunResult read_run_result(const std::string& variant, int64_t seed, const std::string& dir) {
  namespace fs = std::filesystem;
  RunResult r{variant, seed, dir, std::nullopt, {}, ""};
  if (!fs::is_directory(dir)) {
    r.problem = "missing (no run folder)";
    return r;
  }
  try {
    if (fs::exists(dir + "/val.csv")) r.curve = read_val_csv(dir + "/val.csv");
    if (!fs::exists(dir + "/DONE")) {
      r.problem = "unfinished (no DONE file; " + std::to_string(r.curve.size()) +
                  " validation points so far)";
      return r;
    }
    DoneRecord done = read_done(dir + "/DONE");
    if (!done.best_val_loss) {
      r.problem = "finished without a validation loss";
      return r;
    }
    r.done = done;
  } catch (const InputError& e) {
    r.problem = std::string("unreadable: ") + e.what();
  }
  return r;
}

}  // namespace moelab
