"""A few SVG building blocks for ember's pictures (scripts/make_pictures.sh), standard library only:
an element writer that escapes text, a colour palette, "nice" axis ticks, a line chart, and the
figures a picture carries for the docs that quote it.

The pictures are SVG because GitHub shows SVG in markdown and the text stays searchable (the
tests read the labels back with xml.etree). Shapes carry a `class` naming what they are
(`span`, `hook`, `bucket`, `series`...) so a test can count them.

Note [Quoted figures]: each picture keeps its key numbers, as printed on it, in
<metadata class="figures">{"key": value, ...}</metadata>. A document quotes one as
`0.71<!-- figure resnet20_timeline rank0.comm_wall_ms --> ms` (the comment is invisible on GitHub).

    python3 scripts/svg.py figures [--update] [--pictures DIR] DOC.md...

checks that every quoted number is the picture's figure at the quoted precision (exit 1 naming
each that is not), or with --update rewrites them from the pictures (scripts/make_pictures.sh does,
after drawing). DIR defaults to the folder of this script's ../docs/pictures.
"""
import json
import math
import os
import re
import sys
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"

# Colour-blind friendly (Okabe-Ito), then a few muted extras for pictures with many kinds.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#8C564B", "#7F7F7F", "#BCBD22", "#17BECF", "#9467BD", "#AEC7E8", "#FFBB78", "#98DF8A",
           "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7"]


class Svg:
    """An SVG document built element by element; `str(svg)` is the file's text."""

    def __init__(self, width, height, title=""):
        self.width, self.height = width, height
        self.parts = []
        self.depth = 1
        if title:
            self.add("title", text=title)

    def add(self, tag, text=None, **attrs):
        """One element; attribute names use _ for - (font_size -> font-size), `cls` for class."""
        self.parts.append("  " * self.depth + _open(tag, attrs) +
                          ("/>" if text is None else ">" + escape(str(text)) + f"</{tag}>"))

    def figures(self, figures):
        """The picture's key numbers as printed on it (Note [Quoted figures]), sorted by key."""
        self.add("metadata", text=json.dumps(figures, sort_keys=True), cls="figures")

    def raw(self, markup):
        """Markup written as is (a <defs> block); the caller makes sure it is well-formed."""
        self.parts.append("  " * self.depth + markup)

    def open(self, tag, **attrs):
        self.parts.append("  " * self.depth + _open(tag, attrs) + ">")
        self.depth += 1

    def close(self, tag):
        self.depth -= 1
        self.parts.append("  " * self.depth + f"</{tag}>")

    def text(self, x, y, s, size=11, anchor="start", **attrs):
        self.add("text", text=s, x=_num(x), y=_num(y), font_size=size, text_anchor=anchor, **attrs)

    def rect(self, x, y, w, h, fill, tooltip=None, **attrs):
        attrs.update(x=_num(x), y=_num(y), width=_num(max(w, 0.5)), height=_num(h), fill=fill)
        if tooltip is None:
            self.add("rect", **attrs)
        else:  # a <title> child: the viewer shows it on hover (Perfetto-like details when opened directly)
            self.open("rect", **attrs)
            self.add("title", text=tooltip)
            self.close("rect")

    def line(self, x1, y1, x2, y2, stroke="#000", width=1, **attrs):
        self.add("line", x1=_num(x1), y1=_num(y1), x2=_num(x2), y2=_num(y2), stroke=stroke,
                 stroke_width=width, **attrs)

    def __str__(self):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" font-family={quoteattr(FONT)}>')
        # A white background: GitHub's dark theme would otherwise show black text on black.
        bg = f'  <rect class="background" x="0" y="0" width="{self.width}" height="{self.height}" fill="#fff"/>'
        return "\n".join(['<?xml version="1.0" encoding="UTF-8"?>', head, bg] + self.parts + ["</svg>", ""])

    def save(self, path):
        with open(path, "w") as f:
            f.write(str(self))


def _num(v):
    return f"{v:.2f}".rstrip("0").rstrip(".") if isinstance(v, float) else v


def _open(tag, attrs):
    out = [tag]
    for k, v in attrs.items():
        if v is None:
            continue
        name = "class" if k == "cls" else k.replace("_", "-")
        out.append(f"{name}={quoteattr(str(_num(v)))}")
    return "<" + " ".join(out)


def nice_ticks(lo, hi, count=6, integer=False):
    """Round tick values (1, 2 or 5 times a power of ten apart), the first <= lo, the last >= hi;
    whole numbers only with `integer` (steps of a training run)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    if integer:
        raw = max(raw, 1.0)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def log_ticks(lo, hi, base=10):
    """Powers of `base` covering [lo, hi] (both > 0)."""
    first, last = math.floor(math.log(lo, base) + 1e-9), math.ceil(math.log(hi, base) - 1e-9)
    return [base ** e for e in range(first, last + 1)]


def tick_label(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


def line_chart(path, title, series, xlabel, ylabel, logx=None, logy=False, ymin=None, ymax=None,
               width=760, height=460, notes=(), figures=None):
    """Writes a line chart. series: [{"name", "points": [(x, y)...], "dashed", "markers_only",
    "labels": [text per point]}]; logx: None for a linear axis, else the base of a logarithmic one
    (2 or 10); ymin/ymax: None takes the data's range (with a margin) rather than 0 or 1; figures:
    the chart's key numbers (Note [Quoted figures])."""
    left, right, top, bottom = 70, 200, 40, 55 + 14 * len(notes)
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s["points"]]
    ys = [y for s in series for _, y in s["points"]]
    if not xs:
        raise ValueError(f"{path}: no data points")
    x_lo, x_hi = min(xs), max(xs)
    y_lo = min(ys) if ymin is None else ymin
    y_hi = max(ys) if ymax is None else ymax
    if logy:
        yticks = log_ticks(y_lo, y_hi)
    else:
        pad = (y_hi - y_lo) * 0.05 or abs(y_hi) * 0.05 or 1
        yticks = nice_ticks(y_lo - (pad if ymin is None else 0), y_hi + (pad if ymax is None else 0))
    xticks = log_ticks(x_lo, x_hi, logx) if logx else nice_ticks(x_lo, x_hi)
    x_lo, x_hi = min(x_lo, xticks[0]), max(x_hi, xticks[-1])
    y_lo, y_hi = yticks[0], yticks[-1]

    def fx(x):
        if logx:
            return left + plot_w * (math.log(x) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo))
        return left + plot_w * (x - x_lo) / ((x_hi - x_lo) or 1)

    def fy(y):
        if logy:
            return top + plot_h * (1 - (math.log(y) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo)))
        return top + plot_h * (1 - (y - y_lo) / ((y_hi - y_lo) or 1))

    svg = Svg(width, height, title)
    if figures is not None:
        svg.figures(figures)
    svg.text(width / 2, 22, title, size=14, anchor="middle", font_weight="bold")
    for t in xticks:
        svg.line(fx(t), top, fx(t), top + plot_h, stroke="#e4e4e4")
        svg.text(fx(t), top + plot_h + 16, tick_label(t), size=10, anchor="middle")
    for t in yticks:
        svg.line(left, fy(t), left + plot_w, fy(t), stroke="#e4e4e4")
        svg.text(left - 6, fy(t) + 4, tick_label(t), size=10, anchor="end")
    svg.add("rect", x=left, y=top, width=plot_w, height=plot_h, fill="none", stroke="#444")
    svg.text(left + plot_w / 2, top + plot_h + 36, xlabel, anchor="middle")
    svg.text(16, top + plot_h / 2, ylabel, anchor="middle", transform=f"rotate(-90 16 {top + plot_h / 2:.1f})")
    labels = []  # (x, y, text) of labelled points, placed after every series is drawn
    for i, s in enumerate(series):
        colour = s.get("colour", PALETTE[i % len(PALETTE)])
        pts = sorted(s["points"])
        for (x, y), text in zip(s["points"], s.get("labels", [])):
            labels.append((fx(x), fy(y), text))
        svg.open("g", cls="series", data_name=s["name"])
        if not s.get("markers_only"):
            svg.add("polyline", points=" ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in pts), fill="none",
                    stroke=colour, stroke_width=2, stroke_dasharray="6 4" if s.get("dashed") else None)
        if not s.get("no_markers"):
            for x, y in pts:
                svg.add("circle", cx=round(fx(x), 1), cy=round(fy(y), 1), r=3, fill=colour)
        svg.close("g")
        if not s["name"]:  # a second line of an earlier legend entry (a band's other edge)
            continue
        ly = top + 8 + 18 * i
        if s.get("markers_only"):
            svg.add("circle", cx=left + plot_w + 23, cy=ly, r=3, fill=colour)
        else:
            svg.line(left + plot_w + 12, ly, left + plot_w + 34, ly, stroke=colour, width=2,
                     stroke_dasharray="6 4" if s.get("dashed") else None)
        svg.text(left + plot_w + 40, ly + 4, s["name"], size=10, cls="legend")
    place_point_labels(svg, labels, left, top, plot_w, plot_h)
    for i, note in enumerate(notes):
        svg.text(left, height - 10 - 14 * (len(notes) - 1 - i), note, size=10, fill="#555")
    svg.save(path)


def place_point_labels(svg, labels, left, top, plot_w, plot_h, size=9):
    """Each point's label beside it, right of the point (left where it would leave the plot); a
    label that would cover one already placed moves down, with a thin line back to its point."""
    placed = []
    char_w, line_h = size * 0.6, size + 2
    svg.open("g", cls="point-labels")
    for px, py, text in sorted(labels, key=lambda l: (l[1], l[0])):
        w = len(text) * char_w
        x = px + 6 if px + 6 + w <= left + plot_w else px - 6 - w
        y = py + size / 3
        while any(x < bx + bw and bx < x + w and y - line_h < by and by - line_h < y for bx, by, bw in placed):
            y += line_h
        y = min(y, top + plot_h - 2)
        placed.append((x, y, w))
        if abs(y - (py + size / 3)) > 1:
            svg.line(px, py, x if x > px else x + w, y - size / 3, stroke="#999", width=0.5)
        svg.text(x, y, text, size=size, cls="point-label")
    svg.close("g")


# ---- Note [Quoted figures]: the numbers a picture carries, and the docs that quote them.

QUOTE = re.compile(r"(-?\d+(?:\.\d+)?)(\s*)<!-- figure (\S+) (\S+) -->")


def read_figures(path):
    """{key: value} of a picture's <metadata class="figures">; {} when it has none."""
    for e in ET.parse(path).getroot().iter("{http://www.w3.org/2000/svg}metadata"):
        if "figures" in e.get("class", "").split():
            return json.loads(e.text or "{}")
    return {}


def format_like(value, quoted):
    """value written with as many decimals as the quoted number has."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    return f"{value:.{decimals}f}"


def _recorded_run():
    """scripts/recorded_run.py, imported where it is needed: the drawing alone does not need it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import recorded_run
    return recorded_run


def source_figures(pictures, name):
    """The figures of `name`: a picture (NAME.svg) or a recorded run (NAME.txt, recorded_run.py); None
    when there is neither."""
    path = os.path.join(pictures, name + ".svg")
    if os.path.exists(path):
        return read_figures(path)
    run = read_run(pictures, name)
    return None if run is None else _recorded_run().run_figures("\n".join(run))


def read_run(pictures, name):
    """A recorded run's lines (NAME.txt beside the pictures), or None."""
    path = os.path.join(pictures, name + ".txt")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return [line.rstrip() for line in f.read().split("\n")]


def quoted_figures(text, pictures):
    """[(quoted, expected or None, picture, key, why)] for each quote in a document's text."""
    cache, out = {}, []
    for m in QUOTE.finditer(text):
        quoted, picture, key = m.group(1), m.group(3), m.group(4)
        if picture not in cache:
            cache[picture] = source_figures(pictures, picture)
        figures = cache[picture]
        if figures is None:
            out.append((quoted, None, picture, key, f"no picture {picture}.svg or run {picture}.txt"))
        elif not isinstance(figures.get(key), (int, float)):
            out.append((quoted, None, picture, key, f"{picture} has no figure '{key}'"))
        else:
            out.append((quoted, format_like(figures[key], quoted), picture, key, ""))
    return out


def update_quotes(text, pictures):
    """The text with every quoted number rewritten from its picture (quotes of missing figures kept)."""
    def repl(m):
        (_, expected, _, _, _), = quoted_figures(m.group(0), pictures)
        return (expected if expected is not None else m.group(1)) + m.group(0)[len(m.group(1)):]
    return QUOTE.sub(repl, text)


def figures_main(argv):
    import argparse
    p = argparse.ArgumentParser(prog="svg.py figures", description="check or refresh the figures "
                                "documents quote from the pictures (Note [Quoted figures])")
    p.add_argument("docs", nargs="+")
    p.add_argument("--pictures", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "docs", "pictures"))
    p.add_argument("--update", action="store_true", help="rewrite the quoted numbers from the pictures")
    args = p.parse_args(argv)
    bad, total = [], 0
    for doc in args.docs:
        with open(doc) as f:
            text = f.read()
        if args.update:
            new = _recorded_run().update_listings(update_quotes(text, args.pictures),
                                               lambda name: read_run(args.pictures, name))
            if new != text:
                with open(doc, "w") as f:
                    f.write(new)
            text = new
        for quoted, expected, picture, key, why in quoted_figures(text, args.pictures):
            total += 1
            if expected != quoted:
                bad.append(f"{doc}: {quoted} quotes {picture} {key}: " + (why or f"the picture says {expected}"))
        for name, lines in _recorded_run().listings(text):
            total += 1
            run = read_run(args.pictures, name)
            why = f"no run {name}.txt" if run is None else _recorded_run().check_listing(lines, run)
            if why:
                bad.append(f"{doc}: a listing of {name}: {why}")
    for b in bad:
        print("svg.py figures: " + b, file=sys.stderr)
    print(f"svg.py figures: {total - len(bad)} of {total} quoted figures match their pictures")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["figures"]:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(figures_main(sys.argv[2:]))
