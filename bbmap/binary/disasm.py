"""Linear-sweep disassembly of code ranges with capstone, for the instruction checks.

Each map range is decoded once from its base (a symbol start, so an instruction
boundary).  ``cs_disasm`` is called through the binding's ctypes handle and its
``cs_insn`` array read as numpy columns (address, size, instruction id), because a
Python tuple per instruction made decoding the bulk of a verify run; instruction
ids map to kinds (ret / jmp / indirect jmp / conditional / call / trap / nop) with
one table lookup.  ``classify`` (mnemonic based, via ``disasm_lite``) is the slow
path and the cross-check of the fast one.  All ranges share one table sorted by
(range, offset), so block boundaries, last instructions and callsite targets are
found with ``searchsorted`` instead of a loop per block.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bbmap.arrays import expand_ranges
from bbmap.errors import BBMapError
from bbmap.installed import dist_info_versions

# Instruction kinds (what ends a block).
OTHER = 0
RET = 1
JMP = 2  # direct unconditional jump
JMP_INDIRECT = 3  # jmp reg / jmp mem (jump tables, indirect tail calls)
JCC = 4  # conditional jump (jcc, jrcxz, loop*)
CALL = 5
CALL_INDIRECT = 6
TRAP = 7  # ud2, int3, hlt: no fall-through either
NOP = 8

KIND_NAMES = {OTHER: "other", RET: "ret", JMP: "jmp", JMP_INDIRECT: "indirect jmp",
              JCC: "conditional jump", CALL: "call", CALL_INDIRECT: "indirect call",
              TRAP: "trap", NOP: "nop"}

_TRAPS = {"ud2", "ud1", "ud0", "ud2b", "int3", "hlt"}
_CONDITIONAL_EXTRA = {"jrcxz", "jecxz", "jcxz", "loop", "loope", "loopne"}

MACHINES = {"EM_X86_64": 64, "EM_386": 32, 62: 64, 3: 32}

# "Cheap register operation" (profile inference's skid model, bbmap/inference/weights.py):
# no memory operand and none of these mnemonic prefixes (multiplies, divides, square
# roots, the slow string/system ones) nor these exact first words (stack operations).
SLOW_PREFIXES = ("mul", "imul", "div", "idiv", "sqrt", "vsqrt", "vdiv", "rep", "cpuid",
                 "rdtsc", "syscall", "xchg", "lock", "cmpxchg", "pause")
STACK_WORDS = ("push", "pop", "leave")
MEMORY_OK = ("lea", "nop")  # a bracket in their operands reads no memory
# ``Decoded.cheap`` / ``CodeTable.cheap`` values
CHEAP_NO, CHEAP_YES, CHEAP_UNKNOWN = 0, 1, 2
_TARGET_MAX = (1 << 63) - 1  # branch targets are kept as int64 (-1: none)


def is_cheap(text: str) -> bool:
    """Is ``"0x1234: mnemonic operands"`` (``describe``'s text) a cheap register
    operation?  The reference rule; :func:`cheap_columns` is its vectorized form."""
    _, _, insn = text.partition(": ")
    mnem, _, ops = insn.partition(" ")
    if not mnem or mnem.startswith(SLOW_PREFIXES) or mnem in STACK_WORDS:
        return False
    return "[" not in ops or mnem.startswith(MEMORY_OK)


def _word(text: str) -> tuple[int, int]:
    """(value, mask) of ``text``'s bytes as the low bytes of a little-endian u8."""
    raw = text.encode()
    assert len(raw) <= 8
    return int.from_bytes(raw, "little"), (1 << 8 * len(raw)) - 1


_SLOW_WORDS = [_word(p) for p in SLOW_PREFIXES]
_STACK_WORDS = [(*_word(p), 8 * len(p)) for p in STACK_WORDS]
_MEMORY_OK_WORDS = [_word(p) for p in MEMORY_OK]


def cheap_columns(mn: np.ndarray, op: np.ndarray) -> np.ndarray:
    """:func:`is_cheap` of many instructions at once, as ``CHEAP_*`` values: ``mn`` (n, 8)
    uint8, the first 8 bytes of capstone's NUL-terminated mnemonic (every prefix the rule
    tests fits in them), ``op`` (n, w) uint8, the first ``w`` bytes of its NUL-terminated
    operand string (bytes after the NUL are not text).  A row whose operands have neither
    a NUL nor a ``[`` in those ``w`` bytes is ``CHEAP_UNKNOWN`` (ask again with more).
    A mnemonic with a prefix word (``rep stosq``) is judged by its first word, as the
    text rule does."""
    n = len(mn)
    if not n:
        return np.zeros(0, np.uint8)
    w = np.ascontiguousarray(mn[:, :8], dtype=np.uint8).view("<u8").ravel()
    slow = np.isin(w & np.uint64(0xFF), np.array([0, 32], np.uint64))  # no first word
    for val, mask in _SLOW_WORDS:
        slow |= (w & np.uint64(mask)) == np.uint64(val)
    for val, mask, shift in _STACK_WORDS:  # the whole first word
        end = (w >> np.uint64(shift)) & np.uint64(0xFF)
        slow |= ((w & np.uint64(mask)) == np.uint64(val)) & ((end == 0) | (end == 32))
    ok_mem = np.zeros(n, bool)
    for val, mask in _MEMORY_OK_WORDS:
        ok_mem |= (w & np.uint64(mask)) == np.uint64(val)
    br, nul = op == ord("["), op == 0
    any_br, any_nul = br.any(1), nul.any(1)
    first_br = np.where(any_br, br.argmax(1), op.shape[1])
    first_nul = np.where(any_nul, nul.argmax(1), op.shape[1])
    has_br = first_br < first_nul  # a bracket in the text
    out = (~slow & (~has_br | ok_mem)).astype(np.uint8)
    out[~any_br & ~any_nul] = CHEAP_UNKNOWN
    return out


def classify(mnemonic: str, op_str: str) -> tuple[int, int | None]:
    """Kind of one capstone (Intel syntax) instruction, and its direct target if any."""
    words = mnemonic.split()
    op = words[-1] if words else mnemonic  # drop prefixes: notrack, bnd, rep, lock, data16
    if op in ("ret", "retq", "retf", "retfq", "iret", "iretd", "iretq"):
        return RET, None
    if op in ("jmp", "ljmp"):
        if op == "jmp" and op_str.startswith("0x"):
            return JMP, int(op_str, 16)
        return JMP_INDIRECT, None
    if op in ("call", "lcall"):
        if op == "call" and op_str.startswith("0x"):
            return CALL, int(op_str, 16)
        return CALL_INDIRECT, None
    if (op.startswith("j") or op in _CONDITIONAL_EXTRA) and op_str.startswith("0x"):
        return JCC, int(op_str, 16)
    if op in _TRAPS:
        return TRAP, None
    if op == "nop":
        return NOP, None
    return OTHER, None


RANGE_SHIFT = 33  # key = range << 33 | offset in range: one sorted array for all ranges
OFFSET_MASK = (1 << RANGE_SHIFT) - 1


def _kind_table() -> np.ndarray:
    """capstone x86 instruction id -> kind (direct forms; indirect ones fixed by operand)."""
    from capstone import x86_const as X

    ids = {n[8:]: getattr(X, n) for n in dir(X) if n.startswith("X86_INS_")}
    table = np.full(max(ids.values()) + 1, OTHER, dtype=np.uint8)
    for name, i in ids.items():
        if name in ("RET", "RETF", "RETFQ", "IRET", "IRETD", "IRETQ"):
            table[i] = RET
        elif name == "JMP":
            table[i] = JMP
        elif name == "LJMP":
            table[i] = JMP_INDIRECT
        elif name == "CALL":
            table[i] = CALL
        elif name == "LCALL":
            table[i] = CALL_INDIRECT
        elif name.startswith("J") or name in ("LOOP", "LOOPE", "LOOPNE"):
            table[i] = JCC
        elif name in ("UD0", "UD1", "UD2", "INT3", "HLT"):
            table[i] = TRAP
        elif name == "NOP":
            table[i] = NOP
    return table


@dataclass
class CodeTable:
    """Every instruction of every map range, decoded by linear sweep from the range base.

    Rows are sorted by ``key`` = (range << 33) | (address - range base), so a whole
    column of block boundaries is looked up with one ``searchsorted``.
    """

    key: np.ndarray  # u8, ascending
    start: np.ndarray  # u8 absolute address
    size: np.ndarray  # u1
    kinds: np.ndarray  # u1 instruction kind (see the constants above)
    target: np.ndarray  # i8 direct branch/call target, -1 if none
    range_base: np.ndarray  # u8 per range
    decoded: np.ndarray  # bool per range: its bytes were in the file
    end: np.ndarray  # u8 per range: where the sweep stopped
    bad: list[tuple[int, int]]  # (range, address) capstone could not decode
    describe: Callable[[int], str]  # row -> "0x1234: jmp 0x1240" (decoded again, for messages)
    cheap: np.ndarray | None = None  # u1 CHEAP_* per row (computed at block starts on request)

    def keys(self, rng: np.ndarray, addr: np.ndarray) -> np.ndarray:
        off = np.asarray(addr, dtype=np.uint64) - self.range_base[rng]
        off = np.minimum(off, np.uint64(OFFSET_MASK))
        return (np.asarray(rng, dtype=np.uint64) << np.uint64(RANGE_SHIFT)) | off

    def starting_at(self, rng: np.ndarray, addr: np.ndarray) -> np.ndarray:
        """Row of the instruction starting at each (range, address), or -1."""
        k = self.keys(rng, addr)
        j = np.searchsorted(self.key, k)
        ok = j < len(self.key)
        ok[ok] = self.key[j[ok]] == k[ok]
        return np.where(ok, j, -1)

    def is_boundary(self, rng: np.ndarray, addr: np.ndarray) -> np.ndarray:
        """An instruction starts there, or the sweep (or an undecodable stretch) ends there."""
        hit = self.starting_at(rng, addr) >= 0
        hit |= np.asarray(addr, dtype=np.uint64) == self.end[rng]
        if self.bad:
            bad = self.keys(np.array([r for r, _ in self.bad], dtype=np.int64),
                            np.array([a for _, a in self.bad], dtype=np.uint64))
            hit |= np.isin(self.keys(rng, addr), bad)
        return hit

    def last_before(self, rng: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Row of the last instruction starting in [lo, hi) of each range, or -1."""
        j = np.searchsorted(self.key, self.keys(rng, hi), side="left") - 1
        ok = j >= 0
        ok[ok] = self.key[j[ok]] >= self.keys(rng, lo)[ok]
        return np.where(ok, j, -1)

    def ending_at(self, rng: np.ndarray, addr: np.ndarray) -> np.ndarray:
        """Row of the instruction that ends exactly at each (range, address), or -1."""
        k = self.keys(rng, addr)
        if not len(self.key):  # nothing decoded (a damaged range): no instruction ends
            return np.full(len(k), -1, dtype=np.int64)
        j = np.searchsorted(self.key, k, side="left") - 1
        ok = j >= 0
        jj = np.where(ok, j, 0)
        same = (self.key[jj] >> np.uint64(RANGE_SHIFT)) == (k >> np.uint64(RANGE_SHIFT))
        ends = self.start[jj] + self.size[jj].astype(np.uint64)
        ok &= same & (ends == np.asarray(addr, dtype=np.uint64))
        return np.where(ok, j, -1)

    def containing(self, rng: int, addr: int) -> int:
        """Row of the instruction of range ``rng`` that starts at or before ``addr``."""
        k = int(self.keys(np.array([rng]), np.array([addr], dtype=np.uint64))[0])
        j = int(np.searchsorted(self.key, k, side="right")) - 1
        if j >= 0 and int(self.key[j]) >> RANGE_SHIFT == rng:
            return j
        return -1

    def kind(self, j: int) -> tuple[int, int | None]:
        t = int(self.target[j])
        return int(self.kinds[j]), (t if t >= 0 else None)

    def text(self, j: int) -> str:
        return self.describe(j)


class Disassembler:
    """capstone for x86-64 and i386 (the targets LLVM emits block maps for here).

    capstone is loaded on the first decode, not when the disassembler is made: a CFG
    taken whole from the disassembly cache decodes nothing, and importing capstone
    (every architecture's module, ~16 ms) was a third of what the cached CFG cost."""

    def __init__(self, machine: object, elfclass: int = 64) -> None:
        bits = MACHINES.get(machine)  # type: ignore[arg-type]
        if bits is None:
            raise BBMapError(f"instruction checks support x86-64 and i386, not {machine}")
        self.bits = bits
        self._handle = None
        self._fast_set: bool | None = None

    @property
    def _cs(self):  # noqa: ANN202 - a capstone.Cs
        if self._handle is None:
            import capstone

            mode = capstone.CS_MODE_64 if self.bits == 64 else capstone.CS_MODE_32
            cs = capstone.Cs(capstone.CS_ARCH_X86, mode)
            cs.detail = False
            self._handle = cs
        return self._handle

    @property
    def _fast(self) -> bool:
        """Read capstone's instruction array with numpy (else ``disasm_lite``)."""
        return _fast_tables() is not None if self._fast_set is None else self._fast_set

    @_fast.setter
    def _fast(self, value: bool) -> None:
        self._fast_set = value

    def decode(self, code: bytes, base: int, marks: np.ndarray | None = None) -> Decoded:
        """Decode from ``base`` until the bytes end or do not decode (columns).  At the
        addresses in ``marks`` (sorted u8) the ``cheap`` column says whether the
        instruction is a cheap register operation (:func:`is_cheap`)."""
        if self._fast:
            return self._decode_ctypes(code, base, marks)
        rows = list(self._cs.disasm_lite(code, base))
        kinds, targets = [], []
        for _a, _s, m, o in rows:
            k, t = classify(m, o)
            kinds.append(k)
            targets.append(-1 if t is None else min(t, _TARGET_MAX))
        addr = np.array([r[0] for r in rows], dtype=np.uint64)
        cheap = np.full(len(rows), CHEAP_UNKNOWN, np.uint8)
        for i in np.flatnonzero(_marked(addr, marks)).tolist():
            cheap[i] = is_cheap(f"0x0: {rows[i][2]} {rows[i][3]}".rstrip())
        return Decoded(addr, np.array([r[1] for r in rows], dtype=np.uint8),
                       np.array(kinds, dtype=np.uint8), np.array(targets, dtype=np.int64),
                       cheap)

    def _decode_ctypes(self, code: bytes, base: int,
                       marks: np.ndarray | None = None) -> Decoded:
        """``cs_disasm`` once, columns read with numpy straight from capstone's array."""
        import capstone

        insn_dtype, kind_of_id = _fast_tables()  # type: ignore[misc]
        insn = ctypes.POINTER(capstone._cs_insn)()
        n = capstone._cs.cs_disasm(self._cs.csh, code, len(code), base, 0, ctypes.byref(insn))
        if n <= 0:
            return Decoded.empty()
        try:
            buf = (ctypes.c_char * (n * insn_dtype.itemsize)).from_address(
                ctypes.addressof(insn.contents))
            arr = np.frombuffer(buf, dtype=insn_dtype, count=n)
            addr = arr["address"].astype(np.uint64)
            size = arr["size"].astype(np.uint8)
            ids = arr["id"].astype(np.int64)
            kinds = kind_of_id[np.minimum(ids, len(kind_of_id) - 1)]
            target = np.full(n, -1, dtype=np.int64)
            br = np.nonzero((kinds == JMP) | (kinds == CALL) | (kinds == JCC))[0]
            if len(br):
                value, plain = hex_operands(_text_bytes(buf, n, "op_str", _HEX_WIDTH)[br])
                target[br[plain]] = value[plain]
                br = br[~plain]  # anything else: the text rule, one row at a time
                ops = arr["op_str"][br].tolist()
                for i, op in zip(br.tolist(), ops):
                    if op.startswith(b"0x"):
                        # a target past 2**63 (code near the top of the address space:
                        # a corrupt base) is outside every function; keep it in int64
                        target[i] = min(int(op, 16), _TARGET_MAX)
                    else:  # jmp rax / call qword ptr [...]
                        kinds[i] = JMP_INDIRECT if kinds[i] == JMP else CALL_INDIRECT
            cheap = np.full(n, CHEAP_UNKNOWN, np.uint8)
            sel = np.flatnonzero(_marked(addr, marks))
            if len(sel):
                cheap[sel] = cheap_columns(_text_bytes(buf, n, "mnemonic", 8)[sel],
                                           _text_bytes(buf, n, "op_str", 64)[sel])
                more = sel[cheap[sel] == CHEAP_UNKNOWN]  # operands longer than 64 bytes
                if len(more):
                    cheap[more] = cheap_columns(_text_bytes(buf, n, "mnemonic", 8)[more],
                                                _text_bytes(buf, n, "op_str", 0)[more])
        finally:
            capstone._cs.cs_free(insn, n)
        return Decoded(addr, size, kinds, target, cheap)

    def describe(self, code: bytes, address: int) -> str:
        for _a, _s, m, o in self._cs.disasm_lite(code, address, 1):
            return f"{address:#x}: {m} {o}".rstrip()
        return f"{address:#x}: (undecodable)"

    def sweep(self, code: bytes | memoryview, base: int, stop: int, limit: int,
              resync: list[int], marks: np.ndarray | None = None
              ) -> tuple[list[Decoded], int, list[int]]:
        """Decode ``code`` (which starts at ``base``) up to ``limit``.

        Returns the decoded pieces, where decoding ended and the addresses below
        ``stop`` that capstone could not decode; after such a stretch decoding
        resumes at the next address in ``resync`` (sorted block starts) so one bad
        byte does not hide the rest.  Decoding runs a few bytes past ``stop`` (the
        last block's end) so that an instruction straddling it is seen whole.
        ``marks``: see :meth:`decode`.
        """
        pieces: list[Decoded] = []
        bad: list[int] = []
        k = 0
        pos = base
        while pos < limit:
            d = self.decode(bytes(code[pos - base: limit - base]), pos, marks)
            if len(d.addr):
                pieces.append(d)
                pos = int(d.addr[-1]) + int(d.size[-1])
            if pos >= stop:
                break
            bad.append(pos)
            while k < len(resync) and resync[k] <= pos:
                k += 1
            if k == len(resync):
                break
            pos = resync[k]
        return pieces, pos, bad


@dataclass
class Decoded:
    """Columns of one decoded stretch of code."""

    addr: np.ndarray  # u8
    size: np.ndarray  # u1
    kinds: np.ndarray  # u1
    target: np.ndarray  # i8
    cheap: np.ndarray | None = None  # u1 CHEAP_* (only at the addresses asked for)

    def __post_init__(self) -> None:
        if self.cheap is None:
            self.cheap = np.full(len(self.addr), CHEAP_UNKNOWN, np.uint8)

    @staticmethod
    def empty() -> Decoded:
        return Decoded(np.zeros(0, np.uint64), np.zeros(0, np.uint8), np.zeros(0, np.uint8),
                       np.zeros(0, np.int64))


def _marked(addr: np.ndarray, marks: np.ndarray | None) -> np.ndarray:
    """Which of ``addr`` are in the sorted ``marks``."""
    if marks is None or not len(marks) or not len(addr):
        return np.zeros(len(addr), bool)
    j = np.minimum(np.searchsorted(marks, addr), len(marks) - 1)
    return marks[j] == addr


_HEX_WIDTH = 19  # "0x", at most 16 digits and the NUL: a direct target's whole operand text
_HEX_DIGIT = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX_DIGIT[_c] = _i
_HEX_DIGIT[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)


def hex_operands(op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Direct branch targets from their operand text, all rows at once: ``op`` (n, w)
    uint8, the first ``w`` bytes of capstone's NUL-terminated operand strings.  Returns
    (value, plain): ``plain`` rows are exactly ``0x`` + 1-16 hex digits + NUL, and for them
    ``value`` is ``min(int(text, 16), 2**63 - 1)`` -- what the per-row rule in
    ``_decode_ctypes`` gives (a jump's operand is one such number; a 16-digit one past
    2**63 is clamped the same way).  Every other row (``rax``, ``qword ptr [...]``, a far
    ``0x10:0x1234``) is left to that rule.  Decoding a switch-heavy binary meets ~0.7 M
    direct branches: one Python ``int()`` each was a fifth of the sweep."""
    n, w = op.shape
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    w = min(w, _HEX_WIDTH)
    digits = _HEX_DIGIT[op[:, 2:w]]  # 255: not a hex digit
    is_digit = digits != 255
    length = np.where(is_digit.all(1), w - 2, np.argmin(is_digit, 1))  # leading digits
    end = np.minimum(length + 2, w - 1)
    plain = ((op[:, 0] == ord("0")) & (op[:, 1] == ord("x")) & (length >= 1) & (length <= 16)
             & (op[np.arange(n), end] == 0))
    value = np.zeros(n, np.uint64)
    for col in range(min(16, w - 2)):  # Horner over the digit columns, row by row length
        live = col < length
        value = np.where(live, (value << np.uint64(4)) | digits[:, col].astype(np.uint64),
                         value)
    value = np.minimum(value, np.uint64(_TARGET_MAX)).astype(np.int64)
    return value, plain


def _text_bytes(buf: object, n: int, name: str, width: int) -> np.ndarray:
    """(n, width) uint8 view of the first ``width`` bytes (0: all) of ``cs_insn``'s
    ``name`` string in capstone's instruction array ``buf`` (no copy)."""
    import capstone

    S = capstone._cs_insn
    f = getattr(S, name)
    return np.ndarray((n, width or f.size), np.uint8, buffer=buf, offset=f.offset,
                      strides=(ctypes.sizeof(S), 1))


def _insn_dtype() -> np.dtype:
    """numpy view of capstone's ``cs_insn`` (C layout from the binding's ctypes struct)."""
    import capstone

    S = capstone._cs_insn
    return np.dtype({"names": ["id", "address", "size", "op_str"],
                     "formats": ["u4", "u8", "u2", "S160"],
                     "offsets": [S.id.offset, S.address.offset, S.size.offset,
                                 S.op_str.offset],
                     "itemsize": ctypes.sizeof(S)})


@functools.cache
def _fast_tables() -> tuple[np.dtype, np.ndarray] | None:
    """(numpy view of ``cs_insn``, kind per instruction id), made on the first decode;
    None for a capstone without these internals (the slow path)."""
    try:
        return _insn_dtype(), _kind_table()
    except (ImportError, AttributeError):
        return None


@functools.cache
def capstone_version() -> str:
    """capstone's version, for cache keys: the installed distribution's version read
    from its ``dist-info`` directory beside the package (what ``importlib.metadata``
    reads, without the ~40 ms of importing it, nor the ~16 ms of importing capstone),
    else the binding's ``__version__`` (the same answer whether capstone is imported
    yet or not, so one install always makes the same keys)."""
    found = dist_info_versions("capstone")
    if found is not None and len(found) == 1:
        return "dist-" + found[0]
    import capstone

    return capstone.__version__


SECTION_SWEEP_SHARE = 0.5  # sweep neighbouring ranges together when the wanted ranges cover
# at least this share of a section's bytes; below it each range is decoded alone
SWEEP_CHUNK_BYTES = 1 << 16  # bytes per capstone call when sweeping ranges together: few
# calls, and capstone's instruction array (~240 bytes each) stays small


def sweep_ranges(dis: Disassembler, data: bytes | memoryview, sections: list,
                 m: object, range_section: np.ndarray, block_start: np.ndarray,
                 range_end: np.ndarray, want: np.ndarray | None = None,
                 cheap: bool = False) -> CodeTable:
    """The :class:`CodeTable` of :func:`sweep_rows` (its docstring says how)."""
    rows = sweep_rows(dis, data, sections, m, range_section, block_start, range_end, want,
                      cheap)
    return code_table(dis, data, sections, range_section, m.range_base, rows)  # type: ignore[attr-defined]


@dataclass
class SweptRows:
    """What a sweep found, before it becomes a :class:`CodeTable`: the decoded rows with
    their range, and per range whether its bytes were decoded and where the sweep ended;
    ``bad``: (range, address) capstone could not decode."""

    rows: Decoded
    row_range: np.ndarray  # i8 per row
    decoded: np.ndarray  # bool per range
    end: np.ndarray  # u8 per range
    bad: list[tuple[int, int]]


def swept_sections(sections: list) -> list:
    """The sections a sweep may read: executable, with contents in the file (not
    NOBITS).  The disassembly cache keys its entries by their headers and bytes."""
    return [s for s in sections if s.is_code]


class _RangeSweep:
    """The sweep of one block map's ranges in progress: the rows found so far, and per
    range its row count, whether it was decoded and where its sweep ended."""

    def __init__(self, dis: Disassembler, data: bytes | memoryview, m: object,
                 block_start: np.ndarray, cheap: bool) -> None:
        R = m.num_ranges  # type: ignore[attr-defined]
        self.dis, self.cheap = dis, cheap
        self.view = memoryview(data)
        self.ptr = m.range_block_ptr.tolist()  # type: ignore[attr-defined]
        self.starts = block_start.tolist()
        self.pieces: list[Decoded] = []
        self.piece_range: list[np.ndarray] = []
        self.counts = np.zeros(R, dtype=np.int64)
        self.decoded = np.zeros(R, dtype=bool)
        self.ends = np.zeros(R, dtype=np.uint64)
        self.bad: list[tuple[int, int]] = []

    def _resync(self, ranges: list[int]) -> list[int]:
        """The block starts of ``ranges``, ascending: where the sweep realigns."""
        ptr, starts = self.ptr, self.starts
        return sorted({x for r in ranges for x in starts[ptr[r]: ptr[r + 1]]})

    def sweep_chunks(self, sec: Any, order: np.ndarray, base_u: np.ndarray,
                     limit_sorted: list[int], limit_max: int
                     ) -> tuple[list[Decoded], list[int]]:
        """Sweep the stretch of ``sec`` the ranges ``order`` (by base) cover in chunks of
        consecutive ranges, each decoded with one call (a call per section would have
        capstone grow a 240-byte-per-instruction array to hundreds of MB)."""
        lo = sec.sh_addr
        cuts = [0]
        first_base = int(base_u[order[0]])
        for j, l0 in enumerate(limit_sorted):
            if j and l0 - first_base > SWEEP_CHUNK_BYTES:
                cuts.append(j)
                first_base = int(base_u[order[j]])
        c_start = [int(base_u[order[c]]) for c in cuts]
        c_end = c_start[1:] + [limit_max]
        got: list[Decoded] = []
        sbad: list[int] = []
        for a0, a1, j0, j1 in zip(c_start, c_end, cuts, cuts[1:] + [len(order)]):
            if a1 <= a0:
                continue
            chunk = self.view[sec.sh_offset + a0 - lo: sec.sh_offset + a1 - lo]
            resync = self._resync(order[j0:j1].tolist())
            g, _stop, cb = self.dis.sweep(chunk, a0, a1, a1, resync,
                                          np.array(resync, np.uint64) if self.cheap else None)
            got.extend(g)
            sbad.extend(cb)
        return got, sbad

    def take_stretches(self, got: list[Decoded], sbad: list[int], rs: np.ndarray,
                       base: np.ndarray, limit: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Give each range ``rs`` its stretch of a section's sweep ``got`` where that is
        the range's own sweep; return which ranges took one."""
        a = np.concatenate([g.addr for g in got])
        sz = np.concatenate([g.size for g in got]).astype(np.uint64)
        aend = a + sz
        cs = np.zeros(len(a) + 1, np.uint64)
        np.cumsum(sz, out=cs[1:])
        first = np.searchsorted(a, base)
        last = np.searchsorted(aend, limit, side="right")  # instructions ending <= limit
        n = last.astype(np.int64) - first
        ok = (first < len(a)) & (n > 0)
        f_ok = np.minimum(first, len(a) - 1)
        ok &= a[f_ok] == base  # an instruction starts at the base
        l_ok = np.maximum(last - 1, 0)
        ok &= aend[l_ok] - base == cs[np.maximum(last, first)] - cs[first]  # no gap
        ok &= aend[l_ok] >= np.minimum(end, limit)  # reaches the last block end
        if sbad:
            b_addr = np.array(sorted(sbad), np.uint64)
            ok &= np.searchsorted(b_addr, base) == np.searchsorted(b_addr, limit)
        kinds = np.concatenate([g.kinds for g in got])
        target = np.concatenate([g.target for g in got])
        gcheap = np.concatenate([g.cheap for g in got])
        rows = expand_ranges(first[ok], n[ok])
        self.pieces.append(Decoded(a[rows], sz[rows].astype(np.uint8), kinds[rows],
                                   target[rows], gcheap[rows]))
        self.piece_range.append(np.repeat(rs[ok], n[ok]))
        self.counts[rs[ok]] = n[ok]
        self.decoded[rs[ok]] = True
        self.ends[rs[ok]] = aend[l_ok[ok]]
        return ok

    def sweep_alone(self, r: int, sec: Any, base: int, end: int) -> None:
        """Sweep range ``r`` by itself, from its base to a little past its end."""
        lo, hi = sec.sh_addr, sec.sh_addr + sec.sh_size
        limit = min(hi, end + 16)
        code = self.view[sec.sh_offset + base - lo: sec.sh_offset + limit - lo]
        resync = sorted(self.starts[self.ptr[r]: self.ptr[r + 1]])
        got, stop, rbad = self.dis.sweep(code, base, min(end, limit), limit, resync,
                                         np.array(resync, np.uint64) if self.cheap else None)
        self.pieces.extend(got)
        self.piece_range.extend(np.full(len(g.addr), r, np.int64) for g in got)
        self.counts[r] = sum(len(d.addr) for d in got)
        self.decoded[r] = True
        self.ends[r] = stop
        self.bad.extend((r, a) for a in rbad)

    def result(self) -> SweptRows:
        d = Decoded.empty()
        rng = np.zeros(0, np.uint64)
        if self.pieces:
            d = Decoded(*(np.concatenate([getattr(p, f) for p in self.pieces])
                          for f in ("addr", "size", "kinds", "target", "cheap")))
            rng = np.concatenate(self.piece_range).astype(np.uint64)
        return SweptRows(d, rng.astype(np.int64), self.decoded, self.ends, self.bad)


def sweep_rows(dis: Disassembler, data: bytes | memoryview, sections: list,
               m: object, range_section: np.ndarray, block_start: np.ndarray,
               range_end: np.ndarray, want: np.ndarray | None = None,
               cheap: bool = False) -> SweptRows:
    """Decode every range of block map ``m`` from the file bytes ``data``.

    ``sections`` are the file's :class:`~bbmap.binary.types.SectionInfo`; ``range_section``
    the section index of each range (-1 unknown), ``block_start`` each block's address and
    ``range_end`` each range's last block end.  A range whose bytes are not in the file
    (unknown section, NOBITS, base outside its section) is marked not decoded, and so is
    a range ``want`` (bool per range, default all) leaves out.  With ``cheap`` the
    instructions at block starts get their ``cheap`` value (:func:`is_cheap`).  Shared by
    ``verify`` (instruction checks) and ``bbmap.cfg`` (successors from last instructions).

    Each range is a linear sweep from its base (:meth:`Disassembler.sweep`).  Where the
    ranges cover most of a section, the section is swept once and each range takes its
    stretch of that sweep when the stretch is the range's own sweep: an instruction starts
    at the range base, the instructions up to the range's limit follow each other without
    a gap, and they reach the range's last block end.  Any other range is swept alone.
    """
    R = m.num_ranges  # type: ignore[attr-defined]
    range_base = m.range_base  # type: ignore[attr-defined]
    state = _RangeSweep(dis, data, m, block_start, cheap)
    secs = {s.index: s for s in sections}
    todo = np.arange(R) if want is None else np.flatnonzero(want)
    base_u = range_base.astype(np.uint64)
    end_u = np.maximum(range_end.astype(np.uint64), base_u)
    alone = np.ones(R, bool)
    swept = {s.index for s in swept_sections(sections)}
    for si in np.unique(range_section[todo]).tolist():
        sec = secs.get(int(si))
        if sec is None or sec.index not in swept or not sec.sh_size:
            continue
        rs = todo[range_section[todo] == si]
        lo, hi = sec.sh_addr, sec.sh_addr + sec.sh_size
        rs = rs[(base_u[rs] >= np.uint64(lo)) & (base_u[rs] <= np.uint64(hi))]
        limit = np.minimum(end_u[rs] + np.uint64(16), np.uint64(hi))
        if not len(rs) or float((limit - base_u[rs]).sum()) < SECTION_SWEEP_SHARE * (hi - lo):
            continue
        by_base = np.argsort(base_u[rs], kind="stable")
        got, sbad = state.sweep_chunks(sec, rs[by_base], base_u, limit[by_base].tolist(),
                                       int(limit.max()))
        if not got:
            continue
        ok = state.take_stretches(got, sbad, rs, base_u[rs], limit, end_u[rs])
        alone[rs[ok]] = False
    for r in todo[alone[todo]].tolist():
        sec = secs.get(int(range_section[r]))
        if sec is None or sec.index not in swept:
            continue
        base, end = int(range_base[r]), max(int(range_end[r]), int(range_base[r]))
        if not sec.sh_addr <= base <= sec.sh_addr + sec.sh_size:
            continue
        state.sweep_alone(r, sec, base, end)
    return state.result()


def code_table(dis: Disassembler, data: bytes | memoryview, sections: list,
               range_section: np.ndarray, range_base: np.ndarray, swept: SweptRows
               ) -> CodeTable:
    """Rows sorted by (range, offset) with the per-range facts: the table the checks
    and the CFG search.  Rows may come in any order (several sweeps, a cache)."""
    view = memoryview(data)
    secs = {s.index: s for s in sections}
    d, rr = swept.rows, np.ascontiguousarray(swept.row_range, np.int64)
    base_col = range_base.astype(np.uint64)
    off = d.addr - base_col[rr]
    np.minimum(off, np.uint64(OFFSET_MASK), out=off)
    key = rr.view(np.uint64) << np.uint64(RANGE_SHIFT)  # range numbers are >= 0
    key |= off
    if len(key) > 1 and bool((key[1:] < key[:-1]).any()):  # ranges of several sweeps
        o = np.argsort(key, kind="stable")
        key, d = key[o], Decoded(d.addr[o], d.size[o], d.kinds[o], d.target[o], d.cheap[o])

    def describe(j: int) -> str:
        r = int(key[j]) >> RANGE_SHIFT
        sec = secs[int(range_section[r])]
        a, n = int(d.addr[j]), int(d.size[j])
        raw = bytes(view[sec.sh_offset + a - sec.sh_addr: sec.sh_offset + a - sec.sh_addr + n])
        return dis.describe(raw, a)

    return CodeTable(key=key, start=d.addr, size=d.size, kinds=d.kinds, target=d.target,
                     range_base=base_col, decoded=swept.decoded, end=swept.end,
                     bad=swept.bad, describe=describe, cheap=d.cheap)
