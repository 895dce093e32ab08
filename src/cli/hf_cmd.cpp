// `moelab export CKPT --format hf --out DIR` and `moelab import HF_DIR --out DIR`:
// Hugging Face Llama, Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE and DeepSeek-V2/V3 folders
// (src/hub/hub.h).
#include <memory>
#include <string>

#include "cli/commands.h"
#include "hub/hub.h"
#include "util/mpi_session.h"

namespace moelab {

void add_export_command(CLI::App& root) {
  struct Options {
    std::string checkpoint, format = "hf", out;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = root.add_subcommand(
      "export",
      "Write a checkpoint as a Hugging Face model (Llama, Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, "
      "DeepSeek-V2 or DeepSeek-V3, whichever expresses it) with the dataset's tokenizer");
  cmd->add_option("checkpoint", o->checkpoint, "checkpoint folder")->required();
  cmd->add_option("--format", o->format, "output format")->check(CLI::IsMember({"hf"}));
  cmd->add_option("--out", o->out, "output folder (config.json, model.safetensors, tokenizer)")
      ->required();
  cmd->callback([o] {
    if (MpiSession::rank() == 0) export_hf(o->checkpoint, o->out);
  });
}

void add_import_command(CLI::App& root) {
  struct Options {
    std::string hf_dir, out;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = root.add_subcommand(
      "import",
      "Read a Hugging Face Llama, Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V2 or DeepSeek-V3 "
      "folder as a checkpoint");
  cmd->add_option("hf_dir", o->hf_dir, "folder with config.json and model.safetensors")->required();
  cmd->add_option("--out", o->out, "output folder (config.toml and the weights)")->required();
  cmd->callback([o] {
    if (MpiSession::rank() == 0) import_hf(o->hf_dir, o->out);
  });
}

}  // namespace moelab
