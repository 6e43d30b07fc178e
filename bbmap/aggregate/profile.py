"""One perf.data file through the mapping layer into an :class:`Annotator`, in one pass.

``ProfileMappings`` is built from side records, but perf writes per-CPU buffers in
rounds, so a sample can come (in file order) before the mmap/exec/fork record that
precedes it in time.  Rather than always reading the file twice (mmaps first, then
samples), the mappings are rebuilt from the side records seen so far before each group
of sample batches, and the first HOLD_BACK samples are held until the start-up churn of
records has passed.  If a record that moves mappings still arrives older than a sample
already classified, the file is aggregated again with the complete mappings (a second
pass), so the answer always equals the two-pass one.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from bbmap.aggregate.annotator import Annotator
from bbmap.aggregate.explain import ProfileEvidence
from bbmap.aggregate.identity import ProfiledFile
from bbmap.aggregate.resolve import IndexResolver
from bbmap.aggregate.result import ProfileInfo
from bbmap.errors import Diagnostic
from bbmap.perf.records import CommRecord, ForkRecord, MmapRecord, SampleBatch, SideRecords

HOLD_BACK = 1 << 17  # samples + branch entries held before the first classification


class MappingsSpace:
    """Adapter: :class:`bbmap.mappings.ProfileMappings` as an annotate AddressSpace."""

    def __init__(self, pm) -> None:  # noqa: ANN001 - a ProfileMappings
        self.pm = pm

    @property
    def dso_names(self) -> list[str]:
        return self.pm.dso_names

    def classify(self, addr, pid, seq, cpumode, time=None):  # noqa: ANN001, ANN201
        c = self.pm.classify(pid=pid, ip=addr, seq=seq, cpumode=cpumode, time=time)
        # the mapping layer's codes are buckets (bbmap.buckets); "in the binary" is
        # OUTSIDE_FUNCTION until the index refines it
        return c.where, c.vaddr, c.dso

    def constant_between(self, pids, seq, time=None) -> bool:  # noqa: ANN001
        return self.pm.constant_between(pids, seq, time)


DAMAGED = "the profile is damaged or truncated:"  # said first: it explains what follows

def read_profile(path: str, binary, index,  # noqa: ANN001
                 fresh: Callable[[], Annotator], evidence: ProfileEvidence,
                 warnings: list[Diagnostic], *, name_override: str | None = None,
                 pid: int | None = None, chunk_samples: int = 65536,
                 progress: Callable[[int], None] | None = None,
                 event: str | None = None) -> tuple[ProfileInfo, Annotator]:
    """Stream ``path`` into an annotator ``fresh()`` makes; add evidence and diagnostics;
    return the profile's description and its counts (the caller merges them once).
    ``event``: count only the samples of that event (by name, with or without perf's
    modifiers: ``cpu-clock`` or ``cpu-clock:u``); the others are left out, and said so."""
    from bbmap.perf import PerfData

    perf = PerfData(path)
    sub = fresh()
    picker = EventPicker(event, path) if event else None
    if picker is not None and perf.mode == "file":
        picker.check(perf)  # the attrs are known: fail before reading (a pipe: at the end)
    pm, side, reread, samples, branches = _pass(perf, binary, index, sub, None, name_override,
                                                pid, chunk_samples, progress, picker)
    if reread:
        # side records arrived (in file order) after samples they precede in time: perf
        # writes per-CPU buffers in rounds.  Aggregate again with the complete mappings.
        sub = fresh()
        if picker is not None:
            picker.left_out = 0
        pm, _, _, samples, branches = _pass(PerfData(path), binary, index, sub, pm,
                                            name_override, pid, chunk_samples, progress,
                                            picker)
    if sub.addresses is not None:
        sub.addresses.name_events([a.name for a in perf.attrs])
    ev = pm.evidence
    for fn, bid in ev.build_ids_seen.items():
        evidence.profile_build_ids.append((fn, bid))
    if ev.matched_by:
        evidence.matched_by.add(ev.matched_by)
    _profiled_files(pm, side, evidence)
    evidence.binary_mmaps += ev.binary_mappings
    undecoded = max(0, perf.record_counts.get("SAMPLE", 0) - samples)
    evidence.undecoded_samples += undecoded
    if undecoded and evidence.undecoded_at is None:
        first = next((d for d in perf.diagnostics if d.offset is not None), None)
        if first is not None:
            evidence.undecoded_at = (path, first.section, first.offset)
    if not ev.binary_mappings:
        evidence.mapping_notes.append(f"{path}: {ev.explain()}")
    for d in perf.diagnostics:
        warnings.append(d)
    stop = _damaged_at(perf)
    if stop is not None:
        warnings.append(Diagnostic(
            f"{DAMAGED} the counts cover only the {samples} "
            f"samples before offset {stop:#x}", file=path, severity="error"))
    explained = ev.explain()
    for d in pm.diagnostics:
        if d.message != explained:  # that one is part of the diagnosis (explain.py)
            warnings.append(d)
    if perf.lost or perf.lost_samples:
        warnings.append(Diagnostic(f"the kernel lost {perf.lost} events and "
                                   f"{perf.lost_samples} samples while recording",
                                   file=path))
    if picker is not None:
        picker.check(perf)
        if picker.left_out:
            warnings.append(Diagnostic(
                f"--event {event}: counted {samples} samples of {picker.matched(perf)}; "
                f"left out {picker.left_out} samples of the other events", file=path))
    elif len(perf.attrs) > 1:
        warnings.append(Diagnostic(
            f"{len(perf.attrs)} events ({', '.join(a.name for a in perf.attrs)}) are counted "
            "together; record one event to keep their counts apart", file=path))
    base = os.path.basename(os.fspath(binary.path))
    own = [b for f, b in ev.build_ids_seen.items() if os.path.basename(f) == base]
    return ProfileInfo(path=path, mode=perf.mode,
                       events=[a.name for a in perf.attrs], samples=samples,
                       branches=branches, build_id=own[0] if own else None,
                       binary_mmaps=ev.binary_mappings), sub


def _profiled_files(pm, side: list, evidence: ProfileEvidence) -> None:  # noqa: ANN001
    """The files this profile mapped as the binary, or would have but for their build-id,
    with the build-id and inode recorded for them (explain.identity_findings)."""
    ev = pm.evidence
    names = {m.filename for m in pm.binary_mappings()}
    names |= {n for n, _ in ev.name_with_other_build_id}
    known = {p.filename for p in evidence.profiled}
    inodes = {}
    for r in side:
        if isinstance(r, MmapRecord) and r.filename in names and r.inode is not None:
            inodes.setdefault(r.filename, r.inode)
    for n in sorted(names - known):
        evidence.profiled.append(ProfiledFile(n, ev.build_ids_seen.get(n), inodes.get(n)))


class EventPicker:
    """``--event NAME``: which attrs of a profile are that event (by name; perf names
    events ``cpu-clock:pppH``, ``cycles:u``: the part before ``:`` matches too)."""

    def __init__(self, name: str, path: str) -> None:
        self.name, self.path = name, path
        self.left_out = 0

    def indexes(self, perf) -> np.ndarray:  # noqa: ANN001 - a PerfData
        names = [a.name for a in perf.attrs]
        exact = [i for i, n in enumerate(names) if n == self.name]
        loose = [i for i, n in enumerate(names) if n.split(":")[0] == self.name.split(":")[0]]
        return np.array(exact or loose, np.int64)

    def matched(self, perf) -> str:  # noqa: ANN001
        return ", ".join(perf.attrs[i].name for i in self.indexes(perf).tolist())

    def keep(self, perf, batch: SampleBatch) -> SampleBatch:  # noqa: ANN001
        mask = np.isin(batch.event.astype(np.int64), self.indexes(perf))
        n = int(len(batch) - mask.sum())
        if not n:
            return batch
        self.left_out += n
        return batch.select(mask)

    def check(self, perf) -> None:  # noqa: ANN001
        if not len(self.indexes(perf)):
            from bbmap.errors import UsageError

            raise UsageError(f"--event {self.name}: the profile has no such event (it has "
                             f"{', '.join(a.name for a in perf.attrs) or 'none'})",
                             file=self.path)


def _pass(perf, binary, index, ann, final, name_override, pid, chunk_samples,  # noqa: ANN001
          progress, picker=None):  # noqa: ANN001, ANN202
    """One streaming pass.  Without ``final`` mappings they are (re)built from the side
    records seen so far whenever new ones arrived; sample batches are held back up to
    HOLD_BACK samples (or branch entries) so the churn of records at process start is
    absorbed.  If a record that moves mappings is older (in time) than a sample already
    classified, the pass reports that a re-read is needed."""
    from bbmap.mappings import ProfileMappings

    def build(side: list) -> ProfileMappings:
        return ProfileMappings.from_perf(side, binary, build_ids=perf.build_ids,
                                         name_override=name_override, pid=pid)

    nmap = ann.block_map.num_functions
    side: list = []
    state = {"pm": final, "built_at": -1, "seen": -1, "samples": 0, "branches": 0,
             "resolver": None if final is None else IndexResolver(MappingsSpace(final), index,
                                                                  nmap)}
    pending: list[SampleBatch] = []
    held = 0
    reread = False

    def flush() -> None:
        if not pending:
            return
        if final is None and (state["pm"] is None or state["built_at"] != len(side)):
            state["pm"] = build(side)
            state["built_at"] = len(side)
            state["resolver"] = IndexResolver(MappingsSpace(state["pm"]), index, nmap)
        for b in pending:
            if picker is not None:
                b = picker.keep(perf, b)
            ann.add_batch(b, state["resolver"])
            state["samples"] += len(b)
            state["branches"] += len(b.br_from)
            state["seen"] = max(state["seen"], int(b.time.max()))
        pending.clear()
        if progress is not None:
            if getattr(progress, "takes_fraction", False):
                progress(state["samples"], perf.progress_fraction())
            else:
                progress(state["samples"])

    for item in perf.stream(chunk_samples):
        if isinstance(item, SideRecords):
            if final is None:
                if state["samples"] and not reread:
                    reread = any(r.time < state["seen"] for r in item.records
                                 if _moves_maps(r))
                side.extend(item.records)
            continue
        if not isinstance(item, SampleBatch) or not len(item):
            continue
        pending.append(item)
        held += len(item) + len(item.br_from)
        if final is not None or held >= HOLD_BACK:
            flush()
            held = 0
    flush()
    pm = state["pm"]
    if pm is None or (final is None and state["built_at"] != len(side)):
        pm = build(side)
    return pm, side, reread, state["samples"], state["branches"]


def _moves_maps(r) -> bool:  # noqa: ANN001
    """Side records that change which mapping a sample falls in (exec mmaps, exec, fork)."""
    if isinstance(r, MmapRecord):
        return r.is_exec
    if isinstance(r, CommRecord):
        return r.is_exec
    return isinstance(r, ForkRecord)


def _damaged_at(perf) -> int | None:  # noqa: ANN001
    """Where the reader had to stop trusting the file (a broken record, or a data section
    the file is too short for), or None when every record was read."""
    if getattr(perf, "trust_end", None) is not None:
        return int(perf.trust_end)
    data = (getattr(perf, "header", None) or {}).get("data") or {}
    end = int(data.get("offset", 0)) + int(data.get("size", 0))
    if perf.mode == "file" and end > perf.file_size:
        return int(perf.file_size)
    return None
