#!/usr/bin/env python3
"""PyTorch peer of bench/dfa_step_bench.cpp: a ZeRO-2 step on GPT-3 1.3B, 2 GPUs.

  torchrun --nproc_per_node 2 bench/torch_zero_step_peer.py [--json peer.json] [--compare ours.json]

(i) "manual ZeRO-2", the same algorithm as DistributedFusedAdam with PyTorch's
    kernels: the flat fp32 gradients (1,315,819,520 weights, padded like ours)
    cut into buckets of bucket_cap_mb (100 and 25 MiB of the sync dtype), each
    reduce-scattered with dist.reduce_scatter_tensor (fp32, or after a copy to
    bf16); step = global grad norm (vector_norm + all_reduce + .item()), the
    clip/average factor applied to the shard (as clip_grad_norm_ does),
    torch.optim.AdamW(fused=True) on the fp32 main-weight shard, a copy of the
    shard to bf16 and dist.all_gather_into_tensor per bucket into the flat bf16
    weights; the fp32 gradients are left for the next backward to write over, as
    ours are. With bf16 sync the fused AdamW needs fp32 gradients, so the synced
    shard is converted first.
(ii) ZeroRedundancyOptimizer(AdamW, fused=True) over the 292 fp32 parameter
    tensors (no bf16 copy: plain fp32 training), gradients all-reduced in
    buckets as DDP does. ZeRO-1, so its "grad sync" is an all-reduce.

Phases as in dfa_step_bench: grad sync (until every rank's collectives
completed), step, and the whole thing; time.perf_counter after
torch.cuda.synchronize(), the slowest rank per repetition, median of --reps
after --warmups. Gradients are zero (the same bytes move whatever the values).
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer

HIDDEN, VOCAB, SEQUENCE, LAYERS = 2048, 50304, 2048, 24
ALIGN = 64  # elements per shard granule, as BucketPlan::kShardAlignment


def gpt3_1p3b_shapes():
    h, f = HIDDEN, 4 * HIDDEN
    shapes = [(VOCAB, h), (SEQUENCE, h)]
    for _ in range(LAYERS):
        shapes += [(h,), (h,), (3 * h, h), (3 * h,), (h, h), (h,), (h,), (h,), (f, h), (f,), (h, f), (h,)]
    shapes += [(h,), (h,)]
    return shapes


def numel_of(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def bucket_plan(total, cap_mb, element_bytes, world):
    """(offset, numel) per bucket as BucketPlan cuts them: full buckets of the rounded capacity, the last padded."""
    granule = world * ALIGN
    capacity = round_up(max(1, int(cap_mb * 1024 * 1024 // element_bytes)), granule)
    buckets, offset = [], 0
    while offset < total:
        numel = min(capacity, round_up(total - offset, granule))
        buckets.append((offset, numel))
        offset += numel
    return buckets, offset


def timed(fn, warmups, reps):
    """Median over reps of the slowest rank's milliseconds; fn returns after its GPU work completed."""
    times = []
    slowest = torch.zeros(1, dtype=torch.float64, device="cuda")
    for i in range(warmups + reps):
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        slowest.fill_((time.perf_counter() - start) * 1e3)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if i >= warmups:
            times.append(slowest.item())
    return statistics.median(times)


class ManualZero2:
    def __init__(self, total, cap_mb, sync_dtype, world, rank, grad_scale=0.5, clip=1.0):
        self.world, self.rank, self.sync_dtype = world, rank, sync_dtype
        self.grad_scale, self.clip = grad_scale, clip
        element_bytes = torch.tensor([], dtype=sync_dtype).element_size()
        self.buckets, self.padded = bucket_plan(total, cap_mb, element_bytes, world)
        self.shard_offsets, shard_total = [], 0
        for _, numel in self.buckets:
            self.shard_offsets.append(shard_total)
            shard_total += numel // world
        self.shard_total = shard_total
        self.grads = torch.zeros(self.padded, dtype=torch.float32, device="cuda")
        self.staging = torch.zeros(self.padded, dtype=torch.bfloat16, device="cuda") if sync_dtype == torch.bfloat16 else None
        self.weights = torch.zeros(self.padded, dtype=torch.bfloat16, device="cuda")
        self.shard_grad = torch.zeros(shard_total, dtype=sync_dtype, device="cuda")
        self.main = torch.nn.Parameter(torch.zeros(shard_total, dtype=torch.float32, device="cuda"))
        self.main.grad = self.shard_grad if sync_dtype == torch.float32 else torch.zeros_like(self.main)
        self.shard_bf16 = torch.zeros(shard_total, dtype=torch.bfloat16, device="cuda")
        self.optimizer = torch.optim.AdamW([self.main], lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                           fused=True)

    def grad_sync(self):
        for (offset, numel), shard_offset in zip(self.buckets, self.shard_offsets):
            source = self.grads[offset:offset + numel]
            if self.staging is not None:
                staged = self.staging[offset:offset + numel]
                staged.copy_(source)
                source = staged
            dist.reduce_scatter_tensor(self.shard_grad[shard_offset:shard_offset + numel // self.world], source)

    def step(self):
        grad = self.main.grad
        if self.staging is not None:
            grad.copy_(self.shard_grad)
        squared = torch.linalg.vector_norm(grad).square().reshape(1)
        dist.all_reduce(squared)
        norm = squared.sqrt().item() * self.grad_scale  # the one host synchronisation, as ours
        coefficient = self.clip / (norm + 1e-6)
        grad.mul_(self.grad_scale * min(1.0, coefficient))
        self.optimizer.step()
        self.shard_bf16.copy_(self.main.detach())
        for (offset, numel), shard_offset in zip(self.buckets, self.shard_offsets):
            dist.all_gather_into_tensor(self.weights[offset:offset + numel],
                                        self.shard_bf16[shard_offset:shard_offset + numel // self.world])


class TorchZero1:
    """ZeroRedundancyOptimizer over fp32 parameters with DDP-style bucketed all-reduce of the gradients."""

    def __init__(self, shapes, cap_mb, world):
        total = sum(numel_of(s) for s in shapes)
        self.flat_grads = torch.zeros(total, dtype=torch.float32, device="cuda")
        self.params, offset = [], 0
        for shape in shapes:
            p = torch.nn.Parameter(torch.zeros(shape, dtype=torch.float32, device="cuda"))
            p.grad = self.flat_grads[offset:offset + numel_of(shape)].view(shape)
            self.params.append(p)
            offset += numel_of(shape)
        capacity = int(cap_mb * 1024 * 1024 // 4)
        self.buckets = [(o, min(capacity, total - o)) for o in range(0, total, capacity)]
        self.optimizer = ZeroRedundancyOptimizer(self.params, optimizer_class=torch.optim.AdamW, lr=1e-4,
                                                 betas=(0.9, 0.95), weight_decay=0.1, fused=True)
        self.total = total

    def grad_sync(self):
        for offset, numel in self.buckets:
            dist.all_reduce(self.flat_grads[offset:offset + numel])

    def step(self):
        self.optimizer.step()
        self.flat_grads.zero_()


def bus_gbps(total_bytes, ms, world):
    return total_bytes / (ms * 1e-3) * (world - 1) / world / 1e9


def measure(runner, warmups, reps):
    def sync_only():
        runner.grad_sync()
        torch.cuda.synchronize()

    def sync_then_step():
        runner.grad_sync()
        torch.cuda.synchronize()
        runner.step()
        torch.cuda.synchronize()

    grad_sync_ms = timed(sync_only, warmups, reps)
    whole_ms = timed(sync_then_step, warmups, reps)
    # step alone: its time within sync_then_step, measured directly.
    step_times = []
    slowest = torch.zeros(1, dtype=torch.float64, device="cuda")
    for i in range(warmups + reps):
        runner.grad_sync()
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        runner.step()
        torch.cuda.synchronize()
        slowest.fill_((time.perf_counter() - start) * 1e3)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if i >= warmups:
            step_times.append(slowest.item())
    return grad_sync_ms, statistics.median(step_times), whole_ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--bucket-caps", default="100,25")
    parser.add_argument("--json")
    parser.add_argument("--compare", help="dfa_step_bench --json output: print the ours/peer table")
    parser.add_argument("--skip-zero1", action="store_true")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world, rank = dist.get_world_size(), dist.get_rank()
    shapes = gpt3_1p3b_shapes()
    total = sum(numel_of(s) for s in shapes)
    caps = [float(c) for c in args.bucket_caps.split(",")]
    rows = []
    for cap in caps:
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            runner = ManualZero2(total, cap, dtype, world, rank)
            sync_ms, step_ms, whole_ms = measure(runner, args.warmups, args.reps)
            sync_bytes = runner.padded * (4 if dtype == torch.float32 else 2)
            rows.append({"peer": "manual_zero2", "bucket_cap_mb": cap, "grad_sync": name, "grad_sync_ms": sync_ms,
                         "step_ms": step_ms, "whole_ms": whole_ms, "padded_numel": runner.padded,
                         "grad_sync_gbps": bus_gbps(sync_bytes, sync_ms, world)})
            del runner
            torch.cuda.empty_cache()
            if rank == 0:
                print(f"manual ZeRO-2 cap {cap:g} MiB {name} sync: grad sync {sync_ms:.3f} ms "
                      f"({rows[-1]['grad_sync_gbps']:.1f} GB/s bus), step {step_ms:.3f} ms, whole {whole_ms:.3f} ms",
                      flush=True)
    if not args.skip_zero1:
        for cap in caps:
            runner = TorchZero1(shapes, cap, world)
            sync_ms, step_ms, whole_ms = measure(runner, args.warmups, args.reps)
            # An all-reduce moves 2 (n-1)/n of the buffer per rank: NCCL's all-reduce bus bandwidth.
            gbps = runner.total * 4 / (sync_ms * 1e-3) * 2 * (world - 1) / world / 1e9
            rows.append({"peer": "zero_redundancy_optimizer", "bucket_cap_mb": cap, "grad_sync": "fp32 all-reduce",
                         "grad_sync_ms": sync_ms, "step_ms": step_ms, "whole_ms": whole_ms,
                         "padded_numel": runner.total, "grad_sync_gbps": gbps})
            del runner
            torch.cuda.empty_cache()
            if rank == 0:
                print(f"ZeroRedundancyOptimizer cap {cap:g} MiB: all-reduce {sync_ms:.3f} ms ({gbps:.1f} GB/s bus), "
                      f"step {step_ms:.3f} ms, whole {whole_ms:.3f} ms", flush=True)
    if rank == 0:
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"weights": total, "ranks": world, "torch": torch.__version__, "rows": rows}, out, indent=1)
        if args.compare:
            print_comparison(args.compare, rows, world)
    dist.barrier()
    dist.destroy_process_group()


def print_comparison(ours_path, peer_rows, world):
    with open(ours_path) as f:
        ours = json.load(f)
    print("\n| cap MiB | sync | phase | ours ms | manual ZeRO-2 ms | ratio (peer / ours) | ours bus GB/s | peer bus GB/s |")
    print("|---|---|---|---|---|---|---|---|")
    for row in ours["rows"]:
        peer = next((p for p in peer_rows if p["peer"] == "manual_zero2" and p["bucket_cap_mb"] == row["bucket_cap_mb"]
                     and p["grad_sync"] == row["grad_sync"]), None)
        if peer is None:
            continue
        sync_bytes = row["padded_numel"] * (4 if row["grad_sync"] == "fp32" else 2)
        for phase in ("grad_sync", "step", "whole"):
            ours_ms, peer_ms = row[phase + "_ms"], peer[phase + "_ms"]
            ours_bw = f"{bus_gbps(sync_bytes, ours_ms, world):.1f}" if phase == "grad_sync" else ""
            peer_bw = f"{peer['grad_sync_gbps']:.1f}" if phase == "grad_sync" else ""
            print(f"| {row['bucket_cap_mb']:g} | {row['grad_sync']} | {phase} | {ours_ms:.3f} | {peer_ms:.3f} | "
                  f"{peer_ms / ours_ms:.2f}x | {ours_bw} | {peer_bw} |")


if __name__ == "__main__":
    main()
