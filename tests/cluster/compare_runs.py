#!/usr/bin/env python3
"""Compares the curves of two moelab runs: every metrics.jsonl loss and every
val.csv val_loss, step by step. Exits 0 when they agree (to --rtol, or bitwise
with --rtol 0), 1 otherwise, printing the first difference.

    compare_runs.py RUN_A RUN_B [--rtol 1e-6]
"""
import argparse
import csv
import json
import sys


def curves(run):
    with open(f"{run}/metrics.jsonl") as f:
        train = [(r["step"], r["loss"]) for r in map(json.loads, f)]
    with open(f"{run}/val.csv") as f:
        val = [(int(r["step"]), float(r["val_loss"])) for r in csv.DictReader(f)]
    return {"train loss": train, "val_loss": val}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-6)
    args = parser.parse_args()
    a, b = curves(args.a), curves(args.b)
    worst = 0.0
    for name in a:
        if [s for s, _ in a[name]] != [s for s, _ in b[name]]:
            print(f"{name}: steps differ: {len(a[name])} against {len(b[name])} entries")
            return 1
        for (step, x), (_, y) in zip(a[name], b[name]):
            rel = abs(x - y) / max(abs(y), 1e-30)
            worst = max(worst, rel)
            if (args.rtol == 0 and x != y) or rel > args.rtol:
                print(f"{name} at step {step}: {x!r} against {y!r} (relative {rel:.2e})")
                return 1
    print(f"equal: {len(a['train loss'])} losses, {len(a['val_loss'])} validations, "
          f"largest relative difference {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
