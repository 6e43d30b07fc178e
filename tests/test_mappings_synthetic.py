"""ProfileMappings over hand-written side-record lists: selection, generations, huge pages."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary.types import PF_R, PF_X, PT_LOAD, Segment
from bbmap.mappings import (
    FILTERED,
    IN_BINARY,
    KERNEL,
    OTHER_DSO,
    UNMAPPED,
    ProfileMappings,
    build_ids_match,
    deduce_huge_pages,
)
from bbmap.perf.records import (
    CPUMODE_KERNEL,
    CPUMODE_USER,
    CommRecord,
    ForkRecord,
    MmapRecord,
    SideRecords,
)
from bbmap.translate import base_address_for_mapping, vma_to_offset, vma_to_vaddr

BID = "aa" * 20
# lld-style PIE: R segment [0, 0xb78), RX at offset 0xb80 / vaddr 0x1b80
SEGS = [Segment(PT_LOAD, PF_R, 0, 0, 0xB78, 0xB78, 0x1000),
        Segment(PT_LOAD, PF_R | PF_X, 0xB80, 0x1B80, 0x790, 0x790, 0x1000)]
BIN = SimpleNamespace(path="/build/out/layout.pie", build_id=BID, segments=SEGS)


def mmap(seq, pid, start, length, pgoff, name, build_id=None, time=0, prot=5):
    return MmapRecord(seq=seq, time=time, pid=pid, tid=pid, start=start, length=length,
                      pgoff=pgoff, filename=name, prot=prot, flags=2, build_id=build_id,
                      cpumode=CPUMODE_USER, is_mmap2=True)


def classify(pm, pid, ip, seq=None, cpumode=None):
    n = len(ip)
    return pm.classify(pid=np.array(pid, np.int32), ip=np.array(ip, np.uint64),
                       seq=np.arange(1000, 1000 + n) if seq is None else np.array(seq),
                       cpumode=np.full(n, CPUMODE_USER) if cpumode is None else cpumode)


def test_build_id_from_mmap2_and_translation():
    base = 0x5636_9A1A_F000
    recs = [mmap(1, 10, base + 0x1000, 0x2000, 0, "/tmp/renamed.pie", BID),
            mmap(2, 10, 0x7F00_0000_0000, 0x1000, 0, "/usr/lib/libc.so.6", "bb" * 20)]
    pm = ProfileMappings.from_perf([SideRecords(recs)], BIN)
    assert pm.evidence.matched_by == "build-id"
    [m] = pm.binary_mappings()
    assert m.base == base == base_address_for_mapping(m.start, 0, SEGS, 0x2000)
    ips = [base + 0x1B85, base + 0x22FF, 0x7F00_0000_0010, 0x1234, 0xFFFF_FFFF_8100_0000]
    c = classify(pm, [10] * 5, ips)
    assert list(c.where) == [IN_BINARY, IN_BINARY, OTHER_DSO, UNMAPPED, KERNEL]
    assert int(c.vaddr[0]) == vma_to_vaddr(ips[0], base) == 0x1B85
    assert int(c.offset[0]) == vma_to_offset(ips[0], base, SEGS) == 0xB85
    assert int(c.vaddr[1]) == 0x22FF
    assert pm.dso_names[c.dso[2]] == "/usr/lib/libc.so.6"
    assert c.counts()["kernel"] == 1


def test_build_id_feature_then_path_then_basename_then_override():
    rec = [mmap(1, 5, 0x400000, 0x1000, 0, "/old/place/layout.pie")]
    feat = [SimpleNamespace(pid=5, misc=2, build_id=BID + "00000000",
                            filename="/old/place/layout.pie")]
    assert ProfileMappings.from_perf(rec, BIN, build_ids=feat).evidence.matched_by == "build-id"
    pm = ProfileMappings.from_perf(rec, BIN)  # no build-ids in the profile at all
    assert pm.evidence.matched_by == "basename" and pm.binary_mappings()
    exact = [mmap(1, 5, 0x400000, 0x1000, 0, "/build/out/layout.pie")]
    assert ProfileMappings.from_perf(exact, BIN).evidence.matched_by == "path"
    other = [mmap(1, 5, 0x400000, 0x1000, 0, "/srv/app")]
    pm = ProfileMappings.from_perf(other, BIN)
    assert not pm.binary_mappings()
    assert "--name" in pm.evidence.explain() and "/srv/app" in pm.evidence.explain()
    assert any("no executable mapping" in str(d) for d in pm.diagnostics)
    pm = ProfileMappings.from_perf(other, BIN, name_override="app")
    assert pm.evidence.matched_by == "name override" and pm.binary_mappings()


def test_same_name_other_build_id_is_not_the_binary():
    rec = [mmap(1, 5, 0x400000, 0x1000, 0, "/x/layout.pie", "cc" * 20)]
    pm = ProfileMappings.from_perf(rec, BIN)
    assert not pm.binary_mappings()
    assert pm.evidence.name_with_other_build_id == [("/x/layout.pie", "cc" * 20)]
    assert "different build" in pm.evidence.explain()
    c = classify(pm, [5], [0x400010])
    assert list(c.where) == [OTHER_DSO]


def test_exec_generations_and_fork():
    # pid 7 runs /usr/bin/perf at 0x400000, forks pid 8, pid 8 execs our binary at the same
    # address; pid 7 keeps perf.  Samples are ordered by seq.
    recs = [mmap(1, 7, 0x400000, 0x3000, 0, "/usr/bin/perf"),
            ForkRecord(seq=5, time=0, pid=8, ppid=7, tid=8, ptid=7),
            CommRecord(seq=20, time=0, pid=8, tid=8, comm="layout.pie", is_exec=True),
            mmap(21, 8, 0x400000, 0x2000, 0, "/build/out/layout.pie")]
    pm = ProfileMappings.from_perf(recs, BIN)
    c = classify(pm, [8, 8, 7, 7], [0x401B90, 0x401B90, 0x401B90, 0x401B90],
                 seq=[10, 30, 10, 30])
    assert list(c.where) == [OTHER_DSO, IN_BINARY, OTHER_DSO, OTHER_DSO]
    assert pm.dso_names[c.dso[0]] == "/usr/bin/perf"
    # without the exec flag, the overlapping new mmap still replaces the old one
    recs2 = [r for r in recs if not isinstance(r, CommRecord)]
    pm2 = ProfileMappings.from_perf(recs2, BIN)
    c2 = classify(pm2, [8, 8], [0x401B90, 0x402500], seq=[30, 30])
    assert list(c2.where) == [IN_BINARY, OTHER_DSO]  # the tail of perf's map survives


def test_time_orders_when_present():
    recs = [mmap(1, 3, 0x400000, 0x2000, 0, "layout.pie", time=500)]
    pm = ProfileMappings.from_perf(recs, BIN)
    c = pm.classify(pid=np.array([3, 3]), ip=np.array([0x401B90] * 2, np.uint64),
                    seq=np.array([0, 0]), time=np.array([100, 900], np.uint64))
    assert list(c.where) == [UNMAPPED, IN_BINARY]


def test_pid_filter_and_kernel_cpumode():
    recs = [mmap(1, 3, 0x400000, 0x2000, 0, "layout.pie"),
            mmap(2, 4, 0x500000, 0x2000, 0, "layout.pie")]
    pm = ProfileMappings.from_perf(recs, BIN, pid=4)
    c = classify(pm, [3, 4, 4], [0x401B90, 0x501B90, 0x501B90],
                 cpumode=np.array([CPUMODE_USER, CPUMODE_USER, CPUMODE_KERNEL]))
    assert list(c.where) == [FILTERED, IN_BINARY, KERNEL]
    assert len(pm.binary_mappings(4)) == 1


def test_huge_page_deduction_quipper_rule():
    # text copied onto a 2 MiB anonymous huge page: [0x600000, +0x200000) //anon, then the
    # rest of the file mapping at 0x800000 with pgoff 0x201000.
    recs = [mmap(1, 9, 0x600000, 0x200000, 0, "//anon"),
            mmap(2, 9, 0x800000, 0x1000, 0x201000, "/build/out/layout.pie"),
            mmap(3, 9, 0x900000, 0x1000, 0, "//anon")]  # a JIT region: stays anonymous
    out, runs = deduce_huge_pages(recs)
    assert runs == 1
    assert out[0].filename == "/build/out/layout.pie" and out[0].pgoff == 0x1000
    assert out[2].filename == "//anon"
    pm = ProfileMappings.from_perf(recs, BIN)
    assert pm.evidence.huge_page_runs == 1
    assert [m.deduced for m in pm.binary_mappings()] == ["huge-page", ""]
    c = classify(pm, [9, 9], [0x600000 + 0xB90, 0x900010])
    assert list(c.where) == [IN_BINARY, OTHER_DSO]
    # file offset 0x1000 + 0xb90 lies in RX (0xb80..): vaddr = off - 0xb80 + 0x1b80
    assert int(c.offset[0]) == 0x1B90 and int(c.vaddr[0]) == 0x2B90
    # perf renamed the huge page to the file but left pgoff 0: same deduction
    renamed = [mmap(1, 9, 0x600000, 0x200000, 0, "/build/out/layout.pie"),
               mmap(2, 9, 0x800000, 0x1000, 0x201000, "/build/out/layout.pie")]
    out, runs = deduce_huge_pages(renamed)
    assert runs == 1 and out[0].pgoff == 0x1000
    # an ordinary small pgoff-0 text mapping next to another exec mapping of the same file
    # (BOLT's second text segment) is not a huge page
    plain = [mmap(1, 9, 0x401000, 0x2000, 0, "/build/out/layout.pie"),
             mmap(2, 9, 0x403000, 0x1000, 0x200000, "/build/out/layout.pie")]
    assert deduce_huge_pages(plain)[1] == 0
    # a run whose follower has too small a pgoff is left alone
    bad = [mmap(1, 9, 0x600000, 0x200000, 0, "//anon"),
           mmap(2, 9, 0x800000, 0x1000, 0x1000, "/build/out/layout.pie")]
    assert deduce_huge_pages(bad)[1] == 0


def test_build_id_padding():
    assert build_ids_match("abcd", "abcd000000")
    assert not build_ids_match("abcd", "abce")
    assert not build_ids_match(None, "abcd")


@st.composite
def scenarios(draw):
    recs = []
    seq = 0
    for _ in range(draw(st.integers(1, 12))):
        seq += draw(st.integers(1, 3))
        pid = draw(st.integers(1, 3))
        kind = draw(st.integers(0, 7))
        if kind == 0:
            recs.append(CommRecord(seq=seq, time=0, pid=pid, tid=pid, comm="x", is_exec=True))
            continue
        if kind == 1:
            parent = draw(st.integers(1, 3))
            recs.append(ForkRecord(seq=seq, time=0, pid=pid, ppid=parent, tid=pid, ptid=parent))
            continue
        start = draw(st.integers(0, 15)) * 0x1000
        length = draw(st.integers(1, 4)) * 0x1000
        name = draw(st.sampled_from(["layout.pie", "libc.so", "libm.so"]))
        recs.append(mmap(seq, pid, start, length, draw(st.integers(0, 3)) * 0x1000, name))
    samples = draw(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 0x14000),
                                      st.integers(0, seq + 2)), max_size=60))
    return recs, samples


def brute(recs, pid, ip, seq):
    """Replay every record up to ``seq``; in ``pid``'s list the newest covering mapping wins."""
    live: dict[int, list] = {}
    for r in sorted(recs, key=lambda r: r.seq):
        if r.seq > seq:
            break
        if isinstance(r, CommRecord):
            live[r.pid] = []
        elif isinstance(r, ForkRecord):
            if r.pid != r.ppid:
                live[r.pid] = list(live.get(r.ppid, []))
        else:
            live.setdefault(r.pid, []).append(r)
    for m in reversed(live.get(pid, [])):
        if m.start <= ip < m.start + m.length:
            return m
    return None


@pytest.mark.slow
@given(scenarios())
@settings(max_examples=200, deadline=None)
def test_find_mappings_matches_replay(sc):
    recs, samples = sc
    pm = ProfileMappings.from_perf(recs, BIN)
    if not samples:
        return
    pid, ip, seq = (np.array(x) for x in zip(*samples))
    c = pm.classify(pid=pid, ip=ip.astype(np.uint64), seq=seq, cpumode=np.full(len(ip), 2))
    for k, (p, a, s) in enumerate(samples):
        m = brute(recs, p, a, s)
        if m is None:
            assert c.where[k] == UNMAPPED, (p, hex(a), s)
            continue
        want = IN_BINARY if m.filename == "layout.pie" else OTHER_DSO
        assert c.where[k] == want, (p, hex(a), s)
        got = pm.mappings[c.mapping[k]]  # maybe a remnant piece: same file offset for ip
        assert got.pgoff + (a - got.start) == m.pgoff + (a - m.start)


def test_bolt_two_exec_segments_and_so_at_any_base():
    # BOLT appends a second text segment, 2 MiB aligned; each is mmapped on its own.
    segs = [Segment(PT_LOAD, PF_R, 0, 0, 0x800, 0x800, 0x200000),
            Segment(PT_LOAD, PF_R | PF_X, 0x1000, 0x1000, 0x3000, 0x3000, 0x200000),
            Segment(PT_LOAD, PF_R | PF_X, 0x200000, 0x600000, 0x5000, 0x5000, 0x200000)]
    so = SimpleNamespace(path="/opt/lib/libbolted.so", build_id=None, segments=segs)
    for base in (0x7F12_3456_0000, 0x5555_0000_0000, 0x10_0000):
        recs = [mmap(1, 4, base + 0x1000, 0x3000, 0x1000, "/opt/lib/libbolted.so"),
                mmap(2, 4, base + 0x600000, 0x5000, 0x200000, "/opt/lib/libbolted.so")]
        pm = ProfileMappings.from_perf(recs, so)
        assert [m.base for m in pm.binary_mappings()] == [base, base]
        c = classify(pm, [4, 4, 4], [base + 0x1234, base + 0x604321, base + 0x400000])
        assert list(c.where) == [IN_BINARY, IN_BINARY, UNMAPPED]
        assert [int(v) for v in c.vaddr[:2]] == [0x1234, 0x604321]
        assert [int(v) for v in c.offset[:2]] == [0x1234, 0x204321]
    assert not pm.diagnostics.items  # alignment is fine: nothing to report


def test_alignment_violation_is_reported():
    segs = [Segment(PT_LOAD, PF_R | PF_X, 0x1234, 0x401000, 0x100, 0x100, 0x1000)]
    b = SimpleNamespace(path="/x/bad", build_id=None, segments=segs)
    pm = ProfileMappings.from_perf([mmap(1, 1, 0x401000, 0x1000, 0x1000, "/x/bad")], b)
    assert any("p_align" in str(d) for d in pm.diagnostics)


def test_mmap2_with_our_build_id_is_the_binary_when_the_path_also_had_another_build():
    # The same path held two builds while recording (rebuilt and rerun): the BUILD_ID
    # feature lists the old one first, the new run's MMAP2 carries the binary's build-id.
    # Spec: "an MMAP2 carrying a build-id is the binary iff it matches".
    old = "bb" * 20
    feat = [SimpleNamespace(pid=5, misc=2, build_id=old, filename="/build/out/layout.pie")]
    rec = [mmap(1, 6, 0x400000, 0x1000, 0, "/build/out/layout.pie", build_id=BID)]
    pm = ProfileMappings.from_perf(rec, BIN, build_ids=feat)
    assert pm.evidence.matched_by == "build-id"
    assert len(pm.binary_mappings()) == 1
    assert list(classify(pm, [6], [0x400010]).where) == [IN_BINARY]
    # and the other order (our MMAP2 first, then an MMAP2 of the old build at that path)
    rec2 = [mmap(1, 7, 0x500000, 0x1000, 0, "/build/out/layout.pie", build_id=old),
            mmap(2, 6, 0x400000, 0x1000, 0, "/build/out/layout.pie", build_id=BID)]
    pm2 = ProfileMappings.from_perf(rec2, BIN)
    assert [m.pid for m in pm2.binary_mappings()] == [6]
