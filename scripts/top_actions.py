#!/usr/bin/env python3
"""The most expensive actions of a Bazel build, from its --profile (JSON trace, .gz or plain).

    bazel build --profile=/tmp/build.profile.gz //...
    scripts/top_actions.py /tmp/build.profile.gz [--top 10] [--build_only]

Prints the top actions by wall time, then the total of all actions and the build's wall time
(the span of the profile), and how the time divides between compiling, linking and the rest.
"""

import argparse
import gzip
import json
import sys


def load_events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--build_only", action="store_true", help="leave out test runs ('Testing //...')")
    args = parser.parse_args()
    events = load_events(args.profile)
    actions = [e for e in events if e.get("cat") == "action processing" and e.get("ph") == "X"]
    if args.build_only:
        actions = [e for e in actions if not e["name"].startswith("Testing ")]
    if not actions:
        sys.exit(f"{args.profile}: no 'action processing' events (was it written by --profile?)")
    timed = [e for e in events if "ts" in e]
    span = (max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)) / 1e6
    actions.sort(key=lambda e: e["dur"], reverse=True)
    print(f"{'seconds':>8}  action")
    for e in actions[: args.top]:
        print(f"{e['dur'] / 1e6:8.1f}  {e['name']}")
    kinds = {}
    for e in actions:
        kind = e["name"].split(" ", 1)[0]
        n, s = kinds.get(kind, (0, 0.0))
        kinds[kind] = (n + 1, s + e["dur"] / 1e6)
    total = sum(s for _, s in kinds.values())
    print(f"{len(actions)} actions, {total:.0f} s of action time, {span:.0f} s of wall time")
    for kind, (n, s) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:6]:
        print(f"  {kind:<12} {n:5d} actions {s:8.0f} s")


if __name__ == "__main__":
    main()
