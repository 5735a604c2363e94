#!/usr/bin/env python3
"""DDP step-time model: predicts a DDP step from a 1-rank trace and an alpha-beta link.

    python3 bench/step_model.py report MEASUREMENTS_DIR [--out DIR] [--max_error 0.15]
                                          # what bench/step_model.sh runs; exit 1 above max_error
    python3 bench/step_model.py selftest

The model, one named function per step (the same steps as docs/design.md's DDP iteration):
  1. compute_profile: ember's trace of one rank (EMBER_DDP_TRACE) gives a step's computation
     (forward start to the next forward start), and for every gradient the moment its
     AccumulateGrad hook fired and its bytes. Where several ranks share this machine's cores, the
     profile is stretched by the no_sync step time measured there over no_sync on one rank alone
     (`scale`).
  2. rebuild_buckets: gradients in ready order, closed when a bucket reaches its limit, the first
     at first_bucket_bytes and the rest at the cap (DDP's rebuild after the first iteration).
  3. allreduce_seconds: an allreduce of n bytes on p ranks costs alpha-beta time, ring
     2(p-1) a + 2(p-1)/p n b, or for the tree (Rabenseifner's halving-doubling) 2 log2(p) a +
     2(p-1)/p n b; a and b fitted to ember's allreduce timings on the link (fit_alpha_beta).
  4. simulate_step: buckets are reduced one after another (they launch in order), each once it is
     ready and the previous one is done; finalize_backward waits for the last. A hook scales the
     bytes (fp16/bf16: 1/2; PowerSGD: what its 1-rank run handed to collectives) and may pay the
     latency of several allreduces per bucket (PowerSGD: 3); what it computes is taken per byte
     from a 1-rank trace with the same hook (a bucket's span there).
  5. step time = the profile's compute + the communication left over when backward ends; overlap
     = the share of communication time that ran before backward ended.
Standard library only, so it runs wherever python3 does.
"""
import json
import math
import os
import re
import statistics
import sys

# ---- 1. the compute profile ---------------------------------------------------------------------


def compute_profile(trace_path, skip=2):
    """From a 1-rank trace: step_ms (median forward-to-forward), backward_end_ms (finalize_backward's
    start) and params: [(ready_ms, bytes)] in ready order, each a median over the steps after `skip`
    (the first iteration uses DDP's initial buckets, the second rebuilds them)."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    starts = sorted(e["ts"] for e in events if e["name"] == "DDP forward")
    finals = sorted(e["ts"] for e in events if e["name"] == "finalize_backward")
    hooks = [e for e in events if e["name"].startswith("autograd_hook ")]
    steps, ends, ready = [], [], {}
    sizes = {}
    for k in range(skip, len(starts) - 1):
        t0, t1 = starts[k], starts[k + 1]
        steps.append((t1 - t0) / 1000.0)
        ends += [(t - t0) / 1000.0 for t in finals if t0 <= t < t1][:1]
        for h in hooks:
            if t0 <= h["ts"] < t1:
                i = h["args"]["param_index"]
                sizes[i] = h["args"]["bytes"]
                ready.setdefault(i, []).append((h["ts"] - t0) / 1000.0)
    if not steps:
        raise SystemExit(f"step_model: {trace_path} has fewer than {skip + 2} DDP forwards")
    params = sorted((statistics.median(v), sizes[i]) for i, v in ready.items())
    # At world 1 a bucket's "allreduce" moves nothing: its span is what the hook computes (fp16's
    # casts, PowerSGD's matrices) and the backend's queue, per byte of bucket -- per step, then the
    # median over the steps like the figures above (a step whose comm thread waited for a core on a
    # shared machine would otherwise set the rate).
    spans = [e for e in events if e["name"].startswith("allreduce bucket ")]
    rates = []
    for k in range(skip, len(starts) - 1):
        t0, t1 = starts[k], starts[k + 1]
        in_step = [e for e in spans if t0 <= e["ts"] < t1]
        step_bytes = sum(e["args"].get("bytes", 0) for e in in_step)
        if step_bytes:
            rates.append(sum(e["dur"] for e in in_step) / 1000.0 / step_bytes)
    hook_ms_per_byte = statistics.median(rates) if rates else 0.0
    # What finalize_backward waited at world 1 for the last span (a hook still computing) is in the
    # step above and again in the simulated reduction: simulate_step takes it out of the compute.
    waits = []
    for k in range(skip, len(starts) - 1):
        t0, t1 = starts[k], starts[k + 1]
        final = [t for t in finals if t0 <= t < t1][:1]
        span_ends = [e["ts"] + e["dur"] for e in spans if t0 <= e["ts"] < t1]
        if final and span_ends:
            waits.append(max(0.0, (max(span_ends) - final[0]) / 1000.0))
    return {"step_ms": statistics.median(steps), "backward_end_ms": statistics.median(ends), "params": params,
            "hook_ms_per_byte": hook_ms_per_byte, "world1_wait_ms": statistics.median(waits) if waits else 0.0}


# ---- 2. buckets ---------------------------------------------------------------------------------


def rebuild_buckets(params, first_bytes, cap_bytes):
    """[(ready_ms, bytes)] per bucket, in launch order: DDP's rebuild (compute_bucket_assignment
    with limits [first, cap] over the gradients in ready order). A bucket is ready with its last
    gradient, and never before the bucket launched ahead of it."""
    buckets, size, ready, limit = [], 0, 0.0, first_bytes
    for t, b in params:
        size += b
        ready = max(ready, t)
        if size >= limit:
            buckets.append((ready, size))
            size, limit = 0, cap_bytes
    if size:
        buckets.append((ready, size))
    return buckets


# ---- 3. the link --------------------------------------------------------------------------------


def allreduce_seconds(n_bytes, p, alpha, beta, algo="ring", rounds=1):
    """`rounds` allreduces (a hook's several collectives per bucket) moving n_bytes in all."""
    if p <= 1:
        return 0.0
    bandwidth = 2.0 * (p - 1) / p * n_bytes * beta
    if algo == "ring":
        return rounds * 2.0 * (p - 1) * alpha + bandwidth
    return rounds * 2.0 * math.log2(p) * alpha + bandwidth  # halving-doubling (a "tree" of log p rounds)


def fit_alpha_beta(samples, large_bytes=1 << 20):
    """a, b of t = 2(p-1) a + 2(p-1)/p n b over (n_bytes, p, seconds): both by least squares on
    relative error over every size, then b again by least squares on absolute error over the
    messages of at least large_bytes with a fixed -- latency from all sizes, bandwidth where it
    dominates (gradient buckets are megabytes; a relative fit leans on the small messages)."""
    s11 = s12 = s22 = r1 = r2 = 0.0
    for n, p, t in samples:
        x1, x2 = 2.0 * (p - 1) / t, 2.0 * (p - 1) / p * n / t
        s11, s12, s22 = s11 + x1 * x1, s12 + x1 * x2, s22 + x2 * x2
        r1, r2 = r1 + x1, r2 + x2
    det = s11 * s22 - s12 * s12
    alpha, beta = max((r1 * s22 - r2 * s12) / det, 0.0), (s11 * r2 - s12 * r1) / det
    large = [(2.0 * (p - 1) / p * n, t - 2.0 * (p - 1) * alpha) for n, p, t in samples if n >= large_bytes]
    if large:
        beta = sum(x * y for x, y in large) / sum(x * x for x, _ in large)
    return alpha, beta


def parse_allreduce_table(text, p):
    """bench/allreduce_bench's table: (n_bytes, p, seconds) from the size and ember_us columns."""
    samples = []
    for line in text.splitlines():
        m = re.match(r"^(\d+) (KiB|MiB)\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s", line)
        if m:
            n = int(m.group(1)) << (10 if m.group(2) == "KiB" else 20)
            samples.append((n, p, float(m.group(3)) * 1e-6))
    return samples


# ---- 4. one step --------------------------------------------------------------------------------


def simulate_step(profile, p, alpha, beta, cap_bytes, first_bytes, scale=1.0, byte_factor=1.0,
                  allreduces_per_bucket=1, algo="ring"):
    """step_ms, comm_ms (sum of bucket reductions), exposed_ms (waited for after backward) and
    overlap for `profile` stretched by `scale`, on p ranks of the link (alpha, beta)."""
    compute_ms = (profile["step_ms"] - profile.get("world1_wait_ms", 0.0)) * scale
    backward_end = profile["backward_end_ms"] * scale
    free_at, comm_ms, before_end = 0.0, 0.0, 0.0
    for ready, size in rebuild_buckets(profile["params"], first_bytes, cap_bytes):
        start = max(ready * scale, free_at)
        duration = (1000.0 * allreduce_seconds(size * byte_factor, p, alpha, beta, algo, allreduces_per_bucket) +
                    profile.get("hook_ms_per_byte", 0.0) * size * scale)
        free_at = start + duration
        comm_ms += duration
        before_end += max(0.0, min(free_at, backward_end) - start)
    exposed = max(0.0, free_at - backward_end)
    return {"step_ms": compute_ms + exposed, "comm_ms": comm_ms, "exposed_ms": exposed,
            "overlap": before_end / comm_ms if comm_ms > 0 else 0.0}


# ---- the report over bench/step_model.sh's measurements -----------------------------------------

# hook: (bytes factor, allreduces per bucket, the link fit's dtype suffix). PowerSGD's factor is
# what its 1-rank profile run handed to collectives over the gradient bytes (its RESULT line);
# per bucket it allreduces the uncompressed tensors, then P, then Q.
HOOKS = {"none": (1.0, 1, ""), "fp16": (0.5, 1, "_float16"), "bf16": (0.5, 1, "_float16"),
         "powersgd": (None, 3, "")}


def result_lines(path):
    with open(path) as f:
        lines = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in f if line.startswith("RESULT ")]
    if not lines:
        raise SystemExit(f"step_model: no RESULT line in {path}")
    return lines


def median_run(path):
    """A file of REPEATS runs (bench/step_model.sh): the run whose step is the median (the lower
    one of an even count), so its other fields come from the same run."""
    runs = sorted(result_lines(path), key=lambda r: float(r["ms_per_step"]))
    return runs[(len(runs) - 1) // 2]


def report(directory, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    names = sorted(os.listdir(directory))
    links = {}
    print("== 3. the links: alpha-beta (ring) fitted to ember's allreduce, 1 KiB .. 16 MiB, per host count")
    print("   (the hosts share this machine's 2 cores: at 4 hosts a rank waits for a core, which the ring's")
    print("   alpha and beta absorb -- so each host count gets its own fit; predictions beyond use 2 hosts')")
    print(f"{'link':14} {'hosts':>5} {'alpha_us':>9} {'beta_GB/s':>10} {'median_err':>10} {'16MiB_err':>9}")
    for name in names:
        # float16: what the fp16 hook's buckets cost (MPI reduces them with ember's own operator).
        m = re.match(r"allreduce_([a-z0-9]+)_(\d+)(_float16)?\.txt$", name)
        if m:
            with open(os.path.join(directory, name)) as f:
                key = (m.group(1) + ("_float16" if m.group(3) else ""), int(m.group(2)))
                links[key] = parse_allreduce_table(f.read(), key[1])
    fits = {}
    for (link, p), samples in sorted(links.items()):
        alpha, beta = fit_alpha_beta(samples)
        fits[(link, p)] = (alpha, beta)
        if p == min(q for l, q in links if l == link):
            fits[link] = (alpha, beta)  # the link itself: its fewest hosts, which share no core
        errs = [abs(allreduce_seconds(n, p, alpha, beta) - t) / t for n, p, t in samples]
        largest = max(samples)
        large_err = (allreduce_seconds(largest[0], p, alpha, beta) - largest[2]) / largest[2]
        print(f"{link:14} {p:5d} {alpha * 1e6:9.1f} {1e-9 / beta:10.3f} {100 * statistics.median(errs):9.1f}% "
              f"{100 * large_err:+8.1f}%")
    for link in sorted({l for l, _ in links}):
        base = fits.get(link)
        for (l, p), samples in sorted(links.items()):
            if l == link and base and fits[(l, p)] != base:
                n, _, t = max(samples)
                print(f"   {link} at {p} hosts from the {min(q for k, q in links if k == link)}-host fit: "
                      f"{1e3 * allreduce_seconds(n, p, *base):.1f} ms for {n >> 20} MiB, measured {1e3 * t:.1f} ms")
    for link in sorted({l for l, _ in links}):
        with open(os.path.join(out_dir, f"allreduce_{link}.dat"), "w") as f:
            f.write("# bytes ranks measured_ms model_ms (each host count's own fit)\n")
            for (l, p), samples in sorted(links.items()):
                if l != link:
                    continue
                for n, _, t in sorted(samples):
                    f.write(f"{n} {p} {1e3 * t:.4f} {1e3 * allreduce_seconds(n, p, *fits[(l, p)]):.4f}\n")

    profiles, hook_profiles = {}, {}
    for name in names:
        m = re.match(r"profile_([a-z0-9]+)(?:_([a-z0-9]+))?\.json$", name)
        if m:
            prof = compute_profile(os.path.join(directory, name))
            (hook_profiles if m.group(2) else profiles)[(m.group(1), m.group(2) or "none")] = prof
    hook_profiles.update(profiles)
    profiles = {model: prof for (model, _), prof in profiles.items()}
    print("\n== 1. compute profiles (one rank, no communication)")
    for (model, hook), prof in sorted(hook_profiles.items()):
        total = sum(b for _, b in prof["params"])
        print(f"{model} (hook {hook}): step {prof['step_ms']:.1f} ms, backward ends at {prof['backward_end_ms']:.1f} ms, "
              f"{len(prof['params'])} gradients, {total / 1e6:.2f} MB, bucket reduction at world 1 "
              f"{1e6 * prof['hook_ms_per_byte']:.2f} ms/MB")

    print("\n== 4-5. validation: predicted vs measured DDP step (slowest rank's median)")
    header = (f"{'model':8} {'link':7} {'hosts':>5} {'hook':5} {'cap_MB':>6} {'nosync_ms':>9} {'measured_ms':>11} "
              f"{'predicted_ms':>12} {'error':>7} {'overlap_meas':>12} {'overlap_pred':>12}")
    print(header)
    errors, rows = [], []
    for name in names:
        m = re.match(r"ddp_(\w+?)_(\w+?)_(\d+)_(\w+?)_cap([\d.]+)\.txt$", name)
        if not m:
            continue
        model, link, hosts, hook, cap = m.group(1), m.group(2), int(m.group(3)), m.group(4), float(m.group(5))
        nosync_path = os.path.join(directory, f"nosync_{model}_{link}_{hosts}.txt")
        factor, rounds, dtype = HOOKS[hook]
        if factor is None:  # measured: the hooked profile run's bytes over the plain one's
            hooked = os.path.join(directory, f"profile_{model}_{hook}.result")
            plain = os.path.join(directory, f"profile_{model}.result")
            if not (os.path.exists(hooked) and os.path.exists(plain)):
                continue
            factor = float(median_run(hooked)["bytes_per_step"]) / float(median_run(plain)["bytes_per_step"])
        fit = fits.get((link + dtype, hosts), fits.get((link, hosts)))
        if (model, hook) not in hook_profiles or fit is None or not os.path.exists(nosync_path):
            continue
        meas = median_run(os.path.join(directory, name))
        nosync = float(median_run(nosync_path)["ms_per_step"])
        prof = hook_profiles[(model, hook)]
        # Shared cores stretch computation: no_sync where the ranks run over no_sync on one rank.
        alone_path = os.path.join(directory, f"nosync_{model}_alone.txt")
        alone = float(median_run(alone_path)["ms_per_step"]) if os.path.exists(alone_path) else profiles[model]["step_ms"]
        first = float(meas["first_bucket_mb"]) * 2**20
        pred = simulate_step(prof, hosts, *fit, cap * 2**20, first, scale=nosync / alone,
                             byte_factor=factor, allreduces_per_bucket=rounds)
        measured = float(meas["ms_per_step"])
        err = (pred["step_ms"] - measured) / measured
        errors.append(abs(err))
        rows.append((model, link, hosts, hook, cap, measured, pred["step_ms"]))
        print(f"{model:8} {link:7} {hosts:5d} {hook:5} {cap:6g} {nosync:9.1f} {measured:11.1f} "
              f"{pred['step_ms']:12.1f} {100 * err:+6.1f}% {float(meas['overlap']):12.2f} {pred['overlap']:12.2f}")
    with open(os.path.join(out_dir, "validation.dat"), "w") as f:
        f.write("# label measured_ms predicted_ms\n")
        for model, link, hosts, hook, cap, measured, predicted in rows:
            label = f"{model},{link},{hosts}h" + ("" if hook == "none" else f",{hook}") + (
                "" if cap == 25 else f",{cap:g}MB")
            f.write(f"\"{label}\" {measured:.2f} {predicted:.2f}\n")
    if errors:
        print(f"validation: {len(errors)} runs, median |error| {100 * statistics.median(errors):.1f}%, "
              f"max {100 * max(errors):.1f}%")

    fits = {link: fit for link, fit in fits.items() if isinstance(link, str) and not link.endswith("_float16")}
    print("\n== predictions: 8 .. 256 ranks, one per host (no shared cores), default buckets (1 MB, 25 MB)")
    ranks = [2, 4, 8, 16, 32, 64, 128, 256]
    for model, prof in sorted(profiles.items()):
        with open(os.path.join(out_dir, f"scaling_{model}.dat"), "w") as f:
            f.write("# ranks " + " ".join(f"{l}_{a}_ms {l}_{a}_eff" for l in sorted(fits) for a in ("ring", "tree")) + "\n")
            for p in ranks:
                cols = []
                for link in sorted(fits):
                    for algo in ("ring", "tree"):
                        s = simulate_step(prof, p, *fits[link], 25 * 2**20, 2**20, algo=algo)
                        cols.append(f"{s['step_ms']:.2f} {prof['step_ms'] / s['step_ms']:.4f}")
                f.write(f"{p} " + " ".join(cols) + "\n")
        print(f"{model}: scaling efficiency (compute / step) at 8, 64, 256 ranks")
        for link in sorted(fits):
            for algo in ("ring", "tree"):
                effs = [prof["step_ms"] / simulate_step(prof, p, *fits[link], 25 * 2**20, 2**20, algo=algo)["step_ms"]
                        for p in (8, 64, 256)]
                print(f"  {link:7} {algo}: " + ", ".join(f"{e:.3f}" for e in effs))

    print("\n== predictions: the bucket-size curve (first bucket = cap), ring")
    caps = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 25]
    for model, prof in sorted(profiles.items()):
        with open(os.path.join(out_dir, f"buckets_{model}.dat"), "w") as f:
            f.write("# cap_MB " + " ".join(f"{l}_p{p}_ms" for l in sorted(fits) for p in (4, 32, 256)) + "\n")
            for cap in caps:
                cols = [simulate_step(prof, p, *fits[l], cap * 2**20, cap * 2**20)["step_ms"]
                        for l in sorted(fits) for p in (4, 32, 256)]
                f.write(f"{cap} " + " ".join(f"{c:.2f}" for c in cols) + "\n")
        for link in sorted(fits):
            for p in (4, 32, 256):
                times = [(simulate_step(prof, p, *fits[link], c * 2**20, c * 2**20)["step_ms"], c) for c in caps]
                best = min(times)
                print(f"{model} {link:7} p={p:3d}: best cap {best[1]:g} MB ({best[0]:.1f} ms); "
                      f"{caps[0]:g} MB {times[0][0]:.1f} ms, 25 MB {times[-1][0]:.1f} ms")
    return errors


# ---- selftest -----------------------------------------------------------------------------------


def selftest():
    assert abs(allreduce_seconds(1e6, 2, 1e-5, 1e-9) - (2e-5 + 1e-3)) < 1e-12
    assert allreduce_seconds(1e6, 1, 1.0, 1.0) == 0.0
    assert abs(allreduce_seconds(1e6, 2, 1e-5, 1e-9, rounds=3) - (6e-5 + 1e-3)) < 1e-12
    assert allreduce_seconds(1e6, 256, 1e-5, 0, "tree") < allreduce_seconds(1e6, 256, 1e-5, 0, "ring")
    # The fit recovers a known link.
    samples = [(n, p, allreduce_seconds(n, p, 30e-6, 8e-9)) for n in (4096, 65536, 1 << 20, 4 << 20) for p in (2, 4)]
    a, b = fit_alpha_beta(samples)
    assert abs(a - 30e-6) < 1e-9 and abs(b - 8e-9) < 1e-13, (a, b)
    # DDP's rebuild: closes at the limit, first bucket first.
    params = [(1.0, 600), (2.0, 600), (3.0, 100), (4.0, 900), (5.0, 50)]
    assert rebuild_buckets(params, 1000, 1000) == [(2.0, 1200), (4.0, 1000), (5.0, 50)]
    assert rebuild_buckets(params, 500, 10**9) == [(1.0, 600), (5.0, 1650)]
    # Overlap: a bucket ready early is hidden; the last one is exposed.
    prof = {"step_ms": 100.0, "backward_end_ms": 80.0, "params": [(40.0, 1000), (79.0, 1000)]}
    s = simulate_step(prof, 2, 0.0, 10e-3 / 1000, 1000, 1000)  # 10 ms per 1000-byte bucket on 2 ranks
    assert abs(s["comm_ms"] - 20.0) < 1e-9 and abs(s["exposed_ms"] - 9.0) < 1e-9, s
    assert abs(s["step_ms"] - 109.0) < 1e-9 and abs(s["overlap"] - 11.0 / 20.0) < 1e-9, s
    # The scale stretches compute (ready at 80 and 158, backward ends at 160); fp16 halves the bytes.
    s = simulate_step(prof, 2, 0.0, 10e-3 / 1000, 1000, 1000, scale=2.0, byte_factor=0.5)
    assert abs(s["step_ms"] - 203.0) < 1e-9 and abs(s["exposed_ms"] - 3.0) < 1e-9, s
    # Buckets queue behind each other: both ready at 79, the second starts when the first is done.
    prof2 = {"step_ms": 100.0, "backward_end_ms": 80.0, "params": [(79.0, 1000), (79.0, 1000)]}
    s = simulate_step(prof2, 2, 0.0, 10e-3 / 1000, 1000, 1000)
    assert abs(s["exposed_ms"] - 19.0) < 1e-9, s
    # What the 1-rank step already waited for its last bucket is not counted twice.
    s = simulate_step(dict(prof, world1_wait_ms=4.0), 2, 0.0, 10e-3 / 1000, 1000, 1000)
    assert abs(s["step_ms"] - 105.0) < 1e-9 and abs(s["exposed_ms"] - 9.0) < 1e-9, s
    print("step_model selftest: ok")


def main(argv):
    if len(argv) >= 2 and argv[1] == "selftest":
        selftest()
        return 0
    if len(argv) >= 3 and argv[1] == "report":
        out = argv[argv.index("--out") + 1] if "--out" in argv else argv[2]
        max_error = float(argv[argv.index("--max_error") + 1]) if "--max_error" in argv else 0.15
        errors = report(argv[2], out)
        if not errors:
            print("step_model: no DDP run to validate against", file=sys.stderr)
            return 1
        if max(errors) > max_error:
            print(f"step_model: a prediction is off by {100 * max(errors):.1f}%, more than {100 * max_error:.0f}%",
                  file=sys.stderr)
            return 1
        print(f"step_model: every prediction within {100 * max_error:.0f}% of the measured step")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
