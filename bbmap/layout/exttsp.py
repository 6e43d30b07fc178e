"""Ext-TSP: the score of a block order, and the chain-merging optimiser that maximises it.

The score (Newell & Pupyrev, "Improved Basic Block Reordering", IEEE TC 2020) rewards a
jump of weight ``w`` from block ``s`` to block ``t`` by where ``t`` lands relative to the end
of ``s``: ``d = addr(t) - (addr(s) + size(s))``

* ``d == 0`` (a fall-through):               ``w * fallthrough_weight``
* ``0 < d < forward_distance``:              ``w * forward_weight * (1 - d / forward_distance)``
* ``0 < -d < backward_distance``:            ``w * backward_weight * (1 - |d| / backward_distance)``
* otherwise 0.

That is google/llvm-propeller ``PropellerCodeLayoutScorer::GetEdgeScore`` and LLVM
``CodeLayout.cpp`` ``extTSPScore`` alike; they differ only in the weights.  LLVM splits each
weight by whether the jump's source is *conditional* (has more than one successor among the
given edges, ``OutDegree > 1``), Propeller does not.  Both parameter sets are below.

The optimiser is the greedy chain merger both tools run.  Every hot block starts as its own
chain (blocks joined by a *forced* edge -- the only successor of its source and the only
predecessor of its sink -- start as one unbreakable chain).  Then repeatedly the pair of
chains whose merge raises the score most is merged, until no merge gains.  A merge of chain
``X`` with chain ``Y`` may split ``X`` at position ``k`` into ``X1 X2`` and glue the three
pieces as ``X1 Y X2``, ``Y X2 X1``, ``X2 X1 Y`` or ``X2 Y X1`` (Propeller's S1US2, US2S1,
S2S1U, S2US1; LLVM tries the first three), besides plain ``X Y`` / ``Y X``.  Every split
position is tried while ``X`` has at most ``chain_split_threshold`` blocks; for longer chains
only the positions next to a jump between ``X`` and ``Y`` (LLVM's "split along jumps",
Propeller's rule for chains over its threshold).  A merge never moves the entry block off
the front of its chain.  Remaining chains are concatenated entry chain first, then by
execution density (count per byte) descending, ties by chain id.

Speed (one 5,000-block function in well under 2 s): the gain of merging a pair of chains
depends only on the two chains, so gains sit in a heap and are recomputed only for pairs
that touch a chain just merged (lazy invalidation by chain version).  A split moves each
jump inside ``X`` that crosses the split point by a shift that does not depend on where the
split is (``+|Y|`` in ``X1 Y X2``, ``-|X|`` forward in ``X2 X1 Y`` ...), so the score change
of ``X``'s own jumps for *every* split position is one difference array; only the few jumps
between ``X`` and ``Y`` are scored per position.  With numba installed, big functions are
merged by :class:`_FastMerger` (the pair evaluations compiled in
:mod:`bbmap.layout.exttsp_numba`, the same floats: see :data:`FAST_MIN_BLOCKS`).

Ties are broken deterministically: equal gains prefer the pair with the smaller chain ids
(a chain's id is the smallest block index in it), then the merge kinds in the order
``X Y``, ``Y X``, ``X1 Y X2``, ``Y X2 X1``, ``X2 X1 Y``, ``X2 Y X1`` with the lower-id chain
as ``X`` first, then the smaller split position.  No I/O here: arrays in, arrays out.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

# A merge must gain more than this (LLVM CodeLayout.cpp ``EPS``; Propeller rejects gains <= 0).
MIN_GAIN = 1e-8
# merges of at most this many blocks in total are evaluated in plain Python (speed only)
SMALL_MERGE = 40
# Functions of at least this many blocks are merged by the numba kernel when numba is
# installed (_FastMerger; speed only: the same order, the same floats).  Measured
# (spec/layout.md, "Speed"): the first kernel call of a process costs ~0.26-0.41 s of CPU
# (importing numba ~0.10-0.13 s, loading the compiled kernel from numba's disk cache
# ~0.15-0.18 s, more under load), and the kernel saves ~0.19 s at 1,000 blocks, ~0.27 s at
# 1,500, ~0.34 s at 2,000, ~0.41 s at 2,500; so a process that has not imported numba takes
# it from 2,500 blocks, one that has (inference's solver) from 1,500 (the cache load only),
# and once the kernel is loaded every function the numpy merger would take
# (``SMALL_MERGE`` blocks and up: 2.7x faster even at 40).
FAST_MIN_BLOCKS = 2500
FAST_NUMBA_MIN_BLOCKS = 1500


@dataclass(frozen=True)
class ExtTspParams:
    """Weights and distances of the score, and the optimiser's search bounds."""

    name: str
    fallthrough_weight: float  # jump source has > 1 successor ("conditional")
    fallthrough_weight_uncond: float  # jump source has exactly one successor
    forward_weight: float
    forward_weight_uncond: float
    backward_weight: float
    backward_weight_uncond: float
    forward_distance: int  # bytes
    backward_distance: int
    chain_split: bool = True  # try splitting a chain when merging
    chain_split_threshold: int = 128  # chains up to this many blocks: every split position
    split_along_jumps: bool = True  # longer chains: positions next to a jump to the partner

    def with_(self, **kw) -> ExtTspParams:  # noqa: ANN003
        return replace(self, **kw)


# google/llvm-propeller propeller/propeller_options.proto, PropellerCodeLayoutParameters:
# fallthrough_weight 10, forward/backward_jump_weight 1, forward_jump_distance 1024,
# backward_jump_distance 680, chain_split true.  Its chain_split_threshold defaults to 0
# (edge-guided split points only); bbmap uses LLVM's 128 for both sets -- pass
# ``PROPELLER.with_(chain_split_threshold=0)`` for Propeller's exact search.
PROPELLER = ExtTspParams("propeller", 10.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1024, 680)

# LLVM llvm/lib/Transforms/Utils/CodeLayout.cpp cl::opt defaults: ext-tsp-fallthrough-weight-
# cond 1.0, -uncond 1.05, forward/backward weights 0.1, forward distance 1024, backward 640,
# ext-tsp-chain-split-threshold 128, ext-tsp-enable-chain-split-along-jumps true.
LLVM = ExtTspParams("llvm", 1.0, 1.05, 0.1, 0.1, 0.1, 0.1, 1024, 640)

PARAMS = {"propeller": PROPELLER, "llvm": LLVM}

# merge kinds: (name, split?)  -- the order is the tie order
X_Y, Y_X, X1_Y_X2, Y_X2_X1, X2_X1_Y, X2_Y_X1 = range(6)
MERGE_NAMES = ("X_Y", "Y_X", "X1_Y_X2", "Y_X2_X1", "X2_X1_Y", "X2_Y_X1")
_SPLIT_KINDS = (X1_Y_X2, Y_X2_X1, X2_X1_Y, X2_Y_X1)
# Start of each piece after a split at byte L1 of X, as (a1, c1, a2, c2, ay, cy) with
# X1 node at a1*L1 + c1 + off, X2 node at a2*L1 + c2 + off (its offset still counts X1),
# Y node at ay*L1 + cy + off -- given |X| and |Y|.
_BASES = {
    X1_Y_X2: lambda lx, ly: (0, 0, 0, ly, 1, 0),
    Y_X2_X1: lambda lx, ly: (-1, ly + lx, -1, ly, 0, 0),
    X2_X1_Y: lambda lx, ly: (-1, lx, -1, 0, 0, lx),
    X2_Y_X1: lambda lx, ly: (-1, lx + ly, -1, 0, -1, lx),
}


# --------------------------------------------------------------------------- the score
def edge_arrays(n: int, edges: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                np.ndarray]:
    """``edges`` as (src, dst, weight) arrays, checked against ``n`` blocks."""
    e = np.asarray(edges, dtype=np.float64) if len(edges) else np.zeros((0, 3))
    if e.ndim != 2 or e.shape[1] != 3:
        raise ValueError("edges must be (src, dst, weight) triples")
    src = e[:, 0].astype(np.int64)
    dst = e[:, 1].astype(np.int64)
    w = e[:, 2].astype(np.float64)
    if len(src) and (src.min() < 0 or dst.min() < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError(f"edge endpoint outside 0..{n - 1}")
    if (w < 0).any():
        raise ValueError("negative edge weight")
    return src, dst, w


def _coefficients(n: int, src: np.ndarray, p: ExtTspParams) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:
    """Per-edge (fall-through, forward, backward) weights: LLVM's conditional split."""
    cond = np.bincount(src, minlength=n)[src] > 1 if len(src) else np.zeros(0, bool)
    ft = np.where(cond, p.fallthrough_weight, p.fallthrough_weight_uncond)
    fw = np.where(cond, p.forward_weight, p.forward_weight_uncond)
    bw = np.where(cond, p.backward_weight, p.backward_weight_uncond)
    return ft, fw, bw


def _jump_score(dist: np.ndarray, w: np.ndarray, ft: np.ndarray, fw: np.ndarray,
                bw: np.ndarray, p: ExtTspParams) -> np.ndarray:
    """Score of jumps at distance ``dist`` (end of source to start of target), elementwise."""
    d = dist.astype(np.float64)
    fd, bd = float(p.forward_distance), float(p.backward_distance)
    out = np.where(d == 0, ft * w, 0.0)
    fwd = (d > 0) & (d < fd)
    out = np.where(fwd, fw * (1.0 - d / fd) * w, out)
    bwd = (d < 0) & (-d < bd)
    return np.where(bwd, bw * (1.0 - (-d) / bd) * w, out)


def ext_tsp_score_at(addr: Sequence[int] | np.ndarray, sizes: Sequence[int] | np.ndarray,
                     edges: Sequence | np.ndarray, params: ExtTspParams = PROPELLER,
                     present: np.ndarray | None = None) -> float:
    """The score of blocks at the given addresses (a real layout, gaps and all).

    ``present`` (bool per block) leaves out edges touching absent blocks (e.g. blocks
    that are not in the laid-out cluster)."""
    a = np.asarray(addr, dtype=np.int64)
    s = np.asarray(sizes, dtype=np.int64)
    n = len(s)
    src, dst, w = edge_arrays(n, edges)
    ft, fw, bw = _coefficients(n, src, params)
    if present is not None:
        keep = present[src] & present[dst]
        src, dst, w, ft, fw, bw = src[keep], dst[keep], w[keep], ft[keep], fw[keep], bw[keep]
    dist = a[dst] - (a[src] + s[src])
    return float(_jump_score(dist, w, ft, fw, bw, params).sum())


def ext_tsp_score(sizes: Sequence[int] | np.ndarray, edges: Sequence | np.ndarray,
                  order: Sequence[int] | np.ndarray, params: ExtTspParams = PROPELLER) -> float:
    """The Ext-TSP score of laying the blocks out back to back in ``order``.

    ``order`` may name a subset of the blocks; edges touching a block not in it score 0
    (those blocks are elsewhere, e.g. in the ``.cold`` part)."""
    s = np.asarray(sizes, dtype=np.int64)
    o = np.asarray(order, dtype=np.int64)
    if len(np.unique(o)) != len(o) or (len(o) and (o.min() < 0 or o.max() >= len(s))):
        raise ValueError("order must name distinct blocks")
    addr = np.zeros(len(s), np.int64)
    if len(o):
        addr[o] = np.concatenate(([0], np.cumsum(s[o])[:-1]))
    present = np.zeros(len(s), bool)
    present[o] = True
    return ext_tsp_score_at(addr, s, edges, params, present)


# --------------------------------------------------------------------------- optimiser
@dataclass
class _Chain:
    cid: int
    nodes: np.ndarray  # block indexes in order
    size: int
    count: float
    ver: int = 0
    selfj: list[int] | None = None  # edge ids inside the chain
    cache: dict | None = None
    # plain attributes rather than ``cache`` entries: read ~10 times per merge (speed only)
    head: int = -1  # first and last block
    tail: int = -1
    zero: bool = False  # a zero-size block in it
    bound: float | None = None  # _split_bound, per chain version
    sja: np.ndarray | None = None  # selfj as an int64 array (_FastMerger only)


class _Merger:
    """The greedy chain merger over one graph (see the module docstring)."""

    def _start(self, n: int, p: ExtTspParams) -> None:
        """What every merger starts from, whatever its block columns are."""
        self.p = p
        self.n = n
        self.split_forced = True
        # the bounds assume a fall-through outweighs any other jump (both parameter sets)
        self._bounds_valid = (
            p.fallthrough_weight >= max(p.forward_weight, p.backward_weight)
            and p.fallthrough_weight_uncond >= max(p.forward_weight_uncond,
                                                   p.backward_weight_uncond))

    def __init__(self, sizes: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 counts: np.ndarray | None, p: ExtTspParams, hot: np.ndarray | None) -> None:
        n = len(sizes)
        self._start(n, p)
        self.sizes = sizes.astype(np.int64)
        ft, fw, bw = _coefficients(n, src, p)
        # the optimiser works on positive jumps between distinct blocks, parallel ones summed
        # (self-loops score the same in every order)
        keep = (w > 0) & (src != dst)
        key = src[keep] * n + dst[keep]
        uk, inv = np.unique(key, return_inverse=True)
        self.es = (uk // n).astype(np.int64)
        self.ed = (uk % n).astype(np.int64)
        self.ew = np.bincount(inv, weights=w[keep], minlength=len(uk))
        first = np.zeros(len(uk), np.int64)
        first[inv[::-1]] = np.arange(len(inv))[::-1]
        self.wft = ft[keep][first] * self.ew
        self.wfw = fw[keep][first]
        self.wbw = bw[keep][first]
        self.c_fw = self.wfw * self.ew  # forward score = c_fw - d_fw * distance
        self.d_fw = self.c_fw / p.forward_distance
        self.c_bw = self.wbw * self.ew  # backward score = c_bw + d_bw * distance (< 0)
        self.d_bw = self.c_bw / p.backward_distance
        self.l_ft, self.l_cfw, self.l_dfw = self.wft.tolist(), self.c_fw.tolist(), \
            self.d_fw.tolist()
        self.l_cbw, self.l_dbw = self.c_bw.tolist(), self.d_bw.tolist()
        self.l_es, self.l_ed = self.es.tolist(), self.ed.tolist()
        self.l_sizes = self.sizes.tolist()
        self.l_top = np.maximum(self.wft, np.maximum(self.c_fw, self.c_bw)).tolist()
        self.l_lo = np.maximum(np.maximum(self.c_fw, self.c_bw), 0.0).tolist()
        E = len(uk)
        # execution counts: given, else Propeller's CalculateFrequency (max of in and out)
        if counts is None:
            cin = np.bincount(self.ed, weights=self.ew, minlength=n)
            cout = np.bincount(self.es, weights=self.ew, minlength=n)
            counts = np.maximum(cin, cout)
        self.counts = np.asarray(counts, dtype=np.float64)
        if hot is None:  # a positive count or any positive jump, self-loops included
            hot = self.counts > 0
            hot[src[w > 0]] = True
            hot[dst[w > 0]] = True
        hot = np.asarray(hot, bool).copy()
        if n:
            hot[0] = True
        self.hot = hot
        # per-node outgoing jumps (CSR), for the forced pairs
        self.out_ptr, self.out_e = _csr(self.es, n)
        self.node_chain = np.full(n, -1, np.int64)
        self.node_pos = np.zeros(n, np.int64)
        self.node_off = np.zeros(n, np.int64)
        self.forced_next = np.full(n, -1, np.int64)  # a forced successor joins its chain
        self.chains: dict[int, _Chain] = {}
        self.adj: dict[int, dict[int, list[int]]] = {}
        self._init_chains(E)

    # ----------------------------------------------------------------- set-up
    def _init_chains(self, E: int) -> None:
        n = self.n
        es, ed = self.es, self.ed
        outdeg = np.bincount(es, minlength=n)
        indeg = np.bincount(ed, minlength=n)
        fs = np.full(n, -1, np.int64)
        one = np.flatnonzero(outdeg == 1)
        tgt = ed[self.out_e[self.out_ptr[one]]] if len(one) else one
        ok = (indeg[tgt] == 1) & (tgt != 0) & self.hot[one] & self.hot[tgt]
        # bbmap's addition: not when the jump back (target -> source) is heavier, for then
        # the pair belongs the other way round (a loop whose back edge is the hot one)
        key = np.searchsorted(self.es * n + self.ed, tgt * n + one)
        key = np.minimum(key, max(E - 1, 0))
        back = np.where((E > 0) & (self.es[key] == tgt) & (self.ed[key] == one),
                        self.ew[key], 0.0) if E else np.zeros(len(one))
        fwd_w = self.ew[self.out_e[self.out_ptr[one]]] if len(one) else np.zeros(0)
        ok &= fwd_w >= back
        fs[one[ok]] = tgt[ok]
        fp = np.full(n, -1, np.int64)
        fp[fs[fs >= 0]] = np.flatnonzero(fs >= 0)
        # cycles of forced edges: cut the edge into the smallest block of the cycle (LLVM)
        self._build_chains(fs.tolist(), fp.tolist(), E)

    def _build_chains(self, fsl: list[int], fpl: list[int], E: int) -> None:
        """Chains from the forced successor / predecessor of each block (-1: none): cut
        the cycles, then one chain per forced path, and the jumps between chains."""
        n = self.n
        for v in range(n):
            if fsl[v] < 0 or fpl[v] < 0:
                continue
            u = fsl[v]
            while u >= 0 and u != v:
                u = fsl[u]
            if u == v:
                fsl[fpl[v]] = -1
                fpl[v] = -1
        self.forced_next = self._array(fsl)
        hot_l, sizes_l, counts_l = self._lists()
        singles = []
        for v in range(n):
            if not hot_l[v] or fpl[v] >= 0:
                continue
            if fsl[v] < 0:  # a chain of one block: no numpy per chain (most of them)
                singles.append(v)
                self.chains[v] = _Chain(v, self._array([v]), sizes_l[v], counts_l[v],
                                        head=v, tail=v, zero=sizes_l[v] == 0)
                self.adj[v] = {}
                continue
            path = [v]
            while fsl[path[-1]] >= 0:
                path.append(fsl[path[-1]])
            self._new_chain(self._array(path))
        nc = self._chain_of(singles)
        for c in self.chains.values():
            c.selfj = []
        # chain adjacency: the jumps between each pair of chains, one shared list per pair
        es, ed = self.l_es, self.l_ed
        for e in range(E):
            a, b = nc[es[e]], nc[ed[e]]
            if a == b:
                self.chains[a].selfj.append(e)
                continue
            lst = self.adj[a].get(b)
            if lst is None:
                lst = []
                self.adj[a][b] = lst
                self.adj[b][a] = lst
            lst.append(e)

    @staticmethod
    def _array(nodes: list[int]) -> np.ndarray:
        return np.array(nodes, np.int64)

    def _lists(self) -> tuple[list[bool], list[int], list[float]]:
        """Hot flags, sizes and counts per block, as lists."""
        return self.hot.tolist(), self.sizes.tolist(), self.counts.tolist()

    def _chain_of(self, singles: list[int]) -> list[int]:
        """Record the one-block chains (node_pos, node_off stay 0); block -> chain id."""
        if singles:
            self.node_chain[singles] = singles
        return self.node_chain.tolist()

    def _new_chain(self, nodes: np.ndarray) -> None:
        cid = int(nodes.min())
        sz = self.sizes[nodes]
        self.chains[cid] = _Chain(cid, nodes, int(sz.sum()), float(self.counts[nodes].sum()),
                                  head=int(nodes[0]), tail=int(nodes[-1]),
                                  zero=bool((sz == 0).any()))
        self.adj[cid] = {}
        self._place(cid, nodes)

    def _place(self, cid: int, nodes: np.ndarray) -> None:
        if len(nodes) <= SMALL_MERGE:  # item by item: cheaper than five array calls
            chain, pos, off, sizes, o = self.node_chain, self.node_pos, self.node_off, \
                self.l_sizes, 0
            for i, v in enumerate(nodes.tolist()):
                chain[v], pos[v], off[v] = cid, i, o
                o += sizes[v]
            return
        self.node_chain[nodes] = cid
        self.node_pos[nodes] = np.arange(len(nodes))
        off = np.cumsum(self.sizes[nodes])
        self.node_off[nodes] = off - self.sizes[nodes]

    @staticmethod
    def _selfj_array(c: _Chain) -> np.ndarray:
        """The chain's own jumps (edge ids) as an int64 array."""
        return np.asarray(c.selfj, np.int64)

    # --------------------------------------------------------------- scoring
    def _score(self, dist: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Scores of jumps ``e`` at distances ``dist`` (broadcast): the module formula as
        ``max(0, A - B*d)`` forward and ``max(0, C + D*d)`` backward (equal up to rounding,
        fewer array operations)."""
        d = dist
        back = np.maximum(self.c_bw[e] + self.d_bw[e] * d, 0.0)
        out = np.where(d > 0, np.maximum(self.c_fw[e] - self.d_fw[e] * d, 0.0), back)
        return np.where(d == 0, self.wft[e], out)

    def _self_arrays(self, c: _Chain) -> tuple:
        """Cached per chain version: its own jumps' positions, distances and scores."""
        if c.cache is None:
            c.cache = {}
        got = c.cache.get("self")
        if got is None:
            e = self._selfj_array(c)
            s, d = self.es[e], self.ed[e]
            ps, pd = self.node_pos[s], self.node_pos[d]
            dist = self.node_off[d] - (self.node_off[s] + self.sizes[s])
            got = (e, np.minimum(ps, pd), np.maximum(ps, pd), ps < pd, dist,
                   self._score(dist, e))
            c.cache["self"] = got
        return got

    def _self_gains(self, c: _Chain, kinds: list[int], ysize: int,
                    ks: np.ndarray) -> np.ndarray:
        """Score change of ``c``'s own jumps, per split kind (rows) and position (columns).

        A jump crossing the split point moves by a shift independent of the position:
        forward jumps (source before target) by ``+|Y|`` in X1 Y X2, ``-|X|`` in Y X2 X1 and
        X2 X1 Y, ``-(|X|+|Y|)`` in X2 Y X1; backward jumps by the opposite.  Jumps not
        crossing keep their distance.  So gain(k) = sum of the deltas of the jumps with
        lo < k <= hi: one difference array per kind."""
        e, lo, hi, fwd, dist, old = self._self_arrays(c)
        if not len(e):
            return np.zeros((len(kinds), len(ks)))
        if len(ks) * 8 < len(c.nodes):
            return self._self_gains_at(c, kinds, ysize, ks)
        cache = c.cache
        rows: list = [None] * len(kinds)
        todo = []
        for i, kind in enumerate(kinds):
            key = (kind, ysize if kind in (X1_Y_X2, X2_Y_X1) else 0)
            got = cache.get(key)
            if got is None:
                todo.append((i, kind, key))
            else:
                rows[i] = got
        if todo:
            shifts = np.array([{X1_Y_X2: ysize, Y_X2_X1: -c.size, X2_X1_Y: -c.size,
                                X2_Y_X1: -(c.size + ysize)}[k] for _, k, _ in todo])[:, None]
            delta = self._score(dist + np.where(fwd, shifts, -shifts), e) - old
            L = len(c.nodes) + 1
            T = len(todo)
            base = (np.arange(T) * L)[:, None]
            idx_lo = (base + lo + 1).ravel()
            idx_hi = (base + hi + 1).ravel()
            d = delta.ravel()
            diff = (np.bincount(idx_lo, weights=d, minlength=T * L)
                    - np.bincount(idx_hi, weights=d, minlength=T * L)).reshape(T, L)
            g = np.cumsum(diff, axis=1)
            for j, (i, _, key) in enumerate(todo):
                rows[i] = g[j]
                if len(cache) < 64:
                    cache[key] = g[j]
        return np.stack(rows)[:, ks]

    def _self_gains_at(self, c: _Chain, kinds: list[int], ysize: int,
                       ks: np.ndarray) -> np.ndarray:
        """:meth:`_self_gains` at a few positions of a long chain, touching only the jumps
        that can change: a crossing jump scoring now (then |distance| < the longest jump
        distance D, so its ends lie within D bytes of the cut), or one spanning all but D
        bytes of the chain (only those can come close when X2 moves before X1).  The rest
        score 0 before and after."""
        e, lo, hi, fwd, dist, old = self._self_arrays(c)
        win = c.cache.get("window")
        if win is None:
            reach = max(self.p.forward_distance, self.p.backward_distance)
            scoring = np.flatnonzero(old > 0)
            order = scoring[np.argsort(lo[scoring], kind="stable")]
            span = int((hi[order] - lo[order]).max()) if len(order) else 0
            far = np.flatnonzero((old <= 0) & (c.size - np.abs(dist) < reach))
            win = c.cache["window"] = (order, lo[order], span, far)
        order, lo_sorted, span, far = win
        a = np.searchsorted(lo_sorted, ks - span, side="left")
        b = np.searchsorted(lo_sorted, ks, side="left")  # lo < k
        pick = np.unique(np.concatenate([order[i:j] for i, j in zip(a.tolist(), b.tolist())]
                                        + [far]))
        if not len(pick):
            return np.zeros((len(kinds), len(ks)))
        shifts = np.array([{X1_Y_X2: ysize, Y_X2_X1: -c.size, X2_X1_Y: -c.size,
                            X2_Y_X1: -(c.size + ysize)}[k] for k in kinds])[:, None]
        ep, fw_, d_ = e[pick], fwd[pick], dist[pick]
        delta = self._score(d_ + np.where(fw_, shifts, -shifts), ep) - old[pick]  # (T, J)
        cross = (lo[pick][None, :] < ks[:, None]) & (ks[:, None] <= hi[pick][None, :])
        return delta @ cross.T.astype(np.float64)

    # --------------------------------------------------------------- merging
    def _candidates(self, x: _Chain, y: _Chain, jumps: np.ndarray) -> np.ndarray:
        """Split positions of ``x`` worth trying with ``y`` (1..len-1)."""
        nx = len(x.nodes)
        if nx < 2:
            return np.zeros(0, np.int64)
        if nx <= self.p.chain_split_threshold:
            ks = np.arange(1, nx)
        elif self.p.split_along_jumps:
            # a jump from x into y's first block: cut after its source; a jump from y's last
            # block into x: cut before its target
            s, d = self.es[jumps], self.ed[jumps]
            first, last = y.head, y.tail
            a = self.node_pos[s[(d == first) & (self.node_chain[s] == x.cid)]] + 1
            b = self.node_pos[d[(s == last) & (self.node_chain[d] == x.cid)]]
            ks = np.unique(np.concatenate([a, b]))
            ks = ks[(ks > 0) & (ks < nx)]
        else:
            return np.zeros(0, np.int64)
        return ks

    def _score1(self, d: int, e: int) -> float:
        """One jump's score (the scalar twin of :meth:`_score`, for tiny merges)."""
        if d == 0:
            return self.l_ft[e]
        if d > 0:
            v = self.l_cfw[e] - self.l_dfw[e] * d
        else:
            v = self.l_cbw[e] + self.l_dbw[e] * d
        return v if v > 0.0 else 0.0

    def _best_merge(self, a: int, b: int) -> tuple[float, tuple[int, int, int]] | None:
        """The best way to merge chains ``a`` and ``b``: (gain, (x_cid, kind, k))."""
        lst = self.adj[a][b]
        ca, cb = self.chains[a], self.chains[b]
        x, y = (ca, cb) if a < b else (cb, ca)
        x_entry, y_entry = x.head == 0, y.head == 0
        if len(x.nodes) + len(y.nodes) <= SMALL_MERGE:
            return self._best_merge_small(x, y, lst)
        jumps = np.asarray(lst, np.int64)
        top = _seq_sum(self.l_top, lst)
        s, d = self.es[jumps], self.ed[jumps]
        off_s, off_d = self.node_off[s], self.node_off[d]
        size_s = self.sizes[s]
        best_gain, best = -np.inf, None
        # plain concatenation (x = the lower id), both orders
        kinds = [k for k in (X_Y, Y_X)
                 if not (x_entry and k == Y_X) and not (y_entry and k == X_Y)]
        if kinds:
            s_in_x = self.node_chain[s] == x.cid
            d_in_x = self.node_chain[d] == x.cid
            bx = np.array([0 if k == X_Y else y.size for k in kinds])[:, None]
            by = np.array([x.size if k == X_Y else 0 for k in kinds])[:, None]
            addr_s = off_s + np.where(s_in_x, bx, by)
            addr_d = off_d + np.where(d_in_x, bx, by)
            g = self._score(addr_d - (addr_s + size_s), jumps).sum(axis=1)
            i = int(np.argmax(g))
            best_gain, best = float(g[i]), (x.cid, kinds[i], 0)
        if not self.p.chain_split or (best is not None and best_gain >= self._pair_bound(
                ca, cb, lst)):
            return (best_gain, best) if best is not None else None
        for x, y in ((ca, cb), (cb, ca)) if a < b else ((cb, ca), (ca, cb)):
            ks = self._candidates(x, y, jumps)
            if not len(ks):
                continue
            x_entry, y_entry = x.head == 0, y.head == 0
            kinds = [k for k in _SPLIT_KINDS
                     if not (x_entry and k != X1_Y_X2) and not (y_entry and k != Y_X2_X1)]
            # prune by bounds (see _best_merge_small and _ft_bounds): X1 Y X2 never gains
            # from x's own jumps, the other kinds at most _split_bound(x)
            bound = self._split_bound(x)
            inter = self._ft_bounds_np(x, y, jumps, s, d, ks, kinds, top)
            own = np.array([0.0 if k == X1_Y_X2 else bound for k in kinds])[:, None]
            maybe = inter + own > best_gain
            rows, cols = maybe.any(axis=1), maybe.any(axis=0)
            if not cols.any():
                continue
            kinds = [k for k, r in zip(kinds, rows) if r]
            ks, inter = ks[cols], inter[rows][:, cols]
            sg = self._self_gains(x, kinds, y.size, ks)
            live = (inter + sg > best_gain)
            cols = live.any(axis=0)
            if not cols.any():
                continue
            ks, sg = ks[cols], sg[:, cols]
            s_in_x = self.node_chain[s] == x.cid
            d_in_x = self.node_chain[d] == x.cid
            ps, pd = self.node_pos[s], self.node_pos[d]
            L1 = self.node_off[x.nodes[ks]]  # bytes of X1 per candidate position
            LY, LX = y.size, x.size
            # where X1 nodes, X2 nodes (the -L1 of their offset folded in) and Y nodes
            # start: alpha * L1 + beta per kind (rows) and position (columns)
            co = np.array([_BASES[k](LX, LY) for k in kinds], np.int64)  # (T, 6)
            l1 = L1[None, :]
            b1 = (co[:, 0, None] * l1 + co[:, 1, None])[:, :, None]
            b2 = (co[:, 2, None] * l1 + co[:, 3, None])[:, :, None]
            by = (co[:, 4, None] * l1 + co[:, 5, None])[:, :, None]
            kk = ks[None, :, None]
            addr_s = off_s + np.where(s_in_x, np.where(ps < kk, b1, b2), by)
            addr_d = off_d + np.where(d_in_x, np.where(pd < kk, b1, b2), by)
            g = self._score(addr_d - (addr_s + size_s), jumps).sum(axis=2) + sg
            i = int(np.argmax(g))  # row-major: the kind order, then the smaller position
            t, j = divmod(i, len(ks))
            if g[t, j] > best_gain:
                best_gain, best = float(g[t, j]), (x.cid, kinds[t], int(ks[j]))
        return (best_gain, best) if best is not None else None

    def _best_merge_small(self, x0: _Chain, y0: _Chain,
                          lst: list[int]) -> tuple[float, tuple[int, int, int]] | None:
        """:meth:`_best_merge` for two short chains, in plain Python (numpy's per-call cost
        dominates there).  Same candidates, same order, same formula; a split candidate is
        skipped when even turning every jump between the chains into a fall-through could
        not beat the best gain so far (exact: only strictly better gains are taken)."""
        es, ed, sizes = self.l_es, self.l_ed, self.l_sizes
        l_ft, l_cfw, l_dfw, l_cbw, l_dbw = self.l_ft, self.l_cfw, self.l_dfw, self.l_cbw, \
            self.l_dbw
        jumps = [(e, es[e], ed[e]) for e in lst]
        top = _seq_sum(self.l_top, lst)  # no merge gains more from these jumps
        best_gain, best = -np.inf, None
        xn = self._node_list(x0)
        yn = self._node_list(y0)

        def offsets(nodes: list[int]) -> dict[int, int]:
            out, o = {}, 0
            for v in nodes:
                out[v] = o
                o += sizes[v]
            return out

        ox, oy = offsets(xn), offsets(yn)
        x_entry, y_entry = xn[0] == 0, yn[0] == 0
        for kind in (X_Y, Y_X):
            if (x_entry and kind == Y_X) or (y_entry and kind == X_Y):
                continue
            bx, by = (0, x0.size) if kind == X_Y else (y0.size, 0)
            g = 0.0
            for e, s_, d_ in jumps:
                a_s = ox[s_] + bx if s_ in ox else oy[s_] + by
                a_d = ox[d_] + bx if d_ in ox else oy[d_] + by
                d = a_d - (a_s + sizes[s_])  # _score1, inlined (the hottest loop)
                if d == 0:
                    g += l_ft[e]
                else:
                    v = l_cfw[e] - l_dfw[e] * d if d > 0 else l_cbw[e] + l_dbw[e] * d
                    g += v if v > 0.0 else 0.0
            if g > best_gain:
                best_gain, best = g, (x0.cid, kind, 0)
        # (two one-block chains have no split position: the bound would change nothing)
        if not self.p.chain_split or (len(xn) < 2 and len(yn) < 2) or (
                best is not None and best_gain >= self._pair_bound(x0, y0, lst)):
            return (best_gain, best) if best is not None else None
        for x, y, xl, yl, oxx, oyy in ((x0, y0, xn, yn, ox, oy), (y0, x0, yn, xn, oy, ox)):
            nx = len(xl)
            if nx < 2:
                continue
            pos = {v: i for i, v in enumerate(xl)}
            if nx <= self.p.chain_split_threshold:
                ks = range(1, nx)
            elif self.p.split_along_jumps:
                cut = {pos[s_] + 1 for _, s_, d_ in jumps if d_ == yl[0] and s_ in pos}
                cut |= {pos[d_] for _, s_, d_ in jumps if s_ == yl[-1] and d_ in pos}
                ks = sorted(k for k in cut if 0 < k < nx)
            else:
                continue
            xe, ye = xl[0] == 0, yl[0] == 0
            kinds = [k for k in _SPLIT_KINDS
                     if not (xe and k != X1_Y_X2) and not (ye and k != Y_X2_X1)]
            if not kinds or not ks:
                continue
            LX, LY = x.size, y.size
            # the jumps between the chains, with where their ends sit
            jj = [(e, pos.get(s_, -1), oxx[s_] if s_ in pos else oyy[s_],
                   pos.get(d_, -1), oxx[d_] if d_ in pos else oyy[d_], sizes[s_])
                  for e, s_, d_ in jumps]
            bound = self._split_bound(x)
            fb = self._ft_bounds(xl, yl, pos, jumps)
            for kind in kinds:
                # what the jumps between the chains can add at most, at any k and at
                # each k (see _ft_bounds)
                if fb is None:
                    every, at = top, {}
                else:
                    every, at = fb[1].get(kind, (0.0, {}))
                    every += fb[0]
                # X1 Y X2 never gains from x's own jumps; the others at most `bound`
                own = 0.0 if kind == X1_Y_X2 else bound
                thr = best_gain - every - own  # a position needs a bonus above this
                if thr < 0:
                    cand = ks
                else:
                    cand = sorted(j for j, v in at.items() if v > thr and j in ks)
                    if not cand:
                        continue
                row = self._self_rows_small(x, xl, oxx, pos, [kind], LY)[0]
                a1, c1, a2, c2, ay, cy = _BASES[kind](LX, LY)
                for j in cand:
                    g = row[j]
                    if every + at.get(j, 0.0) + g <= best_gain:
                        continue
                    L1 = oxx[xl[j]]
                    b1, b2, by = a1 * L1 + c1, a2 * L1 + c2, ay * L1 + cy
                    for e, ps, os_, pd, od, ss in jj:
                        a_s = os_ + (by if ps < 0 else b1 if ps < j else b2)
                        a_d = od + (by if pd < 0 else b1 if pd < j else b2)
                        d = a_d - a_s - ss  # _score1, inlined
                        if d == 0:
                            g += l_ft[e]
                        else:
                            v = l_cfw[e] - l_dfw[e] * d if d > 0 else l_cbw[e] + l_dbw[e] * d
                            g += v if v > 0.0 else 0.0
                    if g > best_gain:
                        best_gain, best = g, (x.cid, kind, j)
        return (best_gain, best) if best is not None else None

    def _ft_bounds(self, xl: list[int], yl: list[int], pos: dict[int, int],
                   jumps: list[tuple[int, int, int]]) -> tuple[float, dict] | None:
        """Upper bounds on what the jumps between ``x`` (split) and ``y`` can score, per
        split kind and position: a jump scores at most ``lo`` (its best forward or
        backward score) unless it becomes a fall-through, which only a piece boundary
        next to ``y`` can make it: ``X1 Y X2`` and ``X2 X1 Y`` join ``x[k-1] -> y[0]``,
        ``X1 Y X2`` and ``Y X2 X1`` join ``y[-1] -> x[k]``, ``X2 Y X1`` joins
        ``x[-1] -> y[0]`` and ``y[-1] -> x[0]`` at every k.  Returns (sum of ``lo``,
        {kind: (bonus at every k, {k: bonus})}), or None when a zero-size block could
        make a farther jump a fall-through."""
        sizes = self.l_sizes
        if any(sizes[v] == 0 for v in xl) or any(sizes[v] == 0 for v in yl):
            return None
        base = 0.0
        bonus: dict[int, tuple[float, dict[int, float]]] = {}
        y0, y1, x0, x1 = yl[0], yl[-1], xl[0], xl[-1]

        def add(kind: int, k: int | None, b: float) -> None:
            every, at = bonus.get(kind, (0.0, {}))
            if k is None:
                every += b
            else:
                at[k] = at.get(k, 0.0) + b
            bonus[kind] = (every, at)

        for e, s_, d_ in jumps:
            lo = max(self.l_cfw[e], self.l_cbw[e], 0.0)
            base += lo
            b = self.l_ft[e] - lo
            if b <= 0:
                continue
            if s_ in pos and d_ == y0:
                add(X1_Y_X2, pos[s_] + 1, b)
                add(X2_X1_Y, pos[s_] + 1, b)
                if s_ == x1:
                    add(X2_Y_X1, None, b)
            elif d_ in pos and s_ == y1:
                add(X1_Y_X2, pos[d_], b)
                add(Y_X2_X1, pos[d_], b)
                if d_ == x0:
                    add(X2_Y_X1, None, b)
        return base, bonus

    def _ft_bounds_np(self, x: _Chain, y: _Chain, jumps: np.ndarray, s: np.ndarray,
                      d: np.ndarray, ks: np.ndarray, kinds: list[int],
                      top: float) -> np.ndarray:
        """:meth:`_ft_bounds` on arrays: per kind (rows) and position in ``ks``, an upper
        bound on the score of the jumps between ``x`` and ``y``."""
        if x.zero or y.zero:
            return np.full((len(kinds), len(ks)), top)
        lo = np.maximum(np.maximum(self.c_fw[jumps], self.c_bw[jumps]), 0.0)
        b = self.wft[jumps] - lo
        in_x_s = self.node_chain[s] == x.cid
        in_x_d = self.node_chain[d] == x.cid
        into_y = in_x_s & (d == y.nodes[0]) & (b > 0)  # x[?] -> y[0]
        from_y = in_x_d & (s == y.nodes[-1]) & (b > 0)  # y[-1] -> x[?]
        pa, pb = self.node_pos[s[into_y]] + 1, self.node_pos[d[from_y]]
        after = (pa[None, :] == ks[:, None]).astype(np.float64) @ b[into_y]
        before = (pb[None, :] == ks[:, None]).astype(np.float64) @ b[from_y]
        every = float(b[into_y & (s == x.nodes[-1])].sum() + b[from_y & (d == x.nodes[0])].sum())
        rows = {X1_Y_X2: after + before, X2_X1_Y: after, Y_X2_X1: before,
                X2_Y_X1: np.full(len(ks), every)}
        return float(lo.sum()) + np.stack([rows[k] for k in kinds])

    def _self_rows_small(self, x: _Chain, xl: list[int], oxx: dict[int, int],
                         pos: dict[int, int], kinds: list[int], ysize: int) -> list[list[float]]:
        """Plain-Python :meth:`_self_gains`: per kind, the score change of ``x``'s own
        jumps for every split position (difference arrays, the |Y|-free rows cached)."""
        if x.cache is None:
            x.cache = {}
        es, ed, sizes, score1 = self.l_es, self.l_ed, self.l_sizes, self._score1
        L = len(xl)
        out = []
        for kind in kinds:
            key = ("small", kind, ysize if kind in (X1_Y_X2, X2_Y_X1) else 0)
            row = x.cache.get(key)
            if row is None:
                shift = {X1_Y_X2: ysize, Y_X2_X1: -x.size, X2_X1_Y: -x.size,
                         X2_Y_X1: -(x.size + ysize)}[kind]
                pre = x.cache.get("pre")
                if pre is None:
                    pre = []
                    for e in x.selfj or ():
                        s_, d_ = es[e], ed[e]
                        ps, pd = pos[s_], pos[d_]
                        dist = oxx[d_] - (oxx[s_] + sizes[s_])
                        lo, hi = (ps, pd) if ps < pd else (pd, ps)
                        pre.append((e, lo + 1, hi + 1, ps < pd, dist, score1(dist, e)))
                    x.cache["pre"] = pre
                diff = [0.0] * (L + 1)
                l_ft, l_cfw, l_dfw, l_cbw, l_dbw = self.l_ft, self.l_cfw, self.l_dfw, \
                    self.l_cbw, self.l_dbw
                for e, lo, hi, fwd, dist, old in pre:
                    d = dist + (shift if fwd else -shift)  # _score1, inlined
                    if d == 0:
                        delta = l_ft[e] - old
                    else:
                        v = l_cfw[e] - l_dfw[e] * d if d > 0 else l_cbw[e] + l_dbw[e] * d
                        delta = (v if v > 0.0 else 0.0) - old
                    if delta:
                        diff[lo] += delta
                        diff[hi] -= delta
                row, acc = [0.0] * (L + 1), 0.0
                for j in range(L + 1):
                    acc += diff[j]
                    row[j] = acc
                if len(x.cache) < 64:
                    x.cache[key] = row
            out.append(row)
        return out

    @staticmethod
    def _node_list(c: _Chain) -> list[int]:
        """The chain's blocks as a list of ints (read only)."""
        return c.nodes.tolist()

    def _merged_nodes(self, x: _Chain, y: _Chain, kind: int, k: int) -> np.ndarray:
        X, Y = x.nodes, y.nodes
        X1, X2 = X[:k], X[k:]
        parts = {X_Y: (X, Y), Y_X: (Y, X), X1_Y_X2: (X1, Y, X2), Y_X2_X1: (Y, X2, X1),
                 X2_X1_Y: (X2, X1, Y), X2_Y_X1: (X2, Y, X1)}[kind]
        return np.concatenate(parts)

    @staticmethod
    def _join_self(ck: _Chain, cg: _Chain, between: list[int]) -> None:
        """The kept chain's own jumps after a merge: its own, the other's, the ones
        between (in that order: the order the sums over them follow)."""
        ck.selfj = ck.selfj + cg.selfj + between

    def _merge(self, a: int, b: int, plan: tuple[int, int, int]) -> int:
        xc, kind, k = plan
        x = self.chains[xc]
        y = self.chains[b if xc == a else a]
        nodes = self._merged_nodes(x, y, kind, k)
        keep, gone = min(a, b), max(a, b)
        ck, cg = self.chains[keep], self.chains[gone]
        between = self.adj[keep].pop(gone)
        del self.adj[gone][keep]
        self._join_self(ck, cg, between)
        for c, lst in self.adj.pop(gone).items():
            del self.adj[c][gone]
            mine = self.adj[keep].get(c)
            if mine is None:
                self.adj[keep][c] = lst
                self.adj[c][keep] = lst
            else:
                mine.extend(lst)
        ck.nodes = nodes
        ck.size += cg.size
        ck.count += cg.count
        ck.ver += 1
        ck.cache = None
        ck.head, ck.tail = int(nodes[0]), int(nodes[-1])
        ck.zero = ck.zero or cg.zero
        ck.bound = None
        del self.chains[gone]
        self._place(keep, nodes)
        return keep

    def _pair_bound(self, ca: _Chain, cb: _Chain, lst: list[int]) -> float:
        """No merge of the two chains gains more than this (see :meth:`_inter_bound`,
        :meth:`_split_bound`); a concatenation that reaches it needs no split search."""
        ub = self._inter_bound(ca, cb, lst)
        if self.p.chain_split and self._bounds_valid:
            ub += max(self._split_bound(ca), self._split_bound(cb))
        elif self.p.chain_split:
            return np.inf
        return ub

    def _inter_bound(self, ca: _Chain, cb: _Chain, lst: list[int]) -> float:
        """An upper bound on what the jumps between two chains can score after any merge.
        A jump becomes a fall-through only if its target starts its chain or its source
        ends its chain (every merge kind puts a piece boundary next to the unsplit chain's
        ends, or joins the chains' own ends); any other jump scores at most its best
        forward or backward score.  With zero-size blocks around, nothing is ruled out."""
        top = self.l_top
        if ca.zero or cb.zero:
            return _seq_sum(top, lst)
        lo, es, ed = self.l_lo, self.l_es, self.l_ed
        heads, tails = (ca.head, cb.head), (ca.tail, cb.tail)
        total = 0.0
        for e in lst:
            total += top[e] if ed[e] in heads or es[e] in tails else lo[e]
        return total

    def _split_bound(self, c: _Chain) -> float:
        """An upper bound on what splitting ``c`` can add from its own jumps, whatever the
        partner: the best of the ``-|X|`` row (Y X2 X1 and X2 X1 Y move every crossing jump
        by it), or 0.  Valid when a fall-through outweighs any jump (both parameter sets):
        X1 Y X2 only pushes crossing jumps apart (never a gain) and X2 Y X1 puts them
        farther apart than X2 X1 Y does, on the same side."""
        got = c.bound
        if got is None:
            if c.cache is None:
                c.cache = {}
            L = len(c.nodes)
            got = 0.0
            if L >= 2 and c.selfj:
                if L + 1 <= SMALL_MERGE:
                    xl = self._node_list(c)
                    off, o = {}, 0
                    for v in xl:
                        off[v] = o
                        o += self.l_sizes[v]
                    row = self._self_rows_small(c, xl, off, {v: i for i, v in enumerate(xl)},
                                                [X2_X1_Y], 0)[0]
                    got = max(0.0, max(row[1:L]))
                else:
                    row = self._self_gains(c, [X2_X1_Y], 0, np.arange(1, L))[0]
                    got = max(0.0, float(row.max()))
            c.bound = got
        return got

    def run(self, lazy: bool = True) -> list[int]:
        """Merge until no pair gains.  ``lazy``: a pair first enters the heap with an upper
        bound of its gain (the jumps between the chains all becoming fall-throughs, plus
        :meth:`_split_bound`) and is evaluated only when that bound reaches the top; ties
        put bounds before exact gains, so the merges are those of evaluating every pair at
        once (``lazy=False``), only cheaper: most bounds go stale before they surface."""
        p = self.p
        lazy = lazy and self._bounds_valid
        heap: list = []

        def push(a: int, b: int) -> None:
            lo, hi = (a, b) if a < b else (b, a)
            cl, ch = self.chains[lo], self.chains[hi]
            if lazy:
                ub = self._inter_bound(cl, ch, self.adj[lo][hi])
                if p.chain_split:  # (the cached bound read here: most pushes hit it)
                    bl, bh = cl.bound, ch.bound
                    ub += max(self._split_bound(cl) if bl is None else bl,
                              self._split_bound(ch) if bh is None else bh)
                if ub > MIN_GAIN:
                    heapq.heappush(heap, (-ub, 0, lo, hi, cl.ver, ch.ver, None))
                return
            exact(lo, hi)

        def exact(lo: int, hi: int) -> None:
            got = self._best_merge(lo, hi)
            if got is not None and got[0] > MIN_GAIN:
                heapq.heappush(heap, (-got[0], 1, lo, hi, self.chains[lo].ver,
                                      self.chains[hi].ver, got[1]))

        for a in sorted(self.adj):
            for b in sorted(self.adj[a]):
                if a < b:
                    push(a, b)
        while heap:
            _, is_exact, lo, hi, vl, vh, plan = heapq.heappop(heap)
            cl, ch = self.chains.get(lo), self.chains.get(hi)
            if cl is None or ch is None or cl.ver != vl or ch.ver != vh:
                continue  # stale: one of the chains changed since this entry was made
            if not is_exact:
                exact(lo, hi)
                continue
            keep = self._merge(lo, hi, plan)
            for c in sorted(self.adj[keep]):
                push(keep, c)
        return self._concat()

    def _concat(self) -> list[int]:
        chains = sorted(self.chains.values(),
                        key=lambda c: (c.head != 0, -c.count / max(c.size, 1), c.cid))
        order = [int(v) for c in chains for v in c.nodes]
        order += np.flatnonzero(~self.hot).tolist()
        return order



def _seq_sum(xs: list[float], idx: list[int]) -> float:
    """``xs[i]`` summed over ``idx`` one by one from 0.0, left to right.  Why not ``sum()``:
    from Python 3.12 it sums floats with Neumaier's compensation, so the merger's bounds
    (and a near-tie's outcome) would differ between Python versions, and the compiled
    kernel (:mod:`bbmap.layout.exttsp_numba`) could match only one of them.  This is the
    3.11 ``sum()``, bit for bit, on every version."""
    r = 0.0
    for i in idx:
        r += xs[i]
    return r


def _np_sum(xs: list[float]) -> float:
    """``float(np.asarray(xs).sum())`` in plain Python, to the last bit: numpy's pairwise
    summation (a plain loop from 0.0 below 8 items, eight running sums up to 128, halves
    cut at a multiple of 8 above).  The lean merger uses it where the numpy path sums."""
    n = len(xs)
    if n < 8:
        r = 0.0
        for x in xs:
            r += x
        return r
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = xs[:8]
        i, stop = 8, n - n % 8
        while i < stop:
            r0 += xs[i]
            r1 += xs[i + 1]
            r2 += xs[i + 2]
            r3 += xs[i + 3]
            r4 += xs[i + 4]
            r5 += xs[i + 5]
            r6 += xs[i + 6]
            r7 += xs[i + 7]
            i += 8
        r = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for x in xs[stop:]:
            r += x
        return r
    h = n // 2
    h -= h % 8
    return _np_sum(xs[:h]) + _np_sum(xs[h:])


class _LeanMerger(_Merger):
    """:class:`_Merger` for a graph of fewer than ``SMALL_MERGE`` blocks, on plain lists.

    Why: most hot functions of a program have a handful of blocks, and there the merger's
    numpy set-up (~70 array calls on arrays of five items) cost more than the merging
    (issue 32: 0.21 ms a function, 0.78 s of ``plan_layout`` on 3,711 five-block
    functions).  Below ``SMALL_MERGE`` blocks every merge and every split bound already
    takes the plain-Python evaluators, so only the set-up and the chain bookkeeping move
    to lists; each float is made by the same operations in the same order as the numpy
    set-up (parallel jumps summed in input order as ``bincount`` does, chain counts summed
    pairwise as ``ndarray.sum`` does: :func:`_np_sum`), so the merges -- and the order --
    are the same bit for bit (``tests/test_layout_exttsp.py`` compares the two on random
    graphs, every attribute the merging reads included).

    ``sizes`` (ints), ``src``/``dst`` (ints), ``w`` (floats), ``counts`` (floats or None)
    and ``hot`` (bools or None) are lists, checked by the caller."""

    def __init__(self, sizes: list[int], src: list[int], dst: list[int], w: list[float],
                 counts: list[float] | None, p: ExtTspParams,
                 hot: list[bool] | None) -> None:
        n = len(sizes)
        self._start(n, p)
        self.l_sizes = sizes
        # LLVM's conditional split over every given edge (zero weights, self-loops too)
        outdeg = [0] * n
        for v in src:
            outdeg[v] += 1
        # positive jumps between distinct blocks, parallel ones summed in input order
        acc: dict[int, float] = {}
        for s_, d_, x in zip(src, dst, w):
            if x > 0 and s_ != d_:
                k = s_ * n + d_
                acc[k] = acc.get(k, 0.0) + x
        keys = sorted(acc)
        fd, bd = p.forward_distance, p.backward_distance
        es, ed, ft, cfw, dfw, cbw, dbw, top, lo = [], [], [], [], [], [], [], [], []
        for k in keys:
            s_, d_ = divmod(k, n)
            ew = acc[k]
            cond = outdeg[s_] > 1
            a = (p.fallthrough_weight if cond else p.fallthrough_weight_uncond) * ew
            b = (p.forward_weight if cond else p.forward_weight_uncond) * ew
            c = (p.backward_weight if cond else p.backward_weight_uncond) * ew
            es.append(s_)
            ed.append(d_)
            ft.append(a)
            cfw.append(b)
            dfw.append(b / fd)
            cbw.append(c)
            dbw.append(c / bd)
            m = b if b >= c else c
            top.append(a if a >= m else m)
            lo.append(m if m >= 0.0 else 0.0)
        self.l_es, self.l_ed, self.l_ft = es, ed, ft
        self.l_cfw, self.l_dfw, self.l_cbw, self.l_dbw = cfw, dfw, cbw, dbw
        self.l_top, self.l_lo = top, lo
        self.l_ew = [acc[k] for k in keys]
        if counts is None:  # Propeller's CalculateFrequency: max of in- and out-weight
            cin, cout = [0.0] * n, [0.0] * n
            for s_, d_, x in zip(es, ed, self.l_ew):
                cin[d_] += x
                cout[s_] += x
            counts = [a if a >= b else b for a, b in zip(cin, cout)]
        self.l_counts = counts
        if hot is None:  # a positive count or any positive jump, self-loops included
            hot = [c > 0 for c in counts]
            for s_, d_, x in zip(src, dst, w):
                if x > 0:
                    hot[s_] = hot[d_] = True
        else:
            hot = list(hot)
        if n:
            hot[0] = True
        self.l_hot = hot
        self.node_chain = [-1] * n
        self.node_pos = [0] * n
        self.node_off = [0] * n
        self.chains = {}
        self.adj = {}
        self._init_chains(len(keys))

    def _init_chains(self, E: int) -> None:
        n, es, ed, ew, hot = self.n, self.l_es, self.l_ed, self.l_ew, self.l_hot
        outdeg, indeg = [0] * n, [0] * n
        only = [-1] * n  # the one jump out of a block (when it has one)
        weight = {}
        for e in range(E):
            outdeg[es[e]] += 1
            indeg[ed[e]] += 1
            only[es[e]] = e
            weight[(es[e], ed[e])] = ew[e]
        fs = [-1] * n
        for v in range(n):
            if outdeg[v] != 1:
                continue
            t = ed[only[v]]
            # see _Merger._init_chains: not when the jump back is heavier
            if (indeg[t] == 1 and t != 0 and hot[v] and hot[t]
                    and ew[only[v]] >= weight.get((t, v), 0.0)):
                fs[v] = t
        fp = [-1] * n
        for v in range(n):
            if fs[v] >= 0:
                fp[fs[v]] = v
        self._build_chains(fs, fp, E)

    @staticmethod
    def _array(nodes: list[int]) -> list[int]:
        return nodes

    def _lists(self) -> tuple[list[bool], list[int], list[float]]:
        return self.l_hot, self.l_sizes, self.l_counts

    def _chain_of(self, singles: list[int]) -> list[int]:
        for v in singles:
            self.node_chain[v] = v
        return self.node_chain

    def _new_chain(self, nodes: list[int]) -> None:
        cid = min(nodes)
        sizes = self.l_sizes
        self.chains[cid] = _Chain(cid, nodes, sum(sizes[v] for v in nodes),
                                  _np_sum([self.l_counts[v] for v in nodes]),
                                  head=nodes[0], tail=nodes[-1],
                                  zero=any(sizes[v] == 0 for v in nodes))
        self.adj[cid] = {}
        self._place(cid, nodes)

    def _place(self, cid: int, nodes: list[int]) -> None:
        chain, pos, off, sizes, o = self.node_chain, self.node_pos, self.node_off, \
            self.l_sizes, 0
        for i, v in enumerate(nodes):
            chain[v], pos[v], off[v] = cid, i, o
            o += sizes[v]

    @staticmethod
    def _node_list(c: _Chain) -> list[int]:
        return c.nodes

    def _merged_nodes(self, x: _Chain, y: _Chain, kind: int, k: int) -> list[int]:
        X, Y = x.nodes, y.nodes
        if kind == X_Y:
            return X + Y
        if kind == Y_X:
            return Y + X
        X1, X2 = X[:k], X[k:]
        if kind == X1_Y_X2:
            return X1 + Y + X2
        if kind == Y_X2_X1:
            return Y + X2 + X1
        if kind == X2_X1_Y:
            return X2 + X1 + Y
        return X2 + Y + X1

    def _best_merge(self, a: int, b: int) -> tuple[float, tuple[int, int, int]] | None:
        ca, cb = self.chains[a], self.chains[b]
        x, y = (ca, cb) if a < b else (cb, ca)
        return self._best_merge_small(x, y, self.adj[a][b])

    def _concat(self) -> list[int]:
        chains = sorted(self.chains.values(),
                        key=lambda c: (c.head != 0, -c.count / max(c.size, 1), c.cid))
        order = [v for c in chains for v in c.nodes]
        order += [v for v, h in enumerate(self.l_hot) if not h]
        return order


class _FastMerger(_Merger):
    """:class:`_Merger` whose pair evaluations and split bounds run in the compiled kernel
    (:mod:`bbmap.layout.exttsp_numba`).

    Why: on a 5,000-block function the merger evaluates ~11,000 pairs of chains, and each
    evaluation was a few dozen numpy calls (merges over ``SMALL_MERGE`` blocks) or a Python
    loop over split positions -- per-call overhead, not arithmetic (spec/layout.md,
    "Speed").  The kernel is both evaluators step for step on flat arrays; the heap, the
    chains' bookkeeping and the merges stay this class's Python, so the merges, the order
    and every float are the reference's (``tests/test_exttsp_fast.py``).  numba is an
    optional extra (``bbmap[fast]``): see :func:`_fast_ok` for when this class is used.

    The kernel reads the block columns as one (4, n) int64 array -- size, chain id,
    position and byte offset in the chain -- whose last three rows *are* the merger's
    ``node_chain``/``node_pos``/``node_off`` (views: the reference's ``_place`` keeps them
    current), the per-jump floats as one (7, E) array, and each chain's own jumps as an
    int64 array (``_Chain.sja``, concatenated on a merge in the order the reference
    concatenates its lists)."""

    def __init__(self, sizes: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 counts: np.ndarray | None, p: ExtTspParams,
                 hot: np.ndarray | None) -> None:
        global _kernel_loaded
        super().__init__(sizes, src, dst, w, counts, p, hot)
        from bbmap.layout import exttsp_numba  # imports numba (when it is there)

        _kernel_loaded = True  # (from here on every size pays: see _fast_ok)

        self._kernel = exttsp_numba.best_merge
        self._bound_kernel = exttsp_numba.split_bound
        N = np.stack([self.sizes, self.node_chain, self.node_pos, self.node_off])
        self.N = N
        self.node_chain, self.node_pos, self.node_off = N[1], N[2], N[3]
        top = np.maximum(self.wft, np.maximum(self.c_fw, self.c_bw))
        lo = np.maximum(np.maximum(self.c_fw, self.c_bw), 0.0)
        self.F = np.ascontiguousarray(np.stack([self.wft, self.c_fw, self.d_fw, self.c_bw,
                                                self.d_bw, top, lo]), dtype=np.float64)
        self.EN = np.ascontiguousarray(np.stack([self.es, self.ed]), dtype=np.int64)
        self.small = int(SMALL_MERGE)
        self.P = np.array([int(p.chain_split), int(p.chain_split_threshold),
                           int(p.split_along_jumps), int(self._bounds_valid), self.small],
                          np.int64)
        for c in self.chains.values():
            c.sja = np.array(c.selfj, np.int64)
            c.selfj = None  # (the arrays are the truth from here on)

    @staticmethod
    def _selfj_array(c: _Chain) -> np.ndarray:
        return c.sja

    @staticmethod
    def _join_self(ck: _Chain, cg: _Chain, between: list[int]) -> None:
        ck.sja = np.concatenate((ck.sja, cg.sja, np.array(between, np.int64)))

    def _split_bound(self, c: _Chain) -> float:
        got = c.bound
        if got is None:
            got = c.bound = float(self._bound_kernel(self.F, self.EN, self.N, self.small,
                                                     c.nodes, c.sja, c.size))
        return got

    def _best_merge(self, a: int, b: int) -> tuple[float, tuple[int, int, int]] | None:
        lst = np.array(self.adj[a][b], np.int64)
        ca, cb = self.chains[a], self.chains[b]
        x, y = (ca, cb) if a < b else (cb, ca)
        nan = math.nan
        xb = nan if x.bound is None else x.bound
        yb = nan if y.bound is None else y.bound
        have, sg = 0, [_NO_SG, _NO_SG]
        while True:
            st, g, c, kind, k, xb2, yb2, o, kinds, ks = self._kernel(
                self.F, self.EN, self.N, self.P, x.nodes, x.sja, x.cid, x.size, x.zero, xb,
                y.nodes, y.sja, y.cid, y.size, y.zero, yb, lst, have, sg[0], sg[1])
            if not st:
                break
            # a long chain at a few split positions: its own jumps' gains are the
            # reference's matrix product (BLAS rounding), computed by the reference
            X, Y = (x, y) if o == 0 else (y, x)
            sg[o] = np.ascontiguousarray(self._self_gains(X, kinds.tolist(), Y.size, ks))
            have |= 1 << o
        # (float(): without numba the kernel's numbers are numpy scalars)
        if x.bound is None and xb2 == xb2:
            x.bound = float(xb2)
        if y.bound is None and yb2 == yb2:
            y.bound = float(yb2)
        return None if kind < 0 else (float(g), (int(c), int(kind), int(k)))


_NO_SG = np.zeros((0, 0))
_kernel_loaded = False  # a _FastMerger has run in this process (its kernel is loaded)


def _csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, order


def ext_tsp_order(sizes: Sequence[int] | np.ndarray, edges: Sequence | np.ndarray,
                  params: ExtTspParams = PROPELLER, *, counts: Sequence[float] | None = None,
                  hot: Sequence[bool] | np.ndarray | None = None) -> list[int]:
    """A block order of high Ext-TSP score; block 0 (the entry) stays first.

    ``edges`` are (src, dst, weight); ``counts`` are block execution counts (default: the
    larger of each block's in- and out-weight, as Propeller computes it).  Hot blocks (a
    positive count or jump, and the entry) are laid out by the optimiser; the others follow
    in index order.  Deterministic: the same arrays give the same order."""
    s = np.asarray(sizes, dtype=np.int64)
    n = len(s)
    if n == 0:
        return []
    if (s < 0).any():
        raise ValueError("negative block size")
    src, dst, w = edge_arrays(n, edges)
    c = None if counts is None else np.asarray(counts, dtype=np.float64)
    if c is not None and len(c) != n:
        raise ValueError("counts must have one value per block")
    h = None if hot is None else np.asarray(hot, bool)
    if n < SMALL_MERGE:  # every merge is a short one: lists throughout (_LeanMerger)
        return _LeanMerger(s.tolist(), src.tolist(), dst.tolist(), w.tolist(),
                           None if c is None else c.tolist(), params,
                           None if h is None else h.tolist()).run()
    if _fast_ok(n):
        return _FastMerger(s, src, dst, w, c, params, h).run()
    return _Merger(s, src, dst, w, c, params, h).run()


def _fast_ok(n: int) -> bool:
    """Lay out an ``n``-block function with the compiled kernel: numba is installed and
    allowed, and the function is big enough to pay for what the process has not loaded
    yet (:data:`FAST_MIN_BLOCKS`, :data:`FAST_NUMBA_MIN_BLOCKS`)."""
    import sys

    if n < FAST_MIN_BLOCKS and not _kernel_loaded and (
            n < FAST_NUMBA_MIN_BLOCKS or "numba" not in sys.modules):
        return False
    # (numba installed and not switched off by $BBMAP_NO_NUMBA: the solver's rule too)
    from bbmap.installed import numba_available

    if not numba_available():
        return False
    from bbmap.layout import exttsp_numba  # (imports numba)

    # numba found but not importable (e.g. built for another numpy): the kernel would be
    # plain Python, slower than the reference
    return exttsp_numba.compiled()
