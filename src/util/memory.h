// Peak resident memory of this process, for benchmarks and the run's DONE record.
#pragma once

namespace moelab {

// VmHWM from /proc/self/status in MiB; 0 where that file does not exist.
double peak_resident_mib();

}  // namespace moelab
