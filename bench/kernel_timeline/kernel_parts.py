#!/usr/bin/env python3
"""Kernel time a step by part of the model, from kernel_timeline traces of one or more programs.

Each trace (bench/kernel_timeline, <prefix>.<pid>.tsv) is cut at its step markers: the
kernels that run once a step (by default Adamant's position-embedding gradient and the
PyTorch peer's loss gradient, each once a micro-batch; the benchmarks run one micro-batch a
step). The kernels of the last --last steps (warm-up and compilation left out) are summed
by part (attention, GEMMs, cross-entropy, layer norm, optimizer, other kernels, memsets,
copies) and divided by the step count, so that two programs traced in one call compare side
by side: Adamant's kernels and PyTorch's (cuDNN, cuBLASLt, Triton) fall into the same parts.

    python3 bench/kernel_timeline/kernel_parts.py ours.1234.tsv peer.5678.tsv [--top 10]
"""
import argparse
import collections
import os
import re

from idle_gaps import read_trace, short_name

# First match wins, against a kernel's own name (short_name: a mangled name's namespaces, which
# for Adamant's kernels all hold "adamant", are left out), case-insensitively.
PARTS = (
    ("attention", r"flash|sdpa|fmha|dot_do_o|convert_dq"),
    ("GEMMs", r"nvjet|gemm|cutlass|xmma|splitkreduce"),
    ("cross-entropy", r"cross_entropy|log_softmax|nll_loss"),
    ("layer norm", r"layernorm|layer_norm"),
    ("optimizer", r"adam|squared_norm|foreach|multi_tensor_apply"),
)
# Once a micro-batch: Adamant's position-embedding gradient, PyTorch's (compiled) loss gradient.
DEFAULT_MARKER = r"embedding_position_backward|nll_loss_backward"


def part_of(activity):
    """The part of the model an activity belongs to."""
    if activity.kind != "kernel":
        return activity.kind + "s"
    name = short_name(activity.name)
    for part, pattern in PARTS:
        if re.search(pattern, name, re.IGNORECASE):
            return part
    return "other kernels"


def steps_window(activities, marker, last):
    """(activities, steps): those of the last `last` whole steps (fewer when the trace holds
    fewer), that is, that start between the end of an activity whose name matches `marker`
    and the end of the last such activity."""
    marks = [a for a in activities if re.search(marker, a.name)]
    if len(marks) < 2:
        raise ValueError(f"{len(marks)} step marker(s) matching {marker!r}; a whole step needs two")
    steps = min(last, len(marks) - 1)
    begin, end = marks[-1 - steps].end, marks[-1].end
    return [a for a in activities if begin <= a.start < end], steps


def per_step(activities, steps, key):
    """Milliseconds a step per key(activity), largest first, and the launches a step."""
    ns = collections.Counter()
    launches = collections.Counter()
    for a in activities:
        ns[key(a)] += a.end - a.start
        launches[key(a)] += 1
    return {k: (v / 1e6 / steps, launches[k] / steps) for k, v in ns.most_common()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--marker", default=DEFAULT_MARKER,
                        help="regular expression naming the kernel that runs once a step")
    parser.add_argument("--last", type=int, default=8,
                        help="steps to sum, the trace's last (default 8: warm-up and compilation left out)")
    parser.add_argument("--top", type=int, default=0, help="also list each trace's costliest kernels")
    args = parser.parse_args()
    columns = []
    for path in args.traces:
        with open(path) as f:
            activities = read_trace(f)
        try:
            window, steps = steps_window(activities, args.marker, args.last)
        except ValueError as e:
            raise SystemExit(f"{path}: {e}; pass --marker") from e
        columns.append((os.path.basename(path), steps, window))

    names = [name for name, _, _ in columns]
    width = max(14, *(len(n) for n in names))
    print(f"{'ms a step':<16}" + "".join(f"{n:>{width}}" for n in names))
    by_part = [per_step(window, steps, part_of) for _, steps, window in columns]
    parts = [p for p, _ in PARTS] + ["other kernels", "memsets", "memcpys"]
    for part in parts:
        if any(part in t for t in by_part):
            print(f"{part:<16}" + "".join(f"{t.get(part, (0.0, 0))[0]:>{width}.3f}" for t in by_part))
    kernels = [sum(ms for p, (ms, _) in t.items() if p not in ("memsets", "memcpys")) for t in by_part]
    print(f"{'all kernels':<16}" + "".join(f"{ms:>{width}.3f}" for ms in kernels))
    print(f"{'steps traced':<16}" + "".join(f"{steps:>{width}d}" for _, steps, _ in columns))
    for name, steps, window in columns if args.top else ():
        print(f"\n{name}: costliest kernels ({steps} steps)")
        top = per_step([a for a in window if a.kind == "kernel"], steps, lambda a: short_name(a.name))
        for kernel, (ms, launches) in list(top.items())[:args.top]:
            print(f"  {ms:8.3f} ms {launches:7.1f} x  {kernel}")


if __name__ == "__main__":
    main()
