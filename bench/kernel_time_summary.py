"""Sums Nsight Compute's kernel durations by kernel name: the device time of a program's kernels,
read from `ncu --metrics gpu__time_duration.sum --csv --page raw` (scripts/gpu_check.sh's profile
part, on a machine without Nsight Systems).

Usage: python3 bench/kernel_time_summary.py NCU.csv [--steps N] [--top K]
Prints the total, per step when --steps says how many steps the profiled kernels cover, and the
K kernels (by name, template arguments cut) with the most device time.
"""
import argparse
import collections
import csv
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = [r for r in csv.reader(f)]
    header = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "gpu__time_duration.sum" in r)
    names = rows[header]
    name_col, time_col = names.index("Kernel Name"), names.index("gpu__time_duration.sum")
    unit = rows[header + 1][time_col]  # ncu's units row: "nsecond", "usecond" or "msecond"
    scale_us = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
    total_us = 0.0
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for r in rows[header + 2:]:
        if len(r) <= max(name_col, time_col) or not r[time_col]:
            continue
        us = float(r[time_col].replace(",", "")) * scale_us
        name = re.sub(r"<.*", "", r[name_col])[:100]
        by_name[name][0] += 1
        by_name[name][1] += us
        total_us += us
    launches = sum(c for c, _ in by_name.values())
    print(f"# ember: {launches} kernels, {total_us / 1e3:.3f} ms of device time over {a.steps} "
          f"step(s): {total_us / 1e3 / a.steps:.3f} ms, {launches / a.steps:.0f} kernels a step")
    for name, (count, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"{us / 1e3:9.3f} ms {count:6d}x  {name}")


if __name__ == "__main__":
    main()
