"""The reported functions of an annotate result as row tables: what JSON and CSV list, in order.

:meth:`AnnotateResult.hot_functions` makes one Python object per function; the JSON
and CSV writers instead take these index columns, computed for all reported functions
at once: which blocks, ranges and edges are rows, in output order, and where each
function's rows start.  The selection and order are the report's one rule
(:meth:`AnnotateResult.hot_keys`): every block of a reported function in map order,
its ranges, and the edges whose from-block is in it (``edge_json_order`` adds the JSON
list's sort: count descending, then the endpoints' and kind's texts).  An edge's ``to``
block in another function is written ``name:id``; those endpoints are numbered
(``to_cross``) so their text is made once per distinct endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import AnnotateResult
from bbmap.arrays import expand_ranges, sorted_unique


@dataclass
class HotTable:
    keys: np.ndarray  # reported function keys, hottest first
    block: np.ndarray  # global block per block row (functions' blocks, map order)
    block_ptr: np.ndarray  # block rows of function i: block_ptr[i]:block_ptr[i + 1]
    rng: np.ndarray  # global range per range row
    range_ptr: np.ndarray
    edge: np.ndarray  # edge index per edge row (each function's edges, result order)
    edge_ptr: np.ndarray
    to_cross: np.ndarray  # per edge row: index into cross_names, or -1 (same function)
    cross_names: list[str]  # "name:id" of the distinct other-function endpoints
    entry_count: np.ndarray  # per function: block_count of its first block (0: none)


def hot_table(result: AnnotateResult, top: int | None = None) -> HotTable:
    m = result.block_map
    ft = result.functions
    keys, edge_key = result.hot_keys(top)
    n = len(keys)
    bm_order, bm_ptr = ft.bmfunc_csr()
    nbm = bm_ptr[keys + 1] - bm_ptr[keys]
    bmf = bm_order[expand_ranges(bm_ptr[keys], nbm)]
    fn_of_bmf = np.repeat(np.arange(n), nbm)
    fptr = m.range_block_ptr[m.func_range_ptr]
    nblk = fptr[bmf + 1] - fptr[bmf]
    block = expand_ranges(fptr[bmf], nblk)
    block_ptr = _ptr(np.bincount(fn_of_bmf, weights=nblk, minlength=n))
    nrng = m.func_range_ptr[bmf + 1] - m.func_range_ptr[bmf]
    rng = expand_ranges(m.func_range_ptr[bmf], nrng)
    range_ptr = _ptr(np.bincount(fn_of_bmf, weights=nrng, minlength=n))
    has = block_ptr[1:] > block_ptr[:-1]
    entry = np.zeros(n, np.int64)
    entry[has] = result.block_count[block[block_ptr[:-1][has]]]

    pos_of_key = np.full(ft.num_keys, -1, np.int64)
    pos_of_key[keys] = np.arange(n)
    epos = pos_of_key[edge_key] if len(edge_key) else np.zeros(0, np.int64)
    sel = np.flatnonzero(epos >= 0)
    edge = sel[np.argsort(epos[sel], kind="stable")]
    edge_ptr = _ptr(np.bincount(epos[sel], minlength=n))
    bk = result._block_key
    to = result.edge_to[edge]
    cross = bk[to] != edge_key[edge]
    to_cross = np.full(len(edge), -1, np.int64)
    names: list[str] = []
    if cross.any():
        pair = bk[to[cross]].astype(np.int64) << 32 | m.block_id[to[cross]].astype(np.int64)
        upair, inv = np.unique(pair, return_inverse=True)
        to_cross[cross] = inv
        names = [f"{ft.names[p >> 32]}:{p & 0xFFFFFFFF}" for p in upair.tolist()]
    return HotTable(keys=keys, block=block, block_ptr=block_ptr, rng=rng, range_ptr=range_ptr,
                    edge=edge, edge_ptr=edge_ptr, to_cross=to_cross, cross_names=names,
                    entry_count=entry)


def edge_json_order(result: AnnotateResult, t: HotTable) -> np.ndarray:
    """Edge rows (indices into ``t.edge``) in the JSON list's order: per function, count
    descending, then ``str(from)``, ``str(to)`` (a block ID, or ``name:id``) and the
    kind's name ascending, ties in result order (what a stable sort of the dicts by
    ``(-count, str(from), str(to), kind)`` gives)."""
    if not len(t.edge):
        return np.zeros(0, np.int64)
    ids = result.block_map.block_id
    fid = ids[result.edge_from[t.edge]].astype(np.int64)
    tid = ids[result.edge_to[t.edge]].astype(np.int64)
    local = t.to_cross < 0
    uid = sorted_unique(np.concatenate([fid, tid[local]]))
    texts = [str(i) for i in uid.tolist()] + t.cross_names
    rank = np.empty(len(texts), np.int64)
    rank[sorted(range(len(texts)), key=texts.__getitem__)] = np.arange(len(texts))
    from_rank = rank[np.searchsorted(uid, fid)]
    to_rank = rank[np.searchsorted(uid, np.where(local, tid, uid[0]))]
    to_rank[~local] = rank[len(uid) + t.to_cross[~local]]
    kind_rank = np.argsort(np.argsort(np.array(EDGE_KINDS)))[result.edge_kind[t.edge]]
    fpos = np.repeat(np.arange(len(t.keys)), np.diff(t.edge_ptr))
    count = result.edge_count[t.edge].astype(np.int64)
    # (from, to, kind) ranks as one key, and (function, -count) as one when they fit in
    # int64: a lexsort of two keys orders as the one of five
    nt, nk = len(texts), len(EDGE_KINDS)
    if nt * nt * nk >= 1 << 62:
        return np.lexsort((kind_rank, to_rank, from_rank, -count, fpos))
    ends = (from_rank * nt + to_rank) * nk + kind_rank
    lo, hi = int(count.min()), int(count.max())
    if len(t.keys) * (hi - lo + 1) >= 1 << 62:
        return np.lexsort((ends, -count, fpos))
    return np.lexsort((ends, fpos * (hi - lo + 1) + (hi - count)))


def range_block_sums(result: AnnotateResult, t: HotTable) -> tuple[np.ndarray, ...]:
    """Each reported range's first and end block, and the prefix sums of the blocks'
    samples and period: a range's totals are ``cs[hi] - cs[lo]`` (JSON and the report)."""
    m = result.block_map
    lo, hi = m.range_block_ptr[t.rng], m.range_block_ptr[t.rng + 1]
    cs = np.zeros(m.num_blocks + 1, np.int64)
    np.cumsum(result.block_samples, out=cs[1:])
    cp = np.zeros(m.num_blocks + 1, np.uint64)
    np.cumsum(result.block_period, out=cp[1:])
    return lo, hi, cs, cp


def _ptr(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts.astype(np.int64), out=out[1:])
    return out
