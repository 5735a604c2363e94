#!/usr/bin/env bash
# A cluster of N hosts on this machine: each host is a network namespace (its own interface,
# address, hostname and routing) joined to the others by a bridge, and every `mpirun` that COMMAND
# starts spreads its ranks over those hosts, TCP only, as it would over real machines with ssh.
#   scripts/cluster.sh N [--link=RATE] [--slots=S] -- COMMAND...
#   scripts/cluster.sh 2 -- scripts/train.sh --epochs=1
#   scripts/cluster.sh 4 --link=1gbit -- scripts/train.sh --epochs=1
# --link caps every host's link, both directions (tc token-bucket filter; RATE in tc's units,
# e.g. 10gbit, 1gbit, 100mbit). --slots: ranks per host (1). COMMAND runs on this machine (so Bazel
# works), with Open MPI pointed at the hosts:
#   - a hostfile of the hosts' addresses (OMPI_MCA_orte_default_hostfile), S slots each;
#   - an rsh agent (scripts/cluster_rsh.sh) that starts Open MPI's daemon inside the host's
#     namespace, under the host's own hostname, as ssh would on a real host;
#   - btl self,tcp and the cluster's subnet for both MPI and Open MPI's own traffic: no shared
#     memory between ranks, even on one host.
# mpirun itself runs here and reaches the hosts through the bridge's address (10.77.x.254).
# Everything created (namespaces, veth pairs, the bridge, /etc/netns/<ns>/hosts) is removed on
# exit, also on failure or Ctrl-C; traffic stays on the bridge. Needs root (network namespaces).
# The cluster's environment is exported to COMMAND: EMBER_RANKS (N x S, for scripts/train.sh, unless
# set), EMBER_CLUSTER_HOSTS (the addresses),
# EMBER_CLUSTER_NS_PREFIX, EMBER_CLUSTER_BRIDGE, so tests can reach a host (e.g. to cut its link:
# `ip netns exec ember-h1 ip link set eth0 down`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"  # ip and tc, also under a minimal PATH (Bazel's tests)
usage() {
  echo "usage: scripts/cluster.sh N [--link=RATE] [--slots=S] -- COMMAND..." >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
n="$1"
shift
[[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le 64 ]] || { echo "cluster.sh: N must be 1..64, got '$n'" >&2; exit 2; }
link="" slots=1
while [[ $# -gt 0 && "$1" != "--" ]]; do
  case "$1" in
    --link=*) link="${1#--link=}" ;;
    --slots=*) slots="${1#--slots=}" ;;
    *) echo "cluster.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift
done
[[ $# -ge 2 && "$1" == "--" ]] || usage
shift
[[ "$(id -u)" == 0 ]] || { echo "cluster.sh: needs root (network namespaces)" >&2; exit 2; }
[[ "$slots" =~ ^[0-9]+$ && "$slots" -ge 1 ]] || { echo "cluster.sh: --slots must be positive" >&2; exit 2; }

# Names are unique per run, so two clusters (two CI jobs) never collide.
tag="e$$"
prefix="${tag}h"          # namespaces e1234h0, e1234h1, ...
bridge="${tag}br"
# A /24 no route of this machine uses yet (10.77.x.0): concurrent clusters get their own.
subnet=""
for ((x = $$ % 200; x < $$ % 200 + 50; x++)); do
  if ! ip route show | grep -q "^10\.77\.$x\.0/24"; then subnet="10.77.$x"; break; fi
done
[[ -n "$subnet" ]] || { echo "cluster.sh: no free 10.77.x.0/24 subnet" >&2; exit 1; }
gateway="$subnet.254"
session="$(mktemp -d /tmp/ember_cluster.XXXXXX)"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for ((h = 0; h < n; h++)); do
    # Whatever still runs on a host (an Open MPI daemon cut off from mpirun) goes with it.
    ip netns pids "$prefix$h" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$prefix$h" 2>/dev/null || true   # takes the host's end of its veth pair along
    rm -rf "/etc/netns/$prefix$h"
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$session"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shape DEV [NETNS]: caps DEV's egress at $link (a token bucket: burst 256 kB, 20 ms queue).
shape() {
  [[ -n "$link" ]] || return 0
  local cmd=(tc qdisc add dev "$1" root tbf rate "$link" burst 256kb latency 20ms)
  if [[ $# -gt 1 ]]; then ip netns exec "$2" "${cmd[@]}"; else "${cmd[@]}"; fi
}

ip link add "$bridge" type bridge
ip addr add "$gateway/24" dev "$bridge"
ip link set "$bridge" up
hosts=()
for ((h = 0; h < n; h++)); do
  ns="$prefix$h" addr="$subnet.$((h + 1))"
  hosts+=("$addr")
  ip netns add "$ns"
  ip link add "${ns}b" type veth peer name "${ns}e"
  ip link set "${ns}b" master "$bridge" up
  ip link set "${ns}e" netns "$ns"
  ip netns exec "$ns" ip link set "${ns}e" name eth0
  ip netns exec "$ns" ip addr add "$addr/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
  shape eth0 "$ns"   # host -> bridge
  shape "${ns}b"     # bridge -> host
done
# Every host resolves every host's name (ip netns exec bind-mounts /etc/netns/<ns>/hosts).
for ((h = 0; h < n; h++)); do
  mkdir -p "/etc/netns/$prefix$h"
  {
    echo "127.0.0.1 localhost"
    for ((k = 0; k < n; k++)); do echo "$subnet.$((k + 1)) $prefix$k"; done
    echo "$gateway $(hostname)"
  } >"/etc/netns/$prefix$h/hosts"
done
for addr in "${hosts[@]}"; do echo "$addr slots=$slots"; done >"$session/hostfile"

export EMBER_CLUSTER_HOSTS="${hosts[*]}" EMBER_CLUSTER_NS_PREFIX="$prefix" EMBER_CLUSTER_BRIDGE="$bridge"
export EMBER_CLUSTER_SUBNET="$subnet" OMPI_MCA_orte_default_hostfile="$session/hostfile"
# scripts/train.sh starts EMBER_RANKS ranks: by default one per slot of the cluster.
export EMBER_RANKS="${EMBER_RANKS:-$((n * slots))}"
export OMPI_MCA_plm_rsh_agent="$PWD/scripts/cluster_rsh.sh"
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include="$subnet.0/24" OMPI_MCA_oob_tcp_if_include="$subnet.0/24"
export OMPI_MCA_orte_tmpdir_base="$session" TMPDIR="$session"
# The hosts share this machine's cores, but each daemon believes it has them all: binding would put
# every host's first rank on core 0.
export OMPI_MCA_hwloc_base_binding_policy=none
# Lose a host, and mpirun learns it within EMBER_CLUSTER_DETECT_S seconds (10 by default; TCP
# keepalive on Open MPI's own connections: idle D-3 s, then 3 probes 1 s apart) and ends the job,
# instead of waiting on a dead link for TCP's retransmission timeout (about 15 minutes). Give the
# job a shorter collective timeout (ddp_resnet --timeout=5) so its ranks say whom they lost first.
detect="${EMBER_CLUSTER_DETECT_S:-10}"
[[ "$detect" =~ ^[0-9]+$ && "$detect" -ge 4 ]] || { echo "cluster.sh: EMBER_CLUSTER_DETECT_S must be >= 4" >&2; exit 2; }
export OMPI_MCA_oob_tcp_keepalive_time=$((detect - 3)) OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=3
export EMBER_SIDE_CHANNEL_ADDR=""  # each rank binds its stall inspector to its own host's address
unset OMPI_MCA_btl_vader_backing_directory
echo "cluster.sh: $n host(s) ${hosts[*]} (namespaces ${prefix}0..${prefix}$((n - 1)), bridge $bridge" \
  "$gateway)${link:+, links capped at $link}, $slots slot(s) each" >&2
set +e
"$@"
rc=$?
set -e
exit "$rc"
