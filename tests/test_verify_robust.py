"""Bad input never escapes as a traceback: corrupted maps and symbols give findings."""

from __future__ import annotations

import json
import random
from pathlib import Path

import mutate
import pytest

from bbmap.errors import BBMapError
from bbmap.verify.api import verify

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
NAMES = ["c22-list-pie", "c14-labels-pie", "c22-pgomap-prof-pie", "c22-bbhash-pie",
         "c16-labels-pie"]


def corpus_bin(name: str) -> Path:
    man = CORPUS / "manifest.json"
    if man.exists():
        for b in json.loads(man.read_text())["binaries"]:
            if b["name"] == name and (CORPUS / b["path"]).exists():
                return CORPUS / b["path"]
    pytest.skip(f"corpus binary {name} absent")


@pytest.mark.parametrize("seed", range(12))
def test_corrupted_map_gives_findings_not_tracebacks(tmp_path, seed):
    rnd = random.Random(seed)
    src = corpus_bin(NAMES[seed % len(NAMES)])

    def corrupt(data: bytes) -> bytes:
        d = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            d[rnd.randrange(len(d))] = rnd.randrange(256)
        if seed % 3 == 0:
            d = d[: rnd.randrange(1, len(d))]
        return bytes(d)

    out = tmp_path / "fz.pie"
    mutate.rewrite_map(src, out, lambda recs: None, raw=corrupt)
    try:
        rep = verify(out)
    except BBMapError:
        return
    text = rep.format()
    assert "Traceback" not in text
    if rep.coverage is not None:
        assert rep.coverage.exact


def test_huge_symbol_size_is_a_finding(tmp_path):
    src = corpus_bin("c22-list-pie")
    out = tmp_path / "big.pie"
    mutate.patch_symbol(src, out, "lay_scan", size=1 << 40)
    rep = verify(out)
    assert rep.coverage is not None and rep.coverage.exact
    assert "function-symbol" not in rep.failed_checks


def test_empty_map_section(tmp_path):
    src = corpus_bin("c22-list-pie")
    out = tmp_path / "empty.pie"
    mutate.rewrite_map(src, out, lambda recs: [])
    rep = verify(out)
    assert rep.failed_checks == ["map-decodes"] and rep.stats["functions"] == 0
    assert "hold no functions" in rep.format()
    assert rep.coverage is not None and rep.coverage.totals["block"] == 0


def test_binary_without_map_fails(tmp_path):
    """A compiler that silently stops emitting the map must not pass."""
    src = corpus_bin("c22-list-pie")
    data = bytearray(src.read_bytes())
    from bbmap.binary import load_binary

    b = load_binary(src)
    sec = b.map_sections()[0]
    b.close()
    import struct

    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, = struct.unpack_from("<H", data, 0x3A)
    struct.pack_into("<I", data, shoff + sec.index * shentsize + 4, 1)  # sh_type = PROGBITS
    out = tmp_path / "nomap.pie"
    out.write_bytes(bytes(data))
    rep = verify(out)
    assert rep.failed_checks == ["map-decodes"]
    assert "no SHT_LLVM_BB_ADDR_MAP section" in rep.format()
