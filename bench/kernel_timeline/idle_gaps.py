#!/usr/bin/env python3
"""Where the GPU sat idle between the activities a kernel_timeline trace recorded.

Reads one <prefix>.<pid>.tsv of bench/kernel_timeline (kind, start ns, end ns, graph id,
correlation id, name; traces of older tracers have no correlation id), keeps the activities
after the first --skip fraction of the run (start-up, the runs before the passes are
recorded), and prints the idle time between them: in all, by gap size, by what the gap sits
between (kernel, memset, memcpy; inside one CUDA graph or not), and the transitions that cost
the most. Where the trace has the host's CUDA calls (kind api), also how much of the idle time
the GPU waited for the host: the call that issued the work after a gap started only after the
gap had opened, and which calls the host was in during the longest such gaps.

    python3 bench/kernel_timeline/idle_gaps.py /tmp/run.12345.tsv [--skip 0.6] [--top 12]
"""
import argparse
import collections
import re

# One activity of the trace: start and end (ns; the device's for GPU work, the host's for a
# call), kind, CUDA graph id (0: none), name, and the id of the host call that issued it.
Activity = collections.namedtuple("Activity", "start end kind graph name correlation", defaults=(0,))
# The GPU idle for `ns` between the activity that ended last and the next one to start.
Gap = collections.namedtuple("Gap", "ns before after")

SIZE_BUCKETS = ((1, "< 1 us"), (2, "1-2 us"), (5, "2-5 us"), (20, "5-20 us"), (200, "20-200 us"),
                (float("inf"), ">= 200 us"))
HOST_CALL = "api"


def read_lines(lines):
    """Every row of a trace (GPU work and host calls), in order of their start."""
    rows = []
    for number, line in enumerate(lines, 1):
        fields = line.rstrip("\n").split("\t", 5)
        if len(fields) == 5:
            kind, start, end, graph, name = fields
            correlation = 0
        elif len(fields) == 6:
            kind, start, end, graph, correlation, name = fields
        else:
            raise ValueError(f"line {number}: {len(fields)} tab-separated fields, expected 6 "
                             "(kind, start, end, graph, correlation, name) or 5 (without the correlation)")
        rows.append(Activity(int(start), int(end), kind, int(graph), name, int(correlation)))
    rows.sort()
    return rows


def read_trace(lines):
    """The GPU activities of a trace's lines (kernels, copies, memsets), in order of their start."""
    return [row for row in read_lines(lines) if row.kind != HOST_CALL]


def read_host_calls(lines):
    """The host's CUDA calls of a trace's lines, in order of their start (none in older traces)."""
    return [row for row in read_lines(lines) if row.kind == HOST_CALL]


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


def host_late(gaps, host_calls):
    """The gaps the GPU spent waiting for the host: (gap, issuing call, ns of the gap before that call
    started), for each gap whose next activity was issued by a call that started after the gap opened."""
    issued_by = {call.correlation: call for call in host_calls if call.correlation != 0}
    late = []
    for gap in gaps:
        call = issued_by.get(gap.after.correlation)
        opened = gap.after.start - gap.ns
        if call is not None and call.start > opened:
            late.append((gap, call, min(gap.ns, call.start - opened)))
    return late


def calls_during(host_calls, start, end):
    """The host calls that overlap [start, end), in order."""
    return [call for call in host_calls if call.start < end and call.end > start]


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
        rows = read_lines(f)
    activities = [row for row in rows if row.kind != HOST_CALL]
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
    host_calls = [row for row in rows if row.kind == HOST_CALL and row.start >= activities[0].start]
    if not host_calls:
        return
    late = host_late(gaps, host_calls)
    late_ns = sum(ns for _, _, ns in late)
    print(f"waiting for the host: {late_ns / 1e6:.3f} ms of the idle time in {len(late)} gaps (the work after the gap "
          "was issued after the gap opened); by the call that issued it:")
    by_call = collections.defaultdict(lambda: [0, 0.0])
    for _, call, ns in late:
        by_call[call.name][0] += 1
        by_call[call.name][1] += ns / 1e6
    for name, (n, ms) in sorted(by_call.items(), key=lambda item: -item[1][1]):
        print(f"  {ms:8.3f} ms {n:6d} x  {name}")
    print("longest of them, with the host's calls from the gap's opening to the issuing call:")
    for gap, call, ns in sorted(late, key=lambda item: -item[2])[:args.top]:
        opened = gap.after.start - gap.ns
        print(f"  {ns / 1e3:8.1f} us before {short_name(gap.after.name)} (issued by {call.name}), "
              f"after {short_name(gap.before.name)}:")
        for c in calls_during(host_calls, opened, call.start)[:8]:
            print(f"      {(c.start - opened) / 1e3:+9.1f} us  {(c.end - c.start) / 1e3:8.1f} us  {c.name}")


if __name__ == "__main__":
    main()
