#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit, from the line that names them to their closing brace.

    scripts/function_lengths.py --max 60 distributed/ddp     exit 1 and one line per function over 60
    scripts/function_lengths.py --top 10 distributed/ddp     the 10 longest, whatever their length

A block is a function body when its header (the text since the previous ';', '{' or '}') has a
parameter list and the block is not inside another function (lambdas count toward the function
around them). Comments, string and character literals and preprocessor directives (macros too)
are blanked first, so braces in them do not count. Standard library only.
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
SCOPE_HEADER = re.compile(r"^\s*(?:template\s*<.*>\s*)?(?:namespace\b|extern\s+\"C\"|(?:class|struct|union|enum)\b)")


def blank_comments_and_literals(text):
    """The text with comments and literals replaced by spaces (newlines kept, so lines still count)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator (1'000)
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_preprocessor(text):
    """The text with preprocessor directives (and their continuation lines) replaced by spaces."""
    out, continued = [], False
    for line in text.split("\n"):
        directive = continued or line.lstrip().startswith("#")
        out.append(" " * len(line) if directive else line)
        continued = directive and line.rstrip().endswith("\\")
    return "\n".join(out)


def functions(path):
    """(name, first line, last line) of every function body in the file."""
    text = blank_preprocessor(blank_comments_and_literals(open(path, encoding="utf-8", errors="replace").read()))
    found = []
    stack = []  # per open brace: ("function", name, line) or ("scope", ...) or ("block", ...)
    header_start = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";}" or c == "{":
            if c == "{":
                header = text[header_start:i]
                in_function = any(kind == "function" for kind, _, _ in stack)
                if not in_function and "(" in header and not SCOPE_HEADER.match(header):
                    name = re.findall(r"([~\w:]+(?:operator\s*\S+?)?)\s*\(", header)
                    first = line - header.rstrip().count("\n") + (len(header) - len(header.lstrip()) and
                                                                   header[:len(header) - len(header.lstrip())].count("\n"))
                    stack.append(("function", name[0] if name else "?", first))
                else:
                    stack.append(("scope" if not in_function else "block", "", line))
            elif c == "}" and stack:
                kind, name, first = stack.pop()
                if kind == "function":
                    found.append((name, first, line))
            header_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="files or folders")
    parser.add_argument("--max", type=int, help="fail (exit 1) listing the functions longer than this")
    parser.add_argument("--top", type=int, help="list the N longest functions")
    args = parser.parse_args()
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, f) for f in sorted(names) if f.endswith(SOURCE_SUFFIXES)]
        else:
            files.append(p)
    rows = []
    for f in sorted(files):
        for name, first, last in functions(f):
            rows.append((last - first + 1, f, first, name))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    if args.top:
        for length, f, first, name in rows[: args.top]:
            print(f"{length:4d} lines  {f}:{first}  {name}")
    if args.max is not None:
        over = [r for r in rows if r[0] > args.max]
        for length, f, first, name in over:
            print(f"{f}:{first}: {name} is {length} lines, over the limit of {args.max}")
        print(f"{len(rows)} functions in {len(files)} files, {len(over)} over {args.max} lines")
        return 1 if over else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
