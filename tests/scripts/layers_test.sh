#!/usr/bin/env bash
# ember's folders keep their layers (scripts/layers.py over this repository: no include points to
# a layer above, no cycle between folders), and the checker does catch an upward include and a cycle.
# usage: layers_test.sh LAYERS_PY
source "$(dirname "$0")/../examples/lib.sh"
script="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"

# The repository: the script's real location (the runfiles link back to the source tree).
run repo 60 python3 "$script"
expect_success repo
cat "$work/repo.out" "$work/repo.err" >&2
grep -q "optim -> nn" "$work/repo.out" && ! grep -q "^nn -> optim" "$work/repo.out"
check "optim stands on nn, and nn does not reach up to optim" $?
grep -q " 0 against the layers$" "$work/repo.err"
check "no include against the layers" $?

# A made-up tree whose nn/ includes optim/ (as a model's optimizer groups once did).
tree="$work/tree"
mkdir -p "$tree/tensor" "$tree/nn" "$tree/optim"
echo 'int t();' >"$tree/tensor/tensor.h"
printf '#include "tensor/tensor.h"\n#include "optim/adam.h"\n' >"$tree/nn/gpt.cc"
printf '#include "nn/gpt.h"\n' >"$tree/optim/adam.h"
echo '#include "tensor/tensor.h"' >"$tree/nn/gpt.h"
run upward 60 python3 "$script" --root "$tree"
[[ $rc -eq 1 ]] && grep -q "nn/gpt.cc:2: nn includes optim, a layer above it" "$work/upward.err"
check "an upward include is named with its file and line (exit $rc)" $?
grep -q "cycle between folders: nn -> optim -> nn" "$work/upward.err"
check "the cycle it makes is named" $?
finish
