"""The ELF numbers and layouts bbmap uses, declared once.

pyelftools declares ELF (``elftools.elf.structs``); the columnar readers of symbol and
relocation tables take their numpy record layouts from those declarations
(:func:`elf_dtype`), and the compression header is parsed with pyelftools'
``Elf_Chdr``.  The constants are elf.h's (the System V gABI); pyelftools names most of
them in its enums, and ``tests/test_formats_constants.py`` holds these against them.
The block-map section types are the map format's (:mod:`bbmap.formats.bbaddrmap`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

# e_ident: the bytes that say how to read the rest (the same in both classes)
EI_CLASS, EI_DATA = 4, 5  # offsets in the file
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2

# e_type
ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4
ET_NAMES = {ET_REL: "ET_REL", ET_EXEC: "ET_EXEC", ET_DYN: "ET_DYN", ET_CORE: "ET_CORE"}
EM_386, EM_X86_64 = 3, 62

# sh_type / sh_flags
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA = 1, 2, 3, 4
SHT_NOTE, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 7, 8, 9, 11
SHT_CREL = 0x40000014  # compact relocations (LLVM 20+)
SYMBOL_TABLE_TYPES = (SHT_SYMTAB, SHT_DYNSYM)
RELOC_TYPES = (SHT_RELA, SHT_REL, SHT_CREL)
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
SHF_INFO_LINK, SHF_LINK_ORDER = 0x40, 0x80
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2

# program headers
PT_LOAD, PT_NOTE = 1, 4
PF_X, PF_W, PF_R = 1, 2, 4

# symbols: st_info = bind << 4 | type; st_shndx
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_GNU_IFUNC = 0, 1, 2, 3, 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
ST_TYPE_MASK, ST_BIND_SHIFT = 0xF, 4
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00

# notes and relocations
NT_GNU_BUILD_ID = 3
R_X86_64_64 = 1
R_INFO_SYM_SHIFT = {32: 8, 64: 32}  # ELF32_R_SYM / ELF64_R_SYM

# .eh_frame_hdr (LSB "Exception Frame Header"): version, eh_frame_ptr encoding, fde_count
# encoding, table encoding, then eh_frame_ptr, fde_count and a sorted table of
# (initial location, FDE address) pairs; the pointer encodings are DWARF's DW_EH_PE_*
EH_FRAME_HDR_VERSION = 1
DW_EH_PE_OMIT = 0xFF
DW_EH_PE_FORMAT_MASK, DW_EH_PE_APPLICATION_MASK = 0x0F, 0x70
DW_EH_PE_UDATA4, DW_EH_PE_SDATA4, DW_EH_PE_UDATA8, DW_EH_PE_SDATA8 = 0x03, 0x0B, 0x04, 0x0C
DW_EH_PE_ABSPTR, DW_EH_PE_PCREL, DW_EH_PE_DATAREL = 0x00, 0x10, 0x30

# SHT_CREL (LLVM's compact relocations): a ULEB header count << 3 | addend flag | shift,
# then per entry a byte of delta flags below the offset delta's low bits
CREL_COUNT_SHIFT, CREL_HAS_ADDEND, CREL_SHIFT_MASK = 3, 0x4, 0x3
CREL_SYMBOL_DELTA, CREL_TYPE_DELTA, CREL_ADDEND_DELTA = 0x1, 0x2, 0x4


@lru_cache(maxsize=8)
def elf_structs(elfclass: int, little: bool):  # noqa: ANN201 - an elftools ELFStructs
    """pyelftools' declarations for one ELF class and byte order."""
    from elftools.elf.structs import ELFStructs

    s = ELFStructs(little, elfclass)
    s.create_basic_structs()
    s.create_advanced_structs()
    return s


_UNSIGNED = {1: "B", 2: "H", 4: "I", 8: "Q"}


@lru_cache(maxsize=32)
def _fields(name: str, elfclass: int, little: bool) -> tuple[tuple[str, str], ...]:
    """(field, :mod:`struct` code) of pyelftools' ``name``; bit-split fields
    (``st_info``) as the unsigned integer they are stored in, byte arrays (``e_ident``)
    as ``Ns``; computed fields (``r_info_sym``) are left out."""
    out = []
    for sc in getattr(elf_structs(elfclass, little), name).subcons:
        size = sc.sizeof()
        if not size:
            continue
        packer = getattr(sc, "packer", None) or getattr(getattr(sc, "subcon", None), "packer",
                                                       None)
        if packer is not None:
            code = packer.format[-1]
        else:
            code = _UNSIGNED[size] if size in _UNSIGNED and not sc.name.endswith("ident") \
                else f"{size}s"
        out.append((sc.name, code))
    return tuple(out)


def struct_format(name: str, elfclass: int, little: bool) -> str:
    """The :mod:`struct` format of pyelftools' ``name`` (for writing test ELF files)."""
    return ("<" if little else ">") + "".join(c for _, c in _fields(name, elfclass, little))


_NUMPY_CODES = {"B": "u1", "H": "u2", "I": "u4", "L": "u4", "Q": "u8",
                "b": "i1", "h": "i2", "i": "i4", "l": "i4", "q": "i8"}


@lru_cache(maxsize=32)
def elf_dtype(name: str, elfclass: int, little: bool) -> np.dtype:
    """A numpy record type with the fields of pyelftools' ``name`` (``Elf_Sym``,
    ``Elf_Rel``, ``Elf_Rela``...), so a whole table is read in place as one array."""
    end = "<" if little else ">"
    def numpy_code(code: str) -> str:
        if code.endswith("s"):
            return "S" + code[:-1]
        return (end if _NUMPY_CODES[code][1] != "1" else "") + _NUMPY_CODES[code]

    dt = np.dtype([(field, numpy_code(code)) for field, code in _fields(name, elfclass, little)])
    assert dt.itemsize == getattr(elf_structs(elfclass, little), name).sizeof(), name
    return dt
