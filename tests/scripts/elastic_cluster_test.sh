#!/usr/bin/env bash
# The restarting launcher across a 3-host scripts/cluster.sh: a host whose link is cut
# for good mid-epoch is left out at the restart, and the job finishes on the 2 hosts that remain
# (global batch kept, the trainer's resharding warning), its first epoch's test accuracy within 0.5
# points of the uninterrupted 3-host run's; a host whose link comes back is taken in again at the
# next restart. Skips where network namespaces cannot be made (not root).
# usage: elastic_cluster_test.sh CLUSTER_SH DDP_RESNET ELASTIC_RUN
source "$(dirname "$0")/../examples/lib.sh"
cluster="$(realpath "$1")" ddp="$(realpath "$2")" launcher="$(realpath "$3")"
if [[ "$(id -u)" != 0 ]] || ! ip netns add "ember_probe_$$" 2>/dev/null; then
  echo "SKIPPED: network namespaces need root"
  exit 0
fi
ip netns del "ember_probe_$$"
# The cluster brings its own Open MPI settings (TCP only); lib.sh's shared-memory ones do not apply.
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_btl_vader_backing_directory
# cluster.sh runs its command from the repository's root: every path is absolute.
# The whole training set in one epoch: 3 ranks x 16 = 48 images a step, 1250 steps, a checkpoint
# every 125; the whole test set. (Shorter runs end too far from converged for 0.5 points to
# separate a wrong resume from the noise of the batches' make-up: at 50 steps, 3 x 16, 2 x 24 and
# 1 x 48 from the start end between 47 % and 52 %.)
small=(--depth=8 --width=4 --batch=16 --epochs=1 --checkpoint_every=125 --timeout=5)
elastic=(/usr/bin/python3 "$launcher" --np=3 --min_ranks=2 --mpirun="${MPIRUN[*]}" --)
mkdir -p "$work"/{ref,cut,back}

# cluster_run NAME LIMIT -- COMMAND...: COMMAND on a 3-host cluster. The cluster gets SIGTERM 10 s
# before run's SIGKILL, so that it removes its namespaces even when the limit is hit (cluster_test
# fails on any cluster's leftovers).
cluster_run() {
  local name="$1" limit="$2"
  shift 2
  run "$name" "$limit" timeout --kill-after=5 "$((limit - 10))" "$cluster" 3 "$@"
}

# accuracy NAME: epoch 1's test accuracy in NAME's output, in percent.
accuracy() {
  grep -m1 -E '^epoch 1: ' "$work/$1.out" | sed -E 's/.*test accuracy ([0-9.]+).*/\1/' | awk '{ printf "%.2f", 100 * $1 }'
}

# A job under the cluster with a saboteur beside it: `saboteur.sh CUT HOST BACK KILL -- COMMAND...`
# runs COMMAND and, once the line CUT is in its stderr, cuts HOST's link; if BACK is not empty, the
# link comes back once BACK is there too, and once KILL follows, one rank is killed (kill -9).
cat >"$work/saboteur.sh" <<'SAB'
#!/usr/bin/env bash
cut="$1" host="$2" back="$3" kill="$4"
shift 5
log=$(mktemp)
"$@" 2>>"$log" &
job=$!
tail -n +1 -f --pid="$job" "$log" >&2 &
forward=$!
# wait_for PATTERN: until a line after the saboteur's last action matches PATTERN (or the job ended).
mark=0
wait_for() {
  until tail -n "+$((mark + 1))" "$log" | grep -q "$1" || ! kill -0 "$job" 2>/dev/null; do sleep 0.05; done
}
say() {
  echo "saboteur: $*" >>"$log"
  mark=$(wc -l <"$log")
}
wait_for "$cut"
ip netns exec "$EMBER_CLUSTER_NS_PREFIX$host" ip link set eth0 down && say "link of $EMBER_CLUSTER_NS_PREFIX$host cut"
if [[ -n "$back" ]]; then
  wait_for "$back"
  ip netns exec "$EMBER_CLUSTER_NS_PREFIX$host" ip link set eth0 up && say "link of $EMBER_CLUSTER_NS_PREFIX$host back"
  wait_for "$kill"
  pkill -KILL -n -f "^[^ ]*/ddp_resnet " && say "a rank killed"
fi
wait "$job"
rc=$?
wait "$forward"
rm -f "$log"
exit "$rc"
SAB
chmod +x "$work/saboteur.sh"

echo "== uninterrupted, 3 hosts" >&2
cluster_run ref 60 -- "${elastic[@]}" "$ddp" "${small[@]}" --checkpoint="$work/ref/c.ckpt"
expect_success ref

echo "== host 2's link cut for good half-way through the epoch: the job ends on hosts 0 and 1" >&2
cluster_run cut 160 -- "$work/saboteur.sh" " 625/1250 " 2 "" "" -- "${elastic[@]}" "$ddp" "${small[@]}" \
  --checkpoint="$work/cut/c.ckpt" --metrics="$work/cut/m.csv"
expect_success cut
expect_line cut "^elastic_run: attempt 2 of 4: attempt 1 ended \(exit [0-9]+\): (rank 2 did not arrive .*|mpirun lost its daemon on host 10\.77\.[0-9]+\.3 .*); leaving out host 10\.77\.[0-9]+\.3 \(unreachable: a probe .mpirun -np 1 true. on it alone .*\); on 2 rank\(s\), hosts 10\.77\.[0-9]+\.1, 10\.77\.[0-9]+\.2, global batch 48 kept \(24 per rank\); resuming from global step 625 \(epoch 1, step 625\) of /\S+/cut/c\.ckpt$"
expect_line cut "^resume: warning: checkpoint /\S+/cut/c\.ckpt was written with 3 rank\(s\) x batch 16 \(1250 steps/epoch\); this run has 2 x 24 \(1250 steps/epoch\)"
expect_line cut "^elastic_run: finished in attempt 2 of 4 \(1 restart\(s\)\); on 2 rank\(s\)"
grep -q '^RESULT ' "$work/cut.out"; check "cut: the job printed its RESULT line" $?
grep -Eq '^# event="restart" attempt=2 attempts=4 exit=[0-9]* reason="(rank 2 did not arrive|mpirun lost its daemon).* ranks=2 hosts=\[' "$work/cut/m.csv"
check "cut: the restart, its ranks and hosts are in the metrics file" $?
ref_acc=$(accuracy ref) cut_acc=$(accuracy cut)
awk -v a="$ref_acc" -v b="$cut_acc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.5) }'
check "cut: epoch 1's test accuracy ${cut_acc}% on 2 hosts is within 0.5 points of ${ref_acc}% on 3" $?

echo "== host 2's link cut, then back once the job runs on 2 hosts; a rank killed: host 2 is taken back in" >&2
cluster_run back 180 -- "$work/saboteur.sh" " 250/1250 " 2 "^resumed from " " 625/1250 " -- "${elastic[@]}" \
  "$ddp" "${small[@]}" --checkpoint="$work/back/c.ckpt"
expect_success back
expect_line back "^elastic_run: attempt 2 of 4: .*; leaving out host 10\.77\.[0-9]+\.3 \(unreachable: .*; on 2 rank\(s\)"
expect_line back "^elastic_run: attempt 3 of 4: attempt 2 ended \(exit 137\): rank [01] on host \S+ exited on signal 9 \(Killed\); taking host 10\.77\.[0-9]+\.3 back in \(reachable again\); on 3 rank\(s\), hosts 10\.77\.[0-9]+\.1, 10\.77\.[0-9]+\.2, 10\.77\.[0-9]+\.3, global batch 48 kept \(16 per rank\); resuming from "
expect_line back "^elastic_run: finished in attempt 3 of 4 \(2 restart\(s\)\); on 3 rank\(s\)"
finish
