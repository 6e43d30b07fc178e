"""The reader's one-layout fast path (``PerfData._decode_one_layout``) = its general path.

The general path (``one_layout_fast = False``: every layout's samples scattered into the
batch through an index) is the reference.  Hypothesis writes streams with PerfWriter --
sample_type with and without IP, TIME, PERIOD, CPU, ADDR, ID / IDENTIFIER, branch
stacks; file, pipe and compressed -- optionally damages them (bytes flipped; SAMPLE records
made 8 bytes short of their fields, so they are dropped as too short), and
streams them both ways in small chunks: every batch's columns, the record counts and
the diagnostics must be equal.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bbmap.formats import perfdata as fmt
from bbmap.perf import PerfData, SampleBatch
from bbmap.perf.writer import PerfWriter

COLUMNS = ("seq", "pid", "tid", "time", "cpumode", "ip", "period", "event", "br_ptr",
           "br_from", "br_to", "br_flags")
OPTIONAL = [fmt.S_IP, fmt.S_TIME, fmt.S_PERIOD, fmt.S_CPU, fmt.S_ADDR, fmt.S_ID,
            fmt.S_IDENTIFIER]


def record_offsets(blob: bytes) -> list[int]:
    """Offsets of the records of a file-mode perf.data (header: data offset at 40)."""
    off, end = int.from_bytes(blob[40:48], "little"), len(blob)
    end = min(end, off + int.from_bytes(blob[48:56], "little"))
    out = []
    while off + 8 <= end:
        size = int.from_bytes(blob[off + 6:off + 8], "little")
        if size < 8:
            break
        out.append(off)
        off += size
    return out


def stream(path, fast: bool, chunk: int):
    p = PerfData(path)
    p.one_layout_fast = fast
    out = []
    for item in p.stream(chunk):
        if isinstance(item, SampleBatch):
            out.append({c: getattr(item, c) for c in COLUMNS})
        else:
            out.append(repr(item))
    return out, p.record_counts, [str(d) for d in p.diagnostics]


def same(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, str) or isinstance(y, str):
            if x != y:
                return False
            continue
        for c in COLUMNS:
            if x[c].dtype != y[c].dtype or not np.array_equal(x[c], y[c]):
                return False
    return True


@settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(data=st.data())
def test_one_layout_equals_general(tmp_path, data):
    bits = fmt.S_TID | sum(b for b in OPTIONAL if data.draw(st.booleans()))
    branches = data.draw(st.booleans())
    mode = data.draw(st.sampled_from([{}, {"pipe": True}, {"compress": True}]))
    path = tmp_path / "w.data"
    n = data.draw(st.integers(1, 60))
    with PerfWriter(path, sample_type=bits | (fmt.S_BRANCH_STACK if branches else 0),
                    branch_sample_type=(fmt.BR_ANY | 1) if branches else 0,
                    sample_period=data.draw(st.integers(1, 10**6)), **mode) as w:
        w.add_comm(7, 7, "p", time=0)
        w.add_mmap2(7, 7, 0x400000, 0x10000, 0, "/bin/true", time=0)
        for i in range(n):
            br = data.draw(st.lists(st.tuples(st.integers(0, 2**48), st.integers(0, 2**48),
                                              st.integers(0, 3)), max_size=4)) \
                if branches else None
            w.add_sample(ip=data.draw(st.integers(0, 2**64 - 1)), pid=7, tid=7,
                         time=1000 + i, period=data.draw(st.integers(1, 2**40)),
                         branches=br)
    blob = bytearray(path.read_bytes())
    if not mode and data.draw(st.booleans()):  # damage the file
        samples = [o for o in record_offsets(blob)
                   if int.from_bytes(blob[o:o + 4], "little") == fmt.REC_SAMPLE]
        for _ in range(data.draw(st.integers(1, 4))):
            how = data.draw(st.sampled_from(["flip", "short", "short"]))
            if how == "flip":
                i = data.draw(st.integers(0, len(blob) - 1))
                blob[i] ^= 1 << data.draw(st.integers(0, 7))
            elif samples:  # a SAMPLE 8 bytes short of its fields; its last 8 bytes
                o = data.draw(st.sampled_from(samples))  # become a FINISHED_ROUND
                size = int.from_bytes(blob[o + 6:o + 8], "little")
                if size >= 16:
                    blob[o + 6:o + 8] = (size - 8).to_bytes(2, "little")
                    blob[o + size - 8:o + size] = (
                        fmt.REC_FINISHED_ROUND | (8 << 48)).to_bytes(8, "little")
        path.write_bytes(bytes(blob))
    chunk = data.draw(st.sampled_from([1, 7, 64, 65536]))
    try:
        fast = stream(path, True, chunk)
    except Exception as e:  # noqa: BLE001 - damaged headers: both ways must agree
        fast = repr(e)
    try:
        slow = stream(path, False, chunk)
    except Exception as e:  # noqa: BLE001
        slow = repr(e)
    if isinstance(fast, str) or isinstance(slow, str):
        assert fast == slow
        return
    event("samples dropped as too short" if any("too short" in d for d in fast[2])
          else "no sample dropped")
    assert same(fast[0], slow[0])
    assert fast[1:] == slow[1:]
