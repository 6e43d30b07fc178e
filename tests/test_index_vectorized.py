"""The vectorized stage-1 table and symbol reading equal the per-item code they replaced.

``_ReferenceIndex`` and ``_reference_function_symbols`` are the previous implementations
(a ``Region`` per map range and per symbol, ``bisect`` per symbol, one ``name()`` per
symbol and a sort of (address, name) tuples), kept here verbatim as oracles.  They are
compared field by field on messy generated inputs (folded functions, overlapping and
empty ranges, several symbols at one address, zero-size symbols bounded by sections,
``.cold``/``.__part.N`` parts before and after their parent, unnamed map functions) and on
every corpus binary.
"""

from __future__ import annotations

import bisect
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.aggregate.functions import _first_of_pair
from bbmap.binary import load_binary
from bbmap.binary.symbols import (
    SHN_LORESERVE,
    SHN_UNDEF,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
    SymbolTable,
    demangle,
    function_symbols,
)
from bbmap.binary.types import FunctionSymbols, SectionInfo, parent_name
from bbmap.errors import BBMapError
from bbmap.index import (
    _U64_MAX,
    OUTSIDE_FUNCTION,
    SOURCE_MAP,
    SOURCE_SYMBOL,
    BlockIndex,
    Region,
    _next_distinct,
    _range_ends,
)
from bbmap.model import BlockMap, BlockMapBuilder, BlockRecord, FunctionRecord, RangeRecord

_PART = re.compile(r"\.(?:cold|__part\.\d+|eh)$")


class _ReferenceIndex(BlockIndex):
    """The previous ``BlockIndex.__init__`` (per-item Python), as an oracle."""

    def __init__(self, block_map: BlockMap, symbols: FunctionSymbols | None = None,
                 sections: Sequence[SectionInfo] | None = None) -> None:
        self.block_map = bm = block_map
        symbols = symbols if symbols is not None else FunctionSymbols()
        self.symbols = symbols
        F = bm.num_functions
        names: list[str] = []
        for f in range(F):
            n = bm.func_name[f] if f < len(bm.func_name) else None
            names.append(n or "")
        self.func_map = np.arange(F, dtype=np.int32)
        self.aliases = {}
        cand: list[Region] = []
        ends = _range_ends(bm)
        for f in range(F):
            for r in bm.function_ranges(f):
                cand.append(Region(int(bm.range_base[r]), int(ends[r]), f, r, SOURCE_MAP))
        cand.sort(key=lambda g: (g.start, g.func, g.range))
        regions: list[Region] = []
        for g in cand:
            if regions and regions[-1].start == g.start:
                if regions[-1].func != g.func:
                    self.aliases.setdefault(g.func, regions[-1].func)
                continue
            regions.append(g)
        sym_addr = np.asarray(symbols.address, dtype=np.uint64)
        sym_names = list(symbols.names)
        by_addr: dict[int, int] = {}
        for i in range(len(sym_addr)):
            by_addr.setdefault(int(sym_addr[i]), i)
        for f in range(F):
            if not names[f]:
                i = by_addr.get(int(bm.func_address[f]))
                names[f] = sym_names[i] if i is not None else f"func@{int(bm.func_address[f]):#x}"
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
            if not sym_size[i] and sec_spans:
                j = bisect.bisect_right(sec_starts, a) - 1
                e = min(e, sec_spans[j][1]) if j >= 0 and a < sec_spans[j][1] else a
            k = bisect.bisect_right(starts, a) - 1
            if k >= 0 and regions[k].start <= a < max(regions[k].end, regions[k].start + 1):
                if a == regions[k].start and e > regions[k].end:
                    extend[k] = max(extend.get(k, 0), e)
                continue
            if a in seen or e <= a:
                continue
            seen.add(a)
            name = sym_names[i]
            pn = parent_name(name)
            fid = name_to_func.get(pn) if pn != name else None
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
                continue
            if final and final[-1].start == g.start:
                continue
            if final and final[-1].end > g.start:
                p = final[-1]
                final[-1] = Region(p.start, g.start, p.func, p.range, p.source)
            final.append(g)
        self._regions = final
        self.func_names = names
        shown = dict(zip(symbols.names, symbols.display or symbols.names))
        self.func_display = [shown.get(n, n) for n in names]
        self.func_map = np.concatenate([self.func_map,
                                        np.full(len(names) - F, -1, dtype=np.int32)])
        self.region_start = np.array([g.start for g in final], dtype=np.uint64)
        self.region_end = np.array([g.end for g in final], dtype=np.uint64)
        self.region_func = np.array([g.func for g in final], dtype=np.int32)
        self.region_range = np.array([g.range for g in final], dtype=np.int32)
        self.region_source = np.array([g.source for g in final], dtype=np.int8)
        kept = self.region_range[self.region_range >= 0]
        blocks = (np.concatenate([np.arange(bm.range_block_ptr[r], bm.range_block_ptr[r + 1])
                                  for r in kept]).astype(np.int64)
                  if len(kept) else np.zeros(0, np.int64))
        self._reference_tables(bm, blocks)

    def _reference_tables(self, bm: BlockMap, blocks: np.ndarray) -> None:
        """The unchanged rest of the old constructor, so whole tables can be compared."""
        brange = bm.block_range(blocks).astype(np.int32) if len(blocks) else \
            np.zeros(0, np.int32)
        bstart = (bm.range_base[brange] + bm.block_offset[blocks]).astype(np.uint64)
        bsize = bm.block_size[blocks].astype(np.uint64)
        ne = np.flatnonzero(bsize > 0)
        order = ne[np.argsort(bstart[ne], kind="stable")]
        self.block_start = bstart[order]
        self.block_end = self.block_start + bsize[order]
        self.block_index = blocks[order]
        self.block_range_of = brange[order]
        rbase = bm.range_base[brange].astype(np.uint64)
        torder = np.lexsort((np.arange(len(blocks)), np.iinfo(np.uint64).max - rbase, bstart))
        self.tblock_start = bstart[torder]
        self.tblock_index = blocks[torder]
        self.tblock_range_of = brange[torder]
        pts = np.unique(np.concatenate([self.region_start, self.region_end,
                                        self.block_start, self.block_end,
                                        self.tblock_start]))
        self.points = pts
        src = self.lookup_staged(pts, to=False)
        tgt = self.lookup_staged(pts, to=True)
        self._func = np.concatenate([[-1], src.func]).astype(np.int32)
        self._range = np.concatenate([[-1], src.range]).astype(np.int32)
        self._block = np.concatenate([[-1], src.block]).astype(np.int64)
        self._status = np.concatenate([[OUTSIDE_FUNCTION], src.status]).astype(np.int8)
        self._tblock = np.concatenate([[-1], tgt.block]).astype(np.int64)
        self._tstatus = np.concatenate([[OUTSIDE_FUNCTION], tgt.status]).astype(np.int8)
        self._build_buckets()


def _reference_function_symbols(tables: list[SymbolTable], *, demangle_names: bool = True
                                ) -> FunctionSymbols:
    """The previous ``function_symbols`` (one ``name()`` per symbol, tuple sort)."""
    rows: dict[tuple[int, str], tuple[int, int, bool]] = {}
    for t in tables:
        st_ = t.stype
        defined = (t.shndx != SHN_UNDEF) & (t.shndx < SHN_LORESERVE)
        funcs = defined & ((st_ == STT_FUNC) | (st_ == STT_GNU_IFUNC))
        maybe_part = defined & (st_ == STT_NOTYPE) & (t.size > 0)
        for i in np.nonzero(funcs | maybe_part)[0].tolist():
            name = t.name(i)
            is_func = bool(funcs[i])
            if not is_func and not _PART.search(name):
                continue
            key = (int(t.value[i]), name)
            if key not in rows:
                rows[key] = (int(t.size[i]), int(t.shndx[i]), is_func)
    keys = sorted(rows)
    fs = FunctionSymbols(
        address=np.array([k[0] for k in keys], dtype="u8"),
        size=np.array([rows[k][0] for k in keys], dtype="u8"),
        section=np.array([rows[k][1] for k in keys], dtype="i4"),
        names=[k[1] for k in keys],
        is_func=np.array([rows[k][2] for k in keys], dtype="?"))
    fs.display = [demangle(n) for n in fs.names] if demangle_names else list(fs.names)
    return fs


def _same_array(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert np.array_equal(a, b)


def assert_same_index(bm: BlockMap, syms: FunctionSymbols | None,
                      secs: Sequence[SectionInfo] | None) -> None:
    new = BlockIndex(bm, syms, secs)
    ref = _ReferenceIndex(bm, syms, secs)
    assert new.regions == ref.regions
    assert all(type(x) is int for g in new.regions for x in (g.start, g.end, g.func))
    for col in ("region_start", "region_end", "region_func", "region_range",
                "region_source", "func_map"):
        _same_array(getattr(new, col), getattr(ref, col))
    assert new.func_names == ref.func_names
    assert new.func_display == ref.func_display
    assert list(new.aliases.items()) == list(ref.aliases.items())  # order too
    for col in ("block_start", "block_end", "block_index", "block_range_of", "tblock_start",
                "tblock_index", "tblock_range_of", "points", "_func", "_range", "_block",
                "_status", "_tblock", "_tstatus"):
        _same_array(getattr(new, col), getattr(ref, col))
    probe = np.unique(np.concatenate([new.points, new.points - np.uint64(1),
                                      np.array([0, _U64_MAX], np.uint64)]))
    for to in (False, True):
        a, b = new.lookup_direction(probe, to=to), ref.lookup_direction(probe, to=to)
        for col in ("func", "range", "block", "status"):
            _same_array(getattr(a, col), getattr(b, col))
    for v in probe[:: max(1, len(probe) // 60)].tolist():
        for to in (False, True):
            assert new.lookup_one(v, to=to) == ref.lookup_one(v, to=to)
            assert new.explain(v, to=to) == ref.explain(v, to=to)


# ------------------------------------------------------------------ generated inputs
_NAMES = ["f", "g", "h", "f.cold", "g.cold", "h.__part.1", "f.cold.cold", "k.eh", "_Z1fv",
          "m", "m.cold", "", "f"]


def _random_inputs(seed: int) -> tuple[BlockMap, FunctionSymbols, list[SectionInfo]]:
    """Small, crowded layouts so that addresses, names and ranges collide often."""
    rnd = random.Random(seed)
    span = rnd.choice([64, 200, 1000])
    b = BlockMapBuilder()
    for _ in range(rnd.randint(0, 8)):
        ranges = []
        for _ in range(rnd.randint(1, 3)):
            blocks, off = [], 0
            for bid in range(rnd.randint(0, 4)):
                off += rnd.choice([0, 0, 1, 3])
                size = rnd.choice([0, 0, 2, 5, 9])
                blocks.append(BlockRecord(bid, off, size, 0))
                off += size
            ranges.append(RangeRecord(0x1000 + rnd.randrange(span), blocks))
        name = rnd.choice(_NAMES + [None, None])
        b.add(FunctionRecord(address=ranges[0].base, version=2, name=name, ranges=ranges))
    rows = []
    for _ in range(rnd.randint(0, 14)):
        rows.append((0x1000 + rnd.randrange(span), rnd.choice([0, 0, 1, 4, 16, 40]),
                     rnd.choice(_NAMES[:-2] + ["n", "n.cold", "p.__part.2"])))
    rows.sort(key=lambda r: r[0])  # FunctionSymbols are sorted by address
    fs = FunctionSymbols(address=np.array([r[0] for r in rows], "u8"),
                         size=np.array([r[1] for r in rows], "u8"),
                         section=np.zeros(len(rows), "i4"), names=[r[2] for r in rows],
                         display=[r[2].upper() for r in rows], is_func=np.ones(len(rows), "?"))
    secs = []
    if rnd.random() < 0.5:
        for i in range(rnd.randint(1, 3)):
            lo = 0x1000 + rnd.randrange(span)
            secs.append(SectionInfo(i + 1, f".t{i}", 1, rnd.choice([6, 6, 2]), lo, lo,
                                    rnd.choice([0, 8, 50, 300]), 0))
    return b.build(), fs, secs


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32))
def test_generated_layouts_match_reference(seed: int) -> None:
    bm, fs, secs = _random_inputs(seed)
    assert_same_index(bm, fs, secs or None)
    if seed % 5 == 0:
        assert_same_index(bm, None, None)


def test_empty_inputs_match_reference() -> None:
    assert_same_index(BlockMapBuilder().build(), None, None)
    assert_same_index(BlockMapBuilder().build(), FunctionSymbols(), [])


def test_first_of_pair_matches_dict() -> None:
    rnd = random.Random(7)
    for _ in range(200):
        n = rnd.randint(0, 30)
        addr = np.array(sorted(rnd.randrange(8) for _ in range(n)), "u8")
        size = np.array([rnd.randrange(3) for _ in range(n)], "u8")
        first: dict[tuple[int, int], int] = {}
        want = [first.setdefault(k, i) for i, k in
                enumerate(zip(addr.tolist(), size.tolist()))]
        assert _first_of_pair(addr, size).tolist() == want


def _random_table(rnd: random.Random, name: str) -> SymbolTable:
    words = ["a", "b.cold", "c.__part.3", "d.eh", "é", "b", "_ZN1x1yEv", "a.cold", "b"]
    strtab = b"\0"
    offs = []
    for w in words:
        offs.append(len(strtab))
        strtab += w.encode() + b"\0"
    if rnd.random() < 0.3:
        strtab += b"\xff\xfeunterminated"  # a bad byte and no final NUL
        offs.append(len(strtab) - 12)
    n = rnd.randint(0, 25)
    info = [rnd.choice([0, 1, 2, 3, 10]) | (rnd.choice([0, 1, 2]) << 4) for _ in range(n)]
    return SymbolTable(
        value=np.array([rnd.randrange(6) for _ in range(n)], "u8"),
        size=np.array([rnd.choice([0, 0, 4, 8]) for _ in range(n)], "u8"),
        info=np.array(info, "u1"),
        shndx=np.array([rnd.choice([0, 1, 2, 0xFFF1]) for _ in range(n)], "i4"),
        name_off=np.array([rnd.choice(offs + [0, len(strtab) + 5]) for _ in range(n)], "i8"),
        strtab=strtab, section_name=name)


def _assert_same_symbols(a: FunctionSymbols, b: FunctionSymbols) -> None:
    for col in ("address", "size", "section", "is_func"):
        _same_array(getattr(a, col), getattr(b, col))
    assert a.names == b.names
    assert a.display == b.display


def test_function_symbols_match_reference_generated() -> None:
    rnd = random.Random(11)
    for _ in range(400):
        tables = [_random_table(rnd, n) for n in (".symtab", ".dynsym")[:rnd.randint(0, 2)]]
        for dm in (True, False):
            _assert_same_symbols(function_symbols(tables, demangle_names=dm),
                                 _reference_function_symbols(tables, demangle_names=dm))


# ------------------------------------------------------------------ corpus binaries
def _corpus_binaries(corpus_dir: Path) -> list[Path]:
    out = []
    for man in (corpus_dir / "manifest.json", corpus_dir / "handmade" / "manifest.json"):
        if man.exists():
            for b in json.loads(man.read_text()).get("binaries", []):
                out.append(man.parent / b["path"])
    return out


@pytest.mark.slow
def test_corpus_binaries_match_reference(corpus_dir: Path) -> None:
    paths = [p for p in _corpus_binaries(corpus_dir) if p.exists()]
    if not paths:
        pytest.skip("no corpus binaries")
    checked = 0
    for p in paths:
        try:
            b = load_binary(str(p))
        except BBMapError:
            continue
        with b:
            tables = b.symbol_tables
            _assert_same_symbols(b.symbols, _reference_function_symbols(tables))
            _assert_same_symbols(function_symbols(tables, demangle_names=False),
                                 _reference_function_symbols(tables, demangle_names=False))
            assert_same_index(b.block_map, b.symbols, b.sections)
            assert_same_index(b.block_map, b.symbols, None)
        checked += 1
    assert checked
