"""The disassembler on code near 2**64 (a corrupt range base): branch targets stay in range
(found by verify on damaged binaries, flipping bits in the block map)."""

from __future__ import annotations

import pytest

from bbmap.binary.disasm import Disassembler

JMP_REL32 = b"\xe9\x00\x10\x00\x00"  # jmp +0x1000
CALL_REL32 = b"\xe8\x00\x10\x00\x00"


@pytest.mark.parametrize("code", [JMP_REL32, CALL_REL32, b"\x74\x10"])
@pytest.mark.parametrize("fast", [True, False])
def test_branch_targets_above_int64_do_not_overflow(code, fast):
    """A corrupt range base puts code near 2**64; its branch targets are outside every
    function, not an OverflowError."""
    d = Disassembler("EM_X86_64")
    d._fast = fast
    base = (1 << 64) - 0x20
    dec = d.decode(code, base)
    assert len(dec.addr) == 1
    t = int(dec.target[0])
    assert t != -1  # still a direct branch with a target (far outside the code)
