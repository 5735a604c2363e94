#!/usr/bin/python3
"""Plots a trainer's --metrics file (CSV or JSONL, examples/common/metrics_writer.h) as one SVG.

    /usr/bin/python3 scripts/plot_metrics.py run.csv [-o run.svg]

Panels against the global step: the loss, img/s and, for a DDP run (bytes_sent or overlap above 0
somewhere; the single-process trainer writes 0 for both), the fraction of communication hidden
behind backward. Dashed lines mark the epochs' starts. Drawn with scripts/svg.py (standard
library only: no matplotlib on these machines), so it opens in any browser and renders on GitHub.
"""

import argparse
import csv
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import Svg, nice_ticks, tick_label  # noqa: E402

WIDTH, PANEL_HEIGHT, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 760, 200, 70, 20, 30, 40
COLORS = {"loss": "#d62728", "img_per_s": "#1f77b4", "tokens_per_s": "#1f77b4", "overlap": "#2ca02c"}
TITLES = {"loss": "loss", "img_per_s": "images / s (the whole job)", "tokens_per_s": "tokens / s (the whole job)",
          "overlap": "communication overlap"}


def read_metrics(path):
    """The rows as dicts of floats (None for a missing or non-finite value), from .csv or .jsonl.
    The restarting launcher's records (scripts/elastic_run.py: "# ..." lines in a CSV, objects with
    an "event" in JSONL) are not steps and are skipped."""
    with open(path) as f:
        if path.endswith(".jsonl"):
            rows = [r for r in (json.loads(line) for line in f if line.strip()) if "event" not in r]
        elif path.endswith(".csv"):
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
        else:
            sys.exit(f"plot_metrics: '{path}' must end in .csv or .jsonl")

    def number(v):
        try:
            x = float(v)
        except (TypeError, ValueError):
            return None
        return x if math.isfinite(x) else None

    out = [{k: number(v) for k, v in row.items()} for row in rows]
    if not out or any(r.get("step") is None for r in out):
        sys.exit(f"plot_metrics: '{path}' has no rows, or a row without a step")
    return out


def panel(svg, rows, key, top, epoch_starts):
    """One panel of `key` against the step, its frame starting at y = top."""
    points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    x0, x1 = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    y0, y1 = top + PANEL_HEIGHT, top  # bottom, top of the plot area
    steps = [r["step"] for r in rows]
    xs = nice_ticks(min(steps), max(steps), count=5, integer=True)
    ys = nice_ticks(min(v for _, v in points), max(v for _, v in points), count=5) if points else [0, 1]
    if key == "overlap":
        ys = [0, 0.25, 0.5, 0.75, 1.0]

    def sx(x):
        return x0 + (x - xs[0]) / ((xs[-1] - xs[0]) or 1) * (x1 - x0)

    def sy(y):
        return y0 - (y - ys[0]) / ((ys[-1] - ys[0]) or 1) * (y0 - y1)

    svg.text(x0, top - 8, TITLES[key], size=14, font_weight="bold")
    svg.add("rect", x=x0, y=y1, width=x1 - x0, height=y0 - y1, fill="none", stroke="#888")
    for t in ys:
        svg.line(x0, sy(t), x1, sy(t), stroke="#eee")
        svg.text(x0 - 6, sy(t) + 4, tick_label(t), anchor="end")
    for t in xs:
        svg.text(sx(t), y0 + 16, tick_label(t), anchor="middle")
    for s in epoch_starts:
        svg.line(sx(s), y1, sx(s), y0, stroke="#aaa", stroke_dasharray="4,3")
    if points:
        svg.add("polyline", points=" ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points), fill="none",
                stroke=COLORS[key], stroke_width=1.5)
        if len(points) == 1:
            svg.add("circle", cx=round(sx(points[0][0]), 1), cy=round(sy(points[0][1]), 1), r=3, fill=COLORS[key])
    svg.text((x0 + x1) / 2, y0 + 32, "step", anchor="middle")


def render(rows, title):
    keys = ["loss", "tokens_per_s" if rows and "tokens_per_s" in rows[0] else "img_per_s"]
    # A DDP run (it sent bytes, or overlapped some): the single-process trainer writes 0 for both.
    if any((r.get("overlap") or 0) > 0 or (r.get("bytes_sent") or 0) > 0 for r in rows):
        keys.append("overlap")
    epoch_starts = [b["step"] for a, b in zip(rows, rows[1:]) if a.get("epoch") != b.get("epoch")]
    height = len(keys) * (PANEL_HEIGHT + MARGIN_TOP + MARGIN_BOTTOM) + 30
    svg = Svg(WIDTH, height, title)
    svg.text(WIDTH / 2, 20, title, size=15, anchor="middle")
    for i, key in enumerate(keys):
        panel(svg, rows, key, 30 + MARGIN_TOP + i * (PANEL_HEIGHT + MARGIN_TOP + MARGIN_BOTTOM), epoch_starts)
    return str(svg)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("metrics", help="a --metrics file: FILE.csv or FILE.jsonl")
    parser.add_argument("-o", "--output", help="the SVG to write (default: the metrics file with .svg)")
    args = parser.parse_args()
    rows = read_metrics(args.metrics)
    output = args.output or args.metrics.rsplit(".", 1)[0] + ".svg"
    title = f"{args.metrics.rsplit('/', 1)[-1]}: {len(rows)} steps"
    try:
        with open(output, "w") as f:
            f.write(render(rows, title))
    except OSError as e:
        sys.exit(f"plot_metrics: cannot write '{output}': {e.strerror}")
    print(output)


if __name__ == "__main__":
    main()
