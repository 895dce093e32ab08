"""Writes the third-party input files the data tests read, with the libraries
that define them (numpy, pyarrow), from a JSON spec file:
  {"kind": "megatron", "prefix": P, "dtype": "uint16", "documents": [[[seq], [seq]], ...]}
  {"kind": "npy", "path": F, "dtype": "int32", "tokens": [...]}
  {"kind": "parquet", "path": F, "columns": {"text": [...], ...}, "row_group_size": N}
The Megatron pair follows megatron/core/datasets/indexed_dataset.py (_IndexWriter).
"""
import json
import struct
import sys

import numpy as np

MEGATRON_DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5,
                        "float64": 6, "float32": 7, "uint16": 8}


def write_megatron(spec):
    dtype = np.dtype(spec["dtype"])
    lengths, document_indices = [], [0]
    with open(spec["prefix"] + ".bin", "wb") as data:
        for document in spec["documents"]:
            for sequence in document:
                data.write(np.array(sequence, dtype=dtype).tobytes(order="C"))
                lengths.append(len(sequence))
            document_indices.append(len(lengths))
    pointers = np.concatenate([[0], np.cumsum(np.array(lengths, dtype=np.int64))[:-1]])
    pointers = pointers.astype(np.int64) * dtype.itemsize
    with open(spec["prefix"] + ".idx", "wb") as index:
        index.write(b"MMIDIDX\x00\x00")
        index.write(struct.pack("<Q", 1))
        index.write(struct.pack("<B", MEGATRON_DTYPE_CODES[spec["dtype"]]))
        index.write(struct.pack("<Q", len(lengths)))
        index.write(struct.pack("<Q", len(document_indices)))
        index.write(np.array(lengths, dtype=np.int32).tobytes(order="C"))
        index.write(pointers.tobytes(order="C"))
        index.write(np.array(document_indices, dtype=np.int64).tobytes(order="C"))


def write_npy(spec):
    np.save(spec["path"], np.array(spec["tokens"], dtype=spec["dtype"]))


def write_parquet(spec):
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table(spec["columns"])
    pq.write_table(table, spec["path"], row_group_size=spec.get("row_group_size", 1 << 20))


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    {"megatron": write_megatron, "npy": write_npy, "parquet": write_parquet}[spec["kind"]](spec)


if __name__ == "__main__":
    main()
