#!/usr/bin/env python3
"""How much of the routing similarity is shared vocabulary?

Usage: token_overlap.py DATA_DIR ROUTING_SUMMARY_JSD_CSV [--variant moe]
                        [--group NAME=SET,SET,...]...

DATA_DIR holds the per-language datasets of data_prep/fortunes-multilingual.sh
(DATA_DIR/<lang>/val/shard_*.h5, one tokenizer). For every two languages it
computes the Jensen-Shannon divergence (natural log, as moelab's routing
analysis) of their validation tokens' unigram distributions, prints it beside
the routing divergence of `moelab analyze routing STUDY --out DIR`
(DIR/routing_summary_jsd.csv, mean over seeds) per MoE layer, and the Spearman
rank correlation over the pairs of each layer's routing divergence with the
token divergence. Each --group gets the contrast `analyze routing --group`
gives for routing (the mean divergence within the group, to the other sets,
and their gap), here of the token distributions. Needs numpy and h5py
(python3-h5py).
"""
import argparse
import csv
import glob
import itertools
import os
import sys

import h5py
import numpy as np


def unigram(lang_dir, vocab):
    counts = np.zeros(vocab)
    for shard in sorted(glob.glob(os.path.join(lang_dir, "val", "shard_*.h5"))):
        with h5py.File(shard) as f:
            counts += np.bincount(f["tokens"][:], minlength=vocab)[:vocab]
    return counts / counts.sum()


def jsd(p, q):
    m = (p + q) / 2

    def kl(a):
        nz = a > 0
        return float(np.sum(a[nz] * np.log(a[nz] / m[nz])))

    return (kl(p) + kl(q)) / 2


def ranks(values):
    order = np.argsort(values)
    r = np.empty(len(values))
    r[order] = np.arange(len(values))
    return r


def spearman(a, b):
    return float(np.corrcoef(ranks(np.array(a)), ranks(np.array(b)))[0, 1])


def group_contrast(jsd_of, langs, members):
    within = [jsd_of[tuple(sorted(p))] for p in itertools.combinations(members, 2)]
    outside = [jsd_of[tuple(sorted((a, b)))] for a in members for b in langs if b not in members]
    return np.mean(within), np.mean(outside)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("routing_csv")
    parser.add_argument("--variant", default="moe")
    parser.add_argument("--group", action="append", default=[])
    args = parser.parse_args()
    routing = {}  # layer -> (a, b) -> mean JSD over seeds
    with open(args.routing_csv) as f:
        for row in csv.DictReader(f):
            if row["variant"] == args.variant:
                pair = tuple(sorted((row["set_a"], row["set_b"])))
                routing.setdefault(row["layer"], {})[pair] = float(row["jsd_mean"])
    langs = sorted({lang for pairs in routing.values() for pair in pairs for lang in pair})
    dist = {lang: unigram(os.path.join(args.data_dir, lang), 65536) for lang in langs}
    pairs = [tuple(sorted(p)) for p in itertools.combinations(langs, 2)]
    tokens = {p: jsd(dist[p[0]], dist[p[1]]) for p in pairs}
    layers = sorted(routing, key=lambda l: (l == "mean", l))
    print("set_a,set_b,token_jsd," + ",".join(f"routing_jsd_layer_{l}" for l in layers))
    for p in sorted(pairs, key=lambda p: tokens[p]):
        print(f"{p[0]},{p[1]},{tokens[p]:.4f}," +
              ",".join(f"{routing[l][p]:.4f}" for l in layers))
    for l in layers:
        rho = spearman([tokens[p] for p in pairs], [routing[l][p] for p in pairs])
        print(f"# Spearman(token JSD, routing JSD layer {l}) over {len(pairs)} pairs: {rho:.3f}")
    for spec in args.group:
        name, members = spec.split("=")
        members = members.split(",")
        for what, jsd_of in (("tokens", tokens), ("routing (mean over layers)", routing["mean"])):
            within, outside = group_contrast(jsd_of, langs, members)
            print(f"# {name} {what}: JSD within {within:.4f}, to the other sets {outside:.4f}, "
                  f"gap {outside - within:.4f}")


if __name__ == "__main__":
    main()
