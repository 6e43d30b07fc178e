"""Oracle: the capstone sweep agrees with llvm-objdump on every mapped range.

Needs ``llvm-objdump-22`` (skipped without it): instruction starts inside each
range and the class of each block's last instruction (ret / jmp / indirect jmp /
conditional / call) must be what objdump prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bbmap.binary import load_binary
from bbmap.verify import disasm as D
from bbmap.verify.checks import last_instructions
from bbmap.verify.context import VerifyContext

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
OBJDUMP = shutil.which("llvm-objdump-22")
NAMES = ["c22-addrmap-pie", "c22-list-pie", "c22-eh-pie", "c19-addrmap-nopie",
         "c16-labels-pie", "c14-labels-so", "c22-addrmap-lld-pie", "c22-mfs-pie"]
LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")


def _path(name: str) -> Path:
    man = CORPUS / "manifest.json"
    if not man.exists():
        pytest.skip("corpus not built")
    for b in json.loads(man.read_text())["binaries"]:
        if b["name"] == name and (CORPUS / b["path"]).exists():
            return CORPUS / b["path"]
    pytest.skip(f"{name} absent")


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
    path = _path(name)
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
