#!/usr/bin/env python3
"""The multi-host benchmarks' plots as SVG: the step-time model's data (bench/step_model.sh writes
docs/step_model/*.dat) and bench/cluster_bench.sh's tables (it saves them as
docs/cluster_bench/<experiment>.txt).

    python3 scripts/bench_plots.py [--step_model DIR] [--cluster DIR] -o OUTDIR

Files present decide what is drawn (a QUICK step-model run measures one link and one model; a
cluster_bench experiment that was never run has no table). Sizes are MiB (bucket_cap_mb counts
MiB); "halving-doubling" is the step model's second algorithm (its .dat columns call it "tree").

Only numbers that measure the same thing are drawn side by side: PyTorch's raw step times are not
comparable with ember's (its BLAS differs: bench/README.md), so a framework's series is drawn as
an overhead against its own no-op hook (a 'noop' row of the same table) where the table has one,
and otherwise only ember's is drawn, the picture saying why. Each plot carries its key numbers
(Note [Quoted figures] in svg.py). Standard library only.
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


ALGORITHMS = {"ring": "ring", "tree": "halving-doubling"}


def link_name(link):
    """'10gbit' -> '10 Gbit/s', '1gbit_float16' -> '1 Gbit/s float16'."""
    return link.replace("gbit", " Gbit/s").replace("_", " ")


def link_fits(directory):
    """{link: (alpha_us, beta_GB_per_s)} of the 2-host fits in report.txt (bench/step_model.py's
    section 3), which the predictions use; {} without the report."""
    path = os.path.join(directory, "report.txt")
    fits, in_links = {}, False
    if not os.path.exists(path):
        return fits
    with open(path) as f:
        for line in f:
            if line.startswith("== "):
                in_links = line.startswith("== 3.")
                continue
            fields = line.split()
            if in_links and len(fields) >= 4 and fields[1] == "2":
                try:
                    fits[fields[0]] = (float(fields[2]), float(fields[3]))
                except ValueError:
                    pass
    return fits


def step_model_plots(directory, out_dir):
    written = []
    fits = link_fits(directory)
    for path in sorted(glob.glob(os.path.join(directory, "scaling_*.dat"))):
        model = _stem(path, "scaling_")
        names, rows = read_dat(path)
        # Columns: ranks, then <link>_<algorithm>_ms and <link>_<algorithm>_eff pairs.
        series, figures = [], {}
        for i, n in enumerate(names):
            if not n.endswith("_eff"):
                continue
            link, algo = n[:-len("_eff")].rsplit("_", 1)
            series.append({"name": f"{link_name(link)}, {ALGORITHMS.get(algo, algo)}",
                           "points": [(r[0], r[i]) for r in rows], "dashed": algo != "ring"})
            for r in rows:
                if r[0] in (8, 64, 256):
                    figures[f"{link}_{ALGORITHMS.get(algo, algo)}.eff_p{r[0]:g}"] = round(r[i], 3)
                    figures[f"{link}_{ALGORITHMS.get(algo, algo)}.ms_p{r[0]:g}"] = round(r[i - 1], 1)
        for link, (alpha, beta) in fits.items():
            figures[f"{link}.alpha_us"], figures[f"{link}.beta_GBps"] = alpha, beta
        lo = min(y for s in series for _, y in s["points"])
        notes = [f"bench/step_model.py's model, fitted on namespace hosts ({os.path.basename(path)}); "
                 f"the y axis starts at {math_floor(lo):g}, not 0"]
        if fits:
            notes.append("the links' fitted latency: " + ", ".join(
                f"{link_name(l)} {a:g} us" for l, (a, _) in sorted(fits.items()) if "_" not in l) +
                " (the ring pays it 2(p-1) times a bucket)")
        out = os.path.join(out_dir, f"step_model_scaling_{model}.svg")
        line_chart(out, f"{model}: predicted scaling efficiency (compute / step), one rank per host", series,
                   "ranks", "efficiency", logx=2, ymin=math_floor(lo), ymax=1, notes=notes, figures=figures)
        written.append(out)
    for path in sorted(glob.glob(os.path.join(directory, "buckets_*.dat"))):
        model = _stem(path, "buckets_")
        names, rows = read_dat(path)
        series, figures = [], {}
        for i, n in enumerate(names):
            if i == 0:
                continue
            link, ranks = n[:-len("_ms")].split("_p")
            series.append({"name": f"{link_name(link)}, {ranks} ranks", "points": [(r[0], r[i]) for r in rows],
                           "dashed": link == "1gbit"})
            for r in rows:
                figures[f"{link}_p{ranks}.ms_cap{r[0]:g}"] = round(r[i], 1)
        out = os.path.join(out_dir, f"step_model_buckets_{model}.svg")
        line_chart(out, f"{model}: predicted step time over the bucket cap (ring allreduce)", series,
                   "bucket cap (MiB; the first bucket the same)", "ms per step", logx=10,
                   notes=[f"bench/step_model.py's model ({os.path.basename(path)})"], figures=figures)
        written.append(out)
    for path in sorted(glob.glob(os.path.join(directory, "allreduce_*.dat"))):
        link = _stem(path, "allreduce_")
        _, rows = read_dat(path)
        series = []
        for i, hosts in enumerate(sorted({int(r[1]) for r in rows})):
            mine = [r for r in rows if int(r[1]) == hosts]
            series.append({"name": f"{hosts} hosts, measured", "points": [(r[0] / (1 << 20), r[2]) for r in mine],
                           "markers_only": True, "colour": PALETTE[i]})
            series.append({"name": f"{hosts} hosts, model", "points": [(r[0] / (1 << 20), r[3]) for r in mine],
                           "no_markers": True, "colour": PALETTE[i]})
        out = os.path.join(out_dir, f"step_model_allreduce_{link}.svg")
        line_chart(out, f"ember allreduce on {link_name(link)} links: measured and the alpha-beta fit",
                   series, "message (MiB)", "ms per allreduce", logx=10, logy=True,
                   figures={"points": len(rows)})
        written.append(out)
    path = os.path.join(directory, "validation.dat")
    if os.path.exists(path):
        written.append(validation_plot(path, os.path.join(out_dir, "step_model_validation.svg")))
    return written


def math_floor(v, step=0.05):
    """v rounded down to a multiple of step (an axis that starts near the data)."""
    import math
    return round(math.floor(v / step + 1e-9) * step, 10)


def validation_plot(path, out):
    """Measured against predicted step time, one labelled point per run, with the +-15% band."""
    _, rows = read_dat(path)
    hi = max(max(r[1], r[2]) for r in rows) * 1.1
    diagonal = [(0.0, 0.0), (hi, hi)]
    errors = sorted(abs(r[2] / r[1] - 1) for r in rows)
    median = (errors[(len(errors) - 1) // 2] + errors[len(errors) // 2]) / 2
    series = [{"name": "a DDP run (labelled)", "points": [(r[1], r[2]) for r in rows],
               "labels": [re.sub(r"(\d)MB$", r"\1 MiB", r[0]) for r in rows], "markers_only": True},
              {"name": "exact", "points": diagonal, "no_markers": True, "colour": "#000000"},
              {"name": "+-15%", "points": [(0.0, 0.0), (hi / 1.15, hi)], "no_markers": True, "dashed": True,
               "colour": "#999999"},
              {"name": "", "points": [(0.0, 0.0), (hi, hi * 0.85)], "no_markers": True, "dashed": True,
               "colour": "#999999"}]
    figures = {"runs": len(rows), "median_error_pct": round(100 * median, 1), "max_error_pct": round(100 * errors[-1], 1),
               "within_15pct": sum(1 for e in errors if e <= 0.15)}
    line_chart(out, "DDP step: measured vs predicted by bench/step_model.py", series, "measured ms per step",
               "predicted ms per step", ymin=0, ymax=hi, width=900, height=560, figures=figures,
               notes=[f"{len(rows)} runs, median |error| {figures['median_error_pct']:g}%, "
                      f"worst {figures['max_error_pct']:g}%; labels: model, link, hosts, then a hook or a bucket cap "
                      "(MiB) where not the default"])
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


PYTORCH_NOT_COMPARABLE = ["PyTorch not drawn: its raw step times are not comparable with ember's (another BLAS:",
                          "bench/README.md), and this table has no no-op row of its own to subtract"]


def noop_baselines(rows):
    """{(impl, link, hosts): ms/step of its 'noop' hook row}: a framework's step without communication."""
    return {(r["impl"], r["link"], r["hosts"]): r["ms/step"] for r in rows if r.get("hook") == "noop"}


def cluster_plots(directory, out_dir):
    written = []
    path = os.path.join(directory, "scaling.txt")
    if os.path.exists(path):
        rows = read_cluster_table(path)
        keys = sorted({(r["impl"], r["link"]) for r in rows})
        # Each framework against its own one process: comparable across frameworks.
        series = [{"name": f"{impl}, {link_name(link)}", "points": [(r["hosts"], float(r["efficiency"])) for r in rows
                                                                   if (r["impl"], r["link"]) == (impl, link)],
                   "dashed": impl != "ember"} for impl, link in keys]
        figures = {f"{r['impl']}_{r['link']}.eff_h{r['hosts']:g}": round(float(r["efficiency"]), 3) for r in rows}
        out = os.path.join(out_dir, "cluster_scaling.svg")
        # A noisy baseline can put a measured efficiency above 1: keep every point inside the frame.
        top = max([1.0] + [y for s in series for _, y in s["points"]])
        line_chart(out, "DDP across namespace hosts: scaling efficiency (measured)", series, "hosts",
                   "efficiency (img/s / (hosts x one process))", logx=2, ymin=0,
                   ymax=1 if top <= 1 else round(top + 0.1, 1), figures=figures,
                   notes=["bench/cluster_bench.sh EXPERIMENT=scaling; each framework against its own one process; "
                          "hosts share the machine's cores"])
        written.append(out)
    path = os.path.join(directory, "buckets.txt")
    if os.path.exists(path):
        rows = read_cluster_table(path)
        # No framework has a baseline row in this experiment: ember's step times alone.
        drawn = [r for r in rows if r["impl"] == "ember"]
        keys = sorted({(r["link"], r["hosts"]) for r in drawn})
        series = []
        for link, h in keys:
            mine = [r for r in drawn if (r["link"], r["hosts"]) == (link, h)]
            series.append({"name": f"ember, {link_name(link)}, {h:g} hosts", "points": [(r["cap_MB"], r["ms/step"]) for r in mine],
                           "labels": [f"{r['buckets']:g} bucket{'s' if r['buckets'] != 1 else ''}, overlap {r['overlap']}"
                                      for r in mine]})
        figures = {f"ember_{r['link']}_h{r['hosts']:g}.ms_cap{r['cap_MB']:g}": r["ms/step"] for r in drawn}
        notes = ["bench/cluster_bench.sh EXPERIMENT=buckets (first bucket = cap)"]
        if any(r["impl"] != "ember" for r in rows):
            notes += PYTORCH_NOT_COMPARABLE
        out = os.path.join(out_dir, "cluster_buckets.svg")
        line_chart(out, "DDP across namespace hosts: step time over the bucket cap (measured)", series,
                   "bucket cap (MiB; the first bucket the same)", "ms per step", logx=10, notes=notes, figures=figures)
        written.append(out)
    path = os.path.join(directory, "hooks.txt")
    if os.path.exists(path):
        out = os.path.join(out_dir, "cluster_hooks.svg")
        hooks_plot(read_cluster_table(path), out)
        written.append(out)
    return written


def hooks_plot(rows, out, width=760, height=440):
    """Grouped bars per comm hook, a bar per framework: the step time over the framework's own no-op
    hook (its communication overhead) where the table has a noop row, else ember's step time alone;
    the bytes handed to collectives above each bar."""
    noop = noop_baselines(rows)
    overhead = bool(noop)
    if overhead:  # frameworks with their own baseline, each bar its step minus that framework's noop
        rows = [dict(r, value=r["ms/step"] - noop[(r["impl"], r["link"], r["hosts"])]) for r in rows
                if (r["impl"], r["link"], r["hosts"]) in noop and r["hook"] != "noop"]
        dropped = False
    else:
        dropped = any(r["impl"] != "ember" for r in rows)
        rows = [dict(r, value=r["ms/step"]) for r in rows if r["impl"] == "ember"]
    if not rows:
        raise SystemExit(f"bench_plots: {out}: no row to draw")
    hooks = list(dict.fromkeys(r["hook"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    left, top, bottom, right = 70, 50, 98, 150
    plot_w, plot_h = width - left - right, height - top - bottom
    lo = min(0.0, min(r["value"] for r in rows))
    ticks = nice_ticks(lo, max(r["value"] for r in rows) * 1.1)
    span = ticks[-1] - ticks[0]

    def fy(v):
        return top + plot_h * (1 - (v - ticks[0]) / span)

    what = "overhead over the same framework's noop hook" if overhead else "ember's step time"
    svg = Svg(width, height, "comm hooks")
    svg.figures({f"{r['impl']}.{r['hook']}.{'overhead_ms' if overhead else 'ms'}": round(r["value"], 1) for r in rows} |
                {f"{r['impl']}.{r['hook']}.mib": round(r["bytes/step"] / (1 << 20), 1) for r in rows})
    svg.text(width / 2, 22, f"DDP comm hooks, 2 namespace hosts: {what} (measured)", size=13,
             anchor="middle", font_weight="bold")
    for t in ticks:
        svg.line(left, fy(t), left + plot_w, fy(t), stroke="#e4e4e4")
        svg.text(left - 6, fy(t) + 4, tick_label(t), size=10, anchor="end")
    group_w = plot_w / max(len(hooks), 1)
    bar_w = group_w * 0.8 / max(len(impls), 1)
    for gi, hook in enumerate(hooks):
        gx = left + gi * group_w + group_w * 0.1
        svg.text(gx + group_w * 0.4, top + plot_h + 16, hook, size=11, anchor="middle")
        for ii, impl in enumerate(impls):
            row = next((r for r in rows if r["hook"] == hook and r["impl"] == impl), None)
            if row is None:
                continue
            y0, y1 = fy(max(row["value"], 0)), fy(min(row["value"], 0))
            x = gx + ii * bar_w
            svg.rect(x, y0, bar_w - 2, y1 - y0, PALETTE[ii % len(PALETTE)],
                     tooltip=f"{impl} {hook}: {row['value']:g} ms, {row['bytes/step']:g} bytes", cls="bar",
                     data_hook=hook, data_impl=impl)
            svg.text(x + bar_w / 2, y0 - 4, f"{row['bytes/step'] / (1 << 20):.3g} MiB", size=9, anchor="middle")
    svg.add("rect", x=left, y=top, width=plot_w, height=plot_h, fill="none", stroke="#444")
    svg.text(16, top + plot_h / 2, "ms per step" + (" over noop" if overhead else ""), anchor="middle",
             transform=f"rotate(-90 16 {top + plot_h / 2})")
    for ii, impl in enumerate(impls):
        svg.rect(left + plot_w + 14, top + 8 + 18 * ii - 6, 14, 12, PALETTE[ii % len(PALETTE)])
        svg.text(left + plot_w + 34, top + 8 + 18 * ii + 4, impl, size=10, cls="legend")
    notes = ["above each bar: MiB handed to collectives per step", "bench/cluster_bench.sh EXPERIMENT=hooks" +
             ("" if overhead else " (HOOKS=\"noop none ...\" adds the baseline that makes frameworks comparable)")]
    if dropped:
        notes += PYTORCH_NOT_COMPARABLE
    for i, note in enumerate(notes):
        svg.text(left, height - 12 - 14 * (len(notes) - 1 - i), note, size=10, fill="#555", cls="note")
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
