"""Per-stack moments of LBR counts: how clustered the evidence behind each count is.

One LBR stack holds up to 32 consecutive branches, so it sees a loop's branch many times in
a row and a burst of calls all at once.  Counts summed over stacks are right, but treating
every record as an independent trial makes any interval on them far too narrow.  The
cluster-robust ("sandwich") variance of a ratio of sums ``K / N`` over stacks ``w`` is
``sum_w (k_w - q n_w)**2 / N**2`` with ``q = K / N``, which needs, besides the sums, the
sums of squares and cross-products of the per-stack counts.  They are additive over
stacks, batches, files and merged aggregates, so this module keeps exactly those:

per block ``b`` (``x``: executions of ``b`` in the stack, as ``block_count`` counts them;
``o``: transfers out of ``b`` along intra-function edges; ``e``: executions of the entry
block of ``b``'s function; ``E``: executions of all function entry blocks)
    ``x2 = sum x**2``, ``o2 = sum o**2``, ``xe = sum x*e``, ``xE = sum x*E``
per intra-function edge ``b -> t`` (``k``: its transfers in the stack; kinds branch and
fall-through, the ones ``verify --profile`` compares)
    ``k2 = sum k**2``, ``ko = sum k*o``, ``kx = sum k*x``
and ``E2 = sum E**2``.  ``bbmap.verify.profile`` turns them into design effects.

Opt-in (``annotate(..., cluster_stats=True)``): it costs a few sorts per batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_FOLD_AT = 1 << 20  # pending edge rows before they are folded into the sorted store


@dataclass
class ClusterMoments:
    """The accumulated moments (see the module docstring); arrays over the block map."""

    x2: np.ndarray
    o2: np.ndarray
    xe: np.ndarray
    xE: np.ndarray
    E2: float = 0.0
    edge_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # f*B+t
    k2: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ko: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kx: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def edge_moments(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k2, ko, kx) of the edges ``from * B + to`` (zeros for unknown edges)."""
        if not len(self.edge_key):
            z = np.zeros(len(key))
            return z, z.copy(), z.copy()
        pos = np.clip(np.searchsorted(self.edge_key, key), 0, len(self.edge_key) - 1)
        hit = self.edge_key[pos] == key
        return (np.where(hit, self.k2[pos], 0.0), np.where(hit, self.ko[pos], 0.0),
                np.where(hit, self.kx[pos], 0.0))


class ClusterAccumulator:
    """Adds one batch of stacks at a time; the stacks of a batch never span batches."""

    def __init__(self, num_blocks: int, entry_of_block: np.ndarray,
                 is_entry: np.ndarray) -> None:
        self.B = num_blocks
        self.entry_of_block = entry_of_block  # i8 per block: its function's entry (-1)
        self.is_entry = is_entry  # bool per block
        z = np.zeros(num_blocks)
        self.x2, self.o2, self.xe, self.xE = z, z.copy(), z.copy(), z.copy()
        self.E2 = 0.0
        self._keys = np.zeros(0, np.int64)
        self._vals = np.zeros((0, 3))
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_n = 0

    def add(self, cover_stack: np.ndarray, cover_first: np.ndarray, cover_last: np.ndarray,
            edge_stack: np.ndarray, edge_from: np.ndarray, edge_to: np.ndarray) -> None:
        """``cover_*``: each valid fall-through range entered blocks first..last of its
        stack; ``edge_*``: each intra-function transfer (taken branch or fall-through)."""
        B = max(self.B, 1)
        # ---- x: executions per (stack, block)
        span = (cover_last - cover_first + 1).astype(np.int64)
        span = np.maximum(span, 0)
        blk = (np.repeat(cover_first - np.cumsum(np.r_[0, span[:-1]]), span)
               + np.arange(int(span.sum()))).astype(np.int64)
        xkey, x = np.unique(np.repeat(cover_stack.astype(np.int64), span) * B + blk,
                            return_counts=True)
        x = x.astype(np.float64)
        xs, xb = xkey // B, xkey % B
        self.x2 += np.bincount(xb, weights=x * x, minlength=self.B)
        # e: the entry block's executions in the same stack
        eb = self.entry_of_block[xb]
        e = _lookup(xkey, x, xs * B + np.maximum(eb, 0)) * (eb >= 0)
        self.xe += np.bincount(xb, weights=x * e, minlength=self.B)
        # E: all entries of the stack
        ent = self.is_entry[xb]
        stacks, sidx = np.unique(xs, return_inverse=True)
        E_stack = np.bincount(sidx, weights=np.where(ent, x, 0.0), minlength=len(stacks))
        self.xE += np.bincount(xb, weights=x * E_stack[sidx], minlength=self.B)
        self.E2 += float((E_stack * E_stack).sum())
        if not len(edge_from):
            return
        # ---- k: transfers per (stack, edge); o: per (stack, from-block)
        pair = edge_from.astype(np.int64) * B + edge_to.astype(np.int64)
        upair, pidx = np.unique(pair, return_inverse=True)
        P = len(upair)
        skey, k = np.unique(edge_stack.astype(np.int64) * P + pidx, return_counts=True)
        k = k.astype(np.float64)
        ks, kp = skey // P, skey % P
        kf = upair[kp] // B
        okey, oinv = np.unique(ks * B + kf, return_inverse=True)
        o = np.bincount(oinv, weights=k, minlength=len(okey))
        self.o2 += np.bincount(okey % B, weights=o * o, minlength=self.B)
        xo = _lookup(xkey, x, ks * B + kf)
        vals = np.stack([k * k, k * o[oinv], k * xo], axis=1)
        self._pending.append((upair[kp], vals))
        self._pending_n += len(kp)
        if self._pending_n > max(4 * len(self._keys), _FOLD_AT):
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        keys = np.concatenate([self._keys, *[p[0] for p in self._pending]])
        vals = np.concatenate([self._vals, *[p[1] for p in self._pending]])
        self._pending, self._pending_n = [], 0
        u, inv = np.unique(keys, return_inverse=True)
        out = np.zeros((len(u), 3))
        for c in range(3):
            out[:, c] = np.bincount(inv, weights=vals[:, c], minlength=len(u))
        self._keys, self._vals = u, out

    def _add(self, sums: ClusterAccumulator | ClusterMoments, keys: np.ndarray,
             vals: np.ndarray) -> None:
        """Add another's per-block sums and its per-edge sums (``keys``, ``vals``)."""
        self.x2 += sums.x2
        self.o2 += sums.o2
        self.xe += sums.xe
        self.xE += sums.xE
        self.E2 += sums.E2
        if len(keys):
            self._pending.append((keys, vals))
            self._pending_n += len(keys)
            self._fold()

    def merge(self, other: ClusterAccumulator) -> None:
        other._fold()
        self._add(other, other._keys, other._vals)

    def add_moments(self, m: ClusterMoments) -> None:
        """Add moments read back from an aggregate file (same binary)."""
        self._add(m, m.edge_key.astype(np.int64),
                  np.stack([m.k2, m.ko, m.kx], axis=1).astype(np.float64))

    def result(self) -> ClusterMoments:
        self._fold()
        return ClusterMoments(self.x2.copy(), self.o2.copy(), self.xe.copy(), self.xE.copy(),
                              self.E2, self._keys.copy(), self._vals[:, 0].copy(),
                              self._vals[:, 1].copy(), self._vals[:, 2].copy())


def _lookup(keys: np.ndarray, vals: np.ndarray, want: np.ndarray) -> np.ndarray:
    if not len(keys):
        return np.zeros(len(want))
    pos = np.clip(np.searchsorted(keys, want), 0, len(keys) - 1)
    return np.where(keys[pos] == want, vals[pos], 0.0)
