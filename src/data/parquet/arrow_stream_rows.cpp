#include "data/parquet/arrow_stream_rows.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>

#include "data/parquet/arrow_checked.h"
#include "util/error.h"

namespace moelab {
namespace {

using nlohmann::json;

json list_value(const arrow::ListArray& list, int64_t row, const std::string& where);

// Row `row` of `array` as JSON (null as null).
json value_at(const arrow::Array& array, int64_t row, const std::string& where) {
  if (array.IsNull(row)) return nullptr;
  switch (array.type_id()) {
    case arrow::Type::STRING:
      return static_cast<const arrow::StringArray&>(array).GetString(row);
    case arrow::Type::LARGE_STRING:
      return static_cast<const arrow::LargeStringArray&>(array).GetString(row);
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(array).Value(row);
    case arrow::Type::INT32:
      return static_cast<const arrow::Int32Array&>(array).Value(row);
    case arrow::Type::INT64:
      return static_cast<const arrow::Int64Array&>(array).Value(row);
    case arrow::Type::DOUBLE:
      return static_cast<const arrow::DoubleArray&>(array).Value(row);
    case arrow::Type::LIST:
      return list_value(static_cast<const arrow::ListArray&>(array), row, where);
    case arrow::Type::STRUCT: {
      const auto& fields = static_cast<const arrow::StructArray&>(array);
      json object = json::object();
      for (int f = 0; f < fields.num_fields(); ++f) {
        const std::string name = fields.struct_type()->field(f)->name();
        object[name] = value_at(*fields.field(f), row, where + "." + name);
      }
      return object;
    }
    default:
      throw InputError(where + ": Arrow type " + array.type()->ToString() +
                       " is not one task data uses (string, bool, int32/64, double, list, struct)");
  }
}

json list_value(const arrow::ListArray& list, int64_t row, const std::string& where) {
  json items = json::array();
  const auto values = list.values();
  for (int64_t i = list.value_offset(row); i < list.value_offset(row + 1); ++i) {
    items.push_back(value_at(*values, i, where + "[]"));
  }
  return items;
}

}  // namespace

std::vector<json> read_arrow_stream_rows(const std::string& path) {
  auto file = checked(arrow::io::ReadableFile::Open(path), path);
  auto reader = checked(arrow::ipc::RecordBatchStreamReader::Open(file), path);
  const auto table = checked(reader->ToTable(), path);
  const auto batch = checked(table->CombineChunksToBatch(), path);
  std::vector<json> rows(size_t(batch->num_rows()), json::object());
  for (int c = 0; c < batch->num_columns(); ++c) {
    const std::string name = batch->column_name(c);
    const auto column = batch->column(c);
    for (int64_t r = 0; r < batch->num_rows(); ++r) {
      rows[size_t(r)][name] = value_at(*column, r, path + ": column " + name);
    }
  }
  return rows;
}

}  // namespace moelab
