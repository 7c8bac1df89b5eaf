#!/usr/bin/env python3
"""Checks Adamant's CPU GPT against an independent PyTorch GPT-2 built from the exported
Hugging Face folder (names and layouts as Hugging Face's GPT2LMHeadModel: Conv1D weights
[in, out], fused c_attn with all queries, then keys, then values).

For each case it runs parity_dump (tests/parity/parity_dump.cpp), which writes the exported
folder plus Adamant's logits, loss, gradients and the weights after ten optimizer steps, and
compares them in fp32:
  logits  max |ours - torch| / max |torch|                <= 1e-5
  loss    |ours - torch| / |torch|                         <= 1e-6
  grads   ||ours - torch|| / ||torch|| per parameter       <= 1e-4
  steps   ||ours - torch|| / ||torch|| per parameter after torch.optim.AdamW with the same betas,
          eps, weight-decay groups (none on biases and layernorms), clipping and NeMo's
          CosineAnnealing with warmup                      <= 5e-6
          (each step's update is Adam's m / sqrt(v), which carries the gradients' relative
          fp32 rounding, up to about 5e-7 here, into the weights; ten steps add up to 5e-6.
          The attention sums its softmax tile by tile as flash attention does, not in
          PyTorch's order, so the two roundings do not cancel.)
Megatron pads the vocabulary and the padded rows take part in the softmax; the export leaves
them out, so the reference appends them (pad_rows of the dump) to the exported embedding.

Usage: gpt2_parity.py --dump EXE --vocab-dir DIR --work DIR --gelu exact|tanh
                      --run fused_adam:1 --run distributed_fused_adam:2 [--mpiexec MPIEXEC FLAGS...]
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:
    sys.exit(f"gpt2_parity.py needs torch and numpy ({error}); scripts/setup.sh installs Debian's python3-torch "
             f"and python3-numpy for /usr/bin/python3")

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "F16": np.float16}


def read_safetensors(path):
    """name -> torch tensor (fp32 for BF16), read from the documented layout."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len])
    data = memoryview(blob)[8 + header_len:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=np.dtype(DTYPES[info["dtype"]]).newbyteorder("<"))
        out[name] = torch.from_numpy(array.copy().reshape(info["shape"]))
    return out


class Gpt2(torch.nn.Module):
    """GPT-2 as Hugging Face names it, written from the architecture: pre-LN blocks, learned
    positions, tied output layer."""

    def __init__(self, config, tensors, pad_rows):
        super().__init__()
        self.config = config
        self.params = torch.nn.ParameterDict()
        for name, value in tensors.items():
            if name == "transformer.wte.weight":
                value = torch.cat([value, pad_rows])  # the padded vocabulary of the softmax
            self.params[name.replace(".", "/")] = torch.nn.Parameter(value.clone())

    def p(self, name):
        return self.params[name.replace(".", "/")]

    def gelu(self, x):
        if self.config["activation_function"] == "gelu":
            return F.gelu(x)
        return F.gelu(x, approximate="tanh")

    def forward(self, tokens):
        c = self.config
        batch, seq = tokens.shape
        hidden, heads = c["n_embd"], c["n_head"]
        head_dim = hidden // heads
        eps = c["layer_norm_epsilon"]
        wte = self.p("transformer.wte.weight")
        x = wte[tokens] + self.p("transformer.wpe.weight")[:seq]
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        for layer in range(c["n_layer"]):
            h = f"transformer.h.{layer}."
            y = F.layer_norm(x, (hidden,), self.p(h + "ln_1.weight"), self.p(h + "ln_1.bias"), eps)
            qkv = y @ self.p(h + "attn.c_attn.weight") + self.p(h + "attn.c_attn.bias")
            q, k, v = (t.view(batch, seq, heads, head_dim).transpose(1, 2) for t in qkv.split(hidden, dim=2))
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
            attention = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            y = (attention @ v).transpose(1, 2).reshape(batch, seq, hidden)
            x = x + y @ self.p(h + "attn.c_proj.weight") + self.p(h + "attn.c_proj.bias")
            y = F.layer_norm(x, (hidden,), self.p(h + "ln_2.weight"), self.p(h + "ln_2.bias"), eps)
            y = self.gelu(y @ self.p(h + "mlp.c_fc.weight") + self.p(h + "mlp.c_fc.bias"))
            x = x + y @ self.p(h + "mlp.c_proj.weight") + self.p(h + "mlp.c_proj.bias")
        x = F.layer_norm(x, (hidden,), self.p("transformer.ln_f.weight"), self.p("transformer.ln_f.bias"), eps)
        return x @ wte.t()

    def named(self):
        return {key.replace("/", "."): value for key, value in self.params.items()}


def nemo_cosine_annealing(step, lr, min_lr, warmup, max_steps):
    """NeMo's CosineAnnealing with WarmupPolicy; `step` counts the steps already taken."""
    if warmup > 0 and step <= warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > max_steps:
        return min_lr
    decay = 0.5 * (1 + math.cos(math.pi * (step - warmup) / (max_steps - warmup)))
    return (lr - min_lr) * decay + min_lr


def clip_grad_norm(params, max_norm):
    """torch.nn.utils.clip_grad_norm_'s rule (scale by max_norm / (norm + 1e-6) when below 1), with
    the global norm summed in fp64: clip_grad_norm_ sums the 3.2M squares of the embedding's
    gradient in fp32, 3e-5 off the exact norm here, which Adamant's fp32 per-block sums are not."""
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params))
    coefficient = max_norm / (norm + 1e-6)
    if coefficient < 1:
        for p in params:
            p.grad.mul_(coefficient)
    return norm


def relative(ours, torch_value):
    return float(torch.linalg.norm((ours - torch_value).double()) / torch.linalg.norm(torch_value.double()))


class Checks:
    def __init__(self):
        self.failures = []

    def expect(self, what, value, limit):
        ok = value <= limit
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {value:.3e} (limit {limit:.0e})")
        if not ok:
            self.failures.append(what)


def load_reference(folder, pad_rows):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    assert config["model_type"] == "gpt2" and config["tie_word_embeddings"]
    tensors = read_safetensors(os.path.join(folder, "model.safetensors"))
    assert "lm_head.weight" not in tensors  # tied: not stored
    return Gpt2(config, tensors, pad_rows)


def hf_name(name):
    return "transformer.wte.weight" if name == "pad_rows" else name


def check_forward(work, gelu, checks):
    dump = read_safetensors(os.path.join(work, "forward.safetensors"))
    model = load_reference(os.path.join(work, "hf"), dump["pad_rows"])
    expected = {"exact": "gelu", "tanh": "gelu_new"}[gelu]
    if model.config["activation_function"] != expected:
        checks.failures.append(f"config.json says {model.config['activation_function']}, expected {expected}")
    logits = model(dump["tokens"].long())
    rows = logits.reshape(-1, logits.shape[-1])
    loss = F.cross_entropy(rows, dump["targets"].long().reshape(-1))
    loss.backward()
    checks.expect("logits", float((dump["logits"] - rows.detach()).abs().max() / rows.detach().abs().max()), 1e-5)
    ours_loss = float(dump["loss"][0])
    checks.expect("loss", abs(ours_loss - loss.item()) / abs(loss.item()), 1e-6)
    vocab = model.config["vocab_size"]
    worst = 0.0
    for name, param in model.named().items():
        grad = param.grad
        if name == "transformer.wte.weight":
            ours = torch.cat([dump["grad." + name], dump["grad.pad_rows"]])
            worst = max(worst, relative(dump["grad.pad_rows"], grad[vocab:]))
        else:
            ours = dump["grad." + name]
        worst = max(worst, relative(ours, grad))
    checks.expect(f"gradients of {len(model.named())} parameters (worst)", worst, 1e-4)


def check_steps(work, run, checks):
    forward = read_safetensors(os.path.join(work, "forward.safetensors"))
    dump = read_safetensors(os.path.join(work, "steps.safetensors"))
    model = load_reference(os.path.join(work, "hf"), forward["pad_rows"])
    named = model.named()
    no_decay = [p for n, p in named.items() if n.endswith(".bias") or ".ln_" in n]
    decay = [p for n, p in named.items() if not (n.endswith(".bias") or ".ln_" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    steps = dump["tokens"].shape[0]
    clipped = 0
    worst_lr = worst_norm = 0.0
    for step in range(steps):
        lr = nemo_cosine_annealing(step, 1e-3, 1e-4, 3, steps)
        worst_lr = max(worst_lr, abs(float(dump["lr"][step]) - lr) / lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        logits = model(dump["tokens"][step].long())
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), dump["targets"][step].long().reshape(-1))
        loss.backward()
        norm = clip_grad_norm(list(named.values()), 0.5)
        clipped += norm > 0.5
        worst_norm = max(worst_norm, abs(float(dump["grad_norm"][step]) - norm) / norm)
        optimizer.step()
    checks.expect(f"{run}: learning rates against NeMo's schedule", worst_lr, 1e-12)
    checks.expect(f"{run}: gradient norms", worst_norm, 1e-5)
    if clipped == 0:
        checks.failures.append(f"{run}: clipping never acted; the test would not cover it")
    worst = 0.0
    for name, param in named.items():
        if name == "transformer.wte.weight":
            ours = torch.cat([dump["final." + name], dump["final.pad_rows"]])
        else:
            ours = dump["final." + name]
        theirs = param.detach()
        if name.endswith("attn.c_attn.bias"):
            # The key bias adds the same amount to every score of a query, which the softmax
            # cancels: its gradient is zero in exact arithmetic and rounding noise on both sides,
            # which Adam scales up to an update of its own. It changes no output; compare the
            # query and value biases.
            hidden = model.config["n_embd"]
            ours = torch.cat([ours[:hidden], ours[2 * hidden:]])
            theirs = torch.cat([theirs[:hidden], theirs[2 * hidden:]])
        worst = max(worst, relative(ours, theirs))
    # steps x the gradients' fp32 rounding (see the top of the file).
    checks.expect(f"{run}: weights after {steps} steps (worst of {len(named)}; {clipped} clipped)", worst, 5e-6)


def check_gpu_bf16(work, checks):
    """bf16 weights exported from a GPU model: PyTorch's fp32 CPU logits against the GPU's bf16 ones."""
    dump = read_safetensors(os.path.join(work, "forward.safetensors"))
    pad_rows = dump["pad_rows"].bfloat16().float()  # as the GPU model holds them
    model = load_reference(os.path.join(work, "hf"), pad_rows)
    with torch.no_grad():
        logits = model(dump["tokens"].long())
    rows = logits.reshape(-1, logits.shape[-1])
    loss = F.cross_entropy(rows, dump["targets"].long().reshape(-1)).item()
    # bf16 activations on the GPU: ~3 significant digits per value, errors growing through the layers.
    checks.expect("GPU bf16 logits", float((dump["logits"] - rows).abs().max() / rows.abs().max()), 3e-2)
    checks.expect("GPU bf16 loss", abs(float(dump["loss"][0]) - loss) / loss, 1e-2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump", required=True)
    parser.add_argument("--vocab-dir", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--gelu", choices=["exact", "tanh"], required=True)
    parser.add_argument("--run", action="append", default=[], help="optimizer:ranks")
    parser.add_argument("--gpu-bf16", action="store_true", help="the GPU check instead of the CPU runs")
    parser.add_argument("--steps", type=int, default=10)
    # Everything after --mpiexec is the launcher and its own flags.
    argv = sys.argv[1:]
    launcher = argv[argv.index("--mpiexec") + 1:] if "--mpiexec" in argv else ["mpiexec"]
    args = parser.parse_args(argv[:argv.index("--mpiexec")] if "--mpiexec" in argv else argv)
    args.mpiexec = launcher
    torch.manual_seed(0)
    torch.set_num_threads(2)
    checks = Checks()
    if args.gpu_bf16:
        work = os.path.join(args.work, f"{args.gelu}_gpu_bf16")
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run([args.dump, "--out", work, "--vocab-dir", args.vocab_dir, "--gelu", args.gelu,
                        "--device", "cuda"], check=True)
        print(f"{args.gelu} GELU, bf16 on the GPU:")
        check_gpu_bf16(work, checks)
    for i, run in enumerate(args.run):
        optimizer, ranks = run.split(":")
        work = os.path.join(args.work, f"{args.gelu}_{optimizer}_np{ranks}")
        shutil.rmtree(work, ignore_errors=True)
        command = args.mpiexec + ["-np", ranks, args.dump, "--out", work, "--vocab-dir", args.vocab_dir, "--gelu",
                   args.gelu, "--optimizer", optimizer, "--steps", str(args.steps)]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)
        print(f"{args.gelu} GELU, {optimizer} on {ranks} rank(s):")
        if i == 0:
            check_forward(work, args.gelu, checks)
        check_steps(work, run, checks)
    if checks.failures:
        print("FAILED: " + ", ".join(checks.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
