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

import contextlib
import heapq
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from bbmap.errors import BBMapError

INF_CAPACITY = 1 << 50  # profi's INF (the values are summed, so not int64 max)


_preloading: list = []  # the preload thread, once started


def preload(name: str = "auto") -> None:
    """Start loading OR-Tools' extension library in a background thread, when ``name``
    may pick it: the dynamic loader's relocation of ``libortools`` is ~27 ms of the
    import, and the ``dlopen`` runs as a ctypes foreign call, without the GIL (``_dlopen``),
    so it overlaps the CFG and
    network work that comes before the solve (the import itself then finds the library
    loaded: <1 ms).  The thread runs nothing but the ``dlopen``: the library's path is
    found here without importing the ``ortools`` package (Python work in a second
    thread would take the GIL from the main one, and on a loaded machine each hand-over
    waits for the scheduler).  Any failure is left to the real import to report."""
    if name not in ("auto", "ortools") or _preloading:
        return
    from bbmap.inference import solvers_fast

    if name == "auto" and solvers_fast.available():
        return  # auto picks the compiled built-in solver (pick)
    import importlib.machinery
    import importlib.util

    _preloading.append(name)
    try:
        spec = importlib.util.find_spec("ortools")  # a top-level package: not imported
        where = list(spec.submodule_search_locations or []) if spec is not None else []
    except (ImportError, ValueError):
        return
    for base in where:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(base, "graph", "python", "min_cost_flow" + suffix)
            if os.path.isfile(path):
                import ctypes
                import threading

                threading.Thread(target=_dlopen, args=(ctypes, path), daemon=True,
                                 name="bbmap-preload-ortools").start()
                return


def _dlopen(ctypes, path: str) -> None:  # noqa: ANN001 - the ctypes module
    """``dlopen(path, RTLD_NOW)`` called as a foreign function: ctypes releases the GIL
    around foreign calls, but not around its own loader (``ctypes.CDLL(path)`` on
    CPython 3.11 holds the GIL for the whole load, so ``Thread.start`` itself waited
    ~30 ms for it).  The handle is kept open: the extension's import finds the library
    loaded (``RTLD_NOW`` is also what the import asks for, ``sys.getdlopenflags()``)."""
    with contextlib.suppress(OSError, AttributeError):
        dlopen = ctypes.CDLL(None).dlopen  # the process's own symbols (libc)
        dlopen.restype = ctypes.c_void_p
        dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
        dlopen(os.fsencode(path), os.RTLD_NOW)


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
    """``auto`` -> the built-in solver when its compiled form can run (numba installed,
    ``bbmap[fast]``: it solves a big profile's functions ~8x faster than OR-Tools,
    :mod:`bbmap.inference.solvers_fast`), else OR-Tools when installed, else the
    built-in solver.  A rule on what is installed, never on the network, so each
    function's flow still depends on that function alone."""
    if name == "auto":
        from bbmap.inference import solvers_fast

        if solvers_fast.available():
            return "builtin"
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
    solver is a Bellman-Ford variant of the same idea).

    The components come from the network (``Network.node_comp``: one per function) when
    it has them, else from a union-find over the arcs.  The search is issue 12's
    (``tests/oracles/ssp_oracle.py``, kept as the oracle) with its tie-breaking intact —
    heap order (distance, node), first improving arc in arc order, the first deficit node
    popped — over residual arcs (``2a`` forward, ``2a + 1`` backward) and local node
    numbers computed once, so it returns the very same flow, about twice as fast."""
    cap = _capacity_bound(net)
    tail, head, cost = net.tail, net.head, net.cost
    m = len(tail)
    flow = np.where(cost < 0, cap, 0).astype(np.int64)
    if not m:
        return flow, 0
    root = getattr(net, "node_comp", None)
    if root is None or len(root) != net.nodes:
        root = _union_find_roots(net.nodes, tail, head)
    arc_comp = root[tail]
    order = np.argsort(arc_comp, kind="stable")
    bounds = np.flatnonzero(np.r_[True, arc_comp[order][1:] != arc_comp[order][:-1], True])
    # local node numbers: a node's rank among its component's nodes (same order as ids)
    by_comp = np.lexsort((np.arange(net.nodes), root))
    rank = np.empty(net.nodes, np.int64)
    first = np.r_[0, np.flatnonzero(root[by_comp][1:] != root[by_comp][:-1]) + 1]
    size = np.diff(np.r_[first, net.nodes])
    rank[by_comp] = np.arange(net.nodes) - np.repeat(first, size)
    comp_size = dict(zip(root[by_comp][first].tolist(), size.tolist()))
    res = np.empty(2 * m, np.int64)  # residual capacities: forward, backward
    res[0::2] = cap - flow
    res[1::2] = flow
    resl = res.tolist()
    lt, lh, cl = rank[tail].tolist(), rank[head].tolist(), cost.tolist()
    roots = arc_comp[order[bounds[:-1]]].tolist()
    for i, r0 in enumerate(roots):
        _ssp(order[bounds[i]:bounds[i + 1]].tolist(), comp_size[r0], lt, lh, cl, resl)
    flow = np.array(resl[1::2], dtype=np.int64)
    return flow, int((flow * cost).sum())


def _union_find_roots(n: int, tail: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Each node's component, named by its smallest node (networks without node_comp)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for t, h in zip(tail.tolist(), head.tolist()):
        rt, rh = find(t), find(h)
        if rt != rh:
            parent[max(rt, rh)] = min(rt, rh)
    return np.array([find(x) for x in range(n)], dtype=np.int64)


def _ssp(arcs: list[int], n: int, lt: list[int], lh: list[int], cl: list[int],
         res: list[int]) -> None:
    """One component: ``arcs`` in arc order, ``n`` local nodes; updates ``res``."""
    heappush, heappop = heapq.heappush, heapq.heappop
    adj: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]  # (residual, to, cost)
    excess = [0] * n
    for a in arcs:
        u, v, c = lt[a], lh[a], cl[a]
        adj[u].append((2 * a, v, c))
        adj[v].append((2 * a + 1, u, -c))
        f = res[2 * a + 1]
        if f:
            excess[v] += f
            excess[u] -= f
    pot = [0] * n
    inf = float("inf")
    nodes = range(n)
    while True:
        sources = [u for u in nodes if excess[u] > 0]
        if not sources:
            return
        dist: list[float] = [inf] * n
        pred = [-1] * n  # residual arc into the node
        pfrom = [-1] * n  # ... and the node it leaves
        heap = [(0, u) for u in sources]
        for u in sources:
            dist[u] = 0
        heapq.heapify(heap)
        target = -1
        done = [False] * n
        while heap:
            d, u = heappop(heap)
            if done[u] or d > dist[u]:
                continue
            done[u] = True
            if excess[u] < 0:
                target = u
                break
            du = d + pot[u]
            for r, v, c in adj[u]:
                if res[r] <= 0:
                    continue
                nd = du + c - pot[v]
                if nd < dist[v]:
                    dist[v] = nd
                    pred[v] = r
                    pfrom[v] = u
                    heappush(heap, (nd, v))
        if target < 0:
            raise BBMapError("inference: built-in solver found no path (infeasible network)")
        dt = dist[target]
        pot = [p + (x if x < dt else dt) for p, x in zip(pot, dist)]  # type: ignore[misc]
        delta = -excess[target]
        v = target
        while pred[v] >= 0:
            r = res[pred[v]]
            if r < delta:
                delta = r
            v = pfrom[v]
        if excess[v] < delta:
            delta = excess[v]
        u = target
        while pred[u] >= 0:
            r = pred[u]
            res[r] -= delta
            res[r ^ 1] += delta
            u = pfrom[u]
        excess[u] -= delta
        excess[target] += delta


SOLVE: dict[str, Callable[[Any], tuple[np.ndarray, int]]] = {
    "ortools": solve_ortools, "builtin": solve_builtin, "scipy": solve_scipy}
