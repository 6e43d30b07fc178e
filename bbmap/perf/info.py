"""``perf_info``: what a perf.data file holds, as one JSON-able dict (spec/perf-info-json.md).

One streaming pass (branch entries are counted, never kept), so it works on files of any
size.  Record type names are perf's, without ``PERF_RECORD_``; the counts equal the
"Aggregated stats" of ``perf report -D``.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict

import numpy as np

from bbmap.formats import perfdata as fmt
from bbmap.perf.reader import PerfData
from bbmap.perf.records import CommRecord, MmapRecord, SampleBatch, SideRecords

SCHEMA_VERSION = 1


def perf_info(path: str | os.PathLike, *, max_exec_files: int = 50,
              diagnostics: list | None = None) -> dict:
    """Summarize ``path``; raises BBMapError only when it is not perf data at all.
    ``diagnostics``, if given, receives the reader's Diagnostic objects (with severity)."""
    p = PerfData(path)
    per_event = np.zeros(max(len(p.attrs), 1) + 1, np.int64)
    per_mode = np.zeros(fmt.MISC_CPUMODE_MASK + 1, np.int64)
    total = with_br = br_entries = 0
    t_min, t_max = None, None
    mmaps: dict[int, Counter] = defaultdict(Counter)
    exec_files: dict[int, dict[str, None]] = defaultdict(dict)
    comms: dict[int, str] = {}
    mmap_ids: dict[tuple[str, str], None] = {}
    for item in p.stream(branches=True):
        if isinstance(item, SampleBatch):
            n = len(item)
            if not n:
                continue
            total += n
            if len(per_event) < len(p.attrs) + 1:  # pipe mode: attrs may arrive late
                per_event = np.resize(per_event, len(p.attrs) + 1)
            per_event += np.bincount(item.event.astype(np.int64),
                                     minlength=len(per_event))[:len(per_event)]
            per_mode += np.bincount(item.cpumode & fmt.MISC_CPUMODE_MASK,
                                    minlength=len(per_mode))[:len(per_mode)]
            counts = np.diff(item.br_ptr)
            with_br += int(np.count_nonzero(counts))
            br_entries += int(counts.sum())
            nz = item.time[item.time != 0]
            if len(nz):
                lo, hi = int(nz.min()), int(nz.max())
                t_min = lo if t_min is None else min(t_min, lo)
                t_max = hi if t_max is None else max(t_max, hi)
        elif isinstance(item, SideRecords):
            for r in item.records:
                if isinstance(r, MmapRecord):
                    mmaps[r.pid]["mmap2" if r.is_mmap2 else "mmap"] += 1
                    if r.is_exec:
                        exec_files[r.pid].setdefault(r.filename, None)
                    if r.build_id:
                        mmap_ids.setdefault((r.build_id, r.filename), None)
                elif isinstance(r, CommRecord):
                    comms[r.pid] = r.comm
    events = []
    for k, a in enumerate(p.attrs):
        e = a.to_json()
        e["samples"] = int(per_event[k]) if k < len(per_event) else 0
        events.append(e)
    processes = []
    for pid in sorted(mmaps):
        files = list(exec_files[pid])
        processes.append({"pid": pid, "comm": comms.get(pid), "mmaps": sum(mmaps[pid].values()),
                          "exec_files": files[:max_exec_files],
                          "exec_files_omitted": max(0, len(files) - max_exec_files)})
    if diagnostics is not None:
        diagnostics.extend(p.diagnostics)
    return {
        "schema": SCHEMA_VERSION,
        "file": p.path,
        "mode": p.mode,
        "size": p.file_size,
        "header": p.header,
        "events": events,
        "features": p.features,
        "build_ids": [b.to_json() for b in p.build_ids],
        "mmap_build_ids": [{"build_id": b, "filename": f} for b, f in mmap_ids],
        "records": dict(sorted(p.record_counts.items())),
        "samples": {
            "total": total,
            "by_event": _by_event(p, per_event),
            "by_cpumode": {fmt.CPUMODE_NAMES.get(m, str(m)): int(c)
                           for m, c in enumerate(per_mode) if c},
            "with_branch_stack": with_br,
            "branch_entries": br_entries,
            "time_first": t_min,
            "time_last": t_max,
        },
        "mmaps": processes,
        "lost": int(p.lost + p.lost_samples),
        "lost_detail": {"LOST": int(p.lost), "LOST_SAMPLES": int(p.lost_samples)},
        "trust_end": p.trust_end,
        "warnings": [str(d) for d in p.diagnostics],
        "errors": sum(1 for d in p.diagnostics if d.severity == "error"),
    }


def _by_event(p: PerfData, per_event: np.ndarray) -> dict[str, int]:
    """Samples per event name; a repeated name gets ``#index`` so no count is lost."""
    out: dict[str, int] = {}
    for k, a in enumerate(p.attrs):
        name = a.name or str(k)
        if name in out:
            name = f"{name}#{k}"
        out[name] = int(per_event[k]) if k < len(per_event) else 0
    return out


def format_text(info: dict, errors: frozenset[str] | set[str] = frozenset()) -> str:
    """A human summary of :func:`perf_info`'s dict (``errors``: the warnings that are
    errors, labelled so)."""
    out = [f"{info['file']}: {info['mode']} mode, {info['size']} bytes"]
    f = info["features"]
    for key in ("hostname", "osrelease", "arch", "version"):
        if key in f:
            out.append(f"  {key:<10} {f[key]}")
    if "nrcpus" in f:
        out.append(f"  {'cpus':<10} {f['nrcpus']['online']} online, "
                   f"{f['nrcpus']['avail']} available")
    if "cmdline" in f:
        out.append(f"  {'cmdline':<10} {' '.join(f['cmdline'])}")
    if "compressed" in f:
        out.append(f"  {'compressed':<10} {f['compressed']}")
    out.append("events:")
    for e in info["events"]:
        out.append(f"  {e['name']:<24} type {e['type']} config {e['config']:#x} "
                   f"sample_type {'|'.join(e['sample_type_names'])}  samples {e['samples']}")
    s = info["samples"]
    modes = ", ".join(f"{k} {v}" for k, v in s["by_cpumode"].items())
    out.append(f"samples: {s['total']} ({modes})")
    if s["branch_entries"]:
        out.append(f"  branch stacks: {s['with_branch_stack']} samples, "
                   f"{s['branch_entries']} entries")
    out.append(f"lost: {info['lost']}")
    out.append("records:")
    for name, n in info["records"].items():
        out.append(f"  {name:<16} {n}")
    if info["build_ids"]:
        out.append("build ids:")
        for b in info["build_ids"]:
            out.append(f"  {b['build_id']:<42} {b['filename']}")
    if info["mmaps"]:
        out.append("processes with mmaps:")
        for proc in info["mmaps"]:
            files = ", ".join(proc["exec_files"][:5])
            more = len(proc["exec_files"]) - 5 + proc["exec_files_omitted"]
            tail = f" (+{more} more)" if more > 0 else ""
            out.append(f"  pid {proc['pid']:<7} {proc['comm'] or '?':<16} "
                       f"{proc['mmaps']} mmaps; exec: {files}{tail}")
    for w in info["warnings"]:
        out.append(f"{'error' if w in errors else 'warning'}: {w}")
    return "\n".join(out)
