// `moelab analyze routing` on a tiny trained MoE: the same numbers at world 1
// and at two ranks with the experts split over them, and bad --set arguments
// refused naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/run_moelab.h"
#include "common/shared_data.h"
#include "hub/hf_test_util.h"

namespace {

namespace fs = std::filesystem;
using moelab::testing::moelab;
using moelab::testing::MoelabResult;

const fs::path kRoot = fs::temp_directory_path() / ("moelab_analyze_" + std::to_string(getpid()));

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Two datasets in one tokenizer and a tiny MoE (with capacity: some
// assignments are dropped) trained a few steps on the first.
class AnalyzeRouting : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(kRoot);
    const char* lines[] = {"the cat sat on the mat and looked at the moon.",
                           "a dog ran to the park to play with a red ball.",
                           "the bird sang a song in the tall green tree."};
    std::ofstream main_text(kRoot / "main.txt"), other_text(kRoot / "other.txt");
    for (int d = 0; d < 40; ++d) {
      main_text << lines[d % 3] << " " << lines[(d + 1) % 3] << "\n<|endoftext|>\n";
      other_text << lines[2] << " the end, " << d << ".\n<|endoftext|>\n";
    }
    main_text.close();
    other_text.close();
    const std::string root = kRoot.string();
    ASSERT_EQ(moelab("prep --input " + root + "/main.txt --val-count 8 --vocab-size 80 --out " +
                     root + "/main")
                  .code,
              0);
    ASSERT_EQ(moelab("prep --input " + root + "/other.txt --val-count 8 --tokenizer " + root +
                     "/main/tokenizer.model --out " + root + "/other")
                  .code,
              0);
    std::ofstream(kRoot / "tiny.toml")
        << "[model]\nvocab_size = 80\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
           "seq_len = 16\n[moe]\nenabled = true\nnum_experts = 4\ntop_k = 2\nd_expert = 32\n"
           "capacity_factor = 1.0\n[train]\nprecision = \"fp32\"\nbatch_seqs = 4\nthreads = 1\n"
           "max_steps = 3\n[optim]\nlr = 1e-2\nwarmup_steps = 1\n[eval]\ninterval = "
           "0\n[log]\nprogress = \"off\"\n"
           "[data]\ndir = \""
        << root << "/main\"\n";
    const MoelabResult train = moelab("train " + root + "/tiny.toml --out " + root + "/run");
    ASSERT_EQ(train.code, 0) << train.output;
  }
  static void TearDownTestSuite() { fs::remove_all(kRoot); }

  static std::string analyze(const std::string& out, const std::string& more = "") {
    const std::string root = kRoot.string();
    return "analyze routing " + root + "/run/checkpoints/step_00000003 --set main=" + root +
           "/main --set other=" + root + "/other --batches 2 --batch-seqs 2 --out " + root + "/" +
           out + " --no-plots " + more;
  }
};

// Four windows a set, two a pass: each rank's passes at world 2 hold the same
// windows as world 1's passes, so even capacity drops agree.
TEST_F(AnalyzeRouting, SameNumbersAtWorldOneAndAtTwoRanksWithExpertsSplit) {
  const MoelabResult one = moelab(analyze("one"));
  ASSERT_EQ(one.code, 0) << one.output;
  const MoelabResult two = moelab(moelab::testing::mpirun_prefix(2), analyze("two", "--ep 2"));
  ASSERT_EQ(two.code, 0) << two.output;
  const auto report_one = nlohmann::json::parse(read(kRoot / "one/routing.json"));
  const auto report_two = nlohmann::json::parse(read(kRoot / "two/routing.json"));
  ASSERT_EQ(report_one["layers"].size(), 2u);
  for (const auto& layer : report_one["layers"]) {
    for (const char* set : {"main", "other"}) {
      EXPECT_GT(layer["sets"][set]["assignments"].get<int64_t>(), 0) << set;
      EXPECT_LE(layer["sets"][set]["assignments"].get<int64_t>(), 4 * 16 * 2) << set;
    }
  }
  EXPECT_EQ(report_one["layers"], report_two["layers"]);
  EXPECT_EQ(report_one["mean_jsd"], report_two["mean_jsd"]);
  for (const char* csv : {"routing_experts.csv", "routing_sets.csv", "routing_jsd.csv"}) {
    EXPECT_EQ(read(kRoot / "one" / csv), read(kRoot / "two" / csv)) << csv;
  }
  EXPECT_NE(one.output.find("JSD(main, other) mean over MoE layers"), std::string::npos)
      << one.output;
}

// The token-level dump of the four windows counted, in the same passes: per
// set and layer, its kept experts (-1 dropped) tally to the report's counts.
TEST_F(AnalyzeRouting, TokenDumpTalliesToTheCountsOfTheSameWindows) {
  const MoelabResult r = moelab(analyze("dump", "--dump-windows 4"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto report = nlohmann::json::parse(read(kRoot / "dump/routing.json"));
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> tally;  // set, layer
  std::ifstream lines(kRoot / "dump/routing_tokens.jsonl");
  int windows = 0;
  for (std::string line; std::getline(lines, line); ++windows) {
    const auto row = nlohmann::json::parse(line);
    ASSERT_EQ(row["tokens"].size(), 16u);
    ASSERT_EQ(row["pieces"].size(), 16u);
    for (const auto& [layer, experts] : row["experts"].items()) {
      auto& counts = tally[row["set"]][layer];
      counts.resize(4);
      ASSERT_EQ(experts.size(), 16u);
      for (const auto& kept : experts) {
        ASSERT_EQ(kept.size(), 2u);
        for (const auto& e : kept) {
          if (e.get<int64_t>() >= 0) ++counts[e.get<int64_t>()];
        }
      }
    }
  }
  EXPECT_EQ(windows, 8);
  for (const auto& layer : report["layers"]) {
    for (const char* set : {"main", "other"}) {
      EXPECT_EQ(nlohmann::json(tally[set][std::to_string(layer["layer"].get<int64_t>())]),
                layer["sets"][set]["counts"])
          << set << " layer " << layer["layer"];
    }
  }
  const MoelabResult two =
      moelab(moelab::testing::mpirun_prefix(2), analyze("dump2", "--dump-windows 4"));
  EXPECT_EQ(two.code, 2) << two.output;
  EXPECT_NE(two.output.find("--dump-windows runs in one process"), std::string::npos) << two.output;
}

double jsd_of(const nlohmann::json& pairs) {
  EXPECT_EQ(pairs.size(), 1u);
  return pairs[0]["jsd"].get<double>();
}

// Over a study: every MoE run's newest checkpoint analysed as alone, the dense
// variant skipped, and per variant the mean and sample std over the seeds of
// each run's entropies and divergences.
TEST_F(AnalyzeRouting, OverAStudyEachMoeRunAndTheMeanAndStdOverItsSeeds) {
  const std::string root = kRoot.string();
  std::ofstream(kRoot / "study.toml")
      << "[study]\nname = \"route\"\nbase = \"tiny.toml\"\nseeds = [0, 1]\nout_root = \"" << root
      << "/study\"\n[[variant]]\nname = \"moe\"\n[[variant]]\nname = \"dense\"\n"
         "set = { \"moe.enabled\" = false }\n";
  const MoelabResult study = moelab("study run --no-plots " + root + "/study.toml");
  ASSERT_EQ(study.code, 0) << study.output;
  const MoelabResult r =
      moelab("analyze routing " + root + "/study --set main=" + root + "/main --set other=" + root +
             "/other --batches 2 --batch-seqs 2 " + "--out " + root + "/study_routing");
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path out = kRoot / "study_routing";
  EXPECT_FALSE(fs::exists(out / "dense"));
  const auto seed0 = nlohmann::json::parse(read(out / "moe/seed0/routing.json"));
  const auto seed1 = nlohmann::json::parse(read(out / "moe/seed1/routing.json"));
  EXPECT_EQ(seed1["checkpoint"], root + "/study/moe/seed1/checkpoints/step_00000003");
  const auto summary = nlohmann::json::parse(read(out / "routing_summary.json"));
  ASSERT_EQ(summary["variants"].size(), 1u);
  const auto& moe = summary["variants"][0];
  EXPECT_EQ(moe["variant"], "moe");
  EXPECT_EQ(moe["seeds"], nlohmann::json({0, 1}));
  const double a = jsd_of(seed0["mean_jsd"]), b = jsd_of(seed1["mean_jsd"]);
  ASSERT_NE(a, b) << "two seeds should route differently";
  EXPECT_DOUBLE_EQ(moe["mean_jsd"][0]["jsd"]["mean"].get<double>(), (a + b) / 2);
  EXPECT_DOUBLE_EQ(moe["mean_jsd"][0]["jsd"]["std"].get<double>(),
                   std::abs(a - b) / std::sqrt(2.0));
  for (size_t l = 0; l < 2; ++l) {
    const double e0 = seed0["layers"][l]["sets"]["other"]["entropy"].get<double>();
    const double e1 = seed1["layers"][l]["sets"]["other"]["entropy"].get<double>();
    const auto& entropy = moe["layers"][l]["entropy"]["other"];
    EXPECT_DOUBLE_EQ(entropy["mean"].get<double>(), (e0 + e1) / 2) << l;
    EXPECT_EQ(entropy["n"].get<int64_t>(), 2) << l;
    EXPECT_DOUBLE_EQ(moe["layers"][l]["jsd"][0]["jsd"]["mean"].get<double>(),
                     (jsd_of(seed0["layers"][l]["jsd"]) + jsd_of(seed1["layers"][l]["jsd"])) / 2);
  }
  EXPECT_NE(read(out / "routing_summary_jsd.csv").find("moe,mean,main,other,2,"),
            std::string::npos);
  EXPECT_NE(r.output.find("moe: JSD(main, other) mean over MoE layers "), std::string::npos)
      << r.output;
  EXPECT_TRUE((fs::exists(out / "routing_jsd_moe.png") &&
               fs::exists(out / "moe/seed1/routing_experts.png")) ||
              r.output.find("skipping the plots") != std::string::npos)
      << r.output;
}

// A published MoE's structure (Qwen3-30B-A3B's real config.json, shrunk by
// transformers with random weights) imported: no capacity, so every token's
// top-k assignments are kept and each layer counts windows x seq_len x top_k.
TEST_F(AnalyzeRouting, CountsEveryAssignmentOfAnImportedPublishedMoe) {
  ASSERT_TRUE(moelab::testing::transformers_available());
  const std::string root = kRoot.string();
  std::string config;
  ASSERT_NO_FATAL_FAILURE(
      moelab::testing::shared_data_file("configs/Qwen--Qwen3-30B-A3B/config.json", &config));
  ASSERT_NO_FATAL_FAILURE(
      moelab::testing::make_hf_model("qwen3_moe", "config=" + config, root + "/qwen3_moe"));
  MoelabResult r = moelab("import " + root + "/qwen3_moe --out " + root + "/imported");
  ASSERT_EQ(r.code, 0) << r.output;
  r = moelab("analyze routing " + root + "/imported/checkpoints/step_00000000 --set main=" + root +
             "/main --set other=" + root +
             "/other --batches 2 --batch-seqs 2 --seq-len 16 --no-plots --out " + root +
             "/imported_routing");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto report = nlohmann::json::parse(read(kRoot / "imported_routing/routing.json"));
  const auto hf = nlohmann::json::parse(read(kRoot / "qwen3_moe/config.json"));
  const int64_t top_k = hf["num_experts_per_tok"], seq_len = report["seq_len"];
  ASSERT_EQ(report["layers"].size(), hf["num_hidden_layers"].get<size_t>());
  // transformers 5 saves Qwen3-MoE's num_experts as num_local_experts.
  EXPECT_EQ(report["num_experts"], hf.value("num_local_experts", hf.value("num_experts", 0)));
  for (const auto& layer : report["layers"]) {
    for (const char* set : {"main", "other"}) {
      EXPECT_EQ(layer["sets"][set]["assignments"].get<int64_t>(), 4 * seq_len * top_k) << set;
    }
  }
}

TEST_F(AnalyzeRouting, BadSetExitsTwoNamingIt) {
  const std::string checkpoint = kRoot.string() + "/run/checkpoints/step_00000003";
  const std::pair<std::string, std::string> cases[] = {
      {"--set main", "--set 'main': expected NAME=DATASET"},
      {"--set main=", "--set 'main=': expected NAME=DATASET"},
      {"--set main=" + kRoot.string() + "/nowhere", "--set main=" + kRoot.string() + "/nowhere: "},
      {"--set a=" + kRoot.string() + "/main --set a=" + kRoot.string() + "/other",
       "the name a is given twice"},
      {"--set main=" + kRoot.string() + "/main --group g=main,other",
       "--group compares sets over a study's seeds: give a study folder"}};
  for (const auto& [sets, message] : cases) {
    const MoelabResult r =
        moelab("analyze routing " + checkpoint + " " + sets + " --out " + kRoot.string() + "/bad");
    EXPECT_EQ(r.code, 2) << sets << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << sets << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(kRoot / "bad"));
}

}  // namespace
