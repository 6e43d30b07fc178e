"""The index against an independent oracle built from generated layouts.

Layouts include multi-range functions, empty blocks, padding gaps between blocks,
gaps between functions, functions known only from the symbol table, and `.cold`
parts.  The oracle reads the generator's own description, not the index.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary.types import FunctionSymbols, parent_name
from bbmap.index import IN_BLOCK, IN_FUNCTION_NO_BLOCK, OUTSIDE_FUNCTION, BlockIndex
from bbmap.model import BlockMapBuilder, BlockRecord, FunctionRecord, RangeRecord


@st.composite
def layouts(draw):
    """Returns (block_map, symbols, parts) where parts describe every function part."""
    nfunc = draw(st.integers(0, 6))
    addr = draw(st.integers(0x1000, 0x2000))
    builder = BlockMapBuilder()
    syms = []  # (addr, size, name)
    parts = []  # dict(start, end, name, map_func, range, blocks=[(gidx, start, size)])
    pending_ranges = []  # multi-range parts are placed after all primaries
    gblock = 0
    grange = 0
    map_f = 0
    records = []
    for i in range(nfunc):
        name = f"f{i}"
        has_map = draw(st.booleans()) or i == 0
        nranges = draw(st.integers(1, 3))
        if not has_map:
            size = draw(st.integers(1, 40))
            syms.append((addr, size, name))
            parts.append(dict(start=addr, end=addr + size, name=name, map_func=-1, range=-1,
                              blocks=[]))
            addr += size + draw(st.integers(0, 16))
            if nranges > 1:
                pending_ranges.append((name, None, draw(st.integers(1, 30))))
            continue
        ranges = []
        for _ in range(nranges):
            ranges.append(draw(st.lists(
                st.tuples(st.integers(0, 12), st.integers(0, 3)),  # (size, padding before)
                min_size=1, max_size=6)))
        extra = draw(st.integers(0, 8))  # symbol longer than the blocks (trailing padding)
        records.append((name, ranges, draw(st.booleans()), extra))
        # place range 0 now, others later (like .text.split / .cold sections)
        placed = [None] * nranges
        placed[0] = addr
        addr += _extent(ranges[0]) + extra + draw(st.integers(0, 16))
        for r in range(1, nranges):
            pending_ranges.append((name, (map_f, r, ranges[r]), 0))
        records[-1] = (name, ranges, records[-1][2], records[-1][3], placed)
        map_f += 1
    # place secondary ranges / cold parts
    for name, info, size in pending_ranges:
        if info is None:
            syms.append((addr, size, name + ".cold"))
            parts.append(dict(start=addr, end=addr + size, name=name, map_func=-1, range=-1,
                              blocks=[]))
            addr += size + draw(st.integers(0, 16))
        else:
            f, r, blocks = info
            records[f][4][r] = addr
            addr += _extent(blocks) + draw(st.integers(0, 16))
    for f, (name, ranges, named, extra, placed) in enumerate(records):
        rrs = []
        for r, blocks in enumerate(ranges):
            base = placed[r]
            off = 0
            brs = []
            pblocks = []
            for bid, (size, pad) in enumerate(blocks):
                off += pad if bid else 0
                brs.append(BlockRecord(id=len(pblocks) + 10 * r, offset=off, size=size, md=0))
                pblocks.append((gblock, base + off, size))
                gblock += 1
                off += size
            rrs.append(RangeRecord(base=base, blocks=brs))
            # symbol: range 0 is "name", others "name.cold"; sometimes longer than the blocks
            symname = name if r == 0 else f"{name}.cold"
            symsize = max(off, 1) + (extra if r == 0 else 0)
            if r == 0 or named:
                syms.append((base, symsize, symname))
            end = base + max(off, symsize if (r == 0 or named) else 0)
            parts.append(dict(start=base, end=end, name=name, map_func=f, range=grange,
                              blocks=pblocks))
            grange += 1
        builder.add(FunctionRecord(address=placed[0], ranges=rrs, version=2,
                                   feature=8 if len(rrs) > 1 else 0,
                                   name=name if named else None))
    bm = builder.build()
    syms.sort()
    fs = FunctionSymbols(
        address=np.array([s[0] for s in syms], dtype="u8"),
        size=np.array([s[1] for s in syms], dtype="u8"),
        section=np.zeros(len(syms), "i4"),
        names=[s[2] for s in syms], display=[s[2] for s in syms],
        is_func=np.ones(len(syms), "?"))
    return bm, fs, parts, addr


def _extent(blocks):
    off = 0
    for i, (size, pad) in enumerate(blocks):
        off += (pad if i else 0) + size
    return max(off, 1)


def oracle(parts, a, to):
    for p in parts:
        if p["start"] <= a < p["end"]:
            if p["range"] < 0:
                return p["name"], -1, -1, IN_FUNCTION_NO_BLOCK, p["map_func"]
            if to:
                for g, s, _size in p["blocks"]:
                    if s == a:
                        return p["name"], p["range"], g, IN_BLOCK, p["map_func"]
            for g, s, size in p["blocks"]:
                if s <= a < s + size:
                    return p["name"], p["range"], g, IN_BLOCK, p["map_func"]
            return p["name"], p["range"], -1, IN_FUNCTION_NO_BLOCK, p["map_func"]
    return None, -1, -1, OUTSIDE_FUNCTION, -1


@pytest.mark.slow
@given(layouts(), st.lists(st.integers(0, 0x3000), max_size=40))
@settings(max_examples=250, deadline=None)
def test_index_matches_oracle(layout, extra):
    bm, fs, parts, end = layout
    idx = BlockIndex(bm, fs)
    probes = set(extra) | {0, end, end + 1}
    for p in parts:
        probes |= {p["start"] - 1, p["start"], p["end"] - 1, p["end"]}
        for _, s, size in p["blocks"]:
            probes |= {s - 1, s, s + size - 1, s + size}
    probes = sorted(x for x in probes if x >= 0)
    arr = np.array(probes, dtype=np.uint64)
    for to in (False, True):
        bulk = idx.lookup_direction(arr, to=to)
        staged = idx.lookup_staged(arr, to=to)
        for i, a in enumerate(probes):
            name, rng, blk, status, mf = oracle(parts, a, to)
            got = (int(bulk.func[i]), int(bulk.range[i]), int(bulk.block[i]), int(bulk.status[i]))
            assert got == (int(staged.func[i]), int(staged.range[i]), int(staged.block[i]),
                           int(staged.status[i])), (a, to)
            assert got == idx.lookup_one(a, to=to), (a, to)
            assert got[1:] == (rng, blk, status), (hex(a), to, got, name)
            if name is None:
                assert got[0] == -1
            else:
                assert parent_name(idx.func_names[got[0]]) == name
                if mf >= 0:
                    assert got[0] == mf
            ex = idx.explain(a, to=to)
            assert ex["status"] == {IN_BLOCK: "in-block",
                                    IN_FUNCTION_NO_BLOCK: "in-function-no-block",
                                    OUTSIDE_FUNCTION: "outside-function"}[status]
            if blk >= 0:
                assert ex["stage3"]["block_index"] == blk
    if not to:
        assert np.array_equal(idx.lookup(arr).block, idx.lookup_direction(arr, to=False).block)
    if idx._table is not None:  # the bucket table is its definition: points <= each start
        starts = idx._lo + (np.arange(int(idx._nb), dtype=np.uint64) << idx._shift)
        assert np.array_equal(idx._table[:-1], np.searchsorted(idx.points, starts, "right"))
