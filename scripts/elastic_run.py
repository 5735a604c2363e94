#!/usr/bin/python3
"""Restarts a failed DDP job from its newest complete checkpoint.

    scripts/elastic_run.py --np=2 --max_restarts=3 [--mpirun="mpirun --bind-to none"] \\
        -- bazel-bin/examples/ddp_resnet --checkpoint=c.ckpt [--metrics=m.csv] [trainer flags]

Each attempt is one `mpirun -np N TRAINER ...` in a session of its own. When it fails (non-zero exit:
a rank killed, a collective timed out, any error), Open MPI's mpirun has already ended every rank;
the launcher still checks that no process of the attempt's session is left (and kills and names any
that is), then starts the next attempt with --resume= the newest checkpoint that reads back whole
(the trainer's file or the one it kept before it, "<path>.prev"). Each restart prints one line

    elastic_run: attempt 2 of 4: attempt 1 ended (exit 137): rank 1 on host h1 exited on signal 9 (Killed); resuming from global step 14 (epoch 1, step 14) of c.ckpt

and adds a record to the trainer's --metrics file ("# restart ..." in a CSV, {"event": "restart", ...}
in a JSONL file). The attempt number goes to the trainer in EMBER_RESTART_COUNT (0 first), which
the fault-injection variables obey (distributed/diagnostics/fault_injection.h). With no restarts left, one line
says so (with the last attempt's status) and the launcher exits with status 1, as torchrun does.

With a hostfile (--hostfile, or the one scripts/cluster.sh gives Open MPI) and --min_ranks=M below
--np, the job shrinks and grows with its hosts (scripts/elastic_hosts.py): before each attempt every
host is probed with Open MPI's own launch (`mpirun -np 1 true` on it alone); a host that does not
answer, or whose ranks failed two attempts running, is left out, and the attempt runs on the rest
(each host keeps its share of ranks) while at least M ranks remain. A host that answers again is
taken back in at the next restart. When the world size changes, the global batch of the checkpoint
is kept where it divides by the new rank count (--batch is set to its share), so the epoch goes on at
the same step with the same samples per step; the trainer's resume says what it reset.
"""

import argparse
import collections
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

import elastic_hosts

PROG = "elastic_run"


def say(text):
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def trainer_flag(args, name):
    """The value of --name=V or --name V in the trainer's arguments (the last one), or None."""
    value = None
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            value = a.split("=", 1)[1]
        elif a == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
    return value


def without_flag(args, name):
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a.startswith(f"--{name}="):
            continue
        elif a == f"--{name}":
            skip = i + 1 < len(args)
        else:
            out.append(a)
    return out


Position = collections.namedtuple("Position", "global_step epoch step world_size batch")


def checkpoint_position(path):
    """The Position of a checkpoint whose safetensors header and data are all there, else None: a
    missing, truncated or foreign file is never resumed from. The CRC-32 the trainer checks on
    loading covers the rest (nn/checkpoint.h)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                return None
            header = json.loads(f.read(n))
        meta = header.get("__metadata__", {})
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        if not meta.get("format", "").startswith("ember-train") or 8 + n + end > size:
            return None
        return Position(*(int(meta[k]) for k in ("global_step", "epoch", "step_in_epoch", "world_size",
                                                 "batch_per_rank")))
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def newest_checkpoint(path):
    """(file, Position) of the newest complete checkpoint among `path` and `path.prev`, or None."""
    found = [(p, checkpoint_position(p)) for p in (path, path + ".prev")]
    found = [(p, pos) for p, pos in found if pos is not None]
    return max(found, key=lambda f: f[1].global_step) if found else None


# Why an attempt ended, from its stderr, most telling first: a rank that died of a signal (mpirun
# names it and its host), the rank a collective timeout named (the library's line names the rank
# that did not arrive or respond), the first error line a rank printed, then the host whose Open
# MPI daemon mpirun lost (a link cut before any rank's timeout ran out).
KILLED, TIMEOUT = elastic_hosts.KILLED, elastic_hosts.TIMEOUT
RANK_ERROR = re.compile(r"^\[rank (\d+)\] (\S+): (.*)")


def reason_of(lines, rc):
    for line in lines:
        m = KILLED.search(line)
        if m:
            return f"rank {m[1]} on host {m[2]} exited on signal {m[3]} ({m[4]})"
    errors = [m for m in map(RANK_ERROR.search, lines) if m and "EMBER_FAULT" not in m[0]]
    for line in lines:
        m = TIMEOUT.search(line)
        if m:
            # The rank that did not arrive may have said why itself (an error, not a timeout of its own).
            missing = str(elastic_hosts.missing_rank(m))
            own = [e for e in errors if e[1] == missing and not TIMEOUT.search(e[0])]
            if own:
                return f"rank {missing}: {own[0][3][:160]}"
            detail = f": {m[5]}" if m[5] else ""
            return f"{m[4]} at {m[2]} (rank {m[1]}: {m[3]}){detail}"
    if errors:
        return f"rank {errors[0][1]}: {errors[0][3][:160]}"
    for line in lines:
        m = elastic_hosts.LOST_DAEMON.search(line)
        if m:
            return f"mpirun lost its daemon on host {m[1]} (Open MPI: lost communication with a remote daemon)"
    return f"mpirun exited with status {rc}"


def session_processes(sid):
    """PIDs of the live processes in session `sid` (from /proc; zombies count as ended)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


def wait_for_session_end(sid, grace_s=10.0):
    """Waits until no process of the attempt is left; kills and names any still there after grace_s."""
    deadline = time.monotonic() + grace_s
    while True:
        left = session_processes(sid)
        if not left:
            return
        if time.monotonic() > deadline:
            say(f"{len(left)} process(es) of the attempt outlived mpirun by {grace_s:.0f} s; killing {left}")
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace_s
        time.sleep(0.2)


def run_attempt(cmd, env):
    """Runs one attempt, passing its stderr through; returns (status, stderr lines kept). The attempt
    ends when mpirun does and no process of its session is left: an Open MPI daemon cut off from
    mpirun may outlive it, holding the stderr pipe open, so the pipe is read beside the wait."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env, start_new_session=True,
                            text=True, errors="replace")
    forward = lambda signum, frame: os.killpg(proc.pid, signum)  # noqa: E731 (Ctrl-C ends the attempt)
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    kept = collections.deque(maxlen=5000)

    def pass_through():
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            kept.append(line.rstrip("\n"))

    reader = threading.Thread(target=pass_through, daemon=True)
    reader.start()
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    wait_for_session_end(proc.pid)
    reader.join(timeout=5.0)
    return rc, list(kept)


def record(metrics, **fields):
    """Appends a launcher event to the trainer's --metrics file (which the trainer appends to on resume)."""
    if not metrics:
        return
    try:
        with open(metrics, "a") as f:
            if metrics.endswith(".jsonl"):
                f.write(json.dumps(fields) + "\n")
            else:
                f.write("# " + " ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()) + "\n")
    except OSError as e:
        say(f"cannot add the {fields['event']} record to the metrics file '{metrics}': {e.strerror}")


def parse_args():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--np", type=int, required=True, help="ranks (mpirun -np)")
    parser.add_argument("--max_restarts", type=int, default=None,
                        help="restarts after a failed attempt (default 3 with --checkpoint, else 0)")
    parser.add_argument("--mpirun", default="mpirun", help="the mpirun command and its flags, as one string")
    parser.add_argument("--hostfile", default=os.environ.get("OMPI_MCA_orte_default_hostfile"),
                        help="Open MPI hostfile of the job's hosts (default: $OMPI_MCA_orte_default_hostfile, "
                             "which scripts/cluster.sh sets); without one every attempt runs --np ranks")
    parser.add_argument("--min_ranks", type=int, default=None,
                        help="fewest ranks the job goes on with when hosts are left out (default --np: never shrink)")
    parser.add_argument("--probe_timeout", type=float, default=20.0,
                        help="seconds a host's probe may take before the host counts as unreachable")
    parser.add_argument("trainer", nargs=argparse.REMAINDER, help="-- TRAINER [ARGS]")
    a = parser.parse_args()
    a.trainer = a.trainer[1:] if a.trainer[:1] == ["--"] else a.trainer
    if not a.trainer:
        parser.error("no trainer command after --")
    a.checkpoint = trainer_flag(a.trainer, "checkpoint")
    a.metrics = trainer_flag(a.trainer, "metrics")
    if a.max_restarts is None:
        a.max_restarts = 3 if a.checkpoint else 0
    if a.max_restarts < 0:
        parser.error(f"--max_restarts={a.max_restarts} must be >= 0")
    if a.max_restarts > 0 and not a.checkpoint:
        parser.error(f"--max_restarts={a.max_restarts} needs the trainer's --checkpoint=PATH to restart from")
    if a.min_ranks is None:
        a.min_ranks = a.np
    if not 1 <= a.min_ranks <= a.np:
        parser.error(f"--min_ranks={a.min_ranks} must be between 1 and --np={a.np}")
    if a.min_ranks < a.np and not a.hostfile:
        parser.error(f"--min_ranks={a.min_ranks} shrinks the job by leaving hosts out, which needs a hostfile "
                     "(--hostfile, or scripts/cluster.sh's)")
    return a


def resume_args(base, checkpoint, ranks):
    """The trainer's arguments resuming from the newest complete checkpoint at `ranks` ranks, and
    phrases for the restart line: where it resumes, and the batch when the world size changed."""
    newest = newest_checkpoint(checkpoint)
    if not newest:
        where = "the start (no complete checkpoint yet)" if trainer_flag(base, "resume") is None \
            else f"{trainer_flag(base, 'resume')} as at first"
        return base, where, None, None
    path, pos = newest
    args = without_flag(base, "resume") + [f"--resume={path}"]
    batch = None
    if pos.world_size != ranks:
        total = pos.world_size * pos.batch
        if total % ranks == 0:
            args = without_flag(args, "batch") + [f"--batch={total // ranks}"]
            batch = f"global batch {total} kept ({total // ranks} per rank)"
        else:
            batch = f"global batch {total} does not divide by {ranks} ranks: the trainer's batch per rank is used"
    return args, f"global step {pos.global_step} (epoch {pos.epoch + 1}, step {pos.step}) of {path}", \
        batch, pos.global_step


def main():
    a = parse_args()
    workdir = tempfile.mkdtemp(prefix="elastic_run.")
    try:
        return run_attempts(a, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_attempts(a, workdir):
    attempts = a.max_restarts + 1
    mpirun = shlex.split(a.mpirun)
    pool = elastic_hosts.HostPool(elastic_hosts.read_hostfile(a.hostfile), a.np, a.min_ranks) if a.hostfile else None
    base = list(a.trainer[1:])
    args, ended, changes = base, None, []
    for attempt in range(1, attempts + 1):
        env = dict(os.environ, EMBER_RESTART_COUNT=str(attempt - 1))
        hosts_flags, ranks, on = [], a.np, ""
        if pool:
            changes += pool.probe(mpirun, env, a.probe_timeout)
            hosts, ranks = pool.in_use(), pool.ranks()
            on = f"; on {ranks} rank(s), hosts {', '.join(hosts)}"
            if ranks < a.min_ranks:
                say(f"giving up before attempt {attempt} of {attempts}: {'; '.join(changes)}; "
                    f"{ranks} rank(s) remain, fewer than --min_ranks={a.min_ranks}")
                record(a.metrics, event="gave_up", attempt=attempt, attempts=attempts, ranks=ranks, reason="; ".join(changes))
                return 1
            hostfile = pool.write_hostfile(workdir, attempt)
            hosts_flags = ["--hostfile", hostfile]
            env["OMPI_MCA_orte_default_hostfile"] = hostfile
        if ended:
            args, where, batch, step = resume_args(base, a.checkpoint, ranks)
            rc, why = ended
            say(f"attempt {attempt} of {attempts}: attempt {attempt - 1} ended (exit {rc}): {why}"
                + "".join(f"; {c}" for c in changes) + on + (f", {batch}" if batch else "")
                + f"; resuming from {where}")
            record(a.metrics, event="restart", attempt=attempt, attempts=attempts, exit=rc, reason=why,
                   resume_step=step, **({"ranks": ranks, "hosts": hosts, "host_changes": changes} if pool else {}))
        elif changes:
            say(f"attempt 1 of {attempts}: {'; '.join(changes)}{on}")
        changes = []
        cmd = mpirun + hosts_flags + ["-np", str(ranks), a.trainer[0]] + args
        rc, lines = run_attempt(cmd, env)
        if rc == 0:
            if attempt > 1:
                say(f"finished in attempt {attempt} of {attempts} ({attempt - 1} restart(s)){on}")
            return 0
        why = reason_of(lines, rc)
        if pool:
            changes = pool.after_attempt(attempt, lines, hosts)
        if attempt == attempts:
            say(f"giving up: attempt {attempt} of {attempts} ended (exit {rc}): {why}; "
                f"no restarts left (--max_restarts={a.max_restarts})")
            record(a.metrics, event="gave_up", attempt=attempt, attempts=attempts, exit=rc, reason=why)
            return 1
        ended = (rc, why)
    return 1


if __name__ == "__main__":
    sys.exit(main())
