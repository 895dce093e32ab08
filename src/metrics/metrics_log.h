// Rank 0's run logs: metrics.jsonl (one JSON object per line) and val.csv. Both
// can resume: lines after the checkpoint's step are dropped, so a resumed run ends
// with the same files as an uninterrupted one (up to timing fields).
#pragma once

#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

// resumed_step < 0 starts a fresh file; otherwise the existing file keeps its lines
// with step <= resumed_step. A torn last line (a crash mid-write) is dropped with a
// warning; any other unreadable line is an InputError naming the file and line.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& run_dir, int64_t resumed_step = -1);
  // `record` must hold an integer "step". Written and flushed as one line.
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

// val.csv: "step,tokens,val_loss,best_val_loss", header once, then a
// "val_loss/<name>" column for each named validation set, then the downstream
// tasks' columns ("task/<name>/<metric>"), empty in rows where the task was not
// scored: the first four columns mean the same in every run, val_loss and
// best_val_loss being those of the first set. A resume keeps the header: one
// with other sets or tasks is refused.
class ValLog {
 public:
  explicit ValLog(const std::string& run_dir, int64_t resumed_step = -1,
                  std::vector<std::string> set_names = {},
                  const std::vector<std::string>& task_columns = {});
  // Appends a row (losses in shortest round-trip form, so a resumed run restores
  // the best loss exactly) and returns the best validation loss so far, this one
  // included. `losses`: one per validation set, the first set's first (a
  // single one without named sets).
  // `task_cells`: one per task column, nullopt where not scored this time.
  double write(int64_t step, int64_t tokens, const std::vector<double>& losses,
               const std::vector<std::optional<double>>& task_cells = {});
  double best_val_loss() const { return best_; }

 private:
  std::string path_;
  std::string header_;
  std::vector<std::string> set_names_;
  size_t task_columns_ = 0;
  std::ofstream out_;
  double best_ = std::numeric_limits<double>::infinity();
};

}  // namespace moelab
