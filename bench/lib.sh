# Helpers shared by the bench/*.sh scripts (sourced, not run; they cd to the repository root first).

# The Python that holds PyTorch: Debian's by default; PYTHON=... for another (the GPU machine's
# PyTorch lives in its own virtual environment).
py="${PYTHON:-/usr/bin/python3}"

# field NAME LINE -> the value of NAME=... in a RESULT line, "-" when the line has none.
field() {
  local v
  v=$(tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p")
  echo "${v:--}"
}

# bench_binary PACKAGE:TARGET -> the path of the default-config binary, built first unless
# NO_BUILD=1. Always bazel-out/k8-fastbuild, never bazel-bin/, which follows whichever config
# (cuda, asan) was built last; NO_BUILD=1 also avoids waiting on Bazel's lock held by a long build.
bench_binary() {
  if [[ "${NO_BUILD:-0}" != 1 ]]; then bazel build "//$1" >&2; fi
  # A test's runfiles hold the binary beside the scripts (tests/bench/step_model_test.sh).
  if [[ "${NO_BUILD:-0}" == 1 && -f "$PWD/${1/://}" && -x "$PWD/${1/://}" ]]; then
    echo "$PWD/${1/://}"
    return
  fi
  echo "$PWD/bazel-out/k8-fastbuild/bin/${1/://}"
}

# The machine a benchmark ran on: cores and load, CPU model, vector extensions (three lines).
print_machine() {
  echo "== machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/')"
  echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "   vector extensions: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512[a-z_0-9]*|avx_vnni)$' | tr '\n' ' ')"
}

# median X... -> the median of the numbers
median() { tr ' ' '\n' <<<"$*" | grep '[0-9]' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
