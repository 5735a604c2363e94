#!/usr/bin/env bash
# Installs the Debian packages ember needs, only those missing. Idempotent: a second run does nothing.
# Used by both README commands (scripts/train.sh and scripts/test.sh).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java bazel-platforms
  g++ libeigen3-dev libfmt-dev zlib1g-dev nlohmann-json3-dev libboost-context-dev libcli11-dev
  cmake pkg-config  # scripts/install.sh users build with them; tests/scripts:install_test does
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist
  bible-kjv bible-kjv-text  # the GPT example's corpus: `bible` prints the King James text from its data
  python3  # the trace merge and the pictures (scripts/merge_traces.py, make_pictures.sh): standard library only
)
# Optional: PyTorch as a reference for benchmarks (EMBER_WITH_TORCH=1).
if [[ "${EMBER_WITH_TORCH:-0}" == "1" ]]; then PACKAGES+=(python3-torch); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "bootstrap: installing missing packages: ${missing[*]}" >&2
SUDO=""
if [[ "$(id -u)" != "0" ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    echo "bootstrap: these Debian packages are missing: ${missing[*]}" >&2
    echo "bootstrap: run as root (or with passwordless sudo): apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done" >&2
