"""Side records (MMAP, MMAP2, COMM, FORK, EXIT) parsed with the construct declarations of
``bbmap.formats.perfdata``: the reference ``bbmap.perf.side.decode_side`` (the struct fast
path) is held equal to (tests/test_perf_side.py)."""

from __future__ import annotations

from bbmap.formats import perfdata as fmt
from bbmap.perf.records import CommRecord, ExitRecord, ForkRecord, MmapRecord
from bbmap.perf.side import _HDR, _check_extent, _mmap_prot


def decode_side_construct(typ: int, misc: int, mv, off: int, size: int, sample_type: int,
                          seq: int):
    """The reference: the same record decoded with the construct declarations."""
    tsize = fmt.sample_id_size(sample_type) if sample_type >= 0 else 0
    body_end = off + size - tsize
    time = 0
    if tsize and body_end >= off + _HDR:
        t = fmt.sample_id_struct(sample_type).parse(bytes(mv[body_end:off + size]))
        time = t.time or 0
    body = bytes(mv[off + _HDR:max(body_end, off + _HDR)])
    cpumode = misc & fmt.MISC_CPUMODE_MASK
    if typ == fmt.REC_MMAP2:
        b = fmt.Mmap2Body.parse(body, misc=misc)
        _check_extent(b.start, b.len)
        bid = inode = None
        if misc & fmt.MISC_MMAP_BUILD_ID:
            bid = b.u.build_id[:min(b.u.build_id_size, fmt.BUILD_ID_BYTES)].hex()
        else:
            inode = (b.u.maj, b.u.min, b.u.ino, b.u.ino_generation)
        return MmapRecord(seq, time, b.pid, b.tid, b.start, b.len, b.pgoff, b.filename,
                          b.prot, b.flags, bid, cpumode, True, inode)
    if typ == fmt.REC_MMAP:
        b = fmt.MmapBody.parse(body)
        _check_extent(b.start, b.len)
        return MmapRecord(seq, time, b.pid, b.tid, b.start, b.len, b.pgoff, b.filename,
                          _mmap_prot(misc), 0, None, cpumode, False)
    if typ == fmt.REC_COMM:
        b = fmt.CommBody.parse(body)
        return CommRecord(seq, time, b.pid, b.tid, b.comm, bool(misc & fmt.MISC_COMM_EXEC))
    b = fmt.ForkExitBody.parse(body)
    cls = ForkRecord if typ == fmt.REC_FORK else ExitRecord
    return cls(seq, b.time, b.pid, b.ppid, b.tid, b.ptid)
