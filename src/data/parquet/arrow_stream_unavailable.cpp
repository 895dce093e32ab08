// The Arrow stream reader of a build configured with MOELAB_WITH_PARQUET=OFF.
#include "data/parquet/arrow_stream_rows.h"
#include "util/error.h"

namespace moelab {

std::vector<nlohmann::json> read_arrow_stream_rows(const std::string& path) {
  throw InputError(path +
                   ": this moelab was built without Arrow support "
                   "(MOELAB_WITH_PARQUET=OFF; rebuild with pyarrow installed)");
}

}  // namespace moelab
