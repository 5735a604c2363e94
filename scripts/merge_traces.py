#!/usr/bin/env python3
"""One trace for the whole job: merges the per-rank Chrome traces DDP writes (EMBER_DDP_TRACE=DIR,
ember_trace_rank<R>.json) into one file that Perfetto (ui.perfetto.dev) or chrome://tracing opens,
a process per rank, on one timeline, with flows from each gradient's hook to its bucket's allreduce
and from each allreduce to the finalize_backward that waited for it.

    python3 scripts/merge_traces.py DIR [-o DIR/ember_trace_job.json]

Timelines (Note [Trace clocks] in distributed/diagnostics/trace.cc): ranks on one machine (one kernel boot id,
network namespaces included) are placed exactly by their clock origins; otherwise each rank is
shifted so that its "ddp constructed" instant, which follows construction's collectives, meets
rank 0's. The merged trace says which, in an "ember_merge" metadata record (args.aligned_by).
Standard library only.
"""
import glob
import json
import os
import re
import sys


def load_ranks(directory):
    ranks = {}
    for path in sorted(glob.glob(os.path.join(directory, "ember_trace_rank*.json"))):
        m = re.search(r"ember_trace_rank(\d+)\.json$", path)
        with open(path) as f:
            ranks[int(m.group(1))] = json.load(f)["traceEvents"]
    if not ranks:
        raise SystemExit(f"merge_traces: no ember_trace_rank*.json in {directory} (run with EMBER_DDP_TRACE={directory})")
    return ranks


def clock_of(events):
    for e in events:
        if e.get("name") == "ember_clock" and e.get("ph") == "M":
            return e["args"].get("origin_us"), e["args"].get("boot_id", "")
    return None, ""


def offsets(ranks):
    """Microseconds to add to each rank's timestamps, and how they were found."""
    clocks = {r: clock_of(ev) for r, ev in ranks.items()}
    boots = {boot for _, boot in clocks.values()}
    if len(boots) == 1 and "" not in boots and all(o is not None for o, _ in clocks.values()):
        first = min(o for o, _ in clocks.values())
        return {r: o - first for r, (o, _) in clocks.items()}, "one machine: the ranks' clock origins"
    marks = {}
    for r, ev in ranks.items():
        ts = [e["ts"] for e in ev if e.get("name") == "ddp constructed"]
        if not ts:
            raise SystemExit(f"merge_traces: rank {r}'s trace has no 'ddp constructed' instant to align it by")
        marks[r] = ts[0]
    ref = marks[min(marks)]
    return {r: ref - t for r, t in marks.items()}, "several machines: the 'ddp constructed' instants"


def flows(rank, events, next_id):
    """Flow events: hook -> the allreduce span of its bucket; allreduce -> the finalize waiting."""
    spans = sorted((e for e in events if e.get("ph") == "X" and e["name"].startswith("allreduce bucket ")),
                   key=lambda e: e["ts"])
    finals = sorted((e for e in events if e.get("ph") == "X" and e["name"] == "finalize_backward"),
                    key=lambda e: e["ts"])
    hooks = sorted((e for e in events if e["name"].startswith("autograd_hook ")),
                   key=lambda e: e["ts"])
    out = []

    def link(name, a_ts, a_tid, b_ts, b_tid):
        nonlocal next_id
        common = {"name": name, "cat": "ddp.flow", "id": next_id, "pid": rank}
        out.append(dict(common, ph="s", ts=a_ts, tid=a_tid))
        out.append(dict(common, ph="f", bp="e", ts=b_ts, tid=b_tid))
        next_id += 1

    for span in spans:
        params = set(span.get("args", {}).get("param_indices", []))
        # The hooks of this bucket: the latest firing of each of its parameters before the launch.
        latest = {}
        for h in hooks:
            if h["ts"] > span["ts"]:
                break
            i = h.get("args", {}).get("param_index")
            if i in params:
                latest[i] = h
        for h in latest.values():
            link("gradient -> bucket", h["ts"], h.get("tid", 0), span["ts"], span.get("tid", 1))
        end = span["ts"] + span["dur"]
        waiting = next((f for f in finals if f["ts"] + f["dur"] >= end), None)
        if waiting is not None:  # a flow binds to the slice around its timestamp: stay inside both
            link("bucket -> finalize", end - min(0.5, span["dur"] / 2), span.get("tid", 1),
                 max(waiting["ts"], min(end, waiting["ts"] + waiting["dur"])), waiting.get("tid", 0))
    return out, next_id


def merge(directory, out_path):
    ranks = load_ranks(directory)
    shift, how = offsets(ranks)
    # How the ranks were put on one clock, for the readers of the merged trace (trace_timeline.py).
    merged, next_id = [{"name": "ember_merge", "ph": "M", "pid": min(ranks), "args": {"aligned_by": how}}], 1
    for r, events in sorted(ranks.items()):
        moved = []
        for e in events:
            e = dict(e)
            if "ts" in e:
                e["ts"] = e["ts"] + shift[r]
            if e.get("ph") == "i" and e["name"].startswith("autograd_hook "):
                e.update(ph="X", dur=1.0)  # a 1 µs slice: flows start from slices, not instants
                e.pop("s", None)
            moved.append(e)
        merged.extend(moved)
        f, next_id = flows(r, moved, next_id)
        merged.extend(f)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"traceEvents": merged, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, out_path)
    n_flows = sum(1 for e in merged if e.get("ph") == "s")
    print(f"merge_traces: {len(ranks)} rank(s) aligned by {how}; {n_flows} flows; wrote {out_path}")
    return merged


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    directory = argv[1]
    out = argv[argv.index("-o") + 1] if "-o" in argv else os.path.join(directory, "ember_trace_job.json")
    merge(directory, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
