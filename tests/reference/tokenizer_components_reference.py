"""Reference output of single tokenizer.json components (tests/data/hf_components_test.cpp).

    tokenizer_components_reference.py CASES_JSON OUT_JSON

CASES_JSON is a list of {"normalizer": {...}} or {"pre_tokenizer": {...}}
cases, each with "texts"; OUT_JSON gets, per case, the normalised text of each
text (`tokenizers` normalize_str) or its pieces (pre_tokenize_str).
"""

import json
import sys

from tokenizers import Tokenizer


def component_tokenizer(case):
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": case.get("normalizer"), "pre_tokenizer": case.get("pre_tokenizer"),
            "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "vocab": {}, "merges": []}}
    return Tokenizer.from_str(json.dumps(spec))


def run(case):
    tok = component_tokenizer(case)
    if "normalizer" in case:
        return [tok.normalizer.normalize_str(text) for text in case["texts"]]
    return [[piece for piece, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
            for text in case["texts"]]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump([run(case) for case in cases], f, ensure_ascii=False)


if __name__ == "__main__":
    main()
