"""A layout plan: each hot function's cluster, its cold blocks, the function order, scores.

``plan_layout(result)`` is the library entry point (``bbmap layout`` and ``annotate
--format propeller|symorder`` both call it):

* per hot function (:mod:`bbmap.layout.graph`), the hot blocks form the function's one
  cluster -- the entry first, then Ext-TSP order (:mod:`bbmap.layout.exttsp`) -- and the cold
  blocks are left to the compiler's ``.cold`` part.  Modes, as Propeller has them:
  ``split`` (default: reorder and split), ``layout-only`` (Propeller's
  ``split_functions=false``: one cluster of every block, the cold ones after the hot ones
  in their original order), ``split-only`` (``reorder_hot_blocks=false``: hot blocks in
  their original order, cold ones split off);
* without execution counts (IP samples and no inference) the hot blocks (those with
  samples, and the entry) keep their layout order: nothing to reorder by;
* no harm from uncertain counts: a block with samples is always hot (never ``.cold``),
  and with inferred counts a new order replaces the compiler's only when it scores
  higher at the counts *and* at the counts each half of the samples infers alone
  (:mod:`bbmap.inference.replicates`, which says why not the counts' intervals): where
  the evidence cannot order the blocks, the compiler's order stays
  (``FunctionLayout.kept_reason``);
* functions are ordered by call-chain clustering over the call counts
  (:mod:`bbmap.layout.callchain`, Propeller's merge size limit), or CDSort
  (:mod:`bbmap.layout.cdsort`), or hottest first -- which is also what ``c3`` and ``cdsort``
  fall back to when the profile has no calls between laid-out functions; the ``.cold``
  parts follow all hot code in the same order;
* scores, per function: Ext-TSP of the original layout (real addresses) and of the new one
  (the cluster back to back), for jumps inside the function ("intra"), and for its calls
  out ("inter": every function's hot cluster laid out in the function order, a call
  site taken as the middle of its block, as Propeller scores them); the fall-through
  count before and after; hot and cold bytes.

Deterministic: the same result gives the same plan, whatever order its profiles came in
(the counts are sums), and every tie has a stated rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from bbmap.layout import exttsp
from bbmap.layout.align import (
    LOOP_ALIGNMENT_POLICIES,
    Padding,
    loop_alignment_flags,
    padding_before_after,
)
from bbmap.layout.callchain import MERGE_SIZE_LIMIT, call_chain_order, hottest_first
from bbmap.layout.cdsort import cdsort_order
from bbmap.layout.exttsp import (
    PARAMS,
    PROPELLER,
    SMALL_MERGE,
    ExtTspParams,
    _coefficients,
    _jump_score,
    _np_sum,
    ext_tsp_order,
)
from bbmap.layout.graph import FunctionCFG, ProgramCFG, build_program_cfg

MODES = ("split", "layout-only", "split-only")
LEAN_EDGES = 128  # _Scorer: functions with at most this many edges are scored on lists
FUNCTION_ORDERS = ("c3", "cdsort", "hot")
PLAN_FORMAT_VERSION = 1
# inferred counts: a function with fewer samples than this keeps the compiler's block
# order.  Below it the flow follows its floors and the CFG's shape more than the samples
# (a branch decided by one sample on each arm), and both halves of the samples agree for
# that reason, not because the samples order the blocks: in the corpus cpu-clock profiles
# 6 of the 7 reorders of functions under 100 samples that the halves allowed scored lower
# at valgrind's exact counts than the compiler's order (lay_rarity 41-81 samples, -22% to
# -89%; lay_even 12-15, -87%; lay_interp, 55 samples, gained 3.3%) (spec/inference.md,
# "Replicates")
MIN_REORDER_SAMPLES = 100


@dataclass
class FunctionLayout:
    """One function's part of the plan (node indexes are the CFG's, IDs the map's)."""

    cfg: FunctionCFG
    order: list[int]  # the cluster: nodes in layout order
    cold: list[int]  # nodes left to the .cold part (original order)
    reordered: bool  # Ext-TSP ran (execution counts and mode allow it)
    # why the compiler's order was kept although Ext-TSP ran ("" when it was not kept)
    kept_reason: str = ""
    intra_before: float = 0.0
    intra_after: float = 0.0
    inter_before: float = 0.0
    inter_after: float = 0.0
    fallthrough_before: int = 0  # executions of jumps that fall through
    fallthrough_after: int = 0
    # alignment padding run by fall-throughs, compiler's layout and new (bbmap.layout.align)
    padding_before: Padding = field(default_factory=Padding)
    padding_after: Padding = field(default_factory=Padding)

    @property
    def name(self) -> str:
        return self.cfg.raw_name

    @property
    def cluster_ids(self) -> list[int]:
        return [int(self.cfg.ids[i]) for i in self.order]

    @property
    def cold_ids(self) -> list[int]:
        return [int(self.cfg.ids[i]) for i in self.cold]

    @property
    def hot_bytes(self) -> int:
        return int(self.cfg.sizes[self.order].sum()) if self.order else 0

    @property
    def cold_bytes(self) -> int:
        return int(self.cfg.sizes[self.cold].sum()) if self.cold else 0

    @property
    def has_cold_part(self) -> bool:
        return bool(self.cold)

    def to_json(self) -> dict:
        return {"name": self.cfg.name, "symbol": self.cfg.raw_name,
                "address": self.cfg.address, "blocks": self.cfg.num_nodes,
                "cluster": self.cluster_ids, "cold": self.cold_ids,
                "reordered": self.reordered,
                **({"kept_reason": self.kept_reason} if self.kept_reason else {}),
                "hot_bytes": self.hot_bytes, "cold_bytes": self.cold_bytes,
                "entry_count": self.cfg.entry_count,
                "score": {"intra_before": self.intra_before, "intra_after": self.intra_after,
                          "inter_before": self.inter_before, "inter_after": self.inter_after},
                "fallthroughs": {"before": self.fallthrough_before,
                                 "after": self.fallthrough_after,
                                 "gained": self.fallthrough_after - self.fallthrough_before},
                "padding_run": {"before": self.padding_before.to_json(),
                                "after": self.padding_after.to_json()}}


@dataclass
class LayoutPlan:
    """What ``bbmap layout`` writes: clusters (cc file), symbol order (ld file), report."""

    binary: str
    count_source: str
    params: ExtTspParams
    mode: str
    function_order: str  # the algorithm that ran: c3 | cdsort | hot
    function_order_note: str  # why it fell back, or ""
    functions: list[FunctionLayout]  # in linker order
    unmapped: list[str] = field(default_factory=list)  # hot symbols without a block map
    loop_alignment: str = "auto"  # keep | drop | auto (bbmap.layout.align)

    @property
    def compiler_flags(self) -> tuple[str, ...]:
        """Flags the relink adds beside the cluster file (loop alignment off when the new
        order runs the compiler's padding on hot paths)."""
        fs = self.functions
        return loop_alignment_flags(self.loop_alignment,
                                    sum((f.padding_before for f in fs), Padding()),
                                    sum((f.padding_after for f in fs), Padding()))

    @property
    def symbol_order(self) -> list[str]:
        """lld ``--symbol-ordering-file`` lines: hot code, then the ``.cold`` parts."""
        hot = [f.name for f in self.functions] + self.unmapped
        cold = [f"{f.name}.cold" for f in self.functions if f.has_cold_part]
        return hot + cold

    def totals(self) -> dict:
        fs = self.functions
        return {"functions": len(fs),
                "intra_before": sum(f.intra_before for f in fs),
                "intra_after": sum(f.intra_after for f in fs),
                "inter_before": sum(f.inter_before for f in fs),
                "inter_after": sum(f.inter_after for f in fs),
                "hot_bytes": sum(f.hot_bytes for f in fs),
                "cold_bytes": sum(f.cold_bytes for f in fs),
                "fallthrough_before": sum(f.fallthrough_before for f in fs),
                "fallthrough_after": sum(f.fallthrough_after for f in fs),
                "fallthrough_gained": sum(f.fallthrough_after - f.fallthrough_before
                                          for f in fs),
                "padding_run_before": sum((f.padding_before for f in fs), Padding()).to_json(),
                "padding_run_after": sum((f.padding_after for f in fs), Padding()).to_json()}

    def to_json(self) -> dict:
        return {"format_version": PLAN_FORMAT_VERSION, "binary": self.binary,
                "count_source": self.count_source, "params": self.params.name,
                "mode": self.mode,
                "function_order": {"algorithm": self.function_order,
                                   "note": self.function_order_note},
                "functions": [f.to_json() for f in self.functions],
                "unmapped_hot_symbols": self.unmapped,
                "symbol_order": self.symbol_order,
                "loop_alignment": self.loop_alignment,
                "compiler_flags": list(self.compiler_flags),
                "totals": self.totals()}


def plan_layout(result, *, params: ExtTspParams | str = PROPELLER,  # noqa: ANN001
                mode: str = "split", function_order: str = "c3",
                merge_size_limit: int = MERGE_SIZE_LIMIT, top: int | None = None,
                loop_alignment: str = "auto") -> LayoutPlan:
    """The layout plan of an ``AnnotateResult`` (see the module docstring); with ``top``,
    of its hottest ``top`` functions only (the others are neither laid out nor ordered:
    a report's view of the functions people look at, in a fraction of the time)."""
    if isinstance(params, str):
        if params not in PARAMS:
            raise ValueError(f"params {params!r} (one of {', '.join(PARAMS)})")
        params = PARAMS[params]
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} (one of {', '.join(MODES)})")
    if loop_alignment not in LOOP_ALIGNMENT_POLICIES:
        raise ValueError(f"loop alignment {loop_alignment!r} "
                         f"(one of {', '.join(LOOP_ALIGNMENT_POLICIES)})")
    if function_order not in FUNCTION_ORDERS:
        raise ValueError(f"function order {function_order!r} "
                         f"(one of {', '.join(FUNCTION_ORDERS)})")
    prog = build_program_cfg(result, top)
    layouts = [_layout_function(fn, prog.has_counts, params, mode) for fn in prog.functions]
    order, algo, note = _function_order(prog, layouts, function_order, merge_size_limit)
    layouts = [layouts[i] for i in order]
    _inter_scores(prog, layouts, params)
    return LayoutPlan(binary=prog.binary, count_source=prog.count_source, params=params,
                      mode=mode, function_order=algo, function_order_note=note,
                      functions=layouts,
                      unmapped=[n for n, _ in sorted(prog.unmapped, key=lambda t: (-t[1], t[0]))],
                      loop_alignment=loop_alignment)


# ------------------------------------------------------------------ one function
def _layout_function(fn: FunctionCFG, counted: bool, p: ExtTspParams,
                     mode: str) -> FunctionLayout:
    n = fn.num_nodes
    hot = fn.hot.copy()
    hot[0] = True  # the entry block stays first, in the hot cluster
    reorder = counted and mode != "split-only" and len(fn.edges) > 0
    kept = ""
    order = np.flatnonzero(hot).tolist()  # hot blocks in their original order
    score = _Scorer(fn, p) if len(fn.edges) else None
    after = None  # the kept order's score, once computed (the same call gives the same float)
    if reorder:
        if score.lean and n < exttsp.SMALL_MERGE:
            # ext_tsp_order's lean path on the scorer's lists (the CFG is valid by
            # construction: ext_tsp_order's checks and conversions would change nothing)
            got = exttsp._LeanMerger(score.l_sizes, score.l_src, score.l_dst,
                                     [float(x) for x in score.l_w],
                                     [float(x) for x in fn.counts.tolist()], p,
                                     hot.tolist()).run()
        else:
            got = ext_tsp_order(fn.sizes, fn.edges, p, counts=fn.counts, hot=hot)
        new = [v for v in got if hot[v]]
        # keep the original order unless Ext-TSP scores higher (as LLVM's block placement
        # does): the greedy merger is not guaranteed to beat every layout
        s_new, after = score.of_order(new), score.of_order(order)
        if s_new <= after:
            kept = "the compiler's order scores as high"
        elif (why := _replicates_disagree(fn, p, new, order)):
            kept = why
        else:
            kept, order, after = "", new, s_new
    cold = np.flatnonzero(~hot).tolist()
    if mode == "layout-only":
        order, cold, after = order + cold, [], None
    lay = FunctionLayout(cfg=fn, order=order, cold=cold, reordered=reorder,
                         kept_reason=kept if reorder else "")
    if score is not None:
        lay.intra_before = score.at(fn.addr)
        lay.intra_after = score.of_order(order) if after is None else after
        if score.lean:
            lay.fallthrough_before, lay.fallthrough_after = score.fallthroughs(order, cold)
        else:
            lay.fallthrough_before = _fallthroughs(fn.addr, fn.sizes, fn.edges)
            new_addr = np.full(n, -(1 << 40), np.int64)  # cold blocks: far away
            new_addr[order] = np.concatenate(([0], np.cumsum(fn.sizes[order])[:-1]))
            if cold:  # the .cold part, laid out elsewhere in original order
                new_addr[cold] = (1 << 40) + np.concatenate(([0],
                                                             np.cumsum(fn.sizes[cold])[:-1]))
            lay.fallthrough_after = _fallthroughs(new_addr, fn.sizes, fn.edges)
        lay.padding_before, lay.padding_after = padding_before_after(
            fn.addr, fn.sizes, fn.ranges, fn.edges, order)
    return lay


def _replicates_disagree(fn: FunctionCFG, p: ExtTspParams, new: list[int],
                         old: list[int]) -> str:
    """Why inferred counts cannot reorder ``fn`` (``""``: they can).  Ext-TSP's order
    must also score higher than the compiler's under the counts each half of the samples
    infers alone (bbmap.inference.replicates: why not the counts' intervals).  LBR counts
    are not asked (they are counts, not estimates)."""
    if fn.edge_bounds is None and fn.replicates is None:
        return ""
    if (n := int(fn.samples.sum())) < MIN_REORDER_SAMPLES:
        return f"too few samples to order its blocks ({n} < {MIN_REORDER_SAMPLES})"
    if not fn.replicates:
        return "no replicate counts to check the new order against"
    for half in fn.replicates:
        if not len(half):
            return "a half of the samples alone has no count for the function"
        sc = _Scorer(replace(fn, edges=half, edge_bounds=None, replicates=None), p)
        if sc.of_order(new) <= sc.of_order(old):
            return "a half of the samples alone scores the compiler's order as high"
    return ""


class _Scorer:
    """One function's Ext-TSP scores (``ext_tsp_score`` / ``ext_tsp_score_at`` with the
    edge arrays and weights prepared once).

    A small function (fewer than ``SMALL_MERGE`` blocks, at most ``LEAN_EDGES`` edges) is
    scored on plain lists: the dozen numpy calls per score cost more than its handful of
    edges (issue 32: ~0.2 s of ``plan_layout`` on 3,711 five-block functions).  Each jump's
    score is the same float operations as ``_jump_score`` and the sum is numpy's pairwise
    one (``_np_sum``), so the scores are the same to the last bit (tested)."""

    def __init__(self, fn: FunctionCFG, p: ExtTspParams) -> None:
        self.fn, self.p = fn, p
        e = fn.edges
        self.src, self.dst = e[:, 0], e[:, 1]
        self.w = e[:, 2].astype(np.float64)
        self.lean = fn.num_nodes < SMALL_MERGE and len(e) <= LEAN_EDGES
        if self.lean:
            self.l_src, self.l_dst = self.src.tolist(), self.dst.tolist()
            self.l_sizes = fn.sizes.tolist()
            self.l_w = e[:, 2].tolist()  # the counts, as integers (the lean merger's)
            n = fn.num_nodes
            outdeg = [0] * n
            for v in self.l_src:
                outdeg[v] += 1
            # per edge: (src, dst, w * ft, fw, w, bw): _coefficients' conditional split
            self.l_jumps = [
                (a, b, (p.fallthrough_weight if outdeg[a] > 1 else p.fallthrough_weight_uncond)
                 * x, p.forward_weight if outdeg[a] > 1 else p.forward_weight_uncond, x,
                 p.backward_weight if outdeg[a] > 1 else p.backward_weight_uncond)
                for a, b, x in zip(self.l_src, self.l_dst, self.w.tolist())]
            return
        self.ft, self.fw, self.bw = _coefficients(fn.num_nodes, self.src, p)

    def at(self, addr: np.ndarray, present: np.ndarray | None = None) -> float:
        if self.lean:
            return self._at_lean(addr.tolist(), None if present is None else
                                 {v for v, x in enumerate(present.tolist()) if x})
        s, d = self.src, self.dst
        dist = addr[d] - (addr[s] + self.fn.sizes[s])
        sc = _jump_score(dist, self.w, self.ft, self.fw, self.bw, self.p)
        if present is not None:
            sc = sc[present[s] & present[d]]
        return float(sc.sum())

    def _at_lean(self, addr: list[int] | dict[int, int],
                 present: set[int] | dict[int, int] | None) -> float:
        """:meth:`at` on lists: ``_jump_score``'s operations jump by jump, then numpy's
        sum of the jumps between ``present`` blocks (every jump when None)."""
        fd, bd = float(self.p.forward_distance), float(self.p.backward_distance)
        sizes = self.l_sizes
        out = []
        for a, b, ftw, fw, w, bw in self.l_jumps:
            if present is not None and (a not in present or b not in present):
                continue
            d = float(addr[b] - (addr[a] + sizes[a]))
            if d == 0:
                out.append(ftw)
            elif d > 0:
                out.append(fw * (1.0 - d / fd) * w if d < fd else 0.0)
            else:
                out.append(bw * (1.0 - (-d) / bd) * w if -d < bd else 0.0)
        return _np_sum(out)

    def fallthroughs(self, order: list[int], cold: list[int]) -> tuple[int, int]:
        """Lean :func:`_fallthroughs` at the binary's addresses and after the plan (the
        cluster from 0, the ``.cold`` part far away, other blocks farther)."""
        sizes = self.l_sizes
        new = [-(1 << 40)] * len(sizes)
        for part, o in ((order, 0), (cold, 1 << 40)):
            for v in part:
                new[v] = o
                o += sizes[v]
        out = []
        for addr in (self.fn.addr.tolist(), new):
            out.append(sum(int(w) for a, b, w in zip(self.l_src, self.l_dst, self.l_w)
                           if a != b and addr[b] == addr[a] + sizes[a]))
        return out[0], out[1]

    def of_order(self, order: list[int]) -> float:
        sizes = self.fn.sizes
        if self.lean:
            addr, o = {}, 0
            for v in order:
                addr[v] = o
                o += self.l_sizes[v]
            return self._at_lean(addr, addr)
        addr = np.zeros(len(sizes), np.int64)
        present = np.zeros(len(sizes), bool)
        if order:
            o = np.asarray(order, np.int64)
            addr[o] = np.concatenate(([0], np.cumsum(sizes[o])[:-1]))
            present[o] = True
        return self.at(addr, present)


def _fallthroughs(addr: np.ndarray, sizes: np.ndarray, edges: np.ndarray) -> int:
    """Executions of jumps whose target starts where their source ends."""
    s, d, w = edges[:, 0], edges[:, 1], edges[:, 2]
    return int(w[(addr[d] == addr[s] + sizes[s]) & (s != d)].sum())


# ------------------------------------------------------------------ function order
def _function_order(prog: ProgramCFG, layouts: list[FunctionLayout], algo: str,
                    limit: int) -> tuple[list[int], str, str]:
    fns = prog.functions
    sizes = [lay.hot_bytes for lay in layouts]
    freqs = [float(fn.counts[lay.order].sum()) if lay.order else 0.0
             for fn, lay in zip(fns, layouts)]
    samples = [int(fn.samples.sum()) for fn in fns]
    calls = prog.calls
    between = calls[(calls[:, 0] != calls[:, 2])] if len(calls) else calls
    if algo == "hot" or not prog.has_counts or not len(between):
        note = ""
        if algo != "hot":
            note = ("no execution counts (IP samples only)" if not prog.has_counts else
                    "the profile has no calls between laid-out functions")
        return hottest_first(freqs, samples), "hot", note
    # calls into the callee's entry, summed per (caller, callee)
    into = between[between[:, 3] == 0]
    rows: dict[tuple[int, int], int] = {}
    for a, b, w in zip(into[:, 0].tolist(), into[:, 2].tolist(), into[:, 4].tolist()):
        rows[(a, b)] = rows.get((a, b), 0) + w
    edges = [(a, b, w) for (a, b), w in sorted(rows.items())]
    if algo == "c3":
        entry = [float(fn.counts[0]) for fn in fns]
        return call_chain_order(sizes, freqs, entry, edges, limit), "c3", ""
    # cdsort: a call site is the middle of its block, at its place in the new cluster
    offs = []
    pos = [dict(zip(lay.order, np.concatenate(([0], np.cumsum(fn.sizes[lay.order])[:-1]))
                    .tolist())) if lay.order else {} for fn, lay in zip(fns, layouts)]
    cs_rows: dict[tuple[int, int], tuple[int, int]] = {}
    for a, na, b, w in zip(into[:, 0].tolist(), into[:, 1].tolist(), into[:, 2].tolist(),
                           into[:, 4].tolist()):
        o = pos[a].get(na, 0) + int(fns[a].sizes[na]) // 2
        prev = cs_rows.get((a, b))
        if prev is None or w > prev[0]:
            cs_rows[(a, b)] = (w, o)  # the heaviest call site of the pair
    for a, b, _ in edges:
        offs.append(cs_rows[(a, b)][1])
    return cdsort_order(sizes, freqs, edges, offs), "cdsort", ""


# ------------------------------------------------------------------ inter scores
def _inter_scores(prog: ProgramCFG, layouts: list[FunctionLayout], p: ExtTspParams) -> None:
    """Calls out of each function, Ext-TSP-scored before and after (Propeller's
    ``inter_out_score``): distance from the middle of the calling block to the callee."""
    calls = prog.calls
    if not len(calls):
        return
    fns = prog.functions
    # after: hot clusters back to back in the function order; cold blocks far away
    base, new_addr = 0, {}
    for lay in layouts:
        for v in lay.order:
            new_addr[(lay.cfg.index, v)] = base
            base += int(lay.cfg.sizes[v])
    far = base + (1 << 40)
    ca, na, cb, nb = (calls[:, i].tolist() for i in range(4))
    ssz = np.array([int(fns[a].sizes[v]) for a, v in zip(ca, na)], np.int64)
    w = calls[:, 4].astype(np.float64)
    ft = np.zeros(len(w))  # a call is never a fall-through
    fw = np.full(len(w), p.forward_weight)
    bw = np.full(len(w), p.backward_weight)
    for when, addr_of in (("before", lambda f, v: int(fns[f].addr[v])),
                          ("after", lambda f, v: new_addr.get((f, v), far))):
        src = np.array([addr_of(a, v) for a, v in zip(ca, na)], np.int64)
        dst = np.array([addr_of(b, v) for b, v in zip(cb, nb)], np.int64)
        dist = dst - (src + ssz) + ssz // 2  # from the middle of the calling block
        sums = np.bincount(calls[:, 0], weights=_jump_score(dist, w, ft, fw, bw, p),
                           minlength=len(fns))
        for lay in layouts:
            setattr(lay, f"inter_{when}", float(sums[lay.cfg.index]))
