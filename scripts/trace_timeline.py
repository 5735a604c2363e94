#!/usr/bin/env python3
"""A timeline of one DDP iteration on every rank as SVG, from a job trace that scripts/merge_traces.py
made of a real run's EMBER_DDP_TRACE files.

    python3 scripts/trace_timeline.py JOB_TRACE.json|TRACE_DIR -o timeline.svg [--title T] [--iteration K]
                                      [--flows last_hook|none]

Each rank is a block of lanes, one per trace thread (0: the training thread -- forward, backward
ops, hooks, finalize; 1: the communication side -- each bucket's allreduce from its launch to its
reduction; 2: a GPU's communication stream; 3: the MPI backend's worker, one span per collective
from its start to its completion), a lane drawn when it has events (0 and 1 always). Spans are
drawn generically, coloured by kind (an autograd node's name, a DDP step's name, "allreduce
bucket"), so a span kind the trace gains later shows up without a change here. Hooks are ticks.

Note [One clock, three phases]: all ranks are drawn on the merged trace's one clock (merge_traces.py
places the ranks of one machine by their clock origins), 0 ms at the earliest rank's forward, so a
late rank shows as late. A bucket's bar is split where the backend reports its collectives (the MPI
worker's "allreduce #<seq> bucket i (MPI)" spans, matched across ranks by sequence number):
queued = launch -> this rank's worker starts it; waiting for peers = -> the last rank's worker
starts it; transfer = -> this rank's worker completes it. Without those spans the bar stays whole
and says "(backend did not report its start)".

Note [Communication figures]: what the picture prints per rank, as DDPLoggingData defines them
(Note [Communication time] in distributed/ddp_reports/logging.h): comm_wall = the wall-clock union of the
iteration's bucket spans (never longer than the iteration); exposed_comm = the part of that union
after finalize_backward began (the last hook's time if there is none), what overlap failed to
hide; overlap = 1 - exposed_comm / comm_wall. The picture keeps them, as printed,
in its figures (Note [Quoted figures] in scripts/svg.py).

The iteration: the K-th (default: the last) that every rank completed, from its "DDP forward" span
to the end of the finalize_backward that followed it. Flows: by default one arrow per bucket, from
its last gradient's hook to its launch (what makes a bucket go); --flows none draws none. Standard
library only.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import PALETTE, Svg, nice_ticks  # noqa: E402

LANE_NAMES = {0: "compute", 1: "comm", 2: "GPU stream", 3: "MPI worker"}
# DDP's own steps get fixed colours, so every picture reads the same; other kinds take the palette.
# The common backward ops too, in colours that stay apart from those (ResNet's convolution and
# batch-norm ops would otherwise take shades close to forward's and AccumulateGrad's).
FIXED_COLOURS = {"DDP forward": "#9ECAE1", "prepare_for_backward": "#7F7F7F", "finalize_backward": "#D55E00",
                 "allreduce bucket": "#009E73", "AccumulateGrad": "#E69F00",
                 "AddmmBackward": "#0072B2", "ConvolutionBackward": "#9467BD", "NativeBatchNormBackward": "#8C564B",
                 "ReluBackward": "#17BECF", "allreduce (MPI)": "#F0E442"}
# A bucket's three phases (Note [One clock, three phases]), drawn over its bar.
PHASES = [("queued", "#BDBDBD", "queued (launch -> this rank's backend starts it)"),
          ("waiting", "#D62728", "waiting for peers (-> the last rank's backend starts it)"),
          ("transfer", "#00441B", "transfer (-> this rank's backend completes it)")]
NO_BACKEND_START = "(backend did not report its start)"
HOOK_COLOUR, FLOW_COLOUR = "#222222", "#555555"
ROW_H, LEVEL_H = 18, 16  # a lane's height per nesting level
RIGHT_MARGIN = 30


def is_hook(e):
    return e.get("name", "").startswith("autograd_hook ")


# A backend's own spans: ProcessGroupNCCL's device-side "allreduce #12 bucket 0 (GPU)" and the MPI
# worker's "allreduce #7 bucket 2 (MPI)" (op, sequence number, label).
BACKEND_SPAN = re.compile(r"^(\S+) #(\d+)(?: (.*))? \((GPU|MPI)\)$")


def kind_of(e):
    """What a span is, for its colour and the legend: 'allreduce bucket 3' -> 'allreduce bucket',
    'allreduce #12 bucket 0 (GPU)' -> 'allreduce (GPU)'; anything else by its name."""
    name = e["name"]
    if name.startswith("allreduce bucket "):
        return "allreduce bucket"
    backend = BACKEND_SPAN.match(name)
    return f"{backend.group(1)} ({backend.group(4)})" if backend else name


def label_of(e):
    """The text on a span: a bucket's spans say which bucket ('bucket 3')."""
    name = e["name"]
    if name.startswith("allreduce bucket "):
        return name[len("allreduce "):]
    backend = BACKEND_SPAN.match(name)
    return (backend.group(3) or "#" + backend.group(2)) if backend else name


def always_labelled(e):
    """Buckets and GPU collectives are named even when the bar is too short; the MPI worker's spans
    sit under their buckets, which are."""
    return kind_of(e) == "allreduce bucket" or e["name"].endswith("(GPU)")


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


def alignment(ranks):
    """How merge_traces.py put the ranks on one clock (its 'ember_merge' record), or None."""
    for events in ranks.values():
        for e in events:
            if e.get("name") == "ember_merge" and e.get("ph") == "M":
                return e.get("args", {}).get("aligned_by")
    return None


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
    end_us)}, index, count). Each rank's window selects its events (ranks drift apart by
    milliseconds, and a shared one would take in another iteration's tail on the rank that started
    later); all are drawn on one clock."""
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


def union_length(intervals):
    """Total length covered by (begin, end) intervals (overlapping buckets count once)."""
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


def is_bucket(e):
    return kind_of(e) == "allreduce bucket"


def comm_figures(events, start, end):
    """Note [Communication figures] for one rank's iteration [start, end] (µs): {comm_wall_us,
    exposed_us, overlap} (overlap None without communication)."""
    mine = [e for e in spans(events) if in_window(e, start, end)]
    buckets = [e for e in mine if is_bucket(e)]
    wall = union_length([(e["ts"], min(e["ts"] + e["dur"], end)) for e in buckets])
    finals = sorted((e for e in mine if e["name"] == "finalize_backward"), key=lambda e: e["ts"])
    hooks = [e["ts"] for e in events if is_hook(e) and in_window(e, start, end)]
    compute_end = finals[0]["ts"] if finals else max(hooks, default=end)
    exposed = union_length([(max(e["ts"], compute_end), max(min(e["ts"] + e["dur"], end), compute_end))
                            for e in buckets])
    return dict(comm_wall_us=wall, exposed_us=exposed, overlap=1 - exposed / wall if wall > 0 else None)


def backend_span_info(e):
    """(sequence number, label) of a backend span, from its args or, failing that, its name."""
    m = BACKEND_SPAN.match(e["name"])
    args = e.get("args", {})
    seq = args.get("sequence_number", int(m.group(2)) if m else None)
    return seq, args.get("label", m.group(3) if m else None)


def collective_phases(ranks, windows):
    """Note [One clock, three phases]: {(rank, id(bucket span)): {"queued": (a, b), "waiting": (b, c),
    "transfer": (c, d), "sequence_number": n, "last_rank": r}} for each bucket span in the
    iteration whose collective the MPI worker reported; buckets without one are left out."""
    starts = {}  # sequence number -> [(worker start, rank)]
    mpi = {}     # rank -> its MPI spans, by start
    for r, events in ranks.items():
        mine = sorted((e for e in spans(events) if BACKEND_SPAN.match(e["name"]) and e["name"].endswith("(MPI)")),
                      key=lambda e: e["ts"])
        mpi[r] = mine
        for e in mine:
            starts.setdefault(backend_span_info(e)[0], []).append((e["ts"], r))
    out = {}
    for r, events in ranks.items():
        for b in spans(events):
            if not (is_bucket(b) and in_window(b, *windows[r])):
                continue
            label = label_of(b)
            mine = [e for e in mpi[r] if backend_span_info(e)[1] == label
                    and b["ts"] <= e["ts"] <= b["ts"] + b["dur"]]
            if not mine:
                continue
            first = mine[0]
            seq = backend_span_info(first)[0]
            last_start, last_rank = max(starts.get(seq, [(first["ts"], r)]))
            began = first["ts"]
            peers = max(began, last_start)
            done = max(peers, max(e["ts"] + e["dur"] for e in mine))
            out[(r, id(b))] = dict(queued=(b["ts"], began), waiting=(began, peers), transfer=(peers, done),
                                   sequence_number=seq, last_rank=last_rank)
    return out


def rank_summary(figures, r):
    """One line of numbers for a rank's iteration, from its figures (as printed)."""
    f = lambda key: figures.get(f"rank{r}.{key}")  # noqa: E731
    parts = []
    if f("iteration_ms") is not None:  # the step time, beside every overlap figure
        parts.append(f"iteration {f('iteration_ms'):.2f} ms")
    if f("forward_ms") is not None:
        parts.append(f"forward {f('forward_ms'):.2f} ms")
    if f("backward_ms") is not None:
        parts.append(f"backward {f('backward_ms'):.2f} ms")
    if f("comm_wall_ms") is not None:
        parts.append(f"comm_wall {f('comm_wall_ms'):.2f} ms")
        parts.append(f"exposed_comm {f('exposed_comm_ms'):.2f} ms")
        if f("overlap_pct") is not None:
            parts.append(f"overlap {f('overlap_pct'):.0f}%")
    if f("waiting_ms") is not None:
        parts.append(f"of which waiting for peers {f('waiting_ms'):.2f} ms")
    return " · ".join(parts)


def rank_figures(r, events, window, phases, origin):
    """The numbers a rank's row prints (Note [Communication figures]), rounded as printed."""
    start, end = window
    mine = sorted((e for e in spans(events) if in_window(e, start, end)), key=lambda e: e["ts"])
    out = {f"rank{r}.start_ms": round((start - origin) / 1000, 2), f"rank{r}.iteration_ms": round((end - start) / 1000, 2)}
    forward = next((e for e in mine if e["name"] == "DDP forward"), None)
    final = next((e for e in mine if e["name"] == "finalize_backward"), None)
    hooks = [e["ts"] for e in events if is_hook(e) and in_window(e, start, end)]
    if forward:
        out[f"rank{r}.forward_ms"] = round(forward["dur"] / 1000, 2)
    if final and hooks:  # as DDPLoggingData's backward_ms: the first hook to the end of finalize
        out[f"rank{r}.backward_ms"] = round((final["ts"] + final["dur"] - min(hooks)) / 1000, 2)
    buckets = [e for e in mine if is_bucket(e)]
    if buckets:
        c = comm_figures(events, start, end)
        out[f"rank{r}.comm_wall_ms"] = round(c["comm_wall_us"] / 1000, 2)
        out[f"rank{r}.exposed_comm_ms"] = round(c["exposed_us"] / 1000, 2)
        if c["overlap"] is not None:
            out[f"rank{r}.overlap_pct"] = round(100 * c["overlap"])
    waited = 0.0
    for b in buckets:
        ph = phases.get((r, id(b)))
        if ph is None:
            continue
        i = label_of(b).split()[-1]
        for name, _, _ in PHASES:
            a, z = ph[name]
            out[f"rank{r}.bucket{i}.{name}_ms"] = round((z - a) / 1000, 2)
        waited += ph["waiting"][1] - ph["waiting"][0]
    if any((r, id(b)) in phases for b in buckets):
        out[f"rank{r}.waiting_ms"] = round(waited / 1000, 2)
    return out


def colour_table(kinds):
    """{kind: colour}: the fixed ones, then the palette's free colours in order of first appearance."""
    table = {}
    free = [c for c in PALETTE if c not in FIXED_COLOURS.values() and c not in ("#000000", "#D62728")]
    for k in kinds:
        table[k] = FIXED_COLOURS.get(k) or free[len([1 for t in table if t not in FIXED_COLOURS]) % len(free)]
    return table


def last_hook_flows(events, window):
    """One (hook, launch) pair per bucket launched in the window: the latest of the merged trace's
    'gradient -> bucket' flows into it (the gradient that completed the bucket)."""
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("name") == "gradient -> bucket"}
    best = {}
    for f in events:
        if f.get("ph") != "f" or f.get("name") != "gradient -> bucket" or not in_window(f, *window):
            continue
        s = starts.get(f["id"])
        if s is not None and (f["ts"] not in best or s["ts"] > best[f["ts"]][0]["ts"]):
            best[f["ts"]] = (s, f)
    return [best[k] for k in sorted(best)]


def iteration_span(ranks, which=None):
    """How long the selected iteration lasted, from the first rank's forward to the last rank's end (us)."""
    windows, _, _ = select_iteration(ranks, which)
    return max(w[1] for w in windows.values()) - min(w[0] for w in windows.values())


def draw(ranks, out_path, title, which=None, width=1200, flows="last_hook", span_us=None):
    windows, k, count = select_iteration(ranks, which)
    start = min(w[0] for w in windows.values())
    end = max(w[1] for w in windows.values())
    # span_us: the axis covers at least that long, so two pictures compared side by side share a scale.
    shown = max(end - start, span_us or 0)
    pad = shown * 0.02
    t0, t1 = start - pad, start + shown + pad
    left, right = 150, RIGHT_MARGIN
    plot_w = width - left - right
    phases = collective_phases(ranks, windows)

    def x_of(ts):
        return left + plot_w * (min(max(ts, t0), t1) - t0) / (t1 - t0)

    # What each rank draws, lane by lane (lanes 0 and 1 always: a rank with no comm span shows that).
    layout, kinds, undivided = [], [], 0
    figures = {"iteration": k, "ranks": len(ranks), "axis_ms": round(shown / 1000, 2)}
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
        arrows = last_hook_flows(ranks[r], windows[r]) if flows == "last_hook" else []
        undivided += sum(1 for e in spans(events) if is_bucket(e) and (r, id(e)) not in phases)
        figures.update(rank_figures(r, ranks[r], windows[r], phases, start))
        layout.append((r, lanes, arrows))
    figures["ranks_apart_ms"] = round((max(w[0] for w in windows.values()) - start) / 1000, 2)
    figures["buckets_divided"] = len(phases)
    figures["buckets_undivided"] = undivided
    colours = colour_table(kinds)

    # Heights: title, axis, then per rank a header line and its lanes, then the legend and notes.
    y = 84
    rank_y = []
    for r, lanes, _ in layout:
        rank_y.append(y)
        y += 20 + sum(ROW_H + LEVEL_H * (ln["depth"] - 1) + 6 for ln in lanes) + 10
    rows_end = y
    legend_items = kinds + (["phase:" + name for name, _, _ in PHASES] if phases else []) + ["autograd_hook"] + \
        (["flow"] if any(a for _, _, a in layout) else [])
    legend_cols = 3
    height = rows_end + 30 + 18 * ((len(legend_items) + legend_cols - 1) // legend_cols) + 24

    svg = Svg(width, height, title)
    svg.figures(figures)
    svg.raw('<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" '
            'markerHeight="6" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="%s"/></marker></defs>'
            % FLOW_COLOUR)
    svg.text(width / 2, 20, title, size=14, anchor="middle", font_weight="bold")
    first = min(windows, key=lambda r: windows[r][0])
    how = alignment(ranks)
    svg.text(width / 2, 38, f"iteration {k} of {count} traced, each rank from its 'DDP forward' to the end of its "
             f"finalize_backward; all ranks on one clock, 0 ms = rank {first}'s forward", size=11, anchor="middle",
             fill="#444")
    svg.text(width / 2, 53, "ranks aligned by " + (how or "the merged trace's timestamps") +
             " (scripts/merge_traces.py); comm_wall = union of the bucket spans, exposed_comm = its part after "
             "finalize_backward began, overlap = 1 - exposed/wall", size=10, anchor="middle", fill="#666")
    svg.open("g", cls="timeline", data_iteration=k)

    # Time axis in ms from the earliest rank's forward, with grid lines through every rank.
    for t in nice_ticks(0, (t1 - start) / 1000, 10):
        if not t0 <= start + t * 1000 <= t1:  # x_of clamps: a tick outside would sit on the edge
            continue
        x = x_of(start + t * 1000)
        svg.line(x, 74, x, rows_end - 6, stroke="#e6e6e6")
        svg.text(x, 70, f"{t:g}", size=10, anchor="middle")
    svg.text(left - 8, 70, "ms", size=10, anchor="end")

    for (r, lanes, arrows), ry in zip(layout, rank_y):
        svg.open("g", cls="rank", data_rank=r, data_start_us=repr(windows[r][0]), data_end_us=repr(windows[r][1]))
        late = figures[f"rank{r}.start_ms"]
        svg.text(10, ry + 13, f"rank {r}", size=12, font_weight="bold")
        svg.text(62, ry + 13, f"+{late:.2f} ms" if late > 0 else "", size=10, fill="#444", cls="rank-start")
        svg.text(left, ry + 13, rank_summary(figures, r), size=10, fill="#444", cls="rank-summary")
        svg.line(10, ry + 17, width - right, ry + 17, stroke="#bbb")
        ly = ry + 22
        lane_top = {}
        for ln in lanes:
            h = ROW_H + LEVEL_H * (ln["depth"] - 1)
            lane_top[ln["tid"]] = ly
            draw_lane(svg, r, ln, ly, h, colours, phases, x_of, start, left, width)
            ly += h + 6
        draw_flows(svg, arrows, lane_top, x_of)
        svg.close("g")
    svg.close("g")
    draw_legend(svg, legend_items, colours, left, rows_end + 20, plot_w, legend_cols, undivided > 0)
    svg.save(out_path)
    n_spans = sum(len(ln["spans"]) for _, lanes, _ in layout for ln in lanes)
    n_hooks = sum(len(ln["hooks"]) for _, lanes, _ in layout for ln in lanes)
    print(f"trace_timeline: iteration {k} of {count}, {len(layout)} rank(s), {n_spans} spans, {n_hooks} hooks, "
          f"{len(phases)} bucket(s) split by the backend's spans, {undivided} not; wrote {out_path}")
    return dict(windows=windows, iteration=k, spans=n_spans, hooks=n_hooks, figures=figures)


def draw_lane(svg, r, ln, ly, h, colours, phases, x_of, start, left, width):
    """One lane of a rank at height ly: its spans (nested ones a level down, labelled when the
    label fits; buckets always, split into their phases where known), its hooks as ticks, other
    instants as markers."""
    plot_w = width - left - RIGHT_MARGIN
    svg.open("g", cls="lane", data_lane=LANE_NAMES.get(ln["tid"], f"thread {ln['tid']}"))
    svg.rect(left, ly, plot_w, h, "#f7f7f7")
    svg.text(left - 8, ly + 12, LANE_NAMES.get(ln["tid"], f"thread {ln['tid']}"), size=11, anchor="end")
    for e in sorted(ln["spans"], key=lambda e: (e["ts"], -e["dur"])):
        x0, x1 = x_of(e["ts"]), x_of(e["ts"] + e["dur"])
        sy = ly + 1 + LEVEL_H * ln["levels"][id(e)]
        ph = phases.get((r, id(e)))
        tip = f"{e['name']}: {e['dur'] / 1000:.3f} ms at {(e['ts'] - start) / 1000:.3f} ms"
        if is_bucket(e):
            tip += f", {human_bytes(e.get('args', {}).get('bytes'))}" if e.get("args", {}).get("bytes") else ""
            tip += "" if ph else " " + NO_BACKEND_START
        svg.rect(x0, sy, x1 - x0, LEVEL_H - 2, colours[kind_of(e)], tooltip=tip, cls="span",
                 data_cat=e.get("cat", ""), data_name=e["name"], stroke="#fff", stroke_width=0.5)
        if ph:
            for name, colour, _ in PHASES:
                a, z = ph[name]
                if z <= a:
                    continue
                why = f" (rank {ph['last_rank']} started #{ph['sequence_number']} last)" if name == "waiting" else ""
                svg.rect(x_of(a), sy + 1, x_of(z) - x_of(a), LEVEL_H - 4, colour, cls="phase", data_phase=name,
                         tooltip=f"{label_of(e)} {name}: {(z - a) / 1000:.3f} ms{why}")
        label = label_of(e)
        fits = len(label) * 5.6 + 4 < x1 - x0
        if fits:
            svg.text(x0 + 2, sy + 11, label, size=9, fill="#000" if kind_of(e) in ("DDP forward", "allreduce (MPI)")
                     else "#fff", cls="span-label")
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


def human_bytes(n):
    """Binary units, as bucket_cap_mb counts (see scripts/bucket_plan.py)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def draw_flows(svg, arrows, lane_top, x_of):
    """An arrow per (hook, launch) pair: from the hook's tick to the bucket's launch."""
    for s, f in arrows:
        if s.get("tid", 0) not in lane_top or f.get("tid", 0) not in lane_top:
            continue
        ya, yb = lane_top[s.get("tid", 0)] + ROW_H / 2, lane_top[f.get("tid", 0)] + ROW_H / 2
        xa, xb = x_of(s["ts"]), x_of(f["ts"])
        mid = (ya + yb) / 2
        svg.add("path", cls="flow", d=f"M{xa:.1f},{ya:.1f} C{xa:.1f},{mid:.1f} {xb:.1f},{mid:.1f} {xb:.1f},{yb:.1f}",
                fill="none", stroke=FLOW_COLOUR, stroke_width=1, marker_end="url(#arrow)")


def draw_legend(svg, items, colours, x, y, w, cols, undivided):
    svg.open("g", cls="legend")
    col_w = w / cols
    phase = {name: (colour, text) for name, colour, text in PHASES}
    for i, item in enumerate(items):
        cx, cy = x + col_w * (i % cols), y + 18 * (i // cols)
        if item == "autograd_hook":
            svg.line(cx + 6, cy - 6, cx + 6, cy + 6, stroke=HOOK_COLOUR)
            text = "autograd_hook (a gradient is ready)"
        elif item == "flow":
            svg.add("path", d=f"M{cx},{cy} L{cx + 16},{cy}", stroke=FLOW_COLOUR, marker_end="url(#arrow)")
            text = "a bucket's last gradient -> its launch"
        elif item.startswith("phase:"):
            colour, text = phase[item[len("phase:"):]]
            svg.rect(cx, cy - 6, 14, 12, colour)
        else:
            svg.rect(cx, cy - 6, 14, 12, colours[item])
            text = item
            if item == "allreduce bucket":
                text += " i, launch to reduced"
            elif item == "allreduce (MPI)":
                text += ": the worker's collective, start to done"
        svg.text(cx + 20, cy + 4, text, size=10)
    if undivided:
        rows = (len(items) + cols - 1) // cols
        svg.text(x, y + 18 * rows + 4, "allreduce bucket bars are not split into queued / waiting for peers / "
                 "transfer: " + NO_BACKEND_START, size=10, fill="#444", cls="note")
    svg.close("g")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a job trace from scripts/merge_traces.py, or the EMBER_DDP_TRACE "
                                 "directory (merged first, into DIR/ember_trace_job.json)")
    p.add_argument("-o", "--out", required=True, help="the SVG to write")
    p.add_argument("--title", default="One DDP iteration, per rank")
    p.add_argument("--iteration", type=int, help="1-based; default the last complete one")
    p.add_argument("--flows", choices=["last_hook", "none"], default="last_hook",
                   help="arrows: one per bucket from its last gradient's hook to its launch, or none")
    p.add_argument("--scale_with", metavar="JOB_TRACE",
                   help="another job trace whose last complete iteration the time axis must also hold: the two "
                        "pictures then share one scale")
    args = p.parse_args(argv)
    trace = args.trace
    if os.path.isdir(trace):
        import merge_traces  # a sibling script
        trace = os.path.join(trace, "ember_trace_job.json")
        merge_traces.merge(args.trace, trace)
    span = iteration_span(load_job_trace(args.scale_with)) if args.scale_with else None
    draw(load_job_trace(trace), args.out, args.title, args.iteration, flows=args.flows, span_us=span)
    return 0


if __name__ == "__main__":
    sys.exit(main())
