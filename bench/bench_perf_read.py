#!/usr/bin/env python3
"""Benchmark bbmap's perf.data reader against perf itself, in one run.

1. Records a profile of >= 500,000 IP samples here (cpu-clock, period 10 us, a busy loop
   with a fixed CPU-time budget), then times, each in a fresh process:
     bbmap:  decode every sample (pid, tid, time, ip, ...) into numpy batches
     perf:   perf script -F ip,pid,tid,time  (output to /dev/null)
   and prints the wall-time ratio (goal: bbmap/perf < 0.5).
2. Writes a synthetic LBR perf.data of >= 1 GB with PerfWriter (streaming; 32-entry
   branch stacks), streams all its samples and branch entries in a subprocess, and
   prints that subprocess's peak RSS (goal: < 500 MB) and size ratio.

Usage: python bench/bench_perf_read.py [--workdir DIR] [--lbr-gb 1.0] [--skip-lbr]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

READ_ALL = r"""
import resource, sys, time
from bbmap.perf import PerfData
t = time.perf_counter()
p = PerfData(sys.argv[1])
n = nb = 0
chk = 0
for b in p.samples(branches={branches}):
    n += len(b)
    nb += len(b.br_from)
    chk ^= int(b.ip[-1]) if len(b) else 0
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(n, nb, dt, rss, flush=True)
"""

BUSY = ("import time\n"
        "end = time.process_time() + {secs}\n"
        "while time.process_time() < end:\n"
        "    pass\n")


def record_ip_profile(path: str, min_samples: int) -> int:
    """perf record a busy loop until the profile holds ``min_samples`` samples."""
    from bbmap.perf import PerfData

    secs = min_samples / 100_000 * 1.15
    for _ in range(4):
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-c", "10000", "-o", path,
                        "--", sys.executable, "-c", BUSY.format(secs=secs)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p = PerfData(path)
        p.read_all()
        n = p.record_counts.get("SAMPLE", 0)
        if n >= min_samples:
            return n
        secs *= min_samples / max(n, 1) * 1.1
    raise SystemExit(f"could not record {min_samples} samples (last: {n})")


def time_cmd(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def bbmap_read(path: str, branches: bool) -> tuple[int, int, float, int, float]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", READ_ALL.format(branches=branches), path],
                         check=True, capture_output=True, text=True).stdout.split()
    wall = time.perf_counter() - t
    n, nb, dt, rss = int(out[0]), int(out[1]), float(out[2]), int(out[3])
    return n, nb, dt, rss, wall


def write_lbr(path: str, target_bytes: int) -> tuple[int, int]:
    """Stream a synthetic LBR profile of at least ``target_bytes`` through PerfWriter."""
    from bbmap.formats import perfdata as fmt
    from bbmap.perf.writer import PerfWriter

    rng = np.random.default_rng(1)
    depth = 32
    base = 0x400000
    pool = rng.integers(0, 0x10000, size=(4096, depth, 3), dtype=np.uint64)
    pool[:, :, 0] += np.uint64(base)
    pool[:, :, 1] += np.uint64(base)
    pool[:, :, 2] = np.uint64(0x12)
    ips = (base + rng.integers(0, 0x10000, size=4096)).tolist()
    n = 0
    with PerfWriter(path, branch_sample_type=fmt.BR_ANY | 1, event_name="cycles:u") as w:
        w.add_comm(1000, 1000, "lbr-bench", exec_=True)
        w.add_mmap2(1000, 1000, base, 0x10000, 0, "/bench/lbr-bench")
        size = w.bytes_written
        per = len(w.sample_bytes(0, 0, 0, 0, 1, pool[0]))
        total = (target_bytes - size) // per + 1
        for i in range(total):
            k = i & 4095
            w.add_sample(ips[k], 1000, 1000, time=i * 1000, period=1000, branches=pool[k])
        n = total
    return n, os.path.getsize(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--min-samples", type=int, default=500_000)
    ap.add_argument("--lbr-gb", type=float, default=1.0)
    ap.add_argument("--skip-lbr", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed")
    work = args.workdir or tempfile.mkdtemp(prefix="bbmap-bench-")
    os.makedirs(work, exist_ok=True)
    try:
        ip_path = os.path.join(work, "ip.perf.data")
        n = record_ip_profile(ip_path, args.min_samples)
        size = os.path.getsize(ip_path)
        print(f"[ip] recorded {n} samples, {size / 1e6:.1f} MB: {ip_path}")
        # best of 3 for each, interleaved, so a busy shared machine hurts both alike
        perf_t, inner, wall = float("inf"), float("inf"), float("inf")
        for _ in range(3):
            perf_t = min(perf_t, time_cmd(["perf", "script", "-i", ip_path, "-F",
                                           "ip,pid,tid,time"]))
            n2, _, t_in, rss, t_wall = bbmap_read(ip_path, branches=False)
            assert n2 == n, (n2, n)
            inner, wall = min(inner, t_in), min(wall, t_wall)
        print(f"[ip] perf script -F ip,pid,tid,time: {perf_t:.3f} s (process wall)")
        print(f"[ip] bbmap PerfData(...).samples():  {inner:.3f} s (open + decode every "
              f"sample; peak RSS {rss / 2**20:.0f} MB)")
        print(f"[ip] bbmap whole process:            {wall:.3f} s (incl. Python start and "
              "numpy/bbmap imports)")
        print(f"[ip] RATIO bbmap read / perf script = {inner / perf_t:.3f}  (goal < 0.5)")
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "tests"))  # the test oracles (tests/oracles/)
        from oracles import perf_oracle as oracle

        from bbmap.perf import PerfData

        rows, _ = oracle.bbmap_samples(PerfData(ip_path))
        same = oracle.same_multiset(rows, oracle.script_samples(ip_path))
        print(f"[ip] every (pid, tid, time, ip) equal to perf script --ns: {same}")
        print(f"[ip] ratio incl. interpreter start  = {wall / perf_t:.3f}")
        if not args.skip_lbr:
            lbr_path = os.path.join(work, "lbr.perf.data")
            t = time.perf_counter()
            ns, fsize = write_lbr(lbr_path, int(args.lbr_gb * 1e9))
            print(f"[lbr] wrote {ns} samples x 32 branches, {fsize / 1e9:.2f} GB in "
                  f"{time.perf_counter() - t:.1f} s")
            n3, nb, inner, rss, wall = bbmap_read(lbr_path, branches=True)
            assert n3 == ns and nb == 32 * ns, (n3, nb, ns)
            print(f"[lbr] bbmap streamed {n3} samples, {nb} branch entries in {wall:.1f} s")
            print(f"[lbr] peak RSS {rss / 2**20:.0f} MB for a {fsize / 2**20:.0f} MB file; "
                  f"RATIO rss/500MB = {rss / (500 * 2**20):.3f}  (goal < 1)")
            own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            print(f"[lbr] (the writer process peaked at {own / 2**20:.0f} MB)")
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
