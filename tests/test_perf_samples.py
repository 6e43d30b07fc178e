"""The vectorized SAMPLE decoder equals the construct declaration on generated records."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bbmap.formats import perfdata as fmt
from bbmap.perf.samples import SampleLayout, decode_samples

U64 = st.integers(0, 2**64 - 1)
U32 = st.integers(0, 2**32 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
ALL_BITS = [fmt.S_IDENTIFIER, fmt.S_IP, fmt.S_TID, fmt.S_TIME, fmt.S_ADDR, fmt.S_ID,
            fmt.S_STREAM_ID, fmt.S_CPU, fmt.S_PERIOD, fmt.S_READ, fmt.S_CALLCHAIN, fmt.S_RAW,
            fmt.S_BRANCH_STACK, fmt.S_REGS_USER, fmt.S_STACK_USER, fmt.S_WEIGHT,
            fmt.S_DATA_SRC, fmt.S_TRANSACTION, fmt.S_REGS_INTR, fmt.S_PHYS_ADDR, fmt.S_AUX,
            fmt.S_CGROUP, fmt.S_DATA_PAGE_SIZE, fmt.S_CODE_PAGE_SIZE, fmt.S_WEIGHT_STRUCT]


@st.composite
def layouts(draw) -> SampleLayout:
    st_bits = 0
    for b in ALL_BITS:
        if draw(st.booleans()):
            st_bits |= b
    return SampleLayout(
        sample_type=st_bits, read_format=draw(st.integers(0, 31)),
        branch_sample_type=draw(st.sampled_from([0, fmt.BR_ANY, fmt.BR_ANY | fmt.BR_HW_INDEX])),
        nr_regs_user=draw(st.integers(0, 4)), nr_regs_intr=draw(st.integers(0, 4)),
        branch_counters=draw(st.booleans()))


def _blob(draw, align: int = 1) -> bytes:
    n = draw(st.integers(0, 3)) * align
    return bytes(draw(st.binary(min_size=n, max_size=n)))


@st.composite
def sample_values(draw, lay: SampleLayout) -> dict:
    rf = lay.read_format
    v: dict = {"identifier": draw(U64), "ip": draw(U64), "pid": draw(I32), "tid": draw(I32),
               "time": draw(U64), "addr": draw(U64), "id": draw(U64), "stream_id": draw(U64),
               "cpu": draw(U32), "cpu_res": 0, "period": draw(U64), "weight": draw(U64),
               "data_src": draw(U64), "transaction": draw(U64), "phys_addr": draw(U64),
               "cgroup": draw(U64), "data_page_size": draw(U64), "code_page_size": draw(U64)}
    opt = {"time_enabled": draw(U64), "time_running": draw(U64)}
    if rf & fmt.R_GROUP:
        nr = draw(st.integers(0, 3))
        v["read"] = {"nr": nr, **opt, "values": [
            {"value": draw(U64), "id": draw(U64), "lost": draw(U64)} for _ in range(nr)]}
    else:
        v["read"] = {"value": draw(U64), **opt, "id": draw(U64), "lost": draw(U64)}
    v["callchain"] = draw(st.lists(U64, max_size=5))
    raw = _blob(draw, 4)
    v["raw"] = {"size": len(raw), "data": raw}
    nbr = draw(st.integers(0, 4))
    v["branch_stack"] = {
        "nr": nbr, "hw_idx": draw(st.integers(-1, 100)),
        "entries": [{"from_": draw(U64), "to": draw(U64), "flags": draw(U64)}
                    for _ in range(nbr)],
        "counters": [draw(U64) for _ in range(nbr)]}
    for name, n in (("regs_user", lay.nr_regs_user), ("regs_intr", lay.nr_regs_intr)):
        abi = draw(st.sampled_from([0, 1, 2]))
        v[name] = {"abi": abi, "regs": [draw(U64) for _ in range(n)]}
    stack = _blob(draw, 8)
    v["stack_user"] = {"size": len(stack), "data": stack, "dyn_size": len(stack)}
    aux = _blob(draw, 8)
    v["aux"] = {"size": len(aux), "data": aux}
    return v


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_decoder_equals_construct(data):
    lay = data.draw(layouts())
    s = lay.construct()
    values = [data.draw(sample_values(lay)) for _ in range(data.draw(st.integers(1, 4)))]
    buf = bytearray()
    offs = []
    for v in values:
        body = s.build(v)
        offs.append(len(buf))
        buf += fmt.build_record(fmt.REC_SAMPLE, body, misc=2)
    arr = np.frombuffer(bytes(buf), np.uint8)
    d = decode_samples(arr, np.array(offs), lay)
    assert not d.bad.any()
    for i, off in enumerate(offs):
        size = int.from_bytes(buf[off + 6:off + 8], "little")
        ref = s.parse(bytes(buf[off + 8:off + size]))
        st_ = lay.sample_type
        assert int(d.ip[i]) == (ref.ip if st_ & fmt.S_IP else 0)
        if st_ & fmt.S_TID:
            assert (int(d.pid[i]), int(d.tid[i])) == (ref.pid, ref.tid)
        assert int(d.time[i]) == (ref.time if st_ & fmt.S_TIME else 0)
        assert int(d.period[i]) == (ref.period if st_ & fmt.S_PERIOD else 0)
        want_id = ref.id if st_ & fmt.S_ID else (ref.identifier if st_ & fmt.S_IDENTIFIER else 0)
        assert int(d.id[i]) == want_id
        lo, hi = int(d.br_ptr[i]), int(d.br_ptr[i + 1])
        if st_ & fmt.S_BRANCH_STACK:
            ents = ref.branch_stack.entries
            assert [(e.from_, e.to, e.flags) for e in ents] == list(zip(
                d.br_from[lo:hi].tolist(), d.br_to[lo:hi].tolist(), d.br_flags[lo:hi].tolist()))
            if lay.branch_sample_type & fmt.BR_HW_INDEX:
                assert int(d.br_hw_idx[i]) == ref.branch_stack.hw_idx
        else:
            assert hi == lo
        if st_ & fmt.S_CALLCHAIN:
            assert int(d.callchain_nr[i]) == len(ref.callchain)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_truncated_or_inflated_records_are_flagged_not_read_past(data):
    """Records cut short, or with a huge nr, are marked bad; nothing outside is read."""
    lay = SampleLayout(fmt.S_IP | fmt.S_TID | fmt.S_CALLCHAIN | fmt.S_BRANCH_STACK,
                       branch_sample_type=fmt.BR_ANY)
    v = data.draw(sample_values(lay))
    rec = bytearray(fmt.build_record(fmt.REC_SAMPLE, lay.construct().build(v), misc=2))
    what = data.draw(st.sampled_from(["cut", "cc_nr", "br_nr"]))
    if what == "cut":
        cut = data.draw(st.integers(8, len(rec) - 1))
        rec = rec[:cut]
        rec[6:8] = len(rec).to_bytes(2, "little")
    elif what == "cc_nr":
        # more entries than the rest of the record holds (a count that merely shifts the
        # fields after it can still fit, and then the record is not malformed)
        room = (len(rec) - 32) // 8
        rec[24:32] = data.draw(st.integers(room + 1, 2**64 - 1)).to_bytes(8, "little")
    else:
        pos = 32 + 8 * len(v["callchain"])
        room = (len(rec) - pos - 8) // 24
        rec[pos:pos + 8] = data.draw(st.integers(room + 1, 2**64 - 1)).to_bytes(8, "little")
    d = decode_samples(np.frombuffer(bytes(rec), np.uint8), np.array([0]), lay)
    assert d.bad.all()
    assert len(d.br_from) == 0


@settings(max_examples=150, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 5), st.integers(0, 3)),
                     min_size=1, max_size=8),
       lead=st.integers(0, 9), min_run=st.sampled_from([0, 64]), seed=st.integers(0, 2**32))
@pytest.mark.slow
def test_branch_columns_strided_runs_equal_the_entries(runs, lead, min_run, seed) -> None:
    """Branch stacks read as strided runs (equal depth and spacing) or gathered, at any
    byte alignment: each entry's (from, to, flags) as its bytes say."""
    import struct

    import bbmap.perf.samples as smp

    rng = np.random.default_rng(seed)
    blob = bytearray(rng.integers(0, 256, lead, dtype=np.uint8).tobytes())
    starts, nrs, want = [], [], []
    for rows, depth, gap in runs:  # ``rows`` records of ``depth`` entries, ``gap`` extra
        for _ in range(rows):      # words after each (a record's other fields)
            starts.append(len(blob))
            nrs.append(depth)
            for _ in range(depth):
                e = rng.integers(0, 2**63, 3, dtype=np.int64).astype(np.uint64) * 2 + 1
                want.append(tuple(int(x) for x in e))
                blob += struct.pack("<3Q", *want[-1])
            blob += bytes(8 * gap)
    buf = np.frombuffer(bytes(blob), np.uint8)
    old = smp.RUN_MIN_ENTRIES
    smp.RUN_MIN_ENTRIES = min_run
    try:
        total = sum(nrs)
        f, t, fl = smp.branch_columns(buf, np.array(starts, np.int64),
                                      np.array(nrs, np.int64), total)
    finally:
        smp.RUN_MIN_ENTRIES = old
    assert list(zip(f.tolist(), t.tolist(), fl.tolist())) == want
    assert f.dtype == t.dtype == fl.dtype == np.uint64 and f.flags.c_contiguous
