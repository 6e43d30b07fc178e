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
