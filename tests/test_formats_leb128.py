"""ULEB128: the construct type, the plain helpers and LLVM's width rule agree."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given

from bbmap.formats.leb128 import ULEB32, ULEB64, MapFault, decode_uleb, encode_uleb


@given(st.integers(0, 2**64 - 1))
def test_round_trip(v):
    data = encode_uleb(v)
    assert ULEB64.build(v) == data
    assert ULEB64.parse(data) == v
    assert decode_uleb(data + b"\x99", 0) == (v, len(data))


@given(st.integers(2**32, 2**64 - 1))
def test_over_32_bits_is_an_error(v):
    with pytest.raises(MapFault) as e:
        ULEB32.parse(encode_uleb(v))
    assert "exceeds UINT32_MAX" in str(e.value) and e.value.offset == 0


def test_known_bytes():
    # LLVM's own examples: 624485 = e5 8e 26; non-canonical padding is accepted
    assert encode_uleb(624485) == bytes.fromhex("e58e26")
    assert ULEB32.parse(bytes.fromhex("80808000")) == 0
    assert ULEB32.parse(b"\x7f") == 127


def test_runs_off_the_end():
    with pytest.raises(MapFault) as e:
        ULEB32.parse(b"\x80\x80")
    assert e.value.message == ("unable to decode LEB128 at offset 0x00000000: "
                               "malformed uleb128, extends past end")


def test_too_long_is_refused_without_looping():
    with pytest.raises(MapFault):
        ULEB64.parse(b"\xff" * 10_000 + b"\x01")
