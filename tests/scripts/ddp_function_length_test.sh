#!/usr/bin/env bash
# No function in distributed/ddp is longer than 60 lines (scripts/function_lengths.py), and the
# checker reports one that is: a 61-line function it is shown must fail it.
# usage: ddp_function_length_test.sh FUNCTION_LENGTHS_PY SOURCE...
source "$(dirname "$0")/../examples/lib.sh"
script="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
sources=()
for f in "$@"; do sources+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
run ddp 60 python3 "$script" --max 60 "${sources[@]}"
expect_success ddp
cat "$work/ddp.out" >&2
grep -q "^[0-9]* functions in ${#sources[@]} files, 0 over 60 lines$" "$work/ddp.out"
check "every one of the ${#sources[@]} files was read" $?

# A function of 61 lines, with braces in a string and a comment that must not count, after
# preprocessor lines whose parentheses and braces must not count either.
{
  echo '#if !defined(__BYTE_ORDER__) || defined(FOO)'
  echo '#endif'
  echo '#define CALL(x) do { \'
  echo '    if (x) { return; } \'
  echo '  } while (0)'
  echo 'int long_one(int x) {'
  echo '  const char* s = "}}}"; // }'
  for i in $(seq 1 58); do echo "  x += $i;"; done
  echo '}'
} >"$work/long.cc"
run long 60 python3 "$script" --max 60 "$work/long.cc"
[[ $rc -eq 1 ]] && grep -q "long_one is 61 lines, over the limit of 60" "$work/long.out"
check "a 61-line function is reported (exit $rc)" $?
finish
