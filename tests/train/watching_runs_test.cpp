// Watching runs: TensorBoard event files read back by the tensorboard package
// itself (tests/train/check_tensorboard.py), equal to the run's text logs, kept
// exact across a resume and readable up to the last whole record after a
// crash; profiler traces with the MoE phases as named ranges; peak memory per
// phase.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "metrics/event_file.h"
#include "metrics/tensorboard_log.h"

// Named, not anonymous: a unity build compiles this file in one translation
// unit with other tests of its folder, whose helpers share these names.
namespace watching_runs {

namespace fs = std::filesystem;

const fs::path kRoot = fs::temp_directory_path() / ("moelab_tb_" + std::to_string(getpid()));
const std::string kChecker = std::string(MOELAB_SOURCE_DIR) + "/tests/train/check_tensorboard.py";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `cmd`, its output in kRoot/last.log; returns the exit status.
int run(const std::string& cmd) {
  return std::system((cmd + " > " + (kRoot / "last.log").string() + " 2>&1").c_str());
}

std::string last_log() {
  return read_text(kRoot / "last.log");
}

int check_run(const fs::path& run_dir) {
  return run(std::string(MOELAB_TORCH_PYTHON) + " " + kChecker + " " + run_dir.string());
}

// The steps of the events the tensorboard package reads from `file`.
std::string readable_steps(const fs::path& file) {
  EXPECT_EQ(run(std::string(MOELAB_TORCH_PYTHON) + " " + kChecker + " --records " + file.string()),
            0)
      << last_log();
  std::string steps = last_log();
  while (!steps.empty() && steps.back() == '\n') steps.pop_back();
  return steps;
}

std::vector<fs::path> event_files(const fs::path& run_dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run_dir / "tb")) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

class WatchingRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(kRoot);
    std::ofstream corpus(kRoot / "corpus.txt");
    for (int d = 0; d < 40; ++d) {
      corpus << "story " << d
             << ": the cat sat on the mat and looked at the moon.\n<|endoftext|>\n";
    }
    corpus.close();
    ASSERT_EQ(run(std::string(MOELAB_BINARY) + " prep --input " + (kRoot / "corpus.txt").string() +
                  " --val-count 4 --vocab-size 80 --out " + (kRoot / "data").string()),
              0)
        << last_log();
    std::ofstream(kRoot / "tiny.toml")
        << "[model]\nvocab_size = 80\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
           "seq_len = 16\n[moe]\nenabled = true\nnum_experts = 4\nd_expert = 32\n[data]\ndir = \""
        << (kRoot / "data").string()
        << "\"\n[train]\nprecision = \"fp32\"\nbatch_seqs = 4\nthreads = 1\nmax_steps = 12\n"
           "[optim]\nwarmup_steps = 1\n[eval]\nmax_windows = 4\ninterval = 3\n"
           "[checkpoint]\ninterval = 6\nkeep = 5\n[log]\ninterval = 2\nprogress = \"off\"\n";
  }
  static void TearDownTestSuite() { fs::remove_all(kRoot); }

  static std::string train(const std::string& out, const std::string& sets = "", int ranks = 1) {
    const std::string mpirun =
        "mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np " +
        std::to_string(ranks) + " ";
    return (ranks > 1 ? mpirun : "") + MOELAB_BINARY + " train " + (kRoot / "tiny.toml").string() +
           " --out " + (kRoot / out).string() + " " + sets;
  }
};

TEST_F(WatchingRuns, TensorBoardEveryLoggedValueIsInTheEventsOnceAcrossAResume) {
  ASSERT_EQ(run(train("full")), 0) << last_log();
  ASSERT_EQ(check_run(kRoot / "full"), 0) << last_log();
  // Scalars of every kind the issue names, and one histogram per MoE layer.
  const std::string checked = last_log();
  EXPECT_NE(checked.find("checked"), std::string::npos) << checked;

  // Killed after step 6's checkpoint, with steps 7-12 logged and a record torn
  // in the middle: the resumed run drops both and logs 7-12 once.
  fs::copy(kRoot / "full", kRoot / "resumed", fs::copy_options::recursive);
  fs::remove_all(kRoot / "resumed" / "checkpoints" / "step_00000012");
  fs::remove(kRoot / "resumed" / "DONE");
  const fs::path first = event_files(kRoot / "resumed").front();
  std::ofstream(first, std::ios::app | std::ios::binary) << std::string("\x20\0\0\0\0\0", 6);
  ASSERT_EQ(run(train("resumed", "--resume auto")), 0) << last_log();
  EXPECT_EQ(event_files(kRoot / "resumed").size(), 2u);
  EXPECT_EQ(check_run(kRoot / "resumed"), 0) << last_log();
}

TEST_F(WatchingRuns, TensorBoardValuesCarryTheirPathsAsTags) {
  const nlohmann::json record = {
      {"step", 4},
      {"loss", 2.5},
      {"skipped", false},
      {"time_ms", {{"data", 1.5}}},
      {"moe", {{"drop_fraction", {0.0, 0.25}}, {"expert_load", {{0.5, 0.5}, {0.75, 0.25}}}}}};
  std::vector<std::string> tags;
  for (const auto& v : moelab::summary_values(record)) {
    tags.push_back(v.tag +
                   (v.histogram.empty() ? "" : "[h" + std::to_string(v.histogram.size()) + "]"));
  }
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags, (std::vector<std::string>{"loss", "moe/drop_fraction/0", "moe/drop_fraction/1",
                                            "moe/expert_load/0[h2]", "moe/expert_load/1[h2]",
                                            "time_ms/data"}));
}

TEST_F(WatchingRuns, TensorBoardOffWritesNoEventFiles) {
  ASSERT_EQ(run(train("off", "--set log.tensorboard=false --set train.max_steps=2")), 0)
      << last_log();
  EXPECT_TRUE(fs::exists(kRoot / "off" / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(kRoot / "off" / "tb"));
}

// A killed run's file ends in a torn record, or in garbage where a write was
// lost: TensorBoard reads it up to the last whole record, and a resume keeps
// exactly those.
TEST_F(WatchingRuns, TensorBoardTornOrCorruptTailIsReadableUpToTheLastWholeRecord) {
  const fs::path file = kRoot / "events.out.tfevents.0.test";
  const auto write_steps = [&](int last) {
    moelab::EventFileWriter writer(file.string());
    for (int step = 1; step <= last; ++step) {
      writer.write(step, {{"loss", 1.0 / step, {}}, {"load", 0, {0.25, 0.75, 0.5}}});
    }
    writer.flush();
  };
  write_steps(4);
  EXPECT_EQ(readable_steps(file), "0 1 2 3 4");
  const auto whole = fs::file_size(file);

  fs::resize_file(file, whole - 7);  // the last record torn
  EXPECT_EQ(readable_steps(file), "0 1 2 3");
  EXPECT_EQ(moelab::keep_events_up_to(file.string(), 100), 4u);
  EXPECT_EQ(readable_steps(file), "0 1 2 3");

  write_steps(4);
  std::string bytes = read_text(file);
  bytes[bytes.size() - 20] ^= 0x5A;  // the last record's payload corrupted
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(moelab::keep_events_up_to(file.string(), 100), 4u);
  EXPECT_EQ(readable_steps(file), "0 1 2 3");
  EXPECT_LT(fs::file_size(file), whole);

  write_steps(4);
  EXPECT_EQ(moelab::keep_events_up_to(file.string(), 2), 3u);  // a resume at step 2
  EXPECT_EQ(readable_steps(file), "0 1 2");
}

// The names of the user ranges (RecordFunction user scopes) in a Chrome trace.
std::set<std::string> trace_ranges(const fs::path& trace) {
  const auto json = nlohmann::json::parse(read_text(trace));
  std::set<std::string> names;
  for (const auto& event : json.at("traceEvents")) {
    if (event.value("cat", "") == "user_annotation") names.insert(event.at("name"));
  }
  return names;
}

TEST_F(WatchingRuns, ProfilerTraceOfEveryRankNamesTheMoePhases) {
  ASSERT_EQ(run(train("profiled",
                      "--set train.max_steps=4 --set 'train.profile_steps=[2,3]' "
                      "--set train.profile_ranks='\"all\"' --set parallel.ep=2",
                      2)),
            0)
      << last_log();
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const fs::path trace =
        kRoot / "profiled" / "profile" / ("rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(fs::exists(trace)) << last_log();
    const auto names = trace_ranges(trace);
    for (const char* phase : {"data", "forward_backward", "grad_sync", "optimizer", "route",
                              "dispatch", "experts", "combine", "all_to_all"}) {
      EXPECT_TRUE(names.count(phase)) << phase << " is not a range in " << trace;
    }
  }
}

TEST_F(WatchingRuns, PeakMemoryOfEveryPhaseIsLogged) {
  ASSERT_EQ(run(train("memory", "--set train.max_steps=2")), 0) << last_log();
  std::ifstream in(kRoot / "memory" / "metrics.jsonl");
  std::string line;
  int lines = 0;
  double highest = 0;
  while (std::getline(in, line)) {
    const auto peaks = nlohmann::json::parse(line).at("peak_mib");
    ++lines;
    for (const char* phase : {"data", "forward_backward", "grad_sync", "optimizer"}) {
      // The resident set of a process that has loaded LibTorch is tens of MiB at least.
      EXPECT_GT(peaks.at(phase).get<double>(), 10.0) << line;
      highest = std::max(highest, peaks.at(phase).get<double>());
    }
  }
  EXPECT_EQ(lines, 1);  // step 2 (log.interval = 2)
  // The run's peak survives the per-phase resets of the kernel's mark.
  const auto done = nlohmann::json::parse(read_text(kRoot / "memory" / "DONE"));
  EXPECT_GE(done.at("peak_resident_mib")[0].get<double>(), highest);
}

TEST_F(WatchingRuns, ProfilingSettingsThatCannotWorkAreRefusedByKey) {
  EXPECT_EQ(WEXITSTATUS(run(train("bad1", "--set 'train.profile_steps=[3,2]'"))), 2);
  EXPECT_NE(last_log().find("train.profile_steps"), std::string::npos) << last_log();
  EXPECT_EQ(WEXITSTATUS(run(train("bad2", "--set train.memory_snapshot_step=3"))), 2);
  EXPECT_NE(last_log().find("train.memory_snapshot_step needs train.device = \"cuda\""),
            std::string::npos)
      << last_log();
}

}  // namespace watching_runs
