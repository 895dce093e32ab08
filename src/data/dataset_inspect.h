// `moelab prep --inspect DIR`: a human-readable summary of a prepared dataset.
#pragma once

#include <string>

namespace moelab {

// Per split: documents, tokens, shards (after verifying every shard), then the
// vocabulary, EOS id, tokenizer checksum and the first training document
// decoded. InputError naming the file on any problem.
std::string inspect_dataset(const std::string& dataset_dir);

}  // namespace moelab
