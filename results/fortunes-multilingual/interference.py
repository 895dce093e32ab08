#!/usr/bin/env python3
"""Interference of adding a language, per model and between models.

Usage: interference.py STUDY_DIR OLD_SETS...   (e.g. runs/studies/fortunes-multilingual-b
       en de es it pt cs pl)

For each model M of study-b.toml (dense, moe, upcycled) and seed s, the
interference is the mean over OLD_SETS of the final validation loss of
M_add_ru minus that of M_old_only (val.csv's last row); printed per model as
mean ± sample std over seeds, then each MoE's minus dense's, paired by seed.
"""
import csv
import statistics
import sys


def final_losses(run_dir):
    with open(f"{run_dir}/val.csv") as f:
        rows = list(csv.DictReader(f))
    return {k[len("val_loss/"):]: float(v) for k, v in rows[-1].items() if k.startswith("val_loss/")}


def mean_std(values):
    return f"{statistics.mean(values):+.4f} ± {statistics.stdev(values):.4f} (n={len(values)})"


def main():
    study, old = sys.argv[1], sys.argv[2:]
    seeds = [0, 1, 2]
    per_model = {}
    for model in ("dense", "moe", "upcycled"):
        values = []
        for s in seeds:
            add = final_losses(f"{study}/{model}_add_ru/seed{s}")
            ctl = final_losses(f"{study}/{model}_old_only/seed{s}")
            values.append(statistics.mean(add[l] - ctl[l] for l in old))
        per_model[model] = values
        print(f"{model}: interference on the old languages {mean_std(values)}")
    for model in ("moe", "upcycled"):
        diff = [m - d for m, d in zip(per_model[model], per_model["dense"])]
        print(f"{model} - dense: {mean_std(diff)}")


if __name__ == "__main__":
    main()
