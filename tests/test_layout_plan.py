"""Layout plans over the corpus's real LBR profiles (and its IP-only ones).

The corpus LBR profiles are built from valgrind traces of the corpus program
(corpus/lbr/*/command.txt), so their counts are real executions.
"""

from __future__ import annotations

import functools
import itertools
import random

import numpy as np
import pytest
from helpers import profile_cases
from hypothesis import given, settings
from hypothesis import strategies as st

import bbmap
from bbmap.layout import exttsp
from bbmap.layout.exttsp import LLVM, PROPELLER, ext_tsp_score
from bbmap.layout.graph import build_program_cfg
from bbmap.layout.plan import plan_layout
from bbmap.outputs.propeller import (
    render_cc_profile,
    render_ld_profile,
    render_report,
    render_report_json,
)

LBR = profile_cases("lbr")
PLAIN = [c for c in profile_cases("plain") if "c22-addrmap-pie" in c[0]]


@functools.cache
def _result(perf: tuple[str, ...], binary: str, inference: str = "auto"):
    return bbmap.annotate(list(perf), binary, inference=inference)


def _old_greedy_chain(fn) -> list[int]:
    """The cluster bbmap wrote before Ext-TSP (round 1's outputs/propeller.py): from the
    entry follow the heaviest edge to an unplaced hot block, else the hottest one left."""
    hot = fn.hot.copy()
    hot[0] = True
    succ: dict[int, dict[int, int]] = {}
    for a, b, c in fn.edges.tolist():
        succ.setdefault(a, {})[b] = succ.get(a, {}).get(b, 0) + c
    by_heat = sorted(np.flatnonzero(hot).tolist(), key=lambda i: (-int(fn.counts[i]), i))
    order, placed, cur = [], set(), 0
    while True:
        order.append(cur)
        placed.add(cur)
        nxt = [(c, b) for b, c in succ.get(cur, {}).items() if hot[b] and b not in placed]
        if nxt:
            cur = max(nxt, key=lambda cb: (cb[0], -cb[1]))[1]
            continue
        rest = [i for i in by_heat if i not in placed]
        if not rest:
            return order
        cur = rest[0]


def _brute_best(fn, hot: list[int], params) -> float:
    """Best score of the hot blocks, entry first, over every order (vectorised)."""
    perms = np.array([(0, *p) for p in itertools.permutations(hot[1:])], np.int64)
    s = fn.sizes
    addr = np.zeros_like(perms)
    addr[:, 1:] = np.cumsum(s[perms[:, :-1]], axis=1)
    pos = np.full((len(perms), fn.num_nodes), -(1 << 40), np.int64)
    pos[np.arange(len(perms))[:, None], perms] = addr
    e = fn.edges
    keep = np.isin(e[:, 0], hot) & np.isin(e[:, 1], hot)
    src, dst, w = e[keep, 0], e[keep, 1], e[keep, 2].astype(np.float64)
    ft, fw, bw = exttsp._coefficients(fn.num_nodes, src, params)
    dist = pos[:, dst] - (pos[:, src] + s[src])
    return float(exttsp._jump_score(dist, w, ft, fw, bw, params).sum(axis=1).max())


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles absent")
@pytest.mark.parametrize("case", LBR, ids=[c[0] for c in LBR])
@pytest.mark.parametrize("params", [PROPELLER, LLVM], ids=["propeller", "llvm"])
def test_new_layout_beats_original_and_old_greedy(case, params):
    """Every laid-out function scores at least its original layout and the old greedy
    chain; every function with at most 9 hot blocks is within 1% of the brute-force best."""
    _, perf, binary = case
    plan = plan_layout(_result((perf,), binary), params=params)
    assert plan.count_source == "lbr"
    checked = brute = 0
    for f in plan.functions:
        fn = f.cfg
        if not len(fn.edges):
            continue
        checked += 1
        assert f.order[0] == 0 and sorted(f.order + f.cold) == list(range(fn.num_nodes))
        assert f.intra_after >= f.intra_before - 1e-9, fn.name
        greedy = ext_tsp_score(fn.sizes, fn.edges, _old_greedy_chain(fn), params)
        assert f.intra_after >= greedy - 1e-9, fn.name
        if len(f.order) <= 9:
            brute += 1
            best = _brute_best(fn, sorted(f.order), params)
            assert f.intra_after >= 0.99 * best - 1e-9, fn.name
    assert checked >= 8 and brute >= 5
    t = plan.totals()
    assert t["intra_after"] > t["intra_before"] and t["fallthrough_gained"] > 0


@pytest.mark.skipif(len(LBR) < 2, reason="corpus LBR profiles absent")
def test_byte_identical_whatever_the_profile_order():
    by_binary: dict[str, list] = {}
    for c in LBR:
        by_binary.setdefault(c[2], []).append(c)
    same = next((v for v in by_binary.values() if len(v) >= 2), None)
    if same is None:
        pytest.skip("no two LBR profiles of one binary")
    binary = same[0][2]
    outs = []
    for perfs in ((same[0][1], same[1][1]), (same[1][1], same[0][1])):
        plan = plan_layout(_result(perfs, binary))
        outs.append((render_cc_profile(plan, verbose=True), render_ld_profile(plan),
                     render_report_json(plan), render_report(plan)))
    assert outs[0] == outs[1]
    plan = plan_layout(_result((same[0][1], same[1][1]), binary))
    assert render_cc_profile(plan, verbose=True) == outs[0][0]  # and between runs


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles absent")
def test_modes():
    _, perf, binary = LBR[0]
    r = _result((perf,), binary)
    split = {f.name: f for f in plan_layout(r).functions}
    whole = {f.name: f for f in plan_layout(r, mode="layout-only").functions}
    keep = {f.name: f for f in plan_layout(r, mode="split-only").functions}
    assert split.keys() == whole.keys() == keep.keys()
    some_cold = False
    for name, f in split.items():
        # layout-only: every block in the one cluster, hot ones (same order) first
        assert not whole[name].cold
        assert whole[name].order == f.order + f.cold
        # split-only: the same hot blocks, in their original order
        assert keep[name].order == sorted(f.order) and keep[name].cold == f.cold
        assert not keep[name].reordered
        some_cold |= bool(f.cold)
    assert some_cold
    lo = plan_layout(r, mode="layout-only")
    assert not any(s.endswith(".cold") for s in lo.symbol_order)


@pytest.mark.skipif(not PLAIN, reason="corpus IP profile absent")
def test_ip_only_profile_keeps_hot_blocks_in_layout_order():
    """No branch stacks and no inferred counts: no edges to reorder by, so hot blocks (IP
    samples, and the entry) keep their order and functions go hottest first."""
    _, perf, binary = PLAIN[0]
    plan = plan_layout(_result((perf,), binary, "off"))
    assert plan.count_source == "none" and plan.function_order == "hot"
    assert "IP samples" in plan.function_order_note
    assert plan.functions
    for f in plan.functions:
        assert f.order == sorted(f.order) and f.order[0] == 0 and not f.reordered
        assert all(f.cfg.samples[v] > 0 for v in f.order[1:])
    samples = [int(f.cfg.samples.sum()) for f in plan.functions]
    assert samples == sorted(samples, reverse=True)
    assert "IP samples only" in render_cc_profile(plan)


@pytest.mark.skipif(not PLAIN, reason="corpus IP profile absent")
def test_ip_only_profile_with_inferred_counts_is_laid_out():
    """With inference (annotate's default for IP-only profiles, issue 12) the same engine
    reorders by the inferred counts, and the files say where the counts came from."""
    _, perf, binary = PLAIN[0]
    plan = plan_layout(_result((perf,), binary))
    assert plan.count_source == "inferred"
    assert "inferred" in render_cc_profile(plan).splitlines()[1]
    done = [f for f in plan.functions if f.reordered]
    assert done and all(f.intra_after >= f.intra_before - 1e-9 for f in plan.functions)


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles absent")
def test_inferred_counts_use_the_same_columns():
    """Issue 12 fills block_count and the edge columns for IP-only profiles and sets
    count_source = "inferred": the engine takes them as it takes LBR counts."""
    from dataclasses import replace
    _, perf, binary = LBR[0]
    lbr = _result((perf,), binary)
    inferred = replace(lbr, has_lbr=False, count_source="inferred")
    a, b = plan_layout(lbr), plan_layout(inferred)
    assert b.count_source == "inferred" and "inferred" in render_report(b)
    assert [(f.name, f.cluster_ids) for f in a.functions] == \
        [(f.name, f.cluster_ids) for f in b.functions]


@pytest.mark.skipif(not LBR, reason="corpus LBR profiles absent")
def test_cfg_counts_and_edges():
    _, perf, binary = LBR[0]
    r = _result((perf,), binary)
    prog = build_program_cfg(r)
    assert prog.count_source == "lbr" and prog.has_counts
    addrs = [f.address for f in prog.functions]
    assert addrs == sorted(addrs)
    for fn in prog.functions:
        m = r.block_map
        assert (fn.sizes == m.block_size[fn.blocks]).all()
        if len(fn.edges):
            e = fn.edges
            assert (e[:, 2] > 0).all() and len({(a, b) for a, b, _ in e.tolist()}) == len(e)
            # a node's count covers what flows in and out of it
            assert (fn.counts >= np.bincount(e[:, 1], weights=e[:, 2],
                                             minlength=fn.num_nodes)).all()
        assert (fn.hot == (fn.counts > 0)).all()
    assert len(prog.calls) and (prog.calls[:, 3] == 0).all()  # calls land on entries


@pytest.mark.skipif(not any(c[0] == "c22-list-pie-lbr" for c in LBR),
                    reason="corpus list-pie LBR profile absent")
def test_functions_already_split_keep_all_their_blocks():
    """c22-list-pie was built from a cluster file, so some functions have a .cold range:
    their CFG holds the blocks of every range at their real addresses."""
    _, perf, binary = next(c for c in LBR if c[0] == "c22-list-pie-lbr")
    prog = build_program_cfg(_result((perf,), binary))
    multi = [fn for fn in prog.functions if fn.ranges.max() > 0]
    assert multi
    for fn in multi:
        assert fn.ranges[0] == 0
        m = _result((perf,), binary).block_map
        assert (fn.addr == np.asarray(m.block_address(fn.blocks))).all()


def test_sampled_function_without_counts_keeps_its_sampled_blocks():
    """A function with IP samples that no LBR range or inference reached: its sampled
    blocks stay hot, in their order, instead of everything but the entry going cold."""
    from dataclasses import replace

    from test_outputs_formats import lbr_result

    res = lbr_result()
    res = replace(res, block_count=np.zeros_like(res.block_count),
                  edge_count=np.zeros_like(res.edge_count))
    prog = build_program_cfg(res)
    assert prog.has_counts
    for fn in prog.functions:
        assert (fn.hot == (fn.samples > 0)).all() and len(fn.edges) == 0
    plan = plan_layout(res)
    beta = next(f for f in plan.functions if f.cfg.name == "beta")
    assert beta.order == [0] + [v for v in range(1, beta.cfg.num_nodes)
                                if beta.cfg.samples[v] > 0]


@pytest.mark.skipif(not PLAIN, reason="corpus IP profile absent")
def test_inferred_call_edges_order_functions():
    """An IP-only profile's call graph: every direct call of a block that ran counts as
    often as its block (inferred), as BOLT's buildCallGraph counts a call site without
    branch data; so C3 orders functions by calls, not hottest first.  Checked against the
    disassembly: each call edge leaves a block holding that many calls into its callee."""
    from bbmap.aggregate.lbr import K_CALL
    from bbmap.binary import load_binary
    from bbmap.cfg import recover_cfg

    _, perf, binary = PLAIN[0]
    res = _result((perf,), binary)
    call = res.edge_kind == K_CALL
    assert call.any()
    m = res.block_map
    entries = m.range_block_ptr[m.func_range_ptr[:-1]]
    cfg = recover_cfg(load_binary(binary), m)
    for a, b, n in zip(res.edge_from[call], res.edge_to[call], res.edge_count[call]):
        assert b in entries
        callee = int(np.searchsorted(entries, b, side="right") - 1)
        k = int(((cfg.call_block == a) & (cfg.call_func == callee)).sum()
                + ((cfg.tail_block == a) & (cfg.tail_func == callee)).sum())
        assert k >= 1 and n == k * res.block_count[a]
    plan = plan_layout(res)
    assert plan.function_order == "c3"


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 45),
       params=st.sampled_from([PROPELLER, LLVM, PROPELLER.with_(fallthrough_weight=0.5)]))
def test_lean_scorer_is_the_numpy_scorer_bit_for_bit(seed, n, params):
    """Small functions are scored on lists (plan._Scorer's lean path, issue 32's
    plan_layout speed): every score and fall-through count must be the numpy path's to
    the last bit -- the plan's report and its keep-or-replace decisions depend on them."""
    from types import SimpleNamespace

    from bbmap.layout import plan as plan_mod

    rng = random.Random(seed)
    sizes = np.array([rng.choice([0, 1, 2, 5, 16, 64, 300, 700]) for _ in range(n)], np.int64)
    edges = np.array([(rng.randrange(n), rng.randrange(n),
                       rng.choice([0, 1, 9, rng.randint(1, 10**7)]))
                      for _ in range(rng.randint(1, 3 * n))], np.int64)
    addr = np.cumsum(np.concatenate(([rng.randrange(1 << 20)], sizes[:-1]
                                     + np.array([rng.choice([0, 0, 3, 2000])
                                                 for _ in range(n - 1)], np.int64))))
    fn = SimpleNamespace(num_nodes=n, edges=edges, sizes=sizes, addr=addr)
    lean, full = plan_mod._Scorer(fn, params), plan_mod._Scorer(fn, params)
    assert lean.lean == (n < exttsp.SMALL_MERGE)
    full.lean = False
    if not lean.lean:
        return
    full.ft, full.fw, full.bw = exttsp._coefficients(n, full.src, params)
    order = rng.sample(range(n), rng.randint(0, n))
    cold = [v for v in range(n) if v not in order and rng.random() < 0.5]
    present = np.array([rng.random() < 0.6 for _ in range(n)])
    assert lean.of_order(order) == full.of_order(order)
    assert lean.at(addr) == full.at(addr)
    assert lean.at(addr, present) == full.at(addr, present)
    new_addr = np.full(n, -(1 << 40), np.int64)
    if order:
        new_addr[order] = np.concatenate(([0], np.cumsum(sizes[order])[:-1]))
    if cold:
        new_addr[cold] = (1 << 40) + np.concatenate(([0], np.cumsum(sizes[cold])[:-1]))
    assert lean.fallthroughs(order, cold) == (plan_mod._fallthroughs(addr, sizes, edges),
                                              plan_mod._fallthroughs(new_addr, sizes, edges))


@pytest.mark.skipif(not LBR or not PLAIN, reason="corpus profiles absent")
@pytest.mark.parametrize("case,inference", [(LBR[0], "auto"), (PLAIN[0], "auto"),
                                            (PLAIN[0], "off")],
                         ids=["lbr", "inferred", "ip-only"])
def test_node_counts_of_all_functions_at_once_are_the_per_function_ones(case, inference):
    """graph.py computes every function's node counts in one pass over all nodes (issue
    32's plan_layout speed): the counts and hot flags must be what the per-function
    computation (_node_counts, kept as the reference) gives."""
    from bbmap.layout import graph

    _, perf, binary = case
    result = _result((perf,), binary, inference)
    prog = build_program_cfg(result)
    counted = prog.has_counts
    calls, returns = _raw_calls(result, prog)
    groups = [graph._by_column(rows, col, len(prog.functions))
              for rows, col in ((calls, 2), (calls, 0), (returns, 0), (returns, 2))]
    assert prog.functions
    for fn in prog.functions:
        got_counts, got_hot = fn.counts.copy(), fn.hot.copy()
        ci, co, ro, ri = (g(fn.index) for g in groups)
        graph._node_counts(fn, result, counted, ci, co, ro, ri)
        assert got_counts.tolist() == fn.counts.tolist()
        assert got_hot.tolist() == fn.hot.tolist()


def _raw_calls(result, prog):
    """The call and return rows build_program_cfg counts from (before merging)."""
    from bbmap.aggregate.lbr import K_CALL, K_RETURN

    if not prog.has_counts or not len(result.edge_from):
        z = np.zeros((0, 5), np.int64)
        return z, z
    node_fn = np.full(result.block_map.num_blocks, -1, np.int64)
    node_local = np.zeros(result.block_map.num_blocks, np.int64)
    for fn in prog.functions:
        node_fn[fn.blocks] = fn.index
        node_local[fn.blocks] = np.arange(fn.num_nodes)
    ef, et, ek, ec = result.edge_from, result.edge_to, result.edge_kind, result.edge_count
    fa, fb = node_fn[ef], node_fn[et]
    both = (fa >= 0) & (fb >= 0) & (ec > 0)
    out = []
    for kind in (K_CALL, K_RETURN):
        k = both & (ek == kind)
        out.append(np.stack([fa[k], node_local[ef[k]], fb[k], node_local[et[k]], ec[k]],
                            axis=1).astype(np.int64))
    return out[0], out[1]
