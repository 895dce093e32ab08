// `moelab analyze routing` on a tiny trained MoE: the same numbers at world 1
// and at two ranks with the experts split over them, and bad --set arguments
// refused naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/run_moelab.h"

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
           out + " " + more;
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

TEST_F(AnalyzeRouting, BadSetExitsTwoNamingIt) {
  const std::string checkpoint = kRoot.string() + "/run/checkpoints/step_00000003";
  const std::pair<std::string, std::string> cases[] = {
      {"--set main", "--set 'main': expected NAME=DATASET"},
      {"--set main=", "--set 'main=': expected NAME=DATASET"},
      {"--set main=" + kRoot.string() + "/nowhere", "--set main=" + kRoot.string() + "/nowhere: "},
      {"--set a=" + kRoot.string() + "/main --set a=" + kRoot.string() + "/other",
       "the name a is given twice"}};
  for (const auto& [sets, message] : cases) {
    const MoelabResult r =
        moelab("analyze routing " + checkpoint + " " + sets + " --out " + kRoot.string() + "/bad");
    EXPECT_EQ(r.code, 2) << sets << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << sets << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(kRoot / "bad"));
}

}  // namespace
