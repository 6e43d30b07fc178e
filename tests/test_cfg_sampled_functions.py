"""Inference disassembles only the functions it solves (issue 17), with the same counts.

``apply_inference`` recovers the CFG of the functions with samples only
(``recover_cfg(functions=...)``); on every IP and plain corpus profile the inferred
block counts, edges and call edges equal those from the CFG of the whole binary, and the functions
left out are not decoded at all.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import profile_cases
from test_outputs_render_oracle import CASES

from bbmap.binary import load_binary
from bbmap.cfg import recover_cfg
from bbmap.inference.counts import infer_counts
from bbmap.run import _inferred_calls, annotate, sampled_functions

IP = [c for c in CASES if "-ip:" in c.id or "plain" in c.id] or [
    pytest.param(p, b, id=n) for n, p, b in profile_cases("plain")]


@pytest.mark.slow
@pytest.mark.skipif(not IP, reason="corpus not built")
@pytest.mark.parametrize(("perf", "binary"), IP)
def test_sampled_only_cfg_gives_the_same_counts(perf: str, binary: str) -> None:
    r = annotate([perf], binary, inference="off")
    b = load_binary(binary)
    fs = sampled_functions(r)
    full = infer_counts(recover_cfg(b, r.block_map), r.block_samples)
    part_cfg = recover_cfg(b, r.block_map, functions=fs)
    part = infer_counts(part_cfg, r.block_samples)
    for f in ("block_count", "edge_from", "edge_to", "edge_fallthrough", "edge_count",
              "block_low", "block_high", "edge_low", "edge_high"):
        assert np.array_equal(getattr(full, f), getattr(part, f)), f
    full_calls = _inferred_calls(recover_cfg(b, r.block_map), full.block_count,
                                 full.block_low, full.block_high)
    for x, y in zip(full_calls, _inferred_calls(part_cfg, part.block_count, part.block_low,
                                                part.block_high)):
        assert np.array_equal(x, y)  # the call edges from samples, too
    out = ~np.isin(part_cfg.block_func, fs)
    assert not part_cfg.n_insn[out].any()  # not disassembled


@pytest.mark.skipif(not IP, reason="corpus not built")
@pytest.mark.parametrize(("perf", "binary"), IP[:6])
def test_annotate_with_sampled_only_cfg_equals_whole_cfg(perf: str, binary: str,
                                                         monkeypatch) -> None:  # noqa: ANN001
    """The whole inference path of annotate (sample model, skid, call edges) gives the
    same JSON with the CFG of the sampled functions as with the whole binary's."""
    from bbmap.outputs.jsonout import render_json

    part = render_json(annotate([perf], binary))
    import bbmap.cfg

    whole = bbmap.cfg.recover_cfg
    monkeypatch.setattr(bbmap.cfg, "recover_cfg",
                        lambda b, m=None, functions=None, cache=None, swept=None: whole(b, m))
    assert render_json(annotate([perf], binary)) == part
