#include "metrics/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace moelab {
namespace {

constexpr int kBarWidth = 20;

std::string format_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.1f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.1f}k", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

}  // namespace

ProgressMode resolve_progress_mode(ProgressMode setting) {
  if (setting != ProgressMode::kAuto) return setting;
  return isatty(fileno(stderr)) ? ProgressMode::kBar : ProgressMode::kPlain;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t hours = total / 3600;
  const int64_t minutes = total / 60 % 60;
  if (hours > 0) return fmt::format("{}h{:02d}m", hours, minutes);
  if (minutes > 0) return fmt::format("{}m{:02d}s", minutes, total % 60);
  return fmt::format("{}s", total);
}

double eta_seconds(int64_t steps_done, int64_t steps_left, double elapsed_s) {
  if (steps_done <= 0) return std::numeric_limits<double>::infinity();
  return elapsed_s / static_cast<double>(steps_done) *
         static_cast<double>(std::max<int64_t>(steps_left, 0));
}

std::string format_progress_line(int64_t step, int64_t total_steps, double loss,
                                 double tokens_per_s, double lr, double eta_s) {
  const double fraction =
      total_steps > 0 ? std::clamp(static_cast<double>(step) / total_steps, 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  return fmt::format("step {}/{} [{}{}] {:.1f}% loss {:.4f} lr {:.2e} {} tok/s ETA {}", step,
                     total_steps, std::string(filled, '#'), std::string(kBarWidth - filled, '-'),
                     100.0 * fraction, loss, lr, format_rate(tokens_per_s), format_duration(eta_s));
}

Progress::Progress(int64_t total_steps, ProgressMode mode, int64_t plain_every)
    : total_steps_(total_steps),
      mode_(resolve_progress_mode(mode)),
      plain_every_(std::max<int64_t>(plain_every, 1)) {}

void Progress::update(int64_t step, double loss, double tokens_per_s, double lr) {
  if (mode_ == ProgressMode::kOff) return;
  if (first_step_ < 0) {
    // The first update marks the clock; its own step's time is unknown.
    first_step_ = step;
    since_first_ = Stopwatch();
  }
  const double elapsed = since_first_.seconds();
  const std::string line =
      format_progress_line(step, total_steps_, loss, tokens_per_s, lr,
                           eta_seconds(step - first_step_, total_steps_ - step, elapsed));
  if (mode_ == ProgressMode::kBar) {
    // "\x1b[K" clears what a longer previous line left behind.
    std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    std::fflush(stderr);
    line_open_ = true;
  } else if (step % plain_every_ == 0 || step == total_steps_) {
    spdlog::info("{}", line);
  }
}

void Progress::finish() {
  if (!line_open_) return;
  std::fputc('\n', stderr);
  std::fflush(stderr);
  line_open_ = false;
}

}  // namespace moelab
