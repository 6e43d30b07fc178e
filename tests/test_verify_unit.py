"""Units of ``bbmap verify``: the range map, instruction classes, CLI, API and fixture."""

from __future__ import annotations

import json
from pathlib import Path

import mutate
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary import disasm as D
from bbmap.cli import main
from bbmap.verify.api import assert_valid_bb_map, select_checks, verify
from bbmap.verify.checks import CHECKS
from bbmap.verify.coverage import RangeMap, _merge_runs
from bbmap.verify.pytest_plugin import BBMapVerifier

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def corpus_bin(name: str) -> Path:
    man = CORPUS / "manifest.json"
    if man.exists():
        for b in json.loads(man.read_text())["binaries"]:
            if b["name"] == name and (CORPUS / b["path"]).exists():
                return CORPUS / b["path"]
    pytest.skip(f"corpus binary {name} absent")


# ------------------------------------------------------------------ range map

intervals = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40),
                               st.sampled_from("abc")), max_size=30)


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_range_map_first_label_wins(items):
    """Oracle: a byte array labelled in the same order, first write kept."""
    naive: list[str | None] = [None] * 300
    rm = RangeMap()
    for start, length, label in items:
        rm.add(start, start + length, label)
        for x in range(start, start + length):
            if naive[x] is None:
                naive[x] = label
    got: list[str | None] = [None] * 300
    prev_end = -1
    for s, e, lab in rm.items():
        assert s >= prev_end  # disjoint, sorted
        prev_end = e
        for x in range(s, e):
            got[x] = lab
    assert got == naive
    gaps = rm.gaps(0, 300)
    assert sum(e - s for s, e in gaps) == naive.count(None)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 20)), max_size=20))
def test_merge_runs_is_union(items):
    s = np.array([a for a, _ in items], dtype=np.int64)
    e = np.array([a + n for a, n in items], dtype=np.int64)
    keep = e > s
    rs, re_ = _merge_runs(s[keep], e[keep])
    covered = {x for a, b in zip(s[keep], e[keep]) for x in range(a, b)}
    assert {x for a, b in zip(rs, re_) for x in range(a, b)} == covered
    assert all(re_[:-1] < rs[1:])


# ------------------------------------------------------------------ instruction classes

@pytest.mark.parametrize("mnem,ops,kind", [
    ("ret", "", D.RET), ("repz ret", "", D.RET), ("ret", "4", D.RET),
    ("jmp", "0x1234", D.JMP), ("jmp", "rax", D.JMP_INDIRECT),
    ("notrack jmp", "qword ptr [rax*8 + 0x10]", D.JMP_INDIRECT),
    ("jne", "0x10", D.JCC), ("jrcxz", "0x10", D.JCC), ("call", "0x99", D.CALL),
    ("call", "qword ptr [rip + 0x2f]", D.CALL_INDIRECT), ("ud2", "", D.TRAP),
    ("int3", "", D.TRAP), ("nop", "word ptr cs:[rax + rax]", D.NOP), ("mov", "eax, 1", D.OTHER),
])
def test_classify(mnem, ops, kind):
    assert D.classify(mnem, ops)[0] == kind


CODE = bytes.fromhex("c3" "e9 00 00 00 00" "ff e0" "3e ff e0" "0f 0b" "74 00" "e8 10 00 00 00"
                     "ff 15 00 00 00 00" "66 2e 0f 1f 84 00 00 00 00 00" "cc" "f3 c3")
KINDS = [D.RET, D.JMP, D.JMP_INDIRECT, D.JMP_INDIRECT, D.TRAP, D.JCC, D.CALL, D.CALL_INDIRECT,
         D.NOP, D.TRAP, D.RET]


@pytest.mark.parametrize("fast", [True, False])
def test_decode_real_bytes(fast):
    """capstone's instruction ids (fast path) and its mnemonics (slow path) agree."""
    dis = D.Disassembler("EM_X86_64")
    dis._fast = fast and D._fast_tables() is not None
    d = dis.decode(CODE, 0x1000)
    assert d.kinds.tolist() == KINDS
    assert int(d.addr[1]) == 0x1001 and int(d.target[1]) == 0x1006  # jmp +0
    assert int(d.target[5]) == 0x100F  # je +0 at 0x100d
    assert int(d.target[6]) == 0x1014 + 0x10  # call rel32 at 0x100f
    assert (d.target[[0, 2, 3, 4, 7, 8]] == -1).all()
    assert int(d.size.sum()) == len(CODE)
    assert D.Disassembler("EM_386").bits == 32


def test_fast_and_slow_decoders_agree_on_corpus():
    src = corpus_bin("c22-eh-pie")
    from elftools.elf.elffile import ELFFile

    with open(src, "rb") as fh:
        text = ELFFile(fh).get_section_by_name(".text")
        code, base = text.data(), text["sh_addr"]
    fast, slow = D.Disassembler("EM_X86_64"), D.Disassembler("EM_X86_64")
    slow._fast = False
    a, b = fast.decode(code, base), slow.decode(code, base)
    for f in ("addr", "size", "kinds", "target"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def test_unsupported_machine_is_a_clear_error():
    from bbmap.errors import BBMapError

    with pytest.raises(BBMapError, match="x86-64 and i386"):
        D.Disassembler("EM_AARCH64")


# ------------------------------------------------------------------ API

def test_check_names_are_stable():
    assert list(CHECKS) == [
        "map-decodes", "function-symbol", "block-order", "block-bounds", "block-ids-unique",
        "range-parts", "pgo-successors", "callsite-offsets", "block-hash",
        "instruction-boundaries", "md-return", "md-tail-call", "md-indirect-branch",
        "md-fallthrough", "coverage"]
    assert select_checks(["coverage", "md-return"]) == ["md-return", "coverage"]


def test_unknown_check_name():
    from bbmap.errors import BBMapError

    with pytest.raises(BBMapError, match="known checks: map-decodes"):
        select_checks(["no-such-check"])


def test_relocatable_object_verifies_per_section():
    """In a -ffunction-sections style .o many functions sit at offset 0 of their section."""
    rep = verify(corpus_bin("c22-list-obj"))
    assert rep.ok, rep.format()
    assert rep.stats["instructions"] > 0
    assert rep.coverage is not None and rep.coverage.exact
    assert len(rep.coverage.sections) > 1


def test_assert_valid_bb_map_message(tmp_path):
    src = corpus_bin("c22-addrmap-pie")
    out = tmp_path / "bad.pie"

    def edit(records):
        fn = mutate.find_function(records, "lay_scan")
        for b in mutate.blocks(fn):
            b.md = 0x01  # every block claims to return
    mutate.rewrite_map(src, out, edit)
    assert_valid_bb_map(src)
    with pytest.raises(AssertionError) as e:
        assert_valid_bb_map(out)
    text = str(e.value)
    assert "md-return" in text and "function lay_scan" in text and "block " in text
    assert len(text.splitlines()) >= 3
    assert_valid_bb_map(out, checks=["block-order", "coverage"])  # other rules still hold


def test_pytest_fixture(tmp_path):
    src = corpus_bin("c22-addrmap-pie")
    v = BBMapVerifier()
    assert v(src).ok
    out = tmp_path / "bad.pie"
    mutate.patch_symbol(src, out, "lay_scan", size=1)
    with pytest.raises(pytest.fail.Exception, match="block-bounds"):
        v(out)
    assert v.report(out).failed_checks == ["block-bounds"]


def test_fixture_is_registered(bb_map_verifier):
    assert isinstance(bb_map_verifier, BBMapVerifier)


# ------------------------------------------------------------------ CLI

def test_cli_ok_and_json(tmp_path):
    src = corpus_bin("c22-addrmap-pie")
    r = CliRunner().invoke(main, ["verify", str(src), "--coverage"])
    assert r.exit_code == 0, r.output
    assert "OK" in r.output and "unexplained" in r.output
    out = tmp_path / "rep.json"
    r = CliRunner().invoke(main, ["verify", str(src), str(src), "--json", "-o", str(out)])
    assert r.exit_code == 0
    doc = json.loads(out.read_text())
    assert doc["ok"] and len(doc["reports"]) == 2
    assert doc["reports"][0]["coverage"]["exact"]


def test_cli_failure_exit_code_and_selection(tmp_path):
    src = corpus_bin("c22-addrmap-pie")
    out = tmp_path / "bad.pie"
    mutate.patch_symbol(src, out, "lay_scan", size=1)
    r = CliRunner().invoke(main, ["verify", str(out)])
    assert r.exit_code == 1 and "block-bounds" in r.output and "lay_scan" in r.output
    r = CliRunner().invoke(main, ["verify", str(out), "--check", "md-return"])
    assert r.exit_code == 0
    r = CliRunner().invoke(main, ["verify", str(out), "--check", "bogus"])
    assert r.exit_code == 2 and "known checks" in r.output
    r = CliRunner().invoke(main, ["verify", "--list-checks"])
    assert r.exit_code == 0 and all(n in r.output for n in CHECKS)


def test_cli_bad_input_is_one_line(tmp_path):
    src = corpus_bin("c22-addrmap-pie")
    junk = tmp_path / "junk"
    junk.write_bytes(src.read_bytes()[:40])
    r = CliRunner().invoke(main, ["verify", str(junk)])
    assert r.exit_code == 3
    assert "Traceback" not in r.output and str(junk) in r.output
    notelf = tmp_path / "text"
    notelf.write_text("hello world, not an ELF file\n")
    r = CliRunner().invoke(main, ["verify", str(notelf)])
    assert r.exit_code == 3 and "not an ELF" in r.output
    r = CliRunner().invoke(main, ["verify", str(notelf), str(src)])  # the good one still reports
    assert r.exit_code == 3 and "not an ELF" in r.output and "OK" in r.output


@pytest.mark.slow
def test_fixture_in_a_real_pytest_run(tmp_path):
    """A compiler test suite gets the fixture from the entry point and a readable failure."""
    import subprocess
    import sys

    good = corpus_bin("c22-addrmap-pie")
    bad = tmp_path / "bad.pie"
    mutate.patch_symbol(good, bad, "lay_scan", size=1)
    test = tmp_path / "test_compiler.py"
    test.write_text(
        "def test_good(bb_map_verifier):\n"
        f"    bb_map_verifier({str(good)!r})\n"
        "def test_bad(bb_map_verifier):\n"
        f"    bb_map_verifier({str(bad)!r})\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(test)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout
    assert "block-bounds" in r.stdout and "function lay_scan" in r.stdout
    assert "Traceback" not in r.stdout
