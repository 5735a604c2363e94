#!/usr/bin/env python3
"""The repository explains itself from its own files.

1. Every numbered step of docs/design.md names (first, in backquotes) a function that the sources
   define or declare.
2. No file cites what a clone does not contain: a design document outside docs/, a folder beside
   the repository, the tracker's issue numbers, or the seed documents.

Exits 1 naming each failure with its file and line. usage: design_check.py [--root DIR]
"""
import argparse
import os
import re
import sys

from repo_files import repo_files

SOURCE = re.compile(r"\.(cc|h|cu|cuh)$")
TEXT = re.compile(r"(\.(cc|h|cu|cuh|py|sh|bzl|md|txt|bazelrc)|BUILD|WORKSPACE)$")
STEP = re.compile(r"^\s*(\d+)\.\s+`([A-Za-z_][A-Za-z0-9_:]*)`")
OUTSIDE = [
    (re.compile(r"(?<![\w/])DESIGN\.md"), "cites a design document outside docs/ (the design is docs/design.md)"),
    (re.compile(r"\.\./shared\b|\bshared[/](?:DESIGN|STYLE|notes|seeds)"), "cites a folder outside the repository"),
    (re.compile(r"\b[Ii]ssues? \d+\b"), "cites the tracker's issue number, which a clone cannot see"),
    (re.compile(r"\bseeds?/|\bseed \d{3}\b"), "cites the seed documents, which a clone does not contain"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.realpath(__file__))
    parser.add_argument("--root", default=os.path.dirname(here))
    args = parser.parse_args()
    files = repo_files(args.root)
    sources = "\n".join(open(os.path.join(args.root, f), errors="replace").read()
                        for f in files if SOURCE.search(f) and not f.startswith("tests/"))
    bad = 0
    steps = 0
    design = os.path.join(args.root, "docs/design.md")
    for number, line in enumerate(open(design), 1):
        m = STEP.match(line)
        if not m:
            continue
        steps += 1
        name = m.group(2).split("::")[-1]
        if not re.search(r"\b%s\s*\(" % re.escape(name), sources):
            print(f"docs/design.md:{number}: step {m.group(1)} names {name}, which no source defines", file=sys.stderr)
            bad += 1
    for f in files:
        if not TEXT.search(f) or f == "scripts/design_check.py" or f.startswith("tests/scripts/design_test"):
            continue
        for number, line in enumerate(open(os.path.join(args.root, f), errors="replace"), 1):
            for pattern, why in OUTSIDE:
                if pattern.search(line):
                    print(f"{f}:{number}: {why}: {line.strip()[:120]}", file=sys.stderr)
                    bad += 1
    print(f"docs/design.md: {steps} steps; {bad} failures", file=sys.stderr)
    return 1 if bad or steps == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
