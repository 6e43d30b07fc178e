"""What a picture of block heat shows, shared by the SVG and the DOT outputs.

A function's columns (one per address range, blocks in address order), its edges split
into taken / fall-through / leaving / entering, a log heat scale over a ramp, the
palette and the block tooltips: :mod:`bbmap.outputs.svg` lays these out by hand,
:mod:`bbmap.outputs.dot` hands them to Graphviz.  Everything is iterated in a defined
order so both outputs are byte-identical for the same input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bbmap.aggregate.lbr import EDGE_KINDS
from bbmap.aggregate.result import AnnotateResult
from bbmap.errors import BBMapError
from bbmap.formats.bbaddrmap import (
    MD_CAN_FALL_THROUGH,
    MD_HAS_INDIRECT_BRANCH,
    MD_HAS_RETURN,
    MD_HAS_TAIL_CALL,
    MD_IS_EH_PAD,
)

# ColorBrewer YlOrRd without its palest stop, the two darkest stops' blue lowered so
# that every channel falls along the ramp: luminance then falls with the count at every
# step, rounding included (the tests check it).  Zero is white.
RAMP = ("#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0018",
        "#800014")
ZERO_FILL = "#ffffff"


# block metadata marks: (bit, badge text, legend text)
MARKS = ((MD_HAS_RETURN, "ret", "return"), (MD_HAS_TAIL_CALL, "tail", "tail call"),
         (MD_IS_EH_PAD, "EH", "EH landing pad"),
         (MD_HAS_INDIRECT_BRANCH, "ind", "indirect branch"))


# edge colours: forward branch, back edge (loop), other range, fall-through, other function
C_FWD, C_BACK, C_CROSS, C_FT, C_FT_NONE = "#2166ac", "#6a3d9a", "#1b7837", "#4d4d4d", "#bdbdbd"
MAX_EDGES = 400  # taken edges drawn per function (the heaviest)


def grouped(v: int) -> str:
    """A count with thousands separators, as every picture label shows it."""
    return f"{v:,}"


# ------------------------------------------------------------------------ heat scale
def _rgb(h: str) -> tuple[int, int, int]:
    return int(h[1:3], 16), int(h[3:5], 16), int(h[5:7], 16)


def luminance(colour: str) -> float:
    """WCAG relative luminance of ``#rrggbb`` (for text contrast and the tests)."""
    def lin(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = _rgb(colour)
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


@dataclass(frozen=True)
class HeatScale:
    """Log-scale colour for a count: 0 is white, 1..vmax runs along :data:`RAMP`."""

    metric: str  # "count" (LBR execution estimate) | "samples"
    vmax: int

    @property
    def title(self) -> str:
        return ("LBR execution count" if self.metric == "count" else "samples") + " (log scale)"

    def position(self, v: int) -> float:
        if v <= 0 or self.vmax <= 0:
            return 0.0
        return min(math.log1p(v) / math.log1p(self.vmax), 1.0)

    def fill(self, v: int) -> str:
        if v <= 0:
            return ZERO_FILL
        p = self.position(v) * (len(RAMP) - 1)
        i = min(int(p), len(RAMP) - 2)
        f = p - i
        a, b = _rgb(RAMP[i]), _rgb(RAMP[i + 1])
        return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))

    def ink(self, v: int) -> str:
        """Text colour readable on :meth:`fill`."""
        return "#ffffff" if luminance(self.fill(v)) < 0.3 else "#1a1a1a"

    def ticks(self, width: float, min_gap: float = 34) -> list[int]:
        """Powers of ten up to vmax, and vmax, thinned so labels do not collide."""
        vals = [1]
        while vals[-1] * 10 <= self.vmax:
            vals.append(vals[-1] * 10)
        if self.vmax > 1:
            vals.append(self.vmax)
        out: list[int] = []
        for v in vals:
            x = self.position(v) * width
            if out and x - self.position(out[-1]) * width < min_gap:
                if v != self.vmax:
                    continue
                out.pop()
            out.append(v)
        return out if self.vmax >= 1 else []


def heat_metric(result: AnnotateResult, heat: str = "auto") -> tuple[str, np.ndarray]:
    """("count", block_count) with LBR, else ("samples", block_samples); ``heat`` forces one."""
    if heat == "auto":
        heat = "count" if result.has_lbr else "samples"
    if heat == "count":
        if not result.has_lbr:
            raise BBMapError("--heat count needs a profile with LBR branch stacks "
                             "(perf record -b); this one has none")
        return "count", np.asarray(result.block_count)
    if heat == "samples":
        return "samples", np.asarray(result.block_samples)
    raise BBMapError(f"unknown heat metric {heat!r} (auto, samples or count)")


# ------------------------------------------------------------------------ function data
@dataclass
class Column:
    """One address range of a function: a column of the picture, a DOT cluster."""

    bmfunc: int
    range: int
    base: int
    entry: bool  # range 0 of its block-map function: where the function starts
    label: str  # part name (".cold", ".__part.1") when known
    blocks: list[int]  # global block indexes, address order


@dataclass
class Edge:
    src: int  # global block indexes
    dst: int
    kind: str
    count: int


@dataclass
class FunctionData:
    """A function's blocks, edges and heat, in the shape both pictures need."""

    key: int
    name: str
    address: int
    samples: int
    entry_count: int
    columns: list[Column]
    taken: list[Edge]  # both ends in the function (fall-throughs to a non-next block too)
    fall: dict[int, int]  # block -> count of its fall-through into the next block
    out: list[Edge]  # from this function to another; ``dst`` is the target block
    into: list[Edge]  # from another function into this one
    omitted_edges: int = 0  # taken edges beyond MAX_EDGES (lightest)
    _by_block: tuple[dict[int, list[Edge]], dict[int, list[Edge]]] | None = None

    def edges_at(self, b: int) -> tuple[list[Edge], list[Edge]]:
        """(edges leaving, edges entering) block ``b``, heaviest first; indexed once so a
        function with thousands of blocks and edges is not quadratic."""
        if self._by_block is None:
            outs: dict[int, list[Edge]] = {}
            ins: dict[int, list[Edge]] = {}
            for e in sorted(self.taken + self.out, key=_heaviest_first):
                outs.setdefault(e.src, []).append(e)
            for e in sorted(self.taken + self.into, key=_heaviest_first):
                ins.setdefault(e.dst, []).append(e)
            self._by_block = (outs, ins)
        return self._by_block[0].get(b, []), self._by_block[1].get(b, [])

    @property
    def blocks(self) -> list[int]:
        return [b for c in self.columns for b in c.blocks]


@dataclass
class PictureContext:
    """Per-result lookups computed once for every picture of a document."""

    result: AnnotateResult
    metric: str
    values: np.ndarray
    key_of_block: np.ndarray
    key_from: np.ndarray
    key_to: np.ndarray
    start: np.ndarray
    range_labels: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, result: AnnotateResult, heat: str, range_labels: Mapping[int, str] | None
           ) -> PictureContext:
        m = result.block_map
        metric, values = heat_metric(result, heat)
        if m.num_blocks:
            kob = result.functions.key_of_bmfunc[m.block_function(np.arange(m.num_blocks))]
        else:
            kob = np.zeros(0, np.int32)
        kob = np.asarray(kob, np.int64)
        ef = np.asarray(result.edge_from, np.int64)
        et = np.asarray(result.edge_to, np.int64)
        start = result.block_start
        if start is None:
            start = np.asarray(m.block_address(np.arange(m.num_blocks)), np.uint64)
        return cls(result, metric, values, kob, kob[ef] if len(ef) else ef,
                   kob[et] if len(et) else et, np.asarray(start, np.uint64),
                   dict(range_labels or {}))

    def name_of_block(self, b: int) -> str:
        return self.result.functions.names[int(self.key_of_block[b])]


def function_data(ctx: PictureContext, key: int, max_edges: int | None = MAX_EDGES
                  ) -> FunctionData:
    """Gather one function key's ranges (parts folded in), blocks and edges; only the
    ``max_edges`` heaviest taken edges are kept (a picture has room for so many)."""
    r = ctx.result
    m = r.block_map
    ft = r.functions
    columns = []
    for f in ft.bmfuncs[key]:
        for i, rg in enumerate(m.function_ranges(f)):
            blk = list(m.range_blocks(rg))
            blk.sort(key=lambda b: (int(m.block_offset[b]), b))
            base = int(m.range_base[rg])
            columns.append(Column(f, rg, base, i == 0, ctx.range_labels.get(base, ""), blk))
    columns.sort(key=lambda c: (c.base, c.range))
    mine_from = np.flatnonzero(ctx.key_from == key)
    mine_to = np.flatnonzero(ctx.key_to == key)
    taken: list[Edge] = []
    fall: dict[int, int] = {}
    out: list[Edge] = []
    nxt = {c.blocks[i]: c.blocks[i + 1] for c in columns for i in range(len(c.blocks) - 1)}
    for e in mine_from.tolist():
        s, d = int(r.edge_from[e]), int(r.edge_to[e])
        kind, cnt = EDGE_KINDS[int(r.edge_kind[e])], int(r.edge_count[e])
        if ctx.key_to[e] != key:
            out.append(Edge(s, d, kind, cnt))
        elif kind == "fallthrough" and nxt.get(s) == d:
            fall[s] = fall.get(s, 0) + cnt
        else:
            taken.append(Edge(s, d, kind, cnt))
    into = [Edge(int(r.edge_from[e]), int(r.edge_to[e]), EDGE_KINDS[int(r.edge_kind[e])],
                 int(r.edge_count[e])) for e in mine_to.tolist() if ctx.key_from[e] != key]
    taken.sort(key=_heaviest_first)
    out.sort(key=_heaviest_first)
    into.sort(key=_heaviest_first)
    omitted = max(len(taken) - max_edges, 0) if max_edges is not None else 0
    entry = 0
    if columns:
        first = min(columns, key=lambda c: (not c.entry, c.bmfunc, c.base))
        entry = int(r.block_count[first.blocks[0]]) if first.blocks and r.has_lbr else 0
    return FunctionData(key=key, name=ft.names[key], address=int(ft.address[key]),
                        samples=int(r.func_samples[key]), entry_count=entry, columns=columns,
                        taken=taken[:max_edges], fall=fall, out=out, into=into,
                        omitted_edges=omitted)


def _heaviest_first(e: Edge) -> tuple[int, int, int, str]:
    return -e.count, e.src, e.dst, e.kind


def block_marks(md: int) -> list[str]:
    return [badge for bit, badge, _ in MARKS if md & bit]


def block_tooltip(ctx: PictureContext, fd: FunctionData, b: int) -> str:
    """Everything about a block, for a hover title (SVG) or tooltip (DOT)."""
    r, m = ctx.result, ctx.result.block_map
    a, size = int(ctx.start[b]), int(m.block_size[b])
    lines = [f"bb {int(m.block_id[b])}  [{a:#x}, {a + size:#x})  {size} B",
             f"samples {grouped(int(r.block_samples[b]))}"
             + (f", LBR count {grouped(int(r.block_count[b]))}" if r.has_lbr else "")]
    flags = r.block_flags(b)
    if not int(m.block_md[b]) & MD_CAN_FALL_THROUGH:
        flags.append("cannot fall through")
    if flags:
        lines.append("flags: " + ", ".join(flags))

    def ref(x: int) -> str:
        if ctx.key_of_block[x] == fd.key:
            return f"bb {int(m.block_id[x])}"
        return f"{ctx.name_of_block(x)} bb {int(m.block_id[x])}"

    outs, ins = fd.edges_at(b)
    if b in fd.fall:
        lines.append(f"falls through: {grouped(fd.fall[b])}")
    lines += [f"-> {ref(e.dst)} ({e.kind}) {grouped(e.count)}" for e in outs[:6]]
    lines += [f"<- {ref(e.src)} ({e.kind}) {grouped(e.count)}" for e in ins[:6]]
    return "\n".join(lines)
