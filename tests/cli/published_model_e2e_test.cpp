// A published dense model made into an MoE, end to end through the binary:
// the real config.json of Qwen3-0.6B (and of Llama-3.2-1B), shrunk with every
// structural field kept and given random weights by transformers, saved with
// the model's real tokenizer.json; then `moelab import`, `moelab prep
// --tokenizer` of new text, `moelab convert --method dot` (Qwen3) or `moelab
// upcycle` (Llama) to an MoE, 10 steps at (world, ep) = (2, 2), and `moelab
// export` as Qwen3-MoE (Mixtral): transformers loads the export, AutoTokenizer
// gives prep's ids and the model moelab's logits. docs/convert.md walks the
// same commands.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/export_checks.h"
#include "cli/run_moelab.h"
#include "common/shared_data.h"
#include "common/temp_dir.h"
#include "config/load.h"
#include "data/data_test_util.h"
#include "hub/hf_test_util.h"
#include "util/atomic_file.h"

namespace moelab {
// Named, not anonymous: a unity build compiles this file in one translation
// unit with other tests of its folder, whose helpers share these names.
namespace published_model_e2e {

using testing::moelab;
using testing::MoelabResult;
using testing::TempDir;

constexpr int kValDocs = 8;
constexpr int64_t kSeqLen = 32;

struct PublishedModel {
  std::string name;
  std::string family;     // hf_make_model.py's
  std::string config;     // configs/<folder> under the shared data
  std::string tokenizer;  // tokenizers/<path> under the shared data
  std::string to_moe;     // the conversion command's arguments
  std::string exported_as;
};

// New text with what the published tokenizers treat apart: a decomposed
// accent (NFC composes it), CJK, digits, punctuation runs and spacing.
std::vector<std::string> documents(int first, int count) {
  std::vector<std::string> docs;
  for (int i = first; i < first + count; ++i) {
    docs.push_back("Cafe\xCC\x81 no. " + std::to_string(i * 37) + ": " + testing::make_document(i) +
                   " \xE4\xB8\xAD\xE6\x96\x87...  (" + testing::make_document(i + 5000) + "?!)");
  }
  return docs;
}

// The published structure with its own tokenizer, imported, and new text
// prepared with that tokenizer.
void import_and_prep(const PublishedModel& m, const TempDir& dir,
                     const std::vector<std::string>& val_texts) {
  std::string config;
  ASSERT_NO_FATAL_FAILURE(
      testing::shared_data_file("configs/" + m.config + "/config.json", &config));
  ASSERT_NO_FATAL_FAILURE(
      testing::decompress_shared_data("tokenizers/" + m.tokenizer, dir / "tokenizer.json"));
  ASSERT_NO_FATAL_FAILURE(testing::make_hf_model(
      m.family, "config=" + config + " tokenizer=" + (dir / "tokenizer.json"), dir / "hf"));
  MoelabResult r = moelab("import " + (dir / "hf") + " --out " + (dir / "imported"));
  ASSERT_EQ(r.code, 0) << r.output;
  testing::write_corpus(dir / "corpus.txt", documents(kValDocs, 200));
  testing::write_corpus(dir / "val.txt", val_texts);
  r = moelab("prep --input " + (dir / "corpus.txt") + " --val-input " + (dir / "val.txt") +
             " --tokenizer " + (dir / "hf/tokenizer.json") + " --out " + (dir / "data"));
  ASSERT_EQ(r.code, 0) << r.output;
}

// The import made an MoE on the new data (its context cut to kSeqLen), then
// 10 steps over 2 ranks holding one half of the experts each.
void convert_and_train(const PublishedModel& m, const TempDir& dir) {
  const std::string settings = " --set data.dir=" + (dir / "data") +
                               " --set model.seq_len=" + std::to_string(kSeqLen) +
                               " --set train.batch_seqs=8 --set train.precision=fp32";
  MoelabResult r = moelab(m.to_moe + " " + (dir / "imported/checkpoints/step_00000000") +
                          " --out " + (dir / "moe") + settings);
  ASSERT_EQ(r.code, 0) << r.output;
  r = moelab(testing::mpirun_prefix(2), "train " + (dir / "moe/config.toml") + " --out " +
                                            (dir / "run") +
                                            " --set parallel.ep=2 --set train.max_steps=10"
                                            " --set train.threads=1 --set optim.lr=1e-2"
                                            " --set optim.warmup_steps=0 --set eval.interval=0"
                                            " --set log.progress=off");
  ASSERT_EQ(r.code, 0) << r.output;
}

class PublishedModelE2E : public ::testing::TestWithParam<PublishedModel> {};

TEST_P(PublishedModelE2E, BecomesAnMoeThatTransformersReads) {
  ASSERT_TRUE(testing::transformers_available());
  const PublishedModel& m = GetParam();
  TempDir dir;
  const auto val_texts = documents(0, kValDocs);
  ASSERT_NO_FATAL_FAILURE(import_and_prep(m, dir, val_texts));
  ASSERT_NO_FATAL_FAILURE(convert_and_train(m, dir));
  const std::string trained = dir / "run/checkpoints/step_00000010";
  const MoelabResult r = moelab("export " + trained + " --format hf --out " + (dir / "export"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto exported = nlohmann::json::parse(read_text_file(dir / "export/config.json", "config"));
  EXPECT_EQ(exported["architectures"][0], m.exported_as);
  const Config cfg = load_config(dir / "moe/config.toml");
  testing::expect_transformers_reads_export(dir, kSeqLen, cfg.model.vocab_size, trained, val_texts);
}

INSTANTIATE_TEST_SUITE_P(
    Published, PublishedModelE2E,
    ::testing::Values(
        PublishedModel{"Qwen3_06B_Dot", "qwen3", "Qwen--Qwen3-0.6B", "qwen3/tokenizer.json.zst",
                       "convert --method dot --experts 4 --top-k 2 --calibration-steps 4",
                       "Qwen3MoeForCausalLM"},
        PublishedModel{"Llama32_1B_Upcycled", "llama", "unsloth--Llama-3.2-1B",
                       "llama3.1-8b-instruct/tokenizer.json.zst", "upcycle --experts 4 --top-k 2",
                       "MixtralForCausalLM"}),
    [](const ::testing::TestParamInfo<PublishedModel>& info) { return info.param.name; });

}  // namespace published_model_e2e
}  // namespace moelab
