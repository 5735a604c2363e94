#!/usr/bin/env bash
# Bad input at the edges (issue 13): each mistake a user can make on the command line gets a one-line
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
bad batch_abc "^train_resnet: bad value 'abc' for --batch \(not an integer\); see --help$" "$train" --batch=abc
bad batch_suffix "^train_resnet: bad value '12x' for --batch \(not an integer\); see --help$" "$train" --batch=12x
bad epochs_negative "^train_resnet: --epochs=-1 must be positive$" "$train" --epochs=-1
bad lr_nan "^train_resnet: bad value 'nan' for --lr \(not a finite number\); see --help$" "$train" --lr=nan
bad depth "^train_resnet: --depth=10 must be 6n\+2 with n >= 1" "$train" --depth=10
bad unknown_flag "^train_resnet: unknown flag --bacth \(see --help\)$" "$train" --bacth=64
bad huge_int "^train_resnet: bad value '99999999999999999999' for --batch \(out of range\)" "$train" --batch=99999999999999999999
bad augment "^train_resnet: bad value 'yes' for --augment \(not 0 or 1\)" "$train" --augment=yes
bad ddp_batch "^\[rank 0\] ddp_resnet: bad value 'abc' for --batch" "${MPIRUN[@]}" -np 2 "$ddp" --batch=abc
[[ $total -eq 1 ]]; check "a bad flag is reported once, by rank 0" $?
bad ddp_timeout "^\[rank 0\] ddp_resnet: bad value '0' for --timeout \(not positive\)" "${MPIRUN[@]}" -np 2 "$ddp" --timeout=0
bad comm_hook "^\[rank [01]\] ddp_resnet: .*unknown comm hook 'fp17'" "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --comm_hook=fp17

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
