#!/usr/bin/env python3
"""A DDP bucket's memory as SVG, read from a real run's trace: each bucket's flat buffer, the slot
of every parameter in it (its offset and length in the buffer, the shape its view gives it), the
locator from a parameter to its bucket and slot, and the pending count that launches the bucket.

    python3 scripts/bucket_memory.py TRACE.json -o bucket_memory.svg [--title T] [--rank R]
                                     [--event "buckets rebuilt"|"ddp constructed"]

TRACE is a rank's EMBER_DDP_TRACE file or a job trace from scripts/merge_traces.py. The plan is the
args of DDP's "buckets rebuilt" instant (by default; "ddp constructed" for the first iteration's):
per bucket its "dtype" and "slots" [{"param_index", "offset", "length", "shape"}], as the Reducer
holds them (Reducer::describe_bucket_memory, docs/design.md step 5). A slot's width grows with its
length but never goes below a readable minimum, so a 10-element bias stays visible beside a
32768-element weight: the picture is to scale only where it says so. Standard library only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import PALETTE, Svg  # noqa: E402
from bucket_plan import rank_events  # noqa: E402

LEFT, WIDTH, MIN_SLOT = 20, 900, 70
BAR_H, BLOCK_H = 34, 128


def plan_of(events, event):
    found = [e for e in events if e.get("name") == event]
    if not found:
        raise SystemExit(f"bucket_memory: the trace has no {event!r} instant")
    buckets = found[-1].get("args", {}).get("buckets", [])
    if not buckets or "slots" not in buckets[0]:
        raise SystemExit(f"bucket_memory: the {event!r} plan has no slots (a trace from an older ember?)")
    return buckets


def slot_widths(lengths, total_width):
    """Widths that add up to total_width: MIN_SLOT each, the rest shared in proportion to length."""
    spare = max(total_width - MIN_SLOT * len(lengths), 0)
    total = sum(lengths) or 1
    return [MIN_SLOT + spare * n / total for n in lengths]


def draw_bucket(svg, b, bucket, y):
    slots, names = bucket["slots"], bucket["params"]
    numel = sum(s["length"] for s in slots)
    svg.text(LEFT, y, f"bucket {b}: one flat buffer, {bucket['dtype']}[{numel}] ({bucket['bytes']} bytes); "
             f"pending = {len(slots)} at the start of backward", size=12, font_weight="bold")
    x = LEFT
    for j, (s, w) in enumerate(zip(slots, slot_widths([s["length"] for s in slots], WIDTH - 2 * LEFT))):
        colour = PALETTE[s["param_index"] % len(PALETTE)]
        svg.open("g", cls="slot", data_bucket=b, data_slot=j, data_param=names[j], data_offset=s["offset"],
                 data_length=s["length"])
        svg.rect(x, y + 10, w - 2, BAR_H, colour, fill_opacity=0.35, stroke=colour,
                 tooltip=f"{names[j]}: elements [{s['offset']}, {s['offset'] + s['length']}) of bucket {b}")
        svg.text(x + 4, y + 24, names[j], size=10)
        svg.text(x + 4, y + 38, f"view {s['shape']}", size=9, fill="#333")
        svg.text(x + 1, y + 10 + BAR_H + 12, f"{s['offset']}", size=9, fill="#777")
        svg.close("g")
        x += w
    svg.text(WIDTH - LEFT, y + 10 + BAR_H + 12, f"{numel}", size=9, fill="#777", anchor="end")
    locators = ", ".join(f"[{s['param_index']}] {names[j]} -> ({b}, {j})" for j, s in enumerate(slots))
    svg.text(LEFT, y + 10 + BAR_H + 30, f"locator (parameter -> bucket, slot): {locators}", size=10, fill="#333")


def draw(buckets, title):
    height = 110 + BLOCK_H * len(buckets) + 60
    svg = Svg(WIDTH, height, title)
    svg.text(LEFT, 26, title, size=15, font_weight="bold")
    notes = ["Each parameter's gradient has a slot in its bucket's buffer: elements [offset, offset + length), "
             "which a view reshapes to the parameter's shape.",
             "Step 9 copies a ready gradient into its view (or .grad is the view, with gradient_as_bucket_view) "
             "and counts pending down;",
             "at 0 step 10 reduces the whole buffer in one collective, and step 12 reads each result back through "
             "the same view into .grad.",
             f"Offsets count elements. Slot widths: at least {MIN_SLOT} px, the rest in proportion to length."]
    for k, line in enumerate(notes):
        svg.text(LEFT, 46 + 15 * k, line, size=11, fill="#555")
    for b, bucket in enumerate(buckets):
        draw_bucket(svg, b, bucket, 124 + BLOCK_H * b)
    svg.figures({"buckets": len(buckets), "slots": sum(len(b["slots"]) for b in buckets),
                 "bytes": sum(b["bytes"] for b in buckets)})
    return svg


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--title", default="DDP's buckets in memory")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--event", default="buckets rebuilt", choices=["buckets rebuilt", "ddp constructed"])
    args = parser.parse_args()
    draw(plan_of(rank_events(args.trace, args.rank), args.event), args.title).save(args.output)


if __name__ == "__main__":
    main()
