#!/usr/bin/env python3
"""Median time of each kernel, phase by phase, from a kernel_timeline trace of a benchmark.

A benchmark that times one call after another (bench/flash_attention_bench: the forward, then
the backward's statistics, key and query passes, shape after shape) launches the same few
kernels over and over. This cuts the trace's kernels into phases: a phase repeats one cycle of
kernels (one call's launches), and ends where a launch breaks the cycle. Each phase prints
its cycle's kernels with their median durations and the sum, so that a call's time splits
into its kernels; kernels are named with their template arguments, so that instantiations
(head size, dropout) tell apart.

    python3 bench/kernel_timeline/kernel_phases.py /tmp/tl.12345.tsv [--leave-out hold_gpu] [--min-repeats 3]
"""
import argparse
import collections
import re
import statistics

from idle_gaps import read_trace, short_name

# A phase: its cycle of kernel names and the durations (ns) of each position, one list per repeat.
Phase = collections.namedtuple("Phase", "cycle repeats")


def kernel_label(name):
    """short_name with the template's integer and bool arguments of a mangled name: key_kernel<64, 1, 0>."""
    label = short_name(name)
    found = re.search(re.escape(label) + r"I((?:L[a-z]+-?\d+E)+)E", name) if label in name else None
    if not found:
        return label
    arguments = re.findall(r"L[a-z]+(-?\d+)E", found.group(1))
    return f"{label}<{', '.join(arguments)}>"


def cycle_length(names, start):
    """Launches from `start` before the first name repeats: the cycle a phase starting there repeats."""
    seen = set()
    for i in range(start, len(names)):
        if names[i] in seen:
            return i - start
        seen.add(names[i])
    return len(names) - start


def phases(kernels):
    """Phases of (name, duration ns) launches in order: maximal runs in which launch i names
    what launch i - cycle named."""
    names = [name for name, _ in kernels]
    found, start = [], 0
    while start < len(kernels):
        period = cycle_length(names, start)
        end = start + period
        while end < len(kernels) and names[end] == names[end - period]:
            end += 1
        repeats = [[kernels[i][1] for i in range(first, first + period)]
                   for first in range(start, end - period + 1, period)]
        found.append(Phase(tuple(names[start:start + period]), repeats))
        start = start + len(repeats) * period
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a <prefix>.<pid>.tsv of bench/kernel_timeline")
    parser.add_argument("--leave-out", default="",
                        help="a regular expression: kernels whose label it finds in are dropped first "
                             "(e.g. hold_gpu, the benchmark's own kernel that holds the GPU before each call)")
    parser.add_argument("--min-repeats", type=int, default=3, help="leave out phases repeated fewer times")
    args = parser.parse_args()
    with open(args.trace, encoding="utf-8") as lines:
        kernels = [(kernel_label(a.name), a.end - a.start) for a in read_trace(lines) if a.kind == "kernel"]
    if args.leave_out:
        kernels = [(name, ns) for name, ns in kernels if not re.search(args.leave_out, name)]
    for phase in phases(kernels):
        if len(phase.repeats) < args.min_repeats:
            continue
        medians = [statistics.median(repeat[i] for repeat in phase.repeats) / 1000 for i in range(len(phase.cycle))]
        parts = "  ".join(f"{name} {median:.1f}" for name, median in zip(phase.cycle, medians))
        print(f"{len(phase.repeats):4d} x  {parts}  = {sum(medians):.1f} us")


if __name__ == "__main__":
    main()
