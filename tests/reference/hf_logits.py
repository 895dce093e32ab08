#!/usr/bin/env python3
"""Logits of a Hugging Face model folder: `hf_logits.py MODEL_DIR TOKENS OUT`.

TOKENS holds one sequence per line (whitespace-separated token ids); OUT gets the
logits [sequences, length, vocab] as raw little-endian float32. The model loads
with transformers' AutoModelForCausalLM in float32 on the CPU. Exits 3 when
transformers cannot be imported.
"""
import sys

try:
    import torch
    import transformers
except ImportError as e:
    print(f"hf_logits.py: transformers unavailable ({e})", file=sys.stderr)
    sys.exit(3)


def main():
    model_dir, tokens_path, out_path = sys.argv[1:4]
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir,
                                                                  torch_dtype=torch.float32)
    model.eval()
    with open(tokens_path) as f:
        tokens = torch.tensor([[int(t) for t in line.split()] for line in f if line.strip()])
    with torch.no_grad():
        logits = model(tokens).logits
    logits.float().contiguous().numpy().tofile(out_path)


if __name__ == "__main__":
    main()
