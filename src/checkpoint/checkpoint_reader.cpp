// CheckpointReader (checkpoint_io.h): the manifest's map of tensor parts to
// files, or for a checkpoint of whole tensors, its files' datasets.
#include <torch/torch.h>
#include <utility>

#include "checkpoint/checkpoint_io.h"
#include "util/error.h"

namespace moelab {
namespace {

const std::pair<torch::ScalarType, const char*> kDtypeNames[] = {
    {torch::kFloat, "float32"}, {torch::kBFloat16, "bfloat16"}, {torch::kDouble, "float64"},
    {torch::kInt, "int32"},     {torch::kLong, "int64"},        {torch::kByte, "uint8"}};

std::string shape_text(const std::vector<int64_t>& shape) {
  return c10::str(c10::IntArrayRef(shape));
}

// Checkpoints of whole tensors: each dataset of each file is one tensor.
std::map<std::string, CheckpointReader::Entry> whole_tensors(const std::string& dir,
                                                             const nlohmann::json& meta) {
  std::map<std::string, CheckpointReader::Entry> tensors;
  for (const auto& [file, described] : meta.at("files").items()) {
    for (const auto& info : TensorFileReader(dir + "/" + file).datasets()) {
      CheckpointReader::Entry& entry = tensors[info.name];
      if (!entry.pieces.empty()) {
        throw InputError(dir + "/" + file + ": tensor '" + info.name +
                         "' is also stored in another file of the checkpoint");
      }
      entry.shape = info.shape;
      entry.dtype = info.dtype;
      entry.pieces.push_back({file, 0, numel_of(info.shape)});
    }
  }
  return tensors;
}

// Distributed checkpoints: the manifest's "tensors", each with its parts.
std::map<std::string, CheckpointReader::Entry> parted_tensors(const std::string& dir,
                                                              const nlohmann::json& meta) {
  std::map<std::string, CheckpointReader::Entry> tensors;
  try {
    for (const auto& [name, saved] : meta.at("tensors").items()) {
      CheckpointReader::Entry& entry = tensors[name];
      entry.shape = saved.at("shape").get<std::vector<int64_t>>();
      entry.dtype = dtype_from_name(saved.at("dtype").get<std::string>(), dir + "/meta.json");
      for (const auto& piece : saved.at("parts")) {
        entry.pieces.push_back({piece.at("file").get<std::string>(),
                                piece.at("begin").get<int64_t>(),
                                piece.at("length").get<int64_t>()});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(dir + "/meta.json: malformed \"tensors\" (" + e.what() + ")");
  }
  return tensors;
}

}  // namespace

std::string dtype_name(torch::ScalarType dtype) {
  for (const auto& [type, name] : kDtypeNames) {
    if (type == dtype) return name;
  }
  throw std::invalid_argument("no checkpoint dtype for " + std::string(c10::toString(dtype)));
}

torch::ScalarType dtype_from_name(const std::string& name, const std::string& source) {
  for (const auto& [type, known] : kDtypeNames) {
    if (name == known) return type;
  }
  throw InputError(source + ": unknown tensor dtype '" + name + "'");
}

CheckpointReader::CheckpointReader(std::string dir, const nlohmann::json& meta)
    : dir_(std::move(dir)),
      tensors_(meta.contains("tensors") ? parted_tensors(dir_, meta) : whole_tensors(dir_, meta)) {}

const TensorFileReader& CheckpointReader::file(const std::string& name) const {
  auto& reader = files_[name];
  if (!reader) reader = std::make_unique<TensorFileReader>(dir_ + "/" + name);
  return *reader;
}

void CheckpointReader::read(const TensorPart& part) const {
  const auto it = tensors_.find(part.name);
  if (it == tensors_.end()) {
    if (part.optional) return;
    throw InputError(dir_ + ": checkpoint has no tensor '" + part.name +
                     "'; it was saved from a different model config");
  }
  const Entry& entry = it->second;
  if (entry.shape != part.shape) {
    throw InputError(dir_ + ": tensor '" + part.name + "' has shape " + shape_text(entry.shape) +
                     " but the model expects " + shape_text(part.shape));
  }
  const int64_t begin = part.begin, end = part.begin + part.data.numel();
  int64_t covered = 0;
  for (const Piece& piece : entry.pieces) {
    const int64_t lo = std::max(begin, piece.begin);
    const int64_t hi = std::min(end, piece.begin + piece.length);
    if (lo >= hi) continue;
    // A piece is a 1-D dataset of its elements, or (whole tensors) the tensor itself.
    file(piece.file)
        .read_range(part.name, lo - piece.begin, part.data.narrow(0, lo - begin, hi - lo));
    covered += hi - lo;
  }
  if (covered != end - begin) {
    throw InputError(dir_ + ": the parts of tensor '" + part.name + "' cover " +
                     std::to_string(covered) + " of the elements [" + std::to_string(begin) + ", " +
                     std::to_string(end) + ") (a rank's file is missing from meta.json?)");
  }
}

}  // namespace moelab
