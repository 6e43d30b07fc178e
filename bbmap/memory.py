"""Keep freed memory in the process for numpy-heavy batch runs (glibc malloc tuning).

Why: an LBR annotate makes and frees many temporaries of a few MiB each per slice of
entries (keys, sorted keys, masks).  glibc serves them from fresh ``mmap`` s at first and
later from the heap, whose top it trims back to the kernel whenever more than
``M_TRIM_THRESHOLD`` bytes are free there -- so each slice faults the same pages in
again.  On the 271 MB LBR bench profile (bench/bench_bolt.py) that is ~60,000 page faults
and 0.15-0.5 s of system time out of ~1.5 s of CPU: the two settings below take the
faults from ~99,000 to ~38,000 without raising the peak RSS (the freed blocks are reused,
not added to).  ``dump`` and the other ``annotate`` formats have the same pattern at a
smaller scale: a 20,000-function ``dump --json`` goes from ~17,400 to ~13,700 faults and
~6 ms faster (of ~150 ms, A/B), a 500k-sample
``annotate --format json`` ~3 % faster; the 102,000-function dump's peak RSS moves from
198 to 200 MB.

Parameters (``mallopt(3)``; the numbers are glibc's ``malloc.h``):

* ``M_MMAP_THRESHOLD`` = :data:`MMAP_THRESHOLD` (32 MiB, glibc's largest allowed value on
  64-bit, ``DEFAULT_MMAP_THRESHOLD_MAX``): blocks below it come from the heap and are
  reused; larger ones still get their own mapping, returned on free;
* ``M_TRIM_THRESHOLD`` = :data:`TRIM_THRESHOLD` (1 GiB): free heap top is kept up to this.

Setting either turns glibc's own sliding threshold off, hence both.  Process-wide, so the
CLI's dump and annotate call it (a library user decides for their own process); a no-op
where ``mallopt`` is missing (musl, macOS): only speed depends on it.
"""

from __future__ import annotations

M_TRIM_THRESHOLD = -1  # glibc malloc.h
M_MMAP_THRESHOLD = -3  # glibc malloc.h
MMAP_THRESHOLD = 32 << 20  # bytes: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 1 << 30  # bytes: above the peak of any single-binary annotate measured


def keep_freed_memory() -> bool:
    """Tune this process's malloc as described above; True when glibc took both."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
