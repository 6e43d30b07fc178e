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

from bbmap.arrays import expand_ranges, sorted_unique
from bbmap.binary.types import FunctionSymbols, SectionInfo, parent_name
from bbmap.buckets import IN_BLOCK, IN_FUNCTION_NO_BLOCK, OUTSIDE_FUNCTION, status_name
from bbmap.model import BlockMap

# a lookup's status is its bucket (bbmap.buckets): the aggregate layer uses it as is
STATUS_NAMES = {c: status_name(c) for c in (IN_BLOCK, IN_FUNCTION_NO_BLOCK, OUTSIDE_FUNCTION)}

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
        names: list[str] = [n or "" for n in bm.func_name[:F]]
        names += [""] * (F - len(names))
        self.aliases: dict[int, int] = {}  # map function -> function whose range covers it
        ms, me, mf, mr = self._map_regions(bm, F)

        # name map functions the loader left unnamed from the first symbol at their address
        unnamed = [f for f, n in enumerate(names) if not n]
        if unnamed:
            sym_addr = np.asarray(symbols.address, dtype=np.uint64)
            sym_names = symbols.names  # raw; demangled ones go to func_display
            fa = np.asarray(bm.func_address, dtype=np.uint64)[unnamed]
            ua, ufirst = np.unique(sym_addr, return_index=True)  # first occurrence each
            pos = np.minimum(np.searchsorted(ua, fa), max(len(ua) - 1, 0))
            hit = (ua[pos] == fa) if len(ua) else np.zeros(len(fa), bool)
            for f, a, h, i in zip(unnamed, fa.tolist(), hit.tolist(),
                                  ufirst[pos].tolist() if len(ua) else [0] * len(fa)):
                names[f] = sym_names[i] if h else f"func@{a:#x}"

        xs, xe, xf, me = self._symbol_regions(symbols, sections, names, ms, me)
        self._set_regions(np.concatenate([ms, xs]), np.concatenate([me, xe]),
                          np.concatenate([mf, xf]).astype(np.int32),
                          np.concatenate([mr, np.full(len(xs), -1, np.int32)]),
                          np.concatenate([np.full(len(ms), SOURCE_MAP, np.int8),
                                          np.full(len(xs), SOURCE_SYMBOL, np.int8)]))
        self.func_names = names
        shown = dict(zip(symbols.names, symbols.display or symbols.names))
        self.func_display = [shown.get(n, n) for n in names]  # demangled, for people
        self.func_map = np.concatenate([np.arange(F, dtype=np.int32),  # -1: symbol-only
                                        np.full(len(names) - F, -1, dtype=np.int32)])

        # -------- columns for the staged search
        kept = self.region_range[self.region_range >= 0]
        rbp = np.asarray(bm.range_block_ptr, dtype=np.int64)
        blocks = _csr_expand(rbp[kept], rbp[kept + 1])[1]
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
        pts = sorted_unique(np.concatenate([self.region_start, self.region_end,
                                        self.block_start, self.block_end,
                                        self.tblock_start]))
        self.points = pts
        src, tgt = self._staged(pts, to=True)  # both rules, stages 1-2 searched once
        # slot 0 is "before every point": outside
        self._func = np.concatenate([[-1], src.func]).astype(np.int32)
        self._range = np.concatenate([[-1], src.range]).astype(np.int32)
        self._block = np.concatenate([[-1], src.block]).astype(np.int64)
        self._status = np.concatenate([[OUTSIDE_FUNCTION], src.status]).astype(np.int8)
        self._tblock = np.concatenate([[-1], tgt.block]).astype(np.int64)
        self._tstatus = np.concatenate([[OUTSIDE_FUNCTION], tgt.status]).astype(np.int8)
        self._build_buckets()

    # ------------------------------------------------------------ stage-1 table
    def _map_regions(self, bm: BlockMap, F: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Map ranges as regions (start, end, func, range), sorted by start, one per start.

        Identical code folding puts two map functions at one address: ordered by (start,
        function, range) the first wins and the others are recorded in :attr:`aliases`.
        Columnar because a 20,000-function binary made a ``Region`` per range cost ~0.1 s.
        """
        fptr = np.asarray(bm.func_range_ptr, dtype=np.int64)
        cf, cr = _csr_expand(fptr[:F], fptr[1:F + 1]) if F else (np.zeros(0, np.int64),) * 2
        cs = np.asarray(bm.range_base, dtype=np.uint64)[cr]
        ce = _range_ends(bm)[cr]
        order = np.lexsort((cr, cf, cs))
        cs, ce, cf, cr = cs[order], ce[order], cf[order], cr[order]
        first = np.ones(len(cs), bool)
        np.not_equal(cs[1:], cs[:-1], out=first[1:])
        if not first.all():  # folded functions: few, so a plain loop keeps dict order
            owner = cf[np.maximum.accumulate(np.where(first, np.arange(len(cs)), 0))]
            for g, o in zip(cf[~first].tolist(), owner[~first].tolist()):
                if g != o:
                    self.aliases.setdefault(g, o)
        return cs[first], ce[first], cf[first], cr[first].astype(np.int32)

    def _symbol_regions(self, symbols: FunctionSymbols,
                        sections: Sequence[SectionInfo] | None, names: list[str],
                        ms: np.ndarray, me: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Regions of symbols that start outside every map range: (start, end, func) and
        the map ends extended by symbols longer than their blocks.

        Sized symbols end at ``address + size``; zero-size ones at the next symbol, as
        perf, but not past their executable section.  At one address the first symbol
        (in ``symbols`` order) that covers something wins.  New function ids are given in
        that order; ``names`` is extended in place.  Vectorized except for the (few)
        ``.cold``/``.__part.N`` symbols, whose id depends on the names seen before them.
        """
        a = np.asarray(symbols.address, dtype=np.uint64)
        size = np.asarray(symbols.size, dtype=np.uint64)
        e = np.where(size != 0, a + size, _next_distinct(a))
        spans = [(x.sh_addr, x.sh_addr + x.sh_size) for x in (sections or ())
                 if x.is_exec and x.sh_size]
        zero = np.flatnonzero(size == 0)
        if spans and len(zero):  # perf's fixup, but not into the next section
            spans.sort()
            sec_start = np.array([x[0] for x in spans], dtype=np.uint64)
            sec_end = np.array([x[1] for x in spans], dtype=np.uint64)
            az = a[zero]
            j = np.searchsorted(sec_start, az, side="right") - 1
            jj = np.maximum(j, 0)
            ok = (j >= 0) & (az < sec_end[jj])
            e[zero] = np.where(ok, np.minimum(e[zero], sec_end[jj]), az)
        inmap = np.zeros(len(a), bool)
        me = me.copy()
        if len(ms) and len(a):
            k = np.searchsorted(ms, a, side="right") - 1
            kk = np.maximum(k, 0)
            inmap = (k >= 0) & (a < np.maximum(me[kk], ms[kk] + np.uint64(1)))
            longer = inmap & (a == ms[kk]) & (e > me[kk])  # symbol longer than its blocks
            ext = me.copy()
            np.maximum.at(ext, kk[longer], e[longer])
            me = ext
        cand = np.flatnonzero(~inmap & (e > a))
        acc = np.sort(cand[np.unique(a[cand], return_index=True)[1]])  # first per address
        acc_names = [symbols.names[i] for i in acc.tolist()]
        fids = self._symbol_function_ids(acc_names, names)
        return a[acc], e[acc], fids, me

    @staticmethod
    def _symbol_function_ids(acc_names: list[str], names: list[str]) -> np.ndarray:
        """Function id of each accepted symbol (in order), appending new names to ``names``.

        A plain symbol is a new function.  A part (``foo.cold``) joins the function first
        named ``foo`` so far: a map function, else an earlier new function; otherwise it is
        new too.  Equivalent to assigning ids one symbol at a time with a name dict.
        """
        F = len(names)
        m = len(acc_names)
        name_to_func = dict(zip(reversed(names), range(F - 1, -1, -1)))  # first id per name
        parents = [parent_name(n) if "." in n else n for n in acc_names]
        parts = [p for p in range(m) if parents[p] != acc_names[p]]
        is_new = np.ones(m, bool)
        fixed: dict[int, int] = {}  # part position -> map function id
        via: dict[int, int] = {}  # part position -> position of the new symbol it joins
        if parts:
            plain = [p for p in range(m) if parents[p] == acc_names[p]]
            first_plain = dict(zip(reversed([acc_names[p] for p in plain]), reversed(plain)))
            first_part: dict[str, int] = {}
            for p in parts:
                parent = parents[p]
                f = name_to_func.get(parent)
                if f is not None:
                    fixed[p] = f
                    is_new[p] = False
                    continue
                q = min(first_plain.get(parent, m), first_part.get(parent, m))
                if q < p:
                    via[p] = q
                    is_new[p] = False
                    continue
                first_part.setdefault(acc_names[p], p)
        fid = (F + np.cumsum(is_new) - 1).astype(np.int32)
        for p, f in fixed.items():
            fid[p] = f
        for p, q in via.items():
            fid[p] = fid[q]
        names.extend(n for n, new in zip(acc_names, is_new.tolist()) if new)
        return fid

    def _set_regions(self, start: np.ndarray, end: np.ndarray, func: np.ndarray,
                     rng: np.ndarray, source: np.ndarray) -> None:
        """The stage-1 columns: sorted by (start, source, func), empty regions dropped,
        the first at a start kept, and each region clipped at the next one's start."""
        order = np.lexsort((func, source, start))
        order = order[end[order] > start[order]]  # a range of empty blocks holds nothing
        s = start[order]
        keep = np.ones(len(s), bool)
        np.not_equal(s[1:], s[:-1], out=keep[1:])  # aliases: the map, then first symbol
        order = order[keep]
        s = start[order]
        e = end[order].copy()
        if len(e) > 1:
            np.minimum(e[:-1], s[1:], out=e[:-1])  # overlap: clip the earlier one
        self.region_start = s
        self.region_end = e
        self.region_func = func[order].astype(np.int32)
        self.region_range = rng[order].astype(np.int32)
        self.region_source = source[order].astype(np.int8)

    @property
    def regions(self) -> list[Region]:
        """The stage-1 table as :class:`Region` objects (built on first use, for people)."""
        if not hasattr(self, "_regions"):
            self._regions = [Region(*g) for g in zip(
                self.region_start.tolist(), self.region_end.tolist(),
                self.region_func.tolist(), self.region_range.tolist(),
                self.region_source.tolist())]
        return self._regions

    # ------------------------------------------------------------ staged search
    def lookup_staged(self, vaddrs: np.ndarray, *, to: bool = False) -> Lookup:
        """The three binary searches of seed 004, vectorized (used to build the table)."""
        src, tgt = self._staged(vaddrs, to)
        return tgt if tgt is not None else src

    def _staged(self, vaddrs: np.ndarray, to: bool) -> tuple[Lookup, Lookup | None]:
        """:meth:`lookup_staged` by the source rule and, with ``to``, by the target rule
        too: they differ only where a block starts exactly at the address, so stage 1,
        stage 2 and the block search are shared (the table is built from both)."""
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
            bt = None
            if to:
                t = np.searchsorted(self.tblock_start, am, side="left")
                tt = np.minimum(t, len(self.tblock_start) - 1)
                exact = (t < len(self.tblock_start)) & (self.tblock_start[tt] == am) & \
                    (self.tblock_range_of[tt] == rng[m])
                bt = np.where(exact, self.tblock_index[tt], b)
            tblock, tstatus = block.copy(), status.copy()
            block[m] = b
            status[m] = np.where(b >= 0, IN_BLOCK, IN_FUNCTION_NO_BLOCK)
            if bt is None:
                return Lookup(func, rng, block, status), None
            tblock[m] = bt
            tstatus[m] = np.where(bt >= 0, IN_BLOCK, IN_FUNCTION_NO_BLOCK)
            return Lookup(func, rng, block, status), Lookup(func, rng, tblock, tstatus)
        src = Lookup(func, rng, block, status)
        return src, (Lookup(func, rng, block.copy(), status.copy()) if to else None)

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
        table = np.empty(nb + 1, np.int64)
        # table[i] = points <= starts[i] (searchsorted(pts, starts, "right")), counted
        # without a search: a point is <= starts[i] from the bucket ceil((p - lo) / 2**shift)
        rel = pts - np.uint64(lo)
        first = (rel >> np.uint64(shift)) + ((rel & np.uint64((1 << shift) - 1)) != 0)
        np.cumsum(np.bincount(first.astype(np.int64), minlength=nb + 1)[:nb], out=table[:nb])
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
        if not hasattr(self, "_lists"):  # plain lists: bisect on a list beats numpy per call
            self._pts_list = self.points.tolist()
            self._lists = (self._func.tolist(), self._range.tolist(), self._block.tolist(),
                           self._status.tolist(), self._tblock.tolist(),
                           self._tstatus.tolist())
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
        # (the indexes into the arrays are *_index; "block" and "range" are what readobj
        # and the text report call them: the block's ID, the range's place in its function)
        s1 = {"found": vaddr < g.end, "function": self.func_names[g.func],
              "function_index": g.func,
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
        out["stage2"] = {"found": True, "range": g.range - r0, "range_index": g.range,
                         "range_ordinal": g.range - r0,
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
            s3.update(block=int(bm.block_id[chosen]), block_index=chosen,
                      block_id=int(bm.block_id[chosen]), start=bs,
                      end=bs + int(bm.block_size[chosen]), size=int(bm.block_size[chosen]))
        out["stage3"] = s3
        out["status"] = STATUS_NAMES[IN_BLOCK if chosen >= 0 else IN_FUNCTION_NO_BLOCK]
        return out

    def _region_starts_list(self) -> list[int]:
        if not hasattr(self, "_rs_list"):
            self._rs_list = self.region_start.tolist()
        return self._rs_list

    # ---------------------------------------------------------------- naming
    def function_name(self, func: int) -> str | None:
        return self.func_names[func] if func >= 0 else None


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


def _csr_expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For CSR rows ``[lo[i], hi[i])``: (row of each element, element index), row-major."""
    lo = np.asarray(lo, dtype=np.int64)
    n = np.maximum(np.asarray(hi, dtype=np.int64) - lo, 0)
    return np.repeat(np.arange(len(lo), dtype=np.int64), n), expand_ranges(lo, n)


def _next_distinct(addr: np.ndarray) -> np.ndarray:
    """For sorted addresses: the next strictly greater address (itself for the last)."""
    if not len(addr):
        return addr
    u = sorted_unique(addr)
    k = np.searchsorted(u, addr, side="right")
    return np.where(k < len(u), u[np.minimum(k, len(u) - 1)], addr)
