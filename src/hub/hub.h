// Hugging Face interop: moelab checkpoints as folders of config.json +
// model.safetensors in the family that expresses them (family.h), and such
// folders back into moelab checkpoints (to upcycle, convert or train them at
// any world size and ep).
//
// The layouts agree: RoPE rotates halves (rotate_half), grouped k/v heads serve
// consecutive query heads, RMSNorm is w * x / sqrt(mean(x^2) + eps), SwiGLU is
// down(silu(gate(x)) * up(x)) with moelab's w1 = gate, w3 = up, w2 = down. The
// routers softmax over all experts and keep the top-k: renormalised (Mixtral,
// norm_topk_prob = true) is moelab's "topk_softmax", as they are
// (norm_topk_prob = false) its "full_softmax". Tensor names: tensor_names.h.
#pragma once

#include <string>

namespace moelab {

// Writes <out>/config.json and <out>/model.safetensors (bfloat16 tensors as
// BF16, the rest as F32), logging the family chosen, and the tokenizer of the
// checkpoint's data.dir where there is one transformers can read
// (tokenizer_files.h).
void export_hf(const std::string& checkpoint, const std::string& out);

// Reads a folder of any family (hf_weights.h: shards, F32, F16 or BF16,
// experts per expert or fused) and writes <out>/checkpoints/step_00000000
// (weights only, BF16 kept as bfloat16) and <out>/config.toml (init_from those
// weights; set data.dir to a dataset tokenized with the model's own
// tokenizer). One tensor is in memory at a time. Returns the weights' folder.
std::string import_hf(const std::string& hf_dir, const std::string& out);

}  // namespace moelab
