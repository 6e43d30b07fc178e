"""The control-flow graphs layout works on, built from an annotate result.

One :class:`FunctionCFG` per hot function: its nodes are the function's blocks from the
block map (every range -- a function already split into ``foo`` / ``foo.cold`` /
``foo.__part.N`` has all its blocks here, at their real addresses), in map order, so node 0
is the entry.  Node sizes are the map's block sizes (zero-size blocks stay zero: the score
treats a jump over them as a fall-through, as Propeller's does).

Counts come from the result's columns whenever it has execution counts -- LBR estimates
(``has_lbr``), or counts inferred for an IP-only profile (``count_source == "inferred"``,
spec/inference.md) -- never from a second code path:

* an intra-function edge's weight is its taken count plus its fall-through count (edge
  kinds ``branch`` and ``fallthrough``);
* calls (``call`` edges into another function's entry) and returns are kept as
  inter-function edges for function ordering and the inter-function score;
* a node's count is the largest of: its ``block_count``, the sum of its incoming non-return
  edges, the sum of its outgoing non-call edges, its heaviest call and its heaviest return
  (Propeller's ``CFGNode::CalculateFrequency`` plus the LBR range estimate, which also sees
  blocks entered by a fall-through that no branch record covers).

A node is hot when its count is positive, when it has samples, or when it is a block of a
new build that no block of the profiled build matched (``unknown_blocks`` of a carried
profile: its zero is no evidence); the entry is always laid out first.  A function
with IP samples but no execution count at all takes its samples as counts (it has no edges,
so its hot blocks keep their order).  Without
execution counts (an IP-only profile and no inference) there are no edges: a block is hot
when it has IP samples and the plan keeps hot blocks in layout order (no guessing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bbmap.aggregate.lbr import K_BRANCH, K_CALL, K_FALLTHROUGH, K_RETURN
from bbmap.aggregate.result import AnnotateResult

COUNT_SOURCES = ("lbr", "inferred", "none")


@dataclass
class FunctionCFG:
    """One hot function: nodes are its blocks in map order (node 0 = entry)."""

    index: int  # position in ProgramCFG.functions (address order)
    key: int  # FunctionTable key
    name: str  # display name
    raw_name: str  # the symbol name compilers and linkers know (cc / ld files)
    address: int
    blocks: np.ndarray  # global block indexes
    ids: np.ndarray  # BB IDs (what the cluster file lists)
    sizes: np.ndarray  # bytes
    addr: np.ndarray  # original addresses
    ranges: np.ndarray  # range number within the function (0 = entry range)
    counts: np.ndarray  # execution count per node (IP samples without counts)
    samples: np.ndarray  # IP samples per node
    edges: np.ndarray  # (E, 3) int64: src node, dst node, taken + fall-through count
    hot: np.ndarray  # bool per node
    # inferred counts: each edge's interval (E, 2) int64 low, high (-1: unbounded), in
    # the rows of ``edges``; None for LBR counts
    edge_bounds: np.ndarray | None = None
    # inferred counts: the function's edges (E', 3: src, dst, count) as each half of the
    # samples alone infers them (bbmap.inference.replicates); plan.py keeps the compiler's
    # order unless every half also scores the new one higher.  None for LBR counts, or
    # when the result has no replicates (then the compiler's order is kept)
    replicates: list[np.ndarray] | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.blocks)

    @property
    def entry_count(self) -> int:
        return int(self.counts[0]) if len(self.counts) else 0

    @property
    def hot_bytes(self) -> int:
        return int(self.sizes[self.hot].sum())


@dataclass
class ProgramCFG:
    """The hot functions and the calls between them."""

    binary: str
    count_source: str  # "lbr" | "inferred" | "none"
    functions: list[FunctionCFG]
    # inter-function edges: caller fn, caller node, callee fn, callee node, count
    calls: np.ndarray = field(default_factory=lambda: np.zeros((0, 5), np.int64))
    returns: np.ndarray = field(default_factory=lambda: np.zeros((0, 5), np.int64))
    unmapped: list[tuple[str, int]] = field(default_factory=list)  # (raw name, samples)

    @property
    def has_counts(self) -> bool:
        return self.count_source in ("lbr", "inferred")


def count_source(result: AnnotateResult) -> str:
    """Where the result's execution counts come from: ``lbr``, ``inferred`` or ``none``."""
    src = getattr(result, "count_source", None)
    if src in COUNT_SOURCES:
        return src
    return "lbr" if result.has_lbr else "none"


def build_program_cfg(result: AnnotateResult, top: int | None = None) -> ProgramCFG:
    """The CFG of every hot function of ``result`` (see the module docstring), or of the
    hottest ``top`` of them (``AnnotateResult.hot_keys``' order)."""
    src = count_source(result)
    counted = src in ("lbr", "inferred")
    m = result.block_map
    ft = result.functions
    fvs = sorted(result.hot_functions(top), key=lambda fv: (fv.address, fv.key))
    B = m.num_blocks
    node_fn = np.full(B, -1, np.int64)  # global block -> index in `functions` (if laid out)
    node_local = np.zeros(B, np.int64)
    functions: list[FunctionCFG] = []
    unmapped: list[tuple[str, int]] = []
    # each laid-out function's block span, then every per-block column for all of them
    # at once and sliced per function (a dozen array calls per function otherwise: issue
    # 32's plan_layout speed; the same integers either way)
    rbp, frp = m.range_block_ptr, m.func_range_ptr
    spans = []
    for fv in fvs:
        fns = ft.bmfuncs[fv.key]
        if not fns:
            if fv.samples > 0:
                unmapped.append((ft.raw_names[fv.key], fv.samples))
            continue
        f = fns[0]  # one map per name; identical-code-folded copies share it
        lo = int(rbp[frp[f]])
        hi = int(rbp[frp[f + 1]])
        if hi <= lo:
            continue
        spans.append((fv, f, lo, hi))
    if spans:
        los = np.array([lo for _, _, lo, _ in spans], np.int64)
        lens = np.array([hi - lo for _, _, lo, hi in spans], np.int64)
        starts = np.concatenate(([0], np.cumsum(lens)))
        local = np.arange(int(starts[-1]), dtype=np.int64) - np.repeat(starts[:-1], lens)
        every = np.repeat(los, lens) + local
        node_fn[every] = np.repeat(np.arange(len(spans), dtype=np.int64), lens)
        node_local[every] = local
        rng_all = np.asarray(m.block_range(every), dtype=np.int64) - np.repeat(
            frp[[f for _, f, _, _ in spans]].astype(np.int64), lens)
        addr_all = np.asarray(m.block_address(every), dtype=np.int64)
        ids_all = m.block_id[every].astype(np.int64)
        sizes_all = m.block_size[every].astype(np.int64)
        samples_all = result.block_samples[every].astype(np.int64)
        bounds = starts.tolist()
        for idx, (fv, _f, lo, hi) in enumerate(spans):
            a, b = bounds[idx], bounds[idx + 1]
            functions.append(FunctionCFG(
                index=idx, key=fv.key, name=ft.names[fv.key], raw_name=ft.raw_names[fv.key],
                address=int(fv.address), blocks=every[a:b], ids=ids_all[a:b],
                sizes=sizes_all[a:b], addr=addr_all[a:b], ranges=rng_all[a:b],
                counts=np.zeros(hi - lo, np.int64), samples=samples_all[a:b],
                edges=np.zeros((0, 3), np.int64), hot=np.zeros(hi - lo, bool)))
    calls = returns = np.zeros((0, 5), np.int64)
    if counted and len(result.edge_from):
        ef, et = result.edge_from, result.edge_to
        ek, ec = result.edge_kind, result.edge_count
        fa, fb = node_fn[ef], node_fn[et]
        both = (fa >= 0) & (fb >= 0) & (ec > 0)
        intra = both & (fa == fb) & np.isin(ek, (K_BRANCH, K_FALLTHROUGH))
        _attach_intra(functions, fa[intra], node_local[ef[intra]], node_local[et[intra]],
                      ec[intra])
        if result.has_intervals:
            _attach_bounds(functions, fa[intra], node_local[ef[intra]],
                           node_local[et[intra]], result.edge_low[intra],
                           result.edge_high[intra])
            if result.replicates is not None and functions:
                _attach_replicates(functions, node_fn, node_local, result.replicates())
        cs = both & (ek == K_CALL)
        calls = np.stack([fa[cs], node_local[ef[cs]], fb[cs], node_local[et[cs]], ec[cs]],
                         axis=1).astype(np.int64)
        rs = both & (ek == K_RETURN)
        returns = np.stack([fa[rs], node_local[ef[rs]], fb[rs], node_local[et[rs]], ec[rs]],
                           axis=1).astype(np.int64)
    if counted:
        _all_node_counts(functions, result, calls, returns)
    else:
        for fn in functions:
            fn.counts = fn.samples.copy()
            fn.hot = fn.samples > 0
    return ProgramCFG(binary=result.binary, count_source=src, functions=functions,
                      calls=_merge_rows(calls), returns=_merge_rows(returns), unmapped=unmapped)


def _edge_rows(n: int, fn: np.ndarray, a: np.ndarray, b: np.ndarray,
               c: np.ndarray) -> list[np.ndarray]:
    """Per function ``0 .. n-1``, its (src, dst, count) rows: taken and fall-through counts
    of one (src, dst) summed, sorted."""
    rows = _merge_rows(np.stack([fn, a, b, c], axis=1).astype(np.int64))
    bounds = np.searchsorted(rows[:, 0], np.arange(n + 1))
    return [rows[bounds[i]:bounds[i + 1], 1:] for i in range(n)]


def _attach_intra(functions: list[FunctionCFG], fn: np.ndarray, a: np.ndarray, b: np.ndarray,
                  c: np.ndarray) -> None:
    """Sum taken and fall-through counts per (src, dst) and hand each function its rows."""
    if not len(fn):
        return
    for f, rows in zip(functions, _edge_rows(len(functions), fn, a, b, c)):
        f.edges = rows


def _attach_bounds(functions: list[FunctionCFG], fn: np.ndarray, a: np.ndarray,
                   b: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
    """Each function's edge intervals, in the order of its ``edges`` rows (inferred edges
    are one per (src, dst), so the rows sort alike)."""
    rows = np.stack([fn, a, b, low, high], axis=1).astype(np.int64)
    rows = rows[np.lexsort(rows[:, :3].T[::-1])] if len(rows) else rows
    bounds = np.searchsorted(rows[:, 0], np.arange(len(functions) + 1))
    for i, f in enumerate(functions):
        part = rows[bounds[i]:bounds[i + 1]]
        if len(part) == len(f.edges) and np.array_equal(part[:, 1:3], f.edges[:, :2]):
            f.edge_bounds = part[:, 3:5]


def _attach_replicates(functions: list[FunctionCFG], node_fn: np.ndarray,
                       node_local: np.ndarray, reps: list) -> None:
    """Each function's edges as each half of the samples infers them (summed per (src,
    dst) like ``edges``; a function with no count in a half gets no rows there)."""
    if not reps:  # the replicates could not be made (no CFG): none to ask
        return
    for f in functions:
        f.replicates = []
    for r in reps:
        ef, et, ec = r.edge_from, r.edge_to, r.edge_count
        fa, fb = node_fn[ef], node_fn[et]
        keep = (fa >= 0) & (fa == fb) & (ec > 0)
        for f, rows in zip(functions, _edge_rows(len(functions), fa[keep],
                                                 node_local[ef[keep]], node_local[et[keep]],
                                                 ec[keep])):
            f.replicates.append(rows)


def _merge_rows(rows: np.ndarray) -> np.ndarray:
    """Sort rows by all but the last column and add up the last column of equal keys."""
    if not len(rows):
        return rows
    keys = rows[:, :-1]
    order = np.lexsort(keys.T[::-1])
    rows = rows[order]
    new = np.ones(len(rows), bool)
    new[1:] = (rows[1:, :-1] != rows[:-1, :-1]).any(axis=1)
    starts = np.flatnonzero(new)
    out = rows[starts].copy()
    out[:, -1] = np.add.reduceat(rows[:, -1], starts)
    return out


def _by_column(rows: np.ndarray, col: int, n: int):  # noqa: ANN202
    """``f(i)`` -> the rows whose column ``col`` is ``i`` (one sort, then slices)."""
    order = np.argsort(rows[:, col], kind="stable") if len(rows) else np.zeros(0, np.int64)
    srt = rows[order]
    bounds = np.searchsorted(srt[:, col], np.arange(n + 1)) if len(rows) else np.zeros(
        n + 1, np.int64)
    return lambda i: srt[bounds[i]:bounds[i + 1]]


def _all_node_counts(functions: list[FunctionCFG], result: AnnotateResult,
                     calls: np.ndarray, returns: np.ndarray) -> None:
    """:func:`_node_counts` of every function at once, over nodes numbered across all the
    functions (a dozen array calls per function otherwise: issue 32's plan_layout
    speed).  The same numbers: each node's weighted ``bincount`` adds the same rows in
    the same order (a function's edge rows are a slice of one sorted array, its calls
    and returns keep their order), the in- and out-sums of edges and of calls/returns are
    added as two sums as there, and maxima do not depend on order
    (``tests/test_layout_plan.py`` compares the two)."""
    if not functions:
        return
    lens = np.array([fn.num_nodes for fn in functions], np.int64)
    start = np.concatenate(([0], np.cumsum(lens)))
    N = int(start[-1])
    blocks = np.concatenate([fn.blocks for fn in functions])
    cnt = result.block_count[blocks].astype(np.int64)
    samples = np.concatenate([fn.samples for fn in functions])
    ne = np.array([len(fn.edges) for fn in functions], np.int64)
    e = np.concatenate([fn.edges for fn in functions]) if ne.sum() else np.zeros((0, 3),
                                                                                 np.int64)
    base = np.repeat(start[:-1], ne)
    sum_in = np.bincount(base + e[:, 1], weights=e[:, 2], minlength=N)
    sum_out = np.bincount(base + e[:, 0], weights=e[:, 2], minlength=N)
    if len(calls):  # calls into a function's node / returns out of one, summed apart
        sum_in += np.bincount(start[calls[:, 2]] + calls[:, 3], weights=calls[:, 4],
                              minlength=N)
    if len(returns):
        sum_out += np.bincount(start[returns[:, 0]] + returns[:, 1], weights=returns[:, 4],
                               minlength=N)
    heavy = np.zeros(N)  # the heaviest call out of and return into each node
    if len(calls):
        np.maximum.at(heavy, start[calls[:, 0]] + calls[:, 1], calls[:, 4])
    if len(returns):
        np.maximum.at(heavy, start[returns[:, 2]] + returns[:, 3], returns[:, 4])
    counts = np.maximum.reduce([cnt, sum_in.astype(np.int64), sum_out.astype(np.int64),
                                heavy.astype(np.int64)])
    fid = np.repeat(np.arange(len(functions)), lens)
    # sampled, but no execution count reached it: its samples say which blocks are hot
    no_count = np.bincount(fid, weights=counts != 0, minlength=len(functions)) == 0
    sampled = np.bincount(fid, weights=samples != 0, minlength=len(functions)) > 0
    fallback = np.repeat(no_count & sampled, lens)
    counts = np.where(fallback, samples, counts)
    hot = (counts > 0) | (samples > 0)  # a block with samples ran: never .cold
    if result.unknown_blocks is not None:
        # a block of a new build no block of the profiled one matched: its zero is no
        # evidence, so it is not known to be cold (spec/stale.md, "Unknown blocks")
        hot |= result.unknown_blocks[np.concatenate([f.blocks for f in functions])]
    bounds = start.tolist()
    for i, fn in enumerate(functions):
        a, b = bounds[i], bounds[i + 1]
        fn.counts = counts[a:b]
        fn.hot = hot[a:b]


def _node_counts(fn: FunctionCFG, result: AnnotateResult, counted: bool, ci: np.ndarray,
                 co: np.ndarray, ro: np.ndarray, ri: np.ndarray) -> None:
    """``ci``/``co``: calls into / out of ``fn``; ``ro``/``ri``: returns out of / into it."""
    n = fn.num_nodes
    if not counted:
        fn.counts = fn.samples.copy()
        fn.hot = fn.samples > 0
        return
    e = fn.edges
    cnt = result.block_count[fn.blocks].astype(np.int64)
    sum_in = np.bincount(e[:, 1], weights=e[:, 2], minlength=n) if len(e) else np.zeros(n)
    sum_out = np.bincount(e[:, 0], weights=e[:, 2], minlength=n) if len(e) else np.zeros(n)
    if len(ci):
        sum_in += np.bincount(ci[:, 3], weights=ci[:, 4], minlength=n)
    if len(ro):
        sum_out += np.bincount(ro[:, 1], weights=ro[:, 4], minlength=n)
    heavy = np.zeros(n)  # the heaviest call out of and return into each node
    for rows, col in ((co, 1), (ri, 3)):
        if len(rows):
            np.maximum.at(heavy, rows[:, col], rows[:, 4])
    fn.counts = np.maximum.reduce([cnt, sum_in.astype(np.int64), sum_out.astype(np.int64),
                                   heavy.astype(np.int64)])
    if not fn.counts.any() and fn.samples.any():
        # sampled, but no execution count reached it (no LBR range covered it, or the
        # inference left it out): its samples say which blocks are hot, as without counts
        fn.counts = fn.samples.copy()
    # a block with samples ran: it is never left to the .cold part, whatever its count
    fn.hot = (fn.counts > 0) | (fn.samples > 0)
