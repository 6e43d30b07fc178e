"""BOLT's block hashes, the ones its stale matching reads (``--infer-stale-profile``).

BOLT hashes each block of its own CFG into one 64-bit "blended" value, five fields from
low to high bits (facts read from ``bolt/lib/Profile/StaleProfileMatching.cpp`` and
``bolt/lib/Core/HashUtilities.cpp``; no code taken from them):

* 16 bits: the block's offset in its function;
* 16 bits: the **opcode** hash -- xxh3-64 of the block's distinct mnemonics (as LLVM's
  AT&T printer names them), sorted and concatenated; nops and direct jumps inside the
  function left out (a tail call's ``jmp`` stays), every conditional jump spelled
  ``JMP``; the low 16 bits;
* 16 bits: the **instruction** hash -- xxh3-64 of LLVM's opcode *names* (``MOV64rr``)
  and operand values, registers by LLVM's register *numbers*.  Neither is visible outside
  LLVM's tables (capstone has its own numbering), so bbmap cannot reproduce it: it writes
  the low 16 bits of the same hash over capstone's instruction text instead.  BOLT then
  calls the match "loose" instead of "exact" but picks the same block: among the blocks
  with the profile block's opcode hash it takes the nearest by neighbours, instruction
  hash and offset, and an offset that is the block's own wins;
* 8 + 8 bits: the **predecessor** and **successor** hashes -- the neighbours' full 64-bit
  opcode hashes folded with LLVM's ``hash_16_bytes`` (``llvm/ADT/Hashing.h``) in the
  order BOLT lists them, the low 8 bits.

The hash function is xxh3-64 with seed 0 (``hash-func: xxh3``, BOLT's default), taken
from the system's libxxhash (Debian ``libxxhash0``): the same value in every process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

from bbmap.errors import BBMapError

MASK64 = (1 << 64) - 1
K_MUL = 0x9DDFEA08EB382D69  # hash_16_bytes' multiplier (llvm/ADT/Hashing.h)
COND_JUMP = "JMP"  # every conditional jump's mnemonic in the opcode hash
# LLVM's printer gives the mnemonic of an instruction whose condition code is an operand
# as the text before that operand: cmovbl -> cmov, setne -> set (a jcc is COND_JUMP)
CC_PREFIXES = ("cmov", "set")
# shifts and rotates by %cl print the register as part of the mnemonic (``shrq %cl,``)
CL_SHIFTS = ("sh", "sa", "ro", "rc")
LIB_NAMES = ("libxxhash.so.0", "xxhash")


@functools.cache
def _xxh3() -> ctypes._CFuncPtr:
    for name in LIB_NAMES:
        path = name if "." in name else ctypes.util.find_library(name)
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        fn = lib.XXH3_64bits
        fn.restype = ctypes.c_uint64
        fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        return fn
    raise BBMapError("BOLT's YAML profile needs xxh3 (BOLT's block hash): install the "
                     "xxHash library (Debian/Ubuntu: apt-get install libxxhash0)")


def xxh3_64(data: bytes) -> int:
    """XXH3-64 of ``data``, seed 0 (what ``llvm::xxh3_64bits`` computes)."""
    return int(_xxh3()(data, len(data)))


def hash_16_bytes(low: int, high: int) -> int:
    """LLVM's ``hashing::detail::hash_16_bytes`` (Murmur-inspired, 64-bit)."""
    a = ((low ^ high) * K_MUL) & MASK64
    a ^= a >> 47
    b = ((high ^ a) * K_MUL) & MASK64
    b ^= b >> 47
    return (b * K_MUL) & MASK64


def opcode_name(mnemonic: str, is_cond_jump: bool, operands: str = "") -> str:
    """The mnemonic as BOLT's opcode hash spells it (``mnemonic`` and ``operands``:
    capstone's AT&T text).  LLVM's printer ends an indirect jump's or call's mnemonic with
    the ``*`` of its operand (``jmpq *%rax``: ``jmpq*``), and a shift by ``%cl`` with
    that operand (``shrq %cl, %rax``: ``shrq%cl,``)."""
    if is_cond_jump:
        return COND_JUMP
    m = "".join(mnemonic.split())
    if operands.startswith("*"):
        return m + "*"
    if operands.startswith("%cl,") and m.startswith(CL_SHIFTS):
        return m + "%cl,"  # a shift by %cl: the register is literal text of its mnemonic
    for p in CC_PREFIXES:
        if m.startswith(p):
            return p
    return m


def opcode_hash(names: set[str]) -> int:
    """The 64-bit opcode hash of a block's distinct mnemonics (:func:`opcode_name`)."""
    return xxh3_64("".join(sorted(names)).encode())


def neighbour_hash(opcode_hashes: list[int]) -> int:
    """The neighbours' opcode hashes folded in order; BOLT keeps the low 8 bits."""
    h = 0
    for x in opcode_hashes:
        h = hash_16_bytes(h, x)
    return h & 0xFF


def blend(offset: int, opcode: int, instr: int, pred: int, succ: int) -> int:
    """The blended 64-bit block hash (fields truncated as BOLT truncates them)."""
    return ((offset & 0xFFFF) | (opcode & 0xFFFF) << 16 | (instr & 0xFFFF) << 32
            | (pred & 0xFF) << 48 | (succ & 0xFF) << 56)
