#!/usr/bin/env python3
"""The most expensive actions of a Bazel build, from its --profile (JSON trace, .gz or plain).

    bazel build --profile=/tmp/build.profile.gz //...
    scripts/top_actions.py /tmp/build.profile.gz [--top 10] [--build_only | --tests]
    scripts/top_actions.py --tests --markdown DIR/*.profile.gz

Prints the top actions by wall time, then the total of all actions and the build's wall time
(the span of the profile), and how the time divides between compiling, linking and the rest.
--tests ranks the test runs instead ('Testing //...' actions, one per test target), each with its
share of the tier's summed test time; --markdown prints each profile as a table headed by its file
name (scripts/test.sh names them after its tiers: EMBER_PROFILE=DIR writes DIR/<tier>.profile.gz).
"""

import argparse
import gzip
import json
import os
import sys


def load_events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def actions_of(events, path):
    actions = [e for e in events if e.get("cat") == "action processing" and e.get("ph") == "X"]
    if not actions:
        sys.exit(f"{path}: no 'action processing' events (was it written by --profile?)")
    return actions


def wall_seconds(events):
    timed = [e for e in events if "ts" in e]
    return (max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)) / 1e6


def print_actions(path, args):
    events = load_events(path)
    actions = actions_of(events, path)
    if args.build_only:
        actions = [e for e in actions if not e["name"].startswith("Testing ")]
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
    print(f"{len(actions)} actions, {total:.0f} s of action time, {wall_seconds(events):.0f} s of wall time")
    for kind, (n, s) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:6]:
        print(f"  {kind:<12} {n:5d} actions {s:8.0f} s")


def print_tests(path, args):
    events = load_events(path)
    tests = [e for e in actions_of(events, path) if e["name"].startswith("Testing ")]
    tier = os.path.basename(path).split(".")[0]
    if not tests:
        print(f"{tier}: no test ran\n")
        return
    tests.sort(key=lambda e: e["dur"], reverse=True)
    total = sum(e["dur"] for e in tests) / 1e6
    compile_s = sum(e["dur"] for e in actions_of(events, path) if e["name"].startswith("Compiling ")) / 1e6
    summary = (f"{len(tests)} test targets, {total:.0f} s of test time summed, {compile_s:.0f} s of "
               f"compiling summed, {wall_seconds(events):.0f} s of wall time")
    if args.markdown:
        print(f"**{tier}**: {summary}\n\n| seconds | share | test |\n| ---: | ---: | --- |")
    else:
        print(f"{tier}: {summary}\n{'seconds':>8} {'share':>6}  test")
    for e in tests[: args.top]:
        s = e["dur"] / 1e6
        name = e["name"].split(" ", 1)[1]
        if args.markdown:
            print(f"| {s:.1f} | {100 * s / total:.1f} % | `{name}` |")
        else:
            print(f"{s:8.1f} {100 * s / total:5.1f}%  {name}")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", nargs="+")
    parser.add_argument("--top", type=int, default=None, help="rows per profile (10; 20 with --tests)")
    parser.add_argument("--build_only", action="store_true", help="leave out test runs ('Testing //...')")
    parser.add_argument("--tests", action="store_true", help="rank the test runs, with their shares")
    parser.add_argument("--markdown", action="store_true", help="with --tests: a Markdown table per profile")
    args = parser.parse_args()
    if args.top is None:
        args.top = 20 if args.tests else 10
    for path in args.profile:
        (print_tests if args.tests else print_actions)(path, args)


if __name__ == "__main__":
    main()
