# ruff: noqa: ANN001, ANN201 - a verbatim copy of the renderers being replaced
"""annotate's JSON and CSV renderers as they were before the columnar writer.

The oracle the fast writer is held to, byte for byte (``tests/test_outputs_render_oracle.py``
runs both on every corpus profile): a dict per block encoded by the C JSON encoder, and
``csv.writer`` rows, each over the Python lists :meth:`AnnotateResult.columns` converts
once.  Copied from ``bbmap/outputs/jsonout.py``, ``bbmap/outputs/csvout.py`` and
``AnnotateResult.hot_functions/function_json`` as of main 7cf9240, with the methods
turned into functions of the result; only the names changed.  A change to the JSON or
CSV shape is made here too (the spec pages say what the shape is).
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import FunctionView, _span
from bbmap.formats.bbaddrmap import MD_NAMES
from bbmap.outputs.csvout import COLUMNS  # the header row: one declaration


def hot_functions(result, top=None):
    """Functions with samples, LBR counts or edges, hottest first."""
    ft = result.functions
    nk = ft.num_keys
    bk = result._block_key
    count_by_key = np.zeros(nk, np.int64)
    if len(bk):
        count_by_key = np.bincount(bk, weights=result.block_count, minlength=nk
                                   ).astype(np.int64)
    edge_key = bk[result.edge_from] if len(result.edge_from) else np.zeros(0, np.int32)
    has_edge = np.zeros(nk, bool)
    has_edge[edge_key] = True
    hot = np.flatnonzero((result.func_samples > 0) | (count_by_key > 0) | has_edge)
    order = np.lexsort((hot, -count_by_key[hot], -result.func_samples[hot]))
    hot = hot[order]
    if top is not None:
        hot = hot[:top]
    edge_order = np.argsort(edge_key, kind="stable")
    sorted_keys = edge_key[edge_order]
    out = []
    m = result.block_map
    for k in hot.tolist():
        blocks = [np.arange(*_span(m, f)) for f in ft.bmfuncs[k]]
        blk = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
        lo, hi = np.searchsorted(sorted_keys, [k, k + 1])
        ent = int(result.block_count[blk[0]]) if len(blk) else 0
        out.append(FunctionView(
            key=k, name=ft.names[k], address=int(ft.address[k]),
            samples=int(result.func_samples[k]), period=int(result.func_period[k]),
            count=ent, blocks=blk, edges=edge_order[lo:hi]))
    return out


def columns(result):
    m = result.block_map
    flag_names = [[n for n, bit in MD_NAMES.items() if md & bit] for md in range(256)]
    return {
        "id": m.block_id.tolist(), "address": result.block_start.tolist(),
        "size": m.block_size.tolist(),
        "flags": [flag_names[md] for md in m.block_md.tolist()],
        "samples": result.block_samples.tolist(), "period": result.block_period.tolist(),
        "count": result.block_count.tolist(), "key": result._block_key.tolist(),
        "e_from": result.edge_from.tolist(), "e_to": result.edge_to.tolist(),
        "e_count": result.edge_count.tolist(), "e_kind": result.edge_kind.tolist(),
        **({"low": result.block_low.tolist(), "high": result.block_high.tolist(),
            "e_low": result.edge_low.tolist(), "e_high": result.edge_high.tolist()}
           if result.has_intervals else {})}


def ranges_json(result, fv):
    m = result.block_map
    out = []
    for f in result.functions.bmfuncs[fv.key]:
        for r in m.function_ranges(f):
            lo, hi = int(m.range_block_ptr[r]), int(m.range_block_ptr[r + 1])
            out.append({"address": int(m.range_base[r]), "blocks": hi - lo,
                        "samples": int(result.block_samples[lo:hi].sum()),
                        "period": int(result.block_period[lo:hi].sum())})
    return out


def function_json(result, c, fv):
    names = result.functions.names
    ids, keys = c["id"], c["key"]
    blocks = [{"id": ids[b], "address": c["address"][b], "size": c["size"][b],
               "flags": c["flags"][b], "samples": c["samples"][b],
               "period": c["period"][b], "count": c["count"][b],
               **({"interval": [c["low"][b], c["high"][b] if c["high"][b] >= 0 else None]}
                  if "low" in c else {})}
              for b in fv.blocks.tolist()]

    def end(b):
        return ids[b] if keys[b] == fv.key else f"{names[keys[b]]}:{ids[b]}"

    edges = [{"from": end(c["e_from"][e]), "to": end(c["e_to"][e]),
              "count": c["e_count"][e], "kind": EDGE_KINDS[c["e_kind"][e]],
              **({"interval": [c["e_low"][e], c["e_high"][e] if c["e_high"][e] >= 0
                               else None]} if "low" in c else {})}
             for e in fv.edges.tolist()]
    edges.sort(key=lambda d: (-d["count"], str(d["from"]), str(d["to"]), d["kind"]))
    return {"name": fv.name, "address": fv.address, "samples": fv.samples,
            "period": fv.period, "count": fv.count, "ranges": ranges_json(result, fv),
            "blocks": blocks, "edges": edges}


def render_json(result, *, top=None) -> str:
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    c = columns(result)
    parts = ["{"]
    for k, v in result.header_json().items():
        parts.append(f"{enc(k)}:{enc(v)},")
    funcs = [enc(function_json(result, c, fv)) for fv in hot_functions(result, top)]
    parts.append(f"{enc('functions')}:[")
    parts.append(",\n".join(funcs))
    parts.append("],")
    parts.append(f"{enc('warnings')}:{enc([d.to_json() for d in result.warnings])}")
    parts.append("}")
    return "\n".join(parts) + "\n"


def render_csv(result, *, top=None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    c = columns(result)
    names = result.functions.names
    ids, keys = c["id"], c["key"]
    src = result.count_source if result.has_counts else ""
    iv = "low" in c

    def bounds(lo, hi):
        return (lo, hi if hi >= 0 else "") if iv else ("", "")

    for fv in hot_functions(result, top):
        for b in fv.blocks.tolist():
            w.writerow(("block", fv.name, ids[b], f"{c['address'][b]:#x}", c["size"][b],
                        "|".join(c["flags"][b]), c["samples"][b], c["period"][b],
                        c["count"][b], "", "", src, *bounds(c["low"][b] if iv else 0,
                                                            c["high"][b] if iv else 0)))
        for e in fv.edges.tolist():
            f, t = c["e_from"][e], c["e_to"][e]
            w.writerow(("edge", fv.name,
                        ids[f] if keys[f] == fv.key else f"{names[keys[f]]}:{ids[f]}",
                        "", "", "", "", "", c["e_count"][e],
                        ids[t] if keys[t] == fv.key else f"{names[keys[t]]}:{ids[t]}",
                        EDGE_KINDS[c["e_kind"][e]], src,
                        *bounds(c["e_low"][e] if iv else 0, c["e_high"][e] if iv else 0)))
    a = result.accounting
    per = a.period_buckets()
    if iv:
        sm = result.sample_model
        w.writerow(("sample_model", sm["event"], sm["model"], "", "", "", "", "", "", "", "",
                    "inferred", "", ""))
    for name, n in a.sample_buckets().items():
        w.writerow(("bucket", "", name, "", "", "", n, per[name], "", "", "samples", "", "", ""))
    for name, n in a.dso_samples.items():
        w.writerow(("bucket", name, "other_dso", "", "", "", n, "", "", "", "samples", "", "",
                    ""))
    if a.total_branches:
        for name, n in a.branch_buckets().items():
            w.writerow(("bucket", "", name, "", "", "", "", "", n, "", "branches", "", "", ""))
    return buf.getvalue()
