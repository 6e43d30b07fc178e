"""Which parts of a profile's address spaces are the binary, and where each sample lands.

Peers lose samples here without saying so (Propeller's empty output for ``.so``, BOLT
dropping ``//anon`` text, llvm-profgen's basename-only match).  This module:

* selects the binary's mappings by build-id first (MMAP2 build-ids, the BUILD_ID
  feature), then exact path, then basename, or by a user-given ``name_override``;
* keeps one interval list per pid with perf's semantics: FORK copies the parent's
  maps, an exec (COMM with the exec flag) ends the old generation, a new mmap over a
  live one replaces the overlapped part;
* deduces text remapped onto huge pages as quipper does (anonymous executable runs
  directly followed, contiguous in VA, by a mapping of the same file);
* classifies samples vectorized: ELF vaddr for those in the binary, and a ``where``
  code for the rest (another DSO, the kernel, unmapped, another pid) so nothing is
  dropped silently;
* keeps the evidence needed to say *why* nothing mapped.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.buckets import IN_BINARY, KERNEL, OTHER_DSO, OTHER_PID, UNMAPPED, status_name
from bbmap.buildid import build_ids_match
from bbmap.errors import Diagnostics
from bbmap.perf.records import (
    CPUMODE_GUEST_KERNEL,
    CPUMODE_KERNEL,
    CommRecord,
    ForkRecord,
    MmapRecord,
    SampleBatch,
    SideRecord,
    SideRecords,
)
from bbmap.translate import (
    SegmentTable,
    alignment_violations,
    base_address_for_mapping,
    mapping_vma_to_offset_array,
)

FILTERED = OTHER_PID  # a pid the caller did not ask for (``pid=``)
# The codes ``classify`` gives (one enumeration with the index and accounting: buckets.py)
WHERE_NAMES = {IN_BINARY: "in-binary", OTHER_DSO: status_name(OTHER_DSO),
               KERNEL: status_name(KERNEL), UNMAPPED: status_name(UNMAPPED),
               FILTERED: status_name(FILTERED)}

KERNEL_START = 0xFFFF_8000_0000_0000  # x86-64 / AArch64 kernel half (BOLT's KernelBaseAddr)
_END = (1 << 63) - 1


def is_anon_name(name: str) -> bool:
    """Names perf and quipper treat as anonymous memory (huge-page text lands here)."""
    return (name.startswith("//anon") or name.startswith("/anon_hugepage")
            or name.startswith("[anon:") or name.startswith("/dev/zero")
            or name.startswith("/memfd:"))


@dataclass
class Mapping:
    """One executable mapping alive in one pid from ``begin`` to ``end`` (time, seq keys)."""

    pid: int
    start: int
    length: int
    pgoff: int
    filename: str
    build_id: str | None
    begin: tuple[int, int]  # (time, seq) from which it is valid
    end: tuple[int, int] = (_END, _END)
    is_binary: bool = False
    dso: int = -1  # index into ProfileMappings.dso_names
    base: int | None = None  # seed 000 base address (binary mappings)
    deduced: str = ""  # "huge-page" when renamed from an anonymous run

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass
class Classified:
    """Per sample: ELF vaddr and file offset (valid where ``where == IN_BINARY``)."""

    vaddr: np.ndarray  # u8
    offset: np.ndarray  # u8
    where: np.ndarray  # i1
    dso: np.ndarray  # i4 into ProfileMappings.dso_names (OTHER_DSO), else -1
    mapping: np.ndarray  # i4 into ProfileMappings.mappings, else -1

    def counts(self) -> dict[str, int]:
        c = np.bincount(self.where.astype(np.int64), minlength=max(WHERE_NAMES) + 1)
        return {WHERE_NAMES[k]: int(c[k]) for k in WHERE_NAMES}


@dataclass
class MappingEvidence:
    """What the profile held, to explain an empty result and name the flag to try."""

    binary_path: str
    binary_build_id: str | None
    build_ids_seen: dict[str, str] = field(default_factory=dict)  # filename -> build-id
    dso_names_seen: Counter = field(default_factory=Counter)  # exec mmaps per filename
    build_id_found: bool = False
    basename_found: bool = False
    name_with_other_build_id: list[tuple[str, str]] = field(default_factory=list)
    matched_by: str | None = None  # "build-id" | "path" | "basename" | "name override"
    binary_mappings: int = 0
    huge_page_runs: int = 0
    pid: int | None = None  # the caller's pid filter
    pids_mapping_binary: list[int] = field(default_factory=list)  # in the whole profile

    def explain(self) -> str:
        """One paragraph: why the binary's mappings were (not) found."""
        base = os.path.basename(self.binary_path)
        if self.binary_mappings:
            return (f"{self.binary_mappings} mapping(s) of {base} found by {self.matched_by}")
        if self.pid is not None and self.pids_mapping_binary:
            pids = ", ".join(map(str, self.pids_mapping_binary[:10]))
            more = len(self.pids_mapping_binary) - 10
            return (f"pid {self.pid} has no executable mapping of {base}; pids that map it "
                    f"(found by {self.matched_by}): {pids}{f' and {more} more' if more > 0 else ''}"
                    "; pass one of them or drop --pid")
        parts = [f"no executable mapping of {base} in the profile"]
        if self.binary_build_id:
            parts.append(f"its build-id {self.binary_build_id} is "
                         + ("present but has no executable mmap" if self.build_id_found
                            else f"not among the {len(self.build_ids_seen)} build-id(s) "
                                 "in the profile"))
        if self.name_with_other_build_id:
            n, b = self.name_with_other_build_id[0]
            parts.append(f"{n} was profiled with build-id {b} (a different build)")
        elif not self.basename_found:
            seen = [n for n, _ in self.dso_names_seen.most_common(5)]
            parts.append(f"no mapped file is named {base} (most mapped: {', '.join(seen)})"
                         if seen else "the profile has no executable mmap records")
        parts.append("pass the name the binary had when profiled with --name")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"binary": self.binary_path, "binary_build_id": self.binary_build_id,
                "matched_by": self.matched_by, "binary_mappings": self.binary_mappings,
                "build_id_found": self.build_id_found, "basename_found": self.basename_found,
                "build_ids_seen": self.build_ids_seen,
                "dso_names_seen": dict(self.dso_names_seen),
                "name_with_other_build_id": self.name_with_other_build_id,
                "huge_page_runs": self.huge_page_runs}


def flatten_side_records(items: Iterable[SideRecords | SideRecord]) -> list[SideRecord]:
    out: list[SideRecord] = []
    for it in items:
        if isinstance(it, SideRecords):
            out.extend(it.records)
        elif not isinstance(it, SampleBatch):
            out.append(it)
    return out


def deduce_huge_pages(mmaps: Sequence[MmapRecord]) -> tuple[list[MmapRecord], int]:
    """quipper's ``DeduceHugePages``, per pid, over exec mmaps in record order.

    A run of anonymous executable mappings (or same-file, 2 MiB-shaped mappings with
    pgoff 0, which perf renames without fixing pgoff), contiguous in VA and directly
    followed by a
    mapping of a file whose ``pgoff >= run length``, is that file: each member gets
    the file's name and ``pgoff = next.pgoff - (next.start - member.start)``.
    Returns the new list and the number of runs rewritten.
    """
    by_pid: dict[int, list[int]] = {}
    for i, m in enumerate(mmaps):
        by_pid.setdefault(m.pid, []).append(i)
    out = list(mmaps)
    runs = 0
    for idxs in by_pid.values():
        k = 0
        while k < len(idxs):
            j = k
            # grow a contiguous run of candidate members
            while j < len(idxs) and _run_member(out[idxs[j]]) and \
                    (j == k or out[idxs[j]].start == out[idxs[j - 1]].start
                     + out[idxs[j - 1]].length):
                j += 1
            if j == k:
                k += 1
                continue
            if j < len(idxs):
                nxt = out[idxs[j]]
                first = out[idxs[k]]
                run_len = nxt.start - first.start
                last = out[idxs[j - 1]]
                ok = (not is_anon_name(nxt.filename) and last.start + last.length == nxt.start
                      and nxt.pgoff >= run_len
                      and all(is_anon_name(out[idxs[t]].filename)
                              or out[idxs[t]].filename == nxt.filename for t in range(k, j)))
                if ok and not (j - k == 1 and first.filename == nxt.filename
                               and first.pgoff == nxt.pgoff - run_len):
                    for t in range(k, j):
                        m = out[idxs[t]]
                        out[idxs[t]] = _replace(m, filename=nxt.filename,
                                                pgoff=nxt.pgoff - (nxt.start - m.start),
                                                build_id=m.build_id or nxt.build_id)
                    runs += 1
            k = j
    return out, runs


HUGE_PAGE = 2 << 20


def _run_member(m: MmapRecord) -> bool:
    """Anonymous exec memory, or a pgoff-0 file mapping shaped like huge pages (2 MiB)."""
    if not m.is_exec:
        return False
    if is_anon_name(m.filename):
        return True
    return m.pgoff == 0 and m.start % HUGE_PAGE == 0 and m.length % HUGE_PAGE == 0


def _replace(m: MmapRecord, **kw: Any) -> MmapRecord:
    d = {f: getattr(m, f) for f in m.__dataclass_fields__}
    d.update(kw)
    return MmapRecord(**d)


class ProfileMappings:
    """The binary's mappings in one profile, per pid and exec generation."""

    def __init__(self, binary: Any, mappings: list[Mapping], dso_names: list[str],
                 evidence: MappingEvidence, diagnostics: Diagnostics, pid: int | None) -> None:
        self.binary = binary
        self.mappings = mappings
        self.dso_names = dso_names
        self.evidence = evidence
        self.diagnostics = diagnostics
        self.pid = pid
        self.segment_table = SegmentTable.from_segments(binary.segments)
        self._build_layers()

    # ------------------------------------------------------------ construction
    @classmethod
    def from_perf(cls, side_records: Iterable[SideRecords | SideRecord], binary: Any, *,
                  build_ids: Sequence[Any] = (), name_override: str | None = None,
                  pid: int | None = None) -> ProfileMappings:
        """Build from side records (any order of SideRecords / records) and BUILD_ID entries.

        ``binary`` needs ``.path``, ``.build_id`` and ``.segments`` (a ``Binary``).
        """
        diags = Diagnostics()
        for v in alignment_violations(binary.segments):
            diags.warn(f"{v}: the base address of such a segment is not well defined",
                       file=str(binary.path))
        recs = flatten_side_records(side_records)
        recs.sort(key=lambda r: (r.time, r.seq))
        mmaps = [r for r in recs if isinstance(r, MmapRecord) and r.is_exec]
        mmaps, runs = deduce_huge_pages(mmaps)
        dedup = {(m.seq): m for m in mmaps}

        ev = MappingEvidence(binary_path=str(binary.path), binary_build_id=binary.build_id,
                      huge_page_runs=runs)
        every_id: list[tuple[str, str]] = []  # a path can hold several builds over a run
        for e in build_ids:
            ev.build_ids_seen.setdefault(e.filename, e.build_id)
            every_id.append((e.filename, e.build_id))
        for m in mmaps:
            ev.dso_names_seen[m.filename] += 1
            if m.build_id:
                ev.build_ids_seen.setdefault(m.filename, m.build_id)
                every_id.append((m.filename, m.build_id))
        is_binary = _matcher(binary, ev, name_override, every_id)

        dso_ids: dict[str, int] = {}
        dso_names: list[str] = []
        live: dict[int, list[Mapping]] = {}
        done: list[Mapping] = []

        def end_live(p: int, key: tuple[int, int]) -> None:
            for mp in live.pop(p, []):
                mp.end = key
                done.append(mp)

        for r in recs:
            key = (r.time, r.seq)
            if isinstance(r, MmapRecord):
                if not r.is_exec:
                    continue
                m = dedup[r.seq]
                binm = is_binary(m)
                if binm:
                    dso = -1
                else:
                    dso = dso_ids.setdefault(m.filename, len(dso_ids))
                    if dso == len(dso_names):
                        dso_names.append(m.filename)
                new = Mapping(m.pid, m.start, m.length, m.pgoff, m.filename, m.build_id,
                              key, is_binary=binm, dso=dso,
                              deduced="huge-page" if m.filename != r.filename else "")
                cur = live.setdefault(m.pid, [])
                keep: list[Mapping] = []
                for old in cur:  # a new mmap over a live one replaces the overlapped part
                    if old.start < new.stop and new.start < old.stop:
                        old.end = key
                        done.append(old)
                        if old.start < new.start:
                            keep.append(_part(old, old.start, new.start, key))
                        if new.stop < old.stop:
                            keep.append(_part(old, new.stop, old.stop, key))
                    else:
                        keep.append(old)
                keep.append(new)
                live[m.pid] = keep
            elif isinstance(r, CommRecord) and r.is_exec:
                end_live(r.pid, key)
            elif isinstance(r, ForkRecord) and r.pid != r.ppid:
                end_live(r.pid, key)  # a reused pid starts afresh
                live[r.pid] = [_part(p, p.start, p.stop, key, pid=r.pid)
                               for p in live.get(r.ppid, [])]
        for p in list(live):
            end_live(p, (_END, _END))
        done.sort(key=lambda mp: (mp.pid, mp.begin, mp.start))

        segs = binary.segments
        for mp in done:
            if mp.is_binary:
                try:
                    mp.base = base_address_for_mapping(mp.start, mp.pgoff, segs, mp.length)
                except Exception as e:  # noqa: BLE001 - reported, the offset path still works
                    diags.warn(f"{mp.filename} mapped at {mp.start:#x} pgoff {mp.pgoff:#x}: {e}")
        ev.binary_mappings = sum(1 for mp in done if mp.is_binary and
                                 (pid is None or mp.pid == pid))
        ev.pid = pid
        ev.pids_mapping_binary = sorted({mp.pid for mp in done if mp.is_binary})
        if pid is not None and not any(mp.pid == pid for mp in done):
            pids = sorted({mp.pid for mp in done if mp.is_binary})
            diags.warn(f"pid {pid} has no mappings in the profile; pids mapping the binary: "
                       f"{pids[:10]}")
        if not ev.binary_mappings:
            diags.warn(ev.explain())
        return cls(binary, done, dso_names, ev, diags, pid)

    @classmethod
    def from_perf_data(cls, perf: Any, binary: Any, *, name_override: str | None = None,
                       pid: int | None = None) -> ProfileMappings:
        """One pass over a :class:`~bbmap.perf.PerfData` collecting only side records."""
        side: list[SideRecord] = []
        for item in perf.stream(branches=False):
            if isinstance(item, SideRecords):
                side.extend(item.records)
        return cls.from_perf(side, binary, build_ids=perf.build_ids,
                             name_override=name_override, pid=pid)

    def binary_mappings(self, pid: int | None = None) -> list[Mapping]:
        return [m for m in self.mappings if m.is_binary and (pid is None or m.pid == pid)]

    # ---------------------------------------------------------- classification
    def _build_layers(self) -> None:
        """Per pid: layers of VA-disjoint mappings, so each layer is one searchsorted."""
        self._layers: dict[int, list[tuple[np.ndarray, ...]]] = {}
        by_pid: dict[int, list[int]] = {}
        for i, m in enumerate(self.mappings):
            by_pid.setdefault(m.pid, []).append(i)
        for p, idxs in by_pid.items():
            idxs.sort(key=lambda i: (self.mappings[i].start, self.mappings[i].begin))
            layers: list[list[int]] = []
            for i in idxs:
                m = self.mappings[i]
                for lay in layers:
                    if self.mappings[lay[-1]].stop <= m.start:
                        lay.append(i)
                        break
                else:
                    layers.append([i])
            packed = []
            for lay in layers:
                ms = [self.mappings[i] for i in lay]
                packed.append((
                    np.array([m.start for m in ms], np.uint64),
                    np.array([m.stop for m in ms], np.uint64),
                    np.array([m.begin[0] for m in ms], np.uint64),
                    np.array([m.begin[1] for m in ms], np.int64),
                    np.array([min(m.end[0], _END) for m in ms], np.uint64),
                    np.array([m.end[1] for m in ms], np.int64),
                    np.array(lay, np.int32)))
            self._layers[p] = packed
        self._is_binary = np.array([m.is_binary for m in self.mappings], bool)
        self._dso = np.array([m.dso for m in self.mappings], np.int32)
        self._start = np.array([m.start for m in self.mappings], np.uint64)
        self._pgoff = np.array([m.pgoff for m in self.mappings], np.uint64)
        self._base = np.array([m.base if m.base is not None else 0 for m in self.mappings],
                              np.uint64)

    def find_mappings(self, pid: np.ndarray, ip: np.ndarray, seq: np.ndarray,
                      time: np.ndarray | None = None) -> np.ndarray:
        """Index of the mapping covering each (pid, ip) at that moment, or -1."""
        n = len(ip)
        out = np.full(n, -1, np.int32)
        ip = np.asarray(ip, np.uint64)
        seq = np.asarray(seq, np.int64)
        use_time = time is not None and bool(np.any(time))
        t = np.asarray(time, np.uint64) if use_time else None
        pid = np.asarray(pid, np.int64)
        if n and bool(np.all(pid == pid[0])):  # one process: no grouping needed
            groups = [(int(pid[0]), None)]
        else:
            order = np.argsort(pid, kind="stable")  # group samples by pid
            sp = pid[order]
            bounds = np.concatenate([[0], np.flatnonzero(sp[1:] != sp[:-1]) + 1, [n]])
            groups = [(int(sp[bounds[k]]), order[bounds[k]:bounds[k + 1]])
                      for k in range(len(bounds) - 1)]
        for p, sel in groups:
            layers = self._layers.get(p)
            if not layers:
                continue
            if sel is None:
                a, s, tt = ip, seq, t
            else:
                a, s = ip[sel], seq[sel]
                tt = t[sel] if t is not None else None
            got = np.full(len(a), -1, np.int32)
            for starts, stops, b_t, b_s, e_t, e_s, ids in layers:
                j = np.searchsorted(starts, a, side="right") - 1
                jj = np.maximum(j, 0)
                ok = (got < 0) & (j >= 0) & (a < stops[jj])
                if tt is not None:
                    after = (tt > b_t[jj]) | ((tt == b_t[jj]) & (s >= b_s[jj]))
                    before = (tt < e_t[jj]) | ((tt == e_t[jj]) & (s < e_s[jj]))
                else:
                    after, before = s >= b_s[jj], s < e_s[jj]
                ok &= after & before
                got[ok] = ids[jj[ok]]
            if sel is None:
                out = got
            else:
                out[sel] = got
        return out

    def constant_between(self, pids: Sequence[int], seq: np.ndarray,
                         time: np.ndarray | None = None) -> bool:
        """Whether no mapping of ``pids`` begins or ends between the first and the last
        of these (time, seq) moments: then an address of one pid classifies the same at
        every one of them (:meth:`find_mappings` is monotone in (time, seq)), so distinct
        addresses may be classified once.  Same time rule as :meth:`find_mappings`."""
        seq = np.asarray(seq, np.int64)
        if not len(seq):
            return True
        use_time = time is not None and bool(np.any(time))
        if use_time:
            t = np.asarray(time, np.uint64)
            lo_t, hi_t = t.min(), t.max()
            lo = (int(lo_t), int(seq[t == lo_t].min()))
            hi = (int(hi_t), int(seq[t == hi_t].max()))
        for p in pids:
            for _starts, _stops, b_t, b_s, e_t, e_s, _ids in self._layers.get(int(p), []):
                if use_time:
                    a_lo = (lo[0] > b_t) | ((lo[0] == b_t) & (lo[1] >= b_s))
                    a_hi = (hi[0] > b_t) | ((hi[0] == b_t) & (hi[1] >= b_s))
                    z_lo = (lo[0] < e_t) | ((lo[0] == e_t) & (lo[1] < e_s))
                    z_hi = (hi[0] < e_t) | ((hi[0] == e_t) & (hi[1] < e_s))
                else:
                    s_lo, s_hi = int(seq.min()), int(seq.max())
                    a_lo, a_hi = s_lo >= b_s, s_hi >= b_s
                    z_lo, z_hi = s_lo < e_s, s_hi < e_s
                if (a_lo != a_hi).any() or (z_lo != z_hi).any():
                    return False
        return True

    def classify(self, batch: SampleBatch | None = None, *, pid: Any = None, ip: Any = None,
                 seq: Any = None, time: Any = None, cpumode: Any = None) -> Classified:
        """Where each sample is, and its ELF vaddr / file offset when in the binary.

        perf's rule: ``file_offset = ip - mmap.start + mmap.pgoff``; the vaddr follows
        from the executable PT_LOAD holding that offset (seed 000).  An offset outside
        every PT_LOAD falls back to the mapping's base address (it then lies outside
        every function, and the index says so).
        """
        if batch is not None:
            pid, ip, seq, time, cpumode = batch.pid, batch.ip, batch.seq, batch.time, \
                batch.cpumode
        ip = np.asarray(ip, np.uint64)
        n = len(ip)
        seq = np.zeros(n, np.int64) if seq is None else np.asarray(seq, np.int64)
        pid = np.asarray(pid, np.int64)
        where = np.full(n, UNMAPPED, np.int8)
        kern = ip >= np.uint64(KERNEL_START)
        if cpumode is not None:
            cm = np.asarray(cpumode)
            kern |= (cm == CPUMODE_KERNEL) | (cm == CPUMODE_GUEST_KERNEL)
        mp = np.full(n, -1, np.int32)
        user = ~kern
        if self.pid is not None:
            other = user & (pid != self.pid)
            where[other] = FILTERED
            user &= ~other
        if self.mappings and user.all():  # the common case: no masked copies
            mp = self.find_mappings(pid, ip, seq, None if time is None else np.asarray(time))
        elif self.mappings and user.any():
            mp[user] = self.find_mappings(pid[user], ip[user], seq[user],
                                          None if time is None else np.asarray(time)[user])
        where[kern] = KERNEL
        hit = mp >= 0
        mpi = np.maximum(mp, 0)
        inbin = hit & self._is_binary[mpi] if len(self.mappings) else hit
        where[hit & ~inbin] = OTHER_DSO
        where[inbin] = IN_BINARY
        dso = np.where(hit & ~inbin, self._dso[mpi] if len(self.mappings) else -1, -1)
        vaddr = np.zeros(n, np.uint64)
        offset = np.zeros(n, np.uint64)
        if inbin.all():  # whole batch in the binary: no gathers through an index list
            off = mapping_vma_to_offset_array(ip, self._start[mp], self._pgoff[mp])
            va, found = self.segment_table.offset_to_vaddr(off)
            vaddr = va if found.all() else np.where(found, va, ip - self._base[mp])
            offset = off
        elif inbin.any():
            k = np.flatnonzero(inbin)
            m = mp[k]
            off = mapping_vma_to_offset_array(ip[k], self._start[m], self._pgoff[m])
            va, found = self.segment_table.offset_to_vaddr(off)
            va = np.where(found, va, ip[k] - self._base[m])
            vaddr[k] = va
            offset[k] = off
        return Classified(vaddr, offset, where, dso.astype(np.int32), mp)


def _part(m: Mapping, lo: int, hi: int, key: tuple[int, int], pid: int | None = None
          ) -> Mapping:
    """The [lo, hi) piece of a mapping, valid from ``key`` (remnant or forked copy)."""
    return Mapping(m.pid if pid is None else pid, lo, hi - lo, m.pgoff + (lo - m.start),
                   m.filename, m.build_id, key, is_binary=m.is_binary, dso=m.dso,
                   base=m.base, deduced=m.deduced)


def _matcher(binary: Any, ev: MappingEvidence, name_override: str | None,
             every_id: Sequence[tuple[str, str]] = ()):
    """Decide, per mmap, whether it is the binary; fills ``ev.matched_by``.
    ``every_id``: every (filename, build-id) of the profile, not only the first per name."""
    path = os.path.abspath(str(binary.path))
    real = os.path.realpath(path)
    base = os.path.basename(path)
    bid = binary.build_id
    bid_names = {n for n, b in (*ev.build_ids_seen.items(), *every_id)
                 if build_ids_match(b, bid)}
    ev.build_id_found = bool(bid_names)
    names = set(ev.dso_names_seen) | set(ev.build_ids_seen)
    ev.basename_found = any(os.path.basename(n) == base for n in names)
    for n, b in ev.build_ids_seen.items():
        if os.path.basename(n) == base and bid and not build_ids_match(b, bid):
            ev.name_with_other_build_id.append((n, b))

    def by_name(name: str, want: str) -> bool:
        return name == want if os.path.isabs(want) else os.path.basename(name) == want

    if name_override:
        ev.matched_by = "name override"
        return lambda m: by_name(m.filename, name_override)
    if bid_names:
        ev.matched_by = "build-id"
        return lambda m: (build_ids_match(m.build_id, bid) if m.build_id
                          else m.filename in bid_names)
    other_bid = {n for n, _ in ev.name_with_other_build_id}

    def fallback(m: MmapRecord) -> bool:
        if m.build_id and bid:
            return False  # the mmap names its build-id and it is not ours
        if m.filename in other_bid:
            return False
        return m.filename in (path, real) or os.path.basename(m.filename) == base

    exact = any(n in (path, real) for n in names)
    ev.matched_by = "path" if exact else ("basename" if ev.basename_found else None)
    return fallback
