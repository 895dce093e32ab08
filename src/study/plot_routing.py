#!/usr/bin/env python3
"""Heatmaps of a routing analysis: `plot_routing.py DIR`.

For one checkpoint's analysis (DIR holds routing_experts.csv and
routing_jsd.csv, written by `moelab analyze routing`) it writes
routing_experts.png (per MoE layer, the sets x experts matrix of shares of
routed assignments) and routing_jsd.png (the sets x sets Jensen-Shannon
divergence, mean over the MoE layers).

For a study's analysis (DIR holds routing_summary_jsd.csv) it does the same in
every run's folder (DIR/<variant>/seed<seed>) and writes
routing_jsd_<variant>.png in DIR: the mean over seeds of the sets x sets
divergence (mean over layers), each cell annotated mean +- std.
"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def ordered(values):
    """The distinct values in order of first appearance."""
    return list(dict.fromkeys(values))


def jsd_matrix(rows, sets, key):
    """sets x sets of float(row[key]) for the rows of layer "mean" (0 on the diagonal)."""
    m = np.zeros((len(sets), len(sets)))
    for r in rows:
        if r["layer"] != "mean" or not r[key]:
            continue
        a, b = sets.index(r["set_a"]), sets.index(r["set_b"])
        m[a, b] = m[b, a] = float(r[key])
    return m


def draw_matrix(ax, m, labels, title, notes=None):
    image = ax.imshow(m, cmap="viridis")
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_title(title)
    if notes is not None:
        for a in range(len(labels)):
            for b in range(len(labels)):
                ax.text(b, a, notes[a][b], ha="center", va="center", fontsize=6, color="w")
    return image


def plot_run(run_dir):
    experts = read_rows(os.path.join(run_dir, "routing_experts.csv"))
    layers = ordered(r["layer"] for r in experts)
    sets = ordered(r["set"] for r in experts)
    n_experts = 1 + max(int(r["expert"]) for r in experts)
    fig, axes = plt.subplots(len(layers), 1, figsize=(max(4, 0.25 * n_experts + 2),
                                                      0.4 * len(sets) * len(layers) + 1.5),
                             squeeze=False)
    for ax, layer in zip(axes[:, 0], layers):
        m = np.zeros((len(sets), n_experts))
        for r in experts:
            if r["layer"] == layer:
                m[sets.index(r["set"]), int(r["expert"])] = float(r["share"])
        image = ax.imshow(m, aspect="auto", cmap="magma", vmin=0)
        ax.set_yticks(range(len(sets)), sets)
        ax.set_ylabel(f"layer {layer}")
        fig.colorbar(image, ax=ax, label="share")
    axes[-1, 0].set_xlabel("expert")
    fig.tight_layout()
    fig.savefig(os.path.join(run_dir, "routing_experts.png"), dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(0.5 * len(sets) + 2.5, 0.5 * len(sets) + 2))
    m = jsd_matrix(read_rows(os.path.join(run_dir, "routing_jsd.csv")), sets, "jsd")
    fig.colorbar(draw_matrix(ax, m, sets, "JSD (nats), mean over MoE layers"), ax=ax)
    fig.tight_layout()
    fig.savefig(os.path.join(run_dir, "routing_jsd.png"), dpi=120)
    plt.close(fig)


def plot_study(study_dir):
    rows = read_rows(os.path.join(study_dir, "routing_summary_jsd.csv"))
    by_variant = defaultdict(list)
    for r in rows:
        by_variant[r["variant"]].append(r)
    for variant, vrows in by_variant.items():
        sets = ordered([r["set_a"] for r in vrows] + [r["set_b"] for r in vrows])
        mean = jsd_matrix(vrows, sets, "jsd_mean")
        std = jsd_matrix(vrows, sets, "jsd_std")
        notes = [[f"{mean[a, b]:.3f}\n±{std[a, b]:.3f}" if a != b else ""
                  for b in range(len(sets))] for a in range(len(sets))]
        n = vrows[0]["n"]
        fig, ax = plt.subplots(figsize=(0.7 * len(sets) + 2.5, 0.7 * len(sets) + 2))
        image = draw_matrix(ax, mean, sets, f"{variant}\nJSD (nats), mean over layers, {n} seeds",
                            notes)
        fig.colorbar(image, ax=ax)
        fig.tight_layout()
        fig.savefig(os.path.join(study_dir, f"routing_jsd_{variant}.png"), dpi=120)
        plt.close(fig)
        for seed_dir in sorted(os.listdir(os.path.join(study_dir, variant))):
            plot_run(os.path.join(study_dir, variant, seed_dir))


def main():
    target = sys.argv[1]
    if os.path.exists(os.path.join(target, "routing_summary_jsd.csv")):
        plot_study(target)
    else:
        plot_run(target)


if __name__ == "__main__":
    main()
