"""The faster built-in min-cost-flow solver returns the very same flow as issue 12's.

``bbmap.inference.solvers.solve_builtin`` (issue 17: components from the network, local
node numbers and residual arcs computed once) against ``tests/oracles/ssp_oracle.py``
(issue 12's solver, verbatim): equal flows arc by arc — not only equal objectives —
on random networks (hypothesis, with side entries, observed edge weights, components
without node labels) and on the inference network of every IP corpus profile.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ssp_oracle
from test_inference_flow import corpus_problems, draw_entries_and_edge_weights, problems
from test_outputs_render_oracle import CASES

from bbmap.inference import solvers
from bbmap.inference.flow import FlowProblem, build_network


def _same(net) -> None:  # noqa: ANN001
    want, want_cost = ssp_oracle.solve_builtin(net)
    got, got_cost = solvers.solve_builtin(net)
    assert np.array_equal(got, want) and got_cost == want_cost
    net.node_comp = None  # the union-find path
    got, got_cost = solvers.solve_builtin(net)
    assert np.array_equal(got, want) and got_cost == want_cost


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(problems(), st.data())
def test_same_flow_as_the_oracle(p: FlowProblem, data) -> None:  # noqa: ANN001
    _same(build_network(draw_entries_and_edge_weights(p, data)))


IP = [c for c in CASES if "-ip:" in c.id]


@pytest.mark.slow
@pytest.mark.skipif(not IP, reason="corpus not built")
@pytest.mark.parametrize(("perf", "binary"), IP)
def test_same_flow_on_the_corpus_networks(perf: str, binary: str, monkeypatch) -> None:
    nets = [build_network(p) for p in corpus_problems(perf, binary, monkeypatch)]
    assert nets
    for net in nets:
        _same(net)
