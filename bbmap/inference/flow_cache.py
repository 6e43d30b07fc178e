"""A disk cache of solved functions, keyed by the function's own network.

Each function's flow depends on its canonical network alone
(:mod:`bbmap.inference.components`), so the network's bytes name the answer: a function
whose samples (weights, floors) and CFG are what they were when it was last solved is not
solved again -- the second ``annotate`` of a profile, or a merged profile whose new part
did not touch the function.

Key: BLAKE2b (16 bytes) over ``FLOW_CACHE_VERSION``, the solver asked for (``auto`` is a rule
on the function's size, so it names a solver per function), OR-Tools' version when it may
be used, and the function's local tail, head, capacity and cost columns (int64, one
column after another).  The entry is one
file, ``flows.bbflow``, beside the disassembly cache (the same directory, the same
switches: ``$BBMAP_CACHE_DIR``, ``BBMAP_NO_CACHE=1``, ``--no-cache``), in the disassembly
cache's container format (:func:`bbmap.binary.disasm_cache.encode_entry`): the keys, the
offsets of each function's arcs, and their flows (``u4`` when they fit).  A run writes the
file only when it solved something new (a cached run leaves it alone), atomically; it
keeps this run's functions first and older ones after them while the flows stay under
``FLOW_CACHE_MAX_BYTES``.  A damaged or foreign file is a warning and a miss, never an error,
and every hit is checked for its arc count.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

import numpy as np

from bbmap.inference.components import Split

FLOW_CACHE_VERSION = 2  # bump when the network or a solver's choice among optima changes
FLOW_CACHE_MAX_BYTES = 256 << 20  # flows kept, all runs together (the disassembly cache's bound)
FILE_NAME = "flows.bbflow"


def _solver_tag(solver: str) -> str:
    if solver in ("auto", "ortools"):
        try:
            import ortools

            return f"{solver} ortools-{getattr(ortools, '__version__', '?')}"
        except ImportError:
            return f"{solver} no-ortools"
    return solver


class FlowCache:
    """Solved functions in ``directory``; ``warnings`` collects what went wrong."""

    def __init__(self, directory: str, max_bytes: int = FLOW_CACHE_MAX_BYTES) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        self.warnings: list[str] = []
        self.hits = 0  # functions the last lookup found
        self.misses = 0
        self._old: dict[bytes, np.ndarray] | None = None

    @property
    def path(self) -> str:
        return os.path.join(self.dir, FILE_NAME)

    def keys(self, s: Split, solver: str) -> list[bytes]:
        """Each function's key (the module docstring)."""
        h0 = hashlib.blake2b(digest_size=16)
        h0.update(f"bbmap-flow-v{FLOW_CACHE_VERSION} {_solver_tag(solver)}\0".encode())
        # each column's bytes in place (no copy of the network; int64 as the Split has them)
        cols = [memoryview(np.ascontiguousarray(c, dtype=np.int64)).cast("B")
                for c in (s.tail, s.head, s.cap, s.cost)]
        out = []
        ptr = s.ptr.tolist()
        for p, q in zip(ptr[:-1], ptr[1:]):
            h = h0.copy()
            for c in cols:
                h.update(c[8 * p:8 * q])
            out.append(h.digest())
        return out

    def _load(self) -> dict[bytes, np.ndarray]:
        if self._old is not None:
            return self._old
        from bbmap.binary.disasm_cache import decode_entry

        self._old = {}
        try:
            with open(self.path, "rb") as fh:
                raw = bytearray(os.fstat(fh.fileno()).st_size)
                if fh.readinto(raw) != len(raw):
                    raise ValueError("the file changed while it was read")
            z = decode_entry(raw)
            if z["version"].tolist() != [FLOW_CACHE_VERSION]:
                raise ValueError(f"version {z['version'].tolist()}")
            keys, ptr, flow = z["keys"], z["ptr"], z["flow"]
            n = len(ptr) - 1
            if keys.shape != (n, 16) or n < 0 or (n and (ptr[0] != 0 or (np.diff(ptr) < 0).any()
                                                        or ptr[-1] != len(flow))):
                raise ValueError("keys, offsets and flows disagree")
            kb = keys.tobytes()
            bounds = ptr.tolist()
            self._old = {kb[16 * i:16 * i + 16]: flow[bounds[i]:bounds[i + 1]]
                         for i in range(n)}
        except (FileNotFoundError, NotADirectoryError):
            pass
        except Exception as e:  # noqa: BLE001 - whatever a damaged file does, it is a miss
            self.warnings.append(f"inference cache {self.path} is unreadable "
                                 f"({type(e).__name__}: {e}); ignored, functions are solved "
                                 "again")
        return self._old

    def lookup(self, keys: list[bytes], s: Split) -> tuple[np.ndarray, np.ndarray]:
        """(flows in ``s``'s arc order where found, found per function)."""
        old = self._load()
        got = np.zeros(len(s.tail), np.int64)
        hit = np.zeros(len(keys), bool)
        ptr = s.ptr.tolist()
        for i, k in enumerate(keys):
            f = old.get(k)
            if f is not None and len(f) == ptr[i + 1] - ptr[i]:
                got[ptr[i]:ptr[i + 1]] = f
                hit[i] = True
        self.hits = int(hit.sum())
        self.misses = len(keys) - self.hits
        return got, hit

    def store(self, keys: list[bytes], s: Split, flow: np.ndarray, hit: np.ndarray) -> None:
        """Add the functions just solved (``~hit``); nothing is written when there is none."""
        if hit.all():
            return
        from bbmap.atomic import atomic_open
        from bbmap.binary.disasm_cache import encode_entry
        from bbmap.errors import BBMapError

        old = self._load()
        ptr = s.ptr.tolist()
        new = {k: flow[ptr[i]:ptr[i + 1]] for i, k in enumerate(keys)}
        budget = self.max_bytes // 4  # flows are stored as u4 when they fit
        chosen: list[tuple[bytes, np.ndarray]] = []
        seen = set()
        for k, f in [*new.items(), *old.items()]:
            if k in seen:
                continue
            budget -= len(f)
            if budget < 0:
                break
            seen.add(k)
            chosen.append((k, f))
        sizes = np.array([len(f) for _, f in chosen], np.int64)
        allf = np.concatenate([f for _, f in chosen]) if chosen else np.zeros(0, np.int64)
        small = len(allf) == 0 or (int(allf.min()) >= 0 and int(allf.max()) < 1 << 32)
        arrays = {"version": np.array([FLOW_CACHE_VERSION], np.int64),
                  "keys": np.frombuffer(b"".join(k for k, _ in chosen), np.uint8).reshape(-1, 16),
                  "ptr": np.r_[0, np.cumsum(sizes)].astype(np.int64),
                  "flow": allf.astype(np.uint32 if small else np.int64)}
        try:
            os.makedirs(self.dir, exist_ok=True)
            with atomic_open(self.path, "wb") as fh:
                fh.write(encode_entry(arrays))
        except (OSError, BBMapError) as e:
            self.warnings.append(f"inference cache: cannot write {self.path} ({e}); "
                                 "not cached")
        with contextlib.suppress(Exception):
            self._old = None
