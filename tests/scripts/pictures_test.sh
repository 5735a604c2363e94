#!/usr/bin/env bash
# scripts/make_pictures.sh --small on real runs: ddp_walkthrough and ResNet-20 (ddp_resnet) traced
# on 2 ranks, the committed step-model data and a cluster_bench table. Every picture is
# well-formed SVG with what it must show: a row per rank with compute and comm lanes, exactly
# the iteration's spans and hooks from the merged trace, "bucket 0" named, one arrow per bucket,
# each bucket split into its phases when the trace has the MPI worker's spans (else the note
# saying it is not), comm_wall within the iteration; the one-bucket baseline with one bucket a
# rank; both bucket plans of ResNet-20 (1 bucket, then 2) holding its 65 parameters, with the caps;
# each timeline on one time axis with its baseline; the walkthrough's buckets in memory, their slots tiling each flat buffer in the plan's order;
# the walkthrough's sequence diagram with a row per collective of the trace, every rank agreeing,
# the construction's, the first iteration's and the rebuild's collectives named;
# a series per line of each plot, a label per validation run. Then the committed docs: every
# committed picture parses and every figure docs/pictures/README.md and docs/how-ddp-works.md
# quote (Note [Quoted figures] in scripts/svg.py) is the committed picture's.
# usage: pictures_test.sh MAKE_PICTURES_SH DDP_WALKTHROUGH DDP_RESNET STEP_MODEL_DAT_FILE
source "$(dirname "$0")/../examples/lib.sh"
make_pictures="$(realpath "$1")" walkthrough="$(realpath "$2")" resnet="$(realpath "$3")"
step_model="$(cd "$(dirname "$4")" && pwd)"  # the runfiles copy, not the source tree
# The committed docs: the source tree the runfiles link to (docs/step_model/validation.dat's folder's parent).
docs="$(dirname "$(dirname "$(realpath "$4")")")"
svg_py="$(dirname "$make_pictures")/svg.py"

# A cluster_bench.sh table as it saves them (docs/cluster_bench/scaling.txt).
mkdir -p "$work/cluster"
cat >"$work/cluster/scaling.txt" <<'EOF'
== scaling; machine: 2 cores, load average: 0.50, 0.84, 0.79; steps=4 warmup=1 model=resnet20
impl   link    hosts    ms/step      img/s efficiency  note
ember  1gbit       1     362.92      176.3      1.000  one process, no DDP (the baseline)
ember  1gbit       2     376.40      340.1      0.965
== after: load average: 0.46, 0.82, 0.78
EOF

run pictures 300 "$make_pictures" --small --out "$work/pictures" --traces "$work/traces" \
  --walkthrough "$walkthrough" --resnet "$resnet" --step_model "$step_model" --cluster "$work/cluster"
expect_success pictures

cat >"$work/check.py" <<'PY'
import json, os, sys
import xml.etree.ElementTree as ET
pictures, traces, step_model = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[4])  # scripts/, for svg.read_figures
import svg as svglib
NS = "{http://www.w3.org/2000/svg}"

def svg(name):
    return ET.parse(os.path.join(pictures, name)).getroot()  # raises on malformed XML

def by_class(root, tag, cls):
    return [e for e in root.iter(NS + tag) if cls in e.get("class", "").split()]

def texts(root):
    return [t.text for t in root.iter(NS + "text")]

def check_timeline(name, trace_dir, buckets_per_rank=None):
    root = svg(name)
    figures = svglib.read_figures(os.path.join(pictures, name))
    events = json.load(open(os.path.join(traces, trace_dir, "ember_trace_job.json")))["traceEvents"]
    # One hook a parameter: as many as the construction's bucket plan names.
    plan = next(e for e in events if e["name"] == "ddp constructed")["args"]["buckets"]
    hooks_per_rank = sum(len(b["params"]) for b in plan)
    has_mpi = any(e["name"].endswith("(MPI)") for e in events if e.get("ph") == "X")
    ranks = by_class(root, "g", "rank")
    assert [r.get("data-rank") for r in ranks] == ["0", "1"], [r.get("data-rank") for r in ranks]
    assert "bucket 0" in texts(root), f"{name}: no 'bucket 0' label"
    total = buckets = 0
    for r in ranks:
        lanes = [l.get("data-lane") for l in by_class(r, "g", "lane")]
        assert lanes[:2] == ["compute", "comm"], lanes
        assert ("MPI worker" in lanes) == has_mpi, (lanes, has_mpi)
        lo, hi, pid = float(r.get("data-start-us")), float(r.get("data-end-us")), int(r.get("data-rank"))
        mine = [e for e in events if e.get("pid") == pid and "ts" in e and lo <= e["ts"] <= hi]
        hooks = [e for e in mine if e["name"].startswith("autograd_hook ")]
        spans = [e for e in mine if e.get("ph") == "X" and not e["name"].startswith("autograd_hook ")]
        drawn = by_class(r, "rect", "span")
        assert len(drawn) == len(spans), f"{name} rank {pid}: {len(drawn)} spans drawn, {len(spans)} in the iteration"
        assert len(by_class(r, "line", "hook")) == len(hooks) == hooks_per_rank, (len(hooks), hooks_per_rank)
        names = {d.get("data-name") for d in drawn}
        for must in ("DDP forward", "finalize_backward", "allreduce bucket 0", "AccumulateGrad"):
            assert must in names, f"{name} rank {pid}: no '{must}' span"
        mine_buckets = [d for d in drawn if d.get("data-name").startswith("allreduce bucket ")]
        if buckets_per_rank is not None:
            assert len(mine_buckets) == buckets_per_rank, (name, pid, len(mine_buckets))
        # One arrow a bucket, from the hook that completed it.
        assert len(by_class(r, "path", "flow")) == len(mine_buckets), (name, pid, len(by_class(r, "path", "flow")))
        # Note [Communication figures]: never longer than the iteration; overlap from the two.
        wall, exposed = figures[f"rank{pid}.comm_wall_ms"], figures[f"rank{pid}.exposed_comm_ms"]
        assert 0 < wall <= figures[f"rank{pid}.iteration_ms"], (name, pid, wall)
        assert 0 <= exposed <= wall + 0.01, (name, pid, exposed, wall)
        # overlap from the unrounded times: within what rounding both to 0.01 ms allows.
        lo = 100 * (1 - (exposed + 0.005) / max(wall - 0.005, 1e-9))
        hi = 100 * (1 - max(exposed - 0.005, 0) / (wall + 0.005))
        assert lo - 1 <= figures[f"rank{pid}.overlap_pct"] <= hi + 1, (name, pid, lo, hi, figures)
        total += len(drawn)
        buckets += len(mine_buckets)
    # Note [One clock, three phases]: split where the MPI worker reported, else said why.
    notes = " ".join(t.text for t in by_class(root, "text", "note"))
    if has_mpi:
        assert figures["buckets_divided"] == buckets and by_class(root, "rect", "phase"), (name, figures)
    else:
        assert figures["buckets_undivided"] == buckets and "(backend did not report its start)" in notes, name
    return (f"{name}: 2 ranks, {total} spans, {hooks_per_rank} hooks a rank, {buckets} bucket spans "
            f"({'split by the MPI spans' if has_mpi else 'no MPI spans: undivided'})")

def check_plan(name, buckets_before, buckets_after, params):
    root = svg(name)
    plans = by_class(root, "g", "plan")
    assert [p.get("data-event") for p in plans] == ["ddp constructed", "buckets rebuilt"]
    counts = [len(by_class(p, "g", "bucket")) for p in plans]
    assert counts == [buckets_before, buckets_after], counts
    for p in plans:
        assert len(by_class(p, "rect", "param")) == params, (name, len(by_class(p, "rect", "param")))
    sizes = [sum(int(b.get("data-bytes")) for b in by_class(p, "g", "bucket")) for p in plans]
    assert sizes[0] == sizes[1], f"{name}: the rebuild changed the total bytes {sizes}"
    caps = by_class(plans[1], "line", "cap") + by_class(plans[1], "text", "cap")
    assert len(caps) == buckets_after, f"{name}: {len(caps)} caps drawn for {buckets_after} buckets"
    assert not any("MB" in t.replace("MiB", "") for t in texts(root) if t), f"{name}: MB, not MiB"
    return f"{name}: {counts[0]} then {counts[1]} buckets, {params} params, {sizes[0]} bytes, caps drawn"

def check_sequence(name, trace_dir):
    root = svg(name)
    events = json.load(open(os.path.join(traces, trace_dir, "ember_trace_job.json")))["traceEvents"]
    seqs = {e["args"]["sequence_number"] for e in events if e.get("ph") == "X" and e["name"].endswith("(MPI)")}
    rows = by_class(root, "text", "collective")
    assert sorted(int(r.get("data-seq")) for r in rows) == sorted(seqs), f"{name}: rows {len(rows)}, collectives {len(seqs)}"
    assert all(r.get("data-agree") == "1" for r in rows), f"{name}: a collective differs between the ranks"
    labels = [r.text for r in rows]
    for want in ("#0 broadcast · parameter shapes", "#3 broadcast · parameters and buffers", "#4 allreduce · bucket 0",
                 "#5 broadcast · bucket layout", "#7 allreduce · bucket 0"):
        assert any(t.startswith(want) for t in labels), f"{name}: no row {want!r}"
    phases = [t.text for t in by_class(root, "text", "phase")]
    assert phases[:3] == ["construction", "iteration 1", "iteration 2"], phases
    figures = svglib.read_figures(os.path.join(pictures, name))
    assert figures["collectives"] == len(seqs) and figures["mismatches"] == 0, figures
    return f"{name}: {len(rows)} collectives in {len(phases)} phases"

def check_memory(name, trace_dir):
    root = svg(name)
    events = json.load(open(os.path.join(traces, trace_dir, "ember_trace_job.json")))["traceEvents"]
    plan = next(e for e in events if e["name"] == "buckets rebuilt" and e["pid"] == 0)["args"]["buckets"]
    slots = by_class(root, "g", "slot")
    assert len(slots) == sum(len(b["params"]) for b in plan), f"{name}: {len(slots)} slots"
    for b, bucket in enumerate(plan):
        mine = [s for s in slots if s.get("data-bucket") == str(b)]
        assert [s.get("data-param") for s in mine] == bucket["params"], (b, [s.get("data-param") for s in mine])
        # The slots tile the buffer: each starts where the one before ended, and they fill its bytes.
        end = 0
        for s in mine:
            assert int(s.get("data-offset")) == end, f"{name}: bucket {b} has a gap or overlap at {end}"
            end += int(s.get("data-length"))
        assert end * 4 == bucket["bytes"], f"{name}: bucket {b}: {end} float32 elements, {bucket['bytes']} bytes"
    return f"{name}: {len(plan)} buckets, {len(slots)} slots tiling their buffers"

def check_plot(name, series, labels=0):
    root = svg(name)
    n = len(by_class(root, "g", "series"))
    assert n == series, f"{name}: {n} series, expected {series}"
    got = len(by_class(root, "text", "point-label"))
    assert got == labels, f"{name}: {got} point labels, expected {labels}"
    assert svglib.read_figures(os.path.join(pictures, name)), f"{name}: no figures"
    return f"{name}: {n} series" + (f", {got} labelled points" if labels else "")

validation_runs = sum(1 for line in open(os.path.join(step_model, "validation.dat")) if line.startswith('"'))
report = [
    check_timeline("ddp_walkthrough_timeline.svg", "walkthrough"),
    check_timeline("ddp_walkthrough_timeline_one_bucket.svg", "walkthrough_one_bucket", buckets_per_rank=1),
    check_timeline("resnet20_timeline.svg", "resnet20"),
    check_plan("ddp_walkthrough_bucket_plan.svg", 1, 3, 8),  # its MLP: 4 layers, 0.05 then 0.2 MiB caps
    check_sequence("ddp_walkthrough_sequence.svg", "walkthrough"),
    check_memory("ddp_walkthrough_bucket_memory.svg", "walkthrough"),
    check_plan("resnet20_bucket_plan.svg", 1, 2, 65),
    check_plot("step_model_scaling_resnet20.svg", 4),
    check_plot("step_model_buckets_mlp.svg", 6),
    check_plot("step_model_allreduce_1gbit.svg", 4),
    check_plot("step_model_validation.svg", 4, labels=validation_runs),
    check_plot("cluster_scaling.svg", 1),
]
if os.path.exists(os.path.join(pictures, "resnet20_timeline_one_bucket.svg")):
    report.append(check_timeline("resnet20_timeline_one_bucket.svg", "resnet20_one_bucket", buckets_per_rank=1))
# Each timeline and its one-bucket baseline share one time axis.
for pair in (("ddp_walkthrough_timeline.svg", "ddp_walkthrough_timeline_one_bucket.svg"),
             ("resnet20_timeline.svg", "resnet20_timeline_one_bucket.svg")):
    if os.path.exists(os.path.join(pictures, pair[1])):
        axes = [svglib.read_figures(os.path.join(pictures, p))["axis_ms"] for p in pair]
        assert axes[0] == axes[1], f"{pair}: time axes of {axes} ms"
        report.append(f"{pair[0]} and its baseline share a {axes[0]} ms axis")
# A plot for every data file of the step model (scaling_mlp.dat -> step_model_scaling_mlp.svg).
for dat in sorted(os.listdir(step_model)):
    if dat.endswith(".dat"):
        svg("step_model_" + dat[:-len(".dat")] + ".svg")
print("; ".join(report))
PY
run checked 60 python3 "$work/check.py" "$work/pictures" "$work/traces" "$step_model" "$(dirname "$svg_py")"
[[ $rc -eq 0 ]]
ok=$?  # before the $(cat) below, which would set $? itself
check "pictures are well-formed SVG showing the runs ($(cat "$work/checked.out"))" $ok
[[ $rc -eq 0 ]] || sed 's/^/  /' "$work/checked.err" >&2
one_bucket_resnet=0
[[ -e "$work/pictures/resnet20_timeline_one_bucket.svg" ]] && one_bucket_resnet=1
# The runs' 7 (8 with ResNet-20's baseline), the step model's, cluster_scaling.
expected=$((7 + one_bucket_resnet + $(ls "$step_model"/*.dat | wc -l) + 1))
n=$(ls "$work/pictures"/*.svg | wc -l)
[[ $n -eq $expected ]]
check "$expected pictures written ($n)" $?

# The committed pictures and the figures the docs quote from them.
bad=0
for f in "$docs"/pictures/*.svg; do
  python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$f" 2>/dev/null || { echo "  unparsable: $f" >&2; bad=1; }
done
[[ $bad -eq 0 && -e "$docs/pictures/README.md" ]]
check "every committed picture in $docs/pictures parses ($(ls "$docs"/pictures/*.svg 2>/dev/null | wc -l))" $?
run quoted 60 python3 "$svg_py" figures --pictures "$docs/pictures" "$docs/pictures/README.md" "$docs/how-ddp-works.md"
quoted=$(grep -o '[0-9]* of [0-9]* quoted figures' "$work/quoted.out")
[[ $rc -eq 0 && -n "$quoted" && "$quoted" != "0 of 0 quoted figures" ]]
check "the docs' quoted figures match the committed pictures ($quoted)" $?
[[ $rc -eq 0 ]] || sed 's/^/  /' "$work/quoted.err" >&2
finish
