"""Oracles on the real corpus profiles: perf's own numbers, not bbmap's.

* total samples == the SAMPLE record count ``perf report -D`` printed;
* per function (parts folded): == the number of ``perf script`` lines for that symbol in
  the binary (the exact per-sample view behind ``perf report --stdio``), and the shares
  agree with ``perf report --stdio`` to its printed precision;
* per other DSO: == ``perf script`` lines naming that DSO; kernel == ``[kernel.kallsyms]``;
* the buckets add up (``Accounting.check`` runs inside ``annotate``).

Skipped when the corpus is absent.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest

from bbmap.binary.types import parent_name
from bbmap.run import annotate

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
MANIFEST = os.path.join(ROOT, "manifest.json")


def _profiles() -> list[tuple[str, str, str]]:
    """(name, profile dir, binary path) for every plain (IP-sample) corpus profile."""
    if not os.path.exists(MANIFEST):
        return []
    with open(MANIFEST) as fh:
        m = json.load(fh)
    bins = {b["name"]: os.path.join(ROOT, b["path"]) for b in m.get("binaries", [])}
    out = []
    for p in m.get("profiles", []):
        if "lbr" in p.get("kinds", []):
            continue
        d = os.path.dirname(os.path.join(ROOT, p["path"]))
        for bname in p.get("binaries", []):  # a profile of an app and its .so: both
            b = bins.get(bname)
            if b and os.path.exists(os.path.join(d, "script.txt")):
                out.append((f"{p['name']}:{bname}", d, b))
    if not out:  # manifest without profile entries yet: profiles/<binary>-plain/
        pdir = os.path.join(ROOT, "profiles")
        for name in sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []:
            d = os.path.join(pdir, name)
            b = bins.get(name.removesuffix("-plain"))
            if b and os.path.exists(os.path.join(d, "script.txt")):
                out.append((name, d, b))
    return out


_LINE = re.compile(r"^\s*\S+\s+\S+:\s+[0-9a-f]+\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")


_HEAD = re.compile(r"^\s*\d+/\d+\s+[\d.]+:\s*$")  # a sample with a callchain below it
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")


def _script_counts(path: str) -> list[tuple[str, str]]:
    """(symbol, dso) per sample of ``perf script``: one line per sample, or (with
    ``--call-graph``) a header line followed by frames, the first being the sample IP."""
    out = []
    want_frame = False
    with open(path, errors="replace") as fh:
        for line in fh:
            if want_frame:
                m = _FRAME.match(line)
                if m:
                    out.append((m.group("sym"), m.group("dso")))
                    want_frame = False
                continue
            m = _LINE.match(line)
            if m:
                out.append((m.group("sym"), m.group("dso")))
            elif _HEAD.match(line):
                want_frame = True
    return out


def _fold(sym: str) -> str:
    sym = re.sub(r"\s*\[clone \.(cold|part\.\d+)\]$", "", sym)
    return parent_name(re.sub(r"\+0x[0-9a-f]+$", "", sym))


def _perf_style(display: str) -> str:
    """perf 6.1 prints C++ names without parameters or return type."""
    depth, cut, space = 0, len(display), -1
    for i, ch in enumerate(display):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and ch == "(" and i > 0:
            cut = i
            break
        elif depth == 0 and ch == " ":
            space = i
    return display[space + 1:cut]


def _synthetic(sym: str) -> bool:
    """Names perf makes up (PLT entries) or cannot give."""
    return sym == "[unknown]" or sym.endswith("@plt")


PROFILES = _profiles()


@pytest.mark.skipif(not PROFILES, reason="corpus profiles not built")
@pytest.mark.parametrize("name,pdir,binary", PROFILES, ids=[p[0] for p in PROFILES])
def test_counts_match_perf(name, pdir, binary):
    res = annotate([os.path.join(pdir, "perf.data")], binary)
    a = res.accounting
    try:
        with open(os.path.join(pdir, "report-D-stats.json")) as fh:
            stats = json.load(fh)
    except (OSError, ValueError):
        pytest.skip("golden being rebuilt")
    assert a.total_samples == stats["SAMPLE"]
    lines = _script_counts(os.path.join(pdir, "script.txt"))
    assert len(lines) == a.total_samples

    base = os.path.basename(binary)
    # functions named by a symbol (a stripped binary's map-only functions have no name)
    ours: Counter = Counter()
    for k, n in enumerate(res.func_samples.tolist()):
        if n and not res.functions.names[k].startswith("fn@"):
            ours[_perf_style(res.functions.names[k])] += n
    theirs = Counter(_fold(s) for s, d in lines if os.path.basename(d) == base
                     and not _synthetic(s))
    assert dict(ours) == dict(theirs)
    unknown = sum(1 for s, d in lines if os.path.basename(d) == base and _synthetic(s))
    assert int(a.samples[:3].sum()) - sum(ours.values()) == unknown

    kernel = sum(1 for _, d in lines if d.startswith("[kernel"))
    assert int(a.samples[4]) == kernel
    dsos = Counter(d for _, d in lines if os.path.basename(d) != base
                   and not d.startswith("[kernel"))
    assert a.dso_samples == dict(dsos)
    assert res.status in ("ok", "partial")


@pytest.mark.skipif(not PROFILES, reason="corpus profiles not built")
@pytest.mark.parametrize("name,pdir,binary", PROFILES, ids=[p[0] for p in PROFILES])
def test_shares_match_perf_report(name, pdir, binary):
    """``perf report --stdio`` prints shares with two decimals; ours must round the same."""
    res = annotate([os.path.join(pdir, "perf.data")], binary)
    total = res.accounting.total_samples
    want = {}
    with open(os.path.join(pdir, "report.txt")) as fh:
        text = fh.read()
    # a call-graph report has "Children  Self" columns: the Self share is the sample share
    pattern = (r"^\s+[\d.]+%\s+([\d.]+)%\s+(\S+)\s+\[\.\]\s+(.*?)\s*$" if "Children" in text
               else r"^\s+([\d.]+)%\s+(\S+)\s+\[\.\]\s+(.*?)\s*$")
    for line in text.splitlines():
        m = re.match(pattern, line)
        if m and os.path.basename(binary).startswith(m.group(2)):
            sym = m.group(3)
            if _synthetic(sym) or sym.startswith("0x"):  # PLT entries, unnamed addresses
                continue
            want[_fold(sym)] = want.get(_fold(sym), 0.0) + float(m.group(1))
    ours: dict[str, float] = {}
    for k, n in enumerate(res.func_samples.tolist()):
        if n and not res.functions.names[k].startswith("fn@"):
            key = _perf_style(res.functions.names[k])
            ours[key] = ours.get(key, 0.0) + 100.0 * n / total
    assert set(want) == set(ours)
    for k, pct in want.items():
        assert abs(ours[k] - pct) <= 0.005 + 1e-9, k


TWO = [p for p in PROFILES if "two-processes" in p[0]]


@pytest.mark.skipif(not TWO, reason="two-process corpus profile not built")
def test_pid_filter_matches_perf_script_per_pid():
    name, pdir, binary = TWO[0]
    base = os.path.basename(binary)
    per_pid: dict[int, Counter] = {}
    with open(os.path.join(pdir, "script.txt"), errors="replace") as fh:
        for line in fh:
            m = _LINE.match(line)
            if m and os.path.basename(m.group("dso")) == base and not _synthetic(m.group("sym")):
                pid = int(line.split("/")[0])
                per_pid.setdefault(pid, Counter())[_fold(m.group("sym"))] += 1
    assert len(per_pid) == 2
    for pid, want in per_pid.items():
        res = annotate([os.path.join(pdir, "perf.data")], binary, pid=pid)
        got = {res.functions.names[k]: int(n) for k, n in enumerate(res.func_samples) if n}
        assert got == dict(want)
        a = res.accounting
        assert int(a.samples[6]) > 0 and int(a.samples.sum()) == a.total_samples
