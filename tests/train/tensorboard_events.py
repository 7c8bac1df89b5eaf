#!/usr/bin/env python3
"""Reads a run folder's TensorBoard event files without TensorFlow or our C++ code and
checks them against the run's metrics.jsonl.

The record framing (uint64 length, masked CRC32C of it, data, masked CRC32C of the data)
and the few protocol-buffer fields of Event, Summary and SessionLog are decoded here from
the format's definition, with a table CRC32C of our own.

usage: tensorboard_events.py RUN_DIR EXPECTED_FILES RESUMED_STEP
Exits 0 when every check holds, else prints what differs and exits 1.
"""
import glob
import json
import math
import os
import struct
import sys

CASTAGNOLI_REVERSED = 0x82F63B78
TABLE = []
for byte in range(256):
    crc = byte
    for _ in range(8):
        crc = (crc >> 1) ^ CASTAGNOLI_REVERSED if crc & 1 else crc >> 1
    TABLE.append(crc)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


def fields(buf):
    """(field number, wire type, value) of a protocol buffer message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def records(path):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(header) != length_crc:
            raise ValueError(f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if masked(body) != body_crc:
            raise ValueError(f"{path}: bad data CRC at byte {pos}")
        yield body
        pos += 16 + length


def events(path):
    """Each event as a dict: step, and version / session_status / scalars {tag: value}."""
    for body in records(path):
        event = {"step": 0, "scalars": {}}
        for number, _, value in fields(body):
            if number == 1:
                event["wall_time"] = struct.unpack("<d", value)[0]
            elif number == 2:
                event["step"] = value
            elif number == 3:
                event["version"] = value.decode()
            elif number == 5:
                for n, _, summary_value in fields(value):
                    assert n == 1
                    tag, simple = None, None
                    for m, _, v in fields(summary_value):
                        if m == 1:
                            tag = v.decode()
                        elif m == 2:
                            simple = struct.unpack("<f", v)[0]
                    event["scalars"][tag] = simple
            elif number == 7:
                for n, _, v in fields(value):
                    if n == 1:
                        event["session_status"] = v
        yield event


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    run_dir, expected_files, resumed_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    problems = []
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")), key=os.path.getmtime)
    if len(files) != expected_files:
        problems.append(f"{len(files)} event files, expected {expected_files}")
    scalars = {}  # (tag, step) -> value, later files override earlier ones as TensorBoard's purge does
    for index, path in enumerate(files):
        evs = list(events(path))
        if not evs or evs[0].get("version") != "brain.Event:2":
            problems.append(f"{path}: does not start with the file version event")
        if index > 0:
            start = [e for e in evs if e.get("session_status") == 1]
            if len(start) != 1 or start[0]["step"] != resumed_step:
                problems.append(f"{path}: expected one session start at step {resumed_step}, got {start}")
        for e in evs:
            for tag, value in e["scalars"].items():
                scalars[(tag, e["step"])] = value

    train_tags = {"reduced_train_loss": "loss", "lr": "lr", "grad_norm": "grad_norm", "loss_scale": "loss_scale",
                  "train_step_timing": "step_s", "consumed_samples": "consumed_samples",
                  "tokens_per_sec": "tokens_per_s", "exposed_comm_ms": "exposed_comm_ms"}
    gpu_tags = ("model_tflops_per_gpu", "mfu")  # GPU runs; mfu where the GPU's peak is known
    expected = {}
    last_step = 0
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        record = json.loads(line)
        if record["type"] == "train":
            last_step = max(last_step, record["step"])
            for tag, key in train_tags.items():
                expected[(tag, record["step"])] = record[key]
            for tag in gpu_tags:
                if tag in record:
                    expected[(tag, record["step"])] = record[tag]
        elif record["type"] == "validation":
            expected[("val_loss", record["step"])] = record["val_loss"]
        elif record["type"] == "summary":
            expected[("peak_allocated_bytes_max", last_step)] = record["peak_allocated_bytes_max"]
            expected[("peak_allocated_bytes_min", last_step)] = record["peak_allocated_bytes_min"]
    for key, value in sorted(expected.items()):
        if key not in scalars:
            problems.append(f"missing scalar {key}")
        elif not (scalars[key] == f32(value) or (math.isnan(value) and math.isnan(scalars[key]))):
            problems.append(f"scalar {key}: {scalars[key]} in the event file, {value} in metrics.jsonl")
    for key in scalars:
        if key not in expected:
            problems.append(f"scalar {key} is not in metrics.jsonl")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"{len(files)} event files, {len(scalars)} scalars, all as in metrics.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
