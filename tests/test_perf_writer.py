"""PerfWriter round trips: bbmap reads back what it wrote, and so does real perf."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import perf_oracle as oracle

from bbmap.formats import perfdata as fmt
from bbmap.perf import PerfData, SampleBatch
from bbmap.perf.writer import PerfWriter

needs_perf = pytest.mark.skipif(not oracle.have_perf(), reason="perf is not installed")

ADDR = st.integers(0x1000, 2**47)
PID = st.integers(1, 2**22)
BRANCH = st.tuples(ADDR, ADDR, st.sampled_from([0, 1, 2, 0x12, 0x31, 0xFFFF2]))


@st.composite
def streams(draw, branches: bool):
    n = draw(st.integers(1, 40))
    t = draw(st.integers(1, 10**12))
    out = []
    for _ in range(n):
        t += draw(st.integers(0, 10**6))
        pid = draw(PID)
        br = draw(st.lists(BRANCH, max_size=8)) if branches else None
        out.append({"ip": draw(ADDR), "pid": pid, "tid": draw(st.sampled_from([pid, pid + 1])),
                    "time": t, "period": draw(st.integers(1, 10**6)), "branches": br})
    return out


def _write(path, samples, **kw) -> None:
    with PerfWriter(path, **kw) as w:
        pids = sorted({s["pid"] for s in samples})
        for pid in pids:
            w.add_comm(pid, pid, f"p{pid}", time=0)
            w.add_mmap2(pid, pid, 0x400000, 0x10000, 0, "/bin/true", time=0)
        for s in samples:
            w.add_sample(**s)


def _read(path):
    p = PerfData(path)
    rows, brows = oracle.bbmap_samples(p)
    return p, rows, brows


def _expect(samples):
    rows = [(s["pid"], s["tid"], s["time"], s["ip"]) for s in samples]
    brows = [(s["ip"], tuple((f, t, oracle.flags_text(fl)) for f, t, fl in s["branches"] or ()))
             for s in samples]
    return rows, brows


@pytest.mark.parametrize("mode", [{}, {"pipe": True}, {"compress": True},
                                  {"pipe": True, "compress": True}])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(samples=streams(branches=True))
def test_bbmap_reads_back_what_it_wrote(tmp_path, mode, samples):
    path = tmp_path / "w.data"
    _write(path, samples, branch_sample_type=fmt.BR_ANY | 1, **mode)
    p, rows, brows = _read(path)
    want_rows, want_brows = _expect(samples)
    assert rows == want_rows  # file order is kept
    assert brows == want_brows
    assert p.mode == ("pipe" if mode.get("pipe") else "file")
    assert p.record_counts["SAMPLE"] == len(samples)
    assert not p.diagnostics.has_errors


@needs_perf
@settings(max_examples=8, deadline=None)
@given(samples=streams(branches=True), pipe=st.booleans(), compress=st.booleans())
def test_perf_script_reads_what_bbmap_wrote(samples, pipe, compress):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.data")
        _write(path, samples, branch_sample_type=fmt.BR_ANY | 1, pipe=pipe, compress=compress)
        want_rows, want_brows = _expect(samples)
        assert oracle.same_multiset(oracle.script_samples(path), want_rows)
        assert oracle.same_multiset(oracle.script_brstack(path), want_brows)
        p = PerfData(path)
        p.read_all()
        assert oracle.report_d_stats(path) == p.record_counts


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fast_sample_packer_equals_construct_build(data):
    sample_type = fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
    for bit in (fmt.S_IDENTIFIER, fmt.S_ADDR, fmt.S_ID, fmt.S_STREAM_ID, fmt.S_CPU,
                fmt.S_BRANCH_STACK):
        if data.draw(st.booleans()):
            sample_type |= bit
    bst = data.draw(st.sampled_from([fmt.BR_ANY, fmt.BR_ANY | fmt.BR_HW_INDEX]))
    with tempfile.TemporaryDirectory() as d:
        w = PerfWriter(os.path.join(d, "x"), sample_type=sample_type, branch_sample_type=bst)
        s = data.draw(streams(branches=True))[0]
        cpu = data.draw(st.integers(0, 255))
        rec = w.sample_bytes(s["ip"], s["pid"], s["tid"], s["time"], s["period"],
                             s["branches"], 2, addr=s["ip"] + 1, cpu=cpu)
        w.abort()
    s_struct = fmt.sample_struct(sample_type, 0, bst)
    values = dict.fromkeys((sc.name for sc in s_struct.subcons), None)
    values.update({
        "identifier": 1, "ip": s["ip"], "pid": s["pid"], "tid": s["tid"], "time": s["time"],
        "addr": s["ip"] + 1, "id": 1, "stream_id": 1, "cpu": cpu, "cpu_res": 0,
        "period": s["period"],
        "branch_stack": {"nr": len(s["branches"]), "hw_idx": -1, "entries": [
            {"from_": f, "to": t, "flags": fl} for f, t, fl in s["branches"]],
            "counters": None}})
    assert rec == fmt.build_record(fmt.REC_SAMPLE, s_struct.build(values), misc=2)


def test_writer_batch_api_and_side_records(tmp_path):
    path = tmp_path / "b.data"
    batch = SampleBatch(
        seq=np.arange(3), pid=np.array([5, 5, 6], np.int32), tid=np.array([5, 7, 6], np.int32),
        time=np.array([10, 20, 30], np.uint64), cpumode=np.array([2, 2, 1], np.uint8),
        ip=np.array([0x401000, 0x401010, 0xFFFFFFFF81000000], np.uint64),
        period=np.array([1, 2, 3], np.uint64), event=np.zeros(3, np.int16),
        br_ptr=np.array([0, 2, 2, 3]), br_from=np.array([1, 2, 3], np.uint64),
        br_to=np.array([4, 5, 6], np.uint64), br_flags=np.array([0, 1, 2], np.uint64))
    with PerfWriter(path, branch_sample_type=fmt.BR_ANY) as w:
        w.add_comm(5, 5, "five", time=1, exec_=True)
        w.add_mmap2(5, 5, 0x400000, 0x2000, 0, "/x/five", build_id="0102030405060708", time=2)
        w.add_fork(6, 5, time=3)
        w.add_batch(batch)
        w.add_exit(6, 5, time=40)
        w.add_build_id("/x/five", "0102030405060708")
    p = PerfData(path)
    items = list(p.stream())
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["SideRecords", "SampleBatch", "SideRecords"]
    comm, mm, fork = items[0].records
    assert (comm.comm, comm.is_exec, comm.time) == ("five", True, 1)
    assert (mm.start, mm.length, mm.filename, mm.build_id, mm.time, mm.is_mmap2) == (
        0x400000, 0x2000, "/x/five", "0102030405060708", 2, True)
    assert (fork.pid, fork.ppid, fork.time) == (6, 5, 3)
    b = items[1]
    for col in ("pid", "tid", "time", "cpumode", "ip", "period", "br_ptr", "br_from", "br_to",
                "br_flags"):
        assert np.array_equal(getattr(b, col), getattr(batch, col)), col
    assert list(b.seq) == [3, 4, 5]
    assert items[2].records[0].time == 40
    assert [(e.build_id, e.filename) for e in p.build_ids] == [("0102030405060708", "/x/five")]
    assert p.attrs[0].name == "cycles:u"
    assert p.features["cmdline"] == ["bbmap", "PerfWriter"]


@pytest.mark.parametrize("attr_size", [64, 72, 80, 96, 104, 112, 120, 128, 136, 152])
def test_every_attr_size_reads(tmp_path, attr_size):
    """Older attrs are zero-filled, newer ones keep their unknown tail; ids still found."""
    path = tmp_path / "a.data"
    bst = fmt.BR_ANY if attr_size >= 80 else 0
    with PerfWriter(path, attr_size=attr_size, branch_sample_type=bst,
                    sample_type=fmt.S_IP | fmt.S_TID | fmt.S_TIME) as w:
        w.add_sample(0x1234, 9, 9, time=77)
    p = PerfData(path)
    a = p.attrs[0]
    assert a.size == attr_size
    assert a.branch_sample_type == bst
    assert a.ids == [1]
    rows, _ = oracle.bbmap_samples(p)
    assert rows == [(9, 9, 77, 0x1234)]
    if attr_size <= 128 and oracle.have_perf():
        assert oracle.script_samples(str(path)) == rows


@pytest.mark.parametrize("name, precise, excluded", [
    ("instructions:upp", 2, True), ("cycles:u", 0, True), ("cpu-clock", 0, False),
    ("instructions:ppp", 3, False), ("cycles:ukp", 1, False),
    ("cpu/event=0xc0,umask=0x1/", 0, False)])
def test_event_modifiers_set_the_attr(tmp_path, name, precise, excluded):
    """The attr flags follow the event name's modifiers as ``perf record -e`` sets them."""
    path = tmp_path / "m.data"
    _write(path, [{"ip": 0x401000, "pid": 7, "tid": 7, "time": 1}], event_name=name)
    p = PerfData(path)
    p.read_all()
    flags = p.attrs[0].flags
    assert p.attrs[0].name == name
    assert (flags >> 15) & 3 == precise
    assert bool(flags & fmt.F_EXCLUDE_KERNEL) == bool(flags & fmt.F_EXCLUDE_HV) == excluded


def test_precise_ip_out_of_range_is_refused(tmp_path):
    with pytest.raises(ValueError, match="precise_ip 4"):
        PerfWriter(tmp_path / "x.data", precise_ip=4)


@needs_perf
def test_perf_reads_a_precise_instructions_attr(tmp_path):
    """What ``perf record -e instructions:upp -c 10007`` writes (PERF_TYPE_HARDWARE,
    PERF_COUNT_HW_INSTRUCTIONS, a fixed period, no PERIOD in the samples): perf's own
    ``evlist -v`` and ``script`` read the attr and event name back."""
    path = str(tmp_path / "i.data")
    samples = [{"ip": 0x401000 + 4 * i, "pid": 7, "tid": 7, "time": 10 + i} for i in range(5)]
    _write(path, samples, event_name="instructions:upp", attr_type=0, config=1,
           sample_period=10007, sample_type=fmt.S_IP | fmt.S_TID | fmt.S_TIME)
    evlist = oracle._run(["evlist", "-v", "-i", path])
    assert evlist.startswith("instructions:upp: size: ")  # perf omits type 0 (hardware)
    for field in ("config: 0x1", "sample_period, sample_freq }: 10007",
                  "sample_type: IP|TID|TIME,", "exclude_kernel: 1", "exclude_hv: 1",
                  "precise_ip: 2"):
        assert field in evlist, (field, evlist)
    script = oracle._run(["script", "-i", path, "-F", "event,ip"]).split()
    assert script[0::2] == ["instructions:upp:"] * 5
    assert [int(x, 16) for x in script[1::2]] == [s["ip"] for s in samples]
