#include "util/allocator.h"

#include <malloc.h>

namespace moelab {

// A training step frees and re-allocates the same large buffers (logits alone are
// tokens x vocab x 4 bytes, ~67 MB at the TinyStories config). glibc serves buffers
// over 32 MB with mmap and returns them with munmap, and per-thread arenas shrink
// their heaps eagerly; every step then page-faults all of that memory in again,
// which measured ~20% of step time in the kernel. One arena, no mmap and no
// trimming keeps freed memory in the process for the next step: the MoE
// TinyStories-CPU config went from ~3.0k to ~5-7k tokens/s with identical losses.
void keep_freed_memory() {
  mallopt(M_ARENA_MAX, 1);             // one heap for all threads (arenas shrink eagerly)
  mallopt(M_MMAP_MAX, 0);              // never mmap: large buffers also come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // and the heap's top is kept, not trimmed
}

// glibc raises its mmap threshold to the size of each large block freed (up to
// 32 MB), so after one big tensor the next ones come from the heap, whose top
// stays pinned by smaller blocks: streaming a 0.5B-parameter import that way
// peaked at ~1.8x the file. A fixed threshold keeps every large block an mmap,
// returned whole when freed.
void give_back_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // blocks over 1 MB are mapped and unmapped
}

}  // namespace moelab
