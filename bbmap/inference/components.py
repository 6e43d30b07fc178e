"""One min-cost-flow solve per function: each function's flow depends on that function alone.

The network of :mod:`bbmap.inference.flow` holds every inferred function as one weakly
connected component.  A solver given the whole network may pick among a function's equal-
cost flows by what the *other* functions hold (OR-Tools' cost scaling starts from the
largest cost of the whole network and its node count, and works on all nodes at once), so
one function's counts changed when another function's samples did, and nothing could be
split, cached or run in parallel.  Here each function is cut out as its own network, in a
canonical form that names nothing outside it:

* its arcs in the order the whole network lists them (the arc groups of
  :func:`~bbmap.inference.flow.build_network`, each in block order), numbered from 0;
* its nodes numbered by rank among its own nodes (``b.in``, ``b.out`` in block order, then
  its source and sink);
* its unbounded arcs capped at one more than the sum of *its* finite capacities (no
  optimal flow of the function carries more), and its floor reward computed from its own
  size (:func:`~bbmap.inference.flow.floor_costs`).

That network is solved on its own by a deterministic solver, so the tie-break among a
function's optimal flows is a function of that function's network alone: bbmap's own,
whatever else the profile holds.  Hence the counts are the same whatever the other
functions, the order the functions come in, the number of worker processes, or whether
the flow came from the cache (:mod:`bbmap.inference.flow_cache`, keyed by the canonical
network's bytes; a function whose samples did not change since a profile was last solved
is taken from it, e.g. after a merge).

Which solver solves a function: ``builtin`` (successive shortest paths,
:func:`bbmap.inference.solvers._ssp`; compiled by numba for a big network when
``bbmap[fast]`` is installed, :mod:`bbmap.inference.solvers_fast`, with the same flows),
``ortools`` (OR-Tools ``SimpleMinCostFlow``, one per function) or ``scipy``.  ``auto``
picks the built-in solver where numba is installed (the compiled kernel solved a
jump-table-heavy profile's 18,638 functions in 0.3 s CPU where OR-Tools took 3.0 s),
else OR-Tools where it is (faster per function than the Python ``_ssp`` at every
function size of both bench binaries), else the built-in solver.  No rule looks at the
network, so a function's flow never depends on the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from bbmap.errors import BBMapError
from bbmap.inference.solvers import INF_CAPACITY

ENV_WORKERS = "BBMAP_INFERENCE_WORKERS"
PARALLEL_MIN_ARCS = 200_000  # fewer arcs than this: one process (a pool costs more)


@dataclass
class Split:
    """The whole network cut into canonical per-function networks (concatenated).

    Arcs of function ``k`` are ``arc[ptr[k]:ptr[k+1]]`` (indexes into the whole network),
    with local ``tail``/``head`` (node ranks within the function, ``nodes[k]`` of them),
    ``cap`` (unbounded arcs capped per function) and ``cost``."""

    arc: np.ndarray
    ptr: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    cap: np.ndarray
    cost: np.ndarray
    nodes: np.ndarray

    @property
    def count(self) -> int:
        return len(self.ptr) - 1


def split_network(net: Any) -> Split:
    """Cut ``net`` (a :class:`~bbmap.inference.flow.Network` with ``node_comp``) into its
    functions' canonical networks (the module docstring), vectorized.  Few whole-network
    temporaries: on a big profile the time here is mostly fresh pages for them."""
    tail, head = net.tail, net.head
    m = len(tail)
    root = net.node_comp
    if root is None or len(root) != net.nodes:
        raise BBMapError("inference: the network does not say its functions")
    if not m:
        z = np.zeros(0, np.int64)
        return Split(arc=z, ptr=np.zeros(1, np.int64), tail=z, head=z, cap=z, cost=z, nodes=z)
    arc_comp = root[tail]
    order = np.argsort(arc_comp, kind="stable")  # by function, whole-network order within
    per_comp = np.bincount(arc_comp)
    comps = np.flatnonzero(per_comp)  # the functions with arcs, in id order
    cut = np.zeros(len(comps) + 1, np.int64)
    np.cumsum(per_comp[comps], out=cut[1:])
    rank, comp_nodes = _node_ranks(net, root)
    # unbounded arcs capped at one more than the sum of their function's finite capacities
    cap = net.cap[order].astype(np.int64, copy=False)
    unbounded = np.flatnonzero(cap >= INF_CAPACITY)
    cap[unbounded] = 0
    bound = np.add.reduceat(cap, cut[:-1]) + 1
    fn_of = np.searchsorted(comps, arc_comp[order[unbounded]])
    cap[unbounded] = bound[fn_of]
    return Split(arc=order, ptr=cut, tail=rank[tail[order]], head=rank[head[order]],
                 cap=cap, cost=net.cost[order].astype(np.int64, copy=False),
                 nodes=comp_nodes[comps])


def _node_ranks(net: Any, root: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each node's rank among its function's nodes (ids ascend within a function), and
    each function's node count (by function id).  For
    :func:`~bbmap.inference.flow.build_network`'s numbering (``b.in = 2b``,
    ``b.out = 2b + 1``, blocks grouped by function in order, then each function's source
    and sink) the ranks are arithmetic; any other numbering is sorted."""
    n = net.nodes
    block_in = getattr(net, "block_in", None)
    B = len(block_in) if block_in is not None else -1
    C = (n - 2 * B) // 2
    if B >= 0 and C >= 0 and n == 2 * B + 2 * C:
        comp_b = root[0:2 * B:2]
        if (bool((np.diff(comp_b) >= 0).all()) and np.array_equal(root[1:2 * B:2], comp_b)
                and np.array_equal(root[2 * B:], np.repeat(np.arange(C), 2))):
            size = np.bincount(comp_b, minlength=C).astype(np.int64)
            first = np.cumsum(size) - size
            rank = np.empty(n, np.int64)
            np.subtract(np.arange(2 * B), 2 * first[root[:2 * B]], out=rank[:2 * B])
            rank[2 * B::2] = 2 * size
            rank[2 * B + 1::2] = 2 * size + 1
            return rank, 2 * size + 2
    by_comp = np.lexsort((np.arange(n), root))
    rank = np.empty(n, np.int64)
    rc = root[by_comp]
    first = np.r_[0, np.flatnonzero(rc[1:] != rc[:-1]) + 1] if n else np.zeros(0, np.int64)
    size = np.diff(np.r_[first, n])
    rank[by_comp] = np.arange(n) - np.repeat(first, size)
    comp_nodes = np.zeros(int(root.max()) + 1 if n else 0, np.int64)
    comp_nodes[rc[first]] = size
    return rank, comp_nodes

def solve_split(s: Split, solver: str, lo: int = 0, hi: int | None = None,
                skip: np.ndarray | None = None) -> np.ndarray:
    """The flow of every arc of functions ``lo .. hi - 1`` of ``s`` (concatenated, in
    ``s``'s arc order), each function solved alone; functions with ``skip`` true are left
    at 0 (their flow is known already)."""
    from bbmap.inference import solvers

    hi = s.count if hi is None else hi
    if solver == "auto":
        solver = "ortools" if solvers.available("ortools") else "builtin"
    a0, a1 = int(s.ptr[lo]), int(s.ptr[hi])
    if solver == "builtin":
        from bbmap.inference import solvers_fast

        todo = a1 - a0  # arcs to solve: the cache's hits cost nothing
        if skip is not None and todo:
            todo -= int(np.diff(s.ptr)[lo:hi][skip[lo:hi]].sum())
        if solvers_fast.worth_it(todo, s.cap, s.cost,
                                 int(s.nodes.max()) if len(s.nodes) else 0):
            return solvers_fast.solve_functions(s.ptr, s.nodes, s.tail, s.head, s.cap,
                                                s.cost, lo, hi, skip)
    out = np.zeros(a1 - a0, np.int64)
    ptr = s.ptr.tolist()
    nodes = s.nodes.tolist()
    one = _SOLVE_ONE[solver]
    for k in range(lo, hi):
        if skip is not None and skip[k]:
            continue
        p, q = ptr[k], ptr[k + 1]
        out[p - a0:q - a0] = one(s, p, q, nodes[k])
    return out


def _lists(s: Split, a0: int, a1: int) -> tuple[list, list, list, list]:
    cap, cost = s.cap[a0:a1], s.cost[a0:a1]
    flow = np.where(cost < 0, cap, 0)
    res = np.empty(2 * (a1 - a0), np.int64)
    res[0::2] = cap - flow
    res[1::2] = flow
    return res.tolist(), s.tail[a0:a1].tolist(), s.head[a0:a1].tolist(), cost.tolist()


def _one_ortools(s: Split, p: int, q: int, n: int) -> np.ndarray:
    from ortools.graph.python import min_cost_flow

    smcf = min_cost_flow.SimpleMinCostFlow()
    arcs = smcf.add_arcs_with_capacity_and_unit_cost(s.tail[p:q], s.head[p:q], s.cap[p:q],
                                                      s.cost[p:q])
    status = smcf.solve()
    if status != smcf.OPTIMAL:
        raise BBMapError(f"inference: OR-Tools min-cost flow failed (status {status})")
    return np.asarray(smcf.flows(arcs), dtype=np.int64)


def _one_builtin(s: Split, p: int, q: int, n: int) -> np.ndarray:
    from bbmap.inference.solvers import _ssp

    res, lt, lh, cl = _lists(s, p, q)
    _ssp(list(range(q - p)), n, lt, lh, cl, res)
    return np.asarray(res[1::2], dtype=np.int64)


def _one_scipy(s: Split, p: int, q: int, n: int) -> np.ndarray:
    from bbmap.inference.solvers import solve_scipy

    net = _Sub(s.tail[p:q], s.head[p:q], s.cap[p:q], s.cost[p:q], n)
    return solve_scipy(net)[0]


@dataclass
class _Sub:
    tail: np.ndarray
    head: np.ndarray
    cap: np.ndarray
    cost: np.ndarray
    nodes: int


_SOLVE_ONE = {"ortools": _one_ortools, "builtin": _one_builtin, "scipy": _one_scipy}


def workers_from_env(workers: int | None) -> int:
    """``workers`` when given, else ``$BBMAP_INFERENCE_WORKERS``, else 1; a bad value of
    the variable is an error naming it."""
    if workers is not None:
        if workers < 1:
            raise BBMapError(f"inference workers must be at least 1, not {workers}")
        return workers
    v = os.environ.get(ENV_WORKERS, "").strip()
    if not v:
        return 1
    if v == "auto":
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else os.cpu_count() or 1)
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise BBMapError(f"{ENV_WORKERS}={v!r}: a number of worker processes (>= 1) or "
                         "'auto' expected")
    return n


def solve_functions(s: Split, solver: str, workers: int = 1,
                    skip: np.ndarray | None = None) -> np.ndarray:
    """Every function of ``s`` solved alone (the module docstring); ``workers`` > 1 shares
    the functions among that many processes (contiguous runs of about equal arc counts).
    The flows (in ``s``'s arc order) are the same for any ``workers``."""
    m = int(s.ptr[-1])
    if workers <= 1 or s.count < 2 or m < PARALLEL_MIN_ARCS:
        return solve_split(s, solver, skip=skip)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    work = np.diff(s.ptr).astype(np.float64) ** 1.2  # bigger functions cost more per arc
    if skip is not None:
        work[skip] = 0
    cum = np.cumsum(work)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, workers) / workers, side="right")
    bounds = np.unique(np.r_[0, np.minimum(cuts, s.count), s.count]).tolist()
    out = np.zeros(m, np.int64)
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(bounds) - 1, mp_context=ctx,
                             initializer=_init_worker, initargs=(s, skip)) as ex:
        futs = [(lo, ex.submit(_worker, solver, lo, hi))
                for lo, hi in zip(bounds[:-1], bounds[1:])]
        for lo, f in futs:
            got = f.result()
            a0 = int(s.ptr[lo])
            out[a0:a0 + len(got)] = got
    return out


_WORK: dict[str, Any] = {}


def _init_worker(s: Split, skip: np.ndarray | None) -> None:
    _WORK["split"], _WORK["skip"] = s, skip


def _worker(solver: str, lo: int, hi: int) -> np.ndarray:
    return solve_split(_WORK["split"], solver, lo, hi, _WORK["skip"])
