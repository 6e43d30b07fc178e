"""An ELF file as bbmap needs it: segments, sections, build-id, symbols, block maps.

pyelftools does the ELF plumbing (headers, notes, section data); the file is
memory-mapped so that a 100 MB binary costs nothing until a section is read.  The
block map is decoded lazily from every source the file has: map sections of both
types (found by ``sh_type``, never by name), ``.bb_info``, and LLVM 11 label symbols.
Decode faults become :attr:`Binary.diagnostics`; what decoded before them is kept.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from elftools.common.exceptions import ELFError
from elftools.construct.core import ConstructError as ElfConstructError
from elftools.elf import enums
from elftools.elf.elffile import ELFFile

from bbmap.binary.labels import decode_labels
from bbmap.binary.mapinput import KIND_BB_INFO, KIND_LABELS, KIND_V0, KIND_VERSIONED, MapInput
from bbmap.binary.relocs import (
    Relocations,
    load_relocations,
    read_symbol_columns,
)
from bbmap.binary.symbols import (
    SymbolTable,
    function_symbols,
    name_functions,
    read_symtab,
)
from bbmap.binary.types import FunctionSymbols, SectionInfo, Segment
from bbmap.errors import BBMapError, Diagnostic, Diagnostics, UsageError, library_words
from bbmap.formats.bbaddrmap import (
    BB_INFO_SECTION,
    SHT_LLVM_BB_ADDR_MAP,
    SHT_LLVM_BB_ADDR_MAP_V0,
)
from bbmap.formats.elf import (
    EI_CLASS,
    EI_DATA,
    ELFCLASS32,
    ELFCLASS64,
    ELFCOMPRESS_ZLIB,
    ELFCOMPRESS_ZSTD,
    ELFDATA2LSB,
    ELFDATA2MSB,
    ET_NAMES,
    PF_W,
    PT_LOAD,
    PT_NOTE,
    RELOC_TYPES,
    SHF_COMPRESSED,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_PROGBITS,
    SHT_SYMTAB,
    SYMBOL_TABLE_TYPES,
    elf_dtype,
    elf_structs,
)
from bbmap.formats.go import (
    BUILDINFO_MAGIC,
    GO_BUILDINFO_SECTION,
    GO_NOTE_OWNER,
    GO_PCLNTAB_SECTION,
)
from bbmap.model import BlockMap, MapSource

if TYPE_CHECKING:
    from bbmap.binary.go import GoInfo

DEFAULT_DEBUG_DIRS = ("/usr/lib/debug",)
DEBUGLINK_SECTION = ".gnu_debuglink"

# How large a compressed section may declare itself once inflated (spec/binary.md,
# "Bounded memory").  Decoding a block map costs ~10x its inflated size (a token
# index and value per byte), so the declared size is what bounds memory:
MAX_SECTION_SIZE = 1 << 30  # never more than 1 GiB ...
MAX_INFLATE_RATIO = 32  # ... nor 32x the compressed bytes: real maps deflate 2x (sqlite),
#                         repetitive synthetic ones 20x (zlib) to 38x (zstd); a bomb ~1000x
INFLATE_FLOOR = 16 << 20  # ... though any section may declare up to 16 MiB
DEFLATE_MAX_RATIO = 1032  # deflate's largest expansion: 258 bytes per 2 bits (RFC 1951)


def inflate_limit(compressed: int) -> tuple[int, str]:
    """The largest inflated size a section of ``compressed`` bytes may declare, and why.

    ``--max-section-size`` (the environment variable ``BBMAP_MAX_SECTION_SIZE``, bytes
    with K/M/G suffixes) replaces the rule with its value: the user vouches for the input.
    """
    v = os.environ.get("BBMAP_MAX_SECTION_SIZE")
    if v:
        try:
            return parse_size(v), "--max-section-size"
        except ValueError:
            raise BBMapError(f"BBMAP_MAX_SECTION_SIZE={v!r} is not a size (say 2G)") from None
    ratio = max(INFLATE_FLOOR, MAX_INFLATE_RATIO * compressed)
    if ratio < MAX_SECTION_SIZE:
        return ratio, (f"{MAX_INFLATE_RATIO}x its {compressed} compressed bytes, "
                       "more than a block map deflates")
    return MAX_SECTION_SIZE, "the default limit"


def parse_size(text: str) -> int:
    """``"512M"`` -> 536870912; plain digits are bytes (binary K, M, G, T suffixes)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    num = t[:-1] if mult > 1 else t
    n = float(num) if "." in num else int(num, 0)
    if n <= 0:
        raise ValueError(text)
    return int(n * mult)


_SH_TYPES: dict[str, int] = {}
for _name in dir(enums):
    if _name.startswith("ENUM_SH_TYPE"):
        for _k, _v in getattr(enums, _name).items():
            if isinstance(_v, int):
                _SH_TYPES.setdefault(_k, _v)


def sh_type_number(value) -> int:
    return value if isinstance(value, int) else _SH_TYPES.get(value, -1)


class Binary:
    """One ELF file (see spec/architecture.md, ``bbmap.binary``)."""

    def __init__(self, path: str | os.PathLike, *, debug_dirs=(), demangle: bool = True,
                 decoder: str = "fast") -> None:
        self.path = os.fspath(path)
        self.demangle = demangle
        self.decoder = decoder
        self.debug_dirs = tuple(debug_dirs)
        self.diagnostics = Diagnostics()
        self._disassembler = None  # disassembler(): made on first use
        try:
            self._fh = open(self.path, "rb")  # noqa: SIM115 - lives as long as the object
        except OSError as e:
            raise BBMapError(f"cannot open: {e.strerror}", file=self.path) from None
        try:
            size = os.fstat(self._fh.fileno()).st_size
            if size < 16:
                raise BBMapError("not an ELF file (too short)", file=self.path, offset=0)
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
            if self._mm[:4] != b"\x7fELF":
                # the arguments in the wrong order, most likely (perfdata's import only
                # here: it declares every perf.data layout, which an ELF file never needs)
                from bbmap.formats.perfdata import MAGIC as PERF_MAGIC
                from bbmap.formats.perfdata import MAGIC_SWAPPED as PERF_MAGIC_SWAPPED

                if self._mm[:8] in (PERF_MAGIC, PERF_MAGIC_SWAPPED):
                    raise UsageError("this is a perf.data profile, not an ELF binary: give "
                                     "the binary the profile was recorded from (the "
                                     "profile goes after it: --perf-data, --profile, or "
                                     "annotate PERF_DATA BINARY)", file=self.path, offset=0)
                raise BBMapError("not an ELF file (bad magic)", file=self.path, offset=0)
            self._check_ident(size)
            self._at: tuple[str, int] = ("ELF header", 0)  # what is being read, for errors
            self.elf = ELFFile(self._mm)
            self._check_tables(size)
            self.elfclass = self.elf.elfclass
            self.little_endian = self.elf.little_endian
            self.machine = self.elf["e_machine"]
            self.e_type = ET_NAMES.get(_etype_num(self.elf["e_type"]), str(self.elf["e_type"]))
            self.sections = self._read_sections()
            self.segments = self._read_segments()
        except BBMapError:
            self.close()
            raise
        except (ELFError, ElfConstructError, struct.error, ValueError, OverflowError) as e:
            self.close()
            section, offset = getattr(self, "_at", ("ELF header", 0))
            raise BBMapError(f"malformed ELF: {library_words(e)}", file=self.path,
                             section=section, offset=offset) from None

    def _check_ident(self, size: int) -> None:
        """The class and byte order bytes, and a whole ELF header (pyelftools says
        "Invalid EI_CLASS b'\\r'" or runs past the end, naming no offset)."""
        mm = self._mm
        for off, name, ok in ((EI_CLASS, "EI_CLASS", {ELFCLASS32: "1 (32-bit)",
                                                      ELFCLASS64: "2 (64-bit)"}),
                              (EI_DATA, "EI_DATA", {ELFDATA2LSB: "1 (little-endian)",
                                                    ELFDATA2MSB: "2 (big-endian)"})):
            if mm[off] not in ok:
                raise BBMapError(f"{name} is {mm[off]:#x}, neither {' nor '.join(ok.values())}",
                                 file=self.path, section="ELF header", offset=off)
        need = elf_dtype("Elf_Ehdr", 64 if mm[EI_CLASS] == ELFCLASS64 else 32, True).itemsize
        if size < need:
            raise BBMapError(f"the ELF header needs {need} bytes, the file has {size}",
                             file=self.path, section="ELF header", offset=0)

    def _check_tables(self, size: int) -> None:
        """The program and section header tables lie inside the file and their entries are
        as large as a header (checked before pyelftools seeks to them: a wild ``e_phoff``
        makes it overflow, a small ``e_phentsize`` raise without an offset)."""
        h = self.elf.header
        is64 = self.elf.elfclass == 64
        ehdr = elf_dtype("Elf_Ehdr", 64 if is64 else 32, True)
        structs = self.elf.structs
        for what, off_f, num_f, ent_f, entry in (
                ("program", "e_phoff", "e_phnum", "e_phentsize", structs.Elf_Phdr.sizeof()),
                ("section", "e_shoff", "e_shnum", "e_shentsize", structs.Elf_Shdr.sizeof())):
            off, num, ent = h[off_f], h[num_f], h[ent_f]
            if off and ent < entry:
                raise BBMapError(
                    f"{ent_f} is {ent}, smaller than a {what} header ({entry} bytes)",
                    file=self.path, section="ELF header", offset=ehdr.fields[ent_f][1])
            if num == 0 or off == 0:
                continue  # no such table (e_shnum 0 may mean "in section 0": checked below)
            if off + num * ent > size:
                raise BBMapError(
                    f"{what} header table ({num} entries of {ent} bytes at {off_f} {off:#x}) "
                    f"lies outside the file ({size:#x} bytes)", file=self.path,
                    section="ELF header",
                    offset=elf_dtype("Elf_Ehdr", 64 if is64 else 32, True).fields[off_f][1])

    # ------------------------------------------------------------------ basics
    def close(self) -> None:
        for attr in ("_mm", "_fh"):
            obj = getattr(self, attr, None)
            if obj is not None:
                with contextlib.suppress(OSError, BufferError):
                    obj.close()

    def __enter__(self) -> Binary:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def is_relocatable(self) -> bool:
        return self.e_type == "ET_REL"

    def refuse_relocatable(self) -> None:
        """The one refusal of every command that places runtime addresses or samples in a
        binary (annotate, cfg, layout, fleet, lookup, verify --profile): a ``.o`` has
        section-relative addresses that overlap and no process maps it.  A usage error
        (exit 2), like the binary and the profile swapped; dump and verify read it."""
        if self.is_relocatable:
            raise UsageError(
                "a relocatable object (ET_REL, a .o): its addresses are section-relative "
                "and no process maps it, so no sample or address can be placed in it; pass "
                "the executable or shared library linked from it (dump and verify read a .o)",
                file=self.path, section="ELF header",
                offset=elf_dtype("Elf_Ehdr", self.elfclass, True).fields["e_type"][1])

    @property
    def address_size(self) -> int:
        return 8 if self.elfclass == 64 else 4

    @property
    def data(self) -> mmap.mmap:
        """The whole file, mapped read-only (valid until :meth:`close`): slice it, or
        wrap it in a ``memoryview``, to read bytes without copying the file."""
        return self._mm

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the file from ``offset`` (fewer past its end)."""
        return bytes(self._mm[offset:offset + size])

    def disassembler(self):  # noqa: ANN201 - a bbmap.binary.disasm.Disassembler
        """The one disassembler of this binary (made on first use; capstone is loaded and
        configured once however many phases read the code: fit, CFG, BOLT's tables)."""
        if self._disassembler is None:
            from bbmap.binary.disasm import Disassembler

            self._disassembler = Disassembler(self.machine, int(self.elfclass))
        return self._disassembler

    def code_sections(self) -> list[SectionInfo]:
        """The executable sections with contents in the file (``SectionInfo.is_code``), in
        header order: every section a disassembler sweeps."""
        return [s for s in self.sections if s.is_code]

    def _section_headers(self):
        """(header, name) per section, without building pyelftools Section objects
        (which parse whole GNU hash tables eagerly: 0.1 s on a 100k-symbol DSO)."""
        elf = self.elf
        try:
            self._at = ("ELF header", 0)
            n = elf.num_sections()
            shoff, shent = elf["e_shoff"], elf["e_shentsize"]
            names = self._section_name_table(n) if n else None
            for i in range(n):
                self._at = (f"section header [{i}]", shoff + i * shent)
                h = elf._get_section_header(i)
                if names is not None and h["sh_name"] >= names[1]:
                    raise BBMapError(
                        f"sh_name {h['sh_name']:#x} of section [{i}] lies past the end of the "
                        f"section name table (section [{names[0]}], {names[1]:#x} bytes)",
                        file=self.path, section=f"section header [{i}]",
                        offset=shoff + i * shent)
                self._at = (f"section [{names[0] if names else '?'}] (section names; the "
                            f"name of section [{i}])", h["sh_name"])
                yield h, elf._get_section_name(h)
        except AttributeError:  # another pyelftools: the public, slower way
            for s in elf.iter_sections():
                yield s.header, s.name

    def _section_name_table(self, n: int) -> tuple[int, int]:
        """(index, size) of the section name table, checked to be a section inside the file
        (pyelftools would fail reading a name, with no word of which table or where)."""
        elf = self.elf
        idx = elf.get_shstrndx()
        ehdr = elf_dtype("Elf_Ehdr", elf.elfclass, True)
        if idx >= n:
            raise BBMapError(f"e_shstrndx {idx} names no section (there are {n})",
                             file=self.path, section="ELF header",
                             offset=ehdr.fields["e_shstrndx"][1])
        at = elf["e_shoff"] + idx * elf["e_shentsize"]
        self._at = (f"section header [{idx}]", at)
        h = elf._get_section_header(idx)
        if h["sh_offset"] + h["sh_size"] > len(self._mm) and h["sh_type"] != "SHT_NOBITS":
            raise BBMapError(
                f"the section name table (section [{idx}], {h['sh_size']:#x} bytes at "
                f"{h['sh_offset']:#x}) lies outside the file ({len(self._mm):#x} bytes)",
                file=self.path, section=f"section header [{idx}]", offset=at)
        return idx, h["sh_size"]

    def _read_sections(self) -> list[SectionInfo]:
        out = []
        for i, (h, name) in enumerate(self._section_headers()):
            out.append(SectionInfo(index=i, name=name, sh_type=sh_type_number(h["sh_type"]),
                                   sh_flags=h["sh_flags"], sh_addr=h["sh_addr"],
                                   sh_offset=h["sh_offset"], sh_size=h["sh_size"],
                                   sh_link=h["sh_link"], sh_info=h["sh_info"]))
        return out

    def _read_segments(self) -> list[Segment]:
        out = []
        elf = self.elf
        try:  # headers only: a DynamicSegment object would parse the GNU hash table
            headers = []
            for i in range(elf.num_segments()):
                self._at = (f"program header [{i}]", elf["e_phoff"] + i * elf["e_phentsize"])
                headers.append(elf._get_segment_header(i))
        except AttributeError:
            headers = [seg.header for seg in elf.iter_segments()]
        for h in headers:
            p_type = h["p_type"]
            if not isinstance(p_type, int):
                p_type = enums.ENUM_P_TYPE_BASE.get(p_type, -1)
            out.append(Segment(p_type=p_type, p_flags=h["p_flags"], p_offset=h["p_offset"],
                               p_vaddr=h["p_vaddr"], p_filesz=h["p_filesz"],
                               p_memsz=h["p_memsz"], p_align=h["p_align"]))
        return out

    def section_label(self, index: int) -> str:
        return f"section [{index}] {self.sections[index].name}"

    def section_data(self, index: int) -> bytes:
        """Raw section bytes, decompressed if SHF_COMPRESSED (zlib or zstd)."""
        s = self.sections[index]
        if s.sh_type == SHT_NOBITS:
            return b""
        end = s.sh_offset + s.sh_size
        if end > len(self._mm):
            raise BBMapError(f"section extends past the end of the file ({end:#x} > "
                             f"{len(self._mm):#x})", file=self.path,
                             section=self.section_label(index), offset=0)
        raw = bytes(self._mm[s.sh_offset:end])
        if not s.sh_flags & SHF_COMPRESSED:
            return raw
        return self._decompress(raw, index)

    def _decompress(self, raw: bytes, index: int) -> bytes:
        """Inflate an SHF_COMPRESSED section, never past what its header declares, and
        refuse a declared size over :data:`MAX_SECTION_SIZE` (or, for zlib, over what
        deflate can produce from the bytes present) before allocating anything."""
        where = {"file": self.path, "section": self.section_label(index)}
        chdr = elf_structs(self.elfclass, self.little_endian).Elf_Chdr  # pyelftools' layout
        hdr = chdr.sizeof()
        if len(raw) < hdr:
            raise BBMapError("compressed section shorter than its header", offset=0, **where)
        h = chdr.parse(raw[:hdr])
        ch_type = _enum_number(h["ch_type"], enums.ENUM_ELFCOMPRESS_TYPE)
        ch_size = h["ch_size"]
        body = raw[hdr:]
        limit, why = inflate_limit(len(body))
        if ch_size > limit:
            raise BBMapError(
                f"compressed section declares {ch_size:#x} bytes ({ch_size / 2**20:.1f} MiB) "
                f"once inflated, over the limit of {limit / 2**20:.1f} MiB ({why}); pass "
                "--max-section-size to raise it if the binary is that large", offset=0,
                **where)
        if ch_type == ELFCOMPRESS_ZLIB and ch_size > DEFLATE_MAX_RATIO * len(body) + 64:
            raise BBMapError(
                f"compressed section declares {ch_size:#x} bytes from {len(body):#x} "
                f"bytes of zlib data; deflate cannot expand more than "
                f"{DEFLATE_MAX_RATIO}x", offset=0, **where)
        try:
            if ch_type == ELFCOMPRESS_ZLIB:
                d = zlib.decompressobj()
                out = d.decompress(body, ch_size + 1)
            elif ch_type == ELFCOMPRESS_ZSTD:
                import zstandard

                # read at most one byte past the declared size: a bomb stops there
                with zstandard.ZstdDecompressor().stream_reader(body) as r:
                    out = r.read(ch_size + 1)
            else:
                raise BBMapError(f"unknown compression type {ch_type}", offset=0, **where)
        except (zlib.error, Exception) as e:
            if isinstance(e, BBMapError):
                raise
            raise BBMapError(f"cannot decompress: {library_words(e)}", offset=hdr,
                             **where) from None
        if len(out) > ch_size:
            raise BBMapError(f"inflates past its declared size ch_size {ch_size}; stopped "
                             "there", offset=0, **where)
        if len(out) != ch_size:
            raise BBMapError(f"decompressed size {len(out)} differs from ch_size {ch_size}",
                             offset=0, **where)
        return out

    # ---------------------------------------------------------------- build-id
    @cached_property
    def build_id(self) -> str | None:
        holders = [self.elf.get_section(s.index) for s in self.sections
                   if s.sh_type == SHT_NOTE]
        if not holders:  # no section headers: the PT_NOTE segments
            holders = [self.elf.get_segment(i) for i, g in enumerate(self.segments)
                       if g.p_type == PT_NOTE]
        for h in holders:
            try:
                for note in h.iter_notes():
                    # only GNU's note is a build-id (pyelftools names type 3 so only for
                    # owner "GNU"; a damaged owner leaves raw bytes: not a build-id)
                    desc = note["n_desc"]
                    if (note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU"
                            and isinstance(desc, str)):
                        return desc
            except (ELFError, ElfConstructError, struct.error, UnicodeDecodeError, ValueError):
                continue  # a damaged note (say, a Go note with a wild size) hides none after
        return None

    # ----------------------------------------------------------------- symbols
    def _symbol_tables(self) -> list[SymbolTable]:
        out = []
        for sec in self.sections:
            if sec.sh_type in SYMBOL_TABLE_TYPES and sec.sh_link < len(self.sections):
                try:
                    data = self.section_data(sec.index)
                    strtab = self.section_data(sec.sh_link)
                except BBMapError as e:
                    self.diagnostics.add(e.diagnostic)
                    continue
                out.append(read_symtab(data, strtab, is64=self.elfclass == 64,
                                       little=self.little_endian, section_name=sec.name))
        return out

    @cached_property
    def symbol_tables(self) -> list[SymbolTable]:
        """``.symtab`` first, then ``.dynsym``; from a debug file if this one has neither."""
        tables = self._symbol_tables()
        if not any(t.section_name == ".symtab" for t in tables):
            dbg = self.debug_file()
            if dbg is not None:
                tables = [t for t in dbg._symbol_tables() if t.section_name == ".symtab"] + tables
        tables.sort(key=lambda t: t.section_name != ".symtab")
        return tables

    @cached_property
    def symbols(self) -> FunctionSymbols:
        fs = function_symbols(self.symbol_tables, demangle_names=self.demangle)
        if not len(fs) and self.go is not None and self.go.functions is not None:
            text = next((s.index for s in self.sections if s.name == ".text"), -1)
            fs = self.go.functions.as_symbols(text)  # a stripped Go binary
            self._symbols_source = ".gopclntab"
        elif len(fs):
            self._symbols_source = "symbol table"
        return fs

    _symbols_source: str | None = None

    @property
    def symbols_source(self) -> str | None:
        """Where ``symbols`` come from: "symbol table", ".gopclntab" or None (none)."""
        _ = self.symbols
        return self._symbols_source

    @cached_property
    def go(self) -> GoInfo | None:
        """The Go build id, build info and function table (None: not a Go binary)."""
        if not self._may_be_go():
            return None
        from bbmap.binary.go import read_go

        info = read_go(self)
        if info is not None:
            self.diagnostics.extend(info.diagnostics)
        return info

    def _may_be_go(self) -> bool:
        """False only where :func:`bbmap.binary.go.read_go` would find nothing: no
        ``.gopclntab`` or ``.go.buildinfo`` section, no note (section or ``PT_NOTE``
        segment) holding the Go owner's name, no build-info magic in the first writable
        ``PT_LOAD``.  Spares every other binary the Go reader and construct (~10 ms of
        start-up); a damaged note or segment answers True and the reader says what."""
        names = {s.name for s in self.sections}
        if GO_PCLNTAB_SECTION in names or GO_BUILDINFO_SECTION in names:
            return True
        try:
            for s in self.sections:
                if s.sh_type == SHT_NOTE and GO_NOTE_OWNER in self.section_data(s.index):
                    return True
            mm = self._mm
            for g in self.segments:
                if g.p_type == PT_NOTE and mm.find(GO_NOTE_OWNER, g.p_offset,
                                                   g.p_offset + g.p_filesz) >= 0:
                    return True
            writable = [g for g in self.segments if g.p_type == PT_LOAD and g.p_flags & PF_W]
            return bool(writable) and mm.find(
                BUILDINFO_MAGIC, writable[0].p_offset,
                writable[0].p_offset + writable[0].p_filesz) >= 0
        except Exception:  # noqa: BLE001 - unreadable: the reader decides and reports
            return True

    def debug_file(self) -> Binary | None:
        """A separate debug file found by build-id (``.build-id/xx/rest.debug`` in a
        ``--debug-dir`` or /usr/lib/debug), else by ``.gnu_debuglink`` (its name beside
        the binary, in ``.debug/`` beside it, in each debug directory, and under a debug
        directory followed by the binary's own directory, as gdb looks; the CRC32 the link
        records must match).  Looked up once."""
        if "_debug_file" not in self.__dict__:
            self.__dict__["_debug_file"] = self._find_debug_file()
        return self.__dict__["_debug_file"]

    def _find_debug_file(self) -> Binary | None:
        bid = self.build_id
        dirs = (*self.debug_dirs, *DEFAULT_DEBUG_DIRS)
        if bid and len(bid) >= 3:
            for d in dirs:
                for cand in (os.path.join(d, ".build-id", bid[:2], bid[2:] + ".debug"),
                             os.path.join(d, bid[:2], bid[2:] + ".debug")):
                    other = self._open_debug_candidate(cand)
                    if other is not None and other.build_id == bid:
                        return other
        link = self.debuglink
        if link is None:
            return None
        name, crc = link
        here = os.path.dirname(os.path.abspath(self.path))
        cands = [os.path.join(here, name), os.path.join(here, ".debug", name)]
        for d in dirs:
            cands += [os.path.join(d, name), os.path.join(d, here.lstrip(os.sep), name)]
        for cand in cands:
            if os.path.abspath(cand) == os.path.abspath(self.path):
                continue
            other = self._open_debug_candidate(cand, crc=crc)
            if other is not None and (not bid or not other.build_id or other.build_id == bid):
                return other
        return None

    def _open_debug_candidate(self, cand: str, crc: int | None = None) -> Binary | None:
        if not os.path.isfile(cand):
            return None
        if crc is not None:
            with open(cand, "rb") as fh:
                got = 0
                while chunk := fh.read(1 << 20):
                    got = zlib.crc32(chunk, got)
            if got != crc:
                return None
        try:
            return Binary(cand, demangle=self.demangle)
        except BBMapError as e:
            self.diagnostics.add(e.diagnostic)
            return None

    @cached_property
    def debuglink(self) -> tuple[str, int] | None:
        """``.gnu_debuglink``: the debug file's name and the CRC32 of its bytes."""
        sec = next((s for s in self.sections if s.name == DEBUGLINK_SECTION), None)
        if sec is None:
            return None
        try:
            data = self.section_data(sec.index)
        except BBMapError as e:
            self.diagnostics.add(e.diagnostic)
            return None
        end = data.find(b"\0")
        if end <= 0:
            return None
        at = (end + 4) & ~3  # the name, NUL, padding to 4, then the CRC
        if at + 4 > len(data):
            return None
        crc, = struct.unpack_from("<I" if self.little_endian else ">I", data, at)
        name = data[:end].decode("utf-8", "replace")
        if os.sep in name or name in (".", ".."):
            return None  # a name, never a path (a hostile link may not point elsewhere)
        return name, crc

    @property
    def has_symtab(self) -> bool:
        return any(s.sh_type == SHT_SYMTAB for s in self.sections)

    def stripped(self) -> str | None:
        """How this file shows it was stripped (None: it was not, or cannot tell).  A
        linked file without ``.symtab`` was stripped (every linker writes one); without
        its block map too, and built by a clang that emits one, the strip took the map
        (``llvm-strip`` does; GNU ``strip`` keeps sections it does not know)."""
        if self.is_relocatable or not self.sections or self.has_symtab:
            return None
        link = self.debuglink
        how = "no .symtab" + (f"; .gnu_debuglink names {link[0]}" if link else "")
        return how

    # --------------------------------------------------------------- block map
    def map_sections(self) -> list[SectionInfo]:
        return [s for s in self.sections
                if s.sh_type in (SHT_LLVM_BB_ADDR_MAP, SHT_LLVM_BB_ADDR_MAP_V0)
                or (s.name == BB_INFO_SECTION and s.sh_type == SHT_PROGBITS)]

    def map_input(self, sec: SectionInfo) -> MapInput | None:
        """Everything a decoder needs for one map section (None if unreadable)."""
        label = self.section_label(sec.index)
        if sec.sh_type == SHT_LLVM_BB_ADDR_MAP:
            kind, stype = KIND_VERSIONED, "section"
        elif sec.sh_type == SHT_LLVM_BB_ADDR_MAP_V0:
            kind, stype = KIND_V0, "section"
        else:
            kind, stype = KIND_BB_INFO, "bb_info"
        try:
            data = self.section_data(sec.index)
        except BBMapError as e:
            self.diagnostics.add(e.diagnostic)
            return None
        source = MapSource(kind=stype, section_index=sec.index, section_name=sec.name,
                           sh_type=sec.sh_type, link=sec.sh_link)
        inp = MapInput(data=data, kind=kind, address_size=self.address_size,
                       little=self.little_endian, file=self.path, label=label, source=source)
        if self.is_relocatable:
            diags: list[Diagnostic] = []
            rel = self._reloc_sections.get(sec.index)
            relocs = None if rel is None else load_relocations(
                rel, self.section_data, len(data), is64=self.elfclass == 64,
                address_size=self.address_size, little=self.little_endian, label=label,
                file=self.path, diags=diags, symbol_columns=self._symbol_columns)
            self.diagnostics.extend(diags)
            if relocs is None:
                if not diags:
                    self.diagnostics.warn(
                        "relocatable object without relocations for this map: "
                        "addresses are the raw field values", file=self.path, section=label)
            else:
                inp.relocs = relocs
        return inp

    def label_input(self) -> MapInput:
        """The ``.symtab`` as the label-symbol decoder's input (LLVM 11 labels)."""
        tables = [t for t in self.symbol_tables if t.section_name == ".symtab"]
        t = tables[0] if tables else None
        name = t.section_name if t is not None else ".symtab"
        return MapInput(data=b"", kind=KIND_LABELS, address_size=self.address_size,
                        little=self.little_endian, file=self.path, label=f"section {name}",
                        source=MapSource(kind="label-symbols", section_index=-1,
                                         section_name=name, sh_type=0, link=-1),
                        symtab=t, relocatable=self.is_relocatable)

    @cached_property
    def _reloc_sections(self) -> dict[int, SectionInfo]:
        """Relocation sections by the section they apply to (``sh_info``)."""
        out: dict[int, SectionInfo] = {}
        for s in self.sections:
            if s.sh_type in RELOC_TYPES:
                out.setdefault(s.sh_info, s)
        return out

    def _symbol_columns(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        cache = self.__dict__.setdefault("_symcols", {})
        if index not in cache:
            if not 0 < index < len(self.sections) \
                    or self.sections[index].sh_type not in SYMBOL_TABLE_TYPES:
                raise KeyError(index)
            cache[index] = read_symbol_columns(self.section_data(index),
                                               self.elfclass == 64, self.little_endian)
        return cache[index]

    def _decoder(self):
        if self.decoder == "ref":
            from bbmap.binary.decode_ref import decode_section_ref as decode
        else:
            from bbmap.binary.decode_fast import decode_section_fast as decode
        return decode

    def decode_batch(self, inputs: list[MapInput]) -> BlockMap | None:
        """Decode many small map sections of one kind as one buffer (a ``.o`` built with
        -ffunction-sections has one per function).  None if any of them needs to be
        decoded on its own (a fault, a warning, missing relocations)."""
        if self.is_relocatable and not all(isinstance(i.relocs, Relocations) for i in inputs):
            return None
        bases = np.zeros(len(inputs) + 1, np.int64)
        np.cumsum([len(i.data) for i in inputs], out=bases[1:])
        first = inputs[0]
        joined = MapInput(data=b"".join(i.data for i in inputs), kind=first.kind,
                          address_size=first.address_size, little=first.little,
                          file=first.file, label=first.label, source=first.source)
        if self.is_relocatable:
            joined.relocs = Relocations.merge([i.relocs for i in inputs], bases[:-1].tolist())
        m, diags = self._decoder()(joined)
        if diags:
            return None
        starts = m.func_map_offset.astype(np.int64)
        nonempty = bases[:-1][np.diff(bases) > 0]
        if not np.isin(nonempty, starts).all():
            return None  # a record would span two sections: decode them one by one
        which = np.searchsorted(bases, starts, side="right") - 1
        m.func_source = which.astype("i4")
        m.func_map_offset = (starts - bases[which]).astype("u8")
        m.sources = [i.source for i in inputs]
        return m

    def decode_section(self, sec: SectionInfo) -> BlockMap | None:
        inp = self.map_input(sec)
        if inp is None:
            return None
        m, diags = self._decoder()(inp)
        self.diagnostics.extend(diags)
        return m

    @cached_property
    def block_map_file(self) -> str:
        """The file the block map was read from: this one, or its debug file when this
        one has none (a binary ``llvm-strip`` stripped; ``objcopy --only-keep-debug``
        keeps the map in the debug file)."""
        _ = self.block_map
        return self.__dict__.get("_block_map_file", self.path)

    @cached_property
    def block_map(self) -> BlockMap:
        maps = self._decoded_maps()
        if not maps and not self.is_relocatable:
            dbg = self.debug_file()
            if dbg is not None and dbg.map_sections():
                maps = dbg._decoded_maps()
                self.diagnostics.extend(dbg.diagnostics)
                if maps:
                    self.__dict__["_block_map_file"] = dbg.path
        out = maps[0] if len(maps) == 1 else _concat(maps)
        if not self.is_relocatable:
            self._fill_range_sections(out)
        if self.is_relocatable:
            secs = out.range_section[out.func_range_ptr[:-1]] if out.num_functions else None
        else:
            secs = np.full(out.num_functions, -1, "i4")
        table = self.symbol_tables[0] if self.symbol_tables else None
        names = name_functions(out.func_address, secs, table,
                               relocatable=self.is_relocatable)
        if None in names:  # keep what the decoder named (label symbols) where none is
            names = [n if n is not None else old
                     for n, old in zip(names, out.func_name or [None] * len(names))]
        out.func_name = names
        return out

    def _decoded_maps(self) -> list[BlockMap]:
        """Every block map this file holds (map sections, then label symbols), decoded;
        faults go to :attr:`diagnostics`."""
        maps = []
        groups: list[list[SectionInfo]] = []
        for sec in self.map_sections():
            if groups and groups[-1][-1].sh_type == sec.sh_type and sec.name != BB_INFO_SECTION:
                groups[-1].append(sec)
            else:
                groups.append([sec])
        for group in groups:
            inputs = [i for i in (self.map_input(s) for s in group) if i is not None]
            batch = self.decode_batch(inputs) if len(inputs) > 1 else None
            if batch is not None:
                maps.append(batch)
                continue
            for inp in inputs:
                m, diags = self._decoder()(inp)
                self.diagnostics.extend(diags)
                if m.num_functions:
                    maps.append(m)
        lm, diags = decode_labels(self.label_input())
        self.diagnostics.extend(diags)
        if lm.num_functions:
            maps.append(lm)
        return maps

    def _fill_range_sections(self, m: BlockMap) -> None:
        """Linked images: the text section holding each range base (-1 if none)."""
        execs = sorted((s for s in self.sections if s.is_exec and s.sh_size),
                       key=lambda s: s.sh_addr)
        if not execs or not m.num_ranges:
            return
        starts = np.array([s.sh_addr for s in execs], "u8")
        ends = np.array([s.sh_addr + s.sh_size for s in execs], "u8")
        idx = np.array([s.index for s in execs], "i4")
        p = np.searchsorted(starts, m.range_base, side="right") - 1
        ok = (p >= 0) & (m.range_base < ends[np.maximum(p, 0)])
        m.range_section = np.where(ok, idx[np.maximum(p, 0)], m.range_section).astype("i4")


def _enum_number(value, enum: dict) -> int:  # noqa: ANN001 - pyelftools gives str or int
    """The number behind a value pyelftools decoded through one of its enums."""
    if isinstance(value, int):
        return value
    number = enum.get(value, 0)
    return number if isinstance(number, int) else 0


def _etype_num(value) -> int:  # noqa: ANN001
    return _enum_number(value, {name: n for n, name in ET_NAMES.items()})


def load_binary(path: str | os.PathLike, *, debug_dirs=(), demangle: bool = True,
                decoder: str = "fast") -> Binary:
    """Open ``path`` as ELF; raise :class:`BBMapError` if it is not one."""
    return Binary(path, debug_dirs=debug_dirs, demangle=demangle, decoder=decoder)


def _concat(maps: list[BlockMap]) -> BlockMap:
    """:meth:`BlockMap.concat` for maps with distinct sources (linear, not quadratic)."""
    offsets = np.cumsum([0] + [len(m.sources) for m in maps])
    shifted = []
    for m, off in zip(maps, offsets[:-1].tolist()):
        c = BlockMap(**{k: getattr(m, k) for k in BlockMap.ARRAY_FIELDS})
        c.func_source = (m.func_source + off).astype("i4")
        c.func_name = list(m.func_name or [None] * m.num_functions)
        shifted.append(c)
    out = BlockMap.concat([_without_sources(c) for c in shifted])
    out.sources = [s for m in maps for s in m.sources]
    out.func_source = np.concatenate([c.func_source for c in shifted]) if shifted \
        else out.func_source
    return out


def _without_sources(m: BlockMap) -> BlockMap:
    m.sources = []
    return m
