"""The compiler's PGO analysis map held against measured counts (``verify --profile``).

What clang wrote into the map (``-pgo-analysis-map=func-entry-count,bb-freq,br-prob``) is
what it *believed*: per block, the probability of each successor (a numerator over 2^31);
per block, a frequency relative to the function's entry; per function, an entry count.
Version-5 maps built from a Propeller CFG profile also carry post-link block and edge
counts.  This module compares each belief with the counts measured in a real run and
classifies it **matched**, **mismatched** or **unknown** (too few samples to tell).

Input is an ``AnnotateResult``-like object (:class:`Measured`): the block map, per-block
execution counts and block-to-block edge counts.  That is the seam for merged aggregates:
nothing here reads perf.data.

The statistics (spec/verify.md, "PGO analysis map against a profile"):

* **branches** - a block with at least two outcomes (two successors, or one successor
  whose probability leaves room for an exit: a conditional tail call or return).  For
  successor ``s`` of block ``b`` the compiler says ``p``; the run measured ``k`` transfers
  ``b -> s`` out of ``n`` executions of ``b``.  ``k/n`` gets a Wilson score interval at
  the chosen confidence.  The successor is *matched* when the whole interval lies within
  ``p +- threshold``, *mismatched* when the whole interval lies outside it, *unknown*
  otherwise.  A branch is mismatched if any successor is, matched if all are.
* **block frequencies** - the compiler's ``freq(b) / freq(entry)`` against the measured
  ``count(b) / count(entry)``.  Given ``x = count(b)`` and ``y = count(entry)``, ``x`` is
  binomial in ``x + y`` with parameter ``r / (1 + r)`` for the true ratio ``r``, so a
  Wilson interval on ``x / (x + y)`` maps to an interval on ``r``; the band is
  ``[belief / factor, belief * factor]``.
* **entry counts** - each function's share of all entry counts in the map against its
  share of the measured entries (Wilson interval on the share, same factor band).
* **post-link CFG** (feature 0x80) - the post-link edge counts over the block's post-link
  count give probabilities, the post-link block counts give frequencies; both are judged
  exactly as the compiler's, under the source name ``postlink``.

Scores (point estimates, no interval): per branch the total-variation distance between
the believed and measured outcome distributions (successors plus "leaves the function");
a function's / the binary's branch score is one minus the execution-weighted mean of it.
Block score: the overlap ``sum(min(share))`` of the believed and measured block-count
distributions within a function (llvm-profdata's overlap measure); entry score: the same
overlap across functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from bbmap.formats.bbaddrmap import (
    FEAT_BB_FREQ,
    FEAT_BR_PROB,
    FEAT_FUNC_ENTRY_COUNT,
    FEAT_POST_LINK_CFG,
    PROB_ONE,
)
from bbmap.model import BlockMap

# ---- parameters -----------------------------------------------------------------------
DEFAULT_THRESHOLD = 0.20  # |measured - believed| probability; llvm-profgen PR #93975
# (pgo-accuracy-metrics-branch-probability-threshold) defaults to 20 percentage points
DEFAULT_FREQ_FACTOR = 2.0  # relative block frequency / entry share within a factor of 2
DEFAULT_CONFIDENCE = 0.95  # two-sided, for every Wilson interval
RARE = 0.01  # relative frequencies (to the entry) and entry shares below this are "rare":
# the factor band does not reach down to them, and rare matches rare, so a block the
# belief says never runs is not mismatched because a run executes it once in 10,000
EXIT_MIN = 1e-6  # believed probability mass of "leaves the function" that makes a block
# with one successor a branch (sums of one block's numerators are 2^31 +- 1 by rounding)

# edge kinds that move control between two blocks of one function (bbmap.aggregate.lbr)
_INTRA_KINDS = ("branch", "fallthrough")

VERDICTS = ("matched", "mismatched", "unknown")
MATCHED, MISMATCHED, UNKNOWN = range(3)
SOURCES = ("compiler", "postlink")


class Measured(Protocol):
    """What the comparison needs from a run (``bbmap.aggregate.AnnotateResult`` has it)."""

    block_map: BlockMap
    block_count: np.ndarray  # i8 per block: executions (LBR estimate or inferred)
    edge_from: np.ndarray  # global block indexes
    edge_to: np.ndarray
    edge_kind: np.ndarray  # index into bbmap.aggregate.lbr.EDGE_KINDS
    edge_count: np.ndarray


@dataclass(frozen=True)
class Options:
    """The knobs of the comparison (CLI flags, API keywords)."""

    threshold: float = DEFAULT_THRESHOLD
    freq_factor: float = DEFAULT_FREQ_FACTOR
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if not self.freq_factor > 1.0:
            raise ValueError(f"frequency factor must be > 1, got {self.freq_factor}")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence}")

    @property
    def z(self) -> float:
        return NormalDist().inv_cdf(0.5 + self.confidence / 2.0)

    def to_json(self) -> dict[str, float]:
        return {"threshold": self.threshold, "freq_factor": self.freq_factor,
                "confidence": self.confidence}


# ---- the statistics (arrays in, arrays out) ---------------------------------------------
def wilson(k: np.ndarray, n: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion ``k / n`` (``[0, 1]`` where n == 0).

    Chosen over the normal (Wald) interval because it stays inside [0, 1] and keeps its
    coverage near 0 and 1, where branch probabilities live (Brown, Cai & DasGupta 2001).
    """
    k = np.asarray(k, np.float64)
    n = np.asarray(n, np.float64)
    z2 = z * z
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n > 0, k / n, 0.0)
        den = 1.0 + z2 / n
        mid = (p + z2 / (2 * n)) / den
        half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den
        lo = np.where(n > 0, np.clip(mid - half, 0.0, 1.0), 0.0)
        hi = np.where(n > 0, np.clip(mid + half, 0.0, 1.0), 1.0)
    # exact ends: no successes -> lo is 0, all successes -> hi is 1
    lo = np.where(k <= 0, 0.0, lo)
    hi = np.where((n > 0) & (k >= n), 1.0, hi)
    return lo, hi


def classify(lo: np.ndarray, hi: np.ndarray, band_lo: np.ndarray, band_hi: np.ndarray
             ) -> np.ndarray:
    """MATCHED when ``[lo, hi]`` lies inside the band, MISMATCHED when it misses the band
    entirely, UNKNOWN when the interval straddles an edge of the band."""
    out = np.full(len(lo), UNKNOWN, np.int8)
    out[(lo >= band_lo) & (hi <= band_hi)] = MATCHED
    out[(hi < band_lo) | (lo > band_hi)] = MISMATCHED
    return out


def ratio_interval(x: np.ndarray, y: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Interval on the ratio of two counts' rates: Wilson on ``x / (x + y)`` mapped by
    ``q -> q / (1 - q)`` (the conditional-binomial interval for a ratio of Poisson rates)."""
    lo, hi = wilson(x, np.asarray(x, np.float64) + y, z)
    with np.errstate(divide="ignore"):
        rlo = np.where(lo < 1.0, lo / (1.0 - lo), np.inf)
        rhi = np.where(hi < 1.0, hi / (1.0 - hi), np.inf)
    return rlo, rhi


def factor_band(v: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    """``[v / factor, v * factor]``, widened to ``[0, RARE]`` at the rare end."""
    return np.where(v >= RARE, v / factor, 0.0), np.maximum(v * factor, RARE)


def _distance(lo: np.ndarray, hi: np.ndarray, v: np.ndarray) -> np.ndarray:
    """How far ``v`` lies outside ``[lo, hi]`` (0 when inside): the *least* the belief is
    off by, given the measurement."""
    return np.maximum(0.0, np.maximum(lo - v, v - hi))


# ---- the comparison ----------------------------------------------------------------------
@dataclass
class BranchTable:
    """One row per (branch block, successor) the map lists; columns are numpy arrays."""

    source: str
    block: np.ndarray  # global index of the branch block
    target: np.ndarray  # global index of the successor
    believed: np.ndarray  # f8 probability
    taken: np.ndarray  # f8 measured transfers block -> successor
    executions: np.ndarray  # f8 measured executions of the block
    lo: np.ndarray
    hi: np.ndarray
    verdict: np.ndarray  # i1 per row
    deff: np.ndarray  # f8 design effect of the block's evidence (1: independent records)
    # per branch (unique blocks, ascending)
    branch_block: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    branch_verdict: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    branch_tv: np.ndarray = field(default_factory=lambda: np.zeros(0))  # total variation
    branch_off: np.ndarray = field(default_factory=lambda: np.zeros(0))  # least |delta|
    branch_delta: np.ndarray = field(default_factory=lambda: np.zeros(0))  # max |delta|
    branch_rows: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # CSR


@dataclass
class FreqTable:
    """One row per judged block (not the entry, not empty) of a function with frequencies."""

    source: str
    block: np.ndarray
    entry: np.ndarray  # the function's entry block
    believed: np.ndarray  # f8 freq(b) / freq(entry)
    count: np.ndarray  # f8 measured executions of b
    entry_count: np.ndarray  # f8 measured executions of the entry
    lo: np.ndarray
    hi: np.ndarray
    verdict: np.ndarray
    off: np.ndarray  # least |log2(measured / believed)| the interval allows
    deff: np.ndarray  # f8 design effect of the ratio's evidence


@dataclass
class EntryTable:
    """One row per function with an entry count in the map."""

    func: np.ndarray  # block-map function index
    believed: np.ndarray  # u8 entry count as the map says
    share: np.ndarray  # f8 believed share of all entry counts
    measured: np.ndarray  # f8 measured entries (executions of the entry block)
    total: float  # measured entries of all these functions
    lo: np.ndarray
    hi: np.ndarray
    verdict: np.ndarray
    deff: np.ndarray


@dataclass
class Comparison:
    """Every table of one comparison, before it is shaped into a report."""

    block_map: BlockMap
    options: Options
    count_source: str  # "lbr" | "inferred"
    branches: dict[str, BranchTable]  # by source
    freqs: dict[str, FreqTable]
    entries: EntryTable | None
    block_count: np.ndarray  # the (scaled) executions used
    unknown_successors: int  # successor IDs that name no block of the function
    notes: list[str] = field(default_factory=list)


def _block_geometry(m: BlockMap) -> tuple[np.ndarray, np.ndarray]:
    """(function of each block, entry block of each function or -1)."""
    b = np.arange(m.num_blocks, dtype=np.int64)
    fn = np.asarray(m.block_function(b), np.int64) if m.num_blocks else b
    first = m.range_block_ptr[m.func_range_ptr[:-1]].astype(np.int64)
    last = m.range_block_ptr[m.func_range_ptr[1:]].astype(np.int64)
    return fn, np.where(last > first, first, -1)


def _lookup(keys: np.ndarray, vals: np.ndarray, want: np.ndarray) -> np.ndarray:
    if not len(keys):
        return np.zeros(len(want))
    pos = np.clip(np.searchsorted(keys, want), 0, len(keys) - 1)
    return np.where(keys[pos] == want, vals[pos], 0.0)


def _deff(v_cluster: np.ndarray, v_binomial: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Design effect: cluster-robust over binomial variance, at least 1; ``bound`` (the
    mean cluster size, i.e. perfectly correlated stacks) where the binomial variance is 0
    (a measured ratio of exactly 0 or 1 says nothing about its spread)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(v_binomial > 0, v_cluster / np.where(v_binomial > 0, v_binomial, 1),
                     bound)
    return np.maximum(np.nan_to_num(d, nan=1.0, posinf=1.0), 1.0)


@dataclass
class _Evidence:
    """The measured side, on one scale, with what is needed for design effects."""

    B: int
    count: np.ndarray  # f8 executions per block (scaled)
    raw: np.ndarray  # f8 executions per block (as counted)
    ekeys: np.ndarray  # sorted from * B + to of intra-function transfers
    evals: np.ndarray  # f8 their counts (scaled)
    eraw: np.ndarray  # f8 their counts (as counted)
    out_raw: np.ndarray  # f8 per block: all intra-function transfers out of it
    moments: Any  # bbmap.aggregate.cluster.ClusterMoments or None
    samples: np.ndarray | None = None  # f8 IP samples per block, when counts are inferred
    # inferred counts' intervals (bbmap.inference.intervals, inf where unbounded): per
    # block, and per transfer in ``ekeys`` order; None for LBR counts
    block_low: np.ndarray | None = None
    block_high: np.ndarray | None = None
    elow: np.ndarray | None = None
    ehigh: np.ndarray | None = None

    def transfer_bounds(self, src: np.ndarray, tgt: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Each transfer's interval; one the flow left at 0 (not in the result) is
        ``[0, min(high of its ends)]``, what the edge bound of intervals.py gives."""
        key = src * max(self.B, 1) + tgt
        pos = np.clip(np.searchsorted(self.ekeys, key), 0, max(len(self.ekeys) - 1, 0))
        hit = (self.ekeys[pos] == key) if len(self.ekeys) else np.zeros(len(key), bool)
        lo = np.where(hit, self.elow[pos] if len(self.ekeys) else 0.0, 0.0)
        hi = np.where(hit, self.ehigh[pos] if len(self.ekeys) else 0.0,
                      np.minimum(self.block_high[src], self.block_high[tgt]))
        return lo, hi

    def sample_deff(self, count: np.ndarray, samples: np.ndarray) -> np.ndarray:
        """Inferred counts are flow estimates, not observations: the evidence behind them
        is the IP samples.  The factor that turns ``count`` into that many trials (inf,
        i.e. no evidence, where no sample backs it)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(samples > 0, count / np.where(samples > 0, samples, 1), np.inf)
        return np.where(count > 0, d, 1.0)

    def transfers(self, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = src * max(self.B, 1) + tgt
        return _lookup(self.ekeys, self.evals, key), _lookup(self.ekeys, self.eraw, key)

    def mean_cluster(self, sq: np.ndarray, total: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(total > 0, sq / np.where(total > 0, total, 1), 1.0)

    def branch_deff(self, src: np.ndarray, tgt: np.ndarray, k: np.ndarray, n: np.ndarray,
                    has_exit: np.ndarray) -> np.ndarray:
        """Per successor row: Var(sum_w k_w - q n_w) / (N q (1 - q)), with n_w the block's
        transfers out (no exit) or its executions (a believed exit) in stack w."""
        mo = self.moments
        if mo is None:
            return np.ones(len(src))
        k2, ko, kx = mo.edge_moments(src * max(self.B, 1) + tgt)
        n2 = np.where(has_exit, mo.x2[src], mo.o2[src])
        kn = np.where(has_exit, kx, ko)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(n > 0, k / np.where(n > 0, n, 1), 0.0)
        v_c = np.maximum(k2 - 2 * q * kn + q * q * n2, 0.0)
        return _deff(v_c, n * q * (1 - q), self.mean_cluster(n2, n))

    def ratio_deff(self, b: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Per block: Var(sum_w x_w - r y_w) against the Poisson variance of r = X / Y,
        x: the block's executions, y: its function entry's."""
        mo = self.moments
        if mo is None:
            return np.ones(len(b))
        X, Y = self.raw[b], self.raw[e]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(Y > 0, X / np.where(Y > 0, Y, 1), 0.0)
            v_c = np.maximum(mo.x2[b] - 2 * r * mo.xe[b] + r * r * mo.x2[e], 0.0)
            v_p = X * (X + Y) / np.where(Y > 0, Y, 1)  # Var(X - rY) if X, Y were Poisson
        bound = np.maximum(self.mean_cluster(mo.x2[b], X), self.mean_cluster(mo.x2[e], Y))
        return _deff(v_c, np.where((X > 0) & (Y > 0), v_p, 0.0), bound)

    def share_deff(self, e: np.ndarray, total: float) -> np.ndarray:
        """Per function entry block: design effect of its share of all entries."""
        mo = self.moments
        if mo is None or total <= 0:
            return np.ones(len(e))
        x = self.raw[e]
        q = x / total
        v_c = np.maximum(mo.x2[e] - 2 * q * mo.xE[e] + q * q * mo.E2, 0.0)
        return _deff(v_c, total * q * (1 - q), self.mean_cluster(mo.x2[e], x))


def _evidence(measured: Measured, lbr_scale: float) -> _Evidence:
    from bbmap.aggregate.lbr import EDGE_KINDS

    m = measured.block_map
    B = m.num_blocks
    kinds = [EDGE_KINDS.index(k) for k in _INTRA_KINDS]
    ft = EDGE_KINDS.index("fallthrough")
    ek = np.asarray(measured.edge_kind)
    keep = np.isin(ek, kinds)
    efrom = np.asarray(measured.edge_from, np.int64)[keep]
    key = efrom * max(B, 1) + np.asarray(measured.edge_to, np.int64)[keep]
    cnt = np.asarray(measured.edge_count, np.float64)[keep]
    # fall-throughs are counted once per range, taken branches once per record
    scaled = np.where(ek[keep] == ft, cnt * lbr_scale, cnt)
    uk, inv = np.unique(key, return_inverse=True)
    ev = np.bincount(inv, weights=scaled, minlength=len(uk)) if len(uk) else cnt[:0]
    er = np.bincount(inv, weights=cnt, minlength=len(uk)) if len(uk) else cnt[:0]
    raw = np.asarray(measured.block_count, np.float64)
    out_raw = np.bincount(efrom, weights=cnt, minlength=B)[:B] if B else np.zeros(0)
    inferred = getattr(measured, "count_source", None) == "inferred"
    smp = getattr(measured, "block_samples", None)
    out = _Evidence(B, raw * lbr_scale, raw, uk, ev, er, out_raw,
                    getattr(measured, "cluster", None),
                    np.asarray(smp, np.float64) if inferred and smp is not None else None)
    blo, bhi = getattr(measured, "block_low", None), getattr(measured, "block_high", None)
    elo, ehi = getattr(measured, "edge_low", None), getattr(measured, "edge_high", None)
    if inferred and blo is not None and elo is not None:
        def unbounded(x: np.ndarray) -> np.ndarray:
            x = np.asarray(x, np.float64)
            return np.where(x < 0, np.inf, x)

        out.block_low, out.block_high = np.asarray(blo, np.float64), unbounded(bhi)
        # transfers are one per (from, to) for inferred counts: the first row's bounds
        first = np.unique(inv, return_index=True)[1] if len(uk) else np.zeros(0, np.int64)
        out.elow = np.asarray(elo, np.float64)[keep][first]
        out.ehigh = unbounded(np.asarray(ehi)[keep])[first]
    return out


def bounds_interval(src: np.ndarray, k_lo: np.ndarray, k_hi: np.ndarray, n_blocks: int,
                    exit_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The share ``k / n`` of each successor row can be anything its counts' intervals
    allow: from ``k_lo`` against every other way out at its high end (``exit_hi``: a
    believed exit's room), to ``k_hi`` against every other at its low end."""
    fin_hi = np.where(np.isinf(k_hi), 0.0, k_hi)
    hi_sum = np.bincount(src, weights=fin_hi, minlength=n_blocks)[src]
    inf_any = np.bincount(src, weights=np.isinf(k_hi), minlength=n_blocks)[src] > 0
    lo_sum = np.bincount(src, weights=k_lo, minlength=n_blocks)[src]
    others_hi = np.where(inf_any & ~np.isinf(k_hi), np.inf, hi_sum - fin_hi) + exit_hi
    others_lo = lo_sum - k_lo
    with np.errstate(divide="ignore", invalid="ignore"):
        q_lo = np.where(np.isinf(others_hi), 0.0,
                        k_lo / np.maximum(k_lo + others_hi, 1e-300))
        q_hi = np.where(np.isinf(k_hi), 1.0, k_hi / np.maximum(k_hi + others_lo, 1e-300))
    return np.clip(np.nan_to_num(q_lo), 0, 1), np.clip(np.nan_to_num(q_hi, nan=1.0), 0, 1)


def _branch_table(m: BlockMap, source: str, targets: np.ndarray, rows: np.ndarray,
                  believed: np.ndarray, ev: _Evidence, opt: Options) -> BranchTable:
    """Judge the successor rows ``rows`` (indexes into the map's successor columns)."""
    B = m.num_blocks
    nsucc = np.diff(m.block_succ_ptr).astype(np.int64)
    src_all = np.repeat(np.arange(B, dtype=np.int64), nsucc)
    src, tgt, p = src_all[rows], targets[rows], believed[rows]
    # which blocks are branches: >= 2 listed outcomes, or one plus a believed exit
    n_rows = np.bincount(src, minlength=B)
    psum = np.bincount(src, weights=p, minlength=B)
    has_exit = 1.0 - psum > EXIT_MIN
    is_branch = (n_rows >= 2) | ((n_rows == 1) & has_exit)
    keep = is_branch[src]
    src, tgt, p = src[keep], tgt[keep], p[keep]
    k, k_raw = ev.transfers(src, tgt)
    # executions: the block's transfers out when the listed successors are all of its
    # outcomes (k and n then count the same records); with a believed exit (a conditional
    # tail call or return), its measured executions
    ksum = np.bincount(src, weights=k, minlength=B)
    xo = has_exit[src]
    n = np.where(xo, np.maximum(ev.count[src], ksum[src]), ksum[src])
    n_raw = np.where(xo, np.maximum(ev.raw[src], k_raw), ev.out_raw[src])
    if ev.samples is not None:
        # inferred: the split rests on the successors' IP samples, and a successor without
        # samples (a lone ``ret`` rarely gets one) says nothing about how often it ran, so
        # the evidence is the least-sampled successor's samples, once per successor
        smin = np.full(B, np.inf)
        np.minimum.at(smin, src, ev.samples[tgt])
        d = ev.sample_deff(n, smin[src] * n_rows[src])
    else:
        d = ev.branch_deff(src, tgt, k_raw, n_raw, xo)
    lo, hi = wilson(k / d, n / d, opt.z)
    if ev.elow is not None:
        # inferred: the counts themselves are estimates, each with its interval (the
        # model's spread as well as sampling); a share is only as sure as they are
        k_lo, k_hi = ev.transfer_bounds(src, tgt)
        exit_hi = np.where(xo, np.maximum(ev.block_high[src] - np.bincount(
            src, weights=k_lo, minlength=B)[src], 0.0), 0.0)
        q_lo, q_hi = bounds_interval(src, k_lo, k_hi, B, exit_hi)
        lo, hi = np.minimum(lo, q_lo), np.maximum(hi, q_hi)
    verdict = classify(lo, hi, p - opt.threshold, p + opt.threshold)
    t = BranchTable(source, src, tgt, p, k, n, lo, hi, verdict, d)
    if len(src):
        starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
        t.branch_block = src[starts]
        t.branch_rows = np.r_[starts, len(src)].astype(np.int64)
        anymis = np.maximum.reduceat((verdict == MISMATCHED).astype(np.int8), starts)
        allmat = np.minimum.reduceat((verdict == MATCHED).astype(np.int8), starts)
        t.branch_verdict = np.where(anymis > 0, MISMATCHED,
                                    np.where(allmat > 0, MATCHED, UNKNOWN)).astype(np.int8)
        q = np.where(n > 0, k / np.where(n > 0, n, 1), 0.0)
        dq = np.abs(q - p)
        # total variation over the outcomes: successors plus "leaves the block's function"
        exit_gap = np.abs(np.maximum(0.0, 1.0 - np.add.reduceat(q, starts))
                          - np.maximum(0.0, 1.0 - np.add.reduceat(p, starts)))
        t.branch_tv = 0.5 * (np.add.reduceat(dq, starts) + exit_gap)
        t.branch_delta = np.maximum.reduceat(dq, starts)
        t.branch_off = np.maximum.reduceat(_distance(lo, hi, p), starts)
    return t


def _freq_table(m: BlockMap, source: str, fn: np.ndarray, entry: np.ndarray,
                blocks: np.ndarray, freq: np.ndarray, ev: _Evidence,
                opt: Options) -> FreqTable:
    e = entry[fn[blocks]]
    ok = (e >= 0) & (blocks != e) & (m.block_size[blocks] > 0)
    blocks, e = blocks[ok], e[ok]
    fe = freq[e]
    ok = fe > 0  # a function whose entry the map calls never-run has no scale
    blocks, e, fe = blocks[ok], e[ok], fe[ok]
    r = freq[blocks] / fe
    x, y = ev.count[blocks], ev.count[e]
    if ev.samples is not None:
        d = ev.sample_deff(x + y, ev.samples[blocks] + ev.samples[e])
    else:
        d = ev.ratio_deff(blocks, e)  # one factor for both counts keeps their ratio
    lo, hi = ratio_interval(x / d, y / d, opt.z)
    if ev.block_low is not None:  # inferred: as sure as the counts' intervals
        with np.errstate(divide="ignore", invalid="ignore"):
            r_lo = ev.block_low[blocks] / ev.block_high[e]
            r_hi = ev.block_high[blocks] / np.where(ev.block_low[e] > 0, ev.block_low[e], 0)
        lo = np.minimum(lo, np.nan_to_num(r_lo, nan=0.0))
        hi = np.maximum(hi, np.nan_to_num(r_hi, nan=np.inf, posinf=np.inf))
    f = opt.freq_factor
    verdict = classify(lo, hi, *factor_band(r, f))
    with np.errstate(divide="ignore", invalid="ignore"):
        # the least factor the belief is off by (the rare end measured against RARE)
        off = np.where(verdict == MISMATCHED,
                       np.where(hi < r, np.log2(r / np.maximum(hi, 1e-300)),
                                np.log2(lo / np.maximum(r, RARE))), 0.0)
    off = np.minimum(np.nan_to_num(off, nan=0.0, posinf=64.0), 64.0)
    return FreqTable(source, blocks, e, r, x, y, lo, hi, verdict, off, d)


def compare(measured: Measured, options: Options | None = None, *,
            count_source: str | None = None, lbr_scale: float = 1.0) -> Comparison:
    """Judge every PGO belief of ``measured.block_map`` against ``measured``'s counts.

    ``lbr_scale`` multiplies block executions and fall-through edges so that they are on
    the scale of taken-branch records (:func:`lbr_range_scale`).  ``measured.cluster``
    (per-stack moments, ``annotate(cluster_stats=True)``), when present, widens every
    interval by its design effect; without it records count as independent trials.
    """
    opt = options or Options()
    m = measured.block_map
    B = m.num_blocks
    src_name = count_source or getattr(measured, "count_source", None) or "lbr"
    fn, entry = _block_geometry(m)
    ev = _evidence(measured, lbr_scale)
    feat = m.func_feature.astype(np.int64)
    nsucc = np.diff(m.block_succ_ptr).astype(np.int64)
    src_all = np.repeat(np.arange(B, dtype=np.int64), nsucc)
    # successor IDs -> global block indexes (by function and ID)
    bkey = (fn << 32) | m.block_id.astype(np.int64)
    order = np.argsort(bkey, kind="stable")
    skeys = bkey[order]
    want = (fn[src_all] << 32) | m.succ_id.astype(np.int64)
    pos = np.clip(np.searchsorted(skeys, want), 0, max(len(skeys) - 1, 0))
    found = (skeys[pos] == want) if len(skeys) else np.zeros(len(want), bool)
    targets = np.where(found, order[pos] if len(order) else 0, -1)
    cmp = Comparison(m, opt, src_name, {}, {}, None, ev.count, int((~found).sum()))
    if cmp.unknown_successors:
        cmp.notes.append(f"{cmp.unknown_successors} successor ID(s) name no block of their "
                         "function and were not judged (see the pgo-successors check)")
    if ev.elow is not None:
        spread = (getattr(measured, "sample_model", None) or {}).get("spread", 1.0)
        model = (getattr(measured, "sample_model", None) or {}).get("model", "?")
        cmp.notes.append(
            f"counts inferred from IP samples ({model} model): every interval spans what "
            f"the counts' own intervals allow (sampling, and a x{spread:g} spread of the "
            "time per instruction for time samples), so a belief the estimates cannot "
            "rule out is unknown, not mismatched")
    if ev.moments is None and src_name == "lbr":
        cmp.notes.append("no per-stack moments: LBR records were taken as independent "
                         "trials, so intervals are too narrow (annotate(cluster_stats=True))")
    # ---- branch probabilities
    rows = np.flatnonzero(found & ((feat[fn[src_all]] & FEAT_BR_PROB) != 0))
    if len(rows) or (feat & FEAT_BR_PROB).any():
        cmp.branches["compiler"] = _branch_table(
            m, "compiler", targets, rows, m.succ_prob.astype(np.float64) / PROB_ONE, ev, opt)
    # ---- post-link CFG counts (v5 feature 0x80): edge count / block count
    pl = (feat & FEAT_POST_LINK_CFG) != 0
    if pl.any():
        blk_pl = m.block_postlink_freq.astype(np.float64)
        denom = blk_pl[src_all]
        rows_pl = np.flatnonzero(found & pl[fn[src_all]] & (denom > 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            prob_pl = np.where(denom > 0, m.succ_postlink.astype(np.float64)
                               / np.where(denom > 0, denom, 1.0), 0.0)
        if len(rows_pl):
            cmp.branches["postlink"] = _branch_table(m, "postlink", targets, rows_pl,
                                                     np.minimum(prob_pl, 1.0), ev, opt)
        else:
            cmp.notes.append("post-link CFG feature present but every post-link count is "
                             "zero (the basic-block-sections profile had no CFG): not judged")
    # ---- block frequencies relative to the entry
    blocks_all = np.arange(B, dtype=np.int64)
    has_freq = (feat[fn] & FEAT_BB_FREQ) != 0 if B else np.zeros(0, bool)
    if has_freq.any():
        cmp.freqs["compiler"] = _freq_table(m, "compiler", fn, entry, blocks_all[has_freq],
                                            m.block_freq.astype(np.float64), ev, opt)
    if B and pl[fn].any() and m.block_postlink_freq.any():
        cmp.freqs["postlink"] = _freq_table(m, "postlink", fn, entry, blocks_all[pl[fn]],
                                            m.block_postlink_freq.astype(np.float64), ev,
                                            opt)
    # ---- entry counts across functions
    fe = np.flatnonzero(((feat & FEAT_FUNC_ENTRY_COUNT) != 0) & (entry >= 0))
    if len(fe):
        believed = m.func_entry_count[fe].astype(np.float64)
        meas = ev.count[entry[fe]]
        tot_b, tot_m = float(believed.sum()), float(meas.sum())
        share = believed / tot_b if tot_b > 0 else np.zeros(len(fe))
        if ev.samples is not None:
            d = ev.sample_deff(np.full(len(fe), tot_m),
                               np.full(len(fe), float(ev.samples[entry[fe]].sum())))
        else:
            d = ev.share_deff(entry[fe], float(ev.raw[entry[fe]].sum()))
        lo, hi = wilson(meas / d, tot_m / d, opt.z)
        if ev.block_low is not None:  # inferred: as sure as the entries' intervals
            one = np.zeros(len(fe), np.int64)
            q_lo, q_hi = bounds_interval(one, ev.block_low[entry[fe]],
                                         ev.block_high[entry[fe]], 1, np.zeros(len(fe)))
            lo, hi = np.minimum(lo, q_lo), np.maximum(hi, q_hi)
        verdict = classify(lo, hi, *factor_band(share, opt.freq_factor))
        cmp.entries = EntryTable(fe, m.func_entry_count[fe], share, meas, tot_m, lo, hi,
                                 verdict, d)
    return cmp


def lbr_range_scale(accounting: Any) -> float:
    """Taken-branch records per fall-through range in an LBR profile (32/31 for full
    32-entry stacks).

    Taken edges are counted once per branch record, block executions and fall-throughs
    once per range between two records; a stack of d records holds d - 1 ranges, so a
    range-counted event is seen (d - 1)/d as often as a record-counted one.  Multiplying
    range counts by records/ranges puts both on one scale.
    """
    from bbmap.buckets import DUPLICATE

    ranges = int(getattr(accounting, "total_ranges", 0))
    records = int(getattr(accounting, "total_branches", 0))
    branches = getattr(accounting, "branches", None)
    if branches is not None and len(branches) > DUPLICATE:
        records -= int(branches[DUPLICATE])
    return records / ranges if ranges > 0 and records > ranges else 1.0
