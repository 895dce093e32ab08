#include "study/slurm_scripts.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>

#include "study/train_command.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace moelab {
namespace {

std::string sbatch_lines(const std::vector<std::string>& options) {
  std::string lines;
  for (const auto& o : options) lines += (lines.empty() ? "" : "\n") + ("#SBATCH " + o);
  return lines;
}

// Where a job may run: partition, account, time limit and any extra options.
std::vector<std::string> placement_options(const SlurmSpec& s) {
  std::vector<std::string> opts;
  if (!s.partition.empty()) opts.push_back("--partition=" + s.partition);
  if (!s.account.empty()) opts.push_back("--account=" + s.account);
  if (!s.time.empty()) opts.push_back("--time=" + s.time);
  opts.insert(opts.end(), s.extra.begin(), s.extra.end());
  return opts;
}

std::string slurm_key(const std::string& key, int64_t value) {
  return "[slurm] " + key + " = " + std::to_string(value);
}

// Packed runs share the GPUs of one node (and the MPS server the job starts
// there), so packing asks for GPUs and a single node.
void check_packing(const StudyPlan& plan, const SlurmSpec& s) {
  if (plan.runs_per_gpu == 1) return;
  const std::string packing =
      plan.source + ": study.runs_per_gpu = " + std::to_string(plan.runs_per_gpu);
  if (s.gpus_per_node == 0) {
    throw InputError(packing + " packs runs onto GPUs but [slurm] gpus_per_node is 0");
  }
  if (s.nodes > 1) {
    throw InputError(packing + " packs runs onto the GPUs of one node but " +
                     slurm_key("nodes", s.nodes) + ": use nodes = 1");
  }
}

// InputError unless the runs fit the requested nodes. On GPU nodes one rank
// drives one GPU: nodes x gpus_per_node ranks, each on the GPU of its
// node-local rank (comm/cuda_device.h), talking over NCCL.
void check_layout(const StudyPlan& plan, const SlurmSpec& s) {
  const std::string where = plan.source + ": ";
  const std::string ranks = "study.ranks = " + std::to_string(plan.ranks);
  const int64_t per_node = s.gpus_per_node > 0 ? s.gpus_per_node : s.ntasks_per_node;
  if (s.gpus_per_node > 0 && s.ntasks_per_node > 0 && s.ntasks_per_node != s.gpus_per_node) {
    throw InputError(where + slurm_key("ntasks_per_node", s.ntasks_per_node) + " differs from " +
                     slurm_key("gpus_per_node", s.gpus_per_node) +
                     ": one rank drives one GPU (leave ntasks_per_node at 0)");
  }
  if (per_node > 0 && plan.ranks != s.nodes * per_node) {
    throw InputError(where + ranks + " is not " + slurm_key("nodes", s.nodes) + " x " +
                     (s.gpus_per_node > 0 ? "gpus_per_node = " : "ntasks_per_node = ") +
                     std::to_string(per_node) + " (" + std::to_string(s.nodes * per_node) +
                     " ranks)");
  }
  if (per_node == 0 && plan.ranks < s.nodes) {
    throw InputError(where + ranks + " cannot fill " + slurm_key("nodes", s.nodes));
  }
  check_packing(plan, s);
  for (const auto& run : plan.runs) {
    const std::string variant = "variant '" + run.variant + "'";
    const bool cuda = run.cfg.train.device == TrainDevice::kCuda;
    if (s.gpus_per_node > 0 && !cuda) {
      throw InputError(where + variant + " trains on train.device = \"" +
                       choice_name(run.cfg.train.device) + "\" but " +
                       slurm_key("gpus_per_node", s.gpus_per_node) +
                       " asks for GPUs: set \"train.device\" = \"cuda\" in [study.set]");
    }
    if (s.gpus_per_node == 0 && cuda) {
      throw InputError(where + variant +
                       " trains on train.device = \"cuda\" but [slurm] gpus_per_node is 0: "
                       "the job would get no GPU");
    }
    if (cuda && run.cfg.parallel.backend == Backend::kMpi) {
      throw InputError(where + variant +
                       " sets parallel.backend = \"mpi\" on GPU nodes: the all-to-all and "
                       "gradient all-reduce must run over NCCL (\"auto\" or \"nccl\")");
    }
  }
}

// The resources of one training run: its ranks, threads per rank and GPUs.
std::vector<std::string> layout_options(const StudyPlan& plan, const SlurmSpec& s) {
  std::vector<std::string> opts = {"--nodes=" + std::to_string(s.nodes)};
  const int64_t per_node = s.gpus_per_node > 0 ? s.gpus_per_node : s.ntasks_per_node;
  if (per_node > 0) {
    opts.push_back("--ntasks-per-node=" + std::to_string(per_node));
  } else {
    opts.push_back("--ntasks=" + std::to_string(plan.ranks));
  }
  // Each rank's CPUs serve one rank of every run packed onto its GPU.
  const int64_t cpus = (s.cpus_per_task > 0 ? s.cpus_per_task : plan.threads) * plan.runs_per_gpu;
  opts.push_back("--cpus-per-task=" + std::to_string(cpus));
  if (s.gpus_per_node > 0) opts.push_back("--gpus-per-node=" + std::to_string(s.gpus_per_node));
  return opts;
}

// One array task per runs_per_gpu seeds.
int64_t array_tasks(const StudyPlan& plan) {
  const int64_t seeds = int64_t(plan.seeds.size());
  return (seeds + plan.runs_per_gpu - 1) / plan.runs_per_gpu;
}

// Runs `command`, returning its stdout; throws with the exit status otherwise.
std::string run_capturing(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  if (status != 0) {
    throw InputError("`" + command + "` failed (" +
                     (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                        : "status " + std::to_string(status)) +
                     "): " + out);
  }
  return out;
}

// The variants by stage (parents before their children), else in plan order.
std::vector<const PlannedVariant*> in_stage_order(const StudyPlan& plan) {
  std::vector<const PlannedVariant*> order;
  for (const auto& v : plan.variants) order.push_back(&v);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->stage < b->stage; });
  return order;
}

// The shell line that writes a run's converted start unless it is there ("" for
// a run without one).
std::string start_line(const PlannedRun& run, const std::string& binary) {
  const auto command = start_command(run, binary);
  if (command.empty()) return "";
  return "[[ -d " + shell_quote(run.cfg.train.init_from) + " ]] || " + shell_join(command);
}

}  // namespace

std::string render_template(const std::string& text,
                            const std::map<std::string, std::string>& values,
                            const std::string& source) {
  std::string out;
  std::set<std::string> used;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    const size_t close = text.find("}}", open);
    if (close == std::string::npos) {
      throw InputError(source + ": unterminated '{{' placeholder");
    }
    const std::string key = text.substr(open + 2, close - open - 2);
    const auto it = values.find(key);
    if (it == values.end()) {
      throw InputError(source + ": unknown placeholder {{" + key + "}}");
    }
    out += text.substr(pos, open - pos) + it->second;
    used.insert(key);
    pos = close + 2;
  }
  out += text.substr(pos);
  for (const auto& [key, value] : values) {
    if (!used.count(key)) {
      throw InputError(source + ": template lacks the placeholder {{" + key + "}}");
    }
  }
  return out;
}

std::string parse_sbatch_job_id(const std::string& output) {
  std::string id;
  for (char c : output) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      id += c;
    } else if (!id.empty() || !std::isspace(static_cast<unsigned char>(c))) {
      break;
    }
  }
  if (id.empty()) {
    throw InputError("sbatch --parsable printed no job id: '" + output + "'");
  }
  return id;
}

std::vector<SlurmJobScript> write_slurm_scripts(const StudyPlan& plan, const SlurmSpec& slurm,
                                                const std::string& template_dir,
                                                const std::string& binary) {
  const std::string variant_template = template_dir + "/study-variant.sbatch.in";
  const std::string report_template = template_dir + "/study-report.sbatch.in";
  const std::string variant_text = read_text_file(variant_template, "sbatch template");
  const std::string report_text = read_text_file(report_template, "sbatch template");
  check_layout(plan, slurm);
  const std::string slurm_dir = plan.out_root + "/slurm";
  std::vector<std::string> run_options = layout_options(plan, slurm);
  const auto placement = placement_options(slurm);
  run_options.insert(run_options.end(), placement.begin(), placement.end());
  // Slurm does not create the folder of --output; a job whose log cannot be
  // opened fails to launch.
  std::filesystem::create_directories(slurm_dir + "/logs");
  std::vector<SlurmJobScript> scripts;
  for (const PlannedVariant* variant : in_stage_order(plan)) {
    const PlannedVariant& v = *variant;
    std::string seeds, dirs, starts;
    for (const auto& r : plan.runs) {
      if (r.variant != v.name) continue;
      seeds += (seeds.empty() ? "" : " ") + std::to_string(r.seed);
      dirs += (dirs.empty() ? "" : " ") + shell_quote(r.dir);
      starts += (starts.empty() ? "" : " ") + shell_quote(start_line(r, binary));
    }
    const std::map<std::string, std::string> values = {
        {"JOB_NAME", plan.name + "-" + v.name},
        {"ARRAY", "0-" + std::to_string(array_tasks(plan) - 1)},
        {"RUNS_PER_TASK", std::to_string(plan.runs_per_gpu)},
        {"LOG_DIR", slurm_dir + "/logs"},
        {"VARIANT", v.name},
        {"SBATCH_OPTIONS", sbatch_lines(run_options)},
        {"SEEDS", seeds},
        {"RUN_DIRS", dirs},
        {"START_COMMANDS", starts},
        {"THREADS", std::to_string(plan.threads)},
        {"MOELAB", shell_quote(binary)},
        {"LAUNCHER", slurm.launcher}};
    SlurmJobScript script{v.name, slurm_dir + "/" + v.name + ".sbatch", v.parent};
    write_file_atomically(script.path, render_template(variant_text, values, variant_template));
    scripts.push_back(script);
  }
  const std::map<std::string, std::string> values = {{"JOB_NAME", plan.name + "-report"},
                                                     {"LOG_DIR", slurm_dir + "/logs"},
                                                     {"SBATCH_OPTIONS", sbatch_lines(placement)},
                                                     {"MOELAB", shell_quote(binary)},
                                                     {"OUT_ROOT", shell_quote(plan.out_root)}};
  SlurmJobScript report{"report", slurm_dir + "/report.sbatch", ""};
  write_file_atomically(report.path, render_template(report_text, values, report_template));
  scripts.push_back(report);
  return scripts;
}

std::vector<std::string> submit_slurm_scripts(const std::vector<SlurmJobScript>& scripts) {
  std::vector<std::string> ids;
  std::map<std::string, std::string> id_of;
  std::string dependency;
  for (size_t i = 0; i < scripts.size(); ++i) {
    const bool is_report = i + 1 == scripts.size();
    std::string command = "sbatch --parsable";
    if (is_report && !dependency.empty()) command += " --dependency=afterok" + dependency;
    if (!scripts[i].parent.empty())
      command += " --dependency=afterok:" + id_of.at(scripts[i].parent);
    command += " " + shell_quote(scripts[i].path);
    const std::string id = parse_sbatch_job_id(run_capturing(command));
    spdlog::info("submitted {} as job {}", scripts[i].path, id);
    ids.push_back(id);
    id_of[scripts[i].name] = id;
    dependency += ":" + id;
  }
  return ids;
}

}  // namespace moelab
