#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs into tests/fuzz/corpus/ (run once; the seeds are kept in the repo).

Each seed is a small valid input built here from the published layouts, so the fuzzers start
from inputs that reach deep into the readers."""
import json
import pathlib
import struct

corpus = pathlib.Path(__file__).resolve().parent / "corpus"


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def megatron_index(sequences, documents, dtype_code=8, item=2):
    idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, dtype_code, len(sequences), len(documents))
    idx += b"".join(struct.pack("<i", len(s)) for s in sequences)
    pointer = 0
    for s in sequences:
        idx += struct.pack("<q", pointer)
        pointer += len(s) * item
    idx += b"".join(struct.pack("<q", d) for d in documents)
    bin_ = b"".join(struct.pack("<H", t) for s in sequences for t in s)
    return struct.pack("<I", len(idx)) + idx + bin_


def archive(tensors, meta):
    body = b"ADMARCH1"
    entries = []
    for name, dtype, shape, raw in tensors:
        body += b"\x00" * ((64 - len(body) % 64) % 64)
        entries.append({"name": name, "dtype": dtype, "shape": shape, "offset": len(body), "bytes": len(raw),
                        "crc32c": crc32c(raw)})
        body += raw
    header = json.dumps({"format": 1, "meta": meta, "tensors": entries}, separators=(",", ":")).encode()
    return body + header + struct.pack("<QI", len(header), crc32c(header)) + b"ADMAREND"


seeds = {
    "config/tiny.yaml": pathlib.Path(__file__).resolve().parents[2].joinpath("configs/gpt3-tiny.yaml").read_bytes(),
    "config/interpolation.yaml": b"trainer:\n  max_steps: 10\nmodel:\n  encoder_seq_length: 64\n"
                                 b"  max_position_embeddings: ${.encoder_seq_length}\n  optim:\n    name: adamw\n"
                                 b"    sched:\n      max_steps: ${trainer.max_steps}\n"
                                 b"  data:\n    data_prefix: [0.5, a, 0.5, b]\nexp_manager:\n  name: x\n",
    "index/three_sequences": megatron_index([[7, 50256], [1, 2, 3], [65535]], [0, 2, 3]),
    "index/empty_document": megatron_index([[5], []], [0, 1, 2]),
    "checkpoint/two_tensors": archive(
        [("w", "f32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), ("b", "bf16", [3], b"\x80\x3f\x00\x40\x40\x40")],
        {"kind": "adamant-gpt-checkpoint", "format": 1, "step": 3, "run_id": "0123456789abcdef"}),
    "preprocess/lines.jsonl": b"\x00" + b'{"text": "Call me Ishmael."}\n\n{"text": "It is \\u00e9t\\u00e9", "id": 2}\n',
    "preprocess/paragraphs.txt": b"\x01" + b"Loomings.\n\nCall me Ishmael. Some years ago\n  \nnever mind how long.\n",
}
for name, data in seeds.items():
    (corpus / name).write_bytes(data)
