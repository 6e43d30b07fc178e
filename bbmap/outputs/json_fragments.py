"""JSON text from numpy columns, fast: decimal digits, shared fragments, string escaping.

A dump of a clang-sized block map is ~300 MB of JSON; ``json.dumps`` of a dict per block
would take minutes.  These helpers build the text from columns instead: small numbers
come from a table of shared ``bytes`` objects, rarer ones are laid out as digits in one
byte buffer by vectorized div/mod, strings are escaped only when they need it, and the
writes overlap the formatting.  :mod:`bbmap.dump` is built on them.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import IO

import numpy as np

TABLE_SIZE = 1 << 16


_POW10 = np.array([10**i for i in range(20)], dtype=np.uint64)


@lru_cache(maxsize=64)
def number_table(suffix: bytes, size: int) -> np.ndarray:
    """``str(i) + suffix`` for i < size (bytes): one shared object per small value."""
    return np.array([b"%d%s" % (i, suffix) for i in range(size)], dtype=object)


def decimal_texts(values: np.ndarray, suffix: bytes = b"") -> list[bytes]:
    """Decimal texts (followed by ``suffix``) of unsigned integers; table lookups for
    the small ones, which are nearly all of them (the table grows in powers of two
    as far as the values need, up to ``TABLE_SIZE``)."""
    if not len(values):
        return []
    top = int(values.max())
    table = number_table(suffix, max(1024, 1 << min(top, TABLE_SIZE - 1).bit_length()))
    if top < len(table):
        return table[values].tolist()
    big = values >= len(table)
    out = table[np.where(big, 0, values)].tolist()
    for i in np.flatnonzero(big).tolist():
        out[i] = b"%d%s" % (int(values[i]), suffix)
    return out


PAIR_TABLE_MAX = 1 << 11  # values per key in a keyed table (keys x this many objects)


class KeyedDecimals:
    """``pre[k] + str(v) + post[k]`` for (key, value) pairs, from one table of shared
    ``bytes`` objects covering the keys that occur and values below a power of two
    (larger values are formatted one by one).  One text per block instead of three
    joined pieces: ``bytes.join`` pays per piece, and a dump has millions of blocks."""

    def __init__(self, pre: list[bytes], post: list[bytes], keys: np.ndarray,
                 values: np.ndarray, cap: int = PAIR_TABLE_MAX) -> None:
        self.pre, self.post = pre, post
        present = np.flatnonzero(np.bincount(keys, minlength=len(pre))) if len(keys) \
            else np.zeros(0, np.int64)
        self.rank = np.zeros(len(pre), np.int64)
        self.rank[present] = np.arange(len(present))
        top = int(values.max()) if len(values) else 0
        self.size = max(64, 1 << min(top, cap - 1).bit_length())
        table = [b"%s%d%s" % (pre[k], i, post[k]) for k in present.tolist()
                 for i in range(self.size)]
        self.table = np.array(table, dtype=object) if table else np.zeros(0, object)

    def texts(self, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Object array of the texts (its items may be replaced by the caller)."""
        small = values < self.size
        if bool(small.all()):
            return self.table[self.rank[keys] * self.size + values.astype(np.int64)]
        out = self.table[self.rank[keys] * self.size
                         + np.where(small, values, 0).astype(np.int64)]
        for i in np.flatnonzero(~small).tolist():
            k = int(keys[i])
            out[i] = b"%s%d%s" % (self.pre[k], int(values[i]), self.post[k])
        return out


def num_digits(values: np.ndarray) -> np.ndarray:
    """Decimal digit counts of unsigned integers (1 for zero)."""
    return np.maximum(np.searchsorted(_POW10, values.astype(np.uint64), side="right"), 1)


def put_digits(out: np.ndarray, ends: np.ndarray, values: np.ndarray,
                ndig: np.ndarray) -> None:
    """Write each value's decimal digits into ``out`` so that its last digit lands at
    ``ends - 1`` (vectorized: one pass per digit position, live values only)."""
    v = values.astype(np.uint64)
    pos = ends.astype(np.int64) - 1
    left = ndig
    for _ in range(int(ndig.max()) if len(ndig) else 0):
        out[pos] = (v % np.uint64(10)).astype(np.uint8) + 48
        keep = np.flatnonzero(left > 1)
        v, pos, left = v[keep] // np.uint64(10), pos[keep] - 1, left[keep] - 1


def put_const(out: np.ndarray, starts: np.ndarray, text: bytes) -> None:
    """Write the same short ``text`` at every offset in ``starts``."""
    for j, ch in enumerate(text):
        out[starts + j] = ch


def write_overlapped(parts: Iterable[bytes], fh: IO[bytes]) -> None:
    """Write fragments from a second thread while the next one is built (the write
    system call releases the GIL, so a 300 MB dump's I/O overlaps its formatting)."""
    q: queue.Queue = queue.Queue(maxsize=2)
    failed: list[BaseException] = []

    def writer() -> None:
        while (p := q.get()) is not None:
            if not failed:
                try:
                    fh.write(p)
                except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                    failed.append(e)

    t = threading.Thread(target=writer, name="bbmap-dump-writer", daemon=True)
    t.start()
    try:
        for p in parts:
            if failed:
                break
            q.put(p)
    finally:
        q.put(None)
        t.join()
    if failed:
        raise failed[0]


def is_plain(s: str) -> bool:
    """True if ``s`` needs no JSON escaping and is printable ASCII (no control
    character, DEL, quote, backslash or non-ASCII character), checked with str methods
    that run much faster than a regex on 1 MB (and need no regex compiled at start-up)."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s


def json_string(s: str) -> str:
    """``json.dumps(s, ensure_ascii=False)``, without the call for the usual plain name."""
    if is_plain(s):
        return '"' + s + '"'
    return json.dumps(s, ensure_ascii=False)
