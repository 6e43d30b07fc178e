#!/usr/bin/env python3
"""Start-up budget (spec/startup.md): ``bbmap --version`` / ``--help`` beside perf and llvm-readobj.

Each command is run ``--repeat`` times, interleaved with its peers so they share the
machine's load; the figures are wall seconds (median, and the spread as min..max), the
ratio is bbmap's median over the peer's.  The console script beside this interpreter is
timed (not a pyenv shim), with bbmap's bytecode compiled as ``pip install`` leaves it.
Also printed: whether each bbmap command imported numpy or a format layer (it must not).

    python bench/bench_startup.py [--repeat 30]

Budget: ``bbmap --version`` under 0.1 s wall (median).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

BUDGET_VERSION_S = 0.1  # issue 17: `bbmap --version` under 0.1 s wall
HEAVY = ("numpy", "bbmap.formats", "construct", "elftools")


def bbmap_exe() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "bbmap")
    exe = here if os.path.exists(here) else shutil.which("bbmap")
    if exe is None:
        raise SystemExit("bbmap is not installed (pip install -e .)")
    return exe


def wall(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def heavy_imports(cmd: list[str]) -> list[str]:
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    mods = {ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines()
            if ln.startswith("import time:")}
    return sorted(m for m in mods if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


def fmt(ts: list[float]) -> str:
    return f"{statistics.median(ts) * 1000:6.1f} ms ({min(ts) * 1000:.1f}..{max(ts) * 1000:.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    import compileall

    import bbmap

    compileall.compile_dir(os.path.dirname(bbmap.__file__), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    bb = bbmap_exe()
    cases = [("--version", [bb, "--version"]), ("--help", [bb, "--help"]),
             ("dump --help", [bb, "dump", "--help"]),
             ("annotate --help", [bb, "annotate", "--help"])]
    peers = [("perf --version", ["perf", "--version"]),
             ("llvm-readobj-22 --version", ["llvm-readobj-22", "--version"]),
             ("python3 -c pass", [sys.executable, "-c", "pass"])]
    peers = [p for p in peers if shutil.which(p[1][0])]
    runs: dict[str, list[float]] = {n: [] for n, _ in cases + peers}
    cpu: dict[str, list[float]] = {n: [] for n, _ in cases + peers}
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for _ in range(a.repeat):
        for n, cmd in cases + peers:
            w, c = wall(cmd)
            runs[n].append(w)
            cpu[n].append(c)
    print("load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"wall time, median (min..max) of {a.repeat} interleaved runs; cpu = user+system, "
          "median (what an idle machine's wall time is close to)")
    for n, _ in peers:
        print(f"  {n:26s} {fmt(runs[n])}  cpu {statistics.median(cpu[n]) * 1000:5.1f} ms")
    for n, cmd in cases:
        med = statistics.median(runs[n])
        ratios = "  ".join(f"{med / statistics.median(runs[p]):5.2f}x {p.split()[0]}"
                           for p, _ in peers)
        heavy = heavy_imports(cmd)
        print(f"  bbmap {n:20s} {fmt(runs[n])}  cpu {statistics.median(cpu[n]) * 1000:5.1f} ms"
              f"   {ratios}   "
              f"heavy imports: {', '.join(heavy) if heavy else 'none'}")
    v = statistics.median(runs["--version"])
    print(f"bbmap --version median {v * 1000:.1f} ms: "
          f"{'within' if v < BUDGET_VERSION_S else 'OVER'} the {BUDGET_VERSION_S * 1000:.0f} ms "
          "budget")


if __name__ == "__main__":
    main()
