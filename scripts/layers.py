#!/usr/bin/env python3
"""ember's folders as layers, from the #include lines of the sources themselves.

Each top-level folder of the library is a layer; a file may include files of its own layer and of
the layers below it, never of one above (which would also make a cycle). Prints the drawing (one
line per arrow: `nn -> tensor (34)`), or with --mermaid a Mermaid graph, and exits 1 naming every
include that points up, with the file and line, and every cycle between folders.

usage: layers.py [--root DIR] [--mermaid]
"""
import argparse
import collections
import os
import re
import sys

from repo_files import repo_files

# Lowest first: the library's layers, then the programs on it (examples/common is shared by the
# benchmarks and tested by tests/).
LAYERS = [
    ["tensor"],
    ["autograd", "data"],
    ["nn"],
    ["optim"],
    ["distributed"],
    ["sim"],  # the CUDA and NCCL stand-ins that --config=cudasim links in place of the toolkit
    ["examples"],
    ["bench", "tests"],
]
SOURCE = re.compile(r"\.(cc|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def level_of(folder):
    for level, folders in enumerate(LAYERS):
        if folder in folders:
            return level
    return None


def sources(root):
    return [f for f in repo_files(root) if SOURCE.search(f) and level_of(f.split("/")[0]) is not None]


def arrows(root):
    """(from folder, to folder) -> [(file, line)] for includes that cross folders."""
    found = collections.defaultdict(list)
    for path in sources(root):
        src = path.split("/")[0]
        with open(os.path.join(root, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dst = m.group(1).split("/")[0]
                if dst != src and level_of(dst) is not None and os.path.exists(os.path.join(root, m.group(1))):
                    found[(src, dst)].append((path, number))
    return found


def cycles(edges):
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.realpath(__file__))
    parser.add_argument("--root", default=os.path.dirname(here), help="the repository (default: this script's)")
    parser.add_argument("--mermaid", action="store_true", help="the drawing as a Mermaid graph")
    args = parser.parse_args()
    found = arrows(args.root)
    library = {k: v for k, v in found.items() if k[0] != "tests"}  # the drawing leaves the tests out
    if args.mermaid:
        print("graph TD")
        for (a, b), where in sorted(library.items()):
            print(f"  {a} -->|{len(where)}| {b}")
    else:
        for (a, b), where in sorted(library.items()):
            print(f"{a} -> {b} ({len(where)})")
    bad = 0
    for (a, b), where in sorted(found.items()):
        if level_of(b) > level_of(a):
            for path, line in where:
                print(f"{path}:{line}: {a} includes {b}, a layer above it", file=sys.stderr)
                bad += 1
    for cycle in cycles(found.keys()):
        print("cycle between folders: " + " -> ".join(cycle), file=sys.stderr)
        bad += 1
    print(f"{len(library)} arrows between {len({f for k in library for f in k})} folders, {bad} against the layers",
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
