#include "metrics/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "common/captured_log.h"

namespace moelab {
namespace {

TEST(Progress, DurationsReadNaturally) {
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(125), "2m05s");
  EXPECT_EQ(format_duration(3 * 3600 + 7 * 60 + 30), "3h07m");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "--");
  EXPECT_EQ(format_duration(-1), "--");
}

TEST(Progress, EtaExtrapolatesTheMeanStepTime) {
  EXPECT_DOUBLE_EQ(eta_seconds(10, 90, 5.0), 45.0);
  EXPECT_DOUBLE_EQ(eta_seconds(10, 0, 5.0), 0.0);
  EXPECT_TRUE(std::isinf(eta_seconds(0, 90, 0.0)));
}

TEST(Progress, LineShowsStepBarLossRateAndEta) {
  EXPECT_EQ(format_progress_line(250, 1000, 3.45678, 12345.0, 3e-3, 125.0),
            "step 250/1000 [#####---------------] 25.0% loss 3.4568 lr 3.00e-03 12.3k tok/s "
            "ETA 2m05s");
  EXPECT_EQ(format_progress_line(1000, 1000, 2.0, 2.5e6, 1e-4, 0.0),
            "step 1000/1000 [####################] 100.0% loss 2.0000 lr 1.00e-04 2.5M tok/s "
            "ETA 0s");
  EXPECT_EQ(format_progress_line(0, 10, 9.0, 512.0, 0.0, std::numeric_limits<double>::infinity()),
            "step 0/10 [--------------------] 0.0% loss 9.0000 lr 0.00e+00 512 tok/s ETA --");
}

TEST(Progress, ModeSettings) {
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kBar), ProgressMode::kBar);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kPlain), ProgressMode::kPlain);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kOff), ProgressMode::kOff);
  const ProgressMode automatic = resolve_progress_mode(ProgressMode::kAuto);
  EXPECT_TRUE(automatic == ProgressMode::kBar || automatic == ProgressMode::kPlain);
}

TEST(Progress, PlainModeLogsEveryFewStepsAndTheLast) {
  testing::CapturedLog log;
  {
    Progress progress(7, ProgressMode::kPlain, /*plain_every=*/3);
    for (int64_t step = 1; step <= 7; ++step) progress.update(step, 1.0, 100.0, 1e-3);
  }
  const std::string text = log.text();
  EXPECT_EQ(text.find("step 1/7"), std::string::npos);
  EXPECT_NE(text.find("step 3/7"), std::string::npos);
  EXPECT_NE(text.find("step 6/7"), std::string::npos);
  EXPECT_NE(text.find("step 7/7"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
}

TEST(Progress, OffModeIsSilent) {
  testing::CapturedLog log;
  Progress progress(2, ProgressMode::kOff);
  progress.update(2, 1.0, 100.0, 1e-3);
  EXPECT_EQ(log.text(), "");
}

}  // namespace
}  // namespace moelab
