// Routes spdlog's default logger into a string for the lifetime of the object.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace moelab::testing {

class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace moelab::testing
