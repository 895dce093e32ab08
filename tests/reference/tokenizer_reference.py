"""Reference ids for moelab's tokenizer tests (tests/data/hf_tokenizer_test.cpp).

    tokenizer_reference.py DIR NAME...

Reads DIR/train.json (documents to train on) and DIR/docs.json (documents to
encode), trains a small byte-level BPE with the `tokenizers` package and writes
tokenizer files in the shapes real models ship:
  gpt2.json      ByteLevel pre-tokenizer (GPT-2 regex), merges as "a b" strings
  prefix.json    the same with ByteLevel add_prefix_space
  llama3.json    Split(Llama 3 regex, Isolated) + ByteLevel, ignore_merges,
                 merges as ["a", "b"] pairs, <|begin_of_text|>/<|end_of_text|>
  llama2.json    SentencePiece-style: Prepend("▁") + Replace(" ", "▁")
                 normalizer, byte fallback, unk token </s>
  metaspace.json Metaspace pre-tokenizer (prepend_scheme "first", split)
  composite.json byte-level BPE behind components no published file
                 combines (NFKD, Lowercase, Replace, Strip; Split, Punctuation,
                 Digits, WhitespaceSplit, ByteLevel with a prefix space), added
                 tokens with every option and a template that ends with EOS
  characters.json  character-level BPE with an unknown token and byte pieces
                 for a few bytes, behind NFD and Lowercase, Whitespace then
                 Metaspace ("first", no split)
  ranks.tiktoken  Llama 3's byte-level vocabulary as tiktoken ranks
for each NAME asked for (gpt2, prefix, llama3, llama2, metaspace, composite,
characters, or tiktoken_gpt2 / tiktoken_cl100k / tiktoken_o200k for
ranks.tiktoken with that pattern), with DIR/NAME.ids.json: the ids of every
document of docs.json followed by the EOS id (`tokenizers`:
encode_batch(add_special_tokens=False); tiktoken: encode_ordinary), and for a
file with a template DIR/NAME.template_ids.json (add_special_tokens=True, no
EOS added).
"""

import base64
import json
import sys

import tiktoken
from tiktoken_ext import openai_public
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# tiktoken_ext/openai_public.py builds these inside functions that download
# the vocabularies, so the patterns are copied here.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
METASPACE = "\u2581"


def train_byte_level(train, pre_tokenizer, specials, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(train, trainer)
    return json.loads(tok.to_str())


def train_metaspace(train):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
        show_progress=False,
    )
    tok.train_from_iterator(train, trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for byte in range(256):  # byte-fallback pieces, as Llama 2's vocabulary has them
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    return spec


def gpt2_files(train):
    gpt2 = train_byte_level(
        train, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ["<|endoftext|>"], False)
    gpt2["model"]["merges"] = [" ".join(pair) for pair in gpt2["model"]["merges"]]
    prefix = json.loads(json.dumps(gpt2))
    prefix["pre_tokenizer"]["add_prefix_space"] = True
    return {"gpt2": gpt2, "prefix": prefix}


def llama3_spec(train):
    split = pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return train_byte_level(train, pre_tokenizers.Sequence([split, byte_level]),
                            ["<|begin_of_text|>", "<|end_of_text|>"], True)


def sentencepiece_files(train):
    metaspace = train_metaspace(train)
    llama2 = json.loads(json.dumps(metaspace))
    llama2["pre_tokenizer"] = None
    llama2["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": METASPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}]}
    llama2["decoder"] = {"type": "Sequence", "decoders": [  # as Llama 2's file has it
        {"type": "Replace", "pattern": {"String": METASPACE}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    metaspace["pre_tokenizer"] = {"type": "Metaspace", "replacement": METASPACE,
                                  "prepend_scheme": "first", "split": True}
    metaspace["decoder"] = {"type": "Metaspace", "replacement": METASPACE,
                            "prepend_scheme": "first", "split": True}
    return {"llama2": llama2, "metaspace": metaspace}


def composite_spec(train):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKD(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[0-9]{4,}"), "0000"), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Punctuation(behavior="merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<|endoftext|>", "<bos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train, trainer)
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, rstrip=True, normalized=False),
                            AddedToken("<sep>", rstrip=True, normalized=True)])
    tok.add_tokens([AddedToken("hello", normalized=True),
                    AddedToken("wor", single_word=True, normalized=False),
                    AddedToken("  ", lstrip=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A <|endoftext|>",
        special_tokens=[("<bos>", tok.token_to_id("<bos>")),
                        ("<|endoftext|>", tok.token_to_id("<|endoftext|>"))])
    return json.loads(tok.to_str())


def characters_spec(train):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(),
        pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="first", split=False)])
    tok.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "</s>"],
                                  limit_alphabet=60, show_progress=False)
    tok.train_from_iterator(train, trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False)])
    spec = json.loads(tok.to_str())
    # Byte pieces for a few bytes only: characters of them fall back to bytes,
    # other unknown ones become <unk> (which waits for the next known character).
    vocab = spec["model"]["vocab"]
    for byte in "\u65e5".encode():  # 日 falls back to bytes, 本 (E6 9C AC) is <unk>
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    spec["added_tokens"][-1]["id"] = len(vocab)
    return spec


def hf_spec(name, train):
    if name in ("gpt2", "prefix"):
        return gpt2_files(train)[name]
    if name == "llama3":
        return llama3_spec(train)
    if name == "composite":
        return composite_spec(train)
    if name == "characters":
        return characters_spec(train)
    return sentencepiece_files(train)[name]


def eos_of(name):
    return {"llama3": "<|end_of_text|>", "llama2": "</s>", "metaspace": "</s>",
            "characters": "</s>"}.get(name, "<|endoftext|>")


def write_hf(out, name, spec, docs):
    text = json.dumps(spec, ensure_ascii=False)
    with open(f"{out}/{name}.json", "w", encoding="utf-8") as f:
        f.write(text)
    tok = Tokenizer.from_str(text)
    eos = tok.token_to_id(eos_of(name))
    ids = [e.ids + [eos] for e in tok.encode_batch(docs, add_special_tokens=False)]
    with open(f"{out}/{name}.ids.json", "w") as f:
        f.write(json.dumps(ids))
    if spec.get("post_processor"):
        ids = [e.ids for e in tok.encode_batch(docs, add_special_tokens=True)]
        with open(f"{out}/{name}.template_ids.json", "w") as f:
            f.write(json.dumps(ids))


def write_tiktoken(out, pattern_name, llama3, docs):
    inverse = {c: b for b, c in zip(range(256), _byte_chars())}
    ranks = {}
    for token, _ in sorted(llama3["model"]["vocab"].items(), key=lambda item: item[1]):
        if all(c in inverse for c in token) and not token.startswith("<|"):
            ranks[bytes(inverse[c] for c in token)] = len(ranks)
    with open(f"{out}/ranks.tiktoken", "w") as f:
        for token, rank in ranks.items():
            f.write(f"{base64.b64encode(token).decode()} {rank}\n")
    patterns = {"gpt2": openai_public.r50k_pat_str, "cl100k": CL100K_PATTERN,
                "o200k": O200K_PATTERN}
    enc = tiktoken.Encoding(name=f"test_{pattern_name}", pat_str=patterns[pattern_name],
                            mergeable_ranks=ranks, special_tokens={"<|endoftext|>": len(ranks)})
    ids = [enc.encode_ordinary(doc) + [len(ranks)] for doc in docs]
    with open(f"{out}/tiktoken_{pattern_name}.ids.json", "w") as f:
        f.write(json.dumps(ids))


def _byte_chars():
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))
                 + list(range(0xAE, 0x100)))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def main():
    out = sys.argv[1]
    with open(f"{out}/train.json", encoding="utf-8") as f:
        train = json.load(f)
    with open(f"{out}/docs.json", encoding="utf-8") as f:
        docs = json.load(f)
    for name in sys.argv[2:]:
        if name.startswith("tiktoken_"):
            write_tiktoken(out, name[len("tiktoken_"):], llama3_spec(train), docs)
        else:
            write_hf(out, name, hf_spec(name, train), docs)


if __name__ == "__main__":
    main()
