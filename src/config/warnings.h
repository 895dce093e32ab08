// Configs that are valid but rarely what the researcher meant: logged when a
// run starts, never refused (an upcycled top-1 model keeps its dense
// function this way on purpose).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace moelab {

// One sentence each, naming the keys and the usual alternative.
std::vector<std::string> config_warnings(const Config& cfg);

}  // namespace moelab
