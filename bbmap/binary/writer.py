"""Encode function records into map-section bytes: every version, feature and ``.bb_info``.

Used by tests (round trips, hypothesis), benches (clang-sized maps) and mutation
tests.  :func:`encode_map` builds through the construct declarations -- the spec --
and :func:`encode_map_fast` writes the same bytes with plain Python for big maps;
the tests prove the two equal.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from bbmap.errors import BBMapError
from bbmap.formats import elf
from bbmap.formats.bbaddrmap import (
    FEAT_BB_FREQ,
    FEAT_BB_HASH,
    FEAT_BR_PROB,
    FEAT_CALLSITE_OFFSETS,
    FEAT_FUNC_ENTRY_COUNT,
    FEAT_MULTI_BB_RANGE,
    FEAT_OMIT_BB_ENTRIES,
    FEAT_PGO_ANALYSIS,
    FEAT_PGO_BLOCKS,
    FEAT_POST_LINK_CFG,
    MAX_VERSION,
    SHT_LLVM_BB_ADDR_MAP,
    SHT_LLVM_BB_ADDR_MAP_V0,
    VERSION_BLOCK_IDS,
    VERSION_FEATURE_U16,
    VERSION_UNVERSIONED,
    bb_info_struct,
    callsite_deltas,
    effective_feature,
    function_struct,
)
from bbmap.formats.leb128 import encode_uleb
from bbmap.model import VERSION_BB_INFO, FunctionRecord, RangeRecord


def _layout(fn: FunctionRecord, version: int | None, sh_type: int) -> int:
    if version == VERSION_BB_INFO or fn.version == VERSION_BB_INFO and version is None:
        return VERSION_BB_INFO
    if sh_type == SHT_LLVM_BB_ADDR_MAP_V0:
        return VERSION_UNVERSIONED
    v = fn.version if version is None else version
    if not 1 <= v <= MAX_VERSION:
        raise BBMapError(f"cannot encode version {v} in a SHT_LLVM_BB_ADDR_MAP section")
    return v


def _encoded_blocks(rng: RangeRecord, version: int, eff: int) -> list[dict]:
    out, prev_end = [], 0
    for b in rng.blocks:
        cs = list(b.callsites) if eff & FEAT_CALLSITE_OFFSETS else []
        last = cs[-1] if cs else 0
        rel = b.offset if version == VERSION_UNVERSIONED else b.offset - prev_end
        size_field = b.size - last if version >= VERSION_BLOCK_IDS else b.size
        if rel < 0 or size_field < 0:
            raise BBMapError(f"block {b.id}: offset/size not encodable (blocks overlap)")
        out.append({"id": b.id if version >= VERSION_BLOCK_IDS else None, "offset": rel,
                    "callsites": callsite_deltas(cs) if eff & FEAT_CALLSITE_OFFSETS else None,
                    "size": size_field, "metadata": b.md,
                    "hash": b.hash if eff & FEAT_BB_HASH else None})
        prev_end = b.offset + b.size
    return out


def function_container(fn: FunctionRecord, version: int) -> dict:
    """The construct input for one record (offsets relative, callsites as deltas)."""
    feature = fn.feature if version >= 1 else 0
    eff = effective_feature(version, feature)
    if len(fn.ranges) != 1 and not eff & FEAT_MULTI_BB_RANGE:
        raise BBMapError(f"function {fn.address:#x}: {len(fn.ranges)} ranges need feature bit "
                         f"{FEAT_MULTI_BB_RANGE.bit_length() - 1}")
    omit = eff & FEAT_OMIT_BB_ENTRIES
    ranges = []
    for r in fn.ranges:
        declared = len(r.blocks) if r.num_blocks is None else r.num_blocks
        ranges.append({"base_address": r.base, "num_blocks": declared,
                       "blocks": None if omit else _encoded_blocks(r, version, eff)})
    pgo = None
    if eff & FEAT_PGO_ANALYSIS:
        post = eff & FEAT_POST_LINK_CFG
        blocks = [b for r in fn.ranges for b in r.blocks] if not omit else []
        pgo = {"entry_count": fn.entry_count if eff & FEAT_FUNC_ENTRY_COUNT else None,
               "blocks": [{"freq": b.freq if eff & FEAT_BB_FREQ else None,
                           "postlink_freq": b.postlink_freq if post else None,
                           "successors": [{"id": s[0], "probability": s[1],
                                           "postlink_freq": s[2] if post else None}
                                          for s in b.successors] if eff & FEAT_BR_PROB else None}
                          for b in blocks] if eff & FEAT_PGO_BLOCKS else None}
    return {"version": version, "feature": feature, "num_ranges": None, "ranges": ranges,
            "pgo": pgo}


def bb_info_container(fn: FunctionRecord) -> dict:
    blocks = [b for r in fn.ranges for b in r.blocks]
    if not blocks:
        raise BBMapError(f"function {fn.address:#x}: .bb_info needs at least one block")
    return {"address": fn.address, "num_blocks": len(blocks), "entry_size": blocks[0].size,
            "entry_metadata": blocks[0].md,
            "blocks": [{"offset": b.offset, "size": b.size, "metadata": b.md}
                       for b in blocks[1:]]}


def encode_map(records: Iterable[FunctionRecord], version: int | None = None,
               sh_type: int = SHT_LLVM_BB_ADDR_MAP, address_size: int = 8,
               little: bool = True) -> bytes:
    """Section bytes for ``records`` through the construct declarations.

    ``version`` overrides each record's own version (``VERSION_BB_INFO`` writes the
    ``.bb_info`` layout); ``sh_type`` 0x6fff4c08 writes the unversioned layout.
    """
    parts = []
    for fn in records:
        v = _layout(fn, version, sh_type)
        if v == VERSION_BB_INFO:
            parts.append(bb_info_struct(address_size, little).build(bb_info_container(fn)))
        else:
            st = function_struct(v != 0, address_size, little)
            parts.append(st.build(function_container(fn, v)))
    return b"".join(parts)


def encode_map_fast(records: Iterable[FunctionRecord], version: int | None = None,
                    sh_type: int = SHT_LLVM_BB_ADDR_MAP, address_size: int = 8,
                    little: bool = True) -> bytes:
    """The same bytes as :func:`encode_map`, without construct (for million-block maps)."""
    end = "<" if little else ">"
    addr = struct.Struct(end + ("Q" if address_size == 8 else "I")).pack
    u16 = struct.Struct(end + "H").pack
    u64 = struct.Struct(end + "Q").pack
    leb = encode_uleb
    out = bytearray()
    for fn in records:
        v = _layout(fn, version, sh_type)
        if v == VERSION_BB_INFO:
            c = bb_info_container(fn)
            out += addr(c["address"]) + leb(c["num_blocks"]) + leb(c["entry_size"])
            out += leb(c["entry_metadata"])
            for b in c["blocks"]:
                out += leb(b["offset"]) + leb(b["size"]) + leb(b["metadata"])
            continue
        c = function_container(fn, v)
        eff = effective_feature(v, c["feature"])
        if v:
            out.append(v)
            out += u16(c["feature"]) if v >= VERSION_FEATURE_U16 else bytes([c["feature"]])
        if eff & FEAT_MULTI_BB_RANGE:
            out += leb(len(c["ranges"]))
        for r in c["ranges"]:
            out += addr(r["base_address"]) + leb(r["num_blocks"])
            for b in r["blocks"] or ():
                if v >= VERSION_BLOCK_IDS:
                    out += leb(b["id"])
                out += leb(b["offset"])
                if eff & FEAT_CALLSITE_OFFSETS:
                    out += leb(len(b["callsites"]))
                    for d in b["callsites"]:
                        out += leb(d)
                out += leb(b["size"]) + leb(b["metadata"])
                if eff & FEAT_BB_HASH:
                    out += u64(b["hash"])
        p = c["pgo"]
        if p is not None:
            if eff & FEAT_FUNC_ENTRY_COUNT:
                out += leb(p["entry_count"])
            for pb in p["blocks"] or ():
                if eff & FEAT_BB_FREQ:
                    out += leb(pb["freq"])
                if eff & FEAT_POST_LINK_CFG:
                    out += leb(pb["postlink_freq"])
                if eff & FEAT_BR_PROB:
                    out += leb(len(pb["successors"]))
                    for s in pb["successors"]:
                        out += leb(s["id"]) + leb(s["probability"])
                        if eff & FEAT_POST_LINK_CFG:
                            out += leb(s["postlink_freq"])
    return bytes(out)


def write_elf(map_bytes: bytes, *, sh_type: int = SHT_LLVM_BB_ADDR_MAP,
              map_name: str = ".llvm_bb_addr_map", relocatable: bool = False,
              text_addr: int = 0x401000, text_size: int = 0x1000,
              functions: Iterable[tuple[str, int, int]] = (),
              relocations: Iterable[tuple[int, int]] = ()) -> bytes:
    """A minimal little-endian ELF64 x86-64 file holding one map section (for tests).

    ``functions`` are ``(name, address, size)`` STT_FUNC symbols in ``.text``;
    ``relocations`` (only with ``relocatable``) are ``(r_offset, addend)`` R_X86_64_64
    entries against the ``.text`` section symbol, in ``.rela<map_name>``.
    """
    functions, relocations = list(functions), list(relocations)
    if relocatable:
        text_addr = 0
    names = [b"", b".text", map_name.encode()]
    if relocatable:
        names.append(b".rela" + map_name.encode())
    names += [b".symtab", b".strtab", b".shstrtab"]
    shstr = b"\0".join(names) + b"\0"
    name_off = [shstr.index(n + b"\0") if n else 0 for n in names]
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n, _, _ in functions)
    text = 1  # section index of .text
    sym = struct.Struct(elf.struct_format("Elf_Sym", 64, True))
    syms = [sym.pack(0, 0, 0, 0, 0, 0),
            sym.pack(0, elf.STT_SECTION, 0, text, 0, 0)]  # symbol 1: the .text section
    off = 1
    for n, addr, size in functions:
        syms.append(sym.pack(off, elf.STB_GLOBAL << elf.ST_BIND_SHIFT | elf.STT_FUNC, 0, text,
                             addr, size))
        off += len(n) + 1
    symtab = b"".join(syms)
    rela_entry = struct.Struct(elf.struct_format("Elf_Rela", 64, True))
    rela = b"".join(rela_entry.pack(o, 1 << elf.R_INFO_SYM_SHIFT[64] | elf.R_X86_64_64, a)
                    for o, a in relocations)
    idx = {n: i for i, n in enumerate(names)}
    i_sym, i_str = idx[b".symtab"], idx[b".strtab"]
    nlocal = 2  # sh_info of .symtab: the null and the section symbol are local
    code = elf.SHF_ALLOC | elf.SHF_EXECINSTR
    body = [(b".text", elf.SHT_PROGBITS, code, text_addr, b"\xcc" * text_size, 0, 0, 16, 0),
            (map_name.encode(), sh_type, elf.SHF_LINK_ORDER, 0, map_bytes, text, 0, 1, 0)]
    if relocatable:
        body.append((b".rela" + map_name.encode(), elf.SHT_RELA, elf.SHF_INFO_LINK, 0, rela,
                     i_sym, 2, 8, rela_entry.size))
    body += [(b".symtab", elf.SHT_SYMTAB, 0, 0, symtab, i_str, nlocal, 8, sym.size),
             (b".strtab", elf.SHT_STRTAB, 0, 0, strtab, 0, 0, 1, 0),
             (b".shstrtab", elf.SHT_STRTAB, 0, 0, shstr, 0, 0, 1, 0)]
    ehdr = struct.Struct(elf.struct_format("Elf_Ehdr", 64, True))
    shdr = struct.Struct(elf.struct_format("Elf_Shdr", 64, True))
    out = bytearray(ehdr.size)
    headers = [bytes(shdr.size)]
    for n, t, flags, addr, data, link, info, align, entsize in body:
        while len(out) % 8:
            out.append(0)
        headers.append(shdr.pack(name_off[idx[n]], t, flags, addr, len(out), len(data), link,
                                 info, align, entsize))
        out += data
    while len(out) % 8:
        out.append(0)
    shoff = len(out)
    out += b"".join(headers)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # ELFCLASS64, LSB, EV_CURRENT
    out[:ehdr.size] = ehdr.pack(ident, elf.ET_REL if relocatable else elf.ET_EXEC,
                                elf.EM_X86_64, 1, 0 if relocatable else text_addr, 0, shoff, 0,
                                ehdr.size, 0, 0, shdr.size, len(headers), len(headers) - 1)
    return bytes(out)
