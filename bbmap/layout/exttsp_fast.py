"""The Ext-TSP merger with its pair evaluation compiled: :class:`_FastMerger`.

Why: on a 5,000-block function the greedy merger evaluates ~11,000 pairs of chains, and
each evaluation was a few dozen numpy calls (merges over ``SMALL_MERGE`` blocks) or a
Python loop over split positions (shorter ones) -- per-call overhead, not arithmetic
(spec/layout.md, "Speed").  :class:`_FastMerger` is :class:`~bbmap.layout.exttsp._Merger`
with one change: a pair is scored by :func:`bbmap.layout.exttsp_numba.best_merge`, the
same two evaluators step for step on flat arrays, compiled by numba.  The heap, the
chains' bookkeeping and the merges stay the reference's Python, so the merges, the order
and every float are the reference's (``tests/test_exttsp_fast.py`` holds them equal).

numba is an optional extra (``pip install 'bbmap[fast]'``), used as
:mod:`bbmap.inference.solvers_fast` uses it: imported only when a function of at least
:data:`bbmap.layout.exttsp.FAST_MIN_BLOCKS` blocks is laid out (importing numba and
loading the kernel's on-disk cache costs ~0.4 s, which a smaller function does not pay
back), ``$BBMAP_NO_NUMBA=1`` switches it off, and without numba the reference runs.
"""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np

from bbmap.layout import exttsp
from bbmap.layout.exttsp import _Chain, _Merger

ENV_NO_NUMBA = "BBMAP_NO_NUMBA"  # set to 1: never use numba (the reference path only)
_NO_SG = np.zeros((0, 0))


def available() -> bool:
    """numba is installed and not switched off by ``$BBMAP_NO_NUMBA`` (nothing imported)."""
    if os.environ.get(ENV_NO_NUMBA, "").strip() not in ("", "0"):
        return False
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


class _FastMerger(_Merger):
    """:class:`_Merger` whose pair evaluations and split bounds run in the kernel.

    The kernel reads the block columns as one (4, n) int64 array -- size, chain id,
    position and byte offset in the chain -- whose last three rows *are* the merger's
    ``node_chain``/``node_pos``/``node_off`` (views: the reference's ``_place`` keeps them
    current), the per-jump floats as one (7, E) array, and each chain's own jumps as an
    int64 array (``_Chain.sja``, concatenated on a merge in the order the reference
    concatenates its lists)."""

    def __init__(self, sizes: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray,
                 counts: np.ndarray | None, p: exttsp.ExtTspParams,
                 hot: np.ndarray | None) -> None:
        super().__init__(sizes, src, dst, w, counts, p, hot)
        from bbmap.layout import exttsp_numba  # imports numba (when it is there)

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
        self.small = int(exttsp.SMALL_MERGE)
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
