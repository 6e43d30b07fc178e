"""A disk cache of the CFG sweep's disassembly, keyed by what the binary is, like perf's
build-id cache (``~/.debug``): the second ``annotate`` with inference of one binary skips
capstone (the sweep is ~0.1 s of a 500k-sample annotate on a 20,000-function
binary, ~0.3 s under load).

What an entry holds is exactly what :func:`bbmap.binary.disasm.sweep_rows` returns for
the ranges it swept (rows: address, size, kind, direct target, cheap flag; per range:
decoded or not, where the sweep ended; undecodable addresses), so a table assembled from
the cache is the table a fresh sweep makes (tests/test_disasm_cache.py).  Entries grow:
a run that wants ranges its entry lacks sweeps only those and stores the union.  An entry
is one file (:func:`encode_entry`: the columns' raw bytes behind a JSON table of them), read
with one ``readinto`` and a numpy view per column.

Key (the entry's file name): BLAKE2b over the bytes the sweep reads -- every executable
section's header (index, type, flags, address, offset, size) and contents
(:func:`~bbmap.binary.disasm.swept_sections`) --, the block-map columns that steer the
sweep (range bases and sections, block starts, range ends), the capstone version, the word
size, the "cheap" rule's tables and ``CACHE_VERSION``.  A rebuilt binary (other code),
another map, another capstone or another rule never meets a stale entry; a binary that
differs only outside its code (debug info, symbols, data) shares its entry, rightly.
Hashing the code only with BLAKE2b (~2.6 ms per 3.7 MB where sha256 took 5.9 ms) keeps
the key at ~1-2 ms for the bench binary.

Where: ``$BBMAP_CACHE_DIR``, else ``$XDG_CACHE_HOME/bbmap/disasm``, else
``~/.cache/bbmap/disasm``.  Off: ``BBMAP_NO_CACHE=1`` or ``--no-cache``.  Safe: entries are
written atomically (temporary file + rename; concurrent writers: the last rename wins,
both whole), validated when read (a corrupt, truncated or foreign file is ignored with a
warning and replaced), the directory is kept under ``CACHE_MAX_BYTES`` (least recently
used entries removed first), and failing to write (read-only or full disk) is a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable

import numpy as np

from bbmap.binary.disasm import (
    MEMORY_OK,
    SLOW_PREFIXES,
    STACK_WORDS,
    Decoded,
    Disassembler,
    SweptRows,
    capstone_version,
    swept_sections,
)

CACHE_VERSION = 3  # bump when an entry's layout or the sweep's output changes
CACHE_MAX_BYTES = 256 << 20  # the whole directory (an entry: ~11 bytes per instruction,
# 3.8 MB for the 20,000-function bench binary)
TOUCH_AFTER = 3600.0  # seconds: a hit marks its entry recently used (mtime, for the LRU
# trim) only when it was last marked longer ago, so repeated runs leave the file alone
ENV_DIR = "BBMAP_CACHE_DIR"
ENV_OFF = "BBMAP_NO_CACHE"
_SUFFIX = ".bbdis"
_LEGACY_SUFFIXES = (".npz",)  # entries of CACHE_VERSION <= 2 (numpy .npz): trimmed as usual
_MAGIC = b"BBMDIS\0\0"  # an entry: magic, u8 header length, JSON header, aligned arrays
_HEADER_MAX = 1 << 16  # bytes of JSON header an entry may claim
_DTYPES = ("|b1", "|u1", "<u4", "<i8", "<u8")  # the columns' types (never objects)
_ROW_FIELDS = {"addr": np.uint64, "size": np.uint8, "kinds": np.uint8, "target": np.int64,
               "cheap": np.uint8}


def default_dir() -> str:
    d = os.environ.get(ENV_DIR)
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bbmap", "disasm")


def disabled_by_env() -> bool:
    return os.environ.get(ENV_OFF, "").strip() not in ("", "0")


class DisasmCache:
    """One cache directory; ``warnings`` collects what went wrong (never raised)."""

    def __init__(self, directory: str | None = None, max_bytes: int = CACHE_MAX_BYTES) -> None:
        self.dir = directory or default_dir()
        self.max_bytes = max_bytes
        self.warnings: list[str] = []
        self.hit_ranges = 0  # ranges taken from the cache by the last sweep
        self.swept_ranges = 0  # ... and swept

    @staticmethod
    def from_env(enabled: bool = True) -> DisasmCache | None:
        """The default cache, or None when ``enabled`` is false or the environment says
        ``BBMAP_NO_CACHE``."""
        return DisasmCache() if enabled and not disabled_by_env() else None

    # ------------------------------------------------------------------ keys and files
    @staticmethod
    def key(data: bytes | memoryview, dis: Disassembler, sections: list,
            range_section: np.ndarray, range_base: np.ndarray, block_start: np.ndarray,
            range_end: np.ndarray, range_block_ptr: np.ndarray) -> str:
        """The entry's name: BLAKE2b over what the sweep reads and what steers it (the
        module docstring)."""
        h = hashlib.blake2b(digest_size=32)
        h.update(f"bbmap-disasm-v{CACHE_VERSION} capstone-{capstone_version()} "
                 f"bits-{dis.bits} {SLOW_PREFIXES!r} {STACK_WORDS!r} {MEMORY_OK!r}\0".encode())
        view = memoryview(data)
        for sec in sorted(swept_sections(sections), key=lambda x: x.index):
            h.update(f"{sec.index} {sec.sh_type} {sec.sh_flags} {sec.sh_addr} "
                     f"{sec.sh_offset} {sec.sh_size}\0".encode())
            h.update(view[sec.sh_offset:sec.sh_offset + sec.sh_size])
        for a, t in ((range_section, np.int64), (range_base, np.uint64),
                     (block_start, np.uint64), (range_end, np.uint64),
                     (range_block_ptr, np.int64)):
            col = np.ascontiguousarray(a, dtype=t)
            h.update(len(col).to_bytes(8, "little"))
            h.update(col.tobytes())
        return h.hexdigest()

    def path(self, key: str) -> str:
        return os.path.join(self.dir, key + _SUFFIX)

    def load(self, key: str, num_ranges: int) -> tuple[np.ndarray, SweptRows] | None:
        """(covered ranges, their rows) of the entry for ``key``, or None (no entry; a
        bad one is reported in ``warnings``)."""
        p = self.path(key)
        try:
            with open(p, "rb") as fh:
                st = os.fstat(fh.fileno())
                raw = bytearray(st.st_size)  # writable columns
                if fh.readinto(raw) != len(raw):
                    raise ValueError("the entry changed while it was read")
            got = decode_entry(raw)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Exception as e:  # noqa: BLE001 - whatever a damaged file does, it is a miss
            self.warnings.append(f"disassembly cache entry {p} is unreadable "
                                 f"({type(e).__name__}: {e}); ignored, the binary is "
                                 "disassembled again")
            return None
        try:
            out = _validate(got, key, num_ranges)
        except Exception as e:  # noqa: BLE001 - ValueError for what the checks catch
            self.warnings.append(f"disassembly cache entry {p} is not valid ({e}); "
                                 "ignored, the binary is disassembled again")
            return None
        if time.time() - st.st_mtime > TOUCH_AFTER:
            with contextlib.suppress(OSError):
                os.utime(p)  # recently used (at most once per TOUCH_AFTER)
        return out

    def store(self, key: str, covered: np.ndarray, swept: SweptRows) -> None:
        """Write the entry (atomically), then keep the directory under its bound."""
        from bbmap.atomic import atomic_open
        from bbmap.errors import BBMapError

        arrays = {"version": np.array([CACHE_VERSION], np.int64),
                  "key": np.frombuffer(key.encode(), np.uint8),
                  "ranges": covered.astype(np.int64),
                  "decoded": swept.decoded[covered].astype(bool),
                  "end": swept.end[covered].astype(np.uint64),
                  "bad": np.array(sorted(swept.bad), np.int64).reshape(-1, 2),
                  **_pack_rows(swept.rows, swept.row_range)}
        p = self.path(key)
        try:
            os.makedirs(self.dir, exist_ok=True)
            with atomic_open(p, "wb") as fh:
                fh.write(encode_entry(arrays))
        except (OSError, BBMapError) as e:
            self.warnings.append(f"disassembly cache: cannot write {p} ({e}); not cached")
            return
        self.trim(keep=p)

    def trim(self, keep: str | None = None) -> None:
        """Remove least recently used entries until the directory is under its bound."""
        try:
            entries = []
            with os.scandir(self.dir) as it:
                for e in it:
                    if e.name.endswith((_SUFFIX, *_LEGACY_SUFFIXES)) and \
                            e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        entries.append((st.st_mtime_ns, st.st_size, e.path))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size


def encode_entry(arrays: dict[str, np.ndarray]) -> bytes:
    """An entry's bytes: ``_MAGIC``, the header's length (u8), a JSON header listing each
    array (name, dtype, shape, offset and size in the payload), then the arrays' raw
    bytes, each at an 8-byte aligned offset.  Read back with one ``read`` and a numpy
    view per array (:func:`decode_entry`): numpy's ``.npz`` (a zip member and a parsed
    header per array) took ~10 ms plus ~3 ms of importing ``zipfile`` for the bench
    binary's entry."""
    parts, table, at = [], [], 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.str not in _DTYPES:
            raise ValueError(f"column {name} is {a.dtype}, not a cache column type")
        raw = a.tobytes()
        table.append([name, a.dtype.str, list(a.shape), at, len(raw)])
        pad = -len(raw) % 8
        parts.append(raw + b"\0" * pad)
        at += len(raw) + pad
    head = json.dumps({"arrays": table}, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return b"".join([_MAGIC, len(head).to_bytes(8, "little"), head, *parts])


def decode_entry(raw: bytes | bytearray) -> dict[str, np.ndarray]:
    """The arrays of an entry made by :func:`encode_entry` (views of ``raw``); ValueError
    for anything else: another magic, a header past its bound or the file, a type that is
    not a cache column's, an array past the end of the file."""
    if raw[:len(_MAGIC)] != _MAGIC or len(raw) < len(_MAGIC) + 8:
        raise ValueError("not a bbmap disassembly cache entry")
    n = int.from_bytes(raw[len(_MAGIC):len(_MAGIC) + 8], "little")
    start = len(_MAGIC) + 8
    if n > _HEADER_MAX or start + n > len(raw):
        raise ValueError(f"a header of {n} bytes")
    table = json.loads(raw[start:start + n])["arrays"]
    payload = memoryview(raw)[start + n:]
    out = {}
    for name, dt, shape, at, size in table:
        if dt not in _DTYPES:
            raise ValueError(f"column {name} of type {dt!r}")
        dtype = np.dtype(dt)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count < 0 or count * dtype.itemsize != size or at < 0 or at + size > len(payload):
            raise ValueError(f"column {name} ({shape} x {dt}) past the end of the entry")
        out[str(name)] = np.frombuffer(payload, dtype, count, at).reshape(shape)
    return out


def _pack_rows(rows: Decoded, row_range: np.ndarray) -> dict[str, np.ndarray]:
    """The rows, compact (~11 bytes an instruction instead of 27): ranges as runs, addresses
    as offsets from their run's first row, direct targets only where there is one."""
    n = len(row_range)
    cut = np.flatnonzero(np.r_[True, row_range[1:] != row_range[:-1]]) if n else \
        np.zeros(0, np.int64)
    run_len = np.diff(np.r_[cut, n]).astype(np.int64)
    run_base = rows.addr[cut].astype(np.uint64)
    off = rows.addr - np.repeat(run_base, run_len)
    wide = bool(n) and int(off.max()) >= 1 << 32
    has = rows.target >= 0
    return {"run_range": row_range[cut].astype(np.int64), "run_len": run_len,
            "run_base": run_base, "offset": off.astype(np.uint64 if wide else np.uint32),
            "size": rows.size.astype(np.uint8), "kinds": rows.kinds.astype(np.uint8),
            "cheap": rows.cheap.astype(np.uint8), "has_target": np.packbits(has),
            "target": rows.target[has].astype(np.int64)}


def _validate(z: dict, key: str, num_ranges: int) -> tuple[np.ndarray, SweptRows]:
    """The entry's arrays, checked for shape, type and consistency (ValueError if not)."""
    need = {"version", "key", "ranges", "decoded", "end", "bad", "run_range", "run_len",
            "run_base", "offset", "size", "kinds", "cheap", "has_target", "target"}
    if not need <= set(z):
        raise ValueError(f"missing {sorted(need - set(z))}")
    if z["version"].tolist() != [CACHE_VERSION]:
        raise ValueError(f"version {z['version'].tolist()}, expected {CACHE_VERSION}")
    if bytes(z["key"].astype(np.uint8)) != key.encode():
        raise ValueError("its key is another binary's")
    types = {"ranges": "i8", "end": "u8", "bad": "i8", "run_range": "i8", "run_len": "i8",
             "run_base": "u8", "size": "u1", "kinds": "u1", "cheap": "u1",
             "has_target": "u1", "target": "i8", "decoded": "?"}
    for f, t in types.items():
        if z[f].dtype != np.dtype(t):
            raise ValueError(f"column {f} is {z[f].dtype}, expected {np.dtype(t)}")
    if z["offset"].dtype not in (np.dtype("u4"), np.dtype("u8")):
        raise ValueError(f"column offset is {z['offset'].dtype}")
    ranges = z["ranges"]
    if ranges.ndim != 1 or len(z["decoded"]) != len(ranges) or len(z["end"]) != len(ranges):
        raise ValueError("per-range columns of different lengths")
    if len(ranges) and (ranges.min() < 0 or ranges.max() >= num_ranges
                        or bool((np.diff(ranges) <= 0).any())):
        raise ValueError("range numbers out of order or out of the block map")
    covered = np.zeros(num_ranges, bool)
    covered[ranges] = True
    runs, run_len = z["run_range"], z["run_len"]
    if len(run_len) != len(runs) or len(z["run_base"]) != len(runs) or (
            len(run_len) and run_len.min() < 0):
        raise ValueError("runs of different lengths")
    n = int(run_len.sum())
    if any(len(z[f]) != n for f in ("offset", "size", "kinds", "cheap")):
        raise ValueError("row columns of different lengths")
    if len(runs) and (runs.min() < 0 or runs.max() >= num_ranges or not covered[runs].all()):
        raise ValueError("rows of ranges the entry does not cover")
    if len(z["has_target"]) != (n + 7) // 8:
        raise ValueError("target mask of another length")
    has = np.unpackbits(z["has_target"], count=n).astype(bool)
    if int(has.sum()) != len(z["target"]) or (len(z["target"]) and z["target"].min() < 0):
        raise ValueError("targets do not match their mask")
    bad = z["bad"]
    if bad.ndim != 2 or bad.shape[1] != 2 or (len(bad) and not covered[
            np.clip(bad[:, 0], 0, num_ranges - 1)].all()):
        raise ValueError("undecodable addresses of ranges the entry does not cover")
    rr = np.repeat(runs, run_len)
    addr = np.repeat(z["run_base"], run_len) + z["offset"].astype(np.uint64)
    target = np.full(n, -1, np.int64)
    target[has] = z["target"]
    decoded = np.zeros(num_ranges, bool)
    decoded[ranges] = z["decoded"]
    end = np.zeros(num_ranges, np.uint64)
    end[ranges] = z["end"]
    rows = Decoded(addr, z["size"], z["kinds"], target, z["cheap"])
    return ranges.astype(np.int64), SweptRows(rows, rr, decoded, end,
                                              [(int(r), int(a)) for r, a in bad.tolist()])


def cached_sweep_rows(cache: DisasmCache, dis: Disassembler, data: bytes | memoryview,
                      sections: list, m: object, range_section: np.ndarray,
                      block_start: np.ndarray, range_end: np.ndarray,
                      want: np.ndarray | None = None,
                      sweep: Callable[[np.ndarray], SweptRows] | None = None) -> SweptRows:
    """:func:`~bbmap.binary.disasm.sweep_rows` (with the ``cheap`` column) of the ranges
    ``want`` (bool per range, default all), taking what the cache has and sweeping the
    rest; the cache entry is updated when something new was swept.  ``sweep``: how the
    rest is swept (the run's shared sweep, ``bbmap.cfg.SharedSweep.rows``, which already
    holds the ranges an earlier phase read); by default :func:`sweep_rows`."""
    from bbmap.binary.disasm import sweep_rows

    if sweep is None:
        def sweep(missing: np.ndarray) -> SweptRows:
            return sweep_rows(dis, data, sections, m, range_section, block_start,
                              range_end, missing, cheap=True)

    R = m.num_ranges  # type: ignore[attr-defined]
    wanted = np.ones(R, bool) if want is None else np.asarray(want, bool)
    key = cache.key(data, dis, sections, range_section,
                    m.range_base, block_start, range_end,  # type: ignore[attr-defined]
                    m.range_block_ptr)  # type: ignore[attr-defined]
    got = cache.load(key, R)
    covered = np.zeros(R, bool)
    parts: list[SweptRows] = []
    if got is not None:
        covered[got[0]] = True
        parts.append(got[1])
    missing = wanted & ~covered
    cache.hit_ranges = int((wanted & covered).sum())
    cache.swept_ranges = int(missing.sum())
    if missing.any():
        parts.append(sweep(missing))
        union = merge_swept(list(zip(parts, [covered, missing][-len(parts):])), R)
        covered = covered | missing
        cache.store(key, np.flatnonzero(covered), union)
    else:
        union = parts[0]
    return select_swept(union, wanted, covered)


def merge_swept(parts: list[tuple[SweptRows, np.ndarray]], R: int) -> SweptRows:
    """One sweep of ``R`` ranges from parts that each cover their mask's ranges (the
    cached part and the fresh sweep; the sweeps of a run's phases)."""
    decoded = np.zeros(R, bool)
    end = np.zeros(R, np.uint64)
    bad: list[tuple[int, int]] = []
    for part, mask in parts:
        decoded[mask] = part.decoded[mask]
        end[mask] = part.end[mask]
        bad.extend(x for x in part.bad if mask[x[0]])
    rows = Decoded(*(np.concatenate([getattr(p.rows, f) for p, _ in parts]).astype(t)
                     for f, t in _ROW_FIELDS.items()))
    rr = np.concatenate([p.row_range for p, _ in parts])
    return SweptRows(rows, rr, decoded, end, sorted(bad))


def select_swept(s: SweptRows, wanted: np.ndarray, covered: np.ndarray) -> SweptRows:
    """Only the ranges ``wanted`` of ``s`` (which covers the ranges ``covered``): the
    others look as a sweep that left them out does."""
    if not (covered & ~wanted).any():
        return s  # nothing of another range
    keep = wanted[s.row_range]
    rows = Decoded(*(getattr(s.rows, f)[keep] for f in _ROW_FIELDS))
    return SweptRows(rows, s.row_range[keep], s.decoded & wanted,
                     np.where(wanted, s.end, np.uint64(0)).astype(np.uint64),
                     sorted(x for x in s.bad if wanted[x[0]]))
