#!/usr/bin/env bash
# DDP benchmark, ember (//bench:ddp_bench under mpirun) and PyTorch (bench/ddp_bench_torch.py, gloo)
# side by side: ResNet-20, per-rank batch 64, 2 ranks, one thread each.
#   bench/ddp_bench.sh [steps] [warmup]            scaling table + bucket-size sweep
#   bench/ddp_bench.sh scaling [steps] [warmup]    only the scaling / overhead table
#   bench/ddp_bench.sh buckets [steps] [warmup]    only the bucket-size sweep
# Environment: TORCH=0 skips PyTorch; BUCKETS="0.1 0.5 ..." the caps swept; MODELS="mlp resnet20";
#              FIRST_BUCKET=cap|default (first-bucket size in the sweep, see below);
#              BIND=none|core: mpirun's --bind-to for ember's ranks (none, as scripts/train.sh; with
#              core each rank and its comm thread stay on one core, Open MPI's own default for 2 ranks;
#              the paired efficiency shows no difference: docs/measurements.md, "DDP benchmarks").
#
# Scaling table, per implementation (every figure is the slowest rank's median step time):
#   single x1  one process alone (mpirun -np 1 / world 1), no DDP
#   single x2  two independent processes side by side (mpirun -np 2, no DDP): what 2 cores do
#              with no communication at all
#   nosync     2 ranks, DDP wrapper, every step inside no_sync() (no gradient allreduce)
#   ddp        2 ranks, DDP, gradients synchronised every step
# efficiency = DDP img/s / (2 x single-x1 img/s)       (the issue's definition; target >= 0.97)
# eff_vs_x2  = DDP img/s / (single-x2 img/s)           (same, against two processes side by side,
#                                                       i.e. with what sharing the machine costs included)
# overhead   = DDP step / nosync step                  (target <= 1.03)
# sharing    = single-x1 step / single-x2 step         (paired only: what two processes side by side
#                                                       cost with no DDP at all, the part of the
#                                                       efficiency DDP cannot win back)
# paired: the same four ember runs as blocks inside one mpirun (ddp_bench --mode=paired), short
#          blocks of PAIRED_STEPS steps (5) for PAIRED_ROUNDS rounds (24), in an order reversed every
#          round; a slow phase of a shared host then hits all four alike. Per-round ratios and their
#          medians. Short blocks over many rounds spread less from run to run on a host whose speed
#          changes within seconds (docs/measurements.md, "DDP benchmarks").
# other_threads_cpu_ms: CPU time per step of the threads besides the training one (the comm thread):
#              time a rank on a saturated machine loses to communication even when it overlaps.
# With as many cores as ranks, 2 ranks of 1 thread saturate the machine, and anything else running
# (a training job, a build) lands on the same cores. The script prints `uptime` before and after.
#
# Bucket sweep (the paper's experiment): per-iteration time of 2-rank DDP vs bucket_cap_mb for an
# MLP of 200 Linear(64,64) layers (400 small parameters, 3.2 MiB) and for ResNet-20 (65 parameters,
# 1.1 MiB). PyTorch's first bucket is fixed at 1 MiB, which would swallow most of these small
# models whatever the cap; the sweep therefore sets the first bucket to the cap too
# (ember: --first_bucket_mb, PyTorch: dist._DEFAULT_FIRST_BUCKET_BYTES). FIRST_BUCKET=default keeps 1 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
what=all
if [[ "${1:-}" == scaling || "${1:-}" == buckets ]]; then what="$1"; shift; fi
steps="${1:-30}"
warmup="${2:-5}"
torch="${TORCH:-1}"
buckets="${BUCKETS:-0.1 0.5 1 5 10 25 50 100}"
models="${MODELS:-mlp resnet20}"
first_bucket="${FIRST_BUCKET:-cap}"
bind="${BIND:-none}"
paired_steps="${PAIRED_STEPS:-5}"
paired_rounds="${PAIRED_ROUNDS:-24}"
source bench/lib.sh
if ! "$py" -c "import torch.distributed" 2>/dev/null; then torch=0; fi
bin=$(bench_binary bench:ddp_bench)  # NO_BUILD=1: use it as built
export OMPI_MCA_btl=self,vader
launch() {  # launch NP ARGS...: ddp_bench under mpirun, all it prints
  local np="$1"; shift
  timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to "$bind" -np "$np" "$bin" \
    --steps="$steps" --warmup="$warmup" "$@"
}
mpi() {  # mpi NP ARGS...: the RESULT line
  launch "$@" | grep '^RESULT' || echo "RESULT failed"
}
tpy() {
  timeout 900 "$py" bench/ddp_bench_torch.py --steps "$steps" --warmup "$warmup" --timeout 600 "$@" |
    grep '^RESULT' || echo "RESULT failed"
}
load() { uptime | sed 's/.*load average/load average/'; }

echo "== machine: $(nproc) cores, $(load); steps=$steps warmup=$warmup; ember ranks --bind-to $bind"
if pgrep -f "train_resnet|ddp_resnet" >/dev/null; then echo "   (a train_resnet/ddp_resnet job is running: figures are not from a quiet machine)"; fi

scaling() {  # scaling IMPL
  local impl="$1" s1 s2 ns dd
  if [[ "$impl" == ember ]]; then
    s1=$(mpi 1 --model=resnet20 --mode=single); s2=$(mpi 2 --model=resnet20 --mode=single)
    ns=$(mpi 2 --model=resnet20 --mode=nosync); dd=$(mpi 2 --model=resnet20 --mode=ddp)
  else
    s1=$(tpy --world 1 --mode single); s2=$(tpy --world 2 --mode single)
    ns=$(tpy --world 2 --mode nosync); dd=$(tpy --world 2 --mode ddp)
  fi
  printf '%s\n' "$s1" "$s2" "$ns" "$dd" >&2
  printf '%-6s %-10s %10s %10s\n' impl run ms/step img/s
  for pair in "single_x1:$s1" "single_x2:$s2" "nosync:$ns" "ddp:$dd"; do
    local name="${pair%%:*}" line="${pair#*:}"
    printf '%-6s %-10s %10s %10s\n' "$impl" "$name" "$(field ms_per_step "$line")" "$(field img_per_s "$line")"
  done
  awk -v s1="$(field img_per_s "$s1")" -v s2="$(field img_per_s "$s2")" -v d="$(field img_per_s "$dd")" \
      -v dm="$(field ms_per_step "$dd")" -v nm="$(field ms_per_step "$ns")" -v i="$impl" \
    'BEGIN { if (s1 == "-" || s2 == "-" || d == "-" || nm == "-") { print i " efficiency: a run failed"; exit }
             printf "%-6s efficiency %.3f (target >= 0.97)   eff_vs_x2 %.3f   overhead ddp/nosync %.3f (target <= 1.03)\n",
             i, d / (2 * s1), d / s2, dm / nm }'
  if [[ "$impl" == ember ]]; then
    echo "ember  paired blocks of $paired_steps steps in one mpirun, $paired_rounds rounds (ms/step, slowest rank's median per block):"
    steps="$paired_steps" launch 2 --model=resnet20 --mode=paired --rounds="$paired_rounds" |
      sed -n 's/^PAIRED /ember    /p; s/^RESULT.* single_x1_ms/ember  paired medians: single_x1_ms/p' || echo "ember  paired: failed"
    echo "ember  ddp: buckets=$(field buckets "$dd") comm_wall_ms=$(field comm_wall_ms "$dd") exposed_comm_ms=$(field exposed_comm_ms "$dd") overlap=$(field overlap "$dd") peak_rss_mb=$(field peak_rss_mb "$dd") other_threads_cpu_ms=$(field other_threads_cpu_ms "$dd") (nosync $(field other_threads_cpu_ms "$ns"))"
  else
    echo "torch  ddp: buckets=$(field buckets "$dd") peak_rss_mb=$(field peak_rss_mb "$dd")"
  fi
}

sweep() {  # sweep MODEL
  local model="$1" cap fb e t
  printf '%-9s %14s %15s %13s %8s %13s\n' model bucket_cap_mb ember_buckets ember_ms torch_ms torch/ember
  for cap in $buckets; do
    fb="$cap"; if [[ "$first_bucket" == default ]]; then fb=1; fi
    e=$(mpi 2 --model="$model" --mode=ddp --bucket_cap_mb="$cap" --first_bucket_mb="$fb")
    t="ms_per_step=nan"
    if [[ "$torch" == 1 ]]; then t=$(tpy --world 2 --model "$model" --mode ddp --bucket_cap_mb "$cap" --first_bucket_mb "$fb"); fi
    printf '%s\n' "$e" "$t" >&2
    printf '%-9s %14s %15s %13s %8s %13s\n' "$model" "$cap" "$(field buckets "$e")" "$(field ms_per_step "$e")" \
      "$(field ms_per_step "$t")" \
      "$(awk -v a="$(field ms_per_step "$t")" -v b="$(field ms_per_step "$e")" 'BEGIN { if (a == "nan" || a == "-" || b == "-") print "-"; else printf "%.2f", a / b }')"
  done
}

if [[ "$what" != buckets ]]; then
  echo "== scaling: ResNet-20, per-rank batch 64, 2 ranks x 1 thread (raw RESULT lines on stderr)"
  scaling ember
  if [[ "$torch" == 1 ]]; then scaling torch; fi
fi
if [[ "$what" != scaling ]]; then
  echo "== bucket sweep: 2-rank DDP step time (ms, median) vs bucket_cap_mb, first bucket = $first_bucket"
  for m in $models; do sweep "$m"; done
fi
echo "== load after: $(load)"
