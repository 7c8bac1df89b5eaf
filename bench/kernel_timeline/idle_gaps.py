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

# One activity of the trace: device start and end (ns), kind, CUDA graph id (0: none), name.
Activity = collections.namedtuple("Activity", "start end kind graph name")
# The GPU idle for `ns` between the activity that ended last and the next one to start.
Gap = collections.namedtuple("Gap", "ns before after")

SIZE_BUCKETS = ((1, "< 1 us"), (2, "1-2 us"), (5, "2-5 us"), (20, "5-20 us"), (200, "20-200 us"),
                (float("inf"), ">= 200 us"))


def read_trace(lines):
    """The activities of a trace's lines, in order of their start."""
    activities = []
    for number, line in enumerate(lines, 1):
        fields = line.rstrip("\n").split("\t", 4)
        if len(fields) != 5:
            raise ValueError(f"line {number}: {len(fields)} tab-separated fields, expected 5 "
                             "(kind, start, end, graph, name)")
        kind, start, end, graph, name = fields
        activities.append(Activity(int(start), int(end), kind, int(graph), name))
    activities.sort()
    return activities


def idle_gaps(activities):
    """Every interval in which no activity ran, between the first start and the last end.

    Activities may overlap (several streams): a gap opens only after the latest end so far.
    """
    gaps = []
    if not activities:
        return gaps
    busy_until, last = activities[0].end, activities[0]
    for activity in activities[1:]:
        if activity.start > busy_until:
            gaps.append(Gap(activity.start - busy_until, last, activity))
        if activity.end > busy_until:
            busy_until, last = activity.end, activity
    return gaps


def size_bucket(ns):
    return next(label for limit, label in SIZE_BUCKETS if ns / 1e3 < limit)


def place(gap):
    """What a gap sits between: the two kinds, and whether one CUDA graph holds both."""
    inside = gap.before.graph == gap.after.graph != 0
    return f"{gap.before.kind} -> {gap.after.kind}, {'inside a graph' if inside else 'between graphs or outside'}"


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
    kernels = [identifier for identifier in identifiers if identifier.endswith("kernel")]
    if kernels:
        return kernels[-1]
    return re.sub(r"[<(].*", "", name)[:48]


def totals(gaps, key):
    """(count, idle ms) per key(gap), costliest first."""
    sums = collections.defaultdict(lambda: [0, 0.0])
    for gap in gaps:
        sums[key(gap)][0] += 1
        sums[key(gap)][1] += gap.ns / 1e6
    return sorted(sums.items(), key=lambda item: -item[1][1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--skip", type=float, default=0.6, help="fraction of the activities to leave out (default 0.6)")
    parser.add_argument("--top", type=int, default=12, help="transitions to list (default 12)")
    args = parser.parse_args()
    with open(args.trace) as f:
        activities = read_trace(f)
    activities = activities[int(len(activities) * args.skip):]
    if len(activities) < 2:
        raise SystemExit(f"{args.trace}: fewer than two activities after --skip {args.skip}")

    gaps = idle_gaps(activities)
    span = max(a.end for a in activities) - activities[0].start
    idle = sum(g.ns for g in gaps)
    kinds = dict(collections.Counter(a.kind for a in activities))
    print(f"{len(activities)} activities ({kinds}) over {span / 1e6:.2f} ms; "
          f"idle {idle / 1e6:.3f} ms ({idle / span:.1%}) in {len(gaps)} gaps")
    print("by gap size: " + ", ".join(f"{label} {ms:.3f} ms ({n})" for label, (n, ms) in totals(gaps, lambda g: size_bucket(g.ns))))
    for label, (n, ms) in totals(gaps, place):
        print(f"  {ms:8.3f} ms {n:6d} x  {label}")
    print("costliest transitions:")
    for label, (n, ms) in totals(gaps, lambda g: f"{short_name(g.before.name)} -> {short_name(g.after.name)}")[:args.top]:
        print(f"  {ms:8.3f} ms {n:6d} x  {label}  ({1e3 * ms / n:.1f} us each)")


if __name__ == "__main__":
    main()
