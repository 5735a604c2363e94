#!/usr/bin/env bash
# examples/ddp_from_scratch (docs/ddp-from-scratch.md): every stage, at 2 and 3 ranks, trains the
# MLP exactly as one process on the whole batch does (from stage broadcast on, with every rank
# seeding its own model; in stage unused, with a head only the last rank uses), and its timings and collective counts are
# consistent; a bad flag or a batch the ranks cannot split is one line and exit 1.
# usage: ddp_from_scratch_test.sh DDP_FROM_SCRATCH
source "$(dirname "$0")/lib.sh"
bin="$(realpath "$1")"
# 32 Linear layers (784 -> 256 x 31 -> 10): 64 parameters. Buckets fill from the last layer (10280
# bytes), each 256x256 layer 263168 bytes with its bias, and close at their cap: the first (0.25 MiB)
# after one 256x256 layer, then 7 of four such layers (1 MiB), then the last one with the 784x256
# input layer: 9 buckets.
small=(--model=mlp --steps=3 --warmup=1 --batch=12 --first_bucket_mb=0.25 --bucket_mb=1)
# broadcast and callback bucket the same way; unused adds a head of 31400 bytes to the first bucket
# and one allreduce of the used-parameter map.
declare -A expected=([naive]=64 [flat]=1 [overlap]=64 [buckets]=9 [broadcast]=9 [callback]=9 [unused]=10 [ddp]=">=1")

# field NAME KEY: KEY's value on the RESULT line of run NAME.
field() { grep -m1 '^RESULT ' "$work/$1.out" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# The sanitizer tiers take one world size, as they do for every mpirun suite
# (EMBER_TEST_WORLD_SIZES, set by scripts/test.sh); the plain tier both.
for np in ${EMBER_TEST_WORLD_SIZES:-2 3}; do
  for stage in naive flat overlap buckets broadcast callback unused ddp; do
    name="${stage}_np$np"
    run "$name" 60 "${MPIRUN[@]}" -np "$np" "$bin" --stage="$stage" "${small[@]}"
    expect_success "$name"
    line=$(grep -m1 '^RESULT ' "$work/$name.out")
    [[ "$line" =~ ^RESULT\ stage=$stage\ max_abs_diff_vs_single=[^\ ]+\ ms_per_step=[^\ ]+\ comm_wall_ms=[^\ ]+\ exposed_comm_ms=[^\ ]+\ allreduces_per_step=[^\ ]+$ ]]
    check "$name prints the RESULT line: $line" $?
    diff=$(field "$name" max_abs_diff_vs_single) ms=$(field "$name" ms_per_step)
    wall=$(field "$name" comm_wall_ms) exposed=$(field "$name" exposed_comm_ms) n=$(field "$name" allreduces_per_step)
    awk -v d="$diff" 'BEGIN { exit !(d != "" && d <= 1e-5) }'
    check "$name: max |difference| from one process $diff <= 1e-5" $?
    awk -v c="$wall" -v e="$exposed" -v m="$ms" 'BEGIN { exit !(m > 0 && c >= 0 && e >= 0 && c <= m && e <= m) }'
    check "$name: comm_wall_ms $wall and exposed_comm_ms $exposed within ms_per_step $ms" $?
    if [[ "${expected[$stage]}" == ">=1" ]]; then
      awk -v n="$n" 'BEGIN { exit !(n >= 1) }'
    else
      [[ "$n" == "${expected[$stage]}" ]]
    fi
    check "$name: $n allreduces per step (expected ${expected[$stage]})" $?
  done
done

echo "== bad input" >&2
run bad_stage 30 "${MPIRUN[@]}" -np 2 "$bin" --stage=fast
expect_error bad_stage "^ddp_from_scratch: --stage: 'fast' is not naive, flat, overlap, buckets, broadcast, callback, unused or ddp"
run bad_warmup 30 "${MPIRUN[@]}" -np 2 "$bin" --steps=3 --warmup=3
expect_error bad_warmup "^ddp_from_scratch: --warmup: 3 leaves no timed step of --steps=3"
run uneven_batch 30 "${MPIRUN[@]}" -np 3 "$bin" --batch=8
expect_error uneven_batch "^ddp_from_scratch: --batch: 8 rows do not split evenly over 3 ranks"
finish
