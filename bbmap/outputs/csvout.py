"""CSV output: one table, one schema, three record kinds.

``record`` is ``block`` (a block of a reported function), ``edge`` (a taken or
fall-through edge; ``id`` is the source block, ``to`` the target, ``name:id`` across
functions) or ``bucket`` (an accounting bucket, so the totals travel with the data).
``source`` says where a block's or edge's ``count`` comes from: ``lbr`` (branch stacks)
or ``inferred`` (min-cost flow from IP samples, spec/inference.md); empty without counts.
Inferred counts carry ``low`` and ``high``, their interval (``high`` empty: unbounded), and
one ``sample_model`` record names the model (``id``) and the event (``function``).
Spreadsheets and pandas can filter on the first column.

The block and edge rows are laid out from columns (:mod:`bbmap.outputs.columnar`);
each row starts with a marker byte that no name holds, replaced per function by its
``block,<name>,`` / ``edge,<name>,`` prefix (a name can be kilobytes of C++ template:
it is written once per function, not padded into every row).  Fields are quoted as
``csv.writer`` quotes them, and the bytes equal its output
(``tests/test_outputs_render_oracle.py``).
"""

from __future__ import annotations

import csv
import io

import numpy as np

from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import AnnotateResult
from bbmap.formats.bbaddrmap import MD_NAMES
from bbmap.outputs.columnar import UTF8_ERRORS, Dec, Hex, Pick, cut_groups, render_rows
from bbmap.outputs.hot_table import hot_table

COLUMNS = ("record", "function", "id", "address", "size", "flags", "samples", "period",
           "count", "to", "kind", "source", "low", "high")
_FLAGS_CSV = ["|".join(n for n, bit in MD_NAMES.items() if md & bit).encode() for md in range(256)]
_KINDS_CSV = [k.encode() for k in EDGE_KINDS]
# a function's ``block,<name>,`` prefix is a column of every row while the names are at
# most this long; past it (kilobytes of C++ template) a marker byte starts each row and
# is replaced by the prefix once per function, so the row matrix stays narrow
PREFIX_PICK_BYTES = 96
_QUOTE_IF = (",", '"', "\r", "\n")  # csv.writer's QUOTE_MINIMAL triggers (and more is safe)


def csv_fields(texts: list[str]) -> list[str]:
    """Each text as ``csv.writer`` writes it in a row of several fields."""
    joined = "".join(texts)
    if not any(c in joined for c in _QUOTE_IF):  # the usual case: nothing to quote
        return list(texts)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    out = []
    for s in texts:
        if not any(c in s for c in _QUOTE_IF):
            out.append(s)
            continue
        buf.seek(0)
        buf.truncate()
        w.writerow((s, ""))
        out.append(buf.getvalue()[:-2])
    return out


def render_csv(result: AnnotateResult, *, top: int | None = None) -> str:
    return render_csv_bytes(result, top=top).decode("utf-8", UTF8_ERRORS)


def render_csv_bytes(result: AnnotateResult, *, top: int | None = None) -> bytes:
    """The table as the bytes the CLI writes."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    head = buf.getvalue().encode("utf-8", UTF8_ERRORS)
    body = _rows(result, top)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    a = result.accounting
    per = a.period_buckets()
    sm = result.sample_model if result.has_intervals else None
    if sm is not None:
        w.writerow(("sample_model", sm["event"], sm["model"], "", "", "", "", "", "", "", "",
                    "inferred", "", ""))
    for name, n in a.sample_buckets().items():
        w.writerow(("bucket", "", name, "", "", "", n, per[name], "", "", "samples", "", "",
                    ""))
    for name, n in a.dso_samples.items():
        w.writerow(("bucket", name, "other_dso", "", "", "", n, "", "", "", "samples", "", "",
                    ""))
    if a.total_branches:
        for name, n in a.branch_buckets().items():
            w.writerow(("bucket", "", name, "", "", "", "", "", n, "", "branches", "", "",
                        ""))
    return b"".join([head, body, buf.getvalue().encode("utf-8", UTF8_ERRORS)])


def _rows(r: AnnotateResult, top: int | None) -> bytes:
    t = hot_table(r, top)
    n = len(t.keys)
    if not n:
        return b""
    m = r.block_map
    src = (r.count_source if r.has_counts else "").encode()
    iv = r.has_intervals
    names = [s.encode("utf-8", UTF8_ERRORS) for s in
             csv_fields([r.functions.names[k] for k in t.keys.tolist()])]
    cross = [s.encode("utf-8", UTF8_ERRORS) for s in csv_fields(t.cross_names)]
    mark = b""
    if max(map(len, names)) > PREFIX_PICK_BYTES:
        mark = _marker(names + cross)
    fpos = np.arange(n)
    b = t.block
    blocks = cut_groups(render_rows(len(b), [
        mark or Pick([b"block," + s + b"," for s in names], np.repeat(fpos, np.diff(t.block_ptr))),
        Dec(m.block_id[b]), b",0x", Hex(r.block_start[b]), b",",
        Dec(m.block_size[b]), b",", Pick(_FLAGS_CSV, m.block_md[b]), b",",
        Dec(r.block_samples[b]), b",", Dec(r.block_period[b]), b",", Dec(r.block_count[b]),
        b",,," + src, *(_bounds(r.block_low[b], r.block_high[b]) if iv else (b",,",)),
        b"\n"]), t.block_ptr)
    e = t.edge
    edges = cut_groups(render_rows(len(e), [
        mark or Pick([b"edge," + s + b"," for s in names], np.repeat(fpos, np.diff(t.edge_ptr))),
        Dec(m.block_id[r.edge_from[e]]), b",,,,,,", Dec(r.edge_count[e]), b",",
        Dec(m.block_id[r.edge_to[e]], where=t.to_cross < 0),
        Pick([b""] + cross, t.to_cross + 1), b",", Pick(_KINDS_CSV, r.edge_kind[e]),
        b"," + src, *(_bounds(r.edge_low[e], r.edge_high[e]) if iv else (b",,",)),
        b"\n"]), t.edge_ptr)
    out: list = [None] * (2 * n)
    if not mark:  # each row carries its prefix
        out[0::2], out[1::2] = blocks, edges
        return b"".join(out)
    out = []
    for name, x, y in zip(names, blocks, edges):
        out.append(x.replace(mark, b"block," + name + b","))
        if y:
            out.append(y.replace(mark, b"edge," + name + b","))
    return b"".join(out)


def _bounds(low: np.ndarray, high: np.ndarray) -> tuple:
    """``,low,high`` (high empty when unbounded, stored as -1)."""
    return b",", Dec(low), b",", Dec(high, where=high >= 0)


def _marker(texts: list[bytes]) -> bytes:
    """A control byte that none of ``texts`` holds (the rows' other fields are digits,
    flag and kind names), or ``b""`` if there is none."""
    joined = b"".join(texts)
    for c in range(1, 32):
        if c not in (9, 10, 13) and bytes([c]) not in joined:
            return bytes([c])
    return b""
