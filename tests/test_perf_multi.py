"""Several events in one file: each SAMPLE finds its attr by id, layouts may differ, and
branch counters follow the event group (GROUP_DESC), as in perf's evsel__has_branch_counters.
"""

from __future__ import annotations

import struct

import pytest
from oracles import perf_oracle as oracle

from bbmap.formats import perfdata as fmt
from bbmap.perf import PerfData

ST_BASE = fmt.S_IDENTIFIER | fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD


def _file(path, attrs: list[dict], ids: list[list[int]], records: bytes,
          groups: list[tuple[int, int]] | None = None) -> None:
    """A file-mode perf.data built from the construct declarations."""
    attr_bytes = [fmt.EventAttr.build(a) for a in attrs]
    attr_size = len(attr_bytes[0]) + 16
    attrs_off = fmt.FILE_HEADER_SIZE
    ids_off = attrs_off + attr_size * len(attrs)
    id_blob = b""
    entries = b""
    for ab, idl in zip(attr_bytes, ids):
        entries += ab + fmt.FileSection.build({"offset": ids_off + len(id_blob),
                                               "size": 8 * len(idl)})
        id_blob += struct.pack(f"<{len(idl)}Q", *idl)
    data_off = ids_off + len(id_blob)
    feats = []
    if groups:
        feats.append((fmt.FEAT_GROUP_DESC, fmt.GroupDesc.build(
            [{"name": "{anon_group}", "leader_idx": lo, "nr_members": n} for lo, n in groups])))
    table_off = data_off + len(records)
    table, payload = b"", b""
    for _, blob in feats:
        table += fmt.FileSection.build({"offset": table_off + 16 * len(feats) + len(payload),
                                        "size": len(blob)})
        payload += blob
    bits = [0, 0, 0, 0]
    for f, _ in feats:
        bits[f // 64] |= 1 << (f % 64)
    header = fmt.FileHeader.build({
        "size": fmt.FILE_HEADER_SIZE, "attr_size": attr_size,
        "attrs": {"offset": attrs_off, "size": attr_size * len(attrs)},
        "data": {"offset": data_off, "size": len(records)},
        "event_types": {"offset": 0, "size": 0}, "adds_features": bits})
    path.write_bytes(header + entries + id_blob + records + table + payload)


def _sample(attr: dict, ident: int, ip: int, time: int, branches=(), counters=False,
            callchain=()) -> bytes:
    s = fmt.sample_struct(attr["sample_type"], 0, attr.get("branch_sample_type", 0),
                          branch_counters=counters)
    values = dict.fromkeys((sc.name for sc in s.subcons), None)
    values.update(identifier=ident, ip=ip, pid=1, tid=1, time=time, period=1,
                  callchain=list(callchain),
                  branch_stack={"nr": len(branches), "hw_idx": None, "entries": [
                      {"from_": f, "to": t, "flags": 0} for f, t in branches],
                      "counters": [7] * len(branches) if counters else None})
    return fmt.build_record(fmt.REC_SAMPLE, s.build(values), misc=2)


def test_layouts_differ_per_event(tmp_path):
    a0 = {"type": 1, "size": 128, "sample_type": ST_BASE | fmt.S_CALLCHAIN,
          "sample_period": 1}
    a1 = {"type": 1, "size": 128, "config": 1, "sample_type": ST_BASE, "sample_period": 1}
    recs = b"".join([
        _sample(a0, 11, 0x100, 1, callchain=(1, 2, 3)),
        _sample(a1, 21, 0x200, 2),
        _sample(a0, 12, 0x101, 3, callchain=()),
        _sample(a1, 22, 0x201, 4),
        _sample(a1, 99, 0x999, 5),  # an id no attr claims: dropped with a warning
    ])
    _file(tmp_path / "m.data", [a0, a1], [[11, 12], [21, 22]], recs)
    p = PerfData(tmp_path / "m.data")
    (b,) = list(p.samples())
    assert b.ip.tolist() == [0x100, 0x200, 0x101, 0x201]
    assert b.event.tolist() == [0, 1, 0, 1]
    assert [a.name for a in p.attrs] == ["cpu-clock", "task-clock"]
    assert any("no attr claims" in str(d) for d in p.diagnostics)
    if oracle.have_perf():
        assert oracle.same_multiset(oracle.script_samples(str(tmp_path / "m.data")),
                                    [(1, 1, t, ip) for t, ip in
                                     [(1, 0x100), (2, 0x200), (3, 0x101), (4, 0x201)]])


@pytest.mark.parametrize("grouped", [True, False])
def test_branch_counters_follow_the_group(tmp_path, grouped):
    """Attr 0 lacks BRANCH_COUNTERS but its group partner has it: its samples carry them."""
    bst = fmt.BR_ANY
    a0 = {"type": 0, "size": 128, "sample_type": ST_BASE | fmt.S_BRANCH_STACK,
          "branch_sample_type": bst, "sample_period": 1}
    a1 = dict(a0, config=1, branch_sample_type=bst | fmt.BR_COUNTERS)
    br = [(0x10, 0x20), (0x30, 0x40)]
    recs = b"".join([
        _sample(a0, 1, 0x100, 1, br, counters=grouped),
        _sample(a1, 2, 0x200, 2, br, counters=True),
    ])
    _file(tmp_path / "g.data", [a0, a1], [[1], [2]], recs,
          groups=[(0, 2)] if grouped else None)
    p = PerfData(tmp_path / "g.data")
    (b,) = list(p.samples())
    assert b.ip.tolist() == [0x100, 0x200]
    assert b.br_ptr.tolist() == [0, 2, 4]
    assert b.br_from.tolist() == [0x10, 0x30] * 2
    assert not list(p.diagnostics)


def test_payload_records_and_unknown_types_are_skipped_by_size(tmp_path):
    """AUXTRACE and TRACING_DATA carry bytes their header does not count; unknown types
    (kernel or user range) are counted and skipped by header.size."""
    a = {"type": 1, "size": 128, "sample_type": ST_BASE, "sample_period": 1}
    aux_payload = b"\xff" * 40  # would parse as garbage records if not skipped
    auxtrace = fmt.build_record(fmt.REC_AUXTRACE, fmt.AuxtraceBody.build(
        {"size": len(aux_payload), "offset": 0, "reference": 0, "idx": 0, "tid": 1, "cpu": 0,
         "reserved": 0})) + aux_payload
    tracing = fmt.build_record(fmt.REC_HEADER_TRACING_DATA, fmt.TracingDataBody.build(
        {"size": 13})) + b"\xee" * 16  # 13 bytes, padded to 8
    recs = b"".join([
        _sample(a, 1, 0x100, 1), auxtrace, _sample(a, 1, 0x101, 2), tracing,
        fmt.build_record(200, b"\x01" * 16), fmt.build_record(30, b""),
        _sample(a, 1, 0x102, 3),
    ])
    _file(tmp_path / "aux.data", [a], [[1]], recs)
    p = PerfData(tmp_path / "aux.data")
    (b,) = list(p.samples())
    assert b.ip.tolist() == [0x100, 0x101, 0x102]
    assert p.record_counts == {"SAMPLE": 3, "AUXTRACE": 1, "TRACING_DATA": 1,
                               "UNKNOWN_200": 1, "UNKNOWN_30": 1}
    assert not list(p.diagnostics)
