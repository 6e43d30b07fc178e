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
    inf = np.int64(1) << 62
    res = np.empty(2 * big_m, np.int64)
    adj_start = np.empty(big_n + 1, np.int64)
    adj_fill = np.empty(big_n, np.int64)
    adj_r = np.empty(2 * big_m, np.int64)
    adj_v = np.empty(2 * big_m, np.int64)
    adj_c = np.empty(2 * big_m, np.int64)
    excess = np.empty(big_n, np.int64)
    pot = np.empty(big_n, np.int64)
    dist = np.empty(big_n, np.int64)
    pred = np.empty(big_n, np.int64)
    pfrom = np.empty(big_n, np.int64)
    done = np.empty(big_n, np.bool_)
    heap_d = np.empty(2 * big_m + big_n + 1, np.int64)
    heap_u = np.empty(2 * big_m + big_n + 1, np.int64)
    for k in range(lo, hi):
        if skip[k]:
            continue
        p = ptr[k]
        m = ptr[k + 1] - p
        n = nodes[k]
        # residual capacities: negative-cost arcs start saturated
        for j in range(n):
            excess[j] = 0
            pot[j] = 0
            adj_start[j] = 0
        adj_start[n] = 0
        for a in range(m):
            f = cap[p + a] if cost[p + a] < 0 else 0
            res[2 * a] = cap[p + a] - f
            res[2 * a + 1] = f
            u = tail[p + a]
            v = head[p + a]
            adj_start[u + 1] += 1
            adj_start[v + 1] += 1
            if f != 0:
                excess[v] += f
                excess[u] -= f
        for j in range(n):
            adj_start[j + 1] += adj_start[j]
            adj_fill[j] = adj_start[j]
        for a in range(m):  # each node's residual arcs in the order _ssp appends them
            u = tail[p + a]
            v = head[p + a]
            c = cost[p + a]
            i = adj_fill[u]
            adj_r[i], adj_v[i], adj_c[i] = 2 * a, v, c
            adj_fill[u] = i + 1
            i = adj_fill[v]
            adj_r[i], adj_v[i], adj_c[i] = 2 * a + 1, u, -c
            adj_fill[v] = i + 1
        while True:
            hn = 0
            for j in range(n):
                dist[j] = inf
                pred[j] = -1
                pfrom[j] = -1
                done[j] = False
            for j in range(n):  # every source at distance 0; pushed in node order
                if excess[j] > 0:
                    dist[j] = 0
                    hn = _push(heap_d, heap_u, hn, 0, j)
            if hn == 0:
                break
            target = -1
            while hn > 0:
                d = heap_d[0]
                u = heap_u[0]
                hn = _pop(heap_d, heap_u, hn)
                if done[u] or d > dist[u]:
                    continue
                done[u] = True
                if excess[u] < 0:
                    target = u
                    break
                du = d + pot[u]
                for i in range(adj_start[u], adj_start[u + 1]):
                    r = adj_r[i]
                    if res[r] <= 0:
                        continue
                    v = adj_v[i]
                    nd = du + adj_c[i] - pot[v]
                    if nd < dist[v]:
                        dist[v] = nd
                        pred[v] = r
                        pfrom[v] = u
                        hn = _push(heap_d, heap_u, hn, nd, v)
            if target < 0:
                return out, k
            dt = dist[target]
            for j in range(n):
                pot[j] += dist[j] if dist[j] < dt else dt
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
        for a in range(m):
            out[p - a0 + a] = res[2 * a + 1]
    return out, -1


@_jit
def _less(d1, u1, d2, u2):  # noqa: ANN001, ANN202
    return d1 < d2 or (d1 == d2 and u1 < u2)


@_jit
def _push(hd, hu, n, d, u):  # noqa: ANN001, ANN202
    """Add ``(d, u)`` to the binary heap of ``n`` pairs; returns the new size."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if _less(d, u, hd[parent], hu[parent]):
            hd[i] = hd[parent]
            hu[i] = hu[parent]
            i = parent
        else:
            break
    hd[i] = d
    hu[i] = u
    return n + 1


@_jit
def _pop(hd, hu, n):  # noqa: ANN001, ANN202
    """Remove the least pair (at 0) from the heap of ``n`` pairs; returns the new size."""
    n -= 1
    d = hd[n]
    u = hu[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(hd[c + 1], hu[c + 1], hd[c], hu[c]):
            c += 1
        if _less(hd[c], hu[c], d, u):
            hd[i] = hd[c]
            hu[i] = hu[c]
            i = c
        else:
            break
    if n > 0:
        hd[i] = d
        hu[i] = u
    return n
