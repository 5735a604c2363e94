#!/usr/bin/env bash
# The tables of docs/ddp-from-scratch.md: five of examples/ddp_from_scratch's stages (naive, flat,
# overlap, buckets, ddp) on two ranks, interleaved ROUNDS times, for the MLP of many small layers and
# ResNet-20, on two scripts/cluster.sh hosts over a capped link and on shared memory; then
# --stage=buckets with other bucket caps on the link. Prints a markdown table of medians per part,
# with the machine and its load. As root (network namespaces).
#   bench/ddp_from_scratch_bench.sh [stages|shm|caps]...     (default: all three)
# Environment: ROUNDS=5 (CAP_ROUNDS=3 for the cap sweep), LINK=1gbit, STEPS=20, WARMUP=3.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(stages shm caps)
rounds="${ROUNDS:-5}" cap_rounds="${CAP_ROUNDS:-3}" link="${LINK:-1gbit}" steps="${STEPS:-20}" warmup="${WARMUP:-3}"
bin=$(bench_binary examples:ddp_from_scratch)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
model_flags() {  # the batch and buckets of the doc's tables
  case "$1" in
    mlp) echo "--model=mlp --batch=512 --first_bucket_mb=0.25 --bucket_mb=1" ;;
    resnet20) echo "--model=resnet20 --batch=64 --first_bucket_mb=0.05 --bucket_mb=0.25" ;;
  esac
}
run() {  # run WHERE FLAGS...: one RESULT line
  local where="$1"
  shift
  if [[ $where == link ]]; then
    scripts/cluster.sh 2 --link="$link" -- timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none \
      -np 2 "$bin" --steps="$steps" --warmup="$warmup" "$@" 2>/dev/null | grep '^RESULT'
  else
    OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 600 mpirun --allow-run-as-root \
      --oversubscribe --bind-to none -np 2 "$bin" --steps="$steps" --warmup="$warmup" "$@" 2>/dev/null | grep '^RESULT'
  fi
}
# medians KEYS...: reads "label<TAB>RESULT ..." lines, prints one markdown row per label (first-seen
# order) with the median of each key.
medians() {
  "$py" -c '
import statistics, sys
keys, rows = sys.argv[1:], {}
for line in sys.stdin:
    label, result = line.rstrip("\n").split("\t")
    fields = dict(f.split("=", 1) for f in result.split()[1:])
    rows.setdefault(label, []).append(fields)
for label, runs in rows.items():
    cells = []
    for k in keys:
        values = [r[k] for r in runs]
        try:
            m = statistics.median(float(v) for v in values)
            cells.append(f"{m:.3g}" if k == "max_abs_diff_vs_single" else f"{m:.0f}" if k == "allreduces_per_step"
                         else f"{m:.1f}")
        except ValueError:
            cells.append(values[0])
    print("| " + label.replace(" ", " | ") + " | " + " | ".join(cells) + " |")
' "$@"
}
machine() {
  echo "measured on: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores" \
    "shared by both ranks, $(uptime | sed 's/.*load average/load average/') before the runs"
}
stage_table() {  # stage_table WHERE
  local where="$1" out
  out=$(mktemp)
  machine
  for _ in $(seq "$rounds"); do
    for model in mlp resnet20; do
      for stage in naive flat overlap buckets ddp; do
        # shellcheck disable=SC2046
        printf '%s %s\t%s\n' "$model" "$stage" "$(run "$where" --stage="$stage" $(model_flags "$model"))" >>"$out"
      done
    done
  done
  echo "| model | stage | ms_per_step | comm_wall_ms | exposed_comm_ms | allreduces/step | max diff |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  medians ms_per_step comm_wall_ms exposed_comm_ms allreduces_per_step max_abs_diff_vs_single <"$out"
  echo "after: $(uptime | sed 's/.*load average/load average/')"
  rm -f "$out"
}
for part in "${parts[@]}"; do
  case "$part" in
    stages) echo "== five stages, 2 hosts, link $link, medians of $rounds interleaved rounds"; stage_table link ;;
    shm) echo "== five stages, shared memory, medians of $rounds interleaved rounds"; stage_table shm ;;
    caps)
      echo "== --stage=buckets by bucket caps, 2 hosts, link $link, medians of $cap_rounds rounds"
      machine
      out=$(mktemp)
      for _ in $(seq "$cap_rounds"); do
        for c in "mlp 1 25" "mlp 1 4" "mlp 0.25 2" "mlp 1 1" "mlp 0.25 1" "resnet20 1 25" "resnet20 0.25 0.25" \
                 "resnet20 0.05 0.25" "resnet20 0.05 0.1"; do
          read -r model first cap <<<"$c"
          batch=$([[ $model == mlp ]] && echo 512 || echo 64)
          printf '%s %s %s\t%s\n' "$model" "$first" "$cap" "$(run link --stage=buckets --model="$model" --batch="$batch" \
            --first_bucket_mb="$first" --bucket_mb="$cap")" >>"$out"
        done
      done
      echo "| model | first bucket (MiB) | cap (MiB) | buckets | ms_per_step | comm_wall_ms | exposed_comm_ms |"
      echo "|---|---:|---:|---:|---:|---:|---:|"
      medians allreduces_per_step ms_per_step comm_wall_ms exposed_comm_ms <"$out"
      echo "after: $(uptime | sed 's/.*load average/load average/')"
      rm -f "$out"
      ;;
    *) echo "ddp_from_scratch_bench: unknown part '$part' (stages, shm, caps)" >&2; exit 2 ;;
  esac
done
