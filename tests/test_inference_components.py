"""Per-function solves (bbmap/inference/components.py, flow_cache.py): each function's
flow depends on that function alone -- the same whether solved with others or alone, in
any order of the functions, with any number of worker processes, and from the cache."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_inference_flow import SOLVERS, draw_entries_and_edge_weights, problems

from bbmap.inference import components
from bbmap.inference.flow import FlowProblem, infer
from bbmap.inference.flow_cache import FlowCache

PER_FUNCTION = [s for s in SOLVERS if s != "scipy"]  # auto is one of them


def _floored(p: FlowProblem, data) -> FlowProblem:  # noqa: ANN001
    """``p`` with drawn floors on some sampled blocks (the floor arcs' costs are per
    function)."""
    fl = np.array(data.draw(st.lists(st.integers(0, 40), min_size=p.num_blocks,
                                     max_size=p.num_blocks)), np.int64)
    p.floor = np.where(p.known, np.minimum(fl, np.maximum(p.weight, 1)), 0)
    return p


def _select(p: FlowProblem, order: list[int]) -> tuple[FlowProblem, np.ndarray, np.ndarray]:
    """The components ``order`` (distinct) of ``p``, in that order, renumbered: (problem,
    the old block of each new block, the old edge of each new edge)."""
    blocks = np.concatenate([np.flatnonzero(p.comp == c) for c in order])
    new_of = np.full(p.num_blocks, -1, np.int64)
    new_of[blocks] = np.arange(len(blocks))
    keep = new_of[p.edge_src] >= 0
    edges = np.flatnonzero(keep)
    rank = {c: i for i, c in enumerate(order)}  # each function's edges in their own order
    edges = edges[np.argsort([rank[c] for c in p.comp[p.edge_src[edges]].tolist()],
                             kind="stable")]
    comp = np.repeat(np.arange(len(order)), [int((p.comp == c).sum()) for c in order])
    q = FlowProblem(comp=comp, weight=p.weight[blocks], known=p.known[blocks],
                    entry=p.entry[blocks], side_entry=p.side_entry[blocks],
                    exit=p.exit[blocks], edge_src=new_of[p.edge_src[edges]],
                    edge_dst=new_of[p.edge_dst[edges]], edge_ft=p.edge_ft[edges],
                    edge_weight=p.edge_weight[edges], edge_known=p.edge_known[edges],
                    floor=p.floor[blocks])
    return q, blocks, edges


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_a_function_solved_with_others_is_solved_as_alone(p: FlowProblem, data) -> None:  # noqa: ANN001
    """Each function's flow (blocks and edges) is the flow of its own problem solved
    alone, and the same with the functions in any order."""
    p = _floored(draw_entries_and_edge_weights(p, data), data)
    C = p.num_components
    perm = data.draw(st.permutations(range(C)))
    for solver in PER_FUNCTION:
        whole = infer(p, solver)
        q, blocks, edges = _select(p, list(perm))
        shuffled = infer(q, solver)
        assert np.array_equal(shuffled.block_flow, whole.block_flow[blocks])
        assert np.array_equal(shuffled.edge_flow, whole.edge_flow[edges])
        for c in range(C):
            q, blocks, edges = _select(p, [c])
            alone = infer(q, solver)
            assert np.array_equal(alone.block_flow, whole.block_flow[blocks]), (solver, c)
            assert np.array_equal(alone.edge_flow, whole.edge_flow[edges]), (solver, c)


def _many(p: FlowProblem, times: int) -> FlowProblem:
    """``p``'s functions repeated ``times`` times (more than one process takes)."""
    B, C = p.num_blocks, p.num_components
    off = np.repeat(np.arange(times) * B, len(p.edge_src))
    return FlowProblem(comp=np.concatenate([p.comp + k * C for k in range(times)]),
                       **{f: np.tile(getattr(p, f), times) for f in (
                           "weight", "known", "entry", "side_entry", "exit", "edge_ft",
                           "edge_weight", "edge_known", "floor")},
                       edge_src=np.tile(p.edge_src, times) + off,
                       edge_dst=np.tile(p.edge_dst, times) + off)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_worker_counts_give_the_same_flows(p: FlowProblem, data) -> None:  # noqa: ANN001
    p = _many(_floored(draw_entries_and_edge_weights(p, data), data), 40)
    old = components.PARALLEL_MIN_ARCS
    components.PARALLEL_MIN_ARCS = 0
    try:
        for solver in PER_FUNCTION:
            one = infer(p, solver, workers=1)
            for w in (2, 3):
                got = infer(p, solver, workers=w)
                assert np.array_equal(got.block_flow, one.block_flow)
                assert np.array_equal(got.edge_flow, one.edge_flow)
                assert got.cost == one.cost
    finally:
        components.PARALLEL_MIN_ARCS = old


def test_workers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(components.ENV_WORKERS, raising=False)
    assert components.workers_from_env(None) == 1
    assert components.workers_from_env(3) == 3
    monkeypatch.setenv(components.ENV_WORKERS, "2")
    assert components.workers_from_env(None) == 2
    monkeypatch.setenv(components.ENV_WORKERS, "auto")
    assert components.workers_from_env(None) >= 1
    monkeypatch.setenv(components.ENV_WORKERS, "lots")
    with pytest.raises(Exception, match="BBMAP_INFERENCE_WORKERS='lots'"):
        components.workers_from_env(None)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.data())
def test_the_cache_returns_what_a_solve_does(p: FlowProblem, data) -> None:  # noqa: ANN001
    """A first run fills the cache; a second is all hits, writes nothing and gives the
    same flows; a changed function alone is solved again; a damaged file is a miss."""
    import tempfile

    p = _floored(draw_entries_and_edge_weights(p, data), data)
    with tempfile.TemporaryDirectory() as d:
        for solver in PER_FUNCTION:
            want = infer(p, solver)
            c = FlowCache(d)
            first = infer(p, solver, cache=c)
            assert c.misses == p.num_components and not c.warnings
            st0 = os.stat(c.path)
            c = FlowCache(d)
            again = infer(p, solver, cache=c)
            assert c.hits == p.num_components and c.misses == 0
            st1 = os.stat(c.path)
            assert (st0.st_ino, st0.st_mtime_ns) == (st1.st_ino, st1.st_mtime_ns)
            for r in (first, again):
                assert np.array_equal(r.block_flow, want.block_flow)
                assert np.array_equal(r.edge_flow, want.edge_flow)
            q = _select(p, list(range(p.num_components)))[0]
            q.weight = q.weight.copy()
            q.weight[0] += 7  # the first function changes
            q.known[0] = True
            c = FlowCache(d)
            changed = infer(q, solver, cache=c)
            assert c.misses == 1 and c.hits == p.num_components - 1
            fresh = infer(q, solver)
            assert np.array_equal(changed.block_flow, fresh.block_flow)
        with open(os.path.join(d, "flows.bbflow"), "r+b") as fh:
            fh.seek(20)
            fh.write(b"\xff" * 40)
        c = FlowCache(d)
        got = infer(p, "builtin", cache=c)
        assert c.hits == 0 and len(c.warnings) == 1 and "unreadable" in c.warnings[0]
        assert np.array_equal(got.block_flow, infer(p, "builtin").block_flow)
