"""What every check needs from one binary, computed once: block addresses, the section
of each range, symbol lookups by (section, address), section bytes and disassembly, and
the facts derived from them that several checks share (each block's last instruction,
each function's extents), cached on the context.

Addresses are ELF vaddrs, or section-relative offsets in ET_REL objects; every
lookup is therefore keyed by (section index, address) so that the many functions
at offset 0 of ``.text.*`` sections in a ``-ffunction-sections`` object stay apart.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from bbmap.arrays import row_of
from bbmap.binary.disasm import CodeTable, Disassembler, sweep_ranges
from bbmap.binary.types import SectionInfo, parent_name
from bbmap.errors import BBMapError, decoding
from bbmap.formats.elf import RELOC_TYPES
from bbmap.model import BlockMap

ADDRESS_LIMIT = 1 << 63  # addresses are computed as int64 by the checks


@dataclass(frozen=True)
class Finding:
    """One violated rule, located as precisely as the check knows."""

    check: str
    message: str
    function: str | None = None
    function_address: int | None = None
    range_index: int | None = None
    block_id: int | None = None
    address: int | None = None
    section: str | None = None

    def where(self) -> str:
        parts = []
        if self.function is not None or self.function_address is not None:
            name = self.function or "<unnamed>"
            at = f" @ {self.function_address:#x}" if self.function_address is not None else ""
            parts.append(f"function {name}{at}")
        if self.range_index is not None:
            parts.append(f"range {self.range_index}")
        if self.block_id is not None:
            parts.append(f"block {self.block_id}")
        if self.section:
            parts.append(f"section {self.section}")
        return ", ".join(parts)

    def __str__(self) -> str:
        where = self.where()
        return f"[{self.check}] {where}: {self.message}" if where else \
            f"[{self.check}] {self.message}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"check": self.check, "message": self.message}
        for k in ("function", "function_address", "range_index", "block_id", "address",
                  "section"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        return d


@dataclass
class VerifyContext:
    """A loaded binary plus derived columns the checks share."""

    binary: Any  # bbmap.binary.Binary (duck-typed: path, sections, symbols, block_map, ...)
    notes: list[str] = field(default_factory=list)  # what a check could not judge, and why
    cache: dict[str, Any] = field(default_factory=dict)  # results checks share (coverage, ...)

    # ------------------------------------------------------------ basics
    @property
    def path(self) -> str:
        return str(self.binary.path)

    @property
    def m(self) -> BlockMap:
        return self.binary.block_map

    @cached_property
    def sections(self) -> list[SectionInfo]:
        return list(self.binary.sections)

    @cached_property
    def relocatable(self) -> bool:
        return bool(getattr(self.binary, "is_relocatable", False)) or \
            getattr(self.binary, "e_type", "") == "ET_REL"

    @cached_property
    def exec_sections(self) -> list[SectionInfo]:
        """Executable sections with contents; one whose extent cannot be real (past the
        end of the file, or of the signed 64-bit address range the checks compute in) is
        left out with a note naming it, not allowed to overflow a check."""
        size = self.file_size
        out = []
        for s in self.sections:
            if not s.is_code:
                continue
            if s.sh_offset + s.sh_size > size or s.sh_addr + s.sh_size >= ADDRESS_LIMIT:
                self.notes.append(
                    f"section [{s.index}] {s.name}: size {s.sh_size:#x} at address "
                    f"{s.sh_addr:#x}, file offset {s.sh_offset:#x} cannot be real (the file "
                    f"has {size:#x} bytes); not checked")
                continue
            out.append(s)
        return out

    @cached_property
    def file_size(self) -> int:
        import os

        try:
            return os.path.getsize(self.path)
        except OSError:  # a duck-typed binary without a file: no bound from it
            return ADDRESS_LIMIT

    def section_label(self, index: int) -> str | None:
        if 0 <= index < len(self.sections):
            s = self.sections[index]
            return f"[{s.index}] {s.name}"
        return None

    # ------------------------------------------------------------ per function / block
    def func_name(self, f: int) -> str | None:
        names = self.m.func_name
        name = names[f] if f < len(names) else None
        if name:
            return name
        r0 = int(self.m.func_range_ptr[f])
        sec = int(self.range_section[r0]) if r0 < self.m.num_ranges else -1
        sym = self.symbol_at(sec, int(self.m.func_address[f]))
        return self.binary.symbols.names[sym] if sym >= 0 else None

    @cached_property
    def block_range(self) -> np.ndarray:
        m = self.m
        return row_of(m.range_block_ptr)

    @cached_property
    def range_func(self) -> np.ndarray:
        m = self.m
        return row_of(m.func_range_ptr)

    @cached_property
    def block_func(self) -> np.ndarray:
        return self.range_func[self.block_range]

    @cached_property
    def block_start(self) -> np.ndarray:
        return self.m.block_starts()

    @cached_property
    def block_end(self) -> np.ndarray:
        return (self.block_start + self.m.block_size).astype(np.uint64)

    @cached_property
    def range_index_in_func(self) -> np.ndarray:
        m = self.m
        return np.arange(m.num_ranges, dtype=np.int64) - m.func_range_ptr[self.range_func]

    @cached_property
    def range_section(self) -> np.ndarray:
        """Section of each range: the map's own, else the exec section holding its base."""
        m = self.m
        sec = np.array(m.range_section, dtype=np.int64, copy=True)
        if self.relocatable:
            return sec
        unknown = np.nonzero(sec < 0)[0]
        if len(unknown):
            bases = m.range_base[unknown]
            for s in self.exec_sections:
                inside = (bases >= s.sh_addr) & (bases < s.sh_addr + s.sh_size)
                sec[unknown[inside & (sec[unknown] < 0)]] = s.index
        return sec

    def finding(self, check: str, message: str, *, func: int | None = None,
                rng: int | None = None, block: int | None = None,
                address: int | None = None, section: int | None = None) -> Finding:
        """A finding named by global function / range / block indexes."""
        m = self.m
        if block is not None:
            rng = int(self.block_range[block]) if rng is None else rng
        if rng is not None and func is None:
            func = int(self.range_func[rng])
        if section is None and rng is not None and self.relocatable:
            section = int(self.range_section[rng])  # in a .o the section tells functions apart
        return Finding(
            check=check, message=message,
            function=self.func_name(func) if func is not None else None,
            function_address=int(m.func_address[func]) if func is not None else None,
            range_index=int(self.range_index_in_func[rng]) if rng is not None else None,
            block_id=int(m.block_id[block]) if block is not None else None,
            address=address, section=self.section_label(section) if section is not None
            and section >= 0 else None)

    def block_text(self, b: int) -> str:
        return f"[{int(self.block_start[b]):#x}, {int(self.block_end[b]):#x})"

    # ------------------------------------------------------------ symbols
    @cached_property
    def _symbol_index(self) -> dict[tuple[int, int], list[int]]:
        syms = self.binary.symbols
        out: dict[tuple[int, int], list[int]] = {}
        secs = syms.section.tolist()
        for i, a in enumerate(syms.address.tolist()):
            key = (secs[i] if self.relocatable else -1, a)
            out.setdefault(key, []).append(i)
        return out

    def symbols_at(self, section: int, address: int) -> list[int]:
        return self._symbol_index.get((section if self.relocatable else -1, address), [])

    def symbol_at(self, section: int, address: int, *, func_only: bool = False,
                  name: str | None = None) -> int:
        """Best symbol starting at (section, address): STT_FUNC first, then by name."""
        cands = self.symbols_at(section, address)
        syms = self.binary.symbols
        best = -1
        for i in cands:
            if func_only and not bool(syms.is_func[i]):
                continue
            if name is not None and parent_name(syms.names[i]) != name:
                continue
            if best < 0 or (bool(syms.is_func[i]) and not bool(syms.is_func[best])):
                best = i
        return best

    @cached_property
    def parts_by_parent(self) -> dict[tuple[int, str], list[int]]:
        """``.cold`` / ``.__part.N`` / ``.eh`` symbols grouped by the function they belong to.

        Keyed by (section of the parent's entry or -1, parent name); for ET_REL the
        parts live in other sections, so the key uses -1 and names must be unique.
        """
        syms = self.binary.symbols
        out: dict[tuple[int, str], list[int]] = {}
        for i, n in enumerate(syms.names):
            p = parent_name(n)
            if p != n:
                out.setdefault((-1, p), []).append(i)
        return out

    # ------------------------------------------------------------ bytes and code
    @cached_property
    def _file(self) -> mmap.mmap | bytes:
        with open(self.path, "rb") as fh:
            try:
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # empty file
                return b""

    def section_bytes(self, s: SectionInfo) -> memoryview:
        data = self._file
        return memoryview(data)[s.sh_offset: s.sh_offset + s.sh_size]

    def section_of(self, index: int) -> SectionInfo | None:
        if 0 <= index < len(self.sections):
            return self.sections[index]
        return None

    @cached_property
    def disassembler(self) -> Disassembler:
        return Disassembler(self.binary.machine, int(getattr(self.binary, "elfclass", 64)))

    @cached_property
    def range_end(self) -> np.ndarray:
        """Per range: the largest block end, never before the base (u8)."""
        m = self.m
        base = m.range_base.astype(np.uint64)
        out = base.copy()
        counts = np.diff(m.range_block_ptr)
        nz = np.nonzero(counts > 0)[0]
        if len(nz):
            ends = np.maximum.reduceat(self.block_end, m.range_block_ptr[nz].astype(np.int64))
            out[nz] = np.maximum(ends, base[nz])
        return out

    @cached_property
    def range_start(self) -> np.ndarray:
        """Per range: the smallest block start (the base when it has no blocks) (u8)."""
        m = self.m
        out = m.range_base.astype(np.uint64).copy()
        nz = np.nonzero(np.diff(m.range_block_ptr) > 0)[0]
        if len(nz):
            out[nz] = np.minimum.reduceat(self.block_start,
                                          m.range_block_ptr[nz].astype(np.int64))
        return out

    def range_extent(self, r: int) -> tuple[int, int]:
        """[base, end) of a range: to its last block's end (never before the base)."""
        return int(self.m.range_base[r]), int(self.range_end[r])

    @cached_property
    def code(self) -> CodeTable:
        """Instructions of every range (see :class:`~bbmap.binary.disasm.CodeTable`).

        A range whose bytes are not in the file (unknown section, NOBITS, outside its
        section) is marked not decoded; the instruction checks skip its blocks.
        """
        return sweep_ranges(self.disassembler, self._file, self.sections, self.m,
                            self.range_section, self.block_start, self.range_end)


def range_symbol(ctx: VerifyContext, r: int) -> int:
    f = int(ctx.range_func[r])
    name = ctx.func_name(f)
    sec = int(ctx.range_section[r])
    base = int(ctx.m.range_base[r])
    i = ctx.symbol_at(sec, base, name=parent_name(name)) if name else -1
    return i if i >= 0 else ctx.symbol_at(sec, base)


@dataclass
class LastInstructions:
    """Per block: kind and direct target of its last instruction (kind -1: none)."""

    kind: np.ndarray
    target: np.ndarray  # -1 when indirect / none
    row: np.ndarray  # row in the code table, -1 when none
    relocated: np.ndarray  # the instruction carries a relocation (ET_REL): target unknown
    code: CodeTable

    def text(self, b: int) -> str | None:
        j = int(self.row[b])
        return self.code.text(j) if j >= 0 else None


def last_instructions(ctx: VerifyContext) -> LastInstructions:
    cached = ctx.cache.get("last")
    if cached is not None:
        return cached
    m = ctx.m
    B = m.num_blocks
    kind = np.full(B, -1, dtype=np.int8)
    target = np.full(B, -1, dtype=np.int64)
    relocated = np.zeros(B, dtype=bool)
    row = np.full(B, -1, dtype=np.int64)
    code = ctx.code
    rng = ctx.block_range
    nonempty = (ctx.block_end > ctx.block_start) & code.decoded[rng] if B else np.zeros(0, bool)
    sel = np.nonzero(nonempty)[0]
    last = code.last_before(rng[sel], ctx.block_start[sel], ctx.block_end[sel])
    have = last >= 0
    sel, last = sel[have], last[have]
    kind[sel] = code.kinds[last].astype(np.int8)
    target[sel] = code.target[last]
    row[sel] = last
    relocs = reloc_offsets(ctx) if ctx.relocatable else {}
    for b, j in zip(sel.tolist(), last.tolist()) if relocs else ():
        rel = relocs.get(int(ctx.range_section[rng[b]]))
        if rel is not None and len(rel):
            a = int(code.start[j])
            i = int(np.searchsorted(rel, a, side="right"))
            relocated[b] = i < len(rel) and int(rel[i]) < a + int(code.size[j])
    out = LastInstructions(kind, target, row, relocated, code)
    ctx.cache["last"] = out
    return out


def reloc_offsets(ctx: VerifyContext) -> dict[int, np.ndarray]:
    """ET_REL only: r_offsets of the relocations applying to each executable section.

    Read with bbmap's own table reader (the layout from pyelftools' declarations) over
    the section bytes, so a wrong ``sh_entsize`` or an ``sh_size`` past the file is an
    error naming the section, not pyelftools' assertion.
    """
    from bbmap.binary.relocs import parse_crel
    from bbmap.formats.elf import SHT_CREL, SHT_RELA, elf_dtype

    b = ctx.binary
    is64 = b.elfclass == 64
    out: dict[int, list[int]] = {}
    for sec in ctx.sections:
        if sec.sh_type not in RELOC_TYPES:
            continue
        label = f"section [{sec.index}] {sec.name}"
        data = b.section_data(sec.index)
        with decoding(b.path, label, 0, "unreadable relocations"):
            if sec.sh_type == SHT_CREL:
                offs = parse_crel(data, is64)[0]
            else:
                dt = elf_dtype("Elf_Rela" if sec.sh_type == SHT_RELA else "Elf_Rel",
                               64 if is64 else 32, b.little_endian)
                if len(data) % dt.itemsize:
                    raise BBMapError(f"unreadable relocations: size {len(data):#x} is not a "
                                     f"multiple of the entry size {dt.itemsize}",
                                     file=b.path, section=label,
                                     offset=len(data) - len(data) % dt.itemsize)
                offs = np.frombuffer(data, dtype=dt)["r_offset"]
        out.setdefault(sec.sh_info, []).extend(int(x) for x in offs.tolist())
    return {k: np.array(sorted(v), dtype=np.int64) for k, v in out.items()}


def function_extents(ctx: VerifyContext) -> dict[int, list[tuple[int, int, int, int]]]:
    """(section, lo, hi, range) of every range with blocks, per function; symbol size
    included in the extent."""
    cached = ctx.cache.get("extents")
    if cached is not None:
        return cached
    m = ctx.m
    syms = ctx.binary.symbols
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    for r in range(m.num_ranges):
        if m.range_block_ptr[r + 1] == m.range_block_ptr[r]:
            continue  # no block entries (OmitBBEntries): nothing to bound
        lo, hi = ctx.range_extent(r)
        i = range_symbol(ctx, r)
        if i >= 0:
            hi = max(hi, lo + int(syms.size[i]))
        out.setdefault(int(ctx.range_func[r]), []).append(
            (int(ctx.range_section[r]), lo, hi, r))
    ctx.cache["extents"] = out
    return out
