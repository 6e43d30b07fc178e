#!/usr/bin/env python3
"""Benchmark ``bbmap annotate --format fdata`` against ``perf2bolt-22`` on the same files.

Both write BOLT's fdata from the same perf.data and binary; the bench checks that their
lines are equal (as multisets: perf2bolt writes hash order) and times them side by side,
alternating, so both see the same machine load:

1. an IP-only profile of >= 500,000 samples (``perf record -e cpu-clock -c 10000`` of
   bench_annotate's 20,000-function program; perf2bolt ``-nl``);
2. an LBR profile of >= 100 MB (bench_annotate's synthetic 32-entry stacks over the same
   kind of program's real blocks, written with bbmap's PerfWriter).

Inputs are shared with the other benches (their builders, cached in their work
directories): by default the IP profile of bench_annotate (/tmp/bbmap-bench-annotate) and
the LBR profile of bench_verify_profile (/work/cache/bench-verify-profile).

Per tool: wall time and CPU time (user + system, perf2bolt's ``perf script`` jobs
included; min and median of the rounds, with the spread), peak RSS (the largest process:
perf2bolt or one of the ``perf script`` jobs it spawns), the ratios bbmap / perf2bolt
(goal <= 0.2, wall) and the 1-minute load average while they ran (2 shared cores: wall
times under load are noisy; perf2bolt runs its ``perf script`` jobs in parallel, bbmap
is one thread, so a loaded machine slows them differently).  The bbmap package is
byte-compiled first, as an installed one is (:func:`byte_compile`).

    python bench/bench_bolt.py [--ip-workdir DIR] [--lbr-workdir DIR] [--lbr-gb 0.1]
                               [--samples 500000] [--rounds 3] [--skip-ip] [--skip-lbr]
                               [--extra PERF_DATA:BINARY[:ip]]...
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_annotate as ba  # noqa: E402 - the programs and profile writers are shared

GOAL = 0.2  # issue 14: bbmap / perf2bolt wall time


def byte_compile() -> None:
    """Byte-compile the bbmap package that runs, as ``pip install`` does: an editable
    install under ``PYTHONDONTWRITEBYTECODE=1`` (set in this team's shells) would
    otherwise compile every module from source on each run (~0.3 s of CPU here),
    a cost no installed bbmap has."""
    import compileall

    import bbmap

    compileall.compile_dir(os.path.dirname(bbmap.__file__), quiet=1)
    print(f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!s}; "
          f"bbmap byte-compiled (as installed); load average {os.getloadavg()}")


def same_lines(a: str, b: str) -> tuple[bool, int, int]:
    with open(a) as fa, open(b) as fb:
        x = collections.Counter(ln for ln in fa if ln.strip())
        y = collections.Counter(ln for ln in fb if ln.strip())
    return x == y, sum(x.values()), sum(y.values())


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """Wall time, CPU time (user + system of the command and every process it waited
    for: perf2bolt's ``perf script`` jobs) and peak RSS (MB, the largest process) of
    ``cmd``, run from a fresh helper process."""
    helper = ("import resource, subprocess, sys, time; t = time.perf_counter();"
              " r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
              " w = time.perf_counter() - t;"
              " u = resource.getrusage(resource.RUSAGE_CHILDREN);"
              " print(w, u.ru_utime + u.ru_stime, u.ru_maxrss, r.returncode)")
    out = ba.sh([sys.executable, "-c", helper, *cmd], capture_output=True,
                text=True).stdout.split()
    if out[3] != "0":
        raise SystemExit(f"{cmd} failed with exit {out[3]}")
    return float(out[0]), float(out[1]), int(out[2]) / 1024.0


def side_by_side(title: str, d: str, data: str, exe: str, rounds: int, nl: bool) -> float:
    ours_out, theirs_out = os.path.join(d, "bbmap.fdata"), os.path.join(d, "perf2bolt.fdata")
    ours = ba.bbmap_cmd("annotate", "--format", "fdata", data, exe, "-o", ours_out)
    theirs = ["perf2bolt-22", *(["-nl"] if nl else []), "-p", data, "-o", theirs_out, exe]
    runs: dict[str, list[tuple[float, float, float]]] = {"b": [], "p": []}
    load = []
    for _ in range(rounds):  # alternate: both see the same load
        load.append(os.getloadavg()[0])
        runs["b"].append(measure(ours))
        runs["p"].append(measure(theirs))
    load.append(os.getloadavg()[0])
    eq, nb, npb = same_lines(ours_out, theirs_out)
    size = os.path.getsize(data) / 1e6

    def fmt(ts: list[float]) -> str:
        sd = statistics.stdev(ts) if len(ts) > 1 else 0.0
        return (f"min {min(ts):6.2f} s  median {statistics.median(ts):6.2f} s  sd {sd:5.2f}"
                f"  (runs: {', '.join(f'{x:.2f}' for x in ts)})")

    tb, tp = [r[0] for r in runs["b"]], [r[0] for r in runs["p"]]
    cb, cp = [r[1] for r in runs["b"]], [r[1] for r in runs["p"]]
    print(f"{title}: {data} ({size:.0f} MB), binary {exe}")
    print(f"  bbmap annotate --format fdata : wall {fmt(tb)}  peak RSS "
          f"{max(r[2] for r in runs['b']):6.0f} MB")
    print(f"                                  cpu  {fmt(cb)}")
    print(f"  perf2bolt-22{' -nl' if nl else '    '}              : wall {fmt(tp)}  "
          f"peak RSS {max(r[2] for r in runs['p']):6.0f} MB")
    print(f"                                  cpu  {fmt(cp)}")
    r_min = min(tb) / min(tp)
    r_med = statistics.median(tb) / statistics.median(tp)
    print(f"  ratio bbmap/perf2bolt, wall   : {r_min:.2f} (min)  {r_med:.2f} (median)  "
          f"goal <= {GOAL}: {'met' if r_med <= GOAL else 'NOT met'}")
    print(f"  ratio bbmap/perf2bolt, cpu    : {min(cb) / min(cp):.2f} (min)  "
          f"{statistics.median(cb) / statistics.median(cp):.2f} (median)")
    print(f"  load average (1 min) during   : {min(load):.1f}-{max(load):.1f}")
    print(f"  same fdata lines              : {'yes' if eq else 'NO'} ({nb} vs {npb} lines)")
    return r_med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ip-workdir", default="/tmp/bbmap-bench-annotate")
    ap.add_argument("--lbr-workdir", default="/work/cache/bench-verify-profile")
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=500_000)
    ap.add_argument("--lbr-gb", type=float, default=0.1, help="LBR profile size (GiB)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-ip", action="store_true")
    ap.add_argument("--skip-lbr", action="store_true")
    ap.add_argument("--extra", action="append", default=[], metavar="PERF_DATA:BINARY[:ip]",
                    help="also compare on this profile (e.g. bench/e2e's SQLite/zstd "
                         "profiles); ':ip' for an IP-only profile (perf2bolt -nl)")
    a = ap.parse_args()
    if shutil.which("perf2bolt-22") is None or shutil.which("perf") is None:
        raise SystemExit("perf2bolt-22 and perf are needed (the peer)")
    byte_compile()
    if not a.skip_ip:
        os.makedirs(a.ip_workdir, exist_ok=True)
        exe = ba.build_program(a.ip_workdir, a.functions)
        data = ba.record_ip(a.ip_workdir, exe, a.samples)
        side_by_side(f"IP profile ({ba.count_samples(data)} samples)", a.ip_workdir, data,
                     exe, a.rounds, nl=True)
    if not a.skip_lbr:
        os.makedirs(a.lbr_workdir, exist_ok=True)
        exe = ba.build_program(a.lbr_workdir, a.functions)
        data = ba.write_lbr(a.lbr_workdir, exe, a.lbr_gb)
        side_by_side("LBR profile", a.lbr_workdir, data, exe, a.rounds, nl=False)
    for i, spec in enumerate(a.extra):
        data, exe, *kind = spec.split(":")
        d = os.path.join(a.lbr_workdir, f"extra{i}")
        os.makedirs(d, exist_ok=True)
        side_by_side(f"extra profile {i}", d, data, exe, a.rounds, nl=kind == ["ip"])


if __name__ == "__main__":
    main()
