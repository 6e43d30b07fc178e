"""The numba kernel of :mod:`bbmap.inference.solvers_fast` (imported only when it runs:
importing numba is ~0.4 s, more than a small network's whole solve).

Each function below is ``_ssp``'s step written on flat int64 arrays; see
:mod:`bbmap.inference.solvers_fast` for why the flows are the reference's.
"""

from __future__ import annotations

import numpy as np

try:
    import numba as _numba
except ImportError:  # the optional extra is not installed: the reference solver runs
    _numba = None


def _jit(f):  # noqa: ANN001, ANN202
    """``f`` compiled (cached on disk beside the module) when numba is there, else ``f``
    itself (pure Python: what the equality test can also run)."""
    return f if _numba is None else _numba.njit(cache=True, nogil=True)(f)


@_jit
def solve_all(ptr, nodes, tail, head, cap, cost, lo, hi, skip):  # noqa: ANN001, ANN202
    """The numba kernel: every function of ``lo .. hi - 1`` by ``_ssp``'s steps.  Returns
    (flows, index of an infeasible function or -1)."""
    a0 = ptr[lo]
    out = np.zeros(ptr[hi] - a0, np.int64)
    big_n = 1
    big_m = 1
    for k in range(lo, hi):
        big_n = max(big_n, nodes[k])
        big_m = max(big_m, ptr[k + 1] - ptr[k])
    res = np.empty(2 * big_m, np.int64)
    adj = np.empty((3, 2 * big_m), np.int64)  # each node's residual arcs: arc, to, cost
    start = np.empty(big_n + 1, np.int64)
    excess = np.empty(big_n, np.int64)
    pot = np.empty(big_n, np.int64)
    dist = np.empty(big_n, np.int64)
    pred = np.empty((2, big_n), np.int64)  # residual arc into each node, the node it leaves
    done = np.empty(big_n, np.bool_)
    heap = np.empty((2, 2 * big_m + big_n + 1), np.int64)
    for k in range(lo, hi):
        if skip[k]:
            continue
        p = ptr[k]
        m = ptr[k + 1] - p
        n = nodes[k]
        _residual(tail[p:p + m], head[p:p + m], cap[p:p + m], cost[p:p + m], n, res, adj,
                  start, excess)
        pot[:n] = 0
        while True:
            target = _shortest_path(n, res, adj, start, excess, pot, dist, pred, done, heap)
            if target == -2:
                break
            if target < 0:
                return out, k
            _augment(n, target, res, excess, pot, dist, pred)
        for a in range(m):
            out[p - a0 + a] = res[2 * a + 1]
    return out, -1


@_jit
def _residual(tail, head, cap, cost, n, res, adj, start, excess):  # noqa: ANN001, ANN202
    """One function's residual network: negative-cost arcs saturated (their ends' excess),
    each node's residual arcs in CSR (``start``) in the order ``_ssp`` appends them."""
    m = len(tail)
    excess[:n] = 0
    start[:n + 1] = 0
    for a in range(m):
        f = cap[a] if cost[a] < 0 else 0
        res[2 * a] = cap[a] - f
        res[2 * a + 1] = f
        start[tail[a] + 1] += 1
        start[head[a] + 1] += 1
        if f != 0:
            excess[head[a]] += f
            excess[tail[a]] -= f
    for j in range(n):
        start[j + 1] += start[j]
    fill = start[:n].copy()
    for a in range(m):
        u, v, c = tail[a], head[a], cost[a]
        i = fill[u]
        adj[0, i], adj[1, i], adj[2, i] = 2 * a, v, c
        fill[u] = i + 1
        i = fill[v]
        adj[0, i], adj[1, i], adj[2, i] = 2 * a + 1, u, -c
        fill[v] = i + 1


@_jit
def _shortest_path(n, res, adj, start, excess, pot, dist, pred, done, heap):  # noqa: ANN001, ANN202
    """Dijkstra (reduced costs) from every node with excess to the first node with a
    deficit popped: that node, -2 when no node has excess, -1 when none is reached."""
    inf = np.int64(1) << 62
    dist[:n] = inf
    pred[:, :n] = -1
    done[:n] = False
    hn = 0
    for j in range(n):  # every source at distance 0
        if excess[j] > 0:
            dist[j] = 0
            hn = _push(heap, hn, 0, j)
    if hn == 0:
        return -2
    while hn > 0:
        d = heap[0, 0]
        u = heap[1, 0]
        hn = _pop(heap, hn)
        if done[u] or d > dist[u]:
            continue
        done[u] = True
        if excess[u] < 0:
            return u
        du = d + pot[u]
        for i in range(start[u], start[u + 1]):
            r = adj[0, i]
            if res[r] <= 0:
                continue
            v = adj[1, i]
            nd = du + adj[2, i] - pot[v]
            if nd < dist[v]:
                dist[v] = nd
                pred[0, v] = r
                pred[1, v] = u
                hn = _push(heap, hn, nd, v)
    return -1


@_jit
def _augment(n, target, res, excess, pot, dist, pred):  # noqa: ANN001, ANN202
    """Raise the potentials by ``min(dist, dist[target])`` and push the path's bottleneck
    (at most the source's excess and the target's deficit) along it."""
    dt = dist[target]
    for j in range(n):
        pot[j] += dist[j] if dist[j] < dt else dt
    delta = -excess[target]
    v = target
    while pred[0, v] >= 0:
        r = res[pred[0, v]]
        if r < delta:
            delta = r
        v = pred[1, v]
    if excess[v] < delta:
        delta = excess[v]
    u = target
    while pred[0, u] >= 0:
        r = pred[0, u]
        res[r] -= delta
        res[r ^ 1] += delta
        u = pred[1, u]
    excess[u] -= delta
    excess[target] += delta


@_jit
def _less(d1, u1, d2, u2):  # noqa: ANN001, ANN202
    return d1 < d2 or (d1 == d2 and u1 < u2)


@_jit
def _push(heap, n, d, u):  # noqa: ANN001, ANN202
    """Add ``(d, u)`` to the binary heap of ``n`` pairs (``heap[0]`` distances, ``heap[1]``
    nodes; least pair first, as ``heapq`` orders tuples); returns the new size."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if _less(d, u, heap[0, parent], heap[1, parent]):
            heap[0, i] = heap[0, parent]
            heap[1, i] = heap[1, parent]
            i = parent
        else:
            break
    heap[0, i] = d
    heap[1, i] = u
    return n + 1


@_jit
def _pop(heap, n):  # noqa: ANN001, ANN202
    """Remove the least pair (at 0) from the heap of ``n`` pairs; returns the new size."""
    n -= 1
    d = heap[0, n]
    u = heap[1, n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(heap[0, c + 1], heap[1, c + 1], heap[0, c], heap[1, c]):
            c += 1
        if _less(heap[0, c], heap[1, c], d, u):
            heap[0, i] = heap[0, c]
            heap[1, i] = heap[1, c]
            i = c
        else:
            break
    if n > 0:
        heap[0, i] = d
        heap[1, i] = u
    return n
