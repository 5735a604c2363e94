#!/usr/bin/env python3
"""Unit tests of the pictures' parsers and drawing (scripts/trace_timeline.py, bucket_plan.py,
bench_plots.py, svg.py) on tiny hand-made traces and tables, so each rule is checked where the
real runs (tests/scripts:pictures_test) would hide it.

usage: pictures_parsers_test.py SCRIPTS_SVG_PY   (the other modules are its siblings)
"""
import json
import os
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.realpath(sys.argv.pop(1))))
import bench_plots  # noqa: E402
import bucket_plan  # noqa: E402
import merge_traces  # noqa: E402
import recorded_run  # noqa: E402
import svg  # noqa: E402
import trace_timeline  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"


def x(name, ts, dur, tid=0, pid=0, cat="ddp", **args):
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def hook(param, ts, pid=0, nbytes=4):
    return {"name": f"autograd_hook {param}", "cat": "ddp", "ph": "i", "s": "t", "ts": ts, "pid": pid, "tid": 0,
            "args": {"bytes": nbytes}}


def iteration(t, pid):
    """One iteration of a 2-parameter model starting at t: forward, two backward ops with their
    hooks, one bucket's allreduce on the comm thread, finalize (nesting a 'search' span)."""
    return [x("DDP forward", t, 10, pid=pid), x("AddmmBackward", t + 12, 5, pid=pid, cat="autograd"),
            hook("w", t + 17, pid), hook("b", t + 18, pid),
            x("allreduce bucket 0", t + 19, 20, tid=1, pid=pid, param_indices=[0, 1]),
            x("finalize_backward", t + 20, 20, pid=pid), x("search", t + 21, 2, pid=pid)]


def by_class(root, tag, cls):
    return [e for e in root.iter(NS + tag) if cls in e.get("class", "").split()]


class TraceTimelineTest(unittest.TestCase):
    def setUp(self):
        # Rank 1 runs 5 µs behind rank 0; the job trace also holds a forward with no finalize.
        events = iteration(0, 0) + iteration(100, 0) + iteration(5, 1) + iteration(105, 1)
        events.append(x("DDP forward", 200, 10, pid=0))
        self.ranks = {}
        for e in events:
            self.ranks.setdefault(e["pid"], []).append(e)

    def test_iterations_end_at_the_finalize_after_their_forward(self):
        self.assertEqual(trace_timeline.iterations(self.ranks[0]), [(0, 40), (100, 140)])

    def test_the_last_iteration_every_rank_completed_with_a_window_per_rank(self):
        windows, k, count = trace_timeline.select_iteration(self.ranks)
        self.assertEqual((k, count), (2, 2))
        self.assertEqual(windows, {0: (100, 140), 1: (105, 145)})
        windows, k, _ = trace_timeline.select_iteration(self.ranks, 1)
        self.assertEqual(windows[1], (5, 45))
        with self.assertRaises(SystemExit):
            trace_timeline.select_iteration(self.ranks, 3)

    def test_no_complete_iteration_is_an_error(self):
        with self.assertRaises(SystemExit):
            trace_timeline.select_iteration({0: [x("DDP forward", 0, 10)]})

    def test_gpu_stream_spans_get_their_own_lane_one_kind_and_their_bucket_label(self):
        for t, seq in ((100, 7), (105, 8)):
            self.ranks[0].append(x(f"allreduce #{seq} bucket 0 (GPU)", t + 25, 10, tid=2, cat="nccl"))
        self.assertEqual(trace_timeline.kind_of(self.ranks[0][-1]), "allreduce (GPU)")
        self.assertEqual(trace_timeline.label_of(x("allreduce #3 (GPU)", 0, 1)), "#3")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            trace_timeline.draw(self.ranks, out, "test")
            root = ET.parse(out).getroot()
        rank0 = by_class(root, "g", "rank")[0]
        self.assertEqual([l.get("data-lane") for l in by_class(rank0, "g", "lane")], ["compute", "comm", "GPU stream"])
        legend = [t.text for t in by_class(root, "g", "legend")[0].iter(NS + "text")]
        self.assertEqual(legend.count("allreduce (GPU)"), 1)

    def test_comm_wall_exposed_and_overlap_as_ddp_logging_data_defines_them(self):
        self.assertEqual(trace_timeline.union_length([(0, 10), (5, 20), (30, 31)]), 21)
        # Iteration 2 of rank 0: the bucket [119, 139); finalize_backward starts at 120, so 19 of
        # the 20 µs are exposed.
        c = trace_timeline.comm_figures(self.ranks[0], 100, 140)
        self.assertEqual((c["comm_wall_us"], c["exposed_us"]), (20, 19))
        self.assertAlmostEqual(c["overlap"], 0.05)
        # Two buckets overlapping each other count once, and never past the iteration's end.
        events = self.ranks[0] + [x("allreduce bucket 1", 125, 30, tid=1)]
        c = trace_timeline.comm_figures(events, 100, 140)
        self.assertEqual((c["comm_wall_us"], c["exposed_us"]), (21, 20))
        f = trace_timeline.rank_figures(0, self.ranks[0], (100, 140), {}, 95)
        self.assertEqual((f["rank0.comm_wall_ms"], f["rank0.exposed_comm_ms"], f["rank0.overlap_pct"]), (0.02, 0.02, 5))
        self.assertEqual(f["rank0.start_ms"], 0.01)  # 5 µs after the earliest rank's forward
        self.assertEqual(trace_timeline.rank_summary(f, 0), "iteration 0.04 ms · forward 0.01 ms · backward 0.02 ms · "
                                                            "comm_wall 0.02 ms · exposed_comm 0.02 ms · overlap 5%")

    def with_mpi_spans(self):
        """Iteration 2 with the MPI worker's spans: rank 0's starts #7 at 121, rank 1's at 126
        (rank 1 runs 5 µs behind); both complete it at 137."""
        for pid, start, dur in ((0, 121, 16), (1, 126, 11)):
            self.ranks[pid].append(x("allreduce #7 bucket 0 (MPI)", start, dur, tid=3, pid=pid, cat="mpi",
                                     sequence_number=7, label="bucket 0", bytes=8))
        # Iteration 1 has its own collective (#3), which must not be taken for #7.
        self.ranks[0].append(x("allreduce #3 bucket 0 (MPI)", 21, 16, tid=3, pid=0, cat="mpi", sequence_number=3,
                               label="bucket 0", bytes=8))

    def test_a_buckets_time_splits_into_queued_waiting_for_peers_and_transfer(self):
        self.with_mpi_spans()
        windows, _, _ = trace_timeline.select_iteration(self.ranks)
        phases = trace_timeline.collective_phases(self.ranks, windows)
        bucket = {pid: next(e for e in self.ranks[pid] if e["name"] == "allreduce bucket 0" and e["ts"] > 100)
                  for pid in (0, 1)}
        p0, p1 = phases[(0, id(bucket[0]))], phases[(1, id(bucket[1]))]
        self.assertEqual((p0["queued"], p0["waiting"], p0["transfer"]), ((119, 121), (121, 126), (126, 137)))
        self.assertEqual((p0["sequence_number"], p0["last_rank"]), (7, 1))
        self.assertEqual((p1["queued"], p1["waiting"], p1["transfer"]), ((124, 126), (126, 126), (126, 137)))
        self.assertEqual(len(phases), 2)  # iteration 1's bucket spans lie outside the windows
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            info = trace_timeline.draw(self.ranks, out, "test")
            root = ET.parse(out).getroot()
            figures = svg.read_figures(out)
        ranks = by_class(root, "g", "rank")
        self.assertEqual([l.get("data-lane") for l in by_class(ranks[0], "g", "lane")], ["compute", "comm", "MPI worker"])
        self.assertEqual([p.get("data-phase") for p in by_class(ranks[0], "rect", "phase")], ["queued", "waiting", "transfer"])
        self.assertEqual([p.get("data-phase") for p in by_class(ranks[1], "rect", "phase")], ["queued", "transfer"])
        self.assertEqual(len(by_class(ranks[0], "rect", "span")), 6)  # the MPI span is drawn in its lane
        self.assertEqual(figures, info["figures"])
        self.assertEqual((figures["buckets_divided"], figures["buckets_undivided"]), (2, 0))
        self.assertEqual((figures["rank0.bucket0.waiting_ms"], figures["rank1.bucket0.waiting_ms"]), (0.01, 0.0))
        notes = [t.text for t in by_class(root, "text", "note")]
        self.assertEqual(notes, [])

    def test_without_the_backends_spans_a_bucket_stays_whole_and_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            trace_timeline.draw(self.ranks, out, "test")
            root = ET.parse(out).getroot()
            undivided = svg.read_figures(out)["buckets_undivided"]
        self.assertEqual(by_class(root, "rect", "phase"), [])
        notes = [t.text for t in by_class(root, "text", "note")]
        self.assertEqual(len(notes), 1)
        self.assertIn(trace_timeline.NO_BACKEND_START, notes[0])
        self.assertEqual(undivided, 2)

    def test_one_arrow_per_bucket_from_its_last_gradient(self):
        flows = []
        for i, (hook_ts, launch_ts) in enumerate(((117, 119), (118, 119), (121, 125))):
            common = {"name": "gradient -> bucket", "cat": "ddp.flow", "id": i, "pid": 0}
            flows += [dict(common, ph="s", ts=hook_ts, tid=0), dict(common, ph="f", ts=launch_ts, tid=1)]
        pairs = trace_timeline.last_hook_flows(self.ranks[0] + flows, (100, 140))
        self.assertEqual([(s["ts"], f["ts"]) for s, f in pairs], [(118, 119), (121, 125)])
        self.ranks[0].extend(flows)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            trace_timeline.draw(self.ranks, out, "test")
            self.assertEqual(len(by_class(ET.parse(out).getroot(), "path", "flow")), 2)
            trace_timeline.draw(self.ranks, out, "test", flows="none")
            self.assertEqual(len(by_class(ET.parse(out).getroot(), "path", "flow")), 0)

    def test_the_merged_trace_says_how_its_ranks_were_aligned(self):
        with tempfile.TemporaryDirectory() as d:
            for r in (0, 1):
                with open(os.path.join(d, f"ember_trace_rank{r}.json"), "w") as f:
                    json.dump({"traceEvents": [{"name": "ddp constructed", "ph": "i", "ts": 10 + r, "pid": r, "tid": 0},
                                               x("allreduce bucket 0", 20, 5, tid=1, pid=r, param_indices=[0])]}, f)
            out = os.path.join(d, "job.json")
            merge_traces.merge(d, out)
            ranks = trace_timeline.load_job_trace(out)
        self.assertEqual(trace_timeline.alignment(ranks), "several machines: the 'ddp constructed' instants")

    def test_nested_spans_go_one_level_down_and_overlapping_ones_stack(self):
        outer, inner, after = x("finalize_backward", 0, 10), x("search", 2, 3), x("next", 10, 1)
        levels, depth = trace_timeline.assign_levels([inner, outer, after])
        self.assertEqual((levels[id(outer)], levels[id(inner)], levels[id(after)], depth), (0, 1, 0, 2))

    def test_picture_has_a_row_per_rank_and_the_iterations_spans_hooks_and_buckets(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            info = trace_timeline.draw(self.ranks, out, "test")
            root = ET.parse(out).getroot()
        ranks = by_class(root, "g", "rank")
        self.assertEqual([r.get("data-rank") for r in ranks], ["0", "1"])
        for r in ranks:
            self.assertEqual([l.get("data-lane") for l in by_class(r, "g", "lane")], ["compute", "comm"])
            self.assertEqual(len(by_class(r, "rect", "span")), 5)  # forward, op, allreduce, finalize, search
            self.assertEqual(len(by_class(r, "line", "hook")), 2)
        texts = [t.text for t in root.iter(NS + "text")]
        self.assertIn("bucket 0", texts)
        self.assertIn("rank 1", texts)
        self.assertEqual((info["spans"], info["hooks"]), (10, 4))

    def test_a_baseline_pair_shares_one_time_scale(self):
        # --scale_with: the axis holds the longer of the two iterations, whichever picture it is.
        span = trace_timeline.iteration_span(self.ranks)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.svg")
            trace_timeline.draw(self.ranks, out, "test")
            alone = svg.read_figures(out)["axis_ms"]
            trace_timeline.draw(self.ranks, out, "test", span_us=3 * span)
            wide = svg.read_figures(out)["axis_ms"]
            trace_timeline.draw(self.ranks, out, "test", span_us=span / 2)
            narrow = svg.read_figures(out)["axis_ms"]
        self.assertEqual(alone, round(span / 1000, 2))
        self.assertEqual(wide, round(3 * span / 1000, 2))
        self.assertEqual(narrow, alone)  # never shorter than its own iteration


class BucketPlanTest(unittest.TestCase):
    def events(self):
        plan = {"buckets": [{"bytes": 12, "params": ["layer1.0.conv1.weight", "fc.bias"]}]}
        rebuilt = {"buckets": [{"bytes": 4, "params": ["fc.bias"]}, {"bytes": 8, "params": ["layer1.0.conv1.weight"]}]}
        return [{"name": "ddp constructed", "ph": "i", "ts": 1, "pid": 0, "tid": 0, "args": plan},
                hook("fc.bias", 5, nbytes=4), hook("layer1.0.conv1.weight", 6, nbytes=8),
                {"name": "buckets rebuilt", "ph": "i", "ts": 9, "pid": 0, "tid": 0, "args": rebuilt}]

    def test_plans_in_order_with_their_buckets(self):
        plans = bucket_plan.parse_plans(self.events())
        self.assertEqual([p[0] for p in plans], ["ddp constructed", "buckets rebuilt"])
        self.assertEqual([b["params"] for b in plans[1][2]], [["fc.bias"], ["layer1.0.conv1.weight"]])
        self.assertEqual(bucket_plan.param_bytes(self.events()), {"fc.bias": 4, "layer1.0.conv1.weight": 8})

    def test_a_plan_event_without_buckets_or_no_plan_is_an_error(self):
        with self.assertRaises(SystemExit):
            bucket_plan.parse_plans([{"name": "ddp constructed", "ph": "i", "ts": 0, "pid": 0}])
        with self.assertRaises(SystemExit):
            bucket_plan.parse_plans([hook("w", 1)])

    def test_summary_and_groups(self):
        self.assertEqual(bucket_plan.summary(["fc.bias", "fc.weight", "layer3.2.bn2.weight", "layer3.2.conv2.weight",
                                              "layer3.1.bn1.bias"]), "fc · layer3.2 · layer3.1")
        self.assertEqual(bucket_plan.group_of("layer2.1.conv1.weight"), "layer2")
        self.assertEqual(bucket_plan.human_bytes(1 << 20), "1 MiB")
        self.assertEqual(bucket_plan.human_bytes(1050664), "1.002 MiB")  # over a 1 MiB cap: it shows

    def test_caps_are_lines_on_the_rebuilt_plan_and_named_beyond_the_scale(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "p.svg")
            bucket_plan.draw(self.events(), out, "test", caps=(6 / (1 << 20), 25))
            root = ET.parse(out).getroot()
            figures = svg.read_figures(out)
        constructed, rebuilt = by_class(root, "g", "plan")
        self.assertEqual(by_class(constructed, "line", "cap") + by_class(constructed, "text", "cap"), [])
        self.assertEqual(len(by_class(rebuilt, "line", "cap")), 1)  # bucket 0's: 6 bytes, on the scale
        self.assertEqual([t.text for t in by_class(rebuilt, "text", "cap")], ["cap 25 MiB (beyond this scale) ->"])
        self.assertEqual((figures["rebuilt.buckets"], figures["rebuilt.bucket1.params"], figures["cap_mib"]), (2, 1, 25))

    def test_picture_has_a_bar_per_bucket_and_a_segment_per_parameter(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "p.svg")
            bucket_plan.draw(self.events(), out, "test")
            root = ET.parse(out).getroot()
        plans = by_class(root, "g", "plan")
        self.assertEqual([p.get("data-event") for p in plans], ["ddp constructed", "buckets rebuilt"])
        self.assertEqual([len(by_class(p, "g", "bucket")) for p in plans], [1, 2])
        self.assertEqual(len(by_class(plans[0], "rect", "param")), 2)
        widths = [float(r.get("width")) for r in by_class(plans[0], "rect", "param")]
        self.assertAlmostEqual(widths[0], 2 * widths[1], places=1)  # 8 bytes against 4


class BenchPlotsTest(unittest.TestCase):
    def write(self, d, name, text):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)

    def test_dat_files_with_quoted_labels(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "validation.dat", '# label measured_ms predicted_ms\n"mlp,1gbit,2h" 280.40 262.23\n')
            names, rows = bench_plots.read_dat(os.path.join(d, "validation.dat"))
        self.assertEqual(names, ["label", "measured_ms", "predicted_ms"])
        self.assertEqual(rows, [["mlp,1gbit,2h", 280.40, 262.23]])

    def test_cluster_tables_as_printed_failed_runs_dropped(self):
        table = ("== scaling; machine: 2 cores\n   CPU: AMD EPYC\n"
                 "impl   link    hosts    ms/step      img/s efficiency  note\n"
                 "ember  1gbit       1     362.92      176.3      1.000  one process, no DDP (the baseline)\n"
                 "ember  1gbit       2     376.40      340.1      0.965  \n"
                 "torch  1gbit       2          -          -          -  \n"
                 "== after: load average: 0.46\n")
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "scaling.txt", table)
            rows = bench_plots.read_cluster_table(os.path.join(d, "scaling.txt"))
            self.assertEqual([(r["impl"], r["hosts"], r["ms/step"]) for r in rows], [("ember", 1, 362.92), ("ember", 2, 376.40)])
            self.assertEqual(rows[0]["note"], "one process, no DDP (the baseline)")
            self.write(d, "hooks.txt", "impl   link    hosts hook                 ms/step     bytes/step      vs_none\n"
                       "ember  1gbit       2 none                  1500.0       80000000        1.000\n"
                       "ember  1gbit       2 powersgd               300.0         400000        0.200\n")
            self.write(d, "buckets.txt", "impl   link    hosts  cap_MB  buckets    ms/step  overlap\n"
                       "ember  1gbit       2    0.05      100      500.0     0.50\n"
                       "ember  1gbit       2      25        1      600.0     0.10\n")
            written = bench_plots.cluster_plots(d, d)
            self.assertEqual(sorted(os.path.basename(w) for w in written),
                             ["cluster_buckets.svg", "cluster_hooks.svg", "cluster_scaling.svg"])
            root = ET.parse(os.path.join(d, "cluster_hooks.svg")).getroot()
            self.assertEqual([b.get("data-hook") for b in by_class(root, "rect", "bar")], ["none", "powersgd"])
            root = ET.parse(os.path.join(d, "cluster_scaling.svg")).getroot()
            self.assertEqual(len(by_class(root, "g", "series")), 1)

    def test_scaling_plots_name_halving_doubling_and_take_their_range_from_the_data(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "scaling_m.dat", "# ranks 1gbit_ring_ms 1gbit_ring_eff 1gbit_tree_ms 1gbit_tree_eff\n"
                       "8 100 0.99 100 0.995\n256 110 0.96 101 0.99\n")
            self.write(d, "report.txt", "== 3. the links\nlink hosts alpha_us beta_GB/s\n1gbit 2 10.9 0.119 5% 0%\n"
                       "1gbit 4 120.0 0.110 38% 1%\n== 1. compute\n")
            bench_plots.step_model_plots(d, d)
            root = ET.parse(os.path.join(d, "step_model_scaling_m.svg")).getroot()
            figures = svg.read_figures(os.path.join(d, "step_model_scaling_m.svg"))
        names = [g.get("data-name") for g in by_class(root, "g", "series")]
        self.assertEqual(names, ["1 Gbit/s, ring", "1 Gbit/s, halving-doubling"])
        ticks = [float(t.text) for t in root.iter(NS + "text") if t.get("text-anchor") == "end" and
                 t.text.replace(".", "").isdigit()]
        self.assertEqual((min(ticks), max(ticks)), (0.95, 1.0))
        self.assertEqual((figures["1gbit_ring.eff_p256"], figures["1gbit_halving-doubling.ms_p8"]), (0.96, 100))
        self.assertEqual(figures["1gbit.alpha_us"], 10.9)

    def test_validation_points_are_labelled_with_their_runs(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "validation.dat", '# label measured_ms predicted_ms\n"mlp,1gbit,4h,0.25MB" 100 90\n'
                       '"resnet20,1gbit,2h" 200 210\n')
            out = bench_plots.validation_plot(os.path.join(d, "validation.dat"), os.path.join(d, "v.svg"))
            root = ET.parse(out).getroot()
            figures = svg.read_figures(out)
        self.assertEqual(sorted(t.text for t in by_class(root, "text", "point-label")),
                         ["mlp,1gbit,4h,0.25 MiB", "resnet20,1gbit,2h"])
        self.assertEqual((figures["runs"], figures["max_error_pct"], figures["median_error_pct"]), (2, 10.0, 7.5))

    def test_hooks_against_their_own_noop_or_ember_alone(self):
        header = "impl   link    hosts hook                 ms/step     bytes/step      vs_none\n"
        rows = ("ember  1gbit       2 none                  1500.0       80000000        1.000\n"
                "ember  1gbit       2 fp16                  1200.0       40000000        0.800\n"
                "torch  1gbit       2 none                  4000.0       80000000        1.000\n")
        noop = ("ember  1gbit       2 noop                  1000.0              0        0.667\n"
                "torch  1gbit       2 noop                  3600.0              0        0.900\n")
        with tempfile.TemporaryDirectory() as d:
            for table, expected in ((header + rows, {"ember.none.ms": 1500.0, "ember.fp16.ms": 1200.0}),
                                    (header + rows + noop, {"ember.none.overhead_ms": 500.0,
                                                            "ember.fp16.overhead_ms": 200.0,
                                                            "torch.none.overhead_ms": 400.0})):
                self.write(d, "hooks.txt", table)
                out = os.path.join(d, "h.svg")
                bench_plots.hooks_plot(bench_plots.read_cluster_table(os.path.join(d, "hooks.txt")), out)
                figures = svg.read_figures(out)
                self.assertEqual({k: v for k, v in figures.items() if not k.endswith(".mib")}, expected)
                notes = " ".join(t.text for t in by_class(ET.parse(out).getroot(), "text", "note"))
                self.assertEqual("PyTorch not drawn" in notes, "overhead_ms" not in " ".join(expected))

    def test_a_table_without_header_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "scaling.txt", "RESULT failed\n")
            with self.assertRaises(SystemExit):
                bench_plots.read_cluster_table(os.path.join(d, "scaling.txt"))


class QuotedFiguresTest(unittest.TestCase):
    def test_quotes_are_checked_at_their_precision_and_updated_from_the_pictures(self):
        with tempfile.TemporaryDirectory() as d:
            s = svg.Svg(10, 10, "p")
            s.figures({"rank0.comm_wall_ms": 0.4712, "overlap_pct": 71})
            s.save(os.path.join(d, "pic.svg"))
            text = ("wall 0.47<!-- figure pic rank0.comm_wall_ms --> ms, overlap 70<!-- figure pic overlap_pct -->%, "
                    "x 1<!-- figure pic nothing --> and y 2<!-- figure gone overlap_pct -->.")
            got = [(q, e, why) for q, e, _, _, why in svg.quoted_figures(text, d)]
            self.assertEqual(got, [("0.47", "0.47", ""), ("70", "71", ""), ("1", None, "pic has no figure 'nothing'"),
                                   ("2", None, "no picture gone.svg or run gone.txt")])
            self.assertEqual(svg.update_quotes(text, d).split(" and")[0],
                             "wall 0.47<!-- figure pic rank0.comm_wall_ms --> ms, overlap 71<!-- figure pic overlap_pct -->%, "
                             "x 1<!-- figure pic nothing -->")
            doc = os.path.join(d, "doc.md")
            with open(doc, "w") as f:
                f.write(text.split(" x ")[0])
            self.assertEqual(svg.figures_main(["--pictures", d, doc]), 1)
            self.assertEqual(svg.figures_main(["--pictures", d, "--update", doc]), 0)
            self.assertEqual(svg.figures_main(["--pictures", d, doc]), 0)


RUN = """== One iteration (steps 6-12), rank 0's view; times from the start of forward
     0.006 ms  [compute]   DDP forward (0.31 ms)                steps 6-7: DistributedDataParallel::forward
     1.008 ms  [comm]      allreduce bucket 0 (0.95 ms)         step 10: mark_bucket_ready launched it; done on the comm thread
     1.102 ms  [mpi]       allreduce #10 bucket 0 (MPI) (0.80 ms) the MPI worker ran the allreduce: start to end
     1.500 ms  [comm]      allreduce bucket 0 (0.10 ms)         step 10: a second line of one kind
backward 2.16 ms; communication 2.00 ms of wall time (the union of the bucket spans), 0.86 ms of it after the last gradient was ready (finalize waited): overlap 57%
  |grad 0.weight| local, before allreduce       rank 0: 0.089302  rank 1: 0.083841
RESULT max_abs_diff_vs_single=7.451e-09 averaging_error=0.000e+00
[rank 0] iteration 2 (3 buckets): forward 0.36 ms, backward 6.21 ms; communication took 6.05 ms of wall time, 5.66 ms of it after the last gradient was ready (finalize waited), so 6% overlapped backward (the first bucket launched before)"""


class RecordedRunTest(unittest.TestCase):
    def test_a_runs_figures_by_key(self):
        f = recorded_run.run_figures(RUN)
        self.assertEqual(f["listing.allreduce_bucket_0.start_ms"], 1.008)  # the first line of its kind
        self.assertEqual(f["listing.allreduce_bucket_0.dur_ms"], 0.95)
        self.assertEqual(f["listing.allreduce_bucket_0_mpi.start_ms"], 1.102)
        self.assertEqual((f["listing.comm_wall_ms"], f["listing.exposed_comm_ms"], f["listing.overlap_pct"]),
                         (2.00, 0.86, 57))
        self.assertEqual((f["report.iteration"], f["report.backward_ms"], f["report.overlap_pct"]), (2, 6.21, 6))
        self.assertEqual((f["averaging.local.rank0"], f["max_abs_diff"]), (0.089302, 7.451e-09))

    def test_a_listing_is_lines_of_the_run_in_order_and_is_updated_by_shape(self):
        run = RUN.split("\n")
        excerpt = [run[1], run[3]]
        self.assertEqual(recorded_run.check_listing(excerpt, run), "")
        self.assertIn("is not in the run", recorded_run.check_listing([run[3], run[1]], run))
        stale = [line.replace("1.102", "9.999").replace("0.31", "0.42") for line in excerpt]
        self.assertNotEqual(recorded_run.check_listing(stale, run), "")
        # The run's section from the first line's shape to the last's, whatever lies between.
        self.assertEqual(recorded_run.update_listing(stale, run), run[1:4])
        # A single line: the run's next line of its shape.
        self.assertEqual(recorded_run.update_listing(stale[1:], run), [run[3]])
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "walk.txt"), "w") as f:
                f.write(RUN)
            doc = os.path.join(d, "doc.md")
            with open(doc, "w") as f:
                f.write("overlap 50<!-- figure walk listing.overlap_pct -->%\n<!-- listing walk -->\n```\n"
                        + "\n".join(stale) + "\n```\n")
            self.assertEqual(svg.figures_main(["--pictures", d, doc]), 1)
            self.assertEqual(svg.figures_main(["--pictures", d, "--update", doc]), 0)
            self.assertIn("overlap 57<!--", open(doc).read())


class SvgTest(unittest.TestCase):
    def test_ticks_cover_the_range(self):
        ticks = svg.nice_ticks(222.2, 259.3)
        self.assertLessEqual(ticks[0], 222.2)
        self.assertGreaterEqual(ticks[-1], 259.3)
        self.assertEqual(svg.nice_ticks(0, 1, 5), [0, 0.2, 0.4, 0.6, 0.8, 1.0])
        self.assertEqual(svg.log_ticks(0.01, 25), [0.01, 0.1, 1, 10, 100])

    def test_text_is_escaped(self):
        s = svg.Svg(10, 10, "a < b & c")
        s.text(0, 0, "<gradient -> bucket>")
        ET.fromstring(str(s))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
