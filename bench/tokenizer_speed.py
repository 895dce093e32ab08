"""Single-thread tokenizer speed: moelab (bench_tokenizer) against `tokenizers`
and tiktoken, on the same documents with the same vocabulary. Run through
bench/tokenizer_speed.sh, which sets the peers to one thread.

    tokenizer_speed.py TEXT_FILE BENCH_BINARY WORK_DIR REPEATS [TOKENIZER_JSON...]

Trains an 8k-vocabulary byte-level BPE (Llama 3 shape: Split regex +
ByteLevel) on the text with `tokenizers`, writes it as tokenizer.json and as a
.tiktoken file (cl100k pattern), checks that all three give identical ids,
then times them in interleaved repeats and prints medians. Then the same for
each published TOKENIZER_JSON (its name the folder it sits in) against
`tokenizers`: MB/s of both, their ratio, and whether the ids are identical.
"""

import base64
import json
import os
import statistics
import subprocess
import sys
import time

import tiktoken
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/tests/reference")
from tokenizer_reference import CL100K_PATTERN, LLAMA3_PATTERN, _byte_chars  # noqa: E402


def train(docs):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=8192, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer)
    return tok


def tiktoken_ranks(tok):
    inverse = {c: b for b, c in zip(range(256), _byte_chars())}
    ranks = {}
    for token, _ in sorted(tok.get_vocab().items(), key=lambda item: item[1]):
        if token != "<|endoftext|>":
            ranks[bytes(inverse[c] for c in token)] = len(ranks)
    return ranks


def moelab_run(binary, text, args, extra):
    out = subprocess.run([binary, "--text", text, *args, *extra], check=True,
                         capture_output=True, text=True).stdout
    return [float(line.split()[1]) for line in out.splitlines() if line.startswith("seconds")]


def tokenizers_seconds(tok, docs):
    """The faster of `tokenizers`' two batch paths (encode_batch_fast skips offsets)."""
    times = []
    for encode in (tok.encode_batch, tok.encode_batch_fast):
        start = time.perf_counter()
        encode(docs, add_special_tokens=False)
        times.append(time.perf_counter() - start)
    return min(times)


def published_row(path, text, binary, work, repeats, docs, megabytes):
    """One published tokenizer.json against `tokenizers`: MB/s, ratio, ids identical."""
    args = ["--tokenizer", path]
    try:
        moelab_run(binary, text, args, ["--ids-out", f"{work}/published.ids.json"])
    except subprocess.CalledProcessError as e:
        if e.returncode != 2:
            raise
        # A file whose end-of-document token the bench cannot tell: said, not measured.
        print(f"{os.path.basename(os.path.dirname(path)):28s} skipped: {e.stderr.strip()}")
        return True
    tok = Tokenizer.from_file(path)
    with open(f"{work}/published.ids.json") as f:
        ours = json.load(f)
    eos = ours[0][-1]
    same = ours == [e.ids + [eos] for e in tok.encode_batch(docs, add_special_tokens=False)]
    moelab_times, peer_times = [], []
    for _ in range(repeats):  # interleaved, so load changes hit both alike
        moelab_times += moelab_run(binary, text, args, [])
        peer_times.append(tokenizers_seconds(tok, docs))
    ours_mb_s = megabytes / statistics.median(moelab_times)
    theirs_mb_s = megabytes / statistics.median(peer_times)
    name = path.rsplit("/", 2)[-2]
    print(f"{name:28s} {ours_mb_s:9.2f} {theirs_mb_s:11.2f} {ours_mb_s / theirs_mb_s:7.2f}x "
          f"{'yes' if same else 'NO'}")
    return same


def main():
    text, binary, work = sys.argv[1:4]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    published = sys.argv[5:]
    hf_args = ["--tokenizer", f"{work}/tokenizer.json"]
    tt_args = ["--tokenizer", f"{work}/bench.tiktoken", "--eos-token", "<|endoftext|>",
               "--tiktoken-pattern", "cl100k"]
    with open(text, encoding="utf-8") as f:
        docs = [d.strip("\n") for d in f.read().split("\n<|endoftext|>\n")]
    tok = train(docs)
    tok.save(f"{work}/tokenizer.json")
    ranks = tiktoken_ranks(tok)
    with open(f"{work}/bench.tiktoken", "w") as f:
        for token, rank in ranks.items():
            f.write(f"{base64.b64encode(token).decode()} {rank}\n")
    enc = tiktoken.Encoding(name="bench", pat_str=CL100K_PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": len(ranks)})

    # Identical ids first, on moelab's own reading of the documents.
    moelab_run(binary, text, hf_args, ["--docs-out", f"{work}/docs.json",
                                       "--ids-out", f"{work}/hf.ids.json"])
    moelab_run(binary, text, tt_args, ["--ids-out", f"{work}/tt.ids.json"])
    with open(f"{work}/docs.json", encoding="utf-8") as f:
        docs = json.load(f)
    megabytes = sum(len(d.encode()) for d in docs) / 1e6
    eos = tok.token_to_id("<|endoftext|>")
    with open(f"{work}/hf.ids.json") as f:
        same_hf = json.load(f) == [e.ids + [eos] for e in tok.encode_batch(docs, add_special_tokens=False)]
    with open(f"{work}/tt.ids.json") as f:
        same_tt = json.load(f) == [enc.encode_ordinary(d) + [len(ranks)] for d in docs]
    print(f"{len(docs)} documents, {megabytes:.2f} MB; ids identical: tokenizers {same_hf}, "
          f"tiktoken {same_tt}")

    times = {name: [] for name in ("moelab tokenizer.json", "tokenizers",
                                   "tokenizers (batch_fast)", "moelab tiktoken", "tiktoken")}
    for _ in range(repeats):  # interleaved, so load changes hit every contender alike
        times["moelab tokenizer.json"] += moelab_run(binary, text, hf_args, [])
        start = time.perf_counter()
        tok.encode_batch(docs, add_special_tokens=False)
        times["tokenizers"].append(time.perf_counter() - start)
        start = time.perf_counter()  # no offsets: the fastest `tokenizers` path
        tok.encode_batch_fast(docs, add_special_tokens=False)
        times["tokenizers (batch_fast)"].append(time.perf_counter() - start)
        times["moelab tiktoken"] += moelab_run(binary, text, tt_args, [])
        start = time.perf_counter()
        for d in docs:
            enc.encode_ordinary(d)
        times["tiktoken"].append(time.perf_counter() - start)
    speed = {name: megabytes / statistics.median(t) for name, t in times.items()}
    for name, mb_s in speed.items():
        print(f"{name:24s} {mb_s:8.2f} MB/s (median of {len(times[name])})")
    fastest = max(speed["tokenizers"], speed["tokenizers (batch_fast)"])
    print(f"ratio moelab / tokenizers (its faster path): "
          f"{speed['moelab tokenizer.json'] / fastest:.2f}x")
    print(f"ratio moelab / tiktoken: {speed['moelab tiktoken'] / speed['tiktoken']:.2f}x")
    same_published = True
    if published:
        print(f"\npublished tokenizer.json, MB/s (median of {repeats}; tokenizers: its faster path)")
        print(f"{'file':28s} {'moelab':>9s} {'tokenizers':>11s} {'ratio':>8s} ids identical")
        for path in published:
            same_published = published_row(path, text, binary, work, repeats, docs,
                                           megabytes) and same_published
    if not (same_hf and same_tt and same_published):
        sys.exit("ids differ")


if __name__ == "__main__":
    main()
