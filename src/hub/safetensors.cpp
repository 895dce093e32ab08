#include "hub/safetensors.h"

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

// The dtype a tensor is written as: bfloat16 as it is, anything else as float32.
torch::Dtype written_dtype(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? torch::kBFloat16 : torch::kFloat32;
}

torch::Dtype dtype_of(const std::string& name, const std::string& path, const std::string& tensor) {
  if (name == "F32") return torch::kFloat32;
  if (name == "F16") return torch::kFloat16;
  if (name == "BF16") return torch::kBFloat16;
  throw InputError(path + ": tensor '" + tensor + "' has dtype " + name +
                   "; expected F32, F16 or BF16");
}

using TensorEntry = SafetensorsEntry;

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
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const torch::Dtype dtype = written_dtype(t);
    const uint64_t bytes = uint64_t(t.numel()) * c10::elementSize(dtype);
    header[name] = {{"dtype", dtype == torch::kBFloat16 ? "BF16" : "F32"},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const std::string temporary = temporary_path_for(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    const uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) out.put(char((n >> (8 * i)) & 0xff));
    out << text;
    // One tensor at a time: the file is never held in memory.
    for (const auto& [name, t] : tensors) {
      const auto c = t.detach().to(torch::kCPU, written_dtype(t)).contiguous();
      out.write(static_cast<const char*>(c.data_ptr()), std::streamsize(c.nbytes()));
    }
    if (!out.flush()) throw InputError(temporary + ": cannot write the safetensors file");
  }
  commit_durably(temporary, path);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError(path + ": cannot open the safetensors file");
  const uint64_t size = uint64_t(in.tellg());
  if (size < 8) throw InputError(path + ": too short for a safetensors file");
  in.seekg(0);
  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | length[i];
  if (n > size - 8) throw InputError(path + ": header length past the end of the file");
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  if (!in) throw InputError(path + ": cannot read the header");
  data_start_ = 8 + n;
  for (auto& e : parse_header(path, text, size - data_start_)) entries_.emplace(e.name, e);
}

torch::Tensor SafetensorsFile::read(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) throw InputError(path_ + ": no tensor '" + name + "'");
  const SafetensorsEntry& e = it->second;
  auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(std::streamoff(data_start_ + e.begin));
  in.read(static_cast<char*>(t.data_ptr()), std::streamsize(e.end - e.begin));
  if (!in) throw InputError(path_ + ": cannot read tensor '" + name + "' (truncated file?)");
  return t;
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, entry] : file.entries()) out[name] = file.read(name).to(torch::kFloat32);
  return out;
}

}  // namespace moelab
