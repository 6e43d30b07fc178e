"""Text rows from numpy columns: the one writer behind annotate's JSON and CSV and dump's JSON.

A row is a fixed sequence of fields -- constant text, a decimal or hex integer, a pick
from a small table of texts -- the same for every row, so a whole table is laid out at
once: each field gets a fixed-width slot of a ``rows x width`` byte matrix (digits
right-aligned, texts left-aligned, the rest NUL), filled with numpy one slot at a time
(a slot is viewed as one ``width``-byte item per row, so a constant or a picked text is
one item copy per row; a number is cut into groups of four decimal digits, one divmod
and one pick from a ``"0000".."9999"`` table per group), and the NULs are squeezed out
of the flattened matrix.  What is left is the rows' text, back to back; where each row
ends (``ptr``) is known beforehand from the digit counts and text lengths, so a caller
can cut a table per function at those offsets and put its own text (a function's
header, a range's prefix) between the pieces.  No per-row Python object is made:
the 99,628 JSON block rows of the 500k-sample bench profile take ~0.016 s (0.032 s
with a pass per digit and a NUL count per row, the writer before this one).

The texts must hold no NUL byte (JSON escapes it, ELF names cannot hold one;
:func:`render_rows` checks the tables).  Parameters:

* ``CHUNK_BYTES`` -- matrix bytes per pass (rows per pass = this / row width): large
  enough that numpy's per-call cost vanishes, small enough that the matrix stays in the
  CPU's caches and its memory is reused pass after pass (measured on the 500k bench
  profile, thread CPU of render_json_bytes / render_csv_bytes: 8 MB 70-85 / 40-44 ms,
  2 MB 55-64 / 36-38 ms, 1 MB and 512 KB no better than 2 MB).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bbmap.outputs.json_fragments import num_digits

CHUNK_BYTES = 2 << 20  # matrix bytes formatted per pass (see the module docstring)
UTF8_ERRORS = "surrogateescape"  # text <-> bytes of names and paths, as bbmap's text
# outputs write them (a file name that is not UTF-8 comes back as its own bytes)


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


_U32 = 1 << 32
# the 4-digit groups "0000".."9999" as 4-byte items: a value is cut into groups of four
# digits (one divmod per group, not per digit) and each group is one table pick
_QUAD = (np.arange(10_000)[:, None] // np.array([1000, 100, 10, 1]) % 10 + ord("0")
         ).astype(np.uint8).view("V4").ravel()
_HEX_PAIRS = np.frombuffer(b"0123456789abcdef", np.uint8)[
    np.arange(256)[:, None] >> np.array([4, 0]) & 15].view("V2").ravel()


@dataclass
class _Slot:
    """A field laid out: its slot width in the row matrix, prepared data, and the
    number of bytes it puts in each row (an int, or an array per row)."""

    field: Field
    width: int
    data: object
    length: int | np.ndarray


def _layout(fields: Sequence[Field]) -> list[_Slot]:
    """Each field with its slot width, prepared data and per-row length."""
    out = []
    for f in fields:
        if isinstance(f, bytes):
            out.append(_Slot(f, len(f), np.frombuffer(f, np.uint8), len(f)))
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
            top = int(mag.max()) if len(mag) else 0
            nd = num_digits(mag).astype(np.uint8)
            if f.where is not None:
                nd[~np.asarray(f.where, bool)] = 0
            length = nd.astype(np.int64) if neg is None else nd.astype(np.int64) + neg
            if top < _U32:
                mag = mag.astype(np.uint32)
            out.append(_Slot(f, len(str(top)) + (neg is not None), (mag, neg, nd), length))
        elif isinstance(f, Hex):
            v = np.asarray(f.values).astype(np.uint64)
            top = int(v.max()) if len(v) else 0
            nib = np.maximum(1, (np.searchsorted(_POW16, v, side="right") + 1))
            out.append(_Slot(f, max(1, (top.bit_length() + 3) // 4), (v, nib.astype(np.uint8)),
                             nib.astype(np.int64)))
        elif isinstance(f, Pick):
            if b"\0" in b"".join(f.table):
                raise ValueError("a text of a columnar row holds a NUL byte")
            idx = np.asarray(f.index)
            lens = np.array([len(t) for t in f.table] or [0], np.int64)
            used = np.bincount(idx, minlength=len(lens)) > 0 if len(idx) else \
                np.zeros(len(lens), bool)
            w = int(lens[used].max()) if used.any() else 0  # the texts the rows use
            # NUL-padded to the widest text a row uses (longer unused ones are cut short)
            tab = np.array(list(f.table) or [b""], f"S{max(w, 1)}").view(f"V{max(w, 1)}")
            out.append(_Slot(f, w, tab, lens[idx]))
        else:
            raise TypeError(f"not a row field: {f!r}")
    return out


_POW16 = np.uint64(16) ** np.arange(1, 16, dtype=np.uint64)  # 16 .. 16**15


def _slot(mat: np.ndarray, col: int, width: int) -> np.ndarray:
    """Column ``col`` of ``mat`` as one ``width``-byte item per row (a view)."""
    return np.ndarray((mat.shape[0],), f"V{width}", buffer=mat, offset=col,
                      strides=(mat.shape[1],))


def _groups(v: np.ndarray, groups: int, table: np.ndarray, base: int) -> np.ndarray:
    """(n, groups * item) bytes: the digits of ``v`` (most significant first), one table
    item (``base``-ary group of digits) per divmod."""
    item = table.dtype.itemsize
    out = np.empty((len(v), groups), table.dtype)
    b = v.dtype.type(base)
    for j in range(groups - 1, -1, -1):
        v, r = np.divmod(v, b)
        out[:, j] = table[r]
    return out.view(np.uint8).reshape(len(v), groups * item)


def _lead_zeros(d: np.ndarray, nd: np.ndarray, w: int) -> None:
    """NUL out the leading zeros of right-aligned digits ``d`` (n, k) whose values have
    ``nd`` digits (0: the whole field), in the last ``w`` columns (the others are not
    written): only the columns some value does not reach are touched."""
    k = d.shape[1]
    low = int(nd.min()) if len(nd) else w
    for c in range(k - w, k - low):
        d[:, c] *= nd >= k - c


def _fill(mat: np.ndarray, col: int, s: _Slot, a: int, b: int) -> None:
    f, width = s.field, s.width
    if not width:
        return
    if isinstance(f, bytes):
        _slot(mat, col, width)[...] = s.data.view(f"V{width}")[0]  # type: ignore[union-attr]
    elif isinstance(f, Dec):
        mag, neg, nd = s.data  # type: ignore[misc]
        w = width - (neg is not None)
        if w:
            g = -(-w // 4)
            d = _groups(mag[a:b], g, _QUAD, 10_000)
            _lead_zeros(d, nd[a:b], w)
            _slot(mat, col + width - w, w)[...] = np.ndarray(
                (b - a,), f"V{w}", buffer=d, offset=4 * g - w, strides=(4 * g,))
        if neg is not None:
            mat[:, col] = np.where(neg[a:b], ord("-"), 0)
    elif isinstance(f, Hex):
        v, nib = s.data  # type: ignore[misc]
        g = -(-width // 2)
        d = _groups(v[a:b], g, _HEX_PAIRS, 256)
        _lead_zeros(d, nib[a:b], width)
        _slot(mat, col, width)[...] = np.ndarray(
            (b - a,), f"V{width}", buffer=d, offset=2 * g - width, strides=(2 * g,))
    else:  # Pick
        _slot(mat, col, width)[...] = s.data[f.index[a:b]]  # type: ignore[index]


def render_rows(n: int, fields: Sequence[Field]) -> tuple[bytes, np.ndarray]:
    """The text of ``n`` rows made of ``fields`` (each covers all ``n`` rows), and the
    offsets where each row starts (``ptr[i]:ptr[i+1]`` is row ``i``; ``ptr[n]`` is the
    length)."""
    lay = _layout(fields)
    width = sum(s.width for s in lay)
    ptr = np.zeros(n + 1, np.int64)
    if not n or not width:
        return b"", ptr
    lens = np.zeros(n, np.int64)
    for s in lay:
        lens += s.length
    np.cumsum(lens, out=ptr[1:])
    step = max(1, CHUNK_BYTES // width)
    texts = []
    for a in range(0, n, step):
        b = min(n, a + step)
        mat = np.zeros((b - a, width), np.uint8)
        col = 0
        for s in lay:
            _fill(mat, col, s, a, b)
            col += s.width
        texts.append(mat[mat != 0].tobytes())
    return b"".join(texts), ptr


def group_sep(group_ptr: np.ndarray, sep: bytes) -> Pick:
    """A row field: ``sep`` before every row of a group (rows ``group_ptr[i]:
    group_ptr[i+1]``) but its first."""
    later = np.ones(int(group_ptr[-1]), np.intp)
    later[group_ptr[:-1][np.diff(group_ptr) > 0]] = 0
    return Pick([b"", sep], later)


def cut_groups(table: tuple[bytes, np.ndarray], group_ptr: np.ndarray) -> list[bytes]:
    """The text of each group of rows (rows ``group_ptr[i]:group_ptr[i+1]``, ``b""``
    for none) of a :func:`render_rows` table: bytes slices at the row offsets it returned
    (``bytes.split`` on a marker byte walks 10 MB byte by byte; a memoryview per piece
    costs more to make than the copy it saves)."""
    text, ptr = table
    at = ptr[group_ptr].tolist()
    return [text[x:y] for x, y in zip(at[:-1], at[1:])]
