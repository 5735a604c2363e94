#!/usr/bin/python3
"""Restarts a failed DDP job from its newest complete checkpoint (issue 51; scripts/train.sh uses it).

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
the fault-injection variables obey (distributed/fault_injection.h). With no restarts left, one line
says so (with the last attempt's status) and the launcher exits with status 1, as torchrun does.
Every attempt runs the same --np ranks.
"""

import argparse
import collections
import json
import os
import re
import shlex
import signal
import struct
import subprocess
import sys
import time

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


def checkpoint_position(path):
    """(global_step, epoch, step_in_epoch) of a checkpoint whose safetensors header and data are all
    there, else None: a missing, truncated or foreign file is never resumed from. The CRC-32 the
    trainer checks on loading covers the rest (nn/checkpoint.h)."""
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
        return int(meta["global_step"]), int(meta["epoch"]), int(meta["step_in_epoch"])
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def newest_checkpoint(path):
    """(file, position) of the newest complete checkpoint among `path` and `path.prev`, or None."""
    found = [(p, checkpoint_position(p)) for p in (path, path + ".prev")]
    found = [(p, pos) for p, pos in found if pos is not None]
    return max(found, key=lambda f: f[1][0]) if found else None


# Why an attempt ended, from its stderr, most telling first: a rank that died of a signal (mpirun
# names it and its host), the rank a collective timeout named (the library's line names the rank
# that did not arrive or respond), then the first error line a rank printed.
KILLED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\)")
TIMEOUT = re.compile(r"^\[rank (\d+)\] [^:]+: .*?(\w+ #\d+) .*?(timed out after \d+ ms).*?"
                     r"(rank \d+ (?:did not arrive|did not respond|has not arrived))(?: \(([^)]*)\))?")
RANK_ERROR = re.compile(r"^\[rank (\d+)\] (\S+): (.*)")


def reason_of(lines, rc):
    for line in lines:
        m = KILLED.search(line)
        if m:
            return f"rank {m[1]} on host {m[2]} exited on signal {m[3]} ({m[4]})"
    for line in lines:
        m = TIMEOUT.search(line)
        if m:
            detail = f": {m[5]}" if m[5] else ""
            return f"{m[4]} at {m[2]} (rank {m[1]}: {m[3]}){detail}"
    for line in lines:
        m = RANK_ERROR.search(line)
        if m and "EMBER_FAULT" not in line:
            return f"rank {m[1]}: {m[3][:160]}"
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


def wait_for_session_end(sid, grace_s=30.0):
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
    """Runs one attempt, passing its stderr through; returns (status, stderr lines kept)."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env, start_new_session=True,
                            text=True, errors="replace")
    forward = lambda signum, frame: os.killpg(proc.pid, signum)  # noqa: E731 (Ctrl-C ends the attempt)
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    kept = collections.deque(maxlen=5000)
    try:
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            kept.append(line.rstrip("\n"))
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    wait_for_session_end(proc.pid)
    return rc, list(kept)


def record(metrics, **fields):
    """Appends a launcher event to the trainer's --metrics file (which the trainer appends to on resume)."""
    if not metrics:
        return
    with open(metrics, "a") as f:
        if metrics.endswith(".jsonl"):
            f.write(json.dumps(fields) + "\n")
        else:
            f.write("# " + " ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()) + "\n")


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--np", type=int, required=True, help="ranks (mpirun -np)")
    parser.add_argument("--max_restarts", type=int, default=None,
                        help="restarts after a failed attempt (default 3 with --checkpoint, else 0)")
    parser.add_argument("--mpirun", default="mpirun", help="the mpirun command and its flags, as one string")
    parser.add_argument("trainer", nargs=argparse.REMAINDER, help="-- TRAINER [ARGS]")
    a = parser.parse_args()
    trainer = a.trainer[1:] if a.trainer[:1] == ["--"] else a.trainer
    if not trainer:
        parser.error("no trainer command after --")
    checkpoint = trainer_flag(trainer, "checkpoint")
    metrics = trainer_flag(trainer, "metrics")
    max_restarts = a.max_restarts if a.max_restarts is not None else (3 if checkpoint else 0)
    if max_restarts < 0:
        parser.error(f"--max_restarts={max_restarts} must be >= 0")
    if max_restarts > 0 and not checkpoint:
        parser.error(f"--max_restarts={max_restarts} needs the trainer's --checkpoint=PATH to restart from")
    attempts = max_restarts + 1
    args = list(trainer[1:])
    for attempt in range(1, attempts + 1):
        env = dict(os.environ, EMBER_RESTART_COUNT=str(attempt - 1))
        cmd = shlex.split(a.mpirun) + ["-np", str(a.np), trainer[0]] + args
        rc, lines = run_attempt(cmd, env)
        if rc == 0:
            if attempt > 1:
                say(f"finished in attempt {attempt} of {attempts} ({attempt - 1} restart(s))")
            return 0
        why = reason_of(lines, rc)
        if attempt == attempts:
            say(f"giving up: attempt {attempt} of {attempts} ended (exit {rc}): {why}; "
                f"no restarts left (--max_restarts={max_restarts})")
            record(metrics, event="gave_up", attempt=attempt, attempts=attempts, exit=rc, reason=why)
            return 1
        newest = newest_checkpoint(checkpoint)
        if newest:
            path, (global_step, epoch, step) = newest
            args = without_flag(args, "resume") + [f"--resume={path}"]
            where = f"global step {global_step} (epoch {epoch + 1}, step {step}) of {path}"
        else:
            global_step = None
            where = "the start (no complete checkpoint yet)" if trainer_flag(args, "resume") is None \
                else f"{trainer_flag(args, 'resume')} as at first"
        say(f"attempt {attempt + 1} of {attempts}: attempt {attempt} ended (exit {rc}): {why}; resuming from {where}")
        record(metrics, event="restart", attempt=attempt + 1, attempts=attempts, exit=rc, reason=why,
               resume_step=global_step)
    return 1


if __name__ == "__main__":
    sys.exit(main())
