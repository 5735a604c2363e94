# Sourced by scripts/test.sh and scripts/train.sh: the Bazel disk cache they share across every
# checkout on this machine. It maps an action's inputs to its outputs, so a fresh clone of sources
# already compiled here compiles nothing; scripts/test.sh still runs every test
# (--nocache_test_results): only compilation is reused, never a result.
#   EMBER_DISK_CACHE     its folder (default ~/.cache/ember-bazel-disk, made if missing); set it
#                        empty to build without one
#   EMBER_DISK_CACHE_GB  its bound (default 16): past it, the least recently used files go, until
#                        it holds three quarters of the bound (Bazel 4 has no bound of its own)

EMBER_DISK_CACHE="${EMBER_DISK_CACHE-${HOME:-/root}/.cache/ember-bazel-disk}"
EMBER_DISK_CACHE_GB="${EMBER_DISK_CACHE_GB:-16}"

# The Bazel flags that use the cache (none when EMBER_DISK_CACHE is empty), into the array named $1.
ember_disk_cache_flags() {
  local -n out="$1"
  out=()
  if [[ -n "$EMBER_DISK_CACHE" ]]; then
    mkdir -p "$EMBER_DISK_CACHE"
    out=(--disk_cache="$EMBER_DISK_CACHE")
  fi
}

# Deletes the least recently used files (by access or modification time, the later) while the cache
# is over its bound. A deleted output is only a miss for a later build: Bazel runs that action again.
ember_prune_disk_cache() {
  [[ -n "$EMBER_DISK_CACHE" && -d "$EMBER_DISK_CACHE" ]] || return 0
  local bound=$((EMBER_DISK_CACHE_GB * 1024 * 1024 * 1024))
  local used
  used=$(du -sb "$EMBER_DISK_CACHE" | cut -f1)
  ((used > bound)) || return 0
  local target=$((bound / 4 * 3))
  echo "disk cache: ${EMBER_DISK_CACHE} holds $((used >> 20)) MiB, over ${EMBER_DISK_CACHE_GB} GiB:" \
       "deleting the least recently used files down to $((target >> 20)) MiB" >&2
  find "$EMBER_DISK_CACHE" -type f -printf '%A@ %T@ %s %p\n' |
    awk '{ t = ($1 > $2) ? $1 : $2; $1 = ""; $2 = ""; sub(/^  /, ""); print t, $0 }' | sort -n |
    while read -r _ size path; do
      ((used > target)) || break
      rm -f -- "$path" && used=$((used - size))
    done
}
