"""Text rows from numpy columns: the one writer behind annotate's JSON and CSV and dump's JSON.

A row is a fixed sequence of fields -- constant text, a decimal or hex integer, a pick
from a small table of texts -- the same for every row, so a whole table is laid out at
once: each field gets a fixed-width slot of a ``rows x width`` byte matrix (digits
right-aligned, texts left-aligned, the rest NUL), filled column-wise with numpy (one
pass per digit position, one fancy-index per table pick), and the NULs are squeezed out
of the flattened matrix.  What is left is the rows' text, back to back, and where each
row ends (``ptr``), so a caller can cut a table per function and put its own text
(a function's header, a range's prefix) between the pieces.  No per-row Python object
is made: 283,000 JSON block rows of a 20,000-function profile take ~0.1 s where a dict
per block through the C JSON encoder took ~1.4 s.

The texts must hold no NUL byte (JSON escapes it, ELF names cannot hold one;
:func:`render_rows` checks the tables).  Parameters:

* ``CHUNK_BYTES`` -- matrix bytes per pass (rows per pass = this / row width): large
  enough that numpy's per-call cost vanishes, small enough to stay in cache-friendly
  tens of MB whatever the row width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CHUNK_BYTES = 8 << 20  # matrix bytes formatted per pass (see the module docstring)
UTF8_ERRORS = "surrogateescape"  # text <-> bytes of names and paths, as bbmap's text
# outputs write them (a file name that is not UTF-8 comes back as its own bytes)

_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


@dataclass(frozen=True)
class Dec:
    """A base-10 integer per row (``-`` for negatives); ``where`` False leaves it out."""

    values: np.ndarray
    where: np.ndarray | None = None


@dataclass(frozen=True)
class Hex:
    """A base-16 integer per row, lower-case digits, no prefix (put ``0x`` before it)."""

    values: np.ndarray


@dataclass(frozen=True)
class Pick:
    """``table[index[row]]`` per row: flag lists, edge kinds, names, JSON strings."""

    table: Sequence[bytes]
    index: np.ndarray


Field = bytes | Dec | Hex | Pick


def _dec_width(v: np.ndarray) -> int:
    top = int(v.max()) if len(v) else 0
    return len(str(top))


def _layout(fields: Sequence[Field]) -> list[tuple[Field, int, object]]:
    """Each field with its slot width and prepared data."""
    out = []
    for f in fields:
        if isinstance(f, bytes):
            out.append((f, len(f), None))
        elif isinstance(f, Dec):
            v = np.asarray(f.values)
            if v.dtype.kind not in "iub":
                raise TypeError(f"Dec needs integers, not {v.dtype}")
            neg = (v < 0) if v.dtype.kind == "i" else None
            if neg is not None and not neg.any():
                neg = None
            mag = np.abs(v.astype(np.int64)).astype(np.uint64) if neg is not None \
                else v.astype(np.uint64)
            if f.where is not None:
                mag = np.where(f.where, mag, 0)
                neg = None if neg is None else neg & f.where
            out.append((f, _dec_width(mag) + (neg is not None), (mag, neg)))
        elif isinstance(f, Hex):
            v = np.asarray(f.values).astype(np.uint64)
            top = int(v.max()) if len(v) else 0
            out.append((f, max(1, (top.bit_length() + 3) // 4), v))
        elif isinstance(f, Pick):
            w = max((len(t) for t in f.table), default=0)
            if any(b"\0" in t for t in f.table):
                raise ValueError("a text of a columnar row holds a NUL byte")
            tab = np.zeros((len(f.table) or 1, max(w, 1)), np.uint8)
            if w:
                tab[:len(f.table), :w] = np.array(list(f.table), dtype=f"S{w}").view(
                    np.uint8).reshape(len(f.table), w)
            out.append((f, w, tab))
        else:
            raise TypeError(f"not a row field: {f!r}")
    return out


def _fill(mat: np.ndarray, col: int, width: int, f: Field, data: object, a: int, b: int
          ) -> None:
    if isinstance(f, bytes):
        if width:
            mat[:, col:col + width] = np.frombuffer(f, np.uint8)
    elif isinstance(f, Dec):
        mag, neg = data
        v = mag[a:b]
        end = col + width
        if neg is not None:
            mat[:, col] = np.where(neg[a:b], ord("-"), 0)
        keep = np.ones(b - a, bool) if f.where is None else f.where[a:b]
        for j in range(width - (neg is not None)):
            d = (v % np.uint64(10)).astype(np.uint8) + 48
            mat[:, end - 1 - j] = np.where(keep, d, 0) if j == 0 else np.where(v != 0, d, 0)
            v = v // np.uint64(10)
    elif isinstance(f, Hex):
        v = data[a:b]
        end = col + width
        for j in range(width):
            d = _HEX[(v & np.uint64(15)).astype(np.intp)]
            mat[:, end - 1 - j] = d if j == 0 else np.where(v != 0, d, 0)
            v = v >> np.uint64(4)
    elif width:  # Pick
        mat[:, col:col + width] = data[f.index[a:b], :width]


def render_rows(n: int, fields: Sequence[Field]) -> tuple[bytes, np.ndarray]:
    """The text of ``n`` rows made of ``fields`` (each covers all ``n`` rows), and the
    offsets where each row starts (``ptr[i]:ptr[i+1]`` is row ``i``; ``ptr[n]`` is the
    length)."""
    lay = _layout(fields)
    width = sum(w for _, w, _ in lay)
    ptr = np.zeros(n + 1, np.int64)
    if not n or not width:
        return b"", ptr
    step = max(1, CHUNK_BYTES // width)
    texts = []
    lens = []
    for a in range(0, n, step):
        b = min(n, a + step)
        mat = np.zeros((b - a, width), np.uint8)
        col = 0
        for f, w, data in lay:
            _fill(mat, col, w, f, data, a, b)
            col += w
        keep = mat != 0
        texts.append(mat[keep].tobytes())
        lens.append(keep.sum(axis=1))
    np.cumsum(np.concatenate(lens), out=ptr[1:])
    return b"".join(texts), ptr


GROUP_MARK = b"\x01"  # starts each group's first row; JSON never holds a raw control byte


def group_lead(group_ptr: np.ndarray, sep: bytes, mark: bytes = GROUP_MARK) -> Pick:
    """A row field: ``mark`` on the first row of each group (rows
    ``group_ptr[i]:group_ptr[i+1]``), ``sep`` on the others -- so that
    :func:`split_groups` can cut the table per group in one ``bytes.split``."""
    first = np.zeros(int(group_ptr[-1]), np.intp)
    first[group_ptr[:-1][np.diff(group_ptr) > 0]] = 1
    return Pick([sep, mark], first)


def split_groups(text: bytes, group_ptr: np.ndarray, mark: bytes = GROUP_MARK
                 ) -> list[bytes]:
    """Each group's rows of a table made with :func:`group_lead` (``b""`` for a group
    without rows), the marks removed.  ``mark`` must occur nowhere else in ``text``."""
    parts = iter(text.split(mark)[1:])
    return [next(parts) if k else b"" for k in (np.diff(group_ptr) > 0).tolist()]


def cut(text: bytes, ptr: np.ndarray, first: np.ndarray, last: np.ndarray,
        skip: int = 0) -> list[memoryview]:
    """Rows ``first[i]..last[i]-1`` of a :func:`render_rows` table as one piece each
    (no copy), without the first ``skip`` bytes of the piece (a leading separator)."""
    mv = memoryview(text)
    lo = ptr[first]
    hi = ptr[last]
    lo = np.minimum(lo + skip, hi) if skip else lo
    return [mv[x:y] for x, y in zip(lo.tolist(), hi.tolist())]
