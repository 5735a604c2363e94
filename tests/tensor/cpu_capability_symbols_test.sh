#!/usr/bin/env bash
# Note [CPU capability namespaces]: the linker keeps one copy of each inline function and template
# instantiation, so any such symbol an AVX2/AVX-512 kernel object shares with the rest of the
# program may be the copy every caller runs. This test reads the built kernel archives: a shared
# symbol (one whose mangled name does not carry the level, AVX2 / AVX512 / Eigen_<level>) must
# consist of baseline x86-64 instructions only, or the binary could fault on an older CPU.
#   cpu_capability_symbols_test.sh LEVEL LIBRARY...   (the level's .a or .so; missing ones skipped)
set -euo pipefail
level="$1"
shift
libraries=()
for f in "$@"; do [[ -f "$f" ]] && libraries+=("$f"); done
(( ${#libraries[@]} > 0 )) || { echo "FAIL: none of $* exists"; exit 1; }
set -- "${libraries[@]}"
# Beyond x86-64 (SSE2): anything VEX/EVEX-encoded (v-prefixed mnemonics, ymm/zmm/mask registers)
# and the scalar extensions of x86-64-v2/v3.
not_baseline='^\s*[0-9a-f]+:\s+(v[a-z0-9]+|lzcnt|tzcnt|popcnt|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|movbe|crc32|kmov|pshufb|ptest|pmins|pmaxs|pminu|pmaxu|roundss|roundsd|roundps|roundpd|pblend|blendv|dpps|insertps|extractps|pextr[bdq]|pinsr[bdq]|pmovzx|pmovsx|pmulld|palignr|phadd|lddqu|movddup|movshdup|movsldup|haddp|addsubp)\b|%[yz]mm|%k[0-7]'
checked=0
shared=0
bad=()
for archive in "$@"; do
  while read -r symbol; do
    shared=$((shared + 1))
    body=$(objdump -d --no-show-raw-insn --disassemble="$symbol" "$archive" 2>/dev/null |
           grep -E '^\s*[0-9a-f]+:' || true)
    [[ -z "$body" ]] && continue  # data (a constant, a guard variable): no instructions
    checked=$((checked + 1))
    if grep -qE "$not_baseline" <<<"$body"; then
      bad+=("$(c++filt <<<"$symbol"): $(grep -E "$not_baseline" <<<"$body" | head -1 | tr -s ' \t' ' ')")
    fi
  done < <(nm --defined-only -g "$archive" 2>/dev/null | awk 'NF == 3 { print $3 }' |
           grep -v -E "${level}|Eigen_${level}" | sort -u)
done
echo "$level: $shared shared symbols, $checked with code, all checked for non-baseline instructions"
if (( ${#bad[@]} > 0 )); then
  echo "FAIL: symbols shared with baseline code but compiled with $level instructions:"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
# The test must be able to fail: the level's own kernels do use the level's instructions.
own=$(nm --defined-only "$1" | awk 'NF == 3 && ($2 == "t" || $2 == "T") { print $3 }' |
      grep -E "$level" | head -200 || true)
found=0
for symbol in $own; do
  body=$(objdump -d --no-show-raw-insn --disassemble="$symbol" "$1")
  if grep -qE "$not_baseline" <<<"$body"; then
    found=1
    break
  fi
done
if (( found == 0 )); then
  echo "FAIL: no $level instructions found in $level's own kernels: is the archive built for $level?"
  exit 1
fi
echo PASS
