"""The columnar row writer (bbmap/outputs/columnar.py) against plain Python formatting."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import bbmap.outputs.columnar as col
from bbmap.outputs.columnar import Dec, Hex, Pick, cut_groups, group_sep, render_rows

TEXTS = st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\0", b"z")), min_size=1,
                 max_size=6)


@st.composite
def tables(draw):  # noqa: ANN001, ANN201
    n = draw(st.integers(0, 60))
    signed = draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n))
    unsigned = draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n))
    where = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    texts = draw(TEXTS)
    pick = draw(st.lists(st.integers(0, len(texts) - 1), min_size=n, max_size=n))
    return n, signed, unsigned, where, texts, pick


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(tables(), st.sampled_from([1 << 6, 1 << 10, col.CHUNK_BYTES]))
def test_rows_equal_python_formatting(t, chunk) -> None:
    n, signed, unsigned, where, texts, pick = t
    old = col.CHUNK_BYTES
    col.CHUNK_BYTES = chunk  # small chunks: many passes
    try:
        text, ptr = render_rows(n, [
            b"<", Dec(np.array(signed, np.int64)), b"|", Dec(np.array(unsigned, np.uint64)),
            b"|0x", Hex(np.array(unsigned, np.uint64)), b"|",
            Dec(np.array(signed, np.int64), where=np.array(where, bool)), b"|",
            Pick(texts, np.array(pick, np.int64)), b">\n"])
    finally:
        col.CHUNK_BYTES = old
    rows = [b"<%d|%d|0x%x|%s|%s>\n" % (s, u, u, b"%d" % s if w else b"", texts[p])
            for s, u, w, p in zip(signed, unsigned, where, pick)]
    assert text == b"".join(rows)
    assert ptr.tolist() == np.cumsum([0] + [len(r) for r in rows]).tolist()
    if n:
        gp = np.array([0, n // 2, n // 2, n])  # an empty group too
        assert cut_groups((text, ptr), gp) == [b"".join(rows[a:b]) for a, b in
                                               zip(gp[:-1], gp[1:])]


def test_no_rows_and_nul_texts() -> None:
    assert render_rows(0, [b"x", Dec(np.zeros(0, np.int64))])[0] == b""
    with pytest.raises(ValueError, match="NUL"):
        render_rows(1, [Pick([b"a\0"], np.zeros(1, np.int64))])


@given(st.lists(st.integers(0, 4), max_size=12))
def test_groups_cut_at_their_rows(sizes) -> None:  # noqa: ANN001
    """Groups of rows (some empty) cut at the row offsets; the first row of a group has
    no separator."""
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(ptr[-1])
    table = render_rows(n, [group_sep(ptr, b","), Dec(np.arange(n))])
    want = [b",".join(b"%d" % i for i in range(a, b)) for a, b in zip(ptr[:-1], ptr[1:])]
    assert cut_groups(table, ptr) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 3)), max_size=40),
       st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\0", b"z")), min_size=4,
                max_size=4))
def test_digit_groups_and_used_widths(rows, texts) -> None:  # noqa: ANN001
    """Values at the edges of the 4-digit and 2-hex-digit groups (0, 9999, 10000, powers
    of ten and 16, 2**32 - 1, 2**64 - 1) and Pick tables whose longest text no row uses."""
    edge = [0, 9, 10, 9999, 10_000, 99_999_999, 10**8, 2**32 - 1, 2**32, 10**19,
            2**64 - 1, 15, 16, 255, 256, 4095, 4096]
    vals = [v for v, _ in rows] + edge
    picks = [p for _, p in rows] + [0] * len(edge)
    texts = texts[:3] + [b"a much longer text than any other one " * 3]  # never picked
    v = np.array(vals, np.uint64)
    text, _ = render_rows(len(vals), [Dec(v), b",", Hex(v), b",", Pick(texts, np.array(picks)),
                                      b";", Dec(v.astype(np.uint32)), b"\n"])
    assert text == b"".join(b"%d,%x,%s;%d\n" % (x, x, texts[p], x & 0xFFFFFFFF)
                            for x, p in zip(vals, picks))
