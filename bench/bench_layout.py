#!/usr/bin/env python3
"""Benchmark ``bbmap layout``: one huge function, and every hot function of a big binary.

1. A synthetic 5,000-block function (a chain of fall-throughs with a branch from every
   other block to one of the 50 blocks around it -- loops and forward branches, weights
   1..1000): time ``ext_tsp_order`` with Propeller's and LLVM's weights, and LLVM 22's own
   ``computeExtTspLayout`` (libLLVM through ctypes, the peer) on the same graph; print the
   times, their ratio, and both layouts' Ext-TSP scores.
2. The 20,000-function binary of bench_annotate.py (built with clang-22
   ``-fbasic-block-address-map``) and a synthetic LBR profile over it (bench_annotate's
   generator, ``--lbr-mb`` megabytes): time ``bbmap layout`` end to end (both files and the
   JSON report), then in-process the layout step alone (``plan_layout`` on the annotate
   result) against LLVM's ``computeExtTspLayout`` run on every laid-out function's CFG, with
   the total scores of both.

    python bench/bench_layout.py [--workdir /work/cache/bbmap-bench-layout]
        [--functions 20000] [--blocks 5000] [--lbr-mb 64] [--rounds 3] [--skip-binary]

With numba installed (``bbmap[fast]``) big functions take the compiled merger
(``exttsp._FastMerger``); the reference merger is timed too (``BBMAP_NO_NUMBA=1``,
same order), and so is the first call of a fresh process (numba's import and the kernel's
cache load, paid once per process, outside the medians).

Times are wall clock and CPU time (user + system of this process, which the peer runs
in too), with their spread over ``--rounds`` runs; the ratios are of the CPU medians (the
machine is shared: CPU time is what another process's load changes least).  The issue 32
budgets are printed with their verdicts: Ext-TSP on the big function <= 2x LLVM's time,
``plan_layout`` <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bench_annotate  # noqa: E402
import llvm_codelayout  # noqa: E402

from bbmap.layout.exttsp import LLVM, PROPELLER, ext_tsp_order, ext_tsp_score  # noqa: E402


def synthetic_function(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 64, n)
    edges = []
    for i in range(n - 1):
        edges.append((i, i + 1, int(rng.integers(1, 1000))))
        if rng.random() < 0.5:
            j = int(rng.integers(max(0, i - 50), min(n, i + 50)))
            edges.append((i, j, int(rng.integers(1, 1000))))
    return sizes, np.array(edges, np.int64)


def spread(xs: list[float]) -> str:
    return (f"min {min(xs):.3f} s, median {statistics.median(xs):.3f} s, "
            f"max {max(xs):.3f} s over {len(xs)} runs")


def timed(fn, rounds: int) -> tuple[object, list[float], list[float]]:  # noqa: ANN001
    walls, cpus, out = [], [], None
    for _ in range(rounds):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return out, walls, cpus


def cpu_spread(xs: list[float]) -> str:
    return f"cpu median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def verdict(name: str, value: float, budget: float, unit: str) -> None:
    print(f"  budget (issue 32): {name} {value:.2f}{unit}, at most {budget:g}{unit}: "
          f"{'met' if value <= budget else 'NOT met'}")


FIRST_CALL = """
import sys, time
sys.path.insert(0, {here!r})
import numpy as np
from bench_layout import synthetic_function
from bbmap.layout import exttsp
sizes, edges = synthetic_function({n})
counts = np.zeros({n}, np.int64)
np.add.at(counts, edges[:, 1], edges[:, 2])
c0 = time.process_time()
exttsp.ext_tsp_order(sizes, edges, exttsp.LLVM, counts=counts)
c1 = time.process_time()
exttsp.ext_tsp_order(sizes, edges, exttsp.LLVM, counts=counts)
c2 = time.process_time()
print(c1 - c0, c2 - c1, "numba" in sys.modules)
"""


def first_call(n: int) -> None:
    """The first ``ext_tsp_order`` of a fresh process against its second (CPU): what
    importing numba and loading the compiled kernel from numba's cache cost once."""
    out = subprocess.run([sys.executable, "-c", FIRST_CALL.format(here=HERE, n=n)],
                         check=True, capture_output=True, text=True).stdout.split()
    first, second, numba = float(out[0]), float(out[1]), out[2] == "True"
    if not numba:
        print("  first call in a fresh process: no numba (the reference merger runs)")
        return
    print(f"  first call in a fresh process (LLVM weights): cpu {first:.3f} s, a second "
          f"call {second:.3f} s: numba's import and the kernel's cache load "
          f"~{first - second:.3f} s, once per process")


def bench_function(n: int, rounds: int, llvm) -> None:  # noqa: ANN001
    sizes, edges = synthetic_function(n)
    counts = np.zeros(n, np.int64)
    np.add.at(counts, edges[:, 1], edges[:, 2])
    print(f"synthetic function: {n} blocks, {len(edges)} edges")
    first_call(n)
    for p in (PROPELLER, LLVM):
        order, walls, cpus = timed(lambda p=p: ext_tsp_order(sizes, edges, p, counts=counts),
                                   rounds)
        print(f"  bbmap ext_tsp_order ({p.name:9}): wall {spread(walls)}; "
              f"{cpu_spread(cpus)}")
        print(f"      score {ext_tsp_score(sizes, edges, range(n), p):.1f} (original) -> "
              f"{ext_tsp_score(sizes, edges, order, p):.1f}")
        if p is LLVM:
            ours_llvm, our_cpu = order, statistics.median(cpus)
    # the reference merger (no compiled kernel), for the before/after in one run
    os.environ["BBMAP_NO_NUMBA"], old = "1", os.environ.get("BBMAP_NO_NUMBA")
    try:
        ref, walls, cpus = timed(lambda: ext_tsp_order(sizes, edges, LLVM, counts=counts),
                                 rounds)
    finally:
        if old is None:
            del os.environ["BBMAP_NO_NUMBA"]
        else:
            os.environ["BBMAP_NO_NUMBA"] = old
    print(f"  bbmap ext_tsp_order (llvm, BBMAP_NO_NUMBA=1: the reference merger): "
          f"{cpu_spread(cpus)}; same order: {ref == ours_llvm}")
    if llvm is None:
        print("  LLVM computeExtTspLayout: libLLVM 22 not found, no peer")
        return
    e = [tuple(map(int, r)) for r in edges]
    theirs, walls, cpus = timed(lambda: llvm.ext_tsp(sizes.tolist(), counts.tolist(), e),
                                rounds)
    a = ext_tsp_score(sizes, edges, ours_llvm, LLVM)
    b = ext_tsp_score(sizes, edges, theirs, LLVM)
    print(f"  LLVM 22 computeExtTspLayout (C++, ctypes): wall {spread(walls)}; "
          f"{cpu_spread(cpus)}")
    ratio = our_cpu / statistics.median(cpus)
    print(f"      score {b:.1f}; bbmap/LLVM score ratio {a / b:.4f}, "
          f"time ratio (cpu medians, LLVM weights) {ratio:.2f}")
    verdict("Ext-TSP time / LLVM's", ratio, 2.0, "x")


def bench_binary(d: str, nfunc: int, mb: float, rounds: int, llvm) -> None:  # noqa: ANN001
    import bbmap
    from bbmap.layout.plan import plan_layout

    exe = bench_annotate.build_program(d, nfunc)
    data = bench_annotate.write_lbr(d, exe, mb / 1024)
    size = os.path.getsize(data) / (1 << 20)
    cmd = bench_annotate.bbmap_cmd("layout", data, exe, "--cc-profile",
                                   os.path.join(d, "cc.txt"), "--ld-profile",
                                   os.path.join(d, "ld.txt"), "--json", "-o",
                                   os.path.join(d, "report.json"))
    walls = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t)
    print(f"binary: {exe} ({nfunc} functions), LBR profile {size:.0f} MiB ({data})")
    print(f"  bbmap layout end to end (annotate + layout + files): wall {spread(walls)}")
    result = bbmap.annotate([data], exe)
    for p in (PROPELLER, LLVM):
        plan, walls, cpus = timed(lambda p=p: plan_layout(result, params=p), rounds)
        fs = plan.functions
        blocks = sum(f.cfg.num_nodes for f in fs)
        big = max(f.cfg.num_nodes for f in fs)
        t = plan.totals()
        print(f"  plan_layout ({p.name:9}): {len(fs)} hot functions, {blocks} blocks "
              f"(largest {big}); wall {spread(walls)}; {cpu_spread(cpus)}")
        verdict(f"plan_layout ({p.name}) cpu median", statistics.median(cpus), 1.0, " s")
        print(f"      intra score {t['intra_before']:.1f} -> {t['intra_after']:.1f}, "
              f"fall-throughs +{t['fallthrough_gained']}")
        if p is LLVM:
            llvm_plan, our_cpu = plan, statistics.median(cpus)
    if llvm is None:
        print("  LLVM computeExtTspLayout: libLLVM 22 not found, no peer")
        return
    graphs = [(f.cfg.sizes.tolist(), f.cfg.counts.tolist(),
               [tuple(map(int, r)) for r in f.cfg.edges]) for f in llvm_plan.functions
              if f.cfg.num_nodes >= 3]  # LLVM asserts more than two nodes

    def run_llvm() -> list[list[int]]:
        return [llvm.ext_tsp(s, c, e) for s, c, e in graphs]

    orders, walls, cpus = timed(run_llvm, rounds)
    ours = theirs = 0.0
    for f, o in zip([f for f in llvm_plan.functions if f.cfg.num_nodes >= 3], orders):
        fn = f.cfg
        hot = set(f.order)
        ours += f.intra_after
        theirs += ext_tsp_score(fn.sizes, fn.edges, [v for v in o if v in hot], LLVM)
    print(f"  LLVM 22 computeExtTspLayout on the same {len(graphs)} CFGs: wall "
          f"{spread(walls)}; {cpu_spread(cpus)}")
    print(f"      intra score {theirs:.1f}; bbmap/LLVM score ratio {ours / theirs:.4f}, "
          f"time ratio (cpu medians) {our_cpu / statistics.median(cpus):.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/work/cache/bbmap-bench-layout")
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--blocks", type=int, default=5000)
    ap.add_argument("--lbr-mb", type=float, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-binary", action="store_true")
    a = ap.parse_args()
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    llvm = llvm_codelayout.load()
    bench_function(a.blocks, a.rounds, llvm)
    if not a.skip_binary:
        os.makedirs(a.workdir, exist_ok=True)
        bench_binary(a.workdir, a.functions, a.lbr_mb, a.rounds, llvm)
    print("load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
