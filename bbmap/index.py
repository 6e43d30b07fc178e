"""Seed 004's three-stage lookup: ELF vaddr -> function -> range -> block.

Stage 1 finds the function containing an address among the block map's ranges *and*
the symbol table (a function without a map is still a function: "in a function, no
block"); stage 2 picks that function's range (functions split by basic-block sections
have several); stage 3 finds the block by its offset.  Each stage is a binary search,
as the seed says.

For bulk work the three stages are precomputed once: the answer is piecewise constant
between the starts and ends of regions and blocks, so :class:`BlockIndex` evaluates the
staged search at those breakpoints and a bulk lookup is a single ``np.searchsorted``
plus gathers.  :meth:`BlockIndex.explain` walks the stages one by one for a person.

Empty (size 0) blocks share their address with the next block.  The rule (see
``spec/index.md``): a sample or a branch *source* resolves to the non-empty block that
contains the address; a branch *target* resolves to the first block, in layout order,
that starts exactly at the address (Propeller's kTo/kFrom rule), else like a source.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bbmap.binary.types import FunctionSymbols, SectionInfo, parent_name
from bbmap.model import BlockMap

IN_BLOCK = 0
IN_FUNCTION_NO_BLOCK = 1
OUTSIDE_FUNCTION = 2
STATUS_NAMES = {IN_BLOCK: "in-block", IN_FUNCTION_NO_BLOCK: "in-function-no-block",
                OUTSIDE_FUNCTION: "outside-function"}

_U64_MAX = (1 << 64) - 1

SOURCE_MAP = 0
SOURCE_SYMBOL = 1


@dataclass
class Lookup:
    """Per address: function id, global range index, global block index, status.

    ``func`` indexes :attr:`BlockIndex.func_names` (ids below ``block_map.num_functions``
    are the block map's own function indices); ``range``/``block`` index the
    :class:`~bbmap.model.BlockMap` columns; -1 where there is none.
    """

    func: np.ndarray  # i4
    range: np.ndarray  # i4
    block: np.ndarray  # i8
    status: np.ndarray  # i1

    def __len__(self) -> int:
        return len(self.status)


@dataclass(frozen=True)
class Region:
    """One stage-1 interval: a map range (with its function) or a map-less symbol."""

    start: int
    end: int
    func: int
    range: int  # -1 for symbol-only regions
    source: int  # SOURCE_MAP | SOURCE_SYMBOL


class BlockIndex:
    """Three-stage index over one binary's block map and function symbols."""

    def __init__(self, block_map: BlockMap, symbols: FunctionSymbols | None = None,
                 sections: Sequence[SectionInfo] | None = None) -> None:
        """``sections`` (optional) keep a zero-size symbol from running past its section."""
        self.block_map = bm = block_map
        symbols = symbols if symbols is not None else FunctionSymbols()
        self.symbols = symbols
        F = bm.num_functions
        names: list[str] = []
        for f in range(F):
            n = bm.func_name[f] if f < len(bm.func_name) else None
            names.append(n or "")
        self.func_map = np.arange(F, dtype=np.int32)  # extended with -1 for symbol functions
        self.aliases: dict[int, int] = {}  # map function -> function whose range covers it

        # -------- stage 1 input: map ranges
        cand: list[Region] = []
        ends = _range_ends(bm)
        for f in range(F):
            for r in bm.function_ranges(f):
                cand.append(Region(int(bm.range_base[r]), int(ends[r]), f, r, SOURCE_MAP))
        cand.sort(key=lambda g: (g.start, g.func, g.range))
        regions: list[Region] = []
        for g in cand:  # identical code folding: two maps at one address -> the first wins
            if regions and regions[-1].start == g.start:
                if regions[-1].func != g.func:
                    self.aliases.setdefault(g.func, regions[-1].func)
                continue
            regions.append(g)

        # name map functions the loader left unnamed from the symbol at their address
        sym_addr = np.asarray(symbols.address, dtype=np.uint64)
        sym_names = list(symbols.names)  # raw; demangled ones go to func_display
        by_addr: dict[int, int] = {}
        for i in range(len(sym_addr)):
            by_addr.setdefault(int(sym_addr[i]), i)
        for f in range(F):
            if not names[f]:
                i = by_addr.get(int(bm.func_address[f]))
                names[f] = sym_names[i] if i is not None else f"func@{int(bm.func_address[f]):#x}"

        # -------- stage 1 input: symbols (sized; zero-size ones end at the next symbol, as perf)
        starts = [g.start for g in regions]
        sym_size = np.asarray(symbols.size, dtype=np.uint64)
        name_to_func: dict[str, int] = {}
        for f, n in enumerate(names):
            name_to_func.setdefault(n, f)
        extra: list[Region] = []
        extend: dict[int, int] = {}
        seen: set[int] = set()
        next_start = _next_distinct(sym_addr)
        sec_spans = sorted((x.sh_addr, x.sh_addr + x.sh_size) for x in (sections or ())
                           if x.is_exec and x.sh_size)
        sec_starts = [x[0] for x in sec_spans]
        for i in range(len(sym_addr)):
            a = int(sym_addr[i])
            e = a + int(sym_size[i]) if sym_size[i] else int(next_start[i])
            if not sym_size[i] and sec_spans:  # perf's fixup, but not into the next section
                j = bisect.bisect_right(sec_starts, a) - 1
                e = min(e, sec_spans[j][1]) if j >= 0 and a < sec_spans[j][1] else a
            k = bisect.bisect_right(starts, a) - 1
            if k >= 0 and regions[k].start <= a < max(regions[k].end, regions[k].start + 1):
                if a == regions[k].start and e > regions[k].end:
                    extend[k] = max(extend.get(k, 0), e)  # symbol longer than its blocks
                continue
            if a in seen or e <= a:
                continue  # an alias of an earlier symbol, or nothing to cover
            seen.add(a)
            name = sym_names[i]
            pn = parent_name(name)
            fid = name_to_func.get(pn) if pn != name else None  # foo.cold counts as foo
            if fid is None:
                fid = len(names)
                names.append(name)
                name_to_func.setdefault(name, fid)
            extra.append(Region(a, e, fid, -1, SOURCE_SYMBOL))
        for k, e in extend.items():
            g = regions[k]
            regions[k] = Region(g.start, e, g.func, g.range, g.source)
        allr = sorted(regions + extra, key=lambda g: (g.start, g.source, g.func))
        final: list[Region] = []
        for g in allr:
            if g.end <= g.start:
                continue  # holds no address (a range of empty blocks)
            if final and final[-1].start == g.start:
                continue  # aliases: the map (then the first symbol) wins
            if final and final[-1].end > g.start:  # overlap: clip the earlier one
                p = final[-1]
                final[-1] = Region(p.start, g.start, p.func, p.range, p.source)
            final.append(g)
        self.regions = final
        self.func_names = names
        shown = dict(zip(symbols.names, symbols.display or symbols.names))
        self.func_display = [shown.get(n, n) for n in names]  # demangled, for people
        self.func_map = np.concatenate([self.func_map,
                                        np.full(len(names) - F, -1, dtype=np.int32)])

        # -------- columns for the staged search
        self.region_start = np.array([g.start for g in final], dtype=np.uint64)
        self.region_end = np.array([g.end for g in final], dtype=np.uint64)
        self.region_func = np.array([g.func for g in final], dtype=np.int32)
        self.region_range = np.array([g.range for g in final], dtype=np.int32)
        self.region_source = np.array([g.source for g in final], dtype=np.int8)
        kept = self.region_range[self.region_range >= 0]
        blocks = (np.concatenate([np.arange(bm.range_block_ptr[r], bm.range_block_ptr[r + 1])
                                  for r in kept]).astype(np.int64)
                  if len(kept) else np.zeros(0, np.int64))
        brange = bm.block_range(blocks).astype(np.int32) if len(blocks) else \
            np.zeros(0, np.int32)
        bstart = (bm.range_base[brange] + bm.block_offset[blocks]).astype(np.uint64)
        bsize = bm.block_size[blocks].astype(np.uint64)
        # Source rule: only non-empty blocks can hold an address; sorted by start.
        ne = np.flatnonzero(bsize > 0)
        order = ne[np.argsort(bstart[ne], kind="stable")]
        self.block_start = bstart[order]
        self.block_end = self.block_start + bsize[order]
        self.block_index = blocks[order]
        self.block_range_of = brange[order]
        # Target rule: every block, by start; at one address the range that starts
        # latest first (that is the range stage 1 picks), then layout order.
        rbase = bm.range_base[brange].astype(np.uint64)
        torder = np.lexsort((np.arange(len(blocks)), np.iinfo(np.uint64).max - rbase, bstart))
        self.tblock_start = bstart[torder]
        self.tblock_index = blocks[torder]
        self.tblock_range_of = brange[torder]

        # -------- breakpoints: the staged answer is constant between consecutive points
        pts = _sorted_unique(np.concatenate([self.region_start, self.region_end,
                                        self.block_start, self.block_end,
                                        self.tblock_start]))
        self.points = pts
        src = self.lookup_staged(pts, to=False)
        tgt = self.lookup_staged(pts, to=True)
        # slot 0 is "before every point": outside
        self._func = np.concatenate([[-1], src.func]).astype(np.int32)
        self._range = np.concatenate([[-1], src.range]).astype(np.int32)
        self._block = np.concatenate([[-1], src.block]).astype(np.int64)
        self._status = np.concatenate([[OUTSIDE_FUNCTION], src.status]).astype(np.int8)
        self._tblock = np.concatenate([[-1], tgt.block]).astype(np.int64)
        self._tstatus = np.concatenate([[OUTSIDE_FUNCTION], tgt.status]).astype(np.int8)
        self._build_buckets()
        # plain lists for the single-address path (bisect on a list beats numpy per call)
        self._pts_list = pts.tolist()
        self._lists = (self._func.tolist(), self._range.tolist(), self._block.tolist(),
                       self._status.tolist(), self._tblock.tolist(), self._tstatus.tolist())

    # ------------------------------------------------------------ staged search
    def lookup_staged(self, vaddrs: np.ndarray, *, to: bool = False) -> Lookup:
        """The three binary searches of seed 004, vectorized (used to build the table)."""
        a = np.asarray(vaddrs, dtype=np.uint64)
        n = len(a)
        func = np.full(n, -1, np.int32)
        rng = np.full(n, -1, np.int32)
        block = np.full(n, -1, np.int64)
        status = np.full(n, OUTSIDE_FUNCTION, np.int8)
        # stage 1: the region (function part) with the greatest start <= a, if a is inside
        j = np.searchsorted(self.region_start, a, side="right") - 1
        jj = np.maximum(j, 0)
        inside = (j >= 0) & (a < self.region_end[jj]) if len(self.region_start) else \
            np.zeros(n, bool)
        func[inside] = self.region_func[jj[inside]]
        # stage 2: the range of that function the region is
        rng[inside] = self.region_range[jj[inside]]
        status[inside] = IN_FUNCTION_NO_BLOCK
        # stage 3: the block by offset (global block starts are sorted, ranges disjoint)
        m = inside & (rng >= 0)
        if m.any() and len(self.tblock_start):
            am = a[m]
            b = np.full(len(am), -1, np.int64)
            if len(self.block_start):
                k = np.searchsorted(self.block_start, am, side="right") - 1
                kk = np.maximum(k, 0)
                hit = (k >= 0) & (self.block_range_of[kk] == rng[m]) & (am < self.block_end[kk])
                b = np.where(hit, self.block_index[kk], -1)
            if to:
                t = np.searchsorted(self.tblock_start, am, side="left")
                tt = np.minimum(t, len(self.tblock_start) - 1)
                exact = (t < len(self.tblock_start)) & (self.tblock_start[tt] == am) & \
                    (self.tblock_range_of[tt] == rng[m])
                b = np.where(exact, self.tblock_index[tt], b)
            block[m] = b
            status[m] = np.where(b >= 0, IN_BLOCK, IN_FUNCTION_NO_BLOCK)
        return Lookup(func, rng, block, status)

    # ------------------------------------------------------------------ bulk path
    def _build_buckets(self) -> None:
        """A bucket table over the text so a bulk lookup needs no random binary search.

        ``np.searchsorted`` with millions of unsorted keys is cache-miss bound (about
        0.4 us a key here).  Instead the span of the points is cut into ``2**shift``-byte
        buckets holding the slot at each bucket's start; an address starts from its
        bucket's slot and steps over the few points inside the bucket.  With at most
        ~2 buckets per point the table costs 8 bytes a point; a pathological layout
        (over 64 points in a bucket) falls back to ``searchsorted``.
        """
        self._table: np.ndarray | None = None
        pts = self.points
        P = len(pts)
        if P < 2:
            return
        lo = int(pts[0])
        span = int(pts[-1]) - lo + 1
        shift = 0
        while (span >> shift) > 2 * P + 65536:
            shift += 1
        nb = (span >> shift) + 1
        starts = np.uint64(lo) + (np.arange(nb, dtype=np.uint64) << np.uint64(shift))
        table = np.empty(nb + 1, np.int64)
        table[:nb] = np.searchsorted(pts, starts, side="right")
        table[nb] = P
        if int(np.diff(table).max()) > 64:
            return
        self._table = table
        self._lo, self._shift, self._nb = np.uint64(lo), np.uint64(shift), np.uint64(nb)
        self._pe = np.append(pts, np.uint64(_U64_MAX))  # sentinel: nothing steps past P

    def slots(self, vaddrs: np.ndarray) -> np.ndarray:
        """For each address, the number of breakpoints <= it (``searchsorted(..., 'right')``)."""
        a = np.asarray(vaddrs, dtype=np.uint64)
        if self._table is None:
            return np.searchsorted(self.points, a, side="right")
        a = np.minimum(a, np.uint64(_U64_MAX - 1))
        b = a - self._lo  # below the first point wraps high and lands in the last slot:
        b >>= self._shift  # both ends are "outside every function"
        np.minimum(b, self._nb, out=b)
        s = self._table[b]
        adv = self._pe[s] <= a
        s += adv
        act = np.flatnonzero(adv)
        while act.size:
            act = act[self._pe[s[act]] <= a[act]]
            s[act] += 1
        return s

    def lookup(self, vaddrs: np.ndarray) -> Lookup:
        """Samples and branch sources: the non-empty block containing each address."""
        i = self.slots(vaddrs)
        return Lookup(self._func[i], self._range[i], self._block[i], self._status[i])

    def lookup_direction(self, vaddrs: np.ndarray, *, to: bool = True) -> Lookup:
        """Branch endpoints: ``to=True`` picks the first (maybe empty) block starting there."""
        if not to:
            return self.lookup(vaddrs)
        a = np.asarray(vaddrs, dtype=np.uint64)
        i = self.slots(a)
        exact = (i > 0) & (self.points[np.maximum(i - 1, 0)] == a) if len(self.points) else \
            np.zeros(len(a), bool)
        block = np.where(exact, self._tblock[i], self._block[i])
        status = np.where(exact, self._tstatus[i], self._status[i])
        return Lookup(self._func[i], self._range[i], block, status)

    def lookup_one(self, vaddr: int, *, to: bool = False) -> tuple[int, int, int, int]:
        """Single address: (func, range, block, status) in a few microseconds."""
        i = bisect.bisect_right(self._pts_list, vaddr)
        f, r, b, s, tb, ts = self._lists
        if to and i > 0 and self._pts_list[i - 1] == vaddr:
            return f[i], r[i], tb[i], ts[i]
        return f[i], r[i], b[i], s[i]

    # ----------------------------------------------------------------- explain
    def explain(self, vaddr: int, *, to: bool = False) -> dict:
        """Walk the three stages for one address and say what each found and why."""
        bm = self.block_map
        out: dict = {"vaddr": vaddr, "rule": "branch target" if to else "sample / branch source"}
        starts = self._region_starts_list()
        j = bisect.bisect_right(starts, vaddr) - 1
        if j < 0:
            out["stage1"] = {"found": False, "why": "below the first function"}
            out["status"] = STATUS_NAMES[OUTSIDE_FUNCTION]
            return out
        g = self.regions[j]
        s1 = {"found": vaddr < g.end, "function": self.func_names[g.func], "func": g.func,
              "start": g.start, "end": g.end,
              "from": "block map" if g.source == SOURCE_MAP else "symbol table"}
        if vaddr >= g.end:
            s1["why"] = (f"nearest function part below is {self.func_names[g.func]} "
                         f"[{g.start:#x}, {g.end:#x}); the address is past its end")
            out["stage1"] = s1
            out["status"] = STATUS_NAMES[OUTSIDE_FUNCTION]
            return out
        out["stage1"] = s1
        if g.range < 0:
            out["stage2"] = {"found": False, "why": "this function has no block map"}
            out["status"] = STATUS_NAMES[IN_FUNCTION_NO_BLOCK]
            return out
        f = range_function(bm, g.range)
        r0 = int(bm.func_range_ptr[f])
        out["stage2"] = {"found": True, "range": g.range, "range_ordinal": g.range - r0,
                         "ranges_in_function": int(bm.func_range_ptr[f + 1]) - r0,
                         "base": int(bm.range_base[g.range])}
        blocks = list(bm.range_blocks(g.range))
        base = int(bm.range_base[g.range])
        offs = [int(bm.block_offset[b]) for b in blocks]
        off = vaddr - base
        at = [b for b, o in zip(blocks, offs) if o == off]
        nonempty = [(o, b) for b, o in zip(blocks, offs) if bm.block_size[b] > 0]
        k = bisect.bisect_right([o for o, _ in nonempty], off) - 1
        chosen = -1
        why = ""
        if to and at:
            chosen = at[0]
            why = "first block starting exactly at the address (branch-target rule)"
        elif k >= 0 and off < nonempty[k][0] + int(bm.block_size[nonempty[k][1]]):
            chosen = nonempty[k][1]
            why = "the non-empty block whose [start, start+size) holds the offset"
        else:
            why = ("offset falls in a gap between blocks (padding)" if k >= 0
                   else "offset is before the range's first non-empty block")
        s3: dict = {"found": chosen >= 0, "offset_in_range": off, "why": why}
        if len(at) > 1 or (at and int(bm.block_size[at[0]]) == 0):
            s3["blocks_at_address"] = [int(bm.block_id[b]) for b in at]
        if chosen >= 0:
            bs = base + int(bm.block_offset[chosen])
            s3.update(block=chosen, block_id=int(bm.block_id[chosen]), start=bs,
                      end=bs + int(bm.block_size[chosen]), size=int(bm.block_size[chosen]))
        out["stage3"] = s3
        out["status"] = STATUS_NAMES[IN_BLOCK if chosen >= 0 else IN_FUNCTION_NO_BLOCK]
        return out

    def _region_starts_list(self) -> list[int]:
        if not hasattr(self, "_rs_list"):
            self._rs_list = [g.start for g in self.regions]
        return self._rs_list

    # ---------------------------------------------------------------- naming
    def function_name(self, func: int) -> str | None:
        return self.func_names[func] if func >= 0 else None

    def parent_function_name(self, func: int) -> str | None:
        """The name with ``.cold`` / ``.__part.N`` stripped (what perf's parts count as)."""
        n = self.function_name(func)
        return None if n is None else parent_name(n)


def range_function(bm: BlockMap, r: int) -> int:
    """The block-map function owning global range ``r``."""
    return int(np.searchsorted(bm.func_range_ptr, r, side="right")) - 1


def _range_ends(bm: BlockMap) -> np.ndarray:
    """End address of each range: the furthest ``offset + size`` of its blocks."""
    R = bm.num_ranges
    ends = np.array(bm.range_base, dtype=np.uint64).copy()
    if bm.num_blocks:
        r = bm.block_range(np.arange(bm.num_blocks))
        np.maximum.at(ends, r, (bm.range_base[r] + bm.block_offset + bm.block_size)
                      .astype(np.uint64))
    return ends[:R]


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2's hash-based unique is ~10x slower on u8 here)."""
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _next_distinct(addr: np.ndarray) -> np.ndarray:
    """For sorted addresses: the next strictly greater address (itself for the last)."""
    if not len(addr):
        return addr
    u = _sorted_unique(addr)
    k = np.searchsorted(u, addr, side="right")
    return np.where(k < len(u), u[np.minimum(k, len(u) - 1)], addr)
