#include "study/local_launcher.h"

#include <fcntl.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "study/train_command.h"
#include "util/error.h"
#include "util/mpi_session.h"
#include "util/stopwatch.h"

extern char** environ;

namespace moelab {
namespace {

bool trains_on_cuda(const StudyPlan& plan) {
  for (const auto& run : plan.runs) {
    if (run.cfg.train.device == TrainDevice::kCuda) return true;
  }
  return false;
}

// Where runs go side by side: the CUDA_VISIBLE_DEVICES of each concurrent run
// ("" for CPU runs). GPU runs take `ranks` GPUs each, runs_per_gpu runs to a
// group of GPUs, so the machine's GPUs set how many run at a time.
std::vector<std::string> run_slots(const StudyPlan& plan, int64_t parallel,
                                   const std::vector<std::string>& gpus) {
  if (!trains_on_cuda(plan) || gpus.empty()) return std::vector<std::string>(parallel);
  const size_t ranks = size_t(plan.ranks);
  if (gpus.size() < ranks) {
    throw InputError(plan.source + ": study.ranks = " + std::to_string(ranks) +
                     " needs that many GPUs per run; this machine shows " +
                     std::to_string(gpus.size()));
  }
  std::vector<std::string> slots;
  for (size_t first = 0; first + ranks <= gpus.size(); first += ranks) {
    std::string devices;
    for (size_t g = first; g < first + ranks; ++g)
      devices += (devices.empty() ? "" : ",") + gpus[g];
    for (int64_t k = 0; k < plan.runs_per_gpu; ++k) slots.push_back(devices);
  }
  return slots;
}

// The parent's environment with OMP_NUM_THREADS set for the child, less any
// MPI launch variables (see forget_mpi_launch): a child mpirun that sees a
// singleton's variables exits at once with status 1 and no message.
std::vector<std::string> child_environment(int64_t threads) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name == "OMP_NUM_THREADS" || is_mpi_launch_variable(name)) continue;
    env.emplace_back(entry);
  }
  env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  return env;
}

std::vector<std::string> with_variable(std::vector<std::string> env, const std::string& name,
                                       const std::string& value) {
  const std::string prefix = name + "=";
  env.erase(std::remove_if(env.begin(), env.end(),
                           [&](const std::string& e) { return e.rfind(prefix, 0) == 0; }),
            env.end());
  env.push_back(prefix + value);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (auto& w : words) out.push_back(w.data());
  out.push_back(nullptr);
  return out;
}

// Starts one run with stdout and stderr appended to `log`; returns its pid.
pid_t spawn_run(std::vector<std::string> argv, std::vector<std::string> env,
                const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  auto args = c_strings(argv);
  auto envp = c_strings(env);
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  return pid;
}

// The last `count` lines of a run's log, indented: a failure that happens before
// the run writes anything else (a launcher that cannot start, a bad config) is
// then readable in the study's own output, not only in a folder that may go.
std::string last_lines(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (lines.size() > count) lines.pop_front();
  }
  std::string out;
  for (const auto& line : lines) out += "\n    | " + line;
  return out;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs a plan's runs as child processes, one per free slot, and records how
// each ended.
class LocalStudyRunner {
 public:
  LocalStudyRunner(const StudyPlan& plan, std::string binary, std::vector<std::string> slots)
      : plan_(plan),
        binary_(std::move(binary)),
        env_(child_environment(plan.threads)),
        slots_(std::move(slots)),
        outcomes_(plan.runs.size()) {
    for (size_t s = slots_.size(); s-- > 0;) free_slots_.push_back(s);
  }

  std::vector<LocalRunOutcome> run_all() {
    std::vector<size_t> waiting = runs_to_do();
    total_ = waiting.size();
    while (!waiting.empty() || !running_.empty()) {
      start_ready(waiting);
      if (running_.empty()) break;
      wait_for_one();
    }
    return outcomes_;
  }

 private:
  struct Running {
    size_t index;  // into plan.runs
    size_t slot;   // into slots_
    Stopwatch started;
    bool converting = false;  // writing the run's converted start, then training
  };

  // The runs without a DONE file, parents' stages first, else in plan order.
  std::vector<size_t> runs_to_do() {
    std::vector<size_t> pending;
    for (size_t i = 0; i < plan_.runs.size(); ++i) {
      const PlannedRun& run = plan_.runs[i];
      outcomes_[i].variant = run.variant;
      outcomes_[i].seed = run.seed;
      if (std::filesystem::exists(run.dir + "/DONE")) {
        spdlog::info("{} seed {}: already done, skipped", run.variant, run.seed);
      } else {
        pending.push_back(i);
        unfinished_.insert(i);
      }
    }
    std::stable_sort(pending.begin(), pending.end(),
                     [&](size_t a, size_t b) { return stage_of(a) < stage_of(b); });
    return pending;
  }

  int64_t stage_of(size_t i) const { return planned_variant(plan_, plan_.runs[i].variant).stage; }

  // The run of the same seed that run i starts from, if it is staged.
  std::optional<size_t> parent_of(size_t i) const {
    const std::string& parent = planned_variant(plan_, plan_.runs[i].variant).parent;
    for (size_t p = 0; p < plan_.runs.size() && !parent.empty(); ++p) {
      if (plan_.runs[p].variant == parent && plan_.runs[p].seed == plan_.runs[i].seed) return p;
    }
    return std::nullopt;
  }

  // Starts every waiting run whose parent has finished while slots are free;
  // a run whose parent failed or was not started is not started either.
  void start_ready(std::vector<size_t>& waiting) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      const size_t i = *it;
      const auto parent = parent_of(i);
      if (parent && unfinished_.count(*parent)) {
        ++it;
        continue;
      }
      if (parent && !ended_well(*parent)) {
        not_started(i, *parent);
      } else if (free_slots_.empty()) {
        ++it;
        continue;
      } else {
        start(i);
      }
      it = waiting.erase(it);
    }
  }

  bool ended_well(size_t i) const {
    return outcomes_[i].status == LocalRunOutcome::Status::kSkipped ||
           outcomes_[i].status == LocalRunOutcome::Status::kFinished;
  }

  void not_started(size_t i, size_t parent) {
    const PlannedRun& run = plan_.runs[i];
    unfinished_.erase(i);
    outcomes_[i].status = LocalRunOutcome::Status::kNotStarted;
    outcomes_[i].detail =
        "not started: it starts from " + plan_.runs[parent].variant + " seed " +
        std::to_string(run.seed) + ", which " +
        (outcomes_[parent].status == LocalRunOutcome::Status::kFailed ? "failed"
                                                                      : "was not started");
    spdlog::error("{} seed {}: {}", run.variant, run.seed, outcomes_[i].detail);
  }

  // Starts run i in the last free slot: its conversion first when its
  // converted start is not written yet (an interrupted one is redone), else
  // its training.
  void start(size_t i) {
    const PlannedRun& run = plan_.runs[i];
    const bool converting =
        !run.start_args.empty() && !std::filesystem::exists(run.cfg.train.init_from);
    const size_t slot = free_slots_.back();
    spdlog::info("[{}/{}] {} seed {}: started", ++started_, total_, run.variant, run.seed);
    if (spawn_step(i, slot, converting, Stopwatch())) free_slots_.pop_back();
  }

  // Spawns run i's conversion or training in `slot`; false (the run failed)
  // when it cannot start.
  bool spawn_step(size_t i, size_t slot, bool converting, Stopwatch since) {
    const PlannedRun& run = plan_.runs[i];
    const std::string log = run.dir + "/train.log";
    const auto argv =
        converting ? start_command(run, binary_) : train_command(run, plan_.ranks, binary_);
    const std::string& devices = slots_[slot];
    const auto run_env =
        devices.empty() ? env_ : with_variable(env_, "CUDA_VISIBLE_DEVICES", devices);
    spdlog::info("{} seed {}: {}{}{}, log {}", run.variant, run.seed,
                 converting ? "writing its start: " : "",
                 devices.empty() ? "" : "CUDA_VISIBLE_DEVICES=" + devices + " ", shell_join(argv),
                 log);
    try {
      running_[spawn_run(argv, run_env, log)] = Running{i, slot, since, converting};
      return true;
    } catch (const std::exception& e) {
      unfinished_.erase(i);
      outcomes_[i].status = LocalRunOutcome::Status::kFailed;
      outcomes_[i].detail = e.what();
      spdlog::error("{} seed {}: {}", run.variant, run.seed, e.what());
      return false;
    }
  }

  // Waits for one of the running children to end and records its outcome; a
  // finished conversion goes on to train in the same slot.
  void wait_for_one() {
    int status = 0;
    pid_t pid = 0;
    do {
      pid = waitpid(-1, &status, 0);
    } while (pid < 0 && errno == EINTR);
    auto it = running_.find(pid);
    if (pid < 0 || it == running_.end()) return;  // not one of ours
    const Running ended = it->second;
    running_.erase(it);
    const bool exited_0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ended.converting && exited_0 &&
        std::filesystem::exists(plan_.runs[ended.index].cfg.train.init_from)) {
      if (spawn_step(ended.index, ended.slot, false, ended.started)) return;
    } else {
      record_outcome(ended.index, status, ended.started.seconds(), ended.converting);
    }
    free_slots_.push_back(ended.slot);
  }

  void record_outcome(size_t i, int status, double seconds, bool converting) {
    const PlannedRun& run = plan_.runs[i];
    LocalRunOutcome& outcome = outcomes_[i];
    unfinished_.erase(i);
    const bool exited_0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!converting && exited_0 && std::filesystem::exists(run.dir + "/DONE")) {
      outcome.status = LocalRunOutcome::Status::kFinished;
      spdlog::info("{} seed {}: finished in {:.1f} s", run.variant, run.seed, seconds);
      return;
    }
    const std::string missing =
        converting ? " but no " + run.cfg.train.init_from : " but no DONE file";
    outcome.status = LocalRunOutcome::Status::kFailed;
    outcome.detail = (converting ? "writing its start: " : "") + describe_exit(status) +
                     (exited_0 ? missing : "") + ", log " + run.dir + "/train.log";
    outcome.log_tail = last_lines(run.dir + "/train.log", 20);
    spdlog::error("{} seed {}: failed after {:.1f} s ({}); the log ends:{}", run.variant, run.seed,
                  seconds, outcome.detail, outcome.log_tail);
  }

  const StudyPlan& plan_;
  const std::string binary_;
  const std::vector<std::string> env_;
  const std::vector<std::string> slots_;
  std::vector<size_t> free_slots_;
  std::map<pid_t, Running> running_;
  std::vector<LocalRunOutcome> outcomes_;
  std::set<size_t> unfinished_;  // waiting or running
  size_t started_ = 0, total_ = 0;
};

}  // namespace

std::vector<LocalRunOutcome> run_study_locally(const StudyPlan& plan, int64_t parallel,
                                               const std::string& binary,
                                               const std::vector<std::string>& gpus) {
  LocalStudyRunner runner(plan, binary, run_slots(plan, parallel, gpus));
  return runner.run_all();
}

}  // namespace moelab
