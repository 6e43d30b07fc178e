"""Inferred counts never contradict the samples they come from (bbmap/inference/intervals.py,
the floors of flow.py, the exits of counts.py), and every count carries an interval that
holds the exact count of the same run.

Oracles: valgrind's exact counts of the corpus runs (``exact-counts.json`` of the LBR
cases, whose programs the cpu-clock ``ip_profiles`` ran 1000 times), exact Garwood Poisson
bounds computed here from the Poisson CDF, and the disassembly (conditional tail calls,
``jcc; jmp`` blocks) that llvm-objdump agrees with (test_inference_skid.py)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import CORPUS, REPO, ip_profile_cases, profile_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary import load_binary
from bbmap.cfg import T_COND_TAIL_CALL, recover_cfg
from bbmap.inference.counts import infer_counts
from bbmap.inference.flow import FlowProblem, infer
from bbmap.inference.intervals import CONFIDENCE, TIME_SPREAD, poisson_interval
from bbmap.inference.weights import WEIGHT_SCALE, precise_weights, skid_evidence
from bbmap.run import annotate

sys.path.insert(0, str(REPO / "bench"))
import bench_inference as bench  # noqa: E402

IP = [pytest.param(p, b, id=n) for n, p, b in ip_profile_cases()]
PLAIN = [pytest.param(p, b, id=n) for n, p, b in profile_cases("plain")
         if "go-" not in n]
MIN_SAMPLES = 5  # the bar: a block with this many samples is never counted 0


def _ip_cases_with_truth() -> list:
    m = json.loads((CORPUS / "manifest.json").read_text())
    bins = {b["name"]: CORPUS / b["path"] for b in m["binaries"]}
    out = []
    for p in m.get("ip_profiles", []):
        perf, exact = CORPUS / p["path"], CORPUS / p["exact_counts"]
        b = bins[p["binaries"][0]]
        if perf.exists() and exact.exists() and b.exists():
            out.append(pytest.param(str(perf), str(b), str(exact), id=p["name"]))
    return out


TRUTH = _ip_cases_with_truth()


# ----------------------------------------------------------------------------- Poisson
def _garwood(n: int, z: float) -> tuple[float, float]:
    """Exact two-sided Poisson bounds by bisection on the CDF (the oracle)."""
    alpha = 2 * (1 - 0.5 * (1 + math.erf(z / math.sqrt(2))))

    def cdf(k: int, lam: float) -> float:  # P(X <= k)
        if lam == 0:
            return 1.0
        return sum(math.exp(i * math.log(lam) - lam - math.lgamma(i + 1)) for i in range(k + 1))

    def solve(f, lo: float, hi: float) -> float:  # f decreasing in lam
        for _ in range(200):
            mid = (lo + hi) / 2
            if f(mid) > 0:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    upper = solve(lambda lam: cdf(n, lam) - alpha / 2, 0, 10 * n + 20)
    lower = 0.0 if n == 0 else solve(lambda lam: cdf(n - 1, lam) - (1 - alpha / 2), 0,
                                     10 * n + 20)
    return lower, upper


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 10, 30, 100, 400])
def test_poisson_interval_is_garwoods(n: int) -> None:
    lo, hi = poisson_interval(np.array([float(n)]))
    z = 1.959963984540054
    want_lo, want_hi = _garwood(n, z)
    assert abs(hi[0] - want_hi) <= 0.015 * want_hi + 1e-9, (hi[0], want_hi)
    assert abs(lo[0] - want_lo) <= 0.02 * want_lo + 1e-9, (lo[0], want_lo)
    assert CONFIDENCE == 0.95


# ---------------------------------------------------------------------------- ceilings
@settings(max_examples=100, deadline=None)
@given(st.integers(1000, 10**7), st.integers(1, 500), st.integers(1, 5000), st.data())
def test_an_unsampled_latch_is_not_run_round(head_w: int, ceiling: int, entry_w: int,
                                             data) -> None:  # noqa: ANN001
    """SQLite's ``sqlite3BtreeTableMoveto`` scan: entry -> head; head -> latch (its
    fall-through) or -> out; latch -> head.  The head's weight is inflated (a stalled load),
    the latch has no samples.  Without a ceiling the flow runs round the loop until the
    head's weight is met; with the latch's ceiling it stays at or under it, and the head
    keeps what enters it."""
    # blocks: 0 entry, 1 head, 2 latch, 3 out (exits)
    src = np.array([0, 1, 1, 2], np.int64)
    dst = np.array([1, 2, 3, 1], np.int64)
    ft = np.array([True, True, False, False])
    w = np.array([entry_w, head_w, 0, entry_w], np.int64)
    exit_ = np.array([False, False, False, True])
    entry = np.array([True, False, False, False])
    solver = data.draw(st.sampled_from(["builtin", "ortools"]))

    def solve(ceil: np.ndarray):  # noqa: ANN202
        p = FlowProblem(comp=np.zeros(4, np.int64), weight=w, known=np.ones(4, bool),
                        entry=entry, side_entry=np.zeros(4, bool), exit=exit_,
                        edge_src=src, edge_dst=dst, edge_ft=ft, ceiling=ceil)
        try:
            return infer(p, solver)
        except ImportError as e:
            pytest.skip(str(e))

    free = solve(np.full(4, -1, np.int64))
    capped = solve(np.array([-1, -1, ceiling, -1], np.int64))
    if head_w > 40 * (entry_w + ceiling):  # inflated well beyond what enters
        assert free.block_flow[2] > ceiling  # the flaw the ceiling fixes
    assert capped.block_flow[2] <= ceiling
    assert capped.block_flow[1] == capped.edge_flow[0] + capped.edge_flow[3]


def test_ceilings_bind_only_unsampled_blocks() -> None:
    """A ceiling is the high end of the interval of an observed block without samples;
    sampled and unobserved blocks get none (intervals.ceilings)."""
    from bbmap.inference.intervals import ceilings, observed_bounds
    from bbmap.inference.weights import SampleEvidence

    ev = SampleEvidence(np.array([0.0, 3.0, 0.0]), np.array([2.0, 2.0, 0.0]),
                        np.array([True, True, False]))
    c = ceilings(ev, "precise")
    hi = observed_bounds(ev, "precise")[1]
    assert c[0] == math.ceil(hi[0]) and c[1] == -1 and c[2] == -1
    assert c[0] == math.ceil(WEIGHT_SCALE * poisson_interval(np.array([0.0]))[1][0] / 2)


# ----------------------------------------------------------------------------- floors
@settings(max_examples=150, deadline=None)
@given(st.integers(2, 6), st.integers(1, 50), st.integers(0, 5000), st.data())
def test_floors_are_met(n: int, floor: int, loop_w: int, data) -> None:  # noqa: ANN001
    """A chain entry -> loop ... -> exit whose entry the samples never saw: with a floor
    on the entry, the optimum sends at least that much through it, whatever the weights."""
    # blocks: 0 entry, 1..n-1 a loop (1 -> 2 -> ... -> n-1 -> 1), n-1 also exits
    B = n
    src = [0] + list(range(1, B - 1)) + [B - 1]
    dst = [1] + list(range(2, B)) + [1]
    w = np.array([0] + [loop_w] * (B - 1), np.int64)
    fl = np.zeros(B, np.int64)
    fl[0] = floor
    exit_ = np.zeros(B, bool)
    exit_[B - 1] = True
    entry = np.zeros(B, bool)
    entry[0] = True
    solver = data.draw(st.sampled_from(["builtin", "ortools"]))
    p = FlowProblem(comp=np.zeros(B, np.int64), weight=w, known=np.ones(B, bool),
                    entry=entry, side_entry=np.zeros(B, bool), exit=exit_,
                    edge_src=np.array(src, np.int64), edge_dst=np.array(dst, np.int64),
                    edge_ft=np.ones(len(src), bool), floor=fl)
    try:
        r = infer(p, solver)
    except Exception as e:  # noqa: BLE001 - OR-Tools not installed
        if solver == "ortools":
            pytest.skip(str(e))
        raise
    assert r.block_flow[0] >= floor
    # conservation at the entry: what enters leaves through the loop
    assert r.edge_flow[0] == r.block_flow[0]


# ------------------------------------------------------------- the samples, never contradicted
@pytest.mark.parametrize(("perf", "binary"), IP + PLAIN)
def test_no_sampled_block_or_function_counted_zero(perf: str, binary: str) -> None:
    """Every block with samples, and the entry of every function with samples, has a
    positive inferred count; every count lies in its interval."""
    r = annotate([perf], binary)
    if r.count_source != "inferred":
        pytest.skip(f"counts are {r.count_source}")
    s = r.block_samples
    assert not ((s > 0) & (r.block_count == 0)).any(), "a sampled block counted 0"
    m = r.block_map
    for f in range(m.num_functions):
        blk = m.function_blocks(f)
        if len(blk) and s[blk.start:blk.stop].sum() > 0:
            assert r.block_count[blk.start] > 0, f"function {f}: entry counted 0"
    hi = np.where(r.block_high < 0, np.iinfo(np.int64).max, r.block_high)
    assert (r.block_low <= r.block_count).all() and (r.block_count <= hi).all()
    ehi = np.where(r.edge_high < 0, np.iinfo(np.int64).max, r.edge_high)
    assert (r.edge_low <= r.edge_count).all() and (r.edge_count <= ehi).all()
    assert r.sample_model["model"] in ("time", "precise", "insn")
    assert r.sample_model["confidence"] == CONFIDENCE


@pytest.mark.parametrize(("perf", "binary", "exact"), TRUTH)
def test_intervals_hold_the_exact_counts(perf: str, binary: str, exact: str) -> None:
    """At the profile's time scale (executions per weight unit: the exact instructions
    executed over the samples), the exact count of at least 95% of the executions'
    weight lies inside its block's interval."""
    cfg = recover_cfg(load_binary(binary))
    bt, _ = bench.truth_of(json.loads(Path(exact).read_text()), cfg)
    res, ip = bench.annotate_ip(perf, binary)
    inf = infer_counts(cfg, res.block_samples, model="time", ip=ip)
    ev, _ = skid_evidence(cfg, *ip)
    ok = (bt >= 0) & ev.known
    scale = (bt[ok] * ev.units[ok]).sum() / (WEIGHT_SCALE * ev.samples[ok].sum())
    t = bt / scale
    sel = (bt >= 0) & ((inf.block_count > 0) | (bt > 0))
    hi = np.where(inf.block_high < 0, np.inf, inf.block_high)
    inside = (t >= inf.block_low) & (t <= hi)
    w = np.where(sel, bt, 0).astype(np.float64)
    assert (w * inside).sum() / w.sum() >= 0.95
    assert TIME_SPREAD >= 1


# ----------------------------------------------------------------- conditional tail calls
def _pgoflip() -> str:
    return str(CORPUS / "bin" / "clang-22" / "pgoflip" / "pgoflip.pie")


@pytest.mark.skipif(not os.path.exists(_pgoflip()), reason="corpus not built")
def test_conditional_tail_call_leaves_the_block() -> None:
    """A block ending ``jcc other_function`` may leave without falling through: inference
    lets its count exceed its fall-through's (before, flow forced them equal)."""
    cfg = recover_cfg(load_binary(_pgoflip()))
    cond = np.flatnonzero(cfg.term == T_COND_TAIL_CALL)
    assert len(cond), "pgoflip has conditional tail calls"
    assert cfg.cond_exit[cond].all()
    b = int(cond[0])
    f = int(cfg.block_func[b])
    blocks = cfg.function_blocks(f)
    samples = np.zeros(cfg.num_blocks, np.int64)
    samples[blocks.start:blocks.stop] = 10
    w = np.zeros(cfg.num_blocks, np.int64)
    known = np.zeros(cfg.num_blocks, bool)
    known[blocks.start:blocks.stop] = True
    w[blocks.start:blocks.stop] = 100
    w[b] = 10_000  # the block runs often; what follows it rarely
    inf = infer_counts(cfg, samples, weights=(w, known), functions=np.array([f]))
    ft = (inf.edge_from == b) & inf.edge_fallthrough
    out_ft = int(inf.edge_count[ft].sum())
    assert inf.block_count[b] > out_ft, (inf.block_count[b], out_ft)


# ------------------------------------------------------------------ jcc; jmp blocks
@pytest.mark.parametrize(("perf", "binary"), IP[:1])
def test_trailing_jump_is_no_unit(perf: str, binary: str) -> None:
    """A ``jcc A; jmp B`` block: the trailing jmp runs only when the jcc falls through, so
    precise samples on it are left out and its unit is not counted."""
    cfg = recover_cfg(load_binary(binary))
    two = np.flatnonzero(cfg.trail_jump > 0)
    if not len(two):
        pytest.skip("no jcc; jmp block in this binary")
    start = cfg.block_start[two]
    addr = np.concatenate([start, cfg.trail_jump[two]])
    cnt = np.concatenate([np.full(len(two), 6), np.full(len(two), 1000)]).astype(np.int64)
    w, known, ev = precise_weights(cfg, addr, cnt)
    units = cfg.n_insn[two] - 1
    assert (ev.samples[two] == 6).all()  # the 1000 on each trailing jmp are left out
    assert (ev.units[two] == units).all()
    assert (w[two[units > 0]] == np.rint(WEIGHT_SCALE * 6 / units[units > 0])).all()
    assert known[two[units > 0]].all()


def test_garwood_table_is_the_series() -> None:
    """The 95% table the runs use equals the incomplete-gamma computation it stands for."""
    from bbmap.inference.intervals import GARWOOD_95_HIGH, GARWOOD_95_LOW, _exact_table

    alpha = 2 * (1 - 0.5 * (1 + math.erf(1.959963984540054 / math.sqrt(2))))
    _, lo, hi = _exact_table(alpha)
    assert np.allclose(lo, GARWOOD_95_LOW, atol=2e-6)
    assert np.allclose(hi, GARWOOD_95_HIGH, atol=2e-6)


# ------------------------------------------------------------------------- bookkeeping
@pytest.mark.skipif(not (CORPUS / "newcomer" / "perf.data").exists(), reason="corpus not built")
def test_floored_counts_each_block_once() -> None:
    """A function solved again with its call sites' evidence counts its floored blocks
    once: ``floored`` is the number of blocks whose final count the floor raised (the
    newcomer's three re-solved functions counted them twice)."""
    b, p = CORPUS / "newcomer" / "newcomer.pie", CORPUS / "newcomer" / "perf.data"
    cfg = recover_cfg(load_binary(str(b)))
    res, ip = bench.annotate_ip(str(p), str(b))
    inf = infer_counts(cfg, res.block_samples, model="time", ip=ip)
    assert inf.quality.call_evidence > 0
    raised = inf.block_floored
    assert inf.quality.floored == int(raised.sum())
    # a raised block is one the floor lifted: its count sits at or below its floor, above 0
    assert (inf.block_count[raised] > 0).all()
    assert inf.quality.floored <= int((res.block_samples > 0).sum())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 60)), min_size=2, max_size=40))
def test_precision_scale_follows_the_poisson_spread(blocks) -> None:  # noqa: ANN001
    """The precise model's cost multiplier is an integer >= 1, larger for a block whose
    count estimate is more precise (more units per sqrt(samples)): it never falls when a
    block's units grow or its samples shrink, the others unchanged."""
    from bbmap.inference.weights import (
        PRECISE_COST_CLIP,
        PRECISE_COST_STEPS,
        SampleEvidence,
        precision_cost_scale,
    )

    s = np.array([b[0] for b in blocks], np.float64)
    u = np.array([b[1] for b in blocks], np.float64)
    sc = precision_cost_scale(SampleEvidence(s, u, u > 0), np.zeros(len(s), np.int64))
    assert sc.dtype == np.int64 and (sc >= 1).all()
    assert (sc <= round(PRECISE_COST_STEPS * PRECISE_COST_CLIP[1])).all()
    # the precision ratio, up to the shared median, orders the multipliers
    r = u / np.sqrt(np.maximum(s, 1))
    order = np.argsort(r, kind="stable")
    assert (np.diff(sc[order]) >= 0).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 12)), min_size=1, max_size=30),
       st.lists(st.tuples(st.integers(0, 500), st.integers(0, 12)), min_size=1, max_size=30))
def test_precision_cost_scale_of_a_function_depends_on_that_function_alone(one, other):
    """Each function's multipliers are measured against its own median: putting another
    function beside it (before or after it) leaves its multipliers as they were, so its
    flow, its cache entry and its worker are its own."""
    from bbmap.inference.weights import SampleEvidence, precision_cost_scale

    def ev(blocks):
        s = np.array([b[0] for b in blocks], np.float64)
        u = np.array([b[1] for b in blocks], np.float64)
        return s, u

    s1, u1 = ev(one)
    s2, u2 = ev(other)
    alone = precision_cost_scale(SampleEvidence(s1, u1, u1 > 0), np.zeros(len(s1), np.int64))
    for s, u, comp, mine in (
            (np.r_[s1, s2], np.r_[u1, u2], np.r_[np.zeros(len(s1)), np.ones(len(s2))],
             slice(0, len(s1))),
            (np.r_[s2, s1], np.r_[u2, u1], np.r_[np.zeros(len(s2)), np.ones(len(s1))],
             slice(len(s2), None))):
        both = precision_cost_scale(SampleEvidence(s, u, u > 0), comp.astype(np.int64))
        assert both[mine].tolist() == alone.tolist()
