#include "convert/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

torch::Dtype dtype_of(const std::string& name, const std::string& path, const std::string& tensor) {
  if (name == "F32") return torch::kFloat32;
  if (name == "F16") return torch::kFloat16;
  if (name == "BF16") return torch::kBFloat16;
  throw InputError(path + ": tensor '" + tensor + "' has dtype " + name +
                   "; expected F32, F16 or BF16");
}

struct TensorEntry {
  std::string name;
  torch::Dtype dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

InputError bad_tensor(const std::string& path, const std::string& tensor, const std::string& what) {
  return InputError(path + ": tensor '" + tensor + "': " + what);
}

// The header as JSON, refusing a name given twice (which a plain parse would
// silently resolve to the last).
nlohmann::json parse_header_json(const std::string& path, const std::string& text) {
  std::set<std::string> names;
  const auto no_duplicates = [&](int depth, nlohmann::json::parse_event_t event,
                                 nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
        !names.insert(parsed.get<std::string>()).second) {
      throw InputError(path + ": the header names tensor '" + parsed.get<std::string>() +
                       "' twice");
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, no_duplicates);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": the header is not JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw InputError(path + ": the header is not a JSON object");
  return header;
}

// Bytes of a tensor of `shape` and `dtype`; nullopt past 2^63 (a hostile shape).
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, torch::Dtype dtype) {
  uint64_t bytes = c10::elementSize(dtype);
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, uint64_t(dim), &bytes) || bytes > (uint64_t(1) << 62)) {
      return std::nullopt;
    }
  }
  return bytes;
}

TensorEntry parse_entry(const std::string& path, const std::string& name,
                        const nlohmann::json& entry, uint64_t data_size) {
  const auto is_index = [](const nlohmann::json& v) { return v.is_number_unsigned(); };
  if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
      !entry.contains("shape") || !entry["shape"].is_array() ||
      !std::all_of(entry["shape"].begin(), entry["shape"].end(), is_index) ||
      !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2 || !is_index(entry["data_offsets"][0]) ||
      !is_index(entry["data_offsets"][1])) {
    throw bad_tensor(path, name,
                     "expected {\"dtype\": string, \"shape\": [non-negative integers], "
                     "\"data_offsets\": [begin, end]}, got " +
                         entry.dump().substr(0, 200));
  }
  TensorEntry e{name, dtype_of(entry["dtype"], path, name), {}, 0, 0};
  for (const auto& dim : entry["shape"]) {
    if (dim.get<uint64_t>() > (uint64_t(1) << 62)) throw bad_tensor(path, name, "shape too large");
    e.shape.push_back(dim.get<int64_t>());
  }
  e.begin = entry["data_offsets"][0].get<uint64_t>();
  e.end = entry["data_offsets"][1].get<uint64_t>();
  const auto bytes = byte_size(e.shape, e.dtype);
  if (!bytes) throw bad_tensor(path, name, "shape " + entry["shape"].dump() + " is too large");
  if (e.begin > e.end || e.end > data_size) {
    throw bad_tensor(path, name,
                     "data_offsets " + entry["data_offsets"].dump() + " lie outside the " +
                         std::to_string(data_size) + " bytes of data");
  }
  if (e.end - e.begin != *bytes) {
    throw bad_tensor(path, name,
                     "data_offsets " + entry["data_offsets"].dump() + " hold " +
                         std::to_string(e.end - e.begin) + " bytes; shape " +
                         entry["shape"].dump() + " needs " + std::to_string(*bytes));
  }
  return e;
}

// Every tensor of the header, checked before anything is allocated: known
// dtype, sizes that fit, offsets inside the data that tile it exactly (no
// overlaps, no holes, as the format requires).
std::vector<TensorEntry> parse_header(const std::string& path, const std::string& text,
                                      uint64_t data_size) {
  const nlohmann::json header = parse_header_json(path, text);
  std::vector<TensorEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(path + ": __metadata__ is not a JSON object");
      continue;
    }
    entries.push_back(parse_entry(path, name, entry, data_size));
  }
  std::vector<const TensorEntry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  for (const TensorEntry* e : by_offset) {
    if (e->begin != covered) {
      throw bad_tensor(path, e->name,
                       e->begin < covered
                           ? "its bytes overlap another tensor's"
                           : "bytes " + std::to_string(covered) + ".." + std::to_string(e->begin) +
                                 " before it belong to no tensor");
    }
    covered = e->end;
  }
  if (covered != data_size) {
    throw InputError(path + ": " + std::to_string(data_size - covered) +
                     " bytes at the end of the data belong to no tensor");
  }
  return entries;
}

}  // namespace

void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const uint64_t bytes = uint64_t(c.numel()) * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(c));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string file(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((n >> (8 * i)) & 0xff);
  file += text;
  file.reserve(file.size() + offset);
  for (const auto& c : data) {
    file.append(static_cast<const char*>(c.data_ptr()), size_t(c.numel()) * sizeof(float));
  }
  write_file_atomically(path, file);
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the safetensors file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() < 8) throw InputError(path + ": too short for a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  if (n > bytes.size() - 8) throw InputError(path + ": header length past the end of the file");
  const uint64_t data_size = bytes.size() - 8 - n;
  const std::vector<TensorEntry> entries = parse_header(path, bytes.substr(8, n), data_size);
  const char* data = bytes.data() + 8 + n;
  std::map<std::string, torch::Tensor> out;
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out[e.name] = t.to(torch::kFloat32);
  }
  return out;
}

}  // namespace moelab
