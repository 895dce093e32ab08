// Logging: spdlog's default logger, set up once per process. Rank 0 prints
// human-readable progress; other ranks print only warnings and errors. Warnings
// and errors carry the rank that raised them.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace moelab {

void init_logging(int rank, const std::string& level = "info");
// The least severe level logged ("debug", "info", "warn", "error"), e.g. from a
// run's log.level; ranks other than 0 still log only warnings and errors.
void set_log_level(const std::string& level);

}  // namespace moelab
