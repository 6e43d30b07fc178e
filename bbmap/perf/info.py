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
    named: dict[str, str | None] = {}  # file -> the build-id the profile recorded for it
    for b in p.build_ids:
        named.setdefault(b.filename, b.build_id)
    for bid, f in mmap_ids:
        named.setdefault(f, bid)
    for pid in sorted(exec_files):
        for f in exec_files[pid]:
            named.setdefault(f, None)
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
        "binaries": binaries_on_disk(named, limit=max_exec_files),
        "lost": int(p.lost + p.lost_samples),
        "lost_detail": {"LOST": int(p.lost), "LOST_SAMPLES": int(p.lost_samples)},
        "trust_end": p.trust_end,
        "warnings": [str(d) for d in p.diagnostics],
        "errors": sum(1 for d in p.diagnostics if d.severity == "error"),
    }


def binaries_on_disk(named: dict[str, str | None], *, limit: int = 50) -> list[dict]:
    """The files the profile names (build-id records first, then executable mappings)
    as they are on disk now: their GNU build-id against the recorded one, and a Go
    binary's Go build id (the identity perf never records).  Pseudo files
    (``[vdso]``, ``//anon``) and relative names are skipped; at most ``limit`` files."""
    from bbmap.binary import load_binary
    from bbmap.buildid import build_ids_match
    from bbmap.errors import BBMapError

    out = []
    for f, recorded in named.items():
        if len(out) >= limit:
            break
        if not os.path.isabs(f) or f.startswith("//"):
            continue
        e: dict = {"filename": f, "recorded_build_id": recorded, "on_disk": False,
                   "build_id": None, "same_build": None, "go": None}
        if os.path.isfile(f):
            try:
                with load_binary(f) as b:
                    e["on_disk"] = True
                    e["build_id"] = b.build_id
                    if recorded and b.build_id:
                        e["same_build"] = build_ids_match(recorded, b.build_id)
                    elif recorded:
                        e["same_build"] = False  # it had one when recorded
                    go = b.go
                    if go is not None:
                        e["go"] = {"build_id": go.build_id, "version": go.version,
                                   "path": go.build_info.path if go.build_info else None}
            except (BBMapError, OSError):
                pass  # not ELF (a script, a JIT dump): nothing to say
        if recorded or e["on_disk"]:
            out.append(e)
    return out


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
    described = [b for b in info.get("binaries", []) if b["on_disk"]]
    if described:
        out.append("binaries on disk now:")
        for b in described:
            out.append(f"  {b['filename']}: {_disk_line(b)}")
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


def _disk_line(b: dict) -> str:
    rec, disk = b["recorded_build_id"], b["build_id"]
    if rec and b["same_build"]:
        ident = f"build-id {disk} as recorded"
    elif rec:
        ident = (f"build-id {disk or 'none'}, but the profile recorded {rec}: another build "
                 "is on disk now")
    else:
        ident = f"no build-id recorded (on disk: {disk or 'none'})"
    go = b["go"]
    if go:
        ident += f"; Go build id {go['build_id'] or '(none)'} ({go['version'] or '?'})"
        if not rec:
            ident += ": perf keys binaries by the GNU build-id only, so this one matches by path"
    return ident
