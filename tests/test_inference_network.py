"""The inference network is the very same arc for arc after build_network's rewrite.

OR-Tools picks among several optimal flows by the network's arc order, so the columns
handed to the solver must not change at all (issue 17).  ``_reference`` below is
``build_network`` as it was before it wrote each column into one preallocated array
(issue 17, session 4): concatenated arc groups.  Both are compared column by column
on random problems (side entries, observed edge weights, entries without a weight,
empty components) and on the network of every IP corpus profile.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_inference_flow import corpus_problems, draw_entries_and_edge_weights, problems
from test_outputs_render_oracle import CASES

from bbmap.inference.flow import (
    COST_BLOCK_DEC,
    COST_BLOCK_ENTRY_DEC,
    COST_BLOCK_ENTRY_INC,
    COST_BLOCK_INC,
    COST_BLOCK_UNKNOWN_INC,
    COST_BLOCK_ZERO_INC,
    COST_ENTRY_EXTRA,
    COST_JUMP_DEC,
    COST_JUMP_INC,
    COST_JUMP_UNKNOWN_FT_INC,
    COST_JUMP_UNKNOWN_INC,
    FlowProblem,
    Network,
    build_network,
)
from bbmap.inference.solvers import INF_CAPACITY


def _reference(p: FlowProblem) -> Network:
    """Arc columns for :class:`FlowProblem` (vectorized; see the module docstring)."""
    B, E, C = p.num_blocks, len(p.edge_src), p.num_components
    b = np.arange(B, dtype=np.int64)
    bin_, bout = 2 * b, 2 * b + 1
    S = 2 * B + 2 * np.arange(C, dtype=np.int64)
    T = S + 1
    nodes = 2 * B + 2 * C
    w = np.maximum(p.weight.astype(np.int64), 0)
    inc = np.full(B, COST_BLOCK_INC, np.int64)
    inc[p.known & (w == 0)] = COST_BLOCK_ZERO_INC
    inc[p.entry & p.known] = COST_BLOCK_ENTRY_INC
    inc[~p.known] = COST_BLOCK_UNKNOWN_INC
    dec = np.where(p.entry, COST_BLOCK_ENTRY_DEC, COST_BLOCK_DEC).astype(np.int64)
    rew = np.flatnonzero(p.known & (w > 0))

    ecost = np.where(p.edge_ft, COST_JUMP_UNKNOWN_FT_INC, COST_JUMP_UNKNOWN_INC).astype(np.int64)
    ek = p.edge_known & (p.edge_weight > 0)
    ecost[p.edge_known] = COST_JUMP_INC
    ekn = np.flatnonzero(ek)

    ent = np.flatnonzero(p.entry)
    side = np.flatnonzero(p.side_entry & ~p.entry)
    ex = np.flatnonzero(p.exit)
    parts = [
        # block: unbounded raise, then the reward arcs of observed weights
        (bin_, bout, np.full(B, INF_CAPACITY), inc),
        (bin_[rew], bout[rew], w[rew], -dec[rew]),
        # CFG edges, then reward arcs of observed edge weights
        (2 * p.edge_src + 1, 2 * p.edge_dst, np.full(E, INF_CAPACITY), ecost),
        (2 * p.edge_src[ekn] + 1, 2 * p.edge_dst[ekn], p.edge_weight[ekn].astype(np.int64),
         np.full(len(ekn), -COST_JUMP_DEC)),
        (S[p.comp[ent]], bin_[ent], np.full(len(ent), INF_CAPACITY), np.zeros(len(ent))),
        (S[p.comp[side]], bin_[side], np.full(len(side), INF_CAPACITY),
         np.full(len(side), COST_ENTRY_EXTRA)),
        (bout[ex], T[p.comp[ex]], np.full(len(ex), INF_CAPACITY), np.zeros(len(ex))),
        (T, S, np.full(C, INF_CAPACITY), np.zeros(C)),
    ]
    tail = np.concatenate([x[0] for x in parts]).astype(np.int64)
    head = np.concatenate([x[1] for x in parts]).astype(np.int64)
    cap = np.concatenate([np.asarray(x[2]) for x in parts]).astype(np.int64)
    cost = np.concatenate([np.asarray(x[3]) for x in parts]).astype(np.int64)
    first_edge = B + len(rew)
    return Network(tail=tail, head=head, cap=cap, cost=cost, nodes=nodes,
                   edge_arc=first_edge + np.arange(E, dtype=np.int64), reward_edge=ekn,
                   reward_arc=first_edge + E + np.arange(len(ekn), dtype=np.int64),
                   block_in=bin_,
                   node_comp=np.concatenate([np.repeat(p.comp.astype(np.int64), 2),
                                             np.repeat(np.arange(C, dtype=np.int64), 2)]))



def _same(p: FlowProblem) -> None:
    """Without floors, ceilings and precision scales (the reference predates them) the
    network is the reference's; those arcs are held to their definitions in
    test_inference_flow.py and test_inference_evidence.py."""
    p = dataclasses.replace(p, floor=np.zeros(len(p.comp), np.int64),
                            ceiling=np.full(len(p.comp), -1, np.int64), cost_scale=None)
    got, want = build_network(p), _reference(p)
    for f in ("tail", "head", "cap", "cost", "edge_arc", "reward_edge", "reward_arc",
              "block_in", "node_comp"):
        a, b = getattr(got, f), getattr(want, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f
    assert got.nodes == want.nodes


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(problems(), st.data())
def test_same_network_as_before(p: FlowProblem, data) -> None:  # noqa: ANN001
    _same(draw_entries_and_edge_weights(p, data, known=True))


IP = [c for c in CASES if "-ip:" in c.id]


@pytest.mark.slow
@pytest.mark.skipif(not IP, reason="corpus not built")
@pytest.mark.parametrize(("perf", "binary"), IP)
def test_same_network_on_the_corpus(perf: str, binary: str, monkeypatch) -> None:
    problems_ = corpus_problems(perf, binary, monkeypatch)
    assert problems_
    for p in problems_:
        _same(p)
