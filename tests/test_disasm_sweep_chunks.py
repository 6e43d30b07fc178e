"""``sweep_ranges`` decoding neighbouring ranges together equals one sweep per range (issue 17).

Where the wanted ranges cover most of an executable section, ``sweep_ranges`` decodes
them in chunks of consecutive ranges (one capstone call each) and hands each range its
stretch when that stretch is what the range's own sweep gives; otherwise the range is
swept alone.  On every corpus binary (and the hand-made ones), with all ranges and with
every other function only, and with chunks cut inside functions (256 bytes), the
CodeTable is the same as with per-range sweeps only (``SECTION_SWEEP_SHARE`` above 1),
field by field.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import all_corpus_binaries

import bbmap.binary.disasm as disasm
from bbmap.binary import load_binary
from bbmap.binary.disasm import Disassembler, sweep_ranges
from bbmap.cfg import _range_sections, sweep_bounds


def _table(b, want, share, chunk=disasm.SWEEP_CHUNK_BYTES):  # noqa: ANN001, ANN202
    m = b.block_map
    _, start, _, range_end = sweep_bounds(m)
    old = disasm.SECTION_SWEEP_SHARE, disasm.SWEEP_CHUNK_BYTES
    disasm.SECTION_SWEEP_SHARE, disasm.SWEEP_CHUNK_BYTES = share, chunk
    try:
        return sweep_ranges(Disassembler(b.machine, int(getattr(b, "elfclass", 64))),
                            b.data, b.sections, m, _range_sections(b, m), start,
                            range_end, want)
    finally:
        disasm.SECTION_SWEEP_SHARE, disasm.SWEEP_CHUNK_BYTES = old


@pytest.mark.parametrize("path", all_corpus_binaries())
@pytest.mark.parametrize("subset", [False, True])
@pytest.mark.parametrize("chunk", [256, 1 << 16])
def test_chunked_sweep_equals_range_sweeps(path, subset, chunk) -> None:  # noqa: ANN001
    if not path.exists():
        pytest.skip("not built")
    b = load_binary(path)
    m = b.block_map
    if not m.num_ranges or b.machine not in disasm.MACHINES:
        pytest.skip("no x86 block map")
    want = None
    if subset:
        rfunc = np.repeat(np.arange(m.num_functions), np.diff(m.func_range_ptr))
        want = rfunc % 2 == 0
    fast = _table(b, want, 0.0, chunk)  # every section in chunks
    ref = _table(b, want, 2.0)  # every range alone
    for f in ("key", "start", "size", "kinds", "target", "range_base", "decoded", "end"):
        assert np.array_equal(getattr(fast, f), getattr(ref, f)), f
    assert fast.bad == ref.bad
