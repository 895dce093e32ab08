#include "convert/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

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
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, n));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": the header is not JSON (" + e.what() + ")");
  }
  const char* data = bytes.data() + 8 + n;
  const uint64_t data_size = bytes.size() - 8 - n;
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const torch::Dtype dtype = dtype_of(entry.at("dtype"), path, name);
      const auto shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto begin = entry.at("data_offsets").at(0).get<uint64_t>();
      const auto end = entry.at("data_offsets").at(1).get<uint64_t>();
      auto t = torch::empty(shape, torch::TensorOptions().dtype(dtype));
      if (end < begin || end > data_size || end - begin != uint64_t(t.nbytes())) {
        throw InputError(path + ": tensor '" + name + "' has data_offsets that do not match " +
                         "its shape or lie past the end of the file");
      }
      std::memcpy(t.data_ptr(), data + begin, end - begin);
      out[name] = t.to(torch::kFloat32);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path + ": tensor '" + name + "': " + e.what());
    }
  }
  return out;
}

}  // namespace moelab
