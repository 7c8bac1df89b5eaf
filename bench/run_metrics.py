#!/usr/bin/env python3
"""Steady-state figures of one `adamant train` run, read from its metrics.jsonl.

Every step writes a "train" record (tokens_per_s, step_s, exposed_comm_ms) and the
run ends with a "summary" record (peak memory per rank, parallel sizes). This
prints one JSON object: the medians over the steps after the first --skip ones
(warm-up: cuBLASLt plans, NCCL connections, allocator pools), and the peaks.

  python3 bench/run_metrics.py /tmp/run/gpt3_1.3b/metrics.jsonl --skip 2
  python3 bench/run_metrics.py ... --human   # one line for people instead
  python3 bench/run_metrics.py ... --peak-tflops 989   # a peak for the MFU (default: the run's, see below)
  python3 bench/run_metrics.py ... --label size=1.3b --label micro_batch=4   # carried into the JSON
"""
import argparse
import json
import statistics
import sys

GIB = 2**30


def summarize(path, skip, peak_tflops=None):
    """peak_tflops: the GPU's peak for the MFU; None takes the run's own (the datasheet figure
    `adamant train` found for its GPU, in the summary), else H100's and H200's 989."""
    steps, summary = [], None
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "train":
                steps.append(record)
            elif record.get("type") == "summary":
                summary = record
    if summary is None:
        raise SystemExit(f"{path}: no summary record; the run did not finish")
    steady = steps[skip:] if len(steps) > skip else steps[-1:]
    if not steady:
        raise SystemExit(f"{path}: no train records")
    world = summary["world_size"]
    result = {
        "steps": len(steps),
        "steady_steps": len(steady),
        "world_size": world,
        "data_parallel_size": summary["data_parallel_size"],
        "tensor_parallel_size": summary["tensor_parallel_size"],
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
        "step_ms": 1e3 * statistics.median(r["step_s"] for r in steady),
        "exposed_comm_ms": statistics.median(r["exposed_comm_ms"] for r in steady),
        "peak_allocated_gib": summary["peak_allocated_bytes_max"] / GIB,
        "peak_allocated_gib_min": summary["peak_allocated_bytes_min"] / GIB,
    }
    result["tokens_per_s_per_gpu"] = result["tokens_per_s"] / world
    if "peak_device_in_use_bytes_max" in summary:
        result["peak_device_in_use_gib"] = summary["peak_device_in_use_bytes_max"] / GIB
        result["peak_device_in_use_gib_min"] = summary["peak_device_in_use_bytes_min"] / GIB
        if summary.get("model_flops_per_token"):
            # A GPU run: model FLOPs (6 N + 12 layers seq hidden per token) over the GPU's peak.
            result["model_flops_per_token"] = summary["model_flops_per_token"]
            if "gpu_name" in summary:
                result["gpu_name"] = summary["gpu_name"]
            if peak_tflops is not None:
                peak = peak_tflops * 1e12
            elif "gpu_name" in summary:  # a run that names its GPU gives its peak where one is known
                peak = summary.get("peak_flops_per_gpu")
            else:  # runs from before the GPU was named: H100's and H200's
                peak = 989e12
            if peak:
                result["mfu"] = result["tokens_per_s_per_gpu"] * summary["model_flops_per_token"] / peak
    return result


def human(r):
    parallel = f"dp {r['data_parallel_size']}" + (
        f" x tp {r['tensor_parallel_size']}" if r["tensor_parallel_size"] > 1 else "")
    memory = f"peak allocated {r['peak_allocated_gib']:.1f} GiB/GPU"
    if "peak_device_in_use_gib" in r:
        memory += f", device in use {r['peak_device_in_use_gib']:.1f} GiB/GPU"
    mfu = f", MFU {100 * r['mfu']:.1f}%" if "mfu" in r else ""
    return (f"adamant {parallel}: {r['tokens_per_s']:,.0f} tokens/s ({r['tokens_per_s_per_gpu']:,.0f} per GPU), "
            f"step {r['step_ms']:.1f} ms, exposed comm {r['exposed_comm_ms']:.1f} ms/step{mfu}, {memory} "
            f"(medians of steps {r['steps'] - r['steady_steps'] + 1}-{r['steps']})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("metrics", help="the run's metrics.jsonl")
    p.add_argument("--skip", type=int, default=2, help="warm-up steps left out of the medians")
    p.add_argument("--human", action="store_true", help="one line of text instead of JSON")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="a GPU's peak dense bf16 TFLOP/s, for the MFU of GPU runs (default: the datasheet figure "
                        "the run found for its GPU)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="a field added to the JSON (numbers stay numbers)")
    args = p.parse_args()
    r = summarize(args.metrics, args.skip, args.peak_tflops)
    for label in args.label:
        key, _, value = label.partition("=")
        try:
            r[key] = json.loads(value)
        except json.JSONDecodeError:
            r[key] = value
    print(human(r) if args.human else json.dumps(r))


if __name__ == "__main__":
    sys.exit(main())
