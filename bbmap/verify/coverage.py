"""Bloaty-style coverage of every executable section: each byte gets exactly one label.

Labels are claimed in order of specificity and the first claim wins (Bloaty's
RangeMap rule), so the totals always equal the section size:

1. ``block``                 bytes inside a block of the map;
2. ``function without map``  bytes of code symbols that no map range with blocks
                             starts at (a zero-size symbol extends to the next symbol,
                             as Bloaty does for unknown sizes);
3. ``padding``               what is left and is zero bytes, ``int3`` or a nop form;
4. ``linker stub``           what is left in ``.plt*`` sections (linker-made, no symbols);
5. ``unexplained``           everything else.

Unexplained bytes inside a mapped function's extent mean the map misses code the
compiler emitted; the ``coverage`` check reports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sortedcontainers import SortedDict

from bbmap.binary.disasm import NOP
from bbmap.binary.types import SectionInfo
from bbmap.errors import BBMapError
from bbmap.verify.context import VerifyContext

BLOCK = "block"
NO_MAP = "function without map"
PADDING = "padding"
STUB = "linker stub"
UNEXPLAINED = "unexplained"
LABELS = (BLOCK, NO_MAP, PADDING, STUB, UNEXPLAINED)


class RangeMap:
    """Sparse [start, end) -> label map over one address space; the first label wins."""

    def __init__(self) -> None:
        self._d: SortedDict = SortedDict()  # start -> (end, label)

    def add(self, start: int, end: int, label: str) -> list[tuple[int, int]]:
        """Label the uncovered parts of [start, end); return the parts that were claimed."""
        if end <= start:
            return []
        d = self._d
        claimed: list[tuple[int, int]] = []
        i = d.bisect_right(start) - 1
        cur = start
        if i >= 0:
            s0, (e0, _) = d.peekitem(i)
            if e0 > cur:
                cur = e0
        i += 1
        keys = d.keys()
        while cur < end:
            nxt = keys[i] if i < len(keys) else None
            if nxt is None or nxt >= end:
                claimed.append((cur, end))
                break
            if nxt > cur:
                claimed.append((cur, nxt))
            cur = max(cur, d[nxt][0])
            i += 1
        for s, e in claimed:
            d[s] = (e, label)
        return claimed

    def add_sorted_disjoint(self, starts: np.ndarray, ends: np.ndarray, label: str) -> None:
        """Bulk insert into an empty map (already sorted, disjoint runs)."""
        assert not self._d
        self._d.update(zip(starts.tolist(), zip(ends.tolist(), [label] * len(starts))))

    def gaps(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Unlabelled sub-ranges of [lo, hi)."""
        d = self._d
        out = []
        cur = lo
        i = d.bisect_right(lo) - 1
        if i >= 0:
            cur = max(cur, d.peekitem(i)[1][0])
        for s in d.irange(lo, hi, inclusive=(False, False)):
            if s > cur:
                out.append((cur, s))
            cur = max(cur, d[s][0])
        if cur < hi:
            out.append((cur, hi))
        return out

    def items(self):
        return ((s, e, lab) for s, (e, lab) in self._d.items())

    def __len__(self) -> int:
        return len(self._d)


@dataclass
class SectionCoverage:
    index: int
    name: str
    address: int
    size: int
    totals: dict[str, int] = field(default_factory=dict)
    unexplained: list[tuple[int, int]] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return sum(self.totals.values()) == self.size

    def to_json(self) -> dict:
        return {"index": self.index, "name": self.name, "address": self.address,
                "size": self.size, "totals": dict(self.totals), "exact": self.exact,
                "unexplained": [[s, e] for s, e in self.unexplained]}


@dataclass
class Coverage:
    sections: list[SectionCoverage]
    maps: dict[int, RangeMap]

    @property
    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(LABELS, 0)
        for s in self.sections:
            for k, v in s.totals.items():
                out[k] += v
        return out

    @property
    def exact(self) -> bool:
        return all(s.exact for s in self.sections)

    def to_json(self) -> dict:
        return {"totals": self.totals, "exact": self.exact,
                "sections": [s.to_json() for s in self.sections]}

    def format(self) -> str:
        """A table: one row per executable section, one column per label, then totals."""
        w = [max(len(lab), 9) for lab in LABELS]
        rows = [(s.name, s.size, [s.totals.get(lab, 0) for lab in LABELS])
                for s in self.sections]
        rows.append(("total", sum(s.size for s in self.sections),
                     [self.totals[lab] for lab in LABELS]))
        nw = max([16, *(len(r[0]) + 2 for r in rows)])
        lines = [f"{'section':<{nw}}{'size':>10}  " + "  ".join(
            f"{lab:>{n}}" for lab, n in zip(LABELS, w))]
        for name, size, vals in rows:
            lines.append(f"{name:<{nw}}{size:>10}  " + "  ".join(
                f"{v:>{n}}" for v, n in zip(vals, w)))
        return "\n".join(lines)


def _merge_runs(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint runs (adjacent ones joined)."""
    if len(starts) == 0:
        return starts, ends
    order = np.lexsort((ends, starts))
    s, e = starts[order].astype(np.int64), ends[order].astype(np.int64)
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.nonzero(new)[0]
    out_s = s[idx]
    out_e = np.maximum.reduceat(e, idx)
    return out_s, out_e


def _classify_gap(ctx: VerifyContext, sec: SectionInfo, data: memoryview, lo: int, hi: int,
                  stub: bool, have_code: bool = True) -> list[tuple[int, int, str]]:
    """Split an unclaimed gap into padding and unexplained (or stub) pieces.

    Padding is a run of zero bytes, ``int3`` (0xcc) bytes, or instructions capstone
    calls ``nop`` (``nopw``, ``data16 cs nopw`` ...); the gap is decoded in one call
    and labelled per instruction with numpy, so a large unexplained region costs
    no Python loop per instruction.
    """
    other = STUB if stub else UNEXPLAINED
    raw = np.frombuffer(bytes(data[lo - sec.sh_addr: hi - sec.sh_addr]), dtype=np.uint8)
    n = len(raw)
    label = np.zeros(n, dtype=np.uint8)  # 1 = padding, 2 = other, per byte
    filler = (raw == 0x00) | (raw == 0xCC)
    label[filler] = 1
    cum = np.concatenate(([0], np.cumsum(filler.astype(np.int64))))
    pos = 0
    dis = ctx.disassembler if have_code else None
    while pos < n:
        if filler[pos]:
            pos += 1
            continue
        if dis is None:
            label[pos] = 2
            pos += 1
            continue
        d = dis.decode(raw[pos:].tobytes(), lo + pos)
        if not len(d.addr):
            label[pos] = 2
            pos += 1
            continue
        off = (d.addr - np.uint64(lo)).astype(np.int64)
        size = d.size.astype(np.int64)
        all_fill = (cum[off + size] - cum[off]) == size  # zero / int3 bytes only
        is_pad = (d.kinds == NOP) | all_fill
        per_byte = np.repeat(np.where(is_pad, 1, 2).astype(np.uint8), size)
        start = int(off[0])
        label[start: start + len(per_byte)] = per_byte
        pos = int(off[-1] + size[-1])
    out: list[tuple[int, int, str]] = []
    change = np.nonzero(np.diff(label))[0] + 1
    bounds = [0, *change.tolist(), n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        out.append((lo + a, lo + b, PADDING if label[a] == 1 else other))
    return out


def compute_coverage(ctx: VerifyContext) -> Coverage:
    """Label every byte of every executable section (see the module docstring)."""
    m = ctx.m
    syms = ctx.binary.symbols
    sections: list[SectionCoverage] = []
    maps: dict[int, RangeMap] = {}
    block_sec = ctx.range_section[ctx.block_range] if m.num_blocks else np.zeros(0, np.int64)
    # a function whose map has no block entries (OmitBBEntries) counts as unmapped
    has_blocks = np.diff(m.range_block_ptr) > 0
    range_keys = {(int(s) if ctx.relocatable else -1, int(b))
                  for s, b, k in zip(ctx.range_section.tolist(), m.range_base.tolist(),
                                     has_blocks.tolist()) if k}
    sym_sec = syms.section.astype(np.int64)
    sym_addr = syms.address.astype(np.int64)
    sym_size = syms.size.astype(np.int64)
    have_code = True
    try:
        ctx.disassembler  # noqa: B018 - padding detection needs it
    except BBMapError:  # not x86: padding is then zero / int3-valued bytes only
        have_code = False
    for sec in ctx.exec_sections:
        lo, hi = sec.sh_addr, sec.sh_addr + sec.sh_size
        rm = RangeMap()
        # 1. blocks, clipped to the section
        sel = block_sec == sec.index
        bs = np.maximum(ctx.block_start[sel].astype(np.int64), lo)
        be = np.minimum(ctx.block_end[sel].astype(np.int64), hi)
        keep = be > bs
        rs, re_ = _merge_runs(bs[keep], be[keep])
        rm.add_sorted_disjoint(rs, re_, BLOCK)
        # 2. code symbols without a map range (zero size: up to the next symbol)
        in_sec = np.nonzero((sym_sec == sec.index) & (sym_addr >= lo) & (sym_addr < hi))[0]
        addrs = sym_addr[in_sec]
        order = np.argsort(addrs, kind="stable")
        in_sec, addrs = in_sec[order], addrs[order]
        uniq = np.unique(addrs)
        for i, a in zip(in_sec.tolist(), addrs.tolist()):
            if ((sec.index if ctx.relocatable else -1), a) in range_keys:
                continue
            size = int(sym_size[i])
            if size == 0:
                j = int(np.searchsorted(uniq, a, side="right"))
                end = int(uniq[j]) if j < len(uniq) else hi
            else:
                end = min(a + size, hi)
            rm.add(a, end, NO_MAP)
        # 3-5. what is left: padding, stubs, unexplained
        data = ctx.section_bytes(sec)
        stub = sec.name.startswith((".plt", ".iplt"))
        for g0, g1 in rm.gaps(lo, hi):
            pieces = _classify_gap(ctx, sec, data, g0, g1, stub, have_code)
            for s, e, lab in pieces:
                rm.add(s, e, lab)
        cov = SectionCoverage(sec.index, sec.name, lo, sec.sh_size, dict.fromkeys(LABELS, 0))
        for s, e, lab in rm.items():
            cov.totals[lab] += e - s
            if lab == UNEXPLAINED:
                cov.unexplained.append((s, e))
        sections.append(cov)
        maps[sec.index] = rm
    return Coverage(sections, maps)
