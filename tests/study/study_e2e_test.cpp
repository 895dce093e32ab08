// End to end with the real binary on a tiny generated dataset: `moelab study
// run` locally, `moelab report` on a study with a run missing, and (when
// Slurm is installed) `moelab study submit` on a private single-node Slurm
// cluster started by slurm_cluster.sh.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "study_test_util.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::write_file;

// Runs a shell command; returns its exit status and appends stdout+stderr to `output`.
int run(const std::string& command, std::string* output = nullptr) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  size_t n = 0;
  std::string out;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  if (output) *output += out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Simple stories from a few word lists: enough variety for a 128-piece tokenizer.
std::string generated_corpus() {
  const std::vector<std::string> names = {"Tom", "Lily", "Ben", "Mia", "Sam", "Anna"};
  const std::vector<std::string> verbs = {"saw", "found", "liked", "lost", "drew", "made"};
  const std::vector<std::string> things = {"a red ball",  "a small dog", "the big tree",
                                           "a blue boat", "the old hat", "a green frog"};
  const std::vector<std::string> ends = {"and smiled.",  "in the park.",   "at home.",
                                         "by the lake.", "with a friend.", "after lunch."};
  std::mt19937 rng(7);
  auto pick = [&](const std::vector<std::string>& words) { return words[rng() % words.size()]; };
  std::string text;
  for (int doc = 0; doc < 300; ++doc) {
    for (int s = 0; s < 3; ++s) {
      text += pick(names) + " " + pick(verbs) + " " + pick(things) + " " + pick(ends) + " ";
    }
    text += "\n<|endoftext|>\n";
  }
  return text;
}

// One generated dataset and study folder shared by the tests of this file.
class StudyEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/mst.XXXXXX";  // short: the Slurm test puts sockets under it
    root_ = mkdtemp(tmpl);
    write_file(root_ + "/corpus.txt", generated_corpus());
    std::string out;
    prep_status_ =
        run(std::string(MOELAB_BINARY) + " prep --input " + root_ + "/corpus.txt --out " + root_ +
                "/data --vocab-size 128 --val-fraction 0.1",
            &out);
    prep_output_ = out;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  void SetUp() override { ASSERT_EQ(prep_status_, 0) << prep_output_; }

  // A 3-variant x 2-seed study in <root>/<name>/ writing runs to <root>/<name>/out:
  // two ranks per run, the MoE's experts spread over both (parallel.ep = 2),
  // two runs at a time; `tables` is appended (e.g. a [slurm] table).
  std::string write_study(const std::string& name, const std::string& tables = "") {
    const std::string dir = root_ + "/" + name;
    std::string study =
        testing::tiny_study(dir + "/out", "[0, 1]", "ranks = 2\nparallel_runs = 2\n");
    const std::string d_expert = "\"moe.d_expert\" = 32";
    study.replace(study.find(d_expert), d_expert.size(), d_expert + ", \"parallel.ep\" = 2");
    write_file(dir + "/base.toml", testing::tiny_base_config(root_ + "/data"));
    write_file(dir + "/study.toml", study + tables);
    return dir;
  }

  static std::string root_;
  static int prep_status_;
  static std::string prep_output_;
};
std::string StudyEndToEnd::root_;
int StudyEndToEnd::prep_status_ = -1;
std::string StudyEndToEnd::prep_output_;

void expect_every_run_done(const std::string& out_root) {
  for (const char* v : {"moe", "dense_active", "dense_total"}) {
    for (const char* seed : {"seed0", "seed1"}) {
      const std::string run_dir = out_root + "/" + v + "/" + seed;
      EXPECT_TRUE(fs::exists(run_dir + "/DONE")) << run_dir;
      EXPECT_TRUE(fs::exists(run_dir + "/val.csv")) << run_dir;
    }
  }
}

TEST_F(StudyEndToEnd, LocalRunThenReportWithARunMissing) {
  const std::string dir = write_study("local");
  std::string out;
  ASSERT_EQ(run(std::string(MOELAB_BINARY) + " study plan " + dir + "/study.toml", &out), 0) << out;
  EXPECT_NE(out.find("dense_active: dense, d_ff matched to the active parameters of 'moe'"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("parallel.ep = 2 of 'moe' dropped: all 2 ranks data parallel"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir + "/out")) << "plan must not write anything";

  out.clear();
  ASSERT_EQ(run(std::string(MOELAB_BINARY) + " study run " + dir + "/study.toml", &out), 0) << out;
  expect_every_run_done(dir + "/out");
  const std::string md = read_file(dir + "/out/summary.md");
  EXPECT_NE(md.find("| moe | 2/2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("None: every planned run finished."), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir + "/out/curves.png") ||
              out.find("skipping the plots") != std::string::npos)
      << out;

  // A second run skips everything.
  out.clear();
  ASSERT_EQ(run(std::string(MOELAB_BINARY) + " study run --no-plots " + dir + "/study.toml", &out),
            0)
      << out;
  EXPECT_NE(out.find("moe seed 1: already done, skipped"), std::string::npos) << out;

  fs::remove_all(dir + "/out/dense_total/seed1");
  out.clear();
  ASSERT_EQ(run(std::string(MOELAB_BINARY) + " report --no-plots " + dir + "/out", &out), 0) << out;
  EXPECT_NE(out.find("| dense_total | 1/2 |"), std::string::npos) << out;
  EXPECT_NE(out.find("- dense_total seed 1: missing (no run folder)"), std::string::npos) << out;
}

TEST_F(StudyEndToEnd, ChangedStudyInTheSameOutRootIsRefused) {
  const std::string dir = write_study("changed");
  write_file(
      dir + "/out/study.json",
      R"({"name": "other", "source": "x.toml", "hash": "0", "out_root": ")" + dir +
          R"(/out", "seeds": [0], "ranks": 1, "threads": 1, "variants": [], "runs": [], "pairs": []})");
  std::string out;
  EXPECT_EQ(run(std::string(MOELAB_BINARY) + " study run " + dir + "/study.toml", &out), 2) << out;
  EXPECT_NE(out.find("already holds a different study ('other'"), std::string::npos) << out;
}

// The last validation loss in a run's val.csv.
double last_val_loss(const std::string& run_dir) {
  std::istringstream in(read_file(run_dir + "/val.csv"));
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const size_t a = last.find(',', last.find(',') + 1);
  return std::stod(last.substr(a + 1, last.find(',', a + 1) - a - 1));
}

// dense trains 6 steps; dense_ft and an upcycled MoE (2 copies, top-2: the
// dense function) start from its last checkpoint and train one step at a
// learning rate too small to move them, so each ends where its start was: at
// dense's validation loss, which a fresh start is far above.
TEST_F(StudyEndToEnd, StagedRunsStartFromTheirParentsWeights) {
  const std::string dir = root_ + "/staged";
  write_file(dir + "/base.toml", testing::tiny_base_config(root_ + "/data"));
  const std::string still =
      "\"optim.lr\" = 1e-9, \"optim.warmup_steps\" = 1, \"train.max_steps\" = 1";
  write_file(dir + "/study.toml",
             "[study]\nname = \"staged\"\nbase = \"base.toml\"\nseeds = [0]\nout_root = \"" + dir +
                 "/out\"\nparallel_runs = 2\n\n[[variant]]\nname = \"dense\"\nset = { "
                 "\"train.max_steps\" = 6 }\n\n[[variant]]\nname = \"dense_ft\"\nfrom = { variant "
                 "= \"dense\" }\nset = { " +
                 still +
                 " }\n\n[[variant]]\nname = \"upcycled\"\n"
                 "from = { variant = \"dense\" }\nconvert = { method = \"upcycle\", experts = 2, "
                 "top_k = 2 }\nset = { " +
                 still + " }\n");
  std::string out;
  ASSERT_EQ(run(std::string(MOELAB_BINARY) + " study plan " + dir + "/study.toml", &out), 0) << out;
  EXPECT_NE(out.find("stages (a run starts once its parent's run of the same seed has finished"),
            std::string::npos)
      << out;
  ASSERT_EQ(run(std::string(MOELAB_BINARY) + " study run --no-plots " + dir + "/study.toml", &out),
            0)
      << out;
  const double dense = last_val_loss(dir + "/out/dense/seed0");
  EXPECT_LT(dense, std::log(128.0) - 0.3);  // trained: a fresh start is near ln(vocab)
  EXPECT_NEAR(last_val_loss(dir + "/out/dense_ft/seed0"), dense, 1e-4);
  EXPECT_NEAR(last_val_loss(dir + "/out/upcycled/seed0"), dense, 1e-4);
  EXPECT_TRUE(fs::exists(dir + "/out/upcycled/seed0/start/checkpoints/step_00000000"));
  EXPECT_NE(read_file(dir + "/out/summary.md").find("## Cost with the parents' chain"),
            std::string::npos);
}

TEST_F(StudyEndToEnd, AFailedParentFailsTheStudyNamingItsChildren) {
  const std::string dir = root_ + "/orphans";
  write_file(dir + "/base.toml", testing::tiny_base_config(root_ + "/no-such-data"));
  write_file(dir + "/study.toml",
             "[study]\nname = \"orphans\"\nbase = \"base.toml\"\nseeds = [0]\nout_root = \"" + dir +
                 "/out\"\n\n[[variant]]\nname = \"dense\"\n\n[[variant]]\nname = \"child\"\n"
                 "from = { variant = \"dense\" }\n");
  std::string out;
  EXPECT_EQ(run(std::string(MOELAB_BINARY) + " study run --no-plots " + dir + "/study.toml", &out),
            1)
      << out;
  EXPECT_NE(out.find("child seed 0: not started: it starts from dense seed 0, which failed"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("1 of 2 runs failed and 1 were not started"), std::string::npos) << out;
}

bool on_path(const std::string& program) {
  return run("command -v " + program + " >/dev/null") == 0;
}

// The first line of a run's slurm.log ("[2026-12-04T05:53:44Z] job ...") and
// its DONE file's time: when the run started and finished, in seconds.
std::pair<double, double> run_interval(const std::string& run_dir) {
  const std::string log = read_file(run_dir + "/slurm.log");
  std::tm tm{};
  strptime(log.substr(1, 20).c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  const double start = double(timegm(&tm));
  // stat, not fs::last_write_time: its clock converts to system time only in C++20,
  // and LibTorch 2.11 builds this project as C++17.
  struct stat done {};
  if (stat((run_dir + "/DONE").c_str(), &done) != 0) ADD_FAILURE() << "no DONE in " << run_dir;
  return {start, double(done.st_mtim.tv_sec) + 1e-9 * double(done.st_mtim.tv_nsec)};
}

// Starts the private cluster in SetUp and always stops it in TearDown: two
// nodes (two slurmd on this machine) that each declare 8 CPUs and 4 GPUs, more
// than the machine has (the runs are tiny and CPU-only), so several 2-rank runs
// share a node at once, as on a cluster that packs small jobs.
class SlurmCluster : public StudyEndToEnd {
 protected:
  void SetUp() override {
    for (const char* program : {"sbatch", "slurmctld", "slurmd", "munged"}) {
      if (!on_path(program)) {
        GTEST_SKIP() << program << " is not installed (launch/install-deps.sh installs Slurm)";
      }
    }
    StudyEndToEnd::SetUp();
    cluster_ = root_ + "/c";
    std::string out;
    started_ = true;
    ASSERT_EQ(run("SLURM_CLUSTER_NODES=2 SLURM_CLUSTER_CPUS=8 SLURM_CLUSTER_GPUS=4 " + script_ +
                      " start " + cluster_,
                  &out),
              0)
        << out;
    run("hostname -s | tr -d '\\n'", &host_);
    setenv("SLURM_CONF", (cluster_ + "/slurm.conf").c_str(), 1);
  }
  void TearDown() override {
    if (!started_) return;
    std::string out;
    EXPECT_EQ(run(script_ + " stop " + cluster_, &out), 0) << out;
    unsetenv("SLURM_CONF");
  }

  // Submits a study; returns its report job's id.
  std::string submit(const std::string& dir) {
    std::string out;
    EXPECT_EQ(run(std::string(MOELAB_BINARY) + " study submit " + dir + "/study.toml", &out), 0)
        << out;
    const auto at = out.find("report job ");
    if (at == std::string::npos) {
      ADD_FAILURE() << out;
      return "";
    }
    return out.substr(at + 11, out.find(' ', at + 11) - at - 11);
  }

  // Polls (bounded) until the job has left the queue; returns its final state.
  std::string wait_for(const std::string& job) {
    std::string state;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline) {
      state.clear();
      run("scontrol show job " + job + " | grep -o 'JobState=[A-Z_]*'", &state);
      // COMPLETING: the job's processes ended, Slurm has not yet recorded how.
      if (state.find("PENDING") == std::string::npos &&
          state.find("RUNNING") == std::string::npos &&
          state.find("COMPLETING") == std::string::npos &&
          state.find("JobState=") != std::string::npos) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return state;
  }

  const std::string script_ = MOELAB_SOURCE_DIR "/tests/study/slurm_cluster.sh";
  std::string cluster_;
  std::string host_;  // the first node's name
  bool started_ = false;
};

// Two studies (one per launcher) submitted at once: their 2-rank array tasks
// run side by side on the one node, the MoE with its experts over both ranks
// and the matched dense models data parallel.
TEST_F(SlurmCluster, ConcurrentMultiRankStudiesFinishWithBothLaunchers) {
  const std::vector<std::string> launchers = {"srun", "mpirun"};
  std::vector<std::string> dirs, reports;
  for (const auto& launcher : launchers) {
    dirs.push_back(
        write_study("slurm-" + launcher, "\n[slurm]\nlauncher = \"" + launcher + "\"\n"));
    reports.push_back(submit(dirs.back()));
  }
  std::vector<std::pair<double, double>> intervals;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string state = wait_for(reports[i]);
    std::string queue;
    run("squeue -a -o '%i %j %T %r'", &queue);
    ASSERT_NE(state.find("JobState=COMPLETED"), std::string::npos)
        << launchers[i] << ": " << state << "\nqueue:\n"
        << queue << "\nreport log:\n"
        << read_file(dirs[i] + "/out/slurm/logs/report.out") << "\nmoe seed0 log:\n"
        << read_file(dirs[i] + "/out/moe/seed0/slurm.log");
    expect_every_run_done(dirs[i] + "/out");
    const std::string md = read_file(dirs[i] + "/out/summary.md");
    EXPECT_NE(md.find("| dense_active | 2/2 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| dense_active - moe | 2 |"), std::string::npos) << md;
    for (const char* v : {"moe", "dense_active", "dense_total"}) {
      for (const char* seed : {"seed0", "seed1"}) {
        intervals.push_back(run_interval(dirs[i] + "/out/" + v + "/" + seed));
      }
    }
  }
  // The case under test needs runs that overlapped in time.
  int most_at_once = 0;
  for (const auto& [start, end] : intervals) {
    int at_once = 0;
    for (const auto& other : intervals) at_once += other.first <= start && start < other.second;
    most_at_once = std::max(most_at_once, at_once);
  }
  EXPECT_GE(most_at_once, 2) << "no two runs overlapped: the test did not test concurrency";
}

// Scripts for GPU nodes: one rank per GPU over two nodes, checked by Slurm
// itself (sbatch --test-only) against the cluster's two nodes of 4 GPUs.
TEST_F(SlurmCluster, GpuJobScriptsPassSbatchTestOnly) {
  const std::string dir = write_study("slurm-gpu", "\n[slurm]\nnodes = 2\ngpus_per_node = 1\n");
  std::string study = read_file(dir + "/study.toml");
  study.replace(study.find("\"train.max_steps\" = 10"), 22,
                "\"train.max_steps\" = 10\n\"train.device\" = \"cuda\"");
  write_file(dir + "/study.toml", study);
  std::string out;
  ASSERT_EQ(
      run(std::string(MOELAB_BINARY) + " study submit --dry-run " + dir + "/study.toml", &out), 0)
      << out;
  const std::string script = read_file(dir + "/out/slurm/moe.sbatch");
  for (const char* line : {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                           "#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=1"}) {
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
  }
  EXPECT_NE(read_file(dir + "/out/moe/seed0/config.toml").find("device = \"cuda\""),
            std::string::npos);
  for (const char* variant : {"moe", "dense_active", "dense_total"}) {
    out.clear();
    EXPECT_EQ(run("sbatch --test-only " + dir + "/out/slurm/" + variant + ".sbatch", &out), 0)
        << out;
    EXPECT_NE(out.find("to start at"), std::string::npos) << out;
    EXPECT_NE(out.find("on nodes " + host_ + ","), std::string::npos) << out;  // both nodes
  }
}

}  // namespace
}  // namespace moelab
