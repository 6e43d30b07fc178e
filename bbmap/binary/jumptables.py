"""clang's x86-64 jump-table sequences read straight from the instruction bytes, for every
indirect jump of a binary at once (numpy), without decoding the blocks again.

The CFG (:mod:`bbmap.cfg`) needs, for each block ending in an indirect ``jmp``, the table
it reads and how many entries the guard in front of it allows.  Its reference reader decodes
the block (and the block falling into it) with capstone's operand details: ~13 instructions
a block, a Python object per instruction and per operand -- 11.7 s of an 18 s run on a
switch-heavy binary with 28,508 such blocks.  The instruction boundaries are already known
(the sweep's rows, cached on disk), and clang emits the table in a handful of fixed shapes,
so this module looks only at the bytes of the few instructions that matter, every block at
once:

* PIC: ``movsxd r, [base + i*4]``, ``add r, base``, ``jmp r`` as the block's last three
  instructions, ``base`` loaded by the block's last ``lea base, [rip + T]`` (absent: no
  table, as in the reference);
* absolute (non-PIE): ``jmp [T + i*8]``;
* the bound: ``cmp i, N`` then ``ja``/``jae`` as the last two instructions of the block that
  falls into this one (N+1 / N entries), or a mask ``and i, 2**k - 1`` in the block (2**k),
  with nothing but ``lea`` and register moves that leave the index alone between the
  guard and the load.

A block is decided here only when its shape is one of these *exactly* (no legacy prefix on
an instruction that matters, the rows cover the block without gaps, 64-bit code): then
the reference would walk the same instructions to the same answer.  Every other block gets
``FALLBACK`` and the caller asks the reference, so the CFG is the reference's on every
binary (tests/test_cfg_jump_tables.py holds the two equal on every corpus binary and on
generated switch-heavy programs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# status of one indirect jump
FALLBACK = 0  # not one of the shapes decided here: use the reference reader
NO_TABLE = 1  # no table (not a table jump, base not loaded in the block, odd scale)
NO_BOUND = 2  # a table without a usable cmp/ja bound (a note, successors unknown)
FOUND = 3  # table, entry size, relative or absolute and the entry count are known

_PREFIXES = np.zeros(256, bool)
_PREFIXES[[0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0x66, 0x67]] = True
_WINDOW = 16  # bytes looked at per instruction (x86 instructions are at most 15)
NO_SECTION = -(1 << 62)  # ``delta`` of a block in no section
JUMP_TABLE_MAX = 4096  # entries read at most from one table (a guard against a bad bound)


@dataclass
class JumpShapes:
    """Per candidate block (in the order given): what the bytes say."""

    status: np.ndarray  # u1 (FALLBACK / NO_TABLE / NO_BOUND / FOUND)
    jump: np.ndarray  # u8 address of the jmp
    table: np.ndarray  # u8 table address (FOUND and NO_BOUND)
    entry_size: np.ndarray  # i8 4 or 8
    relative: np.ndarray  # bool: int32 entries relative to the table
    count: np.ndarray  # i8 entries (FOUND; NO_BOUND: the bound that was rejected, or -1)


def _le(win: np.ndarray, at: np.ndarray, n: int, signed: bool) -> np.ndarray:
    """Little-endian integers of ``n`` bytes at column ``at`` of each window row."""
    rows = np.arange(len(win))
    v = np.zeros(len(win), np.int64)
    for k in range(n):
        v |= win[rows, np.minimum(at + k, _WINDOW - 1)].astype(np.int64) << (8 * k)
    if signed:
        top = np.int64(1) << (8 * n - 1)
        v = (v ^ top) - top
    return v


class _Insns:
    """Prefixes, REX, opcode and ModRM fields of some instruction rows."""

    def __init__(self, win: np.ndarray) -> None:
        n = len(win)
        rows = np.arange(n)
        npfx = np.zeros(n, np.int64)
        going = np.ones(n, bool)
        for k in range(5):
            going &= _PREFIXES[win[:, k]]
            npfx += going
        self.clean = npfx == 0  # no legacy prefix
        b0 = win[rows, np.minimum(npfx, _WINDOW - 1)]
        self.has_rex = (b0 & 0xF0) == 0x40
        self.rex = np.where(self.has_rex, b0, 0).astype(np.int64)
        at = npfx + self.has_rex
        self.op_at = at
        self.op = win[rows, np.minimum(at, _WINDOW - 1)].astype(np.int64)
        self.op2 = win[rows, np.minimum(at + 1, _WINDOW - 1)].astype(np.int64)
        # a prefix after the REX byte, or two REX bytes: capstone's reading, not ours
        self.weird = _PREFIXES[self.op] | ((self.op & 0xF0) == 0x40)
        modrm = self.op2  # for one-byte opcodes
        self.mod = modrm >> 6
        self.reg = ((modrm >> 3) & 7) | ((self.rex & 4) << 1)
        self.rm = (modrm & 7) | ((self.rex & 1) << 3)
        self.rm_low = modrm & 7
        sib = win[rows, np.minimum(at + 2, _WINDOW - 1)].astype(np.int64)
        self.sib_scale = 1 << (sib >> 6)
        self.sib_index = ((sib >> 3) & 7) | ((self.rex & 2) << 2)
        self.sib_no_index = (((sib >> 3) & 7) == 4) & ((self.rex & 2) == 0)
        self.sib_base = (sib & 7) | ((self.rex & 1) << 3)
        self.sib_base_low = sib & 7
        self.win = win

    def imm(self, at_from_op: int, n: int, signed: bool = True) -> np.ndarray:
        return _le(self.win, self.op_at + at_from_op, n, signed)


def _contiguous(row_start: np.ndarray, row_size: np.ndarray, first: np.ndarray,
                n: np.ndarray, bstart: np.ndarray, bend: np.ndarray) -> np.ndarray:
    """Do the ``n`` rows from ``first`` cover [bstart, bend) back to back (what capstone,
    decoding the block's bytes from its start, would list)?"""
    ok = n >= 1
    idx = np.flatnonzero(ok)
    if not len(idx):
        return ok
    lens = n[idx]
    rows = np.repeat(first[idx] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    ends = row_start[rows] + row_size[rows].astype(np.uint64)
    nxt = np.empty_like(ends)
    nxt[:-1] = row_start[rows[1:]]
    at_end = np.cumsum(lens) - 1  # each block's last row in ``rows``
    nxt[at_end] = bend[idx]
    gap = np.add.reduceat((ends != nxt).astype(np.int64), np.cumsum(lens) - lens)
    ok[idx] = (gap == 0) & (row_start[first[idx]] == bstart[idx])
    return ok


class _Rows:
    """Every row of the contiguous candidate blocks, with its decoded fields."""

    def __init__(self, image: np.ndarray, row_start: np.ndarray, first: np.ndarray,
                 n_insn: np.ndarray, delta: np.ndarray, ok: np.ndarray) -> None:
        self.own = np.flatnonzero(ok)  # the candidates read here
        self.lens = lens = n_insn[self.own]
        self.rows = rows = np.repeat(first[self.own] - np.cumsum(lens) + lens, lens) + \
            np.arange(int(lens.sum()))
        self.blk = blk = np.repeat(self.own, lens)  # candidate of each row
        self.pos = rows - first[blk]  # position in its block
        off = row_start[rows].astype(np.int64) + delta[blk]
        self.ins = _Insns(image[np.clip(off[:, None] + np.arange(_WINDOW), 0, len(image) - 1)])
        self.last = self.pos == n_insn[blk] - 1
        jmp_row = np.full(len(first), -1, np.int64)
        jmp_row[blk[self.last]] = np.flatnonzero(self.last)
        self.j = jmp_row[self.own]  # each candidate's jmp (its last row)


@dataclass
class _Loads:
    """Per candidate: the table load the shapes found and what is decided already."""

    index: np.ndarray  # i8: the index register (-1: none)
    load_pos: np.ndarray  # i8: the row reading the table, in its block (-1: none)
    unsure: np.ndarray  # bool: a prefixed lea or unread prefixes (the reference's)
    decided: np.ndarray  # bool: status final
    bound: np.ndarray  # bool: a table whose bound is still to find


def _table_loads(r: _Rows, row_start: np.ndarray, row_size: np.ndarray,
                 out: JumpShapes) -> _Loads:
    """The table read: PIC (``movsxd r', [base + i*s]; add r, base; jmp r`` with the
    block's last ``lea base, [rip + T]``) or absolute (``jmp [T + i*8]``); fills the
    table, entry size and relative columns and the NO_TABLE verdicts."""
    C, ins, own, lens, blk, j = len(out.status), r.ins, r.own, r.lens, r.blk, r.j
    # ---- lea (any form is neutral for the bound scan; rip-relative ones load a base)
    lea = ins.op == 0x8D
    lea_rip = lea & ins.clean & (ins.mod == 0) & (ins.rm_low == 5)
    lea_target = (row_start[r.rows].astype(np.int64) + row_size[r.rows].astype(np.int64)
                  + ins.imm(2, 4))
    unsure = np.zeros(C, bool)
    np.logical_or.at(unsure, blk[(lea & ~ins.clean) | ins.weird], True)
    # ---- the jmp (last row): FF /4
    is_jmp = ins.clean[j] & (ins.op[j] == 0xFF) & (((ins.op2[j] >> 3) & 7) == 4)
    jmp_reg = is_jmp & (ins.mod[j] == 3)
    jmp_mem = is_jmp & (ins.mod[j] != 3)
    sib = jmp_mem & (ins.rm_low[j] == 4)
    no_index_mem = jmp_mem & (~sib | ins.sib_no_index[j])  # jmp [mem] without index
    absolute = sib & ~ins.sib_no_index[j] & (ins.mod[j] == 0) & (ins.sib_base_low[j] == 5)
    # (jmp [base + i*8] with a base register: the reference)
    # ---- PIC: movsxd r', [base + i*s]; add r, base; jmp r
    a = np.where(lens >= 3, j - 1, 0)
    mv = np.where(lens >= 3, j - 2, 0)
    add_rr = ins.clean[a] & ((ins.rex[a] & 8) != 0) & (ins.mod[a] == 3) & \
        ((ins.op[a] == 0x01) | (ins.op[a] == 0x03))
    add_dst = np.where(ins.op[a] == 0x01, ins.rm[a], ins.reg[a])
    add_src = np.where(ins.op[a] == 0x01, ins.reg[a], ins.rm[a])
    movsxd = ins.clean[mv] & (ins.op[mv] == 0x63) & (ins.mod[mv] != 3) & \
        (ins.rm_low[mv] == 4) & ~ins.sib_no_index[mv] & \
        ~((ins.mod[mv] == 0) & (ins.sib_base_low[mv] == 5))
    pic = jmp_reg & (lens >= 3) & add_rr & (add_dst == ins.rm[j]) & movsxd & \
        (ins.sib_base[mv] == add_src)
    # the base's table: the block's last lea [rip + T] into the base register before the jmp
    base_of = np.full(C, -1, np.int64)
    base_of[own] = np.where(pic, add_src, -1)
    hit = lea_rip & (base_of[blk] == ins.reg) & ~r.last
    lea_last = np.full(C, -1, np.int64)
    np.maximum.at(lea_last, blk[hit], np.flatnonzero(hit))

    index = np.full(C, -1, np.int64)
    load_pos = np.full(C, -1, np.int64)
    cpic = own[pic]
    index[cpic] = ins.sib_index[mv[pic]]
    out.entry_size[cpic] = ins.sib_scale[mv[pic]]
    out.relative[cpic] = True
    load_pos[cpic] = lens[pic] - 3
    has_lea = lea_last[cpic] >= 0
    out.table[cpic[has_lea]] = lea_target[lea_last[cpic[has_lea]]].astype(np.uint64)
    cabs = own[absolute]
    index[cabs] = ins.sib_index[j[absolute]]
    out.entry_size[cabs] = ins.sib_scale[j[absolute]]
    out.table[cabs] = ins.imm(3, 4)[j[absolute]].astype(np.uint64)  # disp32, sign-extended
    load_pos[cabs] = lens[absolute] - 1

    decided = np.zeros(C, bool)
    # no index (jmp [rip + x], jmp [reg + d]): no table; a register jump not of the PIC
    # shape, a based table jump: the reference
    none = own[no_index_mem]
    out.status[none] = NO_TABLE
    decided[none] = True
    nolea = cpic[~has_lea & ~unsure[cpic]]
    out.status[nolea] = NO_TABLE
    decided[nolea] = True
    odd = np.zeros(C, bool)
    odd[cpic] = True
    odd[cabs] = True
    odd &= ~decided & ~np.isin(out.entry_size, (4, 8))
    out.status[odd] = NO_TABLE
    decided |= odd
    bound = np.zeros(C, bool)
    bound[cpic[has_lea]] = True
    bound[cabs] = True
    bound &= ~decided
    return _Loads(index, load_pos, unsure, decided, bound)


def _mask_bound(r: _Rows, ld: _Loads, out: JumpShapes) -> None:
    """The rows before the load: nothing but lea and register moves leaving the index
    alone, or first going back an ``and i, 2**k - 1`` (2**k entries); anything else is
    the reference's to read.  Leaves ``ld.bound`` on the tables with no row to pass."""
    ins, blk = r.ins, r.blk
    before = r.pos < ld.load_pos[blk]
    mov_rr = ins.clean & (ins.mod == 3) & ((ins.op == 0x89) | (ins.op == 0x8B))
    mov_dst = np.where(ins.op == 0x89, ins.rm, ins.reg)
    lea_sure = (ins.op == 0x8D) & ins.clean
    neutral = lea_sure | (mov_rr & (mov_dst != ld.index[blk]))
    last_other = np.full(len(out.status), -1, np.int64)
    other = before & ~neutral
    np.maximum.at(last_other, blk[other], np.flatnonzero(other))
    ld.bound &= ~ld.unsure
    masked = np.flatnonzero(ld.bound & (last_other >= 0))
    if len(masked):
        q = last_other[masked]
        is_and = ins.clean[q] & (ins.mod[q] == 3) & (((ins.op2[q] >> 3) & 7) == 4) & \
            ((ins.op[q] == 0x83) | (ins.op[q] == 0x81))
        imm = np.where(ins.op[q] == 0x83, ins.imm(2, 1)[q], ins.imm(2, 4)[q])
        good = is_and & (ins.rm[q] == ld.index[masked]) & (imm > 0) & ((imm & (imm + 1)) == 0)
        sel = masked[good]
        out.count[sel] = imm[good] + 1
        out.status[sel] = FOUND
        ld.decided[sel] = True
    ld.bound &= last_other < 0


def _guard_bound(image: np.ndarray, row_start: np.ndarray, need: np.ndarray,
                 prev_first: np.ndarray, prev_n: np.ndarray, prev_delta: np.ndarray,
                 ld: _Loads, out: JumpShapes) -> None:
    """The block falling into each of ``need`` ends ``cmp i, N`` + ``ja``/``jae``:
    N+1 / N entries."""
    pr = np.concatenate([prev_first[need] + prev_n[need] - 2,
                         prev_first[need] + prev_n[need] - 1])
    poff = row_start[pr].astype(np.int64) + np.concatenate([prev_delta[need]] * 2)
    pins = _Insns(image[np.clip(poff[:, None] + np.arange(_WINDOW), 0, len(image) - 1)])
    k = len(need)
    c, g = np.arange(k), np.arange(k, 2 * k)
    ja = pins.clean[g] & (((pins.op[g] == 0x77) | (pins.op[g] == 0x73)) & ~pins.has_rex[g]
                          | ((pins.op[g] == 0x0F) & ((pins.op2[g] == 0x87)
                                                     | (pins.op2[g] == 0x83))
                             & ~pins.has_rex[g]))
    above = (pins.op[g] == 0x77) | ((pins.op[g] == 0x0F) & (pins.op2[g] == 0x87))
    cmp83 = (pins.op[c] == 0x83) & (pins.mod[c] == 3) & (((pins.op2[c] >> 3) & 7) == 7)
    cmp81 = (pins.op[c] == 0x81) & (pins.mod[c] == 3) & (((pins.op2[c] >> 3) & 7) == 7)
    cmp3d = pins.op[c] == 0x3D
    creg = np.where(cmp3d, 0, pins.rm[c])
    n = np.where(cmp83, pins.imm(2, 1)[c],
                 np.where(cmp81, pins.imm(2, 4)[c], pins.imm(1, 4)[c]))
    good = ja & pins.clean[c] & (cmp83 | cmp81 | cmp3d) & (creg == ld.index[need])
    cnt = np.where(above, n + 1, n)
    sel = need[good]
    out.count[sel] = cnt[good]
    out.status[sel] = FOUND
    ld.decided[sel] = True


def decode_shapes(image: np.ndarray, row_start: np.ndarray, row_size: np.ndarray,
                  first: np.ndarray, n_insn: np.ndarray, bstart: np.ndarray,
                  bend: np.ndarray, delta: np.ndarray, prev_jcc: np.ndarray,
                  prev_first: np.ndarray, prev_n: np.ndarray, prev_start: np.ndarray,
                  prev_end: np.ndarray, prev_delta: np.ndarray) -> JumpShapes:
    """The shapes of candidate blocks (64-bit little-endian code).

    ``image``: the file's bytes (u1); ``row_start``/``row_size``: the sweep's rows.  Per
    candidate block: its ``first`` row and ``n_insn`` rows, its address range
    [``bstart``, ``bend``) and ``delta`` = file offset - address of the section the
    reference reads it from (-1 << 62: none).  ``prev_jcc``: a block falls into it and
    ends in a conditional jump (the reference reads that block for the bound); the
    ``prev_*`` columns are that block's rows, range and section delta."""
    C = len(first)
    out = JumpShapes(np.full(C, FALLBACK, np.uint8), np.zeros(C, np.uint64),
                     np.zeros(C, np.uint64), np.zeros(C, np.int64), np.zeros(C, bool),
                     np.full(C, -1, np.int64))
    contiguous = _contiguous(row_start, row_size, first, n_insn, bstart, bend) & \
        (delta != NO_SECTION)
    prev_ok = prev_jcc & (prev_delta != NO_SECTION)
    prev_ok[prev_ok] = _contiguous(row_start, row_size, prev_first[prev_ok], prev_n[prev_ok],
                                   prev_start[prev_ok], prev_end[prev_ok])
    ok = contiguous & (n_insn >= 1)
    if not ok.any():
        return out
    r = _Rows(image, row_start, first, n_insn, delta, ok)
    out.jump[r.own] = row_start[r.rows[r.j]]
    ld = _table_loads(r, row_start, row_size, out)
    _mask_bound(r, ld, out)
    no_prev = ld.bound & ~prev_jcc
    out.status[no_prev] = NO_BOUND
    ld.decided |= no_prev
    need = np.flatnonzero(ld.bound & prev_jcc & prev_ok & (prev_n >= 2))
    if len(need):
        _guard_bound(image, row_start, need, prev_first, prev_n, prev_delta, ld, out)
    out.status[~ld.decided] = FALLBACK
    return out
