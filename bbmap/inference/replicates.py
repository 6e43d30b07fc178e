"""Split-half replicates of an inferred profile: what the layout asks before it trusts
inferred counts to reorder a function's blocks (spec/inference.md, "Replicates").

Why not the intervals.  Each block's and edge's interval (``intervals.py``) is a marginal
bound: it holds the true count, block by block.  The layout used to keep the compiler's
order unless the new order also won with *every* edge at its low end and again at its
high end.  Those two corners are not readings of the samples anyone could draw: an edge's
low end is what its block's other ways out cannot carry, 0 for nearly every arm of a
conditional branch, so the low corner scores the unconditional edges alone, and its
verdict is a residue that flips between two profiles of one run.  Measured on zstd 1.5.7
(e2e stale bench profiles): ``ZSTD_insertBt1``'s new order beats the compiler's by 567k,
748k and 794k (score units) at the counts of three profiles and by +16,778, +2,522 and
-6,717 at the low corner, so one of three profiles kept it in the compiler's order (2.5 M
taken branches more).  The corners kept 17-63% of zstd's Ext-TSP gain, and of the 56
functions one of three profiles kept, only 19 were kept by all three.

What replaces them.  The profile's samples are dealt at random into two halves (each
sample to either with probability 1/2: a binomial draw per IP address, which is the same
thing for a Poisson stream), and counts are inferred from each half alone, with the same
CFG, sample model and options.  A function keeps its new order only if each half, on its
own, also scores it above the compiler's order: the order must survive a re-draw of half
the evidence, twice.  On the same three zstd profiles the halves keep 16-23 functions
holding 0.2-1.5% of the gain (SQLite: 0.4-1.1%): small functions whose samples are too
few to order their blocks, while every function a profile orders decisively keeps its
order.  (The layout also keeps functions of fewer than ``plan.MIN_REORDER_SAMPLES``
samples, where the halves agree for the flow's sake, not the samples'.)  What they do not
cover: the time model's systematic error (a block that runs slower per instruction than
the model says is so in both halves); the intervals state that, and the layout measures
in the e2e bench are its test.

The draw is seeded (``SPLIT_SEED``) and made in address order, so the same samples give
the same halves in every run, whatever the order of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SPLIT_SEED = 0x5EED_B8A4  # the halves' draw: fixed, so the same samples split alike
HALVES = 2


@dataclass(frozen=True)
class ReplicateEdges:
    """The intra-function edges inferred from one half of the samples (global blocks;
    taken and fall-through rows apart, as the result's columns hold them)."""

    edge_from: np.ndarray  # i8
    edge_to: np.ndarray  # i8
    edge_count: np.ndarray  # i8

    @classmethod
    def of(cls, inferred: Any) -> ReplicateEdges:
        """The edges of a :class:`bbmap.inference.counts.Inferred`."""
        return cls(np.asarray(inferred.edge_from, np.int64),
                   np.asarray(inferred.edge_to, np.int64),
                   np.asarray(inferred.edge_count, np.int64))


def split_samples(ip_addr: np.ndarray | None, ip_samples: np.ndarray | None,
                  block_samples: np.ndarray, block_of: np.ndarray | None
                  ) -> list[tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]]:
    """The two halves: (block samples, IP histogram or None) each.  ``block_of`` is the
    block of each IP address (-1 outside every block).  A block's samples the histogram
    does not hold (none, or an aggregate without it) are split by their own draw, so each
    block's two halves add up to its samples."""
    rng = np.random.default_rng(SPLIT_SEED)
    bs = np.asarray(block_samples, np.int64)
    if ip_addr is None or not len(ip_addr):
        a = rng.binomial(bs, 0.5).astype(np.int64)
        return [(a, None), (bs - a, None)]
    order = np.argsort(np.asarray(ip_addr, np.uint64), kind="stable")
    addr = np.asarray(ip_addr, np.uint64)[order]
    n = np.asarray(ip_samples, np.int64)[order]
    blk = np.asarray(block_of, np.int64)[order]
    ha = rng.binomial(n, 0.5).astype(np.int64)
    inside = blk >= 0
    located = np.bincount(blk[inside], weights=n[inside], minlength=len(bs)).astype(np.int64)
    la = np.bincount(blk[inside], weights=ha[inside], minlength=len(bs)).astype(np.int64)
    rest = np.maximum(bs - located, 0)
    ra = rng.binomial(rest, 0.5).astype(np.int64)
    a = np.minimum(la + ra, bs)
    return [(a, (addr, ha)), (bs - a, (addr, n - ha))]


def infer_halves(cfg: Any, block_samples: np.ndarray,
                 ip: tuple[np.ndarray, np.ndarray] | None, **infer_kw: Any) -> list[Any]:
    """Counts inferred from each half of the samples (:func:`split_samples`) over ``cfg``
    (a :class:`bbmap.cfg.CFG`), with ``infer_kw`` as the full solve had them (model,
    solver, unknown, flow cache): one :class:`bbmap.inference.counts.Inferred` per half."""
    from bbmap.inference.counts import infer_counts
    from bbmap.inference.weights import locate, unique_starts

    if ip is not None and (not len(ip[0]) or not unique_starts(cfg)):
        ip = None  # the full solve fell back to per-block samples too (counts._model_for)
    block_of = locate(cfg, ip[0]) if ip is not None else None
    return [infer_counts(cfg, bs, ip=half_ip, **infer_kw)
            for bs, half_ip in split_samples(None if ip is None else ip[0],
                                             None if ip is None else ip[1], block_samples,
                                             block_of)]
