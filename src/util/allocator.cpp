#include "util/allocator.h"

#include <malloc.h>

namespace moelab {

void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: buffers below it come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap's top is kept, not trimmed
}

}  // namespace moelab
