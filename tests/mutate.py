"""Break one rule in a real binary, for the negative tests of ``bbmap verify``.

Map mutations decode a map section into :class:`~bbmap.model.FunctionRecord`s,
let the caller change one field, re-encode with bbmap's own writer and patch the
file: in place when the size is unchanged, otherwise the new bytes go to the end
of the file and the section header's ``sh_offset``/``sh_size`` are updated (the
map is not SHF_ALLOC, so nothing else moves).  Symbol mutations rewrite one
``.symtab``/``.dynsym`` entry in place.  Results are written atomically.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from bbmap.atomic import write_atomic
from bbmap.errors import BBMapError
from bbmap.model import BlockRecord, FunctionRecord, function_records

Edit = Callable[[list[FunctionRecord]], "list[FunctionRecord] | None"]


def map_records(binary, section_index: int) -> list[FunctionRecord]:
    """Records decoded from one map section, in section order."""
    m = binary.block_map
    srcs = [i for i, s in enumerate(m.sources) if s.section_index == section_index]
    return [r for r in function_records(m) if r.source in srcs]


def _section_header_pos(data: bytes | bytearray, index: int) -> tuple[int, bool, str]:
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, = struct.unpack_from(end + "H", data, 0x3A)
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, = struct.unpack_from(end + "H", data, 0x2E)
    return shoff + index * shentsize, is64, end


def replace_section_bytes(data: bytearray, index: int, new: bytes) -> None:
    """Put ``new`` as section ``index``'s contents (in place, or appended at the end)."""
    pos, is64, end = _section_header_pos(data, index)
    if is64:
        off, size = struct.unpack_from(end + "QQ", data, pos + 24)
    else:
        off, size = struct.unpack_from(end + "II", data, pos + 16)
    if len(new) == size:
        data[off: off + size] = new
        return
    new_off = len(data)
    data += new
    if is64:
        struct.pack_into(end + "QQ", data, pos + 24, new_off, len(new))
    else:
        struct.pack_into(end + "II", data, pos + 16, new_off, len(new))


def rewrite_map(src: str | os.PathLike, dst: str | os.PathLike, edit: Edit, *,
                section_index: int | None = None, raw: Callable[[bytes], bytes] | None = None
                ) -> None:
    """Copy ``src`` to ``dst`` with one map section re-encoded after ``edit(records)``.

    ``edit`` changes the records in place (or returns a new list); ``raw`` may then
    transform the encoded bytes (truncation, garbage) before they are written.
    Linked files only: in a ``.o`` the address fields are relocation targets.
    """
    from bbmap.binary import load_binary
    from bbmap.binary.writer import encode_map_fast

    b = load_binary(src)
    if b.is_relocatable:
        raise BBMapError("map mutation needs a linked file (ET_EXEC/ET_DYN)", file=str(src))
    secs = b.map_sections()
    if not secs:
        raise BBMapError("no block map section to mutate", file=str(src))
    sec = next((s for s in secs if s.index == section_index), None) if section_index \
        is not None else secs[0]
    if sec is None:
        raise BBMapError(f"section {section_index} is not a map section", file=str(src))
    records = map_records(b, sec.index)
    out = edit(records)
    records = records if out is None else out
    new = encode_map_fast(records, sh_type=sec.sh_type, address_size=b.elfclass // 8,
                          little=b.little_endian)
    if raw is not None:
        new = raw(new)
    b.close()
    with open(src, "rb") as fh:
        data = bytearray(fh.read())
    replace_section_bytes(data, sec.index, new)
    write_atomic(dst, bytes(data))
    os.chmod(dst, 0o755)


def find_function(records: list[FunctionRecord], name: str) -> FunctionRecord:
    for r in records:
        if r.name == name:
            return r
    raise KeyError(name)


def blocks(fn: FunctionRecord) -> list[BlockRecord]:
    return [b for r in fn.ranges for b in r.blocks]


# ---------------------------------------------------------------------------- symbols

def patch_symbol(src: str | os.PathLike, dst: str | os.PathLike, name: str, *,
                 value: int | None = None, size: int | None = None,
                 sym_type: int | None = None, rename: str | None = None) -> int:
    """Copy ``src`` to ``dst`` with every symbol called ``name`` changed; return the count.

    ``rename`` must have the same length (the string table is patched in place).
    """
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(src, "rb") as fh:
        data = bytearray(fh.read())
        fh.seek(0)
        elf = ELFFile(fh)
        is64 = elf.elfclass == 64
        end = "<" if elf.little_endian else ">"
        hits = 0
        for sec in elf.iter_sections():
            if not isinstance(sec, SymbolTableSection):
                continue
            strtab = elf.get_section(sec["sh_link"])
            for i, sym in enumerate(sec.iter_symbols()):
                if sym.name != name:
                    continue
                hits += 1
                pos = sec["sh_offset"] + i * sec["sh_entsize"]
                if is64:
                    vpos, spos, ipos = pos + 8, pos + 16, pos + 4
                    vfmt = sfmt = end + "Q"
                else:
                    vpos, spos, ipos = pos + 4, pos + 8, pos + 12
                    vfmt = sfmt = end + "I"
                if value is not None:
                    struct.pack_into(vfmt, data, vpos, value)
                if size is not None:
                    struct.pack_into(sfmt, data, spos, size)
                if sym_type is not None:
                    data[ipos] = (data[ipos] & 0xF0) | (sym_type & 0x0F)
                if rename is not None:
                    if len(rename) != len(name):
                        raise BBMapError("rename needs a name of the same length")
                    npos = strtab["sh_offset"] + sym["st_name"]
                    data[npos: npos + len(name)] = rename.encode()
    if not hits:
        raise BBMapError(f"no symbol named {name}", file=str(src))
    write_atomic(dst, bytes(data))
    os.chmod(dst, 0o755)
    return hits


STT_NOTYPE, STT_OBJECT, STT_FUNC = 0, 1, 2


# ---------------------------------------------------------------------------- raw bytes
# Bit-level mutants for the hostile-input tests (issue 18): one field of an ELF header,
# section header or perf.data record set to a chosen value, the rest of the file intact.

ELF64_EHDR = {"e_phoff": (0x20, "Q"), "e_shoff": (0x28, "Q"), "e_phnum": (0x38, "H"),
              "e_shnum": (0x3C, "H"), "e_shentsize": (0x3A, "H"), "e_shstrndx": (0x3E, "H")}
ELF64_SHDR = {"sh_name": (0, "I"), "sh_type": (4, "I"), "sh_flags": (8, "Q"), "sh_addr": (16, "Q"),
              "sh_offset": (24, "Q"), "sh_size": (32, "Q"), "sh_link": (40, "I"),
              "sh_info": (44, "I"), "sh_addralign": (48, "Q"), "sh_entsize": (56, "Q")}


def read_bytes(path: str | os.PathLike) -> bytearray:
    with open(path, "rb") as fh:
        return bytearray(fh.read())


def write_mutant(dst: str | os.PathLike, data: bytes | bytearray) -> str:
    write_atomic(dst, bytes(data))
    os.chmod(dst, 0o755)
    return os.fspath(dst)


def set_ehdr(data: bytearray, field: str, value: int) -> bytearray:
    """Set one ELF64 (little-endian) file header field."""
    off, fmt = ELF64_EHDR[field]
    struct.pack_into("<" + fmt, data, off, value)
    return data


def section_index(data: bytes | bytearray, name: str) -> int:
    """The index of the first section called ``name`` (ELF64 little-endian)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    stroff, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 24)
    for i in range(shnum):
        nm, = struct.unpack_from("<I", data, shoff + i * shentsize)
        end = data.index(b"\0", stroff + nm)
        if data[stroff + nm: end].decode() == name:
            return i
    raise KeyError(name)


def section_field(data: bytes | bytearray, name: str, field: str) -> int:
    pos, _, _ = _section_header_pos(data, section_index(data, name))
    off, fmt = ELF64_SHDR[field]
    return struct.unpack_from("<" + fmt, data, pos + off)[0]


def set_section(data: bytearray, name: str, field: str, value: int) -> bytearray:
    """Set one field of section ``name``'s header (ELF64 little-endian)."""
    pos, _, _ = _section_header_pos(data, section_index(data, name))
    off, fmt = ELF64_SHDR[field]
    struct.pack_into("<" + fmt, data, pos + off, value)
    return data


def perf_records(data: bytes | bytearray) -> list[tuple[int, int, int]]:
    """``(file offset, type, size)`` of each record in a perf.data file's data section."""
    doff, dsize = struct.unpack_from("<QQ", data, 0x28)
    out, off = [], doff
    while off + 8 <= doff + dsize:
        typ, _misc, size = struct.unpack_from("<IHH", data, off)
        if size < 8:
            break
        out.append((off, typ, size))
        off += size
    return out


# ---------------------------------------------------------------------------- random mutants
# What a hostile user or a damaged disk gives: bits flipped, a file cut short, a size,
# offset or count field set to 0 or to a huge value.  Deterministic for a given rng.

WILD_VALUES = (0, 1, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x8000000000000000,
               0xFFFFFFFFFFFFFFFF, 0xFF00000000000000)


def _put_wild(data: bytearray, pos: int, width: int, rng) -> str:
    v = rng.choice(WILD_VALUES) if rng.random() < 0.8 else rng.getrandbits(8 * width)
    v &= (1 << (8 * width)) - 1
    data[pos: pos + width] = v.to_bytes(width, "little")
    return f"u{8 * width}@{pos:#x}={v:#x}"


def _elf_fields(data: bytes | bytearray, rng) -> tuple[int, int]:
    """(file position, width) of a random header field: ELF header or a section header."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if rng.random() < 0.25 or not shnum or shoff + shnum * shentsize > len(data):
        off, fmt = rng.choice(list(ELF64_EHDR.values()))
        return off, struct.calcsize(fmt)
    i = rng.randrange(shnum)
    off, fmt = rng.choice(list(ELF64_SHDR.values()))
    return shoff + i * shentsize + off, struct.calcsize(fmt)


def _perf_fields(data: bytes | bytearray, rng) -> tuple[int, int]:
    """(file position, width) of a random perf.data size/offset field: the file header's,
    a record header's size, or any aligned word inside a record."""
    if data[:8] != b"PERFILE2" or rng.random() < 0.2:
        return rng.choice(((0x08, 8), (0x10, 8), (0x18, 8), (0x20, 8), (0x28, 8), (0x30, 8),
                           (0x38, 8), (0x40, 8), (0x48, 8))) if data[:8] == b"PERFILE2" \
            else (8, 8)
    recs = perf_records(data)
    if not recs:
        return 0x30, 8
    off, _typ, size = rng.choice(recs)
    if rng.random() < 0.3:
        return off + 6, 2  # the record's size
    word = rng.randrange(1, max(2, size // 8))
    width = rng.choice((2, 4, 8))
    return min(off + 8 * word, len(data) - width), width


def random_mutant(data: bytes, kind: str, rng) -> tuple[bytes, str]:
    """One mutant of ``data`` (``kind`` "elf" or "perf") and a description of it."""
    d = bytearray(data)
    how = rng.choice(("flip", "flip", "field", "field", "field", "truncate", "zero-run"))
    if how == "flip":
        n = rng.choice((1, 1, 2, 4, 16))
        spots = sorted(rng.randrange(len(d)) for _ in range(n))
        for p in spots:
            d[p] ^= 1 << rng.randrange(8)
        return bytes(d), f"flip {n} bit(s) at {', '.join(hex(p) for p in spots[:4])}"
    if how == "field":
        pos, width = (_elf_fields if kind == "elf" else _perf_fields)(d, rng)
        desc = "field " + _put_wild(d, pos, width, rng)
        return bytes(d), desc
    if how == "truncate":
        n = rng.randrange(1, len(d))
        return bytes(d[:n]), f"truncate to {n} bytes"
    p = rng.randrange(len(d))
    n = rng.choice((8, 64, 512))
    d[p: p + n] = bytes(len(d[p: p + n]))
    return bytes(d), f"zero {n} bytes at {p:#x}"


def compressed_map_bomb(src: str | os.PathLike, dst: str | os.PathLike, inflated: int, *,
                        declared: int | None = None, algo: str = "zlib") -> str:
    """``src`` with its first block-map section replaced by a SHF_COMPRESSED one whose
    body inflates to ``inflated`` zero bytes (header ``ch_size``: ``declared``, default the
    truth): a decompression bomb of the size a hostile user chooses."""
    import zlib

    data = read_bytes(src)
    idx = section_index(data, ".llvm_bb_addr_map")
    zeros = bytes(min(inflated, 1 << 24))
    if algo == "zlib":
        c = zlib.compressobj(9)
        parts = [c.compress(zeros) for _ in range(inflated // len(zeros))]
        parts.append(c.compress(bytes(inflated % len(zeros))))
        body = b"".join(parts) + c.flush()
        ch_type = 1
    else:
        import zstandard
        body = zstandard.ZstdCompressor(level=19).compress(bytes(inflated))
        ch_type = 2
    chdr = struct.pack("<IIQQ", ch_type, 0, inflated if declared is None else declared, 1)
    replace_section_bytes(data, idx, chdr + body)
    pos, _, _ = _section_header_pos(data, idx)
    flags, = struct.unpack_from("<Q", data, pos + 8)
    struct.pack_into("<Q", data, pos + 8, flags | 0x800)  # SHF_COMPRESSED
    return write_mutant(dst, data)
