#include "metrics/tensorboard_log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "util/error.h"

namespace moelab {
namespace fs = std::filesystem;
namespace {

bool is_number_array(const nlohmann::json& v) {
  return v.is_array() && !v.empty() &&
         std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number(); });
}

void add_values(const nlohmann::json& v, const std::string& tag, std::vector<SummaryValue>& out) {
  if (v.is_number()) {
    out.push_back({tag, v.get<double>(), {}});
  } else if (v.is_object()) {
    for (const auto& [key, item] : v.items()) add_values(item, tag + "/" + key, out);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string item_tag = tag + "/" + std::to_string(i);
      if (is_number_array(v[i])) {
        out.push_back({item_tag, 0, v[i].get<std::vector<double>>()});
      } else {
        add_values(v[i], item_tag, out);
      }
    }
  }
}

// Event files in `dir`, in name order (the order TensorBoard reads them in).
std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// TensorBoard's naming, events.out.tfevents.<seconds>.<host>, with a sequence
// number so that a file made in the same second as the last still sorts after it.
std::string event_file_name(size_t sequence) {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return fmt::format("events.out.tfevents.{:010d}.{}.{:04d}", seconds, host, sequence);
}

}  // namespace

std::vector<SummaryValue> summary_values(const nlohmann::json& record) {
  std::vector<SummaryValue> out;
  for (const auto& [key, item] : record.items()) {
    if (key != "step") add_values(item, key, out);
  }
  return out;
}

TensorBoardLog::TensorBoardLog(const std::string& run_dir, int64_t resumed_step) {
  const fs::path dir = fs::path(run_dir) / "tb";
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw InputError(dir.string() + ": cannot create the folder: " + error.message());
  const std::vector<fs::path> files = event_files(dir);
  for (const auto& file : files) {
    if (resumed_step < 0 || keep_events_up_to(file.string(), resumed_step) == 0) {
      fs::remove(file);
    }
  }
  writer_ = std::make_unique<EventFileWriter>((dir / event_file_name(files.size())).string());
}

void TensorBoardLog::write_metrics(const nlohmann::json& record) {
  writer_->write(record.at("step").get<int64_t>(), summary_values(record));
  writer_->flush();
}

void TensorBoardLog::write_validation(int64_t step, double val_loss, double best_val_loss,
                                      const std::vector<std::pair<std::string, double>>& sets) {
  std::vector<SummaryValue> values = {{"val_loss", val_loss, {}},
                                      {"best_val_loss", best_val_loss, {}}};
  for (const auto& [tag, loss] : sets) values.push_back({tag, loss, {}});
  writer_->write(step, values);
  writer_->flush();
}

}  // namespace moelab
