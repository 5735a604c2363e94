#!/usr/bin/env python3
"""The API reference of ember's public headers, one Markdown page per layer (docs/api/), made from
the header comments: what <ember/ember.h> brings, followed header by header.

    python3 scripts/api_reference.py [--out docs/api]     write the pages
    python3 scripts/api_reference.py --check              exit 1 if the committed pages are stale

Each layer's page (tensor, autograd, nn, optim, data, distributed: the include/ember/<layer>.h headers, in
that order) covers the headers its umbrella reaches that no earlier layer did. For each header:
its opening comment, then every class, struct, enum, alias and function declared at namespace
scope with the comment block right above it, and for classes their public members the same way.
Declarations in `detail` or `internal` namespaces, and the bodies of inline functions, are left out.
Standard library only: it reads the headers as text, line by line, as they are written here (one
declaration per line or a run of lines ending in `;` or `{`), not as a C++ parser would.
"""
import argparse
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["tensor", "autograd", "nn", "optim", "data", "distributed"]
INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"')
NAMESPACE = re.compile(r"^\s*namespace\s+([\w:]*)\s*\{")
CLASS = re.compile(r"^(?:template\s*<.*>\s*)?(class|struct)\s+(?:\[\[\w+\]\]\s+)?(\w+)\b[^;]*$")
ENUM = re.compile(r"^enum\s+(?:class\s+)?(\w+)")
ALIAS = re.compile(r"^(?:template\s*<.*>\s*)?using\s+(\w+)\s*=")
HIDDEN_NAMESPACES = ("detail", "internal")


def source_file(header):
    """Where an included header is in the repository: <ember/X.h> are include/ember/X.h."""
    return os.path.join(REPO, "include", header) if header.startswith("ember/") else os.path.join(REPO, header)


def reachable(header, seen):
    """Repository headers `header` includes (as include paths), transitively, in first-seen order
    (itself first)."""
    order = []

    def visit(path):
        if path in seen or not os.path.exists(source_file(path)):
            return
        seen.add(path)
        order.append(path)
        with open(source_file(path)) as f:
            for line in f:
                m = INCLUDE.match(line)
                if m:
                    visit(m.group(1))

    visit(header)
    return order


def file_comment(lines):
    """The comment block that opens a header (before #pragma once), as text."""
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith("//"):
            out.append(s[2:].strip())
        elif s:
            break
    return " ".join(out).strip()


def comment_above(lines, i):
    """The // block directly above line i (no blank line between), as text."""
    out = []
    j = i - 1
    while j >= 0 and lines[j].strip().startswith("//"):
        out.append(lines[j].strip()[2:].strip())
        j -= 1
    return " ".join(reversed(out)).strip()


def code_of(line):
    """A line without its trailing // comment, and that comment."""
    m = re.match(r'^((?:[^"/]|"[^"]*"|/(?!/))*)//(.*)$', line)
    return (m.group(1).strip(), m.group(2).strip()) if m else (line.strip(), "")


def statement(lines, i):
    """The declaration starting at line i, up to its `;` or `{` (joined, trailing comments dropped),
    the trailing comment of its last line, and the next line index."""
    parts = []
    j = i
    trailing = ""
    while j < len(lines):
        s, trailing = code_of(lines[j])
        parts.append(s)
        if s.endswith(";") or "{" in s or s.endswith("}"):
            break
        j += 1
    text = " ".join(p for p in parts if p)
    text = re.sub(r"\s*\{.*$", "", text).rstrip(" ;")
    return text, trailing, min(j + 1, len(lines))


def brace_depth(lines, begin, end):
    """How many more braces lines [begin, end) open than close, comments left out."""
    return sum(code_of(lines[k])[0].count("{") - code_of(lines[k])[0].count("}") for k in range(begin, end))


def skip_block(lines, i, depth_change):
    """Index after the block whose opening brace is on line i (depth counted by braces)."""
    depth = depth_change
    j = i + 1
    while j < len(lines) and depth > 0:
        code = code_of(lines[j])[0]
        depth += code.count("{") - code.count("}")
        j += 1
    return j


def is_declaration(s):
    return (s and not s.startswith(("//", "#", "}", "public:", "private:", "protected:", "namespace", "friend",
                                    "static_assert", "EMBER_"))
            and not s.startswith("extern \"C\""))


def parse_class(lines, start, kind):
    """(public members [(declaration, comment)], index after the class)."""
    public = kind == "struct"
    members = []
    depth = brace_depth(lines, start, start + 1)
    j = start + 1
    while j < len(lines) and depth > 0:
        raw = lines[j]
        s = raw.strip()
        if depth == 1:
            if s in ("public:", "protected:", "private:"):
                public = s == "public:"
                j += 1
                continue
            if public and is_declaration(s) and not s.startswith(("class ", "struct ", "enum ", "using ")):
                text, trailing, nxt = statement(lines, j)
                body_depth = brace_depth(lines, j, nxt)
                members.append((text, comment_above(lines, j) or trailing))
                if body_depth > 0:  # an inline body: skip it
                    nxt = skip_block(lines, nxt - 1, body_depth)
                j = nxt
                continue
        code = code_of(raw)[0]
        depth += code.count("{") - code.count("}")
        j += 1
    return members, j


def parse_header(path):
    """(file comment, entries): entries are dicts kind/name/namespace/declaration/comment/members."""
    with open(source_file(path)) as f:
        lines = f.read().splitlines()
    entries = []
    namespaces = []  # (name, depth at which it closes)
    depth = 0
    i = 0
    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        m = NAMESPACE.match(raw)
        if m:
            namespaces.append((m.group(1), depth))
            depth += 1
            i += 1
            continue
        hidden = any(n.split("::")[-1] in HIDDEN_NAMESPACES for n, _ in namespaces) or not namespaces
        inside = depth == len(namespaces)  # at namespace scope, not in a body
        if s.startswith("}") and namespaces and depth - 1 == namespaces[-1][1] and inside:
            namespaces.pop()
            depth -= 1
            i += 1
            continue
        if inside and not hidden and is_declaration(s):
            ns = "::".join(n for n, _ in namespaces if n)
            cm = CLASS.match(s)
            if cm and not s.rstrip().endswith(";"):
                text, _, _ = statement(lines, i)
                members, nxt = parse_class(lines, i, cm.group(1))
                entries.append(dict(kind=cm.group(1), name=cm.group(2), namespace=ns, declaration=text,
                                    comment=comment_above(lines, i), members=members))
                i = nxt
                continue
            em = ENUM.match(s)
            am = ALIAS.match(s)
            text, trailing, nxt = statement(lines, i)
            body_depth = brace_depth(lines, i, nxt)
            if em:
                kind, name = "enum", em.group(1)
            elif am:
                kind, name = "alias", am.group(1)
            elif "(" in text and not text.startswith(("class ", "struct ", "template <class", "template <typename")):
                kind, name = "function", re.sub(r".*?(\w+|operator\S+)\s*\(.*", r"\1", text.split("(")[0] + "(")
            elif text.startswith("template"):
                kind, name = "function", re.sub(r".*?(\w+)\s*\(.*", r"\1", text)
            else:
                kind, name = "", ""
            if kind:
                entries.append(dict(kind=kind, name=name, namespace=ns, declaration=text,
                                    comment=comment_above(lines, i) or trailing, members=[]))
            i = nxt
            if body_depth > 0:
                i = skip_block(lines, nxt - 1, body_depth)
            continue
        code = code_of(raw)[0]
        depth += code.count("{") - code.count("}")
        i += 1
    return file_comment(lines), entries


def render_layer(layer, headers):
    out = [f"# `{layer}`: `#include <ember/{layer}.h>`", "",
           f"Generated from the header comments by `python3 scripts/api_reference.py`; do not edit.", ""]
    for path in headers:
        summary, entries = parse_header(path)
        if not entries:
            continue
        out += [f"## `{path}`", ""]
        if summary:
            out += [summary, ""]
        for e in entries:
            qualified = f"{e['namespace']}::{e['name']}" if e["namespace"] else e["name"]
            out += [f"### {e['kind']} `{qualified}`", ""]
            if e["comment"]:
                out += [e["comment"], ""]
            out += ["```cpp", e["declaration"], "```", ""]
            for decl, comment in e["members"]:
                out.append(f"- `{decl}`" + (f": {comment}" if comment else ""))
            if e["members"]:
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def pages():
    seen = set()
    result = {}
    index = ["# ember API reference", "",
             "`#include <ember/ember.h>` brings every layer below; each page lists what its header adds to the "
             "layers before it, with the comments of the headers themselves. Made by "
             "`python3 scripts/api_reference.py` (`--check`: `tests/scripts:api_reference_test`).", ""]
    for layer in LAYERS:
        headers = [h for h in reachable(f"ember/{layer}.h", seen) if not h.startswith("ember/")]
        result[f"{layer}.md"] = render_layer(layer, headers)
        classes = sum(1 for h in headers for e in parse_header(h)[1] if e["kind"] in ("class", "struct"))
        index.append(f"- [{layer}]({layer}.md): {len(headers)} headers, {classes} classes")
    result["README.md"] = "\n".join(index) + "\n"
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "api"))
    ap.add_argument("--check", action="store_true", help="compare with the pages in --out instead of writing")
    a = ap.parse_args()
    made = pages()
    if a.check:
        stale = [name for name, text in made.items()
                 if not os.path.exists(os.path.join(a.out, name)) or open(os.path.join(a.out, name)).read() != text]
        if stale:
            print(f"api_reference: stale pages in {a.out}: {', '.join(stale)} "
                  "(run python3 scripts/api_reference.py)", file=sys.stderr)
            return 1
        print(f"api_reference: {len(made)} pages up to date")
        return 0
    os.makedirs(a.out, exist_ok=True)
    for name, text in made.items():
        with open(os.path.join(a.out, name), "w") as f:
            f.write(text)
    print(f"api_reference: wrote {len(made)} pages to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
