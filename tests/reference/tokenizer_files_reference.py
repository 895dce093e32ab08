"""Reference ids of real tokenizer files (tests/data/hf_real_tokenizers_test.cpp).

    tokenizer_files_reference.py FILE DOCS_JSON OUT_JSON [--tiktoken PATTERN]
                                 [--template-docs N]

FILE is a tokenizer.json, or a .tiktoken file with --tiktoken cl100k|o200k.
Encodes every document of DOCS_JSON in one batch and writes
OUT_JSON = {"ids": ..., "template_ids": ..., "decoded": ...}:
  ids           `tokenizers` encode(add_special_tokens=False) ids, or tiktoken
                encode_ordinary (no EOS appended)
  template_ids  add_special_tokens=True ids of the first N documents
                (tokenizer.json only)
  decoded       decode(ids, skip_special_tokens=False) of each document
"""

import argparse
import base64
import json

import tiktoken
from tokenizers import Tokenizer

from tokenizer_reference import CL100K_PATTERN, O200K_PATTERN


def tokenizer_json(path, docs, template_docs):
    tok = Tokenizer.from_file(path)
    plain = [e.ids for e in tok.encode_batch_fast(docs, add_special_tokens=False)]
    with_template = [e.ids for e in tok.encode_batch_fast(docs[:template_docs],
                                                          add_special_tokens=True)]
    decoded = tok.decode_batch(plain, skip_special_tokens=False)
    return {"ids": plain, "template_ids": with_template, "decoded": decoded}


def tiktoken_file(path, pattern, docs):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    patterns = {"cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}
    enc = tiktoken.Encoding(name=f"file_{pattern}", pat_str=patterns[pattern],
                            mergeable_ranks=ranks, special_tokens={})
    ids = enc.encode_ordinary_batch(docs, num_threads=1)
    decoded = [enc.decode_bytes(d).decode("utf-8", errors="replace") for d in ids]
    return {"ids": ids, "decoded": decoded}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("docs")
    parser.add_argument("out")
    parser.add_argument("--tiktoken")
    parser.add_argument("--template-docs", type=int, default=0)
    args = parser.parse_args()
    with open(args.docs, encoding="utf-8") as f:
        docs = json.load(f)
    if args.tiktoken:
        result = tiktoken_file(args.file, args.tiktoken, docs)
    else:
        result = tokenizer_json(args.file, docs, args.template_docs)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
