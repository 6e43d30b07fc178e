"""Each function's control-flow graph, recovered from the binary and its block map.

A block's successors follow from its last instruction (capstone, the sweep of
:mod:`bbmap.binary.disasm`) and the block metadata the compiler wrote:

* conditional jump: the taken target and the next block (fall-through);
* direct ``jmp``: its target; to another function's entry it is a tail call (no successor);
* ``ret``, a tail call (metadata ``has_tail_call``, direct or through a register), a trap
  (``ud2``/``int3``/``hlt``): no successor;
* an indirect ``jmp`` the metadata marks ``has_indirect_branch``: the jump table's entries
  when clang's table layout decodes (PIC: ``lea base,[rip+T]; movsxd r,[base+i*4];
  add r,base; jmp r``; absolute: ``jmp [i*8+T]``), its size from the ``cmp i, N`` / ``ja``
  guard before it; otherwise the successors are unknown (``unknown_succ``);
* anything else (a call, an ordinary instruction, an empty block) falls through to the next
  block of the same range, unless the metadata says the block cannot fall through (a call
  to a ``noreturn`` function, ``unreachable``).

Calls anywhere in a block are listed for the call graph (direct target, or indirect).
Where the binary carries the PGO analysis map with successor lists (``br_prob``), those
lists are the compiler's own CFG: the tests hold the recovered one against them
(``tests/oracles/cfg_pgo_map.py``, spec/cfg.md).  Everything is columnar over the whole
block map, so one recovery serves every function of a binary; only blocks ending in an
indirect jump are decoded a second time (with operand details) to read their tables.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.binary.disasm import (
    CALL,
    CALL_INDIRECT,
    CHEAP_UNKNOWN,
    JCC,
    JMP,
    JMP_INDIRECT,
    RET,
    TRAP,
    CodeTable,
    Disassembler,
    SweptRows,
    code_table,
    sweep_ranges,
    sweep_rows,
)
from bbmap.binary.jumptables import JUMP_TABLE_MAX
from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH, MD_HAS_TAIL_CALL
from bbmap.model import BlockMap

# ---- successor kinds (``CFG.succ_kind``)
S_FALLTHROUGH = 0  # the next block in layout: no branch, or the not-taken side of a jcc
S_BRANCH = 1  # the taken side of a conditional jump
S_JUMP = 2  # an unconditional direct jump
S_TABLE = 3  # an entry of a decoded jump table
S_GUESS = 4  # unknown indirect jump: a block of its function that no known edge reaches
SUCC_KINDS = ("fallthrough", "branch", "jump", "table", "guess")

# ---- how a block ends (``CFG.term``)
T_FALLS = 0  # ordinary instruction, call or empty block: falls through
T_COND = 1  # conditional jump inside the function
T_JUMP = 2  # direct jump inside the function
T_RETURN = 3
T_TAIL_CALL = 4  # jump (direct or indirect) to another function
T_COND_TAIL_CALL = 5  # conditional jump to another function (falls through otherwise)
T_TABLE = 6  # indirect jump through a decoded jump table
T_INDIRECT = 7  # indirect jump, targets unknown
T_NO_RETURN = 8  # cannot fall through and no branch: noreturn call, trap, unreachable
T_UNDECODED = 9  # the block's bytes could not be decoded
T_ESCAPE = 10  # a direct jump to a place that is no block start (of any function)
TERM_NAMES = ("falls", "conditional", "jump", "return", "tail_call", "conditional_tail_call",
              "jump_table", "indirect_unknown", "no_return", "undecoded", "escape")



@dataclass
class JumpTable:
    """One decoded table: where it is, its entry form and the blocks it reaches."""

    block: int  # global index of the block ending in the indirect jump
    jump: int  # address of the jmp
    table: int  # address of the table
    entry_size: int  # 4: int32 relative to the table, 8 (or 4 on i386): absolute address
    relative: bool
    entries: int  # count (from the cmp/ja guard)
    targets: list[int]  # global block index of each entry, in table order


@dataclass
class CFG:
    """Successors of every block of a block map (global block indexes)."""

    block_map: BlockMap
    block_start: np.ndarray  # u8 per block
    block_func: np.ndarray  # i8 per block: block-map function
    term: np.ndarray  # u1 per block (T_*)
    n_insn: np.ndarray  # i4 per block: instructions (0 for empty or undecoded blocks)
    succ_ptr: np.ndarray  # i8 B+1 (CSR)
    succ_block: np.ndarray  # i8
    succ_kind: np.ndarray  # u1 (S_*)
    unknown_succ: np.ndarray  # bool per block: an indirect jump whose targets are unknown
    # calls (every call instruction): block, instruction address, target address (-1
    # indirect), callee block-map function (-1 unknown / outside the map)
    call_block: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    call_addr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    call_target: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    call_func: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # tail calls: block -> callee function (-1 indirect / unknown)
    tail_block: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tail_func: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    jump_tables: list[JumpTable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # first instruction of every block (what profile inference needs to undo sample skid,
    # spec/inference.md): its size (0: no instruction) and disassembly kind; its text is
    # decoded again on demand (``first_insn_text``), only for the few blocks that need it
    first_size: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    first_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    first_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # is it a cheap register operation (disasm.is_cheap)? u1 CHEAP_NO / CHEAP_YES /
    # CHEAP_UNKNOWN (no instruction at the block start: decode the text to tell)
    first_cheap: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    describe_row: Callable[[int], str] | None = None
    # a conditional branch out of the function (``jns other_fn``: a conditional tail call,
    # alone or before a trailing ``jmp``): flow may leave the block although it has
    # successors (inference marks it an exit)
    cond_exit: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    # blocks ending ``jcc A; jmp B``: the address of the trailing ``jmp`` (0 elsewhere).  It
    # runs only when the jcc falls through, so it is no part of every execution's cost
    trail_jump: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @property
    def num_blocks(self) -> int:
        return len(self.term)

    def successors(self, b: int) -> list[int]:
        return self.succ_block[self.succ_ptr[b]:self.succ_ptr[b + 1]].tolist()

    def function_blocks(self, f: int) -> range:
        return self.block_map.function_blocks(f)

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(from block, to block, kind) of every successor edge."""
        src = np.repeat(np.arange(self.num_blocks, dtype=np.int64), np.diff(self.succ_ptr))
        return src, self.succ_block, self.succ_kind

    def term_name(self, b: int) -> str:
        return TERM_NAMES[int(self.term[b])]

    def first_insn_text(self, b: int) -> str:
        """``"0x1234: mov eax, dword ptr [rdi]"`` for block ``b``'s first instruction
        ("" when it has none or the CFG was built without the code table)."""
        row = int(self.first_row[b]) if len(self.first_row) else -1
        if row < 0 or self.describe_row is None:
            return ""
        return self.describe_row(row)


# ----------------------------------------------------------------------------- recovery
class SharedSweep:
    """One run's sweep of a binary's block-map ranges, shared by the phases that read
    its code (the fit's instruction starts, the CFG's last instructions): each range is
    swept once a run (:func:`~bbmap.binary.disasm.sweep_rows`, with the ``cheap``
    column), by whichever phase asks first."""

    def __init__(self, binary: Any, dis: Disassembler, block_map: BlockMap | None = None
                 ) -> None:
        self.binary, self.dis = binary, dis
        self.block_map = m = block_map if block_map is not None else binary.block_map
        _, self.block_start, _, self.range_end = sweep_bounds(m)
        self.range_section = _range_sections(binary, m)
        self.covered = np.zeros(m.num_ranges, bool)
        self.parts: list[tuple[SweptRows, np.ndarray]] = []

    def rows(self, want: np.ndarray) -> SweptRows:
        """The rows of the ranges ``want`` (bool per range), sweeping those no phase
        has asked for yet."""
        from bbmap.binary.disasm_cache import merge_swept, select_swept

        want = np.asarray(want, bool)
        missing = want & ~self.covered
        if missing.any():
            b = self.binary
            self.parts.append((sweep_rows(self.dis, b.data, b.sections, self.block_map,
                                          self.range_section, self.block_start,
                                          self.range_end, missing, cheap=True), missing))
            self.covered = self.covered | missing
        if len(self.parts) > 1:  # one part from now on
            self.parts = [(merge_swept(self.parts, len(self.covered)), self.covered)]
        if not self.parts:  # nothing asked for: an empty sweep
            return sweep_rows(self.dis, self.binary.data, self.binary.sections,
                              self.block_map, self.range_section, self.block_start,
                              self.range_end, want, cheap=True)
        return select_swept(self.parts[0][0], want, self.covered)


def recover_cfg(binary: Any, block_map: BlockMap | None = None,
                functions: np.ndarray | None = None, cache: Any = None,
                dis: Disassembler | None = None, swept: SharedSweep | None = None) -> CFG:
    """The CFG of every function of ``binary`` (a :class:`bbmap.binary.Binary`), or of
    the block-map ``functions`` given: the others are not disassembled (their blocks
    have no instructions and no successors), which is most of the time of a large
    binary of which a profile touched a few functions.  ``cache``: a
    :class:`bbmap.binary.disasm_cache.DisasmCache` to take the disassembly from (and add
    to) instead of sweeping every time.  ``dis``: the disassembler to use (a run shares
    one between its phases); by default one is made.  ``swept``: the run's shared sweep
    (of this binary's own block map), so ranges an earlier phase read are not swept
    again."""
    m = block_map if block_map is not None else binary.block_map
    B = m.num_blocks
    rng, start, end, range_end = sweep_bounds(m)
    rfunc = np.repeat(np.arange(m.num_functions, dtype=np.int64), np.diff(m.func_range_ptr))
    bfunc = rfunc[rng] if B else np.zeros(0, np.int64)
    if swept is not None and swept.block_map is not m:
        swept = None  # another map (a carried result's): its own sweep
    if swept is not None:
        dis = swept.dis
    if dis is None:
        dis = Disassembler(binary.machine, int(getattr(binary, "elfclass", 64)))
    data = binary.data
    range_section = _range_sections(binary, m)
    want = None
    if functions is not None:
        fsel = np.zeros(m.num_functions, bool)
        fsel[np.asarray(functions, np.int64)] = True
        want = fsel[rfunc]
    if cache is not None:
        from bbmap.binary.disasm_cache import cached_sweep_rows

        rows = cached_sweep_rows(cache, dis, data, binary.sections, m, range_section, start,
                                 range_end, want, swept.rows if swept is not None else None)
        code = code_table(dis, data, binary.sections, range_section, m.range_base, rows)
    elif swept is not None:
        rows = swept.rows(want if want is not None else np.ones(m.num_ranges, bool))
        code = code_table(dis, data, binary.sections, range_section, m.range_base, rows)
    else:
        code = sweep_ranges(dis, data, binary.sections, m, range_section, start, range_end,
                            want, cheap=True)
    return _build(binary, m, code, dis, data, rng, bfunc, start, end, range_section)


def sweep_bounds(m: BlockMap) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each block's range, start and end address, and each range's end (its last block's
    end, at least its base): where the sweep of a range must reach."""
    rng = np.repeat(np.arange(m.num_ranges, dtype=np.int64), np.diff(m.range_block_ptr))
    start = m.block_starts()
    end = (start + m.block_size).astype(np.uint64)
    range_end = m.range_base.astype(np.uint64).copy()
    nz = np.flatnonzero(np.diff(m.range_block_ptr) > 0)
    if len(nz):
        range_end[nz] = np.maximum(np.maximum.reduceat(end, m.range_block_ptr[nz]),
                                   range_end[nz])
    return rng, start, end, range_end


def _range_sections(binary: Any, m: BlockMap) -> np.ndarray:
    sec = np.array(m.range_section, dtype=np.int64, copy=True)
    unknown = np.flatnonzero(sec < 0)
    if len(unknown) and not getattr(binary, "is_relocatable", False):
        bases = m.range_base[unknown]
        for s in binary.sections:
            if s.is_code:
                inside = (bases >= s.sh_addr) & (bases < s.sh_addr + s.sh_size)
                sec[unknown[inside & (sec[unknown] < 0)]] = s.index
    return sec


class _Targets:
    """Address -> block: the block whose code starts there; where only empty blocks
    start there, the first (in map order) that can fall through (an empty block that
    cannot is an ``unreachable`` stub nothing jumps to).  clang's branches to an address
    shared by an empty block and a real one name the real one (PGO map successor lists of
    ``lay_interp``).  In a relocatable object addresses are per section."""

    def __init__(self, m: BlockMap, start: np.ndarray, sec: np.ndarray) -> None:
        empty = m.block_size == 0
        ok = ~(empty & ((m.block_md & MD_CAN_FALL_THROUGH) == 0))
        idx = np.flatnonzero(ok)
        key = self._key(sec[idx], start[idx])
        order = np.lexsort((idx, empty[idx], key))
        self.key, self.block = key[order], idx[order]

    @staticmethod
    def _key(sec: np.ndarray, addr: np.ndarray) -> np.ndarray:
        return (sec.astype(np.uint64) << np.uint64(48)) | addr.astype(np.uint64)

    def lookup(self, sec: np.ndarray, addr: np.ndarray) -> np.ndarray:
        k = self._key(sec, addr)
        j = np.searchsorted(self.key, k)
        hit = j < len(self.key)
        hit[hit] = self.key[j[hit]] == k[hit]
        return np.where(hit, self.block[np.minimum(j, max(len(self.block) - 1, 0))], -1)


@dataclass
class _Ends:
    """How each block ends, read from the code table: its instruction rows, its first
    instruction (for inference) and its last one or two branches."""

    lo_k: np.ndarray  # i8: code-table row of the block's first instruction (search bound)
    n_insn: np.ndarray  # i4: instructions decoded in the block
    last: np.ndarray  # i8: row of its last instruction (-1: none)
    first_row: np.ndarray  # i8: row of its first instruction (-1: none)
    first_size: np.ndarray  # u1
    first_kind: np.ndarray  # u1 (255: none)
    first_cheap: np.ndarray  # u1 CHEAP_*
    kind: np.ndarray  # u1: the last instruction's kind (255: none)
    tgt: np.ndarray  # i8: its direct target (-1: none)
    two: np.ndarray  # bool: the block ends ``jcc A; jmp B``
    tgt2: np.ndarray  # i8: that jcc's target (-1 elsewhere)


def _block_ends(code: CodeTable, rng: np.ndarray, start: np.ndarray, end: np.ndarray,
                decoded: np.ndarray) -> _Ends:
    """Instruction count, first and last instruction of every block."""
    B = len(start)
    lo_k = np.searchsorted(code.key, code.keys(rng, start))
    hi_k = np.searchsorted(code.key, code.keys(rng, end))
    n_insn = np.where(decoded, hi_k - lo_k, 0).astype(np.int32)
    last = np.where(n_insn > 0, hi_k - 1, -1)
    has_last = last >= 0
    first_row = np.where(n_insn > 0, lo_k, -1).astype(np.int64)
    first_size = np.zeros(B, np.uint8)
    first_size[has_last] = code.size[first_row[has_last]]
    first_kind = np.full(B, 255, np.uint8)
    first_kind[has_last] = code.kinds[first_row[has_last]]
    first_cheap = np.full(B, CHEAP_UNKNOWN, np.uint8)
    if code.cheap is not None:  # computed where an instruction starts at the block start
        at = has_last.copy()
        at[has_last] = code.start[first_row[has_last]] == start[has_last]
        first_cheap[at] = code.cheap[first_row[at]]
    kind = np.full(B, 255, np.uint8)
    kind[has_last] = code.kinds[last[has_last]]
    tgt = np.full(B, -1, np.int64)
    tgt[has_last] = code.target[last[has_last]]
    # a block may end in two branches (``jcc A; jmp B``): the jcc's target is a successor
    pen = np.where(n_insn >= 2, last - 1, -1)
    two = (pen >= 0) & ((kind == JMP) | (kind == JMP_INDIRECT))
    two[two] = code.kinds[pen[two]] == JCC
    tgt2 = np.full(B, -1, np.int64)
    tgt2[two] = code.target[pen[two]]
    return _Ends(lo_k, n_insn, last, first_row, first_size, first_kind, first_cheap, kind,
                 tgt, two, tgt2)


def _next_in_range(m: BlockMap) -> np.ndarray:
    """Next block in the same range (fall-through), -1 at a range end."""
    nxt = np.arange(1, m.num_blocks + 1, dtype=np.int64)
    range_last = (m.range_block_ptr[1:] - 1)[np.diff(m.range_block_ptr) > 0]
    nxt[range_last.astype(np.int64)] = -1
    return nxt


def _entries(m: BlockMap) -> np.ndarray:
    """Each function's entry block (-1 for a function without blocks)."""
    entry_of = np.full(m.num_functions, -1, np.int64)
    first = m.range_block_ptr[m.func_range_ptr[:-1]].astype(np.int64)
    nb = m.range_block_ptr[m.func_range_ptr[1:]].astype(np.int64) - first
    entry_of[nb > 0] = first[nb > 0]
    return entry_of


@dataclass
class _Branches:
    """Where each block's branches lead, as blocks."""

    tblock: np.ndarray  # i8: block of the last branch's target (-1: none)
    tblock2: np.ndarray  # i8: block of a leading jcc's target inside the function (-1)
    same: np.ndarray  # bool: the last branch stays in the function
    is_entry_target: np.ndarray  # bool: it goes to a function's entry


def _branch_blocks(targets: _Targets, key_sec: np.ndarray, bfunc: np.ndarray,
                   e: _Ends, entry_of: np.ndarray) -> _Branches:
    B = len(bfunc)
    tblock = np.full(B, -1, np.int64)
    has_t = e.tgt >= 0
    tblock[has_t] = targets.lookup(key_sec[has_t], e.tgt[has_t].astype(np.uint64))
    tblock2 = np.full(B, -1, np.int64)
    has_t2 = e.tgt2 >= 0
    tblock2[has_t2] = targets.lookup(key_sec[has_t2], e.tgt2[has_t2].astype(np.uint64))
    tblock2[has_t2] = np.where(bfunc[np.maximum(tblock2[has_t2], 0)] == bfunc[has_t2],
                               tblock2[has_t2], -1)
    same = np.zeros(B, bool)
    same[has_t] = (tblock[has_t] >= 0) & (bfunc[np.maximum(tblock[has_t], 0)] == bfunc[has_t])
    is_entry_target = np.zeros(B, bool)
    is_entry_target[has_t] = (tblock[has_t] >= 0) & \
        (entry_of[bfunc[np.maximum(tblock[has_t], 0)]] == tblock[has_t])
    return _Branches(tblock, tblock2, same, is_entry_target)


def _terminators(m: BlockMap, decoded: np.ndarray, kind: np.ndarray,
                 br: _Branches) -> np.ndarray:
    """How each block ends (T_*) before jump tables are read."""
    md = m.block_md
    can_ft = (md & MD_CAN_FALL_THROUGH) != 0
    term = np.full(m.num_blocks, T_FALLS, np.uint8)
    term[~can_ft] = T_NO_RETURN
    term[~decoded & (m.block_size > 0)] = T_UNDECODED
    term[kind == RET] = T_RETURN
    term[kind == TRAP] = T_NO_RETURN
    jcc, jmp = kind == JCC, kind == JMP
    same = br.same
    term[jcc & same] = T_COND
    term[jcc & ~same] = T_COND_TAIL_CALL
    term[jmp & same] = T_JUMP
    tail_md = (md & MD_HAS_TAIL_CALL) != 0
    term[jmp & ~same & (br.is_entry_target | tail_md)] = T_TAIL_CALL
    term[jmp & ~same & ~br.is_entry_target & ~tail_md] = T_ESCAPE
    ind = kind == JMP_INDIRECT
    term[ind] = T_INDIRECT
    term[ind & tail_md] = T_TAIL_CALL
    return term


def _table_edges(tables: list[JumpTable], B: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each table's distinct entries, in table order (first occurrence)."""
    lens = np.array([len(t.targets) for t in tables], np.int64)
    tb = np.repeat(np.array([t.block for t in tables], np.int64), lens)
    tt = np.fromiter(itertools.chain.from_iterable(t.targets for t in tables), np.int64,
                     int(lens.sum()))
    first_at = np.unique(tb * B + tt, return_index=True)[1]  # first of each pair
    first_at.sort()  # back to table order (tables are by block)
    return tb[first_at], tt[first_at], np.full(len(first_at), S_TABLE, np.uint8)


def _guess_edges(m: BlockMap, bfunc: np.ndarray, unknown: np.ndarray, d: np.ndarray,
                 can_ft: np.ndarray, entry_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unknown indirect jumps (computed goto, undecodable tables): their candidates are
    the blocks of the function that no known edge reaches (address-taken labels), except
    the entry and ``unreachable`` stubs; every jump's candidates ascending, all at once."""
    B = m.num_blocks
    indeg = np.bincount(d, minlength=B)
    cand = (indeg == 0) & ~((m.block_size == 0) & ~can_ft)
    cand[entry_of[entry_of >= 0]] = False
    cand_at = np.flatnonzero(cand)
    f = bfunc[unknown]
    lo = np.searchsorted(cand_at, m.range_block_ptr[m.func_range_ptr[f]])
    hi = np.searchsorted(cand_at, m.range_block_ptr[m.func_range_ptr[f + 1]])
    lens = hi - lo
    gd = cand_at[np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))]
    return np.repeat(unknown, lens), gd


def _successors(m: BlockMap, term: np.ndarray, e: _Ends, br: _Branches, nxt: np.ndarray,
                tables: list[JumpTable], bfunc: np.ndarray, entry_of: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Successor lists as CSR (pointer, block, kind), in the order the kinds are listed."""
    B = m.num_blocks
    can_ft = (m.block_md & MD_CAN_FALL_THROUGH) != 0
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    knd: list[np.ndarray] = []

    def add(mask: np.ndarray, to: np.ndarray, k: int) -> None:
        sel = np.flatnonzero(mask & (to >= 0))
        src.append(sel)
        dst.append(to[sel])
        knd.append(np.full(len(sel), k, np.uint8))

    falls = (term == T_FALLS) | (term == T_COND) | (term == T_COND_TAIL_CALL)
    falls &= can_ft | (term != T_FALLS)
    add(term == T_COND, br.tblock, S_BRANCH)
    add(e.two, br.tblock2, S_BRANCH)
    add(falls, nxt, S_FALLTHROUGH)
    add(term == T_JUMP, br.tblock, S_JUMP)
    if tables:
        for col, part in zip((src, dst, knd), _table_edges(tables, B)):
            col.append(part)
    s = np.concatenate(src) if src else np.zeros(0, np.int64)
    d = np.concatenate(dst) if dst else np.zeros(0, np.int64)
    k = np.concatenate(knd) if knd else np.zeros(0, np.uint8)
    unknown = np.flatnonzero(term == T_INDIRECT)
    if len(unknown):
        gs, gd = _guess_edges(m, bfunc, unknown, d, can_ft, entry_of)
        s = np.concatenate([s, gs])
        d = np.concatenate([d, gd])
        k = np.concatenate([k, np.full(len(s) - len(k), S_GUESS, np.uint8)])
    # one edge per (block, successor): a jcc whose target is its own fall-through block
    # is one successor, as in the compiler's CFG; the first kind listed wins
    # by (block, successor), the order listed breaking ties: one stable sort of a combined
    # key (block * B + successor < B**2) orders as a lexsort of the two and the position
    order = np.argsort(s.astype(np.int64) * B + d, kind="stable") if B < 1 << 31 else \
        np.lexsort((np.arange(len(s)), d, s))
    s, d, k = s[order], d[order], k[order]
    keep = np.ones(len(s), bool)
    keep[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    s, d, k = s[keep], d[keep], k[keep]  # still by block: the successor lists, in order
    ptr = np.zeros(B + 1, np.int64)
    np.cumsum(np.bincount(s, minlength=B), out=ptr[1:])
    return ptr, d, k


def _calls(code: CodeTable, m: BlockMap, start: np.ndarray, targets: _Targets,
           key_sec: np.ndarray, bfunc: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Calls anywhere in a block: instruction row, block, target address, callee."""
    ci = np.flatnonzero((code.kinds == CALL) | (code.kinds == CALL_INDIRECT))
    call_block = _block_of_rows(code, ci, m, start)
    ok = call_block >= 0
    ci, call_block = ci[ok], call_block[ok]
    call_target = code.target[ci].astype(np.int64)
    cfun = np.full(len(ci), -1, np.int64)
    direct = call_target >= 0
    hb = targets.lookup(key_sec[call_block[direct]], call_target[direct].astype(np.uint64))
    cfun[direct] = np.where(hb >= 0, bfunc[np.maximum(hb, 0)], -1)
    return ci, call_block, call_target, cfun


def _build(binary: Any, m: BlockMap, code: CodeTable, dis: Disassembler, data: Any,
           rng: np.ndarray, bfunc: np.ndarray, start: np.ndarray, end: np.ndarray,
           range_section: np.ndarray) -> CFG:
    B = m.num_blocks
    reloc = bool(getattr(binary, "is_relocatable", False))
    bsec = range_section[rng] if B else np.zeros(0, np.int64)
    key_sec = bsec if reloc else np.zeros(B, np.int64)
    targets = _Targets(m, start, key_sec)
    decoded = code.decoded[rng] if B else np.zeros(0, bool)
    e = _block_ends(code, rng, start, end, decoded)
    nxt = _next_in_range(m)
    entry_of = _entries(m)
    br = _branch_blocks(targets, key_sec, bfunc, e, entry_of)
    two_out = e.two & (br.tblock2 < 0)  # ``jcc other_fn; jmp B``: the jcc leaves the function
    trail_jump = np.zeros(B, np.uint64)
    trail_jump[e.two] = code.start[e.last[e.two]]
    term = _terminators(m, decoded, e.kind, br)
    # an indirect jump without the metadata bit (old map versions have no such bit): a
    # jump table if one decodes, else unknown
    notes: list[str] = []
    reader = _TableReader(binary, data, dis, m, code, start, end, rng, nxt, e.kind, targets,
                          key_sec, bfunc, notes)
    tables = _read_tables(reader, code, np.flatnonzero(term == T_INDIRECT), e.lo_k, e.n_insn)
    for jt in tables:
        term[jt.block] = T_TABLE
    ptr, d, k = _successors(m, term, e, br, nxt, tables, bfunc, entry_of)
    ci, call_block, call_target, cfun = _calls(code, m, start, targets, key_sec, bfunc)
    tail = np.flatnonzero((term == T_TAIL_CALL) | (term == T_COND_TAIL_CALL))
    tail_func = np.where(br.tblock[tail] >= 0, bfunc[np.maximum(br.tblock[tail], 0)], -1)
    return CFG(block_map=m, block_start=start, block_func=bfunc, term=term, n_insn=e.n_insn,
               succ_ptr=ptr, succ_block=d, succ_kind=k, unknown_succ=term == T_INDIRECT,
               call_block=call_block, call_addr=code.start[ci], call_target=call_target,
               call_func=cfun, tail_block=tail, tail_func=tail_func, jump_tables=tables,
               notes=notes, first_size=e.first_size, first_kind=e.first_kind,
               first_row=e.first_row, first_cheap=e.first_cheap, describe_row=code.describe,
               cond_exit=(term == T_COND_TAIL_CALL) | two_out, trail_jump=trail_jump)


def _span(m: BlockMap, f: int) -> tuple[int, int]:
    r0, r1 = int(m.func_range_ptr[f]), int(m.func_range_ptr[f + 1])
    return int(m.range_block_ptr[r0]), int(m.range_block_ptr[r1])


def _block_of_rows(code: CodeTable, rows: np.ndarray, m: BlockMap,
                   start: np.ndarray) -> np.ndarray:
    """Global block holding each instruction row (-1 if it lies in no block)."""
    r = (code.key[rows] >> np.uint64(33)).astype(np.int64)
    addr = code.start[rows]
    lo = m.range_block_ptr[r].astype(np.int64)
    hi = m.range_block_ptr[r + 1].astype(np.int64)
    # blocks of one range are in address order: the last block starting at or before addr
    rkey = (np.repeat(np.arange(m.num_ranges, dtype=np.uint64), np.diff(m.range_block_ptr))
            << np.uint64(40)) | (start - m.range_base[np.repeat(
                np.arange(m.num_ranges), np.diff(m.range_block_ptr))]).astype(np.uint64)
    q = (r.astype(np.uint64) << np.uint64(40)) | (addr - m.range_base[r]).astype(np.uint64)
    j = np.searchsorted(rkey, q, side="right") - 1
    ok = (j >= lo) & (j < hi)
    jj = np.maximum(j, 0)
    ok &= addr < start[jj] + m.block_size[jj]
    return np.where(ok, j, -1)


# ----------------------------------------------------------------------------- tables
_FAMILY = {}
for _fam, _names in {
    "rax": "rax eax ax al ah", "rbx": "rbx ebx bx bl bh", "rcx": "rcx ecx cx cl ch",
    "rdx": "rdx edx dx dl dh", "rsi": "rsi esi si sil", "rdi": "rdi edi di dil",
    "rbp": "rbp ebp bp bpl", "rsp": "rsp esp sp spl",
}.items():
    for _n in _names.split():
        _FAMILY[_n] = _fam


def _family(name: str) -> str:
    if name in _FAMILY:
        return _FAMILY[name]
    if name.startswith("r") and name[1:].rstrip("dwb").isdigit():
        return name.rstrip("dwb") if not name[1:].isdigit() else name
    return name


class _TableReader:
    """Decode clang's x86 jump-table sequences around one indirect jump."""

    def __init__(self, binary: Any, data: Any, dis: Disassembler, m: BlockMap,
                 code: CodeTable, start: np.ndarray, end: np.ndarray, rng: np.ndarray,
                 nxt: np.ndarray, kind: np.ndarray, targets: _Targets, key_sec: np.ndarray,
                 bfunc: np.ndarray, notes: list[str]) -> None:
        self.binary, self.data, self.m = binary, data, m
        self.start, self.end, self.nxt, self.kind = start, end, nxt, kind
        self.targets, self.key_sec, self.bfunc, self.notes = targets, key_sec, bfunc, notes
        self.bits = dis.bits
        self.little = bool(getattr(binary, "little_endian", True))
        self._cs = None
        self.sections = [s for s in binary.sections if s.has_contents and s.sh_addr]

    @functools.cached_property
    def prev(self) -> np.ndarray:
        """Each block's fall-through predecessor (-1 none): made on the first table read,
        not for every CFG (most binaries' sampled functions have no unknown indirect jump)."""
        prev = np.full(len(self.start), -1, np.int64)
        ok = self.nxt >= 0
        prev[self.nxt[ok]] = np.flatnonzero(ok)
        return prev

    def section_delta(self, addr: np.ndarray, n: np.ndarray) -> np.ndarray:
        """File offset - address of the section :meth:`_read` reads [addr, addr + n) from
        (the first that holds it), per element; ``jumptables.NO_SECTION`` where none does
        or the file is shorter."""
        from bbmap.binary.jumptables import NO_SECTION

        addr = np.asarray(addr, np.int64)
        n = np.asarray(n, np.int64)
        out = np.full(len(addr), NO_SECTION, np.int64)
        todo = np.ones(len(addr), bool)
        for s in self.sections:
            inside = todo & (addr >= s.sh_addr) & (addr + n <= s.sh_addr + s.sh_size)
            out[inside] = s.sh_offset - s.sh_addr
            todo &= ~inside
        flen = len(self.data)
        out[(out != NO_SECTION) & (addr + out + n > flen)] = NO_SECTION
        return out

    def _insns(self, b: int) -> list:
        if self._cs is None:
            import capstone

            self._cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64
                                   if self.bits == 64 else capstone.CS_MODE_32)
            self._cs.detail = True
        raw = self._read(int(self.start[b]), int(self.end[b] - self.start[b]))
        return list(self._cs.disasm(raw, int(self.start[b]))) if raw else []

    def _read(self, addr: int, n: int) -> bytes:
        for s in self.sections:
            if s.sh_addr <= addr and addr + n <= s.sh_addr + s.sh_size:
                off = s.sh_offset + addr - s.sh_addr
                return bytes(self.data[off: off + n])
        return b""

    def read(self, b: int) -> JumpTable | None:
        from capstone import x86_const as X

        ins = self._insns(b)
        if not ins or ins[-1].mnemonic.split()[-1] != "jmp":
            return None
        jmp = ins[-1]
        op = jmp.operands[0] if jmp.operands else None
        if op is None:
            return None
        rip_lea: dict[str, int] = {}  # register family -> address loaded by lea [rip+d]
        for i in ins[:-1]:
            if i.mnemonic == "lea" and len(i.operands) == 2 and \
                    i.operands[1].type == X.X86_OP_MEM and \
                    i.operands[1].mem.base == X.X86_REG_RIP:
                rip_lea[_family(i.reg_name(i.operands[0].reg))] = \
                    i.address + i.size + i.operands[1].mem.disp
        index = table = None
        size, relative = 0, False
        load_addr = jmp.address  # the instruction that reads the table
        if op.type == X.X86_OP_MEM and op.mem.index != 0:
            # jmp [T + i*8] (absolute table); jmp [base + i*8] with base = lea [rip+T]
            index = _family(jmp.reg_name(op.mem.index))
            size = op.mem.scale
            if op.mem.base == 0:
                table = op.mem.disp & ((1 << self.bits) - 1)
            else:
                table = rip_lea.get(_family(jmp.reg_name(op.mem.base)))
                if table is not None:
                    table += op.mem.disp
        elif op.type == X.X86_OP_REG:
            # lea base,[rip+T]; movsxd r,[base+i*4]; add r,base; jmp r
            r = _family(jmp.reg_name(op.reg))
            base = None
            for i in reversed(ins[:-1]):
                ops = i.operands
                if i.mnemonic == "add" and len(ops) == 2 and ops[0].type == X.X86_OP_REG \
                        and ops[1].type == X.X86_OP_REG and \
                        _family(i.reg_name(ops[0].reg)) == r:
                    base = _family(i.reg_name(ops[1].reg))
                elif base and i.mnemonic in ("movsxd", "movslq") and len(ops) == 2 and \
                        ops[1].type == X.X86_OP_MEM and ops[1].mem.index != 0 and \
                        _family(i.reg_name(ops[1].mem.base)) == base:
                    index = _family(i.reg_name(ops[1].mem.index))
                    size, relative = ops[1].mem.scale, True
                    load_addr = i.address
                    table = rip_lea.get(base)
                    break
        if index is None or table is None or size not in (4, 8):
            return None
        count = self._bound(b, [i for i in ins if i.address < load_addr], index)
        if count is None or not 0 < count <= JUMP_TABLE_MAX:
            self.notes.append(f"jump at {jmp.address:#x}: table at {table:#x} has no "
                              "cmp/ja bound; successors unknown")
            return None
        raw = self._read(table, count * size)
        if len(raw) != count * size:
            return None
        dt = np.dtype(("<" if self.little else ">") + ("i4" if size == 4 else "u8"))
        vals = np.frombuffer(raw, dtype=dt).astype(np.int64)
        tgts = (vals + table) if relative else vals
        if not relative and self.binary.e_type != "ET_EXEC":
            return None  # absolute entries of a PIE are filled by dynamic relocations
        blocks = self.targets.lookup(np.full(count, self.key_sec[b]), tgts.astype(np.uint64))
        if (blocks < 0).any() or (self.bfunc[blocks] != self.bfunc[b]).any():
            self.notes.append(f"jump at {jmp.address:#x}: table at {table:#x} has entries "
                              "outside the function; successors unknown")
            return None
        return JumpTable(block=b, jump=jmp.address, table=table, entry_size=size,
                         relative=relative, entries=count, targets=blocks.tolist())

    def _bound(self, b: int, ins: list, index: str) -> int | None:
        """Entries from the guard ``cmp i, N; ja default`` (N+1) or ``jae`` (N), or from a
        mask ``and i, 2**k-1`` (2**k), found before the table load (``ins``) in the block
        or in the one that falls into it, following ``mov i, j`` renames."""
        from capstone import x86_const as X

        seq = list(reversed(ins))
        p = int(self.prev[b])
        if p >= 0 and self.kind[p] == JCC:
            seq += list(reversed(self._insns(p)))
        jcc = None
        for i in seq:
            ops = i.operands
            mnem = i.mnemonic.split()[-1]
            if mnem in ("ja", "jae", "jnbe", "jnb"):
                jcc = "ja" if mnem in ("ja", "jnbe") else "jae"
            elif mnem == "cmp" and jcc and len(ops) == 2 and ops[0].type == X.X86_OP_REG \
                    and ops[1].type == X.X86_OP_IMM and \
                    _family(i.reg_name(ops[0].reg)) == index:
                n = ops[1].imm
                return n + 1 if jcc == "ja" else n
            elif mnem == "and" and len(ops) == 2 and ops[0].type == X.X86_OP_REG and \
                    ops[1].type == X.X86_OP_IMM and _family(i.reg_name(ops[0].reg)) == index \
                    and ops[1].imm > 0 and (ops[1].imm & (ops[1].imm + 1)) == 0:
                return ops[1].imm + 1  # i & (2**k - 1): 2**k entries
            elif mnem in ("mov", "movzx", "movsxd") and len(ops) == 2 and \
                    ops[0].type == X.X86_OP_REG and _family(i.reg_name(ops[0].reg)) == index:
                if ops[1].type == X.X86_OP_REG:
                    index = _family(i.reg_name(ops[1].reg))
                else:
                    return None
        return None


def _read_tables(reader: _TableReader, code: CodeTable, cand: np.ndarray,
                 first_row: np.ndarray, n_insn: np.ndarray) -> list[JumpTable]:
    """The jump tables of the blocks ``cand`` (ending in an indirect jump), in block order,
    with the reference's notes: the shapes clang emits read from the instruction bytes for
    all blocks at once (:mod:`bbmap.binary.jumptables`), any other block by the reference
    (:meth:`_TableReader.read`, capstone with details).  Equal to the reference on every
    block (tests/test_cfg_jump_tables.py)."""
    from bbmap.binary import jumptables as jt

    if not len(cand):
        return []
    image = _image(reader.data)
    if reader.bits != 64 or not reader.little or image is None:
        return [t for t in map(reader.read, cand.tolist()) if t is not None]
    start, end = reader.start.astype(np.int64), reader.end.astype(np.int64)
    p = reader.prev[cand]
    pj = (p >= 0) & (reader.kind[np.maximum(p, 0)] == JCC)
    pp = np.maximum(p, 0)
    shapes = jt.decode_shapes(
        image, code.start, code.size, first_row[cand], n_insn[cand].astype(np.int64),
        start[cand], end[cand], reader.section_delta(start[cand], end[cand] - start[cand]),
        pj, first_row[pp], np.where(pj, n_insn[pp], 0).astype(np.int64), start[pp], end[pp],
        reader.section_delta(start[pp], end[pp] - start[pp]))
    # the entries of every table with a usable bound, read and looked up at once
    cnt = shapes.count
    found = (shapes.status == jt.FOUND) & (cnt > 0) & (cnt <= JUMP_TABLE_MAX)
    tab = shapes.table.astype(np.int64)
    nbytes = np.where(found, cnt * shapes.entry_size, 0)
    tdelta = reader.section_delta(tab, nbytes)
    readable = found & (tdelta != jt.NO_SECTION)
    # absolute entries of a PIE are filled by dynamic relocations
    usable = readable & (shapes.relative | (reader.binary.e_type == "ET_EXEC"))
    u = np.flatnonzero(usable)
    ulen = cnt[u]
    at = np.repeat(tab[u] + tdelta[u], ulen)
    k = np.arange(int(ulen.sum())) - np.repeat(np.cumsum(ulen) - ulen, ulen)
    size = np.repeat(shapes.entry_size[u], ulen)
    off = at + k * size
    vals = np.zeros(len(off), np.int64)
    for w, dt in ((4, "<i4"), (8, "<u8")):
        sel = size == w
        if sel.any():
            raw = image[off[sel][:, None] + np.arange(w)]
            vals[sel] = raw.copy().view(dt).reshape(-1).astype(np.int64)
    tgts = vals + np.where(np.repeat(shapes.relative[u], ulen), np.repeat(tab[u], ulen), 0)
    owner = np.repeat(cand[u], ulen)
    blocks = reader.targets.lookup(reader.key_sec[owner], tgts.astype(np.uint64))
    inside = (blocks >= 0) & (reader.bfunc[np.maximum(blocks, 0)] == reader.bfunc[owner])
    bad = np.zeros(len(cand), bool)
    if len(u):
        bad[u] = np.logical_and.reduceat(inside, np.cumsum(ulen) - ulen) == 0
    entry_at = np.zeros(len(cand) + 1, np.int64)  # where each table's entries start
    entry_at[u + 1] = ulen
    np.cumsum(entry_at, out=entry_at)
    flat = blocks.tolist()

    # in block order: the reference's blocks, notes and tables (a block without a table
    # and without a note is skipped: most of a binary whose loops hoist the table base)
    fb = shapes.status == jt.FALLBACK
    nb = (shapes.status == jt.NO_BOUND) | ((shapes.status == jt.FOUND) & ~found)
    sel_mask = fb | nb | usable  # usable: a table, or a note of entries outside
    fallback, no_bound, bad_l = fb.tolist(), nb.tolist(), bad.tolist()
    out: list[JumpTable] = []
    sel = np.flatnonzero(sel_mask)
    cols = zip(sel.tolist(), cand[sel].tolist(), shapes.jump[sel].tolist(),
               shapes.table[sel].tolist(), shapes.entry_size[sel].tolist(),
               shapes.relative[sel].tolist(), cnt[sel].tolist(), entry_at[sel].tolist(),
               entry_at[sel + 1].tolist())
    for i, b, jump, table, esz, rel, n, e0, e1 in cols:
        if fallback[i]:
            t = reader.read(b)
            if t is not None:
                out.append(t)
        elif no_bound[i]:
            reader.notes.append(f"jump at {jump:#x}: table at {table:#x} has no "
                                "cmp/ja bound; successors unknown")
        elif bad_l[i]:
            reader.notes.append(f"jump at {jump:#x}: table at {table:#x} has entries "
                                "outside the function; successors unknown")
        else:
            out.append(JumpTable(b, jump, table, esz, rel, n, flat[e0:e1]))
    return out


def _image(data: Any) -> np.ndarray | None:
    """The file's bytes as a numpy array (a view of the mapping), or None."""
    try:
        return np.frombuffer(data, np.uint8)
    except (TypeError, ValueError):
        return None


    # unknown indirect jumps: (function, block ID, the guessed candidates equal the map's)


