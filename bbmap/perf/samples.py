"""Vectorized SAMPLE decoding: one numpy pass per field over all records of one layout.

The construct declaration (:func:`bbmap.formats.perfdata.sample_struct`) is the spec; it
costs tens of microseconds a record.  Here every field is read for all records at once:
a per-record cursor array advances field by field in the kernel's order, variable-length
parts (read groups, callchains, RAW, branch stacks, regs, stacks, AUX) advance it by their
own length, and every count is bounded by the bytes left in its record *before* it is
used, so a hostile ``nr`` can neither overflow nor allocate.  Records whose fields run
past their end are reported in ``bad`` and dropped by the caller with a diagnostic.
The tests prove this equal to the construct reference on generated records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bbmap.arrays import expand_ranges
from bbmap.formats import perfdata as fmt


@dataclass(frozen=True)
class SampleLayout:
    """Everything that decides where the fields of a SAMPLE record sit."""

    sample_type: int
    read_format: int = 0
    branch_sample_type: int = 0
    nr_regs_user: int = 0
    nr_regs_intr: int = 0
    branch_counters: bool = False

    @classmethod
    def of(cls, attr, branch_counters: bool = False) -> SampleLayout:
        return cls(attr.sample_type, attr.read_format, attr.branch_sample_type,
                   bin(attr.sample_regs_user).count("1"), bin(attr.sample_regs_intr).count("1"),
                   branch_counters)

    def construct(self):
        return fmt.sample_struct(self.sample_type, self.read_format, self.branch_sample_type,
                                 self.nr_regs_user, self.nr_regs_intr, self.branch_counters)


@dataclass
class DecodedSamples:
    """Columns for ``n`` records (invalid ones flagged in ``bad``, their values zero)."""

    ip: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    time: np.ndarray
    period: np.ndarray
    id: np.ndarray  # ID or IDENTIFIER, 0 when absent
    cpu: np.ndarray
    addr: np.ndarray
    bad: np.ndarray  # bool
    br_ptr: np.ndarray  # n+1, bad records have no entries
    br_from: np.ndarray
    br_to: np.ndarray
    br_flags: np.ndarray
    br_hw_idx: np.ndarray  # -1 when not recorded
    callchain_nr: np.ndarray


_BYTE_OFFS = np.arange(8, dtype=np.int64)
_U64_WIDTH = 8
_FROM_AT, _TO_AT, _FLAGS_AT = (fmt.field_offset(fmt.BranchEntry, f)
                               for f in ("from_", "to", "flags"))


def _gather(buf: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Little-endian ``dtype`` at byte positions ``pos`` (all in bounds).

    Aligned positions (the usual case: perf records are 8-byte multiples) index a
    typed view of the buffer directly; otherwise the bytes are gathered and reinterpreted.
    """
    if len(pos) == 0:
        return np.zeros(0, dtype)
    usable = len(buf) - len(buf) % width
    if not (pos & (width - 1)).any():
        return buf[:usable].view(dtype)[pos // width]
    b = buf[pos[:, None] + _BYTE_OFFS[:width]]
    return b.view(dtype).reshape(-1)


def gather_u64(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return _gather(buf, pos, 8, "<u8")


def gather_u32(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return _gather(buf, pos, 4, "<u4")


def gather_u16(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return _gather(buf, pos, 2, "<u2")


class _Cursor:
    """Per-record read position with bounds: reads past a record's end mark it bad.

    While every field so far had the same size in every record (the fixed fields before
    the first variable-length part) the position is one number, ``fixed`` bytes past each
    record's start, and a field every record has room for (``room``: the shortest record)
    is read with no bounds check and no position array; the first variable advance turns
    the position into an array."""

    def __init__(self, buf: np.ndarray, offs: np.ndarray, end: np.ndarray) -> None:
        self.buf = buf
        self.start = offs
        self.end = end
        self.fixed = fmt.EVENT_HEADER_SIZE  # position = start + fixed, while _pos is None
        self._pos: np.ndarray | None = None
        self.room = int((end - offs).min()) if len(offs) else 0
        self.bad = np.zeros(len(offs), dtype=bool)
        # u8 index of each record's start, when every start is 8-aligned (perf's records
        # are 8-byte multiples): a fixed u8 field is then one gather, no division
        w = _U64_WIDTH
        self._q = offs // w if len(offs) and not (offs % w).any() else None
        self._u64 = buf[:len(buf) - len(buf) % w].view("<u8") if self._q is not None else None

    @property
    def pos(self) -> np.ndarray:
        return self.start + self.fixed if self._pos is None else self._pos

    def _safe(self, width: int) -> np.ndarray:
        pos = self.pos
        over = pos + width > self.end
        if over.any():
            self.bad |= over
            return np.where(over, self.start, pos)
        return pos

    def u64(self) -> np.ndarray:
        if self._pos is None and self.fixed + 8 <= self.room:  # in every record: no checks
            at = self.fixed
            self.fixed += 8
            if self._u64 is not None and not at % _U64_WIDTH:
                return self._u64[self._q + at // _U64_WIDTH]
            return gather_u64(self.buf, self.start + at)
        v = gather_u64(self.buf, self._safe(8))
        self.skip(8)
        return np.where(self.bad, np.uint64(0), v)

    def u32(self) -> np.ndarray:
        v = gather_u32(self.buf, self._safe(4))
        self.skip(4)
        return np.where(self.bad, np.uint32(0), v)

    def skip(self, nbytes: int) -> None:
        if self._pos is None:
            self.fixed += nbytes
        else:
            self._pos = self._pos + nbytes

    def count(self, raw: np.ndarray, unit: int) -> np.ndarray:
        """``raw`` items of ``unit`` bytes each, as int64, bounded by the bytes left."""
        left = np.maximum(self.end - self.pos, 0).astype(np.uint64)
        ok = raw <= left // np.uint64(max(unit, 1))
        if not ok.all():
            self.bad |= ~ok
            raw = np.where(ok, raw, np.uint64(0))
        return raw.astype(np.int64)

    def advance(self, nbytes: np.ndarray) -> None:
        self._pos = self.pos + nbytes


RUN_MIN_ENTRIES = 64  # entries per run below which gathering beats a strided copy per run
# (a run costs one Python step of a few microseconds; a gathered entry ~30 ns)


def branch_columns(buf: np.ndarray, br_start: np.ndarray, br_nr: np.ndarray, total: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (from, to, flags) columns of the branch stacks at byte offsets ``br_start``
    (``br_nr`` entries each, ``total`` in all; all in bounds), in stack order.

    Consecutive samples of one event and stack depth are equally spaced in the file (an
    LBR is nearly always full: every record the same size), so a run of them is one
    strided view of the buffer -- (samples, entries, fields) with the record size as
    the outer stride -- copied field by field, without building an index of every entry
    and gathering through it.  Runs break where the depth or the spacing changes; when
    they are too short to pay (:data:`RUN_MIN_ENTRIES`) the entries are gathered."""
    out = [np.empty(total, np.uint64) for _ in range(3)]
    live = np.flatnonzero(br_nr > 0)
    b, k = br_start[live].astype(np.int64), br_nr[live].astype(np.int64)
    m = len(live)
    if not m:
        return out[0], out[1], out[2]
    brk = np.zeros(m, bool)
    brk[0] = True
    if m > 1:
        brk[1:] = k[1:] != k[:-1]
    d = np.diff(b)  # d[i - 1]: spacing between live samples i - 1 and i
    if m > 2:
        brk[2:] |= d[1:] != d[:-1]
    starts = np.flatnonzero(brk)
    if len(starts) * RUN_MIN_ENTRIES > total or (d <= 0).any():  # ragged stacks (or
        # records not in file order): gather every entry
        ent = expand_ranges(br_start, br_nr, fmt.BRANCH_ENTRY_SIZE)
        return (gather_u64(buf, ent + _FROM_AT), gather_u64(buf, ent + _TO_AT),
                gather_u64(buf, ent + _FLAGS_AT))
    ends = np.append(starts[1:], m)
    at = 0
    size, fields = fmt.BRANCH_ENTRY_SIZE, (_FROM_AT, _TO_AT, _FLAGS_AT)
    for s0, e0, depth, first in zip(starts.tolist(), ends.tolist(), k[starts].tolist(),
                                    b[starts].tolist()):
        rows = e0 - s0
        stride = int(d[s0]) if rows > 1 else size * depth
        n = rows * depth
        for col, off in zip(out, fields):
            view = np.ndarray((rows, depth), dtype="<u8", buffer=buf, offset=first + off,
                              strides=(stride, size))
            col[at:at + n].reshape(rows, depth)[...] = view
        at += n
    return out[0], out[1], out[2]


def decode_samples(buf: np.ndarray, offs: np.ndarray, layout: SampleLayout,
                   want_branches: bool = True) -> DecodedSamples:
    """Decode SAMPLE records starting at byte offsets ``offs`` of ``buf`` (all one layout).

    Each record's header must lie inside ``buf`` and its ``size`` must not run past it
    (the record walker guarantees both).
    """
    offs = np.asarray(offs, dtype=np.int64)
    n = len(offs)
    size = gather_u16(buf, offs + fmt.SIZE_AT).astype(np.int64)
    c = _Cursor(buf, offs, offs + size)
    st, rf = layout.sample_type, layout.read_format
    z64 = np.zeros(n, np.uint64)
    ident = c.u64() if st & fmt.S_IDENTIFIER else z64
    ip = c.u64() if st & fmt.S_IP else z64
    if st & fmt.S_TID:
        v = c.u64()
        pid = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
        tid = (v >> np.uint64(32)).astype(np.uint32).view(np.int32)
    else:
        pid = np.full(n, -1, np.int32)
        tid = np.full(n, -1, np.int32)
    time = c.u64() if st & fmt.S_TIME else z64
    addr = c.u64() if st & fmt.S_ADDR else z64
    sid = c.u64() if st & fmt.S_ID else ident
    if st & fmt.S_STREAM_ID:
        c.skip(8)
    cpu = (c.u64() & np.uint64(0xFFFFFFFF)).astype(np.uint32) if st & fmt.S_CPU \
        else np.zeros(n, np.uint32)
    period = c.u64() if st & fmt.S_PERIOD else z64
    if st & fmt.S_READ:
        extra = 8 * (bool(rf & fmt.R_TOTAL_TIME_ENABLED) + bool(rf & fmt.R_TOTAL_TIME_RUNNING))
        per_value = 8 * (1 + bool(rf & fmt.R_ID) + bool(rf & fmt.R_LOST))
        if rf & fmt.R_GROUP:
            nr = c.u64()
            c.skip(extra)
            c.advance(c.count(nr, per_value) * per_value)
        else:
            c.skip(extra + per_value)
    cc_nr = np.zeros(n, np.int64)
    if st & fmt.S_CALLCHAIN:
        cc_nr = c.count(c.u64(), 8)
        c.advance(cc_nr * 8)
    if st & fmt.S_RAW:
        c.advance(c.count(c.u32().astype(np.uint64), 1))
    br_nr = np.zeros(n, np.int64)
    br_start = c.pos
    hw_idx = np.full(n, -1, np.int64)
    if st & fmt.S_BRANCH_STACK:
        raw_nr = c.u64()
        if layout.branch_sample_type & fmt.BR_HW_INDEX:
            hw_idx = c.u64().view(np.int64)
        per = fmt.BRANCH_ENTRY_SIZE + (fmt.BRANCH_COUNTER_SIZE if layout.branch_counters else 0)
        br_nr = c.count(raw_nr, per)
        br_start = c.pos
        c.advance(br_nr * per)
    for bit, nregs in ((fmt.S_REGS_USER, layout.nr_regs_user), (fmt.S_STACK_USER, -1),
                       (fmt.S_WEIGHT_TYPE, 0), (fmt.S_DATA_SRC, 0), (fmt.S_TRANSACTION, 0),
                       (fmt.S_REGS_INTR, layout.nr_regs_intr), (fmt.S_PHYS_ADDR, 0),
                       (fmt.S_CGROUP, 0), (fmt.S_DATA_PAGE_SIZE, 0), (fmt.S_CODE_PAGE_SIZE, 0),
                       (fmt.S_AUX, -2)):
        if not st & bit:
            continue
        if bit in (fmt.S_REGS_USER, fmt.S_REGS_INTR):
            abi = c.u64()
            c.advance(np.where(abi != 0, 8 * nregs, 0))
        elif nregs == -1:  # STACK_USER: size, data[size], dyn_size if size
            sz = c.count(c.u64(), 1)
            c.advance(sz)
            c.advance(np.where(sz != 0, 8, 0))
        elif nregs == -2:  # AUX: size, data[size]
            c.advance(c.count(c.u64(), 1))
        else:
            c.skip(8)
    c.bad |= c.pos > c.end
    bad = c.bad
    if bad.any():
        br_nr = np.where(bad, 0, br_nr)
    br_ptr = np.zeros(n + 1, np.int64)
    if st & fmt.S_BRANCH_STACK:  # (without, every count is 0)
        np.cumsum(br_nr, out=br_ptr[1:])
    total = int(br_ptr[-1])
    if total and want_branches:
        br_from, br_to, br_flags = branch_columns(buf, br_start, br_nr, total)
    else:
        br_from = br_to = br_flags = np.zeros(0, np.uint64)
        if not want_branches:
            br_ptr = np.zeros(n + 1, np.int64)
    return DecodedSamples(ip=ip, pid=pid, tid=tid, time=time, period=period, id=sid, cpu=cpu,
                          addr=addr, bad=bad, br_ptr=br_ptr, br_from=br_from, br_to=br_to,
                          br_flags=br_flags, br_hw_idx=hw_idx, callchain_nr=cc_nr)


def sample_ids(buf: np.ndarray, offs: np.ndarray, sample_type: int) -> np.ndarray:
    """The event id of each SAMPLE record (``id_pos`` rule), or zeros when it has none."""
    pos = fmt.id_pos(sample_type)
    if pos < 0 or len(offs) == 0:
        return np.zeros(len(offs), np.uint64)
    at = np.asarray(offs, np.int64) + fmt.EVENT_HEADER_SIZE + 8 * pos
    size = gather_u16(buf, np.asarray(offs, np.int64) + fmt.SIZE_AT).astype(np.int64)
    ok = at + 8 <= np.asarray(offs, np.int64) + size
    v = gather_u64(buf, np.where(ok, at, offs))
    return np.where(ok, v, np.uint64(0))
