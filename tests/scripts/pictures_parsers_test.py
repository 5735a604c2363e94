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

    def test_rank_summary_counts_overlapping_buckets_once(self):
        self.assertEqual(trace_timeline.union_length([(0, 10), (5, 20), (30, 31)]), 21)
        # Iteration 2 of rank 0: backward from 112; finalize at 120 waits 20; the bucket [119, 139)
        # spends 1 of its 20 µs under backward.
        line = trace_timeline.rank_summary(trace_timeline.spans(self.ranks[0][7:14]))
        self.assertEqual(line, "forward 0.01 ms · backward 0.01 ms · finalize_backward waited 0.02 ms · "
                               "1 bucket allreduce(s), 5% of their time under backward")

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

    def test_a_table_without_header_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "scaling.txt", "RESULT failed\n")
            with self.assertRaises(SystemExit):
                bench_plots.read_cluster_table(os.path.join(d, "scaling.txt"))


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
