#!/usr/bin/env bash
# The repository explains itself from its own files (scripts/design_check.py over this checkout):
# every step of docs/design.md names a function the sources define, and nothing cites a document
# outside the repository, the tracker's issue numbers or the seed documents. The checker does
# catch each of those in a made-up tree.
# usage: design_test.sh DESIGN_CHECK_PY
source "$(dirname "$0")/../examples/lib.sh"
script="$(readlink -f "$1")"

run repo 60 python3 "$script"
expect_success repo
tail -3 "$work/repo.err" >&2
grep -q "^docs/design.md: 13 steps; 0 failures$" "$work/repo.err"
check "docs/design.md's 13 steps each name a function that exists, and nothing cites outside the repository" $?

tree="$work/tree"
mkdir -p "$tree/docs" "$tree/src"
printf '1. `real_step`: does it.\n2. `missing_step`: does not exist.\n' >"$tree/docs/design.md"
printf 'void real_step() {}\n' >"$tree/src/a.cc"
# Each bad citation is assembled from parts, so that this file does not cite them itself.
printf '// see %s.md step 4 (%s %d)\n// ../%s/notes/x.md and %s %03d\n' DESIGN issue 12 shared seed 0 >"$tree/src/b.h"
run made_up 60 python3 "$script" --root "$tree"
[[ $rc -eq 1 ]]
check "the made-up tree fails (exit $rc)" $?
for needle in "step 2 names missing_step, which no source defines" "src/b.h:1: cites a design document outside docs/" \
              "src/b.h:1: cites the tracker's issue number" "src/b.h:2: cites a folder outside the repository" \
              "src/b.h:2: cites the seed documents"; do
  grep -qF "$needle" "$work/made_up.err"
  check "it says: $needle" $?
done
! grep -q "real_step" "$work/made_up.err"
check "a step whose function exists passes" $?
finish
