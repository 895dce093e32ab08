#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/data_sets.h"
#include "config/load.h"
#include "config/schema.h"
#include "config/warnings.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

// The InputError message parse_config gives for `text`, or "" if it parses.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {},
                     int world = 0) {
  try {
    parse_config(text, "bad.toml", overrides, world);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAreValidAndRoundTrip) {
  Config cfg;
  EXPECT_NO_THROW(validate(cfg, 1));
  Config back = parse_config(to_toml(cfg), "dump.toml");
  EXPECT_EQ(to_toml(back), to_toml(cfg));
}

TEST(Config, MixtureAndValidationSetsReadRoundTripAndResolve) {
  const Config cfg = parse_config(
      "[[data.sources]]\ndir = \"corpora/web/\"\nweight = 3\n"
      "[[data.sources]]\nname = \"code\"\ndir = \"corpora/py\"\nmax_unique_tokens = 1000\n"
      "[[eval.sets]]\nname = \"web\"\ndir = \"corpora/web\"\n"
      "[[eval.sets]]\nname = \"code\"\ndir = \"corpora/py\"\nsplit = \"test\"\n",
      "mix.toml");
  ASSERT_EQ(cfg.data.sources.size(), 2u);
  EXPECT_DOUBLE_EQ(cfg.data.sources[0].weight, 3.0);
  EXPECT_DOUBLE_EQ(cfg.data.sources[1].weight, 1.0);  // the default
  EXPECT_EQ(cfg.data.sources[1].max_unique_tokens, 1000);
  EXPECT_EQ(cfg.origin.at("data.sources[1].name"), "mix.toml:5:1");
  const auto sources = training_sources(cfg);
  EXPECT_EQ(sources[0].name, "web");  // the last component of its dir
  EXPECT_EQ(sources[1].name, "code");
  ASSERT_EQ(cfg.eval.sets.size(), 2u);
  EXPECT_EQ(cfg.eval.sets[0].split, "val");
  EXPECT_EQ(cfg.eval.sets[1].split, "test");
  const Config back = parse_config(to_toml(cfg), "dump.toml");
  EXPECT_EQ(to_toml(back), to_toml(cfg));
  EXPECT_EQ(back.data.sources[1].dir, "corpora/py");
  // An entry's key can be overridden like any other, with the same checks.
  const Config reweighted = parse_config(to_toml(cfg), "dump.toml",
                                         {"data.sources[1].weight=2", "eval.sets[0].split=test"});
  EXPECT_DOUBLE_EQ(reweighted.data.sources[1].weight, 2.0);
  EXPECT_EQ(reweighted.eval.sets[0].split, "test");
  EXPECT_EQ(
      error_of(to_toml(cfg), {"data.sources[1].weight=0"}),
      "--set data.sources[1].weight=0: data.sources[1].weight = 0.0: expected a number > 0.0");
  EXPECT_NE(error_of(to_toml(cfg), {"data.sources[2].weight=1"}).find("unknown key"),
            std::string::npos);
}

// A whole list can be overridden (a study's child stage adds a language to its
// parent's mixture): the new entries only, each key checked, nothing kept from
// the entries it replaces.
TEST(Config, AListOverrideReplacesEveryEntry) {
  const std::string mix =
      "[[data.sources]]\nname = \"web\"\ndir = \"corpora/web\"\nweight = 3\n"
      "[[data.sources]]\ndir = \"corpora/py\"\nmax_unique_tokens = 1000\n";
  const Config cfg =
      parse_config(mix, "mix.toml",
                   {"data.sources=[{dir = \"corpora/ru\"}, {name = \"web\", dir = \"corpora/web\", "
                    "weight = 2}, {dir = \"corpora/zh\"}]"});
  ASSERT_EQ(cfg.data.sources.size(), 3u);
  EXPECT_EQ(cfg.data.sources[0].dir, "corpora/ru");
  EXPECT_DOUBLE_EQ(cfg.data.sources[0].weight, 1.0);    // not the replaced entry's 3
  EXPECT_EQ(cfg.data.sources[1].max_unique_tokens, 0);  // nor its 1000
  EXPECT_EQ(cfg.origin.count("data.sources[1].max_unique_tokens"), 0u);
  EXPECT_EQ(training_sources(cfg)[0].name, "ru");
  EXPECT_DOUBLE_EQ(cfg.data.sources[1].weight, 2.0);
  EXPECT_EQ(error_of(mix, {"data.sources=[{dir = \"a\", weigth = 2}]"}),
            "--set data.sources=[{dir = \"a\", weigth = 2}]:1:27: unknown key "
            "'data.sources[0].weigth'; did you mean 'data.sources[0].weight'?");
  EXPECT_NE(error_of(mix, {"data.sources=[1, 2]"}).find("expected one or more [[data.sources]]"),
            std::string::npos);
  EXPECT_NE(error_of(mix, {"data.sources=[{dir"}).find("expected a TOML array of inline tables"),
            std::string::npos);
}

// Top-1 routing with gates normalised over the chosen expert gives every
// gate 1: the router never sees the language-model loss. Valid (an upcycled
// top-1 model keeps its dense function so), so a warning, not a refusal.
TEST(ConfigWarnings, TopOneWithNormalisedGatesIsWarnedOf) {
  const auto warnings_of = [](const std::vector<std::string>& overrides) {
    return config_warnings(
        parse_config("[moe]\nenabled = true\nnum_experts = 4\n", "w.toml", overrides));
  };
  const auto top1 = warnings_of({"moe.top_k=1"});
  ASSERT_EQ(top1.size(), 1u);
  EXPECT_NE(top1[0].find("moe.top_k = 1 with moe.gate = \"topk_softmax\": every gate is 1"),
            std::string::npos)
      << top1[0];
  EXPECT_TRUE(warnings_of({"moe.top_k=1", "moe.gate=full_softmax"}).empty());
  EXPECT_TRUE(warnings_of({"moe.top_k=2"}).empty());
}

// Without sources or sets: data.dir is a mixture of one and data.val_split the
// one validation set; the dump still lists the keys of both tables.
TEST(Config, DefaultsAreDataDirAloneAndListTheTableKeys) {
  const Config cfg =
      parse_config("[data]\ndir = \"corpora/web\"\nmax_unique_tokens = 50\n", "a.toml");
  const auto sources = training_sources(cfg);
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_EQ(sources[0].dir, "corpora/web");
  EXPECT_EQ(sources[0].max_unique_tokens, 50);
  const auto sets = validation_sets(cfg);
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].dir, "corpora/web");
  EXPECT_EQ(sets[0].split, "val");
  const std::string dump = to_toml(Config{});
  for (const char* line : {"# [[data.sources]]", "# weight = 1.0", "# max_unique_tokens = 0",
                           "# [[eval.sets]]", "# split = \"val\""}) {
    EXPECT_NE(dump.find(line), std::string::npos) << line << " in\n" << dump;
  }
}

// The options published checkpoints need (Qwen3's head_dim, Qwen2's biases
// and shared-expert gate, Llama 3.1's and YaRN's RoPE scaling): read from a
// [model.rope_scaling] table or dotted keys, from --set, and dumped back.
TEST(Config, ReadsHeadDimBiasesGateAndRopeScaling) {
  const Config cfg = parse_config(
      "[model]\nhead_dim = 128\nqkv_bias = true\n[model.rope_scaling]\ntype = \"yarn\"\n"
      "factor = 4\noriginal_seq_len = 4096\nbeta_fast = 16\nmscale = 0.707\n"
      "mscale_all_dim = 0.707\ntruncate = false\n"
      "[moe]\nenabled = true\nnum_shared_experts = 1\nshared_expert_gate = true\n",
      "qwen.toml");
  EXPECT_EQ(cfg.model.head_dim(), 128);
  EXPECT_EQ(cfg.model.d_model, 256);  // the heads need not tile it
  EXPECT_TRUE(cfg.model.qkv_bias);
  EXPECT_TRUE(cfg.moe.shared_expert_gate);
  const RopeScaling& r = cfg.model.rope_scaling;
  EXPECT_EQ(r.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(r.factor, 4.0);
  EXPECT_EQ(r.original_seq_len, 4096);
  EXPECT_DOUBLE_EQ(r.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(r.beta_slow, 1.0);  // the default
  EXPECT_DOUBLE_EQ(r.mscale, 0.707);
  EXPECT_FALSE(r.truncate);
  EXPECT_EQ(cfg.origin.at("model.rope_scaling.factor"), "qwen.toml:6:1");
  const std::string dump = to_toml(cfg);
  EXPECT_NE(dump.find("[model.rope_scaling]\ntype = \"yarn\"\nfactor = 4.0\n"), std::string::npos)
      << dump;
  EXPECT_EQ(to_toml(parse_config(dump, "dump.toml")), dump);

  const Config dotted = parse_config(
      "[model]\nrope_scaling.type = \"llama3\"\nrope_scaling.original_seq_len = 8192\n",
      "dotted.toml", {"model.rope_scaling.factor=32"});
  EXPECT_EQ(dotted.model.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(dotted.model.rope_scaling.factor, 32.0);
  EXPECT_EQ(dotted.origin.at("model.rope_scaling.factor"), "--set model.rope_scaling.factor=32");
}

TEST(Config, DefaultsListTheNewModelKeys) {
  const Config cfg;
  EXPECT_EQ(cfg.model.head_dim(), 64);  // d_model 256 / 4 heads
  EXPECT_FALSE(cfg.model.qkv_bias);
  EXPECT_FALSE(cfg.moe.shared_expert_gate);
  EXPECT_EQ(cfg.model.rope_scaling.type, RopeScalingType::kNone);
  const std::string dump = to_toml(cfg);
  for (const char* line :
       {"\nhead_dim = 0\n", "\nqkv_bias = false\n", "\nshared_expert_gate = false\n",
        "\n[model.rope_scaling]\ntype = \"none\"\nfactor = 1.0\noriginal_seq_len = 0\n"
        "low_freq_factor = 1.0\nhigh_freq_factor = 4.0\nbeta_fast = 32.0\nbeta_slow = 1.0\n"
        "mscale = 0.0\nmscale_all_dim = 0.0\nattention_factor = 0.0\ntruncate = true\n\n[moe]"}) {
    EXPECT_NE(dump.find(line), std::string::npos) << line << " in\n" << dump;
  }
}

TEST(Config, ReadsTypedValuesAndRecordsOrigins) {
  Config cfg = parse_config(
      "[model]\nd_model = 128\nrope_theta = 500000\n[moe]\nenabled = true\ngate = "
      "\"full_softmax\"\n[optim]\nlr = 1e-3\n",
      "good.toml");
  EXPECT_EQ(cfg.model.d_model, 128);
  EXPECT_DOUBLE_EQ(cfg.model.rope_theta, 500000.0);  // an integer is accepted for a float key
  EXPECT_TRUE(cfg.moe.enabled);
  EXPECT_EQ(cfg.moe.gate, Gate::kFullSoftmax);
  EXPECT_DOUBLE_EQ(cfg.optim.lr, 1e-3);
  EXPECT_EQ(cfg.origin.at("model.d_model"), "good.toml:2:1");
  EXPECT_EQ(cfg.model.n_layers, 4);  // untouched keys keep their defaults
}

TEST(Config, OverridesApplyWithTheSameChecks) {
  Config cfg = parse_config("[model]\nd_model = 128\n", "a.toml",
                            {"model.d_model=64", "train.precision=fp32", "moe.enabled=true"});
  EXPECT_EQ(cfg.model.d_model, 64);
  EXPECT_EQ(cfg.train.precision, Precision::kFp32);
  EXPECT_TRUE(cfg.moe.enabled);
  EXPECT_EQ(cfg.origin.at("train.precision"), "--set train.precision=fp32");
}

TEST(Config, ResolvedDumpPreservesFloatsAndStrings) {
  Config cfg;
  cfg.optim.lr = 0.1 + 0.2;  // not exactly representable in short decimal form
  cfg.train.out_dir = "runs/with \"quotes\"\\";
  Config back = parse_config(to_toml(cfg), "dump.toml");
  EXPECT_EQ(back.optim.lr, cfg.optim.lr);
  EXPECT_EQ(back.train.out_dir, cfg.train.out_dir);
}

// `key`'s value as the resolved-config dump writes it.
std::string dumped_value(Config cfg, const std::string& key) {
  for (const Field& f : schema(cfg))
    if (f.key == key) return f.value_string();
  return "";
}

// Every name of every choice key reads in, from a file and from --set, to a
// value that the dump writes back as that name; any other name is refused.
TEST(Config, EveryChoiceNameRoundTripsAndOthersAreRefused) {
  Config probe;
  int choice_keys = 0;
  for (const Field& f : schema(probe)) {
    const auto* choice = std::get_if<Choice>(&f.value);
    if (!choice) continue;
    ++choice_keys;
    const std::string section = f.section();
    // A setting the other sections' rules accept with every name (nccl needs
    // cuda, moe checkpointing an MoE).
    const std::string others = std::string(section == "moe" ? "" : "[moe]\nenabled = true\n") +
                               (section == "train" ? "" : "[train]\ndevice = \"cuda\"\n");
    for (const std::string& name : choice->names) {
      const std::string quoted = "\"" + name + "\"";
      // A RoPE scaling needs the context it stretches, latent attention its widths.
      std::string needs;
      if (f.key == "model.rope_scaling.type" && name != "none") {
        needs = "rope_scaling.original_seq_len = 64\n";
      }
      if (f.key == "model.attention" && name == "mla") {
        needs = "kv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = 4\nv_head_dim = 8\n";
      }
      const Config from_file = parse_config(
          others + "[" + section + "]\n" + f.name() + " = " + quoted + "\n" + needs, "choice.toml");
      EXPECT_EQ(dumped_value(from_file, f.key), quoted) << f.key;
      Config from_set;
      apply_override(from_set, f.key + "=" + name);
      EXPECT_EQ(dumped_value(from_set, f.key), quoted) << f.key;
      EXPECT_EQ(dumped_value(parse_config(to_toml(from_file), "dump.toml"), f.key), quoted);
    }
    Config cfg;
    try {
      apply_override(cfg, f.key + "=bogus");
      ADD_FAILURE() << f.key << " accepted \"bogus\"";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "--set " + f.key + "=bogus: " + f.key + " = \"bogus\": expected " + f.allowed());
    }
  }
  EXPECT_EQ(choice_keys, 19);
}

TEST(Config, DidYouMean) {
  EXPECT_EQ(did_you_mean("d_modle", {"d_model", "d_ff"}), "d_model");
  EXPECT_EQ(did_you_mean("zzzzzz", {"d_model", "d_ff"}), "");
}

struct BadCase {
  const char* name;
  const char* text;
  std::vector<std::string> overrides;
  int world;
  const char* expected;
};

class BadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfig, GivesOneLineErrorNamingTheCulprit) {
  const BadCase& c = GetParam();
  std::string msg = error_of(c.text, c.overrides, c.world);
  EXPECT_EQ(msg, c.expected);
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

const BadCase kBadCases[] = {
    {"syntax_error",
     "[model]\nd_model = = 3\n",
     {},
     0,
     "bad.toml:2:11: TOML syntax error: Error while parsing value: could not determine value "
     "type"},
    {"unterminated_string",
     "[data]\ndir = \"abc\n",
     {},
     0,
     "bad.toml:2:11: TOML syntax error: Error while parsing string: unescaped control "
     "characters other than TAB (U+0009) are explicitly prohibited"},
    {"unknown_key",
     "[model]\nd_modle = 3\n",
     {},
     0,
     "bad.toml:2:1: unknown key 'model.d_modle'; did you mean 'model.d_model'?"},
    {"unknown_key_wrong_section",
     "[train]\nlr = 0.1\n",
     {},
     0,
     "bad.toml:2:1: unknown key 'train.lr'; did you mean 'optim.lr'?"},
    {"unknown_section",
     "[modle]\nd_model = 3\n",
     {},
     0,
     "bad.toml:1:2: unknown section 'modle'; did you mean 'model'?"},
    {"top_level_key", "seed = 3\n", {}, 0, "bad.toml:1:1: unknown section 'seed'"},
    {"section_not_table",
     "model = 3\n",
     {},
     0,
     "bad.toml:1:1: 'model' = integer 3: expected a table [model]"},
    {"string_for_int",
     "[model]\nd_model = \"big\"\n",
     {},
     0,
     "bad.toml:2:11: model.d_model = string 'big': expected an integer >= 1"},
    {"float_for_int",
     "[model]\nn_layers = 2.5\n",
     {},
     0,
     "bad.toml:2:12: model.n_layers = float 2.5: expected an integer >= 1"},
    {"int_for_bool",
     "[moe]\nenabled = 1\n",
     {},
     0,
     "bad.toml:2:11: moe.enabled = integer 1: expected true or false"},
    {"array_for_float",
     "[optim]\nlr = [1, 2]\n",
     {},
     0,
     "bad.toml:2:6: optim.lr = an array: expected a number > 0.0"},
    {"negative_size",
     "[model]\nd_model = -4\n",
     {},
     0,
     "bad.toml:2:11: model.d_model = -4: expected an integer >= 1"},
    {"zero_layers",
     "[model]\nn_layers = 0\n",
     {},
     0,
     "bad.toml:2:12: model.n_layers = 0: expected an integer >= 1"},
    {"zero_lr",
     "[optim]\nlr = 0.0\n",
     {},
     0,
     "bad.toml:2:6: optim.lr = 0.0: expected a number > 0.0"},
    {"ratio_above_one",
     "[optim]\nmin_lr_ratio = 1.5\n",
     {},
     0,
     "bad.toml:2:16: optim.min_lr_ratio = 1.5: expected a number in [0.0, 1.0]"},
    {"bad_choice",
     "[train]\nprecision = \"fp16\"\n",
     {},
     0,
     "bad.toml:2:13: train.precision = \"fp16\": expected one of \"auto\", \"fp32\", \"bf16\""},
    {"unknown_backend",
     "[parallel]\nbackend = \"gloo\"\n",
     {},
     0,
     "bad.toml:2:11: parallel.backend = \"gloo\": expected one of \"auto\", \"mpi\", \"nccl\""},
    {"unknown_schedule_override",
     "[optim]\n",
     {"optim.schedule=step"},
     0,
     "--set optim.schedule=step: optim.schedule = \"step\": expected one of \"cosine\", "
     "\"linear\", \"constant\", \"wsd\""},
    {"int_for_choice",
     "[moe]\ngate = 1\n",
     {},
     0,
     "bad.toml:2:8: moe.gate = integer 1: expected one of \"topk_softmax\", \"full_softmax\""},
    {"nan_value",
     "[optim]\nweight_decay = nan\n",
     {},
     0,
     "bad.toml:2:16: optim.weight_decay = nan: must be finite"},
    {"heads_do_not_divide",
     "[model]\nd_model = 100\nn_heads = 3\n",
     {},
     0,
     "bad.toml:3:1: model.n_heads = 3 must divide model.d_model = 100 (or set model.head_dim)"},
    {"odd_head_dim",
     "[model]\nd_model = 12\nn_heads = 4\n",
     {},
     0,
     "bad.toml:3:1: head dimension d_model / n_heads = 3 must be even for RoPE"},
    {"odd_explicit_head_dim",
     "[model]\nhead_dim = 7\n",
     {},
     0,
     "bad.toml:2:1: model.head_dim = 7 must be even for RoPE"},
    {"negative_head_dim",
     "[model]\nhead_dim = -2\n",
     {},
     0,
     "bad.toml:2:12: model.head_dim = -2: expected an integer >= 0"},
    {"qkv_bias_not_a_flag",
     "[model]\nqkv_bias = 1\n",
     {},
     0,
     "bad.toml:2:12: model.qkv_bias = integer 1: expected true or false"},
    {"shared_expert_gate_without_shared_expert",
     "[moe]\nenabled = true\nshared_expert_gate = true\n",
     {},
     0,
     "bad.toml:3:1: moe.shared_expert_gate = true needs a shared expert (moe.num_shared_experts "
     "or moe.d_shared > 0)"},
    {"rope_scaling_unknown_type",
     "[model.rope_scaling]\ntype = \"linear\"\n",
     {},
     0,
     "bad.toml:2:8: model.rope_scaling.type = \"linear\": expected one of \"none\", \"llama3\", "
     "\"yarn\""},
    {"rope_scaling_unknown_key",
     "[model.rope_scaling]\nfactr = 2\n",
     {},
     0,
     "bad.toml:2:1: unknown key 'model.rope_scaling.factr'; did you mean "
     "'model.rope_scaling.factor'?"},
    {"rope_scaling_not_a_table",
     "[model]\nrope_scaling = \"llama3\"\n",
     {},
     0,
     "bad.toml:2:16: model.rope_scaling = string 'llama3': expected a table [model.rope_scaling]"},
    {"rope_scaling_factor_below_one",
     "[model.rope_scaling]\nfactor = 0.5\n",
     {},
     0,
     "bad.toml:2:10: model.rope_scaling.factor = 0.5: expected a number >= 1.0"},
    {"rope_scaling_key_without_a_type",
     "[model.rope_scaling]\nfactor = 8\n",
     {},
     0,
     "bad.toml:2:1: model.rope_scaling.factor = 8.0 does not apply to model.rope_scaling.type = "
     "\"none\""},
    {"llama3_without_its_original_context",
     "[model.rope_scaling]\ntype = \"llama3\"\nfactor = 8\n",
     {},
     0,
     "bad.toml:2:1: model.rope_scaling.type = \"llama3\" needs model.rope_scaling.original_seq_len "
     ">= 1 (the context trained at)"},
    {"llama3_key_given_to_yarn",
     "[model.rope_scaling]\ntype = \"yarn\"\noriginal_seq_len = 64\nlow_freq_factor = 2\n",
     {},
     0,
     "bad.toml:4:1: model.rope_scaling.low_freq_factor = 2.0 does not apply to "
     "model.rope_scaling.type = \"yarn\""},
    {"yarn_key_given_to_llama3",
     "[model.rope_scaling]\ntype = \"llama3\"\noriginal_seq_len = 64\ntruncate = false\n",
     {},
     0,
     "bad.toml:4:1: model.rope_scaling.truncate = false does not apply to "
     "model.rope_scaling.type = \"llama3\""},
    {"llama3_frequency_factors_reversed",
     "[model.rope_scaling]\ntype = \"llama3\"\noriginal_seq_len = 64\nlow_freq_factor = 4\n"
     "high_freq_factor = 2\n",
     {},
     0,
     "bad.toml:5:1: model.rope_scaling.high_freq_factor = 2.0 must be > "
     "model.rope_scaling.low_freq_factor = 4.0"},
    {"yarn_betas_reversed",
     "[model.rope_scaling]\ntype = \"yarn\"\noriginal_seq_len = 64\nbeta_fast = 1\n"
     "beta_slow = 32\n",
     {},
     0,
     "bad.toml:4:1: model.rope_scaling.beta_fast = 1.0 must be >= model.rope_scaling.beta_slow = "
     "32.0"},
    {"yarn_beta_zero",
     "[model.rope_scaling]\nbeta_slow = 0\n",
     {},
     0,
     "bad.toml:2:13: model.rope_scaling.beta_slow = 0.0: expected a number > 0.0"},
    {"yarn_mscale_alone",
     "[model.rope_scaling]\ntype = \"yarn\"\noriginal_seq_len = 64\nmscale = 0.707\n",
     {},
     0,
     "bad.toml:4:1: model.rope_scaling.mscale and mscale_all_dim set the attention factor "
     "together: set both or neither"},
    {"yarn_negative_attention_factor",
     "[model.rope_scaling]\nattention_factor = -1\n",
     {},
     0,
     "bad.toml:2:20: model.rope_scaling.attention_factor = -1.0: expected a number >= 0.0"},
    {"rope_scaling_negative_original_context",
     "[model.rope_scaling]\noriginal_seq_len = -5\n",
     {},
     0,
     "bad.toml:2:20: model.rope_scaling.original_seq_len = -5: expected an integer >= 0"},
    {"rope_scaling_low_freq_factor_zero",
     "[model.rope_scaling]\nlow_freq_factor = 0\n",
     {},
     0,
     "bad.toml:2:19: model.rope_scaling.low_freq_factor = 0.0: expected a number > 0.0"},
    {"rope_scaling_override_unknown_type",
     "[model]\n",
     {"model.rope_scaling.type=ntk"},
     0,
     "--set model.rope_scaling.type=ntk: model.rope_scaling.type = \"ntk\": expected one of "
     "\"none\", \"llama3\", \"yarn\""},
    {"kv_heads_do_not_divide",
     "[model]\nn_kv_heads = 3\n",
     {},
     0,
     "bad.toml:2:1: model.n_kv_heads = 3 must divide model.n_heads = 4"},
    // model.attention = "mla": its keys need values, the multi-head keys none.
    {"mla_key_given_to_mha",
     "[model]\nkv_lora_rank = 8\n",
     {},
     0,
     "bad.toml:2:1: model.kv_lora_rank = 8 does not apply to model.attention = \"mha\""},
    {"mla_without_a_latent",
     "[model]\nattention = \"mla\"\nqk_nope_head_dim = 8\nqk_rope_head_dim = 4\nv_head_dim = 8\n",
     {},
     0,
     "bad.toml:2:1: model.attention = \"mla\" needs model.kv_lora_rank >= 1 (the key/value "
     "latent's width)"},
    {"mla_odd_rope_dims",
     "[model]\nattention = \"mla\"\nkv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = "
     "4\nv_head_dim = 8\n",
     {"model.qk_rope_head_dim=3"},
     0,
     "--set model.qk_rope_head_dim=3: model.qk_rope_head_dim = 3 must be even and >= 2 for RoPE"},
    {"mla_without_nope_dims",
     "[model]\nattention = \"mla\"\nkv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = "
     "4\nv_head_dim = 8\n",
     {"model.qk_nope_head_dim=0"},
     0,
     "--set model.qk_nope_head_dim=0: model.attention = \"mla\" needs model.qk_nope_head_dim >= "
     "1 (each head's dims without RoPE)"},
    {"mla_without_value_dims",
     "[model]\nattention = \"mla\"\nkv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = "
     "4\nv_head_dim = 8\n",
     {"model.v_head_dim=0"},
     0,
     "--set model.v_head_dim=0: model.attention = \"mla\" needs model.v_head_dim >= 1 (each "
     "head's value width)"},
    {"mla_with_grouped_heads",
     "[model]\nn_kv_heads = 2\nattention = \"mla\"\nkv_lora_rank = 8\nqk_nope_head_dim = "
     "8\nqk_rope_head_dim = 4\nv_head_dim = 8\n",
     {},
     0,
     "bad.toml:2:1: model.n_kv_heads = 2 does not apply to model.attention = \"mla\" (set "
     "qk_nope_head_dim, qk_rope_head_dim and v_head_dim)"},
    {"mla_with_qk_norm",
     "[model]\nattention = \"mla\"\nkv_lora_rank = 8\nqk_nope_head_dim = 8\nqk_rope_head_dim = "
     "4\nv_head_dim = 8\n",
     {"model.qk_norm=head"},
     0,
     "--set model.qk_norm=head: model.qk_norm = \"head\" does not apply to model.attention = "
     "\"mla\" (set qk_nope_head_dim, qk_rope_head_dim and v_head_dim)"},
    {"top_k_above_experts",
     "[moe]\nenabled = true\nnum_experts = 2\ntop_k = 3\n",
     {},
     0,
     "bad.toml:4:1: moe.top_k = 3 must be <= moe.num_experts = 2"},
    {"no_moe_layer_left",
     "[model]\nn_layers = 2\n[moe]\nenabled = true\nfirst_dense_layers = 2\n",
     {},
     0,
     "bad.toml:5:1: moe.first_dense_layers = 2 and moe.layer_interval = 1 leave no MoE layer "
     "among model.n_layers = 2"},
    {"moe_checkpointing_on_a_dense_model",
     "[train]\nactivation_checkpointing = \"moe\"\n",
     {},
     0,
     "bad.toml:2:1: train.activation_checkpointing = \"moe\" needs moe.enabled = true (a dense "
     "model has no MoE FFN to recompute)"},
    {"negative_mtp_depth",
     "[train]\nmtp_depth = -1\n",
     {},
     0,
     "bad.toml:2:13: train.mtp_depth = -1: expected an integer >= 0"},
    {"negative_mtp_loss_weight",
     "[train]\nmtp_loss_weight = -0.1\n",
     {},
     0,
     "bad.toml:2:19: train.mtp_loss_weight = -0.1: expected a number >= 0.0"},
    {"mtp_depth_without_a_target_left",
     "[model]\nseq_len = 4\n[train]\nmtp_depth = 4\n",
     {},
     0,
     "bad.toml:4:1: train.mtp_depth = 4 must be < model.seq_len = 4 (depth k predicts k + 1 "
     "tokens ahead)"},
    {"ep_not_dividing_experts",
     "[moe]\nenabled = true\n[parallel]\nep = 3\n",
     {},
     0,
     "bad.toml:4:1: parallel.ep = 3 must divide moe.num_experts = 4"},
    {"groups_not_dividing_experts",
     "[moe]\nenabled = true\nn_groups = 3\n",
     {},
     0,
     "bad.toml:3:1: moe.n_groups = 3 must divide moe.num_experts = 4"},
    {"more_groups_picked_than_there_are",
     "[moe]\nenabled = true\nn_groups = 2\ntopk_groups = 3\n",
     {},
     0,
     "bad.toml:4:1: moe.topk_groups = 3 must be <= moe.n_groups = 2"},
    {"no_group_picked",
     "[moe]\nenabled = true\nn_groups = 2\ntopk_groups = 0\n",
     {},
     0,
     "bad.toml:4:15: moe.topk_groups = 0: expected an integer >= 1"},
    {"top_k_beyond_the_picked_groups",
     "[moe]\nenabled = true\nnum_experts = 8\ntop_k = 3\nn_groups = 4\n",
     {},
     0,
     "bad.toml:4:1: moe.top_k = 3 must be <= moe.topk_groups x experts per group (1 x 2)"},
    {"top2_sum_of_one_expert_groups",
     "[moe]\nenabled = true\nn_groups = 4\ntopk_groups = 2\n",
     {},
     0,
     "bad.toml:3:1: moe.group_score = \"top2_sum\" needs at least 2 experts per group "
     "(moe.num_experts = 4, moe.n_groups = 4); use \"max\""},
    {"unknown_group_score",
     "[moe]\ngroup_score = \"sum\"\n",
     {},
     0,
     "bad.toml:2:15: moe.group_score = \"sum\": expected one of \"top2_sum\", \"max\""},
    {"ep_not_dividing_world",
     "[moe]\nenabled = true\n[parallel]\nep = 4\n",
     {},
     2,
     "bad.toml:4:1: parallel.ep = 4 must divide the world size 2"},
    {"ep_on_dense",
     "[parallel]\nep = 2\n",
     {},
     0,
     "bad.toml:2:1: parallel.ep = 2 needs moe.enabled = true (a dense model has no experts to "
     "split)"},
    {"expert_widths_not_one_per_expert",
     "[moe]\nenabled = true\nexpert_widths = [64, 32]\n",
     {},
     0,
     "bad.toml:3:1: moe.expert_widths lists 2 widths for moe.num_experts = 4"},
    {"expert_widths_not_integers",
     "[moe]\nexpert_widths = [64, 0.5]\n",
     {},
     0,
     "bad.toml:2:17: moe.expert_widths = an array: expected a list of integers >= 1"},
    {"aux_free_with_local_statistics",
     "[moe]\nenabled = true\nbalance = \"aux_free\"\nstats = \"micro_batch\"\n",
     {},
     0,
     "bad.toml:4:1: moe.balance = \"aux_free\" needs moe.stats = \"global\" (got "
     "\"micro_batch\")"},
    {"batch_not_splitting",
     "[train]\nbatch_seqs = 6\n",
     {},
     4,
     "bad.toml:2:1: the global batch of 6 sequences must split evenly over 4 ranks"},
    {"batch_tokens_not_multiple",
     "[train]\nbatch_tokens = 1000\n",
     {},
     0,
     "bad.toml:2:1: train.batch_tokens = 1000 must be a multiple of model.seq_len = 256"},
    {"warmup_longer_than_run",
     "[train]\nmax_steps = 10\n[optim]\nwarmup_steps = 20\n",
     {},
     0,
     "bad.toml:4:1: optim.warmup_steps = 20 must be <= train.max_steps = 10"},
    {"nccl_on_cpu",
     "[parallel]\nbackend = \"nccl\"\n",
     {},
     0,
     "bad.toml:2:1: parallel.backend = \"nccl\" needs train.device = \"cuda\""},
    {"empty_file",
     "  \n\n",
     {},
     0,
     "bad.toml: config file is empty; expected TOML sections such as [model]"},
    {"override_unknown_key",
     "[model]\n",
     {"model.dmodel=3"},
     0,
     "--set model.dmodel=3: unknown key 'model.dmodel'; did you mean 'model.d_model'?"},
    {"override_bad_value",
     "[model]\n",
     {"model.d_model=-1"},
     0,
     "--set model.d_model=-1: model.d_model = -1: expected an integer >= 1"},
    {"override_no_equals",
     "[model]\n",
     {"model.d_model"},
     0,
     "--set model.d_model: expected key.path=value, e.g. --set model.d_model=256"},
    {"override_breaks_cross_check",
     "[model]\n",
     {"model.n_heads=3"},
     0,
     "--set model.n_heads=3: model.n_heads = 3 must divide model.d_model = 256 (or set "
     "model.head_dim)"},
    {"source_negative_weight",
     "[[data.sources]]\ndir = \"a\"\nweight = -1\n",
     {},
     0,
     "bad.toml:3:10: data.sources[0].weight = -1.0: expected a number > 0.0"},
    {"sources_empty",
     "[data]\nsources = []\n",
     {},
     0,
     "bad.toml:2:11: data.sources = an array: expected one or more [[data.sources]] tables"},
    {"source_without_dir",
     "[[data.sources]]\ndir = \"a\"\n[[data.sources]]\nweight = 2\n",
     {},
     0,
     "bad.toml:3:1: data.sources[1] has no dir (the prepared dataset folder)"},
    {"source_unknown_key",
     "[[data.sources]]\ndir = \"a\"\nwieght = 2\n",
     {},
     0,
     "bad.toml:3:1: unknown key 'data.sources[0].wieght'; did you mean 'data.sources[0].weight'?"},
    {"sources_same_name",
     "[[data.sources]]\ndir = \"x/web\"\n[[data.sources]]\ndir = \"y/web\"\n",
     {},
     0,
     "bad.toml:3:1: data.sources[1].name = \"web\" is also the name of data.sources[0]"},
    {"sources_and_dir",
     "[data]\ndir = \"d\"\n[[data.sources]]\ndir = \"a\"\n",
     {},
     0,
     "bad.toml:2:1: data.dir and [[data.sources]] exclude each other: list data.dir as a source"},
    {"eval_sets_same_name",
     "[[eval.sets]]\nname = \"web\"\ndir = \"a\"\n[[eval.sets]]\nname = \"web\"\ndir = \"b\"\n",
     {},
     0,
     "bad.toml:5:1: eval.sets[1].name = \"web\" is also the name of eval.sets[0]"},
    {"eval_set_without_name",
     "[[eval.sets]]\ndir = \"a\"\n",
     {},
     0,
     "bad.toml:1:1: eval.sets[0].name = \"\": expected a name of letters, digits, '_', '-' and "
     "'.'"},
    {"eval_task_interval_not_a_multiple",
     "[eval]\ninterval = 10\n[[eval.tasks]]\nname = \"blimp\"\ndir = \"t\"\ninterval = 15\n",
     {},
     0,
     "bad.toml:6:1: eval.tasks[0].interval = 15 must be a multiple of eval.interval = 10 (tasks "
     "are scored at validations)"},
    {"eval_tasks_same_name",
     "[[eval.tasks]]\nname = \"blimp\"\ndir = \"a\"\n[[eval.tasks]]\nname = \"blimp\"\ndir = "
     "\"b\"\n",
     {},
     0,
     "bad.toml:5:1: eval.tasks[1].name = \"blimp\" is also the name of eval.tasks[0]"},
    {"eval_sets_not_tables",
     "[eval]\nsets = [\"a\"]\n",
     {},
     0,
     "bad.toml:2:8: eval.sets = an array: expected one or more [[eval.sets]] tables"},
};

INSTANTIATE_TEST_SUITE_P(All, BadConfig, ::testing::ValuesIn(kBadCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Binary content needs the real bytes (a C string stops at the first NUL).
TEST(Config, BinaryGarbageIsRejectedAsNotText) {
  std::string garbage(
      "\x7f"
      "ELF\x02\x01\x01\0\0\0\xff\xfe",
      12);
  std::string msg;
  try {
    parse_config(garbage, "model.bin");
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "model.bin: not a text file (NUL byte at offset 7); expected a TOML config");
}

TEST(Config, InvalidUtf8IsASyntaxErrorWithPosition) {
  std::string msg;
  try {
    parse_config("[model]\nd_model = 3 # \xff\xfe\n", "latin.toml");
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg.rfind("latin.toml:2:", 0), 0u) << msg;
  EXPECT_NE(msg.find("TOML syntax error"), std::string::npos) << msg;
}

TEST(Config, MissingFileNamesThePath) {
  std::string msg;
  try {
    load_config("/nonexistent/moelab.toml");
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "/nonexistent/moelab.toml: cannot open config file (No such file or directory)");
}

TEST(Config, EveryShippedConfigLoads) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(MOELAB_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_config(entry.path().string()));
    ++count;
  }
  EXPECT_GT(count, 0);
}

}  // namespace
}  // namespace moelab
