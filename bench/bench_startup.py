#!/usr/bin/env python3
"""Start-up budget (spec/startup.md): bbmap's commands on tiny inputs beside perf and llvm-readobj.

Each command is run ``--repeat`` times, interleaved with its peers so they share the
machine's load; the figures are wall seconds (median, and the spread as min..max), the
ratio is bbmap's median over the peer's.  The console script beside this interpreter is
timed (not a pyenv shim), with bbmap's bytecode compiled as ``pip install`` leaves it
(without it, every run compiles bbmap's modules: ~30 ms of a tiny ``dump --json``).
Also printed per command: the imports its path must not make (spec/startup.md).

Besides ``--version`` and ``--help``: ``dump --json`` and ``annotate --format json
--inference off`` on the corpus's smallest binary and profile (start-up is most of
their time), and, as peers, the interpreter alone and the interpreter importing what
no ``dump --json`` can do without (numpy with one BLAS thread, click, pyelftools' ELF
reader): the floor a Python + numpy tool starts from.

    python bench/bench_startup.py [--repeat 30] [--instructions]

``--instructions`` also counts each command's instructions once under valgrind
(``cachegrind --cache-sim=no``): a figure the machine's load does not move, for A/B
comparisons on a shared machine.

Budgets: ``bbmap --version`` under 0.1 s wall (median); ``dump --json`` of a tiny
binary under 75 ms (issue 17, session 4).
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
BUDGET_TINY_DUMP_S = 0.075  # issue 17, session 4: `dump --json` of a tiny binary
HEAVY = ("numpy", "bbmap.formats", "construct", "elftools")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_BINARY = os.path.join(REPO, "corpus", "bin", "clang-22", "addrmap", "layout.pie")
TINY_PROFILE = os.path.join(REPO, "corpus", "profiles", "c22-addrmap-pie-plain", "perf.data")
# what each command's path must not import (spec/startup.md; tests/test_startup_imports.py)
NOT_ON_PATH = {
    "dump --json tiny": ("construct", "bbmap.binary.go", "bbmap.perf", "bbmap.aggregate",
                         "capstone", "ortools", "tempfile", "rich"),
    "annotate json tiny": ("bbmap.binary.go", "bbmap.cfg", "bbmap.inference", "capstone",
                           "ortools", "rich", "bbmap.outputs.text", "bbmap.outputs.csvout"),
}
# what dump --json cannot do without; ended as bbmap's commands end (no teardown)
FLOOR = "import numpy, click, elftools.elf.elffile, os; os._exit(0)"
FLOOR_NAME = "python3 + numpy,click,elftools"
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def bbmap_exe() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "bbmap")
    exe = here if os.path.exists(here) else shutil.which("bbmap")
    if exe is None:
        raise SystemExit("bbmap is not installed (pip install -e .)")
    return exe


def wall(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=env)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def imports(cmd: list[str]) -> set[str]:
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return {ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines()
            if ln.startswith("import time:")}


def unwanted_imports(name: str, cmd: list[str], before: set[str]) -> list[str]:
    """The imports of ``cmd`` its path must not make (those of the interpreter's own
    start-up, ``before``, aside)."""
    bad = NOT_ON_PATH.get(name, HEAVY)
    return sorted(m for m in imports(cmd) - before
                  if any(m == b or m.startswith(b + ".") for b in bad))


def instructions(cmd: list[str], env: dict | None = None) -> int | None:
    """Instructions one run executes (valgrind's cachegrind ``I refs``), or None."""
    if not shutil.which("valgrind"):
        return None
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                        "--cachegrind-out-file=/dev/null", *cmd], capture_output=True,
                       text=True, env=env, check=False)
    for line in r.stderr.splitlines():
        if "I   refs:" in line or "I refs:" in line:
            return int(line.rsplit(":", 1)[1].replace(",", "").strip())
    return None


def fmt(ts: list[float]) -> str:
    return f"{statistics.median(ts) * 1000:6.1f} ms ({min(ts) * 1000:.1f}..{max(ts) * 1000:.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions once per command with valgrind (load-proof)")
    a = ap.parse_args()
    import compileall

    import bbmap

    compileall.compile_dir(os.path.dirname(bbmap.__file__), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    bb = bbmap_exe()
    cases = [("--version", [bb, "--version"]), ("--help", [bb, "--help"]),
             ("dump --help", [bb, "dump", "--help"]),
             ("annotate --help", [bb, "annotate", "--help"])]
    if os.path.exists(TINY_BINARY) and os.path.exists(TINY_PROFILE):  # a few functions, 3k samples
        cases += [("dump --json tiny", [bb, "dump", "--json", TINY_BINARY]),
                  ("annotate json tiny", [bb, "annotate", "--format", "json",
                                          "--inference", "off", TINY_PROFILE, TINY_BINARY])]
    peers = [("perf --version", ["perf", "--version"]),
             ("llvm-readobj-22 --version", ["llvm-readobj-22", "--version"]),
             ("python3 -c pass", [sys.executable, "-c", "pass"]),
             (FLOOR_NAME, [sys.executable, "-c", FLOOR])]
    peers = [p for p in peers if shutil.which(p[1][0])]
    one_thread = dict(os.environ, **ONE_THREAD)  # as the CLI runs numpy (spec/startup.md)
    runs: dict[str, list[float]] = {n: [] for n, _ in cases + peers}
    cpu: dict[str, list[float]] = {n: [] for n, _ in cases + peers}
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for _ in range(a.repeat):
        for n, cmd in cases + peers:
            w, c = wall(cmd, one_thread if n == FLOOR_NAME else None)
            runs[n].append(w)
            cpu[n].append(c)
    print("load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"wall time, median (min..max) of {a.repeat} interleaved runs; cpu = user+system, "
          "median (what an idle machine's wall time is close to)")
    for n, _ in peers:
        print(f"  {n:26s} {fmt(runs[n])}  cpu {statistics.median(cpu[n]) * 1000:5.1f} ms")
    before = imports([sys.executable, "-c", "pass"])
    ratio_peers = [p for p, _ in peers if p.split()[0] in ("perf", "llvm-readobj-22")]
    for n, cmd in cases:
        med = statistics.median(runs[n])
        ratios = "  ".join(f"{med / statistics.median(runs[p]):5.2f}x {p.split()[0]}"
                           for p in ratio_peers)
        bad = unwanted_imports(n, cmd, before)
        print(f"  bbmap {n:20s} {fmt(runs[n])}  cpu {statistics.median(cpu[n]) * 1000:5.1f} ms"
              f"   {ratios}   "
              f"imports off its path: {', '.join(bad) if bad else 'none'}")
    if a.instructions:
        print("instructions (valgrind cachegrind, one run each):")
        for n, cmd in peers + cases:
            ir = instructions(cmd, one_thread if n == FLOOR_NAME else None)
            print(f"  {n:32s} {ir / 1e6:9.1f} M" if ir else f"  {n:32s} (no valgrind)")
    for n, budget in (("--version", BUDGET_VERSION_S), ("dump --json tiny", BUDGET_TINY_DUMP_S)):
        if n in runs:
            v = statistics.median(runs[n])
            print(f"bbmap {n} median {v * 1000:.1f} ms: "
                  f"{'within' if v < budget else 'OVER'} the {budget * 1000:.0f} ms budget")


if __name__ == "__main__":
    main()
