// What one TensorBoard write costs rank 0: every record of a run's
// metrics.jsonl written `repeats` times through TensorBoardLog (encoding,
// framing, CRCs, flush) into a scratch folder. Prints microseconds per record
// and, against the run's own median step time, the share of a step that
// logging at every step would add.
//
// Usage: bench_logging RUN_DIR [repeats=200]
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/tensorboard_log.h"
#include "util/stopwatch.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: bench_logging RUN_DIR [repeats=200]\n");
    return 2;
  }
  const std::string run_dir = argv[1];
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 200;
  std::vector<nlohmann::json> records;
  std::vector<double> step_ms;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    records.push_back(nlohmann::json::parse(line));
    double ms = 0;
    for (const auto& [phase, t] : records.back().at("time_ms").items()) ms += t.get<double>();
    step_ms.push_back(ms);
  }
  if (records.empty()) {
    fmt::print(stderr, "bench_logging: no records in {}/metrics.jsonl\n", run_dir);
    return 2;
  }
  const auto scratch = std::filesystem::temp_directory_path() / "moelab_bench_logging";
  std::filesystem::remove_all(scratch);
  const moelab::Stopwatch watch;
  {
    moelab::TensorBoardLog log(scratch.string(), -1);
    for (int r = 0; r < repeats; ++r) {
      for (const auto& record : records) log.write_metrics(record);
    }
  }
  const double us = 1e3 * watch.peek() / double(repeats * records.size());
  std::nth_element(step_ms.begin(), step_ms.begin() + step_ms.size() / 2, step_ms.end());
  const double median_ms = step_ms[step_ms.size() / 2];
  fmt::print(
      "{} values per record: {:.1f} us per TensorBoard write; median step {:.1f} ms: "
      "{:.3f}% of a step when every step is logged\n",
      moelab::summary_values(records.front()).size(), us, median_ms,
      100.0 * us / 1000.0 / median_ms);
  std::filesystem::remove_all(scratch);
  return 0;
}
