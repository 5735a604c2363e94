#!/usr/bin/env bash
# --metrics=FILE: both trainers write one row per step, rank 0 only, in CSV or JSONL by
# the extension, with sane values; a run killed mid-epoch keeps the rows of the steps it finished;
# scripts/plot_metrics.py turns either file into a well-formed SVG (two panels, three with DDP's
# overlap).
# usage: metrics_test.sh TRAIN_RESNET DDP_RESNET PLOT_METRICS_PY
source "$(dirname "$0")/lib.sh"
train="$(realpath "$1")"
ddp="$(realpath "$2")"
plot="$(realpath "$3")"
py=/usr/bin/python3
small=(--depth=8 --width=4 --train_limit=256 --epochs=2 --max_steps=3 --batch=32)

# check_rows FILE STEPS DDP: FILE holds exactly STEPS rows, steps 1..STEPS, epochs 1 then 2, with a
# finite positive loss, 0 < lr <= 0.2, img_per_s and ms_per_step > 0, and overlap/bytes_sent 0 for
# one process (DDP=0) or overlap in [0, 1], communication times within the step and bytes_sent > 0
# for DDP (DDP=1). Prints what it read.
check_rows() {
  "$py" - "$work/$1" "$2" "$3" <<'PY'
import csv, json, math, sys
path, steps, ddp = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
keys = ["step", "epoch", "loss", "lr", "img_per_s", "ms_per_step", "overlap", "comm_wall_ms", "exposed_comm_ms",
        "bytes_sent"]
with open(path) as f:
    if path.endswith(".csv"):
        reader = csv.DictReader(f)
        assert reader.fieldnames == keys, reader.fieldnames
        rows = [{k: float(v) for k, v in r.items()} for r in reader]
    else:
        rows = [json.loads(line) for line in f]
        assert all(list(r) == keys for r in rows), rows
print(f"  {path.rsplit('/', 1)[-1]}: {len(rows)} rows, first {rows[0]}", file=sys.stderr)
assert len(rows) == steps, f"{len(rows)} rows, expected {steps}"
per_epoch = 3
for i, r in enumerate(rows):
    assert r["step"] == i + 1 and r["epoch"] == i // per_epoch + 1, r
    assert math.isfinite(r["loss"]) and 0 < r["loss"] < 20, r
    assert 0 < r["lr"] <= 0.2 and r["img_per_s"] > 0 and r["ms_per_step"] > 0, r
    if ddp:
        assert 0 <= r["overlap"] <= 1 and r["bytes_sent"] > 0, r
        # Note [Communication time]: never more than the step it was part of.
        assert 0 < r["comm_wall_ms"] <= r["ms_per_step"] and 0 <= r["exposed_comm_ms"] <= r["ms_per_step"], r
    else:
        assert r["overlap"] == 0 and r["comm_wall_ms"] == 0 and r["exposed_comm_ms"] == 0 and r["bytes_sent"] == 0, r
# The cosine schedule: the lr never rises.
assert all(a["lr"] >= b["lr"] for a, b in zip(rows, rows[1:])), [r["lr"] for r in rows]
PY
}

# check_svg NAME PANELS: plot_metrics.py draws $work/NAME into a well-formed SVG with PANELS curves.
check_svg() {
  local name="$1" panels="$2"
  run "plot_$name" 60 "$py" "$plot" "$name" -o "$name.svg"
  expect_success "plot_$name"
  "$py" - "$work/$name.svg" "$panels" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
lines = root.findall(f"{ns}polyline")
assert len(lines) == int(sys.argv[2]), f"{len(lines)} curves"
assert all(len(l.get("points").split()) >= 2 for l in lines)
PY
  check "$name.svg is a well-formed SVG with $panels curves" $?
}

echo "== train_resnet: 2 epochs x 3 steps into CSV" >&2
run single 120 "$train" "${small[@]}" --metrics=single.csv
expect_success single
check_rows single.csv 6 0
check "single.csv: one row per step, sane values, overlap and bytes 0" $?
check_svg single.csv 2

echo "== ddp_resnet, 2 ranks: the same into JSONL, rank 0 alone writing" >&2
run ddp 120 "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --batch=16 --metrics=ddp.jsonl
expect_success ddp
check_rows ddp.jsonl 6 1
check "ddp.jsonl: one row per step (not one per rank), overlap in [0, 1], bytes sent" $?
check_svg ddp.jsonl 3

echo "== a run killed after step 4 keeps its 4 rows" >&2
EMBER_FAULT_KILL_AT_STEP=4 run killed 120 "$train" "${small[@]}" --metrics=killed.csv
[[ $rc -eq 137 ]]; check "the SIGKILL ended the run (exit $rc)" $?
[[ $(wc -l <"$work/killed.csv") -eq 5 ]]; ok=$?
check "killed.csv: the header and 4 rows ($(wc -l <"$work/killed.csv") lines)" $ok
finish
