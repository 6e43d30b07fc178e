"""The documented rules (spec/index.md) on one small hand-laid map."""

import numpy as np

from bbmap.binary.types import FunctionSymbols, SectionInfo
from bbmap.index import IN_BLOCK, IN_FUNCTION_NO_BLOCK, OUTSIDE_FUNCTION, BlockIndex
from bbmap.model import BlockMapBuilder, BlockRecord, FunctionRecord, RangeRecord


def _index():
    b = BlockMapBuilder()
    b.add(FunctionRecord(address=0x1000, version=2, feature=8, name="foo", ranges=[
        RangeRecord(0x1000, [BlockRecord(0, 0x0, 8, 0), BlockRecord(1, 0x8, 0, 0),
                             BlockRecord(2, 0x8, 8, 0), BlockRecord(3, 0x14, 0xC, 0)]),
        RangeRecord(0x2000, [BlockRecord(4, 0, 0x10, 0)])]))
    b.add(FunctionRecord(address=0x1000, version=2, name="foo_icf_twin",
                         ranges=[RangeRecord(0x1000, [BlockRecord(0, 0, 0x20, 0)])]))
    syms = [(0x1000, 0x20, "foo"), (0x2000, 0x10, "foo.cold"), (0x2800, 0, "_init"),
            (0x3000, 0x10, "bar"), (0x3100, 0x8, "bar.cold")]
    fs = FunctionSymbols(address=np.array([s[0] for s in syms], "u8"),
                         size=np.array([s[1] for s in syms], "u8"),
                         section=np.zeros(len(syms), "i4"), names=[s[2] for s in syms],
                         display=[s[2] for s in syms], is_func=np.ones(len(syms), "?"))
    secs = [SectionInfo(1, ".init", 1, 6, 0x2800, 0x2800, 0x17, 0),
            SectionInfo(2, ".text", 1, 6, 0x3000, 0x3000, 0x200, 0)]
    return BlockIndex(b.build(), fs, secs)


def test_empty_block_source_vs_target():
    idx = _index()
    src = idx.lookup(np.array([0x1008], np.uint64))
    tgt = idx.lookup_direction(np.array([0x1008], np.uint64), to=True)
    bm = idx.block_map
    assert int(bm.block_id[src.block[0]]) == 2  # a sample: the non-empty block
    assert int(bm.block_id[tgt.block[0]]) == 1  # a jump target: the first block there
    ex = idx.explain(0x1008, to=True)
    assert ex["stage3"]["blocks_at_address"] == [1, 2]


def test_gap_cold_range_symbol_only_and_zero_size_symbol():
    idx = _index()
    a = np.array([0x1011, 0x2004, 0x3004, 0x3104, 0x2810, 0x2900, 0x0FFF], np.uint64)
    lk = idx.lookup(a)
    assert list(lk.status) == [IN_FUNCTION_NO_BLOCK, IN_BLOCK, IN_FUNCTION_NO_BLOCK,
                               IN_FUNCTION_NO_BLOCK, IN_FUNCTION_NO_BLOCK, OUTSIDE_FUNCTION,
                               OUTSIDE_FUNCTION]
    names = [idx.function_name(int(f)) for f in lk.func]
    assert names[:5] == ["foo", "foo", "bar", "bar", "_init"]  # bar.cold joins bar
    assert int(lk.range[1]) == 1  # the cold range of foo
    assert "padding" in idx.explain(0x1011)["stage3"]["why"]
    assert idx.explain(0x3004)["stage2"]["why"] == "this function has no block map"
    assert idx.aliases == {1: 0}  # identical code folding: the first map wins
    # _init (size 0) stops at the end of .init instead of running into .text's padding
    assert idx.explain(0x2900)["status"] == "outside-function"
