#!/usr/bin/env python3
"""Tables and plots of the conversion runs: `tabulate.py RUNS_DIR OUT_DIR`.

Reads RUNS_DIR/starts.csv (model,step,val_loss: the dense model and every
converted or upcycled start, evaluated before training) and each run's val.csv
(runs <name><seed> for seeds 0 and 1), and writes OUT_DIR/results.md,
results.csv, curves.png and starts.csv.

Quality retained is measured on the loss scale between a uniform guess over the
vocabulary (ln 4096) and a dense reference: (ln V - loss) / (ln V - reference).
As converted, the reference is the dense model the conversion started from;
after the 100-step fine-tune, it is that dense model trained for the same 100
steps with the same settings (dense-ft).
"""
import csv
import math
import os
import shutil
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LN_V = math.log(4096)


def read_val(path):
    with open(path, newline="") as f:
        return [(int(r["tokens"]), float(r["val_loss"])) for r in csv.DictReader(f)]


def main():
    runs, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(runs, "starts.csv"), newline="") as f:
        starts = {r["model"]: float(r["val_loss"]) for r in csv.DictReader(f)}
    curves = {}

    def best_of(prefix, label):
        """Mean and sample std over seeds of the best validation loss."""
        best = []
        for seed in (0, 1):
            val = read_val(os.path.join(runs, f"{prefix}{seed}", "val.csv"))
            curves.setdefault(label, []).append(val)
            best.append(min(v for _, v in val))
        return statistics.mean(best), statistics.stdev(best)

    def retained(loss, reference):
        return (LN_V - loss) / (LN_V - reference)

    dense = starts["dense"]
    dense_ft = best_of("dense-ft", "dense, 100 more steps")
    rows = [("dense (300 steps; then 100 more)", dense, dense_ft, 1.0, 1.0)]
    for method in ("random", "cluster", "dot"):
        after = best_of(f"{method}-ft", f"{method}, fine-tuned")
        rows.append((f"{method} (8 x 64, top-4)", starts[method], after,
                     retained(starts[method], dense), retained(after[0], dense_ft[0])))
    # Both train 200 steps from the same MoE config: compared with each other.
    upcycled = best_of("upcycle-s", "upcycled, continued")
    scratch = best_of("scratch-s", "MoE from scratch")
    rows.append(("upcycled (8 x 512, top-2), 200 steps", starts["upcycle"], upcycled,
                 retained(starts["upcycle"], dense), None))
    rows.append(("same MoE from scratch, 200 steps", None, scratch, None, None))

    def num(x, digits=4):
        return "-" if x is None else f"{x:.{digits}f}"

    md = ["| model | val loss as converted | best val loss after training (mean ± std, 2 seeds) "
          "| quality retained as converted | after training |", "|---|---|---|---|---|"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "start_loss", "best_mean", "best_std", "retained_start",
                    "retained_after"])
        for name, start, (m, s), r0, r1 in rows:
            w.writerow([name, start, m, s, r0, r1])
            md.append(f"| {name} | {num(start)} | {m:.4f} ± {s:.4f} | {num(r0, 3)} "
                      f"| {num(r1, 3)} |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    shutil.copy(os.path.join(runs, "starts.csv"), os.path.join(out, "starts.csv"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, seeds in curves.items():
        tokens = [t for t, _ in seeds[0]]
        mean = [statistics.mean(v[i][1] for v in seeds) for i in range(len(tokens))]
        ax.plot(tokens, mean, marker="o", markersize=3, label=label)
    ax.axhline(dense, color="black", linestyle="--", linewidth=1, label="dense model, as converted")
    ax.set_ylim(top=dense + 0.6)
    ax.set_xlabel("training tokens after the conversion")
    ax.set_ylabel("validation loss (mean over 2 seeds)")
    ax.set_title("TinyStories: converted and upcycled MoEs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(os.path.join(out, "curves.png"), dpi=120, bbox_inches="tight")


if __name__ == "__main__":
    main()
