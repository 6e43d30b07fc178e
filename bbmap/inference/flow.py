"""Profile inference: block and edge counts that conserve flow, from noisy block weights.

A minimum-cost circulation in the spirit of profi (He, Mestre, Pupyrev, Wang, Yu, "Profile
Inference Revisited", POPL 2022; LLVM ``SampleProfileInference.cpp``, BOLT
``StaleProfileMatching.cpp``).  Arrays in, arrays out: no ELF, no perf.data, no CLI.

Every function is one component of a single network (so one solver call covers every hot
function of a binary).  Each block ``b`` becomes two nodes ``b.in -> b.out``; between them

* an arc of capacity ``w_b`` (the observed weight) and cost ``-COST_BLOCK_DEC``: flow up to
  the weight earns back what lowering the count would cost;
* an arc of unbounded capacity and cost ``COST_BLOCK_INC`` (``COST_BLOCK_ZERO_INC`` for a
  block observed with weight 0, ``COST_BLOCK_UNKNOWN_INC`` for a block without a weight,
  ``COST_BLOCK_ENTRY_INC`` at entries).

Up to a constant this charges ``DEC * max(0, w - f) + INC * max(0, f - w)`` per block, the
objective of profi's S1/T1 construction, but as a plain min-cost circulation that any
solver takes.  A CFG edge ``u -> v`` is an arc ``u.out -> v.in`` costing
``COST_JUMP_UNKNOWN_FT_INC`` when ``v`` is ``u``'s fall-through and
``COST_JUMP_UNKNOWN_INC`` otherwise (edges with an observed weight, from sparse LBR,
get the block-style pair of arcs with ``COST_JUMP_INC``/``COST_JUMP_DEC``).  Each component
has a source and a sink: ``S -> entry.in`` (entries: the function's first block, and EH
landing pads at ``COST_ENTRY_EXTRA`` per unit), ``exit.out -> T`` for blocks flow may leave
(returns, tail calls, no-return calls, unknown indirect jumps, and blocks from which no
exit is reachable), and ``T -> S`` closes the circulation.

Evidence floors: a block with samples ran, so its count has a lower bound ``floor_b`` > 0
(the low end of its interval, :mod:`bbmap.inference.intervals`).  The first ``floor_b``
units through ``b`` go over an arc of cost ``-floor_cost`` (:func:`floor_costs`), more
than any path of its function from the source to the sink costs, so every optimum meets
every floor that a path allows; a sampled block that no entry reaches gets its own way
in (``side_entry``) so that one does.  Without floors a hot loop could carry its flow
round and round with the entry at 0, and an under-sampled block could be left at 0
beside hundreds of samples.

Evidence ceilings: a block's samples also bound its count from above (the high end of its
interval: a block with no samples and two instructions ran rarely).  Units above
``ceiling_b`` go over a dearer raise arc (:func:`ceiling_costs` more per unit), more than any
cycle's rewards pay.  Without ceilings a loop whose head is over-weighted (a cache-missing
load stalls the timer samples onto it) carries flow round its unsampled latch until the
head's weight is met: SQLite's ``sqlite3BtreeTableMoveto`` scan loop, which never
iterates, was counted 4.8 M times from its 5,115-sample compare.

Parameters (per unit of flow).  Block costs are LLVM's sample-PGO defaults
(``sample-profile-profi-cost-block-inc`` 10, ``-dec`` 20, ``-entry-inc`` 40, ``-entry-dec``
10, ``-zero-inc`` 11); unknown blocks cost 1 instead of 0 (BOLT's
``stale-matching-cost-block-unknown-inc``) so that no cycle is free for an LP solver.
Jump costs follow BOLT's idea that on a laid-out binary the fall-through is the likely
successor (BOLT: ``-jump-unknown-inc`` 140 vs ``-jump-unknown-ft-inc`` 3 at its block cost
150); at LLVM's block scale the values measured best on the corpus (bench_inference.py,
spec/inference.md) are 5 and 1.

Precise instruction samples are unbiased Poisson draws, so each block's observation is as
trustworthy as its samples make it: the precise model scales a block's raise and lower
costs by its precision (``FlowProblem.cost_scale``, from
:func:`bbmap.inference.weights.precision_cost_scale`) and raises at 15 instead of 10
(``FlowProblem.block_inc``: LLVM's 10 against 20 favours raising a count, a bias that
suits time samples, which under-count some blocks, but not unbiased ones).

BOLT's whole set (block inc = dec = 150) was measured too: with time-based samples it
lowers over-sampled blocks as readily as it raises under-sampled ones, and was 2-3x worse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bbmap.inference.solvers import INF_CAPACITY

if TYPE_CHECKING:
    from bbmap.inference.components import Split
    from bbmap.inference.flow_cache import FlowCache

# ---- costs per unit of flow (see the module docstring for their sources)
COST_BLOCK_INC = 10  # LLVM sample-profile-profi-cost-block-inc
COST_BLOCK_DEC = 20  # LLVM sample-profile-profi-cost-block-dec
COST_BLOCK_ZERO_INC = 11  # LLVM sample-profile-profi-cost-block-zero-inc
COST_BLOCK_ENTRY_INC = 40  # LLVM sample-profile-profi-cost-block-entry-inc
COST_BLOCK_ENTRY_DEC = 10  # LLVM sample-profile-profi-cost-block-entry-dec
COST_BLOCK_UNKNOWN_INC = 1  # BOLT stale-matching-cost-block-unknown-inc (LLVM: 0)
COST_JUMP_INC = 10  # edges with an observed weight (sparse LBR): like blocks
COST_JUMP_DEC = 20
COST_JUMP_UNKNOWN_INC = 5  # taken jump; measured (BOLT's ratio idea, 140 vs 3 at scale 150)
COST_JUMP_UNKNOWN_FT_INC = 1  # fall-through; measured
COST_ENTRY_EXTRA = 10_000  # entering at an EH landing pad instead of the entry block

SOLVERS = ("ortools", "builtin", "scipy")


@dataclass
class FlowProblem:
    """Blocks and edges of any number of functions (components), local indexes.

    Blocks of one component are contiguous (``comp`` is non-decreasing).  Weights are
    integers (the caller scales them); ``known`` False means "no observation" (e.g. an
    empty block), which profi treats differently from an observed zero.
    """

    comp: np.ndarray  # i8 per block
    weight: np.ndarray  # i8 per block
    known: np.ndarray  # bool per block
    entry: np.ndarray  # bool per block: the function's entry block
    side_entry: np.ndarray  # bool per block: other ways in (EH landing pads)
    exit: np.ndarray  # bool per block: flow may leave here
    edge_src: np.ndarray  # i8 per edge (block index)
    edge_dst: np.ndarray
    edge_ft: np.ndarray  # bool: dst is src's fall-through
    edge_weight: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    edge_known: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    floor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # i8 per
    # block: the count the samples prove (0: none)
    # i8 per block, >= 1: multiplies the block's raise and lower costs (how much its own
    # observation is trusted; None: all alike).  The precise model sets it from each
    # block's sampling precision (weights.precision_cost_scale).
    cost_scale: np.ndarray | None = None
    # i8 per block: the count its samples allow at most (the high end of its interval;
    # -1: none).  Units above it cost ceiling_costs() more each.
    ceiling: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    block_inc: int = COST_BLOCK_INC  # the raise cost of an observed block (see above);
    # an observed zero costs as much more as COST_BLOCK_ZERO_INC is above COST_BLOCK_INC

    def __post_init__(self) -> None:
        if len(self.floor) != len(self.comp):
            self.floor = np.zeros(len(self.comp), np.int64)
        if len(self.ceiling) != len(self.comp):
            self.ceiling = np.full(len(self.comp), -1, np.int64)
        E = len(self.edge_src)
        if len(self.edge_weight) != E:
            self.edge_weight = np.zeros(E, np.int64)
        if len(self.edge_known) != E:
            self.edge_known = np.zeros(E, bool)

    @property
    def num_blocks(self) -> int:
        return len(self.comp)

    @property
    def num_components(self) -> int:
        return int(self.comp[-1]) + 1 if len(self.comp) else 0


@dataclass
class FlowResult:
    block_flow: np.ndarray  # i8 per block
    edge_flow: np.ndarray  # i8 per edge
    solver: str
    cost: int  # objective value of the network (with the block-reward constants)
    arcs: int
    nodes: int


@dataclass
class Network:
    """The circulation: arc columns plus where each block/edge sits in them."""

    tail: np.ndarray
    head: np.ndarray
    cap: np.ndarray
    cost: np.ndarray
    nodes: int
    edge_arc: np.ndarray  # the unbounded arc of each CFG edge
    reward_edge: np.ndarray  # edges with an observed weight ...
    reward_arc: np.ndarray  # ... and their reward arcs
    block_in: np.ndarray  # node of b.in
    node_comp: np.ndarray | None = None  # component (function) of each node
    # blocks with a reward arc (observed weight > 0): arcs B .. B + len - 1, in this order
    reward_block: np.ndarray | None = None
    # blocks with a floor (samples prove it ran): the arcs right after the reward arcs
    floor_block: np.ndarray | None = None
    # blocks with a ceiling: their arcs beyond it, right after the floor arcs
    ceiling_block: np.ndarray | None = None


def floor_costs(p: FlowProblem) -> np.ndarray:
    """The reward per unit of a floor, per component: twice the dearest simple path of
    that component (every block raised at the entry rate, every edge a taken jump,
    entered at a side entry), so meeting a floor always pays.  Per component, so that a
    function's network names nothing outside it (:mod:`bbmap.inference.components`)."""
    if not len(p.comp):
        return np.zeros(0, np.int64)
    comp = p.comp.astype(np.int64)
    size = np.bincount(comp).astype(np.int64)
    # the dearest raise of a block in the component: its cost scale times the entry rate
    k = np.ones(len(size), np.int64)
    if p.cost_scale is not None and len(p.cost_scale):
        np.maximum.at(k, comp, p.cost_scale.astype(np.int64))
    zero_inc = p.block_inc + COST_BLOCK_ZERO_INC - COST_BLOCK_INC
    per_block = k * max(COST_BLOCK_ENTRY_INC, zero_inc) + \
        max(COST_JUMP_UNKNOWN_INC, COST_JUMP_UNKNOWN_FT_INC, COST_JUMP_INC)
    return 2 * (COST_ENTRY_EXTRA + size * per_block) + 1


def ceiling_costs(floor_reward: np.ndarray) -> np.ndarray:
    """The extra cost per unit above a ceiling, per component, from its floor reward
    (:func:`floor_costs`): a quarter of it, so that no cycle's rewards pay for it (a cycle
    earns at most its blocks' lowering rewards, less than half of the floor reward) while
    a floor, which the samples prove as surely, is still met when the two disagree."""
    return floor_reward // 4


def build_network(p: FlowProblem) -> Network:
    """Arc columns for :class:`FlowProblem` (vectorized; see the module docstring).

    The arc groups, in this order (the order is part of the network: solvers that pick
    among several optima pick by it): blocks' raise arcs (unbounded, or up to a ceiling),
    blocks' reward arcs, blocks' floor arcs, blocks' arcs beyond their ceiling, CFG
    edges, edges' reward arcs, entries, side entries, exits, ``T -> S``.  Each column is
    written group by group into one preallocated array (no concatenation, no dtype round
    trip)."""
    B, E, C = p.num_blocks, len(p.edge_src), p.num_components
    w = np.maximum(p.weight.astype(np.int64), 0)
    inc = np.full(B, p.block_inc, np.int64)
    inc[p.known & (w == 0)] = p.block_inc + COST_BLOCK_ZERO_INC - COST_BLOCK_INC
    inc[p.entry & p.known] = COST_BLOCK_ENTRY_INC
    inc[~p.known] = COST_BLOCK_UNKNOWN_INC
    if p.cost_scale is not None:
        inc[p.known] *= p.cost_scale[p.known]
    fl_all = np.maximum(p.floor.astype(np.int64), 0)
    flo = np.flatnonzero(fl_all > 0)
    # a ceiling caps the raise arc; units beyond it go over a dearer arc
    ce = p.ceiling.astype(np.int64)
    cei = np.flatnonzero(p.known & (ce >= 0))
    room = np.maximum(ce[cei] - np.maximum(w[cei], fl_all[cei]), 0)
    w = np.maximum(w - fl_all, 0)  # the floor's units are rewarded by the floor arc
    rew = np.flatnonzero(p.known & (w > 0))

    ek = p.edge_known & (p.edge_weight > 0)
    ekn = np.flatnonzero(ek)
    ent = np.flatnonzero(p.entry)
    side = np.flatnonzero(p.side_entry & ~p.entry)
    ex = np.flatnonzero(p.exit)
    comp = p.comp.astype(np.int64, copy=False)
    src = p.edge_src.astype(np.int64, copy=False)
    dst = p.edge_dst.astype(np.int64, copy=False)
    sizes = [B, len(rew), len(flo), len(cei), E, len(ekn), len(ent), len(side), len(ex), C]
    at = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    M = at[-1]
    tail = np.empty(M, np.int64)
    head = np.empty(M, np.int64)
    cap = np.full(M, INF_CAPACITY, np.int64)
    cost = np.zeros(M, np.int64)
    # nodes: b.in = 2b, b.out = 2b + 1; component c's S = 2B + 2c, T = S + 1
    g = iter(zip(at[:-1], at[1:]))
    lo, hi = next(g)  # block: unbounded raise
    np.multiply(np.arange(B, dtype=np.int64), 2, out=tail[lo:hi])
    np.add(tail[lo:hi], 1, out=head[lo:hi])
    cost[lo:hi] = inc
    lo, hi = next(g)  # block rewards (observed weights)
    np.multiply(rew, 2, out=tail[lo:hi])
    np.add(tail[lo:hi], 1, out=head[lo:hi])
    cap[lo:hi] = w[rew]
    cost[lo:hi] = -np.where(p.entry[rew], COST_BLOCK_ENTRY_DEC, COST_BLOCK_DEC)
    if p.cost_scale is not None:
        cost[lo:hi] *= p.cost_scale[rew]
    lo, hi = next(g)  # block floors (samples prove the block ran)
    np.multiply(flo, 2, out=tail[lo:hi])
    np.add(tail[lo:hi], 1, out=head[lo:hi])
    cap[lo:hi] = fl_all[flo]
    floor_reward = floor_costs(p)  # per component, for the floors and the ceilings
    cost[lo:hi] = -floor_reward[comp[flo]]
    cap[cei] = room  # the raise arcs of blocks with a ceiling: up to it
    lo, hi = next(g)  # block units beyond their ceiling
    np.multiply(cei, 2, out=tail[lo:hi])
    np.add(tail[lo:hi], 1, out=head[lo:hi])
    cost[lo:hi] = inc[cei] + ceiling_costs(floor_reward)[comp[cei]]
    lo, hi = next(g)  # CFG edges
    np.multiply(src, 2, out=tail[lo:hi])
    tail[lo:hi] += 1
    np.multiply(dst, 2, out=head[lo:hi])
    ecost = cost[lo:hi]
    ecost[:] = np.where(p.edge_ft, COST_JUMP_UNKNOWN_FT_INC, COST_JUMP_UNKNOWN_INC)
    ecost[p.edge_known] = COST_JUMP_INC
    lo, hi = next(g)  # edge rewards (observed edge weights)
    np.multiply(src[ekn], 2, out=tail[lo:hi])
    tail[lo:hi] += 1
    np.multiply(dst[ekn], 2, out=head[lo:hi])
    cap[lo:hi] = p.edge_weight[ekn]
    cost[lo:hi] = -COST_JUMP_DEC
    lo, hi = next(g)  # S -> entry.in
    tail[lo:hi] = 2 * B + 2 * comp[ent]
    np.multiply(ent, 2, out=head[lo:hi])
    lo, hi = next(g)  # S -> side entry.in
    tail[lo:hi] = 2 * B + 2 * comp[side]
    np.multiply(side, 2, out=head[lo:hi])
    cost[lo:hi] = COST_ENTRY_EXTRA
    lo, hi = next(g)  # exit.out -> T
    np.multiply(ex, 2, out=tail[lo:hi])
    tail[lo:hi] += 1
    head[lo:hi] = 2 * B + 2 * comp[ex] + 1
    lo, hi = next(g)  # T -> S
    np.multiply(np.arange(C, dtype=np.int64), 2, out=tail[lo:hi])
    tail[lo:hi] += 2 * B + 1
    np.subtract(tail[lo:hi], 1, out=head[lo:hi])
    first_edge = B + len(rew) + len(flo) + len(cei)
    return Network(tail=tail, head=head, cap=cap, cost=cost, nodes=2 * B + 2 * C,
                   edge_arc=first_edge + np.arange(E, dtype=np.int64), reward_edge=ekn,
                   reward_arc=first_edge + E + np.arange(len(ekn), dtype=np.int64),
                   block_in=2 * np.arange(B, dtype=np.int64),
                   node_comp=np.concatenate([np.repeat(comp, 2),
                                             np.repeat(np.arange(C, dtype=np.int64), 2)]),
                   reward_block=rew, floor_block=flo, ceiling_block=cei)


def infer(p: FlowProblem, solver: str = "auto", *, workers: int | None = None,
          cache: FlowCache | None = None) -> FlowResult:
    """Solve ``p``: per-block and per-edge flows (integers, same scale as the weights).

    Each function (component) is solved alone (:mod:`bbmap.inference.components`), so its
    flow depends on it alone.  ``solver``: ``ortools`` (OR-Tools ``SimpleMinCostFlow``),
    ``builtin`` (successive shortest paths in Python, always available), ``scipy`` (HiGHS
    on the LP form), or ``auto`` (OR-Tools when installed, else the built-in solver).
    ``workers``: processes sharing the functions (default ``$BBMAP_INFERENCE_WORKERS``,
    else 1; the flows are the same for any number).
    ``cache``: solved functions by content (:class:`~bbmap.inference.flow_cache.FlowCache`):
    a function met before is not solved again.
    """
    from bbmap.inference import components, solvers

    net = build_network(p)
    name = solvers.pick(solver)
    split = components.split_network(net)
    arcs, nodes, arc_cost = len(net.tail), net.nodes, net.cost
    edge_arc, reward_edge, reward_arc = net.edge_arc, net.reward_edge, net.reward_arc
    reward_block, floor_block, ceiling_block = \
        net.reward_block, net.floor_block, net.ceiling_block
    # the split holds the arcs now: the whole network's tail, head and capacity columns
    # and its node table (~100 MB at 3.4 M arcs) go before the solve and its cache
    del net
    flow = np.zeros(arcs, np.int64)
    flow[split.arc] = _solve(split, name, components.workers_from_env(workers), cache)
    del split
    cost = int((flow * arc_cost).sum())
    ef = flow[edge_arc].astype(np.int64)
    ef[reward_edge] += flow[reward_arc]
    # a block's count is what passes b.in -> b.out: everything that leaves b.in, i.e. its
    # raise arc (arc b) and its reward arc if it has one (arcs B.., see build_network)
    B = p.num_blocks
    bf = flow[:B].astype(np.int64)
    R = len(reward_block)
    bf[reward_block] += flow[B:B + R]
    at = B + R + len(floor_block)
    bf[floor_block] += flow[B + R:at]
    bf[ceiling_block] += flow[at:at + len(ceiling_block)]
    return FlowResult(block_flow=bf, edge_flow=ef, solver=name, cost=cost,
                      arcs=arcs, nodes=nodes)


def _solve(split: Split, name: str, nworkers: int, cache: FlowCache | None) -> np.ndarray:
    """Every function's flow, in the split's arc order: from the cache where it has the
    function, solved otherwise (and stored)."""
    from bbmap.inference import components

    if cache is None:
        return components.solve_functions(split, name, nworkers)
    keys = cache.keys(split, name)
    got, hit = cache.lookup(keys, split)
    solved = components.solve_functions(split, name, nworkers, skip=hit)
    cached = hit[np.repeat(np.arange(split.count), np.diff(split.ptr))]
    solved[cached] = got[cached]
    cache.store(keys, split, solved, hit)
    return solved
