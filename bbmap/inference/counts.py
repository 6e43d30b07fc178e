"""From per-block IP samples and a recovered CFG to inferred block and edge counts.

How samples become observed block weights (relative executions, comparable across the
blocks and edges of one profile, not absolute) is :mod:`bbmap.inference.weights`: the
model the event calls for (:mod:`bbmap.inference.events`: ``precise`` or ``time``) when
the per-address IP histogram is given, ``insn`` (samples per instruction) from per-block
counts otherwise; measured against exact valgrind counts in spec/inference.md, "Samples
and executions".

The network (:mod:`bbmap.inference.flow`) covers every function with at least one sample
in a block; its entry is the first block, EH landing pads are side entries (and so is any
sampled block no entry reaches: the samples prove it ran, whatever the recovered CFG
says), and flow leaves at blocks without successors (returns, tail calls, no-return calls,
unknown indirect jumps), at blocks with a conditional branch out of the function (a
conditional tail call leaves the block without falling through) and at blocks from which
no such exit is reachable.  Every sampled block is floored at the count its samples prove
and every count and edge gets an interval (:mod:`bbmap.inference.intervals`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bbmap.cfg import CFG, S_FALLTHROUGH, T_COND_TAIL_CALL
from bbmap.formats.bbaddrmap import MD_IS_EH_PAD
from bbmap.inference.flow import FlowProblem, FlowResult, infer
from bbmap.inference.intervals import (
    CONFIDENCE,
    Intervals,
    ceilings,
    floors,
    intervals,
    model_spread,
)
from bbmap.inference.rebalance import rebalance_unknown
from bbmap.inference.weights import (
    HISTOGRAM_MODELS,
    MODEL_ALIASES,
    PRECISE_BLOCK_INC,
    PRECISE_MODEL,
    SAMPLE_MODEL,
    SAMPLE_MODELS,
    SKID_MODEL,
    TIME_MODEL,
    WEIGHT_SCALE,
    SampleEvidence,
    Skid,
    block_evidence,
    block_weights,
    precise_weights,
    precision_cost_scale,
    skid_evidence,
    unique_starts,
)

if TYPE_CHECKING:
    from bbmap.inference.flow_cache import FlowCache

__all__ = ["PRECISE_MODEL", "SAMPLE_MODEL", "SAMPLE_MODELS", "SKID_MODEL", "TIME_MODEL",
           "WEIGHT_SCALE", "Inferred", "Quality", "block_weights", "infer_counts"]


@dataclass
class Quality:
    """How well the samples fit the CFG, before and after inference."""

    functions: int = 0
    blocks: int = 0
    samples: int = 0  # samples in blocks of the inferred functions
    samples_reachable: int = 0  # ... in blocks the CFG reaches from an entry
    imbalance_before: float = 0.0  # sum |count - in-flow| / sum count, naive estimate
    imbalance_after: float = 0.0  # the same after inference (0: flow conserved)
    adjustment: float = 0.0  # sum |inferred - observed| / sum observed (weight units)
    solver: str = ""
    seconds: float = 0.0
    sample_model: str = SAMPLE_MODEL
    skid: Skid | None = None  # where the time model put the samples (model "time")
    floored: int = 0  # blocks whose count the samples' floor raised above their weight
    call_evidence: int = 0  # functions solved again with entries floored by call sites
    notes: list[str] = field(default_factory=list)

    @property
    def reachable_share(self) -> float:
        return self.samples_reachable / self.samples if self.samples else 1.0

    def to_json(self) -> dict:
        return {"functions": self.functions, "blocks": self.blocks, "samples": self.samples,
                "samples_reachable": self.samples_reachable,
                "reachable_share": round(self.reachable_share, 6),
                "imbalance_before": round(self.imbalance_before, 6),
                "imbalance_after": round(self.imbalance_after, 6),
                "adjustment": round(self.adjustment, 6), "solver": self.solver,
                "weight_scale": WEIGHT_SCALE, "sample_model": self.sample_model,
                "model_spread": model_spread(self.sample_model),
                "confidence": CONFIDENCE, "floored": self.floored,
                "call_evidence": self.call_evidence,
                **({"skid": self.skid.to_json()} if self.skid is not None else {}),
                **({"notes": self.notes} if self.notes else {})}


@dataclass
class Inferred:
    """Counts over the whole block map (0 outside the inferred functions)."""

    block_count: np.ndarray  # i8 per global block
    edge_from: np.ndarray  # i8 global block
    edge_to: np.ndarray
    edge_fallthrough: np.ndarray  # bool
    edge_count: np.ndarray  # i8
    quality: Quality
    # bounds at CONFIDENCE (intervals.py): per global block (0 / 0 outside the inferred
    # functions) and per edge above; high -1 where nothing bounds it
    block_low: np.ndarray | None = None
    block_high: np.ndarray | None = None
    edge_low: np.ndarray | None = None
    edge_high: np.ndarray | None = None
    # per global block: the samples' floor raised its count above its weight
    block_floored: np.ndarray | None = None


def _propagate(mask: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Closure of ``mask`` along edges src -> dst (vectorized, one pass per BFS level)."""
    reach = mask.copy()
    frontier = mask.copy()
    while frontier.any():
        hit = frontier[src]
        new = np.zeros_like(reach)
        new[dst[hit]] = True
        frontier = new & ~reach
        reach |= new
    return reach


def infer_counts(cfg: CFG, block_samples: np.ndarray, *, solver: str = "auto",
                 model: str | None = None, functions: np.ndarray | None = None,
                 edge_counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 weights: tuple[np.ndarray, np.ndarray] | None = None,
                 ip: tuple[np.ndarray, np.ndarray] | None = None,
                 unknown: np.ndarray | None = None, workers: int | None = None,
                 flow_cache: FlowCache | None = None) -> Inferred:
    """Infer counts for every block-map function with samples in its blocks (or the
    ``functions`` given).  ``ip`` is the IP histogram (ELF vaddrs, samples at each) of the
    same samples: with it the sample model is ``model`` (``precise`` or ``time``, what the
    event calls for: :func:`bbmap.inference.events.profile_model`; default ``time``),
    without it ``insn``.  ``edge_counts`` (from, to, count; global blocks) adds observed
    edge weights, e.g. sparse LBR, in the same weight units.  ``unknown`` (bool per block)
    marks blocks the samples say nothing about (a block of a new build no block of the
    profiled build matched, bbmap.stale): their zero is no evidence, the flow decides.

    Then call sites.  A function is entered as often as its call sites run: every
    inferred function with direct calls (or unconditional tail calls) from blocks that
    ran is solved again with its entry floored at the sum of their intervals' low ends
    and observed at least at the sum of their counts.  A hot loop whose entry block the
    samples barely see gets its entries from its callers, and a tiny function's count is
    put on its callers' scale instead of its own few samples' (measured in
    spec/inference.md, "Call sites")."""
    kw = {"solver": solver, "model": model, "edge_counts": edge_counts, "weights": weights,
          "ip": ip, "unknown": unknown,
          "workers": workers, "flow_cache": flow_cache}
    first = _infer(cfg, block_samples, functions=functions, **kw)
    ev = _call_evidence(cfg, first)
    if ev is None:
        return first
    second = _infer(cfg, block_samples, functions=ev[0], entry_evidence=ev, **kw)
    out = _splice(cfg, first, second, ev[0])
    out.quality.call_evidence = len(ev[0])
    return out


def _call_evidence(cfg: CFG, inf: Inferred
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(functions, entry weight, entry floor) for the inferred functions with direct call
    sites (calls and unconditional tail calls from blocks ``inf`` says ran); None when
    there is none."""
    m = cfg.block_map
    if not m.num_functions or not len(inf.block_count):
        return None
    # calls and unconditional tail calls enter their callee once per execution of their
    # block; a conditional tail call only when taken (unknown), so it proves nothing
    uncond = cfg.term[cfg.tail_block] != T_COND_TAIL_CALL if len(cfg.tail_block) else \
        np.zeros(0, bool)
    cb = np.concatenate([cfg.call_block, cfg.tail_block[uncond]]).astype(np.int64)
    cf = np.concatenate([cfg.call_func, cfg.tail_func[uncond]]).astype(np.int64)
    ok = cf >= 0
    cb, cf = cb[ok], cf[ok]
    run = inf.block_count[cb] > 0
    cb, cf = cb[run], cf[run]
    if not len(cb):
        return None
    F = m.num_functions
    in_w = np.bincount(cf, weights=inf.block_count[cb], minlength=F)
    in_lo = np.bincount(cf, weights=inf.block_low[cb], minlength=F)
    has = np.diff(m.range_block_ptr[m.func_range_ptr]) > 0
    counted = np.zeros(F, bool)
    counted[cfg.block_func[np.flatnonzero(inf.block_count > 0)]] = True
    short = np.flatnonzero(counted & has & (in_w > 0))
    if not len(short):
        return None
    return short, np.rint(in_w[short]).astype(np.int64), \
        np.floor(in_lo[short]).astype(np.int64)


def _splice(cfg: CFG, first: Inferred, second: Inferred, functions: np.ndarray) -> Inferred:
    """``first`` with the blocks and edges of ``functions`` taken from ``second``."""
    redo = np.zeros(cfg.block_map.num_functions, bool)
    redo[functions] = True
    mine = redo[cfg.block_func]
    out = Inferred(**{f: getattr(first, f) for f in (
        "block_count", "edge_from", "edge_to", "edge_fallthrough", "edge_count", "quality",
        "block_low", "block_high", "edge_low", "edge_high", "block_floored")})
    for f in ("block_count", "block_low", "block_high", "block_floored"):
        col = getattr(first, f).copy()
        col[mine] = getattr(second, f)[mine]
        setattr(out, f, col)
    keep = ~mine[first.edge_from]
    cols = ("edge_from", "edge_to", "edge_fallthrough", "edge_count", "edge_low", "edge_high")
    merged = {f: np.concatenate([getattr(first, f)[keep], getattr(second, f)]) for f in cols}
    order = np.argsort(merged["edge_from"], kind="stable")  # CFG order: by source block
    for f in cols:
        setattr(out, f, merged[f][order])
    q = first.quality
    q.floored = int(out.block_floored.sum())  # re-solved functions counted once
    q.seconds += second.quality.seconds
    return out


def _infer(cfg: CFG, block_samples: np.ndarray, *, solver: str = "auto",
           model: str | None = None, functions: np.ndarray | None = None,
           edge_counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
           weights: tuple[np.ndarray, np.ndarray] | None = None,
           ip: tuple[np.ndarray, np.ndarray] | None = None,
           entry_evidence: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
           unknown: np.ndarray | None = None, workers: int | None = None,
           flow_cache: FlowCache | None = None) -> Inferred:
    """One pass of :func:`infer_counts`; ``entry_evidence``: (functions, entry weight,
    entry floor) from their call sites."""
    t0 = time.perf_counter()
    m = cfg.block_map
    B = m.num_blocks
    bfunc = cfg.block_func
    samples = np.asarray(block_samples, dtype=np.int64)
    if functions is None:
        fs = np.bincount(bfunc, weights=samples, minlength=m.num_functions) if B else \
            np.zeros(0)
        functions = np.flatnonzero(fs > 0)
    q = Quality(functions=len(functions))
    model = _model_for(cfg, model, ip, q)
    q.sample_model = model if weights is None else "given"
    z = np.zeros(0, np.int64)
    empty = Inferred(np.zeros(B, np.int64), z, z, np.zeros(0, bool), z, q,
                     np.zeros(B, np.int64), np.zeros(B, np.int64), z, z, np.zeros(B, bool))
    if not len(functions) or not B:
        return empty
    sel = np.zeros(m.num_functions, bool)
    sel[functions] = True
    blocks = np.flatnonzero(sel[bfunc])  # global, in map order: functions contiguous
    local = np.full(B, -1, np.int64)
    local[blocks] = np.arange(len(blocks))
    src_g, dst_g, kind = cfg.edges()
    keep = sel[bfunc[src_g]] if len(src_g) else np.zeros(0, bool)
    src_g, dst_g, kind = src_g[keep], dst_g[keep], kind[keep]
    src, dst = local[src_g], local[dst_g]
    comp_of_func = np.cumsum(sel) - 1
    comp = comp_of_func[bfunc[blocks]]

    ev_all, w_all, known_all = _evidence(cfg, model, samples, ip, weights, q)
    if unknown is not None:
        known_all = known_all & ~unknown
    w, known = w_all[blocks], known_all[blocks]
    ev = SampleEvidence(ev_all.samples[blocks], ev_all.units[blocks], known)
    first = np.zeros(len(blocks), bool)
    first[0] = True
    first[1:] = comp[1:] != comp[:-1]
    side = (m.block_md[blocks] & MD_IS_EH_PAD) != 0
    nsucc = np.bincount(src, minlength=len(blocks))
    exit_ = nsucc == 0
    if len(cfg.cond_exit) == B:  # a conditional tail call may leave the block
        exit_ |= cfg.cond_exit[blocks]
    can_exit = _propagate(exit_, dst, src)
    exit_ |= ~can_exit
    reach = _propagate(first | side, src, dst)
    s_loc = samples[blocks]
    floor = floors(ev, s_loc, model)
    # a function with samples was entered: its entry ran at least once
    entered = first & (np.bincount(comp, weights=s_loc)[comp] > 0)
    floor[entered] = np.maximum(floor[entered], 1)
    if entry_evidence is not None:  # what the call sites say of the entries
        ef, ew_, efl = entry_evidence
        at = np.flatnonzero(first)[np.searchsorted(functions, ef)]
        w = w.copy()
        known = known.copy()
        w[at] = np.maximum(w[at], ew_)
        known[at] = True
        floor[at] = np.maximum(floor[at], efl)
    stray = (s_loc > 0) & ~reach  # sampled, yet no entry reaches it: it has a way in
    side = side | stray

    given = {} if edge_counts is None else _edge_evidence(edge_counts, src_g, dst_g, B)
    precise = model == PRECISE_MODEL and weights is None
    cost = {"cost_scale": precision_cost_scale(ev, comp), "block_inc": PRECISE_BLOCK_INC} \
        if precise else {}
    p = FlowProblem(comp=comp, weight=w, known=known, entry=first, side_entry=side,
                    exit=exit_, edge_src=src, edge_dst=dst, edge_ft=kind == S_FALLTHROUGH,
                    floor=floor, ceiling=ceilings(ev, model), **cost, **given)
    r = infer(p, solver, workers=workers, cache=flow_cache)
    if precise:  # unsampled arms of a branch share its flow (rebalance.py)
        unk = (ev.samples <= 0) & (floor == 0) & ~(first | side)
        r.block_flow, r.edge_flow, _ = rebalance_unknown(
            r.block_flow, r.edge_flow, src, dst, unk, exit_, p.ceiling)
    iv = intervals(ev, model, floor, r.block_flow, src, dst, r.edge_flow, first | side,
                   exit_)

    q.samples = int(s_loc.sum())
    q.samples_reachable = int(s_loc[reach].sum())
    out = _result(B, blocks, w, known, floor, first, src, dst, src_g, dst_g, kind, r, iv, q)
    q.seconds = time.perf_counter() - t0
    return out


def _model_for(cfg: CFG, model: str | None, ip: tuple[np.ndarray, np.ndarray] | None,
               q: Quality) -> str:
    """The sample model a pass uses: the one asked for (or the default for the input), or
    the per-block model where a histogram model has no histogram (said in ``q.notes``)."""
    model = MODEL_ALIASES.get(model, model)
    if model is None:
        model = TIME_MODEL if ip is not None else SAMPLE_MODEL
    if model in HISTOGRAM_MODELS and (ip is None or not unique_starts(cfg)):
        q.notes.append(f"the {model} model needs the IP histogram of an executable; "
                       f"used '{SAMPLE_MODEL}'")
        model = SAMPLE_MODEL
    return model


def _evidence(cfg: CFG, model: str, samples: np.ndarray,
              ip: tuple[np.ndarray, np.ndarray] | None,
              weights: tuple[np.ndarray, np.ndarray] | None, q: Quality
              ) -> tuple[SampleEvidence, np.ndarray, np.ndarray]:
    """(evidence, weight, known) per block of the whole map under ``model``; given
    ``weights`` (tests, the bench) replace the model's, their bounds from per-block samples
    per instruction."""
    if model == TIME_MODEL:
        assert ip is not None
        ev, q.skid = skid_evidence(cfg, ip[0], ip[1])
    elif model == PRECISE_MODEL:
        assert ip is not None
        ev = precise_weights(cfg, ip[0], ip[1])[2]
    else:
        ev = block_evidence(samples, cfg, model)
    if weights is not None:
        return block_evidence(samples, cfg, SAMPLE_MODEL), weights[0], weights[1]
    return ev, ev.weight, ev.known


def _edge_evidence(edge_counts: tuple[np.ndarray, np.ndarray, np.ndarray],
                   src_g: np.ndarray, dst_g: np.ndarray, B: int) -> dict[str, np.ndarray]:
    """Observed edge counts (from, to, count: global block indices) matched onto the
    pass's edges: ``edge_weight`` and ``edge_known`` of the flow problem."""
    ef, et, ec = edge_counts
    key = src_g * B + dst_g
    okey = np.asarray(ef, np.int64) * B + np.asarray(et, np.int64)
    order = np.argsort(okey)
    pos = np.searchsorted(okey[order], key)
    hit = pos < len(okey)
    hit[hit] = okey[order][pos[hit]] == key[hit]
    ew = np.zeros(len(key), np.int64)
    ew[hit] = np.asarray(ec, np.int64)[order][pos[hit]]
    return {"edge_weight": ew, "edge_known": hit}


def _result(B: int, blocks: np.ndarray, w: np.ndarray, known: np.ndarray, floor: np.ndarray,
            first: np.ndarray, src: np.ndarray, dst: np.ndarray, src_g: np.ndarray,
            dst_g: np.ndarray, kind: np.ndarray, r: FlowResult, iv: Intervals, q: Quality
            ) -> Inferred:
    """The solved pass as :class:`Inferred` over the whole map, and its quality figures."""
    raised = (r.block_flow > w) & (r.block_flow <= floor) & (floor > 0)
    q.floored = int(raised.sum())
    q.blocks = len(blocks)
    wf = w.astype(np.float64)
    q.imbalance_before = _imbalance(wf, _naive_edges(wf, src, dst), src, dst, first)
    q.imbalance_after = _imbalance(r.block_flow.astype(np.float64),
                                   r.edge_flow.astype(np.float64), src, dst, first)
    tot = float(w[known].sum())
    q.adjustment = float(np.abs(r.block_flow[known] - w[known]).sum()) / tot if tot else 0.0
    q.solver = r.solver

    def spread(v: np.ndarray, dtype: type = np.int64) -> np.ndarray:
        out = np.zeros(B, dtype)
        out[blocks] = v
        return out

    pos = r.edge_flow > 0
    return Inferred(block_count=spread(r.block_flow), edge_from=src_g[pos], edge_to=dst_g[pos],
                    edge_fallthrough=(kind == S_FALLTHROUGH)[pos], edge_count=r.edge_flow[pos],
                    quality=q, block_low=spread(iv.block_low),
                    block_high=spread(iv.block_high), edge_low=iv.edge_low[pos],
                    edge_high=iv.edge_high[pos], block_floored=spread(raised, bool))


def _naive_edges(c: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Each block's count split over its successors in proportion to theirs (evenly
    when they are all zero): the best flow the naive estimate offers without inference."""
    if not len(src):
        return np.zeros(0)
    tot = np.bincount(src, weights=c[dst], minlength=len(c))
    deg = np.bincount(src, minlength=len(c))
    share = np.where(tot[src] > 0, c[dst] / np.where(tot[src] > 0, tot[src], 1),
                     1.0 / np.maximum(deg[src], 1))
    return c[src] * share


def _imbalance(c: np.ndarray, e: np.ndarray, src: np.ndarray, dst: np.ndarray,
               entry: np.ndarray) -> float:
    """sum over non-entry blocks of |count - in-flow|, over the sum of counts."""
    inflow = np.bincount(dst, weights=e, minlength=len(c)) if len(dst) else np.zeros(len(c))
    tot = float(c.sum())
    return float(np.abs(c - inflow)[~entry].sum()) / tot if tot else 0.0
