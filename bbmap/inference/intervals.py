"""How sure an inferred count is: per-block and per-edge intervals, and the floors that
keep every sampled block above zero (spec/inference.md, "Uncertainty").

Two things can make an inferred count wrong, and the interval covers both:

* **sampling**: a block credited ``n`` samples is an observation of a Poisson count.  Its
  two-sided ``CONFIDENCE`` interval ``[λ_lo(n), λ_hi(n)]`` (Garwood's exact bounds, from
  the regularized incomplete gamma function, below ``EXACT_BELOW`` samples; above it
  Wilson-Hilferty's cube-root approximation, within 1% of them) becomes a weight interval
  ``WEIGHT_SCALE * λ / units``;
* **the model**: what one execution costs.  Precise instruction samples fall on every
  retired instruction alike, so their weights have no model spread (``MODEL_SPREAD``
  1).  Time samples fall in proportion to time, which the disassembly only estimates: a
  block's time per instruction against the profile's mean lies within a factor
  ``TIME_SPREAD`` of the estimate (measured on the corpus and pgoflip cpu-clock profiles
  against exact counts: spec/inference.md), so its interval is widened by that factor
  each way.

Blocks without an observation (no unit: an empty block, a lone ``jmp``) take bounds from
their neighbours: a block can run no more often than its predecessors together, nor more
than its successors together (flow conservation), and its count is at least what it is
floored at.  Edges take ``[max(0, lo_u - Σ hi of u's other ways out, lo_v - Σ hi of v's
other ways in), min(hi_u, hi_v)]``.  Every interval is then widened to hold the inferred
count itself, so ``low <= count <= high`` always.  ``high`` is ``-1`` where nothing bounds
it (a block whose only neighbours are unbounded).

The floor of a sampled block is the low end of its own interval, at least 1: a sample
proves the block ran (for the time model a sample on its first instruction too: the
instruction about to retire was the block's).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from bbmap.inference.weights import PRECISE_MODEL, WEIGHT_SCALE, SampleEvidence

CONFIDENCE = 0.95  # two-sided, for every interval bbmap reports
_Z = 1.959963984540054  # the standard normal quantile at 1 - (1 - CONFIDENCE) / 2
# factor by which a time-sampled block's time per instruction may differ from the model's
# estimate (measured: spec/inference.md, "Uncertainty")
TIME_SPREAD = 8.0
PROPAGATION_ROUNDS = 4  # passes of neighbour bounds for blocks without an observation
EXACT_BELOW = 40.0  # sample counts below this get Garwood's exact bounds
_SERIES_TERMS = 400  # of the incomplete gamma series (x < 100 there: converged)
# Garwood's 95% bounds at n = 0 .. EXACT_BELOW, as _exact_table computes them (a test holds
# the two equal): the table every run would otherwise spend ~0.3 s of series on
GARWOOD_95_LOW = (
    0.000000, 0.025318, 0.242209, 0.618672, 1.089865, 1.623486, 2.201894, 2.814363, 3.453832,
    4.115373, 4.795389, 5.491160, 6.200575, 6.921952, 7.653930, 8.395386, 9.145382, 9.903126,
    10.667941, 11.439241, 12.216520, 12.999331, 13.787283, 14.580027, 15.377253, 16.178682,
    16.984063, 17.793170, 18.605797, 19.421755, 20.240874, 21.062996, 21.887976, 22.715682,
    23.545988, 24.378782, 25.213957, 26.051415, 26.891062, 27.732812, 28.576586,)
GARWOOD_95_HIGH = (
    3.688879, 5.571643, 7.224688, 8.767273, 10.241589, 11.668332, 13.059474, 14.422675,
    15.763189, 17.084803, 18.390356, 19.682039, 20.961585, 22.230396, 23.489621, 24.740219,
    25.982998, 27.218647, 28.447760, 29.670854, 30.888378, 32.100731, 33.308264, 34.511293,
    35.710098, 36.904932, 38.096024, 39.283582, 40.467796, 41.648837, 42.826865, 44.002026,
    45.174452, 46.344269, 47.511592, 48.676527, 49.839174, 50.999626, 52.157969, 53.314284,
    54.468647,)


def model_spread(model: str) -> float:
    """The model's spread: 1 for precise samples, ``TIME_SPREAD`` otherwise."""
    return 1.0 if model == PRECISE_MODEL else TIME_SPREAD


def poisson_interval(n: np.ndarray, z: float = _Z) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided bounds of a Poisson mean from an observed count ``n`` (float ok):
    ``lo`` solves P(Gamma(n) <= lo) = a/2, ``hi`` P(Gamma(n + 1) <= hi) = 1 - a/2 (a = 1 -
    confidence; ``n = 0``: ``[0, -ln(a/2)]``), exactly below ``EXACT_BELOW`` and by
    Wilson-Hilferty above it."""
    n = np.asarray(n, np.float64)
    alpha = 2 * (1 - 0.5 * (1 + math.erf(z / math.sqrt(2))))
    lo = np.zeros(len(n))
    pos = n > 0
    k = n[pos]
    lo[pos] = k * np.maximum(1 - 1 / (9 * k) - z / (3 * np.sqrt(k)), 0) ** 3
    k1 = n + 1
    hi = k1 * (1 - 1 / (9 * k1) + z / (3 * np.sqrt(k1))) ** 3
    small = n < EXACT_BELOW
    if small.any():
        # exact at whole counts, linear between them (refill samples count 0.1): one
        # table per confidence, made once (the incomplete gamma series is slow)
        grid, lo_t, hi_t = _exact_table(alpha) if z != _Z else _GARWOOD_95
        lo[small] = np.interp(n[small], grid, lo_t)
        hi[small] = np.interp(n[small], grid, hi_t)
    return lo, hi


_GARWOOD_95 = (np.arange(int(EXACT_BELOW) + 1, dtype=np.float64), np.array(GARWOOD_95_LOW),
               np.array(GARWOOD_95_HIGH))


@functools.lru_cache(maxsize=4)
def _exact_table(alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Garwood's bounds at n = 0, 1, ..., EXACT_BELOW."""
    grid = np.arange(int(EXACT_BELOW) + 1, dtype=np.float64)
    lo = np.where(grid > 0, _gamma_quantile(np.maximum(grid, 1e-12), alpha / 2), 0.0)
    hi = _gamma_quantile(grid + 1, 1 - alpha / 2)
    return grid, lo, hi


def _gamma_cdf(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Regularized lower incomplete gamma P(a, x) by its series (a > 0, small x)."""
    term = np.ones_like(x) / a
    total = term.copy()
    for k in range(1, _SERIES_TERMS):
        term = term * x / (a + k)
        total += term
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        logp = a * np.log(np.maximum(x, 1e-300)) - x - np.array(
            [math.lgamma(v) for v in a.tolist()]) + np.log(total)
    return np.where(x > 0, np.exp(np.minimum(logp, 0.0)), 0.0)


def _gamma_quantile(a: np.ndarray, p: float) -> np.ndarray:
    """x with P(a, x) = p, by bisection (P increases in x)."""
    lo = np.zeros_like(a)
    hi = 4 * a + 40.0
    for _ in range(60):
        mid = (lo + hi) / 2
        below = _gamma_cdf(a, mid) < p
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return (lo + hi) / 2


@dataclass
class Intervals:
    """Low and high bounds (weight units, like the counts) per block and per edge."""

    block_low: np.ndarray  # i8
    block_high: np.ndarray  # i8, -1: unbounded
    edge_low: np.ndarray
    edge_high: np.ndarray


def observed_bounds(ev: SampleEvidence, model: str) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) weight bounds of the blocks with an observation (others: 0, inf)."""
    spread = model_spread(model)
    lo_n, hi_n = poisson_interval(ev.samples)
    units = np.where(ev.known, ev.units, 1.0)
    lo = np.where(ev.known, WEIGHT_SCALE * lo_n / units / spread, 0.0)
    hi = np.where(ev.known, WEIGHT_SCALE * hi_n / units * spread, np.inf)
    return lo, hi


def ceilings(ev: SampleEvidence, model: str) -> np.ndarray:
    """The count a block's lack of samples allows at most, in weight units (-1: no bound):
    the high end of its interval for the observed blocks without samples.  Sampled blocks
    get none: their weight already pulls the flow towards it, and a ceiling there held
    blocks the time model under-weights below their true count (corpus cpu-clock block
    error 12.7% -> 53.1% with every block capped; spec/inference.md, "Ceilings")."""
    _, hi = observed_bounds(ev, model)
    cap = np.isfinite(hi) & (ev.samples <= 0)
    return np.where(cap, np.ceil(np.where(cap, hi, 0)), -1).astype(np.int64)


def floors(ev: SampleEvidence, raw_samples: np.ndarray, model: str) -> np.ndarray:
    """The count each block's samples prove, in weight units (0 for unsampled blocks)."""
    lo, _ = observed_bounds(ev, model)
    ran = np.asarray(raw_samples) > 0
    return np.where(ran, np.maximum(np.floor(lo), 1), 0).astype(np.int64)


def intervals(ev: SampleEvidence, model: str, floor: np.ndarray, count: np.ndarray,
              src: np.ndarray, dst: np.ndarray, edge_count: np.ndarray,
              entry: np.ndarray, exit_: np.ndarray) -> Intervals:
    """Bounds of every block (local indexes) and edge ``src -> dst`` of the inferred
    functions.  ``entry``: blocks flow may enter from outside (function entries, side
    entries); ``exit_``: blocks it may leave from."""
    B = len(count)
    lo, hi = observed_bounds(ev, model)
    lo = np.maximum(lo, floor)
    for _ in range(PROPAGATION_ROUNDS):
        # a block runs no more often than its predecessors together (unless flow may
        # enter it from outside), nor than its successors together (unless it may exit)
        hin = np.bincount(dst, weights=np.where(np.isinf(hi[src]), 0, hi[src]), minlength=B)
        inf_in = np.bincount(dst, weights=np.isinf(hi[src]), minlength=B) > 0
        hout = np.bincount(src, weights=np.where(np.isinf(hi[dst]), 0, hi[dst]), minlength=B)
        inf_out = np.bincount(src, weights=np.isinf(hi[dst]), minlength=B) > 0
        has_in = np.bincount(dst, minlength=B) > 0
        has_out = np.bincount(src, minlength=B) > 0
        by_in = np.where(~entry & has_in & ~inf_in, hin, np.inf)
        by_out = np.where(~exit_ & has_out & ~inf_out, hout, np.inf)
        new = np.minimum(hi, np.minimum(by_in, by_out))
        if np.array_equal(new, hi):
            break
        hi = new
    hi = np.maximum(hi, lo)
    # edges
    hs, hd = hi[src], hi[dst]
    e_hi = np.minimum(hs, hd)
    out_hi = np.bincount(src, weights=np.where(np.isinf(e_hi), 0, e_hi), minlength=B)
    out_inf = np.bincount(src, weights=np.isinf(e_hi), minlength=B)
    in_hi = np.bincount(dst, weights=np.where(np.isinf(e_hi), 0, e_hi), minlength=B)
    in_inf = np.bincount(dst, weights=np.isinf(e_hi), minlength=B)
    fin = np.where(np.isinf(e_hi), 0, e_hi)
    # the other ways out of u: its other edges, and leaving the function if it may
    others_out = np.where((out_inf[src] - np.isinf(e_hi) > 0) | exit_[src], np.inf,
                          out_hi[src] - fin)
    others_in = np.where((in_inf[dst] - np.isinf(e_hi) > 0) | entry[dst], np.inf,
                         in_hi[dst] - fin)
    e_lo = np.maximum(np.maximum(lo[src] - others_out, lo[dst] - others_in), 0)
    return Intervals(block_low=_low(lo, count), block_high=_high(hi, count),
                     edge_low=_low(e_lo, edge_count), edge_high=_high(e_hi, edge_count))


def _low(lo: np.ndarray, count: np.ndarray) -> np.ndarray:
    return np.minimum(np.floor(np.nan_to_num(lo, posinf=0)), count).astype(np.int64)


def _high(hi: np.ndarray, count: np.ndarray) -> np.ndarray:
    out = np.maximum(np.ceil(np.where(np.isinf(hi), 0, hi)), count).astype(np.int64)
    out[np.isinf(hi)] = -1
    return out
