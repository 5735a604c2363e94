#!/usr/bin/env python3
"""The multi-host benchmarks' plots as SVG: the step-time model's data (bench/step_model.sh writes
docs/step_model/*.dat) and bench/cluster_bench.sh's tables (it saves them as
docs/cluster_bench/<experiment>.txt).

    python3 scripts/bench_plots.py [--step_model DIR] [--cluster DIR] -o OUTDIR

Files present decide what is drawn (a QUICK step-model run measures one link and one model; a
cluster_bench experiment that was never run has no table). Standard library only.
"""
import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import PALETTE, Svg, line_chart, nice_ticks, tick_label  # noqa: E402


# ---- step_model's .dat files: a '# name name ...' header line, then whitespace-separated rows.

def read_dat(path):
    """(column names, rows); a quoted first field ("mlp,1gbit,2h") stays one string."""
    names, rows = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                names = names or line.lstrip("# ").split()
                continue
            fields = re.findall(r'"[^"]*"|\S+', line)
            rows.append([f.strip('"') if f.startswith('"') else _number(f) for f in fields])
    return names, rows


def _number(s):
    try:
        return float(s)
    except ValueError:
        return s


def step_model_plots(directory, out_dir):
    written = []
    for path in sorted(glob.glob(os.path.join(directory, "scaling_*.dat"))):
        model = _stem(path, "scaling_")
        names, rows = read_dat(path)
        # Columns: ranks, then <link>_<algorithm>_ms and <link>_<algorithm>_eff pairs.
        series = [{"name": n[:-len("_eff")].replace("gbit_", " Gbit/s, "), "points": [(r[0], r[i]) for r in rows],
                   "dashed": "tree" in n}
                  for i, n in enumerate(names) if n.endswith("_eff")]
        out = os.path.join(out_dir, f"step_model_scaling_{model}.svg")
        line_chart(out, f"{model}: predicted scaling efficiency (compute / step), one rank per host", series,
                   "ranks", "efficiency", logx=2, ymin=0, ymax=1,
                   notes=[f"bench/step_model.py's model, fitted on namespace hosts ({os.path.basename(path)})"])
        written.append(out)
    for path in sorted(glob.glob(os.path.join(directory, "buckets_*.dat"))):
        model = _stem(path, "buckets_")
        names, rows = read_dat(path)
        series = [{"name": n[:-len("_ms")].replace("_p", ", ").replace("gbit", " Gbit/s") + " ranks",
                   "points": [(r[0], r[i]) for r in rows], "dashed": n.startswith("1gbit")}
                  for i, n in enumerate(names) if i > 0]
        out = os.path.join(out_dir, f"step_model_buckets_{model}.svg")
        line_chart(out, f"{model}: predicted step time over the bucket cap (ring allreduce)", series,
                   "bucket cap (MB; the first bucket the same)", "ms per step", logx=10,
                   notes=[f"bench/step_model.py's model ({os.path.basename(path)})"])
        written.append(out)
    for path in sorted(glob.glob(os.path.join(directory, "allreduce_*.dat"))):
        link = _stem(path, "allreduce_")
        _, rows = read_dat(path)
        series = []
        for i, hosts in enumerate(sorted({int(r[1]) for r in rows})):
            mine = [r for r in rows if int(r[1]) == hosts]
            series.append({"name": f"{hosts} hosts, measured", "points": [(r[0], r[2]) for r in mine],
                           "markers_only": True, "colour": PALETTE[i]})
            series.append({"name": f"{hosts} hosts, model", "points": [(r[0], r[3]) for r in mine],
                           "no_markers": True, "colour": PALETTE[i]})
        out = os.path.join(out_dir, f"step_model_allreduce_{link}.svg")
        line_chart(out, f"ember allreduce on {link.replace('_', ' ')} links: measured and the alpha-beta fit",
                   series, "bytes", "ms per allreduce", logx=10, logy=True)
        written.append(out)
    path = os.path.join(directory, "validation.dat")
    if os.path.exists(path):
        written.append(validation_plot(path, os.path.join(out_dir, "step_model_validation.svg")))
    return written


def validation_plot(path, out):
    """Measured against predicted step time, one point per run, with the +-15% band."""
    _, rows = read_dat(path)
    hi = max(max(r[1], r[2]) for r in rows) * 1.1
    diagonal = [(0.0, 0.0), (hi, hi)]
    series = [{"name": "runs (listed below)", "points": [(r[1], r[2]) for r in rows],
               "markers_only": True},
              {"name": "exact", "points": diagonal, "no_markers": True, "colour": "#000000"},
              {"name": "+-15%", "points": [(0.0, 0.0), (hi, hi * 1.15)], "no_markers": True, "dashed": True,
               "colour": "#999999"},
              {"name": "", "points": [(0.0, 0.0), (hi, hi * 0.85)], "no_markers": True, "dashed": True,
               "colour": "#999999"}]
    line_chart(out, "DDP step: measured vs predicted by bench/step_model.py", series, "measured ms per step",
               "predicted ms per step", ymin=0, ymax=hi * 1.15,
               notes=[", ".join(f"{r[0]}: {r[1]:.0f}/{r[2]:.0f}" for r in rows[i:i + 4]) for i in range(0, len(rows), 4)])
    return out


def _stem(path, prefix):
    return os.path.basename(path)[len(prefix):-len(".dat")]


# ---- cluster_bench.sh's tables: a header line starting with 'impl', then one row per run.

def read_cluster_table(path):
    """Rows as dicts keyed by the header's names; the last column (a free-text note) keeps its spaces.
    Rows whose run failed ('-' or 'failed' in a number column) are dropped."""
    header, rows = None, []
    with open(path) as f:
        for line in f:
            if line.startswith("impl "):
                header = line.split()
                continue
            if header is None or not line.strip() or line.startswith("=="):
                continue
            fields = line.split(None, len(header) - 1)
            row = dict(zip(header, fields + [""] * (len(header) - len(fields))))
            row[header[-1]] = row[header[-1]].strip()
            try:
                for k in header[2:-1]:
                    if k not in ("hook",):
                        row[k] = float(row[k])
            except ValueError:
                continue
            rows.append(row)
    if header is None:
        raise SystemExit(f"bench_plots: {path} has no 'impl ...' header line (not a cluster_bench.sh table)")
    return rows


def cluster_plots(directory, out_dir):
    written = []
    path = os.path.join(directory, "scaling.txt")
    if os.path.exists(path):
        rows = read_cluster_table(path)
        keys = sorted({(r["impl"], r["link"]) for r in rows})
        series = [{"name": f"{impl}, {link}", "points": [(r["hosts"], float(r["efficiency"])) for r in rows
                                                        if (r["impl"], r["link"]) == (impl, link)],
                   "dashed": impl != "ember"} for impl, link in keys]
        out = os.path.join(out_dir, "cluster_scaling.svg")
        # A noisy baseline can put a measured efficiency above 1: keep every point inside the frame.
        top = max([1.0] + [y for s in series for _, y in s["points"]])
        line_chart(out, "DDP across namespace hosts: scaling efficiency (measured)", series, "hosts",
                   "efficiency (img/s / (hosts x one process))", logx=2, ymin=0,
                   ymax=1 if top <= 1 else round(top + 0.1, 1),
                   notes=["bench/cluster_bench.sh EXPERIMENT=scaling; hosts share this machine's cores"])
        written.append(out)
    path = os.path.join(directory, "buckets.txt")
    if os.path.exists(path):
        rows = read_cluster_table(path)
        keys = sorted({(r["impl"], r["link"], r["hosts"]) for r in rows})
        series = [{"name": f"{impl}, {link}, {h:g} hosts",
                   "points": [(r["cap_MB"], r["ms/step"]) for r in rows if (r["impl"], r["link"], r["hosts"]) == (impl, link, h)],
                   "dashed": impl != "ember"} for impl, link, h in keys]
        out = os.path.join(out_dir, "cluster_buckets.svg")
        line_chart(out, "DDP across namespace hosts: step time over the bucket cap (measured)", series,
                   "bucket cap (MB; the first bucket the same)", "ms per step", logx=10,
                   notes=["bench/cluster_bench.sh EXPERIMENT=buckets"])
        written.append(out)
    path = os.path.join(directory, "hooks.txt")
    if os.path.exists(path):
        out = os.path.join(out_dir, "cluster_hooks.svg")
        hooks_plot(read_cluster_table(path), out)
        written.append(out)
    return written


def hooks_plot(rows, out, width=760, height=440):
    """Grouped bars: ms per step for each comm hook, a bar per implementation, bytes per step above."""
    hooks = list(dict.fromkeys(r["hook"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    left, top, bottom, right = 70, 50, 70, 150
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks = nice_ticks(0, max(r["ms/step"] for r in rows) * 1.1)
    svg = Svg(width, height, "comm hooks")
    svg.text(width / 2, 22, "DDP comm hooks across namespace hosts: step time and bytes (measured)", size=14,
             anchor="middle", font_weight="bold")
    for t in ticks:
        y = top + plot_h * (1 - t / ticks[-1])
        svg.line(left, y, left + plot_w, y, stroke="#e4e4e4")
        svg.text(left - 6, y + 4, tick_label(t), size=10, anchor="end")
    group_w = plot_w / max(len(hooks), 1)
    bar_w = group_w * 0.8 / max(len(impls), 1)
    for gi, hook in enumerate(hooks):
        gx = left + gi * group_w + group_w * 0.1
        svg.text(gx + group_w * 0.4, top + plot_h + 16, hook, size=11, anchor="middle")
        for ii, impl in enumerate(impls):
            row = next((r for r in rows if r["hook"] == hook and r["impl"] == impl), None)
            if row is None:
                continue
            h = plot_h * row["ms/step"] / ticks[-1]
            x = gx + ii * bar_w
            svg.rect(x, top + plot_h - h, bar_w - 2, h, PALETTE[ii % len(PALETTE)],
                     tooltip=f"{impl} {hook}: {row['ms/step']:g} ms, {row['bytes/step']:g} bytes", cls="bar",
                     data_hook=hook, data_impl=impl)
            svg.text(x + bar_w / 2, top + plot_h - h - 4, f"{row['bytes/step'] / 1e6:.3g} MB", size=9,
                     anchor="middle")
    svg.add("rect", x=left, y=top, width=plot_w, height=plot_h, fill="none", stroke="#444")
    svg.text(16, top + plot_h / 2, "ms per step", anchor="middle", transform=f"rotate(-90 16 {top + plot_h / 2})")
    for ii, impl in enumerate(impls):
        svg.rect(left + plot_w + 14, top + 8 + 18 * ii - 6, 14, 12, PALETTE[ii % len(PALETTE)])
        svg.text(left + plot_w + 34, top + 8 + 18 * ii + 4, impl, size=10, cls="legend")
    svg.text(left, height - 28, "above each bar: bytes handed to collectives per step", size=10, fill="#555")
    svg.text(left, height - 12, "bench/cluster_bench.sh EXPERIMENT=hooks", size=10, fill="#555")
    svg.save(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step_model", help="a directory of bench/step_model.sh's .dat files")
    p.add_argument("--cluster", help="a directory of bench/cluster_bench.sh's tables (scaling.txt, ...)")
    p.add_argument("-o", "--out", required=True, help="the directory the SVGs go to")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    written = []
    if args.step_model:
        written += step_model_plots(args.step_model, args.out)
    if args.cluster and os.path.isdir(args.cluster):
        written += cluster_plots(args.cluster, args.out)
    print(f"bench_plots: wrote {len(written)} plot(s): {' '.join(os.path.basename(w) for w in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
