#!/usr/bin/env bash
# The pictures of docs/pictures/, made from real runs (docs/pictures/README.md lists them):
#   - a timeline of one DDP iteration on both ranks, on one clock: examples/ddp_walkthrough (an
#     MLP, small buckets) and examples/ddp_resnet (ResNet-20), each run on 2 ranks with
#     EMBER_DDP_TRACE, the traces merged by scripts/merge_traces.py and drawn by
#     scripts/trace_timeline.py; beside each, the baseline with every gradient in one bucket,
#     launched after backward (*_timeline_one_bucket.svg; ResNet-20's when ddp_resnet has
#     --bucket_cap_mb and --first_bucket_mb), drawn on one time scale with it;
#   - their bucket plans before and after the rebuild, with the caps (scripts/bucket_plan.py);
#   - the walkthrough's buckets in memory (scripts/bucket_memory.py) and its collectives,
#     numbered, on both ranks (scripts/sequence_diagram.py);
#   - the multi-host benchmarks' plots (scripts/bench_plots.py) from docs/step_model/*.dat and
#     bench/cluster_bench.sh's tables in docs/cluster_bench/;
#   - the output of the walkthrough's run, whose trace the walkthrough's pictures come from
#     (ddp_walkthrough_run.txt: its listing and its EMBER_DISTRIBUTED_DEBUG=INFO report);
#   then, when writing docs/pictures/, the figures and listings the docs quote from them (Note
#   [Quoted figures] in scripts/svg.py, scripts/recorded_run.py) are rewritten from the new ones.
#
#   scripts/make_pictures.sh [--small] [--out DIR] [--walkthrough BIN --resnet BIN]
#                            [--step_model DIR] [--cluster DIR] [--traces DIR]
# --small (or QUICK=1): the shortest ResNet run that still has an iteration after the rebuild
# (what tests/scripts:pictures_test runs). --traces DIR keeps the runs' traces and logs there
# (Perfetto opens DIR/*/ember_trace_job.json); by default they are removed. Without
# --walkthrough/--resnet the binaries are built with bazel (--jobs=2). Standard library Python
# (/usr/bin/python3) only.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
scripts="$repo/scripts"
out="$repo/docs/pictures" small=0 walkthrough="" resnet=""
step_model="$repo/docs/step_model" cluster="$repo/docs/cluster_bench" traces=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --small) small=1 ;;
    --out) out="$2"; shift ;;
    --walkthrough) walkthrough="$2"; shift ;;
    --resnet) resnet="$2"; shift ;;
    --step_model) step_model="$2"; shift ;;
    --cluster) cluster="$2"; shift ;;
    --traces) traces="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "make_pictures: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "${QUICK:-0}" == 1 ]] && small=1  # as bench/step_model.sh's QUICK=1
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3

if [[ -z "$walkthrough" || -z "$resnet" ]]; then
  (cd "$repo" && bazel build --jobs=2 //examples:ddp_walkthrough //examples:ddp_resnet)
  bin="$(cd "$repo" && bazel info bazel-bin 2>/dev/null)/examples"
  walkthrough="${walkthrough:-$bin/ddp_walkthrough}" resnet="${resnet:-$bin/ddp_resnet}"
fi

# A private Open MPI session (short paths: Open MPI names its sockets after them), removed at exit.
session="$(mktemp -d /tmp/ember_pic.XXXXXX)"
trap 'rm -rf "$session"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none TMPDIR="$session" OMPI_MCA_orte_tmpdir_base="$session"
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
[[ -n "$traces" ]] || traces="$session/traces"
mkdir -p "$out" "$traces"
out="$(cd "$out" && pwd)" traces="$(cd "$traces" && pwd)"

# traced NAME CMD...: runs CMD on 2 ranks with EMBER_DDP_TRACE, then merges the ranks' traces into
# $traces/NAME/ember_trace_job.json. The run's output is kept to show when it fails.
traced() {
  local name="$1"
  shift
  echo "make_pictures: $name: ${*##*/}" >&2
  if ! EMBER_DDP_TRACE="$traces/$name" timeout 600 "${mpirun[@]}" "$@" >"$traces/$name.out" 2>"$traces/$name.err"; then
    tail -30 "$traces/$name.out" "$traces/$name.err" >&2
    echo "make_pictures: the traced run '$name' failed" >&2
    exit 1
  fi
  "$py" "$scripts/merge_traces.py" "$traces/$name" >&2
}

# One bucket for everything, launched when backward has produced the last gradient: the baseline
# the bucketed timeline is read against (1024 MiB caps hold any model here).
one_bucket=(--first_bucket_mb=1024 --bucket_cap_mb=1024)

# A timeline and its one-bucket baseline are drawn on one time scale (--scale_with the other).
# The walkthrough's run is also the one the docs quote (scripts/recorded_run.py): its output, the
# narrated iteration's listing and the EMBER_DISTRIBUTED_DEBUG=INFO report, is kept beside the
# pictures drawn from its trace.
EMBER_DISTRIBUTED_DEBUG=INFO traced walkthrough "$walkthrough"
cat "$traces/walkthrough.out" "$traces/walkthrough.err" >"$out/ddp_walkthrough_run.txt"
traced walkthrough_one_bucket "$walkthrough" "${one_bucket[@]}"
"$py" "$scripts/trace_timeline.py" "$traces/walkthrough/ember_trace_job.json" -o "$out/ddp_walkthrough_timeline.svg" \
  --scale_with "$traces/walkthrough_one_bucket/ember_trace_job.json" \
  --title "examples/ddp_walkthrough (MLP 64-256-256-128-10, 3 buckets), 2 ranks: one DDP iteration"
"$py" "$scripts/bucket_plan.py" "$traces/walkthrough/ember_trace_rank0.json" -o "$out/ddp_walkthrough_bucket_plan.svg" \
  --caps 0.05,0.2 --title "examples/ddp_walkthrough: the MLP's buckets (caps 0.05 MiB first, then 0.2 MiB)"
"$py" "$scripts/bucket_memory.py" "$traces/walkthrough/ember_trace_job.json" -o "$out/ddp_walkthrough_bucket_memory.svg" \
  --title "examples/ddp_walkthrough: its three buckets in memory, after the rebuild"
"$py" "$scripts/sequence_diagram.py" "$traces/walkthrough/ember_trace_job.json" -o "$out/ddp_walkthrough_sequence.svg" \
  --title "examples/ddp_walkthrough, 2 ranks: every collective of the job, numbered"
"$py" "$scripts/trace_timeline.py" "$traces/walkthrough_one_bucket/ember_trace_job.json" \
  -o "$out/ddp_walkthrough_timeline_one_bucket.svg" --scale_with "$traces/walkthrough/ember_trace_job.json" \
  --title "examples/ddp_walkthrough, baseline: one bucket, one allreduce after backward, 2 ranks"

# ResNet-20: three steps (the third runs on the rebuilt buckets with a warm allocator); --small: two.
if [[ $small == 1 ]]; then
  resnet_flags=(--epochs=1 --max_steps=2 --batch=16 --train_limit=128 --test_limit=32)
else
  resnet_flags=(--epochs=1 --max_steps=3 --batch=64 --train_limit=512 --test_limit=128)
fi
traced resnet20 "$resnet" --depth=20 "${resnet_flags[@]}"
resnet_scale=()
if "$resnet" --help 2>/dev/null | grep -q -- '--first_bucket_mb'; then
  traced resnet20_one_bucket "$resnet" --depth=20 "${resnet_flags[@]}" "${one_bucket[@]}"
  resnet_scale=(--scale_with "$traces/resnet20_one_bucket/ember_trace_job.json")
  "$py" "$scripts/trace_timeline.py" "$traces/resnet20_one_bucket/ember_trace_job.json" \
    -o "$out/resnet20_timeline_one_bucket.svg" --scale_with "$traces/resnet20/ember_trace_job.json" \
    --title "ResNet-20 (batch ${resnet_flags[2]#--batch=} per rank), baseline: one bucket, one allreduce after backward"
else
  echo "make_pictures: $resnet has no --first_bucket_mb: no resnet20_timeline_one_bucket.svg" >&2
fi
"$py" "$scripts/trace_timeline.py" "$traces/resnet20/ember_trace_job.json" -o "$out/resnet20_timeline.svg" \
  ${resnet_scale[@]+"${resnet_scale[@]}"} \
  --title "examples/ddp_resnet, ResNet-20 (batch ${resnet_flags[2]#--batch=} per rank), 2 ranks: one DDP iteration"
"$py" "$scripts/bucket_plan.py" "$traces/resnet20/ember_trace_rank0.json" -o "$out/resnet20_bucket_plan.svg" \
  --caps 1,25 --title "ResNet-20's buckets in examples/ddp_resnet (default caps: 1 MiB first, then 25 MiB)"

"$py" "$scripts/bench_plots.py" --step_model "$step_model" --cluster "$cluster" -o "$out"
if [[ "$out" == "$repo/docs/pictures" ]]; then
  "$py" "$scripts/svg.py" figures --update --pictures "$out" "$repo/docs/pictures/README.md" "$repo/docs/how-ddp-works.md"
fi
echo "make_pictures: pictures in $out" >&2
