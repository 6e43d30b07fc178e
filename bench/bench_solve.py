#!/usr/bin/env python3
"""Speed of the inference solve: one solve per function (bbmap/inference/components.py).

On the bench binaries of bench_annotate.py (built and recorded there; ``--workdir`` holds
them), the flow problems annotate hands to the solver (both passes of ``infer_counts``,
captured at ``counts.infer``) are solved, every variant ``--rounds`` times in turn:

* ``whole network, ortools``: the previous way, one OR-Tools call for all functions (its
  flows depend on every function; shown for the time only);
* per function with ``ortools`` and ``builtin``, one and two worker processes (``builtin``
  is the compiled kernel where numba is installed, bbmap/inference/solvers_fast.py), and
  ``builtin`` in pure Python (the kernel's reference: the same flows);
* ``ortools`` with the solved-function cache: first run (empty cache: solve and write) and
  cached (every function a hit, nothing written).

The flows of every per-function variant with the same solver are checked to be the same
arrays (any worker count, cached or not).

    python bench/bench_solve.py [--workdir /tmp/bbmap-bench-annotate]
                                [--binaries manyfuncs,switchy] [--samples 500000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def problems(data: str, exe: str) -> list:
    """The FlowProblems ``annotate`` solves for ``data`` (default options)."""
    import bbmap.inference.counts as counts
    from bbmap.run import annotate

    seen = []
    orig = counts.infer

    def capture(p, solver="auto", **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append(p)
        return orig(p, solver, **kw)

    counts.infer = capture
    try:
        annotate([data], exe, inference="on")
    finally:
        counts.infer = orig
    return seen


def bench_one(exe: str, data: str, rounds: int) -> None:
    """Every variant on the problems of one profile (the module docstring)."""
    import bench_annotate as ba

    from bbmap.inference import components, solvers
    from bbmap.inference.flow import build_network, infer
    from bbmap.inference.flow_cache import FlowCache

    name = os.path.basename(exe)
    ps = problems(data, exe)
    arcs = [len(build_network(p).tail) for p in ps]
    sizes = np.concatenate([np.diff(components.split_network(build_network(p)).ptr)
                            for p in ps])
    q = np.percentile(sizes, [10, 50, 90]).astype(int).tolist()
    print(f"{name}: {ba.count_samples(data)} samples; {len(ps)} solves, "
          f"{sum(p.num_components for p in ps)} functions, {sum(arcs)} arcs (arcs per "
          f"function: 10/50/90th percentile {q}, largest {int(sizes.max())})")
    print("  load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    def whole(solver: str) -> list:
        return [solvers.SOLVE[solver](build_network(p))[0] for p in ps]

    cache_dir = tempfile.mkdtemp(prefix="bbmap-bench-solve-")

    def cached(first: bool) -> list:
        if first:
            shutil.rmtree(cache_dir, ignore_errors=True)
        return [infer(p, "ortools", cache=FlowCache(cache_dir)) for p in ps]

    def python_builtin() -> list:
        from bbmap.inference import solvers_fast

        old = solvers_fast.FAST_MIN_ARCS
        solvers_fast.FAST_MIN_ARCS = 1 << 62  # never the compiled kernel
        try:
            return [infer(p, "builtin") for p in ps]
        finally:
            solvers_fast.FAST_MIN_ARCS = old

    variants = {"whole network, ortools": lambda: whole("ortools")}
    for solver in ("ortools", "builtin"):
        for w in (1, 2):
            variants[f"per function, {solver}, {w} worker{'s' if w > 1 else ''}"] = \
                (lambda s=solver, w=w: [infer(p, s, workers=w) for p in ps])
    variants["per function, builtin, pure Python"] = lambda: python_builtin()
    variants["per function, ortools, cache: first run"] = lambda: cached(True)
    variants["per function, ortools, cache: cached"] = lambda: cached(False)
    times: dict[str, list[float]] = {k: [] for k in variants}
    flows: dict[str, list] = {}
    for _ in range(rounds):
        for k, f in variants.items():
            t = time.perf_counter()
            got = f()
            times[k].append(time.perf_counter() - t)
            flows[k] = got
    print("  load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for k, ts in times.items():
        print(f"  {k:42s}: median {statistics.median(ts):6.2f} s  min {min(ts):5.2f}"
              f"  max {max(ts):5.2f}  (n={len(ts)})")
    for solver in ("ortools", "builtin"):
        ref = flows[f"per function, {solver}, 1 worker"]
        same = [k for k in flows if k.startswith(f"per function, {solver},")]
        ok = all(np.array_equal(x.block_flow, y.block_flow) and
                 np.array_equal(x.edge_flow, y.edge_flow)
                 for k in same for x, y in zip(flows[k], ref))
        print(f"  {solver}: the same flows in {len(same)} variants: "
              f"{'yes' if ok else 'NO'}")
    shutil.rmtree(cache_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/tmp/bbmap-bench-annotate")
    ap.add_argument("--binaries", default="manyfuncs,switchy")
    ap.add_argument("--samples", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import bench_annotate as ba

    from bbmap.inference import components

    components.PARALLEL_MIN_ARCS = 0  # the bench shows two workers whatever the size
    for name in a.binaries.split(","):
        exe = ba.build_binary(a.workdir, name, 20000)
        data = ba.record_ip(a.workdir, exe, a.samples)
        bench_one(exe, data, a.rounds)


if __name__ == "__main__":
    main()
