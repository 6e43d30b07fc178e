"""Graphviz DOT of a function's CFG with the same heat data as the SVG pictures.

For people who want graphviz's layered layout (or to post-process the graph): one
``digraph`` per function, a node per block filled with the heat colour of
:class:`~bbmap.outputs.picture.HeatScale`, a cluster per address range, an edge per taken
branch and per fall-through with its count.  Calls and returns to other functions end in
one box per other function.  Output is deterministic (fixed order, fixed precision).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bbmap.aggregate.result import AnnotateResult
from bbmap.errors import BBMapError
from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH
from bbmap.outputs.picture import (
    C_BACK,
    C_CROSS,
    C_FT,
    C_FT_NONE,
    C_FWD,
    FunctionData,
    HeatScale,
    PictureContext,
    block_marks,
    block_tooltip,
    function_data,
)

FONTNAME = "DejaVu Sans Mono"  # Graphviz takes one font name, not a CSS stack


def quote(s: object) -> str:
    """A DOT double-quoted string: quotes and backslashes escaped, line breaks as ``\\n``
    (so ``<>&`` in C++ names are plain characters, never HTML-like labels)."""
    t = str(s).encode("utf-8", "replace").decode("utf-8")
    t = t.replace("\\", "\\\\").replace('"', '\\"')
    t = t.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return '"' + "".join(c if c >= " " else "?" for c in t) + '"'


def _pen(count: int, cmax: int) -> str:
    if count <= 0 or cmax <= 0:
        return "1"
    return f"{1 + 4 * min(math.log1p(count) / math.log1p(cmax), 1.0):.2f}"


def function_dot(ctx: PictureContext, fd: FunctionData) -> str:
    """One ``digraph`` for one function."""
    r, m = ctx.result, ctx.result.block_map
    blocks = fd.blocks
    if not blocks:
        raise BBMapError(f"{fd.name} has no block-map entry (was it compiled with "
                         "-fbasic-block-address-map?)")
    scale = HeatScale(ctx.metric, int(ctx.values[blocks].max()))
    lbr = r.has_lbr
    title = (f"{fd.name}\n{fd.address:#x}, {len(blocks)} blocks, {fd.samples:,} samples"
             + (f", entry count {fd.entry_count:,} (LBR)" if lbr else "")
             + f"\nfill: {scale.title}, max {scale.vmax:,}")
    o = [f"digraph {quote(fd.name)} {{",
         f"  graph [label={quote(title)}, "
         f'labelloc=t, labeljust=l, fontname={quote(FONTNAME)}, newrank=true];',
         f'  node [shape=box, style="filled", fontname={quote(FONTNAME)}, fontsize=10];',
         f"  edge [fontname={quote(FONTNAME)}, fontsize=9];"]
    for ci, c in enumerate(fd.columns):
        what = "entry" if c.entry else "part"
        label = f"{what}{' ' + c.label if c.label else ''} @ {c.base:#x}"
        o.append(f"  subgraph cluster_{ci} {{")
        o.append(f'    label={quote(label)}; style="rounded"; color="#999999";')
        for b in c.blocks:
            bid, md = int(m.block_id[b]), int(m.block_md[b])
            v = int(ctx.values[b])
            lines = [f"bb {bid}  {int(ctx.start[b]):#x}  {int(m.block_size[b])} B",
                     f"s {int(r.block_samples[b]):,}"
                     + (f"  n {int(r.block_count[b]):,}" if lbr else "")]
            marks = block_marks(md)
            if not md & MD_CAN_FALL_THROUGH:
                marks.append("no-ft")
            if marks:
                lines.append(" ".join(f"[{x}]" for x in marks))
            extra = ", penwidth=2" if not md & MD_CAN_FALL_THROUGH else ""
            o.append(f"    b{b} [label={quote(chr(10).join(lines))}, "
                     f'fillcolor="{scale.fill(v)}", fontcolor="{scale.ink(v)}", '
                     f"tooltip={quote(block_tooltip(ctx, fd, b))}{extra}];")
        o.append("  }")
    cmax = max([e.count for e in fd.taken] + list(fd.fall.values()) + [0])
    for c in fd.columns:
        for b, nb in zip(c.blocks, c.blocks[1:]):
            if b in fd.fall:
                n = fd.fall[b]
                o.append(f'  b{b} -> b{nb} [label="{n:,}", color="{C_FT}", '
                         f'penwidth={_pen(n, cmax)}, arrowhead=empty, weight=100];')
            elif int(m.block_md[b]) & MD_CAN_FALL_THROUGH:
                o.append(f'  b{b} -> b{nb} [color="{C_FT_NONE}", style=dotted, weight=100];')
    col_of = {b: ci for ci, c in enumerate(fd.columns) for b in c.blocks}
    for e in fd.taken:
        if col_of[e.src] != col_of[e.dst]:
            colour, style = C_CROSS, ", style=dashed"
        elif int(ctx.start[e.dst]) <= int(ctx.start[e.src]):
            colour, style = C_BACK, ""
        else:
            colour, style = C_FWD, ""
        o.append(f'  b{e.src} -> b{e.dst} [label="{e.count:,}", color="{colour}", '
                 f"penwidth={_pen(e.count, cmax)}, weight=1{style}];")
    others: dict[str, int] = {}
    agg: dict[tuple[int, str, str], int] = {}
    for e in fd.out:
        name = ctx.name_of_block(e.dst)
        others.setdefault(name, len(others))
        k = (e.src, name, e.kind)
        agg[k] = agg.get(k, 0) + e.count
    for name, i in others.items():
        o.append(f'  x{i} [label={quote(name)}, shape=note, style="dashed", '
                 'fillcolor="#ffffff"];')
    for (src, name, kind), n in sorted(agg.items(), key=lambda kv: (-kv[1], kv[0])):
        # weight=0, not constraint=false: notes held only by unconstrained edges make
        # Graphviz 2.43 (Debian, Ubuntu) abort with a double free after a graph with clusters
        o.append(f'  b{src} -> x{others[name]} [label="{kind} {n:,}", color="#888888", '
                 "style=dashed, weight=0];")
    if fd.omitted_edges:
        o.append(f"  // {fd.omitted_edges} lighter taken edges omitted")
    o.append("}")
    return "\n".join(o) + "\n"


def render_dot(result: AnnotateResult, keys: Sequence[int] | None = None, *, top: int = 10,
               heat: str = "auto", range_labels: Mapping[int, str] | None = None) -> str:
    """One ``digraph`` per function of ``keys`` (default: the hottest ``top`` with blocks),
    concatenated; ``dot -Tsvg`` renders each in turn."""
    ctx = PictureContext.of(result, heat, range_labels)
    if keys is None:
        keys = [fv.key for fv in result.hot_functions(top) if len(fv.blocks)]
    if not keys:
        return "// no function got samples or LBR counts\ndigraph empty {}\n"
    # every edge: a graph for tools and graphviz has no reason to drop the light ones
    return "".join(function_dot(ctx, function_data(ctx, k, max_edges=None)) for k in keys)
