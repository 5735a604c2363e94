#!/usr/bin/env bash
# examples/out_of_tree as a Bazel workspace of its own that depends on ember's source:
# built with `bazel build //:my_trainer` (its WORKSPACE's local_repository, pointed at this checkout
# with --override_repository), run under mpirun at 2 ranks (it trains, its loss falls, it writes its
# checkpoint); a target of that workspace that depends on an internal ember target fails with
# Bazel's visibility error, one on @ember//:ember analyses.
#
# scripts/test.sh runs it in the plain tier, outside `bazel test` because it runs Bazel itself.
# The workspace is copied to one fixed folder (EMBER_WORKSPACE_TEST_DIR, default
# ~/.cache/ember-workspace-test), so its Bazel output base, and with it the compiled ember, is kept
# from one run to the next; the disk cache (scripts/disk_cache.sh) serves a new output base. Its
# Bazel server is shut down at the end.
# The test is about the workspace, not ember's speed: it builds with -c fastbuild (no optimisation;
# the workspace's own .bazelrc asks for -c opt), and scripts/test.sh passes
# --define=cpu_kernel_levels=<the highest level this CPU runs>, one level of ember's CPU kernels
# (Note [Builds that compile fewer capability levels], tensor/cpu_kernels.bzl). Its paths
# (external/ember/...) differ from those of ember's own build, so no action of that build serves
# it: a build of //:my_trainer there with --profile=P, then `scripts/top_actions.py P`, shows
# ember's 141 compile actions at 1 to 9 s each, about 220 s of compiling at -O0.
# usage: tests/scripts/external_workspace_test.sh [BAZEL_FLAG...]   (e.g. --disk_cache=DIR)
repo="$(cd "$(dirname "$0")/../.." && pwd)"
source "$repo/tests/examples/lib.sh"
dir="${EMBER_WORKSPACE_TEST_DIR:-${HOME}/.cache/ember-workspace-test}/my_trainer"
mkdir -p "$dir"
# The project as committed, nothing else: the output base (outside $dir) keeps what was built.
find "$dir" -mindepth 1 -maxdepth 1 ! -name 'bazel-*' -exec rm -rf {} +
tar -C "$repo/examples/out_of_tree" --exclude='./bazel-*' -cf - . | tar -C "$dir" -xf -
flags=(--override_repository=ember="$repo" --jobs=2 -c fastbuild "$@")

run build 1800 env -C "$dir" bazel build "${flags[@]}" //:my_trainer
expect_success build
run trainer 120 "${MPIRUN[@]}" -np 2 "$dir/bazel-bin/my_trainer" "$work/model.safetensors"
expect_my_trainer_trained trainer "$work/model.safetensors" "my_trainer, built by Bazel from its own workspace,"

# Visibility: the public target is usable from another workspace, an internal one is not.
mkdir -p "$dir/visibility"
cat >"$dir/visibility/BUILD" <<'EOF'
cc_library(name = "uses_public", deps = ["@ember//:ember"])
cc_library(name = "uses_internal", deps = ["@ember//tensor"])
EOF
run public 300 env -C "$dir" bazel build --nobuild "${flags[@]}" //visibility:uses_public
expect_success public
run internal 300 env -C "$dir" bazel build --nobuild "${flags[@]}" //visibility:uses_internal
expect_error internal "target '@ember//tensor:tensor' is not visible from target '//visibility:uses_internal'"

(cd "$dir" && bazel shutdown) 2>/dev/null
finish
