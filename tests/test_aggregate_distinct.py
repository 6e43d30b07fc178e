"""IP samples resolved once per distinct key (bbmap/aggregate/distinct.py) = each on its own.

The reference is the per-sample path (``Annotator.distinct = False``, the code the
distinct path replaced for eligible batches).  Hypothesis draws batches over a real
corpus binary (its index and function table) and hand-written mappings: several pids
mapping the binary at different bases, libc, a pid with no mappings, kernel IPs and
kernel cpumodes, IPs above 2**48, constant and random periods (up to 2**52: float and
integer sums), one or several events, seq/time moments on both sides of a re-mmap of
the binary (a mapping change inside the batch), with and without ``--pid``.  Every
array, bucket, DSO table (with its order), the IP histogram and the fit evidence must
be equal.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import PIE_BINARY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bbmap.aggregate.annotator import Annotator
from bbmap.aggregate.distinct import distinct_samples
from bbmap.aggregate.profile import MappingsSpace
from bbmap.aggregate.resolve import IndexResolver
from bbmap.mappings import ProfileMappings
from bbmap.perf.records import (
    CPUMODE_KERNEL,
    CPUMODE_USER,
    MmapRecord,
    SampleBatch,
    SideRecords,
)
from bbmap.run import Session

if not os.path.exists(PIE_BINARY):
    pytest.skip("corpus not built", allow_module_level=True)
SESSION = Session(PIE_BINARY, addresses=True)
B = SESSION.b
PATH = os.path.abspath(PIE_BINARY)
BASES = {10: 0x5555_0000_0000, 11: 0x5600_0000_0000}
REMAP = 0x5700_0000_0000  # pid 10 maps the binary again here at seq REMAP_SEQ
REMAP_SEQ, REMAP_TIME = 500, 5000
LIBC = 0x7F00_0000_0000
KADDR = 0xFFFF_FFFF_8100_0000
EXEC = [s for s in B.segments if s.is_load and s.p_flags & 1]
STARTS = SESSION.ann.geom.start


def mmap(seq, pid, start, length, name, time=0):
    return MmapRecord(seq=seq, time=time, pid=pid, tid=pid, start=start, length=length,
                      pgoff=0, filename=name, prot=5, flags=2, build_id=None,
                      cpumode=CPUMODE_USER, is_mmap2=True)


def mappings(filter_pid):
    size = os.path.getsize(PIE_BINARY) + 0x1000
    recs = [mmap(1, 10, BASES[10], size, PATH), mmap(2, 11, BASES[11], size, PATH),
            mmap(3, 10, LIBC, 0x10000, "/usr/lib/libc.so.6"),
            mmap(REMAP_SEQ, 10, REMAP, size, PATH, time=REMAP_TIME)]
    return ProfileMappings.from_perf([SideRecords(recs)], B, pid=filter_pid)


def offsets() -> list[int]:
    """File offsets of block starts, block middles, and code outside blocks."""
    out = []
    for s in EXEC:
        for v in STARTS[:40].tolist():
            if s.p_vaddr <= v < s.p_vaddr + s.p_filesz:
                out += [v - s.p_vaddr + s.p_offset, v - s.p_vaddr + s.p_offset + 1]
        out += [s.p_offset, s.p_offset + s.p_filesz - 1, s.p_offset + s.p_filesz + 8]
    return out + [0, 0x10]


OFFS = offsets()


@pytest.fixture(autouse=True)
def every_batch_size(monkeypatch):
    """Small batches too (the drawn ones and the corpus' have tens of samples)."""
    monkeypatch.setattr("bbmap.aggregate.distinct.MIN_SAMPLES", 1)


@st.composite
def batches(draw):
    n = draw(st.integers(1, 120))
    pids = draw(st.sampled_from([[10], [11], [10, 11], [10, 11, 12], [12]]))
    kinds = ["bin", "bin", "bin", "remap", "libc", "kern", "low"]
    if draw(st.booleans()):  # user IPs above 2**48: several pids or events are not packed
        kinds.append("high")
    rows = []
    for _ in range(n):
        pid = draw(st.sampled_from(pids))
        kind = draw(st.sampled_from(kinds))
        if kind == "bin":
            ip = BASES.get(pid, BASES[10]) + draw(st.sampled_from(OFFS))
        elif kind == "remap":
            ip = REMAP + draw(st.sampled_from(OFFS))
        elif kind == "libc":
            ip = LIBC + draw(st.integers(0, 0x10100))
        elif kind == "kern":
            ip = KADDR + draw(st.integers(0, 64))
        elif kind == "low":
            ip = draw(st.integers(0, 0x2000))
        else:
            ip = (1 << 48) + draw(st.integers(0, 0x1000))
        cm = CPUMODE_KERNEL if draw(st.integers(0, 9)) == 0 else CPUMODE_USER
        rows.append((pid, ip, cm))
    const_period = draw(st.booleans())
    big = draw(st.sampled_from([100, 1 << 40, 1 << 52]))  # sums stay below 2**64
    periods = ([draw(st.integers(1, big))] * n if const_period
               else draw(st.lists(st.integers(1, big), min_size=n, max_size=n)))
    events = [0] * n if draw(st.booleans()) else draw(
        st.lists(st.integers(0, 2), min_size=n, max_size=n))
    lo = draw(st.sampled_from([10, REMAP_SEQ - 30, REMAP_SEQ + 1]))
    seq = np.sort(np.array(draw(st.lists(st.integers(lo, lo + 60), min_size=n, max_size=n))))
    timed = draw(st.booleans())
    time = seq * 10 if timed else np.zeros(n, np.uint64)
    return SampleBatch(seq=seq.astype(np.int64), pid=np.array([r[0] for r in rows], np.int32),
                       tid=np.array([r[0] for r in rows], np.int32),
                       time=np.asarray(time, np.uint64),
                       cpumode=np.array([r[2] for r in rows], np.uint8),
                       ip=np.array([r[1] for r in rows], np.uint64),
                       period=np.array(periods, np.uint64),
                       event=np.array(events, np.int16))


def state(a: Annotator) -> dict:
    ac = a.acct
    adr = a.addresses.result()
    return {"total": (ac.total_samples, ac.total_period), "samples": ac.samples.tolist(),
            "period": ac.period.tolist(), "dso": list(ac.dso_samples.items()),
            "block_samples": a.samples.block_samples.tolist(),
            "block_period": a.samples.block_period.tolist(),
            "func_samples": a.samples.func_samples.tolist(),
            "func_period": a.samples.func_period.tolist(),
            "no_block": a.no_block_funcs.tolist(),
            "ip_addr": adr.ip_addr.tolist(), "ip_samples": adr.ip_samples.tolist(),
            "addr_samples": adr.samples, "events": sorted(a.addresses._event_ids),
            "fit_ip": [x.tolist() for x in a.fit.ip],
            "fit_block": [x.tolist() for x in a.fit.ip_block], "fit_n": a.fit.n_ip}


def run(batches_, filter_pid, distinct: bool) -> tuple[dict, int]:
    pm = mappings(filter_pid)
    res = IndexResolver(MappingsSpace(pm), SESSION.index, SESSION.ann.block_map.num_functions)
    a = SESSION.ann.fresh()
    a.distinct = distinct
    used = 0
    for b in batches_:
        used += distinct_samples(b, res) is not None
        a.add_batch(b, res)
    a.acct.check()
    return state(a), used


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batches(), min_size=1, max_size=3), st.sampled_from([None, 10, 11]))
def test_distinct_equals_each(bs, filter_pid):
    got, _ = run(bs, filter_pid, True)
    want, _ = run(bs, filter_pid, False)
    assert got == want


def test_distinct_path_taken_and_refused():
    """The plain case is reduced, and so are several events (one key per event and
    address); a mapping change inside the batch and a hand-made address space (no
    constant_between) are not."""
    n = 8
    ip = np.array([BASES[10] + OFFS[0]] * 4 + [BASES[10] + OFFS[2]] * 4, np.uint64)

    def mk(seq, event=0):
        return SampleBatch(seq=np.array(seq, np.int64), pid=np.full(n, 10, np.int32),
                           tid=np.full(n, 10, np.int32), time=np.zeros(n, np.uint64),
                           cpumode=np.full(n, CPUMODE_USER, np.uint8), ip=ip,
                           period=np.full(n, 7, np.uint64),
                           event=np.array([0] * 7 + [event], np.int16))

    res = IndexResolver(MappingsSpace(mappings(None)), SESSION.index,
                        SESSION.ann.block_map.num_functions)
    d = distinct_samples(mk(range(10, 18)), res)
    assert d is not None and len(d) == 2 and d.count.tolist() == [4, 4]
    assert d.period.tolist() == [28, 28]
    assert distinct_samples(mk(range(REMAP_SEQ - 4, REMAP_SEQ + 4)), res) is None
    d = distinct_samples(mk(range(10, 18), event=1), res)
    assert d is not None and d.count.tolist() == [4, 3, 1] and d.event.tolist() == [0, 0, 1]
    assert d.ip.tolist() == ip[[0, 4, 7]].tolist() and set(d.pid.tolist()) == {10}
    from helpers import resolver

    assert distinct_samples(mk(range(10, 18)), resolver()) is None


def test_corpus_profiles_equal():
    """Every IP and LBR corpus profile of the PIE binary: the same result both ways."""
    from helpers import ip_profile_cases, profile_cases

    from bbmap.aggregate.profile import read_profile

    cases = [(p, b) for _n, p, b in profile_cases("plain") + profile_cases("lbr")
             + ip_profile_cases()]
    seen = 0
    for perf, binary in cases[:12]:
        out = []
        for distinct in (True, False):
            s = Session(binary, addresses=True)
            s.ann.distinct = distinct
            _, sub = read_profile(perf, s.b, s.index, s.ann.fresh, s.evidence(), [])
            sub.acct.check()
            out.append(state(sub))
        assert out[0] == out[1], perf
        seen += 1
    assert seen
