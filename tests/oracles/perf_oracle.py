"""Parse what real perf prints, so bbmap's reader can be checked against it.

``perf report -D`` ends with per-type record counts ("Aggregated stats"), and
``perf script -F pid,tid,ip,time --ns -G`` / ``-F ip,brstack`` print one sample a line.
Tests and goldens compare bbmap's counts and samples with these (perf sorts samples by
time, so comparisons are of sorted rows, not of file order).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import numpy as np

from bbmap.formats import perfdata as fmt
from bbmap.perf.reader import PerfData
from bbmap.perf.records import SampleBatch

_STAT = re.compile(r"^\s*(\w+) events:\s+(\d+)")


def have_perf() -> bool:
    return shutil.which("perf") is not None


def _run(args: list[str], timeout: int = 300) -> str:
    r = subprocess.run(["perf", *args], capture_output=True, text=True, timeout=timeout,
                       errors="replace")
    return r.stdout


def parse_report_d_stats(text: str) -> dict[str, int]:
    """Record counts by type from the "Aggregated stats" block of ``perf report -D``."""
    counts: dict[str, int] = {}
    lines = text.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if line.startswith("Aggregated stats"))
    except ValueError:
        return counts
    for line in lines[start + 1:]:
        m = _STAT.match(line)
        if not m:
            break
        if m.group(1) != "TOTAL":
            counts[m.group(1)] = int(m.group(2))
    return counts


def parse_report_d_event_samples(text: str) -> list[int]:
    """Per-event SAMPLE counts (the "<event> stats:" blocks after "Aggregated stats").

    With branch stacks perf counts branch entries here instead, so use it for plain files.
    """
    lines = text.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if line.startswith("Aggregated stats"))
    except ValueError:
        return []
    out = []
    for i, line in enumerate(lines[start:], start):
        if line.rstrip().endswith(" stats:") and i + 1 < len(lines):
            m = _STAT.match(lines[i + 1])
            if m and m.group(1) == "SAMPLE":
                out.append(int(m.group(2)))
    return out


def report_d_stats(path: str) -> dict[str, int]:
    return parse_report_d_stats(_run(["report", "-D", "-i", path]))


def report_d(path: str) -> str:
    return _run(["report", "-D", "-i", path])


def parse_script_samples(text: str) -> list[tuple[int, int, int, int]]:
    """``perf script -F pid,tid,ip,time --ns -G`` rows as (pid, tid, time_ns, ip)."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or "/" not in parts[0] or not parts[1].endswith(":"):
            continue
        pid, tid = parts[0].split("/")
        secs, nsecs = parts[1][:-1].split(".")
        rows.append((int(pid), int(tid), int(secs) * 10**9 + int(nsecs), int(parts[2], 16)))
    return rows


_ROW = re.compile(r"^\s*(?:\S.*?\s+)?(-?\d+)/(-?\d+)\s+(\d+)\.(\d+):\s*([0-9a-f]+)?(?:\s|$)")
_CHAIN = re.compile(r"^\s+([0-9a-f]+)\s")


def parse_script_rows(text: str) -> tuple[list[tuple[int, int, int, int]], int]:
    """Rows of any ``perf script`` output with pid/tid and time (and usually ip) fields.

    Returns (rows, digits): rows are (pid, tid, time, ip) with time in units of
    10**-digits s (perf prints 6 digits, 9 with --ns).  With call graphs the ip is on the
    next line (the first chain entry, which perf may print as a DSO offset): such rows
    get ip -1, meaning "compare pid, tid and time only".
    """
    rows: list[tuple[int, int, int, int]] = []
    digits = 9
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _ROW.match(line)
        if not m:
            continue
        digits = len(m.group(4))
        ip_text = m.group(5)
        if ip_text is not None:
            ip = int(ip_text, 16)
        elif i + 1 < len(lines) and _CHAIN.match(lines[i + 1]):
            ip = -1
        else:
            continue
        t = int(m.group(3)) * 10**digits + int(m.group(4))
        rows.append((int(m.group(1)), int(m.group(2)), t, ip))
    return rows, digits


def script_samples(path: str) -> list[tuple[int, int, int, int]]:
    return parse_script_samples(_run(["script", "-i", path, "-F", "pid,tid,ip,time", "--ns",
                                      "-G"]))


def flags_text(flags: int) -> str:
    """perf script's ``M|P|-/X|-/A|-/cycles`` rendering of perf_branch_entry.flags."""
    mis = "M" if flags & fmt.BRF_MISPRED else "P" if flags & fmt.BRF_PREDICTED else "-"
    return (f"{mis}/{'X' if flags & fmt.BRF_IN_TX else '-'}/"
            f"{'A' if flags & fmt.BRF_ABORT else '-'}/"
            f"{flags >> fmt.BRF_CYCLES_SHIFT & fmt.BRF_CYCLES_MASK}")


def parse_script_brstack(text: str) -> list[tuple[int, tuple]]:
    """``perf script -F ip,brstack`` rows as (ip, ((from, to, flags_text), ...))."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        try:
            ip = int(parts[0], 16)
        except ValueError:
            continue
        entries = []
        for tok in parts[1:]:
            f = tok.split("/")
            if len(f) < 6 or not f[0].startswith("0x"):
                continue
            entries.append((int(f[0], 16), int(f[1], 16), "/".join(f[2:6])))
        rows.append((ip, tuple(entries)))
    return rows


def script_brstack(path: str) -> list[tuple[int, tuple]]:
    return parse_script_brstack(_run(["script", "-i", path, "-F", "ip,brstack"]))


def bbmap_samples(p: PerfData) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, tuple]]]:
    """The same rows from bbmap's reader (samples, branch rows)."""
    rows: list[tuple[int, int, int, int]] = []
    brows: list[tuple[int, tuple]] = []
    for b in p.stream():
        if not isinstance(b, SampleBatch) or not len(b):
            continue
        rows.extend(zip(b.pid.tolist(), b.tid.tolist(), b.time.tolist(), b.ip.tolist()))
        fr, to, fl = b.br_from.tolist(), b.br_to.tolist(), b.br_flags.tolist()
        ptr = b.br_ptr.tolist()
        for i, ip in enumerate(b.ip.tolist()):
            brows.append((ip, tuple((fr[j], to[j], flags_text(fl[j]))
                                    for j in range(ptr[i], ptr[i + 1]))))
    return rows, brows


def same_multiset(a: list, b: list) -> bool:
    return Counter(a) == Counter(b)


def first_difference(a: list, b: list) -> str:
    ca, cb = Counter(a), Counter(b)
    only_a = list((ca - cb).elements())[:3]
    only_b = list((cb - ca).elements())[:3]
    return f"{len(a)} vs {len(b)} rows; only bbmap: {only_a}; only perf: {only_b}"


def as_array(rows: list[tuple[int, int, int, int]]) -> np.ndarray:
    return np.array(sorted(rows), dtype=np.uint64).reshape(-1, 4)


def parse_buildid_list(text: str) -> set[tuple[str, str]]:
    """``perf buildid-list`` lines with an id, as (build_id hex, filename)."""
    out = set()
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and re.fullmatch(r"[0-9a-f]+", parts[0]):
            out.add((parts[0], parts[1].strip()))
    return out


def buildid_list(path: str) -> set[tuple[str, str]]:
    return parse_buildid_list(_run(["buildid-list", "-i", path]))
