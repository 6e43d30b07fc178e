"""CSV output: one table, one schema, three record kinds.

``record`` is ``block`` (a block of a reported function), ``edge`` (a taken or
fall-through edge; ``id`` is the source block, ``to`` the target, ``name:id`` across
functions) or ``bucket`` (an accounting bucket, so the totals travel with the data).
``source`` says where a block's or edge's ``count`` comes from: ``lbr`` (branch stacks)
or ``inferred`` (min-cost flow from IP samples, spec/inference.md); empty without counts.
Spreadsheets and pandas can filter on the first column.
"""

from __future__ import annotations

import csv
import io

from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import AnnotateResult

COLUMNS = ("record", "function", "id", "address", "size", "flags", "samples", "period",
           "count", "to", "kind", "source")


def render_csv(result: AnnotateResult, *, top: int | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    c = result.columns()
    names = result.functions.names
    ids, keys = c["id"], c["key"]
    src = result.count_source if result.has_counts else ""  # "lbr" | "inferred" | ""
    for fv in result.hot_functions(top):
        for b in fv.blocks.tolist():
            w.writerow(("block", fv.name, ids[b], f"{c['address'][b]:#x}", c["size"][b],
                        "|".join(c["flags"][b]), c["samples"][b], c["period"][b],
                        c["count"][b], "", "", src))
        for e in fv.edges.tolist():
            f, t = c["e_from"][e], c["e_to"][e]
            w.writerow(("edge", fv.name,
                        ids[f] if keys[f] == fv.key else f"{names[keys[f]]}:{ids[f]}",
                        "", "", "", "", "", c["e_count"][e],
                        ids[t] if keys[t] == fv.key else f"{names[keys[t]]}:{ids[t]}",
                        EDGE_KINDS[c["e_kind"][e]], src))
    a = result.accounting
    per = a.period_buckets()
    for name, n in a.sample_buckets().items():
        w.writerow(("bucket", "", name, "", "", "", n, per[name], "", "", "samples", ""))
    for name, n in a.dso_samples.items():
        w.writerow(("bucket", name, "other_dso", "", "", "", n, "", "", "", "samples", ""))
    if a.total_branches:
        for name, n in a.branch_buckets().items():
            w.writerow(("bucket", "", name, "", "", "", "", "", n, "", "branches", ""))
    return buf.getvalue()
