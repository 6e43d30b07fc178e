"""What the perf reader hands to the rest of bbmap: side records and columnar sample batches.

Side records are few (one per mmap/comm/fork/exit) and kept as small objects; samples are
many and come as numpy columns in bounded-size batches.  ``seq`` is the record's position
in the (decompressed) record stream, so order is known even where ``time`` is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bbmap.formats.perfdata import (  # noqa: F401 - the cpumode values re-exported
    CPUMODE_GUEST_KERNEL,
    CPUMODE_GUEST_USER,
    CPUMODE_HYPERVISOR,
    CPUMODE_KERNEL,
    CPUMODE_UNKNOWN,
    CPUMODE_USER,
    PROT_EXEC,
)


@dataclass(frozen=True)
class MmapRecord:
    seq: int
    time: int  # 0 when not recorded (or synthesized at record start)
    pid: int
    tid: int
    start: int
    length: int
    pgoff: int
    filename: str
    prot: int  # PROT_* (MMAP2); for MMAP: PROT_EXEC unless misc has MMAP_DATA
    flags: int  # MAP_* (MMAP2); 0 for MMAP
    build_id: str | None  # hex, from MMAP2 with MMAP_BUILD_ID
    cpumode: int
    is_mmap2: bool
    # (maj, min, ino, ino_generation) of the mapped file, from MMAP2 without a build-id:
    # which file it was, even when the name now holds another (a rebuilt binary)
    inode: tuple[int, int, int, int] | None = None

    @property
    def is_exec(self) -> bool:
        return bool(self.prot & PROT_EXEC)


@dataclass(frozen=True)
class CommRecord:
    seq: int
    time: int
    pid: int
    tid: int
    comm: str
    is_exec: bool


@dataclass(frozen=True)
class _TaskRecord:
    """FORK and EXIT share their body (perf's ``fork_event``)."""

    seq: int
    time: int
    pid: int
    ppid: int
    tid: int
    ptid: int


@dataclass(frozen=True)
class ForkRecord(_TaskRecord):
    pass


@dataclass(frozen=True)
class ExitRecord(_TaskRecord):
    pass


SideRecord = MmapRecord | CommRecord | ForkRecord | ExitRecord


@dataclass
class SideRecords:
    """A run of non-sample records, in stream order."""

    records: list[SideRecord] = field(default_factory=list)


def _z(dtype: str) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@dataclass
class SampleBatch:
    """Up to a few tens of thousands of samples as columns.

    Branch stacks are CSR: sample ``i`` has entries ``br_ptr[i]:br_ptr[i+1]``, newest first
    (entry 0 is the most recent taken branch), exactly as the kernel stores them.
    """

    seq: np.ndarray = field(default_factory=lambda: _z("i8"))
    pid: np.ndarray = field(default_factory=lambda: _z("i4"))
    tid: np.ndarray = field(default_factory=lambda: _z("i4"))
    time: np.ndarray = field(default_factory=lambda: _z("u8"))
    cpumode: np.ndarray = field(default_factory=lambda: _z("u1"))
    ip: np.ndarray = field(default_factory=lambda: _z("u8"))
    period: np.ndarray = field(default_factory=lambda: _z("u8"))
    event: np.ndarray = field(default_factory=lambda: _z("i2"))  # index into PerfData.attrs
    br_ptr: np.ndarray = field(default_factory=lambda: np.zeros(1, "i8"))
    br_from: np.ndarray = field(default_factory=lambda: _z("u8"))
    br_to: np.ndarray = field(default_factory=lambda: _z("u8"))
    br_flags: np.ndarray = field(default_factory=lambda: _z("u8"))

    def __len__(self) -> int:
        return len(self.ip)

    @property
    def has_branches(self) -> bool:
        return len(self.br_from) > 0

    def select(self, keep: np.ndarray) -> SampleBatch:
        """The samples where ``keep`` is true, with their branch entries."""
        counts = np.diff(self.br_ptr)
        ent_keep = np.repeat(keep, counts)
        ptr = np.zeros(int(keep.sum()) + 1, np.int64)
        np.cumsum(counts[keep], out=ptr[1:])
        cols = {name: getattr(self, name)[keep] for name in _SAMPLE_COLUMNS}
        cols.update({name: getattr(self, name)[ent_keep] for name in _ENTRY_COLUMNS})
        return SampleBatch(br_ptr=ptr, **cols)

    @staticmethod
    def concat(parts: list[SampleBatch]) -> SampleBatch:
        """One batch holding ``parts`` in order (the branch pointers re-based)."""
        if len(parts) == 1:
            return parts[0]
        ptrs = [np.zeros(1, np.int64)]
        base = 0
        for p in parts:
            ptrs.append(p.br_ptr[1:] + base)
            base += int(p.br_ptr[-1])
        cols = {name: np.concatenate([getattr(p, name) for p in parts]) for name in _COLUMNS}
        return SampleBatch(br_ptr=np.concatenate(ptrs), **cols)


# the columns of a SampleBatch other than ``br_ptr``: per sample, then per branch entry
_SAMPLE_COLUMNS = ("seq", "pid", "tid", "time", "cpumode", "ip", "period", "event")
_ENTRY_COLUMNS = ("br_from", "br_to", "br_flags")
_COLUMNS = _SAMPLE_COLUMNS + _ENTRY_COLUMNS
