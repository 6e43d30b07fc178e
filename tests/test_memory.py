"""bbmap.memory: the malloc tuning the BOLT formats' CLI path applies."""

from __future__ import annotations

import platform

import numpy as np


def test_keep_freed_memory_is_taken_by_glibc_and_harmless() -> None:
    from bbmap.memory import keep_freed_memory

    took = keep_freed_memory()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert took is True
    # allocation after the tuning behaves as before (large and small blocks)
    a = np.arange(5 << 20, dtype=np.uint64)
    assert int(a[-1]) == (5 << 20) - 1 and int(np.sort(a[::-1])[0]) == 0
