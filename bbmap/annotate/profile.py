"""One perf.data file through the mapping layer into an :class:`Annotator`, in one pass.

``ProfileMappings`` is built from side records; rather than reading the file twice (once
for mmaps, once for samples) the mappings are rebuilt from the side records seen so far
whenever new ones arrived before a sample batch.  A sample is only ever classified
against mappings that began before it, so this equals the two-pass answer, and a
single-process profile (mmaps first) rebuilds once.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from bbmap.annotate.accounting import KERNEL, OTHER_DSO, OTHER_PID, OUTSIDE_FUNCTION, UNMAPPED
from bbmap.annotate.explain import Evidence
from bbmap.annotate.resolve import IndexResolver
from bbmap.annotate.result import ProfileInfo
from bbmap.errors import Diagnostic
from bbmap.perf.records import SampleBatch, SideRecords


class MappingsSpace:
    """Adapter: :class:`bbmap.mappings.ProfileMappings` as an annotate AddressSpace."""

    def __init__(self, pm) -> None:  # noqa: ANN001 - a ProfileMappings
        from bbmap import mappings as mp

        self.pm = pm
        self._code = np.full(8, UNMAPPED, np.int8)
        self._code[mp.IN_BINARY] = OUTSIDE_FUNCTION  # "in the binary"; the index refines it
        self._code[mp.OTHER_DSO] = OTHER_DSO
        self._code[mp.KERNEL] = KERNEL
        self._code[mp.UNMAPPED] = UNMAPPED
        self._code[mp.FILTERED] = OTHER_PID

    @property
    def dso_names(self) -> list[str]:
        return self.pm.dso_names

    def classify(self, addr, pid, seq, cpumode):  # noqa: ANN001, ANN201
        c = self.pm.classify(pid=pid, ip=addr, seq=seq, cpumode=cpumode)
        return self._code[c.where], c.vaddr, c.dso


def read_profile(path: str, binary, index, ann, evidence: Evidence,  # noqa: ANN001
                 warnings: list[Diagnostic], *, name_override: str | None = None,
                 pid: int | None = None, chunk_samples: int = 65536,
                 progress: Callable[[int], None] | None = None) -> ProfileInfo:
    """Stream ``path`` into ``ann``; add evidence and diagnostics; describe the profile."""
    from bbmap.mappings import ProfileMappings
    from bbmap.perf import PerfData

    perf = PerfData(path)
    side: list = []
    built_at = -1
    pm = None
    resolver = None
    samples = branches = 0
    nmap = ann.block_map.num_functions
    for item in perf.stream(chunk_samples):
        if isinstance(item, SideRecords):
            side.extend(item.records)
            continue
        if not isinstance(item, SampleBatch) or not len(item):
            continue
        if pm is None or built_at != len(side):
            pm = ProfileMappings.from_perf(side, binary, build_ids=perf.build_ids,
                                           name_override=name_override, pid=pid)
            built_at = len(side)
            resolver = IndexResolver(MappingsSpace(pm), index, nmap)
        ann.add_batch(item, resolver)
        samples += len(item)
        branches += len(item.br_from)
        if progress is not None:
            progress(samples)
    if pm is None or built_at != len(side):
        pm = ProfileMappings.from_perf(side, binary, build_ids=perf.build_ids,
                                       name_override=name_override, pid=pid)
    ev = pm.evidence
    for fn, bid in ev.build_ids_seen.items():
        evidence.profile_build_ids.append((fn, bid))
    evidence.binary_mmaps += ev.binary_mappings
    if not ev.binary_mappings:
        evidence.mapping_notes.append(f"{path}: {ev.explain()}")
    for d in perf.diagnostics:
        warnings.append(d)
    for d in pm.diagnostics:
        if d.severity == "error" or ev.binary_mappings:
            warnings.append(d)
    if perf.lost or perf.lost_samples:
        warnings.append(Diagnostic(f"the kernel lost {perf.lost} events and "
                                   f"{perf.lost_samples} samples while recording",
                                   file=path))
    base = os.path.basename(os.fspath(binary.path))
    own = [b for f, b in ev.build_ids_seen.items() if os.path.basename(f) == base]
    return ProfileInfo(path=path, mode=perf.mode,
                       events=[a.name for a in perf.attrs], samples=samples,
                       branches=branches, build_id=own[0] if own else None,
                       binary_mmaps=ev.binary_mappings)
