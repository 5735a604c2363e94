#!/usr/bin/env bash
# scripts/merge_traces.py on a real job: ddp_walkthrough under mpirun -np 2 with EMBER_DDP_TRACE
# writes one trace per rank; the merge is one valid Chrome trace with a process per rank, every
# bucket's allreduce fed by flows from its parameters' hooks and flowing into finalize_backward,
# the ranks on one timeline (same machine: by clock origins, so that no rank's allreduce of a bucket
# ends before the other rank launched it -- a collective cannot, however loaded the machine), and --
# with the clock records removed, as from different machines -- aligned by the "ddp constructed"
# instants exactly.
# usage: merge_traces_test.sh MERGE_TRACES_PY DDP_WALKTHROUGH
source "$(dirname "$0")/../examples/lib.sh"
merge="$(realpath "$1")" walkthrough="$(realpath "$2")"

run walkthrough 120 env EMBER_DDP_TRACE="$work/traces" "${MPIRUN[@]}" -np 2 "$walkthrough"
[[ $rc -eq 0 ]]
check "walkthrough runs with EMBER_DDP_TRACE (exit $rc)" $?
run merge 60 python3 "$merge" "$work/traces"
[[ $rc -eq 0 ]]; ok=$?
check "merge_traces.py exits 0: $(cat "$work/merge.out")" $ok
grep -q "aligned by one machine: the ranks' clock origins" "$work/merge.out"
check "ranks of one machine are aligned by their clock origins" $?

cat >"$work/check.py" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
pids = sorted({e["pid"] for e in events if "pid" in e})
assert pids == [0, 1], pids
starts = [e for e in events if e.get("ph") == "s"]
ends = [e for e in events if e.get("ph") == "f"]
assert starts and len(starts) == len(ends), (len(starts), len(ends))
spans = [e for e in events if e["name"].startswith("allreduce bucket ")]
for s in spans:  # every bucket's launch ends a flow from a hook of one of its parameters
    fed = [f for f in ends if f["name"] == "gradient -> bucket" and f["pid"] == s["pid"] and f["ts"] == s["ts"]]
    assert fed, s
assert any(e["name"] == "bucket -> finalize" for e in starts)
marks = {e["pid"]: e["ts"] for e in events if e["name"] == "ddp constructed"}
gap_ms = abs(marks[0] - marks[1]) / 1000
if sys.argv[2] == "causal":
    # The n-th allreduce of each rank is one collective: it ends on a rank only after every rank
    # launched it. 0.01 ms allows for the microsecond rounding of the clock origins.
    by_rank = [sorted((s for s in spans if s["pid"] == r), key=lambda s: s["ts"]) for r in (0, 1)]
    assert [s["name"] for s in by_rank[0]] == [s["name"] for s in by_rank[1]], "ranks' bucket sequences differ"
    for a, b in zip(*by_rank):
        for x, y in ((a, b), (b, a)):
            late_ms = (y["ts"] - (x["ts"] + x["dur"])) / 1000
            assert late_ms < 0.01, f"{x['name']} ended on rank {x['pid']} {late_ms:.3f} ms before rank {y['pid']} launched it"
else:
    assert gap_ms < float(sys.argv[2]), f"ranks' 'ddp constructed' {gap_ms:.3f} ms apart"
print(f"{len(spans)} bucket spans, {len(starts)} flows, ranks {gap_ms:.3f} ms apart at construction")
PY
run checked 30 python3 "$work/check.py" "$work/traces/ember_trace_job.json" causal
[[ $rc -eq 0 ]]; ok=$?
check "merged trace: 2 processes, flows hook -> bucket -> finalize, one timeline ($(cat "$work/checked.out") $(tail -1 "$work/checked.err"))" $ok

# As if from two machines: no clock records, so the construction instants are the anchor.
mkdir -p "$work/apart"
for r in 0 1; do
  python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
d['traceEvents'] = [e for e in d['traceEvents'] if e['name'] != 'ember_clock']
json.dump(d, open(sys.argv[2], 'w'))" "$work/traces/ember_trace_rank$r.json" "$work/apart/ember_trace_rank$r.json"
done
run apart 60 python3 "$merge" "$work/apart" -o "$work/apart.json"
grep -q "several machines: the 'ddp constructed' instants" "$work/apart.out"
check "without clock records the ranks are aligned by their construction instants" $?
run apart_checked 30 python3 "$work/check.py" "$work/apart.json" 0.001
[[ $rc -eq 0 ]]; ok=$?
check "and those instants coincide ($(cat "$work/apart_checked.out") $(tail -1 "$work/apart_checked.err"))" $ok
finish
