"""VMA -> vaddr -> offset -> VMA is the identity over generated layouts and mappings."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary.types import PF_R, PF_W, PF_X, PT_LOAD, Segment
from bbmap.translate import (
    SegmentTable,
    alignment_violations,
    base_address_for_mapping,
    offset_to_vaddr,
    offset_to_vma,
    vaddr_to_offset,
    vma_to_offset,
    vma_to_vaddr,
)

PAGE = 0x1000


@st.composite
def layouts(draw):
    """1-4 PT_LOADs laid out like bfd/lld/BOLT do: congruent mod p_align, ascending."""
    align = draw(st.sampled_from([0x1000, 0x4000, 0x10000, 0x200000]))
    pie = draw(st.booleans())
    n = draw(st.integers(1, 4))
    segs = []
    off = draw(st.integers(0, 0x3000))
    va = (0 if pie else 0x400000) + draw(st.integers(0, 4)) * align + off % align
    for i in range(n):
        size = draw(st.integers(1, 0x5000))
        flags = PF_R | (PF_X if draw(st.booleans()) or i == 0 else PF_W)
        segs.append(Segment(PT_LOAD, flags, off, va, size, size, align))
        gap = draw(st.integers(0, 0x2000))
        noff = off + size + gap
        # next vaddr: above this one, congruent with its offset mod align (lld adds a page)
        nva = va + size + draw(st.integers(0, 2)) * align
        nva += (noff - nva) % align
        off, va = noff, nva
    base = 0 if not pie else draw(st.integers(0x5555_0000, 0x7FFF_0000)) * align // align * 0x10000
    return segs, base


@pytest.mark.slow
@given(layouts(), st.data())
@settings(max_examples=300, deadline=None)
def test_round_trip(layout, data):
    segs, base = layout
    assert alignment_violations(segs) == []
    s = data.draw(st.sampled_from(segs))
    off = data.draw(st.integers(s.p_offset, s.p_offset + s.p_filesz - 1))
    vaddr = offset_to_vaddr(off, segs)
    assert vaddr == off - s.p_offset + s.p_vaddr
    vma = offset_to_vma(off, base, segs)
    assert vma_to_vaddr(vma, base) == vaddr
    assert vma_to_offset(vma, base, segs) == off
    assert vaddr_to_offset(vaddr, segs) == off
    # The loader maps the segment from its page-aligned offset at the page-aligned vaddr;
    # the base recovered from that mapping (or from a split tail of it) is the true base.
    start = base + (s.p_vaddr & ~(PAGE - 1))
    pgoff = s.p_offset & ~(PAGE - 1)
    length = s.p_offset + s.p_filesz - pgoff
    # Two segments of one kind sharing a file page are ambiguous from (start, pgoff) alone
    # (BOLT #109384); the per-address offset path above is not, and is what classify uses.
    rivals = [t for t in segs if t is not s and t.is_exec == s.is_exec
              and t.p_offset < s.p_offset + s.p_filesz and t.p_offset + t.p_filesz > pgoff]
    if rivals:
        return
    assert base_address_for_mapping(start, pgoff, segs, length, s.is_exec) == base
    k = data.draw(st.integers(0, (length - 1) // PAGE))
    if pgoff + k * PAGE >= s.p_offset:  # a tail mapping starting inside the segment
        assert base_address_for_mapping(start + k * PAGE, pgoff + k * PAGE, segs,
                                        length - k * PAGE, s.is_exec) == base
    # perf's map__map_ip equals seed 000's VMA -> offset
    assert vma - start + pgoff == off


@given(layouts(), st.lists(st.integers(0, 0x40000), min_size=1, max_size=50))
@settings(max_examples=200, deadline=None)
def test_vectorized_equals_scalar(layout, offsets):
    segs, _ = layout
    table = SegmentTable.from_segments(segs)
    v, ok = table.offset_to_vaddr(np.array(offsets, dtype=np.uint64))
    for o, vv, k in zip(offsets, v, ok):
        ref = offset_to_vaddr(o, segs)
        assert (ref is not None) == bool(k)
        if ref is not None:
            assert int(vv) == ref
    vaddrs = [int(x) for x in v[ok]] + [s.p_vaddr + o % 0x100 for s in segs for o in offsets[:3]]
    back, ok2 = table.vaddr_to_offset(np.array(vaddrs, dtype=np.uint64))
    for va, oo, k in zip(vaddrs, back, ok2):
        ref = vaddr_to_offset(va, segs)
        assert (ref is not None) == bool(k)
        if ref is not None:
            assert int(oo) == ref
