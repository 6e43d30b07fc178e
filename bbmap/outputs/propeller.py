"""Layout outputs: a Propeller cluster file and an lld symbol-ordering file.

Clustering (spec/propeller-outputs.md) is deliberately simple and deterministic:

* a block is *hot* if its measured count is positive (LBR execution estimate when the
  profile has branch stacks, else its IP sample count); the entry block is always hot;
* the hot blocks form one cluster, chained from the entry: from the current block follow
  the heaviest intra-function edge (taken or fall-through) to a hot block not yet placed;
  when there is none, continue with the hottest unplaced hot block.  Without edges (IP
  samples only) hot blocks keep their layout order, which keeps their fall-throughs;
* cold blocks are left out of every cluster, so the compiler moves them to ``foo.cold``.

The symbol-ordering file lists hot functions hottest first, then the ``.cold`` parts the
cluster file creates, as Propeller's "ld profile" does (anchors.md §0.2).
"""

from __future__ import annotations

import numpy as np

from bbmap.aggregate.lbr import K_BRANCH, K_FALLTHROUGH, K_OTHER
from bbmap.aggregate.result import AnnotateResult, FunctionView


def _hotness(result: AnnotateResult) -> np.ndarray:
    return result.block_count if result.has_counts else result.block_samples


def function_clusters(result: AnnotateResult, fv: FunctionView) -> tuple[list[int], bool]:
    """(hot cluster as block IDs, whether any block is left cold) for one function."""
    m = result.block_map
    fns = result.functions.bmfuncs[fv.key]
    if not fns:
        return [], False
    f = fns[0]  # one map per name; identical-code-folded copies share it
    lo = int(m.range_block_ptr[m.func_range_ptr[f]])
    hi = int(m.range_block_ptr[m.func_range_ptr[f + 1]])
    if hi <= lo:
        return [], False
    h = _hotness(result)[lo:hi]
    hot = h > 0
    hot[0] = True  # the entry block stays in the first cluster
    order: list[int] = []
    if result.has_counts:
        ef, et = result.edge_from, result.edge_to
        sel = ((ef >= lo) & (ef < hi) & (et >= lo) & (et < hi)
               & np.isin(result.edge_kind, (K_BRANCH, K_FALLTHROUGH, K_OTHER)))
        succ: dict[int, dict[int, int]] = {}  # a -> {b: taken + fall-through count}
        for a, b, c in zip((ef[sel] - lo).tolist(), (et[sel] - lo).tolist(),
                           result.edge_count[sel].tolist()):
            to = succ.setdefault(a, {})
            to[b] = to.get(b, 0) + c
        placed = np.zeros(hi - lo, bool)
        by_heat = sorted(np.flatnonzero(hot).tolist(), key=lambda i: (-int(h[i]), i))
        cur = 0
        while True:
            order.append(cur)
            placed[cur] = True
            nxt = [(c, b) for b, c in succ.get(cur, {}).items() if hot[b] and not placed[b]]
            if nxt:
                cur = max(nxt, key=lambda cb: (cb[0], -cb[1]))[1]
                continue
            rest = [i for i in by_heat if not placed[i]]
            if not rest:
                break
            cur = rest[0]
    else:
        order = np.flatnonzero(hot).tolist()
    ids = m.block_id[lo:hi]
    return [int(ids[i]) for i in order], bool((~hot).any())


def _hot_functions(result: AnnotateResult) -> list[FunctionView]:
    fvs = result.hot_functions()
    h = _hotness(result)
    weight = {fv.key: (int(h[fv.blocks].sum()) if len(fv.blocks) else 0, fv.samples)
              for fv in fvs}
    return sorted(fvs, key=lambda fv: (-weight[fv.key][0], -weight[fv.key][1], fv.name))


def render_propeller(result: AnnotateResult, *, version: int = 1) -> str:
    """The ``-fbasic-block-sections=list=`` file (v0 ``!``/``!!`` or v1 ``f``/``c``)."""
    if version not in (0, 1):
        raise ValueError(f"cluster file version {version} (0 or 1)")
    lines = ["v1"] if version == 1 else []
    lines.append(f"# bbmap annotate: {result.binary}; hot blocks from "
                 f"{_source_name(result)}")
    for fv in _hot_functions(result):
        ids, _ = function_clusters(result, fv)
        if not ids:
            continue
        name = result.functions.raw_names[fv.key]
        if version == 1:
            lines += [f"f {name}", "c " + " ".join(map(str, ids))]
        else:
            lines += [f"!{name}", "!!" + " ".join(map(str, ids))]
    return "\n".join(lines) + "\n"


def render_symorder(result: AnnotateResult) -> str:
    """``lld --symbol-ordering-file``: hot functions first, then their ``.cold`` parts."""
    hot, cold = [], []
    for fv in _hot_functions(result):
        name = result.functions.raw_names[fv.key]
        hot.append(name)
        _, has_cold = function_clusters(result, fv)
        if has_cold:
            cold.append(f"{name}.cold")
    return "\n".join(hot + cold) + ("\n" if hot else "")


def _source_name(result: AnnotateResult) -> str:
    return {"lbr": "LBR execution counts",
            "inferred": "execution counts inferred from IP samples (min-cost flow)"}.get(
        result.count_source, "IP samples")
