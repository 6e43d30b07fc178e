"""Bad input: one line naming file, section and byte offset; functions decoded before the
fault are kept and shown; the exit code is non-zero; no traceback, no hang."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bbmap.binary.writer import encode_map, write_elf
from bbmap.formats.leb128 import encode_uleb
from bbmap.model import BlockRecord, FunctionRecord, RangeRecord

SEC = "section [2] .llvm_bb_addr_map"


def _records(n=4, version=5):
    return [FunctionRecord(address=0x401000 + 0x40 * i, version=version, ranges=[
        RangeRecord(base=0x401000 + 0x40 * i,
                    blocks=[BlockRecord(0, 0, 4, 8), BlockRecord(1, 4, 8, 1)])])
        for i in range(n)]


def _fns(n=4):
    return [(f"f{i}", 0x401000 + 0x40 * i, 12) for i in range(n)]


def _run(tmp_path, data: bytes, name="bad.elf"):
    p = tmp_path / name
    p.write_bytes(data)
    r = subprocess.run([sys.executable, "-c", "from bbmap.cli import main; main()",
                        "dump", "--json", str(p)], capture_output=True, text=True, timeout=120)
    return p, r


def _check(p, r, offset: int, message: str, kept: int, section: str = SEC):
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == f"bbmap: error: {p}: {section}: offset {offset:#x}: {message}"
    d = json.loads(r.stdout)
    assert len(d["functions"]) == kept
    assert d["warnings"][-1]["offset"] == offset
    return d


@pytest.mark.slow
def test_good_file_exits_zero(tmp_path):
    p, r = _run(tmp_path, write_elf(encode_map(_records()), functions=_fns()))
    assert r.returncode == 0 and r.stderr == ""
    assert [f["name"] for f in json.loads(r.stdout)["functions"]] == ["f0", "f1", "f2", "f3"]


@pytest.mark.slow
def test_unknown_version(tmp_path):
    data = bytearray(encode_map(_records()))
    rec = len(encode_map(_records(2)))
    data[rec] = 9
    p, r = _run(tmp_path, write_elf(bytes(data), functions=_fns()))
    _check(p, r, rec, "unsupported SHT_LLVM_BB_ADDR_MAP version: 9", kept=2)


@pytest.mark.slow
def test_truncated_section(tmp_path):
    data = encode_map(_records())
    p, r = _run(tmp_path, write_elf(data[:-3], functions=_fns()))
    count_at = len(encode_map(_records(3))) + 11  # the last record's block count
    d = _check(p, r, count_at,
               "BB entries count 2 needs at least 8 bytes but only 5 remain", kept=3)
    assert d["functions"][2]["name"] == "f2"


@pytest.mark.slow
def test_truncated_address(tmp_path):
    data = encode_map(_records())
    rec = len(encode_map(_records(3)))
    p, r = _run(tmp_path, write_elf(data[:rec + 6], functions=_fns()))
    _check(p, r, rec + 3, f"unexpected end of data at offset {rec + 6:#x} while reading "
           f"[{rec + 3:#x}, {rec + 11:#x})", kept=3)


@pytest.mark.slow
def test_uleb_over_32_bits(tmp_path):
    good = encode_map(_records(1, version=2))
    bad = bytes([2, 0]) + (0x401040).to_bytes(8, "little") + b"\x01\x00\x00" \
        + encode_uleb(2**33) + b"\x00"
    p, r = _run(tmp_path, write_elf(good + bad, functions=_fns()))
    _check(p, r, len(good) + 13, f"ULEB128 value at offset {len(good) + 13:#x} exceeds "
           "UINT32_MAX (0xffffffff)", kept=1)


def test_block_count_larger_than_bytes_left(tmp_path):
    good = encode_map(_records(1))
    bad = bytes([5, 0, 0]) + (0x401040).to_bytes(8, "little") + encode_uleb(0xFFFFFFFF) + b"\0" * 8
    p, r = _run(tmp_path, write_elf(good + bad, functions=_fns()))
    _check(p, r, len(good) + 11,
           "BB entries count 4294967295 needs at least 17179869180 bytes but only 8 remain",
           kept=1)


@pytest.mark.slow
def test_zero_ranges(tmp_path):
    good = encode_map(_records(2))
    bad = bytes([5, 0x08, 0, 0]) + b"\0" * 12
    p, r = _run(tmp_path, write_elf(good + bad, functions=_fns()))
    _check(p, r, len(good) + 3, f"invalid zero number of BB ranges at offset {len(good) + 3:#x}",
           kept=2)


@pytest.mark.slow
def test_relocation_outside_the_section(tmp_path):
    recs = [FunctionRecord(address=0, version=5, ranges=[
        RangeRecord(base=0, blocks=[BlockRecord(0, 0, 4, 1)])]) for _ in range(2)]
    data = encode_map(recs)
    second = len(data) // 2
    p, r = _run(tmp_path, write_elf(data, relocatable=True,
                                    functions=[("a", 0, 4), ("b", 0x10, 4)],
                                    relocations=[(3, 0), (second + 3, 0x10), (0x4000, 0x20)]),
                name="bad.o")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [f"bbmap: error: {p}: section [3] .rela.llvm_bb_addr_map: offset 0x30: "
                     "relocation 2 (r_offset 0x4000) points outside section [2] "
                     ".llvm_bb_addr_map (1 such entries ignored)"]
    d = json.loads(r.stdout)
    assert [(f["name"], f["address"]) for f in d["functions"]] == [("a", 0), ("b", 0x10)]


@pytest.mark.slow
def test_missing_relocation(tmp_path):
    recs = [FunctionRecord(address=0, version=5, ranges=[
        RangeRecord(base=0, blocks=[BlockRecord(0, 0, 4, 1)])]) for _ in range(2)]
    data = encode_map(recs)
    p, r = _run(tmp_path, write_elf(data, relocatable=True, functions=[("a", 0, 4)],
                                    relocations=[(3, 0)]), name="bad.o")
    _check(p, r, len(data) // 2 + 3,
           f"failed to get relocation data for offset: {len(data) // 2 + 3:#x}", kept=1)


@pytest.mark.slow
@pytest.mark.parametrize("content", [b"", b"\x7fELF", b"not an elf at all" * 4])
def test_not_elf(tmp_path, content):
    p, r = _run(tmp_path, content, name="x.bin")
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(p) in r.stderr


@pytest.mark.slow
def test_garbage_map_is_bounded(tmp_path):
    import random

    rnd = random.Random(7)
    garbage = bytes(rnd.randrange(256) for _ in range(200_000))
    p, r = _run(tmp_path, write_elf(garbage, functions=_fns()))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("body", [
    encode_uleb(0xFFFFFFFF) + b"\0" * 64,  # 4 billion blocks declared, 64 bytes present
    b"\x00" * 8,  # too short for anything
])
def test_absurd_counts_allocate_nothing_big(body):
    import tracemalloc

    from bbmap.binary.decode_fast import decode_section_fast
    from bbmap.binary.decode_ref import decode_section_ref
    from bbmap.binary.mapinput import KIND_VERSIONED, MapInput

    data = encode_map(_records(1)) + bytes([5, 0, 0]) + bytes(8) + body
    inp = MapInput(data=data, kind=KIND_VERSIONED, file="x", label=SEC)
    for decode in (decode_section_ref, decode_section_fast):
        tracemalloc.start()
        m, diags = decode(inp)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert m.num_functions >= 1 and diags[-1].severity == "error"
        assert peak < 2_000_000, (decode.__name__, peak)
