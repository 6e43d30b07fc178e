"""CSV output: one table, one schema, three record kinds.

``record`` is ``block`` (a block of a reported function), ``edge`` (a taken or
fall-through edge; ``id`` is the source block, ``to`` the target, ``name:id`` across
functions) or ``bucket`` (an accounting bucket, so the totals travel with the data).
Spreadsheets and pandas can filter on the first column.
"""

from __future__ import annotations

import csv
import io

from bbmap.annotate.lbr import EDGE_KINDS
from bbmap.annotate.result import AnnotateResult

COLUMNS = ("record", "function", "id", "address", "size", "flags", "samples", "period",
           "count", "to", "kind")


def render_csv(result: AnnotateResult, *, top: int | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    m = result.block_map
    for fv in result.hot_functions(top):
        for b in fv.blocks.tolist():
            w.writerow(("block", fv.name, int(m.block_id[b]), f"{int(result.block_start[b]):#x}",
                        int(m.block_size[b]), "|".join(result.block_flags(b)),
                        int(result.block_samples[b]), int(result.block_period[b]),
                        int(result.block_count[b]), "", ""))
        for e in fv.edges.tolist():
            w.writerow(("edge", fv.name, result.edge_endpoint(int(result.edge_from[e]), fv.key),
                        "", "", "", "", "", int(result.edge_count[e]),
                        result.edge_endpoint(int(result.edge_to[e]), fv.key),
                        EDGE_KINDS[int(result.edge_kind[e])]))
    a = result.accounting
    per = a.period_buckets()
    for name, n in a.sample_buckets().items():
        w.writerow(("bucket", "", name, "", "", "", n, per[name], "", "", "samples"))
    for name, n in a.dso_samples.items():
        w.writerow(("bucket", name, "other_dso", "", "", "", n, "", "", "", "samples"))
    if a.total_branches:
        for name, n in a.branch_buckets().items():
            w.writerow(("bucket", "", name, "", "", "", "", "", n, "", "branches"))
    return buf.getvalue()
