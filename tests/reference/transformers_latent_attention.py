#!/usr/bin/env python3
"""transformers' DeepseekV3Attention on moelab's latent-attention weights.

Usage: transformers_latent_attention.py DIR

DIR holds config.json (DeepseekV3Config's attention keys and rope_parameters),
params.json (moelab's parameter names and shapes) with one raw float64 file
per parameter under params/, and x.bin (float64 [1, S, hidden_size]). The
attention runs in double with rope_interleave = true, the weights renamed to
DeepSeek's and the RoPE rows of the query and of the shared key reordered from
moelab's rotate-half pairs (i, i + n/2) to DeepSeek's interleaved pairs
(2i, 2i + 1); out.bin gets its output (float64 [1, S, hidden_size]).
transformers is pinned in launch/requirements.txt: without it this script
fails, and so does the test.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (DeepseekV3Attention,
                                                                   DeepseekV3RotaryEmbedding)


def interleave_rope_rows(w, rows_per_group, rope):
    # Each group of rows ends in `rope` RoPE rows [a_0..a_{n/2-1}, b_0..b_{n/2-1}];
    # DeepSeek lays them out a_0, b_0, a_1, b_1, ...
    groups = w.reshape(-1, rows_per_group, w.shape[-1])
    rot = groups[:, rows_per_group - rope:]
    half = rope // 2
    interleaved = torch.stack([rot[:, :half], rot[:, half:]], dim=2).reshape(rot.shape)
    return torch.cat([groups[:, :rows_per_group - rope], interleaved], dim=1).reshape(w.shape)


def deepseek_weights(p, cfg):
    rope, heads = cfg["qk_rope_head_dim"], cfg["num_attention_heads"]
    qk_head = cfg["qk_nope_head_dim"] + rope
    out = {
        "kv_a_proj_with_mqa.weight": interleave_rope_rows(p["wkv_a"], p["wkv_a"].shape[0], rope),
        "kv_a_layernorm.weight": p["kv_a_norm.weight"],
        "kv_b_proj.weight": p["wkv_b"],
        "o_proj.weight": p["wo"],
    }
    if cfg["q_lora_rank"]:
        out["q_a_proj.weight"] = p["wq_a"]
        out["q_a_layernorm.weight"] = p["q_a_norm.weight"]
        out["q_b_proj.weight"] = interleave_rope_rows(p["wq_b"], qk_head, rope)
    else:
        out["q_proj.weight"] = interleave_rope_rows(p["wq"], qk_head, rope)
    assert heads * qk_head == (p["wq_b"] if cfg["q_lora_rank"] else p["wq"]).shape[0]
    return out


def main():
    out_dir = sys.argv[1]
    with open(os.path.join(out_dir, "config.json")) as fh:
        cfg = json.load(fh)
    with open(os.path.join(out_dir, "params.json")) as fh:
        shapes = json.load(fh)
    p = {name: torch.from_numpy(np.fromfile(os.path.join(out_dir, "params", name),
                                            dtype=np.float64).reshape(shape))
         for name, shape in shapes.items()}
    config = DeepseekV3Config(**cfg, num_key_value_heads=cfg["num_attention_heads"],
                              attention_bias=False, rope_interleave=True)
    config._attn_implementation = "eager"
    attention = DeepseekV3Attention(config, layer_idx=0).double()
    attention.load_state_dict(deepseek_weights(p, cfg))
    seq, hidden = cfg["max_position_embeddings"], cfg["hidden_size"]
    x = torch.from_numpy(np.fromfile(os.path.join(out_dir, "x.bin"), dtype=np.float64))
    x = x.reshape(1, seq, hidden)
    positions = torch.arange(seq)[None]
    cos, sin = DeepseekV3RotaryEmbedding(config)(x, positions)
    mask = torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        y, _ = attention(x, (cos.double(), sin.double()), mask)
    y.contiguous().numpy().astype(np.float64).tofile(os.path.join(out_dir, "out.bin"))


if __name__ == "__main__":
    main()
