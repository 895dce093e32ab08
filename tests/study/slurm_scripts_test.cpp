// The sbatch scripts `moelab study submit` writes, checked as text and with
// `bash -n`, plus the template renderer and the sbatch id parser.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "study/slurm_scripts.h"
#include "study/study_plan.h"
#include "study/study_spec.h"
#include "study_test_util.h"
#include "util/error.h"

namespace moelab {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

TEST(RenderTemplate, ReplacesEveryPlaceholder) {
  EXPECT_EQ(render_template("a={{A}} b={{B}} a={{A}}", {{"A", "1"}, {"B", "two"}}, "t"),
            "a=1 b=two a=1");
}

TEST(RenderTemplate, UnknownOrUnusedPlaceholdersAreErrors) {
  EXPECT_THROW(render_template("{{A}} {{C}}", {{"A", "1"}}, "t"), InputError);
  EXPECT_THROW(render_template("{{A}}", {{"A", "1"}, {"B", "2"}}, "t"), InputError);
  EXPECT_THROW(render_template("{{A", {{"A", "1"}}, "t"), InputError);
}

TEST(SbatchJobId, ParsesParsableOutput) {
  EXPECT_EQ(parse_sbatch_job_id("1234\n"), "1234");
  EXPECT_EQ(parse_sbatch_job_id("77;cluster\n"), "77");
  EXPECT_THROW(parse_sbatch_job_id("sbatch: error: invalid partition\n"), InputError);
  EXPECT_THROW(parse_sbatch_job_id(""), InputError);
}

class SlurmScriptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir / "base.toml", testing::tiny_base_config("/data/tiny"));
    write_file(dir / "study.toml",
               testing::tiny_study(dir / "out", "[4, 7]", "ranks = 2\nthreads = 3\n") +
                   "[slurm]\npartition = \"cpu\"\ntime = \"00:10:00\"\nextra = [\"--qos=low\"]\n");
    spec = load_study(dir / "study.toml");
    plan = plan_study(spec);
    scripts = write_slurm_scripts(plan, spec.slurm, MOELAB_SOURCE_DIR "/slurm", "/opt/moelab");
  }
  TempDir dir;
  StudySpec spec;
  StudyPlan plan;
  std::vector<SlurmJobScript> scripts;
};

TEST_F(SlurmScriptsTest, OneArrayPerVariantThenTheReport) {
  ASSERT_EQ(scripts.size(), 4u);
  EXPECT_EQ(scripts[0].path, dir / "out/slurm/moe.sbatch");
  EXPECT_EQ(scripts[3].name, "report");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "out/slurm/logs"));  // sbatch needs it
  const std::string moe = read_file(scripts[0].path);
  for (const std::string& line : std::vector<std::string>{
           "#SBATCH --array=0-1", "#SBATCH --requeue", "#SBATCH --ntasks=2",
           "#SBATCH --cpus-per-task=3", "#SBATCH --partition=cpu", "#SBATCH --time=00:10:00",
           "#SBATCH --qos=low", "seeds=(4 7)", "export OMP_NUM_THREADS=3",
           "train=(/opt/moelab train \"$run_dir/config.toml\" --resume auto)", "case srun in",
           "run_dirs=(" + (dir / "out/moe/seed4") + " " + (dir / "out/moe/seed7") + ")"}) {
    EXPECT_NE(moe.find(line), std::string::npos) << line << "\n" << moe;
  }
  const std::string report = read_file(scripts[3].path);
  EXPECT_NE(report.find("/opt/moelab report " + (dir / "out")), std::string::npos) << report;
  EXPECT_NE(report.find("#SBATCH --partition=cpu"), std::string::npos) << report;
  EXPECT_EQ(report.find("--cpus-per-task"), std::string::npos) << report;
}

TEST_F(SlurmScriptsTest, ScriptsAreValidBash) {
  for (const auto& s : scripts) {
    EXPECT_EQ(std::system(("bash -n " + s.path).c_str()), 0) << s.path;
  }
  EXPECT_EQ(std::system("bash -n " MOELAB_SOURCE_DIR "/slurm/train.sbatch"), 0);
}

TEST_F(SlurmScriptsTest, ArrayTaskSkipsAFinishedRun) {
  // Run the array script by hand as task 1 with the run already DONE: it must
  // exit 0 without calling the launcher (which does not exist here).
  write_file(dir / "out/moe/seed7/DONE", "{}");
  const std::string command =
      "SLURM_ARRAY_TASK_ID=1 bash " + scripts[0].path + " > " + (dir / "task.out") + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << read_file(dir / "task.out");
  EXPECT_NE(read_file(dir / "task.out").find("seed7 is already done"), std::string::npos);
}

// GPU nodes: one rank per GPU, so the study's ranks are nodes x gpus_per_node.
class GpuSlurmScriptsTest : public ::testing::Test {
 protected:
  // Writes the study with `ranks`, `device`, the [slurm] table and `base_extra`
  // appended to the base config; returns the
  // moe script's text, or the InputError's message prefixed with "error: ".
  std::string moe_script(int ranks, const std::string& device, const std::string& slurm,
                         const std::string& base_extra = "", const std::string& seeds = "[0]",
                         const std::string& study_extra = "") {
    write_file(dir / "base.toml", testing::tiny_base_config("/data/tiny") + base_extra);
    std::string study = testing::tiny_study(
        dir / "out", seeds, "ranks = " + std::to_string(ranks) + "\n" + study_extra);
    study.replace(study.find("\"train.max_steps\" = 10"), 22,
                  "\"train.max_steps\" = 10\n\"train.device\" = \"" + device + "\"");
    write_file(dir / "study.toml", study + "[slurm]\n" + slurm);
    const StudySpec spec = load_study(dir / "study.toml");
    try {
      const auto scripts =
          write_slurm_scripts(plan_study(spec), spec.slurm, MOELAB_SOURCE_DIR "/slurm", "moelab");
      return read_file(scripts[0].path);
    } catch (const InputError& e) {
      return std::string("error: ") + e.what();
    }
  }
  TempDir dir;
};

TEST_F(GpuSlurmScriptsTest, OneRankPerGpuAcrossNodes) {
  const std::string script = moe_script(4, "cuda", "nodes = 2\ngpus_per_node = 2\n");
  for (const char* line :
       {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2", "#SBATCH --gpus-per-node=2"}) {
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
  }
  EXPECT_EQ(script.find("--ntasks="), std::string::npos) << script;
}

TEST_F(GpuSlurmScriptsTest, MismatchedLayoutsAreRefusedByName) {
  const std::vector<std::tuple<int, std::string, std::string, std::string>> cases = {
      {4, "cuda", "nodes = 2\ngpus_per_node = 4\n",
       "study.ranks = 4 is not [slurm] nodes = 2 x gpus_per_node = 4 (8 ranks)"},
      {4, "cuda", "gpus_per_node = 4\nntasks_per_node = 2\n",
       "[slurm] ntasks_per_node = 2 differs from [slurm] gpus_per_node = 4"},
      {4, "cpu", "gpus_per_node = 4\n", "train.device = \"cpu\" but [slurm] gpus_per_node = 4"},
      {4, "cuda", "", "train.device = \"cuda\" but [slurm] gpus_per_node is 0"},
      {4, "cpu", "nodes = 2\nntasks_per_node = 4\n",
       "study.ranks = 4 is not [slurm] nodes = 2 x ntasks_per_node = 4 (8 ranks)"},
  };
  for (const auto& [ranks, device, slurm, message] : cases) {
    const std::string out = moe_script(ranks, device, slurm);
    EXPECT_NE(out.find("error: "), std::string::npos) << slurm << out;
    EXPECT_NE(out.find(message), std::string::npos) << slurm << out;
  }
}

TEST_F(GpuSlurmScriptsTest, MpiBackendOnGpusIsRefused) {
  const std::string out =
      moe_script(2, "cuda", "gpus_per_node = 2\n", "\n[parallel]\nbackend = \"mpi\"\n");
  EXPECT_NE(out.find("parallel.backend = \"mpi\" on GPU nodes"), std::string::npos) << out;
}

TEST_F(GpuSlurmScriptsTest, PackingNeedsGpusOnOneNode) {
  const std::string packed = "runs_per_gpu = 2\n";
  EXPECT_NE(moe_script(2, "cpu", "", "", "[0]", packed)
                .find("study.runs_per_gpu = 2 packs runs onto GPUs but [slurm] gpus_per_node is 0"),
            std::string::npos);
  EXPECT_NE(moe_script(2, "cuda", "nodes = 2\ngpus_per_node = 1\n", "", "[0]", packed)
                .find("packs runs onto the GPUs of one node but [slurm] nodes = 2: use nodes = 1"),
            std::string::npos);
}

// Stand-ins for srun (a run that takes a second, then finishes, or exits with
// the status in its folder's EXIT file), scontrol and the MPS control daemon,
// each appending what it was asked to calls.log.
const char* kFakeSrun = R"sh(#!/bin/bash
run_dir=$(dirname "$4")
log=$(dirname "$(dirname "$(dirname "$run_dir")")")/calls.log
echo "start $(basename "$run_dir") overlap=${SLURM_OVERLAP:-} mps=${CUDA_MPS_PIPE_DIRECTORY:+on}" >> "$log"
sleep 1
echo "end $(basename "$run_dir")" >> "$log"
[[ -f $run_dir/EXIT ]] && exit "$(cat "$run_dir/EXIT")"
echo '{}' > "$run_dir/DONE"
)sh";
const char* kFakeScontrol = R"sh(#!/bin/bash
echo "scontrol $*" >> "$CALLS"
)sh";
const char* kFakeMps = R"sh(#!/bin/bash
if [[ ${1:-} == -d ]]; then echo "mps start" >> "$CALLS"; else echo "mps $(cat)" >> "$CALLS"; fi
)sh";

TEST_F(GpuSlurmScriptsTest, PackedRunsShareAnArrayTaskItsGpusAndMps) {
  const std::string script =
      moe_script(1, "cuda", "gpus_per_node = 1\n", "", "[0, 1, 2]", "runs_per_gpu = 2\n");
  for (const char* line : {"#SBATCH --array=0-1", "#SBATCH --cpus-per-task=2", "per_task=2"}) {
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
  }
  for (const auto& [name, text] :
       std::vector<std::pair<std::string, const char*>>{{"srun", kFakeSrun},
                                                        {"scontrol", kFakeScontrol},
                                                        {"nvidia-cuda-mps-control", kFakeMps}}) {
    write_file(dir / ("bin/" + name), text);
    chmod((dir / ("bin/" + name)).c_str(), 0755);
  }
  for (const char* seed : {"seed0", "seed2"}) {
    std::filesystem::create_directories(dir / ("out/moe/" + std::string(seed)));
  }
  write_file(dir / "out/moe/seed1/EXIT", "3");  // stopped with a checkpoint
  const std::string task =
      "cd " + dir.str() + " && PATH=" + (dir / "bin") + ":$PATH CALLS=" + (dir / "calls.log") +
      " SLURM_JOB_ID=7 SLURM_ARRAY_JOB_ID=7 TMPDIR=" + dir.str() + " SLURM_ARRAY_TASK_ID=";
  const std::string script_path = dir / "out/slurm/moe.sbatch";
  ASSERT_EQ(std::system((task + "0 bash " + script_path + " > task0.out 2>&1").c_str()), 0)
      << read_file(dir / "task0.out");
  EXPECT_NE(read_file(dir / "task0.out").find("2 runs per GPU under CUDA MPS"), std::string::npos);
  // Both runs started before either ended, as steps that may overlap, under MPS;
  // the one that stopped with a checkpoint requeues the task.
  std::vector<std::string> calls;
  std::istringstream log(read_file(dir / "calls.log"));
  for (std::string line; std::getline(log, line);) calls.push_back(line);
  ASSERT_EQ(calls.size(), 7u) << read_file(dir / "calls.log") << read_file(dir / "task0.out");
  const auto either_order = [](std::string a, std::string b) {
    return std::set<std::string>{std::move(a), std::move(b)};
  };
  EXPECT_EQ(calls[0], "mps start");
  EXPECT_EQ(either_order(calls[1], calls[2]),
            either_order("start seed0 overlap=1 mps=on", "start seed1 overlap=1 mps=on"));
  EXPECT_EQ(either_order(calls[3], calls[4]), either_order("end seed0", "end seed1"));
  EXPECT_EQ(calls[5], "mps quit");
  EXPECT_EQ(calls[6], "scontrol requeue 7_0");
  EXPECT_TRUE(std::filesystem::exists(dir / "out/moe/seed0/DONE"));

  std::filesystem::remove(dir / "calls.log");
  ASSERT_EQ(std::system((task + "1 bash " + script_path + " > task1.out 2>&1").c_str()), 0)
      << read_file(dir / "task1.out");
  EXPECT_NE(read_file(dir / "calls.log").find("start seed2"), std::string::npos);
  EXPECT_EQ(read_file(dir / "calls.log").find("seed0"), std::string::npos);
}

}  // namespace
}  // namespace moelab
