"""Profile inference (bbmap/inference): the network, the solvers, the annotate wiring, and
accuracy against exact valgrind counts of the corpus runs."""

from __future__ import annotations

import csv
import io
import json
import os
import sys

import numpy as np
import pytest
from helpers import CORPUS, load_manifest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.inference import solvers
from bbmap.inference.flow import FlowProblem, infer

SOLVERS = [s for s in ("builtin", "ortools", "scipy") if solvers.available(s)]


@st.composite
def problems(draw) -> FlowProblem:
    """A few random functions: blocks in a chain of fall-throughs plus random jumps
    (loops included), random weights, some blocks unknown."""
    comps, src, dst, ft = [], [], [], []
    n0 = 0
    for c in range(draw(st.integers(1, 3))):
        n = draw(st.integers(2, 7))
        comps += [c] * n
        for i in range(n - 1):
            if draw(st.booleans()) or i == 0:
                src.append(n0 + i)
                dst.append(n0 + i + 1)
                ft.append(True)
        for _ in range(draw(st.integers(0, n))):
            u, v = draw(st.integers(0, n - 1)), draw(st.integers(1, n - 1))
            if u != v and (n0 + u, n0 + v) not in zip(src, dst):
                src.append(n0 + u)
                dst.append(n0 + v)
                ft.append(False)
        n0 += n
    B = n0
    comp = np.array(comps, np.int64)
    entry = np.r_[True, comp[1:] != comp[:-1]]
    w = np.array(draw(st.lists(st.integers(0, 500), min_size=B, max_size=B)), np.int64)
    known = np.array(draw(st.lists(st.booleans(), min_size=B, max_size=B))) | entry
    src_a, dst_a = np.array(src, np.int64), np.array(dst, np.int64)
    exit_ = np.bincount(src_a, minlength=B) == 0
    exit_[np.r_[np.flatnonzero(entry)[1:] - 1, B - 1]] = True  # each function's last block
    return FlowProblem(comp=comp, weight=np.where(known, w, 0), known=known, entry=entry,
                       side_entry=np.zeros(B, bool), exit=exit_, edge_src=src_a,
                       edge_dst=dst_a, edge_ft=np.array(ft, bool))


def draw_entries_and_edge_weights(p: FlowProblem, data, *, known: bool = False  # noqa: ANN001
                                  ) -> FlowProblem:
    """``p`` with drawn side entries (EH landing pads), with ``known`` sometimes drawn
    flags of which blocks have an observation, and sometimes sparse observed edge weights
    (LBR-style)."""
    B, E = p.num_blocks, len(p.edge_src)
    p.side_entry = np.array(data.draw(st.lists(st.booleans(), min_size=B, max_size=B)),
                            bool)
    if known and data.draw(st.booleans()):  # entries observed or not, weights zero or not
        p.known = np.array(data.draw(st.lists(st.booleans(), min_size=B, max_size=B)), bool)
    if E and data.draw(st.booleans()):
        p.edge_known = np.array(data.draw(st.lists(st.booleans(), min_size=E, max_size=E)),
                                bool)
        p.edge_weight = np.array(data.draw(st.lists(st.integers(0, 300), min_size=E,
                                                    max_size=E)), np.int64)
    return p


def corpus_problems(perf: str, binary: str, monkeypatch) -> list[FlowProblem]:  # noqa: ANN001
    """The flow problems annotate hands to the solver for a corpus profile (captured at
    ``counts.infer``; solved by the built-in solver)."""
    import bbmap.inference.counts as counts
    from bbmap.run import annotate

    seen: list[FlowProblem] = []
    orig = counts.infer

    def capture(p, solver="auto", **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append(p)
        return orig(p, solver, **kw)

    monkeypatch.setattr(counts, "infer", capture)
    annotate([perf], binary, inference="on", solver="builtin")
    return seen


def _conserved(p: FlowProblem, r) -> None:
    B = p.num_blocks
    inflow = np.bincount(p.edge_dst, weights=r.edge_flow, minlength=B)
    outflow = np.bincount(p.edge_src, weights=r.edge_flow, minlength=B)
    assert (r.edge_flow >= 0).all() and (r.block_flow >= 0).all()
    inner = ~p.entry
    assert np.array_equal(inflow[inner], r.block_flow[inner])
    leaves = ~p.exit
    assert np.array_equal(outflow[leaves], r.block_flow[leaves])


@settings(max_examples=60, deadline=None)
@given(problems())
def test_solvers_agree_and_conserve_flow(p):
    """Every solver's circulation conserves flow at every block, and all reach the same
    optimal objective (they may pick different optimal flows)."""
    results = {s: infer(p, s) for s in SOLVERS}
    costs = {s: r.cost for s, r in results.items()}
    assert len(set(costs.values())) == 1, costs
    for r in results.values():
        _conserved(p, r)


def test_a_loop_keeps_its_samples():
    """entry -> loop head <-> body -> exit: counts follow the samples where they agree
    with conservation, and the unsampled exit gets the entry's flow."""
    p = FlowProblem(comp=np.zeros(4, np.int64), weight=np.array([10, 1000, 990, 0]),
                    known=np.array([True, True, True, False]),
                    entry=np.array([True, False, False, False]), side_entry=np.zeros(4, bool),
                    exit=np.array([False, False, False, True]),
                    edge_src=np.array([0, 1, 2, 1]), edge_dst=np.array([1, 2, 1, 3]),
                    edge_ft=np.array([True, True, False, False]))
    for s in SOLVERS:
        r = infer(p, s)
        assert r.block_flow.tolist() == [10, 1000, 990, 10]
        assert r.edge_flow.tolist() == [10, 990, 990, 10]


def test_unknown_solver_is_a_clear_error():
    from bbmap.errors import BBMapError

    with pytest.raises(BBMapError, match="unknown inference solver"):
        solvers.pick("cplex")


# ----------------------------------------------------------------------------- corpus
IP_CASES = [pytest.param(p, id=p["name"]) for p in load_manifest().get("ip_profiles", [])
            if os.path.exists(CORPUS / p["path"])]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(CORPUS.parent / "bench"))
    import bench_inference

    return bench_inference


@pytest.mark.slow
@pytest.mark.parametrize("ip", IP_CASES)
def test_inferred_counts_beat_naive_against_exact_counts(ip, bench):
    """Real cpu-clock profiles of the LBR cases' runs: inference lowers the block and
    edge errors of the naive estimate (measured figures: spec/inference.md)."""
    from bbmap.binary import load_binary
    from bbmap.cfg import recover_cfg
    from bbmap.inference.counts import block_weights
    from bbmap.run import annotate

    bins = {b["name"]: CORPUS / b["path"] for b in load_manifest()["binaries"]}
    binary = bins[ip["binaries"][0]]
    cfg = recover_cfg(load_binary(binary))
    exact = json.loads((CORPUS / ip["exact_counts"]).read_text())
    bt, et = bench.truth_of(exact, cfg)
    res = annotate([CORPUS / ip["path"]], binary)
    assert res.count_source == "inferred"
    w, _ = block_weights(res.block_samples, cfg)
    naive = (bench.weighted_error(w, bt), bench.weighted_error(bench.naive_edges(w, cfg), et))
    got = (bench.weighted_error(res.block_count, bt),
           bench.weighted_error(bench.edges_dict(res.edge_from, res.edge_to, res.edge_count),
                                et))
    assert got[0] < 0.8 * naive[0] and got[1] < 0.6 * naive[1], (got, naive)
    q = res.inference
    assert q["status"] == "ok" and q["imbalance_after"] == 0.0
    assert q["imbalance_before"] > 0.5 and q["reachable_share"] == 1.0


def test_lbr_truth_is_consistent(bench):
    """The ground-truth reader agrees with bbmap's LBR counts (an independent path)."""
    from bbmap.binary import load_binary
    from bbmap.cfg import recover_cfg
    from bbmap.run import annotate

    m = load_manifest()
    lbr = next(p for p in m["profiles"] if p["name"] == "c22-addrmap-nopie-lbr")
    binary = next(CORPUS / b["path"] for b in m["binaries"] if b["name"] == "c22-addrmap-nopie")
    cfg = recover_cfg(load_binary(binary))
    bt, et = bench.truth_of(json.loads((CORPUS / lbr["exact_counts"]).read_text()), cfg)
    res = annotate([CORPUS / lbr["path"]], binary)
    assert res.count_source == "lbr"
    assert bench.weighted_error(res.block_count, bt) < 0.05
    assert bench.weighted_error(bench.edges_dict(res.edge_from, res.edge_to, res.edge_count),
                                et) < 0.05


# ----------------------------------------------------------------------------- outputs
@pytest.fixture(scope="module")
def ip_profile():
    if not IP_CASES:
        pytest.skip("no IP corpus profile")
    p = IP_CASES[0].values[0]
    bins = {b["name"]: CORPUS / b["path"] for b in load_manifest()["binaries"]}
    return str(CORPUS / p["path"]), str(bins[p["binaries"][0]])


@pytest.mark.slow
def test_json_and_csv_mark_inferred_counts(ip_profile):
    from bbmap.outputs.csvout import render_csv
    from bbmap.run import annotate

    res = annotate([ip_profile[0]], ip_profile[1])
    doc = res.to_json()
    assert doc["count_source"] == "inferred" and doc["inference"]["status"] == "ok"
    fn = next(f for f in doc["functions"] if f["name"] == "lay_insertion")
    assert any(b["count"] > 0 for b in fn["blocks"])
    assert {e["kind"] for e in fn["edges"]} <= {"branch", "fallthrough"}
    rows = list(csv.DictReader(io.StringIO(render_csv(res))))
    counted = [r for r in rows if r["record"] in ("block", "edge")]
    assert counted and {r["source"] for r in counted} == {"inferred"}
    # flow conservation through every inner block of the function
    ids = {b["id"]: b["count"] for b in fn["blocks"]}
    inflow: dict[int, int] = {}
    for e in fn["edges"]:
        if isinstance(e["to"], int):
            inflow[e["to"]] = inflow.get(e["to"], 0) + e["count"]
    entry = fn["blocks"][0]["id"]
    for bid, n in inflow.items():
        if bid != entry:
            assert ids[bid] == n


@pytest.mark.slow
def test_inference_off_and_on(ip_profile):
    from bbmap.run import annotate

    off = annotate([ip_profile[0]], ip_profile[1], inference="off")
    assert off.count_source == "none" and not off.block_count.any()
    assert "inference" not in off.to_json()


@pytest.mark.slow
def test_cli_inference_option(ip_profile, tmp_path):
    from click.testing import CliRunner

    from bbmap.cli import main

    out = tmp_path / "a.json"
    r = CliRunner().invoke(main, ["annotate", "--format", "json", "--inference", "off",
                                  "-o", str(out), *ip_profile])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["count_source"] == "none"
    r = CliRunner().invoke(main, ["annotate", "--inference", "on", *ip_profile])
    assert r.exit_code == 0 and "count (inferred)" in r.output


@pytest.mark.skipif(not solvers.available("ortools"), reason="OR-Tools not installed")
def test_preload_maps_the_ortools_library_without_importing_it():
    """``solvers.preload`` dlopens OR-Tools' extension in a thread (the GIL-free part of
    its import) and imports no Python module of it; the import that follows works."""
    import subprocess
    import sys

    code = ("import sys, threading; from bbmap.inference import solvers; "
            "solvers.preload('builtin'); assert not solvers._preloading; "
            "solvers.preload('ortools'); solvers.preload('ortools'); "
            "ts = [t for t in threading.enumerate() if t.name == 'bbmap-preload-ortools']; "
            "assert len(ts) <= 1, ts; [t.join() for t in ts]; "
            "maps = open('/proc/self/maps').read(); "
            "print('min_cost_flow' in maps, any(m.startswith('ortools') for m in sys.modules)); "
            "from ortools.graph.python import min_cost_flow; "
            "assert min_cost_flow.SimpleMinCostFlow().solve() is not None")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["True", "False"]
