#!/usr/bin/env python3
"""A per-rank timeline of one DDP iteration as SVG, from a job trace that scripts/merge_traces.py
made of a real run's EMBER_DDP_TRACE files.

    python3 scripts/trace_timeline.py JOB_TRACE.json|TRACE_DIR -o timeline.svg [--title T] [--iteration K]

Each rank is a block of lanes, one per trace thread (0: the training thread -- forward, backward
ops, hooks, finalize; 1: the communication thread -- the buckets' allreduce spans; 2: a GPU's
communication stream, drawn only when it has events). Spans are drawn generically, coloured by
kind (an autograd node's name, a DDP step's name, "allreduce bucket"), so a span kind the trace
gains later shows up without a change here. Hooks are ticks; the merged trace's flows (hook ->
bucket -> finalize_backward) are arrows.

The iteration: the K-th (default: the last) that every rank completed, from its "DDP forward" span
to the end of the finalize_backward that followed it. Standard library only.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import PALETTE, Svg, nice_ticks  # noqa: E402

LANE_NAMES = {0: "compute", 1: "comm", 2: "GPU stream"}
# DDP's own steps get fixed colours, so every picture reads the same; other kinds take the palette.
# The common backward ops too, in colours that stay apart from those (ResNet's convolution and
# batch-norm ops would otherwise take shades close to forward's and AccumulateGrad's).
FIXED_COLOURS = {"DDP forward": "#9ECAE1", "prepare_for_backward": "#7F7F7F", "finalize_backward": "#D55E00",
                 "allreduce bucket": "#009E73", "AccumulateGrad": "#E69F00",
                 "AddmmBackward": "#0072B2", "ConvolutionBackward": "#9467BD", "NativeBatchNormBackward": "#8C564B",
                 "ReluBackward": "#17BECF"}
HOOK_COLOUR, FLOW_COLOUR = "#222222", "#555555"
ROW_H, LEVEL_H = 18, 16  # a lane's height per nesting level
RIGHT_MARGIN = 30


def is_hook(e):
    return e.get("name", "").startswith("autograd_hook ")


# ProcessGroupNCCL's device-side spans: "allreduce #12 bucket 0 (GPU)" (op, sequence number, label).
GPU_SPAN = re.compile(r"^(\S+) #(\d+)(?: (.*))? \(GPU\)$")


def kind_of(e):
    """What a span is, for its colour and the legend: 'allreduce bucket 3' -> 'allreduce bucket',
    'allreduce #12 bucket 0 (GPU)' -> 'allreduce (GPU)'; anything else by its name."""
    name = e["name"]
    if name.startswith("allreduce bucket "):
        return "allreduce bucket"
    gpu = GPU_SPAN.match(name)
    return f"{gpu.group(1)} (GPU)" if gpu else name


def label_of(e):
    """The text on a span: a bucket's spans say which bucket ('bucket 3')."""
    name = e["name"]
    if name.startswith("allreduce bucket "):
        return name[len("allreduce "):]
    gpu = GPU_SPAN.match(name)
    return (gpu.group(3) or "#" + gpu.group(2)) if gpu else name


def always_labelled(e):
    return kind_of(e) == "allreduce bucket" or bool(GPU_SPAN.match(e["name"]))


def load_job_trace(path):
    """The merged trace's events grouped by rank (pid)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ranks = {}
    for e in events:
        if "pid" in e:
            ranks.setdefault(e["pid"], []).append(e)
    if not ranks:
        raise SystemExit(f"trace_timeline: {path} has no events with a pid")
    return ranks


def spans(events):
    """Duration events that are not hooks (merge_traces.py turns hooks into 1 µs slices)."""
    return [e for e in events if e.get("ph") == "X" and not is_hook(e)]


def iterations(events):
    """(start, end) of each completed iteration of one rank: a DDP forward to the end of the next
    finalize_backward that starts before the following forward."""
    forwards = sorted(e["ts"] for e in spans(events) if e["name"] == "DDP forward")
    finals = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans(events) if e["name"] == "finalize_backward")
    out = []
    for i, start in enumerate(forwards):
        following = forwards[i + 1] if i + 1 < len(forwards) else float("inf")
        done = [end for ts, end in finals if start <= ts < following]
        if done:
            out.append((start, done[0]))
    return out


def select_iteration(ranks, which=None):
    """Iteration `which` (1-based; default the last that every rank completed): ({rank: (start_us,
    end_us)}, index, count). Each rank keeps its own window: ranks drift apart by milliseconds,
    and a shared one would take in another iteration's tail on the rank that started later."""
    per_rank = {r: iterations(ev) for r, ev in ranks.items()}
    count = min(len(its) for its in per_rank.values())
    if count == 0:
        raise SystemExit("trace_timeline: some rank has no complete iteration "
                         "(a 'DDP forward' span followed by 'finalize_backward')")
    k = count if which is None else which
    if not 1 <= k <= count:
        raise SystemExit(f"trace_timeline: iteration {k} not in 1..{count}")
    return {r: its[k - 1] for r, its in per_rank.items()}, k, count


def in_window(e, start, end):
    """Events that start within the iteration (iterations run back to back: a window padded to
    the left would take in the previous one's tail)."""
    return start <= e["ts"] <= end


def assign_levels(lane_spans):
    """Nesting level of each span on a lane: the first level free at its start (a span inside
    another lands one level below it; overlapping bucket spans stack)."""
    level_end, levels = [], {}
    for e in sorted(lane_spans, key=lambda e: (e["ts"], -e["dur"])):
        for lvl, end in enumerate(level_end):
            if end <= e["ts"]:
                break
        else:
            lvl = len(level_end)
            level_end.append(0)
        level_end[lvl] = e["ts"] + e["dur"]
        levels[id(e)] = lvl
    return levels, max(len(level_end), 1)


def rank_summary(lane_spans):
    """One line of numbers for a rank's iteration: forward, backward (its first op to finalize),
    how long finalize_backward waited, and the share of allreduce time hidden under backward."""
    def first(name):
        return next((e for e in sorted(lane_spans, key=lambda e: e["ts"]) if e["name"] == name), None)
    forward, final = first("DDP forward"), first("finalize_backward")
    ops = [e["ts"] for e in lane_spans if e.get("cat") == "autograd"]
    buckets = [e for e in lane_spans if kind_of(e) == "allreduce bucket"]
    parts = []
    if forward:
        parts.append(f"forward {forward['dur'] / 1000:.2f} ms")
    if final and ops:
        parts.append(f"backward {(final['ts'] - min(ops)) / 1000:.2f} ms")
    if final:
        parts.append(f"finalize_backward waited {final['dur'] / 1000:.2f} ms")
    if final and buckets:
        busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in buckets])
        hidden = union_length([(e["ts"], min(e["ts"] + e["dur"], final["ts"])) for e in buckets if e["ts"] < final["ts"]])
        parts.append(f"{len(buckets)} bucket allreduce(s), {100 * hidden / busy:.0f}% of their time under backward"
                     if busy > 0 else f"{len(buckets)} bucket allreduce(s)")
    return " · ".join(parts)


def union_length(intervals):
    """Total length covered by (begin, end) intervals (overlapping buckets count once)."""
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def colour_table(kinds):
    """{kind: colour}: the fixed ones, then the palette's free colours in order of first appearance."""
    table, free = {}, [c for c in PALETTE if c not in FIXED_COLOURS.values() and c != "#000000"]
    for k in kinds:
        table[k] = FIXED_COLOURS.get(k) or free[len([1 for t in table if t not in FIXED_COLOURS]) % len(free)]
    return table


def draw(ranks, out_path, title, which=None, width=1200):
    windows, k, count = select_iteration(ranks, which)
    start = min(w[0] for w in windows.values())
    end = max(w[1] for w in windows.values())
    pad = (end - start) * 0.02
    t0, t1 = start - pad, end + pad
    left, right = 150, RIGHT_MARGIN
    plot_w = width - left - right

    def x_of(ts):
        return left + plot_w * (min(max(ts, t0), t1) - t0) / (t1 - t0)

    # What each rank draws, lane by lane (lanes 0 and 1 always: a rank with no comm span shows that).
    layout, kinds = [], []
    for r in sorted(ranks):
        events = [e for e in ranks[r] if "ts" in e and in_window(e, *windows[r])]
        lanes = []
        for tid in sorted({0, 1} | {e.get("tid", 0) for e in events if e.get("ph") in ("X", "i")}):
            lane_spans = [e for e in spans(events) if e.get("tid", 0) == tid]
            levels, depth = assign_levels(lane_spans)
            hooks = [e for e in events if is_hook(e) and e.get("tid", 0) == tid]
            instants = [e for e in events if e.get("ph") == "i" and not is_hook(e) and e.get("tid", 0) == tid]
            lanes.append(dict(tid=tid, spans=lane_spans, levels=levels, depth=depth, hooks=hooks, instants=instants))
            for e in sorted(lane_spans, key=lambda e: e["ts"]):
                if kind_of(e) not in kinds:
                    kinds.append(kind_of(e))
        flows = [e for e in events if e.get("ph") in ("s", "f")]
        layout.append((r, lanes, flows))
    colours = colour_table(kinds)

    # Heights: title, axis, then per rank a header line and its lanes, then the legend.
    y = 70
    rank_y = []
    for r, lanes, _ in layout:
        rank_y.append(y)
        y += 20 + sum(ROW_H + LEVEL_H * (ln["depth"] - 1) + 6 for ln in lanes) + 10
    rows_end = y
    legend_items = kinds + ["autograd_hook", "flow"]
    legend_cols = 4
    height = rows_end + 30 + 18 * ((len(legend_items) + legend_cols - 1) // legend_cols) + 20

    svg = Svg(width, height, title)
    svg.raw('<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" '
            'markerHeight="6" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="%s"/></marker></defs>'
            % FLOW_COLOUR)
    svg.text(width / 2, 20, title, size=14, anchor="middle", font_weight="bold")
    svg.text(width / 2, 38, f"iteration {k} of {count} traced: from the 'DDP forward' span to the end of "
             f"finalize_backward, {(end - start) / 1000:.2f} ms", size=11, anchor="middle", fill="#444")
    svg.open("g", cls="timeline", data_iteration=k)

    # Time axis in ms from the iteration's start, with grid lines through every rank.
    for t in nice_ticks(0, (t1 - start) / 1000, 10):
        if not t0 <= start + t * 1000 <= t1:  # x_of clamps: a tick outside would sit on the edge
            continue
        x = x_of(start + t * 1000)
        svg.line(x, 60, x, rows_end - 6, stroke="#e6e6e6")
        svg.text(x, 56, f"{t:g}", size=10, anchor="middle")
    svg.text(left - 8, 56, "ms", size=10, anchor="end")

    for (r, lanes, flows), ry in zip(layout, rank_y):
        svg.open("g", cls="rank", data_rank=r, data_start_us=repr(windows[r][0]), data_end_us=repr(windows[r][1]))
        svg.text(10, ry + 13, f"rank {r}", size=12, font_weight="bold")
        svg.text(left, ry + 13, rank_summary([e for ln in lanes for e in ln["spans"]]), size=10, fill="#444",
                 cls="rank-summary")
        svg.line(10, ry + 17, width - right, ry + 17, stroke="#bbb")
        ly = ry + 22
        lane_top = {}
        for ln in lanes:
            h = ROW_H + LEVEL_H * (ln["depth"] - 1)
            lane_top[ln["tid"]] = (ly, ln)
            draw_lane(svg, ln, ly, h, colours, x_of, start, left, width)
            ly += h + 6
        draw_flows(svg, flows, lane_top, x_of)
        svg.close("g")
    svg.close("g")
    draw_legend(svg, legend_items, colours, left, rows_end + 20, plot_w, legend_cols)
    svg.save(out_path)
    n_spans = sum(len(ln["spans"]) for _, lanes, _ in layout for ln in lanes)
    n_hooks = sum(len(ln["hooks"]) for _, lanes, _ in layout for ln in lanes)
    print(f"trace_timeline: iteration {k} of {count}, {len(layout)} rank(s), {n_spans} spans, "
          f"{n_hooks} hooks; wrote {out_path}")
    return dict(windows=windows, iteration=k, spans=n_spans, hooks=n_hooks)


def draw_lane(svg, ln, ly, h, colours, x_of, start, left, width):
    """One lane of a rank at height ly: its spans (nested ones a level down, labelled when the
    label fits; buckets always), its hooks as ticks, other instants as markers."""
    plot_w = width - left - RIGHT_MARGIN
    svg.open("g", cls="lane", data_lane=LANE_NAMES.get(ln["tid"], f"thread {ln['tid']}"))
    svg.rect(left, ly, plot_w, h, "#f7f7f7")
    svg.text(left - 8, ly + 12, LANE_NAMES.get(ln["tid"], f"thread {ln['tid']}"), size=11, anchor="end")
    for e in sorted(ln["spans"], key=lambda e: (e["ts"], -e["dur"])):
        x0, x1 = x_of(e["ts"]), x_of(e["ts"] + e["dur"])
        sy = ly + 1 + LEVEL_H * ln["levels"][id(e)]
        tip = f"{e['name']}: {e['dur'] / 1000:.3f} ms at {(e['ts'] - start) / 1000:.3f} ms"
        svg.rect(x0, sy, x1 - x0, LEVEL_H - 2, colours[kind_of(e)], tooltip=tip, cls="span",
                 data_cat=e.get("cat", ""), data_name=e["name"], stroke="#fff", stroke_width=0.5)
        label = label_of(e)
        fits = len(label) * 5.6 + 4 < x1 - x0
        if fits:
            svg.text(x0 + 2, sy + 11, label, size=9, fill="#000" if kind_of(e) == "DDP forward" else "#fff",
                     cls="span-label")
        elif always_labelled(e):  # buckets are always named: beside the bar, inside the picture
            room_right = x1 + 2 + len(label) * 5.6 < width
            svg.text(x1 + 2 if room_right else x0 - 2, sy + 11, label, size=9,
                     anchor="start" if room_right else "end", cls="span-label")
    for e in ln["hooks"]:
        x = x_of(e["ts"])
        svg.open("line", cls="hook", x1=round(x, 2), y1=ly - 2, x2=round(x, 2), y2=ly + h + 2,
                 stroke=HOOK_COLOUR, stroke_width=1)
        svg.add("title", text=e["name"])
        svg.close("line")
    for e in ln["instants"]:
        x = x_of(e["ts"])
        svg.open("path", cls="instant", d=f"M{x:.1f},{ly - 3} l-5,-7 h10 z", fill="#CC79A7")
        svg.add("title", text=e["name"])
        svg.close("path")
        svg.text(x + 6, ly - 3, e["name"], size=9, fill="#CC79A7")
    svg.close("g")


def draw_flows(svg, flows, lane_top, x_of):
    """Arrows for the merged trace's flows (a start 's' and finish 'f' sharing an id)."""
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    for f in flows:
        s = starts.get(f["id"]) if f["ph"] == "f" else None
        if s is None or s.get("tid", 0) not in lane_top or f.get("tid", 0) not in lane_top:
            continue
        (ya, _), (yb, _) = lane_top[s.get("tid", 0)], lane_top[f.get("tid", 0)]
        xa, xb = x_of(s["ts"]), x_of(f["ts"])
        ya, yb = ya + ROW_H / 2, yb + ROW_H / 2
        mid = (ya + yb) / 2
        svg.add("path", cls="flow", d=f"M{xa:.1f},{ya:.1f} C{xa:.1f},{mid:.1f} {xb:.1f},{mid:.1f} {xb:.1f},{yb:.1f}",
                fill="none", stroke=FLOW_COLOUR, stroke_width=0.7, stroke_opacity=0.6, marker_end="url(#arrow)")


def draw_legend(svg, items, colours, x, y, w, cols):
    svg.open("g", cls="legend")
    col_w = w / cols
    for i, item in enumerate(items):
        cx, cy = x + col_w * (i % cols), y + 18 * (i // cols)
        if item == "autograd_hook":
            svg.line(cx + 6, cy - 6, cx + 6, cy + 6, stroke=HOOK_COLOUR)
            text = "autograd_hook (a gradient is ready)"
        elif item == "flow":
            svg.add("path", d=f"M{cx},{cy} L{cx + 16},{cy}", stroke=FLOW_COLOUR, marker_end="url(#arrow)")
            text = "flow: hook -> bucket -> finalize"
        else:
            svg.rect(cx, cy - 6, 14, 12, colours[item])
            text = item + (" i (launch to done)" if item == "allreduce bucket" else "")
        svg.text(cx + 20, cy + 4, text, size=10)
    svg.close("g")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a job trace from scripts/merge_traces.py, or the EMBER_DDP_TRACE "
                                 "directory (merged first, into DIR/ember_trace_job.json)")
    p.add_argument("-o", "--out", required=True, help="the SVG to write")
    p.add_argument("--title", default="One DDP iteration, per rank")
    p.add_argument("--iteration", type=int, help="1-based; default the last complete one")
    args = p.parse_args(argv)
    trace = args.trace
    if os.path.isdir(trace):
        import merge_traces  # a sibling script
        trace = os.path.join(trace, "ember_trace_job.json")
        merge_traces.merge(args.trace, trace)
    draw(load_job_trace(trace), args.out, args.title, args.iteration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
