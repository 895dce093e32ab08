// End-to-end runs of the real binary on a tiny corpus the test writes itself:
// overfitting, exact resume, and the same curve at every (world, ep) layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/tensor_file.h"
#include "train/job_control.h"

namespace {

namespace fs = std::filesystem;

const fs::path kRoot =
    fs::temp_directory_path() / ("moelab_trainer_e2e_" + std::to_string(getpid()));

int run(const std::string& cmd) {
  const std::string full = cmd + " > " + (kRoot / "last.log").string() + " 2>&1";
  return std::system(full.c_str());
}

std::string last_log() {
  std::ifstream in(kRoot / "last.log");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string mpirun(int ranks) {
  return "mpirun --oversubscribe --allow-run-as-root --mca btl self,vader -np " +
         std::to_string(ranks) + " ";
}

// A tiny dataset, prepared once for every test in this file.
class TrainerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(kRoot);
    std::ofstream corpus(kRoot / "corpus.txt");
    const char* lines[] = {"the cat sat on the mat and looked at the moon.",
                           "a dog ran to the park to play with a red ball.",
                           "the bird sang a song in the tall green tree."};
    for (int d = 0; d < 60; ++d) {
      corpus << lines[d % 3] << " " << lines[(d + 1) % 3] << "\n<|endoftext|>\n";
    }
    corpus.close();
    ASSERT_EQ(run(std::string(MOELAB_BINARY) + " prep --input " + (kRoot / "corpus.txt").string() +
                  " --val-count 6 --vocab-size 80 --out " + (kRoot / "data").string()),
              0);
    // A second dataset in the same tokenizer, of other text: a mixture's second source.
    std::ofstream other(kRoot / "other.txt");
    for (int d = 0; d < 30; ++d) {
      other << lines[(d + 2) % 3] << " " << lines[(d + 2) % 3] << " the end.\n<|endoftext|>\n";
    }
    other.close();
    ASSERT_EQ(run(std::string(MOELAB_BINARY) + " prep --input " + (kRoot / "other.txt").string() +
                  " --val-count 4 --tokenizer " + (kRoot / "data" / "tokenizer.model").string() +
                  " --out " + (kRoot / "other").string()),
              0);
    const std::string common =
        "[model]\nvocab_size = 80\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
        "seq_len = 16\n[moe]\nnum_experts = 4\ntop_k = 2\nd_expert = 32\n"
        "[train]\nprecision = \"fp32\"\nbatch_seqs = 8\nthreads = 1\n"
        "[optim]\nlr = 1e-2\nwarmup_steps = 2\n[eval]\nbatch_seqs = 4\n"
        "[log]\ninterval = 1\nprogress = \"off\"\n";
    const std::string data = (kRoot / "data").string(), other_data = (kRoot / "other").string();
    std::ofstream(kRoot / "tiny.toml")
        << common << "[data]\ndir = \"" << data << "\"\nprefetch = 2\n";
    // Sources 3:1 (two rows of every batch of 8 from "other"), both validation sets.
    std::ofstream(kRoot / "mix.toml")
        << common << "[data]\nprefetch = 2\n[[data.sources]]\ndir = \"" << data
        << "\"\nweight = 3\n[[data.sources]]\ndir = \"" << other_data
        << "\"\n[[eval.sets]]\nname = \"main\"\ndir = \"" << data
        << "\"\n[[eval.sets]]\nname = \"other\"\ndir = \"" << other_data << "\"\n";
  }
  static void TearDownTestSuite() { fs::remove_all(kRoot); }

  static std::string train(const std::string& out, const std::string& sets, int ranks = 1,
                           const std::string& config = "tiny.toml") {
    return train_command(MOELAB_BINARY, out, sets, ranks, config);
  }

  // The same run of moelab_test_hooks, with its `hooks` (e.g.
  // "--hook-nonfinite-step=3") set.
  static std::string hooked_train(const std::string& hooks, const std::string& out,
                                  const std::string& sets, int ranks = 1) {
    return train_command(std::string(MOELAB_TEST_HOOKS) + " " + hooks, out, sets, ranks,
                         "tiny.toml");
  }

  // A one-rank run on a CPU that "auto" sees as native bf16 whose matmuls run
  // `speedup` times its fp32 ones (a test hook): what "auto" measures is fixed,
  // not this machine's, and not moved by the load of tests running beside it.
  static std::string train_with_bf16_at(const std::string& speedup, const std::string& out,
                                        const std::string& sets) {
    return hooked_train("--hook-bf16-speedup=0:" + speedup, out, sets);
  }

 private:
  static std::string train_command(const std::string& binary, const std::string& out,
                                   const std::string& sets, int ranks, const std::string& config) {
    return (ranks > 1 ? mpirun(ranks) : std::string()) + binary + " train " +
           (kRoot / config).string() + " --out " + (kRoot / out).string() + " " + sets;
  }
};

std::vector<double> column(const fs::path& csv, int col) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string cell;
    for (int c = 0; c <= col; ++c) std::getline(ss, cell, ',');
    out.push_back(std::stod(cell));
  }
  return out;
}

// A metric of every metrics line: the loss, or another ("mtp_loss", "/mtp_ce/depth_1": a
// JSON pointer).
std::vector<double> train_losses(const fs::path& run_dir, const std::string& key = "loss") {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<double> out;
  std::string line;
  const nlohmann::json::json_pointer at(key[0] == '/' ? key : "/" + key);
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).at(at).get<double>());
  return out;
}

// That `run` (just resumed, its output in last.log) went on from its checkpoint
// at `step`: the log names it, and the metrics lines up to it are still those
// of `source`, the run it was copied from, not rewritten by a fresh start.
// With the curve continuing the uninterrupted one, its state at that step can
// only have come from the checkpoint.
void expect_resumed(const std::string& run, int64_t step, const std::string& source) {
  moelab::testing::expect_resumed_from(kRoot / run, last_log(), step,
                                       kRoot / source / "metrics.jsonl");
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], rel * std::abs(b[i])) << "at " << i;
}

// Expected losses, as llm.c and torchtitan keep them: the tiny MoE (fp32, one
// thread) for 30 steps. Today's code is deterministic, so a change of these
// numbers means a change of the numerics (a kernel's rounding, an init, the
// data order); a deliberate one regenerates the file in the same commit and
// says why: MOELAB_WRITE_GOLDEN=1 build/tests/test_train --gtest_filter=*Golden*.
// The tolerance covers kernels that round differently on other CPUs (the file
// records the CPU it came from), far below the drifts it exists to catch.
TEST_F(TrainerE2E, GoldenCurveOfTheTinyMoe) {
  ASSERT_EQ(run(train("golden",
                      "--set moe.enabled=true --set train.max_steps=30 "
                      "--set eval.interval=10")),
            0);
  const auto losses = train_losses(kRoot / "golden");
  const auto val = column(kRoot / "golden" / "val.csv", 2);
  const fs::path file = fs::path(MOELAB_SOURCE_DIR) / "tests/train/golden_tiny_moe.json";
  if (std::getenv("MOELAB_WRITE_GOLDEN")) {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, cpu;
    while (std::getline(cpuinfo, line) && cpu.empty())
      if (line.rfind("model name", 0) == 0) cpu = line.substr(line.find(':') + 2);
    std::ofstream(file) << nlohmann::json{{"cpu", cpu}, {"loss", losses}, {"val_loss", val}}.dump(1)
                        << "\n";
  }
  std::ifstream in(file);
  ASSERT_TRUE(in) << file << " is missing";
  const auto golden = nlohmann::json::parse(in);
  expect_close(losses, golden.at("loss").get<std::vector<double>>(), 1e-4);
  expect_close(val, golden.at("val_loss").get<std::vector<double>>(), 1e-4);
}

// A non-finite loss in a real run (forced at step 3 through the test entry
// point's hook, util/test_hooks.h): that update is skipped everywhere (parameters, AdamW's state,
// the aux-free routing bias stay as after step 2; the loader moves on as in a
// clean run), the step is logged as skipped, and the run goes on.
TEST_F(TrainerE2E, NonfiniteStepIsSkippedEverywhereAndTheRunGoesOn) {
  const std::string sets =
      "--set moe.enabled=true --set moe.balance=aux_free --set moe.aux_loss_coef=0 "
      "--set moe.bias_update_rate=0.05 --set train.max_steps=6 --set eval.interval=0 "
      "--set checkpoint.interval=1 --set checkpoint.keep=10";
  ASSERT_EQ(run(hooked_train("--hook-nonfinite-step=3", "nan", sets)), 0) << last_log();
  // The moelab binary has no hook: the variable its trainer once read does nothing.
  ASSERT_EQ(run("MOELAB_TEST_NONFINITE_STEP=3 " + train("clean", sets)), 0);
  std::ifstream in(kRoot / "nan" / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line);
    const int64_t step = r.at("step");
    EXPECT_EQ(r.at("skipped").get<bool>(), step == 3) << line;
    EXPECT_EQ(r.at("nonfinite_total").get<int64_t>(), step >= 3 ? 1 : 0) << line;
    if (step != 3) {
      EXPECT_TRUE(std::isfinite(r.at("loss").get<double>())) << line;
    }
  }
  EXPECT_TRUE(fs::exists(kRoot / "nan" / "DONE"));
  const auto ckpt = [](const std::string& run, const char* step) {
    return moelab::load_checkpoint((kRoot / run / "checkpoints" / step).string());
  };
  const auto before = ckpt("nan", "step_00000002"), after = ckpt("nan", "step_00000003");
  ASSERT_EQ(before.tensors.size(), after.tensors.size());
  int biases = 0;
  for (const auto& [name, t] : before.tensors) {
    EXPECT_TRUE(torch::equal(t, after.tensors.at(name))) << name << " changed at the skipped step";
    biases += name.find("bias") != std::string::npos;
  }
  EXPECT_GT(biases, 0);  // the routing biases are among them, and a normal step moves them
  const auto first = ckpt("nan", "step_00000001");
  bool moved = false;
  for (const auto& [name, t] : first.tensors)
    moved |= name.find("bias") != std::string::npos && !torch::equal(t, before.tensors.at(name));
  EXPECT_TRUE(moved);
  EXPECT_EQ(after.meta.at("loader_samples"),
            ckpt("clean", "step_00000003").meta.at("loader_samples"));
  EXPECT_NE(after.meta.at("loader_samples"), before.meta.at("loader_samples"));
  for (double loss : train_losses(kRoot / "clean")) EXPECT_TRUE(std::isfinite(loss));
}

// Evaluation inside a run leaves training alone: with the aux-free routing
// bias stepped hard, a run that validates after every step trains the same
// curve, and ends with the same biases, as one that validates only at the end.
TEST_F(TrainerE2E, EvaluationMovesNeitherTheRoutingBiasNorTheCurve) {
  const std::string sets =
      "--set moe.enabled=true --set moe.balance=aux_free --set moe.aux_loss_coef=0 "
      "--set moe.bias_update_rate=0.05 --set train.max_steps=6 ";
  ASSERT_EQ(run(train("eval_every", sets + "--set eval.interval=1")), 0);
  ASSERT_EQ(run(train("eval_end", sets + "--set eval.interval=0")), 0);
  EXPECT_EQ(train_losses(kRoot / "eval_every"), train_losses(kRoot / "eval_end"));
  EXPECT_EQ(column(kRoot / "eval_every" / "val.csv", 0).size(), 7u);  // steps 0..6
  const auto every =
      moelab::load_checkpoint((kRoot / "eval_every/checkpoints/step_00000006").string());
  const auto end = moelab::load_checkpoint((kRoot / "eval_end/checkpoints/step_00000006").string());
  int biases = 0, moved = 0;
  for (const auto& [name, t] : end.tensors) {
    if (name.find("bias") == std::string::npos) continue;
    EXPECT_TRUE(torch::equal(t, every.tensors.at(name))) << name;
    moved += !torch::equal(t, torch::zeros_like(t));
    ++biases;
  }
  EXPECT_GT(biases, 0);
  EXPECT_GT(moved, 0) << "no routing bias moved: the test would not see evaluation move one";
}

// Activation checkpointing recomputes, it does not change: over two ranks with
// the experts split (the all-to-all runs again in backward), an aux-free bias
// and an MTP module (its block recomputed under "full"), the curve, the router
// statistics and the bias equal a run without it.
TEST_F(TrainerE2E, ActivationCheckpointingTrainsTheSameRun) {
  const std::string sets =
      "--set moe.enabled=true --set moe.balance=aux_free --set moe.aux_loss_coef=0 "
      "--set moe.bias_update_rate=0.05 --set train.max_steps=6 --set parallel.ep=2 "
      "--set train.mtp_depth=1 ";
  ASSERT_EQ(run(train("ac_none", sets, 2)), 0) << last_log();
  const auto none = moelab::load_checkpoint((kRoot / "ac_none/checkpoints/step_00000006").string());
  const auto metrics = [](const fs::path& run_dir) {
    std::ifstream in(run_dir / "metrics.jsonl");
    std::vector<nlohmann::json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  };
  for (const char* mode : {"full", "moe"}) {
    SCOPED_TRACE(mode);
    const std::string name = std::string("ac_") + mode;
    ASSERT_EQ(run(train(name, sets + "--set train.activation_checkpointing='\"" + mode + "\"'", 2)),
              0)
        << last_log();
    const auto a = metrics(kRoot / "ac_none"), b = metrics(kRoot / name);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      for (const char* key : {"loss", "grad_norm", "z_loss", "mtp_loss"}) {
        EXPECT_NEAR(b[i][key].get<double>(), a[i][key].get<double>(),
                    1e-6 * std::abs(a[i][key].get<double>()))
            << key << " at step " << a[i]["step"];
      }
      // The statistics of the first pass, not of the recomputation.
      EXPECT_EQ(b[i]["moe"]["expert_load"], a[i]["moe"]["expert_load"]) << "step " << a[i]["step"];
    }
    const auto other =
        moelab::load_checkpoint((kRoot / name / "checkpoints/step_00000006").string());
    int biases = 0;
    for (const auto& [tensor, t] : none.tensors) {
      if (tensor.find("bias") == std::string::npos) continue;
      EXPECT_TRUE(torch::allclose(other.tensors.at(tensor), t, 1e-6, 1e-7)) << tensor;
      ++biases;
    }
    EXPECT_GT(biases, 0);
  }
}

// The "AdamW state: X MiB on rank 0" of a run's log.
double adamw_state_mib(const std::string& log) {
  const std::string key = "AdamW state: ";
  const size_t at = log.find(key);
  return at == std::string::npos ? NAN : std::stod(log.substr(at + key.size()));
}

// ZeRO-1 against unsharded AdamW at the same layouts: the same curve, and a
// checkpoint whose optimizer state is as full as an unsharded one's (moments
// by parameter name), so an unsharded checkpoint resumes sharded and back.
TEST_F(TrainerE2E, ShardedOptimizerTrainsTheUnshardedCurveAndSharesItsCheckpoints) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=8 --set eval.interval=0 "
      "--set checkpoint.interval=4 --set checkpoint.keep=5 ";
  const std::string sharded = "--set parallel.shard_optimizer=true ";
  for (const char* ep : {"1", "2"}) {
    SCOPED_TRACE(std::string("world 4, ep ") + ep);
    const std::string layout = sets + "--set parallel.ep=" + ep + " ";
    const std::string plain = std::string("zero_plain_ep") + ep;
    const std::string zero = std::string("zero_sharded_ep") + ep;
    ASSERT_EQ(run(train(plain, layout, 4)), 0) << last_log();
    const double plain_mib = adamw_state_mib(last_log());
    ASSERT_EQ(run(train(zero, layout + sharded, 4)), 0) << last_log();
    // Rank 0 steps a quarter of the replicated parameters and, at ep 2, half of its experts.
    EXPECT_LT(adamw_state_mib(last_log()), 0.5 * plain_mib) << last_log();
    expect_close(train_losses(kRoot / zero), train_losses(kRoot / plain), 1e-6);
    const auto a = moelab::load_checkpoint((kRoot / plain / "checkpoints/step_00000008").string());
    const auto b = moelab::load_checkpoint((kRoot / zero / "checkpoints/step_00000008").string());
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (const auto& [name, t] : a.tensors) {
      if (name.rfind("optim/", 0) != 0) continue;
      ASSERT_TRUE(b.tensors.count(name)) << name;
      EXPECT_TRUE(
          torch::allclose(b.tensors.at(name).to(torch::kDouble), t.to(torch::kDouble), 1e-5, 1e-9))
          << name;
    }
  }
  // Each step-4 checkpoint resumed by the other kind, at another layout.
  for (const auto& [from, sets_now, world] : std::vector<std::tuple<std::string, std::string, int>>{
           {"zero_plain_ep2", sets + sharded + "--set parallel.ep=4", 4},
           {"zero_sharded_ep2", sets + "--set parallel.ep=1", 2}}) {
    SCOPED_TRACE("resume of " + from);
    const std::string name = from + "_resumed";
    fs::copy(kRoot / from, kRoot / name, fs::copy_options::recursive);
    fs::remove_all(kRoot / name / "checkpoints" / "step_00000008");
    fs::remove(kRoot / name / "DONE");
    ASSERT_EQ(run(train(name, sets_now + " --resume auto", world)), 0) << last_log();
    expect_resumed(name, 4, from);
    expect_close(train_losses(kRoot / name), train_losses(kRoot / "zero_plain_ep2"), 1e-5);
  }
}

// The run records how "auto" resolved, as the log says it: a measured choice
// (its rates are the run's own, taken under whatever load the machine has, so
// not compared with this process's) gives fp32 exactly when its reason says
// bf16 fell short.
TEST_F(TrainerE2E, AutoPrecisionIsLoggedAndRecordedInRunJson) {
  ASSERT_EQ(run(train("auto",
                      "--set train.precision=auto --set train.max_steps=2 "
                      "--set train.threads=1")),
            0);
  std::ifstream in(kRoot / "auto" / "run.json");
  const auto record = nlohmann::json::parse(in);
  const std::string precision = record.at("precision");
  const std::string reason = record.at("precision_reason");
  ASSERT_EQ(reason.rfind("auto: ", 0), 0u) << reason;
  if (reason.find(" measured ") != std::string::npos) {
    EXPECT_EQ(precision == "fp32", reason.find("short of the") != std::string::npos) << reason;
    // Measured at the run's threads, not the process's default (2 here).
    EXPECT_NE(reason.find("GFLOP/s on 1 thread)"), std::string::npos) << reason;
  }
  EXPECT_NE(last_log().find("precision " + precision + " (" + reason + ")"), std::string::npos)
      << last_log();
}

// Whether the last run's log warns that it trains in bf16 for `reason` where a
// new run under "auto" would not.
bool warns_of_bf16_that_does_not_pay(const std::string& reason) {
  return last_log().find("training in bf16 (" + reason +
                         ") where a new run under \"auto\" would train in fp32 (auto: ") !=
         std::string::npos;
}

// A run resumed under "auto" trains on in the precision its checkpoint trained
// in, whatever "auto" measures now: an fp32 and a bf16 run each resumed under
// "auto" at step 2 on a CPU where "auto" measures the other precision faster
// (bf16 matmuls at 4x and at a quarter of fp32's), their curves those of the
// same run uninterrupted in its precision; the kept bf16 warns that a new run
// would train in fp32, the kept fp32 says nothing.
TEST_F(TrainerE2E, AutoKeepsTheResumedCheckpointsPrecision) {
  const std::string sets = "--set checkpoint.interval=2 --set eval.interval=0 ";
  for (const auto& [precision, bf16_speedup] :
       {std::pair<std::string, std::string>{"fp32", "4"}, {"bf16", "0.25"}}) {
    SCOPED_TRACE(precision);
    const std::string name = "keep_" + precision;
    ASSERT_EQ(run(train(name, sets + "--set train.max_steps=2 --set train.precision=" + precision)),
              0)
        << last_log();
    fs::remove(kRoot / name / "DONE");
    ASSERT_EQ(run(train_with_bf16_at(
                  bf16_speedup, name,
                  sets + "--set train.max_steps=4 --set train.precision=auto " + "--resume auto")),
              0)
        << last_log();
    expect_resumed(name, 2, name);
    EXPECT_EQ(warns_of_bf16_that_does_not_pay("auto: as the checkpoint resumed from trained"),
              precision == "bf16")
        << last_log();
    std::ifstream in(kRoot / name / "run.json");
    const auto record = nlohmann::json::parse(in);
    EXPECT_EQ(record.at("precision"), precision);
    EXPECT_EQ(record.at("precision_reason"), "auto: as the checkpoint resumed from trained");
    const std::string straight = "straight_" + precision;
    ASSERT_EQ(
        run(train(straight, sets + "--set train.max_steps=4 --set train.precision=" + precision)),
        0)
        << last_log();
    expect_close(train_losses(kRoot / name), train_losses(kRoot / straight), 1e-6);
  }
}

// An explicit "bf16" is obeyed, with a warning exactly where "auto" would train
// in fp32 (bf16 matmuls that do not pay): on a CPU whose bf16 runs at a quarter
// of fp32's, and not on one where it runs at 4x.
TEST_F(TrainerE2E, ExplicitBf16WarnsWhereAutoWouldTrainInFp32) {
  for (const auto& [bf16_speedup, warns] : {std::pair{"0.25", true}, {"4", false}}) {
    SCOPED_TRACE(bf16_speedup);
    fs::remove_all(kRoot / "bf16");
    ASSERT_EQ(run(train_with_bf16_at(bf16_speedup, "bf16",
                                     "--set train.precision=bf16 --set train.max_steps=2")),
              0)
        << last_log();
    std::ifstream in(kRoot / "bf16" / "run.json");
    EXPECT_EQ(nlohmann::json::parse(in).at("precision"), "bf16");
    EXPECT_EQ(warns_of_bf16_that_does_not_pay("train.precision = \"bf16\""), warns) << last_log();
  }
}

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(std::ifstream(path));
}

// Every rank trains in rank 0's precision under "auto": the two ranks (test
// hooks) measure as CPUs whose bf16 matmuls run at 4x and at a quarter of their
// fp32's, one way round and then the other, so rank 1's own measurement always
// gives the other precision (and a model resolving "auto" for itself, on this
// machine's CPU, does in one of the two runs); each two-rank run's curve is
// that of both ranks in rank 0's.
TEST_F(TrainerE2E, EveryRankTrainsInRankZerosAutoPrecision) {
  const std::string sets = "--set train.max_steps=3 --set eval.interval=0 ";
  for (const auto& [rank0, rank1, agreed] :
       {std::tuple{"4", "0.25", "bf16"}, std::tuple{"0.25", "4", "fp32"}}) {
    SCOPED_TRACE(agreed);
    const std::string hooks =
        std::string("--hook-bf16-speedup=0:") + rank0 + " --hook-bf16-speedup=1:" + rank1;
    fs::remove_all(kRoot / "agreed");
    ASSERT_EQ(run(hooked_train(hooks, "agreed", sets + "--set train.precision=auto", 2)), 0)
        << last_log();
    EXPECT_EQ(read_json(kRoot / "agreed" / "run.json").at("precision"), agreed);
    const std::string explicit_run = std::string("agreed_") + agreed;
    ASSERT_EQ(run(train(explicit_run, sets + "--set train.precision=" + agreed, 2)), 0)
        << last_log();
    expect_close(train_losses(kRoot / "agreed"), train_losses(kRoot / explicit_run), 1e-6);
  }
}

// train.expert_gemm = "auto": the path is measured, logged, recorded in run.json
// and the checkpoint, and a resume runs the path its checkpoint records (here
// one other than the measured, written into it) without measuring again.
TEST_F(TrainerE2E, TheExpertsGemmPathIsMeasuredRecordedAndKeptOnResume) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=4 --set eval.interval=0 "
      "--set checkpoint.interval=2 --set checkpoint.keep=5";
  ASSERT_EQ(run(train("gemm", sets)), 0) << last_log();
  const auto record = read_json(kRoot / "gemm" / "run.json");
  const std::string measured = record.at("expert_gemm");
  EXPECT_EQ(record.at("expert_gemm_reason").get<std::string>().rfind("measured on rank 0", 0), 0u)
      << record.dump();
  EXPECT_NE(last_log().find("experts' GEMMs: " + measured), std::string::npos) << last_log();
  const fs::path meta = kRoot / "gemm" / "checkpoints" / "step_00000002" / "meta.json";
  EXPECT_EQ(read_json(meta).at("expert_gemm"), measured);

  fs::copy(kRoot / "gemm", kRoot / "gemm_kept", fs::copy_options::recursive);
  fs::remove_all(kRoot / "gemm_kept" / "checkpoints" / "step_00000004");
  fs::remove(kRoot / "gemm_kept" / "DONE");
  const fs::path kept_meta = kRoot / "gemm_kept" / "checkpoints" / "step_00000002" / "meta.json";
  auto j = read_json(kept_meta);
  const std::string other = measured == "per_expert" ? "padded" : "per_expert";
  j["expert_gemm"] = other;
  std::ofstream(kept_meta) << j.dump();
  ASSERT_EQ(run(train("gemm_kept", sets + " --resume auto")), 0) << last_log();
  expect_resumed("gemm_kept", 2, "gemm");
  const auto kept = read_json(kRoot / "gemm_kept" / "run.json");
  EXPECT_EQ(kept.at("expert_gemm"), other);
  EXPECT_EQ(kept.at("expert_gemm_reason"), "as the checkpoint resumed from ran");
  expect_close(train_losses(kRoot / "gemm_kept"), train_losses(kRoot / "gemm"), 1e-5);
}

// A checkpoint whose meta.json records a path or precision no run writes
// (hand-edited, or from a newer moelab) is refused by file and key, not taken
// as unrecorded and measured anew.
TEST_F(TrainerE2E, AResumedChoiceThatMetaJsonCannotHoldIsRefusedByKey) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=2 --set eval.interval=0 "
      "--set checkpoint.interval=2";
  ASSERT_EQ(run(train("bad_choice", sets)), 0) << last_log();
  fs::remove(kRoot / "bad_choice" / "DONE");
  const fs::path meta = kRoot / "bad_choice" / "checkpoints" / "step_00000002" / "meta.json";
  const auto written = read_json(meta);
  for (const auto& [key, value] : {std::pair{"expert_gemm", "fastest"}, {"precision", "auto"}}) {
    auto j = written;
    j[key] = value;
    std::ofstream(meta) << j.dump();
    EXPECT_EQ(
        WEXITSTATUS(run(train("bad_choice", sets + " --set train.max_steps=4 --resume auto"))), 2)
        << last_log();
    EXPECT_NE(last_log().find("meta.json: " + std::string(key) + " = \"" + value +
                              "\"; expected one of \""),
              std::string::npos)
        << last_log();
  }
}

TEST_F(TrainerE2E, AForcedExpertsGemmPathThatCannotRunIsRefusedByName) {
  ASSERT_EQ(WEXITSTATUS(run(train("gemm_refused",
                                  "--set moe.enabled=true --set moe.d_expert=24 "
                                  "--set train.max_steps=2 --set train.expert_gemm=grouped"))),
            2);
  EXPECT_NE(last_log().find("train.expert_gemm = \"grouped\" cannot run"), std::string::npos)
      << last_log();
  EXPECT_NE(last_log().find("4 experts of width 24"), std::string::npos) << last_log();
}

TEST_F(TrainerE2E, RepeatedTextOverfits) {
  ASSERT_EQ(run(train("overfit", "--set train.max_steps=50 --set eval.interval=25")), 0);
  auto losses = train_losses(kRoot / "overfit");
  ASSERT_EQ(losses.size(), 50u);
  EXPECT_GT(losses.front(), 4.0);  // ~ln(80) at initialisation
  EXPECT_LT(losses.back(), 1.5);   // three sentences, memorised
  EXPECT_TRUE(fs::exists(kRoot / "overfit" / "DONE"));
  auto val = column(kRoot / "overfit" / "val.csv", 2);
  EXPECT_EQ(val.size(), 3u);  // steps 0, 25, 50
}

TEST_F(TrainerE2E, ResumeContinuesTheUninterruptedCurve) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=12 --set eval.interval=3 "
      "--set checkpoint.interval=6 --set checkpoint.keep=5";
  ASSERT_EQ(run(train("full", sets)), 0);
  // Interrupted after step 6: the folder as a crash would leave it.
  fs::copy(kRoot / "full", kRoot / "resumed", fs::copy_options::recursive);
  fs::remove_all(kRoot / "resumed" / "checkpoints" / "step_00000012");
  fs::remove(kRoot / "resumed" / "DONE");
  ASSERT_EQ(run(train("resumed", sets + " --resume auto")), 0);
  // A run that ignored its checkpoint would give the same curve: it must have
  // started from step 6.
  expect_resumed("resumed", 6, "full");
  EXPECT_EQ(train_losses(kRoot / "resumed"), train_losses(kRoot / "full"));
  EXPECT_EQ(column(kRoot / "resumed" / "val.csv", 2), column(kRoot / "full" / "val.csv", 2));
}

// Multi-token prediction in a run: each depth's cross-entropy is logged beside
// the weighted MTP loss, the modules are in the checkpoint and a resume
// continues every curve bit for bit; validation stays the next-token loss: at
// step 0 (the model's weights are drawn by name, the modules' apart) the MTP
// run's val_loss is the plain run's, and the MTP loss moves the model.
TEST_F(TrainerE2E, MtpLogsEachDepthResumesExactlyAndValidatesTheNextTokenOnly) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=8 --set eval.interval=4 "
      "--set checkpoint.interval=4 --set checkpoint.keep=5 ";
  const std::string mtp = "--set train.mtp_depth=2 --set train.mtp_loss_weight=0.3 ";
  ASSERT_EQ(run(train("mtp_full", sets + mtp)), 0) << last_log();
  ASSERT_EQ(run(train("mtp_off", sets)), 0) << last_log();
  const std::vector<std::string> curves = {"loss", "mtp_loss", "/mtp_ce/depth_1",
                                           "/mtp_ce/depth_2"};
  const auto weighted = train_losses(kRoot / "mtp_full", "mtp_loss");
  const auto depth_1 = train_losses(kRoot / "mtp_full", curves[2]);
  const auto depth_2 = train_losses(kRoot / "mtp_full", curves[3]);
  ASSERT_EQ(weighted.size(), 8u);
  for (size_t i = 0; i < weighted.size(); ++i) {
    EXPECT_GT(depth_1[i], 0.0);
    EXPECT_NEAR(weighted[i], 0.3 / 2 * (depth_1[i] + depth_2[i]), 1e-6 * weighted[i])  // fp32
        << "step " << i + 1;
  }
  // TensorBoard holds them as the log does (mtp_loss, mtp_ce/depth_<k>).
  EXPECT_EQ(run(std::string(MOELAB_TORCH_PYTHON) + " " + MOELAB_SOURCE_DIR +
                "/tests/train/check_tensorboard.py " + (kRoot / "mtp_full").string()),
            0)
      << last_log();
  std::ifstream plain_metrics(kRoot / "mtp_off" / "metrics.jsonl");
  std::string first;
  std::getline(plain_metrics, first);
  EXPECT_FALSE(nlohmann::json::parse(first).contains("mtp_loss")) << first;
  const auto val = column(kRoot / "mtp_full" / "val.csv", 2);
  EXPECT_EQ(val.front(), column(kRoot / "mtp_off" / "val.csv", 2).front());
  EXPECT_NE(train_losses(kRoot / "mtp_full")[1], train_losses(kRoot / "mtp_off")[1]);

  const auto ckpt =
      moelab::load_checkpoint((kRoot / "mtp_full/checkpoints/step_00000004").string());
  int deepest = 0;
  for (const auto& [name, t] : ckpt.tensors) deepest += name.rfind("mtp.1.", 0) == 0;
  EXPECT_GT(deepest, 0) << "the second MTP module is not in the checkpoint";

  fs::copy(kRoot / "mtp_full", kRoot / "mtp_resumed", fs::copy_options::recursive);
  fs::remove_all(kRoot / "mtp_resumed" / "checkpoints" / "step_00000008");
  fs::remove(kRoot / "mtp_resumed" / "DONE");
  ASSERT_EQ(run(train("mtp_resumed", sets + mtp + "--resume auto")), 0) << last_log();
  expect_resumed("mtp_resumed", 4, "mtp_full");
  for (const auto& key : curves) {
    EXPECT_EQ(train_losses(kRoot / "mtp_resumed", key), train_losses(kRoot / "mtp_full", key))
        << key;
  }
  EXPECT_EQ(column(kRoot / "mtp_resumed" / "val.csv", 2), val);
}

// train.init_from a model trained without MTP (or imported, upcycled): its
// weights load, the MTP modules start fresh, and the run starts where the
// model ended (its step-0 validation loss).
TEST_F(TrainerE2E, AnMtpRunStartsFromAModelTrainedWithout) {
  const std::string sets = "--set train.max_steps=4 --set eval.interval=4 ";
  ASSERT_EQ(run(train("no_mtp", sets)), 0) << last_log();
  const auto init = kRoot / "no_mtp" / "checkpoints" / "step_00000004";
  ASSERT_EQ(
      run(train("mtp_from_no_mtp", sets + "--set train.mtp_depth=1 --set train.init_from='\"" +
                                       init.string() + "\"'")),
      0)
      << last_log();
  EXPECT_EQ(column(kRoot / "mtp_from_no_mtp" / "val.csv", 2).front(),
            column(kRoot / "no_mtp" / "val.csv", 2).back());
}

// A checkpoint of whole tensors, one file per kind, as moelab wrote them before
// every rank wrote its own parts (and as upcycle and convert write weights):
// a run's checkpoint rewritten in that form resumes at another layout and
// continues the curve.
TEST_F(TrainerE2E, ACheckpointOfWholeTensorsResumesAtAnyLayout) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=8 --set eval.interval=0 "
      "--set checkpoint.interval=4 --set checkpoint.keep=5 ";
  ASSERT_EQ(run(train("whole_src", sets + "--set parallel.ep=2", 2)), 0) << last_log();
  fs::copy(kRoot / "whole_src", kRoot / "whole", fs::copy_options::recursive);
  fs::remove_all(kRoot / "whole" / "checkpoints" / "step_00000008");
  fs::remove(kRoot / "whole" / "DONE");
  const std::string run_dir = (kRoot / "whole").string();
  const moelab::LoadedCheckpoint saved =
      moelab::load_checkpoint(moelab::checkpoint_dir(run_dir, 4));
  std::map<std::string, torch::Tensor> replicated, experts;
  for (const auto& [name, t] : saved.tensors) {
    (name.find(".moe.experts.") != std::string::npos ? experts : replicated)[name] = t;
  }
  nlohmann::json meta = saved.meta;
  for (const char* key : {"tensors", "files", "format", "step"}) meta.erase(key);
  fs::remove_all(moelab::checkpoint_dir(run_dir, 4));
  moelab::prepare_checkpoint_tmp_dir(run_dir, 4);
  moelab::write_tensor_file(moelab::checkpoint_tmp_dir(run_dir, 4) + "/replicated.h5", replicated);
  moelab::write_tensor_file(moelab::checkpoint_tmp_dir(run_dir, 4) + "/experts_0.h5", experts);
  moelab::finalize_checkpoint(run_dir, 4, meta, 0);
  ASSERT_EQ(run(train("whole", sets + "--set parallel.ep=4 --resume auto", 4)), 0) << last_log();
  expect_resumed("whole", 4, "whole_src");
  expect_close(train_losses(kRoot / "whole"), train_losses(kRoot / "whole_src"), 1e-5);
}

// checkpoint.async: each rank copies its parts to host memory and a thread
// writes them while training goes on (rank 1's writes slowed by the test hook,
// so steps run during them): the checkpoints hold what a synchronous run's
// hold, bitwise, with ZeRO-1 slices and experts split over the ranks.
TEST_F(TrainerE2E, AsyncCheckpointsHoldWhatSyncOnesHold) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=8 --set eval.interval=0 "
      "--set checkpoint.interval=2 --set checkpoint.keep=10 --set parallel.ep=2 "
      "--set parallel.shard_optimizer=true";
  ASSERT_EQ(run(train("sync", sets, 2)), 0) << last_log();
  ASSERT_EQ(run(hooked_train("--hook-slow-checkpoint=1:1.5", "async",
                             sets + " --set checkpoint.async=true", 2)),
            0)
      << last_log();
  EXPECT_NE(last_log().find("written in the background"), std::string::npos) << last_log();
  EXPECT_EQ(train_losses(kRoot / "async"), train_losses(kRoot / "sync"));
  for (const char* step : {"step_00000002", "step_00000004", "step_00000006", "step_00000008"}) {
    const auto a = moelab::load_checkpoint((kRoot / "sync" / "checkpoints" / step).string());
    const auto b = moelab::load_checkpoint((kRoot / "async" / "checkpoints" / step).string());
    ASSERT_EQ(a.tensors.size(), b.tensors.size()) << step;
    for (const auto& [name, t] : a.tensors) {
      ASSERT_TRUE(b.tensors.count(name)) << step << " " << name;
      // Rank 0's CPU generator differs between any two runs: measuring the
      // matmul peak for MFU draws from it a number of times that depends on timing.
      if (name.rfind("rng/", 0) == 0) continue;
      EXPECT_TRUE(torch::equal(t, b.tensors.at(name))) << step << " " << name;
    }
  }
}

// A checkpoint written before training mixtures records the loader as an epoch
// and position, not a sample count: it resumes from its token count (a data
// budget of three batches makes step 5 lie in the loader's second epoch).
TEST_F(TrainerE2E, ACheckpointFromBeforeMixturesResumesWhereItStopped) {
  const std::string sets =
      "--set moe.enabled=true --set train.max_steps=8 --set eval.interval=0 "
      "--set checkpoint.interval=5 --set checkpoint.keep=5 --set data.max_unique_tokens=408";
  ASSERT_EQ(run(train("before_mixtures", sets)), 0);
  fs::copy(kRoot / "before_mixtures", kRoot / "old_meta", fs::copy_options::recursive);
  fs::remove_all(kRoot / "old_meta" / "checkpoints" / "step_00000008");
  fs::remove(kRoot / "old_meta" / "DONE");
  const fs::path meta = kRoot / "old_meta" / "checkpoints" / "step_00000005" / "meta.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(meta));
  ASSERT_TRUE(j.contains("loader_samples"));
  j.erase("loader_samples");
  j["loader_epoch"] = 1;
  j["loader_position"] = 16;
  std::ofstream(meta) << j.dump();
  ASSERT_EQ(run(train("old_meta", sets + " --resume auto")), 0) << last_log();
  expect_resumed("old_meta", 5, "before_mixtures");
  EXPECT_EQ(train_losses(kRoot / "old_meta"), train_losses(kRoot / "before_mixtures"));
}

// The WSD workflow: a run's stable-phase checkpoint resumed with a larger
// max_steps stays at the peak learning rate and decays at its new end.
TEST_F(TrainerE2E, WsdRunBranchesIntoALongerRunFromItsStablePhase) {
  const std::string sets =
      "--set optim.schedule=wsd --set optim.decay_fraction=0.5 --set checkpoint.interval=5 "
      "--set checkpoint.keep=10 --set eval.interval=0 ";
  ASSERT_EQ(run(train("wsd20", sets + "--set train.max_steps=20")), 0);
  fs::copy(kRoot / "wsd20", kRoot / "wsd40", fs::copy_options::recursive);
  for (const char* step : {"10", "15", "20"})
    fs::remove_all(kRoot / "wsd40" / "checkpoints" / ("step_000000" + std::string(step)));
  fs::remove(kRoot / "wsd40" / "DONE");
  ASSERT_EQ(run(train("wsd40", sets + "--set train.max_steps=40 --resume auto")), 0);
  expect_resumed("wsd40", 5, "wsd20");
  std::vector<double> short_lr, long_lr;
  for (const auto& [run_name, lrs] : {std::pair{"wsd20", &short_lr}, {"wsd40", &long_lr}}) {
    std::ifstream in(kRoot / run_name / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) lrs->push_back(nlohmann::json::parse(line)["lr"]);
  }
  ASSERT_EQ(short_lr.size(), 20u);
  ASSERT_EQ(long_lr.size(), 40u);
  EXPECT_LT(short_lr[19], 2e-3);  // the short run decayed over its last 10 steps
  for (int step = 3; step <= 20; ++step) EXPECT_EQ(long_lr[step - 1], 1e-2) << "step " << step;
  EXPECT_LT(long_lr[29], 1e-2);
  EXPECT_DOUBLE_EQ(long_lr[39], 1e-3);  // the floor: lr * min_lr_ratio
}

// The MoE settings under test: a name (for the run folders) and --set flags.
struct MoeVariant {
  std::string name;
  std::string sets;
  std::string config = "tiny.toml";
  int val_columns = 1;  // val.csv loss columns compared: val_loss and each named set's
  std::vector<std::string> curves = {"loss"};  // metrics compared (train_losses' keys)
};

class LayoutInvariance : public TrainerE2E, public ::testing::WithParamInterface<MoeVariant> {};

TEST_P(LayoutInvariance, SameCurveAtEveryLayoutAndAcrossResumes) {
  // Checkpoints written by every rank, in the background.
  const std::string sets = GetParam().sets +
                           " --set moe.enabled=true --set train.max_steps=8 --set eval.interval=2 "
                           "--set checkpoint.interval=4 --set checkpoint.keep=5 "
                           "--set checkpoint.async=true";
  const std::string prefix = GetParam().name + "_";
  const std::string& config = GetParam().config;
  // val_loss, then each named set's column (best_val_loss between them).
  std::vector<int> val_columns = {2};
  for (int c = 1; c < GetParam().val_columns; ++c) val_columns.push_back(3 + c);
  ASSERT_EQ(run(train(prefix + "w1", sets, 1, config)), 0);
  const auto expect_same_curves = [&](const std::string& name) {
    for (const auto& key : GetParam().curves) {
      SCOPED_TRACE(key);
      expect_close(train_losses(kRoot / name, key), train_losses(kRoot / (prefix + "w1"), key),
                   1e-5);
    }
  };
  for (auto [world, ep] : std::vector<std::pair<int, int>>{{2, 1}, {2, 2}, {4, 2}, {4, 4}}) {
    SCOPED_TRACE("world " + std::to_string(world) + " ep " + std::to_string(ep));
    const std::string name = prefix + "w" + std::to_string(world) + "ep" + std::to_string(ep);
    ASSERT_EQ(run(train(name, sets + " --set parallel.ep=" + std::to_string(ep), world, config)),
              0);
    expect_same_curves(name);
    for (int c : val_columns) {
      expect_close(column(kRoot / name / "val.csv", c),
                   column(kRoot / (prefix + "w1") / "val.csv", c), 1e-5);
    }
  }
  // Saved at (2, 2) after step 4, resumed at (4, 4) and at (1, 1).
  for (auto [world, ep] : std::vector<std::pair<int, int>>{{4, 4}, {1, 1}}) {
    SCOPED_TRACE("resume at world " + std::to_string(world));
    const std::string name = prefix + "resume" + std::to_string(world);
    fs::copy(kRoot / (prefix + "w2ep2"), kRoot / name, fs::copy_options::recursive);
    fs::remove_all(kRoot / name / "checkpoints" / "step_00000008");
    fs::remove(kRoot / name / "DONE");
    ASSERT_EQ(run(train(name, sets + " --resume auto --set parallel.ep=" + std::to_string(ep),
                        world, config)),
              0);
    expect_resumed(name, 4, prefix + "w2ep2");
    expect_same_curves(name);
  }
}

// Switch loss (4 experts, top-2); fine-grained experts; the aux-free routing
// bias, stepped hard enough to change the routing within 8 steps, so a resume
// that lost it (it lives in the checkpoint) would leave the curve; and experts
// of different widths, placed by width; and a data budget of three batches,
// reused epoch after epoch.
INSTANTIATE_TEST_SUITE_P(
    Moe, LayoutInvariance,
    ::testing::Values(MoeVariant{"switch", ""},
                      MoeVariant{"fine",
                                 "--set moe.num_experts=16 --set moe.top_k=4 "
                                 "--set moe.d_expert=8"},
                      MoeVariant{"aux_free",
                                 "--set moe.balance=aux_free "
                                 "--set moe.bias_update_rate=0.05"},
                      // At ep 2 the ranks hold experts {0, 2} and {1, 3}.
                      MoeVariant{"hetero", "--set 'moe.expert_widths=[48,32,16,32]'"},
                      // 3 batches an epoch: the checkpoint at step 4 lies past an epoch
                      // boundary.
                      MoeVariant{"data_budget", "--set data.max_unique_tokens=408"},
                      // The model options of the Qwen3 and DeepSeek-V3 families, together.
                      MoeVariant{"qk_norm_sigmoid",
                                 "--set model.qk_norm='\"head\"' --set moe.score='\"sigmoid\"' "
                                 "--set moe.route_scale=2.5 --set moe.balance=aux_free "
                                 "--set moe.bias_update_rate=0.05"},
                      // DeepSeek-V3's group-limited routing: 8 experts in 4 groups of
                      // consecutive ids, top-2 among the best 2 groups, picked on the
                      // biased sigmoid scores; at ep 4 each rank holds one group.
                      MoeVariant{"groups",
                                 "--set moe.num_experts=8 --set moe.d_expert=16 "
                                 "--set moe.n_groups=4 --set moe.topk_groups=2 "
                                 "--set moe.score='\"sigmoid\"' --set moe.balance=aux_free "
                                 "--set moe.bias_update_rate=0.05"},
                      // A mixed stack: layer 0 dense, layer 1 MoE (experts still by global id).
                      MoeVariant{"first_dense", "--set moe.first_dense_layers=1"},
                      // Two sources 3:1 and two validation sets: the samples of each
                      // global batch depend on its index alone.
                      MoeVariant{"mixture", "", "mix.toml", 3},
                      // ZeRO-1 (the world-1 reference is unsharded): sharded checkpoints
                      // saved at (2, 2) resume at (4, 4) and (1, 1).
                      MoeVariant{"zero1", "--set parallel.shard_optimizer=true"},
                      // Two multi-token prediction modules (replicated, dense blocks) on
                      // the MoE: their losses too are the same at every layout.
                      MoeVariant{"mtp",
                                 "--set train.mtp_depth=2 --set train.mtp_loss_weight=0.5",
                                 "tiny.toml",
                                 1,
                                 {"loss", "mtp_loss", "/mtp_ce/depth_1", "/mtp_ce/depth_2"}},
                      // The options of published Qwen2-MoE, Qwen3-MoE and Llama 3.1
                      // checkpoints together: 2 heads of 24 on d_model 32 with q/k/v
                      // biases, a gated shared expert, YaRN-scaled RoPE.
                      MoeVariant{"qwen_options",
                                 "--set model.head_dim=24 --set model.qkv_bias=true "
                                 "--set moe.num_shared_experts=1 "
                                 "--set moe.shared_expert_gate=true "
                                 "--set model.rope_scaling.type=yarn "
                                 "--set model.rope_scaling.factor=4 "
                                 "--set model.rope_scaling.original_seq_len=8"},
                      // DeepSeek-V3's latent attention: a low-rank query, 2 heads of
                      // 8 + 4 query/key and 12 value dims from a latent of 16, and
                      // YaRN's mscale_all_dim in the softmax scale.
                      MoeVariant{"mla",
                                 "--set model.attention=mla --set model.q_lora_rank=12 "
                                 "--set model.kv_lora_rank=16 --set model.qk_nope_head_dim=8 "
                                 "--set model.qk_rope_head_dim=4 --set model.v_head_dim=12 "
                                 "--set model.rope_scaling.type=yarn "
                                 "--set model.rope_scaling.factor=4 "
                                 "--set model.rope_scaling.original_seq_len=8 "
                                 "--set model.rope_scaling.mscale=1 "
                                 "--set model.rope_scaling.mscale_all_dim=1"}),
    [](const ::testing::TestParamInfo<MoeVariant>& info) { return info.param.name; });

// Every MoE layer's moe.ranks_per_token of every metrics line.
std::vector<double> ranks_per_token(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<double> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line);
    for (double r : record["moe"]["ranks_per_token"]) out.push_back(r);
  }
  return out;
}

// DeepSeek's device limit: at ep 4 each rank holds one group of 2 experts, so
// with 2 groups picked a token's rows reach at most 2 of the 4 ranks; plain
// top-4 of the same experts reaches more.
TEST_F(TrainerE2E, GroupLimitedRoutingBoundsTheRanksATokenReaches) {
  const std::string sets =
      "--set moe.enabled=true --set moe.num_experts=8 --set moe.top_k=4 --set moe.d_expert=16 "
      "--set moe.n_groups=4 --set parallel.ep=4 --set train.max_steps=2 --set eval.interval=0 ";
  ASSERT_EQ(run(train("ranks_grouped", sets + "--set moe.topk_groups=2", 4)), 0) << last_log();
  ASSERT_EQ(run(train("ranks_plain", sets + "--set moe.topk_groups=4", 4)), 0) << last_log();
  const auto grouped = ranks_per_token(kRoot / "ranks_grouped");
  const auto plain = ranks_per_token(kRoot / "ranks_plain");
  ASSERT_EQ(grouped.size(), 4u);  // 2 steps x 2 MoE layers
  ASSERT_EQ(plain.size(), 4u);
  for (double r : grouped) EXPECT_TRUE(r > 1.0 && r <= 2.0) << r;
  for (double r : plain) EXPECT_GT(r, 2.0);
}

TEST_F(TrainerE2E, DataBudgetRepeatsEpochsAndLogsThem) {
  // 408 tokens = 24 windows of 17 = 3 global batches of 8 sequences an epoch.
  ASSERT_EQ(run(train("budget",
                      "--set train.max_steps=8 --set eval.interval=0 "
                      "--set data.max_unique_tokens=408")),
            0);
  std::ifstream in(kRoot / "budget" / "metrics.jsonl");
  std::string line;
  std::vector<int64_t> epochs;
  while (std::getline(in, line)) epochs.push_back(nlohmann::json::parse(line)["epoch"]);
  // After step s the loader is in epoch s / 3.
  EXPECT_EQ(epochs, (std::vector<int64_t>{0, 0, 1, 1, 1, 2, 2, 2}));
}

// What the last `moelab eval` printed: "... loss L over N tokens".
double eval_loss(const fs::path& checkpoint) {
  EXPECT_EQ(run(std::string(MOELAB_BINARY) + " eval " + checkpoint.string()), 0);
  std::ifstream in(kRoot / "last.log");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t at = text.rfind(": loss ");
  return at == std::string::npos ? NAN : std::stod(text.substr(at + 7));
}

// `moelab eval` of an MTP run's checkpoint loads the modules with the model and
// gives the run's own validation loss, the next-token loss.
TEST_F(TrainerE2E, MoelabEvalOfAnMtpCheckpointIsItsNextTokenLoss) {
  ASSERT_EQ(run(train("mtp_eval",
                      "--set train.max_steps=2 --set eval.interval=2 "
                      "--set train.mtp_depth=2")),
            0)
      << last_log();
  const double val = column(kRoot / "mtp_eval" / "val.csv", 2).back();
  EXPECT_NEAR(eval_loss(kRoot / "mtp_eval" / "checkpoints" / "step_00000002"), val, 1e-5 * val);
}

// RoPE scaling is in no tensor, only in the config the checkpoint embeds. A
// resume with it continues the run's own curve (which plain RoPE leaves); a
// resume without it is refused, naming the key; `moelab eval` rebuilds it.
TEST_F(TrainerE2E, RopeScalingIsKeptOnResume) {
  const std::string sets =
      "--set train.max_steps=6 --set eval.interval=3 --set checkpoint.interval=3 "
      "--set model.rope_theta=100 ";
  const std::string llama3 =
      "--set model.rope_scaling.type=llama3 --set model.rope_scaling.factor=8 "
      "--set model.rope_scaling.original_seq_len=8 ";
  ASSERT_EQ(run(train("rope_llama3", sets + llama3)), 0) << last_log();
  ASSERT_EQ(run(train("rope_plain", sets)), 0) << last_log();
  const auto scaled = train_losses(kRoot / "rope_llama3");
  const auto plain = train_losses(kRoot / "rope_plain");
  // Plain RoPE leaves the curve by more than ten times the resume's tolerance.
  double apart = 0;
  for (size_t i = 0; i < scaled.size(); ++i) {
    apart = std::max(apart, std::abs(plain[i] - scaled[i]) / scaled[i]);
  }
  EXPECT_GT(apart, 1e-4);

  for (const char* name : {"rope_resumed", "rope_dropped"}) {
    fs::copy(kRoot / "rope_llama3", kRoot / name, fs::copy_options::recursive);
    fs::remove_all(kRoot / name / "checkpoints" / "step_00000006");
    fs::remove(kRoot / name / "DONE");
  }
  ASSERT_EQ(run(train("rope_resumed", sets + llama3 + "--resume auto")), 0) << last_log();
  EXPECT_NE(last_log().find("step_00000003 (step 3)"), std::string::npos) << last_log();
  expect_close(train_losses(kRoot / "rope_resumed"), scaled, 1e-5);

  EXPECT_EQ(WEXITSTATUS(run(train("rope_dropped", sets + "--resume auto"))), 2);
  EXPECT_NE(last_log().find("model.rope_scaling.type = \"none\", but "), std::string::npos)
      << last_log();
  EXPECT_NE(last_log().find("step_00000003 was saved with \"llama3\""), std::string::npos)
      << last_log();

  const double val = column(kRoot / "rope_llama3" / "val.csv", 2).back();
  EXPECT_NEAR(eval_loss(kRoot / "rope_llama3" / "checkpoints" / "step_00000006"), val, 1e-5 * val);
}

// The realised mixture: with weights 3:1 every batch of 8 holds 6 sequences of
// "data" and 2 of "other" (the schedule repeats every 4 samples), so the
// cumulative per-source counts in metrics.jsonl are exact; each validation set
// has its own val.csv column after the four every reader knows.
TEST_F(TrainerE2E, MixtureLogsTokensPerSourceAndALossPerValidationSet) {
  ASSERT_EQ(run(train("mix", "--set train.max_steps=6 --set eval.interval=3", 1, "mix.toml")), 0)
      << last_log();
  std::ifstream in(kRoot / "mix" / "metrics.jsonl");
  std::string line;
  int64_t steps = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line);
    const int64_t step = r.at("step");
    EXPECT_EQ(r.at("data").at("tokens").at("data"), step * 6 * 16) << line;
    EXPECT_EQ(r.at("data").at("tokens").at("other"), step * 2 * 16) << line;
    ++steps;
  }
  EXPECT_EQ(steps, 6);
  std::ifstream val(kRoot / "mix" / "val.csv");
  std::getline(val, line);
  EXPECT_EQ(line, "step,tokens,val_loss,best_val_loss,val_loss/main,val_loss/other");
  const auto first = column(kRoot / "mix" / "val.csv", 2);
  EXPECT_EQ(first.size(), 3u);                             // steps 0, 3, 6
  EXPECT_EQ(column(kRoot / "mix" / "val.csv", 4), first);  // val_loss is the first set's
  const auto other = column(kRoot / "mix" / "val.csv", 5);
  for (size_t i = 0; i < other.size(); ++i) EXPECT_NE(other[i], first[i]);
  // best_val_loss is the first set's.
  EXPECT_EQ(column(kRoot / "mix" / "val.csv", 3).back(),
            *std::min_element(first.begin(), first.end()));
  // TensorBoard holds each set's curve (and the per-source counts) as the logs do.
  EXPECT_EQ(run(std::string(MOELAB_TORCH_PYTHON) + " " + MOELAB_SOURCE_DIR +
                "/tests/train/check_tensorboard.py " + (kRoot / "mix").string()),
            0)
      << last_log();
  // `moelab eval` of the run's checkpoint evaluates its first set.
  EXPECT_NEAR(eval_loss(kRoot / "mix" / "checkpoints" / "step_00000006"), first.back(),
              1e-5 * first.back());
}

TEST_F(TrainerE2E, UpcycledAndConvertedRunsStartFromTheDenseModel) {
  const std::string bin = MOELAB_BINARY;
  ASSERT_EQ(run(train("dense_src", "--set train.max_steps=6 --set checkpoint.interval=6")), 0);
  const fs::path dense = kRoot / "dense_src/checkpoints/step_00000006";
  const double dense_loss = eval_loss(dense);
  // Identical experts under topk_softmax, and a split with every expert active
  // and a zero router: the dense model's validation loss.
  ASSERT_EQ(run(bin + " upcycle " + dense.string() + " --experts 4 --top-k 2 --out " +
                (kRoot / "up").string()),
            0);
  EXPECT_NEAR(eval_loss(kRoot / "up/checkpoints/step_00000000"), dense_loss, 1e-5 * dense_loss);
  ASSERT_EQ(run(bin + " convert " + dense.string() +
                " --method cluster --experts 4 --top-k 4 --router-init-std 0 --out " +
                (kRoot / "conv").string()),
            0);
  EXPECT_NEAR(eval_loss(kRoot / "conv/checkpoints/step_00000000"), dense_loss, 1e-5 * dense_loss);

  // Training from the upcycled weights (its config names them in train.init_from):
  // the same curve with the experts over 2 ranks, starting well below a fresh MoE.
  const std::string up = bin + " train " + (kRoot / "up/config.toml").string() +
                         " --set train.max_steps=4 --set eval.interval=0 ";
  ASSERT_EQ(run(up), 0);
  const auto losses = train_losses(kRoot / "up/run");
  ASSERT_EQ(run(mpirun(2) + up + "--set parallel.ep=2 --out " + (kRoot / "up_ep2").string()), 0);
  expect_close(train_losses(kRoot / "up_ep2"), losses, 1e-5);
  ASSERT_EQ(run(train("fresh_moe", "--set moe.enabled=true --set train.max_steps=4")), 0);
  EXPECT_LT(losses.front(), train_losses(kRoot / "fresh_moe").front() - 0.3);

  // The weights are no run to resume.
  EXPECT_EQ(WEXITSTATUS(run(up + "--out " + (kRoot / "x").string() + " --resume " +
                            (kRoot / "up/checkpoints/step_00000000").string())),
            2);
  std::ifstream in(kRoot / "last.log");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("start a run from it with train.init_from"), std::string::npos) << text;
}

TEST_F(TrainerE2E, ConfigErrorOnEveryRankExitsTwoBeforeAnyCollective) {
  EXPECT_EQ(WEXITSTATUS(run(train("bad", "--set moe.enabled=true --set parallel.ep=3", 2))), 2);
}

}  // namespace
