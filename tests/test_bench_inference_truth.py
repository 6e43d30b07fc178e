"""bench/bench_inference.py's ground truth (``truth_of``) against the exact counts it reads.

The truth turns a traced run's block executions and taken branches into a count per CFG
edge.  Its oracle is flow conservation in that same run: a block that is no function
entry is entered only through its CFG in-edges (a call returns inside the calling block,
never at a block start of another), so the in-edges' counts must add up to the block's
exact executions.  A fall-through that forgot a taken branch leaving the function -- a
conditional tail call such as pgoflip's ``pf_sign`` (``jns pf_low``) -- breaks it.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from helpers import CORPUS, load_manifest

from bbmap.binary import load_binary
from bbmap.cfg import S_FALLTHROUGH, T_COND_TAIL_CALL, recover_cfg

sys.path.insert(0, str(CORPUS.parent / "bench"))
import bench_inference  # noqa: E402

MANIFEST = load_manifest()
BINARIES = {b["name"]: CORPUS / b["path"] for b in MANIFEST["binaries"]}
# the exact counts of the superblock tracer: lbr.py's per-instruction tracer (the LBR
# cases') cannot see a jump onto the very next instruction (a jump table's case placed
# right after its jmp), so those blocks would lack an in-edge there
RUNS = [pytest.param(p["binaries"][0], p["exact_counts"], id=p["name"])
        for p in MANIFEST.get("precise_profiles", [])]


def test_the_runs_are_there():
    assert len(RUNS) >= 6


def _truth(binary: str, exact: str):  # noqa: ANN202
    cfg = recover_cfg(load_binary(str(BINARIES[binary])))
    ex = json.loads((CORPUS / exact).read_text())
    return cfg, ex, *bench_inference.truth_of(ex, cfg)


@pytest.mark.parametrize("binary, exact", RUNS)
def test_truth_conserves_flow_at_every_inner_block(binary, exact):
    cfg, _, bt, et = _truth(binary, exact)
    inflow = np.zeros(len(bt), np.int64)
    for (_, v), c in et.items():
        inflow[v] += c
    entries = {cfg.function_blocks(f).start for f in range(cfg.block_map.num_functions)}
    inner = [i for i in range(len(bt))
             if i not in entries and bt[i] >= 0 and cfg.block_map.block_size[i] > 0]
    assert len(inner) > 20
    bad = [(i, int(inflow[i]), int(bt[i])) for i in inner if inflow[i] != bt[i]]
    assert not bad, bad


def test_conditional_tail_call_does_not_fall_through():
    """pgoflip's pf_sign runs 40,000 times in the training run and leaves through its
    conditional tail call 35,800 times: it falls through 4,200 times, not 40,000."""
    cfg, ex, bt, et = _truth("c22-pgoflip-pie",
                             "precise/c22-pgoflip-pie-precise-train/exact-counts.json")
    ctc = np.flatnonzero(cfg.term == T_COND_TAIL_CALL).tolist()
    assert ctc
    src, dst, kind = cfg.edges()
    for b in ctc:
        lo = int(cfg.block_start[b])
        hi = lo + int(cfg.block_map.block_size[b])
        left = sum(e["count"] for e in ex["edges"] if lo <= int(e["from"], 16) < hi)
        assert left > 0
        (ft,) = [(u, v) for u, v, k in zip(src.tolist(), dst.tolist(), kind.tolist())
                 if u == b and k == S_FALLTHROUGH]
        assert et[ft] == bt[b] - left
    pf_sign = next(b for b in ctc if cfg.block_start[b] == 0x11E0)
    assert (bt[pf_sign], et[(pf_sign, pf_sign + 1)]) == (40000, 4200)
