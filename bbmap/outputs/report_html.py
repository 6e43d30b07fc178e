"""``bbmap report``: one self-contained HTML page of a profile (spec/report.md).

The page answers the questions people ask after ``perf record`` on one screen: where did
the samples go (the run, its accounting as a bar), which functions and blocks are hot
(a sortable, filterable table with a heat strip per function), what a function's CFG
looks like (the picture :mod:`bbmap.outputs.svg` draws), what a new layout would change
(:func:`bbmap.layout.plan.plan_layout`'s scores), and -- for a binary with a PGO analysis
map -- where the compiler's beliefs were wrong (``verify --profile``'s verdicts).

Everything the page shows is what annotate's JSON says: the run is its header
(``AnnotateResult.header_json``, so a ``sample_model`` or ``fit`` shows when present), the
functions, blocks, ranges and edges are its rows in its order (the row tables of
:mod:`bbmap.outputs.hot_table` its writer uses), and inferred counts' intervals are shown
when the result carries them; the tests hold every number to ``annotate --format json``.
The page must stay small for a 20,000-function binary, so:

* the function table's columns are plain JSON (the first paint needs them);
* every function's blocks, ranges and edges are stored column-wise (addresses as
  differences, repeated texts as dictionaries), deflated and base64-encoded, and are
  inflated by the page's script (the browser's ``DecompressionStream``) after the first
  paint: heat strips, then a function's tables when it is opened;
* CFG pictures are drawn for the hottest ``pictures`` functions only (each is a whole
  SVG), deflated the same way; for the others the page says which command draws one.

With scripts off the page still reads: the run, the layout totals and the verdicts are
static HTML, and ``<noscript>`` holds static tables of the hottest functions, their
blocks and their layout.  The output is deterministic (same inputs, same bytes).
"""

from __future__ import annotations

import base64
import html
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bbmap import __version__
from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import AnnotateResult
from bbmap.buckets import BRANCH_BUCKETS, BUCKET_LABELS
from bbmap.formats.bbaddrmap import MD_NAMES
from bbmap.outputs.hot_table import HotTable, edge_json_order, hot_table, range_block_sums
from bbmap.outputs.picture import RAMP, ZERO_FILL, HeatScale, heat_metric

REPORT_FORMAT_VERSION = 1
PICTURES = 50  # CFG pictures embedded (the hottest functions with blocks)
STATIC_FUNCTIONS = 50  # rows of the noscript function and layout tables
STATIC_BLOCK_TABLES = 10  # functions whose block tables the noscript part holds
VERDICT_ROWS = 200  # worst branches / blocks listed (the JSON of verify lists all)

# the accounting bar's colours: Okabe and Ito's palette for colour-blind readers, one
# per bucket, in the buckets' order (most to least specific)
BUCKET_COLOURS = ("#0072B2", "#56B4E9", "#009E73", "#E69F00", "#D55E00", "#CC79A7",
                  "#999999", "#000000")

_ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_assets")

@dataclass
class ReportData:
    """What the page embeds: ``page`` (plain JSON, read at the first paint), ``detail``
    (per-function columns, deflated), ``pictures`` (function index -> SVG, deflated), and
    the JSON objects of the hottest functions (for the static block tables)."""

    page: dict[str, Any]
    detail: dict[str, Any]
    pictures: dict[str, str]
    static_functions: list[dict[str, Any]]


# ------------------------------------------------------------------------------ data
def report_data(result: AnnotateResult, *, plan: Any = None, verdicts: Any = None,
                range_labels: Mapping[int, str] | None = None,
                pictures: int = PICTURES, layout_top: int | None = None) -> ReportData:
    """The page's data from an annotate result, an optional layout plan
    (:class:`bbmap.layout.plan.LayoutPlan`) and optional ``verify --profile`` verdicts
    (:class:`bbmap.verify.profile_report.ProfileReport`); ``layout_top``: the plan was
    made of the hottest so many functions (``plan_layout(top=)``), as the page says.

    The functions, blocks, ranges and edges are the ones annotate's JSON lists, in its
    order, taken from the same row tables its writer uses (:mod:`bbmap.outputs.hot_table`)
    as numpy columns -- parsing the ~18 MB JSON back would cost more than annotating."""
    t = hot_table(result)
    keys = t.keys.tolist()
    n = len(keys)
    metric, values = heat_metric(result, "auto")
    nblocks = np.diff(t.block_ptr)
    v = np.asarray(values)[t.block].astype(np.int64)
    hmax = np.zeros(n, np.int64)
    has = nblocks > 0
    if len(v):
        hmax[has] = np.maximum.reduceat(v, t.block_ptr[:-1][has])
    # which functions get a picture: the hottest ones that have blocks
    with_blocks = np.flatnonzero(has)[:max(pictures, 0)].tolist()
    svgs: dict[str, str] = {}
    if with_blocks:
        from bbmap.outputs.svg import function_svgs

        drawn = function_svgs(result, [keys[i] for i in with_blocks], range_labels=range_labels)
        svgs = {str(i): s for i, s in zip(with_blocks, drawn) if s}
    ft = result.functions
    table = {
        "name": [ft.names[k] for k in keys],
        "address": [int(ft.address[k]) for k in keys],
        "samples": result.func_samples[t.keys].tolist(),
        "period": result.func_period[t.keys].tolist(),
        "count": t.entry_count.tolist(), "blocks": nblocks.tolist(),
        "edges": np.diff(t.edge_ptr).tolist(), "heat_max": hmax.tolist(),
        "pictured": sorted(int(i) for i in svgs), "extra": {},
    }
    page = {
        "format_version": REPORT_FORMAT_VERSION,
        "generator": f"bbmap {__version__}",
        "run": {**result.header_json(), "warnings": [d.to_json() for d in result.warnings]},
        "heat": {"metric": metric, "title": HeatScale(metric, 0).title, "ramp": list(RAMP),
                 "zero": ZERO_FILL},
        "buckets": {"names": list(BRANCH_BUCKETS),
                    "labels": [BUCKET_LABELS[b] for b in BRANCH_BUCKETS],
                    "colours": list(BUCKET_COLOURS)},
        "functions": table,
        "pictures": len(svgs),
        "layout": None,
        "verify": None,
    }
    detail = _detail(result, t)
    if plan is not None:
        page["layout"], detail["layout"] = _layout(plan, keys, layout_top)
    if verdicts is not None:
        page["verify"] = _verify(verdicts)
    static = [result.function_json(fv) for fv in result.hot_functions(STATIC_BLOCK_TABLES)]
    return ReportData(page=page, detail=detail, pictures=svgs, static_functions=static)


def _detail(r: AnnotateResult, t: HotTable) -> dict[str, Any]:
    """The reported functions' blocks, ranges and edges as columns (all functions
    concatenated; ``ptr`` cuts them per function), in annotate's JSON order and with its
    keys: each column encoded by :func:`_column`."""
    m = r.block_map
    b = t.block
    md, md_inv = np.unique(m.block_md[b], return_inverse=True)
    blocks = {"id": _column(m.block_id[b]),
              "address": _column(r.block_start[b], delta_ptr=t.block_ptr),
              "size": _column(m.block_size[b]),
              "flags": {"t": "x", "dict": [[k for k, bit in MD_NAMES.items() if int(x) & bit]
                                           for x in md.tolist()],
                        "v": md_inv.reshape(-1).tolist()},
              "samples": _column(r.block_samples[b]), "period": _column(r.block_period[b]),
              "count": _column(r.block_count[b])}
    low, high = getattr(r, "block_low", None), getattr(r, "block_high", None)
    if low is not None and high is not None:  # inferred counts' intervals (when present)
        blocks["interval"] = _interval(low[b], high[b])
    rg = t.rng
    lo, hi, cs, cp = range_block_sums(r, t)
    ranges = {"address": _column(m.range_base[rg], delta_ptr=t.range_ptr),
              "blocks": _column(hi - lo), "samples": _column(cs[hi] - cs[lo]),
              "period": _column(cp[hi] - cp[lo])}
    order = edge_json_order(r, t)
    e = t.edge[order]
    cross = t.to_cross[order]
    to = np.where(cross < 0, m.block_id[r.edge_to[e]].astype(np.int64), -1 - cross)
    edges = {"from": _column(m.block_id[r.edge_from[e]]),
             "to": {"t": "m", "dict": t.cross_names, "v": to.tolist()},
             "count": _column(r.edge_count[e]),
             "kind": {"t": "x", "dict": list(EDGE_KINDS), "v": r.edge_kind[e].tolist()}}
    elow, ehigh = getattr(r, "edge_low", None), getattr(r, "edge_high", None)
    if elow is not None and ehigh is not None:
        edges["interval"] = _interval(elow[e], ehigh[e])

    def part(cols: dict[str, Any], ptr: np.ndarray) -> dict[str, Any]:
        return {"keys": list(cols), "ptr": ptr.tolist(), "columns": cols}

    return {"blocks": part(blocks, t.block_ptr), "ranges": part(ranges, t.range_ptr),
            "edges": part(edges, t.edge_ptr)}


def _column(a: np.ndarray, delta_ptr: np.ndarray | None = None) -> dict[str, Any]:
    """Integers: ``i`` as they are; ``d`` (addresses) as differences from the previous row
    of the same function, so mostly small numbers."""
    a = np.asarray(a).astype(np.int64)
    if delta_ptr is None:
        return {"t": "i", "v": a.tolist()}
    d = np.empty_like(a)
    if len(a):
        d[0] = a[0]
        d[1:] = a[1:] - a[:-1]
        starts = delta_ptr[:-1][delta_ptr[:-1] < delta_ptr[1:]]
        d[starts] = a[starts]
    return {"t": "d", "v": d.tolist()}


def _interval(low: np.ndarray, high: np.ndarray) -> dict[str, Any]:
    """``[low, high]`` per row, ``high`` null (unbounded) where it is negative."""
    return {"t": "p", "lo": np.asarray(low).astype(np.int64).tolist(),
            "hi": np.asarray(high).astype(np.int64).tolist()}


def decode_column(col: dict[str, Any], ptr: Sequence[int]) -> list[Any]:
    """The values of an encoded column (the inverse of :func:`_column` and the other
    encodings of :func:`_detail`; the page's script does the same)."""
    t = col["t"]
    if t == "p":
        return [[lo, hi if hi >= 0 else None] for lo, hi in zip(col["lo"], col["hi"])]
    v = col["v"]
    if t == "i":
        return list(v)
    if t == "d":
        out = list(v)
        for a, b in zip(ptr, ptr[1:]):
            for j in range(a + 1, b):
                out[j] += out[j - 1]
        return out
    if t == "m":
        d = col["dict"]
        return [x if x >= 0 else d[-1 - x] for x in v]
    d = col["dict"]
    return [d[x] for x in v]


def function_json(page: dict[str, Any], detail: dict[str, Any], i: int) -> dict[str, Any]:
    """Function ``i`` of the page as annotate's JSON lists it (key order included)."""
    f = page["functions"]
    out: dict[str, Any] = {"name": f["name"][i], "address": f["address"][i],
                           "samples": f["samples"][i], "period": f["period"][i],
                           "count": f["count"][i]}
    cache = detail.setdefault("_decoded", {})
    for part in ("ranges", "blocks", "edges"):
        p = detail[part]
        if part not in cache:
            cache[part] = {k: decode_column(p["columns"][k], p["ptr"]) for k in p["keys"]}
        cols = cache[part]
        a, b = p["ptr"][i], p["ptr"][i + 1]
        out[part] = [{k: cols[k][j] for k in p["keys"]} for j in range(a, b)]
    for k, vals in f["extra"].items():
        if vals[i] is not None:
            out[k] = vals[i]
    return out


def _layout(plan: Any, keys: Sequence[int], top: int | None
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per laid-out function (linker order): its row in the function table and the plan's
    numbers; cluster and cold block IDs go to the deflated detail."""
    pos = {k: i for i, k in enumerate(keys)}
    doc = plan.to_json()
    rows: dict[str, list[Any]] = {k: [] for k in (
        "fn", "name", "address", "blocks", "hot_blocks", "reordered", "hot_bytes",
        "cold_bytes", "entry_count", "intra_before", "intra_after", "inter_before",
        "inter_after", "fallthrough_before", "fallthrough_after")}
    cluster, cold, cptr, kptr = [], [], [0], [0]
    for f, fj in zip(plan.functions, doc["functions"]):
        rows["fn"].append(pos.get(int(f.cfg.key), -1))
        rows["name"].append(fj["name"])
        rows["address"].append(fj["address"])
        rows["blocks"].append(fj["blocks"])
        rows["hot_blocks"].append(len(fj["cluster"]))
        rows["reordered"].append(fj["reordered"])
        for k in ("hot_bytes", "cold_bytes", "entry_count"):
            rows[k].append(fj[k])
        for k, v in fj["score"].items():
            rows[k].append(v)
        rows["fallthrough_before"].append(fj["fallthroughs"]["before"])
        rows["fallthrough_after"].append(fj["fallthroughs"]["after"])
        cluster += fj["cluster"]
        cold += fj["cold"]
        cptr.append(len(cluster))
        kptr.append(len(cold))
    page = {"functions_reported": len(keys), "top": top,
            "count_source": doc["count_source"], "params": doc["params"], "mode": doc["mode"],
            "function_order": doc["function_order"], "totals": doc["totals"],
            "unmapped_hot_symbols": doc["unmapped_hot_symbols"], "rows": rows}
    return page, {"cluster": cluster, "cluster_ptr": cptr, "cold": cold, "cold_ptr": kptr}


def _verify(rep: Any) -> dict[str, Any]:
    """``verify --profile``'s verdicts: summary, notes, errors and the worst rows."""
    d = rep.to_json()
    out = {k: d[k] for k in ("ok", "count_source", "options", "samples", "branch_records",
                             "sources", "summary", "notes", "errors")}
    for k in ("worst_branches", "worst_blocks"):
        out[k] = d[k][:VERDICT_ROWS]
        out[f"{k}_total"] = len(d[k])
    return out


# ------------------------------------------------------------------------------ HTML
def render_report_html(data: ReportData) -> bytes:
    """The page, as the bytes to write."""
    page_json = _script_json(data.page)
    detail = _pack(data.detail)
    pics = _pack(data.pictures)
    with open(os.path.join(_ASSETS, "report.css"), encoding="utf-8") as fh:
        css = fh.read()
    with open(os.path.join(_ASSETS, "report.js"), encoding="utf-8") as fh:
        js = fh.read()
    run = data.page["run"]
    title = f"bbmap report: {os.path.basename(str(run['binary']))}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="{_e(data.page["generator"])}">',
        f"<title>{_e(title)}</title>",
        f"<style>{css}</style>", "</head>", "<body>",
        '<a class="skip" href="#functions">Skip to the hot functions</a>',
        f"<header><h1>{_e(title)}</h1>",
        _nav(data.page), "</header>", "<main>",
        _run_section(data.page),
        _functions_section(data),
        _layout_section(data),
        _verify_section(data.page),
        '<section id="function" aria-live="polite" hidden></section>',
        "</main>",
        f'<footer><p>Written by {_e(data.page["generator"])}. Heat colours: ColorBrewer '
        "YlOrRd (colour-blind safe; lightness falls as the count grows, so it reads in "
        "grey too), log scale; bucket colours: Okabe&ndash;Ito. Every colour has its "
        "number beside it.</p></footer>",
        f'<script id="bbmap-data" type="application/json">{page_json}</script>',
        f'<script id="bbmap-detail" type="text/plain">{detail}</script>',
        f'<script id="bbmap-pictures" type="text/plain">{pics}</script>',
        f"<script>{js}</script>",
        "</body>", "</html>", ""]
    return "\n".join(parts).encode("utf-8", "surrogateescape")


def read_report(page: bytes | str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(page data, detail, pictures) embedded in a report: what the page's script reads."""
    text = page.decode("utf-8", "surrogateescape") if isinstance(page, bytes) else page

    def body(ident: str) -> str:
        start = text.index(f'<script id="{ident}"')
        start = text.index(">", start) + 1
        return text[start:text.index("</script>", start)]

    data = json.loads(body("bbmap-data"))
    return data, _unpack(body("bbmap-detail")), _unpack(body("bbmap-pictures"))


def _script_json(obj: Any) -> str:
    """JSON safe inside ``<script>``: no ``</script>`` or ``<!--`` can occur."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return s.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _pack(obj: Any) -> str:
    """JSON, deflated (zlib), base64: what the page inflates with DecompressionStream."""
    raw = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return base64.b64encode(zlib.compress(raw.encode("utf-8", "surrogateescape"), 6)).decode()


def _unpack(text: str) -> Any:
    return json.loads(zlib.decompress(base64.b64decode(text)).decode("utf-8", "surrogateescape"))


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _n(v: Any) -> str:
    """A number as the page prints it: integers grouped, floats with their digits."""
    if v is None:
        return "&ndash;"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.6g}" if abs(v) < 1e6 else f"{v:,.1f}"
    return _e(v)


def _pct(a: float, b: float) -> str:
    return f"{100 * a / b:.2f}%" if b else "&ndash;"


def _nav(page: dict[str, Any]) -> str:
    links = [("run", "Run"), ("functions", "Hot functions")]
    if page["layout"] is not None:
        links.append(("layout", "Layout"))
    if page["verify"] is not None:
        links.append(("verify", "PGO map verdicts"))
    items = "".join(f'<li><a href="#{a}">{t}</a></li>' for a, t in links)
    return f'<nav aria-label="sections"><ul>{items}</ul></nav>'


def _run_section(page: dict[str, Any]) -> str:
    run = page["run"]
    tot = run["totals"]
    rows = [("binary", _e(run["binary"])), ("build id", _e(run.get("build_id") or "none"))]
    if run.get("go_build_id"):
        rows.append(("Go build id", _e(run["go_build_id"])))
    rows.append(("status", _e(run["status"])))
    src = {"lbr": "LBR branch stacks (measured)",
           "inferred": "INFERRED from IP samples over the recovered CFG (min-cost flow)",
           "none": "none (IP samples only)"}.get(run["count_source"], run["count_source"])
    rows.append(("execution counts", _e(src)))
    rows.append(("samples", _n(tot["samples"])))
    rows.append(("period", _n(tot["period"])))
    rows.append(("branch records", _n(tot["branches"])))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    prof = ["<table><caption>Profiles</caption><thead><tr><th scope=col>path</th>"
            "<th scope=col>mode</th><th scope=col>events</th><th scope=col class=num>samples"
            "</th><th scope=col class=num>branches</th><th scope=col>binary build id as "
            "recorded</th><th scope=col class=num>mappings</th></tr></thead><tbody>"]
    for p in run["profiles"]:
        prof.append(f"<tr><td>{_e(p['path'])}</td><td>{_e(p['mode'])}</td>"
                    f"<td>{_e(', '.join(p['events']))}</td><td class=num>{_n(p['samples'])}"
                    f"</td><td class=num>{_n(p['branches'])}</td>"
                    f"<td>{_e(p.get('binary_build_id') or 'none')}</td>"
                    f"<td class=num>{_n(p['binary_mmaps'])}</td></tr>")
        if p.get("error"):
            prof.append(f"<tr><td colspan=7 class=warn>error: {_e(p['error'])}</td></tr>")
    prof.append("</tbody></table>")
    bars = [_bucket_bar("samples", tot["buckets"]["samples"], tot["samples"], page)]
    if tot["branches"]:
        bars.append(_bucket_bar("branch records", tot["buckets"]["branches"],
                                tot["branches"], page))
    extra = []
    if run.get("inference"):
        extra.append(_kv_table("Inference", run["inference"]))
    if isinstance(run.get("sample_model"), dict):
        extra.append(_kv_table("Sample model", run["sample_model"]))
    if run.get("fit"):
        extra.append(_kv_table("Does the profile fit the binary", run["fit"]))
    dso = tot["buckets"].get("other_dso_samples") or {}
    if dso:
        extra.append(_kv_table("Samples in other DSOs", dict(list(dso.items())[:10])))
    warn = run["warnings"]
    if warn:
        items = "".join(f"<li class=\"warn-{_e(w['severity'])}\"><strong>{_e(w['severity'])}"
                        f"</strong>: {_e(w['message'])}"
                        + (f" ({_e(w['file'])}" + (f", {_e(w['section'])}" if w.get('section')
                                                    else "")
                           + (f", offset {w['offset']}" if w.get("offset") is not None
                              else "") + ")" if w.get("file") else "")
                        + "</li>" for w in warn)
        extra.append(f'<h3 id="warnings">Warnings ({len(warn)})</h3><ul>{items}</ul>')
    else:
        extra.append("<p>No warnings.</p>")
    side = "".join(extra[:-1])
    return (f'<section id="run" aria-labelledby="run-h"><h2 id="run-h">Run</h2>'
            f'<div class="runcols"><div><dl class="facts">{dl}</dl>{"".join(bars)}</div>'
            f'<div class="side">{side}</div></div>{"".join(prof)}{extra[-1]}</section>')


def _bucket_bar(what: str, buckets: dict[str, int], total: int, page: dict[str, Any]) -> str:
    names = page["buckets"]["names"]
    colours = page["buckets"]["colours"]
    segs, legend = [], []
    for i, b in enumerate(names):
        if b not in buckets:
            continue
        v = buckets[b]
        label = BUCKET_LABELS[b]
        if v and total:
            segs.append(f'<span class="seg" style="width:{100 * v / total:.4f}%;'
                        f'background:{colours[i]}" title="{_e(label)}: {v:,} '
                        f'({100 * v / total:.2f}%)"></span>')
        legend.append(f'<li data-bucket="{b}"><span class="sw" style="background:{colours[i]}">'
                      f'</span>{_e(label)}: <span class=num>{v:,}</span> '
                      f"({_pct(v, total)})</li>")
    ident = "bar-" + what.replace(" ", "-")
    return (f'<figure class="buckets" aria-labelledby="{ident}"><figcaption id="{ident}">'
            f"Where the {total:,} {_e(what)} landed</figcaption>"
            f'<div class="bar" role="img" aria-label="see the list below">{"".join(segs)}'
            f'</div><ul class="legend">{"".join(legend)}</ul></figure>')


def _kv_table(caption: str, d: Mapping[str, Any]) -> str:
    rows = []
    for k, v in d.items():
        if isinstance(v, Mapping):
            v = ", ".join(f"{a}: {_plain(b)}" for a, b in v.items())
            rows.append(f"<tr><th scope=row>{_e(k)}</th><td>{_e(v)}</td></tr>")
        else:
            rows.append(f"<tr><th scope=row>{_e(k)}</th><td>{_n(v)}</td></tr>")
    return (f'<table class="kv"><caption>{_e(caption)}</caption><tbody>{"".join(rows)}'
            "</tbody></table>")


def _plain(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _functions_section(data: ReportData) -> str:
    page = data.page
    f = page["functions"]
    n = len(f["name"])
    total = page["run"]["totals"]["samples"]
    counts = page["run"]["count_source"] in ("lbr", "inferred")
    static = ["<table><caption>The hottest functions (static list: scripts are off)"
              "</caption><thead><tr><th scope=col class=num>#</th><th scope=col>function</th>"
              "<th scope=col class=num>share</th><th scope=col class=num>samples</th>"
              + ("<th scope=col class=num>entry count</th>" if counts else "")
              + "<th scope=col class=num>blocks</th></tr></thead><tbody>"]
    for i in range(min(n, STATIC_FUNCTIONS)):
        static.append(f"<tr><td class=num>{i + 1}</td><td>{_e(f['name'][i])}</td>"
                      f"<td class=num>{_pct(f['samples'][i], total)}</td>"
                      f"<td class=num>{f['samples'][i]:,}</td>"
                      + (f"<td class=num>{f['count'][i]:,}</td>" if counts else "")
                      + f"<td class=num>{f['blocks'][i]:,}</td></tr>")
    static.append("</tbody></table>")
    if n > STATIC_FUNCTIONS:
        static.append(f"<p>... and {n - STATIC_FUNCTIONS:,} more (turn scripts on, or "
                      "<code>bbmap annotate --format text</code>).</p>")
    for i in range(len(data.static_functions)):
        static.append(_static_blocks(data.static_functions[i]))
    return (f'<section id="functions" aria-labelledby="functions-h"><h2 id="functions-h">'
            f"Hot functions ({n:,})</h2>"
            f'<div id="fn-table" class="tablebox"></div>'
            f'<noscript>{"".join(static)}</noscript></section>')


def _static_blocks(fn: dict[str, Any]) -> str:
    extra = [k for k in (fn["blocks"][0] if fn["blocks"] else {})
             if k not in ("id", "address", "size", "flags", "samples", "period", "count")]
    head = "".join(f"<th scope=col>{_e(k)}</th>" for k in ("block", "address", "size",
                                                            "samples", "count", *extra,
                                                            "flags"))
    rows = []
    for b in fn["blocks"]:
        rows.append(f"<tr><td class=num>{b['id']}</td><td class=num>{b['address']:#x}</td>"
                    f"<td class=num>{b['size']:,}</td><td class=num>{b['samples']:,}</td>"
                    f"<td class=num>{b['count']:,}</td>"
                    + "".join(f"<td class=num>{_e(json.dumps(b.get(k)))}</td>" for k in extra)
                    + f"<td>{_e(' '.join(b['flags']))}</td></tr>")
    return (f"<table><caption>{_e(fn['name'])}: blocks in address order</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _layout_section(data: ReportData) -> str:
    lay = data.page["layout"]
    if lay is None:
        return ""
    t = lay["totals"]
    fo = lay["function_order"]
    rows = lay["rows"]
    n = len(rows["name"])

    def change(a: float, b: float) -> str:
        if a == 0:
            return "new" if b > 0 else "="
        return f"{(b - a) / a * 100:+.1f}%"

    facts = [("counts", _e(lay["count_source"])), ("Ext-TSP weights", _e(lay["params"])),
             ("mode", _e(lay["mode"])),
             ("function order", _e(fo["algorithm"]) + (f" ({_e(fo['note'])})"
                                                       if fo["note"] else "")),
             ("functions laid out", _n(t["functions"]) + (
                 f" (of the hottest {lay['top']:,} of {lay['functions_reported']:,}; "
                 "<code>bbmap layout</code> plans them all)"
                 if lay["top"] is not None and lay["top"] < lay["functions_reported"]
                 else "")),
             ("intra-function score", f"{t['intra_before']:,.1f} &rarr; {t['intra_after']:,.1f}"
                                      f" ({change(t['intra_before'], t['intra_after'])})"),
             ("inter-function (calls) score",
              f"{t['inter_before']:,.1f} &rarr; {t['inter_after']:,.1f} "
              f"({change(t['inter_before'], t['inter_after'])})"),
             ("fall-throughs", f"{t['fallthrough_before']:,} &rarr; "
                               f"{t['fallthrough_after']:,} ({t['fallthrough_gained']:+,})"),
             ("hot / cold bytes", f"{t['hot_bytes']:,} / {t['cold_bytes']:,}")]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    static = ["<table><caption>Layout per function, linker order (static list: scripts are "
              "off)</caption><thead><tr><th scope=col>function</th><th scope=col class=num>"
              "hot/all blocks</th><th scope=col class=num>score before</th><th scope=col "
              "class=num>score after</th><th scope=col class=num>change</th><th scope=col "
              "class=num>hot B</th><th scope=col class=num>cold B</th></tr></thead><tbody>"]
    for i in range(min(n, STATIC_FUNCTIONS)):
        static.append(
            f"<tr><td>{_e(rows['name'][i])}</td><td class=num>{rows['hot_blocks'][i]}/"
            f"{rows['blocks'][i]}</td><td class=num>{rows['intra_before'][i]:,.1f}</td>"
            f"<td class=num>{rows['intra_after'][i]:,.1f}</td><td class=num>"
            f"{change(rows['intra_before'][i], rows['intra_after'][i])}</td>"
            f"<td class=num>{rows['hot_bytes'][i]:,}</td>"
            f"<td class=num>{rows['cold_bytes'][i]:,}</td></tr>")
    static.append("</tbody></table>")
    unm = lay["unmapped_hot_symbols"]
    note = (f"<p>Hot functions without a block map (ordered, not clustered): "
            f"{_e(', '.join(unm[:20]))}{' ...' if len(unm) > 20 else ''}</p>" if unm else "")
    return (f'<section id="layout" aria-labelledby="layout-h"><h2 id="layout-h">Layout '
            f"(bbmap layout)</h2><dl class=\"facts\">{dl}</dl>{note}"
            f'<div id="layout-table" class="tablebox"></div>'
            f'<noscript>{"".join(static)}</noscript></section>')


def _verify_section(page: dict[str, Any]) -> str:
    v = page["verify"]
    if v is None:
        return ""
    s = v["summary"]
    parts = [f'<section id="verify" aria-labelledby="verify-h"><h2 id="verify-h">PGO analysis '
             f"map vs the run (verify --profile): {'OK' if v['ok'] else 'MISMATCHED'}</h2>"]
    for e in v["errors"]:
        parts.append(f"<p class=warn>error: {_e(e)}</p>")
    rows = []
    for label, key in (("branch probabilities", "branches"), ("block frequencies", "blocks"),
                       ("entry counts", "entries")):
        d = s.get(key)
        if not d:
            continue
        rows.append(f"<tr><th scope=row>{label}</th><td class=num>{d['matched']:,}</td>"
                    f"<td class=num>{d['mismatched']:,}</td><td class=num>{d['unknown']:,}"
                    f"</td><td class=num>{d['not_sampled']:,}</td>"
                    f"<td class=num>{_n(d.get('score'))}</td></tr>")
    parts.append("<table><caption>Verdicts</caption><thead><tr><th scope=col>belief</th>"
                 "<th scope=col class=num>matched</th><th scope=col class=num>mismatched</th>"
                 "<th scope=col class=num>unknown</th><th scope=col class=num>not sampled</th>"
                 "<th scope=col class=num>score</th></tr></thead><tbody>"
                 + "".join(rows) + "</tbody></table>")
    wb = v["worst_branches"]
    if wb:
        parts.append(f"<table id=\"worst-branches\"><caption>Mismatched branches, worst first "
                     f"({len(wb):,} of {v['worst_branches_total']:,})</caption><thead><tr>"
                     "<th scope=col class=num>#</th><th scope=col>function</th><th scope=col "
                     "class=num>block</th><th scope=col class=num>successor</th><th scope=col "
                     "class=num>believed</th><th scope=col class=num>measured</th><th "
                     "scope=col>interval</th><th scope=col class=num>executions</th>"
                     "<th scope=col>source</th></tr></thead><tbody>")
        for i, r in enumerate(wb, 1):
            sw = max(r["successors"], key=lambda x: (
                abs((x["measured"] or 0) - x["believed"]), -x["id"]))
            parts.append(
                f"<tr><td class=num>{i}</td><td>{_e(r['function'])}</td><td class=num>"
                f"{r['block']}</td><td class=num>{sw['id']}</td><td class=num>"
                f"{_n(sw['believed'])}</td><td class=num>{_n(sw['measured'])}</td><td>"
                f"[{_n(sw['interval'][0])}, {_n(sw['interval'][1])}]</td><td class=num>"
                f"{_n(r['executions'])}</td><td>{_e(r['source'])}</td></tr>")
        parts.append("</tbody></table>")
    wk = v["worst_blocks"]
    if wk:
        parts.append(f"<table id=\"worst-blocks\"><caption>Mismatched block frequencies "
                     f"(relative to the entry), worst first ({len(wk):,} of "
                     f"{v['worst_blocks_total']:,})</caption><thead><tr><th scope=col "
                     "class=num>#</th><th scope=col>function</th><th scope=col class=num>"
                     "block</th><th scope=col class=num>believed</th><th scope=col class=num>"
                     "measured</th><th scope=col>interval</th><th scope=col class=num>count"
                     "</th><th scope=col class=num>entry count</th><th scope=col>source</th>"
                     "</tr></thead><tbody>")
        for i, r in enumerate(wk, 1):
            parts.append(
                f"<tr><td class=num>{i}</td><td>{_e(r['function'])}</td><td class=num>"
                f"{r['block']}</td><td class=num>{_n(r['believed'])}</td><td class=num>"
                f"{_n(r['measured'])}</td><td>[{_n(r['interval'][0])}, "
                f"{_n(r['interval'][1])}]</td><td class=num>{_n(r['count'])}</td>"
                f"<td class=num>{_n(r['entry_count'])}</td><td>{_e(r['source'])}</td></tr>")
        parts.append("</tbody></table>")
    for note in v["notes"]:
        parts.append(f"<p class=note>note: {_e(note)}</p>")
    parts.append("</section>")
    return "".join(parts)

