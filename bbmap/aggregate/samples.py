"""IP samples -> per-block and per-function counts (plain and period-weighted).

One pass of bincounts per batch; no Python work per sample.  Each sample is also put
in exactly one accounting bucket.
"""

from __future__ import annotations

import numpy as np

from bbmap.aggregate.accounting import Accounting
from bbmap.aggregate.functions import FunctionTable
from bbmap.aggregate.resolve import Resolved
from bbmap.buckets import IN_BLOCK, OTHER_DSO, OUTSIDE_FUNCTION


def _add_weighted(acc: np.ndarray, idx: np.ndarray, weights: np.ndarray) -> None:
    """``acc[idx] += weights`` exactly for u64 weights.  A float64 bincount is exact while
    every partial sum stays below 2**53; beyond that, sort and reduce in integers."""
    if not len(idx):
        return
    if int(weights.sum(dtype=np.uint64)) < (1 << 53) and weights.max() < (1 << 53):
        acc += np.bincount(idx, weights=weights.astype(np.float64),
                           minlength=len(acc)).astype(np.uint64)
        return
    order = np.argsort(idx, kind="stable")
    si, sw = idx[order], weights[order].astype(np.uint64)
    starts = np.flatnonzero(np.r_[True, si[1:] != si[:-1]])
    acc[si[starts]] += np.add.reduceat(sw, starts)


class SampleAggregator:
    """Accumulates IP samples over any number of batches and files."""

    def __init__(self, num_blocks: int, functions: FunctionTable, acct: Accounting) -> None:
        self.functions = functions
        self.acct = acct
        self.block_samples = np.zeros(num_blocks, np.int64)
        self.block_period = np.zeros(num_blocks, np.uint64)
        nk = functions.num_keys
        self.func_samples = np.zeros(nk, np.int64)
        self.func_period = np.zeros(nk, np.uint64)

    def add(self, r: Resolved, period: np.ndarray, dso_names: list[str]) -> None:
        n = len(r)
        self.acct.total_samples += n
        self.acct.total_period += int(period.sum(dtype=np.uint64))
        self.acct.add_samples(r.where, period)
        Accounting.add_named(self.acct.dso_samples, r.dso[r.where == OTHER_DSO], dso_names)

        inb = np.flatnonzero(r.where == IN_BLOCK)
        if len(inb):
            b = r.block[inb]
            self.block_samples += np.bincount(b, minlength=len(self.block_samples))
            _add_weighted(self.block_period, b, period[inb])
        # per-function: everything in the binary that has a function (symbol or map)
        inbin = np.flatnonzero(r.where <= OUTSIDE_FUNCTION)  # the three in-binary codes
        if len(inbin):
            k = self.functions.key_at(r.vaddr[inbin], r.func[inbin])
            ok = k >= 0
            if ok.any():
                self.func_samples += np.bincount(k[ok], minlength=len(self.func_samples))
                _add_weighted(self.func_period, k[ok], period[inbin][ok])

    def add_rows(self, r: Resolved, count: np.ndarray, period: np.ndarray,
                 dso_names: list[str]) -> None:
        """:meth:`add` for a batch reduced to distinct keys (bbmap.aggregate.distinct): row
        ``i`` stands for ``count[i]`` samples whose periods sum to ``period[i]`` (u8, as a
        u8 sum of theirs).  Same totals, buckets and per-block/per-function sums."""
        self.acct.total_samples += int(count.sum())
        self.acct.total_period += int(period.sum(dtype=np.uint64))
        self.acct.add_samples(r.where, period, count)
        other = r.where == OTHER_DSO
        if other.any():
            Accounting.add_named(self.acct.dso_samples, r.dso[other], dso_names, count[other])

        # np.add.at: exact integer sums (u8 periods mod 2**64, as a u8 sum is), and on a
        # batch's ~15k distinct keys far cheaper than a bincount over every block
        inb = np.flatnonzero(r.where == IN_BLOCK)
        if len(inb):
            b = r.block[inb]
            np.add.at(self.block_samples, b, count[inb])
            np.add.at(self.block_period, b, period[inb])
        inbin = np.flatnonzero(r.where <= OUTSIDE_FUNCTION)  # the three in-binary codes
        if len(inbin):
            k = self.functions.key_at(r.vaddr[inbin], r.func[inbin])
            ok = np.flatnonzero(k >= 0)
            if len(ok):
                np.add.at(self.func_samples, k[ok], count[inbin[ok]])
                np.add.at(self.func_period, k[ok], period[inbin[ok]])
