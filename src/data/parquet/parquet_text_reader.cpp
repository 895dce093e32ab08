#include "data/parquet/parquet_text_reader.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

#include "data/parquet/arrow_checked.h"
#include "util/error.h"

namespace moelab {

namespace {

bool is_string_type(const arrow::DataType& type) {
  return type.id() == arrow::Type::STRING || type.id() == arrow::Type::LARGE_STRING;
}

std::string column_names(const arrow::Schema& schema) {
  std::string names;
  for (const auto& field : schema.fields()) names += (names.empty() ? "" : ", ") + field->name();
  return names;
}

}  // namespace

struct ParquetTextReader::State {
  std::string path;
  std::string column;
  std::unique_ptr<parquet::arrow::FileReader> file;
  int field_index = -1;
  int row_group = -1;
  std::shared_ptr<arrow::ChunkedArray> values;  // of the current row group
  int chunk = 0;
  int64_t in_chunk = 0;
  int64_t row = 0;

  void open() {
    auto input = checked(arrow::io::ReadableFile::Open(path), path + ": cannot open");
    try {
      file = checked(parquet::arrow::OpenFile(input, arrow::default_memory_pool()),
                     path + ": not a readable Parquet file");
    } catch (const parquet::ParquetException& error) {
      throw InputError(path + ": not a readable Parquet file (" + error.what() + ")");
    }
    std::shared_ptr<arrow::Schema> schema;
    const arrow::Status status = file->GetSchema(&schema);
    if (!status.ok()) throw InputError(path + ": bad Parquet schema: " + status.ToString());
    field_index = schema->GetFieldIndex(column);
    if (field_index < 0) {
      throw InputError(path + ": no column \"" + column + "\" (columns: " + column_names(*schema) +
                       "; choose one with --text-field)");
    }
    const auto& type = *schema->field(field_index)->type();
    if (!is_string_type(type)) {
      throw InputError(path + ": column \"" + column + "\" holds " + type.ToString() +
                       ", not strings");
    }
  }

  // Reads only the text column of the next row group; false after the last.
  bool load_next_row_group() {
    if (++row_group >= file->num_row_groups()) return false;
    const std::string where =
        path + ": row group " + std::to_string(row_group) + ", column \"" + column + "\"";
    try {
      const arrow::Status status = file->RowGroup(row_group)->Column(field_index)->Read(&values);
      if (!status.ok()) throw InputError(where + ": " + status.ToString());
    } catch (const parquet::ParquetException& error) {
      throw InputError(where + ": corrupt data (" + error.what() + ")");
    }
    if (!is_string_type(*values->type())) {
      throw InputError(where + ": holds " + values->type()->ToString() + ", not strings");
    }
    chunk = 0;
    in_chunk = 0;
    row = 0;
    return true;
  }

  // The value at the cursor, or nullopt for a null; advances the cursor.
  std::optional<std::string_view> take() {
    const arrow::Array& array = *values->chunk(chunk);
    const int64_t index = in_chunk++;
    if (array.IsNull(index)) return std::nullopt;
    if (array.type_id() == arrow::Type::LARGE_STRING) {
      return static_cast<const arrow::LargeStringArray&>(array).GetView(index);
    }
    return static_cast<const arrow::StringArray&>(array).GetView(index);
  }
};

ParquetTextReader::ParquetTextReader(const std::string& path, const std::string& column)
    : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->column = column;
  state_->open();
}

ParquetTextReader::~ParquetTextReader() = default;

bool ParquetTextReader::next(std::string* text, int64_t* row_group, int64_t* row) {
  State& s = *state_;
  while (true) {
    while (s.values && s.chunk < s.values->num_chunks() &&
           s.in_chunk >= s.values->chunk(s.chunk)->length()) {
      ++s.chunk;
      s.in_chunk = 0;
    }
    if (!s.values || s.chunk >= s.values->num_chunks()) {
      if (!s.load_next_row_group()) return false;
      continue;
    }
    const int64_t current = s.row++;
    const std::optional<std::string_view> value = s.take();
    if (!value) continue;
    text->assign(value->data(), value->size());
    *row_group = s.row_group;
    *row = current;
    return true;
  }
}

}  // namespace moelab
