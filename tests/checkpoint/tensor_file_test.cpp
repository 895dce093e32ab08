#include "checkpoint/tensor_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/temp_dir.h"
#include "util/error.h"

namespace moelab {
namespace {

std::map<std::string, torch::Tensor> sample_tensors() {
  torch::manual_seed(11);
  return {
      {"tok_embeddings.weight", torch::randn({5, 6})},
      {"layers.0.attn.wq.weight/exp_avg", torch::randn({4, 6})},
      {"layers.0.attn.wq.weight/step", torch::tensor(int64_t{42})},
      {"layers.1.moe.experts.3.w1", torch::randn({2, 3, 5}, torch::kDouble)},
      {"norm.weight", torch::randn({6}).to(torch::kBFloat16)},
      {"loader/position", torch::tensor({int64_t{1} << 40, int64_t{-5}})},
      {"counts", torch::arange(7, torch::kInt)},
      {"rng/cpu_generator", torch::arange(250, 256).to(torch::kByte)},
      {"empty", torch::zeros({0, 3})},
  };
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The streaming writer (import's) makes the file write_tensor_file makes, byte
// for byte, including a bf16 tensor converted over more than one block.
TEST(TensorFileWriter, StreamedFileIsTheFileWrittenWhole) {
  testing::TempDir dir;
  auto tensors = sample_tensors();
  tensors["long"] = torch::randn({(int64_t{1} << 23) + 5}).to(torch::kBFloat16);
  write_tensor_file(dir / "whole.h5", tensors);
  TensorFileWriter writer(dir / "streamed.h5");
  for (const auto& [name, tensor] : tensors) writer.add(name, tensor);
  EXPECT_FALSE(std::filesystem::exists(dir / "streamed.h5"));
  writer.commit();
  EXPECT_EQ(file_bytes(dir / "streamed.h5"), file_bytes(dir / "whole.h5"));
  EXPECT_TRUE(torch::equal(read_tensor_file(dir / "streamed.h5").at("long"), tensors.at("long")));
}

TEST(TensorFileWriter, RefusesANameTwiceAndLeavesNothingUncommitted) {
  testing::TempDir dir;
  {
    TensorFileWriter writer(dir / "t.h5");
    writer.add("a/b", torch::zeros({2}));
    EXPECT_THROW(writer.add("a/b", torch::zeros({2})), std::invalid_argument);
    EXPECT_THROW(writer.add("a", torch::zeros({2})), std::invalid_argument);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.str()));
}

TEST(TensorFile, RoundTripKeepsNamesDtypesShapesAndValues) {
  testing::TempDir dir;
  const auto tensors = sample_tensors();
  write_tensor_file(dir / "t.h5", tensors);
  const auto loaded = read_tensor_file(dir / "t.h5");
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    ASSERT_EQ(loaded.count(name), 1u) << name;
    const torch::Tensor& back = loaded.at(name);
    EXPECT_EQ(back.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_EQ(back.sizes(), tensor.sizes()) << name;
    EXPECT_TRUE(torch::equal(back, tensor)) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / ".t.h5.tmp"));
}

TEST(TensorFile, NonContiguousTensorsAreStoredAsTheyLook) {
  testing::TempDir dir;
  const torch::Tensor transposed = torch::arange(6, torch::kFloat).reshape({2, 3}).t();
  write_tensor_file(dir / "t.h5", {{"x", transposed}});
  EXPECT_TRUE(torch::equal(read_tensor_file(dir / "t.h5").at("x"), transposed));
}

TEST(TensorFile, SameTensorsGiveIdenticalBytes) {
  testing::TempDir dir;
  write_tensor_file(dir / "a.h5", sample_tensors());
  write_tensor_file(dir / "b.h5", sample_tensors());
  EXPECT_EQ(file_bytes(dir / "a.h5"), file_bytes(dir / "b.h5"));
}

TEST(TensorFile, TruncatedFileIsAnInputErrorNamingIt) {
  testing::TempDir dir;
  const std::string path = dir / "t.h5";
  write_tensor_file(path, sample_tensors());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  try {
    read_tensor_file(path);
    FAIL() << "truncated file accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(TensorFile, GarbageAndMissingFilesAreInputErrors) {
  testing::TempDir dir;
  std::ofstream(dir / "junk.h5") << "not hdf5 at all";
  EXPECT_THROW(read_tensor_file(dir / "junk.h5"), InputError);
  EXPECT_THROW(read_tensor_file(dir / "absent.h5"), InputError);
}

TEST(TensorFile, RejectsNamesThatCannotBeStored) {
  testing::TempDir dir;
  EXPECT_THROW(write_tensor_file(dir / "t.h5", {{"a//b", torch::zeros({1})}}),
               std::invalid_argument);
  EXPECT_THROW(
      write_tensor_file(dir / "t.h5", {{"a", torch::zeros({1})}, {"a/b", torch::zeros({1})}}),
      std::invalid_argument);
  EXPECT_THROW(write_tensor_file(dir / "t.h5", {{"h", torch::zeros({1}, torch::kHalf)}}),
               std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir / "t.h5"));
  EXPECT_FALSE(std::filesystem::exists(dir / ".t.h5.tmp"));
}

// A part of a dataset is read without the rest: any range of a 1-D dataset
// (a distributed checkpoint's part), or of a whole tensor's elements in row-major
// order (checkpoints of whole tensors), converted to the destination's dtype.
TEST(TensorFile, ReadsAnyRangeOfADatasetsElements) {
  testing::TempDir dir;
  const torch::Tensor matrix = torch::arange(24, torch::kFloat).reshape({4, 6});
  const torch::Tensor vector = torch::arange(10, torch::kDouble);
  write_tensor_file(dir / "t.h5", {{"m", matrix}, {"v", vector}, {"s", torch::tensor(int64_t{7})}});
  const TensorFileReader reader(dir / "t.h5");
  torch::Tensor out = torch::empty({9});
  reader.read_range("m", 5, out);  // from the middle of row 0 to the middle of row 2
  EXPECT_TRUE(torch::equal(out, matrix.view(-1).narrow(0, 5, 9)));
  torch::Tensor narrow = torch::empty({3}, torch::kDouble);
  reader.read_range("v", 6, narrow);
  EXPECT_TRUE(torch::equal(narrow, vector.narrow(0, 6, 3)));
  torch::Tensor as_float = torch::empty({2});
  reader.read_range("v", 1, as_float);
  EXPECT_TRUE(torch::equal(as_float, torch::tensor({1.0f, 2.0f})));
  torch::Tensor step = torch::empty({1}, torch::kLong);
  reader.read_range("s", 0, step);
  EXPECT_EQ(step.item<int64_t>(), 7);
  EXPECT_THROW(reader.read_range("v", 8, torch::empty({3}, torch::kDouble)), InputError);
  EXPECT_THROW(reader.read_range("nope", 0, out), InputError);
}

// A write the file system refuses (here /dev/full where the values go) says the
// system's reason and leaves no file behind.
TEST(TensorFile, AFailedWriteSaysTheSystemsReasonAndLeavesNothing) {
  testing::TempDir dir;
  const std::string path = dir / "t.h5";
  const TensorFileLayout layout = create_tensor_file(path, sample_tensors());
  std::filesystem::remove(layout.temporary);
  std::filesystem::create_symlink("/dev/full", layout.temporary);
  try {
    write_tensor_values(layout);
    FAIL() << "the write to /dev/full succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(dynamic_cast<const InputError*>(&e), nullptr) << "a full disk is not bad input";
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(layout.temporary), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::is_symlink(layout.temporary));
}

// h5py is what users will open checkpoints with; check it reads ours as documented.
TEST(TensorFile, ReadableWithH5py) {
  if (std::system("/usr/bin/python3 -c 'import h5py' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-h5py is not installed; h5py readability not checked";
  }
  testing::TempDir dir;
  write_tensor_file(dir / "t.h5", sample_tensors());
  const std::string script =
      "import h5py, numpy as np\n"
      "f = h5py.File('" +
      (dir / "t.h5") +
      "', 'r')\n"
      "w = f['layers.0.attn.wq.weight/exp_avg'][...]\n"
      "assert w.shape == (4, 6) and w.dtype == np.float32\n"
      "assert f['layers.0.attn.wq.weight/step'][...] == 42\n"
      "assert f['norm.weight'].attrs['torch_dtype'] in (b'bfloat16', 'bfloat16')\n"
      "assert f['layers.1.moe.experts.3.w1'][...].dtype == np.float64\n";
  std::ofstream(dir / "check.py") << script;
  EXPECT_EQ(std::system(("/usr/bin/python3 " + (dir / "check.py")).c_str()), 0);
}

}  // namespace
}  // namespace moelab
