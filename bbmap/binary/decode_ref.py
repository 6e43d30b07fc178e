"""The reference decoder: one construct parse per function record.

Slow (tens of microseconds a block) but a direct reading of the declarations in
:mod:`bbmap.formats.bbaddrmap`; the fast decoder is proven equal to it.  Functions
decoded before a fault are kept; the fault becomes an error diagnostic naming the
file, the section and the byte offset.
"""

from __future__ import annotations

import io

from bbmap.binary.mapinput import KIND_BB_INFO, KIND_V0, MapInput, Notes, check_record
from bbmap.errors import Diagnostic
from bbmap.formats import leb128
from bbmap.formats.bbaddrmap import (
    FEAT_FUNC_ENTRY_COUNT,
    METADATA_MAX,
    UINT32_MAX,
    VERSION_BLOCK_IDS,
    VERSION_UNVERSIONED,
    bb_info_struct,
    callsite_offsets,
    function_struct,
)
from bbmap.model import (
    VERSION_BB_INFO,
    BlockMap,
    BlockMapBuilder,
    BlockRecord,
    FunctionRecord,
    RangeRecord,
)


def _md_checked(md: int, offset: int) -> int:
    if md > METADATA_MAX:
        raise leb128.map_fault(f"invalid encoding for BBEntry::Metadata: {md:#x}", offset)
    return md


def function_record(c, inp: MapInput, notes: Notes) -> FunctionRecord:
    """Turn one parsed construct container into a :class:`FunctionRecord`."""
    version, feature, eff = c.version, c.feature, c.eff
    md_or = 0
    ranges = []
    pgo_blocks = list(c.pgo.blocks) if c.pgo is not None and c.pgo.blocks is not None else []
    k = 0
    for r in c.ranges:
        base, section = inp.relocs.resolve(r.address_offset, r.base_address)
        blocks = []
        prev_end = 0
        for i, e in enumerate(r.blocks or ()):
            cs = callsite_offsets(e.callsites) if e.callsites is not None else []
            if cs and cs[-1] > UINT32_MAX:
                raise leb128.map_fault(f"callsite offset {cs[-1]:#x} exceeds UINT32_MAX", c.offset)
            size = e.size + (cs[-1] if cs else 0)
            off = e.offset if version == VERSION_UNVERSIONED else e.offset + prev_end
            prev_end = off + size
            md_or |= e.metadata
            b = BlockRecord(id=i if version < VERSION_BLOCK_IDS else e.id, offset=off, size=size,
                            md=_md_checked(e.metadata, c.offset),
                            hash=e.hash or 0, callsites=tuple(cs))
            if pgo_blocks:
                p = pgo_blocks[k]
                b.freq = p.freq or 0
                b.postlink_freq = p.postlink_freq or 0
                b.successors = tuple((s.id, s.probability, s.postlink_freq or 0)
                                     for s in p.successors or ())
            k += 1
            blocks.append(b)
        ranges.append(RangeRecord(base=base, blocks=blocks, section=section,
                                  num_blocks=r.num_blocks))
    check_record(notes, c.offset, version, feature, md_or)
    entry = c.pgo.entry_count if c.pgo is not None and c.pgo.entry_count is not None else 0
    return FunctionRecord(address=ranges[0].base, ranges=ranges, version=version,
                          feature=feature if version >= 1 else 0, map_offset=c.offset,
                          entry_count=entry if eff & FEAT_FUNC_ENTRY_COUNT else 0)


def bb_info_record(c, inp: MapInput) -> FunctionRecord:
    base, section = inp.relocs.resolve(c.address_offset, c.address)
    blocks = [BlockRecord(id=0, offset=0, size=c.entry_size,
                          md=_md_checked(c.entry_metadata, c.offset))]
    for i, e in enumerate(c.blocks, start=1):
        blocks.append(BlockRecord(id=i, offset=e.offset, size=e.size,
                                  md=_md_checked(e.metadata, c.offset)))
    return FunctionRecord(address=base, ranges=[RangeRecord(base=base, blocks=blocks,
                                                             section=section)],
                          version=VERSION_BB_INFO, map_offset=c.offset)


def decode_records(inp: MapInput, start: int = 0, limit: int | None = None
                   ) -> tuple[list[FunctionRecord], list[Diagnostic]]:
    """Decode records from byte ``start`` (at most ``limit``); stop at the first fault."""
    notes = Notes(inp)
    diags: list[Diagnostic] = []
    out: list[FunctionRecord] = []
    data = inp.data
    stream = io.BytesIO(data)
    stream.seek(start)
    if inp.kind == KIND_BB_INFO:
        st = bb_info_struct(inp.address_size, inp.little)
    else:
        st = function_struct(inp.kind != KIND_V0, inp.address_size, inp.little)
    pos = start
    while pos < len(data) and (limit is None or len(out) < limit):
        try:
            c = st.parse_stream(stream)
            rec = (bb_info_record(c, inp) if inp.kind == KIND_BB_INFO
                   else function_record(c, inp, notes))
        except leb128.MapFault as e:  # construct's type, declared on first use
            diags.append(Diagnostic(e.message, inp.file, inp.label, e.offset, "error"))
            break
        out.append(rec)
        pos = stream.tell()
    return out, notes.diagnostics() + diags


def decode_section_ref(inp: MapInput) -> tuple[BlockMap, list[Diagnostic]]:
    records, diags = decode_records(inp)
    builder = BlockMapBuilder([inp.source] if inp.source is not None else [])
    for r in records:
        builder.add(r)
    return builder.build(), diags
