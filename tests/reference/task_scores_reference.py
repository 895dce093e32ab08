#!/usr/bin/env python3
"""The referee for moelab's downstream scores, written from the published
definitions (OLMo's in-loop ICL metric, lm-evaluation-harness's loglikelihood
requests), not from moelab's code:

    task_scores_reference.py MODEL_DIR TASKS_DIR TASK[,TASK...] LIMIT SEQ_LEN OUT

reads the first LIMIT items of each TASKS_DIR/TASK.jsonl (moelab tasks prep's
request file: token ids, so tokenizing is not refereed here), runs the
transformers model in MODEL_DIR (float32, CPU) on each choice alone, and
writes OUT as JSON: {TASK: {"loglik": [[...]], "greedy": [[...]], "metrics": {...}}}.

Per choice: the input is context + continuation without its last token, cut
from the left to SEQ_LEN tokens; the continuation's log-likelihood is the sum
of log_softmax(logits) at its tokens over the last len(continuation) positions,
and it is greedy when each of those tokens is the argmax there.
Per item (gold g): acc = argmax_c LL_c == g (a cloze: greedy_g);
len_norm = argmax_c LL_c / chars_c == g; tok_norm = argmax_c LL_c / tokens_c == g;
bpb = -LL_g / bytes_g / ln 2; each averaged over items. Exits 3 when
transformers cannot be imported.
"""
import json
import math
import sys

try:
    import torch
    import transformers
except ImportError as e:
    print(f"task_scores_reference.py: transformers unavailable ({e})", file=sys.stderr)
    sys.exit(3)


def load_model(model_dir):
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    return model.eval()


def choice_score(model, context, continuation, seq_len):
    tokens = (context + continuation)[:-1][-seq_len:]
    with torch.no_grad():
        logits = model(torch.tensor([tokens])).logits[0].double()
    scored = logits[len(tokens) - len(continuation):]
    target = torch.tensor(continuation)
    loglik = torch.log_softmax(scored, -1).gather(1, target[:, None]).sum().item()
    greedy = bool((scored.argmax(-1) == target).all())
    return loglik, greedy


def first_best(values):
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def metrics(kind, items, logliks, greedies):
    sums = {"acc": 0.0, "len_norm": 0.0, "tok_norm": 0.0, "bpb": 0.0}
    for item, ll, greedy in zip(items, logliks, greedies):
        gold, choices = item["gold"], item["choices"]
        sums["bpb"] += -ll[gold] / choices[gold]["bytes"] / math.log(2)
        if kind == "cloze":
            sums["acc"] += greedy[gold]
            continue
        sums["acc"] += first_best(ll) == gold
        sums["len_norm"] += first_best([l / c["chars"] for l, c in zip(ll, choices)]) == gold
        sums["tok_norm"] += first_best([l / len(c["continuation"]) for l, c in zip(ll, choices)]) == gold
    names = ["acc", "bpb"] if kind == "cloze" else ["acc", "len_norm", "tok_norm", "bpb"]
    return {name: sums[name] / len(items) for name in names}


def score_task(model, tasks_dir, task, limit, seq_len):
    with open(f"{tasks_dir}/tasks.json") as f:
        kind = next(t["kind"] for t in json.load(f)["tasks"] if t["name"] == task)
    with open(f"{tasks_dir}/{task}.jsonl") as f:
        items = [json.loads(line) for line in f][: limit or None]
    logliks, greedies = [], []
    for item in items:
        scores = [choice_score(model, c.get("context", item["context"]), c["continuation"], seq_len)
                  for c in item["choices"]]
        logliks.append([s[0] for s in scores])
        greedies.append([s[1] for s in scores])
    return {"loglik": logliks, "greedy": greedies,
            "metrics": metrics(kind, items, logliks, greedies)}


def main():
    model_dir, tasks_dir, tasks, limit, seq_len, out = sys.argv[1:7]
    model = load_model(model_dir)
    scores = {task: score_task(model, tasks_dir, task, int(limit), int(seq_len))
              for task in tasks.split(",")}
    with open(out, "w") as f:
        json.dump(scores, f)


if __name__ == "__main__":
    main()
