"""Layout does no harm with uncertain counts (bbmap/layout/plan.py): a block with samples
never goes to ``.cold``, and with inferred counts the compiler's order stays unless the
new one wins at the counts and at the counts each half of the samples infers alone
(bbmap/inference/replicates.py), in a function with enough samples to order its blocks.

Oracle: valgrind's exact counts of the corpus runs the cpu-clock profiles sampled."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import CORPUS, REPO, ip_profile_cases, profile_cases

from bbmap.binary import load_binary
from bbmap.cfg import recover_cfg
from bbmap.layout.graph import FunctionCFG
from bbmap.layout.plan import MIN_REORDER_SAMPLES, _Scorer, plan_layout
from bbmap.run import annotate

sys.path.insert(0, str(REPO / "bench"))
import bench_inference as bench  # noqa: E402

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


def _score(fn: FunctionCFG, edges: np.ndarray, order: list[int], params) -> float:  # noqa: ANN001
    return _Scorer(replace(fn, edges=edges, edge_bounds=None, replicates=None),
                   params).of_order(order)


HALF_REASONS = ("", "the compiler's order scores as high",
                "a half of the samples alone scores the compiler's order as high",
                "a half of the samples alone has no count for the function",
                "no replicate counts to check the new order against")


@pytest.mark.parametrize(("perf", "binary"), [c for c in CASES if "-ip" in c.id][:2])
def test_new_order_wins_in_each_half(perf: str, binary: str) -> None:
    """Every reordered function of an IP-only plan has enough samples and beats the
    compiler's order at the counts of each half of its samples; a result whose halves
    cannot be inferred keeps every function's compiler order (nothing checked it)."""
    r = annotate([perf], binary)
    assert r.count_source == "inferred"
    plan = plan_layout(r)
    moved = [lay for lay in plan.functions if lay.order != sorted(lay.order)]
    assert moved
    for lay in moved:
        assert int(lay.cfg.samples.sum()) >= MIN_REORDER_SAMPLES
        assert lay.cfg.replicates is not None and len(lay.cfg.replicates) == 2
        for half in lay.cfg.replicates:
            assert _score(lay.cfg, half, lay.order, plan.params) > \
                _score(lay.cfg, half, sorted(lay.order), plan.params)
    kept = plan_layout(replace(r, replicates=lambda: []))
    for lay in kept.functions:
        assert lay.order == sorted(lay.order), lay.name
        assert lay.kept_reason.startswith(HALF_REASONS) or \
            lay.kept_reason.startswith("too few samples"), lay.kept_reason


def _ip_cases_with_truth() -> list:
    m = json.loads((CORPUS / "manifest.json").read_text())
    bins = {b["name"]: CORPUS / b["path"] for b in m["binaries"]}
    return [pytest.param(str(CORPUS / p["path"]), str(bins[p["binaries"][0]]),
                         str(CORPUS / p["exact_counts"]), id=p["name"])
            for p in m.get("ip_profiles", [])
            if (CORPUS / p["path"]).exists() and (CORPUS / p["exact_counts"]).exists()]


@pytest.mark.parametrize(("perf", "binary", "exact"), _ip_cases_with_truth())
def test_reorders_gain_at_the_exact_counts(perf: str, binary: str, exact: str) -> None:
    """At valgrind's exact counts of the run the profile sampled, the functions an
    IP-only plan reorders score higher together than in the compiler's order, and none
    of them loses more than a tenth of its score.  (Per function the time model's bias
    remains: ``lay_round`` is reordered on ~500 samples in both halves and scores 8% lower
    at the exact counts; the sparse functions whose halves agreed for the flow's sake --
    ``lay_rarity`` -89% -- are kept by ``MIN_REORDER_SAMPLES``.)"""
    cfg = recover_cfg(load_binary(binary))
    _, truth = bench.truth_of(json.loads(Path(exact).read_text()), cfg)
    plan = plan_layout(annotate([perf], binary))
    gain = 0.0
    moved = 0
    for lay in plan.functions:
        fn = lay.cfg
        if lay.order == sorted(lay.order):
            continue
        moved += 1
        local = {int(b): i for i, b in enumerate(fn.blocks.tolist())}
        rows = sorted((local[u], local[v], c) for (u, v), c in truth.items()
                      if u in local and v in local and c > 0)
        e = np.asarray(rows, np.int64).reshape(-1, 3)
        new, old = (_score(fn, e, o, plan.params) for o in (lay.order, sorted(lay.order)))
        assert new >= 0.9 * old, (lay.name, new, old)
        gain += new - old
    assert moved
    assert gain > 0
