#!/usr/bin/env bash
# Bad input at the edges: each mistake a user can make on the command line gets a one-line
# message naming the input and a non-zero exit -- never a crash, a hang, or a stack of errors.
# usage: bad_input_test.sh TRAIN_RESNET DDP_RESNET
source "$(dirname "$0")/lib.sh"
train="$(realpath "$1")"
ddp="$(realpath "$2")"
small=(--depth=8 --width=4 --train_limit=256 --epochs=1 --max_steps=2)

# own_lines FILE: stderr without mpirun's framed notices and the trainers' informational line.
own_lines() {
  awk '/^-+$/ { framed = !framed; next } !framed' "$1" | grep -v -E "thread\(s\) per process|^$" || true
}

# bad NAME PATTERN CMD...: CMD fails within 60 s, and every line it prints of its own -- one per
# rank that met the problem, one in all for a bad flag -- matches PATTERN.
bad() {
  local name="$1" pattern="$2"
  shift 2
  run "$name" 60 "$@"
  expect_error "$name" "$pattern"
  local matching
  total=$(own_lines "$work/$name.err" | wc -l)
  matching=$(own_lines "$work/$name.err" | grep -c -E -- "$pattern" || true)
  [[ $total -ge 1 && $total -eq $matching ]]
  check "$name prints nothing else ($matching of $total lines match)" $?
}

echo "== flags" >&2
# Flags are parsed by CLI11 (examples/common/flags.h): "--FLAG: 'VALUE' is not ... (see --help)".
bad batch_abc "^train_resnet: --batch: 'abc' is not an integer \(see --help\)$" "$train" --batch=abc
bad batch_abc_space "^train_resnet: --batch: 'abc' is not an integer \(see --help\)$" "$train" --batch abc
bad batch_suffix "^train_resnet: --batch: '12x' is not an integer \(see --help\)$" "$train" --batch=12x
bad batch_missing "^train_resnet: --batch: .*missing \(see --help\)$" "$train" --batch
bad epochs_negative "^train_resnet: --epochs: '-1' is not positive \(see --help\)$" "$train" --epochs=-1
bad threads_range "^train_resnet: --threads: '2000' is not between 1 and 1024 \(see --help\)$" "$train" --threads=2000
bad lr_nan "^train_resnet: --lr: 'nan' is not a finite number \(see --help\)$" "$train" --lr=nan
bad smoothing_range "^train_resnet: --label_smoothing: '1.5' is not in \[0, 1\]" "$train" --label_smoothing=1.5
bad depth "^train_resnet: --depth: '10' is not 6n\+2 with n >= 1" "$train" --depth=10
bad unknown_flag "^train_resnet: unknown flag or argument: --bacth=64 \(see --help\)$" "$train" --bacth=64
bad huge_int "^train_resnet: --batch: '99999999999999999999' is out of range" "$train" --batch=99999999999999999999
bad augment "^train_resnet: --augment: 'yes' is not 0 or 1" "$train" --augment=yes
bad max_steps_zero "^train_resnet: --max_steps: '0' is not positive or -1" "$train" --max_steps=0
bad checkpoint_every "^train_resnet: --checkpoint_every needs --checkpoint=PATH" "$train" --checkpoint_every=5
bad metrics_ext "^train_resnet: --metrics: 'm.txt' must end in .csv or .jsonl" "$train" --metrics=m.txt
bad metrics_dir "^train_resnet: metrics: cannot write 'no/such/m.csv': directory 'no/such' does not exist$" \
  "$train" "${small[@]}" --metrics=no/such/m.csv
bad ddp_batch "^\[rank 0\] ddp_resnet: --batch: 'abc' is not an integer \(see --help\)$" "${MPIRUN[@]}" -np 2 "$ddp" --batch=abc
[[ $total -eq 1 ]]; check "a bad flag is reported once, by rank 0" $?
bad ddp_timeout "^\[rank 0\] ddp_resnet: --timeout: '0' is not positive" "${MPIRUN[@]}" -np 2 "$ddp" --timeout=0
bad ddp_threads_range "^\[rank 0\] ddp_resnet: --threads: '0' is not between 1 and 1024" \
  "${MPIRUN[@]}" -np 2 "$ddp" --threads=0
bad ddp_unknown_flag "^\[rank 0\] ddp_resnet: unknown flag or argument: --bucket_cap=25 \(see --help\)$" \
  "${MPIRUN[@]}" -np 2 "$ddp" --bucket_cap=25
bad comm_hook "^\[rank 0\] ddp_resnet: --comm_hook: 'fp17' is not none, .* or batched_powersgd" \
  "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --comm_hook=fp17
bad ddp_metrics_dir "^\[rank 0\] ddp_resnet: metrics: cannot write 'no/such/m.jsonl': directory 'no/such' does not exist$" \
  "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --metrics=no/such/m.jsonl

echo "== --help" >&2
# help NAME CMD...: exits 0 and lists the flags every trainer has, each with its default.
help() {
  local name="$1"
  shift
  run "$name" 60 "$@"
  expect_success "$name"
  local flag
  for flag in "--batch INT:positive=64" "--threads INT" "--seed UINT" "--device TEXT" "--metrics TEXT"; do
    grep -q -F -- "$flag" "$work/$name.out"
    check "$name lists $flag" $?
  done
}
help train_help "$train" --help
help ddp_help "${MPIRUN[@]}" -np 2 "$ddp" --help
[[ $(grep -c -e "--timeout INT:positive=60" "$work/ddp_help.out") -eq 1 ]]
check "ddp_resnet --help lists its own flags, from rank 0 only" $?

echo "== dataset" >&2
bad no_dataset "^train_resnet: .*/no/such/dir" "$train" "${small[@]}" --data=/no/such/dir
mkdir -p "$work/corrupt"
cp /usr/share/datasets/fashion-mnist/* "$work/corrupt/"
head -c 5000 /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz >"$work/corrupt/train-images-idx3-ubyte.gz"
bad truncated_dataset "^train_resnet: .*train-images-idx3-ubyte" "$train" "${small[@]}" --data=corrupt
bad ddp_truncated_dataset "^\[rank [01]\] ddp_resnet: .*train-images-idx3-ubyte" \
  "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --data=corrupt
echo "garbage" >"$work/corrupt/t10k-labels-idx1-ubyte.gz"
cp /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz "$work/corrupt/"
bad garbage_labels "^train_resnet: .*t10k-labels-idx1-ubyte" "$train" "${small[@]}" --data=corrupt
finish
