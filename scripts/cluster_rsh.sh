#!/usr/bin/env bash
# Open MPI's rsh agent for scripts/cluster.sh: `cluster_rsh.sh HOST COMMAND...` runs COMMAND on
# HOST as ssh would -- a shell on the host joins the words of COMMAND -- where a host is one of the
# cluster's network namespaces, under its own hostname (a UTS namespace), so Open MPI's daemon
# there sees the host's address, name and link and nothing else of this machine's network.
set -euo pipefail
host="$1"
shift
prefix="${EMBER_CLUSTER_NS_PREFIX:?cluster_rsh.sh runs under scripts/cluster.sh}"
subnet="${EMBER_CLUSTER_SUBNET:?}"
case "$host" in
  "$subnet".*) index=$(( ${host##*.} - 1 )) ;;
  "$prefix"*) index="${host#"$prefix"}" ;;
  *) echo "cluster_rsh.sh: '$host' is not a host of this cluster ($EMBER_CLUSTER_HOSTS)" >&2; exit 255 ;;
esac
ns="$prefix$index"
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec sh -c "$1"' "$ns" "$*"
