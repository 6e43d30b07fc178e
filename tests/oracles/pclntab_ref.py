"""A Go function table (``.gopclntab``) read record by record with the construct
declarations of ``bbmap.formats.go``: the reference the numpy reader
``bbmap.binary.go.pclntab_functions`` is held equal to (tests/test_binary_go.py,
bench/bench_go.py)."""

from __future__ import annotations

import numpy as np

from bbmap.binary.go import _header
from bbmap.formats.go import func_prefix_struct, functab_struct


def pclntab_functions_ref(data: bytes, little: bool, text_addr: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The same as :func:`pclntab_functions`, one construct parse per record (the spec)."""
    h = _header(data, little)
    ft = functab_struct(little, int(h.nfunc)).parse(data[h.functab_offset:])
    fp = func_prefix_struct(little)
    base = h.text_start if text_addr is None else text_addr
    addrs, sizes, names = [], [], []
    ends = [e.entry_off for e in ft.entries[1:]] + [ft.end_off]
    for e, nxt in zip(ft.entries, ends):
        rec = fp.parse(data[h.functab_offset + e.func_off:])
        at = h.funcname_offset + rec.name_off
        names.append(data[at:data.index(b"\0", at)].decode("utf-8", "replace"))
        addrs.append(base + e.entry_off)
        sizes.append(nxt - e.entry_off)
    return np.array(addrs, np.uint64), np.array(sizes, np.uint64), names
