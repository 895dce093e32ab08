// Hugging Face interop: moelab checkpoints as LlamaForCausalLM (dense) and
// MixtralForCausalLM (MoE) folders of config.json + model.safetensors, and a
// dense Llama folder back into a moelab checkpoint (e.g. to upcycle it).
//
// The layouts agree: RoPE rotates halves (rotate_half), grouped k/v heads serve
// consecutive query heads, RMSNorm is w * x / sqrt(mean(x^2) + eps), SwiGLU is
// down(silu(gate(x)) * up(x)) with moelab's w1 = gate, w3 = up, w2 = down.
// Mixtral routes by a softmax over all experts, keeps the top-k and
// renormalises them: moelab's "topk_softmax". What Mixtral cannot express is
// refused by name: full_softmax gates, shared experts, experts of different
// widths, token dropping (capacity_factor > 0) and aux_free routing biases.
#pragma once

#include <string>

namespace moelab {

// Writes <out>/config.json and <out>/model.safetensors (float32).
void export_hf(const std::string& checkpoint, const std::string& out);

// Reads a LlamaForCausalLM folder (model.safetensors, or the shards that
// model.safetensors.index.json lists) and writes <out>/checkpoints/step_00000000
// (weights only) and <out>/config.toml (init_from those weights; set data.dir
// to a dataset tokenized with the model's own tokenizer). Returns the weights'
// folder.
std::string import_hf(const std::string& hf_dir, const std::string& out);

}  // namespace moelab
