"""Seed 000's address formulas: VMA <-> ELF vaddr <-> ELF offset, and the base address.

Every peer tool has shipped a bug here (BOLT's PIE/AArch64 base, llvm-profgen's 4 KiB
pages, Propeller's empty output for ``.so``), so the formulas are written once, named
as the seed names them, and everything else goes through them:

* ``ELF_vaddr  = ELF_offset - p_offset + p_vaddr``
  (segment: ``p_offset <= off < p_offset+p_filesz``)
* ``ELF_offset = ELF_vaddr - p_vaddr + p_offset``
  (segment: ``p_vaddr <= v < p_vaddr+p_memsz``)
* ``ELF_vaddr  = VMA - base_address``; ``VMA = ELF_vaddr + base_address``
* ``ELF_offset = VMA - base_address - p_vaddr + p_offset`` and back.

A mapping (mmap start, pgoff) fixes ``base_address``: the file byte at ``pgoff`` lives
at ``start``, and that byte's vaddr follows from its segment.  This works for PIE,
non-PIE (base 0), shared libraries at any base, lld layouts where text offset != vaddr,
and several executable segments (BOLT) alike, with no page-size assumption.
No layer above ever assumes ``p_offset == p_vaddr`` or one executable segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bbmap.binary.types import Segment
from bbmap.errors import BBMapError

U64 = (1 << 64) - 1


# ------------------------------------------------------------------ alignment
def aligned_vaddr(seg: Segment) -> int:
    """``p_vaddr & ~(p_align - 1)`` (``p_align`` 0 or 1 means no alignment)."""
    if seg.p_align <= 1:
        return seg.p_vaddr
    return seg.p_vaddr & ~(seg.p_align - 1)


def aligned_offset(seg: Segment) -> int:
    if seg.p_align <= 1:
        return seg.p_offset
    return seg.p_offset & ~(seg.p_align - 1)


def alignment_violations(segments: Sequence[Segment]) -> list[str]:
    """PT_LOADs breaking ``p_vaddr % p_align == p_offset % p_align`` (or a non-power-of-2 align).

    Such a segment cannot be mmapped as the ELF spec says, so a base address derived
    from it would be wrong; callers report these instead of mapping silently.
    """
    out = []
    for i, s in enumerate(segments):
        if not s.is_load or s.p_align <= 1:
            continue
        if s.p_align & (s.p_align - 1):
            out.append(f"PT_LOAD #{i}: p_align {s.p_align:#x} is not a power of two")
        elif s.p_vaddr % s.p_align != s.p_offset % s.p_align:
            out.append(f"PT_LOAD #{i}: p_vaddr {s.p_vaddr:#x} % p_align {s.p_align:#x} != "
                       f"p_offset {s.p_offset:#x} % p_align")
    return out


# ------------------------------------------------------------ segment search
def load_segments(segments: Sequence[Segment]) -> list[Segment]:
    return [s for s in segments if s.is_load]


def exec_segments(segments: Sequence[Segment]) -> list[Segment]:
    """Every executable PT_LOAD (there may be several: BOLT, ``-z separate-code``, kernels)."""
    return [s for s in segments if s.is_exec]


def segment_for_offset(offset: int, segments: Sequence[Segment]) -> Segment | None:
    """The PT_LOAD with ``p_offset <= offset < p_offset + p_filesz``; executable ones first."""
    loads = load_segments(segments)
    for s in sorted(loads, key=lambda s: not s.is_exec):
        if s.p_offset <= offset < s.p_offset + s.p_filesz:
            return s
    return None


def segment_for_vaddr(vaddr: int, segments: Sequence[Segment]) -> Segment | None:
    """The PT_LOAD with ``p_vaddr <= vaddr < p_vaddr + p_memsz``."""
    for s in load_segments(segments):
        if s.p_vaddr <= vaddr < s.p_vaddr + s.p_memsz:
            return s
    return None


# ------------------------------------------------------------------ formulas
def offset_to_vaddr(offset: int, segments: Sequence[Segment]) -> int | None:
    """ELF offset -> ELF vaddr: ``ELF_offset - p_offset + p_vaddr``; None outside every PT_LOAD."""
    s = segment_for_offset(offset, segments)
    return None if s is None else offset - s.p_offset + s.p_vaddr


def vaddr_to_offset(vaddr: int, segments: Sequence[Segment]) -> int | None:
    """ELF vaddr -> ELF offset: ``ELF_vaddr - p_vaddr + p_offset``; None outside every PT_LOAD.

    Addresses in the ``p_memsz > p_filesz`` tail (bss) have no file bytes: None too.
    """
    s = segment_for_vaddr(vaddr, segments)
    if s is None or vaddr >= s.p_vaddr + s.p_filesz:
        return None
    return vaddr - s.p_vaddr + s.p_offset


def vma_to_vaddr(vma: int, base_address: int) -> int:
    """VMA addr -> ELF vaddr: ``VMA_addr - base_address`` (mod 2**64, like the hardware)."""
    return (vma - base_address) & U64


def vaddr_to_vma(vaddr: int, base_address: int) -> int:
    """ELF vaddr -> VMA addr: ``ELF_vaddr + base_address``."""
    return (vaddr + base_address) & U64


def vma_to_offset(vma: int, base_address: int, segments: Sequence[Segment]) -> int | None:
    """VMA addr -> ELF offset: ``VMA_addr - base_address - p_vaddr + p_offset``."""
    return vaddr_to_offset(vma_to_vaddr(vma, base_address), segments)


def offset_to_vma(offset: int, base_address: int, segments: Sequence[Segment]) -> int | None:
    """ELF offset -> VMA addr: ``ELF_offset - p_offset + p_vaddr + base_address``."""
    v = offset_to_vaddr(offset, segments)
    return None if v is None else vaddr_to_vma(v, base_address)


# ------------------------------------------------------------- base address
def base_address(any_vma: int, corresponding_vaddr: int) -> int:
    """Seed 000's "another approach": ``any_vma_address - corresponding_elf_vaddr``."""
    return (any_vma - corresponding_vaddr) & U64


def base_address_from_lowest(lowest_vma: int, segments: Sequence[Segment],
                             *, executable: bool = False) -> int:
    """Seed 000's general approach: ``lowest_vma - aligned(lowest PT_LOAD p_vaddr)``.

    ``executable=True`` uses the lowest executable PT_LOAD (the mapping perf records).
    """
    segs = exec_segments(segments) if executable else load_segments(segments)
    if not segs:
        raise BBMapError("no executable PT_LOAD segment" if executable else "no PT_LOAD segment")
    lowest = min(segs, key=lambda s: s.p_vaddr)
    return base_address(lowest_vma, aligned_vaddr(lowest))


def segment_for_mapping(pgoff: int, segments: Sequence[Segment], length: int = 1,
                        executable: bool = True) -> Segment | None:
    """The PT_LOAD a mapping of file bytes ``[pgoff, pgoff+length)`` shows.

    The loader maps a segment from its page-aligned offset, so ``pgoff`` may lie up to
    one page (< ``p_align``) below ``p_offset``; a remapped or split mapping may start
    inside the segment.  Among segments overlapping the mapped file range, an
    executable one wins for an executable mapping, then the largest overlap (lld
    packs an R segment and the text into the same page: both overlap that page).
    """
    best: tuple[tuple[int, int], Segment] | None = None
    end = pgoff + max(length, 1)
    for s in load_segments(segments):
        align = max(s.p_align, 1)
        lo = s.p_offset - (s.p_offset % align) if align > 1 else s.p_offset
        if not (lo <= pgoff < s.p_offset + max(s.p_filesz, 1)):
            continue
        overlap = min(end, s.p_offset + s.p_filesz) - max(pgoff, s.p_offset)
        key = (int(s.is_exec == executable), overlap)
        if best is None or key > best[0]:
            best = (key, s)
    return None if best is None else best[1]


def base_address_for_mapping(start: int, pgoff: int, segments: Sequence[Segment],
                             length: int = 1, executable: bool = True) -> int:
    """Base address of a mapping: the file byte at ``pgoff`` is at VMA ``start``.

    ``base = start - (pgoff - p_offset + p_vaddr)`` for the segment the mapping shows
    (seed 000: ``any_vma_address - corresponding_elf_vaddr``).  0 for a non-PIE binary
    at its linked address.  Raises :class:`BBMapError` if no PT_LOAD covers ``pgoff``.
    """
    s = segment_for_mapping(pgoff, segments, length, executable)
    if s is None:
        raise BBMapError(f"mapping at {start:#x} with pgoff {pgoff:#x} shows no PT_LOAD segment "
                         "of the binary (wrong binary for this profile?)")
    return base_address(start, pgoff - s.p_offset + s.p_vaddr)


# ------------------------------------------------------------ vectorized
@dataclass
class SegmentTable:
    """Numpy view of the PT_LOADs for bulk offset <-> vaddr conversion.

    Executable segments are searched first, then the others, matching the scalar
    :func:`segment_for_offset`; the result agrees with it element by element.
    """

    p_offset: np.ndarray
    p_vaddr: np.ndarray
    p_filesz: np.ndarray
    p_memsz: np.ndarray
    is_exec: np.ndarray

    @classmethod
    def from_segments(cls, segments: Sequence[Segment]) -> SegmentTable:
        loads = sorted(load_segments(segments), key=lambda s: not s.is_exec)
        return cls(
            p_offset=np.array([s.p_offset for s in loads], dtype=np.uint64),
            p_vaddr=np.array([s.p_vaddr for s in loads], dtype=np.uint64),
            p_filesz=np.array([s.p_filesz for s in loads], dtype=np.uint64),
            p_memsz=np.array([s.p_memsz for s in loads], dtype=np.uint64),
            is_exec=np.array([s.is_exec for s in loads], dtype=bool),
        )

    def offset_to_vaddr(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized ELF offset -> ELF vaddr; returns (vaddr u8, found bool)."""
        offsets = np.asarray(offsets, dtype=np.uint64)
        out = np.zeros(offsets.shape, dtype=np.uint64)
        found = np.zeros(offsets.shape, dtype=bool)
        for i in range(len(self.p_offset)):  # a handful of segments: loop them, not samples
            off, fsz = self.p_offset[i], self.p_filesz[i]
            m = ~found & (offsets >= off) & (offsets - off < fsz)
            out[m] = offsets[m] - off + self.p_vaddr[i]
            found |= m
        return out, found

    def vaddr_to_offset(self, vaddrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized ELF vaddr -> ELF offset (file-backed part only); (offset u8, found)."""
        vaddrs = np.asarray(vaddrs, dtype=np.uint64)
        out = np.zeros(vaddrs.shape, dtype=np.uint64)
        found = np.zeros(vaddrs.shape, dtype=bool)
        order = np.argsort(~self.is_exec, kind="stable")  # same precedence as the scalar path
        for i in order:
            va, fsz = self.p_vaddr[i], self.p_filesz[i]
            m = ~found & (vaddrs >= va) & (vaddrs - va < fsz)
            out[m] = vaddrs[m] - va + self.p_offset[i]
            found |= m
        return out, found


def vaddr_to_vma_array(vaddrs: np.ndarray, base: np.ndarray | int) -> np.ndarray:
    return np.asarray(vaddrs, dtype=np.uint64) + np.asarray(base, dtype=np.uint64)


def mapping_vma_to_offset_array(vmas: np.ndarray, start: np.ndarray | int,
                                pgoff: np.ndarray | int) -> np.ndarray:
    """perf's ``map__map_ip``: ``VMA - start + pgoff`` (seed 000's VMA -> offset, base folded)."""
    return (np.asarray(vmas, dtype=np.uint64) - np.asarray(start, dtype=np.uint64)
            + np.asarray(pgoff, dtype=np.uint64))
