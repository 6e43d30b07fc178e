"""Oracle: the capstone sweep agrees with llvm-objdump on every mapped range.

Needs ``llvm-objdump-22`` (skipped without it): instruction starts inside each
range and the class of each block's last instruction (ret / jmp / indirect jmp /
conditional / call) must be what objdump prints.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import corpus_binary

from bbmap.binary import disasm as D
from bbmap.binary import load_binary
from bbmap.verify.checks import last_instructions
from bbmap.verify.context import VerifyContext

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
OBJDUMP = shutil.which("llvm-objdump-22")
NAMES = ["c22-addrmap-pie", "c22-list-pie", "c22-eh-pie", "c19-addrmap-nopie",
         "c16-labels-pie", "c14-labels-so", "c22-addrmap-lld-pie", "c22-mfs-pie"]
LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")


def objdump(path: Path) -> dict[int, tuple[str, str]]:
    out = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(path)], check=True,
                         capture_output=True, text=True).stdout
    insns = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and not line.endswith(">:"):
            insns[int(m.group(1), 16)] = (m.group(2), m.group(3))
    return insns


def objdump_kind(mnem: str, ops: str) -> int:
    """Instruction class from AT&T objdump text (independent of capstone's names)."""
    if mnem in ("notrack", "bnd", "rep", "repz"):
        mnem, _, ops = ops.partition(" ")
    if mnem.startswith("ret"):
        return D.RET
    if mnem.startswith("jmp"):
        return D.JMP_INDIRECT if ops.startswith("*") else D.JMP
    if mnem.startswith("call"):
        return D.CALL_INDIRECT if ops.startswith("*") else D.CALL
    if mnem.startswith("j") or mnem.startswith("loop"):
        return D.JCC
    if mnem in ("ud2", "int3", "hlt"):
        return D.TRAP
    if mnem.startswith("nop"):
        return D.NOP
    return D.OTHER


@pytest.mark.skipif(OBJDUMP is None, reason="llvm-objdump-22 not installed")
@pytest.mark.parametrize("name", NAMES)
def test_sweep_matches_objdump(name):
    path = corpus_binary(name)
    ref = objdump(path)
    ctx = VerifyContext(load_binary(path))
    code = ctx.code
    m = ctx.m
    for r in range(m.num_ranges):
        if not code.decoded[r]:
            continue
        lo, hi = ctx.range_extent(r)
        rows = (code.key >> np.uint64(33)) == r
        ours = [int(a) for a in code.start[rows] if lo <= int(a) < hi]
        theirs = sorted(a for a in ref if lo <= a < hi)
        assert ours == theirs, f"range {r} [{lo:#x}, {hi:#x})"
    li = last_instructions(ctx)
    checked = 0
    for b in range(m.num_blocks):
        j = int(li.row[b])
        if j < 0:
            continue
        a = int(code.start[j])
        mnem, ops = ref[a]
        assert int(li.kind[b]) == objdump_kind(mnem, ops), (hex(a), mnem, ops, li.text(b))
        checked += 1
    assert checked > 0


CLANG = shutil.which("clang-22")
TAILS = """
__attribute__((noinline)) long fa(long x) { return x * 3 + 1; }
__attribute__((noinline)) long fb(long x) { return x * 5 + 2; }
long ct(long x, long y) { if (x) return fa(y); return fb(y); }
long ct2(long x, long y) { if (x > 10) return fa(y + x); if (y < 3) return fb(x); return x ^ y; }
void stop(void) __attribute__((noreturn));
long nr(long x) { if (x == 7) stop(); return x + 1; }
long (*tbl[4])(long) = {fa, fb, fa, fb};
long ind(long x) { return tbl[x & 3](x); }
long comp(int op, long a) {
  static void *t[] = {&&l0, &&l1, &&l2}; goto *t[op % 3];
  l0: return a + 1; l1: return a * 2; l2: return a - 3; }
int sw(int x) { switch (x & 7) { case 0: return 4; case 1: return x; case 2: return x * 9;
  case 3: return fa(x); case 4: return -x; case 5: return 77; default: return 0; } }
"""


@pytest.mark.skipif(CLANG is None, reason="clang-22 not installed")
@pytest.mark.parametrize("flags", [
    ["-m64", "-O2"], ["-m64", "-Os"], ["-m32", "-O2"],
    ["-m32", "-O2", "-ffunction-sections", "-fbasic-block-sections=all"],
    ["-m64", "-O2", "-mllvm", "-pgo-analysis-map=all", "-mllvm", "-emit-bb-hash"]],
    ids=["x86-64", "x86-64-Os", "i386", "i386-all-sections", "x86-64-pgo-hash"])
def test_fresh_clang_objects_verify_clean(tmp_path, flags):
    """Objects clang-22 emits now (i386 REL relocations, conditional tail calls) pass."""
    src = tmp_path / "t.c"
    src.write_text(TAILS)
    obj = tmp_path / "t.o"
    subprocess.run([CLANG, *flags, "-fbasic-block-address-map", "-c", str(src), "-o",
                    str(obj)], check=True)
    from bbmap.verify.api import verify

    rep = verify(obj)
    assert rep.ok, rep.format()
    assert rep.stats["instructions"] > 0 and rep.stats["blocks"] > 10


@pytest.mark.skipif(CLANG is None, reason="clang-22 not installed")
def test_other_machines_run_the_map_checks(tmp_path):
    """AArch64: map checks and coverage run; instruction checks say why they cannot."""
    src = tmp_path / "t.c"
    src.write_text(TAILS)
    obj = tmp_path / "a64.o"
    subprocess.run([CLANG, "--target=aarch64-linux-gnu", "-O2", "-fbasic-block-address-map",
                    "-c", str(src), "-o", str(obj)], check=True)
    from bbmap.verify.api import verify

    rep = verify(obj)
    assert "md-return" in rep.skipped and "AARCH64" in rep.skipped["md-return"]
    assert "block-bounds" not in rep.skipped and rep.coverage.exact
    assert "10 of 15 checks run" in rep.format()
    assert not rep.ok  # what did not run was not checked: not a pass...
    assert verify(obj, allow_partial=True).ok  # ...unless the caller accepts that
    assert not verify(obj, ["md-return"], allow_partial=False).ok


EH = """
#include <stdexcept>
int parse(char c) { if (c < '0' || c > '9') throw std::invalid_argument("digit"); return c - '0'; }
int sum(const char *s, int *bad) {
  int t = 0;
  for (; *s; ++s) { try { t += parse(*s); } catch (const std::invalid_argument &) { ++*bad; } }
  return t;
}
"""


@pytest.mark.skipif(shutil.which("clang++-22") is None, reason="clang++-22 not installed")
@pytest.mark.parametrize("kind", ["obj", "so"])
def test_eh_with_all_sections_verifies_clean(tmp_path, kind):
    """Every block in its own section: .__part.N, .eh and empty (size 0) parts."""
    src = tmp_path / "eh.cpp"
    src.write_text(EH)
    out = tmp_path / ("eh.o" if kind == "obj" else "eh.so")
    extra = ["-c"] if kind == "obj" else ["-shared", "-fPIC"]
    subprocess.run(["clang++-22", "-O2", "-fbasic-block-address-map",
                    "-fbasic-block-sections=all", *extra, str(src), "-o", str(out)], check=True)
    from bbmap.verify.api import verify

    rep = verify(out)
    assert rep.ok, rep.format()
    assert rep.stats["ranges"] > rep.stats["functions"]
