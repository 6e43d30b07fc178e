"""`bbmap lookup` end to end on corpus binaries and profiles; errors are one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bbmap.binary.types import parent_name
from bbmap.cli import main

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
LLD = CORPUS / "bin/clang-22/addrmap-lld/layout.pie"
PROFILE = CORPUS / "profiles/c22-addrmap-lld-pie-plain"
need = pytest.mark.skipif(not LLD.is_file(), reason="corpus not built")


def run(*args: str):
    return CliRunner().invoke(main, ["lookup", *args])


def _readobj_block(name: str) -> tuple[int, int, int]:
    g = json.loads((CORPUS / "golden/c22-addrmap-lld-pie.readobj22.json").read_text())
    for part in g:
        for f in part.get("BBAddrMap", []):
            fn = f["Function"]
            if fn["Name"] == name:
                rng = fn["BB Ranges"][0]
                e = [e for e in rng["BB Entries"] if e["Size"]][-1]
                return rng["Base Address"] + e["Offset"], e["Size"], e["ID"]
    raise LookupError(name)


@need
def test_vaddr_text_and_json():
    start, size, bid = _readobj_block("lay_round")
    r = run(str(LLD), hex(start + size - 1))
    assert r.exit_code == 0, r.output
    assert "lay_round" in r.output and f"block {bid} " in r.output
    assert f"[{start:#x}, {start + size:#x})" in r.output
    r = run(str(LLD), hex(start), "--json", "--explain")
    rep = json.loads(r.output)[0]
    assert rep["function"] == "lay_round" and rep["block_id"] == bid
    assert rep["explain"]["stage3"]["block_id"] == bid
    # lld: the text's file offset differs from its vaddr, and --offset goes back
    assert rep["offset"] != rep["vaddr"]
    r2 = json.loads(run(str(LLD), "--offset", hex(rep["offset"]), "--json").output)[0]
    assert (r2["vaddr"], r2["block_id"]) == (rep["vaddr"], bid)


@need
@pytest.mark.skipif(not (PROFILE / "perf.data").is_file(), reason="corpus profile not built")
def test_vma_through_profile_matches_perf_script():
    lines = [m for m in re.finditer(r"\s([0-9a-f]{12})\s+(\S+)\s+\((\S+layout\.pie)\)",
                                    (PROFILE / "script.txt").read_text())][:40]
    assert lines
    addrs = [f"0x{m.group(1)}" for m in lines]
    r = run("--vma", "--perf-data", str(PROFILE / "perf.data"), str(LLD), *addrs, "--json")
    assert r.exit_code == 0, r.output
    reps = json.loads(r.output)
    for m, rep in zip(lines, reps):
        assert parent_name(rep["function"]) == parent_name(m.group(2)), (m.group(0), rep)
        assert rep["vma"] == int(m.group(1), 16) and rep["base"] is not None
        assert rep["vaddr"] == rep["vma"] - rep["base"]
    # the same through an explicit base, and with a pid that did not map it
    base = reps[0]["base"]
    r = run("--vma", "--base", hex(base), str(LLD), addrs[0], "--json")
    assert json.loads(r.output)[0]["vaddr"] == reps[0]["vaddr"]
    # and back: an ELF vaddr (or file offset) gets its VMA from the profile's one base
    for mode, val in (("--vaddr", reps[0]["vaddr"]), ("--offset", reps[0]["offset"])):
        back = json.loads(run(mode, "--perf-data", str(PROFILE / "perf.data"), str(LLD),
                              hex(val), "--json").output)[0]
        assert back["vma"] == reps[0]["vma"] and back["function"] == reps[0]["function"]
    r = run("--vma", "--perf-data", str(PROFILE / "perf.data"), "--pid", "1", str(LLD),
            addrs[0])
    assert r.exit_code == 1 and "no executable mapping" in r.output


@need
def test_errors_are_one_line(tmp_path):
    for args, msg in [((str(LLD), "zz"), "not an address"),
                      ((str(LLD), "--vma", "0x10"), "--perf-data"),
                      ((str(LLD), "--pid", "3", "0x10"), "--pid needs --perf-data"),
                      ((str(tmp_path / "missing"), "0x10"), "")]:
        r = CliRunner().invoke(main, ["lookup", *args])
        usage = args[0] == str(LLD)  # a malformed request exits 2, an unreadable input 3
        assert r.exit_code == (2 if usage else 3), (args, r.output)
        err = r.output.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bbmap: error:") and msg in err[0], err
    notelf = tmp_path / "x.bin"
    notelf.write_bytes(b"hello")
    r = run(str(notelf), "0x1")
    assert r.exit_code == 3 and len(r.output.strip().splitlines()) == 1


@need
def test_outside_and_offset_outside():
    r = run(str(LLD), "0x10", "--json")
    assert r.exit_code == 0
    assert json.loads(r.output)[0]["status"] == "outside-function"
    r = run(str(LLD), "--offset", "0x7fffffff", "--json")
    assert r.exit_code == 1  # no PT_LOAD holds that offset: said, and the exit code shows it
    assert "no PT_LOAD" in json.loads(r.stdout)[0]["note"]
    assert "0x7fffffff" in r.stderr and "no PT_LOAD" in r.stderr  # why the exit is 1
