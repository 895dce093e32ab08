// The strings of one column of a Parquet file, one row group at a time (never
// the whole file). Its own translation unit: Arrow's headers need C++20 and are
// heavy, so nothing else includes them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace moelab {

class ParquetTextReader {
 public:
  // InputError naming the file when it is not Parquet (bad footer), has no
  // column `column`, or that column does not hold strings.
  ParquetTextReader(const std::string& path, const std::string& column);
  ~ParquetTextReader();
  ParquetTextReader(const ParquetTextReader&) = delete;
  ParquetTextReader& operator=(const ParquetTextReader&) = delete;

  // The next non-null value; false after the last row. `row_group` and `row`
  // (within the row group, 0-based) say where it came from.
  bool next(std::string* text, int64_t* row_group, int64_t* row);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace moelab
