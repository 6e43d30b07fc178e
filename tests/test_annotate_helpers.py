"""A small hand-built binary (block map + symbols) and address space for annotate tests.

Layout (ELF vaddrs; the process maps them at BASE + vaddr):

    alpha  0x1000  range 0: bb0 [0x1000,+0x10) ft   bb1 [0x1010,+8) ft   bb2 [0x1018,+8) ret
    beta   0x2000  range 0: bb0 [0x2000,+0x10) ft   bb1 [0x2010,+8) jmp  bb3 [0x2018,+8) ft
                   range 1: bb2 [0x3000,+0x10) ret                (symbol beta.cold)
    gamma  0x4000  symbol only (no block map), size 0x100
    [0x4100, 0x5000) in the binary, no function
global block indexes: alpha 0,1,2; beta 3 (id0), 4 (id1), 5 (id3), 6 (id2).
"""

from __future__ import annotations

import numpy as np

from bbmap.binary.types import FunctionSymbols
from bbmap.buckets import KERNEL, OTHER_DSO, OUTSIDE_FUNCTION, UNMAPPED
from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH, MD_HAS_RETURN
from bbmap.index import BlockIndex
from bbmap.model import BlockMapBuilder, BlockRecord, FunctionRecord, MapSource, RangeRecord
from bbmap.perf.records import SampleBatch

BASE = 0x5555_0000_0000
LIBC = 0x7F00_0000_0000
KADDR = 0xFFFF_FFFF_8100_0000
FT, RET = MD_CAN_FALL_THROUGH, MD_HAS_RETURN


def block_map():
    b = BlockMapBuilder([MapSource("section", 5, ".llvm_bb_addr_map", 0x6FFF4C0A, 1)])
    b.add(FunctionRecord(0x1000, [RangeRecord(0x1000, [
        BlockRecord(0, 0x0, 0x10, FT), BlockRecord(1, 0x10, 0x8, FT),
        BlockRecord(2, 0x18, 0x8, RET)])], version=2, name="alpha"))
    b.add(FunctionRecord(0x2000, [
        RangeRecord(0x2000, [BlockRecord(0, 0x0, 0x10, FT), BlockRecord(1, 0x10, 0x8, 0),
                             BlockRecord(3, 0x18, 0x8, FT)]),
        RangeRecord(0x3000, [BlockRecord(2, 0x0, 0x10, RET)])], version=2, feature=8,
        name="beta"))
    return b.build()


def symbols() -> FunctionSymbols:
    names = ["alpha", "beta", "beta.cold", "gamma"]
    return FunctionSymbols(
        address=np.array([0x1000, 0x2000, 0x3000, 0x4000], "u8"),
        size=np.array([0x20, 0x20, 0x10, 0x100], "u8"),
        section=np.ones(4, "i4"), names=names, display=list(names),
        is_func=np.ones(4, bool))


class FakeSpace:
    """Binary at BASE (vaddrs 0x1000..0x5000), libc, kernel, everything else unmapped."""

    dso_names = ["/usr/lib/libc.so.6"]

    def classify(self, addr, pid, seq, cpumode, time=None):
        addr = np.asarray(addr, np.uint64)
        where = np.full(len(addr), UNMAPPED, np.int8)
        va = addr - np.uint64(BASE)
        inb = (addr >= BASE + 0x1000) & (addr < BASE + 0x5000)
        where[inb] = OUTSIDE_FUNCTION
        lib = (addr >= LIBC) & (addr < LIBC + 0x100000)
        where[lib] = OTHER_DSO
        k = addr >= np.uint64(0xFFFF_8000_0000_0000)
        if cpumode is not None:
            k |= np.asarray(cpumode) == 1
        where[k] = KERNEL
        dso = np.where(lib, 0, -1).astype(np.int32)
        return where, np.where(inb, va, 0).astype(np.uint64), dso


def resolver(bm=None, syms=None):
    from bbmap.aggregate.resolve import IndexResolver

    bm = bm if bm is not None else block_map()
    syms = syms if syms is not None else symbols()
    return IndexResolver(FakeSpace(), BlockIndex(bm, syms), bm.num_functions)


def rt(vaddr: int) -> int:
    """Runtime address of an ELF vaddr of the test binary."""
    return BASE + vaddr


def batch(ips, periods=None, cpumode=None, stacks=None) -> SampleBatch:
    """A SampleBatch from plain lists; ``stacks`` is per sample a list of (from, to) newest
    first (runtime addresses)."""
    n = len(ips)
    stacks = stacks or [[] for _ in range(n)]
    ptr = np.zeros(n + 1, "i8")
    ptr[1:] = np.cumsum([len(s) for s in stacks])
    flat = [e for s in stacks for e in s]
    return SampleBatch(
        seq=np.arange(n, dtype="i8"), pid=np.full(n, 42, "i4"), tid=np.full(n, 42, "i4"),
        time=np.arange(n, dtype="u8"),
        cpumode=np.array(cpumode if cpumode is not None else [2] * n, "u1"),
        ip=np.array(ips, "u8"),
        period=np.array(periods if periods is not None else [1] * n, "u8"),
        event=np.zeros(n, "i2"), br_ptr=ptr,
        br_from=np.array([e[0] for e in flat], "u8"), br_to=np.array([e[1] for e in flat], "u8"),
        br_flags=np.array([e[2] if len(e) > 2 else 0 for e in flat], "u8"))
