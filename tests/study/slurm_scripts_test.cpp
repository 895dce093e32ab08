// The sbatch scripts `moelab study submit` writes, checked as text and with
// `bash -n`, plus the template renderer and the sbatch id parser.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

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

}  // namespace
}  // namespace moelab
