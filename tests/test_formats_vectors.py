"""Byte vectors emitted by real compilers (shared/reference/bb-addr-map-format.md §3,
dumped from clang 13/14, 17-22) decode to what llvm-readobj and objdump showed."""

from __future__ import annotations

from bbmap.binary.decode_ref import decode_records
from bbmap.binary.mapinput import KIND_V0, KIND_VERSIONED, MapInput
from bbmap.formats.bbaddrmap import function_struct

Z8 = "00" * 8


def _decode(hexbytes: str, kind=KIND_VERSIONED):
    recs, diags = decode_records(MapInput(data=bytes.fromhex(hexbytes.replace(" ", "")),
                                          kind=kind))
    assert not diags
    return recs


def _blocks(rec):
    return [(b.id, b.offset, b.size, b.md, b.callsites) for r in rec.ranges for b in r.blocks]


def test_v0_clang13_mix():
    nocall, withcall = _decode(Z8 + "01 000e01" + Z8 + "03 000408 040e01 120601", KIND_V0)
    assert _blocks(nocall) == [(0, 0, 0xE, 1, ())]
    assert _blocks(withcall) == [(0, 0, 4, 8, ()), (1, 4, 0xE, 1, ()), (2, 0x12, 6, 1, ())]


def test_v2_clang17_withcall():
    (f,) = _decode("0200" + Z8 + "03 00000408 01000e01 03000601")
    assert _blocks(f) == [(0, 0, 4, 8, ()), (1, 4, 0xE, 1, ()), (3, 0x12, 6, 1, ())]


def test_v3_clang21_callsite_begin():
    (f,) = _decode("0320" + Z8 + "03 0000000408 010001040a01 0300000601")
    assert _blocks(f) == [(0, 0, 4, 8, ()), (1, 4, 14, 1, (4,)), (3, 18, 6, 1, ())]


def test_v5_clang22_nocall_withcall():
    nocall, withcall = _decode("050000" + Z8 + "01 00000e01"
                               + "052000" + Z8 + "03 0000000408 010001060701 0300000601")
    assert nocall.feature == 0 and withcall.feature == 0x20
    # objdump: call at 0x15..0x1a, ret at 0x20 -> BB1 [4, 0x11) with the call ending at +6
    assert _blocks(withcall) == [(0, 0, 4, 8, ()), (1, 4, 13, 1, (6,)), (3, 0x11, 6, 1, ())]


def test_v5_omit_entries_with_entry_count():
    (f,) = _decode("053100" + Z8 + "05 00")
    assert f.ranges[0].num_blocks == 5 and f.ranges[0].blocks == [] and f.entry_count == 0


def test_v5_hash_is_fixed_width():
    (f,) = _decode("056000" + Z8 + "01 0000000508 000068 62d9ade9ee")
    assert f.ranges[0].blocks[0].hash == 0xEEE9ADD962680000


def test_struct_builds_what_it_parses():
    data = bytes.fromhex(("052000" + Z8 + "03 0000000408 010001060701 0300000601").replace(" ", ""))
    st = function_struct(True)
    assert st.build(st.parse(data)) == data
