"""Relocations that fill a map's address fields in relocatable objects (ET_REL).

In a ``.o`` every function/range address field is 0 (RELA, CREL) or the addend
(REL, e.g. i386/armv7) and carries an absolute relocation against the text
section's symbol.  The resolved value S + A is an offset inside the symbol's
section, so each address comes back with its section index -- llvm-readobj prints
the same offset (it reads only RELA/CREL; we read REL too).
"""

from __future__ import annotations

import numpy as np

from bbmap.binary.symbols import symbol_array
from bbmap.errors import Diagnostic
from bbmap.formats import leb128
from bbmap.formats.elf import (
    CREL_ADDEND_DELTA,
    CREL_COUNT_SHIFT,
    CREL_HAS_ADDEND,
    CREL_SHIFT_MASK,
    CREL_SYMBOL_DELTA,
    CREL_TYPE_DELTA,
    R_INFO_SYM_SHIFT,
    SHT_CREL,
    SHT_REL,
    SHT_RELA,
    elf_dtype,
)
from bbmap.formats.leb128 import LEB_GROUP_BITS, LEB_MORE, decode_sleb, decode_uleb

_U64_MASK = (1 << 64) - 1


def parse_crel(data: bytes, is64: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode a SHT_CREL section into (r_offset, symbol index, addend) columns."""
    hdr, pos = decode_uleb(data, 0)
    addends = hdr & CREL_HAS_ADDEND
    count, flag_bits, shift = hdr >> CREL_COUNT_SHIFT, (3 if addends else 2), hdr & CREL_SHIFT_MASK
    if count * 1 > len(data):
        raise leb128.map_fault(f"CREL count {count} larger than the section", 0)
    offs = np.zeros(count, "u8")
    syms = np.zeros(count, "u8")
    adds = np.zeros(count, "i8")
    offset = sym = addend = 0
    for i in range(count):
        if pos >= len(data):
            raise leb128.map_fault("CREL entry runs past the end", pos)
        b = data[pos]
        pos += 1
        offset += b >> flag_bits
        if b >= LEB_MORE:  # the offset delta's first byte is a ULEB byte with flag bits
            more, pos = decode_uleb(data, pos)
            offset += (more << (LEB_GROUP_BITS - flag_bits)) - (LEB_MORE >> flag_bits)
        if b & CREL_SYMBOL_DELTA:
            d, pos = decode_sleb(data, pos)
            sym += d
        if b & CREL_TYPE_DELTA:
            _, pos = decode_sleb(data, pos)  # type delta: not needed for S + A
        if b & CREL_ADDEND_DELTA and addends:
            d, pos = decode_sleb(data, pos)
            addend += d
        offs[i] = (offset << shift) & _U64_MASK
        syms[i] = sym
        adds[i] = addend
    return offs, syms, adds


class Relocations:
    """``r_offset -> (S + A, section)`` for one map section of a relocatable object."""

    def __init__(self, *, offsets: np.ndarray, values: np.ndarray, sections: np.ndarray,
                 is_rel: bool, address_size: int, little: bool, map_data: bytes,
                 label: str, file: str | None) -> None:
        order = np.argsort(offsets, kind="stable")
        self.offsets = offsets[order].astype("u8")
        self.sym_values = values[order].astype("u8")  # S, or S + A for RELA/CREL
        self.sections = sections[order].astype("i4")
        self.is_rel = is_rel
        self.address_size = address_size
        self.little = little
        self.label = label
        self.file = file
        self.mask = (1 << (8 * address_size)) - 1

    @classmethod
    def merge(cls, parts: list[Relocations], bases: list[int]) -> Relocations:
        """One table for maps laid end to end (``bases``: where each map starts)."""
        return cls(offsets=np.concatenate([p.offsets + np.uint64(b) for p, b in zip(parts, bases)]),
                   values=np.concatenate([p.sym_values for p in parts]),
                   sections=np.concatenate([p.sections for p in parts]),
                   is_rel=parts[0].is_rel, address_size=parts[0].address_size,
                   little=parts[0].little, map_data=b"", label=parts[0].label,
                   file=parts[0].file)

    def resolve(self, offset: int, raw: int) -> tuple[int, int]:
        i = int(np.searchsorted(self.offsets, offset))
        if i >= len(self.offsets) or int(self.offsets[i]) != offset:
            raise leb128.map_fault(f"failed to get relocation data for offset: {offset:#x}", offset)
        v = int(self.sym_values[i]) + (raw if self.is_rel else 0)
        return v & self.mask, int(self.sections[i])

    def resolve_many(self, offsets: np.ndarray, raws: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, int | None]:
        idx = np.searchsorted(self.offsets, offsets)
        ok = idx < len(self.offsets)
        idx_c = np.minimum(idx, max(len(self.offsets) - 1, 0))
        if len(self.offsets):
            ok &= self.offsets[idx_c] == offsets
        else:
            ok[:] = False
        bad = None if ok.all() else int(np.argmin(ok))
        if not len(self.offsets):
            return raws.astype("u8"), np.full(len(raws), -1, "i4"), bad
        vals = self.sym_values[idx_c] + (raws.astype("u8") if self.is_rel else np.uint64(0))
        if self.address_size == 4:
            vals = vals & np.uint64(0xFFFFFFFF)
        return vals.astype("u8"), self.sections[idx_c], bad


def load_relocations(rel, section_data, map_size: int, *, is64: bool, address_size: int,
                     little: bool, label: str, file: str | None, diags: list[Diagnostic],
                     symbol_columns=None) -> Relocations | None:
    """Read relocation section ``rel`` (a SectionInfo whose sh_info is the map).

    ``section_data(i)`` returns a section's bytes; ``symbol_columns(i)`` (optional,
    for caching) returns ``(st_value, st_shndx)`` of symbol table ``i``.  Entries
    pointing outside the map, or at symbols that do not exist, are refused with an
    error naming the relocation section and the entry's byte offset.
    """
    rlabel = f"section [{rel.index}] {rel.name}"
    kind = rel.sh_type
    data = section_data(rel.index)
    try:
        if kind == SHT_CREL:
            offs, syms, adds = parse_crel(data, is64)
            entsize = 0
        else:
            dt = elf_dtype("Elf_Rela" if kind == SHT_RELA else "Elf_Rel", 64 if is64 else 32,
                           little)
            entsize = dt.itemsize
            if len(data) % entsize:
                raise leb128.map_fault(
                    f"size {len(data):#x} is not a multiple of entry size {entsize}",
                    len(data) - len(data) % entsize)
            arr = np.frombuffer(data, dtype=dt)
            offs = arr["r_offset"].astype("u8")
            info = arr["r_info"].astype("u8")
            syms = info >> np.uint64(R_INFO_SYM_SHIFT[64 if is64 else 32])
            adds = (arr["r_addend"].astype("i8") if kind == SHT_RELA
                    else np.zeros(len(arr), "i8"))
    except leb128.MapFault as e:  # (construct's type: declared on first use)
        diags.append(Diagnostic(f"unreadable relocations: {e.message}", file, rlabel,
                                e.offset, "error"))
        return None
    try:
        sym_value, sym_shndx = (symbol_columns(rel.sh_link) if symbol_columns else
                                read_symbol_columns(section_data(rel.sh_link), is64, little))
    except (IndexError, KeyError):
        diags.append(Diagnostic(f"sh_link {rel.sh_link} names no symbol table", file, rlabel,
                                None, "error"))
        return None
    keep = np.ones(len(offs), "?")
    outside = offs + np.uint64(address_size) > np.uint64(map_size)
    badsym = syms >= np.uint64(len(sym_value))
    for mask, what in ((outside, "points outside"), (badsym, "names a missing symbol in")):
        if mask.any():
            i = int(np.argmax(mask))
            diags.append(Diagnostic(
                f"relocation {i} (r_offset {int(offs[i]):#x}) {what} {label} "
                f"({int(mask.sum())} such entries ignored)", file, rlabel,
                i * entsize if entsize else None, "error"))
            keep &= ~mask
    offs, syms, adds = offs[keep], syms[keep].astype("i8"), adds[keep]
    values = (sym_value[syms].astype("i8") + adds).astype("u8") if len(syms) else offs * 0
    sections = sym_shndx[syms].astype("i4") if len(syms) else np.zeros(0, "i4")
    return Relocations(offsets=offs, values=values, sections=sections,
                       is_rel=kind == SHT_REL, address_size=address_size, little=little,
                       map_data=b"", label=label, file=file)


def read_symbol_columns(data: bytes, is64: bool, little: bool) -> tuple[np.ndarray, np.ndarray]:
    arr = symbol_array(data, is64=is64, little=little)
    return arr["st_value"].astype("u8"), arr["st_shndx"].astype("i4")
