#!/usr/bin/env bash
# The step-time model in CI: its selftest (the formulas, the fit, DDP's bucketing, the
# overlap arithmetic on hand-made profiles), then bench/step_model.sh's short version -- a traced
# rank, ember's allreduce over 2 namespace hosts at 1 Gbit/s, the MLP's DDP steps (plain, fp16,
# three bucket caps) -- whose predictions must fall within MAX_ERROR of the measured steps. The
# full run (both links, 2 and 4 hosts, ResNet-20 too) is bench/step_model.sh; its target is 15%,
# the short one's 10 steps on a shared CI machine get 25%, and one more measurement if a prediction
# misses. Skips without root (network namespaces).
set -uo pipefail
if [[ "$(id -u)" != 0 ]] || ! ip netns add "ember_probe_$$" 2>/dev/null; then
  echo "SKIPPED: network namespaces need root"
  exit 0
fi
ip netns del "ember_probe_$$"
unset OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism OMPI_MCA_btl_vader_backing_directory
cd "$(dirname "$0")/../.." || exit 1
python3 bench/step_model.py selftest || exit 1
out="${TEST_TMPDIR:-$(mktemp -d)}/step_model"
QUICK=1 NO_BUILD=1 MAX_ERROR="${MAX_ERROR:-0.25}" bench/step_model.sh "$out"
rc=$?
if [[ $rc -eq 1 ]]; then
  # Short runs on a shared machine: a tenant's burst during one run has put a single prediction
  # past 25% (PowerSGD: 26.7%, then 38.7% and 35.2% in one CI run). Measure everything once more;
  # a model that is wrong misses again.
  echo "step_model_test: a prediction missed; measuring once more"
  QUICK=1 NO_BUILD=1 MAX_ERROR="${MAX_ERROR:-0.25}" bench/step_model.sh "$out.again"
  rc=$?
fi
[[ $rc -eq 0 ]] && echo "PASSED" || echo "FAILED (exit $rc)"
exit "$rc"
