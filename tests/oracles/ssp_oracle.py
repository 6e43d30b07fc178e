"""The built-in min-cost circulation solver as it was first written, kept verbatim as the
oracle of the faster one in :mod:`bbmap.inference.solvers`: the same
successive-shortest-paths algorithm with the same tie-breaking, so the two must return
the same flow on every network, not just the same objective
(tests/test_inference_solver_builtin.py)."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from bbmap.errors import BBMapError
from bbmap.inference.solvers import _capacity_bound


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
