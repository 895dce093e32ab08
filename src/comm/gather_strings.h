// Strings of any length from every rank of a group, in rank order, on one rank:
// what each rank wrote of a checkpoint, for the manifest rank 0 seals.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"

namespace moelab {

// Collective over `group` (CPU tensors: an MPI or local communicator). Every
// rank's `text` on `root`; empty on the other ranks.
std::vector<std::string> gather_strings(Communicator& group, const std::string& text, int root);

}  // namespace moelab
