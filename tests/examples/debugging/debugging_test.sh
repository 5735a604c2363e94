#!/usr/bin/env bash
# Keeps docs/debugging.md honest. The document marks what it quotes with lines
#   <!-- check: [VAR=VALUE...] PROGRAM [--fixed] | KEY SENTENCE -->
# For each, this test runs `mpirun -np 2 PROGRAM` of examples/debugging with those variables and
# checks that KEY SENTENCE appears in the document's next output block (so the check guards a
# quote) and in what the program printed (stdout and stderr), that the run ended within its time
# limit, and that it failed -- or, with --fixed, succeeded.
# usage: debugging_test.sh DEBUGGING_MD PROGRAM...
source "$(dirname "$0")/../lib.sh"
doc="$(realpath "$1")"
shift
declare -A program
for p in "$@"; do program[$(basename "$p")]="$(realpath "$p")"; done

# checks.tsv: one line per check: its number, command, key sentence; block_N.txt: its output block.
awk -v dir="$work" '
  match($0, /^<!-- check: .* -->$/) {
    body = substr($0, 13, length($0) - 16)
    bar = index(body, " | ")
    n++
    cmd[n] = substr(body, 1, bar - 1); key[n] = substr(body, bar + 3)
    pending[n] = 1
    next
  }
  /^```/ {
    if (!inblock) {
      inblock = 1
      for (i in pending) { open[i] = 1; delete pending[i] }
    } else {
      inblock = 0
      for (i in open) delete open[i]
    }
    next
  }
  inblock { for (i in open) print > (dir "/block_" i ".txt") }
  END { for (i = 1; i <= n; i++) printf "%d\t%s\t%s\n", i, cmd[i], key[i] > (dir "/checks.tsv") }
' "$doc"
[[ -s "$work/checks.tsv" ]]
check "docs/debugging.md has check lines" $?

declare -A ran checked
# fd 3: mpirun would read the list from stdin.
while IFS=$'\t' read -r -u 3 n cmd key; do
  read -r -a words <<<"$cmd"
  envs=()
  while [[ ${#words[@]} -gt 0 && "${words[0]}" == *=* ]]; do envs+=("${words[0]}"); words=("${words[@]:1}"); done
  name="${words[0]}"
  args=("${words[@]:1}")
  if [[ -z "${program[$name]:-}" ]]; then
    check "check $n names a program of examples/debugging ($name)" 1
    continue
  fi
  checked[$name]=1
  id="run_$(echo "$cmd" | tr -c 'A-Za-z0-9_\n' '_')"
  echo "== check $n: $cmd" >&2
  grep -qF -- "$key" "$work/block_$n.txt" 2>/dev/null
  check "the document quotes '$key' in the output block after the check" $?
  if [[ -z "${ran[$id]:-}" ]]; then
    # A hang is the failure this guards against: 60 s is far above the programs' 3 s timeouts
    # (mpirun itself may exit 137 when a rank was killed, so the time tells a hang, not the code).
    limit=60
    run "$id" "$limit" env "${envs[@]}" "${MPIRUN[@]}" -np 2 "${program[$name]}" "${args[@]}"
    ran[$id]=$rc
    awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s < l - 1) }'
    check "$cmd ends by itself (exit $rc after ${secs}s)" $?
    if [[ " ${args[*]} " == *" --fixed "* ]]; then
      [[ $rc -eq 0 ]]; check "$cmd succeeds" $?
    else
      [[ $rc -ne 0 ]]; check "$cmd fails" $?
    fi
  fi
  cat "$work/$id.out" "$work/$id.err" | grep -qF -- "$key"
  found=$?
  check "$cmd prints '$key'" $found
  [[ $found -eq 0 ]] || cat "$work/$id.out" "$work/$id.err" | sed 's/^/  output: /' | tail -30 >&2
done 3<"$work/checks.tsv"

for name in "${!program[@]}"; do
  [[ -n "${checked[$name]:-}" ]]
  check "docs/debugging.md checks $name" $?
done
finish
