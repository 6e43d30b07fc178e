"""What the perf reader hands to the rest of bbmap: side records and columnar sample batches.

Side records are few (one per mmap/comm/fork/exit) and kept as small objects; samples are
many and come as numpy columns in bounded-size batches.  ``seq`` is the record's position
in the (decompressed) record stream, so order is known even where ``time`` is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# cpumode values (header.misc & 7)
CPUMODE_UNKNOWN = 0
CPUMODE_KERNEL = 1
CPUMODE_USER = 2
CPUMODE_HYPERVISOR = 3
CPUMODE_GUEST_KERNEL = 4
CPUMODE_GUEST_USER = 5


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

    @property
    def is_exec(self) -> bool:
        return bool(self.prot & 0x4)


@dataclass(frozen=True)
class CommRecord:
    seq: int
    time: int
    pid: int
    tid: int
    comm: str
    is_exec: bool


@dataclass(frozen=True)
class ForkRecord:
    seq: int
    time: int
    pid: int
    ppid: int
    tid: int
    ptid: int


@dataclass(frozen=True)
class ExitRecord:
    seq: int
    time: int
    pid: int
    ppid: int
    tid: int
    ptid: int


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
