#!/usr/bin/env python3
"""PyTorch peer of bench/flash_attention_bench.cu on the same shapes.

Times torch.nn.functional.scaled_dot_product_attention(is_causal=True) forward and
backward, bf16, layout (B, H, L, d), on the attention shapes of GPT-3 126M, 1.3B,
2.7B and 760M (head sizes 64, 128, 80, 96) at sequence 2048 and 126M and 1.3B at 8192; --dropout P as flash_attention_bench's. CUDA events around
the GPU's work alone (the GPU spins while the host issues each run), 3 warm-ups, median of --reps.
FLOPs are counted as flash_attention_bench counts them: forward 2 B H L^2 d,
backward 2.5 times that. --backend pins one SDPA backend (default: PyTorch's choice).
With --compare OURS.json (flash_attention_bench --json) it prints the side-by-side
table with the ratio PyTorch ms / ours (above 1: ours is faster).

  python3 bench/torch_sdpa_peer.py --json torch.json --compare ours.json
"""
import argparse
import contextlib
import json
import statistics

import torch
import torch.nn.functional as F

SHAPES = [("126M", 8, 12, 2048, 64), ("1.3B", 4, 16, 2048, 128), ("2.7B", 4, 32, 2048, 80),
          ("760M", 4, 16, 2048, 96), ("126M", 2, 12, 8192, 64), ("1.3B", 1, 16, 8192, 128)]


# GPU cycles of the spin before each timed run (about 0.5 ms): the host issues the run's kernels
# (Python and autograd take tens of microseconds) while the GPU spins, so the events time the
# GPU's work alone, as flash_attention_bench's do (bench/cuda_bench_util.cuh).
HOLD_CYCLES = 1_000_000


def time_cuda(fn, reps):
    """Median milliseconds of the GPU's work in reps runs after 3 warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        torch.cuda._sleep(HOLD_CYCLES)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def backend_context(name):
    if name == "default":
        return contextlib.nullcontext()
    backends = {"flash": torch.nn.attention.SDPBackend.FLASH_ATTENTION,
                "cudnn": torch.nn.attention.SDPBackend.CUDNN_ATTENTION,
                "efficient": torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION}
    return torch.nn.attention.sdpa_kernel([backends[name]])


def measure(reps, backend, dropout):
    results = []
    for model, b, h, seq, d in SHAPES:
        generator = torch.Generator(device="cuda").manual_seed(1)
        q, k, v = (torch.empty(b, h, seq, d, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1, generator=generator)
                   .requires_grad_() for _ in range(3))
        d_out = torch.empty(b, h, seq, d, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1, generator=generator)
        with backend_context(backend):
            def attention():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
            forward_ms = time_cuda(attention, reps)
            out = attention()
            backward_ms = time_cuda(lambda: torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True), reps)
        flops = 2.0 * b * h * seq * seq * d
        row = {"model": model, "batch": b, "heads": h, "seq": seq, "head_dim": d, "forward_ms": forward_ms,
               "backward_ms": backward_ms, "forward_tflops": flops / (forward_ms * 1e-3) / 1e12,
               "backward_tflops": 2.5 * flops / (backward_ms * 1e-3) / 1e12}
        print(f"{model:<5} B={b} H={h:2d} L={seq} d={d:3d}   forward {forward_ms:8.3f} ms "
              f"{row['forward_tflops']:6.1f} TFLOP/s   backward {backward_ms:8.3f} ms {row['backward_tflops']:6.1f} "
              f"TFLOP/s", flush=True)
        results.append(row)
        del q, k, v, d_out, out
    return results


def compare(torch_results, ours_path):
    with open(ours_path) as f:
        ours = {(r["batch"], r["heads"], r["seq"], r["head_dim"]): r for r in json.load(f)["results"]}
    print("\n| shape (B, H, L, d) | pass | PyTorch SDPA ms | ours ms | PyTorch / ours | ours TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for t in torch_results:
        key = (t["batch"], t["heads"], t["seq"], t["head_dim"])
        if key not in ours:
            print(f"| {t['model']} {key} | - | missing from {ours_path} | | | |")
            continue
        o = ours[key]
        for name in ("forward", "backward"):
            theirs, mine = t[f"{name}_ms"], o[f"{name}_ms"]
            print(f"| {t['model']} {key} | {name} | {theirs:.3f} | {mine:.3f} | {theirs / mine:.2f}x | "
                  f"{o[name + '_tflops']:.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--dropout", type=float, default=0.0, help="attention dropout probability")
    parser.add_argument("--backend", choices=["default", "flash", "cudnn", "efficient"], default="default")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--compare", help="flash_attention_bench --json output to set side by side")
    args = parser.parse_args()
    torch.cuda.set_device(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; causal SDPA, bf16, backend {args.backend}, "
          f"dropout {args.dropout}, median of {args.reps}")
    results = measure(args.reps, args.backend, args.dropout)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "backend": args.backend,
                       "dropout": args.dropout, "results": results}, f, indent=2)
    if args.compare:
        compare(results, args.compare)


if __name__ == "__main__":
    main()
