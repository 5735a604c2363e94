#!/usr/bin/env bash
# scripts/cluster.sh as a user meets it: ddp_resnet across 2 and 4 hosts -- network
# namespaces, TCP only, links capped at 1 Gbit/s -- ends with the same loss and accuracy as the same
# ranks on one host; the ranks really are on different hosts; a host whose link is cut mid-training
# is named by the rank that lost it, and mpirun returns within seconds, leaving nothing running;
# a host whose link is slowed 10x mid-run is named by DDP's straggler check; Ctrl-C removes the
# cluster too. Skips where network namespaces cannot be made (not root).
# usage: cluster_test.sh CLUSTER_SH DDP_RESNET
source "$(dirname "$0")/../examples/lib.sh"
cluster="$(realpath "$1")" ddp="$(realpath "$2")"
if [[ "$(id -u)" != 0 ]] || ! ip netns add "ember_probe_$$" 2>/dev/null; then
  echo "SKIPPED: network namespaces need root"
  exit 0
fi
ip netns del "ember_probe_$$"
# The cluster brings its own Open MPI settings (TCP only); lib.sh's shared-memory ones do not apply.
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_btl_vader_backing_directory
small=(--depth=8 --width=4 --train_limit=960 --test_limit=500 --batch=16 --epochs=1 --timeout=5)

# leftovers: namespaces or bridges a cluster left behind (theirs are named e<pid>h<k>, e<pid>br).
leftovers() {
  { ip netns list | grep -E '^e[0-9]+h[0-9]+'; ip -o link show type bridge | grep -E ': e[0-9]+br'; } || true
}
no_leftovers() {
  local left
  left=$(leftovers)
  [[ -z "$left" ]]
  check "$1: the cluster removed its namespaces and bridge${left:+ (left: $left)}" $?
}
# same_result A B: the "epoch 1: train loss L, test accuracy A" lines are the same.
same_result() {
  local a b
  a=$(grep -m1 -E '^epoch 1: ' "$work/$1.out" | sed 's/ (comm overlap.*//')
  b=$(grep -m1 -E '^epoch 1: ' "$work/$2.out" | sed 's/ (comm overlap.*//')
  echo "  $1: $a" >&2
  echo "  $2: $b" >&2
  [[ -n "$a" && "$a" == "$b" ]]
  check "$1 trains exactly as $2" $?
}

for hosts in 2 4; do
  echo "== $hosts hosts, 1 Gbit/s links, against $hosts ranks on one host" >&2
  run "one_host_$hosts" 120 "${MPIRUN[@]}" -np "$hosts" --mca btl self,vader "$ddp" "${small[@]}"
  expect_success "one_host_$hosts"
  run "hosts_$hosts" 180 "$cluster" "$hosts" --link=1gbit -- \
    "${MPIRUN[@]}" -np "$hosts" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)" >&2; exec "$0" "$@"' \
    "$ddp" "${small[@]}"
  expect_success "hosts_$hosts"
  same_result "hosts_$hosts" "one_host_$hosts"
  distinct=$(grep -E '^rank [0-9]+ on ' "$work/hosts_$hosts.err" | awk '{print $4}' | sort -u | wc -l)
  [[ "$distinct" -eq "$hosts" ]]
  check "hosts_$hosts: its $hosts ranks ran on $distinct different hosts" $?
  no_leftovers "hosts_$hosts"
done

echo "== rank 1's host loses its link mid-training" >&2
# The link goes down once training has started (a fixed delay can outlast the whole run on a fast
# machine), and the run has more epochs than it could finish in the time limit.
cat >"$work/cut.sh" <<'CUT'
#!/usr/bin/env bash
log=$(mktemp)
"$@" 2>>"$log" &
job=$!
tail -n +1 -f --pid="$job" "$log" >&2 &
forward=$!
until grep -q '^epoch 1/' "$log" || ! kill -0 "$job" 2>/dev/null; do sleep 0.05; done
ip netns exec "${EMBER_CLUSTER_NS_PREFIX}1" ip link set eth0 down
echo "link of ${EMBER_CLUSTER_NS_PREFIX}1 cut" >>"$log"
wait "$job"
rc=$?
wait "$forward"
rm -f "$log"
exit "$rc"
CUT
chmod +x "$work/cut.sh"
run link_cut 90 "$cluster" 2 -- "$work/cut.sh" "${MPIRUN[@]}" -np 2 "$ddp" "${small[@]}" --train_limit=-1 --epochs=50
# mpirun's own status when it lost a daemon is 205 (Open MPI's), above expect_error's 1..123.
[[ $rc -ne 0 && $rc -ne 124 && $rc -ne 137 ]]
check "link_cut: mpirun exits non-zero, not killed by the time limit (exit $rc)" $?
expect_line link_cut "^\[rank 0\] ddp_resnet: .*allreduce #[0-9]+ .*timed out after 5000 ms.*rank 1 did not arrive \(rank 1 is unreachable, no connection within 2000 ms: its host e[0-9]+h1 \(10\.77\.[0-9]+\.2\) cannot be reached from here -- the network link to it may be down"
awk -v s="$secs" 'BEGIN { exit !(s < 40) }'
check "link_cut: mpirun returned ${secs}s after the start (cut once training started, collective timeout 5 s; limit 40 s)" $?
no_leftovers link_cut
pgrep -f "orted .*ember_cluster" >/dev/null
[[ $? -ne 0 ]]
check "link_cut: no Open MPI daemon of the cluster is left running" $?

echo "== host 2 of 4: its link slowed 10x mid-run (1 Gbit/s -> 100 Mbit/s) is named by the straggler check" >&2
# The link slows once the first straggler check has measured even links (a fixed delay can outlast
# the whole run on a fast machine). The job's stderr and the marker line go to one file, appended
# in the order they happen, and on to stderr from there.
cat >"$work/slow.sh" <<'SLOW'
#!/usr/bin/env bash
log=$(mktemp)
"$@" 2>>"$log" &
job=$!
tail -n +1 -f --pid="$job" "$log" >&2 &
forward=$!
until grep -q 'straggler check at iteration 10:' "$log" || ! kill -0 "$job" 2>/dev/null; do sleep 0.05; done
ip netns exec "${EMBER_CLUSTER_NS_PREFIX}2" tc qdisc change dev eth0 root tbf rate 100mbit burst 256kb latency 20ms
tc qdisc change dev "${EMBER_CLUSTER_NS_PREFIX}2b" root tbf rate 100mbit burst 256kb latency 20ms
echo "link of ${EMBER_CLUSTER_NS_PREFIX}2 slowed to 100mbit" >>"$log"
wait "$job"
rc=$?
wait "$forward"
rm -f "$log"
exit "$rc"
SLOW
chmod +x "$work/slow.sh"
run slowed 180 "$cluster" 4 --link=1gbit -- "$work/slow.sh" "${MPIRUN[@]}" -np 4 "$ddp" "${small[@]}" \
  --train_limit=-1 --max_steps=100 --timeout=20 --straggler_check_every=10
expect_success slowed
expect_line slowed "^\[rank 0\] ddp_resnet: straggler check at iteration 10: no straggler \(median link [0-9.]+ MB/s between hosts"
expect_line slowed "^\[rank 0\] ddp_resnet: straggler check at iteration [0-9]+: rank 2 \(host e[0-9]+h2\): its links run at [0-9.]+ MB/s at most, [0-9.]+x slower than the links between the other ranks"
# Named after the slowdown, not before: the first line naming rank 2 follows the tc change.
awk '/slowed to 100mbit/ { slowed = 1 } /: rank 2 \(host/ { exit !slowed }' "$work/slowed.err"
check "slowed: rank 2 is named only after its link was slowed" $?
no_leftovers slowed

echo "== Ctrl-C while the cluster runs a command" >&2
# Job control, so the cluster runs in its own process group that Ctrl-C reaches as a whole (and
# SIGINT is not ignored, as it is for a plain background job).
set -m
"$cluster" 2 -- sleep 60 >"$work/interrupted.out" 2>"$work/interrupted.err" &
pid=$!
set +m
sleep 2
start=$(date +%s)
kill -INT -- "-$pid"
wait "$pid"
rc=$?
[[ $(( $(date +%s) - start )) -lt 10 ]]
check "interrupted: cluster.sh ended within 10 s of Ctrl-C" $?
[[ $rc -ne 0 ]]
check "interrupted: cluster.sh exits non-zero ($rc)" $?
no_leftovers interrupted
finish
