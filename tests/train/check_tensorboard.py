"""Reads a run's TensorBoard event files with the tensorboard package itself and
checks them against the run's metrics.jsonl and val.csv.

    check_tensorboard.py RUN_DIR            # every value equals its log's, once per step
    check_tensorboard.py --records FILE     # prints the steps of FILE's readable events

Each number of a metrics.jsonl record (nested keys and array indices joined by
'/', per-layer expert load as histograms) and each val.csv row must appear in
the event files at its step exactly once, equal to the log's value rounded to
float32 (TensorBoard's simple_value), and nothing else may be there. Exits 0
when all match, 1 with the differences otherwise.
"""
import csv
import glob
import json
import math
import os
import sys

import numpy as np
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util


def events(path):
    """The events of one file as TensorBoard's backend reads them: it stops at a
    torn record, and migrates scalars and histograms into tensor summaries."""
    return list(EventFileLoader(path).Load())


def logged_values(run_dir):
    """{(step, tag): value or ('histogram', [values])} from the run's text logs."""
    want = {}

    def add(step, tag, v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return
        if isinstance(v, (int, float)):
            want[(step, tag)] = float(v)
        elif isinstance(v, dict):
            for k, item in v.items():
                add(step, f"{tag}/{k}", item)
        elif isinstance(v, list):
            for i, item in enumerate(v):
                numbers = isinstance(item, list) and item and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in item)
                if numbers:
                    want[(step, f"{tag}/{i}")] = ("histogram", [float(x) for x in item])
                else:
                    add(step, f"{tag}/{i}", item)

    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            for key, v in record.items():
                if key != "step":
                    add(record["step"], key, v)
    with open(os.path.join(run_dir, "val.csv")) as f:
        for row in csv.DictReader(f):
            step = int(row["step"])
            # val_loss, best_val_loss, each named set's val_loss/<name> and
            # each downstream task's task/<name>/<metric> where it was scored.
            for column, value in row.items():
                named = column.startswith(("val_loss", "task/")) or column == "best_val_loss"
                if named and value != "":
                    want[(step, column)] = float(value)
    return want


def event_values(run_dir):
    """{(step, tag): [values...]} from every event file under RUN_DIR/tb."""
    got = {}
    files = sorted(glob.glob(os.path.join(run_dir, "tb", "events.out.tfevents.*")))
    if not files:
        raise SystemExit(f"{run_dir}/tb: no event files")
    for path in files:
        for event in events(path):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin not in ("scalars", "histograms"):
                    raise SystemExit(f"{path}: {value.tag} is a {plugin!r} summary")
                v = tensor_util.make_ndarray(value.tensor)
                got.setdefault((event.step, value.tag), []).append((plugin, v))
    return got


def histogram_matches(found, values):
    """TensorBoard's histogram tensor, rows of (left edge, right edge, count),
    spans the values and counts each once."""
    plugin, buckets = found
    a = np.array(values)
    return (plugin == "histograms" and buckets.shape[1:] == (3,)
            and buckets[:, 2].sum() == len(a)
            and buckets[0, 0] == a.min() and buckets[-1, 1] == a.max())


def compare(run_dir):
    want, got = logged_values(run_dir), event_values(run_dir)
    problems = []
    for key, expected in sorted(want.items()):
        found = got.get(key, [])
        if len(found) != 1:
            problems.append(f"{key}: {len(found)} values in the event files, expected 1")
            continue
        if isinstance(expected, tuple):
            if not histogram_matches(found[0], expected[1]):
                problems.append(f"{key}: histogram {found[0]} does not hold {expected[1]}")
        elif found[0][0] != "scalars" or found[0][1].shape != ():
            problems.append(f"{key}: a {found[0][0]} summary, expected a scalar")
        elif not (np.float32(expected) == found[0][1]
                  or (math.isnan(expected) and math.isnan(found[0][1]))):
            problems.append(f"{key}: {found[0][1]!r} in the events, {expected!r} in the logs")
    for key in sorted(set(got) - set(want)):
        problems.append(f"{key}: in the event files but not in the logs")
    for p in problems[:40]:
        print("MISMATCH", p)
    print(f"checked {len(want)} values at {len({s for s, _ in want})} steps; "
          f"{len(problems)} problems")
    return 1 if problems else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--records":
        print(" ".join(str(e.step) for e in events(sys.argv[2])))
        return 0
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    return compare(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
