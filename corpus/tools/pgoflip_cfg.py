"""Write a Propeller-style basic-block-sections profile *with CFG* from a measured LBR run.

clang's ``-fbasic-block-sections=FILE`` reads version-1 profiles whose ``g`` lines give the
post-link CFG of a function (``id:count`` for the block, then ``,succ:count`` per edge);
with ``-mllvm -pgo-analysis-map-emit-bb-sections-cfg`` it copies those counts into the
block map (feature 0x80), which ``bbmap verify --profile`` judges as the "post-link"
source.  The counts here are bbmap's own LBR measurement of the training run:

* ``c``: one cluster per function, the measured-hot blocks in their current order (the
  entry first); cold blocks go to ``.cold`` as Propeller would move them;
* ``g``: every block with a measured execution, its count (LBR execution estimate) and its
  branch / fall-through edges to blocks of the same function.

Usage: pgoflip_cfg.py --binary BIN --perf PERF_DATA --out FILE
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import bbmap
from bbmap.aggregate.lbr import EDGE_KINDS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--perf", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    r = bbmap.annotate([args.perf], args.binary)
    m = r.block_map
    intra = {EDGE_KINDS.index("branch"), EDGE_KINDS.index("fallthrough")}
    out_edges: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for f, t, k, c in zip(r.edge_from.tolist(), r.edge_to.tolist(), r.edge_kind.tolist(),
                          r.edge_count.tolist()):
        if k in intra and m.block_function(f) == m.block_function(t):
            out_edges[f][t] += c
    lines = ["v1"]
    for fi in range(m.num_functions):
        blocks = list(m.function_blocks(fi))
        name = m.func_name[fi]
        hot = [b for b in blocks if r.block_count[b] > 0]
        if not name or not hot:
            continue
        if blocks[0] not in hot:
            hot.insert(0, blocks[0])
        lines.append(f"f {name}")
        lines.append("c " + " ".join(str(int(m.block_id[b])) for b in hot))
        g = []
        for b in hot:
            item = f"{int(m.block_id[b])}:{int(r.block_count[b])}"
            for t, c in sorted(out_edges[b].items()):
                item += f",{int(m.block_id[t])}:{c}"
            g.append(item)
        lines.append("g " + " ".join(g))
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
