"""The even split of unknown subgraphs keeps flow conserved, respects ceilings, and leaves
loops and evidence alone."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.inference.rebalance import rebalance_unknown


def _run(edges, bf, ef, unknown, ceiling=None):
    src = np.array([e[0] for e in edges], np.int64)
    dst = np.array([e[1] for e in edges], np.int64)
    B = len(bf)
    exit_ = np.bincount(src, minlength=B) == 0
    cap = np.full(B, -1, np.int64) if ceiling is None else np.array(ceiling, np.int64)
    return rebalance_unknown(np.array(bf), np.array(ef), src, dst, np.array(unknown),
                             exit_, cap)


def test_diamond_split_evenly():
    # 0 -> 1 -> 3, 0 -> 2 -> 3; the solver sent all 10 through block 1
    edges = [(0, 1), (0, 2), (1, 3), (2, 3)]
    bf, ef, n = _run(edges, [10, 10, 0, 10], [10, 0, 10, 0], [False, True, True, False])
    assert n == 1
    assert bf.tolist() == [10, 5, 5, 10] and ef.tolist() == [5, 5, 5, 5]


def test_branch_inside_unsampled_stretch():
    # 0 -> 1 (unknown) -> {2, 3} (unknown) -> 4: the branch at 1 is split too
    edges = [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4)]
    bf, ef, n = _run(edges, [6, 6, 6, 0, 6], [6, 6, 0, 6, 0],
                     [False, True, True, True, False])
    assert n == 1
    assert bf.tolist() == [6, 6, 3, 3, 6] and ef.tolist() == [6, 3, 3, 3, 3]


def test_returns_split_evenly():
    # both arms return: the flow ends at the function's exit either way
    bf, ef, n = _run([(0, 1), (0, 2)], [7, 7, 0], [7, 0], [False, True, True])
    assert n == 1 and bf.tolist() == [7, 4, 3] and ef.tolist() == [4, 3]


def test_ceiling_and_evidence_respected():
    edges = [(0, 1), (0, 2), (1, 3), (2, 3)]
    bf, ef, n = _run(edges, [10, 10, 0, 10], [10, 0, 10, 0], [False, True, True, False],
                     ceiling=[-1, -1, 2, -1])
    assert n == 0 and bf.tolist() == [10, 10, 0, 10]
    # block 2 has evidence: its count is the solver's, not a guess
    bf, ef, n = _run(edges, [10, 10, 0, 10], [10, 0, 10, 0], [False, True, False, False])
    assert n == 0 and ef.tolist() == [10, 0, 10, 0]


def test_loop_left_alone():
    # 0 -> 1 -> 2 -> 1 (latch), 1 -> 3: an unknown latch is not an arm
    edges = [(0, 1), (1, 2), (2, 1), (1, 3)]
    bf, ef, n = _run(edges, [1, 5, 4, 1], [1, 4, 4, 1], [False, False, True, False])
    assert n == 0 and ef.tolist() == [1, 4, 4, 1]


@st.composite
def _graphs(draw):
    B = draw(st.integers(2, 9))
    edges = sorted({(i, j) for i in range(B) for j in range(i + 1, B)
                    if draw(st.booleans())})
    succ = [[k for k, e in enumerate(edges) if e[0] == b] for b in range(B)]
    ef = np.zeros(len(edges), np.int64)
    bf = np.zeros(B, np.int64)
    for _ in range(draw(st.integers(0, 6))):  # walks from the entry to a return
        b = 0
        bf[0] += 1
        while succ[b]:
            k = succ[b][draw(st.integers(0, len(succ[b]) - 1))]
            ef[k] += 1
            b = edges[k][1]
            bf[b] += 1
    unknown = [False] + [draw(st.booleans()) for _ in range(B - 1)]
    return edges, bf.tolist(), ef.tolist(), unknown


@settings(max_examples=300, deadline=None)
@given(_graphs())
def test_conserved_and_deterministic(g):
    edges, bf0, ef0, unknown = g
    bf, ef, _ = _run(edges, bf0, ef0, unknown)
    again = _run(edges, bf0, ef0, unknown)
    assert bf.tolist() == again[0].tolist() and ef.tolist() == again[1].tolist()
    B = len(bf)
    src = np.array([e[0] for e in edges], np.int64).reshape(-1)
    dst = np.array([e[1] for e in edges], np.int64).reshape(-1)
    inflow = np.bincount(dst, weights=ef, minlength=B).astype(np.int64)
    outflow = np.bincount(src, weights=ef, minlength=B).astype(np.int64)
    has_succ = np.bincount(src, minlength=B) > 0
    assert (ef >= 0).all()
    assert bf[0] == bf0[0]  # the entry's count is the entry's
    assert (bf[1:] == inflow[1:]).all()
    assert (bf[has_succ] == outflow[has_succ]).all()
    known = ~np.array(unknown)
    assert (bf[known] == np.array(bf0)[known]).all()  # evidence keeps its counts
