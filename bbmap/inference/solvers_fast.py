"""The built-in solver compiled: :func:`bbmap.inference.solvers._ssp` under numba.

Why: on a jump-table-heavy binary a profile's sampled functions are ~19,000 networks of
~150 arcs each; OR-Tools spends ~170 us on each (a graph build, a max-flow pass and the
cost-scaling phases, per call) and the Python ``_ssp`` twice that.  The same successive
shortest paths compiled by numba solve all of them in one call, with no Python per
function (spec/inference.md, "Per-function solves"; bench/bench_solve.py measures it).

It is the *same* algorithm, step for step, so its flows are the reference's flows, not
merely as cheap: the residual arcs of each node in the order ``_ssp`` appends them, the
Dijkstra from every node with excess at distance 0 popping the least ``(distance, node)``
pair first (what ``heapq`` pops from ``(d, u)`` tuples, whatever the heap's layout), a
predecessor replaced only by a strictly shorter path, the first node with a deficit
popped as the target, potentials raised by ``min(dist, dist[target])``, and the same
augmentation.  ``tests/test_solvers_fast.py`` holds the two equal with hypothesis.

numba is an optional extra (``pip install 'bbmap[fast]'``): the core install stays
light, and without it (or for networks too small to pay numba's import and the load of
the compiled code cached on disk, ~0.4 s CPU together: :data:`FAST_MIN_ARCS`) the
pure-Python ``_ssp`` runs.  Which of the two runs never changes a flow, so the size rule
is free to follow the measurements.  Costs and capacities must fit int64 sums
(:func:`fits`); a network that might not is left to ``_ssp``.  The kernel is in
:mod:`bbmap.inference.solvers_numba`, imported only when it runs.
"""

from __future__ import annotations

import numpy as np

from bbmap.installed import numba_available

FAST_MIN_ARCS = 200_000  # fewer arcs than this: the pure-Python solver (no numba import)
_LIMIT = 1 << 61  # no distance, potential or flow may reach this (int64 headroom)
available = numba_available  # the solver's name for it (bbmap.installed)


def fits(cap: np.ndarray, cost: np.ndarray, nodes: int) -> bool:
    """No path cost, potential or flow of a network with these columns can overflow int64:
    every distance is below ``nodes`` times the dearest arc, every flow below the sum of
    the capacities (unbounded arcs are capped by :mod:`bbmap.inference.components`)."""
    if not len(cap):
        return True
    c = int(np.abs(cost).max())
    total = float(cap.sum(dtype=np.float64)) if cap.min() >= 0 else float(_LIMIT)
    return 4 * (nodes + 1) * (c + 1) < _LIMIT and 2 * total < _LIMIT


def worth_it(arcs: int, cap: np.ndarray, cost: np.ndarray, nodes: int) -> bool:
    """Solve ``arcs`` arcs with the kernel: numba is there, the network is big enough to
    pay its import (:data:`FAST_MIN_ARCS`) and no sum can overflow (:func:`fits`)."""
    return arcs >= FAST_MIN_ARCS and available() and fits(cap, cost, nodes)


def solve_functions(ptr: np.ndarray, nodes: np.ndarray, tail: np.ndarray, head: np.ndarray,
                    cap: np.ndarray, cost: np.ndarray, lo: int, hi: int,
                    skip: np.ndarray | None = None) -> np.ndarray:
    """Flows of every arc of functions ``lo .. hi - 1`` (arcs ``ptr[k]:ptr[k+1]``, local
    nodes, ``nodes[k]`` of them), concatenated; functions with ``skip`` true left at 0.
    A network with no feasible flow is a :class:`~bbmap.errors.BBMapError` (as in
    ``_ssp``)."""
    from bbmap.errors import BBMapError
    from bbmap.inference import solvers_numba

    if skip is None:
        skip = np.zeros(len(ptr) - 1, np.bool_)
    i64 = np.int64
    out, bad = solvers_numba.solve_all(
        ptr.astype(i64, copy=False), nodes.astype(i64, copy=False),
        tail.astype(i64, copy=False), head.astype(i64, copy=False),
        cap.astype(i64, copy=False), cost.astype(i64, copy=False), int(lo), int(hi),
        skip.astype(np.bool_, copy=False))
    if bad >= 0:
        raise BBMapError("inference: built-in solver found no path (infeasible network)")
    return out
