"""Seed 000's two worked examples and the perf notes' lld example, with the seed's numbers."""

from bbmap.binary.types import PF_R, PF_X, PT_LOAD, Segment
from bbmap.translate import (
    aligned_vaddr,
    alignment_violations,
    base_address_for_mapping,
    base_address_from_lowest,
    offset_to_vaddr,
    offset_to_vma,
    vaddr_to_offset,
    vaddr_to_vma,
    vma_to_offset,
    vma_to_vaddr,
)

RX = PF_R | PF_X


def test_example1_pie():
    seg = Segment(PT_LOAD, RX, 0xBD4FD4, 0xBD5FD4, 0x2F41D78, 0x2F41D78, 0x1000)
    assert aligned_vaddr(seg) == 0xBD5000
    base = base_address_from_lowest(0x55A1C0BD5000, [seg], executable=True)
    assert base == 0x55A1C0000000
    vaddr = vma_to_vaddr(0x55A1C0BD6500, base)
    assert vaddr == 0xBD6500
    # The seed prints ELF_offset = 0xbd5000, but its own formula gives
    # 0xbd6500 - 0xbd5fd4 + 0xbd4fd4 = 0xbd5500 (p_vaddr - p_offset = 0x1000, so the offset
    # must be 0x1000 below the vaddr).  We follow the formula; the seed's sum is a typo.
    assert 0xBD6500 - 0xBD5FD4 + 0xBD4FD4 == 0xBD5500
    assert vaddr_to_offset(vaddr, [seg]) == 0xBD5500
    assert vma_to_offset(0x55A1C0BD6500, base, [seg]) == 0xBD5500
    # and back
    assert offset_to_vaddr(0xBD5500, [seg]) == 0xBD6500
    assert offset_to_vma(0xBD5500, base, [seg]) == 0x55A1C0BD6500
    assert vaddr_to_vma(0xBD6500, base) == 0x55A1C0BD6500
    # The mapping the loader creates for it starts at the page-aligned file offset.
    assert base_address_for_mapping(0x55A1C0BD5000, 0xBD4000, [seg],
                                    0x55A1C3F17000 - 0x55A1C0BD5000) == 0x55A1C0000000
    assert alignment_violations([seg]) == []


def test_example2_static():
    seg = Segment(PT_LOAD, RX, 0x1000, 0x401000, 0x2000, 0x2000, 0x1000)
    assert aligned_vaddr(seg) == 0x401000
    base = base_address_from_lowest(0x401000, [seg], executable=True)
    assert base == 0
    assert vma_to_vaddr(0x401500, base) == 0x401500
    assert vma_to_offset(0x401500, base, [seg]) == 0x1500
    assert base_address_for_mapping(0x401000, 0x1000, [seg], 0x2000) == 0


def test_lld_pie_text_offset_differs_from_vaddr():
    # perf-data-format.md §4.2: lld PIE, RX PT_LOAD at offset 0x740 / vaddr 0x1740, memsz 0x450,
    # MMAP2 [0x5629ec742000, +0x1000) pgoff 0; A = 0x5629ec742901 -> 0x1901.
    r = Segment(PT_LOAD, PF_R, 0, 0, 0x740, 0x740, 0x1000)
    rx = Segment(PT_LOAD, RX, 0x740, 0x1740, 0x450, 0x450, 0x1000)
    base = base_address_for_mapping(0x5629EC742000, 0, [r, rx], 0x1000)
    assert vma_to_vaddr(0x5629EC742901, base) == 0x1901
    assert vma_to_offset(0x5629EC742901, base, [r, rx]) == 0x901


def test_alignment_violation_reported():
    bad = Segment(PT_LOAD, RX, 0x1234, 0x401000, 0x100, 0x100, 0x1000)
    assert len(alignment_violations([bad])) == 1
    odd = Segment(PT_LOAD, RX, 0x1000, 0x1000, 0x100, 0x100, 0x3000)
    assert "power of two" in alignment_violations([odd])[0]
