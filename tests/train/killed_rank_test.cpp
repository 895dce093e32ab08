// Failure behaviour (issue 5): SIGKILL one rank of a 2-rank expert-parallel run
// in the middle of training; the whole job must end within 30 s, non-zero, with
// a message that names the lost rank, instead of the survivor hanging in a
// collective.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts `command` under /bin/sh with `exec`, so the returned pid is the command's.
pid_t spawn(const std::string& command) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The pid of the child of `parent` whose environment says it is MPI rank `rank`.
pid_t find_rank(pid_t parent, int rank) {
  const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(entry.path() / "stat");
    // Field 4 (ppid) follows "pid (comm) state"; comm may hold spaces, so parse after ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2 || ppid != parent)
      continue;
    std::string env = read_text(entry.path() / "environ");
    for (char& c : env) c = c == '\0' ? '\n' : c;
    if (env.find("\n" + wanted + "\n") != std::string::npos || env.rfind(wanted + "\n", 0) == 0)
      return std::stoi(name);
  }
  return -1;
}

int count_lines(const fs::path& path) {
  std::ifstream in(path);
  return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

TEST(KilledRank, EndsTheWholeJobWithinThirtySeconds) {
  moelab::testing::TempDir dir;
  const fs::path root = dir.str();
  {
    std::ofstream corpus(root / "corpus.txt");
    for (int d = 0; d < 40; ++d) {
      corpus << "story " << d
             << ": the cat sat on the mat and looked at the moon.\n<|endoftext|>\n";
    }
  }
  const std::string prep = std::string(MOELAB_BINARY) + " prep --input " +
                           (root / "corpus.txt").string() +
                           " --val-count 4 --vocab-size 80 --out " + (root / "data").string() +
                           " > " + (root / "prep.log").string() + " 2>&1";
  ASSERT_EQ(std::system(prep.c_str()), 0) << read_text(root / "prep.log");

  // Far more steps than the test waits for: the job can only end by failing.
  std::ofstream(root / "run.toml")
      << "[model]\nvocab_size = 80\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
         "seq_len = 16\n[moe]\nenabled = true\nnum_experts = 4\nd_expert = 32\n"
         "[parallel]\nep = 2\n[data]\ndir = \""
      << (root / "data").string()
      << "\"\n[train]\nprecision = \"fp32\"\nbatch_seqs = 4\nthreads = 1\n"
         "max_steps = 1000000\n[optim]\nwarmup_steps = 1\n[log]\ninterval = 1\n"
         "progress = \"off\"\n";
  const std::string train =
      "mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np 2 " +
      std::string(MOELAB_BINARY) + " train " + (root / "run.toml").string() + " --out " +
      (root / "run").string() + " > " + (root / "train.log").string() + " 2>&1";
  const pid_t mpirun = spawn(train);
  ASSERT_GT(mpirun, 0);

  // Wait until both ranks are stepping (a few metrics lines written by rank 0).
  int status = 0;
  const auto start = Clock::now();
  while (count_lines(root / "run" / "metrics.jsonl") < 3) {
    ASSERT_EQ(waitpid(mpirun, &status, WNOHANG), 0) << "the run ended before it was killed:\n"
                                                    << read_text(root / "train.log");
    if (Clock::now() - start > std::chrono::seconds(120)) {
      kill(mpirun, SIGKILL);
      FAIL() << "training did not start within 120 s:\n" << read_text(root / "train.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const pid_t rank1 = find_rank(mpirun, 1);
  ASSERT_GT(rank1, 0) << "no child of mpirun has OMPI_COMM_WORLD_RANK=1";
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  const auto killed = Clock::now();

  bool ended = false;
  while (Clock::now() - killed < std::chrono::seconds(30)) {
    if (waitpid(mpirun, &status, WNOHANG) == mpirun) {
      ended = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  if (!ended) {
    kill(mpirun, SIGKILL);
    waitpid(mpirun, &status, 0);
  }
  const std::string log = read_text(root / "train.log");
  ASSERT_TRUE(ended) << "job still running 30 s after rank 1 was killed:\n" << log;
  std::printf("job ended %.1f s after rank 1 was killed\n", seconds);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_NE(log.find("rank 1"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(root / "run" / "DONE"));
}

}  // namespace
