"""Cache-directed sort (CDSort): LLVM's function-ordering algorithm, on arrays.

After ``llvm/lib/Transforms/Utils/CodeLayout.cpp`` (``CDSortImpl``,
``computeCacheDirectedLayout``): functions start as one chain each; a priority set of
chain pairs ordered by merge gain (ties: smaller source chain id, then destination id) is
drained, merging the best pair as ``X Y`` or ``Y X`` and re-scoring the pairs of the new
chain, while the gain stays above ``EPS``.  The gain of a merge is

* distance locality: sum over calls between the two chains of
  ``count * dist^-distance_power`` (``dist`` from the call site -- the caller's address plus
  the call's offset -- to the callee; 0.1 for 0), minus the same with every distance set
  to the total hot size;
* plus ``frequency_scale`` times the change in expected cache misses, a chain of density
  ``d`` missing with probability ``(1 - d * cache_size / total_samples) ^ cache_entries``;
* divided by the smaller chain's size when positive (so short chains merge first).

Chains are finally ordered by density (count per byte), densest first, ties by id; a
chain's id is the index of its first function.  The defaults are ``CDSortConfig``'s.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EPS = 1e-8  # CodeLayout.cpp


@dataclass(frozen=True)
class CDSortConfig:
    """llvm/include/llvm/Transforms/Utils/CodeLayout.h ``CDSortConfig`` defaults."""

    cache_entries: int = 16
    cache_size: int = 2048
    max_chain_size: int = 128  # functions per chain
    distance_power: float = 0.25
    frequency_scale: float = 0.25


class _FnChain:
    __slots__ = ("cid", "nodes", "size", "count", "edges")

    def __init__(self, cid: int, size: int, count: float) -> None:
        self.cid = cid
        self.nodes = [cid]
        self.size = size
        self.count = count
        self.edges: dict[int, _ChainPair] = {}  # other chain's slot -> edge

    def density(self) -> float:
        return self.count / self.size


class _ChainPair:
    __slots__ = ("src", "dst", "jumps", "gain", "kind", "ver")

    def __init__(self, src: int, dst: int) -> None:
        self.src, self.dst = src, dst  # chain slots, as the first jump ran
        self.jumps: list[int] = []
        self.gain = -1.0
        self.kind = 0  # 0: src dst, 1: dst src
        self.ver = 0


def cdsort_order(sizes: Sequence[int], counts: Sequence[float], calls: Sequence | np.ndarray,
                 offsets: Sequence[int] | None = None,
                 config: CDSortConfig = CDSortConfig()) -> list[int]:
    """Order functions by CDSort.  ``calls``: (caller, callee, count) rows; ``offsets``:
    each call site's byte offset in its caller (default 0)."""
    n = len(sizes)
    size = [max(int(s), 1) for s in sizes]
    count = [float(c) for c in counts]
    js, jd, jc, jo = _profiled_calls(calls, offsets)
    total_samples = sum(count)
    cin = [0.0] * n
    cout = [0.0] * n
    for a, b, x in zip(js, jd, jc):
        cout[a] += x
        cin[b] += x
    count = [max(count[i], cin[i], cout[i]) for i in range(n)]
    total_size = sum(size[i] for i in range(n) if float(counts[i]) > 0)
    chains = _chain_graph(size, count, js, jd)
    slot_of = list(range(n))  # function -> its chain's slot (the slot never changes)
    hot = [i for i in range(n) if count[i] > 0]

    def miss(density: float) -> float:
        page = density * config.cache_size
        if page >= total_samples:
            return 0.0
        return (1.0 - page / total_samples) ** config.cache_entries

    def dist_score(a: int, b: int, x: float) -> float:
        d = abs(b - a)
        return x * (0.1 if d == 0 else float(d)) ** -config.distance_power

    def gain_of(e: _ChainPair) -> tuple[float, int]:
        x, y = chains[e.src], chains[e.dst]
        cur = x.count * miss(x.density()) + y.count * miss(y.density())
        mc, ms = x.count + y.count, x.size + y.size
        freq_gain = cur - mc * miss(mc / ms)
        best, kind = -1.0, 0
        for k in (0, 1):
            order = x.nodes + y.nodes if k == 0 else y.nodes + x.nodes
            addr, a = {}, 0
            for v in order:
                addr[v] = a
                a += size[v]
            new = cur_d = 0.0
            for j in e.jumps:
                new += dist_score(addr[js[j]] + jo[j], addr[jd[j]], jc[j])
                cur_d += dist_score(0, total_size, jc[j])
            g = (new - cur_d) + config.frequency_scale * freq_gain
            if g >= 0.0:
                g /= min(x.size, y.size)
            if abs(best - g) < EPS:
                if (k == 0 and x.cid < y.cid) or (k == 1 and x.cid > y.cid):
                    best, kind = g, k
            elif g > best + EPS:
                best, kind = g, k
        return best, kind

    heap: list = []
    queued: set[int] = set()  # ids of edges in the queue

    def insert(e: _ChainPair) -> None:
        e.gain, e.kind = gain_of(e)
        if e.gain > EPS:
            e.ver += 1
            heapq.heappush(heap, (-e.gain, chains[e.src].cid, chains[e.dst].cid, e.ver,
                                  id(e), e))
            queued.add(id(e))

    def remove(e: _ChainPair) -> None:
        if id(e) in queued:
            queued.discard(id(e))
            e.ver += 1  # its heap entry is stale now

    done: set[int] = set()
    for a in hot:
        for e in chains[a].edges.values():
            if e.src == e.dst or id(e) in done:
                continue
            done.add(id(e))
            insert(e)
    while heap:
        _, _, _, ver, _, e = heapq.heappop(heap)
        if ver != e.ver or id(e) not in queued:
            continue
        queued.discard(id(e))
        if e.src == e.dst or e.gain <= EPS:
            continue
        x, y = chains[e.src], chains[e.dst]
        if len(x.nodes) + len(y.nodes) > config.max_chain_size:
            continue
        for f in list(x.edges.values()) + list(y.edges.values()):
            remove(f)
        _join(chains, e, slot_of)
        for f in list(x.edges.values()):
            if f.src == f.dst:
                continue
            insert(f)
    order = sorted(chains.values(), key=lambda ch: (-(sum(count[v] for v in ch.nodes)
                                                      / sum(size[v] for v in ch.nodes)),
                                                    ch.cid))
    return [v for ch in order for v in ch.nodes]


def _profiled_calls(calls: Sequence | np.ndarray, offsets: Sequence[int] | None
                    ) -> tuple[list[int], list[int], list[float], list[int]]:
    """The calls that count (caller, callee, count, call-site offset): no recursion, no
    call without samples."""
    c = np.asarray(calls, dtype=np.float64).reshape(-1, 3) if len(calls) else np.zeros((0, 3))
    off = [0] * len(c) if offsets is None else [int(o) for o in offsets]
    js, jd, jc, jo = [], [], [], []
    for i, (a, b, x) in enumerate(c.tolist()):
        a, b = int(a), int(b)
        if a == b or x <= 0:
            continue  # recursion; no profile
        js.append(a)
        jd.append(b)
        jc.append(x)
        jo.append(off[i])
    return js, jd, jc, jo


def _chain_graph(size: list[int], count: list[float], js: list[int], jd: list[int]
                 ) -> dict[int, _FnChain]:
    """One chain per function, and one edge per pair of functions that call each other
    (its jumps: the calls), created in the order LLVM creates them (by caller, then its
    calls)."""
    n = len(size)
    chains = {i: _FnChain(i, size[i], count[i]) for i in range(n)}
    by_src: list[list[int]] = [[] for _ in range(n)]
    for j, a in enumerate(js):
        by_src[a].append(j)
    for a in range(n):
        for j in by_src[a]:
            b = jd[j]
            e = chains[a].edges.get(b)
            if e is None:
                e = _ChainPair(a, b)
                chains[a].edges[b] = e
                chains[b].edges[a] = e
            e.jumps.append(j)
    return chains


def _join(chains: dict[int, _FnChain], e: _ChainPair, slot_of: list[int]) -> None:
    """Merge ``e``'s destination chain into its source (in ``e.kind``'s order) and move
    the destination's edges over: one edge per pair of chains, jumps joined."""
    into, frm = e.src, e.dst
    x, y = chains[into], chains[frm]
    x.nodes = x.nodes + y.nodes if e.kind == 0 else y.nodes + x.nodes
    x.count += y.count
    x.size += y.size
    x.cid = x.nodes[0]
    for v in y.nodes:
        slot_of[v] = into
    for other, f in list(y.edges.items()):
        target = into if other == frm else other
        cur = x.edges.get(target)
        if cur is None:
            if f.src == frm:
                f.src = into
            if f.dst == frm:
                f.dst = into
            x.edges[target] = f
            if other not in (into, frm):
                chains[other].edges[into] = f
        elif cur is not f:
            cur.jumps.extend(f.jumps)
            f.jumps = []
        if other != frm:
            chains[other].edges.pop(frm, None)
    del chains[frm]
