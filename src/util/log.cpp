#include "util/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <memory>

#include "util/error.h"

namespace moelab {
namespace {

// `%*` in the pattern: "[rank N] " on warnings and errors, nothing otherwise.
class RankTag : public spdlog::custom_flag_formatter {
 public:
  explicit RankTag(int rank) : rank_(rank) {}
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    if (msg.level < spdlog::level::warn) return;
    std::string tag = "[rank " + std::to_string(rank_) + "] ";
    dest.append(tag.data(), tag.data() + tag.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<RankTag>(rank_);
  }

 private:
  int rank_;
};

int g_rank = 0;

}  // namespace

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    throw InputError("log level '" + level + "' is not one of debug, info, warn, error");
  }
  // Only rank 0 speaks below warning level, so N ranks don't print N copies.
  spdlog::set_level(g_rank == 0 ? parsed : std::max(parsed, spdlog::level::warn));
}

void init_logging(int rank, const std::string& level) {
  g_rank = rank;
  auto logger = spdlog::stderr_color_mt("moelab-" + std::to_string(rank));
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<RankTag>('*', rank).set_pattern("%^%l%$ %*%v");
  logger->set_formatter(std::move(formatter));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  set_log_level(level);
}

}  // namespace moelab
