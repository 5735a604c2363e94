#!/usr/bin/env python3
"""Unit tests of the restarting launcher's host bookkeeping (scripts/elastic_hosts.py) and of its
attempt loop (scripts/elastic_run.py) driven by a stand-in mpirun, so each rule -- a host's share,
who is blamed, two failures running, unreachable and back, --min_ranks, the kept global batch -- is
checked where the real 3-host run (tests/scripts:elastic_cluster_test) shows only one path.

usage: elastic_hosts_test.py SCRIPTS_ELASTIC_RUN_PY   (elastic_hosts.py is its sibling)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest

ELASTIC_RUN = os.path.realpath(sys.argv.pop(1))
sys.path.insert(0, os.path.dirname(ELASTIC_RUN))
import elastic_hosts  # noqa: E402
import elastic_run  # noqa: E402

KILLED = "mpirun noticed that process rank {} with PID 0 on node x exited on signal 9 (Killed)."
TIMED_OUT = ("[rank 0] ddp_resnet: allreduce #40 (4 bytes) timed out after 5000 ms: rank {} did not arrive "
             "(rank {} is unreachable)")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def pool(hosts=(("a", 1), ("b", 1), ("c", 1)), np=3, min_ranks=2):
    return elastic_hosts.HostPool(list(hosts), np, min_ranks)


class Shares(unittest.TestCase):
    def test_slots_fill_in_order(self):
        self.assertEqual(elastic_hosts.shares([("a", 2), ("b", 2), ("c", 2)], 5), [("a", 2), ("b", 2), ("c", 1)])

    def test_more_ranks_than_slots_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"--np=4 is more than the 3 slot\(s\)"):
            elastic_hosts.shares([("a", 1), ("b", 2)], 4)

    def test_hostfile(self):
        with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
            f.write("# the cluster\n10.0.0.1 slots=2\n\n10.0.0.2 max_slots=4 # one slot\n")
        self.assertEqual(elastic_hosts.read_hostfile(f.name), [("10.0.0.1", 2), ("10.0.0.2", 1)])
        write(f.name, "h slots=0\n")
        with self.assertRaisesRegex(ValueError, r":1: slots must be a positive integer, got '0'"):
            elastic_hosts.read_hostfile(f.name)
        os.unlink(f.name)


class Blame(unittest.TestCase):
    def test_rank_named_by_a_signal_or_a_timeout_maps_to_its_host(self):
        p = pool(hosts=(("a", 2), ("b", 2)), np=4)
        self.assertEqual(p.blamed_hosts([KILLED.format(3)], ["a", "b"]), {"b"})
        self.assertEqual(p.blamed_hosts([TIMED_OUT.format(1, 1)], ["a", "b"]), {"a"})
        # With host a left out, rank 1 is b's.
        self.assertEqual(p.blamed_hosts([TIMED_OUT.format(1, 1)], ["b"]), {"b"})

    def test_unreachable_host_named_by_address(self):
        p = pool(hosts=(("10.77.1.1", 1), ("10.77.1.2", 1)), np=2, min_ranks=1)
        line = "rank 1 is unreachable: its host e1h1 (10.77.1.2) cannot be reached from here"
        self.assertEqual(p.blamed_hosts([line], ["10.77.1.1", "10.77.1.2"]), {"10.77.1.2"})

    def test_two_failures_running_retire_a_host_one_does_not(self):
        p = pool()
        self.assertEqual(p.after_attempt(1, [KILLED.format(1)], ["a", "b", "c"]), [])
        self.assertEqual(p.after_attempt(2, [KILLED.format(2)], ["a", "b", "c"]), [])  # c now, b cleared
        self.assertEqual(p.in_use(), ["a", "b", "c"])
        self.assertEqual(p.after_attempt(3, [KILLED.format(2)], ["a", "b", "c"]),
                         ["leaving out host c (its ranks failed attempts 2 and 3)"])
        self.assertEqual(p.in_use(), ["a", "b"])
        self.assertEqual(p.ranks(), 2)


class Reason(unittest.TestCase):
    def test_the_rank_that_did_not_arrive_says_why_itself(self):
        own = "[rank 0] ddp_resnet: save: 'c.ckpt': cannot create a temporary file in 'ref': No such file"
        late = ("[rank 1] ddp_resnet: barrier #38 (0 tensors, 0 elements) on rank 1 of 2 in group default_pg: "
                "barrier timed out after 5000 ms (the group's watchdog timeout): rank 0 did not arrive")
        self.assertEqual(elastic_run.reason_of([late, own], 1),
                         "rank 0: save: 'c.ckpt': cannot create a temporary file in 'ref': No such file")
        self.assertEqual(elastic_run.reason_of([late], 1),
                         "rank 0 did not arrive at barrier #38 (rank 1: timed out after 5000 ms)")

    def test_a_lost_daemon_names_its_host(self):
        lines = ["ORTE has lost communication with a remote daemon.", "  HNP daemon   : [[1,0],0] on node vm",
                 "  Remote daemon: [[1,0],3] on node 10.77.1.3"]
        self.assertEqual(elastic_run.reason_of(lines, 205), "mpirun lost its daemon on host 10.77.1.3 "
                                                            "(Open MPI: lost communication with a remote daemon)")
        self.assertEqual(pool(hosts=(("10.77.1.1", 1), ("10.77.1.3", 1)), np=2, min_ranks=1)
                         .blamed_hosts(lines, ["10.77.1.1", "10.77.1.3"]), {"10.77.1.3"})


def fake_checkpoint(path, global_step, world_size, batch):
    meta = {"format": "ember-train-v3", "global_step": str(global_step), "epoch": "0",
            "step_in_epoch": str(global_step), "world_size": str(world_size), "batch_per_rank": str(batch)}
    header = json.dumps({"__metadata__": meta, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode() + b"\0\0\0\0")


class ResumeArgs(unittest.TestCase):
    def test_global_batch_kept_when_it_divides(self):
        with tempfile.TemporaryDirectory() as d:
            fake_checkpoint(f"{d}/c.ckpt", 14, world_size=3, batch=16)
            args, where, batch, step = elastic_run.resume_args(["--batch=16", "--x"], f"{d}/c.ckpt", 2)
            self.assertEqual(args, ["--x", f"--resume={d}/c.ckpt", "--batch=24"])
            self.assertEqual((batch, step), ("global batch 48 kept (24 per rank)", 14))
            args, _, batch, _ = elastic_run.resume_args(["--batch=16"], f"{d}/c.ckpt", 5)
            self.assertEqual(args, ["--batch=16", f"--resume={d}/c.ckpt"])
            self.assertIn("does not divide by 5 ranks", batch)
            args, _, batch, _ = elastic_run.resume_args(["--batch=16"], f"{d}/c.ckpt", 3)
            self.assertEqual((args, batch), (["--batch=16", f"--resume={d}/c.ckpt"], None))


# A stand-in mpirun: probes (`-np 1 true`) fail for the hosts listed in the file $FAKE_DOWN_FILE; a
# job appends its hostfile's hosts and -np to $FAKE_LOG and fails while $FAKE_FAILURES (a countdown
# file) is above 0, printing $FAKE_FAILURE_LINE and, if $FAKE_DOWN_ON_FAILURE is set, writing it to
# the down file (a link cut, or a host back, while the attempt ran).
FAKE_MPIRUN = textwrap.dedent("""\
    #!/usr/bin/env python3
    import os, sys
    a = sys.argv[1:]
    hosts = [l.split()[0] for l in open(a[a.index("--hostfile") + 1])]
    np = a[a.index("-np") + 1]
    down = os.environ.get("FAKE_DOWN_FILE")
    down = open(down).read().split() if down and os.path.exists(down) else []
    if a[-1] == "true":
        sys.exit(1 if hosts[0] in down else 0)
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(f"{','.join(hosts)} np={np}\\n")
    left = int(open(os.environ["FAKE_FAILURES"]).read())
    if left > 0:
        open(os.environ["FAKE_FAILURES"], "w").write(str(left - 1))
        if "FAKE_DOWN_ON_FAILURE" in os.environ:
            open(os.environ["FAKE_DOWN_FILE"], "w").write(os.environ["FAKE_DOWN_ON_FAILURE"])
        print(os.environ["FAKE_FAILURE_LINE"], file=sys.stderr)
        sys.exit(1)
""")


class Launcher(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.mpirun = f"{self.dir}/mpirun"
        write(self.mpirun, FAKE_MPIRUN)
        os.chmod(self.mpirun, 0o755)
        write(f"{self.dir}/hosts", "a slots=1\nb slots=1\nc slots=1\n")

    def launch(self, failures, line, down="", min_ranks=2, down_on_failure=None, max_restarts=3):
        write(f"{self.dir}/failures", str(failures))
        write(f"{self.dir}/down", down)
        write(f"{self.dir}/log", "")
        env = dict(os.environ, FAKE_LOG=f"{self.dir}/log", FAKE_FAILURES=f"{self.dir}/failures",
                   FAKE_DOWN_FILE=f"{self.dir}/down", FAKE_FAILURE_LINE=line)
        if down_on_failure is not None:
            env["FAKE_DOWN_ON_FAILURE"] = down_on_failure
        fake_checkpoint(f"{self.dir}/c.ckpt", 7, world_size=3, batch=16)
        proc = subprocess.run(
            [sys.executable, ELASTIC_RUN, "--np=3", f"--min_ranks={min_ranks}", f"--hostfile={self.dir}/hosts",
             f"--mpirun={self.mpirun}", f"--max_restarts={max_restarts}", "--", "trainer",
             f"--checkpoint={self.dir}/c.ckpt", "--batch=16"],
            env=env, capture_output=True, text=True, timeout=60)
        return proc.returncode, proc.stderr, read(f"{self.dir}/log").splitlines()

    def test_a_host_cut_off_in_an_attempt_is_left_out_and_the_global_batch_kept(self):
        rc, err, log = self.launch(1, TIMED_OUT.format(2, 2), down_on_failure="c")
        self.assertEqual((rc, log), (0, ["a,b,c np=3", "a,b np=2"]), err)
        self.assertRegex(err, r"attempt 2 of 4: attempt 1 ended \(exit 1\): rank 2 did not arrive at allreduce #40 "
                              r"\(rank 0: timed out after 5000 ms\).*; leaving out host c \(unreachable: .*\); "
                              r"on 2 rank\(s\), hosts a, b, global batch 48 kept \(24 per rank\); resuming from "
                              r"global step 7 \(epoch 1, step 7\) of ")
        self.assertIn("finished in attempt 2 of 4 (1 restart(s)); on 2 rank(s), hosts a, b", err)

    def test_a_failure_that_names_a_host_once_keeps_it(self):
        rc, err, log = self.launch(1, TIMED_OUT.format(2, 2))
        self.assertEqual((rc, log), (0, ["a,b,c np=3", "a,b,c np=3"]), err)

    def test_unreachable_host_left_out_then_taken_back(self):
        # c is down from the start and comes up while attempt 1 fails: attempt 2 runs on all three.
        rc, err, log = self.launch(1, KILLED.format(0), down="c", down_on_failure="")
        self.assertEqual((rc, log), (0, ["a,b np=2", "a,b,c np=3"]), err)
        self.assertIn("attempt 1 of 4: leaving out host c (unreachable: a probe `mpirun -np 1 true` on it alone "
                      "exited with status 1", err)
        self.assertRegex(err, r"attempt 2 of 4: attempt 1 ended \(exit 1\): rank 0 on host x exited on signal 9 "
                              r"\(Killed\); taking host c back in \(reachable again\); on 3 rank\(s\), hosts a, b, c; "
                              r"resuming from global step 7 ")

    def test_host_failing_two_attempts_running_is_left_out_with_its_batch_share(self):
        rc, err, log = self.launch(2, KILLED.format(1))
        self.assertEqual((rc, log), (0, ["a,b,c np=3", "a,b,c np=3", "a,c np=2"]), err)
        self.assertIn("leaving out host b (its ranks failed attempts 1 and 2); on 2 rank(s), hosts a, c, "
                      "global batch 48 kept (24 per rank); resuming from global step 7", err)

    def test_fewer_than_min_ranks_gives_up_with_one_line(self):
        rc, err, log = self.launch(0, "", down="b c")
        self.assertEqual((rc, log), (1, []), err)
        self.assertRegex(err.splitlines()[-1], r"^elastic_run: giving up before attempt 1 of 4: leaving out host b "
                                               r".*; leaving out host c .*; 1 rank\(s\) remain, fewer than "
                                               r"--min_ranks=2$")

    def test_min_ranks_needs_a_hostfile(self):
        proc = subprocess.run([sys.executable, ELASTIC_RUN, "--np=3", "--min_ranks=2", "--", "t", "--checkpoint=c"],
                              env={k: v for k, v in os.environ.items() if k != "OMPI_MCA_orte_default_hostfile"},
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--min_ranks=2 shrinks the job by leaving hosts out, which needs a hostfile", proc.stderr)


if __name__ == "__main__":
    unittest.main()
