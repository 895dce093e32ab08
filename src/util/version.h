#pragma once

namespace moelab {

// The git commit moelab was configured from ("unknown" outside a checkout).
const char* git_commit();

}  // namespace moelab
