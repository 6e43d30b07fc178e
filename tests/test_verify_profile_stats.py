"""The statistics of ``verify --profile`` (bbmap/verify/profile.py), against published
values and against a brute-force per-stack computation of the cluster moments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.verify.profile import (
    MATCHED,
    MISMATCHED,
    RARE,
    UNKNOWN,
    Options,
    classify,
    factor_band,
    ratio_interval,
    wilson,
)

Z95 = Options().z


@pytest.mark.parametrize("k, n, lo, hi", [
    # Newcombe, "Two-sided confidence intervals for the single proportion: comparison of
    # seven methods", Stat. Med. 17 (1998), Table I, method 3 (score, no continuity corr.)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_newcombe(k: int, n: int, lo: float, hi: float) -> None:
    got_lo, got_hi = wilson(np.array([k]), np.array([n]), Z95)
    assert got_lo[0] == pytest.approx(lo, abs=1e-4)
    assert got_hi[0] == pytest.approx(hi, abs=1e-4)


def test_wilson_without_observations_is_everything() -> None:
    lo, hi = wilson(np.array([0.0]), np.array([0.0]), Z95)
    assert (lo[0], hi[0]) == (0.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 10_000), st.floats(0.5, 0.999))
def test_wilson_holds_the_estimate_and_narrows(k: int, n: int, conf: float) -> None:
    k = min(k, n)
    z = Options(confidence=conf).z
    lo, hi = wilson(np.array([k, 4 * k]), np.array([n, 4 * n]), z)
    assert 0.0 <= lo[0] <= k / n <= hi[0] <= 1.0
    assert hi[1] - lo[1] <= hi[0] - lo[0] + 1e-12  # four times the data: never wider


def test_classify_is_inside_outside_or_straddling() -> None:
    lo = np.array([0.42, 0.05, 0.35, 0.0])
    hi = np.array([0.48, 0.10, 0.45, 1.0])
    band_lo = np.full(4, 0.3)
    band_hi = np.full(4, 0.7)
    assert classify(lo, hi, band_lo, band_hi).tolist() == [MATCHED, MISMATCHED, MATCHED,
                                                           UNKNOWN]
    assert classify(np.array([0.25]), np.array([0.35]), band_lo[:1], band_hi[:1]).tolist() \
        == [UNKNOWN]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000))
def test_ratio_interval_holds_the_ratio(x: int, y: int) -> None:
    lo, hi = ratio_interval(np.array([x]), np.array([y]), Z95)
    assert lo[0] <= x / y <= hi[0]


def test_ratio_interval_without_entries_is_unbounded_above() -> None:
    lo, hi = ratio_interval(np.array([100.0]), np.array([0.0]), Z95)
    assert hi[0] == np.inf and lo[0] > 20  # 100 executions, none of the entry: r > 26


def test_factor_band_reaches_rare() -> None:
    lo, hi = factor_band(np.array([0.0, RARE / 10, 1.0]), 2.0)
    assert lo.tolist() == [0.0, 0.0, 0.5]
    assert hi.tolist() == [RARE, RARE, 2.0]


@pytest.mark.parametrize("kw", [{"threshold": 0.0}, {"threshold": 1.0},
                                {"freq_factor": 1.0}, {"confidence": 1.0},
                                {"confidence": 0.2}])
def test_options_refuse_nonsense(kw: dict) -> None:
    with pytest.raises(ValueError):
        Options(**kw)
