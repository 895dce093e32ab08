#include "study/run_results.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {

namespace {

constexpr const char* kValColumns = "step,tokens,val_loss,best_val_loss";

std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// What val.csv's columns after the four fixed ones name: validation sets
// (val_loss/<name>), then downstream task scores (task/<task>/<metric>).
struct ValColumns {
  std::vector<std::string> sets;
  std::vector<std::string> tasks;  // "<task>/<metric>"
};

// The names after `prefix` of the cells from `first` on that start with it.
std::vector<std::string> prefixed(const std::vector<std::string>& cells, size_t first,
                                  const std::string& prefix) {
  std::vector<std::string> names;
  for (size_t i = first; i < cells.size(); ++i) {
    if (cells[i].rfind(prefix, 0) != 0 || cells[i].size() == prefix.size()) break;
    names.push_back(cells[i].substr(prefix.size()));
  }
  return names;
}

ValColumns val_columns(const std::string& header, const std::string& path) {
  const std::string fixed = kValColumns;
  const std::vector<std::string> cells = csv_cells(header);
  ValColumns columns;
  columns.sets = prefixed(cells, 4, "val_loss/");
  columns.tasks = prefixed(cells, 4 + columns.sets.size(), "task/");
  if (header.rfind(fixed, 0) != 0 ||
      cells.size() != 4 + columns.sets.size() + columns.tasks.size()) {
    throw InputError(path + ":1: expected the header " + fixed +
                     " (then val_loss/<name> and task/<task>/<metric> columns)");
  }
  return columns;
}

// The whole cell as a number, or std::invalid_argument.
double number(const std::string& cell) {
  char* end = nullptr;
  const double value = std::strtod(cell.c_str(), &end);
  if (cell.empty() || *end != '\0') throw std::invalid_argument(cell);
  return value;
}

ValPoint val_point(const std::string& line, const ValColumns& columns) {
  const std::vector<std::string> cells = csv_cells(line);
  const size_t sets = columns.sets.size();
  if (cells.size() != 4 + sets + columns.tasks.size()) throw std::invalid_argument(line);
  ValPoint p{int64_t(number(cells[0])), int64_t(number(cells[1])), number(cells[2]), {}, {}};
  number(cells[3]);  // best_val_loss: checked, not kept
  for (size_t i = 0; i < sets; ++i) p.sets.emplace_back(columns.sets[i], number(cells[4 + i]));
  for (size_t i = 0; i < columns.tasks.size(); ++i) {
    const std::string& cell = cells[4 + sets + i];
    if (!cell.empty()) p.tasks.emplace_back(columns.tasks[i], number(cell));
  }
  return p;
}

}  // namespace

std::vector<ValPoint> read_val_csv(const std::string& path) {
  std::istringstream in(read_text_file(path, "validation log"));
  std::string line;
  std::vector<ValPoint> points;
  ValColumns columns;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (number == 1) {
      columns = val_columns(line, path);
      continue;
    }
    if (line.empty()) continue;
    try {
      points.push_back(val_point(line, columns));
    } catch (const std::exception&) {
      throw InputError(path + ":" + std::to_string(number) + ": '" + line + "': expected " +
                       std::to_string(4 + columns.sets.size()) + " numbers: " + kValColumns +
                       (columns.sets.empty() ? "" : ",val_loss/<name>...") +
                       (columns.tasks.empty() ? "" : ", then task scores or empty cells"));
    }
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
