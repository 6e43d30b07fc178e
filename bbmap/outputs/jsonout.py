"""JSON output (shape in spec/annotate-json.md).

Written as one document with a fixed key order, each top-level value and each function
compact on its own line: diffable, greppable, byte-identical between runs.  The
functions are laid out from columns (:mod:`bbmap.outputs.columnar`): one table of
block rows, one of range rows, one of edge rows and one of the headers' numbers for all
reported functions, cut per function at the row offsets the writer returns and joined
with the names (JSON-encoded in one go when they are plain).  The bytes equal what a
dict per block through the C JSON encoder gave (``tests/oracles/render_oracle.py`` keeps
that renderer; ``tests/test_outputs_render_oracle.py`` compares them on the corpus).
"""

from __future__ import annotations

import json

import numpy as np

from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import AnnotateResult
from bbmap.formats.bbaddrmap import MD_NAMES
from bbmap.outputs.columnar import UTF8_ERRORS, Dec, Pick, cut_groups, group_sep, render_rows
from bbmap.outputs.hot_table import HotTable, edge_json_order, hot_table, range_block_sums
from bbmap.outputs.json_fragments import is_plain

_ENC = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# the "flags" list of each metadata byte, and each edge kind, as JSON text
_FLAGS_JSON = [_ENC([n for n, bit in MD_NAMES.items() if md & bit]).encode() for md in range(256)]
_KINDS_JSON = [_ENC(k).encode() for k in EDGE_KINDS]


def render_json(result: AnnotateResult, *, top: int | None = None) -> str:
    return render_json_bytes(result, top=top).decode("utf-8", UTF8_ERRORS)


def render_json_bytes(result: AnnotateResult, *, top: int | None = None) -> bytes:
    """The document as the bytes the CLI writes (no str round trip of ~15 MB)."""
    enc = _ENC
    parts = ["{"]
    for k, v in result.header_json().items():
        parts.append(f"{enc(k)}:{enc(v)},")
    parts.append(f"{enc('functions')}:[")
    out = [p.encode("utf-8", UTF8_ERRORS) for p in parts]
    out.append(_functions(result, hot_table(result, top)))
    out.append(b"],")
    out.append(f"{enc('warnings')}:{enc([d.to_json() for d in result.warnings])}".encode(
        "utf-8", UTF8_ERRORS))
    out.append(b"}")
    out.append(b"")
    return b"\n".join(out)


def _functions(r: AnnotateResult, t: HotTable) -> bytes:
    """The ``functions`` list's items, one per line, joined by ``,\\n``."""
    n = len(t.keys)
    if not n:
        return b""
    m = r.block_map
    b = t.block
    iv = r.has_intervals
    blocks = cut_groups(render_rows(len(b), [
        group_sep(t.block_ptr, b","), b'{"id":', Dec(m.block_id[b]),
        b',"address":', Dec(r.block_start[b]),
        b',"size":', Dec(m.block_size[b]), b',"flags":', Pick(_FLAGS_JSON, m.block_md[b]),
        b',"samples":', Dec(r.block_samples[b]), b',"period":', Dec(r.block_period[b]),
        b',"count":', Dec(r.block_count[b]),
        *(_interval(r.block_low[b], r.block_high[b]) if iv else ()), b"}"]), t.block_ptr)
    rg = t.rng
    lo, hi, cs, cp = range_block_sums(r, t)
    ranges = cut_groups(render_rows(len(rg), [
        group_sep(t.range_ptr, b","), b'{"address":', Dec(m.range_base[rg]),
        b',"blocks":', Dec(hi - lo),
        b',"samples":', Dec(cs[hi] - cs[lo]), b',"period":', Dec(cp[hi] - cp[lo]), b"}"]),
        t.range_ptr)
    order = edge_json_order(r, t)
    e = t.edge[order]
    cross = t.to_cross[order]
    to_text = [b""] + [_ENC(s).encode("utf-8", UTF8_ERRORS) for s in t.cross_names]
    edges = cut_groups(render_rows(len(e), [
        group_sep(t.edge_ptr, b","), b'{"from":', Dec(m.block_id[r.edge_from[e]]),
        b',"to":', Dec(m.block_id[r.edge_to[e]], where=cross < 0), Pick(to_text, cross + 1),
        b',"count":', Dec(r.edge_count[e]), b',"kind":', Pick(_KINDS_JSON, r.edge_kind[e]),
        *(_interval(r.edge_low[e], r.edge_high[e]) if iv else ()), b"}"]), t.edge_ptr)
    ft = r.functions
    keys = t.keys.tolist()
    addr = ft.address
    heads = cut_groups(render_rows(n, [
        b',"address":', Dec(np.array([addr[k] for k in keys], np.uint64)),
        b',"samples":', Dec(r.func_samples[t.keys]), b',"period":', Dec(r.func_period[t.keys]),
        b',"count":', Dec(t.entry_count), b',"ranges":[']), np.arange(n + 1))
    out: list = [None] * (8 * n + 1)
    out[0] = b'{"name":'
    out[1::8] = _names([ft.names[k] for k in keys])
    out[2::8] = heads
    out[3::8] = ranges
    out[4::8] = [b'],"blocks":['] * n
    out[5::8] = blocks
    out[6::8] = [b'],"edges":['] * n
    out[7::8] = edges
    out[8::8] = [b']},\n{"name":'] * (n - 1) + [b"]}"]
    return b"".join(out)


def _interval(low: np.ndarray, high: np.ndarray) -> tuple:
    """``,"interval":[low,high]`` (``null`` for an unbounded high, stored as -1)."""
    bounded = high >= 0
    return (b',"interval":[', Dec(low), b",", Dec(high, where=bounded),
            Pick([b"null", b""], bounded.astype(np.int64)), b"]")


def _names(names: list[str]) -> list[bytes]:
    """Each name as a JSON string (bytes): the usual plain names in one encode."""
    joined = "".join(names)
    if is_plain(joined):  # printable ASCII: no NUL either, so NUL can cut them apart
        return ('"' + '"\0"'.join(names) + '"').encode().split(b"\0")
    return [_ENC(s).encode("utf-8", UTF8_ERRORS) for s in names]

