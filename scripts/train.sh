#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs ember's training example.
# Until the DDP ResNet example lands this runs the tensor-library demo; the entry point stays the same.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
bazel build //examples:tensor_demo
exec bazel-bin/examples/tensor_demo "$@"
