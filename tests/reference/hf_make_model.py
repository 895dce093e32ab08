#!/usr/bin/env python3
"""A tiny random Hugging Face folder: `hf_make_model.py FAMILY OUT [OPTION=VALUE...]`.

FAMILY is llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, olmoe,
deepseek_v2 or deepseek_v3;
OPTIONs are config keys (values parsed as JSON) over a small default, plus those
that shape the files:
  config=PATH    a published config.json instead of the small default, made
                 tiny (shrink below) with every structural field kept
  shard=1        several safetensors shards with model.safetensors.index.json
  dtype=bf16     weights stored as bfloat16 (or f16; default f32)
  fused=1        one state_dict file with the experts fused as transformers 5
                 holds them in memory (gate_up_proj, down_proj)
  gate=zero      Qwen2-MoE's shared_expert_gate zeroed
  bias=zero      q/k/v biases (Qwen2, Qwen2-MoE) zeroed
  tokenizer=PATH a tokenizer.json saved with the model as transformers' fast
                 tokenizer saves it (EOS: the file's last added token);
                 vocab_size is its size, or the published config's where
                 that is larger
Every parameter, norms, biases and gates included, and DeepSeek-V3's routing
bias (e_score_correction_bias, a buffer) are drawn at random so that no
mapping mistake hides behind an initial value.
"""
import json
import sys

import torch
import transformers
from safetensors.torch import save_file

# What both DeepSeek defaults share: latent attention (heads of 4 + 4 query/key
# and 4 value dims from a latent of 8), a dense first layer, a shared expert,
# the eps DeepSeek normalises its latents with.
DEEPSEEK = dict(num_key_value_heads=4, intermediate_size=24, moe_intermediate_size=8,
                n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                first_k_dense_replace=1, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4,
                v_head_dim=4, rms_norm_eps=1e-6)

FAMILIES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM,
              dict(intermediate_size=24)),
    "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM,
                dict(intermediate_size=24, sliding_window=None)),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM,
              dict(intermediate_size=24)),
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM,
              dict(intermediate_size=24, head_dim=4)),
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM,
                dict(num_local_experts=4, intermediate_size=12, num_experts_per_tok=2)),
    "qwen2_moe": (transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM,
                  dict(num_experts=4, moe_intermediate_size=12, intermediate_size=20,
                       shared_expert_intermediate_size=24, num_experts_per_tok=2)),
    "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM,
                  dict(num_experts=4, moe_intermediate_size=12, intermediate_size=20,
                       num_experts_per_tok=2)),
    "olmoe": (transformers.OlmoeConfig, transformers.OlmoeForCausalLM,
              dict(num_experts=4, intermediate_size=12, num_experts_per_tok=2, pad_token_id=None,
                   bos_token_id=None, eos_token_id=None)),
    "deepseek_v2": (transformers.DeepseekV2Config, transformers.DeepseekV2ForCausalLM,
                    dict(DEEPSEEK, q_lora_rank=None, topk_method="greedy", n_group=1,
                         topk_group=1)),
    "deepseek_v3": (transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM,
                    dict(DEEPSEEK, q_lora_rank=8, n_group=2, topk_group=1,
                         routed_scaling_factor=2.5)),
}


def shrink(published):
    """A published config made tiny: widths, layers, experts and vocabulary
    small, every structural field (heads vs key/value heads, an explicit head_dim
    that is not hidden / heads, RoPE scaling, biases, tied embeddings, dense
    layers, shared experts, gates) kept."""
    keys = dict(published)
    heads, kv = keys["num_attention_heads"], keys.get("num_key_value_heads") or keys["num_attention_heads"]
    # Enough layers that some are MoE after DeepSeek's first dense ones.
    layers = max(3, (keys.get("first_k_dense_replace") or 0) + 2)
    keys.update(hidden_size=32, num_attention_heads=4, num_key_value_heads=2 if kv < heads else 4,
                num_hidden_layers=min(keys["num_hidden_layers"], layers), vocab_size=384)
    if keys.get("head_dim"):
        explicit = published["head_dim"] * heads != published["hidden_size"]
        keys["head_dim"] = 16 if explicit else 8
    for key, width in (("intermediate_size", 48), ("moe_intermediate_size", 16),
                       ("shared_expert_intermediate_size", 24)):
        if keys.get(key):
            keys[key] = width
    # DeepSeek's latent attention: query and key heads of 8 + 4 dims, values of 6.
    for key, width in (("q_lora_rank", 12), ("kv_lora_rank", 12), ("qk_nope_head_dim", 8),
                       ("qk_rope_head_dim", 4), ("v_head_dim", 6)):
        if keys.get(key):
            keys[key] = width
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if keys.get(key):
            keys[key] = min(keys[key], 2 * keys["num_experts_per_tok"])
    if keys.get("mlp_only_layers"):
        keys["mlp_only_layers"] = [l for l in keys["mlp_only_layers"] if l < keys["num_hidden_layers"]]
    if keys.get("max_window_layers"):
        keys["max_window_layers"] = keys["num_hidden_layers"]
    return keys


def main():
    family, out = sys.argv[1:3]
    options = dict(arg.split("=", 1) for arg in sys.argv[3:])
    shard = options.pop("shard", "0") == "1"
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16,
             "f16": torch.float16}[options.pop("dtype", "f32")]
    fused = options.pop("fused", "0") == "1"
    zero_gate = options.pop("gate", "random") == "zero"
    zero_bias = options.pop("bias", "random") == "zero"
    tokenizer = options.pop("tokenizer", None)
    published = options.pop("config", None)
    config_cls, model_cls, defaults = FAMILIES[family]
    published_vocab = 0
    if published:
        with open(published, encoding="utf-8") as f:
            original = json.load(f)
        keys = shrink(original)
        published_vocab = original["vocab_size"]
    else:
        keys = dict(vocab_size=37, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=8, rms_norm_eps=1e-5,
                    tie_word_embeddings=False)
        keys.update(defaults)
    keys.update({k: json.loads(v) for k, v in options.items()})
    if tokenizer:
        with open(tokenizer, encoding="utf-8") as f:
            eos = json.load(f)["added_tokens"][-1]["content"]
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=tokenizer, eos_token=eos)
        # A published embedding may be padded past its tokenizer (Qwen's are).
        keys["vocab_size"] = max(len(tokenizer), published_vocab)
    torch.manual_seed(3)
    model = model_cls(config_cls.from_dict(keys))
    with torch.no_grad():
        for name, p in model.named_parameters():
            zero = ((zero_gate and "shared_expert_gate" in name) or
                    (zero_bias and name.endswith("proj.bias")))
            p.copy_(torch.zeros_like(p) if zero else torch.randn_like(p) * 0.3)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn_like(b) * 0.3)
    model = model.to(dtype)
    if fused:
        model.config.architectures = [model_cls.__name__]
        model.config.save_pretrained(out)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, f"{out}/model.safetensors", metadata={"format": "pt"})
    else:
        model.save_pretrained(out, max_shard_size="20KB" if shard else "5GB")
    if tokenizer:
        tokenizer.save_pretrained(out)


if __name__ == "__main__":
    main()
