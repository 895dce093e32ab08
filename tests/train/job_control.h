// Starting, watching and signalling a multi-rank `moelab train` job from a
// test: the fault and preemption tests share these.
#pragma once

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
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace moelab::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts `command` under /bin/sh with `exec`, so the returned pid is the command's.
inline pid_t spawn(const std::string& command) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The pid of the process below `ancestor` (any depth) whose environment says it
// is MPI rank `rank`; -1 when there is none.
inline pid_t find_rank(pid_t ancestor, int rank) {
  const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  auto parent_of = [](pid_t pid) {
    const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    // Field 4 (ppid) follows "pid (comm) state"; comm may hold spaces, so parse after ')'.
    const auto close = stat.rfind(')');
    int ppid = 0;
    char state = 0;
    if (close == std::string::npos ||
        std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2)
      return -1;
    return ppid;
  };
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t up = std::stoi(name);
    while (up > 1 && up != ancestor) up = parent_of(up);
    if (up != ancestor) continue;
    std::string env = read_text(entry.path() / "environ");
    for (char& c : env) c = c == '\0' ? '\n' : c;
    if (env.find("\n" + wanted + "\n") != std::string::npos || env.rfind(wanted + "\n", 0) == 0)
      return std::stoi(name);
  }
  return -1;
}

inline int count_lines(const fs::path& path) {
  std::ifstream in(path);
  return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

// Waits until `path` has at least `lines` lines while `pid` runs; false (with
// the job killed) when it ends first or `limit` passes.
inline bool wait_for_lines(const fs::path& path, int lines, pid_t pid,
                           std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto start = Clock::now();
  int status = 0;
  while (count_lines(path) < lines) {
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    if (Clock::now() - start > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Whether `pid` (a child of this process) ends within 10 s; it is left
// unreaped, a zombie, as when the launcher that started it ended first.
inline bool becomes_zombie(pid_t pid) {
  for (int tries = 0; tries < 200; ++tries) {
    siginfo_t info{};
    if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The exit status of `pid` when it ends within `limit`, with the seconds it
// took; nullopt (and the process killed) otherwise.
inline std::optional<int> wait_exit(pid_t pid, std::chrono::seconds limit, double* seconds) {
  const auto start = Clock::now();
  int status = 0;
  while (Clock::now() - start < limit) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return std::nullopt;
}

// A tiny prepared corpus under `root`/data and a 2-layer MoE config at
// `root`/run.toml (experts split over 2 ranks), plus `extra` TOML lines.
inline void write_tiny_moe_job(const fs::path& root, const std::string& extra) {
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
  std::ofstream(root / "run.toml")
      << "[model]\nvocab_size = 80\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
         "seq_len = 16\n[moe]\nenabled = true\nnum_experts = 4\nd_expert = 32\n"
         "[parallel]\nep = 2\n[data]\ndir = \""
      << (root / "data").string()
      << "\"\n[train]\nprecision = \"fp32\"\nbatch_seqs = 4\nthreads = 1\n"
         "[optim]\nwarmup_steps = 1\n[eval]\nmax_windows = 4\n[log]\ninterval = 1\n"
         "progress = \"off\"\n"
      << extra;
}

inline std::string mpirun_command(int ranks) {
  return "mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np " +
         std::to_string(ranks) + " ";
}

// The first `lines` lines of a file.
inline std::string head_lines(const fs::path& path, int lines) {
  std::ifstream in(path);
  std::string out, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

// That a run went on from its checkpoint at `step` rather than from the start:
// `log` (the resumed process's) says which checkpoint, and metrics.jsonl's
// lines up to that step are still those `before` held (a fresh start would
// have rewritten them, with other timings).
inline void expect_resumed_from(const fs::path& run_dir, const std::string& log, int64_t step,
                                const std::string& before) {
  char folder[32];
  std::snprintf(folder, sizeof(folder), "step_%08lld", static_cast<long long>(step));
  EXPECT_NE(log.find(std::string(folder) + " (step " + std::to_string(step) + ")"),
            std::string::npos)
      << "no resume from step " << step << ":\n"
      << log;
  EXPECT_EQ(head_lines(run_dir / "metrics.jsonl", int(step)), head_lines(before, int(step)));
}

// The step of the newest complete checkpoint in `run`, -1 when there is none.
inline int64_t newest_checkpoint(const fs::path& run) {
  int64_t newest = -1;
  if (!fs::exists(run / "checkpoints")) return newest;
  for (const auto& entry : fs::directory_iterator(run / "checkpoints")) {
    const std::string name = entry.path().filename();
    if (name.rfind("step_", 0) == 0 && name.find(".tmp") == std::string::npos)
      newest = std::max<int64_t>(newest, std::stoll(name.substr(5)));
  }
  return newest;
}

// (step, loss) of every metrics.jsonl line; losses are logged in round-trip
// form, so equal values mean bitwise-equal losses.
inline std::vector<std::pair<int64_t, double>> loss_log(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<std::pair<int64_t, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line);
    out.emplace_back(record.at("step").get<int64_t>(), record.at("loss").get<double>());
  }
  return out;
}

}  // namespace moelab::testing
