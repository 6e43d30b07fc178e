"""The profile clang 22 matches and infers itself (``-fbasic-block-sections=list=FILE
-mllvm -basic-block-section-match-infer``): per hot function of the *profiled* build, its
blocks' counts and intra-function edge counts by block ID (``g``) and the block hashes the
compiler wrote for those IDs (``h``, from ``-mllvm -emit-bb-hash``).  The compiler hashes
the blocks of the build it is making, matches them to the ``h`` lines, carries the ``g``
counts over, infers the rest and splits hot from cold (LLVM's
``BasicBlockSectionsProfileReader`` and ``BasicBlockMatchingAndInference``)::

    v1
    f NAME
    g ID:COUNT,SUCC:COUNT,... ID:COUNT ...
    h ID:HASH ID:HASH ...          (hashes in hex, no 0x)

Written from an annotate result of the profiled build with counts (LBR or inferred).
"""

from __future__ import annotations

import numpy as np

from bbmap.aggregate.lbr import K_BRANCH, K_FALLTHROUGH
from bbmap.aggregate.result import AnnotateResult
from bbmap.errors import BBMapError
from bbmap.formats.bbaddrmap import FEAT_BB_HASH


def render_match_infer(result: AnnotateResult, *, top: int | None = None,
                       names: dict[int, str] | None = None) -> str:
    """The ``g``/``h`` profile of the result's hot functions (hottest first: the
    compiler reads them in any order).  ``names``: block-map function -> the name to
    write (another build's name of the function); the others are left out."""
    m = result.block_map
    if not result.has_counts:
        raise BBMapError("the match-infer profile needs counts: a profile with branch "
                         "stacks, or inference (--inference on)", file=result.binary)
    hashed = (m.func_feature & FEAT_BB_HASH) != 0 if m.num_functions else np.zeros(0, bool)
    if not hashed.any():
        raise BBMapError("the binary's block map has no block hashes: build it with clang "
                         "22's -mllvm -emit-bb-hash", file=result.binary)
    rf = np.repeat(np.arange(m.num_functions, dtype=np.int64), np.diff(m.func_range_ptr))
    bfunc = rf[np.repeat(np.arange(m.num_ranges, dtype=np.int64),
                         np.diff(m.range_block_ptr))]
    intra = np.isin(result.edge_kind, (K_BRANCH, K_FALLTHROUGH))
    ef, et, ec = result.edge_from[intra], result.edge_to[intra], result.edge_count[intra]
    same = bfunc[ef] == bfunc[et] if len(ef) else np.zeros(0, bool)
    ef, et, ec = ef[same], et[same], ec[same]
    order = np.lexsort((et, ef))
    ef, et, ec = ef[order], et[order], ec[order]
    lines = ["v1"]
    hot, _ = result.hot_keys(top)
    own = m.func_name or []
    for k in hot.tolist():
        for f in result.functions.bmfuncs[k]:
            f = int(f)
            name = own[f] if names is None else names.get(f)
            if not hashed[f] or not name:
                continue
            r0, r1 = int(m.func_range_ptr[f]), int(m.func_range_ptr[f + 1])
            lo, hi = int(m.range_block_ptr[r0]), int(m.range_block_ptr[r1])
            if not int(result.block_count[lo:hi].sum()):
                continue
            g = []
            a, b = np.searchsorted(ef, [lo, hi])
            succ: dict[int, list[str]] = {}
            for s, t, c in zip(ef[a:b].tolist(), et[a:b].tolist(), ec[a:b].tolist()):
                succ.setdefault(s, []).append(f"{int(m.block_id[t])}:{int(c)}")
            for blk in range(lo, hi):
                g.append(",".join([f"{int(m.block_id[blk])}:{int(result.block_count[blk])}",
                                   *succ.get(blk, [])]))
            h = [f"{int(m.block_id[blk])}:{int(m.block_hash[blk]):x}" for blk in range(lo, hi)]
            lines += [f"f {name}", "g " + " ".join(g), "h " + " ".join(h)]
    return "\n".join(lines) + "\n"
