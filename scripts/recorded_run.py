#!/usr/bin/env python3
"""A recorded run's output as figures and listings the docs quote (Note [Quoted figures] in svg.py).

scripts/make_pictures.sh saves the output of the run its walkthrough pictures are drawn from as
docs/pictures/ddp_walkthrough_run.txt: the walkthrough's narrated iteration (rank 0's listing),
its averaging check and the EMBER_DISTRIBUTED_DEBUG=INFO report, all of one process run. A
document quotes it two ways:

- a number, as a picture's: `57<!-- figure ddp_walkthrough_run listing.overlap_pct -->%`
  (run_figures lists the keys);
- an excerpt: a code block right after `<!-- listing ddp_walkthrough_run -->`, whose every line
  is a line of the run, in the run's order (check_listing). `svg.py figures --update` rewrites
  such a block from the run: with the run's lines from the one shaped like the block's first line
  (the same text but for its numbers) to the one shaped like its last, so a block stays the same
  section of the output when the run is made again, whatever order its events came in.
Standard library only.
"""
import re

LISTING_MARK = re.compile(r"<!-- listing (\S+) -->\n```[^\n]*\n(.*?)\n```", re.S)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?")
# A listing line: a span "T ms [lane] NAME (D ms) what it is", or an instant "T ms [lane] NAME  what".
SPAN_EVENT = re.compile(r"^\s+(\d+\.\d+) ms\s+\[(\w+)\]\s+(.+?) \((\d+\.\d+) ms\)")
INSTANT_EVENT = re.compile(r"^\s+(\d+\.\d+) ms\s+\[(\w+)\]\s+(.+?)()\s{2,}")
SUMMARY = re.compile(r"^backward ([\d.]+) ms; communication ([\d.]+) ms of wall time .*?, ([\d.]+) ms of it after .*: "
                     r"overlap (\d+)%")
REPORT = re.compile(r"iteration (\d+) \((\d+) buckets?\): forward ([\d.]+) ms, backward ([\d.]+) ms; communication "
                    r"took ([\d.]+) ms of wall time, ([\d.]+) ms of it after .*?, so (\d+)% overlapped")
NORMS = re.compile(r"\|grad (\S+)\| (local|averaged)\b.*?rank 0: ([\d.]+)\s+rank 1: ([\d.]+)")
DIFF = re.compile(r"RESULT max_abs_diff_vs_single=(\S+) averaging_error=(\S+)")


def slug(name):
    """'allreduce #10 bucket 0 (MPI)' -> 'allreduce_bucket_0_mpi' (numbers that change between runs dropped)."""
    name = re.sub(r"#\d+ ?", "", name)
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def run_figures(text):
    """{key: number} of a recorded walkthrough run: listing.<event>.start_ms / .dur_ms (each event's
    first line in the narrated iteration), listing.{backward_ms, comm_wall_ms, exposed_comm_ms,
    overlap_pct}, report.{iteration, buckets, forward_ms, backward_ms, comm_wall_ms, exposed_comm_ms,
    overlap_pct}, averaging.<local|averaged>.rank<r>, max_abs_diff."""
    figures = {}
    for line in text.splitlines():
        if m := SPAN_EVENT.match(line) or INSTANT_EVENT.match(line):
            key = "listing." + slug(m.group(3))
            if key + ".start_ms" not in figures:
                figures[key + ".start_ms"] = float(m.group(1))
                if m.group(4):
                    figures[key + ".dur_ms"] = float(m.group(4))
        elif m := SUMMARY.match(line):
            for k, v in zip(("backward_ms", "comm_wall_ms", "exposed_comm_ms", "overlap_pct"), m.groups()):
                figures["listing." + k] = float(v)
        elif (m := REPORT.search(line)) and line.startswith("[rank 0]"):
            keys = ("iteration", "buckets", "forward_ms", "backward_ms", "comm_wall_ms", "exposed_comm_ms", "overlap_pct")
            for k, v in zip(keys, m.groups()):
                figures["report." + k] = float(v)
        elif m := NORMS.search(line):
            figures[f"averaging.{m.group(2)}.rank0"] = float(m.group(3))
            figures[f"averaging.{m.group(2)}.rank1"] = float(m.group(4))
        elif m := DIFF.search(line):
            figures["max_abs_diff"] = float(m.group(1))
    return figures


def shape(line):
    """The line with its numbers blanked: two lines of one shape say the same of different runs."""
    return NUMBER.sub("#", line.rstrip())


def listings(text):
    """[(run name, [lines])] of a document's listing blocks."""
    return [(m.group(1), m.group(2).split("\n")) for m in LISTING_MARK.finditer(text)]


def check_listing(lines, run_lines):
    """'' when every line of the excerpt is a line of the run, in order; else what is not."""
    at = 0
    for line in lines:
        try:
            at = run_lines.index(line.rstrip(), at) + 1
        except ValueError:
            return f"the line {line.strip()[:80]!r} is not in the run (after its line {at})"
    return ""


def update_listing(lines, run_lines):
    """The run's section from the line shaped like the excerpt's first to the one shaped like its
    last; without both, the excerpt with each line replaced by the run's next of its shape."""
    shapes = [shape(line) for line in run_lines]
    first = next((i for i, s in enumerate(shapes) if s == shape(lines[0])), None)
    if first is not None and len(lines) > 1:
        last = next((i for i in range(first + 1, len(shapes)) if shapes[i] == shape(lines[-1])), None)
        if last is not None:
            return run_lines[first:last + 1]
    out, at = [], 0
    for line in lines:
        want = shape(line)
        found = next((i for i in range(at, len(run_lines)) if shapes[i] == want), None)
        if found is None:
            out.append(line)
        else:
            out.append(run_lines[found])
            at = found + 1
    return out


def update_listings(text, read_run):
    """The document with every listing block rewritten from its run (read_run(name) -> lines or None)."""
    def repl(m):
        run = read_run(m.group(1))
        if run is None:
            return m.group(0)
        body = "\n".join(update_listing(m.group(2).split("\n"), run))
        return m.group(0).replace(m.group(2), body, 1)
    return LISTING_MARK.sub(repl, text)
