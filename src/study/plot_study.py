#!/usr/bin/env python3
"""Plots a study report: `plot_study.py STUDY_DIR`.

Reads curves.csv (variant,seed,step,tokens,val_loss) and gap_curves.csv
(pair,seed,step,tokens,gap) written by `moelab report`, and writes
curves.png (validation loss per variant, mean with a +-1 sample-std band over
seeds) and gaps.png (each paired gap over training, same band). At a step where
only one seed has a value the band is omitted (no spread to show).

When runs validate on named sets ([[eval.sets]]) it reads set_curves.csv
(variant,seed,set,step,tokens,val_loss) and writes set_curves.png: one panel per
set, the same bands per variant. When runs score downstream tasks
([[eval.tasks]]) it reads task_curves.csv (variant,seed,task,step,tokens,value)
and writes task_curves.png: one panel per task metric, the same bands.

For a grid study it also reads axis_summary.csv (variant,kind,<axes>,n,
best_mean,best_std,...) and writes axis.png: best validation loss (mean with
+-1 std error bars) against the first axis column, one line per value of the
second axis column and per kind (moe / matched dense).

For an activation-rate sweep it reads rate_summary.csv (variant,kind,
activation_rate,n,best_mean,best_std,...,epochs) and writes activation_rate.png:
the MoE variants' best validation loss against top_k / num_experts (log scale),
one line per top_k, each dense variant as a horizontal band (mean +-1 std).
"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read_series(path, group_key, value_key):
    """{group: {step: [values over seeds]}} and {group: {step: tokens}}."""
    values = defaultdict(lambda: defaultdict(list))
    tokens = defaultdict(dict)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = int(row["step"])
            values[row[group_key]][step].append(float(row[value_key]))
            tokens[row[group_key]][step] = int(row["tokens"])
    return values, tokens


def plot_bands(ax, values, tokens):
    for group in sorted(values):
        steps = sorted(values[group])
        x = np.array([tokens[group][s] for s in steps], dtype=float)
        mean = np.array([np.mean(values[group][s]) for s in steps])
        n = np.array([len(values[group][s]) for s in steps])
        std = np.array([np.std(values[group][s], ddof=1) if len(values[group][s]) > 1 else 0.0
                        for s in steps])
        line, = ax.plot(x, mean, marker="o", markersize=3,
                        label=f"{group} (n={n.max()})")
        ax.fill_between(x, mean - std, mean + std, where=n > 1, alpha=0.25,
                        color=line.get_color(), linewidth=0)
    ax.set_xlabel("training tokens")
    ax.grid(alpha=0.3)
    ax.legend()


def save(fig, path):
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def plot_axes(study_dir):
    path = os.path.join(study_dir, "axis_summary.csv")
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [r for r in reader if r[header.index("best_mean")]]
    axes = header[2:header.index("n")]
    if not rows or not axes:
        return
    x_labels = []
    for r in rows:
        if r[2] not in x_labels:
            x_labels.append(r[2])
    try:
        x_of = {label: float(label) for label in x_labels}
    except ValueError:  # categorical values: evenly spaced, in study order
        x_of = {label: float(i) for i, label in enumerate(x_labels)}
    lines = defaultdict(list)
    for r in rows:
        key = (r[3] if len(axes) > 1 else "", r[1])
        std = r[header.index("best_std")]
        lines[key].append((x_of[r[2]], float(r[header.index("best_mean")]),
                           float(std) if std else 0.0))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (line, kind), points in sorted(lines.items()):
        points.sort()
        label = (f"{axes[1]} = {line}, " if len(axes) > 1 else "") + kind
        ax.errorbar([p[0] for p in points], [p[1] for p in points],
                    yerr=[p[2] for p in points], marker="o", capsize=3,
                    linestyle="-" if kind == "moe" else "--", label=label)
    ax.set_xticks(sorted(set(x_of.values())))
    ax.set_xticklabels([lb for lb, _ in sorted(x_of.items(), key=lambda kv: kv[1])])
    ax.set_xlabel(axes[0])
    ax.set_ylabel("best validation loss")
    ax.set_title("Best validation loss (mean ± std over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, os.path.join(study_dir, "axis.png"))


def plot_rates(study_dir):
    path = os.path.join(study_dir, "rate_summary.csv")
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["best_mean"]]
    moe = sorted(((float(r["activation_rate"]), r) for r in rows if r["kind"] == "moe"),
                 key=lambda point: point[0])
    dense = [r for r in rows if r["kind"] == "dense"]
    if not moe:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, r in enumerate(dense):  # grey first: the MoE lines take the first colours
        mean = float(r["best_mean"])
        std = float(r["best_std"]) if r["best_std"] else 0.0
        name = "dense" if r["variant"] == "dense" else f"{r['variant']} (dense)"
        color = f"C{(7 + i) % 10}"
        ax.axhline(mean, linestyle="--", linewidth=1, color=color, label=f"{name}, n={r['n']}")
        ax.axhspan(mean - std, mean + std, alpha=0.2, color=color, linewidth=0)
    by_k = defaultdict(list)  # the same rate at another top_k is another model
    for x, r in moe:
        by_k[r["top_k"]].append((x, r))
    for k, points in sorted(by_k.items()):
        ax.errorbar([x for x, _ in points], [float(r["best_mean"]) for _, r in points],
                    yerr=[float(r["best_std"]) if r["best_std"] else 0.0 for _, r in points],
                    marker="o", capsize=3, label=f"MoE top-{k} (mean ± std)")
    for x, r in moe:
        epochs = f", {float(r['epochs']):.1f} ep" if r["epochs"] else ""
        ax.annotate(f"{r['variant']}{epochs}", (x, float(r["best_mean"])),
                    textcoords="offset points", xytext=(4, 6), fontsize=8)
    rates = sorted({x for x, _ in moe})
    ax.set_xscale("log", base=2)
    ax.set_xticks(rates)
    ax.set_xticklabels([f"1/{1 / x:.3g}" if x < 1 else "1" for x in rates])
    ax.set_xlabel("activation rate (top_k / num_experts)")
    ax.set_ylabel("best validation loss")
    ax.set_title("Best validation loss against activation rate (mean ± std over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, os.path.join(study_dir, "activation_rate.png"))


def plot_panels(study_dir, csv_name, key, value, ylabel, title, png_name):
    """One panel per distinct `key` of csv_name's rows (variant,seed,key,step,
    tokens,value), each variant's mean ± std band over seeds."""
    path = os.path.join(study_dir, csv_name)
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    names = sorted({row[key] for row in rows})
    if not names:
        return
    columns = min(len(names), 3)
    grid_rows = (len(names) + columns - 1) // columns
    fig, axes = plt.subplots(grid_rows, columns, figsize=(6 * columns, 4.5 * grid_rows),
                             squeeze=False)
    for ax, name in zip(axes.flat, names):
        values = defaultdict(lambda: defaultdict(list))
        tokens = defaultdict(dict)
        for row in rows:
            if row[key] == name:
                step = int(row["step"])
                values[row["variant"]][step].append(float(row[value]))
                tokens[row["variant"]][step] = int(row["tokens"])
        plot_bands(ax, values, tokens)
        ax.set_ylabel(ylabel(name))
        ax.set_title(title(name))
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    save(fig, os.path.join(study_dir, png_name))


def plot_sets(study_dir):
    plot_panels(study_dir, "set_curves.csv", "set", "val_loss", lambda name: "validation loss",
                lambda name: f"val_loss/{name} (mean ± std over seeds)", "set_curves.png")


def plot_tasks(study_dir):
    plot_panels(study_dir, "task_curves.csv", "task", "value", lambda name: name.split("/")[-1],
                lambda name: f"task/{name} (mean ± std over seeds)", "task_curves.png")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_study.py STUDY_DIR")
    study_dir = sys.argv[1]

    values, tokens = read_series(os.path.join(study_dir, "curves.csv"), "variant", "val_loss")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_bands(ax, values, tokens)
    ax.set_ylabel("validation loss")
    ax.set_title("Validation loss (mean ± std over seeds)")
    save(fig, os.path.join(study_dir, "curves.png"))

    values, tokens = read_series(os.path.join(study_dir, "gap_curves.csv"), "pair", "gap")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if values:
        plot_bands(ax, values, tokens)
    else:
        ax.text(0.5, 0.5, "no paired variants finished", ha="center", transform=ax.transAxes)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_ylabel("validation loss gap (a - b)")
    ax.set_title("Paired gaps over training (mean ± std over seeds)")
    save(fig, os.path.join(study_dir, "gaps.png"))
    plot_sets(study_dir)
    plot_tasks(study_dir)
    plot_axes(study_dir)
    plot_rates(study_dir)


if __name__ == "__main__":
    main()
