"""The CSR helpers of bbmap/arrays.py against their plain-Python definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bbmap.arrays import expand_ranges, row_of, segment_cumsum


@given(st.lists(st.tuples(st.integers(-50, 10**12), st.integers(0, 6), st.integers(0, 9)),
                max_size=30))
@pytest.mark.slow
def test_expand_ranges(rows):
    first = np.array([r[0] for r in rows], np.int64)
    counts = np.array([r[1] for r in rows], np.int64)
    stride = np.array([r[2] for r in rows], np.int64)
    want = [f + s * k for f, c, s in rows for k in range(c)]
    assert expand_ranges(first, counts, stride).tolist() == want
    assert expand_ranges(first, counts).tolist() == [f + k for f, c, _ in rows for k in range(c)]
    assert expand_ranges(first, counts, 3).tolist() == [f + 3 * k for f, c, _ in rows
                                                        for k in range(c)]


@pytest.mark.slow
@given(st.lists(st.integers(0, 5), max_size=30))
def test_row_of(counts):
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    assert row_of(ptr).tolist() == [i for i, c in enumerate(counts) for _ in range(c)]


@given(st.lists(st.integers(0, 2**64 - 1), max_size=40),
       st.lists(st.integers(0, 40), max_size=8))
def test_segmented_cumsum(values, cuts):
    v = np.array(values, dtype=np.uint64)
    ptr = np.array(sorted({0, len(v), *[c for c in cuts if c <= len(v)]}), np.int64)
    with np.errstate(over="ignore"):
        want = [int(x) for a, b in zip(ptr[:-1], ptr[1:])
                for x in np.cumsum(v[a:b], dtype=np.uint64)]
    assert segment_cumsum(v.copy(), ptr).tolist() == want
