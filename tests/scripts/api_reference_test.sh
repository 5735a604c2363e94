#!/usr/bin/env bash
# docs/api/ is what scripts/api_reference.py makes from the public headers now (it is regenerated
# whenever a header's comment changes), and it lists every class <ember/ember.h> reaches.
# usage: api_reference_test.sh API_REFERENCE_PY DOCS_API_README
source "$(dirname "$0")/../examples/lib.sh"
script="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" pages="$(cd "$(dirname "$2")" && pwd)"
# The runfiles hold the headers (//:libember's) beside scripts/, as the repository does.
run check 60 python3 "$script" --check --out "$pages"
expect_success check
run classes 60 python3 - "$script" "$pages" <<'PY'
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("api_reference", sys.argv[1])
a = importlib.util.module_from_spec(spec)
spec.loader.exec_module(a)
seen, missing, total = set(), [], 0
for layer in a.LAYERS:
    page = open(os.path.join(sys.argv[2], f"{layer}.md")).read()
    for h in a.reachable(f"ember/{layer}.h", seen):
        for e in a.parse_header(h)[1]:
            if e["kind"] in ("class", "struct"):
                total += 1
                if f"{e['kind']} `{e['namespace']}::{e['name']}`" not in page:
                    missing.append(e["name"])
print(f"{total} classes, {len(missing)} missing: {missing[:5]}")
sys.exit(1 if missing or total < 100 else 0)
PY
expect_success classes
cat "$work/classes.out" >&2
finish
