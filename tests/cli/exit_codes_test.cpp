// The binary's contract: 0 ok, 2 bad usage/config/input with a one-line error
// naming file:line:column and key, 1 internal failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/run_moelab.h"
#include "common/checkpoint_test_util.h"
#include "hub/hub.h"
#include "model/model_test_util.h"

namespace {

using moelab::testing::moelab;
using Result = moelab::testing::MoelabResult;

TEST(Cli, ShowsAResolvedConfig) {
  Result r = moelab("config show " + std::string(MOELAB_SOURCE_DIR) + "/configs/moe-small.toml");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("[moe]\nenabled = true\n"), std::string::npos) << r.output;
}

TEST(Cli, BadConfigExitsTwoNamingFileLineAndKey) {
  const std::string path = testing::TempDir() + "/bad.toml";
  std::ofstream(path) << "[model]\nd_model = -8\n";
  for (const char* sub : {"config show", "train", "params"}) {
    Result r = moelab(std::string(sub) + " " + path);
    EXPECT_EQ(r.code, 2) << sub;
    EXPECT_NE(r.output.find(path + ":2:11: model.d_model = -8: expected an integer >= 1"),
              std::string::npos)
        << sub << ": " << r.output;
  }
}

TEST(Cli, BadUsageExitsTwo) {
  EXPECT_EQ(moelab("").code, 2);
  EXPECT_EQ(moelab("no-such-command").code, 2);
  EXPECT_EQ(moelab("train").code, 2);  // missing CONFIG
  EXPECT_EQ(moelab("train --help").code, 0);
}

// A hostile safetensors header (a 4 EB tensor) ends `moelab import` with exit 2
// naming the file and tensor, before anything is allocated.
TEST(Cli, ImportOfAHostileSafetensorsHeaderExitsTwo) {
  const std::string dir = testing::TempDir() + "/hostile_import";
  std::filesystem::remove_all(dir);
  const moelab::Config cfg = moelab::testing::tiny_config(false);
  moelab::Transformer model(moelab::model_settings(cfg));
  moelab::export_hf(moelab::testing::save_model_checkpoint(dir, 1, model, cfg), dir + "/hf");
  const std::string header =
      R"({"model.norm.weight": {"dtype": "F32", "shape": [4611686018427387904, 8], )"
      R"("data_offsets": [0, 64]}})";
  std::string file(8, '\0');
  file[0] = char(header.size());
  std::ofstream(dir + "/hf/model.safetensors", std::ios::binary)
      << file << header << std::string(64, '\0');
  Result r = moelab("import " + dir + "/hf --out " + dir + "/imported");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(dir + "/hf/model.safetensors: tensor 'model.norm.weight': shape"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
}

// A tokenizer file moelab cannot encode exactly ends prep with exit 2, naming
// the file and what is unsupported or missing, before any shard is written.
TEST(Cli, PrepRefusesAnUnsupportedTokenizerByName) {
  const std::string dir = testing::TempDir() + "/tokenizer_refusal";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/corpus.txt") << "hello world\n";
  std::ofstream(dir + "/tokenizer.json") << R"({"model": {"type": "WordPiece", "vocab": {}}})";
  std::ofstream(dir + "/ranks.tiktoken") << "YQ== 0\n";
  const std::string prep = "prep --input " + dir + "/corpus.txt --out " + dir + "/out";
  Result r = moelab(prep + " --tokenizer " + dir + "/tokenizer.json");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(dir + "/tokenizer.json: model WordPiece is not supported"),
            std::string::npos)
      << r.output;
  r = moelab(prep + " --force --tokenizer " + dir + "/ranks.tiktoken --eos-token '<|endoftext|>'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(dir + "/ranks.tiktoken: a tiktoken file needs its split pattern"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/train"));
}

// A fresh folder `dir` with a corpus of three sentences, prepared into
// dir/v<vocab> for each vocabulary size given (a tokenizer trained on it).
void prep_tiny_datasets(const std::string& dir, const std::vector<std::string>& vocabs) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream corpus(dir + "/corpus.txt");
  const char* lines[] = {"the cat sat on the mat and looked at the moon.",
                         "a dog ran to the park to play with a red ball.",
                         "the bird sang a song in the tall green tree."};
  for (int d = 0; d < 40; ++d) corpus << lines[d % 3] << "\n<|endoftext|>\n";
  corpus.close();
  for (const auto& vocab : vocabs) {
    Result prep = moelab("prep --input " + dir + "/corpus.txt --val-count 4 --vocab-size " + vocab +
                         " --out " + dir + "/v" + vocab);
    ASSERT_EQ(prep.code, 0) << prep.output;
  }
}

// A one-step run of a tiny dense model of `vocab` ids (no [data] table).
std::string tiny_model_toml(int vocab) {
  return "[model]\nvocab_size = " + std::to_string(vocab) +
         "\nd_model = 16\nn_layers = 1\nn_heads = 2\nd_ff = 32\n"
         "seq_len = 8\n[train]\nbatch_seqs = 2\nmax_steps = 1\n[optim]\nwarmup_steps = 0\n";
}

// Two datasets prepared with different tokenizers: a mixture of them, or a
// validation set of the other one, exits 2 naming both folders' manifests
// before any training.
TEST(Cli, DatasetsOfDifferentTokenizersExitTwoNamingBothFolders) {
  const std::string dir = testing::TempDir() + "/two_tokenizers";
  ASSERT_NO_FATAL_FAILURE(prep_tiny_datasets(dir, {"70", "80"}));
  const std::string model = tiny_model_toml(70);
  const std::string a = dir + "/v70", b = dir + "/v80";
  std::ofstream(dir + "/mixture.toml") << model << "[[data.sources]]\ndir = \"" << a
                                       << "\"\n[[data.sources]]\ndir = \"" << b << "\"\n";
  std::ofstream(dir + "/sets.toml")
      << model << "[data]\ndir = \"" << a << "\"\n[[eval.sets]]\nname = \"a\"\ndir = \"" << a
      << "\"\n[[eval.sets]]\nname = \"b\"\ndir = \"" << b << "\"\n";
  for (const auto& [config, split] :
       std::vector<std::pair<std::string, std::string>>{{"mixture", "train"}, {"sets", "val"}}) {
    Result r = moelab("train " + dir + "/" + config + ".toml --out " + dir + "/run_" + config);
    EXPECT_EQ(r.code, 2) << config << ": " << r.output;
    EXPECT_NE(r.output.find(a + "/train/manifest.json and " + b + "/" + split +
                            "/manifest.json were encoded with different tokenizers"),
              std::string::npos)
        << config << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/run_" + config + "/metrics.jsonl")) << config;
  }
}

// The model must hold every id of its data; a larger vocabulary (a padded
// embedding, as Qwen2/3 and OLMoE ship theirs past their tokenizer's size) trains.
TEST(Cli, AModelVocabularyBelowTheDatasetsExitsTwoAndAPaddedOneTrains) {
  const std::string dir = testing::TempDir() + "/padded_vocab";
  ASSERT_NO_FATAL_FAILURE(prep_tiny_datasets(dir, {"70"}));
  for (const int vocab : {64, 96}) {
    const std::string config = dir + "/vocab" + std::to_string(vocab) + ".toml";
    std::ofstream(config) << tiny_model_toml(vocab) << "[data]\ndir = \"" << dir << "/v70\"\n";
    Result r = moelab("train " + config + " --out " + dir + "/run" + std::to_string(vocab));
    if (vocab < 70) {
      EXPECT_EQ(r.code, 2) << r.output;
      EXPECT_NE(r.output.find(dir + "/v70/train/manifest.json: dataset vocab_size 70 but "
                                    "model.vocab_size is 64"),
                std::string::npos)
          << r.output;
    } else {
      EXPECT_EQ(r.code, 0) << r.output;
      EXPECT_TRUE(std::filesystem::exists(dir + "/run96/DONE")) << r.output;
      EXPECT_NE(r.output.find("model.vocab_size 96 pads the dataset's 70 ids (26 rows no id "
                              "reaches)"),
                std::string::npos)
          << r.output;
    }
  }
}

// log.level applies to the run: "warn" leaves out the info lines a default run prints.
TEST(Cli, TheConfigsLogLevelSetsWhatARunPrints) {
  const std::string dir = testing::TempDir() + "/log_level";
  ASSERT_NO_FATAL_FAILURE(prep_tiny_datasets(dir, {"70"}));
  std::ofstream(dir + "/run.toml")
      << tiny_model_toml(70) << "[data]\ndir = \"" << dir << "/v70\"\n";
  for (const std::string level : {"info", "warn"}) {
    Result r = moelab("train " + dir + "/run.toml --set log.level=" + level + " --out " + dir +
                      "/run_" + level);
    ASSERT_EQ(r.code, 0) << r.output;
    const bool info_lines =
        r.output.rfind("info ", 0) == 0 || r.output.find("\ninfo ") != std::string::npos;
    EXPECT_EQ(info_lines, level == "info") << r.output;
  }
}

}  // namespace
