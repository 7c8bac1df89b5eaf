#!/usr/bin/env python3
"""The PyTorch peer for Adamant's generation speed (bench/generate_bench).

The same GPT-3 model (pre-LN, learned positions, tied embeddings, GELU, biases, vocabulary
padded to 50304) in bf16 on one GPU, batch 1, a prompt of 16 tokens then 256 new ones with
a preallocated key/value cache, as a user writes it: the prompt through SDPA, each new token
one row through the layers attending to the cache. Greedy decoding (argmax on the GPU) and
top-k sampling (torch.topk, softmax, torch.multinomial). Two modes, both printed:
  eager  every step's kernels launched from Python;
  graph  one decoding step captured as a CUDA graph (torch.cuda.graph) and replayed, the
         sampling outside it, as fast serving stacks do.

  python3 bench/torch_generate_peer.py --layers 12 --hidden 768 --heads 12 [--json out.json]

Tokens/s count the new tokens of the whole call (prompt included), best of --reps.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

VOCAB = 50304
GPT2_VOCAB = 50257


class Model:
    def __init__(self, layers, hidden, heads, seq, device):
        g = torch.Generator(device="cpu").manual_seed(1234)

        def w(*shape, std=0.02):
            return (torch.randn(*shape, generator=g) * std).to(device=device, dtype=torch.bfloat16)

        self.layers, self.hidden, self.heads = layers, hidden, heads
        self.wte, self.wpe = w(VOCAB, hidden), w(seq, hidden, std=0.01)
        zeros = lambda n: torch.zeros(n, device=device, dtype=torch.bfloat16)  # noqa: E731
        ones = lambda n: torch.ones(n, device=device, dtype=torch.bfloat16)  # noqa: E731
        self.blocks = [dict(ln1=(ones(hidden), zeros(hidden)), qkv=(w(3 * hidden, hidden), zeros(3 * hidden)),
                            proj=(w(hidden, hidden), zeros(hidden)), ln2=(ones(hidden), zeros(hidden)),
                            fc=(w(4 * hidden, hidden), zeros(4 * hidden)), out=(w(hidden, 4 * hidden), zeros(hidden)))
                       for _ in range(layers)]
        self.lnf = (ones(hidden), zeros(hidden))

    def forward(self, ids, positions, k_cache, v_cache, length):
        """ids [b, t] at positions [t]; caches [layers, b, heads, capacity, head_dim]; attends to length + t."""
        b, t = ids.shape
        hd = self.hidden // self.heads
        x = self.wte[ids] + self.wpe[positions]
        for i, blk in enumerate(self.blocks):
            h = F.layer_norm(x, (self.hidden,), *blk["ln1"], 1e-5)
            q, k, v = F.linear(h, *blk["qkv"]).view(b, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
            k_cache[i, :, :, positions] = k
            v_cache[i, :, :, positions] = v
            if t > 1:  # the prompt: causal attention over itself
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # one new row: attend to the whole cache up to it (a mask keeps the static shape)
                a = F.scaled_dot_product_attention(q, k_cache[i], v_cache[i], attn_mask=length)
            x = x + F.linear(a.transpose(1, 2).reshape(b, t, self.hidden), *blk["proj"])
            h = F.layer_norm(x, (self.hidden,), *blk["ln2"], 1e-5)
            x = x + F.linear(F.gelu(F.linear(h, *blk["fc"])), *blk["out"])
        x = F.layer_norm(x[:, -1], (self.hidden,), *self.lnf, 1e-5)
        return F.linear(x, self.wte).float()


def sample(logits, greedy, top_k, generator):
    logits = logits[:, :GPT2_VOCAB]
    if greedy:
        return logits.argmax(-1)
    values, ids = torch.topk(logits / 0.8, top_k)
    return ids.gather(-1, torch.multinomial(F.softmax(values, -1), 1, generator=generator)).squeeze(-1)


def run(model, args, greedy, use_graph):
    dev = "cuda"
    capacity = args.prompt_tokens + args.new_tokens
    hd = model.hidden // model.heads
    k_cache = torch.zeros(model.layers, 1, model.heads, capacity, hd, device=dev, dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    prompt = torch.tensor([[(997 * t) % GPT2_VOCAB for t in range(args.prompt_tokens)]], device=dev)
    generator = torch.Generator(device=dev).manual_seed(1)
    # Static inputs of one decoding step: the token, its position, the mask of cached positions.
    token = torch.zeros(1, 1, dtype=torch.long, device=dev)
    position = torch.zeros(1, dtype=torch.long, device=dev)
    mask = torch.zeros(1, 1, 1, capacity, dtype=torch.bool, device=dev)
    step_logits = None
    graph = None

    def step():
        return model.forward(token, position, k_cache, v_cache, mask)

    if use_graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step_logits = step()

    best = 0.0
    for _ in range(args.reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        logits = model.forward(prompt, torch.arange(args.prompt_tokens, device=dev), k_cache, v_cache, None)
        mask.zero_()
        mask[..., : args.prompt_tokens] = True
        out = []
        for i in range(args.new_tokens):
            nxt = sample(logits, greedy, args.top_k, generator)
            out.append(int(nxt))  # each token reaches the host as it is made, to be streamed
            if i + 1 == args.new_tokens:
                break
            p = args.prompt_tokens + i
            token.copy_(nxt.view(1, 1))
            position.fill_(p)
            mask[..., p] = True
            if graph is not None:
                graph.replay()
                logits = step_logits
            else:
                logits = step()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        best = max(best, len(out) / seconds)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    model = Model(args.layers, args.hidden, args.heads, args.seq, "cuda")
    results = {}
    with torch.inference_mode():
        for mode in ("eager", "graph"):
            for greedy in (True, False):
                rate = run(model, args, greedy, mode == "graph")
                name = f"{mode} {'greedy' if greedy else 'top-k'}"
                results[name] = rate
                print(f"torch peer {name}: {rate:.1f} tokens/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
