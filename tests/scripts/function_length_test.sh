#!/usr/bin/env bash
# No function in distributed/ or nn/ is longer than 60 lines (scripts/function_lengths.py over this
# checkout: the script's runfiles link leads back to the source tree).
# usage: function_length_test.sh FUNCTION_LENGTHS_PY
source "$(dirname "$0")/../examples/lib.sh"
script="$(readlink -f "$1")"
root="$(dirname "$(dirname "$script")")"
run library 60 python3 "$script" --max 60 "$root/distributed" "$root/nn"
expect_success library
cat "$work/library.out" >&2
grep -q "^[0-9]* functions in [0-9]* files, 0 over 60 lines$" "$work/library.out"
check "no function in distributed/ or nn/ is over 60 lines" $?
finish
