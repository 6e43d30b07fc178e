"""What a block is, in terms that survive a rebuild: hashes of its instructions.

Where the compiler wrote a hash per block (clang 22 ``-mllvm -emit-bb-hash``, feature
``bb_hash``) it is LLVM's blended hash: four 16-bit parts, from the low bits up the
block's offset in instructions, the hash of its opcodes, of its whole instructions
(operands included, symbolic as the compiler sees them) and of its opcodes with its
neighbours' (successors then predecessors).  Those are the best evidence: they are made
before the assembler turns symbols into addresses.

Where it did not, the binary is read instead: each block's instructions (capstone),
with what changes when unrelated code moves taken out -- a branch or call target
becomes the name of the function it enters (``L`` for a place in the same function),
a RIP-relative displacement and any immediate that looks like an address become
placeholders, nops and a trailing unconditional ``jmp`` are left out (block placement
adds and removes them).  The parts are then made the same way: opcodes, instructions,
instructions with every register one name (the ``shape``: register allocation changes
with any edit nearby), and opcodes with the neighbours' (from the recovered CFG).  Every hash
here is blake2b of text, so it is the same in every process and on every machine.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.arrays import expand_ranges
from bbmap.formats.bbaddrmap import FEAT_BB_HASH
from bbmap.model import BlockMap

_HEX = re.compile(r"0x[0-9a-f]+")
_RIP = re.compile(r"rip \+ 0x[0-9a-f]+|rip - 0x[0-9a-f]+")
_REG = re.compile(r"\b(r[0-9]+[dwb]?|[re]?[abcd]x|[abcd][lh]|[re]?(si|di|sp|bp)|"
                  r"(si|di|sp|bp)l|[xyz]mm[0-9]+|k[0-7])\b")
ADDRESS_LIKE = 0x10000  # immediates at least this large are taken for addresses
_BRANCHES = ("j", "call", "loop")


def _h(text: str) -> int:
    """A stable 64-bit hash of ``text`` (never Python's ``hash``, which is salted)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


@dataclass
class Fingerprints:
    """Per block of one build (global block index; zero where not fingerprinted)."""

    opcode: np.ndarray  # u8: the block's opcodes (read from the binary)
    instr: np.ndarray  # u8: its instructions, operands normalised
    shape: np.ndarray  # u8: the same with every register one name (allocation churns)
    neighbor: np.ndarray  # u8: its opcodes with its successors' and predecessors'
    compiler: np.ndarray  # bool: the compiler wrote a hash for the block (bb_hash)
    n_insn: np.ndarray  # i4: instructions read from the binary
    # the compiler's three parts (16 bits each) where ``compiler``
    c_opcode: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    c_instr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    c_neighbor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    # per fingerprinted block: its instructions' addresses, and the functions it calls
    # (by base name), in order
    insn_addr: dict[int, np.ndarray] = field(default_factory=dict)
    calls: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # per fingerprinted block: its instructions as the shape hash reads them (operands
    # normalised, every register one name), for block similarity (match.similar)
    text: dict[int, tuple[str, ...]] = field(default_factory=dict)
    succ: dict[int, list[int]] = field(default_factory=dict)
    pred: dict[int, list[int]] = field(default_factory=dict)
    # the kind of each edge (bbmap.cfg.S_*: fall-through, branch, jump, table entry)
    edge_kind: dict[tuple[int, int], int] = field(default_factory=dict)


def function_blocks(m: BlockMap, f: int) -> np.ndarray:
    """The global block indexes of block-map function ``f``, in map order."""
    r0, r1 = int(m.func_range_ptr[f]), int(m.func_range_ptr[f + 1])
    return np.arange(int(m.range_block_ptr[r0]), int(m.range_block_ptr[r1]), dtype=np.int64)


def block_starts(m: BlockMap) -> np.ndarray:
    rng = np.repeat(np.arange(m.num_ranges, dtype=np.int64), np.diff(m.range_block_ptr))
    return (m.range_base[rng] + m.block_offset).astype(np.uint64) if len(rng) else \
        np.zeros(0, np.uint64)


def has_compiler_hash(m: BlockMap, f: int) -> bool:
    return bool(int(m.func_feature[f]) & FEAT_BB_HASH) and len(m.block_hash) == m.num_blocks


def content_hash(m: BlockMap, f: int) -> int:
    """What a function is without disassembling it: its blocks' sizes and flags (and the
    compiler's opcode hashes when it wrote them).  Two builds of unchanged code agree."""
    b = function_blocks(m, f)
    parts = [m.block_size[b].tobytes(), m.block_md[b].tobytes()]
    if has_compiler_hash(m, f):
        parts.append(((m.block_hash[b] >> np.uint64(16)) & np.uint64(0xFFFF)).tobytes())
    return _h(b"|".join(parts).hex()) if len(b) else 0


def same_code(old: Any, new: Any, f: int, g: int, code_old: Any = None,
              code_new: Any = None) -> bool:
    """Function ``f`` of ``old`` and ``g`` of ``new`` are the same code without
    disassembling either: the same blocks (sizes, flags) and the same bytes, range by
    range.  Relative branch and call displacements are in the bytes, so code that moved
    as a whole with what it reaches compares equal; anything else is left to the
    fingerprints."""
    mo, mn = old.block_map, new.block_map
    bo, bn = function_blocks(mo, f), function_blocks(mn, g)
    if len(bo) != len(bn) or not len(bo) or \
            not np.array_equal(mo.block_size[bo], mn.block_size[bn]) or \
            not np.array_equal(mo.block_md[bo], mn.block_md[bn]) or \
            not np.array_equal(mo.block_offset[bo], mn.block_offset[bn]):
        return False
    if mo.func_range_ptr[f + 1] - mo.func_range_ptr[f] != \
            mn.func_range_ptr[g + 1] - mn.func_range_ptr[g]:
        return False
    co = code_old if code_old is not None else _Code(old)
    cn = code_new if code_new is not None else _Code(new)
    return _same_bytes(mo, mn, f, g, co, cn)


def same_code_pairs(old: Any, new: Any, f: np.ndarray, g: np.ndarray, code_old: Any = None,
                    code_new: Any = None) -> np.ndarray:
    """:func:`same_code` of every pair ``(f[i], g[i])`` at once (bool per pair): the block
    columns of all pairs compared in one pass, the bytes read only for the pairs whose
    blocks agree.  In a 20,000-function rebuild the per-pair array calls were most of a
    carry's time."""
    mo, mn = old.block_map, new.block_map
    f, g = np.asarray(f, np.int64), np.asarray(g, np.int64)
    if not len(f):
        return np.zeros(0, bool)
    fb0 = mo.range_block_ptr[mo.func_range_ptr[f]].astype(np.int64)
    fb1 = mo.range_block_ptr[mo.func_range_ptr[f + 1]].astype(np.int64)
    gb0 = mn.range_block_ptr[mn.func_range_ptr[g]].astype(np.int64)
    gb1 = mn.range_block_ptr[mn.func_range_ptr[g + 1]].astype(np.int64)
    n = fb1 - fb0
    ok = (n == gb1 - gb0) & (n > 0) & \
        (np.diff(mo.func_range_ptr)[f] == np.diff(mn.func_range_ptr)[g])
    idx = np.flatnonzero(ok)
    if len(idx):
        bo, bn = expand_ranges(fb0[idx], n[idx]), expand_ranges(gb0[idx], n[idx])
        bad = (mo.block_size[bo] != mn.block_size[bn]) | (mo.block_md[bo] != mn.block_md[bn]) \
            | (mo.block_offset[bo] != mn.block_offset[bn])
        pair = np.repeat(np.arange(len(idx), dtype=np.int64), n[idx])
        ok[idx[np.bincount(pair, weights=bad, minlength=len(idx)) > 0]] = False
    co = code_old if code_old is not None else _Code(old)
    cn = code_new if code_new is not None else _Code(new)
    one = ok & (np.diff(mo.func_range_ptr)[f] == 1)
    if one.any():  # one range each (most functions): every pair's bytes in one compare
        i1 = np.flatnonzero(one)
        lo = fb0[i1]
        size = np.maximum.reduceat(mo.block_offset[expand_ranges(lo, n[i1])]
                                   + mo.block_size[expand_ranges(lo, n[i1])],
                                   np.concatenate([[0], np.cumsum(n[i1])[:-1]])
                                   ).astype(np.int64)
        ro = mo.func_range_ptr[f[i1]].astype(np.int64)
        rn = mn.func_range_ptr[g[i1]].astype(np.int64)
        xo = co.offsets(mo.range_base[ro].astype(np.uint64), size)
        xn = cn.offsets(mn.range_base[rn].astype(np.uint64), size)
        good = (xo >= 0) & (xn >= 0)
        k = np.flatnonzero(good)
        if len(k):
            bo = np.frombuffer(co.data, np.uint8)[expand_ranges(xo[k], size[k])]
            bn = np.frombuffer(cn.data, np.uint8)[expand_ranges(xn[k], size[k])]
            pair = np.repeat(np.arange(len(k), dtype=np.int64), size[k])
            good[k[np.bincount(pair, weights=bo != bn, minlength=len(k)) > 0]] = False
        ok[i1] = good
    for i in np.flatnonzero(ok & ~one).tolist():
        ok[i] = _same_bytes(mo, mn, int(f[i]), int(g[i]), co, cn)
    return ok


def _same_bytes(mo: BlockMap, mn: BlockMap, f: int, g: int, co: Any, cn: Any) -> bool:
    """The ranges of ``f`` (old) and ``g`` (new), blocks already equal, hold the same
    bytes."""
    ro = range(int(mo.func_range_ptr[f]), int(mo.func_range_ptr[f + 1]))
    rn = range(int(mn.func_range_ptr[g]), int(mn.func_range_ptr[g + 1]))
    for a, b in zip(ro, rn):
        lo, hi = int(mo.range_block_ptr[a]), int(mo.range_block_ptr[a + 1])
        if hi <= lo:
            continue
        end = int((mo.block_offset[lo:hi] + mo.block_size[lo:hi]).max())
        x = co.read(int(mo.range_base[a]), end)
        if not x or x != cn.read(int(mn.range_base[b]), end):
            return False
    return True


def code_reader(binary: Any) -> Any:
    """The reader :func:`same_code` takes, made once per binary."""
    return _Code(binary)


class _Code:
    """The binary's bytes at a virtual address, and the function a target address enters."""

    def __init__(self, binary: Any) -> None:
        from bbmap.stale.names import base_name

        self.data = binary.data
        self.secs = [(s.sh_addr, s.sh_addr + s.sh_size, s.sh_offset)
                     for s in binary.code_sections()]
        sy = binary.symbols
        self.sym_addr = np.asarray(sy.address, np.uint64)
        self.sym_end = self.sym_addr + np.asarray(sy.size, np.uint64)
        self.sym_name = [base_name(n) or "" for n in sy.names]

    def offsets(self, addr: np.ndarray, size: np.ndarray) -> np.ndarray:
        """The file offset of each ``size`` bytes at ``addr`` (-1: not inside one code
        section)."""
        out = np.full(len(addr), -1, np.int64)
        for lo, hi, off in self.secs:
            inside = (addr >= np.uint64(lo)) & (addr + size.astype(np.uint64) <= np.uint64(hi))
            out[inside] = (addr[inside] - np.uint64(lo)).astype(np.int64) + off
        return out

    def read(self, addr: int, size: int) -> bytes:
        for lo, hi, off in self.secs:
            if lo <= addr and addr + size <= hi:
                o = off + addr - lo
                return bytes(self.data[o:o + size])
        return b""

    def callee(self, target: int) -> str:
        i = int(np.searchsorted(self.sym_addr, np.uint64(target), "right")) - 1
        if i >= 0 and (target < int(self.sym_end[i]) or int(self.sym_addr[i]) == target):
            return self.sym_name[i]
        return "?"


def fingerprint(binary: Any, functions: np.ndarray) -> Fingerprints:
    """Fingerprints of every block of the block-map ``functions`` of ``binary`` (a
    :class:`bbmap.binary.Binary`); the other blocks' are zero."""
    import capstone

    from bbmap.cfg import recover_cfg

    m = binary.block_map
    B = m.num_blocks
    u8 = [np.zeros(B, np.uint64) for _ in range(4)]
    fp = Fingerprints(*u8, np.zeros(B, bool), np.zeros(B, np.int32), np.zeros(B, np.uint64),
                      np.zeros(B, np.uint64), np.zeros(B, np.uint64))
    functions = np.asarray(sorted(set(int(f) for f in functions)), np.int64)
    if not len(functions):
        return fp
    mode = capstone.CS_MODE_64 if int(getattr(binary, "elfclass", 64)) == 64 else \
        capstone.CS_MODE_32
    cs = capstone.Cs(capstone.CS_ARCH_X86, mode)
    code = _Code(binary)
    start = block_starts(m)
    cfg = recover_cfg(binary, m, functions=functions)
    for f in functions.tolist():
        blocks = function_blocks(m, f)
        if not len(blocks):
            continue
        lo = int(start[blocks].min())
        hi = int((start[blocks] + m.block_size[blocks]).max())
        comp = has_compiler_hash(m, f)
        for b in blocks.tolist():
            a0, n = int(start[b]), int(m.block_size[b])
            ops, ins, calls, addrs = [], [], [], []
            for a, _s, mn, op in cs.disasm_lite(code.read(a0, n), a0):
                addrs.append(a)
                if mn.startswith("nop"):
                    continue
                if mn in ("call", "jmp") or mn.startswith(_BRANCHES):
                    t = _HEX.fullmatch(op)
                    if t is not None:
                        tgt = int(op, 16)
                        op = "L" if lo <= tgt < hi else code.callee(tgt)
                        if mn == "call" or op != "L":
                            calls.append(op)
                else:
                    op = _RIP.sub("rip+D", op)
                    op = _HEX.sub(lambda x: "I" if int(x.group(), 16) >= ADDRESS_LIKE
                                  else x.group(), op)
                ops.append(mn)
                ins.append(f"{mn} {op}")
            if ops and ops[-1] == "jmp" and ins[-1] == "jmp L":
                ops.pop()
                ins.pop()
            fp.insn_addr[b] = np.asarray(addrs, np.uint64)
            fp.n_insn[b] = len(addrs)
            fp.calls[b] = tuple(calls)
            if comp:
                h = int(m.block_hash[b])
                fp.c_opcode[b] = (h >> 16) & 0xFFFF
                fp.c_instr[b] = (h >> 32) & 0xFFFF
                fp.c_neighbor[b] = (h >> 48) & 0xFFFF
                fp.compiler[b] = True
            fp.opcode[b] = _h(" ".join(ops))
            fp.instr[b] = _h("; ".join(ins))
            fp.shape[b] = _h(_REG.sub("R", "; ".join(ins)))
            fp.text[b] = tuple(_REG.sub("R", x) for x in ins)
        for b in blocks.tolist():
            lo_, hi_ = int(cfg.succ_ptr[b]), int(cfg.succ_ptr[b + 1])
            s = cfg.succ_block[lo_:hi_].tolist()
            fp.succ[b] = s
            for t, k in zip(s, cfg.succ_kind[lo_:hi_].tolist()):
                fp.pred.setdefault(t, []).append(b)
                fp.edge_kind[(b, t)] = k
        for b in blocks.tolist():
            nb = [str(int(fp.opcode[b]))]
            nb += sorted(str(int(fp.opcode[t])) for t in fp.succ.get(b, []))
            nb.append("|")
            nb += sorted(str(int(fp.opcode[t])) for t in fp.pred.get(b, []))
            fp.neighbor[b] = _h(" ".join(nb))
    return fp
