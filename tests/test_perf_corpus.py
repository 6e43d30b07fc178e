"""bbmap's reader against real perf on real files from many kernels.

* ../shared/perf-corpus: record counts equal ``perf report -D``; every sample's
  pid/tid/time/ip (and branch stack) equals ``perf script`` (run directly).
* corpus/manifest.json profiles: the same, against the goldens stored beside them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from oracles import perf_oracle as oracle

from bbmap.perf import MmapRecord, PerfData, SideRecords
from bbmap.perf.info import perf_info

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BBMAP_PERF_CORPUS", ROOT.parent / "shared" / "perf-corpus"))
SHARED_FILES = sorted(SHARED.glob("perf.data.*")) if SHARED.is_dir() else []
MANIFEST = ROOT / "corpus" / "manifest.json"

needs_perf = pytest.mark.skipif(not oracle.have_perf(), reason="perf is not installed")

# What the shared corpus holds, from `perf report -D` (perf 6.1); kept so the reader is
# checked even where perf is missing.
SHARED_COUNTS = {
    "perf.data.branch-4.14": {"MMAP": 21, "COMM": 3, "EXIT": 1, "SAMPLE": 13, "MMAP2": 10,
                              "FINISHED_ROUND": 1, "TIME_CONV": 1},
    "perf.data.throttle-3.8": {"MMAP": 1653, "COMM": 230, "EXIT": 4, "THROTTLE": 68,
                               "UNTHROTTLE": 64, "FORK": 2, "SAMPLE": 14980},
    "perf.data.piped.header_features_aligned-6.12": {
        "COMM": 2, "EXIT": 1, "SAMPLE": 9, "MMAP2": 4, "ATTR": 1, "FINISHED_ROUND": 1,
        "ID_INDEX": 1, "THREAD_MAP": 1, "CPU_MAP": 1, "EVENT_UPDATE": 2, "TIME_CONV": 1,
        "FEATURE": 20, "FINISHED_INIT": 1},
}


def _ids(paths):
    return [p.name for p in paths]


@pytest.mark.skipif(not SHARED_FILES, reason="../shared/perf-corpus not present")
@pytest.mark.parametrize("name", sorted(SHARED_COUNTS))
def test_shared_counts_stored(name):
    p = PerfData(SHARED / name)
    p.read_all()
    assert p.record_counts == SHARED_COUNTS[name]
    assert not list(p.diagnostics)


@needs_perf
@pytest.mark.parametrize("path", SHARED_FILES, ids=_ids(SHARED_FILES))
def test_shared_corpus_matches_perf(path):
    p = PerfData(path)
    rows, brows = oracle.bbmap_samples(p)
    text = oracle.report_d(str(path))
    assert p.record_counts == oracle.parse_report_d_stats(text)
    if not any(entries for _, entries in brows):  # perf counts branches per event otherwise
        info = perf_info(path)
        nonzero = [n for n in info["samples"]["by_event"].values() if n]
        assert nonzero == oracle.parse_report_d_event_samples(text)
    perf_rows = oracle.script_samples(str(path))
    assert oracle.same_multiset(rows, perf_rows), oracle.first_difference(rows, perf_rows)
    if any(entries for _, entries in brows):
        perf_br = oracle.script_brstack(str(path))
        assert oracle.same_multiset(brows, perf_br), oracle.first_difference(brows, perf_br)
    if p.mode == "file":  # (pipe mode: perf lists the DSOs it saw, not the header's ids)
        assert {(b.build_id, b.filename) for b in p.build_ids} == oracle.buildid_list(
            str(path))
    assert not p.diagnostics.has_errors


def _profiles():
    if not MANIFEST.is_file():
        return []
    try:
        return [pr for pr in json.loads(MANIFEST.read_text()).get("profiles", [])
                if pr.get("goldens")]
    except (OSError, ValueError):
        return []


PROFILES = _profiles()


@pytest.mark.skipif(not PROFILES, reason="corpus/manifest.json has no profiles yet")
@pytest.mark.parametrize("profile", PROFILES, ids=[p["name"] for p in PROFILES])
def test_corpus_profiles_match_goldens(profile):
    """Counts = `perf report -D`, samples = `perf script`, branch stacks = `-F ip,brstack`,
    build ids = `perf buildid-list`: all as stored by the corpus beside each profile."""
    base = MANIFEST.parent
    path = base / profile["path"]
    if not path.is_file():
        pytest.skip(f"{profile['path']} missing")
    goldens = profile["goldens"]
    p = PerfData(path)
    rows, brows = oracle.bbmap_samples(p)

    def golden(key: str) -> str | None:
        rel = goldens.get(key)
        return (base / rel).read_text(errors="replace") if rel else None

    checked = []
    text = golden("report_D_stats")
    if text is not None:
        try:
            want = {k: v for k, v in json.loads(text).items() if k != "TOTAL"}
        except ValueError:
            want = oracle.parse_report_d_stats(text)
        assert p.record_counts == want
        checked.append("report_D_stats")
    text = golden("script")
    if text is not None:
        want_rows, digits = oracle.parse_script_rows(text)
        div = 10 ** (9 - digits)
        chain_only = all(r[3] == -1 for r in want_rows)
        got = [(a, b, t // div, -1 if chain_only else ip) for a, b, t, ip in rows]
        assert want_rows and oracle.same_multiset(got, want_rows), oracle.first_difference(
            got, want_rows)
        checked.append("script")
    text = golden("brstack")
    if text is not None:
        want_br = oracle.parse_script_brstack(text)
        assert oracle.same_multiset(brows, want_br), oracle.first_difference(brows, want_br)
        checked.append("brstack")
    text = golden("buildid_list")
    if text is not None:
        want_ids = oracle.parse_buildid_list(text)
        if p.build_ids or "build_id" in p.features:
            assert {(b.build_id, b.filename) for b in p.build_ids} == want_ids
        else:  # --buildid-mmap: perf lists the hit DSOs' ids from MMAP2 records
            mmap_ids = {(r.build_id, r.filename.removesuffix("_text").removesuffix("_stext"))
                        for item in p.stream() if isinstance(item, SideRecords)
                        for r in item.records if isinstance(r, MmapRecord) and r.build_id}
            assert want_ids <= mmap_ids
        checked.append("buildid_list")
    assert "report_D_stats" in checked and "script" in checked, checked
    assert not list(p.diagnostics)


CORPUS_FILES = sorted(MANIFEST.parent.glob("**/perf.data")) if MANIFEST.is_file() else []


@needs_perf
@pytest.mark.parametrize("path", CORPUS_FILES,
                         ids=[str(p.relative_to(MANIFEST.parent)) for p in CORPUS_FILES])
@pytest.mark.slow
def test_corpus_files_match_perf_directly(path):
    """Every perf.data under corpus/, against the perf installed here (not only goldens)."""
    p = PerfData(path)
    rows, brows = oracle.bbmap_samples(p)
    assert p.record_counts == oracle.report_d_stats(str(path))
    perf_rows = oracle.script_samples(str(path))
    assert oracle.same_multiset(rows, perf_rows), oracle.first_difference(rows, perf_rows)
    if any(entries for _, entries in brows):
        perf_br = oracle.script_brstack(str(path))
        assert oracle.same_multiset(brows, perf_br), oracle.first_difference(brows, perf_br)
    assert not list(p.diagnostics)


WORKLOAD = ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]
LIVE_MODES = {
    "file": ["-e", "cpu-clock", "-c", "20000"],
    "zstd": ["-z", "-e", "cpu-clock", "-c", "20000"],
    "callgraph": ["-e", "cpu-clock", "-c", "20000", "--call-graph", "fp"],
    "two-events": ["-e", "cpu-clock", "-e", "task-clock", "-c", "50000"],
}


@pytest.mark.slow
@needs_perf
@pytest.mark.parametrize("pipe", [False, True], ids=["file", "pipe"])
@pytest.mark.parametrize("mode", sorted(LIVE_MODES))
def test_live_recordings_match_perf(tmp_path, mode, pipe):
    """Record here (file and pipe mode, zstd, callchains, two events) and compare."""
    import subprocess

    path = tmp_path / "live.data"
    args = ["perf", "record", "-q", *LIVE_MODES[mode]]
    if pipe:
        with open(path, "wb") as out:
            r = subprocess.run([*args, "-o", "-", "--", *WORKLOAD], stdout=out,
                               stderr=subprocess.PIPE, timeout=120)
    else:
        r = subprocess.run([*args, "-o", str(path), "--", *WORKLOAD], capture_output=True,
                           timeout=120)
    if r.returncode != 0 or not path.is_file() or path.stat().st_size < 16:
        pytest.skip(f"perf record failed here: {r.stderr[-200:]!r}")
    p = PerfData(path)
    assert p.mode == ("pipe" if pipe else "file")
    rows, _ = oracle.bbmap_samples(p)
    assert rows, "no samples recorded"
    assert p.record_counts == oracle.report_d_stats(str(path))
    perf_rows = oracle.script_samples(str(path))
    assert oracle.same_multiset(rows, perf_rows), oracle.first_difference(rows, perf_rows)
    if mode == "zstd":
        assert p.record_counts.get("COMPRESSED", 0) > 0
    assert not list(p.diagnostics)
