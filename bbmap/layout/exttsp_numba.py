"""The numba kernel of :class:`bbmap.layout.exttsp._FastMerger`: one pair of chains scored for a
merge, both of :class:`~bbmap.layout.exttsp._Merger`'s evaluators, step for step.

Imported only when it runs (importing numba is ~0.4 s, more than a mid-sized function's
whole layout).  Without numba the functions below are plain Python -- slow, but the
equality tests run them so in CI, which has no numba.

Why the results are the reference's to the last bit: every float is made by the same
IEEE operations in the same order as the Python/numpy code it replaces.

* a jump's score: ``_Merger._score``'s formula (``max(0, c_fw - d_fw * d)`` forward,
  ``max(0, c_bw + d_bw * d)`` backward, the fall-through weight at 0), the integer
  distance converted to float64 as numpy's mixed-type multiply does;
* merges of at most ``SMALL_MERGE`` blocks (:meth:`_Merger._best_merge_small`): sums one by
  one, split rows from one interleaved difference list (``diff[lo] += d; diff[hi] -= d``,
  zero deltas skipped), the same candidate pruning;
* longer merges (:meth:`_Merger._best_merge`): the sums over the jumps between the chains
  as ``ndarray.sum`` makes them (numpy's pairwise summation, :func:`_pw`, the twin of
  ``exttsp._np_sum``), split rows as ``bincount(lo) - bincount(hi)`` then ``cumsum``, the
  bounds of ``_ft_bounds_np`` (its matrix products have one non-zero term per output, so
  they are exact whatever BLAS does) and argmax's first maximum in row-major order;
* the one step whose rounding belongs to BLAS -- ``_self_gains_at``'s ``delta @ cross``
  on a long chain with few split positions -- is not redone here: the kernel returns a
  request and the caller computes those rows with the reference code and calls again.

Arrays (see :class:`bbmap.layout.exttsp._FastMerger`): ``F`` float64 (7, E) per jump
``ft, c_fw, d_fw, c_bw, d_bw, top, lo``; ``EN`` int64 (2, E) sources and targets; ``N``
int64 (4, n) per block size, chain id, position and byte offset in its chain; ``P`` int64
``chain_split, chain_split_threshold, split_along_jumps, bounds_valid, SMALL_MERGE``.
"""

from __future__ import annotations

import numpy as np

try:
    import numba as _numba
except ImportError:  # the optional extra is not installed: the reference merger runs
    _numba = None


def compiled() -> bool:
    """numba imported: the functions below are compiled (else plain Python, ~6x slower
    than the reference merger -- only the equality tests run them so)."""
    return _numba is not None


def _jit(f):  # noqa: ANN001, ANN202
    """``f`` compiled (cached on disk beside the module) when numba is there, else ``f``
    itself (pure Python: what the equality tests can also run)."""
    return f if _numba is None else _numba.njit(cache=True, nogil=True)(f)


# merge kinds, as in exttsp (the order is the tie order)
X_Y, Y_X, X1_Y_X2, Y_X2_X1, X2_X1_Y, X2_Y_X1 = 0, 1, 2, 3, 4, 5
# rows of F / N
FT, CFW, DFW, CBW, DBW, TOP, LO = 0, 1, 2, 3, 4, 5, 6
SIZE, CHAIN, POS, OFF = 0, 1, 2, 3
NEG_INF = -np.inf


@_jit
def _score(F, e, d):  # noqa: ANN001, ANN202
    """Score of jump ``e`` at distance ``d`` (``_Merger._score`` / ``_score1``)."""
    if d == 0:
        return F[FT, e]
    if d > 0:
        v = F[CFW, e] - F[DFW, e] * d
    else:
        v = F[CBW, e] + F[DBW, e] * d
    return v if v > 0.0 else 0.0


@_jit
def _pw_leaf(a, lo, n):  # noqa: ANN001, ANN202
    """numpy's pairwise-summation leaf (``n <= 128``): a plain loop from 0.0 below 8
    items, else eight running sums combined as a tree, then the tail one by one."""
    if n < 8:
        r = 0.0
        for i in range(lo, lo + n):
            r += a[i]
        return r
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    r = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for j in range(stop, n):
        r += a[lo + j]
    return r


@_jit
def _pw(a, lo, n):  # noqa: ANN001, ANN202
    """``a[lo:lo + n].sum()`` as numpy makes it (pairwise; ``exttsp._np_sum``): above 128
    items the sum of the two halves, cut at a multiple of 8.  The recursion is unrolled
    onto a stack: numba's on-disk cache of a self-recursive function crashed when loaded
    (numba 0.68; a fresh compile ran)."""
    if n <= 128:
        return _pw_leaf(a, lo, n)
    s_lo = np.empty(64, np.int64)
    s_n = np.empty(64, np.int64)
    s_ph = np.empty(64, np.int64)
    vals = np.empty(64)
    sp, vp = 1, 0
    s_lo[0], s_n[0], s_ph[0] = lo, n, 0
    while sp:
        t = sp - 1
        m = s_n[t]
        if s_ph[t] == 0 and m <= 128:
            vals[vp] = _pw_leaf(a, s_lo[t], m)
            vp += 1
            sp -= 1
            continue
        h = m // 2
        h -= h % 8
        if s_ph[t] == 0:  # the left half first
            s_ph[t] = 1
            s_lo[sp], s_n[sp], s_ph[sp] = s_lo[t], h, 0
            sp += 1
        elif s_ph[t] == 1:  # then the right half
            s_ph[t] = 2
            s_lo[sp], s_n[sp], s_ph[sp] = s_lo[t] + h, m - h, 0
            sp += 1
        else:  # both done: left + right
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
            sp -= 1
    return vals[0]


@_jit
def _shift(kind, lx, ly):  # noqa: ANN001, ANN202
    """How far a crossing forward jump of X moves under a split kind."""
    if kind == X1_Y_X2:
        return ly
    if kind == X2_Y_X1:
        return -(lx + ly)
    return -lx


@_jit
def _bases(kind, lx, ly):  # noqa: ANN001, ANN202
    """``exttsp._BASES``: (a1, c1, a2, c2, ay, cy)."""
    if kind == X1_Y_X2:
        return 0, 0, 0, ly, 1, 0
    if kind == Y_X2_X1:
        return -1, ly + lx, -1, ly, 0, 0
    if kind == X2_X1_Y:
        return -1, lx, -1, 0, 0, lx
    return -1, lx + ly, -1, 0, -1, lx


@_jit
def _jump_delta(F, EN, N, e, shift):  # noqa: ANN001, ANN202
    """One own jump ``e`` of a chain: the positions it spans (lo, hi) and what its score
    gains when the blocks between them move by ``shift`` bytes (both rows' step)."""
    s = EN[0, e]
    d = EN[1, e]
    ps = N[POS, s]
    pd = N[POS, d]
    dist = N[OFF, d] - (N[OFF, s] + N[SIZE, s])
    old = _score(F, e, dist)
    if ps < pd:
        lo, hi, dd = ps, pd, dist + shift
    else:
        lo, hi, dd = pd, ps, dist - shift
    return lo, hi, _score(F, e, dd) - old


@_jit
def _small_row(F, EN, N, L, sj, shift):  # noqa: ANN001, ANN202, E741
    """``_Merger._self_rows_small``'s row for one shift (L + 1 entries)."""
    diff = np.zeros(L + 1)
    for q in range(len(sj)):
        lo, hi, delta = _jump_delta(F, EN, N, sj[q], shift)
        if delta != 0.0:
            diff[lo + 1] += delta
            diff[hi + 1] -= delta
    row = np.empty(L + 1)
    acc = 0.0
    for j in range(L + 1):
        acc += diff[j]
        row[j] = acc
    return row


@_jit
def _np_row(F, EN, N, L, sj, shift):  # noqa: ANN001, ANN202, E741
    """``_Merger._self_gains``'s row for one shift: ``cumsum(bincount(lo) - bincount(hi))``."""
    blo = np.zeros(L + 1)
    bhi = np.zeros(L + 1)
    for q in range(len(sj)):
        lo, hi, delta = _jump_delta(F, EN, N, sj[q], shift)
        blo[lo + 1] += delta
        bhi[hi + 1] += delta
    row = np.empty(L + 1)
    acc = blo[0] - bhi[0]
    row[0] = acc
    for j in range(1, L + 1):
        acc = acc + (blo[j] - bhi[j])
        row[j] = acc
    return row


@_jit
def split_bound(F, EN, N, small, nodes, sj, size):  # noqa: ANN001, ANN201
    """``_Merger._split_bound`` of a chain (its blocks ``nodes``, own jumps ``sj``)."""
    L = len(nodes)
    if L < 2 or len(sj) == 0:
        return 0.0
    if small >= L + 1:
        row = _small_row(F, EN, N, L, sj, -size)
    else:
        row = _np_row(F, EN, N, L, sj, -size)
    m = row[1]
    for j in range(2, L):
        if row[j] > m:
            m = row[j]
    return m if m > 0.0 else 0.0


@_jit
def _inter_bound(F, EN, xz, yz, xh, xt, yh, yt, lst):  # noqa: ANN001, ANN202
    """``_Merger._inter_bound``."""
    total = 0.0
    if xz or yz:
        for q in range(len(lst)):
            total += F[TOP, lst[q]]
        return total
    for q in range(len(lst)):
        e = lst[q]
        d = EN[1, e]
        s = EN[0, e]
        if d == xh or d == yh or s == xt or s == yt:  # noqa: SIM109 (numba: scalars)
            total += F[TOP, e]
        else:
            total += F[LO, e]
    return total


@_jit
def _ks(EN, N, P, X, Y, xc, lst):  # noqa: ANN001, ANN202
    """Split positions of ``X`` worth trying with ``Y`` (``_candidates``), ascending."""
    nx = len(X)
    if nx < 2:
        return np.zeros(0, np.int64)
    if nx <= P[1]:
        return np.arange(1, nx)
    if P[2] == 0:
        return np.zeros(0, np.int64)
    mark = np.zeros(nx + 1, np.bool_)
    y0, y1 = Y[0], Y[len(Y) - 1]
    for q in range(len(lst)):
        e = lst[q]
        s = EN[0, e]
        d = EN[1, e]
        if d == y0 and N[CHAIN, s] == xc:
            mark[N[POS, s] + 1] = True
        if s == y1 and N[CHAIN, d] == xc:
            mark[N[POS, d]] = True
    cnt = 0
    for k in range(1, nx):
        if mark[k]:
            cnt += 1
    out = np.empty(cnt, np.int64)
    cnt = 0
    for k in range(1, nx):
        if mark[k]:
            out[cnt] = k
            cnt += 1
    return out


@_jit
def _kinds(xe, ye):  # noqa: ANN001, ANN202
    """The split kinds allowed with the entry in ``X`` (xe) or in ``Y`` (ye)."""
    out = np.empty(4, np.int64)
    n = 0
    for k in (X1_Y_X2, Y_X2_X1, X2_X1_Y, X2_Y_X1):
        if not (xe and k != X1_Y_X2) and not (ye and k != Y_X2_X1):
            out[n] = k
            n += 1
    return out[:n]


@_jit
def _take(vals, q, v, g, pairwise):  # noqa: ANN001, ANN202
    """One jump's score ``v``: kept at ``vals[q]`` for the pairwise sum (the numpy
    evaluator's ``ndarray.sum``), or added to ``g`` one by one (the plain-Python one)."""
    if pairwise:
        vals[q] = v
        return g
    return g + v


@_jit
def _concat(F, EN, N, xn, yn, xc, xs, ys, lst, vals, pairwise):  # noqa: ANN001, ANN202
    """The better plain concatenation, ``X Y`` then ``Y X`` (x the lower id; the entry stays
    first): (gain, kind), kind -1 when neither is allowed.  ``pairwise``: the jumps summed as
    ``ndarray.sum`` does (the numpy evaluator), else one by one (the plain-Python one); the
    first of equal gains wins, as argmax and a strict ``>`` both keep it."""
    J = len(lst)
    best, b_kind = NEG_INF, -1
    x_entry = xn[0] == 0
    y_entry = yn[0] == 0
    for kind in (X_Y, Y_X):
        if (x_entry and kind == Y_X) or (y_entry and kind == X_Y):
            continue
        if kind == X_Y:
            bx, by = 0, xs
        else:
            bx, by = ys, 0
        g = 0.0
        for q in range(J):
            e = lst[q]
            s = EN[0, e]
            d = EN[1, e]
            a_s = N[OFF, s] + (bx if N[CHAIN, s] == xc else by)
            a_d = N[OFF, d] + (bx if N[CHAIN, d] == xc else by)
            g = _take(vals, q, _score(F, e, a_d - (a_s + N[SIZE, s])), g, pairwise)
        if pairwise:
            g = _pw(vals, 0, J)
        if b_kind < 0 or g > best:
            best, b_kind = g, kind
    return best, b_kind


@_jit
def _pair_done(F, EN, N, P, xn, xsj, xs, xz, xb, yn, ysj, ys, yz, yb, lst, best_gain):  # noqa: ANN001, ANN202, PLR0913
    """Whether the best concatenation reaches ``_Merger._pair_bound`` (then no split can
    beat it), the split bounds computed on the way (NaN: not known yet): (done, xb, yb)."""
    if P[3] == 0:  # bounds not valid: the bound is infinite
        return False, xb, yb
    small = P[4]
    if np.isnan(xb):
        xb = split_bound(F, EN, N, small, xn, xsj, xs)
    if np.isnan(yb):
        yb = split_bound(F, EN, N, small, yn, ysj, ys)
    ub = _inter_bound(F, EN, xz, yz, xn[0], xn[len(xn) - 1], yn[0], yn[len(yn) - 1],
                      lst) + (xb if xb >= yb else yb)
    return best_gain >= ub, xb, yb


@_jit
def _split_jumps(F, EN, N, X, XC, kind, LX, LY, j, lst, vals, pairwise, g0):  # noqa: ANN001, ANN202, PLR0913
    """The jumps between the chains scored after split ``kind`` of X at position ``j``:
    ``g0`` plus each one by one (the plain-Python evaluator), or (``pairwise``) their
    ``ndarray.sum`` plus ``g0`` (the numpy one)."""
    a1, c1, a2, c2, ay, cy = _bases(kind, LX, LY)
    L1 = N[OFF, X[j]]
    b1 = a1 * L1 + c1
    b2 = a2 * L1 + c2
    byy = ay * L1 + cy
    g = g0
    for q in range(len(lst)):
        e = lst[q]
        s = EN[0, e]
        d = EN[1, e]
        if N[CHAIN, s] == XC:
            a_s = N[OFF, s] + (b1 if N[POS, s] < j else b2)
        else:
            a_s = N[OFF, s] + byy
        if N[CHAIN, d] == XC:
            a_d = N[OFF, d] + (b1 if N[POS, d] < j else b2)
        else:
            a_d = N[OFF, d] + byy
        g = _take(vals, q, _score(F, e, a_d - (a_s + N[SIZE, s])), g, pairwise)
    if pairwise:
        return _pw(vals, 0, len(lst)) + g0
    return g


@_jit
def _ft_small(F, EN, N, X, Y, XC, lst):  # noqa: ANN001, ANN202
    """``_Merger._ft_bounds``: (the sum of the jumps' best non-fall-through scores, the
    bonus at every position per kind, the bonus per kind and position)."""
    nx = len(X)
    base = 0.0
    every = np.zeros(6)
    at = np.zeros((6, nx + 1))
    y0, y1, x0, x1 = Y[0], Y[len(Y) - 1], X[0], X[nx - 1]
    for q in range(len(lst)):
        e = lst[q]
        s = EN[0, e]
        d = EN[1, e]
        c1 = F[CFW, e]
        c2 = F[CBW, e]
        m = c1 if c1 >= c2 else c2
        lo_e = m if m >= 0.0 else 0.0
        base += lo_e
        b = F[FT, e] - lo_e
        if b <= 0:
            continue
        if N[CHAIN, s] == XC and d == y0:
            k = N[POS, s] + 1
            at[X1_Y_X2, k] += b
            at[X2_X1_Y, k] += b
            if s == x1:
                every[X2_Y_X1] += b
        elif N[CHAIN, d] == XC and s == y1:
            k = N[POS, d]
            at[X1_Y_X2, k] += b
            at[Y_X2_X1, k] += b
            if d == x0:
                every[X2_Y_X1] += b
    return base, every, at


@_jit
def _small_side(F, EN, N, P, X, Y, XC, LX, LY, XZ, YZ, XSJ, bound, lst, top, vals,  # noqa: ANN001, ANN202, PLR0913
                best_gain, bx_c, b_kind, b_k):
    """``_Merger._best_merge_small``'s split search with X split and Y whole: the best
    (gain, x cid, kind, k) so far, updated, and X's split bound (computed if NaN)."""
    nx = len(X)
    if nx < 2:
        return best_gain, bx_c, b_kind, b_k, bound
    ks = _ks(EN, N, P, X, Y, XC, lst)
    kinds = _kinds(X[0] == 0, Y[0] == 0)
    if len(kinds) == 0 or len(ks) == 0:
        return best_gain, bx_c, b_kind, b_k, bound
    if np.isnan(bound):
        bound = split_bound(F, EN, N, P[4], X, XSJ, LX)
    fb = not (XZ or YZ)
    if fb:
        base, every4, at = _ft_small(F, EN, N, X, Y, XC, lst)
    else:
        base, every4, at = 0.0, np.zeros(6), np.zeros((6, nx + 1))
    for ki in range(len(kinds)):
        kind = kinds[ki]
        every = every4[kind] + base if fb else top
        own = 0.0 if kind == X1_Y_X2 else bound
        thr = best_gain - every - own  # a position needs a bonus above this
        if thr >= 0:
            anyc = False
            for j in ks:
                if at[kind, j] > thr:
                    anyc = True
                    break
            if not anyc:
                continue
        row = _small_row(F, EN, N, nx, XSJ, _shift(kind, LX, LY))
        for j in ks:
            if thr >= 0 and not at[kind, j] > thr:
                continue
            if every + at[kind, j] + row[j] <= best_gain:
                continue
            g = _split_jumps(F, EN, N, X, XC, kind, LX, LY, j, lst, vals, False, row[j])
            if g > best_gain:
                best_gain, bx_c, b_kind, b_k = g, XC, kind, j
    return best_gain, bx_c, b_kind, b_k, bound


@_jit
def _inter_big(F, EN, N, X, Y, XC, XZ, YZ, kinds, ks, lst, top, losum, b_v):  # noqa: ANN001, ANN202, PLR0913
    """``_Merger._ft_bounds_np``: per kind (rows) and position (columns), a bound on what
    the jumps between the chains score (each sum has at most one non-zero term: exact)."""
    T = len(kinds)
    K = len(ks)
    inter = np.empty((T, K))
    if XZ or YZ:
        inter[:, :] = top
        return inter
    nx = len(X)
    after = np.zeros(nx + 1)
    before = np.zeros(nx + 1)
    e1 = 0.0
    e2 = 0.0
    y0, y1 = Y[0], Y[len(Y) - 1]
    for q in range(len(lst)):
        b = b_v[q]
        if not b > 0:
            continue
        e = lst[q]
        s = EN[0, e]
        d = EN[1, e]
        if N[CHAIN, s] == XC and d == y0:
            after[N[POS, s] + 1] += b
            if s == X[nx - 1]:
                e1 += b
        if N[CHAIN, d] == XC and s == y1:
            before[N[POS, d]] += b
            if d == X[0]:
                e2 += b
    every = e1 + e2
    for t in range(T):
        kind = kinds[t]
        for c in range(K):
            k = ks[c]
            if kind == X1_Y_X2:
                r = after[k] + before[k]
            elif kind == X2_X1_Y:
                r = after[k]
            elif kind == Y_X2_X1:
                r = before[k]
            else:
                r = every
            inter[t, c] = losum + r
    return inter


@_jit
def _maybe(inter, kinds, bound, best_gain):  # noqa: ANN001, ANN202
    """``_best_merge``'s first pruning: the kinds (rows) and positions (columns) where the
    bound plus X's own best (0 for ``X1 Y X2``) beats the best gain, as index arrays."""
    T, K = inter.shape
    rows = np.zeros(T, np.bool_)
    cols = np.zeros(K, np.bool_)
    for t in range(T):
        own = 0.0 if kinds[t] == X1_Y_X2 else bound
        for c in range(K):
            if inter[t, c] + own > best_gain:
                rows[t] = True
                cols[c] = True
    return np.flatnonzero(rows), np.flatnonzero(cols)


@_jit
def _big_side(F, EN, N, P, X, Y, XC, LX, LY, XZ, YZ, XSJ, bound, lst, top, losum, b_v,  # noqa: ANN001, ANN202, PLR0913
              vals, have, sgin, best_gain, bx_c, b_kind, b_k):
    """``_Merger._best_merge``'s split search with X split and Y whole.  Returns (status,
    gain, x cid, kind, k, X's split bound, kinds, positions): status 1 when X's own gains
    are the reference's matrix product (``have`` false): the kinds and positions wanted."""
    z = np.zeros(0, np.int64)
    nx = len(X)
    ks = _ks(EN, N, P, X, Y, XC, lst)
    if len(ks) == 0:
        return 0, best_gain, bx_c, b_kind, b_k, bound, z, z
    kinds = _kinds(X[0] == 0, Y[0] == 0)
    if np.isnan(bound):
        bound = split_bound(F, EN, N, P[4], X, XSJ, LX)
    inter = _inter_big(F, EN, N, X, Y, XC, XZ, YZ, kinds, ks, lst, top, losum, b_v)
    ri, ci = _maybe(inter, kinds, bound, best_gain)
    nr, nc = len(ri), len(ci)
    if nc == 0:
        return 0, best_gain, bx_c, b_kind, b_k, bound, z, z
    kinds2 = kinds[ri]
    ks2 = ks[ci]
    sg = np.zeros((nr, nc))
    if len(XSJ) == 0:
        pass
    elif nc * 8 < nx:  # _self_gains_at: BLAS's rounding, the caller's to compute
        if not have:
            return 1, best_gain, bx_c, b_kind, b_k, bound, kinds2, ks2
        sg[:, :] = sgin
    else:
        for t in range(nr):
            row = _np_row(F, EN, N, nx, XSJ, _shift(kinds2[t], LX, LY))
            for c in range(nc):
                sg[t, c] = row[ks2[c]]
    live = np.zeros(nc, np.bool_)
    for c in range(nc):
        for t in range(nr):
            if inter[ri[t], ci[c]] + sg[t, c] > best_gain:
                live[c] = True
    if not live.any():
        return 0, best_gain, bx_c, b_kind, b_k, bound, z, z
    gbest, gt, gk = NEG_INF, -1, 0
    for t in range(nr):  # argmax: the kind order, then the smaller position
        for c in range(nc):
            if live[c]:
                g = _split_jumps(F, EN, N, X, XC, kinds2[t], LX, LY, ks2[c], lst, vals, True,
                                 sg[t, c])
                if gt < 0 or g > gbest:
                    gbest, gt, gk = g, kinds2[t], ks2[c]
    if gbest > best_gain:
        best_gain, bx_c, b_kind, b_k = gbest, XC, gt, gk
    return 0, best_gain, bx_c, b_kind, b_k, bound, z, z


@_jit
def best_merge(F, EN, N, P, xn, xsj, xc, xs, xz, xb, yn, ysj, yc, ys, yz, yb, lst,  # noqa: ANN001, ANN201, PLR0913
               have, sg0, sg1):
    """The best merge of chains x (the lower id) and y, by ``_best_merge_small``'s steps
    for merges of at most ``SMALL_MERGE`` blocks, by ``_best_merge``'s above.  Returns
    (status, gain, x cid, kind, k, split bound of x, of y, side, kinds, positions): kind -1
    is no merge; a bound NaN was not needed; status 1 asks for ``_self_gains`` of side
    ``side``'s chain (0: x, 1: y) at those kinds and positions (the BLAS case, see the
    module docstring) -- call again with them as ``sg0``/``sg1`` and bit ``1 << side`` set
    in ``have``."""
    small = len(xn) + len(yn) <= P[4]
    J = len(lst)
    vals = np.empty(J)
    z = np.zeros(0, np.int64)
    top = 0.0
    for q in range(J):
        top += F[TOP, lst[q]]
    best_gain, b_kind = _concat(F, EN, N, xn, yn, xc, xs, ys, lst, vals, not small)
    bx_c = xc if b_kind >= 0 else -1
    b_k = 0
    if P[0] == 0 or (small and len(xn) < 2 and len(yn) < 2):
        return 0, best_gain, bx_c, b_kind, b_k, xb, yb, -1, z, z
    if b_kind >= 0:
        done, xb, yb = _pair_done(F, EN, N, P, xn, xsj, xs, xz, xb, yn, ysj, ys, yz, yb, lst,
                                  best_gain)
        if done:
            return 0, best_gain, bx_c, b_kind, b_k, xb, yb, -1, z, z
    if small:
        best_gain, bx_c, b_kind, b_k, xb = _small_side(
            F, EN, N, P, xn, yn, xc, xs, ys, xz, yz, xsj, xb, lst, top, vals, best_gain, bx_c,
            b_kind, b_k)
        best_gain, bx_c, b_kind, b_k, yb = _small_side(
            F, EN, N, P, yn, xn, yc, ys, xs, yz, xz, ysj, yb, lst, top, vals, best_gain, bx_c,
            b_kind, b_k)
        return 0, best_gain, bx_c, b_kind, b_k, xb, yb, -1, z, z
    lo_v = np.empty(J)
    b_v = np.empty(J)
    for q in range(J):
        e = lst[q]
        c1 = F[CFW, e]
        c2 = F[CBW, e]
        m = c1 if c1 >= c2 else c2
        lo_v[q] = m if m >= 0.0 else 0.0
        b_v[q] = F[FT, e] - lo_v[q]
    losum = _pw(lo_v, 0, J)
    st, best_gain, bx_c, b_kind, b_k, xb, kinds, ks = _big_side(
        F, EN, N, P, xn, yn, xc, xs, ys, xz, yz, xsj, xb, lst, top, losum, b_v, vals,
        have & 1, sg0, best_gain, bx_c, b_kind, b_k)
    if st:
        return 1, best_gain, bx_c, b_kind, b_k, xb, yb, 0, kinds, ks
    st, best_gain, bx_c, b_kind, b_k, yb, kinds, ks = _big_side(
        F, EN, N, P, yn, xn, yc, ys, xs, yz, xz, ysj, yb, lst, top, losum, b_v, vals,
        (have >> 1) & 1, sg1, best_gain, bx_c, b_kind, b_k)
    if st:
        return 1, best_gain, bx_c, b_kind, b_k, xb, yb, 1, kinds, ks
    return 0, best_gain, bx_c, b_kind, b_k, xb, yb, -1, z, z
