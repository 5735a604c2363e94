#!/usr/bin/env bash
# scripts/make_pictures.sh --small on real runs: ddp_walkthrough and ResNet-20 (ddp_resnet) traced
# on 2 ranks, the committed step-model data and a cluster_bench table. Every picture is
# well-formed SVG with what it must show: a row per rank with compute and comm lanes, exactly
# the iteration's spans and hooks from the merged trace, "bucket 0" named; both bucket plans of
# ResNet-20 (1 bucket, then 2) holding its 65 parameters; a series per line of each plot.
# usage: pictures_test.sh MAKE_PICTURES_SH DDP_WALKTHROUGH DDP_RESNET STEP_MODEL_DAT_FILE
source "$(dirname "$0")/../examples/lib.sh"
make_pictures="$(realpath "$1")" walkthrough="$(realpath "$2")" resnet="$(realpath "$3")"
step_model="$(cd "$(dirname "$4")" && pwd)"  # the runfiles copy, not the source tree

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
pictures, traces = sys.argv[1], sys.argv[2]
NS = "{http://www.w3.org/2000/svg}"

def svg(name):
    return ET.parse(os.path.join(pictures, name)).getroot()  # raises on malformed XML

def by_class(root, tag, cls):
    return [e for e in root.iter(NS + tag) if cls in e.get("class", "").split()]

def texts(root):
    return [t.text for t in root.iter(NS + "text")]

def check_timeline(name, trace_dir):
    root = svg(name)
    events = json.load(open(os.path.join(traces, trace_dir, "ember_trace_job.json")))["traceEvents"]
    # One hook a parameter: as many as the construction's bucket plan names.
    plan = next(e for e in events if e["name"] == "ddp constructed")["args"]["buckets"]
    hooks_per_rank = sum(len(b["params"]) for b in plan)
    ranks = by_class(root, "g", "rank")
    assert [r.get("data-rank") for r in ranks] == ["0", "1"], [r.get("data-rank") for r in ranks]
    assert "bucket 0" in texts(root), f"{name}: no 'bucket 0' label"
    total = 0
    for r in ranks:
        lanes = [l.get("data-lane") for l in by_class(r, "g", "lane")]
        assert lanes[:2] == ["compute", "comm"], lanes
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
        total += len(drawn)
    assert by_class(root, "path", "flow"), f"{name}: no flows drawn"
    return f"{name}: 2 ranks, {total} spans, {hooks_per_rank} hooks a rank"

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
    return f"{name}: {counts[0]} then {counts[1]} buckets, {params} params, {sizes[0]} bytes"

def check_plot(name, series):
    root = svg(name)
    n = len(by_class(root, "g", "series"))
    assert n == series, f"{name}: {n} series, expected {series}"
    return f"{name}: {n} series"

report = [
    check_timeline("ddp_walkthrough_timeline.svg", "walkthrough"),
    check_timeline("resnet20_timeline.svg", "resnet20"),
    check_plan("ddp_walkthrough_bucket_plan.svg", 1, 3, 8),  # its MLP: 4 layers, 0.05 then 0.2 MB caps
    check_plan("resnet20_bucket_plan.svg", 1, 2, 65),
    check_plot("step_model_scaling_resnet20.svg", 4),
    check_plot("step_model_buckets_mlp.svg", 6),
    check_plot("step_model_allreduce_1gbit.svg", 4),
    check_plot("step_model_validation.svg", 4),
    check_plot("cluster_scaling.svg", 1),
]
# A plot for every data file of the step model (scaling_mlp.dat -> step_model_scaling_mlp.svg).
for dat in sorted(os.listdir(sys.argv[3])):
    if dat.endswith(".dat"):
        svg("step_model_" + dat[:-len(".dat")] + ".svg")
print("; ".join(report))
PY
run checked 60 python3 "$work/check.py" "$work/pictures" "$work/traces" "$step_model"
[[ $rc -eq 0 ]]
ok=$?  # before the $(cat) below, which would set $? itself
check "pictures are well-formed SVG showing the runs ($(cat "$work/checked.out"))" $ok
[[ $rc -eq 0 ]] || sed 's/^/  /' "$work/checked.err" >&2
expected=$((4 + $(ls "$step_model"/*.dat | wc -l) + 1))  # runs' 4, the step model's, cluster_scaling
n=$(ls "$work/pictures"/*.svg | wc -l)
[[ $n -eq $expected ]]
check "$expected pictures written ($n)" $?
finish
