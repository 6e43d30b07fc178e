"""BOLT's view of a binary: its functions (names, extents) and its basic blocks.

perf2bolt writes ``function offset`` pairs with *BOLT's* function table and splits a
straight-line run at *BOLT's* block boundaries, which are not the compiler's
(``.llvm_bb_addr_map``): BOLT starts a block at a branch target and after a terminator,
never at a call, and keeps ``jcc; jmp`` in one block.  To write the profile perf2bolt
would write, this module rebuilds that view from the binary (capstone, the symbol table,
``.eh_frame_hdr``, the PLT relocations).  Facts read from BOLT's sources
(``bolt/lib/Rewrite/RewriteInstance.cpp`` discoverFileObjects / PLT analysis,
``bolt/lib/Core/BinaryFunction.cpp`` buildCFG, ``bolt/lib/Profile/DataAggregator.cpp``);
each rule is named below.  Functions are looked up by their *maximum* size (up to the
next function or the end of the section), as ``getBinaryFunctionContainingAddress(...,
UseMaxSize=true)`` does; blocks are built lazily, only for the functions a profile
touches, so a 20,000-function binary costs what its hot functions cost.

Rules:

* a function per defined ``STT_FUNC``/``STT_GNU_IFUNC`` symbol of an executable section;
  a **local** symbol is named ``NAME/N`` (BOLT's ``NameResolver::uniquify``: N counts the
  local symbols of that name, from 1, in address order); untyped ``.cold`` labels are not
  functions;
* a function per ``.eh_frame`` FDE whose start no symbol names: ``__BOLT_FDE_FUNCat<hex>``;
* a function per PLT entry whose GOT slot a ``JUMP_SLOT``/``GLOB_DAT`` relocation names:
  ``SYMBOL@PLT`` (pseudo: traces through it have no fall-throughs); the rest of a PLT
  section (its header) is ``__BOLT_PSEUDO_<section>``;
* blocks: a leader at the function start, at every direct jump target inside the function,
  at every jump-table entry (decoded by :mod:`bbmap.cfg`) and after every terminator
  (``jmp``, ``jcc``, indirect ``jmp``, ``ret``, ``ud2``) -- except a direct ``jmp`` right
  after a ``jcc`` that is not a conditional tail call, which joins the ``jcc``'s block;
* a block falls through to the next one unless it ends in ``ret``, an indirect ``jmp``, a
  trap, or a direct ``jmp`` elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.arrays import sorted_unique
from bbmap.binary.disasm import CALL, CALL_INDIRECT, JCC, JMP, JMP_INDIRECT, RET, TRAP
from bbmap.binary.jumptables import JUMP_TABLE_MAX
from bbmap.formats.elf import (
    DW_EH_PE_ABSPTR,
    DW_EH_PE_APPLICATION_MASK,
    DW_EH_PE_DATAREL,
    DW_EH_PE_FORMAT_MASK,
    DW_EH_PE_OMIT,
    DW_EH_PE_PCREL,
    DW_EH_PE_SDATA4,
    DW_EH_PE_SDATA8,
    DW_EH_PE_UDATA4,
    DW_EH_PE_UDATA8,
    EH_FRAME_HDR_VERSION,
    RELOC_TYPES,
    SHN_LORESERVE,
    SHN_UNDEF,
    STB_LOCAL,
    STT_FUNC,
    STT_GNU_IFUNC,
    STT_NOTYPE,
)

FDE_PREFIX = "__BOLT_FDE_FUNCat"  # RewriteInstance: a function from an FDE alone
PSEUDO_PREFIX = "__BOLT_PSEUDO_"  # a PLT section's code no entry symbol names
PLT_SUFFIX = "@PLT"
LOCAL_SEPARATOR = "/"  # NameResolver::uniquify: NAME/N for local symbols
PLT_ENTRY_SIZE = {".plt": 16, ".plt.sec": 16, ".plt.got": 8}  # x86-64 entry sizes
PLT_HEADER_SIZE = {".plt": 16}  # PLT0 (push GOT+8; jmp *GOT+16)
TERMINATORS = (JMP, JCC, JMP_INDIRECT, RET, TRAP)
NO_FALLTHROUGH = (RET, JMP_INDIRECT, TRAP)

# function kinds
K_SYMBOL, K_FDE, K_PLT, K_PSEUDO = 0, 1, 2, 3

FRAGMENT = re.compile(r"^(.*)\.(?:cold|warm)(?:\.\d+)?$")  # a split-off part's name
_GOT_JMP = re.compile(r"\[rip ([+-]) (0x[0-9a-f]+|\d+)\]")


@dataclass
class BoltBlocks:
    """BOLT's blocks of some functions (global block arrays, in address order)."""

    func: np.ndarray  # i8 function index of each block
    start: np.ndarray  # u8 block address
    last: np.ndarray  # u8 address of the block's last instruction
    last_kind: np.ndarray  # u1 kind of that instruction (bbmap.binary.disasm)
    falls: np.ndarray  # bool: has a fall-through successor (the next block)
    func_first: dict[int, int] = field(default_factory=dict)  # function -> first block
    func_count: dict[int, int] = field(default_factory=dict)
    ret_addr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))  # sorted
    decoded: set[int] = field(default_factory=set)  # functions disassembled
    no_cfg: set[int] = field(default_factory=set)  # ... of which BOLT builds no CFG

    def has_cfg(self, f: np.ndarray) -> np.ndarray:
        ok = np.array(sorted(self.decoded - self.no_cfg), dtype=np.int64)
        return np.isin(f, ok)


class BoltView:
    """BOLT's function table of one binary, and (lazily) the blocks of its functions."""

    def __init__(self, binary: Any) -> None:
        self.binary = binary
        self._last_read: Any = None  # the section the last _read found its bytes in
        self.code_sections = [s for s in binary.sections
                              if s.is_code and s.sh_size]
        starts, sizes, names, kinds = [], [], [], []
        self._raw: dict[int, str] = {}  # symbol functions: address -> symbol name
        self._symbols(starts, sizes, names, kinds)
        self._fdes(starts, sizes, names, kinds)
        self._plt(starts, sizes, names, kinds)
        a = np.array(starts, dtype=np.uint64)
        order = np.lexsort((np.array(kinds, np.int64), a)) if len(a) else np.zeros(0, np.int64)
        a = a[order]
        first = np.ones(len(a), bool)
        first[1:] = a[1:] != a[:-1]  # one function per address: symbol > FDE > PLT
        order = order[first]
        self.start = a[first]
        self.names = [names[i] for i in order.tolist()]
        self.kind = np.array(kinds, np.int64)[order] if len(order) else np.zeros(0, np.int64)
        size = np.array(sizes, np.uint64)[order] if len(order) else np.zeros(0, np.uint64)
        # maximum size: up to the next function or the end of the section
        sec_end = np.zeros(len(self.start), np.uint64)
        for s in self.code_sections:
            inside = (self.start >= s.sh_addr) & (self.start < s.sh_addr + s.sh_size)
            sec_end[inside] = s.sh_addr + s.sh_size
        nxt = np.empty(len(self.start), np.uint64)
        nxt[:-1] = self.start[1:]
        if len(nxt):
            nxt[-1] = sec_end[-1]
        self.end = np.minimum(nxt, sec_end)
        self.size = np.where((size > 0) & (self.start + size <= self.end), size,
                             self.end - self.start).astype(np.uint64)
        self.no_cfg = self._split_without_relocations()
        self._blocks: BoltBlocks | None = None
        self._jump_targets: dict[int, list[int]] | None = None
        self._tables_of: set[int] = set()  # functions whose jump tables were looked for

    # ------------------------------------------------------------------ table
    def _symbols(self, starts: list, sizes: list, names: list, kinds: list) -> None:
        tables = [t for t in self.binary.symbol_tables if t.section_name == ".symtab"] or \
            list(self.binary.symbol_tables[:1])
        if not tables:
            return
        t = tables[0]
        exec_idx = np.array([s.index for s in self.code_sections], np.int64)
        st = t.stype
        defined = (t.shndx != SHN_UNDEF) & (t.shndx < SHN_LORESERVE) & \
            np.isin(t.shndx.astype(np.int64), exec_idx)
        func = defined & ((st == STT_FUNC) | (st == STT_GNU_IFUNC))
        label = defined & (st == STT_NOTYPE) & (t.size > 0)
        fi = np.flatnonzero(func)
        li = np.flatnonzero(label)
        if len(li) and len(fi):
            # an untyped sized symbol is a function of its own unless it lies inside a
            # function symbol (one of size 0 reaching to the next function symbol)
            fv = np.sort(t.value[fi].astype(np.uint64))
            fo = np.argsort(t.value[fi], kind="stable")
            fsz = t.size[fi][fo].astype(np.uint64)
            nxt = np.append(fv[1:], np.uint64(1 << 63))
            sec_end = np.array([self._section_end(int(v)) for v in fv.tolist()], np.uint64)
            fend = np.where(fsz > 0, fv + fsz, np.minimum(nxt, sec_end))
            lv = t.value[li].astype(np.uint64)
            k = np.searchsorted(fv, lv, side="right") - 1
            inside = (k >= 0) & (lv < fend[np.maximum(k, 0)])
            li = li[~inside]
        idx = np.concatenate([fi, li])
        if not len(idx):
            return
        val = t.value[idx].astype(np.uint64)
        local = t.bind[idx] == STB_LOCAL
        # at one address, globals name the function before locals (then table order)
        order = np.lexsort((idx, local, val))
        idx, val, local = idx[order], val[order], local[order]
        nm = t.names_at(idx)
        seen: dict[str, int] = {}
        for v, n, loc in zip(val.tolist(), nm, local.tolist()):
            self._raw[v] = n
            if loc:
                seen[n] = seen.get(n, 0) + 1
                n = f"{n}{LOCAL_SEPARATOR}{seen[n]}"
            names.append(n)
        starts += val.tolist()
        sizes += t.size[idx].astype(np.int64).tolist()
        kinds += [K_SYMBOL] * len(idx)

    def _split_without_relocations(self) -> set[int]:
        """Functions BOLT builds no CFG for: without ``--emit-relocs`` (no relocation
        section for code) a function split on input (``NAME.cold``, ``NAME.warm``
        fragments) cannot be rewritten, and BOLT leaves it and its fragments alone, so
        their traces are "mismatching" and give no fall-through lines."""
        code = {s.index for s in self.code_sections}
        if any(s.sh_type in RELOC_TYPES and s.sh_info in code for s in self.binary.sections):
            return set()
        by_name = {n: a for a, n in self._raw.items()}
        out: set[int] = set()
        for a, n in self._raw.items():
            m = FRAGMENT.match(n)
            if m and m.group(1) in by_name:
                for x in (a, by_name[m.group(1)]):
                    i = int(np.searchsorted(self.start, np.uint64(x)))
                    if i < len(self.start) and int(self.start[i]) == x:
                        out.add(i)
        return out

    def _section_end(self, a: int) -> int:
        for s in self.code_sections:
            if s.sh_addr <= a < s.sh_addr + s.sh_size:
                return s.sh_addr + s.sh_size
        return a

    def _fdes(self, starts: list, sizes: list, names: list, kinds: list) -> None:
        have = set(starts)
        for a in fde_starts(self.binary).tolist():
            if a not in have and self._in_code(a) and not self._in_plt(a):
                have.add(a)
                starts.append(a)
                sizes.append(0)
                names.append(f"{FDE_PREFIX}{a:x}")
                kinds.append(K_FDE)

    def _plt(self, starts: list, sizes: list, names: list, kinds: list) -> None:
        slots = got_slot_names(self.binary)

        dis = None
        for s in self.code_sections:
            esize = PLT_ENTRY_SIZE.get(s.name)
            if esize is None:
                continue
            if dis is None:
                import capstone

                dis = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64
                                  if self.binary.disassembler().bits == 64
                                  else capstone.CS_MODE_32)
            code = self._read(s.sh_addr, s.sh_size)
            named = False
            for a in range(s.sh_addr + PLT_HEADER_SIZE.get(s.name, 0), s.sh_addr + s.sh_size,
                           esize):
                name = None
                off = a - s.sh_addr
                for ia, isz, mn, op in dis.disasm_lite(code[off:off + esize], a):
                    if mn.split()[-1] == "jmp" and (m := _GOT_JMP.search(op)):
                        disp = int(m.group(2), 0) * (1 if m.group(1) == "+" else -1)
                        name = slots.get(ia + isz + disp)
                        break
                if name is not None:
                    starts.append(a)
                    sizes.append(esize)
                    names.append(name + PLT_SUFFIX)
                    kinds.append(K_PLT)
                    named = named or a == s.sh_addr
            if not named:
                starts.append(s.sh_addr)
                sizes.append(0)
                names.append(PSEUDO_PREFIX + s.name)
                kinds.append(K_PSEUDO)

    def _in_plt(self, a: int) -> bool:
        return any(s.sh_addr <= a < s.sh_addr + s.sh_size for s in self.code_sections
                   if s.name in PLT_ENTRY_SIZE)

    def _in_code(self, a: int) -> bool:
        return any(s.sh_addr <= a < s.sh_addr + s.sh_size for s in self.code_sections)

    def _read(self, addr: int, n: int) -> bytes:
        s = self._last_read  # functions come in address order: mostly the same section
        if s is not None and s.sh_addr <= addr and addr + n <= s.sh_addr + s.sh_size:
            return self.binary.read(s.sh_offset + addr - s.sh_addr, n)
        for s in self.binary.sections:
            if s.has_contents and s.sh_addr and s.sh_addr <= addr and \
                    addr + n <= s.sh_addr + s.sh_size:
                self._last_read = s
                return self.binary.read(s.sh_offset + addr - s.sh_addr, n)
        return b""

    # ----------------------------------------------------------------- lookup
    def locate(self, addr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(function index or -1, offset in it) of each address (by maximum size)."""
        addr = np.asarray(addr, dtype=np.uint64)
        i = np.searchsorted(self.start, addr, side="right").astype(np.int64) - 1
        ok = i >= 0
        ok[ok] = addr[ok] < self.end[i[ok]]
        f = np.where(ok, i, -1)
        off = np.where(ok, addr - self.start[np.maximum(f, 0)], 0).astype(np.uint64) \
            if len(self.start) else np.zeros(len(addr), np.uint64)
        return f, off

    def is_pseudo(self, f: np.ndarray) -> np.ndarray:
        k = self.kind[np.maximum(f, 0)]
        return (f >= 0) & ((k == K_PLT) | (k == K_PSEUDO))

    # ----------------------------------------------------------------- blocks
    def blocks(self, funcs: np.ndarray) -> BoltBlocks:
        """BOLT's blocks of ``funcs`` (added to those built before)."""

        have = self._blocks.decoded if self._blocks is not None else set()
        want = [f for f in sorted_unique(funcs[funcs >= 0]).tolist()
                if f not in have and self.kind[f] in (K_SYMBOL, K_FDE)]
        if not want:
            return self._blocks if self._blocks is not None else _empty_blocks()
        dis = self.binary.disassembler()
        decoded = [dis.decode(self._read(s, n), s) for s, n in
                   zip(self.start[want].tolist(), self.size[want].tolist())]
        # one set of columns; an instruction running past its function's end is dropped
        fs = np.repeat(np.array(want, np.int64), [len(d.addr) for d in decoded])
        addr = np.concatenate([d.addr for d in decoded])
        keep = addr + np.concatenate([d.size for d in decoded]).astype(np.uint64) <= \
            self.start[fs] + self.size[fs]
        new = self._build(fs[keep], addr[keep],
                          np.concatenate([d.kinds for d in decoded])[keep],
                          np.concatenate([d.target for d in decoded])[keep], set(want))
        new.no_cfg = self.no_cfg & new.decoded
        self._blocks = new if self._blocks is None else _concat_blocks(self._blocks, new)
        return self._blocks

    def _build(self, fs: np.ndarray, addr: np.ndarray, kind: np.ndarray, target: np.ndarray,
               decoded: set[int]) -> BoltBlocks:
        """BOLT's blocks of the decoded instructions (function ``fs`` of each, in address
        order per function, functions ascending); ``decoded``: the functions decoded."""
        kind = kind.astype(np.int64)
        n = len(addr)
        if not n:
            return _empty_blocks(decoded=decoded)
        fstart, fend = self.start[fs], self.start[fs] + self.size[fs]
        first = np.ones(n, bool)
        first[1:] = fs[1:] != fs[:-1]
        leader = first.copy()
        # direct jump targets inside the function
        br = np.flatnonzero(((kind == JMP) | (kind == JCC)) & (target >= 0))
        tg = target[br].astype(np.uint64)
        inside = (tg >= fstart[br]) & (tg < fend[br])
        labels = np.zeros(n, bool)
        key = (fs.astype(np.uint64) << np.uint64(40)) | (addr - fstart)
        tkey = (fs[br][inside].astype(np.uint64) << np.uint64(40)) | \
            (tg[inside] - fstart[br][inside])
        pos = np.searchsorted(key, tkey)
        hit = pos < n
        hit[hit] = key[pos[hit]] == tkey[hit]
        labels[pos[hit]] = True
        # jump-table entries
        jt_jump, jt = self._table_targets(fs, kind, addr)
        if len(jt):
            jpos = np.searchsorted(key, jt)
            ok = jpos < n
            ok[ok] = key[jpos[ok]] == jt[ok]
            labels[jpos[ok]] = True
        leader |= labels
        # after a terminator; a direct jmp after a jcc (not a tail call) joins its block
        after = np.zeros(n, bool)
        term = np.isin(kind, TERMINATORS)
        after[1:] = term[:-1] & ~first[1:]
        prev_ctc = np.zeros(n, bool)
        jcc_out = (kind == JCC) & ~((target.astype(np.uint64) >= fstart) &
                                    (target.astype(np.uint64) < fend))
        prev_ctc[1:] = jcc_out[:-1]
        join = np.zeros(n, bool)
        # (a jmp out of the function is a tail call, not an unconditional branch)
        tgt = target.astype(np.uint64)
        jmp_in = (kind == JMP) & (target >= 0) & (tgt >= fstart) & (tgt < fend)
        join[1:] = jmp_in[1:] & np.isin(kind[:-1], (JCC, TRAP)) & ~prev_ctc[1:]
        leader |= after & ~join
        leader |= labels
        bidx = np.flatnonzero(leader)
        last = np.empty(len(bidx), np.int64)
        last[:-1] = bidx[1:] - 1
        last[-1] = n - 1
        bfunc = fs[bidx]
        lk = kind[last]
        nxt_same = np.zeros(len(bidx), bool)
        nxt_same[:-1] = bfunc[1:] == bfunc[:-1]
        nxt_start = np.zeros(len(bidx), np.uint64)
        nxt_start[:-1] = addr[bidx[1:]]
        falls = nxt_same & ~np.isin(lk, NO_FALLTHROUGH)
        j = lk == JMP
        falls[j] &= target[last[j]].astype(np.uint64) == nxt_start[j]
        # BOLT asks for *a* successor edge to the next block: a jump table reaching it
        # counts (getFallthroughsInTrace: BB->getSuccessor(NextBB))
        ij = np.flatnonzero((lk == JMP_INDIRECT) & nxt_same)
        if len(ij):
            pair = set(zip(jt_jump.tolist(), jt.tolist()))
            for k in ij.tolist():
                f = int(bfunc[k])
                nk = (f << 40) | (int(nxt_start[k]) - int(self.start[f]))
                falls[k] = (int(addr[last[k]]), nk) in pair
        ff, fc = _firsts(bfunc)
        cnt = np.diff(np.append(fc, len(bfunc)))
        return BoltBlocks(func=bfunc, start=addr[bidx], last=addr[last], last_kind=lk,
                          falls=falls, func_first=dict(zip(ff.tolist(), fc.tolist())),
                          func_count=dict(zip(ff.tolist(), cnt.tolist())),
                          ret_addr=np.sort(addr[kind == RET]), decoded=decoded)

    def _table_targets(self, fs: np.ndarray, kind: np.ndarray, addr: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(jump address, key function << 40 | offset of an entry) of every jump-table
        entry of the indirect jumps among the instructions, sorted by key."""
        ij = np.flatnonzero(kind == JMP_INDIRECT)
        if not len(ij):
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        if self._jump_targets is None:
            self._jump_targets = {}
        todo = [f for f in sorted_unique(fs[ij]).tolist() if f not in self._tables_of]
        if todo:  # the jump tables of these functions only (recover_cfg's subset: the
            self._tables_of.update(todo)  # rest of a big binary is not disassembled)
            try:
                from bbmap.cfg import recover_cfg

                m = self.binary.block_map
                rfunc = np.repeat(np.arange(m.num_functions, dtype=np.int64),
                                  np.diff(m.func_range_ptr))
                base = m.range_base.astype(np.uint64)
                lo = self.start[todo]
                k = np.searchsorted(lo, base, side="right").astype(np.int64) - 1
                inside = (k >= 0) & (base < (lo + self.size[todo])[np.maximum(k, 0)])
                funcs = sorted_unique(rfunc[inside])  # block-map functions with a range
                if len(funcs):  # in one of them (a split function's parts alike)
                    cfg = recover_cfg(self.binary, functions=funcs)
                    bs = cfg.block_start
                    for t in cfg.jump_tables:
                        self._jump_targets[t.jump] = [int(bs[b]) for b in t.targets]
            except Exception:  # noqa: BLE001, S110 - no block map / no tables: no table
                pass  # targets (absolute tables are still read below)
        out = []
        for i in ij.tolist():
            f = int(fs[i])
            got = self._jump_targets.get(int(addr[i]))
            if got is None:
                got = self._absolute_table(int(addr[i]), f)
            for a in got:
                if self.start[f] <= a < self.start[f] + self.size[f]:
                    out.append(((f << 40) | (a - int(self.start[f])), int(addr[i])))
        out.sort()
        return (np.array([o[1] for o in out], dtype=np.uint64),
                np.array([o[0] for o in out], dtype=np.uint64))

    def _absolute_table(self, jump: int, f: int) -> list[int]:
        """Entries of an absolute table (``jmp [index*8 + TABLE]``) with no ``cmp/ja``
        bound: read while they point into the function, as BOLT's jump-table analysis
        does when it has no bound."""
        import capstone
        from capstone import x86_const as X

        cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        cs.detail = True
        ins = next(iter(cs.disasm(self._read(jump, 15), jump, 1)), None)
        if ins is None or len(ins.operands) != 1 or ins.operands[0].type != X.X86_OP_MEM:
            return []
        mem = ins.operands[0].mem
        if mem.base != 0 or mem.index == 0 or mem.scale != 8 or mem.disp <= 0:
            return []
        lo, hi = int(self.start[f]), int(self.start[f] + self.size[f])
        out = []
        pos = int(mem.disp)
        while len(out) < JUMP_TABLE_MAX:
            raw = self._read(pos, 8)
            if len(raw) < 8:
                break
            a = int.from_bytes(raw, "little")
            if not lo <= a < hi:
                break
            out.append(a)
            pos += 8
        return out

    def is_return(self, addr: np.ndarray) -> np.ndarray:
        """Whether the instruction at each address is a ``ret`` (BOLT's checkReturn)."""
        f, _ = self.locate(addr)
        b = self.blocks(f)
        r = b.ret_addr
        if not len(r):
            return np.zeros(len(addr), bool)
        pos = np.minimum(np.searchsorted(r, addr), len(r) - 1)
        return r[pos] == addr


def _firsts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and the index of each one's first row."""
    new = np.ones(len(v), bool)
    new[1:] = v[1:] != v[:-1]
    idx = np.flatnonzero(new)
    return v[idx], idx


def _empty_blocks(decoded: set[int] | None = None) -> BoltBlocks:
    z8, zi = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return BoltBlocks(func=zi, start=z8, last=z8, last_kind=zi, falls=np.zeros(0, bool),
                      decoded=set(decoded or ()))


def _concat_blocks(a: BoltBlocks, b: BoltBlocks) -> BoltBlocks:
    func = np.concatenate([a.func, b.func])
    start = np.concatenate([a.start, b.start])
    order = np.lexsort((start, func))
    func, start = func[order], start[order]
    ff, fc = _firsts(func)
    cnt = np.diff(np.append(fc, len(func)))
    return BoltBlocks(func=func, start=start,
                      last=np.concatenate([a.last, b.last])[order],
                      last_kind=np.concatenate([a.last_kind, b.last_kind])[order],
                      falls=np.concatenate([a.falls, b.falls])[order],
                      func_first=dict(zip(ff.tolist(), fc.tolist())),
                      func_count=dict(zip(ff.tolist(), cnt.tolist())),
                      ret_addr=np.sort(np.concatenate([a.ret_addr, b.ret_addr])),
                      decoded=a.decoded | b.decoded, no_cfg=a.no_cfg | b.no_cfg)


IS_CALL = (CALL, CALL_INDIRECT)


# ------------------------------------------------------------------ ELF helpers
def fde_starts(binary: Any) -> np.ndarray:
    """Initial locations of every FDE, from ``.eh_frame_hdr``'s sorted search table
    (pyelftools' full ``.eh_frame`` parse when the table is absent or unusual)."""
    sec = next((s for s in binary.sections if s.name == ".eh_frame_hdr"), None)
    if sec is not None:
        try:
            got = _hdr_table(binary.section_data(sec.index), sec.sh_addr,
                             bool(getattr(binary, "little_endian", True)))
        except (ValueError, IndexError):
            got = None
        if got is not None:
            return got
    try:
        dw = binary.elf.get_dwarf_info(relocate_dwarf_sections=False)
        if not dw.has_EH_CFI():
            return np.zeros(0, np.uint64)
        from elftools.dwarf.callframe import FDE

        return np.array(sorted({e.header["initial_location"] for e in dw.EH_CFI_entries()
                                if isinstance(e, FDE)}), dtype=np.uint64)
    except Exception:  # noqa: BLE001 - a damaged .eh_frame: no FDE-only functions
        return np.zeros(0, np.uint64)


_EH_SIZE = {DW_EH_PE_UDATA4: ("u4", 4), DW_EH_PE_SDATA4: ("i4", 4),
            DW_EH_PE_UDATA8: ("u8", 8), DW_EH_PE_SDATA8: ("i8", 8)}


def _hdr_table(data: bytes, base: int, little: bool) -> np.ndarray | None:
    if len(data) < 4 or data[0] != EH_FRAME_HDR_VERSION:
        return None
    ptr_enc, cnt_enc, tab_enc = data[1], data[2], data[3]
    if DW_EH_PE_OMIT in (ptr_enc, cnt_enc, tab_enc):
        return None
    end = "<" if little else ">"
    pos = 4
    sizes = []
    for enc in (ptr_enc, cnt_enc):
        fmt = _EH_SIZE.get(enc & DW_EH_PE_FORMAT_MASK)
        if fmt is None or (enc & DW_EH_PE_APPLICATION_MASK) not in (DW_EH_PE_ABSPTR,
                                                                     DW_EH_PE_PCREL):
            return None
        sizes.append(fmt)
    pos += sizes[0][1]
    count = int(np.frombuffer(data, end + sizes[1][0], 1, pos)[0])
    pos += sizes[1][1]
    fmt = _EH_SIZE.get(tab_enc & DW_EH_PE_FORMAT_MASK)
    if fmt is None or (tab_enc & DW_EH_PE_APPLICATION_MASK) != DW_EH_PE_DATAREL:
        return None
    if count < 0 or pos + 2 * count * fmt[1] > len(data):
        return None
    pairs = np.frombuffer(data, end + fmt[0], 2 * count, pos).astype(np.int64)
    return sorted_unique((pairs[0::2] + base).astype(np.uint64))


def got_slot_names(binary: Any) -> dict[int, str]:
    """GOT slot address -> symbol name of the dynamic relocations filling it
    (``JUMP_SLOT`` of ``.rela.plt``, ``GLOB_DAT`` of ``.rela.dyn``): whole tables read as
    numpy records (a PIE's thousands of RELATIVE entries name no symbol)."""
    from bbmap.binary.symbols import read_symtab
    from bbmap.formats.elf import R_INFO_SYM_SHIFT, SHT_REL, SHT_RELA, elf_dtype

    bits = 64 if getattr(binary, "elfclass", 64) == 64 else 32
    little = bool(getattr(binary, "little_endian", True))
    secs = binary.sections
    got = [s for s in secs if s.name in (".got", ".got.plt")]
    out: dict[int, str] = {}
    for sec in secs:
        if sec.sh_type not in (SHT_RELA, SHT_REL) or not sec.sh_link or \
                sec.sh_link >= len(secs):
            continue
        try:
            dt = elf_dtype("Elf_Rela" if sec.sh_type == SHT_RELA else "Elf_Rel", bits, little)
            raw = binary.section_data(sec.index)
            rel = np.frombuffer(raw, dt, len(raw) // dt.itemsize)
            sym = (rel["r_info"] >> R_INFO_SYM_SHIFT[bits]).astype(np.int64)
            off = rel["r_offset"].astype(np.uint64)
            keep = sym > 0
            if got:
                keep &= np.any([(off >= g.sh_addr) & (off < g.sh_addr + g.sh_size)
                                for g in got], axis=0)
            if not keep.any():
                continue
            link = secs[sec.sh_link]
            table = read_symtab(binary.section_data(link.index),
                                binary.section_data(link.sh_link), is64=bits == 64,
                                little=little, section_name=link.name)
            si = sym[keep]
            ok = si < len(table)
            names = table.names_at(si[ok])
            for o, n in zip(off[keep][ok].tolist(), names):
                if n:
                    out.setdefault(int(o), n.split("@")[0])
        except Exception:  # noqa: BLE001 - unreadable relocations: PLT entries stay unnamed
            continue
    return out
