#include "metrics/metrics_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <vector>

#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

constexpr const char* kValHeader = "step,tokens,val_loss,best_val_loss";

// Reads `path` and returns its lines (without '\n'), dropping a torn last line.
std::vector<std::string> complete_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  if (start < text.size()) {
    spdlog::warn("{}: dropping an incomplete last line (interrupted write)", path);
  }
  return lines;
}

// Rewrites `path` durably with the lines for which step_of(line) <= resumed_step
// (lines step_of says nothing about, returning nullopt, are kept), then returns the
// kept lines. step_of throws InputError for a line it cannot read.
std::vector<std::string> keep_lines_up_to(
    const std::string& path, int64_t resumed_step,
    const std::function<std::optional<int64_t>(const std::string&, size_t)>& step_of) {
  if (!std::filesystem::exists(path)) return {};
  std::vector<std::string> kept;
  const std::vector<std::string> lines = complete_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto step = step_of(lines[i], i + 1);
    if (!step || *step <= resumed_step) kept.push_back(lines[i]);
  }
  std::string contents;
  for (const auto& line : kept) contents += line + "\n";
  write_file_durably(path, contents);
  return kept;
}

std::ofstream open_for_append(const std::string& path) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw InputError(path + ": cannot open for writing");
  return out;
}

InputError bad_line(const std::string& path, size_t line_number, const std::string& expected) {
  return InputError(path + ":" + std::to_string(line_number) + ": expected " + expected);
}

// The cells of a val.csv row if it holds exactly `columns` of them, numbers in
// the first `required` and numbers or nothing (NaN) after them, else nullopt.
std::optional<std::vector<double>> numbers(const std::string& line, size_t columns,
                                           size_t required) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= line.size()) {
    const size_t end = std::min(line.find(',', start), line.size());
    const std::string cell = line.substr(start, end - start);
    char* parsed_to = nullptr;
    const double value = std::strtod(cell.c_str(), &parsed_to);
    if (cell.empty() ? out.size() < required : *parsed_to != '\0') return std::nullopt;
    out.push_back(cell.empty() ? std::nan("") : value);
    start = end + 1;
  }
  if (out.size() != columns || line.empty()) return std::nullopt;
  return out;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& run_dir, int64_t resumed_step)
    : path_((std::filesystem::path(run_dir) / "metrics.jsonl").string()) {
  if (resumed_step < 0) {
    write_file_durably(path_, "");
  } else {
    keep_lines_up_to(path_, resumed_step, [&](const std::string& line, size_t number) {
      const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) {
        throw bad_line(path_, number, "a JSON object with an integer \"step\"");
      }
      return std::optional<int64_t>(record["step"].get<int64_t>());
    });
  }
  out_ = open_for_append(path_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!record.contains("step") || !record["step"].is_number_integer()) {
    throw std::invalid_argument("metrics record without an integer \"step\": " + record.dump());
  }
  out_ << record.dump() << '\n' << std::flush;
}

ValLog::ValLog(const std::string& run_dir, int64_t resumed_step, std::vector<std::string> set_names,
               const std::vector<std::string>& task_columns)
    : path_((std::filesystem::path(run_dir) / "val.csv").string()),
      header_(kValHeader),
      set_names_(std::move(set_names)),
      task_columns_(task_columns.size()) {
  for (const auto& name : set_names_) header_ += ",val_loss/" + name;
  for (const auto& name : task_columns) header_ += "," + name;
  const size_t required = 4 + set_names_.size();
  const size_t columns = required + task_columns_;
  std::vector<std::string> kept;
  if (resumed_step >= 0) {
    kept = keep_lines_up_to(path_, resumed_step, [&](const std::string& line, size_t number) {
      if (number == 1) {
        if (line != header_) throw bad_line(path_, number, "header " + header_);
        return std::optional<int64_t>();
      }
      const std::optional<std::vector<double>> row = numbers(line, columns, required);
      if (!row) throw bad_line(path_, number, std::to_string(columns) + " numbers: " + header_);
      return std::optional<int64_t>(int64_t((*row)[0]));
    });
  }
  if (kept.empty()) write_file_durably(path_, header_ + "\n");
  for (size_t i = 1; i < kept.size(); ++i) {
    best_ = std::min(best_, (*numbers(kept[i], columns, required))[3]);
  }
  out_ = open_for_append(path_);
}

double ValLog::write(int64_t step, int64_t tokens, const std::vector<double>& losses,
                     const std::vector<std::optional<double>>& task_cells) {
  best_ = std::min(best_, losses.front());
  std::string row = fmt::format("{},{},{},{}", step, tokens, losses.front(), best_);
  for (size_t i = 0; i < set_names_.size(); ++i) row += fmt::format(",{}", losses.at(i));
  for (size_t i = 0; i < task_columns_; ++i) {
    const bool scored = i < task_cells.size() && task_cells[i];
    row += scored ? fmt::format(",{}", *task_cells[i]) : ",";
  }
  out_ << row << '\n' << std::flush;
  return best_;
}

}  // namespace moelab
