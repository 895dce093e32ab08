#pragma once

namespace moelab {

// Keeps glibc from returning large, short-lived tensor buffers to the OS after
// every use: each step frees and re-allocates the same multi-MB activations, and
// the mmap/munmap + page-fault round trip made token dispatch ~20x slower.
void keep_freed_memory();

// For commands that stream data once (import, export, prep): large freed blocks
// go back to the system at once, so the peak is what is alive, not what was.
void give_back_freed_memory();

}  // namespace moelab
