#!/usr/bin/env python3
"""PyTorch peer of bench/adam_bench.cu on the same GPT-3 1.3B parameter layout.

Times torch.optim.AdamW(fused=True) over the 292 fp32 parameter tensors (decay
and no-decay groups as NeMo builds them), the same step followed by a bf16 copy
of the weights (what the O2 kernel does in one pass), the global grad norm
(torch._foreach_norm), and a 4 GiB device copy. CUDA events, 3 warm-ups, median
of --reps. With --compare OURS.json (adam_bench --json) it prints the markdown
table of BENCHMARKS.md.

  python3 bench/torch_adam_peer.py --json torch.json --compare ours.json
"""
import argparse
import json
import statistics

import torch

HIDDEN, VOCAB, SEQUENCE, LAYERS = 2048, 50304, 2048, 24


def gpt3_1p3b_shapes():
    """(shape, decay) per parameter tensor, in the order adam_bench packs them."""
    h, f = HIDDEN, 4 * HIDDEN
    shapes = [((VOCAB, h), True), ((SEQUENCE, h), True)]
    for _ in range(LAYERS):
        shapes += [((h,), False), ((h,), False), ((3 * h, h), True), ((3 * h,), False), ((h, h), True),
                   ((h,), False), ((h,), False), ((h,), False), ((f, h), True), ((f,), False), ((h, f), True),
                   ((h,), False)]
    shapes += [((h,), False), ((h,), False)]
    return shapes


def time_cuda(fn, reps):
    """Median and minimum milliseconds of reps runs after 3 warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), min(times)


def result(name, bytes_moved, weights, ms_median, ms_min):
    row = {"name": name, "bytes_per_weight": bytes_moved / weights, "ms_median": ms_median, "ms_min": ms_min,
           "tbps": bytes_moved / (ms_median * 1e-3) / 1e12}
    print(f"{name:<44} {ms_median:8.3f} ms (min {ms_min:8.3f})  {row['bytes_per_weight']:6.1f} B/weight  "
          f"{row['tbps']:5.2f} TB/s", flush=True)
    return row


def measure(reps):
    torch.cuda.set_device(0)
    shapes = gpt3_1p3b_shapes()
    params, decay, no_decay = [], [], []
    for shape, wd in shapes:
        p = torch.empty(shape, device="cuda", dtype=torch.float32).uniform_(-0.05, 0.05)
        p.grad = torch.empty_like(p).uniform_(-1e-3, 1e-3)
        params.append(p)
        (decay if wd else no_decay).append(p)
    weights = sum(p.numel() for p in params)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; {weights} weights in {len(params)} tensors")
    results = []

    copy_bytes = 1 << 32
    src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    results.append(result("device-to-device copy (4 GiB)", 2 * copy_bytes, copy_bytes / 4,
                          *time_cuda(lambda: dst.copy_(src), reps)))
    del src, dst

    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    # fp32 grad 4 r, param 4 r + 4 w, exp_avg and exp_avg_sq 8 r + 8 w.
    results.append(result("torch fused AdamW fp32", 28 * weights, weights, *time_cuda(optimizer.step, reps)))

    model_copy = [torch.empty_like(p, dtype=torch.bfloat16) for p in params]

    def step_and_copy():
        optimizer.step()
        torch._foreach_copy_(model_copy, params)

    # + the bf16 copy as a second pass: param 4 r + 2 w.
    results.append(result("torch fused AdamW fp32 + bf16 copy", 34 * weights, weights,
                          *time_cuda(step_and_copy, reps)))

    grads = [p.grad for p in params]

    def grad_norm():
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))

    results.append(result("torch _foreach_norm fp32 grads", 4 * weights, weights, *time_cuda(grad_norm, reps)))
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "weights": weights,
            "results": results}


# Our kernel -> the PyTorch measurement it is compared with.
PEERS = {
    "device-to-device copy (4 GiB)": "device-to-device copy (4 GiB)",
    "adam fp32 grad, no copy (as PyTorch)": "torch fused AdamW fp32",
    "adam fp32 grad + bf16 copy (O2)": "torch fused AdamW fp32 + bf16 copy",
    "adam bf16 grad + bf16 copy (O2)": "torch fused AdamW fp32 + bf16 copy",
    "adam remainders, fp32 grad": "torch fused AdamW fp32 + bf16 copy",
    "adam remainders, bf16 grad": "torch fused AdamW fp32 + bf16 copy",
    "squared_norm fp32": "torch _foreach_norm fp32 grads",
}


def compare(ours, theirs):
    peer = {r["name"]: r for r in theirs["results"]}
    print(f"\nweights: {ours['weights']:,} (GPT-3 1.3B layout); ratio = PyTorch ms / our ms\n")
    print("| kernel | B/weight | our ms | our TB/s | PyTorch peer | B/weight | PyTorch ms | PyTorch TB/s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in ours["results"]:
        p = peer.get(PEERS.get(r["name"], ""))
        if p is None:
            print(f"| {r['name']} | {r['bytes_per_weight']:.0f} | {r['ms_median']:.3f} | {r['tbps']:.2f} "
                  f"| - | - | - | - | - |")
        else:
            print(f"| {r['name']} | {r['bytes_per_weight']:.0f} | {r['ms_median']:.3f} | {r['tbps']:.2f} "
                  f"| {p['name']} | {p['bytes_per_weight']:.0f} | {p['ms_median']:.3f} | {p['tbps']:.2f} "
                  f"| {p['ms_median'] / r['ms_median']:.2f}x |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--compare", help="adam_bench --json output to compare with")
    args = parser.parse_args()
    measured = measure(args.reps)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(measured, out, indent=1)
    if args.compare:
        with open(args.compare) as f:
            compare(json.load(f), measured)


if __name__ == "__main__":
    main()
