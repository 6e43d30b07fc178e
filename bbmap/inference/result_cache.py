"""A disk cache of whole inference results, keyed by everything they are made from.

Why: a second ``annotate`` of one profile (the same format again, or another one: text to
look, then JSON or a cluster file for the build) made every inferred count again.  The
per-function flow cache (:mod:`bbmap.inference.flow_cache`) spared it the solve, but the
CFG, the network, its split into functions, their keys, the intervals and the call edges
were still made each run -- on the 20,000-function switch-heavy bench binary (840k
blocks, 3.4 M arcs) ~1 s of a 2.9 s run and ~600 MB of its 1.1 GB peak.  An entry here
holds the columns :func:`bbmap.run.apply_inference` adds to the result, so a hit skips
all of it.

Key: BLAKE2b (16 bytes) over ``RESULT_CACHE_VERSION``; a fingerprint of bbmap's own code
(the relative path, size and modification time of every module of the installed package:
an edit, an upgrade or a reinstall is another key, because a change anywhere in the CFG,
the weights, the network, the solvers or the intervals may move a count, and a version
number bumped by hand would one day be forgotten); the versions of numpy, capstone and
OR-Tools (read from their installed metadata, nothing imported); the solver the options
resolve to; the whole binary file (code and block map); the options and the event model;
the per-block samples, the IP histogram and the mask of blocks without evidence.  What
is not in the key cannot change the result: the worker count, the order the profiles
came in (the samples are summed before), the output format.

Entry: one file per key in ``results/`` of the disassembly cache's directory (the same
switches: ``$BBMAP_CACHE_DIR``, ``BBMAP_NO_CACHE=1``, ``--no-cache``), in its container
format (:func:`bbmap.binary.disasm_cache.encode_entry`), integer columns in the narrowest
of its types that holds them.  Written atomically, only by a run that made the result
(a hit writes nothing, not even a timestamp); the directory is kept under
``RESULT_CACHE_MAX_BYTES``, the oldest entries removed first.  A damaged, truncated or
foreign entry is a warning and a miss, never an error: every column is checked for its
length, and all of them against the digest stored with them, before one is used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Iterable

import numpy as np

from bbmap.installed import dist_info_versions

RESULT_CACHE_VERSION = 1  # bump when an entry's layout changes
RESULT_CACHE_MAX_BYTES = 512 << 20  # all entries together
DIR_NAME = "results"
SUFFIX = ".bbres"
# the result columns an entry holds: per block, then per edge
BLOCK_COLUMNS = ("block_count", "block_low", "block_high")
EDGE_COLUMNS = ("edge_from", "edge_to", "edge_kind", "edge_count", "edge_low", "edge_high")
META_KEYS = ("inference", "sample_model")  # the objects a result carries beside its columns


@functools.cache
def code_fingerprint() -> bytes:
    """The fingerprint of the installed bbmap package's modules (:func:`_fingerprint_of`)."""
    return _fingerprint_of(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fingerprint_of(root: str) -> bytes:
    """(relative path, size, mtime) of every ``.py`` under ``root``, hashed (~1 ms for
    bbmap's ~170 modules: no file is read)."""
    h = hashlib.blake2b(digest_size=16)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0"
                         f"{st.st_mtime_ns}\n".encode())
    return h.digest()


@functools.cache
def dist_version(package: str) -> str:
    """An installed distribution's version from its ``dist-info`` directory, without
    importing it (``-`` when it is not installed, ``?`` when unknown)."""
    found = dist_info_versions(package)
    if found is None:
        return "-"
    return found[-1] if found else "?"


def _digest(columns: dict[str, np.ndarray]) -> str:
    """BLAKE2b of the result columns as stored (name, type, bytes), in a fixed order."""
    h = hashlib.blake2b(digest_size=16)
    for c in (*BLOCK_COLUMNS, *EDGE_COLUMNS):
        a = np.ascontiguousarray(columns[c])
        h.update(f"{c}:{a.dtype.str}:{a.size}\0".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _narrow(a: np.ndarray) -> np.ndarray:
    """``a`` (integers) in the narrowest container type that holds every value."""
    a = np.asarray(a)
    if a.dtype == bool:
        return a
    if not len(a) or (int(a.min()) >= 0 and int(a.max()) < 256):
        return a.astype(np.uint8)
    if int(a.min()) >= 0 and int(a.max()) < (1 << 32):
        return a.astype(np.uint32)
    return a.astype(np.int64)


class ResultCache:
    """Whole inference results in ``<directory>/results``; ``warnings`` collects what
    went wrong (a damaged entry, a failed write)."""

    def __init__(self, directory: str, max_bytes: int = RESULT_CACHE_MAX_BYTES) -> None:
        self.dir = os.path.join(directory, DIR_NAME)
        self.max_bytes = max_bytes
        self.warnings: list[str] = []

    @staticmethod
    def key(parts: Iterable[object]) -> str:
        """The key of a result made from ``parts`` (text, bytes, buffers, arrays, None),
        after the version and the code's fingerprint; each part is typed and sized, so
        two different sequences never hash the same bytes."""
        h = hashlib.blake2b(digest_size=16)
        h.update(f"bbmap-result-v{RESULT_CACHE_VERSION}\0".encode())
        h.update(code_fingerprint())
        for p in parts:
            if p is None:
                h.update(b"N")
                continue
            if isinstance(p, str):
                raw: object = p.encode()
                tag = "s"
            elif isinstance(p, np.ndarray):
                raw = memoryview(np.ascontiguousarray(p)).cast("B")
                tag = f"a{p.dtype.str}{p.shape}"
            else:
                raw = p
                tag = "b"
            view = memoryview(raw).cast("B")  # type: ignore[arg-type]
            h.update(f"{tag}:{len(view)}:".encode())
            h.update(view)
        return h.hexdigest()

    def path(self, key: str) -> str:
        return os.path.join(self.dir, key + SUFFIX)

    def load(self, key: str, num_blocks: int) -> tuple[dict[str, np.ndarray], dict] | None:
        """(columns as int64, metadata) of ``key``'s entry, or None (no entry, or a
        damaged one: a warning)."""
        from bbmap.binary.disasm_cache import decode_entry

        path = self.path(key)
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            self.warnings.append(f"inference result cache: cannot read {path}: "
                                 f"{e.strerror}; inferring again")
            return None
        try:
            z = decode_entry(raw)
            stored = json.loads(bytes(z.pop("meta")).decode())
            if not isinstance(stored, dict) or set(z) != {*BLOCK_COLUMNS, *EDGE_COLUMNS}:
                raise ValueError("not an inference result")
            meta, digest = stored.get("result"), stored.get("digest")
            if not isinstance(meta, dict) or not all(
                    isinstance(meta.get(k), dict) for k in META_KEYS):
                raise ValueError("no inference or sample model description")
            if any(len(z[c]) != num_blocks for c in BLOCK_COLUMNS):
                raise ValueError(f"block columns are not {num_blocks} long")
            if len({len(z[c]) for c in EDGE_COLUMNS}) != 1:
                raise ValueError("edge columns of different lengths")
            if digest != _digest(z):  # a flipped bit is a miss, never a count served
                raise ValueError("its columns do not match their digest")
            cols = {c: z[c].astype(np.int64) for c in (*BLOCK_COLUMNS, *EDGE_COLUMNS)}
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            self.warnings.append(f"inference result cache: {path} is damaged ({e}); "
                                 f"inferring again")
            return None
        return cols, meta

    def store(self, key: str, columns: dict[str, np.ndarray], meta: dict) -> None:
        """Write ``key``'s entry atomically, then keep the directory under its bound."""
        from bbmap.atomic import write_atomic
        from bbmap.binary.disasm_cache import encode_entry
        from bbmap.errors import BBMapError

        arrays = {c: _narrow(columns[c]) for c in (*BLOCK_COLUMNS, *EDGE_COLUMNS)}
        stored = {"result": meta, "digest": _digest(arrays)}
        arrays["meta"] = np.frombuffer(json.dumps(stored).encode(), np.uint8)
        try:
            os.makedirs(self.dir, exist_ok=True)
            write_atomic(self.path(key), encode_entry(arrays))
            self._trim(keep=key)
        except (OSError, BBMapError) as e:
            self.warnings.append(f"inference result cache: cannot write {self.dir} ({e}); "
                                 f"not cached")

    def _trim(self, keep: str) -> None:
        entries = []
        for name in os.listdir(self.dir):
            if name.endswith(SUFFIX):
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(self.dir, name))
                    entries.append((st.st_mtime_ns, name, st.st_size))
        entries.sort(reverse=True)  # newest first
        total = 0
        for _mtime, name, size in entries:
            total += size
            if total > self.max_bytes and name != keep + SUFFIX:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.dir, name))
