#!/usr/bin/env bash
# The benchmarks' command lines on CLI11 (examples/common/flags.h), as the trainers' are tested in
# tests/examples/bad_input_test.sh: a bad value, a value out of range and an unknown flag are one
# line naming the flag and value with exit 2; --help lists the flags and exits 0; allreduce_bench's
# named flags (formerly positional) and ratio_report's pass-through to Google Benchmark work;
# ddp_bench --mode=paired prints its rows.
# usage: bench_flags_test.sh EXAMPLES_LIB_SH RESNET_TRAIN_BENCH GEMM_BENCH ALLREDUCE_BENCH DDP_BENCH
source "$1"
resnet="$(realpath "$2")" gemm="$(realpath "$3")" allreduce="$(realpath "$4")" ddp="$(realpath "$5")"

# bad NAME PATTERN CMD...: CMD exits 2 and all it prints (rank 0's line, mpirun's frames aside)
# is one line matching PATTERN.
bad() {
  local name="$1" pattern="$2"
  shift 2
  run "$name" 60 "$@"
  [[ $rc -eq 2 ]]
  check "$name exits 2 (exit $rc)" $?
  expect_line "$name" "$pattern"
  local lines
  lines=$(awk '/^-+$/ { framed = !framed; next } !framed' "$work/$name.err" | grep -c -v '^$')
  [[ $lines -eq 1 ]]
  check "$name prints one line ($lines)" $?
}

echo "== resnet_train_bench" >&2
bad resnet_batch_abc "^resnet_train_bench: --batch: 'abc' is not an integer \(see --help\)$" "$resnet" --batch=abc
bad resnet_depth "^resnet_train_bench: --depth: '9' is not 6n\+2" "$resnet" --depth 9
bad resnet_threads "^resnet_train_bench: --threads: '0' is not between 1 and 1024" "$resnet" --threads=0
bad resnet_unknown "^resnet_train_bench: unknown flag or argument: --step=3 \(see --help\)$" "$resnet" --step=3
run resnet_help 60 "$resnet" --help
expect_success resnet_help
for flag in "--steps INT:positive=30" "--batch INT:positive=64" "--threads INT" "--seed UINT" "--print_capabilities"; do
  grep -q -F -- "$flag" "$work/resnet_help.out"
  check "resnet_train_bench --help lists $flag" $?
done
run resnet_small 120 "$resnet" --steps 2 --warmup=0 --depth=8 --width=4 --batch=4 --threads=1
expect_success resnet_small
grep -q -E '^RESULT impl=ember model=resnet8 batch=4 steps=2 threads=1 ' "$work/resnet_small.out"
check "resnet_train_bench runs with --name value and --name=value" $?

echo "== gemm_bench (ratio_report: --threads is ember's, --benchmark_* are Google Benchmark's)" >&2
bad gemm_threads "^gemm_bench: --threads: 'x' is not an integer" "$gemm" --threads=x
run gemm_list 60 "$gemm" --threads=2 --benchmark_list_tests
expect_success gemm_list
grep -q -E '/ember/' "$work/gemm_list.out" && grep -q -F '2 thread(s)' "$work/gemm_list.out"
check "gemm_bench passes --benchmark_list_tests through and takes --threads=2" $?
run gemm_help 60 "$gemm" --help
expect_success gemm_help
grep -q -F -- "--benchmark_filter" "$work/gemm_help.out"
check "gemm_bench --help names the pass-through flags" $?
# Repetitions run in random order unless told otherwise; the table is in size order either way.
for interleave in "" --benchmark_enable_random_interleaving=false; do
  run gemm_table 120 "$gemm" '--benchmark_filter=/(256|64)$' --benchmark_repetitions=3 \
    --benchmark_min_time=0.001 $interleave
  expect_success gemm_table
  sed -n '/^op /,$p' "$work/gemm_table.out" | awk '$1 == "matmul_f32" && $6 > 0 { print $2 }' |
    tr '\n' ' ' | grep -q -x '64 256 '
  check "gemm_bench ${interleave:-(interleaved)}: a ratio for 64 and 256, in size order" $?
done

echo "== allreduce_bench and ddp_bench under mpirun (2 ranks: rank 0 alone reports)" >&2
bad allreduce_rounds "^allreduce_bench: --rounds: '0' is not positive" "${MPIRUN[@]}" -np 2 "$allreduce" --rounds=0
bad allreduce_positional "^allreduce_bench: unknown flag or argument: 5 \(see --help\)$" "${MPIRUN[@]}" -np 2 "$allreduce" 5
bad allreduce_dtype "^allreduce_bench: --dtype: 'int8' is not float32 or float16" "${MPIRUN[@]}" -np 2 "$allreduce" --dtype=int8
run allreduce_small 120 "${MPIRUN[@]}" -np 2 "$allreduce" --rounds=1 --max_bytes=4096 --loop_bytes=65536 --dtype float16
expect_success allreduce_small
[[ $(grep -c -E '^(1|4) KiB ' "$work/allreduce_small.out") -eq 2 ]] && grep -q "float16 SUM" "$work/allreduce_small.out"
check "allreduce_bench --max_bytes=4096 --dtype float16: the 1 and 4 KiB rows in float16" $?
bad ddp_batch "^\[rank 0\] ddp_bench: --batch: 'abc' is not an integer \(see --help\)$" "${MPIRUN[@]}" -np 2 "$ddp" --batch=abc
bad ddp_bucket "^\[rank 0\] ddp_bench: --bucket_cap_mb: '0' is not positive" "${MPIRUN[@]}" -np 2 "$ddp" --bucket_cap_mb=0
bad ddp_unknown "^\[rank 0\] ddp_bench: unknown flag or argument: --modle=mlp" "${MPIRUN[@]}" -np 2 "$ddp" --modle=mlp
bad ddp_hook "^\[rank 0\] ddp_bench: --comm_hook: 'fp8' is not none, " "${MPIRUN[@]}" -np 2 "$ddp" --comm_hook=fp8
run ddp_help 60 "${MPIRUN[@]}" -np 2 "$ddp" --help
expect_success ddp_help
[[ $(grep -c -F -- "--mlp_sizes" "$work/ddp_help.out") -eq 1 ]] && grep -q -F -- "--comm_hook TEXT" "$work/ddp_help.out"
check "ddp_bench --help lists its flags once (rank 0)" $?
run ddp_paired 120 "${MPIRUN[@]}" -np 2 "$ddp" --mode=paired --model=mlp --mlp_layers=2 --mlp_width=8 --steps=2 \
  --warmup=1 --rounds=2
expect_success ddp_paired
[[ $(grep -c '^PAIRED round=[12] single_x1_ms=' "$work/ddp_paired.out") -eq 2 ]] &&
  grep -q -E '^RESULT impl=ember model=mlp mode=paired world=2 .* efficiency=[0-9.]+ eff_vs_x2=[0-9.]+ overhead=[0-9.]+ sharing=[0-9.]+ ' \
    "$work/ddp_paired.out"
check "ddp_bench --mode=paired --rounds=2: a PAIRED row per round, then the medians (rank 0)" $?
finish
