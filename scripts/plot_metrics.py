#!/usr/bin/python3
"""Plots a trainer's --metrics file (CSV or JSONL, examples/common/metrics_writer.h) as one SVG.

    /usr/bin/python3 scripts/plot_metrics.py run.csv [-o run.svg]

Panels against the global step: the loss, img/s and, for a DDP run (bytes_sent or overlap above 0
somewhere; the single-process trainer writes 0 for both), the fraction of communication hidden
behind backward. Dashed lines mark the epochs' starts. The SVG is written by hand (no matplotlib on
these machines), so it opens in any browser and renders on GitHub.
"""

import argparse
import csv
import json
import math
import sys
from xml.sax.saxutils import escape

WIDTH, PANEL_HEIGHT, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 760, 200, 70, 20, 30, 40
COLORS = {"loss": "#d62728", "img_per_s": "#1f77b4", "overlap": "#2ca02c"}
TITLES = {"loss": "loss", "img_per_s": "images / s (the whole job)", "overlap": "communication overlap"}


def read_metrics(path):
    """The rows as dicts of floats (None for a missing or non-finite value), from .csv or .jsonl."""
    with open(path) as f:
        if path.endswith(".jsonl"):
            rows = [json.loads(line) for line in f if line.strip()]
        elif path.endswith(".csv"):
            rows = list(csv.DictReader(f))
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


def nice_ticks(lo, hi, count=5, integer=False):
    """About `count` round tick values covering [lo, hi] (whole numbers only with `integer`)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    if integer:
        raw = max(raw, 1.0)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(ticks[-1] + step)
    return ticks


def fmt(v):
    return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3g}"


def panel(rows, key, top, epoch_starts):
    """SVG elements of one panel whose frame starts at y = top."""
    points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    x0, x1 = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    y0, y1 = top + PANEL_HEIGHT, top  # bottom, top of the plot area
    steps = [r["step"] for r in rows]
    xs = nice_ticks(min(steps), max(steps), integer=True)
    ys = nice_ticks(min(v for _, v in points), max(v for _, v in points)) if points else [0, 1]
    if key == "overlap":
        ys = [0, 0.25, 0.5, 0.75, 1.0]

    def sx(x):
        return x0 + (x - xs[0]) / ((xs[-1] - xs[0]) or 1) * (x1 - x0)

    def sy(y):
        return y0 - (y - ys[0]) / ((ys[-1] - ys[0]) or 1) * (y0 - y1)

    e = [f'<text x="{x0}" y="{top - 8}" font-size="14" font-weight="bold">{escape(TITLES[key])}</text>',
         f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" stroke="#888"/>']
    for t in ys:
        e.append(f'<line x1="{x0}" y1="{sy(t):.1f}" x2="{x1}" y2="{sy(t):.1f}" stroke="#eee"/>')
        e.append(f'<text x="{x0 - 6}" y="{sy(t) + 4:.1f}" font-size="11" text-anchor="end">{fmt(t)}</text>')
    for t in xs:
        e.append(f'<text x="{sx(t):.1f}" y="{y0 + 16}" font-size="11" text-anchor="middle">{fmt(t)}</text>')
    for s in epoch_starts:
        e.append(f'<line x1="{sx(s):.1f}" y1="{y1}" x2="{sx(s):.1f}" y2="{y0}" stroke="#aaa" '
                 'stroke-dasharray="4,3"/>')
    if points:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        e.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[key]}" stroke-width="1.5"/>')
        if len(points) == 1:
            x, y = points[0]
            e.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{COLORS[key]}"/>')
    e.append(f'<text x="{(x0 + x1) / 2}" y="{y0 + 32}" font-size="11" text-anchor="middle">step</text>')
    return e


def render(rows, title):
    keys = ["loss", "img_per_s"]
    # A DDP run (it sent bytes, or overlapped some): the single-process trainer writes 0 for both.
    if any((r.get("overlap") or 0) > 0 or (r.get("bytes_sent") or 0) > 0 for r in rows):
        keys.append("overlap")
    epoch_starts = [b["step"] for a, b in zip(rows, rows[1:]) if a.get("epoch") != b.get("epoch")]
    height = len(keys) * (PANEL_HEIGHT + MARGIN_TOP + MARGIN_BOTTOM) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="20" font-size="15" text-anchor="middle">{escape(title)}</text>']
    for i, key in enumerate(keys):
        top = 30 + MARGIN_TOP + i * (PANEL_HEIGHT + MARGIN_TOP + MARGIN_BOTTOM)
        out += panel(rows, key, top, epoch_starts)
    out.append("</svg>")
    return "\n".join(out) + "\n"


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
