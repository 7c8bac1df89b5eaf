#!/usr/bin/env python3
"""Sums GPU kernel time by kernel name from an Nsight Compute CSV.

Profile with one metric, so each kernel runs once under the profiler:
  ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file k.csv PROGRAM ...
  python3 bench/kernel_time_summary.py k.csv --top 30

Prints, per kernel name: total ms, share of all kernel time, launches, mean us.
"""
import argparse
import collections
import csv
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv_file")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--name-width", type=int, default=90)
    args = p.parse_args()
    total_ns = collections.Counter()
    launches = collections.Counter()
    with open(args.csv_file, newline="") as f:
        rows = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(rows):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1.0)
        name = row["Kernel Name"]
        total_ns[name] += value * scale
        launches[name] += 1
    if not total_ns:
        sys.exit(f"{args.csv_file}: no gpu__time_duration.sum rows; profile with --metrics gpu__time_duration.sum --csv")
    grand = sum(total_ns.values())
    print(f"{'total ms':>10} {'share':>6} {'calls':>6} {'mean us':>9}  kernel")
    for name, ns in total_ns.most_common(args.top):
        print(f"{ns / 1e6:10.3f} {ns / grand:6.1%} {launches[name]:6d} {ns / launches[name] / 1e3:9.1f}  "
              f"{name[:args.name_width]}")
    print(f"{grand / 1e6:10.3f} {1:6.1%} {sum(launches.values()):6d}            all kernels")


if __name__ == "__main__":
    main()
