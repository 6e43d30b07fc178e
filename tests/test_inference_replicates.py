"""The split-half replicates the layout checks inferred counts against
(bbmap/inference/replicates.py): every sample in exactly one half, the same halves in
every run and for any order of the inputs, halves drawn as a fair coin would deal them,
and the same replicate counts from a fresh run and from a result-cache hit."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ip_profile_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.inference.replicates import split_samples
from bbmap.run import annotate

IP = [pytest.param(p, b, id=n) for n, p, b in ip_profile_cases()][:2]


@st.composite
def histograms(draw):  # noqa: ANN001, ANN201
    nb = draw(st.integers(1, 12))
    na = draw(st.integers(0, 30))
    addr = np.asarray(draw(st.lists(st.integers(0x1000, 0x1000 + 4 * na + 8), min_size=na,
                                    max_size=na, unique=True)), np.uint64)
    n = np.asarray(draw(st.lists(st.integers(1, 500), min_size=na, max_size=na)), np.int64)
    blk = np.asarray(draw(st.lists(st.integers(-1, nb - 1), min_size=na, max_size=na)),
                     np.int64)
    located = np.bincount(blk[blk >= 0], weights=n[blk >= 0], minlength=nb).astype(np.int64)
    extra = np.asarray(draw(st.lists(st.integers(0, 50), min_size=nb, max_size=nb)), np.int64)
    return addr, n, blk, located + extra


@settings(max_examples=200, deadline=None)
@given(histograms(), st.randoms())
def test_every_sample_in_exactly_one_half(h, rnd) -> None:  # noqa: ANN001
    addr, n, blk, bs = h
    (a, ipa), (b, ipb) = split_samples(addr, n, bs, blk)
    assert (a >= 0).all() and (b >= 0).all()
    assert np.array_equal(a + b, bs)
    if not len(addr):  # no histogram: block samples alone
        assert ipa is None and ipb is None
        return
    assert np.array_equal(ipa[0], ipb[0])
    assert (ipa[1] >= 0).all() and (ipb[1] >= 0).all()
    order = np.argsort(addr, kind="stable")
    assert np.array_equal(ipa[1] + ipb[1], n[order])
    # each half's block samples hold at least its located samples
    ok = blk[order] >= 0
    la = np.bincount(blk[order][ok], weights=ipa[1][ok], minlength=len(bs))
    assert (a >= la).all()
    # the same halves whatever order the histogram came in
    perm = list(range(len(addr)))
    rnd.shuffle(perm)
    p = np.asarray(perm, np.int64)
    (a2, ipa2), _ = split_samples(addr[p], n[p], bs, blk[p])
    assert np.array_equal(a, a2) and np.array_equal(ipa[1], ipa2[1])


def test_halves_are_a_fair_coins_deal() -> None:
    """Over 20,000 addresses of 1-200 samples, each half holds about half of each
    address's samples with the binomial's spread (a deal of each sample by a fair coin,
    which for a Poisson stream is two independent Poisson halves)."""
    rng = np.random.default_rng(1)
    n = rng.integers(1, 200, 20_000).astype(np.int64)
    addr = np.arange(len(n), dtype=np.uint64) * 4
    blk = np.arange(len(n), dtype=np.int64)
    (a, ipa), _ = split_samples(addr, n, n.copy(), blk)
    z = (ipa[1] - n / 2) / np.sqrt(n / 4)
    assert abs(z.mean()) < 0.05  # standard error of the mean: 0.007
    assert 0.95 < z.std() < 1.05
    assert np.array_equal(a, ipa[1])
    # without a histogram, each block's samples are dealt alike
    (a, none), (b, _) = split_samples(None, None, n, None)
    assert none is None and np.array_equal(a + b, n)
    z = (a - n / 2) / np.sqrt(n / 4)
    assert abs(z.mean()) < 0.05 and 0.95 < z.std() < 1.05


@pytest.mark.parametrize(("perf", "binary"), IP)
def test_replicates_are_the_same_fresh_and_from_the_result_cache(perf: str, binary: str,
                                                                 tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A result-cache hit recovers the CFG on demand and infers the same halves as the
    run that solved the profile; two calls give the one list (made once)."""
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("BBMAP_NO_CACHE", raising=False)
    first = annotate([perf], binary, disasm_cache=True)
    hit = annotate([perf], binary, disasm_cache=True)
    ra, rb = first.replicates(), hit.replicates()
    assert first.replicates() is ra
    assert len(ra) == len(rb) == 2
    for x, y in zip(ra, rb):
        for col in ("edge_from", "edge_to", "edge_count"):
            assert np.array_equal(getattr(x, col), getattr(y, col))
    assert sum(int(x.edge_count.sum()) for x in ra) > 0
