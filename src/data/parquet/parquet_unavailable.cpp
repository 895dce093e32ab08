// The Parquet reader of a build configured with MOELAB_WITH_PARQUET=OFF.
#include "data/parquet/parquet_text_reader.h"
#include "util/error.h"

namespace moelab {

struct ParquetTextReader::State {};

ParquetTextReader::ParquetTextReader(const std::string& path, const std::string& column) {
  throw InputError(path +
                   ": this moelab was built without Parquet support "
                   "(MOELAB_WITH_PARQUET=OFF; rebuild with pyarrow installed)");
}

ParquetTextReader::~ParquetTextReader() = default;

bool ParquetTextReader::next(std::string* text, int64_t* row_group, int64_t* row) {
  return false;
}

}  // namespace moelab
