"""annotate on Go binaries (seed 002): per-function counts, the Go explanation, matching.

Oracles: ``perf script`` (one line per sample, the symbol perf gives it) and ``perf
report`` of the committed recordings; for the stripped build, perf's report of the same
recording with the unstripped build's symbols put at the recorded path (``--symfs``,
corpus/build), since perf alone names none of a stripped Go binary's functions.
The mismatch cases use the committed -B builds (profile of one build, the other named);
the live cases (go and perf needed) rebuild a plain Go binary in place, as users do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import CORPUS, go_case

from bbmap.cli import main
from bbmap.run import annotate

SCRIPT_LINE = re.compile(r"^\s*\d+/\d+\s+[\d.]+:\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")
REPORT_LINE = re.compile(r"^\s+([\d.]+)%\s+\[\.\]\s+(.*?)\s*$")
OWN = [("go-plain-prof", "go-plain"), ("go-bid-prof", "go-bid"),
       ("go-bid-v2-prof", "go-bid-v2")]


def _paths(profile: str, binary: str) -> tuple[str, str]:
    return str(CORPUS / go_case(profile)["path"]), str(CORPUS / go_case(binary)["path"])


def _script(profile: str) -> list[tuple[str, str]]:
    text = (CORPUS / go_case(profile)["goldens"]["script"]).read_text()
    return [(m.group(2), m.group(3)) for m in map(SCRIPT_LINE.match, text.splitlines()) if m]


def _ours(res) -> Counter:
    return Counter({res.functions.names[k]: int(n)
                    for k, n in enumerate(res.func_samples.tolist()) if n})


@pytest.mark.parametrize("profile,binary", OWN, ids=[p for p, _ in OWN])
def test_function_counts_equal_perf_script(profile, binary):
    perf_data, exe = _paths(profile, binary)
    res = annotate([perf_data], exe)
    lines = _script(profile)
    assert res.accounting.total_samples == len(lines) == go_case(profile)["samples"]
    theirs = Counter(sym for sym, dso in lines if os.path.basename(dso) == "gohot")
    assert _ours(res) == theirs
    for f in ("main.mix", "main.collatz", "main.sieve", "main.matmul"):
        assert theirs[f] > 100  # the four hot functions of src/gohot, each well sampled
    # every sample in exactly one bucket: the binary's functions, the kernel, nothing else
    kernel = sum(1 for _, d in lines if d.startswith("[kernel"))
    assert sum(theirs.values()) + kernel == res.accounting.total_samples


@pytest.mark.parametrize("profile,binary", OWN, ids=[p for p, _ in OWN])
def test_function_shares_equal_perf_report(profile, binary):
    perf_data, exe = _paths(profile, binary)
    res = annotate([perf_data], exe)
    text = (CORPUS / go_case(profile)["goldens"]["report_sym"]).read_text()
    want = {m.group(2): float(m.group(1)) for m in map(REPORT_LINE.match, text.splitlines())
            if m}
    total = res.accounting.total_samples
    for name, n in _ours(res).items():
        assert abs(100.0 * n / total - want[name]) <= 0.005 + 1e-9, name


def test_stripped_counts_equal_perf_with_the_unstripped_symbols():
    """perf names no function of the stripped build (script says [unknown]); bbmap names
    them from .gopclntab, and the counts are what perf gives with go-plain's .symtab."""
    perf_data, exe = _paths("go-stripped-prof", "go-stripped")
    assert all(sym == "[unknown]" for sym, d in _script("go-stripped-prof")
               if os.path.basename(d) == "gohot")
    res = annotate([perf_data], exe)
    total = res.accounting.total_samples
    text = (CORPUS / go_case("go-stripped-prof")["goldens"]["report_sym_unstripped"]
            ).read_text()
    want = Counter()
    for m in map(REPORT_LINE.match, text.splitlines()):
        if m:  # the symbol table's ABI suffix, which .gopclntab does not carry
            want[m.group(2).removesuffix(".abi0")] += round(float(m.group(1)) * total / 100)
    assert _ours(res) == want
    assert any("from .gopclntab" in d.message for d in res.warnings)


@pytest.mark.parametrize("profile,binary", OWN + [("go-stripped-prof", "go-stripped")],
                         ids=[p for p, _ in OWN] + ["go-stripped-prof"])
def test_the_explanation_names_the_go_compiler(profile, binary):
    perf_data, exe = _paths(profile, binary)
    res = annotate([perf_data], exe)
    assert res.status == "nothing_mapped" and res.failed
    errors = [d.message for d in res.warnings if d.severity == "error"]
    assert len(errors) == 1
    e = errors[0]
    assert "no basic-block address map" in e and "Go gc compiler (go1.19.8)" in e
    assert "LLVM" in e and "gollvm" in e and "TinyGo" in e
    assert "counted per function" in e and "those counts are valid" in e
    assert "main.mix (" in e and "clang" not in e
    assert res.go_build_id == go_case(binary)["go_build_id"]
    assert res.build_id == go_case(binary)["build_id"]


@pytest.mark.parametrize("profile,binary,by_path",
                         [("go-plain-prof", "go-plain", True), ("go-bid-prof", "go-bid", False),
                          ("go-stripped-prof", "go-stripped", True)])
def test_matching_by_path_names_the_flag(profile, binary, by_path):
    perf_data, exe = _paths(profile, binary)
    res = annotate([perf_data], exe)
    warn = [d.message for d in res.warnings if "matched the profile by" in d.message]
    if not by_path:  # the -B build matched by its GNU build-id
        assert not warn
        return
    assert len(warn) == 1
    assert "-ldflags=-B 0x<hex>" in warn[0] and "-B gobuildid needs Go 1.20" in warn[0]
    assert go_case(binary)["go_build_id"] in warn[0]


def _build_id_dir(tmp: Path, binary: str) -> Path:
    """A .build-id tree holding ``binary`` (as perf's cache or a debuginfod mirror would)."""
    e = go_case(binary)
    bid = e["build_id"]
    d = tmp / "ids" / ".build-id" / bid[:2]
    d.mkdir(parents=True)
    shutil.copy2(CORPUS / e["path"], d / f"{bid[2:]}.debug")
    return tmp / "ids"


@pytest.mark.parametrize("profiled,named", [("go-bid", "go-bid-v2"), ("go-bid-v2", "go-bid")])
def test_rebuilt_with_a_change_is_caught_with_both_build_ids(tmp_path, profiled, named):
    """Profile one build, name the other (rebuilt with a change): refused, with both GNU
    build-ids and both Go build ids (the profiled one read from a build-id directory)."""
    perf_data, exe = _paths(f"{profiled}-prof", named)
    ids = _build_id_dir(tmp_path, profiled)
    r = CliRunner().invoke(main, ["annotate", perf_data, exe, "--debug-dir", str(ids),
                                  "--format", "json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["status"] == "nothing_mapped" and doc["totals"]["samples"] > 1000
    assert doc["build_id"] == go_case(named)["build_id"]
    assert doc["go_build_id"] == go_case(named)["go_build_id"]
    msg = next(w["message"] for w in doc["warnings"] if w["severity"] == "error")
    assert msg.startswith("build-id mismatch")
    for key in ("build_id", "go_build_id"):
        assert go_case(profiled)[key] in msg and go_case(named)[key] in msg
    assert "the main package was compiled differently" in msg
    assert "source or the compile flags changed" in msg


def test_rebuilt_without_the_old_build_says_where_to_find_it(tmp_path, monkeypatch):
    perf_data, exe = _paths("go-bid-prof", "go-bid-v2")
    real = os.path.isfile  # the recorded path may exist on a machine that built the corpus
    monkeypatch.setattr(os.path, "isfile",
                        lambda p: False if str(p).startswith("/tmp/bbmap-corpus/") else real(p))
    monkeypatch.setenv("PERF_BUILDID_DIR", str(tmp_path / ".debug"))
    res = annotate([perf_data], exe)
    msg = next(d.message for d in res.warnings if d.severity == "error")
    assert "profiled build not found" in msg and "build-id cache" in msg and "-N" in msg
    assert go_case("go-bid-v2")["go_build_id"] in msg


# ---------------------------------------------------------------- live: go + perf
GO = shutil.which("go")
PERF = shutil.which("perf")
SRC = CORPUS / "src" / "gohot"


def _go(args: list[str], cwd: Path = SRC) -> subprocess.CompletedProcess:
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false", GOPROXY="off",
               GOTOOLCHAIN="local")
    return subprocess.run([GO, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def _record(exe: Path, out: Path) -> bool:
    r = subprocess.run([PERF, "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", str(out),
                        str(exe), "100"], capture_output=True, timeout=120)
    return r.returncode == 0 and out.is_file()


@pytest.mark.skipif(not GO or not PERF, reason="needs go and perf")
def test_live_plain_rebuild_in_place_then_the_old_binary_named(tmp_path):
    """The plain-build case (no GNU build-id anywhere): build, keep a copy, rebuild with
    the change in place, profile the new build, annotate it naming the old copy.  The
    recorded path still holds the profiled file (same inode), so its Go build id is
    known, and the copy named has another: caught, with both Go build ids."""
    work, keep = tmp_path / "w", tmp_path / "old"
    work.mkdir(), keep.mkdir()
    exe = work / "gohot"
    r = _go(["build", "-trimpath", "-o", str(exe), "."])
    assert r.returncode == 0, r.stderr
    shutil.copy2(exe, keep / "gohot")
    r = _go(["build", "-trimpath", "-tags", "v2", "-o", str(exe), "."])
    assert r.returncode == 0, r.stderr
    if not _record(exe, tmp_path / "new.data"):
        pytest.skip("perf record not permitted here")
    from bbmap.binary import load_binary

    old_id, new_id = load_binary(keep / "gohot").go.build_id, load_binary(exe).go.build_id
    assert old_id != new_id
    res = annotate([str(tmp_path / "new.data")], str(keep / "gohot"))
    err = [d.message for d in res.warnings if d.severity == "error"]
    assert err[0].startswith("gohot is not the build that was profiled")
    assert old_id in err[0] and new_id in err[0] and "compiled differently" in err[0]
    assert res.failed
    # the right binary: no identity complaint, only the by-path note and the Go reason
    res = annotate([str(tmp_path / "new.data")], str(exe))
    assert not any("not the build" in d.message for d in res.warnings)
    assert any("matched the profile by path only" in d.message for d in res.warnings)


@pytest.mark.skipif(not GO or not PERF, reason="needs go and perf")
def test_live_in_place_rebuild_after_recording_is_flagged(tmp_path):
    exe = tmp_path / "gohot"
    assert _go(["build", "-trimpath", "-o", str(exe), "."]).returncode == 0
    if not _record(exe, tmp_path / "a.data"):
        pytest.skip("perf record not permitted here")
    assert _go(["build", "-trimpath", "-tags", "v2", "-o", str(exe), "."]).returncode == 0
    res = annotate([str(tmp_path / "a.data")], str(exe))
    msg = [d.message for d in res.warnings if "was replaced after the profile" in d.message]
    assert msg and "inode" in msg[0]


@pytest.mark.skipif(not GO, reason="needs go")
def test_live_gobuildid_flag(tmp_path):
    """-B gobuildid is Go 1.20+: this Go either refuses it or derives a GNU build-id."""
    exe = tmp_path / "gohot"
    r = _go(["build", "-trimpath", "-ldflags=-B gobuildid", "-o", str(exe), "."])
    from bbmap.binary import load_binary
    from bbmap.binary.go import go_version_tuple

    version = go_version_tuple(_go(["env", "GOVERSION"]).stdout.strip())
    if version is not None and version < (1, 20):
        assert r.returncode != 0 and "-B argument must start with 0x" in r.stderr
    else:
        assert r.returncode == 0, r.stderr
        b = load_binary(exe)
        assert b.build_id and len(b.build_id) == 40 and b.go.build_id
