"""The struct fast path for side records equals the construct declarations."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from construct import ConstructError
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.side_construct import decode_side_construct

from bbmap.formats import perfdata as fmt
from bbmap.perf.side import decode_side

SHARED = Path(__file__).resolve().parents[2] / "shared" / "perf-corpus"
SIDE = [fmt.REC_MMAP, fmt.REC_MMAP2, fmt.REC_COMM, fmt.REC_FORK, fmt.REC_EXIT]
TRAILER_BITS = [fmt.S_TID, fmt.S_TIME, fmt.S_ID, fmt.S_STREAM_ID, fmt.S_CPU, fmt.S_IDENTIFIER]


def _both(typ, misc, buf, size, sample_type):
    out = []
    for fn in (decode_side, decode_side_construct):
        try:
            out.append(fn(typ, misc, memoryview(buf), 0, size, sample_type, 7))
        except (ValueError, ConstructError, struct.error):
            out.append("error")
    return out


@settings(max_examples=500, deadline=None)
@given(typ=st.sampled_from(SIDE), misc=st.sampled_from([0, 1, 2, 0x2002, 0x4002, 0x6002]),
       body=st.binary(max_size=120), name=st.text(max_size=20),
       bits=st.lists(st.sampled_from(TRAILER_BITS), unique=True),
       no_trailer=st.booleans())
@pytest.mark.slow
def test_fast_side_decoder_equals_construct(typ, misc, body, name, bits, no_trailer):
    sample_type = -1 if no_trailer else sum(bits)
    fixed = {fmt.REC_MMAP: 32, fmt.REC_MMAP2: 64, fmt.REC_COMM: 8}.get(typ, 24)
    if len(body) >= fixed and typ in (fmt.REC_MMAP, fmt.REC_MMAP2, fmt.REC_COMM):
        body = body[:fixed] + fmt.padded_name(name)
    trailer = bytes(range(fmt.sample_id_size(sample_type))) if sample_type >= 0 else b""
    rec = bytes(8) + body + trailer
    size = len(rec)
    fast, ref = _both(typ, misc, rec, size, sample_type)
    assert fast == ref


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/perf-corpus not present")
@pytest.mark.parametrize("name", ["perf.data.branch_stack_hw_index", "perf.data.forkexit-3.8",
                                  "perf.data.branch-4.14"])
def test_fast_side_decoder_on_real_records(name):
    from bbmap.perf import PerfData

    p = PerfData(SHARED / name)
    mv = p._mv
    off, end = p._data_start, p._data_end
    n = 0
    while off + 8 <= end:
        typ, misc, size = struct.unpack_from("<IHH", mv, off)
        if typ in SIDE:
            attr = p._trailer_attr(mv, off, size)
            stype = attr.sample_type if attr is not None and attr.sample_id_all else -1
            a = decode_side(typ, misc, mv, off, size, stype, n)
            b = decode_side_construct(typ, misc, mv, off, size, stype, n)
            assert a == b
            n += 1
        off += size
    assert n > 10
