#!/usr/bin/env python3
"""Ids of texts by an exported tokenizer: `hf_tokenize.py MODEL_DIR TEXTS OUT`.

TEXTS holds one text per line; OUT gets one line of space-separated ids per
text, from transformers' AutoTokenizer.from_pretrained(MODEL_DIR).
"""
import sys

import transformers


def main():
    model_dir, texts_path, out_path = sys.argv[1:4]
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    with open(texts_path, encoding="utf-8") as f, open(out_path, "w") as out:
        for line in f.read().split("\n"):
            out.write(" ".join(str(i) for i in tokenizer(line)["input_ids"]) + "\n")


if __name__ == "__main__":
    main()
