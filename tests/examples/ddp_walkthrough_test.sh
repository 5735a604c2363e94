#!/usr/bin/env bash
# examples/ddp_walkthrough under mpirun at 2 and 3 ranks: each rank trains on its own rows, so the
# local gradient norms differ between ranks while the averaged ones agree and equal the mean of
# the local gradients; after 3 steps the parameters match one process trained on the whole global
# batch to 1e-6; the communication it reports (Note [Communication time]) is within backward; and
# with --find_unused_parameters, the unused-parameter path (below).
# usage: ddp_walkthrough_test.sh DDP_WALKTHROUGH
source "$(dirname "$0")/lib.sh"
walkthrough="$(realpath "$1")"

# One world size in the sanitizer tiers (EMBER_TEST_WORLD_SIZES, scripts/test.sh), both in plain.
for np in ${EMBER_TEST_WORLD_SIZES:-2 3}; do
  run "walk$np" 120 "${MPIRUN[@]}" -np "$np" "$walkthrough"
  expect_success "walk$np"
  out="$work/walk$np.out"
  python3 - "$out" "$np" <<'PY'
import re, sys
text, np = open(sys.argv[1]).read(), int(sys.argv[2])
def norms(kind):
    line = next(l for l in text.splitlines() if "|grad" in l and kind in l)
    return [float(v) for v in re.findall(r"rank \d+: ([0-9.]+)", line)]
local, averaged = norms("local"), norms("averaged")
assert len(local) == np and len(averaged) == np, (local, averaged)
assert len(set(local)) == np, f"local gradient norms should differ between ranks: {local}"
assert max(averaged) - min(averaged) == 0, f"averaged norms differ: {averaged}"
m = re.search(r"RESULT max_abs_diff_vs_single=(\S+) averaging_error=(\S+)", text)
assert m, "no RESULT line"
diff, avg_err = float(m.group(1)), float(m.group(2))
assert diff <= 1e-6, f"max |difference| from one process {diff} > 1e-6"
assert avg_err <= 1e-6, f"averaged gradient != mean of the local ones: {avg_err}"
b = re.search(r"backward ([0-9.]+) ms; communication ([0-9.]+) ms of wall time .*, ([0-9.]+) ms of it after", text)
assert b, "no communication line"
backward, wall, exposed = map(float, b.groups())
assert wall <= backward and exposed <= backward, (backward, wall, exposed)
print(f"np={np}: local {local}, averaged {averaged[0]}, max diff {diff:.2e}, backward {backward} ms, "
      f"communication {wall} ms wall, {exposed} ms exposed")
PY
  check "walkthrough at $np ranks: local gradients differ, averaged agree, parameters match one process" $?
done

# --find_unused_parameters at 2 ranks: rank 0's listing shows the graph search, the unused
# parameters marked ready at the first hook, DDP's sink node, the used-map allreduce after the last
# bucket, and the .grad of the head no rank used left untouched; the head rank 1 alone uses gets
# rank 1's gradient averaged on both ranks, and the parameters still match one process.
run unused 120 "${MPIRUN[@]}" -np 2 "$walkthrough" --find_unused_parameters
expect_success unused
python3 - "$work/unused.out" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
listing = [l for l in text.splitlines() if re.match(r"\s+[0-9.]+ ms  \[", l)]
def first(pattern):
    hits = [i for i, l in enumerate(listing) if re.search(pattern, l)]
    assert hits, f"no listing line matches {pattern!r}"
    return hits[0]
search = first(r"search_unused_parameters")
sink = first(r"DDPSinkBackward")
first_hook = first(r"autograd_hook ")
marked = first(r"first hook marks the unused ready: aux\.weight aux\.bias spare\.weight spare\.bias")
used_map = first(r"allreduce #\d+ used-parameter map \(MPI\)")
last_bucket = max(i for i, l in enumerate(listing) if re.search(r"\[mpi\]\s+allreduce #\d+ bucket", l))
assert search < sink < first_hook < marked, (search, sink, first_hook, marked)
assert used_map > last_bucket, "the used map's allreduce must follow the last bucket's"
assert "spare.weight .grad: left untouched on every rank" in text, "spare's .grad was written"
aux = [float(v) for v in re.findall(r"rank \d+: ([0-9.]+)", next(l for l in text.splitlines() if "|grad aux.weight|" in l))]
assert len(aux) == 2 and aux[0] == aux[1] > 0, f"aux's averaged gradient should be equal and non-zero: {aux}"
m = re.search(r"RESULT max_abs_diff_vs_single=(\S+)", text)
assert m and float(m.group(1)) <= 1e-6, "parameters differ from one process"
print("find_unused_parameters: search, sink, marked ready, used map after the buckets, spare untouched")
PY
check "walkthrough --find_unused_parameters: the unused-parameter path at 2 ranks" $?
finish
