"""Damaged perf.data: mutations of real files never crash, hang or allocate without bound.

Also: truncated files keep every complete record and say where trust ends; compressed
streams with a record split across two COMPRESSED records; opposite-endian files.
"""

from __future__ import annotations

import signal
import struct
import tracemalloc
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import perf_oracle as oracle

from bbmap.errors import BBMapError
from bbmap.formats import perfdata as fmt
from bbmap.perf import PerfData, SampleBatch
from bbmap.perf.writer import PerfWriter

SHARED = Path(__file__).resolve().parents[2] / "shared" / "perf-corpus"
REAL = [SHARED / n for n in ("perf.data.branch-4.14", "perf.data.group_desc-4.14",
                             "perf.data.piped.header_features_aligned-6.12",
                             "perf.data.piped.lost_samples-4.4")]
MEMORY_BOUND = 64 << 20


def _generated(tmp: Path) -> list[bytes]:
    out = []
    for i, kw in enumerate(({}, {"pipe": True}, {"compress": True})):
        path = tmp / f"g{i}.data"
        with PerfWriter(path, branch_sample_type=fmt.BR_ANY, **kw) as w:
            w.add_comm(7, 7, "seven")
            w.add_mmap2(7, 7, 0x400000, 0x1000, 0, "/bin/seven", build_id="ab" * 20)
            for k in range(60):
                w.add_sample(0x400000 + k, 7, 7, time=k, branches=[(k, k + 1, 2)] * (k % 5))
            w.add_build_id("/bin/seven", "ab" * 20)
        out.append(path.read_bytes())
    return out


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> list[bytes]:
    files = _generated(tmp_path_factory.mktemp("gen"))
    files += [p.read_bytes() for p in REAL if p.is_file()]
    return files


def _record_offsets(data: bytes) -> list[int]:
    start = 16 if data[8:16] == (16).to_bytes(8, "little") else int.from_bytes(
        data[40:48], "little")
    offs, off = [], start
    while off + 8 <= len(data) and len(offs) < 5000:
        size = int.from_bytes(data[off + 6:off + 8], "little")
        if size < 8:
            break
        offs.append(off)
        off += size
    return offs


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def _consume(path: Path) -> None:
    """Open and stream ``path``; only BBMapError may escape (from the constructor)."""
    try:
        p = PerfData(path)
    except BBMapError:
        return
    n = 0
    for item in p.stream(chunk_samples=256):
        if isinstance(item, SampleBatch):
            n += len(item)
            assert len(item.br_ptr) == len(item) + 1
            assert int(item.br_ptr[-1]) == len(item.br_from)
    p.read_all()
    for d in p.diagnostics:
        assert str(d)


@settings(max_examples=300, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@pytest.mark.slow
@given(data=st.data())
def test_mutations_never_crash_hang_or_balloon(bases, tmp_path, data):
    blob = bytearray(data.draw(st.sampled_from(bases)))
    kind = data.draw(st.sampled_from(["flip", "truncate", "size0", "sizehuge", "u64huge",
                                      "header"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        blob = blob[:data.draw(st.integers(0, len(blob)))]
    elif kind in ("size0", "sizehuge"):
        offs = _record_offsets(bytes(blob))
        if offs:
            off = data.draw(st.sampled_from(offs))
            val = 0 if kind == "size0" else data.draw(st.sampled_from([1, 7, 0xFFFF, 0x8000]))
            blob[off + 6:off + 8] = val.to_bytes(2, "little")
    elif kind == "u64huge":
        i = data.draw(st.integers(0, max(0, len(blob) - 8))) & ~7
        blob[i:i + 8] = data.draw(st.sampled_from([2**64 - 1, 2**63, 2**32, 0xFFFF])
                                  ).to_bytes(8, "little")
    else:  # header fields: attrs/data/feature sections, attr sizes
        i = data.draw(st.integers(8, min(len(blob), 200) - 8))
        blob[i:i + 8] = data.draw(st.sampled_from([0, 1, 2**64 - 1, 2**31, len(blob)])
                                  ).to_bytes(8, "little")
    path = tmp_path / "m.data"
    path.write_bytes(bytes(blob))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)
    tracemalloc.start()
    try:
        _consume(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert peak < MEMORY_BOUND


def _samples_before(data: bytes, cut: int) -> int:
    return sum(1 for off in _record_offsets(data[:cut])
               if int.from_bytes(data[off:off + 4], "little") == fmt.REC_SAMPLE
               and off + int.from_bytes(data[off + 6:off + 8], "little") <= cut)


@pytest.mark.parametrize("pipe", [False, True])
def test_truncated_file_keeps_complete_records_and_names_the_offset(tmp_path, pipe):
    path = tmp_path / "full.data"
    with PerfWriter(path, pipe=pipe) as w:
        w.add_comm(3, 3, "x")
        for k in range(100):
            w.add_sample(0x1000 + k, 3, 3, time=k)
    data = path.read_bytes()
    offs = [o for o in _record_offsets(data)]
    cut = offs[50] + 13  # inside the 50th record
    if not pipe:  # perf killed before the header was finalized: data.size stays 0
        data = data[:48] + (0).to_bytes(8, "little") + data[56:]
    (tmp_path / "cut.data").write_bytes(data[:cut])
    p = PerfData(tmp_path / "cut.data")
    got = sum(len(b) for b in p.samples())
    assert got == _samples_before(data, cut)
    assert p.trust_end == offs[50]
    msgs = [str(d) for d in p.diagnostics]
    assert any(f"offset {offs[50]:#x}" in m and "truncated" in m for m in msgs), msgs
    assert not p.diagnostics.has_errors


def test_size_zero_record_stops_with_error_at_its_offset(tmp_path):
    path = tmp_path / "z.data"
    with PerfWriter(path) as w:
        for k in range(10):
            w.add_sample(0x1000 + k, 3, 3, time=k)
    data = bytearray(path.read_bytes())
    off = _record_offsets(bytes(data))[4]
    data[off + 6:off + 8] = b"\0\0"
    path.write_bytes(bytes(data))
    p = PerfData(path)
    assert sum(len(b) for b in p.samples()) == 4
    assert p.diagnostics.has_errors
    assert any(f"offset {off:#x}" in str(d) for d in p.diagnostics)


def test_opposite_endian_is_a_clear_error(tmp_path):
    path = tmp_path / "be.data"
    path.write_bytes(fmt.MAGIC_SWAPPED + struct.pack(">Q", 104) + bytes(200))
    with pytest.raises(BBMapError, match="opposite-endian"):
        PerfData(path)


@pytest.mark.parametrize("content", [b"", b"hello world, not perf data at all", b"PERFILE2"])
def test_not_perf_data(tmp_path, content):
    path = tmp_path / "junk"
    path.write_bytes(content)
    with pytest.raises(BBMapError):
        PerfData(path)


def _compressed_split_file(tmp_path: Path, split_at: list[int], frames: bool = False,
                           v2: bool = False) -> tuple[Path, int]:
    """A file whose inner records are split across COMPRESSED records at ``split_at``.

    ``frames``: split the uncompressed stream and compress each piece as its own frame
    (what perf itself writes); otherwise split one frame's bytes anywhere.
    """
    plain = tmp_path / "plain.data"
    with PerfWriter(plain) as w:
        w.add_comm(4, 4, "four")
        for k in range(200):
            w.add_sample(0x2000 + k, 4, 4, time=k + 1)
    raw = plain.read_bytes()
    start = int.from_bytes(raw[40:48], "little")
    size = int.from_bytes(raw[48:56], "little")
    inner = raw[start:start + size]
    cctx = zstandard.ZstdCompressor()

    def record(payload: bytes) -> bytes:
        if v2:
            return fmt.compressed2_record(payload)
        return fmt.build_record(fmt.REC_COMPRESSED, payload)

    if frames:
        cuts = sorted({0, len(inner), *[c % len(inner) for c in split_at]})
        recs = b"".join(record(cctx.compress(inner[a:b]))
                        for a, b in zip(cuts, cuts[1:]) if b > a)
    else:
        # split one frame's bytes anywhere: records and frame bytes both straddle records
        frame = cctx.compress(inner)
        cuts = sorted({0, len(frame), *[c % len(frame) for c in split_at]})
        recs = b"".join(record(frame[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a)
    # header: same attrs, new data section, COMPRESSED feature announced
    out = tmp_path / "split.data"
    head = bytearray(raw[:start])
    head[48:56] = len(recs).to_bytes(8, "little")
    feat = fmt.CompressedFeature.build({"version": 0, "type": 1, "level": 3, "ratio": 0,
                                        "mmap_len": 528384})
    table_at = start + len(recs)
    table = fmt.FileSection.build({"offset": table_at + 16, "size": len(feat)})
    bits = [0, 0, 0, 0]
    bits[0] |= 1 << fmt.FEAT_COMPRESSED
    head[72:104] = struct.pack("<4Q", *bits)
    out.write_bytes(bytes(head) + recs + table + feat)
    return out, 200


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(split_at=st.lists(st.integers(0, 10**6), max_size=6), frames=st.booleans(),
       v2=st.booleans())
def test_records_spanning_compressed_records(tmp_path, split_at, frames, v2):
    """COMPRESSED and COMPRESSED2 (data_size + padding) both inflate in one stream."""
    path, n = _compressed_split_file(tmp_path, split_at, frames, v2)
    p = PerfData(path)
    rows, _ = oracle.bbmap_samples(p)
    assert [r[3] for r in rows] == [0x2000 + k for k in range(n)]
    assert [r[2] for r in rows] == list(range(1, n + 1))
    assert p.record_counts["SAMPLE"] == n
    assert p.record_counts["COMPRESSED2" if v2 else "COMPRESSED"] >= 1
    assert not list(p.diagnostics)


@pytest.mark.skipif(not oracle.have_perf(), reason="perf is not installed")
def test_perf_agrees_on_split_compressed_records(tmp_path):
    # perf needs every compressed record to produce output: split between frames,
    # inside records (37, 101 and 555 are not record boundaries)
    path, n = _compressed_split_file(tmp_path, [37, 101, 555], frames=True)
    p = PerfData(path)
    rows, _ = oracle.bbmap_samples(p)
    assert oracle.same_multiset(oracle.script_samples(str(path)), rows)
    assert oracle.report_d_stats(str(path)) == p.record_counts


def test_zstd_bomb_is_an_error_not_a_memory_blowup(tmp_path):
    plain = tmp_path / "p.data"
    with PerfWriter(plain) as w:
        w.add_sample(0x1000, 1, 1)
    raw = plain.read_bytes()
    start = int.from_bytes(raw[40:48], "little")
    frame = zstandard.ZstdCompressor(level=1).compress(bytes(256 << 20))
    assert len(frame) < 0xFFFF - 8
    rec = fmt.build_record(fmt.REC_COMPRESSED, frame)
    head = bytearray(raw[:start])
    head[48:56] = len(rec).to_bytes(8, "little")
    head[72:104] = bytes(32)
    path = tmp_path / "bomb.data"
    path.write_bytes(bytes(head) + rec)
    tracemalloc.start()
    try:
        p = PerfData(path)
        assert sum(len(b) for b in p.samples()) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert p.diagnostics.has_errors
    assert any("exceeds" in str(d) and f"offset {start:#x}" in str(d) for d in p.diagnostics)
    assert peak < 200 << 20
