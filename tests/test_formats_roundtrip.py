"""Generated maps of every version and feature combination: the construct writer and the
fast writer agree byte for byte; the construct reference decoder gives the records back;
the fast decoder equals the reference -- also on truncated and corrupted bytes."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from bbmap.binary.decode_fast import decode_section_fast
from bbmap.binary.decode_ref import decode_section_ref
from bbmap.binary.mapinput import KIND_BB_INFO, KIND_V0, KIND_VERSIONED, MapInput
from bbmap.binary.writer import encode_map, encode_map_fast
from bbmap.formats.bbaddrmap import SHT_LLVM_BB_ADDR_MAP, SHT_LLVM_BB_ADDR_MAP_V0
from bbmap.model import (
    VERSION_BB_INFO,
    BlockMapBuilder,
    BlockRecord,
    FunctionRecord,
    MapSource,
    RangeRecord,
)

SRC = MapSource("section", 5, ".llvm_bb_addr_map", SHT_LLVM_BB_ADDR_MAP, 1)
u32 = st.integers(0, 2**32 - 1)
small = st.integers(0, 300)
big = st.one_of(small, st.integers(0, 2**64 - 1))


@st.composite
def function(draw, version: int):
    """One function whose features are legal for ``version`` (any combination)."""
    if version >= 2:
        allowed = 0x1F | (0x20 if version >= 3 else 0) | (0x40 if version >= 4 else 0) \
            | (0x80 if version >= 5 else 0)
        feature = draw(st.integers(0, 0xFF)) & allowed
        if feature & 0x10:
            feature &= ~0x06  # LLVM refuses BBFreq/BrProb without entries
        if feature & 0x80 and not feature & 0x06:
            feature |= 0x02
    elif version == 1:
        feature = draw(st.sampled_from([0, 0, 0, 0x80, 0x03]))  # ignored by v1 readers
    else:
        feature = 0
    eff = feature if version >= 2 else 0
    nranges = draw(st.integers(1, 3)) if eff & 0x08 else 1
    ranges = []
    for _ in range(nranges):
        nblocks = draw(st.integers(0 if version != VERSION_BB_INFO else 1, 6))
        blocks, end = [], 0
        for i in range(nblocks):
            gap = draw(st.sampled_from([0, 0, 0, 1, 7, 200])) if version != 0 else 0
            if version in (0, VERSION_BB_INFO):
                gap = draw(st.sampled_from([0, 0, 3]))
            cs = tuple(sorted(draw(st.lists(st.integers(0, 300), max_size=3)))) \
                if eff & 0x20 else ()
            size = draw(small) + (cs[-1] if cs else 0)
            off = end + gap if (i or version not in (0, VERSION_BB_INFO)) else 0
            md = draw(st.one_of(st.integers(0, 0x1F if version >= 2 else 0x0F),
                                st.integers(0, 0xFF)))  # unknown bits: kept, warned
            b = BlockRecord(id=draw(u32) if version >= 2 else i, offset=off, size=size, md=md,
                            hash=draw(big) if eff & 0x40 else 0, callsites=cs)
            if eff & 0x02:
                b.freq = draw(big)
            if eff & 0x80:
                b.postlink_freq = draw(u32)
            if eff & 0x04:
                b.successors = tuple((draw(u32), draw(u32), draw(u32) if eff & 0x80 else 0)
                                     for _ in range(draw(st.integers(0, 3))))
            end = off + size
            blocks.append(b)
        base = draw(st.integers(0, 2**40))
        if eff & 0x10:
            declared = draw(st.integers(0, 50))
            ranges.append(RangeRecord(base=base, blocks=[], num_blocks=declared))
        else:
            ranges.append(RangeRecord(base=base, blocks=blocks))
    return FunctionRecord(address=ranges[0].base, ranges=ranges, version=version,
                          feature=feature, entry_count=draw(big) if eff & 0x01 else 0)


@st.composite
def section(draw):
    kind = draw(st.sampled_from(["v0", "versioned", "bb_info"]))
    if kind == "v0":
        fns = draw(st.lists(function(0), max_size=5))
    elif kind == "bb_info":
        fns = draw(st.lists(function(VERSION_BB_INFO), max_size=5))
    else:
        versions = draw(st.lists(st.integers(1, 5), max_size=6))
        fns = [draw(function(v)) for v in versions]
    return kind, fns


def _encode(kind, fns, fast=False):
    enc = encode_map_fast if fast else encode_map
    if kind == "v0":
        return enc(fns, sh_type=SHT_LLVM_BB_ADDR_MAP_V0)
    if kind == "bb_info":
        return enc(fns, version=VERSION_BB_INFO)
    return enc(fns)


def _input(kind, data):
    k = {"v0": KIND_V0, "versioned": KIND_VERSIONED, "bb_info": KIND_BB_INFO}[kind]
    return MapInput(data=data, kind=k, file="gen.o", label="section [5] .llvm_bb_addr_map",
                    source=SRC)


def _expected(fns):
    b = BlockMapBuilder([SRC])
    for i, f in enumerate(fns):
        b.add(f)
        for r in f.ranges:
            if r.num_blocks is None:
                r.num_blocks = len(r.blocks)
        del i
    return b.build()


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(section())
def test_writers_agree_and_reference_round_trips(sec):
    kind, fns = sec
    data = _encode(kind, fns)
    assert data == _encode(kind, fns, fast=True)
    m, diags = decode_section_ref(_input(kind, data))
    assert not [d for d in diags if d.severity == "error"], diags
    if any(b.md & ~0x1F for f in fns for r in f.ranges for b in r.blocks) and kind != "bb_info":
        assert any("Metadata bits" in d.message for d in diags)
    exp = _expected(fns)
    assert m.differences(exp, check_provenance=False) in ([], ["func_map_offset"])
    # and the bytes rebuild identically from what was decoded
    from bbmap.model import function_records
    assert _encode(kind, list(function_records(m))) == data


@SETTINGS
@given(section())
def test_fast_equals_reference(sec):
    kind, fns = sec
    inp = _input(kind, _encode(kind, fns))
    r, rd = decode_section_ref(inp)
    f, fd = decode_section_fast(inp)
    assert r.differences(f) == []
    assert [str(d) for d in rd] == [str(d) for d in fd]


@SETTINGS
@given(section(), st.data())
def test_fast_equals_reference_on_damaged_bytes(sec, data):
    kind, fns = sec
    raw = bytearray(_encode(kind, fns))
    if not raw:
        return
    how = data.draw(st.sampled_from(["truncate", "flip", "overwrite"]))
    if how == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255)) if how == "overwrite" else raw[i] ^ 0x80
    inp = _input(kind, bytes(raw))
    r, rd = decode_section_ref(inp)
    f, fd = decode_section_fast(inp)
    assert r.differences(f) == []
    assert [d for d in rd if d.severity == "error"] == [d for d in fd if d.severity == "error"]
