"""Feature payloads: construct build -> bbmap parse, and the quirks of build-id entries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.errors import Diagnostics
from bbmap.formats import perfdata as fmt
from bbmap.perf.features import parse_build_ids, parse_feature

TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=30)


def _parse(feat: int, payload: bytes):
    feats: dict = {}
    ids: list = []
    diag = Diagnostics()
    parse_feature(feat, payload, diag, "f", 0, feats, ids)
    return feats, ids, diag


@settings(max_examples=100, deadline=None)
@given(caps=st.dictionaries(TEXT, TEXT, max_size=5), cmd=st.lists(TEXT, max_size=6),
       host=TEXT, cpus=st.tuples(st.integers(0, 4096), st.integers(0, 4096)))
def test_string_features_round_trip(caps, cmd, host, cpus):
    f, _, d = _parse(fmt.FEAT_CPU_PMU_CAPS, fmt.PmuCaps.build(
        [{"name": k, "value": v} for k, v in caps.items()]))
    assert f["cpu_pmu_caps"] == caps
    f, _, _ = _parse(fmt.FEAT_CMDLINE, fmt.StringList.build(cmd))
    assert f["cmdline"] == cmd
    f, _, _ = _parse(fmt.FEAT_HOSTNAME, fmt.HeaderString.build(host))
    assert f["hostname"] == host
    f, _, _ = _parse(fmt.FEAT_NRCPUS, fmt.NrCpus.build({"nr_cpus_avail": cpus[0],
                                                         "nr_cpus_online": cpus[1]}))
    assert f["nrcpus"] == {"avail": cpus[0], "online": cpus[1]}
    assert not list(d)


def test_event_desc_and_compressed():
    attr = fmt.EventAttr.parse(fmt.EventAttr.build({"type": 0, "size": 112, "config": 1}))
    payload = fmt.EventDesc.build({"nr": 2, "attr_size": 112, "events": [
        {"attr": attr, "nr_ids": 2, "name": "instructions:u", "ids": [5, 6]},
        {"attr": attr, "nr_ids": 0, "name": "dummy", "ids": []}]})
    f, _, d = _parse(fmt.FEAT_EVENT_DESC, payload)
    assert [e["name"] for e in f["event_desc"]] == ["instructions:u", "dummy"]
    assert f["event_desc"][0]["ids"] == [5, 6]
    f, _, _ = _parse(fmt.FEAT_COMPRESSED, fmt.CompressedFeature.build(
        {"version": 0, "type": 1, "level": 1, "ratio": 4, "mmap_len": 528384}))
    assert f["compressed"]["type"] == "zstd" and f["compressed"]["mmap_len"] == 528384
    assert not list(d)


def _bid_event(raw: bytes, name: str, size_bit: bool) -> bytes:
    fname = fmt.padded_name(name, 64)
    return fmt.BuildIdEvent.build({
        "header": {"type": 0, "misc": 2 | (fmt.MISC_BUILD_ID_SIZE if size_bit else 0),
                   "size": 36 + len(fname)},
        "pid": -1, "data": raw.ljust(20, b"\0"), "bid_size": len(raw) if size_bit else 0,
        "reserved1": 0, "reserved2": 0, "filename": fname})


def test_build_ids_with_and_without_size_bit():
    lld = bytes.fromhex("572ac72487ae1966")  # 8-byte lld id, stored zero padded
    gnu = bytes(range(1, 21))
    blob = (_bid_event(lld, "/bin/lld-linked", False) + _bid_event(gnu, "/bin/gnu", True)
            + _bid_event(lld + bytes(4), "/bin/sized", True) + bytes(16))  # zero padding
    d = Diagnostics()
    ids = parse_build_ids(blob, d, "f", "feature build_id", 0)
    assert [(b.build_id, b.filename) for b in ids] == [
        ("572ac72487ae1966", "/bin/lld-linked"), (gnu.hex(), "/bin/gnu"),
        ("572ac72487ae196600000000", "/bin/sized")]
    assert not list(d)


def test_bad_build_id_entry_warns_with_offset():
    blob = _bid_event(bytes(range(20)), "/x", True)
    bad = bytearray(blob + blob)
    bad[len(blob) + 6:len(blob) + 8] = (5000).to_bytes(2, "little")
    d = Diagnostics()
    ids = parse_build_ids(bytes(bad), d, "f", "feature build_id", 100)
    assert len(ids) == 1
    assert [x.offset for x in d] == [100 + len(blob)]


def test_unparsable_payload_is_a_warning():
    f, _, d = _parse(fmt.FEAT_CMDLINE, (5).to_bytes(4, "little") + b"\x40\0\0\0abc")
    assert "cmdline" not in f
    assert len(d) == 1 and "cmdline" in str(next(iter(d)))
