#!/usr/bin/env python3
"""The markdown table of bench/compare_builds.sh, from the results folder it fills.

Each case has a folder <results>/<case>/ with one folder a run: before-R and after-R for
round R (bench/run_metrics.py's figures of `adamant train`, or only a status) and peer
(bench/torch_gpt_peer.py's --json). The gain compares the medians of the rounds; the
ratio to PyTorch and the peak memory are the after build's.

  python3 bench/compare_table.py /tmp/adamant-compare 126m:dropout 126m
"""
import argparse
import glob
import json
import os
import re
import statistics


def load_run(folder):
    """The run's JSON in `folder` (one file), or None where the run never started."""
    files = sorted(glob.glob(os.path.join(folder, "*.json")))
    if not files:
        return None
    with open(files[0]) as f:
        return json.load(f)


def ok(result):
    return result is not None and result.get("status", "ok") == "ok" and "tokens_per_s" in result


def status_text(result):
    return "not run" if result is None else result.get("status", "?")


def rounds_of(case_folder, build):
    """The build's runs in round order: [(round, result)]."""
    runs = []
    for folder in glob.glob(os.path.join(case_folder, build + "-*")):
        match = re.fullmatch(build + r"-(\d+)", os.path.basename(folder))
        if match:
            runs.append((int(match.group(1)), load_run(folder)))
    return sorted(runs, key=lambda run: run[0])


def tokens_cell(runs):
    """Each round's tokens/s (or status), and their median where any ran."""
    if not runs:
        return "not run", None
    texts = [f"{r['tokens_per_s']:,.0f}" if ok(r) else status_text(r) for _, r in runs]
    good = [r["tokens_per_s"] for _, r in runs if ok(r)]
    return ", ".join(texts), statistics.median(good) if good else None


def describe(case):
    """'GPT-3 126M, micro-batch 8, sequence 2048' style words for a case such as 126m:dropout:seq8192."""
    parts = case.split(":")
    words = ["GPT-3 " + parts[0].upper()]
    for part in parts[1:]:
        if part.startswith("seq"):
            words.append("sequence " + part[3:])
        elif part.startswith("mb"):
            words.append("micro-batch " + part[2:])
        elif part == "tanh":
            words.append("tanh GELU")
        elif part == "fused":
            words.append("tanh GELU in the GEMM epilogues")
    dropout = "0.1 / 0.1" if "dropout" in parts[1:] else "0 / 0"
    return ", ".join(words), dropout


def row(results, case):
    folder = os.path.join(results, case)
    before_text, before = tokens_cell(rounds_of(folder, "before"))
    after_runs = rounds_of(folder, "after")
    after_text, after = tokens_cell(after_runs)
    peer = load_run(os.path.join(folder, "peer"))
    last_after = next((r for _, r in reversed(after_runs) if ok(r)), None)
    gain = f"{after / before - 1:+.1%}" if before and after else ""
    peer_text = f"{peer['tokens_per_s']:,.0f}" if ok(peer) else status_text(peer)
    ratio = f"**{after / peer['tokens_per_s']:.2f}x**" if after and ok(peer) else ""
    peak = f"{last_after['peak_allocated_gib']:.1f}" if last_after else ""
    peer_peak = f"{peer['peak_gib']:.1f}" if ok(peer) else ""
    mfu = f"{last_after['mfu']:.1%}" if last_after and "mfu" in last_after else ""
    shape, dropout = describe(case)
    cells = [shape, dropout, before_text, after_text, gain, peer_text, ratio, peak, peer_peak, mfu]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| shape | hidden / attention dropout | ours before, tokens/s | ours after, tokens/s | gain | "
          "PyTorch tokens/s | ours / PyTorch | ours peak GiB | PyTorch peak GiB | ours MFU |")


def table(results, cases):
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    lines += [row(results, case) for case in cases]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the folder bench/compare_builds.sh filled (its RESULTS)")
    parser.add_argument("cases", nargs="+", help="the cases in table order, as compare_builds.sh took them")
    args = parser.parse_args()
    if not os.path.isdir(args.results):
        raise SystemExit(f"{args.results}: no such folder; give the RESULTS folder of bench/compare_builds.sh")
    print(table(args.results, args.cases))


if __name__ == "__main__":
    main()
