#!/usr/bin/env python3
"""transformers' own RoPE frequencies, for moelab's RoPE-scaling test.

Usage: transformers_rope.py CASES OUT

CASES is a JSON list of {"head_dim", "max_position_embeddings",
"rope_parameters"} (transformers' keys: rope_type, rope_theta, factor, ...).
OUT gets a JSON list of {"inv_freq": [...], "attention_factor": m}, one per
case, from the function transformers' Llama models call for that rope_type
(modeling_rope_utils.ROPE_INIT_FUNCTIONS). transformers is pinned in
launch/requirements.txt: without it this script fails, and so does the test.
"""
import json
import sys

import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS


def main():
    with open(sys.argv[1]) as fh:
        cases = json.load(fh)
    out = []
    for case in cases:
        params = case["rope_parameters"]
        config = transformers.LlamaConfig(
            hidden_size=case["head_dim"], num_attention_heads=1, head_dim=case["head_dim"],
            max_position_embeddings=case["max_position_embeddings"], rope_parameters=params)
        inv_freq, factor = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu")
        out.append({"inv_freq": inv_freq.double().tolist(), "attention_factor": float(factor)})
    with open(sys.argv[2], "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
