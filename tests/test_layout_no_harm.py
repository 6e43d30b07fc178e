"""Layout does no harm with uncertain counts (bbmap/layout/plan.py): a block with samples
never goes to ``.cold``, and with inferred counts the compiler's order stays unless the
new one wins at the counts and at both ends of their intervals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import ip_profile_cases, profile_cases

from bbmap.layout.plan import _wins_at_bounds, plan_layout
from bbmap.run import annotate

CASES = [pytest.param(p, b, id=n) for n, p, b in profile_cases("plain") + ip_profile_cases()
         if "go-" not in n] + [pytest.param(p, b, id=n) for n, p, b in profile_cases("lbr")[:3]]


@pytest.mark.parametrize(("perf", "binary"), CASES)
def test_sampled_blocks_are_never_cold(perf: str, binary: str) -> None:
    r = annotate([perf], binary)
    plan = plan_layout(r)
    for lay in plan.functions:
        cold = np.asarray(lay.cold, np.int64)
        assert not lay.cfg.samples[cold].any(), (lay.name, lay.cold_ids)
    for lay in plan.functions:
        if lay.reordered and lay.order != sorted(lay.order):
            assert lay.kept_reason == ""
        if lay.kept_reason:
            assert lay.order == sorted(lay.order)


@pytest.mark.parametrize(("perf", "binary"), [c for c in CASES if "-ip" in c.id][:2])
def test_new_order_wins_at_both_ends(perf: str, binary: str) -> None:
    """Every reordered function of an IP-only plan beats the compiler's order with every
    edge at its low bound and at its high bound; a plan whose intervals are made
    unbounded keeps every function's compiler order (its evidence cannot decide)."""
    r = annotate([perf], binary)
    assert r.count_source == "inferred"
    plan = plan_layout(r)
    moved = [lay for lay in plan.functions if lay.order != sorted(lay.order)]
    assert moved
    for lay in moved:
        assert _wins_at_bounds(lay.cfg, plan.params, lay.order, sorted(lay.order))
    r = replace(r, edge_low=np.zeros_like(r.edge_low),
                edge_high=np.full_like(r.edge_high, -1))
    kept = plan_layout(r)
    for lay in kept.functions:
        hot = [v for v in lay.order]
        assert hot == sorted(hot), lay.name
        assert lay.kept_reason in ("", "the counts' intervals cannot tell the orders apart",
                                   "the compiler's order scores as high")
