"""The hosts a restarting job runs on (scripts/elastic_run.py with --hostfile): which are in, why a
host is left out, and how many ranks each attempt starts where.

A job of --np ranks over an Open MPI hostfile gives each host its share as Open MPI's by-slot
mapping does: the first host's slots fill first, then the next host's. Each attempt runs on the
hosts that are in, each with its own share (one hostfile per attempt, the left-out hosts omitted),
so a host's ranks come and go with it. A host is left out
  - while it is unreachable: `mpirun -np 1 true` on it alone (Open MPI's own launch, over the same
    rsh/ssh agent the job uses) fails or does not return within the probe's time limit; it is
    probed again before every attempt and taken back in once the probe succeeds;
  - for the rest of the run once its ranks were named as the failure of two attempts running (a
    rank killed by a signal, a rank a collective timeout said did not arrive, a daemon mpirun lost).
"""

import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def read_hostfile(path):
    """[(host, slots)] from an Open MPI hostfile ("name [slots=N] [max_slots=M]" lines, # comments)."""
    hosts = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            slots = 1
            for w in words[1:]:
                key, _, value = w.partition("=")
                if key == "slots":
                    if not value.isdigit() or int(value) < 1:
                        raise ValueError(f"{path}:{number}: slots must be a positive integer, got '{value}'")
                    slots = int(value)
            if any(h == words[0] for h, _ in hosts):
                raise ValueError(f"{path}:{number}: host '{words[0]}' is listed twice")
            hosts.append((words[0], slots))
    if not hosts:
        raise ValueError(f"{path}: no hosts")
    return hosts


def shares(hosts, np):
    """Ranks per host for a job of np ranks, by slot as Open MPI maps them: [(host, ranks)]."""
    total = sum(s for _, s in hosts)
    if np > total:
        raise ValueError(f"--np={np} is more than the {total} slot(s) of the hostfile; "
                         "list more slots so every rank has a host it returns to")
    out, left = [], np
    for host, slots in hosts:
        n = min(slots, left)
        left -= n
        if n:
            out.append((host, n))
    return out


# What an attempt's stderr says about the rank or host that failed it (elastic_run.py words its
# reason from the same matches): mpirun's line for a rank that died of a signal, the library's line
# for a collective that timed out (group 4 names the rank that did not arrive or respond), the
# daemon mpirun lost, and the host the library found unreachable.
KILLED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\)")
TIMEOUT = re.compile(r"^\[rank (\d+)\] [^:]+: .*?(\w+ #\d+) .*?(timed out after \d+ ms).*?"
                     r"(rank \d+ (?:did not arrive|did not respond|has not arrived))(?: \(((?:[^()]|\([^()]*\))*)\))?")
LOST_DAEMON = re.compile(r"Remote daemon: \S+ on node (\S+)")
UNREACHABLE_HOST = re.compile(r"its host (\S+) \((\S+)\) cannot be reached")


def missing_rank(timeout):
    """The rank a TIMEOUT match says did not arrive or respond."""
    return int(timeout[4].split()[1])


class HostPool:
    def __init__(self, hosts, np, min_ranks):
        self.share = dict(shares(hosts, np))        # host -> its ranks in the full job
        self.order = [h for h, _ in hosts if h in self.share]
        self.min_ranks = min_ranks
        self.unreachable = {}                       # host -> why the last probe failed
        self.failed_running = {h: [] for h in self.order}  # attempts in a row that named it
        self.retired = set()                        # left out for good (failed two attempts running)

    def in_use(self):
        return [h for h in self.order if h not in self.unreachable and h not in self.retired]

    def ranks(self, hosts=None):
        return sum(self.share[h] for h in (self.in_use() if hosts is None else hosts))

    def host_of_rank(self, rank, hosts):
        for h in hosts:
            if rank < self.share[h]:
                return h
            rank -= self.share[h]
        return None

    def blamed_hosts(self, lines, hosts):
        """The hosts of `hosts` (an attempt's, in rank order) its stderr names as the failure."""
        named = set()
        for line in lines:
            killed, timeout = KILLED.search(line), TIMEOUT.search(line)
            if killed:
                named.add(self.host_of_rank(int(killed[1]), hosts))
            if timeout:
                named.add(self.host_of_rank(missing_rank(timeout), hosts))
            m = UNREACHABLE_HOST.search(line) or LOST_DAEMON.search(line)
            if m:
                named.update(h for h in hosts if h in m.groups())
        named.discard(None)
        return named

    def after_attempt(self, attempt, lines, hosts):
        """Counts the failure against the hosts it names; returns what changed, as phrases."""
        named = self.blamed_hosts(lines, hosts)
        changes = []
        for h in hosts:
            self.failed_running[h] = self.failed_running[h] + [attempt] if h in named else []
            runs = self.failed_running[h]
            if len(runs) >= 2 and h not in self.retired:
                self.retired.add(h)
                changes.append(f"leaving out host {h} (its ranks failed attempts {runs[-2]} and {runs[-1]})")
        return changes

    def probe(self, mpirun, env, timeout_s):
        """Probes every host not retired; returns what changed, as phrases."""
        candidates = [h for h in self.order if h not in self.retired]
        if not candidates:
            return []
        with ThreadPoolExecutor(max_workers=len(candidates)) as pool:
            results = dict(zip(candidates, pool.map(lambda h: probe_host(mpirun, env, h, timeout_s), candidates)))
        changes = []
        for h, failure in results.items():
            if failure and h not in self.unreachable:
                changes.append(f"leaving out host {h} ({failure})")
            elif not failure and h in self.unreachable:
                changes.append(f"taking host {h} back in (reachable again)")
            if failure:
                self.unreachable[h] = failure
            else:
                self.unreachable.pop(h, None)
        return changes

    def write_hostfile(self, directory, attempt):
        """The hostfile of one attempt: the hosts in use, each with its share of slots."""
        path = os.path.join(directory, f"attempt{attempt}.hosts")
        with open(path, "w") as f:
            for h in self.in_use():
                f.write(f"{h} slots={self.share[h]}\n")
        return path


def probe_host(mpirun, env, host, timeout_s):
    """None if `mpirun -np 1 true` on `host` alone succeeds within timeout_s, else why not."""
    with tempfile.NamedTemporaryFile("w", prefix="probe.", suffix=".hosts", delete=False) as f:
        f.write(f"{host} slots=1\n")
    cmd = list(mpirun) + ["--hostfile", f.name, "-np", "1", "true"]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=dict(env, OMPI_MCA_orte_default_hostfile=f.name),
                                start_new_session=True)
        try:
            proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            return f"unreachable: a probe `mpirun -np 1 true` on it alone did not return within {timeout_s:.0f} s"
        if proc.returncode != 0:
            return (f"unreachable: a probe `mpirun -np 1 true` on it alone exited with status {proc.returncode}"
                    f" after {time.monotonic() - start:.1f} s")
        return None
    finally:
        os.unlink(f.name)
