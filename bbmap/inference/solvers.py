"""Min-cost circulation solvers for :mod:`bbmap.inference.flow`'s network.

Each takes a :class:`~bbmap.inference.flow.Network` (arc columns: tail, head, capacity,
integer cost, some costs negative; every node's supply is 0) and returns the flow of every
arc and the objective.  The choice and its measurements are in spec/inference.md:

* ``ortools``: OR-Tools ``SimpleMinCostFlow`` (cost scaling, C++), arcs added as numpy
  columns in one call.  The fastest measured; an optional dependency (``bbmap[inference]``)
  because the wheel and its dependencies weigh ~70 MB.
* ``builtin``: successive shortest paths (Dijkstra with potentials) in Python, one
  component at a time.  Always available; exact, but slower (seconds on 10,000 functions).
* ``scipy``: HiGHS dual simplex on the LP form (``scipy.optimize.linprog``); measured,
  not the default (slower than OR-Tools and as heavy).

All three give an optimal circulation; where several are optimal they may pick different
ones (the tests compare objective values, not flows).  Each is deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from bbmap.errors import BBMapError

INF_CAPACITY = 1 << 50  # profi's INF (the values are summed, so not int64 max)


def available(name: str) -> bool:
    try:
        if name == "ortools":
            from ortools.graph.python import min_cost_flow  # noqa: F401
        elif name == "scipy":
            import scipy.optimize  # noqa: F401
    except ImportError:
        return False
    return name in SOLVE


def pick(name: str) -> str:
    """``auto`` -> OR-Tools when installed, else the built-in solver."""
    if name == "auto":
        return "ortools" if available("ortools") else "builtin"
    if name not in SOLVE:
        raise BBMapError(f"unknown inference solver {name!r} (ortools, builtin, scipy)")
    if not available(name):
        raise BBMapError(f"the {name} solver is not installed (pip install "
                         f"'bbmap[inference]' for OR-Tools)")
    return name


def _capacity_bound(net: Any) -> np.ndarray:
    """Unbounded arcs capped at the largest useful flow: no optimal circulation carries
    more than the sum of all finite capacities on any arc (every raise costs > 0)."""
    finite = net.cap < INF_CAPACITY
    bound = int(net.cap[finite].sum()) + 1 if finite.any() else 1
    return np.where(finite, net.cap, bound).astype(np.int64)


def solve_ortools(net: Any) -> tuple[np.ndarray, int]:
    from ortools.graph.python import min_cost_flow

    smcf = min_cost_flow.SimpleMinCostFlow()
    cap = _capacity_bound(net)
    arcs = smcf.add_arcs_with_capacity_and_unit_cost(net.tail, net.head, cap, net.cost)
    status = smcf.solve()
    if status != smcf.OPTIMAL:
        raise BBMapError(f"inference: OR-Tools min-cost flow failed (status {status})")
    return np.asarray(smcf.flows(arcs), dtype=np.int64), int(smcf.optimal_cost())


def solve_scipy(net: Any) -> tuple[np.ndarray, int]:
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix

    n, m = net.nodes, len(net.tail)
    cols = np.arange(m)
    a = csr_matrix((np.r_[np.ones(m), -np.ones(m)], (np.r_[net.tail, net.head],
                                                     np.r_[cols, cols])), shape=(n, m))
    cap = _capacity_bound(net)
    res = linprog(net.cost.astype(np.float64), A_eq=a, b_eq=np.zeros(n),
                  bounds=np.c_[np.zeros(m), cap.astype(np.float64)], method="highs-ds")
    if res.status != 0:
        raise BBMapError(f"inference: HiGHS failed ({res.message})")
    flow = np.rint(res.x).astype(np.int64)
    return flow, int((flow * net.cost).sum())


def solve_builtin(net: Any) -> tuple[np.ndarray, int]:
    """Successive shortest paths per weakly connected component (each function is one).

    Negative-cost arcs are saturated first; the excess and deficit that leaves at their
    ends is then routed along shortest paths of the residual network, whose costs are all
    non-negative, with Dijkstra and node potentials (the textbook method; profi's own
    solver is a Bellman-Ford variant of the same idea)."""
    cap = _capacity_bound(net)
    tail, head, cost = net.tail, net.head, net.cost
    m = len(tail)
    flow = np.where(cost < 0, cap, 0).astype(np.int64)
    # components: union-find over arcs
    parent = list(range(net.nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for t, h in zip(tail.tolist(), head.tolist()):
        rt, rh = find(t), find(h)
        if rt != rh:
            parent[max(rt, rh)] = min(rt, rh)
    root = np.array([find(x) for x in range(net.nodes)], dtype=np.int64)
    arc_comp = root[tail]
    order = np.argsort(arc_comp, kind="stable")
    bounds = np.flatnonzero(np.r_[True, arc_comp[order][1:] != arc_comp[order][:-1], True])
    capl, costl, tl, hl = cap.tolist(), cost.tolist(), tail.tolist(), head.tolist()
    fl = flow.tolist()
    for i in range(len(bounds) - 1):
        arcs = order[bounds[i]:bounds[i + 1]].tolist()
        _ssp(arcs, tl, hl, capl, costl, fl)
    flow = np.array(fl, dtype=np.int64) if m else np.zeros(0, np.int64)
    return flow, int((flow * cost).sum())


def _ssp(arcs: list[int], tl: list[int], hl: list[int], capl: list[int], costl: list[int],
         fl: list[int]) -> None:
    nodes = sorted({tl[a] for a in arcs} | {hl[a] for a in arcs})
    idx = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (arc, +1 forward / -1 back)
    excess = [0] * n
    for a in arcs:
        u, v = idx[tl[a]], idx[hl[a]]
        adj[u].append((a, 1))
        adj[v].append((a, -1))
        if fl[a]:
            excess[v] += fl[a]
            excess[u] -= fl[a]
    pot = [0] * n
    inf = float("inf")
    while True:
        sources = [u for u in range(n) if excess[u] > 0]
        if not sources:
            return
        dist = [inf] * n
        pred: list[tuple[int, int] | None] = [None] * n
        heap = [(0, u) for u in sources]
        for u in sources:
            dist[u] = 0
        heapq.heapify(heap)
        target = -1
        done = [False] * n
        while heap:
            d, u = heapq.heappop(heap)
            if done[u] or d > dist[u]:
                continue
            done[u] = True
            if excess[u] < 0:
                target = u
                break
            for a, sgn in adj[u]:
                if sgn == 1:
                    res, v, c = capl[a] - fl[a], idx[hl[a]], costl[a]
                else:
                    res, v, c = fl[a], idx[tl[a]], -costl[a]
                if res <= 0:
                    continue
                nd = d + c + pot[u] - pot[v]
                if nd < dist[v]:
                    dist[v] = nd
                    pred[v] = (a, sgn)
                    heapq.heappush(heap, (nd, v))
        if target < 0:
            raise BBMapError("inference: built-in solver found no path (infeasible network)")
        dt = dist[target]
        for u in range(n):
            pot[u] += min(dist[u], dt) if dist[u] < inf else dt
        # path capacity
        delta = -excess[target]
        v = target
        while pred[v] is not None:
            a, sgn = pred[v]  # type: ignore[misc]
            if sgn == 1:
                delta = min(delta, capl[a] - fl[a])
                v = idx[tl[a]]
            else:
                delta = min(delta, fl[a])
                v = idx[hl[a]]
        delta = min(delta, excess[v])
        u = target
        while pred[u] is not None:
            a, sgn = pred[u]  # type: ignore[misc]
            fl[a] += delta * sgn
            u = idx[tl[a]] if sgn == 1 else idx[hl[a]]
        excess[u] -= delta
        excess[target] += delta


SOLVE: dict[str, Callable[[Any], tuple[np.ndarray, int]]] = {
    "ortools": solve_ortools, "builtin": solve_builtin, "scipy": solve_scipy}
