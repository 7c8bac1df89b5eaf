#!/usr/bin/env python3
"""The PyTorch peer for Adamant's GPT-3 training throughput.

The same model as Adamant's (pre-LN GPT-3: learned absolute positions, tied word
embeddings, GELU MLP of 4 x hidden, biases, layernorm eps 1e-5, vocabulary
padded to 50304), trained with bf16 autocast, scaled-dot-product attention,
torch.compile and fused AdamW, on random tokens. One process per GPU under
torchrun: --parallel ddp | fsdp2 | zero (DDP + ZeroRedundancyOptimizer).

  torchrun --nproc_per_node 2 bench/torch_gpt_peer.py --layers 12 --hidden 768 --heads 12 \
      --seq 2048 --micro-batch 8 --parallel ddp --json peer.json

Prints tokens/s (all GPUs), MFU and peak memory per GPU (torch.cuda.max_memory_allocated,
the largest over the ranks); --json writes them. FSDP2 keeps fp32 weights and
all-gathers them in fp32 unless --fsdp-mixed-precision (bf16 all-gather, fp32
gradient reduce-scatter, as torchtitan does).
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, std, out_std, hidden_dropout, attention_dropout, gelu):
        super().__init__()
        self.heads = heads
        self.gelu_approximate = "tanh" if gelu == "tanh" else "none"
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc = nn.Linear(hidden, ffn)
        self.out = nn.Linear(ffn, hidden)
        for lin, s in ((self.qkv, std), (self.proj, out_std), (self.fc, std), (self.out, out_std)):
            nn.init.normal_(lin.weight, 0.0, s)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.attention_dropout if self.training else 0.0)
        x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(b, t, c)), self.hidden_dropout, self.training)
        h = F.gelu(self.fc(self.ln2(x)), approximate=self.gelu_approximate)
        return x + F.dropout(self.out(h), self.hidden_dropout, self.training)


class Gpt(nn.Module):
    def __init__(self, layers, hidden, heads, seq, hidden_dropout=0.0, attention_dropout=0.0, gelu="exact", vocab=50304,
                 std=0.02):
        super().__init__()
        self.hidden_dropout = hidden_dropout
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        nn.init.normal_(self.wte.weight, 0.0, std)
        nn.init.normal_(self.wpe.weight, 0.0, std)
        out_std = std / math.sqrt(2 * layers)
        self.blocks = nn.ModuleList(Block(hidden, heads, 4 * hidden, std, out_std, hidden_dropout, attention_dropout, gelu)
                                    for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, tokens, targets):
        x = F.dropout(self.wte(tokens) + self.wpe.weight[: tokens.shape[1]], self.hidden_dropout, self.training)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--parallel", choices=["ddp", "fsdp2", "zero"], default="ddp")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--fsdp-mixed-precision", action="store_true",
                   help="fsdp2: all-gather bf16 weights, reduce-scatter fp32 gradients")
    p.add_argument("--hidden-dropout", type=float, default=0.0, help="on the embeddings and residual branches")
    p.add_argument("--attention-dropout", type=float, default=0.0, help="SDPA dropout_p")
    p.add_argument("--gelu", choices=["exact", "tanh"], default="exact",
                   help="GELU's form: exact (erf) or the tanh approximation (Adamant's model.openai_gelu)")
    p.add_argument("--json")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after timing, print the N kernels with the most GPU time over 2 more steps")
    args = p.parse_args()

    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("nccl")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    torch.manual_seed(1234)
    model = Gpt(args.layers, args.hidden, args.heads, args.seq, args.hidden_dropout, args.attention_dropout,
                args.gelu).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    if not args.no_compile:
        model = torch.compile(model)
    if distributed and args.parallel == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if args.fsdp_mixed_precision else MixedPrecisionPolicy()
        # One FSDP unit per block (of the compiled module's inner model), the root unit holds the
        # embeddings (the tied word embedding is used first and last) and the final layernorm.
        for block in (model._orig_mod if hasattr(model, "_orig_mod") else model).blocks:
            fully_shard(block, reshard_after_forward=False, mp_policy=policy)
        fully_shard(model, reshard_after_forward=False, mp_policy=policy)
    elif distributed:
        model = nn.parallel.DistributedDataParallel(model)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    if distributed and args.parallel == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(decay + no_decay, optimizer_class=torch.optim.AdamW, lr=1e-4, fused=True)
    else:
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), fused=True)

    tokens = torch.randint(0, 50257, (args.micro_batch, args.seq + 1), device="cuda")
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    torch.cuda.reset_peak_memory_stats()

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        train_step()
    # Steps back to back, synchronised only at the ends, as a training loop runs them.
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = train_step()
    torch.cuda.synchronize()
    step_s = (time.perf_counter() - start) / args.steps
    tokens_per_s = args.micro_batch * args.seq * world / step_s
    flops_per_token = 6 * n_params + 12 * args.layers * args.seq * args.hidden
    mfu = tokens_per_s / world * flops_per_token / 989e12
    peak = torch.tensor([torch.cuda.max_memory_allocated()], dtype=torch.float64, device="cuda")
    if distributed:
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)  # per GPU: the largest over the ranks
    peak_gib = peak.item() / 2**30
    result = {"parallel": args.parallel if distributed else "single", "gpus": world, "params": n_params,
              "seq": args.seq, "hidden_dropout": args.hidden_dropout, "attention_dropout": args.attention_dropout,
              "micro_batch": args.micro_batch, "tokens_per_s": tokens_per_s, "step_ms": step_s * 1e3, "mfu": mfu,
              "peak_gib": peak_gib, "loss": float(loss.detach())}
    if args.profile and not distributed:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(2):
                train_step()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.profile, max_name_column_width=90))
    if rank == 0:
        print(f"torch {result['parallel']} x{world}: {n_params / 1e6:.1f}M params, {tokens_per_s:,.0f} tokens/s, "
              f"step {step_s * 1e3:.1f} ms, MFU {mfu:.1%}, peak {peak_gib:.1f} GiB")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
