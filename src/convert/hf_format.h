// Hugging Face interop: moelab checkpoints as folders of config.json +
// model.safetensors in the family that expresses them (hf_config.h: Llama,
// Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE), and such folders back into moelab
// checkpoints (e.g. to upcycle or train them at any world size and ep).
//
// The layouts agree: RoPE rotates halves (rotate_half), grouped k/v heads serve
// consecutive query heads, RMSNorm is w * x / sqrt(mean(x^2) + eps), SwiGLU is
// down(silu(gate(x)) * up(x)) with moelab's w1 = gate, w3 = up, w2 = down. The
// routers softmax over all experts and keep the top-k: renormalised (Mixtral,
// norm_topk_prob = true) is moelab's "topk_softmax", as they are
// (norm_topk_prob = false) its "full_softmax". Tensor names: hf_tensors.h.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace moelab {

// Writes <out>/config.json and <out>/model.safetensors (float32), logging the
// family chosen, and the tokenizer of the checkpoint's data.dir where there is
// one transformers can read (hf_tokenizer.h).
void export_hf(const std::string& checkpoint, const std::string& out);

// Reads a folder of any of those families (model.safetensors, or the shards
// that model.safetensors.index.json lists; F32, F16 or BF16; experts per
// expert or fused as transformers 5 holds them) and writes <out>/checkpoints/step_00000000
// (weights only) and <out>/config.toml (init_from those weights; set data.dir
// to a dataset tokenized with the model's own tokenizer). Returns the weights'
// folder.
std::string import_hf(const std::string& hf_dir, const std::string& out);

// The weights of a Hugging Face folder as float32: model.safetensors, or the
// shards that model.safetensors.index.json maps each tensor to (every listed
// tensor must be in its shard, and no tensor in two).
std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir);

}  // namespace moelab
