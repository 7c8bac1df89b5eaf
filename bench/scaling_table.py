#!/usr/bin/env python3
"""The markdown table of bench/scaling_bench.sh, from the results folder it fills.

Each run left <results>/<run>.json: ours-SIZE-gN.json (bench/run_metrics.py's
figures, or only a status when the run failed, did not fit or was skipped) and
peer-KIND-SIZE-gN.json (bench/torch_gpt_peer.py's --json). Scaling efficiency is
tokens/s per GPU at N GPUs over tokens/s on 1 GPU of the same size.

  python3 bench/scaling_table.py /tmp/adamant-scaling 8
"""
import argparse
import json
import os


def load(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def ok(result):
    return result is not None and result.get("status", "ok") == "ok"


def status_text(result):
    return "not run" if result is None else result.get("status", "?")


def peer_cell(ours, peer):
    """'tokens/s, peak GiB (ours/peer: tokens/s ratio, memory ratio)' or the peer's status."""
    if not ok(peer):
        return status_text(peer)
    text = f"{peer['tokens_per_s']:,.0f}, {peer['peak_gib']:.1f} GiB"
    if ok(ours):
        text += (f" ({ours['tokens_per_s'] / peer['tokens_per_s']:.2f}x, "
                 f"{ours['peak_allocated_gib'] / peer['peak_gib']:.2f}x)")
    return text


def row(folder, size, gpus, peers):
    ours = load(folder, f"ours-{size}-g{gpus}")
    base = load(folder, f"ours-{size}-g1")
    cells = [f"GPT-3 {size}", str(gpus)]
    if ok(ours):
        per_gpu = ours["tokens_per_s"] / gpus
        if gpus == 1:
            efficiency = "1.00 (baseline)"
        elif ok(base):
            efficiency = f"{per_gpu / base['tokens_per_s']:.2f}"
        elif base is None:
            efficiency = "n/a (no 1-GPU run)"
        else:
            efficiency = f"n/a (1 GPU: {status_text(base)})"
        memory = f"{ours['peak_allocated_gib']:.1f}"
        if "peak_device_in_use_gib" in ours:
            memory += f" / {ours['peak_device_in_use_gib']:.1f}"
        cells += [f"dp {ours['data_parallel_size']} x tp {ours['tensor_parallel_size']}",
                  str(ours.get("micro_batch", "?")), f"{ours['tokens_per_s']:,.0f}", f"{per_gpu:,.0f}", efficiency,
                  f"{ours['exposed_comm_ms']:.1f}", memory]
    else:
        cells += [status_text(ours)] + ["-"] * 6
    cells += [peer_cell(ours, load(folder, f"peer-{kind}-{size}-g{gpus}")) for kind in peers]
    return "| " + " | ".join(cells) + " |"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="the folder bench/scaling_bench.sh wrote")
    p.add_argument("gpus", type=int)
    args = p.parse_args()
    peers = ["single"] if args.gpus == 1 else ["ddp", "fsdp2"]
    peer_names = {"single": "PyTorch 1 GPU", "ddp": "PyTorch DDP", "fsdp2": "PyTorch FSDP2"}
    header = ["model", "GPUs", "parallel", "micro-batch", "tokens/s", "tokens/s per GPU", "scaling efficiency",
              "exposed comm ms/step", "peak GiB/GPU (allocated / device in use)"]
    header += [f"{peer_names[k]}: tokens/s, peak GiB (ours/peer tokens/s, memory)" for k in peers]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for size in ("1.3b", "2.7b"):
        if args.gpus > 1:
            lines.append(row(args.results, size, 1, []) + " - |" * len(peers))
        lines.append(row(args.results, size, args.gpus, peers))
    if args.gpus >= 2:
        lines.append(row(args.results, "6.7b", args.gpus, []) + " - |" * len(peers))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
