"""Even flow through unobserved subgraphs: neither arm of an unsampled branch is left at 0.

A min-cost flow is free to route a function's flow through either arm of a branch whose
arms carry no evidence (equal cost), and it puts all of it through one; the other arm is
counted 0 and the layout sends it to ``.cold``, although it ran as often.  With a sparse
precise profile (zstd, one sample per ~15k instructions) blocks that ran ~1,000 times
each were placed cold this way (spec/inference.md, "The e2e gap").  LLVM's profi
(``SampleProfileInference.cpp``, the rebalancing of unknown subgraphs) cures it with a
post-pass on the solved flow; this is that idea, adapted:

* "unknown" blocks are those with no samples and no floor (nothing proves or bounds their
  count from below), not entries;
* every block ``src`` with flow and two or more successors (sampled or not, so that a
  branch inside a longer unsampled stretch counts too) opens a subgraph: the unknown
  blocks it reaches through unknown blocks.  It is rebalanced only when it is acyclic,
  does not hold ``src`` (a loop's body is left alone), and all its flow ends in one place:
  exactly one sampled block ``dst`` other than ``src`` with no unknown block leaving the
  function, or else the function's exit (no sampled block reached; the unknown blocks
  that leave end the function, e.g. returns);
* then ``src``'s outflow is split evenly among its out-edges and, in topological order,
  each unknown block's inflow (from inside and outside the subgraph) evenly among its own.

Flow stays conserved at every block: each unknown block passes on exactly its inflow, all
of it reaches ``dst`` (whose inflow total is unchanged) or leaves the function, and no
block outside the subgraph changes.  A subgraph whose new counts would exceed an unknown
block's ceiling is left as solved.  Integer splits give the remainder to the first edges
in edge order, and a function's result depends on its own blocks alone, so outputs stay
byte-identical.

Ending the subgraph at ``src``'s immediate post-dominator instead (so that arms rejoining
at an unsampled block count too) was measured and not kept (spec/inference.md).
"""

from __future__ import annotations

import numpy as np


def _csr(n: int, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edge indexes grouped by ``key`` (stable: edge order within a group)."""
    order = np.argsort(key, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(key, minlength=n), out=ptr[1:])
    return ptr, order


def rebalance_unknown(block_flow: np.ndarray, edge_flow: np.ndarray, src: np.ndarray,
                      dst: np.ndarray, unknown: np.ndarray, exit_: np.ndarray,
                      ceiling: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """New (block flow, edge flow, subgraphs rebalanced) for local blocks/edges.

    ``unknown``: blocks without evidence (see the module docstring); ``exit_``: blocks
    flow may leave from; ``ceiling``: the most a block's count may be (-1: no bound)."""
    bf = np.asarray(block_flow, np.int64).copy()
    ef = np.asarray(edge_flow, np.int64).copy()
    B = len(bf)
    if not len(src) or not unknown.any():
        return bf, ef, 0
    optr, oidx = _csr(B, src)
    iptr, iidx = _csr(B, dst)
    succ = [dst[oidx[optr[b]:optr[b + 1]]] for b in range(B)]
    done = 0
    for s in range(B):
        if bf[s] <= 0 or optr[s + 1] - optr[s] < 2:
            continue
        nodes = _subgraph(s, succ, unknown, exit_)
        if nodes is None:
            continue
        topo = _topo(nodes, succ, unknown)
        if topo is None:
            continue
        nbf, nef = bf.copy(), ef.copy()
        out_s = oidx[optr[s]:optr[s + 1]]
        _split(int(nef[out_s].sum()), out_s, nef)
        for u in topo:
            nbf[u] = int(nef[iidx[iptr[u]:iptr[u + 1]]].sum())
            _split(nbf[u], oidx[optr[u]:optr[u + 1]], nef)
        cap = ceiling[topo]
        if np.any((cap >= 0) & (nbf[topo] > cap)):
            continue
        bf, ef = nbf, nef
        done += 1
    return bf, ef, done


def _subgraph(s: int, succ: list[np.ndarray], unknown: np.ndarray,
              exit_: np.ndarray) -> list[int] | None:
    """The unknown blocks reachable from ``s`` through unknown blocks, when all their flow
    ends in one place: one known block other than ``s`` (and no unknown block leaves the
    function), or the function's exit (no known block, and the unknown blocks that leave
    have no successors, so they pass on all they get); else None."""
    seen: set[int] = set()
    known_dst: set[int] = set()
    stack = [int(v) for v in succ[s]]
    nodes: list[int] = []
    leaves = False
    while stack:
        v = stack.pop()
        if not unknown[v]:
            known_dst.add(v)
            if len(known_dst) > 1 or v == s:
                return None
            continue
        if v in seen:
            continue
        if v == s:  # a loop back to an unknown start
            return None
        if exit_[v]:
            if len(succ[v]):
                return None
            leaves = True
        seen.add(v)
        nodes.append(v)
        stack.extend(int(x) for x in succ[v])
    if not nodes or len(known_dst) + leaves != 1:
        return None
    return nodes


def _topo(nodes: list[int], succ: list[np.ndarray], unknown: np.ndarray) -> list[int] | None:
    """``nodes`` in topological order (ties by block index), or None on a cycle."""
    inside = set(nodes)
    indeg = dict.fromkeys(nodes, 0)
    for u in nodes:
        for v in succ[u]:
            if int(v) in inside:
                indeg[int(v)] += 1
    ready = sorted(u for u in nodes if indeg[u] == 0)
    out: list[int] = []
    while ready:
        u = ready.pop(0)
        out.append(u)
        for v in succ[u]:
            v = int(v)
            if v in inside:
                indeg[v] -= 1
                if indeg[v] == 0:
                    ready.append(v)
                    ready.sort()
    return out if len(out) == len(nodes) else None


def _split(total: int, edges: np.ndarray, ef: np.ndarray) -> None:
    """Write ``total`` over ``edges`` evenly; the remainder goes to the first ones."""
    k = len(edges)
    if not k:
        return
    q, r = divmod(int(total), k)
    ef[edges] = q
    ef[edges[:r]] += 1
