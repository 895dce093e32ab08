// safetensors files as they come from elsewhere: every header problem is an
// InputError naming the file and the tensor before anything is allocated, and
// a sharded Hugging Face folder (several shards, F32/F16/BF16) imports whole.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "common/checkpoint_test_util.h"
#include "common/temp_dir.h"
#include "hub/hub.h"
#include "hub/safetensors.h"
#include "model/model_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::TempDir;

// A safetensors file of `header` (any text) followed by `data_bytes` zero bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  file += header;
  file.append(data_bytes, '\0');
  std::ofstream(path, std::ios::binary) << file;
}

struct Hostile {
  const char* what;
  std::string header;
  size_t data_bytes;
  std::string expected;  // in the message, besides the file's path
};

TEST(Safetensors, EveryHeaderProblemIsRefusedByFileAndTensor) {
  const std::string f32 = R"("dtype": "F32", )";
  const std::vector<Hostile> cases = {
      {"a shape of 4 EB",
       "{\"a\": {" + f32 + R"("shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})", 16,
       "tensor 'a': shape [4611686018427387904,4] is too large"},
      {"a negative dimension", "{\"a\": {" + f32 + R"("shape": [-1, 4], "data_offsets": [0, 16]}})",
       16, "tensor 'a': expected {\"dtype\": string, \"shape\": [non-negative integers]"},
      {"an unknown dtype", R"({"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 16,
       "tensor 'a' has dtype I64; expected F32, F16 or BF16"},
      {"offsets past the data",
       "{\"a\": {" + f32 + R"("shape": [250], "data_offsets": [0, 1000]}})", 16,
       "tensor 'a': data_offsets [0,1000] lie outside the 16 bytes of data"},
      {"offsets reversed", "{\"a\": {" + f32 + R"("shape": [4], "data_offsets": [16, 0]}})", 16,
       "tensor 'a': data_offsets [16,0] lie outside"},
      {"offsets that do not match the shape",
       "{\"a\": {" + f32 + R"("shape": [2, 2], "data_offsets": [0, 8]}})", 8,
       "tensor 'a': data_offsets [0,8] hold 8 bytes; shape [2,2] needs 16"},
      {"overlapping tensors",
       "{\"a\": {" + f32 + R"("shape": [4], "data_offsets": [0, 16]}, "b": {)" + f32 +
           R"("shape": [4], "data_offsets": [8, 24]}})",
       24, "tensor 'b': its bytes overlap another tensor's"},
      {"a hole between tensors",
       "{\"a\": {" + f32 + R"("shape": [4], "data_offsets": [0, 16]}, "b": {)" + f32 +
           R"("shape": [4], "data_offsets": [20, 36]}})",
       36, "tensor 'b': bytes 16..20 before it belong to no tensor"},
      {"data no tensor covers", "{\"a\": {" + f32 + R"("shape": [4], "data_offsets": [0, 16]}})",
       20, "4 bytes at the end of the data belong to no tensor"},
      {"a name given twice",
       "{\"a\": {" + f32 + R"("shape": [4], "data_offsets": [0, 16]}, "a": {)" + f32 +
           R"("shape": [4], "data_offsets": [0, 16]}})",
       16, "the header names tensor 'a' twice"},
      {"a header that is not an object", "[1, 2]", 0, "the header is not a JSON object"},
      {"a header that is not JSON", "{\"a\": ", 0, "the header is not JSON"},
      {"an entry that is not an object", R"({"a": 5})", 0, "tensor 'a': expected {"},
      {"metadata that is not an object", R"({"__metadata__": 5})", 0,
       "__metadata__ is not a JSON object"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir / "x.safetensors";
    write_raw(path, c.header, c.data_bytes);
    try {
      read_safetensors(path);
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
      EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    }
  }
}

// The Llama folder export_hf writes, re-saved as one shard per tensor in
// `dtypes` by turns, with the index Hugging Face writes for sharded models.
std::map<std::string, torch::Tensor> shard_folder(const std::string& hf_dir,
                                                  const std::vector<std::string>& dtypes) {
  const auto tensors = read_safetensors(hf_dir + "/model.safetensors");
  std::filesystem::remove(hf_dir + "/model.safetensors");
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  std::map<std::string, torch::Tensor> expected;
  size_t i = 0;
  for (const auto& [name, t] : tensors) {
    const std::string dtype = dtypes[i % dtypes.size()];
    const auto kind = dtype == "F16"    ? torch::kFloat16
                      : dtype == "BF16" ? torch::kBFloat16
                                        : torch::kFloat32;
    const auto c = t.to(kind).contiguous();
    const std::string file =
        "model-" + std::to_string(i + 1) + "-of-" + std::to_string(tensors.size()) + ".safetensors";
    const std::string header =
        nlohmann::json{
            {name,
             {{"dtype", dtype}, {"shape", c.sizes().vec()}, {"data_offsets", {0, c.nbytes()}}}}}
            .dump();
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b)
      bytes[size_t(b)] = char((uint64_t(header.size()) >> (8 * b)) & 0xff);
    bytes += header;
    bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
    std::ofstream(hf_dir + "/" + file, std::ios::binary) << bytes;
    index["weight_map"][name] = file;
    expected[name] = c.to(torch::kFloat32);
    ++i;
  }
  std::ofstream(hf_dir + "/model.safetensors.index.json") << index.dump(2);
  return expected;
}

TEST(HfImport, AShardedFolderOfMixedDtypesImportsEveryTensor) {
  TempDir dir;
  const Config cfg = testing::tiny_config(false);
  Transformer model(model_settings(cfg));
  export_hf(testing::save_model_checkpoint(dir.str(), 1, model, cfg), dir / "hf");
  const auto expected = shard_folder(dir / "hf", {"F32", "F16", "BF16"});
  ASSERT_GT(expected.size(), 6u);  // several shards of each dtype
  const LoadedCheckpoint imported = load_checkpoint(import_hf(dir / "hf", dir / "imported"));
  // Each parameter comes back as its shard stored it: rounded to F32, F16 or BF16.
  std::map<std::string, int> by_dtype;
  for (const auto& p : model->named_weights()) {
    const auto& got = imported.tensors.at(p.key());
    std::string found;
    for (const auto& [name, kind] : std::vector<std::pair<std::string, torch::Dtype>>{
             {"F32", torch::kFloat32}, {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16}}) {
      if (found.empty() && torch::equal(got, p.value().detach().to(kind).to(torch::kFloat32))) {
        found = name;
      }
    }
    EXPECT_FALSE(found.empty()) << p.key();
    ++by_dtype[found];
  }
  EXPECT_EQ(model->named_weights().size(), expected.size());
  // Rounding to F16 or BF16 changed some tensors, which only their shards' dtypes explain.
  EXPECT_GT(by_dtype["F16"] + by_dtype["BF16"], 0);
}

TEST(HfImport, AnIndexThatMapsATensorToTheWrongShardIsRefused) {
  TempDir dir;
  const Config cfg = testing::tiny_config(false);
  Transformer model(model_settings(cfg));
  export_hf(testing::save_model_checkpoint(dir.str(), 1, model, cfg), dir / "hf");
  shard_folder(dir / "hf", {"F32"});
  auto index = nlohmann::json::parse(std::ifstream(dir / "hf/model.safetensors.index.json"));
  // The first tensor said to be in the second one's shard.
  auto& map = index["weight_map"];
  const std::string first = map.begin().key();
  map[first] = std::next(map.begin()).value().get<std::string>();
  std::ofstream(dir / "hf/model.safetensors.index.json") << index.dump();
  try {
    import_hf(dir / "hf", dir / "imported");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is mapped to "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moelab
