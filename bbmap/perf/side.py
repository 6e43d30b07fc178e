"""Side records (MMAP, MMAP2, COMM, FORK, EXIT) -> :mod:`bbmap.perf.records` objects.

:func:`decode_side` unpacks the fixed fields with :mod:`struct` at offsets taken from
the construct declarations in :mod:`bbmap.formats.perfdata` (a profile can hold millions
of mmaps of a JIT's code); the tests hold it equal to a parse with those declarations
(``tests/oracles/side_construct.py``).  ``sample_type`` is that of the attr owning the sample_id
trailer, or -1 for none.
"""

from __future__ import annotations

import struct

from bbmap.formats import perfdata as fmt
from bbmap.perf.records import CommRecord, ExitRecord, ForkRecord, MmapRecord

_HDR = fmt.EVENT_HEADER_SIZE
_U64 = fmt.U64_STRUCT
_MMAP_HEAD = struct.Struct(fmt.struct_format(fmt.MmapHead))
_MMAP2_PROT = struct.Struct(fmt.struct_format(fmt.Mmap2Prot))
_MMAP2_INODE = struct.Struct(fmt.struct_format(fmt.Mmap2Inode))
_COMM_HEAD = struct.Struct(fmt.struct_format(fmt.CommHead))
_FORK = struct.Struct(fmt.struct_format(fmt.ForkExitBody))
# where the fields after the fixed parts start, counted from the record's first byte
_MMAP_NAME_AT = _HDR + fmt.MmapHead.sizeof()
_MMAP2_UNION_AT = _MMAP_NAME_AT
_MMAP2_PROT_AT = _MMAP2_UNION_AT + fmt.Mmap2Inode.sizeof()
_MMAP2_NAME_AT = _MMAP2_PROT_AT + fmt.Mmap2Prot.sizeof()
_COMM_NAME_AT = _HDR + fmt.CommHead.sizeof()
# minimum body bytes (after the header, before the trailer) of each side record
SIDE_MIN_BODY = {fmt.REC_MMAP: _MMAP_NAME_AT - _HDR, fmt.REC_MMAP2: _MMAP2_NAME_AT - _HDR,
                 fmt.REC_COMM: _COMM_NAME_AT - _HDR, fmt.REC_FORK: fmt.ForkExitBody.sizeof(),
                 fmt.REC_EXIT: fmt.ForkExitBody.sizeof()}
_MMAP_PROT_EXEC = fmt.PROT_READ | fmt.PROT_EXEC  # an MMAP record's prot unless MMAP_DATA


def _name(mv, start: int, end: int) -> str:
    return bytes(mv[start:end]).split(b"\0", 1)[0].decode("utf-8", "replace")


ADDRESS_SPACE_END = 1 << 64  # a mapping must end inside the 64-bit address space


class BadRecord(ValueError):
    """A side record whose fields cannot all be true (said in bbmap's words)."""


def _check_extent(start: int, length: int) -> None:
    if start + length > ADDRESS_SPACE_END:
        raise BadRecord(f"mapping at {start:#x} of length {length:#x} runs past the end of "
                        "the address space")


def _mmap_prot(misc: int) -> int:
    return fmt.PROT_READ if misc & fmt.MISC_MMAP_DATA else _MMAP_PROT_EXEC


def decode_side(typ: int, misc: int, mv, off: int, size: int, sample_type: int, seq: int):
    """A side record with ``struct`` (equal to the construct parse of
    ``tests/oracles/side_construct.py``).

    Raises ValueError when the record is too short for its body.
    """
    tsize = fmt.sample_id_size(sample_type) if sample_type >= 0 else 0
    body_end = off + size - tsize
    if body_end - off - _HDR < SIDE_MIN_BODY[typ]:
        raise ValueError("record too short")
    time = 0
    if tsize and sample_type & fmt.S_TIME:
        time = _U64.unpack_from(mv, body_end + fmt.sample_id_time_offset(sample_type))[0]
    cpumode = misc & fmt.MISC_CPUMODE_MASK
    if typ == fmt.REC_MMAP2 or typ == fmt.REC_MMAP:
        pid, tid, start, length, pgoff = _MMAP_HEAD.unpack_from(mv, off + _HDR)
        _check_extent(start, length)
        if typ == fmt.REC_MMAP:
            return MmapRecord(seq, time, pid, tid, start, length, pgoff,
                              _name(mv, off + _MMAP_NAME_AT, body_end), _mmap_prot(misc), 0,
                              None, cpumode, False)
        bid = inode = None
        if misc & fmt.MISC_MMAP_BUILD_ID:
            at = off + _MMAP2_UNION_AT
            n = min(mv[at + fmt.field_offset(fmt.Mmap2BuildId, "build_id_size")],
                    fmt.BUILD_ID_BYTES)
            first = at + fmt.field_offset(fmt.Mmap2BuildId, "build_id")
            bid = bytes(mv[first:first + n]).hex()
        else:
            inode = _MMAP2_INODE.unpack_from(mv, off + _MMAP2_UNION_AT)
        prot, flags = _MMAP2_PROT.unpack_from(mv, off + _MMAP2_PROT_AT)
        return MmapRecord(seq, time, pid, tid, start, length, pgoff,
                          _name(mv, off + _MMAP2_NAME_AT, body_end), prot, flags, bid, cpumode,
                          True, inode)
    if typ == fmt.REC_COMM:
        pid, tid = _COMM_HEAD.unpack_from(mv, off + _HDR)
        return CommRecord(seq, time, pid, tid, _name(mv, off + _COMM_NAME_AT, body_end),
                          bool(misc & fmt.MISC_COMM_EXEC))
    pid, ppid, tid, ptid, ftime = _FORK.unpack_from(mv, off + _HDR)
    cls = ForkRecord if typ == fmt.REC_FORK else ExitRecord
    return cls(seq, ftime, pid, ppid, tid, ptid)


