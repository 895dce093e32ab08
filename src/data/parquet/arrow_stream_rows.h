// The rows of an Arrow IPC stream file (what Hugging Face datasets'
// save_to_disk writes: data-0000N-of-0000M.arrow), each as a JSON object by
// column name: strings, integers, floats, booleans, lists and structs, as
// datasets' own to_list gives them. Task data (tasks/) reads it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moelab {

// InputError naming `path` for an unreadable stream or a column of another type.
std::vector<nlohmann::json> read_arrow_stream_rows(const std::string& path);

}  // namespace moelab
