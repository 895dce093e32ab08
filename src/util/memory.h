// Resident memory of this process: its peak over the whole run (benchmarks, the
// run's DONE record) and over a stretch of work (util/peak_memory.h), both from
// VmHWM, the kernel's high-water mark of the resident set.
#pragma once

namespace moelab {

// The process's peak resident set in MiB, resets of the mark included; 0 where
// /proc/self/status does not exist.
double peak_resident_mib();

// Resets VmHWM to the current resident set (Linux 4.0+, /proc/self/clear_refs),
// remembering the peak it held for peak_resident_mib(). False if it cannot.
bool reset_resident_peak();

// VmHWM in MiB: the peak since the last reset_resident_peak(); 0 as above.
double resident_peak_since_reset_mib();

}  // namespace moelab
