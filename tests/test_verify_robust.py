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


def _relocations_cut(tmp_path: Path) -> Path:
    """The clang-22 object with its .rela.text one byte short of whole entries: the four
    relocation-using instruction checks cannot run (a damaged section stops them)."""
    import struct

    src = CORPUS / "bin" / "clang-22" / "addrmap" / "layout.o"
    if not src.exists():
        pytest.skip("corpus object absent")
    data = bytearray(src.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    for i in range(shnum):
        h = shoff + i * 64
        if struct.unpack_from("<I", data, h + 4)[0] == 4:  # the first SHT_RELA
            size, = struct.unpack_from("<Q", data, h + 32)
            struct.pack_into("<Q", data, h + 32, size - 1)
            break
    out = tmp_path / "relocations-cut.o"
    out.write_bytes(bytes(data))
    return out


def test_checks_that_could_not_run_fail_the_gate(tmp_path):
    """Was: "OK ... 11 of 15 checks run" and exit 0: a compiler test suite gating on
    verify passed a map four of whose checks never ran.  Now: not OK, exit 1 with the
    reason on stderr, unless --allow-partial (allow_partial=) accepts it."""
    from click.testing import CliRunner

    from bbmap.cli import main
    from bbmap.verify import assert_valid_bb_map
    from bbmap.verify.pytest_plugin import BBMapVerifier

    obj = _relocations_cut(tmp_path)
    rep = verify(obj)
    assert not rep.findings and len(rep.not_run) == 4 and not rep.ok, rep.format()
    assert "4 could not run" in rep.format().splitlines()[0]
    assert verify(obj, allow_partial=True).ok
    r = CliRunner().invoke(main, ["verify", str(obj)])
    assert r.exit_code == 1 and "FAILED" in r.stdout, r.output
    assert "could not run" in r.stderr and "--allow-partial" in r.stderr, r.stderr
    r = CliRunner().invoke(main, ["verify", str(obj), "--json"])
    assert r.exit_code == 1 and not json.loads(r.stdout)["ok"]
    r = CliRunner().invoke(main, ["verify", str(obj), "--allow-partial"])
    assert r.exit_code == 0 and "11 of 15 checks run" in r.stdout and r.stderr == "", r.output
    with pytest.raises(AssertionError, match="could not run"):
        assert_valid_bb_map(obj)
    assert assert_valid_bb_map(obj, allow_partial=True).ok
    with pytest.raises(pytest.fail.Exception, match="could not run"):
        BBMapVerifier()(obj)
    assert BBMapVerifier()(obj, allow_partial=True).ok
