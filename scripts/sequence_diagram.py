#!/usr/bin/env python3
"""A sequence diagram of a DDP job's collectives, numbered, across its ranks, as SVG: from a job trace
that scripts/merge_traces.py made of a real run's EMBER_DDP_TRACE files.

    python3 scripts/sequence_diagram.py JOB_TRACE.json|TRACE_DIR -o sequence.svg [--title T]

One lifeline per rank; one row per collective, in sequence-number order (the order every rank
runs them in), drawn across the lifelines and labelled with what the trace says it was: the
collective, its number, what the code labelled it for (TraceLabel: "parameter shapes", "bucket 1",
"bucket layout", "used-parameter map") and its bytes. Each rank's dot sits at the time its MPI
worker started the collective, printed beside it, so a rank that arrived late shows. Rows are
grouped by phase, from rank 0's trace: construction (before "ddp constructed"), each iteration
(from one "DDP forward" to the next) and what the program ran after its last backward. A
collective that does not carry the same sequence number and kind on every rank is drawn in red:
the desync docs/debugging.md describes. Standard library only.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import Svg  # noqa: E402
from trace_timeline import load_job_trace  # noqa: E402

# The MPI worker's span of one collective: "allreduce #7 bucket 2 (MPI)" (kind, number, label).
COLLECTIVE = re.compile(r"^(\S+) #(\d+)(?: (.*))? \(MPI\)$")
ROW_H, TOP, LEFT = 24, 84, 190
LIFELINE_GAP = 330


def load(path):
    """The merged trace's events, grouped by rank (pid); PATH may be the folder holding it."""
    if os.path.isdir(path):
        path = os.path.join(path, "ember_trace_job.json")
    return load_job_trace(path)


def collectives(events):
    """{sequence number: (kind, label, start_us, bytes)} of one rank's MPI worker spans."""
    out = {}
    for e in events:
        m = COLLECTIVE.match(e.get("name", "")) if e.get("ph") == "X" else None
        if m:
            out[int(m.group(2))] = (m.group(1), m.group(3) or "", e["ts"], e.get("args", {}).get("bytes", 0))
    return out


def phases(events):
    """[(start_us, name)] from one rank's trace, in time order: construction, the iterations, and
    what follows the last backward."""
    marks = [(0.0, "construction")]
    forwards = sorted(e["ts"] for e in events if e.get("ph") == "X" and e.get("name") == "DDP forward")
    for k, ts in enumerate(forwards):
        marks.append((ts, f"iteration {k + 1}"))
    finals = [e["ts"] + e.get("dur", 0) for e in events if e.get("ph") == "X" and e.get("name") == "finalize_backward"]
    if finals and forwards and max(finals) > forwards[-1]:
        marks.append((max(finals), "after the last backward"))
    return marks


def phase_of(ts, marks):
    name = marks[0][1]
    for start, n in marks:
        if ts >= start:
            name = n
    return name


def human_bytes(n):
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.2f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"


def draw(ranks, title):
    order = sorted(ranks)
    per_rank = {r: collectives(ranks[r]) for r in order}
    numbers = sorted(set().union(*[set(c) for c in per_rank.values()]))
    if not numbers:
        raise SystemExit("sequence_diagram: the trace has no MPI worker spans (run with the MPI backend)")
    marks = phases(ranks[order[0]])
    first = per_rank[order[0]]
    origin = min(c[2] for c in first.values())
    # Every phase gets its heading, one without collectives (a no_sync iteration) says so.
    by_phase = {name: [] for _, name in marks}
    for n in numbers:
        by_phase[phase_of(first[n][2] if n in first else origin, marks)].append(n)
    rows = []
    for _, name in marks:
        rows.append(("phase", name if by_phase[name] else name + ": no collective"))
        rows += [("collective", n) for n in by_phase[name]]
    width = LEFT + LIFELINE_GAP * (len(order) - 1) + 260
    height = TOP + ROW_H * len(rows) + 40
    svg = Svg(width, height, title)
    svg.text(16, 26, title, size=15, font_weight="bold")
    svg.text(16, 46, "one row per collective, in the order every rank runs them; beside each dot, when that "
             "rank's MPI worker started it", size=11, fill="#555")
    svg.text(16, 60, "(ms after rank 0's first collective)", size=11, fill="#555")
    xs = {r: LEFT + 60 + LIFELINE_GAP * i for i, r in enumerate(order)}
    for r in order:
        svg.text(xs[r], TOP - 6, f"rank {r}", size=13, anchor="middle", font_weight="bold")
        svg.line(xs[r], TOP, xs[r], height - 30, stroke="#999", width=1, stroke_dasharray="4 3")
    mismatches = 0
    for i, row in enumerate(rows):
        y = TOP + ROW_H * i + ROW_H / 2
        if row[0] == "phase":
            svg.text(16, y + 4, row[1], size=12, font_weight="bold", fill="#333", cls="phase")
            svg.line(16, y + 8, width - 16, y + 8, stroke="#DDD", width=1)
            continue
        n = row[1]
        seen = [per_rank[r].get(n) for r in order]
        agree = all(s is not None for s in seen) and len({s[0] for s in seen}) == 1
        mismatches += not agree
        colour = "#009E73" if agree else "#D62728"
        kind, label, _, nbytes = next(s for s in seen if s is not None)
        svg.line(xs[order[0]], y, xs[order[-1]], y, stroke=colour, width=2)
        for r, s in zip(order, seen):
            if s is None:
                svg.text(xs[r], y + 4, "missing", size=10, anchor="middle", fill="#D62728")
                continue
            svg.add("circle", cx=xs[r], cy=y, r=4, fill=colour)
            left = r == order[0]  # the first rank's times left of its lifeline, the others' right
            svg.text(xs[r] + (-8 if left else 8), y + 4, f"{(s[2] - origin) / 1000:.2f} ms", size=9, fill="#777",
                     anchor="end" if left else "start")
        text = f"#{n} {kind}" + (f" · {label}" if label else "") + f" · {human_bytes(nbytes)}"
        middle = (xs[order[0]] + xs[order[-1]]) / 2
        svg.text(middle, y - 4, text, size=11, anchor="middle", cls="collective", data_seq=n,
                 data_agree=int(agree))
    svg.figures({"collectives": len(numbers), "ranks": len(order), "mismatches": mismatches})
    return svg


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a merged job trace, or the folder holding ember_trace_job.json")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--title", default="One DDP job's collectives, numbered, on every rank")
    args = parser.parse_args()
    draw(load(args.trace), args.title).save(args.output)


if __name__ == "__main__":
    main()
