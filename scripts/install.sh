#!/usr/bin/env bash
# Installs ember for programs outside this repository (README, "Use ember in your own program"):
#   scripts/install.sh [--prefix=DIR] [--cuda]     (default /usr/local; --cuda: the CUDA variant,
#                                                   built with --config=cuda: devices "cuda", NCCL)
# Installs the Debian packages it needs (scripts/bootstrap.sh), builds //:libember (the shared and
# static library and the list of public headers, library.bzl) and lays them out under DIR with a
# CMake package and a pkg-config file (scripts/install_tree.sh). Then:
#   find_package(ember) + target_link_libraries(app PRIVATE ember::ember)     (CMake)
#   g++ app.cc $(pkg-config --cflags --libs ember)                            (DIR/lib/pkgconfig on
#                                                                              PKG_CONFIG_PATH)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
prefix=/usr/local config=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix=*) prefix="${1#--prefix=}" ;;
    --prefix) prefix="$2"; shift ;;
    --cuda) config=(--config=cuda) ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
"$repo/scripts/bootstrap.sh"
cd "$repo"
source scripts/disk_cache.sh
ember_disk_cache_flags cache_flags
bazel build --jobs=2 "${cache_flags[@]}" ${config[@]+"${config[@]}"} //:libember
"$repo/scripts/install_tree.sh" --prefix "$prefix" --built "$(bazel info bazel-bin 2>/dev/null)" --sources "$repo"
if [[ "$prefix" == /usr/local && -x /sbin/ldconfig ]]; then /sbin/ldconfig; fi
