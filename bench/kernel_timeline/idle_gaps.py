#!/usr/bin/env python3
"""Where the GPU sat idle between the activities a kernel_timeline trace recorded.

Reads one <prefix>.<pid>.tsv of bench/kernel_timeline (kind, start ns, end ns, graph id,
name), keeps the activities after the first --skip fraction of the run (start-up, the
runs before the passes are recorded), and prints the idle time between them: in all, by
gap size, by what the gap sits between (kernel, memset, memcpy; inside one CUDA graph or
not), and the transitions that cost the most.

    python3 bench/kernel_timeline/idle_gaps.py /tmp/run.12345.tsv [--skip 0.6] [--top 12]
"""
import argparse
import collections
import re


def short_name(name):
    """A kernel's own name: the last "..._kernel" identifier of a mangled name, else the name cut short."""
    identifiers, i = [], 0
    while i < len(name):  # the length-prefixed identifiers of an Itanium-mangled name, in order
        digits = re.match(r"\d+", name[i:])
        if digits is None:
            i += 1
            continue
        start = i + len(digits.group(0))
        identifiers.append(name[start:start + int(digits.group(0))])
        i = start + int(digits.group(0))
    kernels = [i for i in identifiers if i.endswith("kernel")]
    if kernels:
        return kernels[-1]
    return re.sub(r"[<(].*", "", name)[:48]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--skip", type=float, default=0.6, help="fraction of the activities to leave out (default 0.6)")
    parser.add_argument("--top", type=int, default=12, help="transitions to list (default 12)")
    args = parser.parse_args()

    activities = []
    with open(args.trace) as f:
        for line in f:
            kind, start, end, graph, name = line.rstrip("\n").split("\t", 4)
            activities.append((int(start), int(end), kind, int(graph), name))
    activities.sort()
    activities = activities[int(len(activities) * args.skip):]
    if len(activities) < 2:
        raise SystemExit(f"{args.trace}: fewer than two activities after --skip {args.skip}")

    gaps = []  # (ns, previous activity, next activity)
    busy_until, last = activities[0][1], activities[0]
    for activity in activities[1:]:
        if activity[0] > busy_until:
            gaps.append((activity[0] - busy_until, last, activity))
        if activity[1] > busy_until:
            busy_until, last = activity[1], activity
    span = busy_until - activities[0][0]
    idle = sum(g[0] for g in gaps)
    counts = collections.Counter(a[2] for a in activities)
    print(f"{len(activities)} activities ({dict(counts)}) over {span / 1e6:.2f} ms; "
          f"idle {idle / 1e6:.3f} ms ({idle / span:.1%}) in {len(gaps)} gaps")

    by_size = collections.defaultdict(lambda: [0, 0.0])
    for ns, _, _ in gaps:
        us = ns / 1e3
        label = next(l for limit, l in ((1, "< 1 us"), (2, "1-2 us"), (5, "2-5 us"), (20, "5-20 us"),
                                         (200, "20-200 us"), (float("inf"), ">= 200 us")) if us < limit)
        by_size[label][0] += 1
        by_size[label][1] += ns / 1e6
    print("by gap size: " + ", ".join(f"{k} {v[1]:.3f} ms ({v[0]})" for k, v in by_size.items()))

    by_kind = collections.defaultdict(lambda: [0, 0.0])
    for ns, before, after in gaps:
        inside = "inside a graph" if before[3] == after[3] != 0 else "between graphs or outside"
        by_kind[f"{before[2]} -> {after[2]}, {inside}"][0] += 1
        by_kind[f"{before[2]} -> {after[2]}, {inside}"][1] += ns / 1e6
    for label, (n, ms) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {ms:8.3f} ms {n:6d} x  {label}")

    transitions = collections.defaultdict(lambda: [0, 0.0])
    for ns, before, after in gaps:
        key = f"{short_name(before[4])} -> {short_name(after[4])}"
        transitions[key][0] += 1
        transitions[key][1] += ns / 1e6
    print("costliest transitions:")
    for label, (n, ms) in sorted(transitions.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {ms:8.3f} ms {n:6d} x  {label}  ({1e3 * ms / n:.1f} us each)")


if __name__ == "__main__":
    main()
