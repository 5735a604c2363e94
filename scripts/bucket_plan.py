#!/usr/bin/env python3
"""DDP's bucket plan as SVG: which parameters go into which bucket, at construction and after the
rebuild, with byte sizes, read from a real run's trace.

    python3 scripts/bucket_plan.py TRACE.json -o bucket_plan.svg [--title T] [--rank R]
                                   [--caps FIRST_MIB,CAP_MIB]

TRACE is a rank's EMBER_DDP_TRACE file or a job trace from scripts/merge_traces.py. DDP records
its plan in the args of two instants (distributed/ddp/distributed_data_parallel.cc):
"ddp constructed" (the first iteration's buckets: every parameter in one bucket per dtype, Note
[First-iteration buckets]) and "buckets rebuilt" (in the gradient order the first backward
observed, the first bucket capped at first_bucket_mb), each
    {"buckets": [{"bytes": N, "params": ["layer1.0.conv1.weight", ...]}, ...]}
in launch order. A parameter's own bytes come from its autograd_hook instants' args; without them
a bucket's bytes are shared equally among its parameters.

Units: DDPOptions::bucket_cap_mb and first_bucket_mb count MiB (distributed_data_parallel.cc
multiplies them by 1024 * 1024, as PyTorch's bucket_cap_mb does: 25 MiB = 25 * 1024 * 1024 bytes),
so every size here is binary (KiB, MiB). --caps draws the caps the run used as lines: the first
bucket's at FIRST_MIB, the others' at CAP_MIB, on the rebuilt plan (the first iteration's plan has
none: Note [First-iteration buckets]); a bucket closes once it reaches its cap, so it may overshoot
the line by its last parameter. A cap beyond the picture's scale is named at the right edge.
Standard library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import PALETTE, Svg  # noqa: E402

PLAN_EVENTS = [("ddp constructed", "at construction (first iteration)"),
               ("buckets rebuilt", "after the rebuild (from the second iteration)")]
HOOK_PREFIX = "autograd_hook "


def rank_events(path, rank=None):
    """One rank's events: `rank`'s (pid) from a job trace, or the file's only rank."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    pids = sorted({e["pid"] for e in events if "pid" in e})
    if not pids:
        raise SystemExit(f"bucket_plan: {path} has no events")
    pick = pids[0] if rank is None else rank
    if pick not in pids:
        raise SystemExit(f"bucket_plan: {path} has no rank {rank} (ranks: {pids})")
    return [e for e in events if e.get("pid") == pick]


def parse_plans(events):
    """[(event name, caption, buckets)] for each plan event present, buckets as recorded (launch
    order), each {"bytes": int, "params": [names]}."""
    plans = []
    for name, caption in PLAN_EVENTS:
        found = [e for e in events if e.get("name") == name]
        if not found:
            continue
        buckets = found[0].get("args", {}).get("buckets")
        if buckets is None:
            raise SystemExit(f"bucket_plan: the '{name}' instant has no args.buckets "
                             "(a trace from an ember older than the bucket-plan args)")
        plans.append((name, caption, buckets))
    if not plans:
        raise SystemExit("bucket_plan: no 'ddp constructed' or 'buckets rebuilt' instant in the trace")
    return plans


def param_bytes(events):
    """{parameter name: bytes} from the hooks' args (the first firing of each)."""
    sizes = {}
    for e in events:
        if e.get("name", "").startswith(HOOK_PREFIX) and "bytes" in e.get("args", {}):
            sizes.setdefault(e["name"][len(HOOK_PREFIX):], e["args"]["bytes"])
    return sizes


def group_of(param):
    """The colour group: the top-level module ('layer2.1.conv1.weight' -> 'layer2', '0.bias' -> '0')."""
    return param.split(".")[0] if "." in param else param


def block_of(param):
    """Two levels of module path, for a bucket's one-line summary ('layer2.1.conv1.weight' -> 'layer2.1')."""
    parts = param.split(".")[:-1]
    return ".".join(parts[:2]) if parts else param


def summary(params):
    """The modules of a bucket in launch order, consecutive repeats merged."""
    blocks = []
    for p in params:
        if not blocks or blocks[-1] != block_of(p):
            blocks.append(block_of(p))
    return " · ".join(blocks)


def human_bytes(n):
    """Binary units, as bucket_cap_mb counts (see Units above)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} B"


def draw(events, out_path, title, width=1200, caps=None):
    """caps: (first bucket's, the others') in MiB, drawn on the rebuilt plan; None draws none."""
    plans = parse_plans(events)
    sizes = param_bytes(events)
    groups = []
    for _, _, buckets in plans:
        for b in buckets:
            for p in b["params"]:
                if group_of(p) not in groups:
                    groups.append(group_of(p))
    colours = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(sorted(groups, key=_natural))}
    left, right, bar_h = 90, 170, 26
    bar_w = width - left - right
    largest = max(b["bytes"] for _, _, buckets in plans for b in buckets) or 1
    cap_bytes = [c * (1 << 20) for c in caps] if caps else []
    # One scale for all bars: the largest bucket, or a cap up to twice as large (a larger cap is
    # named at the edge instead of squeezing the bars).
    most = max([largest] + [c for c in cap_bytes if c <= 2 * largest])
    row_h = bar_h + 30
    height = 60 + sum(34 + row_h * len(buckets) for _, _, buckets in plans) + 30 + 18 * ((len(groups) + 7) // 8)

    figures = {}
    for name, _, buckets in plans:
        key = "constructed" if name == "ddp constructed" else "rebuilt"
        figures[f"{key}.buckets"] = len(buckets)
        figures[f"{key}.total_mib"] = round(sum(b["bytes"] for b in buckets) / (1 << 20), 3)
        for i, b in enumerate(buckets):
            figures[f"{key}.bucket{i}.params"] = len(b["params"])
            figures[f"{key}.bucket{i}.kib"] = round(b["bytes"] / 1024, 1)
            figures[f"{key}.bucket{i}.mib"] = round(b["bytes"] / (1 << 20), 3)
    if caps:
        figures["first_cap_mib"], figures["cap_mib"] = caps
    svg = Svg(width, height, title)
    svg.figures(figures)
    svg.text(width / 2, 22, title, size=14, anchor="middle", font_weight="bold")
    svg.text(width / 2, 40, "one bar per bucket in launch order, its length the bucket's bytes (one scale for "
             "all); a segment per parameter, coloured by top-level module" +
             ("; dashed: the bucket's cap (it closes once it reaches it)" if caps else ""),
             size=11, anchor="middle", fill="#444")
    y = 60
    for name, caption, buckets in plans:
        svg.open("g", cls="plan", data_event=name)
        total = sum(b["bytes"] for b in buckets)
        svg.text(10, y + 16, f"{caption}: {len(buckets)} bucket(s), {human_bytes(total)}  ['{name}']"
                 + ("  no cap: one bucket per dtype" if caps and name == "ddp constructed" else ""),
                 size=12, font_weight="bold")
        y += 34
        for i, b in enumerate(buckets):
            draw_bucket(svg, i, b, sizes, colours, left, y, bar_w * b["bytes"] / most, bar_h)
            if caps and name == "buckets rebuilt":
                draw_cap(svg, caps[0] if i == 0 else caps[1], left, y, bar_w, bar_h, most)
            y += row_h
        svg.close("g")
    svg.open("g", cls="legend")
    for i, g in enumerate(sorted(groups, key=_natural)):
        x, ly = left + (i % 8) * (bar_w / 8), y + 10 + 18 * (i // 8)
        svg.rect(x, ly - 6, 14, 12, colours[g])
        svg.text(x + 20, ly + 4, g, size=10)
    svg.close("g")
    svg.save(out_path)
    print(f"bucket_plan: {', '.join(f'{n}: {len(b)} bucket(s)' for n, _, b in plans)}; wrote {out_path}")
    return plans


def draw_cap(svg, cap_mib, x, y, bar_w, h, most):
    """The bucket's cap as a dashed line across its bar, or named at the edge beyond the scale."""
    label = f"cap {cap_mib:g} MiB"
    at = x + bar_w * cap_mib * (1 << 20) / most
    if at <= x + bar_w + 0.5:
        svg.line(at, y - 4, at, y + h + 4, stroke="#D62728", width=1.5, stroke_dasharray="4 3", cls="cap",
                 data_mib=cap_mib)
        svg.text(at + 3, y - 5, label, size=9, fill="#D62728")
    else:
        svg.text(x + bar_w, y - 5, label + " (beyond this scale) ->", size=9, anchor="end", fill="#D62728",
                 cls="cap", data_mib=cap_mib)


def draw_bucket(svg, index, bucket, sizes, colours, x, y, w, h):
    params = bucket["params"]
    svg.open("g", cls="bucket", data_index=index, data_bytes=bucket["bytes"], data_params=len(params))
    svg.text(x - 8, y + h / 2 + 4, f"bucket {index}", size=11, anchor="end")
    known = all(p in sizes for p in params)
    # A parameter's share of the bar; a bucket's bytes can exceed the sum (alignment), left grey.
    shares = [sizes[p] if known else bucket["bytes"] / max(len(params), 1) for p in params]
    scale = w / max(bucket["bytes"], sum(shares), 1)
    svg.rect(x, y, w, h, "#dddddd")
    px = x
    for p, s in zip(params, shares):
        pw = s * scale
        svg.rect(px, y, pw, h, colours[group_of(p)], tooltip=f"{p}: {human_bytes(s) if known else '?'}",
                 cls="param", data_name=p, stroke="#fff", stroke_width=0.6)
        # The longest form of the name that fits: 'layer2.1.conv1.weight', 'layer2.1.conv1', '1.conv1'.
        parts = p.split(".")
        fitting = [t for t in (p, ".".join(parts[:-1]), ".".join(parts[-3:-1])) if t and len(t) * 5.5 < pw - 4]
        if fitting:
            svg.text(px + 3, y + h / 2 + 3, fitting[0], size=9, fill="#fff")
        px += pw
    svg.text(x + w + 8, y + h / 2 + 4, f"{human_bytes(bucket['bytes'])}, {len(params)} params", size=11)
    svg.text(x, y + h + 13, summary(params), size=9, fill="#444", cls="summary")
    svg.close("g")


def _natural(s):
    """'layer10' after 'layer2'; numbers as numbers."""
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a rank's EMBER_DDP_TRACE file or a merged job trace")
    p.add_argument("-o", "--out", required=True, help="the SVG to write")
    p.add_argument("--title", default="DDP's bucket plan")
    p.add_argument("--rank", type=int, help="the rank to read in a job trace (default the first)")
    p.add_argument("--caps", help="FIRST_MIB,CAP_MIB: the run's first_bucket_mb and bucket_cap_mb, drawn as lines")
    args = p.parse_args(argv)
    caps = None
    if args.caps:
        try:
            caps = tuple(float(c) for c in args.caps.split(","))
        except ValueError:
            caps = ()
        if len(caps) != 2 or min(caps) <= 0:
            p.error(f"--caps {args.caps}: expected two positive sizes in MiB, FIRST_MIB,CAP_MIB")
    draw(rank_events(args.trace, args.rank), args.out, args.title, caps=caps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
