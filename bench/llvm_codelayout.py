"""LLVM 22's own code-layout functions, called through ctypes (the peer of bbmap/layout).

libLLVM.so.22 exports ``llvm::codelayout::calcExtTspScore``, ``computeExtTspLayout`` and
``computeCacheDirectedLayout`` (llvm/lib/Transforms/Utils/CodeLayout.cpp).  ``ArrayRef`` is
passed by value as (pointer, length); the returned ``std::vector<uint64_t>`` comes back
through the hidden result pointer as (begin, end, capacity) and is copied out (the few
bytes it holds are left to the process).  ``load()`` is ``None`` where libLLVM 22 is absent.
"""

from __future__ import annotations

import ctypes
import glob

PATHS = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libLLVM.so.22*")
               + glob.glob("/usr/lib/llvm-22/lib/libLLVM.so*"))
_SCORE = "_ZN4llvm10codelayout15calcExtTspScoreENS_8ArrayRefImEES2_NS1_INS0_9EdgeCountEEE"
_LAYOUT = "_ZN4llvm10codelayout19computeExtTspLayoutENS_8ArrayRefImEES2_NS1_INS0_9EdgeCountEEE"
_CDS = ("_ZN4llvm10codelayout26computeCacheDirectedLayoutENS_8ArrayRefImEES2_"
        "NS1_INS0_9EdgeCountEEES2_")


class _ArrayRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _EdgeCount(ctypes.Structure):
    _fields_ = [("src", ctypes.c_uint64), ("dst", ctypes.c_uint64), ("count", ctypes.c_uint64)]


class _Vector(ctypes.Structure):
    _fields_ = [("begin", ctypes.c_void_p), ("end", ctypes.c_void_p), ("cap", ctypes.c_void_p)]


def _u64(xs):
    arr = (ctypes.c_uint64 * len(xs))(*[int(x) for x in xs])
    return arr, _ArrayRef(ctypes.cast(arr, ctypes.c_void_p), len(xs))


def _edges(edges):
    arr = (_EdgeCount * len(edges))(*[_EdgeCount(int(s), int(d), int(c)) for s, d, c in edges])
    return arr, _ArrayRef(ctypes.cast(arr, ctypes.c_void_p), len(edges))


def _vector(v: _Vector) -> list[int]:
    n = (v.end - v.begin) // 8 if v.begin else 0
    return list((ctypes.c_uint64 * n).from_address(v.begin)) if n else []


class CodeLayout:
    """``score(order, sizes, edges)``, ``ext_tsp(sizes, counts, edges)``,
    ``cdsort(sizes, counts, edges, offsets)`` -- LLVM's answers."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._score = getattr(lib, _SCORE)
        self._score.restype, self._score.argtypes = ctypes.c_double, [_ArrayRef] * 3
        self._layout = getattr(lib, _LAYOUT)
        self._layout.restype = None
        self._layout.argtypes = [ctypes.POINTER(_Vector)] + [_ArrayRef] * 3
        self._cds = getattr(lib, _CDS)
        self._cds.restype = None
        self._cds.argtypes = [ctypes.POINTER(_Vector)] + [_ArrayRef] * 4

    def score(self, order, sizes, edges) -> float:
        keep = [_u64(order), _u64(sizes), _edges(edges)]
        return self._score(*(k[1] for k in keep))

    def ext_tsp(self, sizes, counts, edges) -> list[int]:
        keep = [_u64(sizes), _u64(counts), _edges(edges)]
        v = _Vector()
        self._layout(ctypes.byref(v), *(k[1] for k in keep))
        return _vector(v)

    def cdsort(self, sizes, counts, edges, offsets) -> list[int]:
        keep = [_u64(sizes), _u64(counts), _edges(edges), _u64(offsets)]
        v = _Vector()
        self._cds(ctypes.byref(v), *(k[1] for k in keep))
        return _vector(v)


def load() -> CodeLayout | None:
    for path in PATHS:
        try:
            return CodeLayout(ctypes.CDLL(path))
        except (OSError, AttributeError):
            continue
    return None
