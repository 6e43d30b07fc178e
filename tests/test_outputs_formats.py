"""Renderers over a hand-built result: JSON shape, CSV, text, cluster and ordering files."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

from helpers import LIBC, batch, block_map, resolver, rt, symbols

from bbmap.aggregate.annotator import Annotator
from bbmap.outputs.csvout import COLUMNS, render_csv
from bbmap.outputs.jsonout import render_json
from bbmap.outputs.propeller import render_propeller, render_symorder
from bbmap.outputs.text import render_text

L = LIBC + 0x1000
STORY = [(rt(0x300F), L), (rt(0x2016), rt(0x3000)), (rt(0x101F), rt(0x200D)),
         (rt(0x2008), rt(0x1000))]


def lbr_result():
    a = Annotator(block_map(), symbols())
    a.add_batch(batch([rt(0x300F), rt(0x1004), LIBC + 8], stacks=[STORY, [], []]), resolver())
    return a.result(binary="t.bin", build_id="abcd", profiles=[])


def test_json_shape_and_determinism():
    res = lbr_result()
    text = render_json(res)
    assert text == render_json(lbr_result())
    j = json.loads(text)
    assert set(j) >= {"binary", "build_id", "profiles", "totals", "functions", "warnings"}
    t = j["totals"]
    assert t["samples"] == 3 and t["branches"] == 4
    assert sum(t["buckets"]["samples"].values()) == t["samples"]
    assert sum(t["buckets"]["branches"].values()) == t["branches"]
    f = j["functions"][0]
    assert set(f) >= {"name", "address", "samples", "blocks", "edges"}
    assert set(f["blocks"][0]) >= {"id", "address", "size", "samples", "period", "count"}
    assert set(f["edges"][0]) == {"from", "to", "count", "kind"}


def test_csv_rows():
    rows = list(csv.reader(io.StringIO(render_csv(lbr_result()))))
    assert tuple(rows[0]) == COLUMNS
    kinds = {r[0] for r in rows[1:]}
    assert kinds == {"block", "edge", "bucket"}
    buckets = {r[2]: r for r in rows if r[0] == "bucket" and r[10] == "samples" and not r[1]}
    assert sum(int(r[6]) for r in buckets.values()) == 3


def test_text_report_has_accounting_and_blocks():
    out = render_text(lbr_result())
    assert "Accounting" in out and "in a basic block" in out and "total" in out
    assert "beta" in out and "bb 2" in out and "/usr/lib/libc.so.6" in out
    assert "LBR fall-through ranges" in out


def test_propeller_cluster_files():
    res = lbr_result()
    # beta: ids 0,1,2 ran (chained 0 -ft-> 1 -jmp-> 2); id 3 never ran -> left cold
    v1 = render_propeller(res, version=1).splitlines()
    assert v1[0] == "v1"
    body = [ln for ln in v1 if not ln.startswith("#")]
    # functions in address order, as Propeller lists them
    assert body == ["v1", "f alpha", "c 0 1 2", "f beta", "c 0 1 2"]
    v0 = [ln for ln in render_propeller(res, version=0).splitlines() if not ln.startswith("#")]
    assert v0 == ["!alpha", "!!0 1 2", "!beta", "!!0 1 2"]
    # beta calls alpha: call-chain clustering puts the callee after its caller
    assert render_symorder(res).splitlines() == ["beta", "alpha", "beta.cold"]


def test_ip_only_cluster_keeps_layout_order():
    a = Annotator(block_map(), symbols())
    a.add_batch(batch([rt(0x201A), rt(0x2004), rt(0x201A)]), resolver())
    res = a.result(binary="t", build_id=None, profiles=[])
    body = [ln for ln in render_propeller(res).splitlines() if not ln.startswith("#")]
    assert body == ["v1", "f beta", "c 0 3"]  # entry + hot id 3; ids 1, 2 cold


def test_cluster_chain_adds_taken_and_fall_through_weights():
    """0->1 runs 3 times taken and 3 times falling through (6); 0->2 runs 5 times taken,
    1->2 falls through 6 times.  Ext-TSP (Propeller weights, sizes 16/8/8) scores 0 1 2 at
    124.96 and 0 2 1 at 61.81, so the cluster is 0 1 2."""
    import numpy as np

    from bbmap.aggregate.lbr import K_BRANCH, K_FALLTHROUGH
    from bbmap.layout.plan import plan_layout

    res = replace(lbr_result(), block_count=np.array([10, 6, 5, 0, 0, 0, 0], np.int64),
                  edge_from=np.array([0, 0, 0, 1], np.int64),
                  edge_to=np.array([1, 1, 2, 2], np.int64),
                  edge_kind=np.array([K_BRANCH, K_FALLTHROUGH, K_BRANCH, K_FALLTHROUGH],
                                     np.int64),
                  edge_count=np.array([3, 3, 5, 6], np.int64))
    alpha = next(f for f in plan_layout(res).functions if f.cfg.name == "alpha")
    assert alpha.cluster_ids == [0, 1, 2]
    assert alpha.cfg.edges.tolist() == [[0, 1, 6], [0, 2, 5], [1, 2, 6]]
