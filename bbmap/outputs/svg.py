"""Pictures of block heat, as self-contained SVG: a per-function layout view and a
whole-binary heat strip.

Written by hand rather than through graphviz because a layout engineer wants the blocks
where the linker put them (one column per range, address order, height by byte size),
which a graph layouter would rearrange; and because the output must be byte-identical
for the same input (reviewable diffs, cacheable artefacts).  Every number is formatted
with a fixed precision and every list is iterated in a defined order for that reason.

What a picture shows (function data, heat scale, palette) is :mod:`bbmap.outputs.picture`,
shared with the DOT output.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bbmap.aggregate.result import AnnotateResult
from bbmap.errors import BBMapError
from bbmap.formats.bbaddrmap import (
    MD_CAN_FALL_THROUGH,
)
from bbmap.outputs.picture import (
    C_BACK,
    C_CROSS,
    C_FT,
    C_FT_NONE,
    C_FWD,
    MARKS,
    MAX_EDGES,
    RAMP,
    ZERO_FILL,
    Edge,
    FunctionData,
    HeatScale,
    PictureContext,
    block_marks,
    block_tooltip,
    function_data,
    grouped,
)

FONT_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, monospace"

# geometry (px)
MARGIN = 16
CH = 6.6  # width of one character at 11px monospace
BOX_W = 300
GUTTER = 52  # left of each column: fall-through counts
MIN_H = 20
MIN_H_COLD = 6  # cold blocks of a big function
GAP = 10  # between consecutive blocks: the fall-through connector
GAP_COMPACT = 4  # ... in a big function, unless the fall-through has a count
COMPACT_BLOCKS = 120
COL_HEAD = 38
ARC_BASE = 16
LANE_W = 8
MAX_LANES = 32
ARC_LABEL_W = 56
COL_GAP = 28
LEGEND_W = 1010
BOX_KEY = "box: ID, address, s samples"
BOX_KEY_LBR = "box: ID, address, n LBR count, s samples"


# ------------------------------------------------------------------------ text helpers
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def esc(s: object) -> str:
    """Text or attribute value safe for XML: ``<>&"'`` escaped, characters XML 1.0
    forbids (and lone surrogates from undecodable names) replaced."""
    t = str(s).encode("utf-8", "replace").decode("utf-8")
    return html.escape(_BAD_XML.sub("?", t), quote=True)


def clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(n - 1, 1)] + "\u2026"


def _f(x: float) -> str:
    """Fixed precision keeps the output byte-identical across runs and platforms."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


# ------------------------------------------------------------------------ SVG pieces
def _defs() -> str:
    marks = []
    for name, colour in (("fwd", C_FWD), ("back", C_BACK), ("cross", C_CROSS),
                         ("ext", C_FT)):
        marks.append(f'<marker id="arr-{name}" viewBox="0 0 10 10" refX="9" refY="5" '
                     f'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" '
                     f'orient="auto"><path d="M0,1 L10,5 L0,9 z" fill="{colour}"/></marker>')
    stops = "".join(f'<stop offset="{_f(100 * i / (len(RAMP) - 1))}%" stop-color="{c}"/>'
                    for i, c in enumerate(RAMP))
    return ("<defs>" + "".join(marks) + f'<linearGradient id="heat-ramp">{stops}'
            "</linearGradient></defs>")


_STYLE = (
    "<style>"
    f"text{{font-family:{FONT_FAMILY};font-size:11px}}"
    ".title{font-size:15px;font-weight:bold}.sub{fill:#444}.small{font-size:9px}"
    ".blk{stroke:#5a5a5a;stroke-width:0.8}.cell{stroke:none}"
    ".edge{fill:none;stroke-linecap:round}.lbl{font-size:9px;paint-order:stroke;"
    "stroke:#ffffff;stroke-width:3px;stroke-linejoin:round}"
    ".badge{fill:#ffffff;stroke:#333333;stroke-width:0.7}.badget{font-size:8px}"
    ".wall{fill:#1a1a1a}.colhead{font-size:10px;fill:#333}.id{font-weight:bold}"
    "</style>"
)


def _badge(x: float, y: float, text: str) -> tuple[str, float]:
    w = len(text) * 5.2 + 6
    return (f'<rect class="badge" x="{_f(x)}" y="{_f(y - 8)}" width="{_f(w)}" height="11" '
            f'rx="2"/><text class="badget" x="{_f(x + 3)}" y="{_f(y)}">{esc(text)}</text>',
            w)


def _legend(scale: HeatScale, x: float, y: float, *, edges: bool, lbr: bool = False
            ) -> tuple[list[str], float]:
    """Colour bar with ticks, then the marks and edge styles; returns (svg, height)."""
    o = [f'<g class="legend" transform="translate({_f(x)},{_f(y)})">',
         f'<text x="0" y="10">heat: {esc(scale.title)}</text>']
    bw = 220
    o.append(f'<rect x="0" y="16" width="14" height="12" fill="{ZERO_FILL}" '
             'stroke="#888" stroke-width="0.6"/><text class="small" x="3" y="40">0</text>')
    o.append(f'<rect x="20" y="16" width="{bw}" height="12" fill="url(#heat-ramp)" '
             'stroke="#888" stroke-width="0.6"/>')
    for v in scale.ticks(bw):
        tx = 20 + scale.position(v) * bw
        o.append(f'<line x1="{_f(tx)}" y1="28" x2="{_f(tx)}" y2="32" stroke="#555"/>'
                 f'<text class="small" x="{_f(tx)}" y="41" text-anchor="middle">'
                 f'{esc(_compact(v))}</text>')
    if edges:
        mx = 280
        o.append(f'<text x="{mx}" y="10">marks</text>')
        cx = mx
        for _, badge, text in MARKS:
            svg, w = _badge(cx, 26, badge)
            o.append(svg)
            o.append(f'<text class="small" x="{_f(cx + w + 3)}" y="26">{esc(text)}</text>')
            cx += w + 8 + len(text) * 5.4
        o.append(f'<rect x="{mx}" y="33" width="22" height="9" fill="#fee"/>'
                 f'<rect class="wall" x="{mx}" y="39.5" width="22" height="3"/>'
                 f'<text class="small" x="{mx + 27}" y="42">cannot fall through</text>'
                 f'<text class="small" x="{mx + 160}" y="42">'
                 f'{esc(BOX_KEY_LBR if scale.metric == "count" or lbr else BOX_KEY)}</text>')
        ex = 760
        title = "edges (width: log count)" if lbr else "edges (counted only with LBR)"
        o.append(f'<text x="{ex}" y="10">{title}</text>')
        rows = (("fwd", C_FWD, "", "forward branch"), ("back", C_BACK, "", "back edge (loop)"),
                ("cross", C_CROSS, ' stroke-dasharray="5 3"', "to another range"),
                (None, C_FT, "", "fall-through"))
        for i, (mk, colour, dash, text) in enumerate(rows):
            lx, ly = ex + (i % 2) * 125, 22 + (i // 2) * 14
            arrow = f' marker-end="url(#arr-{mk})"' if mk else ""
            if mk:
                o.append(f'<line class="edge" x1="{lx}" y1="{ly - 3}" x2="{lx + 22}" '
                         f'y2="{ly - 3}" stroke="{colour}" stroke-width="2"{dash}{arrow}/>')
            else:
                o.append(f'<line class="edge" x1="{lx + 11}" y1="{ly - 8}" x2="{lx + 11}" '
                         f'y2="{ly + 2}" stroke="{colour}" stroke-width="3"/>')
            o.append(f'<text class="small" x="{lx + 27}" y="{ly}">{esc(text)}</text>')
    o.append("</g>")
    return o, 48


def _compact(v: int) -> str:
    for div, suf in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if v >= div:
            q = v / div
            return (f"{q:.0f}" if q >= 10 or q == int(q) else f"{q:.1f}") + suf
    return str(v)


def _width(t: float, tmax: float, lo: float = 1.0, hi: float = 6.0) -> float:
    """Stroke width for a count, log scale like the fill."""
    if t <= 0 or tmax <= 0:
        return lo
    return lo + (hi - lo) * min(math.log1p(t) / math.log1p(tmax), 1.0)


def _opacity(t: float, tmax: float) -> float:
    """Light edges fade (0.3 .. 0.9) so a fan of hundreds (a jump table) stays a haze
    around the heavy edges instead of a solid band."""
    if t <= 0 or tmax <= 0:
        return 0.3
    return 0.3 + 0.6 * min(math.log1p(t) / math.log1p(tmax), 1.0)


def _assign_lanes(spans: list[tuple[float, float]]) -> list[int]:
    """Interval colouring: shortest spans nearest the column, nested ones outside."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][1] - spans[i][0], i))
    lanes: list[list[tuple[float, float]]] = []
    out = [0] * len(spans)
    for i in order:
        lo, hi = spans[i]
        for li, used in enumerate(lanes):
            if all(hi + 3 < a or lo - 3 > b for a, b in used):
                used.append((lo, hi))
                out[i] = li
                break
        else:
            if len(lanes) < MAX_LANES:
                lanes.append([(lo, hi)])
                out[i] = len(lanes) - 1
            else:
                lanes[-1].append((lo, hi))
                out[i] = len(lanes) - 1
    return out


@dataclass
class _Box:
    x: float
    y: float
    h: float
    col: int


@dataclass
class _Layout:
    """Where one function's picture puts everything."""

    boxes: dict[int, _Box]  # block -> its box
    col_h: list[float]  # each column's height
    col_x: list[float]  # each column's box x
    ends: dict[int, tuple[float, float]]  # id(edge) -> arc ends, for arcs inside a column
    lane_of: dict[int, int]  # id(edge) -> lane, for arcs inside a column
    width: float


_HEAD_H = 52  # title and subtitle
_LEGEND_H = 52
_TOP = _HEAD_H + _LEGEND_H + 8  # where the columns start


def _place_boxes(ctx: PictureContext, fd: FunctionData, ppb: float
                 ) -> tuple[dict[int, _Box], list[float]]:
    """Vertical placement, per column.  A big function keeps every block, but its cold
    ones (no heat, no drawn edge) shrink to thin unlabelled boxes (the tooltip still
    tells all), so the hot code stands out."""
    m, vals = ctx.result.block_map, ctx.values
    boxes: dict[int, _Box] = {}
    col_h: list[float] = []
    compact = len(fd.blocks) > COMPACT_BLOCKS
    touched = {b for e in fd.taken for b in (e.src, e.dst)} | set(fd.fall)
    touched |= {nxt for c in fd.columns for b, nxt in zip(c.blocks, c.blocks[1:])
                if b in fd.fall}
    for ci, c in enumerate(fd.columns):
        y = _TOP + COL_HEAD
        gap = GAP
        for b in c.blocks:
            cold = compact and vals[b] == 0 and b not in touched
            h = max(MIN_H_COLD if cold else MIN_H, int(m.block_size[b]) * ppb)
            boxes[b] = _Box(0.0, y, h, ci)
            gap = GAP if not compact or b in fd.fall else GAP_COMPACT
            y += h + gap
        col_h.append(y - gap - _TOP)
    return boxes, col_h


def _layout(ctx: PictureContext, fd: FunctionData) -> _Layout:
    """Boxes, then lanes for arcs inside each column, then horizontal placement."""
    m = ctx.result.block_map
    col_bytes = max((sum(int(m.block_size[b]) for b in c.blocks) for c in fd.columns),
                    default=0)
    ppb = 1.5 if col_bytes * 1.5 <= 2400 else max(0.25, 2400 / max(col_bytes, 1))
    boxes, col_h = _place_boxes(ctx, fd, ppb)
    inside = [e for e in fd.taken if boxes[e.src].col == boxes[e.dst].col]
    ends = {id(e): _arc_ends(boxes[e.src], boxes[e.dst]) for e in inside}
    lane_of: dict[int, int] = {}
    nlanes = [0] * len(fd.columns)
    for ci in range(len(fd.columns)):
        es = [e for e in inside if boxes[e.src].col == ci]
        spans = [(min(ends[id(e)]), max(ends[id(e)])) for e in es]
        for e, ln in zip(es, _assign_lanes(spans)):
            lane_of[id(e)] = ln
            nlanes[ci] = max(nlanes[ci], ln + 1)
    col_x: list[float] = []
    x = MARGIN
    for ci in range(len(fd.columns)):
        col_x.append(x + GUTTER)
        x += GUTTER + BOX_W + ARC_BASE + nlanes[ci] * LANE_W + ARC_LABEL_W + COL_GAP
    for bx in boxes.values():
        bx.x = col_x[bx.col]
    width = max(x - COL_GAP + MARGIN, LEGEND_W + 2 * MARGIN)
    return _Layout(boxes, col_h, col_x, ends, lane_of, width)


def _header_svg(ctx: PictureContext, fd: FunctionData, scale: HeatScale,
                width: float) -> list[str]:
    """Title, the function's figures, the legend."""
    r, m = ctx.result, ctx.result.block_map
    total_bytes = sum(int(m.block_size[b]) for b in fd.blocks)
    pct = (100.0 * fd.samples / r.accounting.total_samples
           if r.accounting.total_samples else 0.0)
    o = [f'<text class="title" x="{MARGIN}" y="22">'
         f'{esc(clip(fd.name, int((width - 2 * MARGIN) / 9)))}</text>']
    sub = (f"{fd.address:#x} \u00b7 {len(fd.columns)} range(s) \u00b7 {len(fd.blocks)} "
           f"blocks \u00b7 {total_bytes} B \u00b7 {grouped(fd.samples)} samples "
           f"({pct:.1f}% of all)")
    if r.has_lbr:
        sub += f" \u00b7 entry count {grouped(fd.entry_count)} (LBR)"
    o.append(f'<text class="sub" x="{MARGIN}" y="40">{esc(sub)}</text>')
    leg, _ = _legend(scale, MARGIN, _HEAD_H, edges=True, lbr=r.has_lbr)
    return o + leg


def _columns_svg(ctx: PictureContext, fd: FunctionData, lay: _Layout, scale: HeatScale,
                 emax: int) -> list[str]:
    """Each column: its header, the fall-through connectors, the block boxes."""
    r, m = ctx.result, ctx.result.block_map
    id_w = max((len(str(int(m.block_id[b]))) for b in fd.blocks), default=1) * CH + 10
    ad_w = max((len(f"{int(ctx.start[b]):#x}") for b in fd.blocks), default=1) * CH + 10
    boxes = lay.boxes
    o: list[str] = []
    for ci, c in enumerate(fd.columns):
        cx = lay.col_x[ci]
        cb = sum(int(m.block_size[b]) for b in c.blocks)
        cs = sum(int(r.block_samples[b]) for b in c.blocks)
        what = "entry" if c.entry else "part"
        label = f" {c.label}" if c.label else ""
        o.append(f'<text class="colhead" x="{_f(cx)}" y="{_f(_TOP + 13)}">'
                 f'{esc(f"{what}{label} @ {c.base:#x}")}</text>')
        o.append(f'<text class="colhead" x="{_f(cx)}" y="{_f(_TOP + 27)}">'
                 f'{esc(f"{len(c.blocks)} blocks, {cb} B, {grouped(cs)} samples")}</text>')
        for b, nb in zip(c.blocks, c.blocks[1:]):
            bb, nbx = boxes[b], boxes[nb]
            lx, y1, y2 = cx + 18, bb.y + bb.h, nbx.y
            if b in fd.fall:
                w = _width(fd.fall[b], emax)
                o.append(f'<line class="edge ft" x1="{_f(lx)}" y1="{_f(y1)}" x2="{_f(lx)}" '
                         f'y2="{_f(y2)}" stroke="{C_FT}" stroke-width="{_f(w)}" '
                         f'data-from="{int(m.block_id[b])}" data-to="{int(m.block_id[nb])}" '
                         f'data-count="{fd.fall[b]}"/>')
                o.append(f'<text class="lbl" x="{_f(cx - 4)}" y="{_f((y1 + y2) / 2 + 3)}" '
                         f'text-anchor="end">{esc(_compact(fd.fall[b]))}</text>')
            elif int(m.block_md[b]) & MD_CAN_FALL_THROUGH:
                o.append(f'<line class="edge ft0" x1="{_f(lx)}" y1="{_f(y1)}" x2="{_f(lx)}" '
                         f'y2="{_f(y2)}" stroke="{C_FT_NONE}" stroke-width="1"/>')
        for b in c.blocks:
            o += _block_svg(ctx, fd, b, boxes[b], scale, id_w, ad_w, r.has_lbr)
    return o


def _edge_path(ctx: PictureContext, e: Edge, lay: _Layout
               ) -> tuple[str, str, str, float, float, str, str]:
    """An arc beside its column (back or forward) or a dashed curve to another column:
    (path, colour, marker, label x, label y, class, dash)."""
    sb, db = lay.boxes[e.src], lay.boxes[e.dst]
    if sb.col == db.col:
        y_a, y_b = lay.ends[id(e)]
        d = ARC_BASE + lay.lane_of[id(e)] * LANE_W
        x1 = sb.x + BOX_W
        back = int(ctx.start[e.dst]) <= int(ctx.start[e.src])
        colour, mk = (C_BACK, "back") if back else (C_FWD, "fwd")
        k = d / 0.75  # control offset that puts the apex at x1 + d
        path = (f"M{_f(x1)},{_f(y_a)} C{_f(x1 + k)},{_f(y_a)} {_f(x1 + k)},{_f(y_b)} "
                f"{_f(x1 + 1)},{_f(y_b)}")
        return path, colour, mk, x1 + d + 3, (y_a + y_b) / 2 + 3, "edge taken", ""
    right = db.col > sb.col
    sx = sb.x + BOX_W if right else sb.x
    tx = db.x if right else db.x + BOX_W
    sy, ty = sb.y + sb.h - 5, db.y + 5
    k = max(40.0, abs(tx - sx) / 2)
    k1, k2 = (k, -k) if right else (-k, k)
    path = (f"M{_f(sx)},{_f(sy)} C{_f(sx + k1)},{_f(sy)} {_f(tx + k2)},{_f(ty)} "
            f"{_f(tx)},{_f(ty)}")
    lx = (sx + 3 * (sx + k1) + 3 * (tx + k2) + tx) / 8 + 3
    ly = (sy + 3 * sy + 3 * ty + ty) / 8 - 3
    return path, C_CROSS, "cross", lx, ly, "edge taken cross", ' stroke-dasharray="6 3"'


def _taken_svg(ctx: PictureContext, fd: FunctionData, lay: _Layout, emax: int
               ) -> list[str]:
    """Taken edges, lightest first so the heavy ones stay on top, then the labels of
    the heaviest above every edge, so no later arc hides a count."""
    m = ctx.result.block_map
    drawn = sorted(fd.taken, key=lambda e: (e.count, -e.src, -e.dst, e.kind))
    label_min = sorted((e.count for e in fd.taken), reverse=True)[:24]
    label_floor = label_min[-1] if label_min else 0
    o: list[str] = []
    labels: list[str] = []
    for e in drawn:
        w = _width(e.count, emax)
        attrs = (f'data-from="{int(m.block_id[e.src])}" data-to="{int(m.block_id[e.dst])}" '
                 f'data-kind="{e.kind}" data-count="{e.count}"')
        path, colour, mk, lx, ly, cls, dash = _edge_path(ctx, e, lay)
        # an edge into another range is what a split costs: never let it fade out
        op = _opacity(e.count, emax) if mk != "cross" else max(0.75, _opacity(e.count, emax))
        o.append(f'<path class="{cls}" d="{path}" stroke="{colour}" stroke-width="{_f(w)}" '
                 f'stroke-opacity="{_f(op)}"{dash} marker-end="url(#arr-{mk})" {attrs}>'
                 f"<title>{esc(_edge_title(ctx, e))}</title></path>")
        if e.count >= label_floor and e.count > 0:
            labels.append(f'<text class="lbl" x="{_f(lx)}" y="{_f(ly)}" fill="{colour}">'
                          f"{esc(_compact(e.count))}</text>")
    return o + labels


def _function_svg(ctx: PictureContext, fd: FunctionData, anchor: str, y0: float
                  ) -> tuple[list[str], float, float]:
    """One function's picture as a group at ``y0``; returns (svg, width, height)."""
    blocks = fd.blocks
    scale = HeatScale(ctx.metric, int(ctx.values[blocks].max()) if blocks else 0)
    lay = _layout(ctx, fd)
    width = lay.width
    o = [f'<g id="{anchor}" class="function" data-name="{esc(fd.name)}" '
         f'transform="translate(0,{_f(y0)})">', f"<title>{esc(fd.name)}</title>"]
    o += _header_svg(ctx, fd, scale, width)
    ftmax = max(fd.fall.values(), default=0)
    emax = max([e.count for e in fd.taken] + [ftmax, 0])
    o += _columns_svg(ctx, fd, lay, scale, emax)
    o += _taken_svg(ctx, fd, lay, emax)
    # footer: edges leaving / entering the function, omitted edges
    y = _TOP + max(lay.col_h, default=0) + 22
    for line in _footer_lines(ctx, fd, int((width - 2 * MARGIN) / CH)):
        o.append(f'<text class="sub" x="{MARGIN}" y="{_f(y)}">{esc(line)}</text>')
        y += 15
    o.append("</g>")
    return o, width, y + 4


def _arc_ends(sb: _Box, db: _Box) -> tuple[float, float]:
    """A branch leaves near the bottom of its block and enters at the top of the target."""
    return sb.y + sb.h - 5, db.y + 5


def _edge_title(ctx: PictureContext, e: Edge) -> str:
    m = ctx.result.block_map
    return (f"bb {int(m.block_id[e.src])} -> bb {int(m.block_id[e.dst])}: "
            f"{e.kind}, {grouped(e.count)}")


def _footer_lines(ctx: PictureContext, fd: FunctionData, width_chars: int) -> list[str]:
    m = ctx.result.block_map
    lines = []

    def agg(edges: list[Edge], outgoing: bool) -> list[str]:
        tot: dict[tuple[int, str, str], int] = {}
        for e in edges:
            own, other = (e.src, e.dst) if outgoing else (e.dst, e.src)
            k = (int(m.block_id[own]), ctx.name_of_block(other), e.kind)
            tot[k] = tot.get(k, 0) + e.count
        items = sorted(tot.items(), key=lambda kv: (-kv[1], kv[0]))
        arrow = "->" if outgoing else "<-"
        return [f"bb {bid} {arrow} {clip(name, 40)} ({kind}) {grouped(c)}"
                for (bid, name, kind), c in items]

    for title, items in (("to other functions: ", agg(fd.out, True)),
                         ("from other functions: ", agg(fd.into, False))):
        if not items:
            continue
        text = title
        shown = 0
        for it in items:
            if len(text) + len(it) + 3 > width_chars:
                break
            text += ("; " if shown else "") + it
            shown += 1
        if shown < len(items):
            text += f"; +{len(items) - shown} more"
        lines.append(text)
    if fd.omitted_edges:
        lines.append(f"{fd.omitted_edges} lighter taken edge(s) not drawn "
                     f"(the {MAX_EDGES} heaviest are)")
    return lines


def _block_svg(ctx: PictureContext, fd: FunctionData, b: int, bx: _Box, scale: HeatScale,
               id_w: float, ad_w: float, lbr: bool) -> list[str]:
    r, m = ctx.result, ctx.result.block_map
    v = int(ctx.values[b])
    fill, ink = scale.fill(v), scale.ink(v)
    bid, md = int(m.block_id[b]), int(m.block_md[b])
    smp, cnt = int(r.block_samples[b]), int(r.block_count[b])
    x, y, h = bx.x, bx.y, bx.h
    ty = y + (h / 2 + 4 if h < 34 else 14)
    o = [f'<g class="block" data-block="{bid}" data-index="{b}" data-samples="{smp}" '
         f'data-count="{cnt}" data-md="{md}">',
         f"<title>{esc(block_tooltip(ctx, fd, b))}</title>",
         f'<rect class="blk" x="{_f(x)}" y="{_f(y)}" width="{BOX_W}" height="{_f(h)}" '
         f'fill="{fill}"/>']
    if not md & MD_CAN_FALL_THROUGH:
        wh = 3.0 if h >= 14 else 1.0
        o.append(f'<rect class="wall" x="{_f(x)}" y="{_f(y + h - wh)}" width="{BOX_W}" '
                 f'height="{_f(wh)}"/>')
    if h < 14:  # a thin cold block of a big function: the tooltip has the details
        o.append("</g>")
        return o
    o.append(f'<text class="id" x="{_f(x + 6)}" y="{_f(ty)}" fill="{ink}">{bid}</text>'
             f'<text x="{_f(x + 6 + id_w)}" y="{_f(ty)}" fill="{ink}">'
             f"{int(ctx.start[b]):#x}</text>")
    right = f"n {grouped(cnt)}  s {grouped(smp)}" if lbr else f"s {grouped(smp)}"
    o.append(f'<text x="{_f(x + BOX_W - 6)}" y="{_f(ty)}" text-anchor="end" fill="{ink}">'
             f"{esc(right)}</text>")
    cx = x + 6 + id_w + ad_w
    for badge in block_marks(md):
        svg, w = _badge(cx, ty - 0.5, badge)
        o.append(svg)
        cx += w + 3
    if h >= 34:
        o.append(f'<text class="small" x="{_f(x + 6)}" y="{_f(y + 28)}" fill="{ink}">'
                 f"{int(m.block_size[b])} B</text>")
    o.append("</g>")
    return o


# ------------------------------------------------------------------------ overview
NAME_CHARS = 44
STRIP_W = 620
ROW_H = 16
ROW_GAP = 5
MIN_HOT_CELL = 3.0
OVERVIEW_NOTE = ("one row per function, one cell per block in address order "
                 "(ranges split by a gap), width by byte size")


def _overview_svg(ctx: PictureContext, keys: Sequence[int], anchors: Mapping[int, str],
                  y0: float) -> tuple[list[str], float, float]:
    """Heat strip of ``keys``: one row per function, one cell per block, one scale."""
    r, m = ctx.result, ctx.result.block_map
    per_key = []
    for k in keys:
        blk = []
        for f in r.functions.bmfuncs[k]:
            for rg in m.function_ranges(f):
                bl = sorted(m.range_blocks(rg), key=lambda b: (int(m.block_offset[b]), b))
                blk.append((int(m.range_base[rg]), rg, bl))
        blk.sort()
        per_key.append((k, [bl for _, _, bl in blk]))
    allb = [b for _, rs in per_key for bl in rs for b in bl]
    scale = HeatScale(ctx.metric, int(ctx.values[allb].max()) if allb else 0)
    name_w = NAME_CHARS * CH + 12
    sx = MARGIN + name_w
    width = max(sx + STRIP_W + 190 + MARGIN, LEGEND_W / 2)
    base = os.path.basename(r.binary)
    o = [f'<g id="overview" class="overview" transform="translate(0,{_f(y0)})">',
         f'<text class="title" x="{MARGIN}" y="22">'
         f'{esc(f"Hottest {len(keys)} function(s) of {base}")}</text>',
         f'<text class="sub" x="{MARGIN}" y="40">'
         f"{esc(OVERVIEW_NOTE)}</text>"]
    leg, _ = _legend(scale, MARGIN, 50, edges=False)
    o += leg
    y = 50 + 56
    lbr = r.has_lbr
    o.append(f'<text class="colhead" x="{_f(sx + STRIP_W + 10)}" y="{_f(y - 4)}">samples</text>')
    if lbr:
        o.append(f'<text class="colhead" x="{_f(sx + STRIP_W + 100)}" y="{_f(y - 4)}">'
                 "entry count</text>")
    for k, ranges in per_key:
        name = r.functions.names[k]
        href = anchors.get(k)
        o.append(f'<g class="fnrow" data-name="{esc(name)}" data-blocks='
                 f'"{sum(len(bl) for bl in ranges)}"><title>{esc(name)}</title>')
        label = f'<text x="{MARGIN}" y="{_f(y + 12)}">{esc(clip(name, NAME_CHARS))}</text>'
        o.append(f'<a href="#{href}">{label}</a>' if href else label)
        o += _strip(ctx, ranges, scale, sx, y)
        o.append(f'<text x="{_f(sx + STRIP_W + 10)}" y="{_f(y + 12)}">'
                 f"{grouped(int(r.func_samples[k]))}</text>")
        if lbr and ranges and ranges[0]:
            first = _entry_block(r, k)
            o.append(f'<text x="{_f(sx + STRIP_W + 100)}" y="{_f(y + 12)}">'
                     f"{grouped(int(r.block_count[first]))}</text>")
        o.append("</g>")
        y += ROW_H + ROW_GAP
    o.append("</g>")
    return o, width, y + 8


def _entry_block(r: AnnotateResult, k: int) -> int:
    m = r.block_map
    f = r.functions.bmfuncs[k][0]
    return int(m.range_block_ptr[int(m.func_range_ptr[f])])


def _cell_widths(ctx: PictureContext, blocks: list[int], avail: float) -> dict[int, float]:
    """Widths by byte size, except that a block with heat is never thinner than
    MIN_HOT_CELL px: in a function of a thousand blocks a hot 60-byte block would
    otherwise be one pixel, and the strip would hide what it is for."""
    m = ctx.result.block_map
    size = {b: float(m.block_size[b]) for b in blocks}
    total = sum(size.values())
    floor = 0.3 * total / len(blocks) if total else 1.0
    wts = {b: max(size[b], floor) for b in blocks}
    hot = [b for b in blocks if ctx.values[b] > 0]
    pinned: set[int] = set()

    def unit() -> float:
        free = sum(w for b, w in wts.items() if b not in pinned)
        return (avail - MIN_HOT_CELL * len(pinned)) / free if free > 0 else 0.0

    while True:  # pinning cells shrinks the others; each pass pins one more at least
        u = unit()
        grow = {b for b in hot if b not in pinned and wts[b] * u < MIN_HOT_CELL}
        if not grow or MIN_HOT_CELL * (len(pinned) + len(grow)) > avail * 0.5:
            break
        pinned |= grow
    u = unit()
    return {b: (MIN_HOT_CELL if b in pinned else wts[b] * u) for b in blocks}


def _strip(ctx: PictureContext, ranges: list[list[int]], scale: HeatScale, x0: float, y: float
           ) -> list[str]:
    m = ctx.result.block_map
    n = sum(len(bl) for bl in ranges)
    if not n:
        return [f'<rect x="{_f(x0)}" y="{_f(y)}" width="{STRIP_W}" height="{ROW_H}" '
                'fill="#f4f4f4" stroke="#bbb" stroke-width="0.6"/>',
                f'<text class="small" x="{_f(x0 + 6)}" y="{_f(y + 11)}">'
                "(no block-map entry)</text>"]
    gap = 4.0
    avail = STRIP_W - gap * (len(ranges) - 1)
    widths = _cell_widths(ctx, [b for bl in ranges for b in bl], avail)
    stroke = ' stroke="#d9d9d9" stroke-width="0.5"' if n <= 160 else ""
    o = []
    x = x0
    for ri, bl in enumerate(ranges):
        if ri:
            x += gap
        rx = x
        for b in bl:
            w = widths[b]
            v = int(ctx.values[b])
            o.append(f'<rect class="cell" x="{_f(x)}" y="{_f(y)}" width="{w:.2f}" '
                     f'height="{ROW_H}" fill="{scale.fill(v)}"{stroke} '
                     f'data-block="{int(m.block_id[b])}" data-value="{v}"/>')
            x += w
        o.append(f'<rect x="{_f(rx)}" y="{_f(y)}" width="{x - rx:.2f}" height="{ROW_H}" '
                 'fill="none" stroke="#777" stroke-width="0.7"/>')
    return o


# ------------------------------------------------------------------------ documents
def render_svg(result: AnnotateResult, keys: Sequence[int] | None = None, *, top: int = 10,
               heat: str = "auto", overview: bool | None = None,
               range_labels: Mapping[int, str] | None = None) -> str:
    """One SVG document: the overview strip of the hottest ``top`` functions (when
    ``overview``; by default when ``keys`` is None), then one picture per function
    (``keys``, or the hottest ``top`` that have blocks).  ``range_labels`` names ranges
    by base address (e.g. ``.cold``)."""
    ctx = PictureContext.of(result, heat, range_labels)
    hot = [fv.key for fv in result.hot_functions(top)]
    if overview is None:
        overview = keys is None
    if keys is None:
        keys = [k for k in hot if result.functions.bmfuncs[k]
                and any(len(result.block_map.function_blocks(f))
                        for f in result.functions.bmfuncs[k])]
    anchors = {k: f"f{i}" for i, k in enumerate(keys)}
    parts: list[str] = []
    rules: list[float] = []  # separators between pictures, drawn once the width is known
    y, width = 0.0, 0.0
    if overview:
        svg, w, h = _overview_svg(ctx, hot, anchors, y)
        parts += svg
        y, width = y + h, max(width, w)
    for k in keys:
        fd = function_data(ctx, k)
        if not fd.blocks:
            raise BBMapError(f"{fd.name} has no block-map entry (was it compiled with "
                             "-fbasic-block-address-map?)")
        if parts:
            rules.append(y + 6)
            y += 14
        svg, w, h = _function_svg(ctx, fd, anchors[k], y)
        parts += svg
        y, width = y + h, max(width, w)
    if not parts:
        parts.append(f'<text class="title" x="{MARGIN}" y="28">no function of '
                     f"{esc(os.path.basename(result.binary))} got samples or LBR counts</text>")
        y, width = 48, 520
    width = math.ceil(width)
    height = math.ceil(y + MARGIN)
    parts += [f'<line x1="{MARGIN}" y1="{_f(ry)}" x2="{width - MARGIN}" y2="{_f(ry)}" '
              'stroke="#cccccc"/>' for ry in rules]
    doc_title = (f"bbmap cfg: {os.path.basename(result.binary)}, "
                 f"heat by {HeatScale(ctx.metric, 0).title}")
    return _document(parts, width, height, doc_title)


def _document(parts: list[str], width: float, height: float, title: str,
              xml_header: bool = True) -> str:
    body = "\n".join(parts)
    return (('<?xml version="1.0" encoding="UTF-8"?>\n' if xml_header else "")
            + f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">\n'
            f"<title>{esc(title)}</title>\n"
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>\n'
            f"{_defs()}\n{_STYLE}\n{body}\n</svg>\n")


def function_svgs(result: AnnotateResult, keys: Sequence[int], *, heat: str = "auto",
                  range_labels: Mapping[int, str] | None = None) -> list[str]:
    """One stand-alone ``<svg>`` element per function key (the picture ``render_svg``
    draws for it, without the XML declaration: for embedding in an HTML page), the
    per-result lookups computed once for all of them.  A key without blocks gives ""."""
    ctx = PictureContext.of(result, heat, range_labels)
    out = []
    for i, k in enumerate(keys):
        fd = function_data(ctx, k)
        if not fd.blocks:
            out.append("")
            continue
        svg, w, h = _function_svg(ctx, fd, f"f{i}", 0.0)
        out.append(_document(svg, math.ceil(w), math.ceil(h + MARGIN),
                             f"{fd.name}: heat by {HeatScale(ctx.metric, 0).title}",
                             xml_header=False))
    return out
