"""Does the profile fit the binary (bbmap/aggregate/fit.py): evidence from instructions.

The oracle is the build itself: a profile recorded from a binary scores 0 misses on it
(every sampled IP an instruction start, every LBR source a branch, every jump target a
block start: real perf and real traces); the same profile against another build of
another program, forced onto it with ``--name``, is refused with the evidence.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from helpers import (
    CORPUS,
    PIE_BINARY,
    PIE_PROFILE,
    cli,
    corpus_binary,
    have_corpus,
    load_manifest,
    one_error_line,
)

from bbmap.aggregate.fit import (
    FIT_SAMPLE,
    LOCAL_MIN_MISSES,
    MIN_EVIDENCE,
    FitCollector,
    Measure,
)
from bbmap.run import annotate

OTHER = str(CORPUS / "bin" / "clang-22" / "list" / "layout.pie")  # another program
LBR = str(CORPUS / "lbr" / "c22-addrmap-pie-lbr" / "perf.data")
LIST_LBR = str(CORPUS / "lbr" / "c22-list-pie-lbr" / "perf.data")
PIPE = str(CORPUS / "profiles" / "c22-addrmap-pie-pipe" / "perf.data")  # no build-ids


def _own_binary_cases() -> list:
    """Every corpus profile with each binary it recorded (the profile and the build agree)."""
    m = load_manifest()
    bins = {b["name"]: b["path"] for b in m.get("binaries", [])}
    return [pytest.param(p["path"], bins[b], id=f"{p['name']}:{b}")
            for p in m.get("profiles", []) for b in p.get("binaries", []) if b in bins]


@have_corpus
@pytest.mark.parametrize("prof,binary", [(PIE_PROFILE, PIE_BINARY), (LBR, PIE_BINARY),
                                         (LIST_LBR, OTHER)])
def test_the_profiled_binary_fits_exactly(prof, binary):
    # --name: matched by name, so judged (a build-id match is proof enough, not judged)
    r = annotate(prof, binary, inference="off", name_override="layout.pie")
    assert r.status == "ok" and r.fit["judged"] and not r.fit["mismatch"], r.fit
    for k in ("ip", "branch_sources", "branch_targets"):
        assert r.fit[k]["misses"] == 0, (k, r.fit[k])
    assert r.fit["ip"]["judged"] > MIN_EVIDENCE


@have_corpus
def test_another_programs_binary_is_refused_with_evidence(tmp_path):
    """Was: exit 0 and a cluster file for functions never sampled; nothing on stderr."""
    out = tmp_path / "clusters.txt"
    code, text = cli("annotate", PIE_PROFILE, OTHER, "--name", "layout.pie", "--format",
                     "propeller", "-o", str(out))
    line = one_error_line(text)
    assert code == 1, text
    assert "the profile does not fit layout.pie" in line and "sampled IPs off instruction " \
        "starts" in line and "refused (--force" in line, line
    assert not out.exists()
    r = annotate(PIE_PROFILE, OTHER, name_override="layout.pie", inference="off")
    assert r.status == "refused" and r.failed and r.fit["ip"]["over_threshold"]
    assert r.fit["ip"]["share"] > 0.5, r.fit


@have_corpus
def test_force_keeps_the_result_and_still_says_so(tmp_path):
    out = tmp_path / "clusters.txt"
    code, text = cli("annotate", PIE_PROFILE, OTHER, "--name", "layout.pie", "--format",
                     "propeller", "-o", str(out), "--force")
    assert code == 0 and out.exists(), text
    assert "bbmap: warning:" in text and "kept because of --force" in text, text


@have_corpus
def test_lbr_profile_on_the_wrong_binary_fails_all_three_measures():
    r = annotate(LIST_LBR, PIE_BINARY, name_override="layout.pie", inference="off")
    assert r.status == "refused", r.fit
    for k in ("ip", "branch_sources", "branch_targets"):
        assert r.fit[k]["over_threshold"], (k, r.fit[k])


@have_corpus
@pytest.mark.parametrize("cmd", ["cfg", "layout"])
def test_cfg_and_layout_refuse_too(tmp_path, cmd):
    out = tmp_path / "out"
    args = [cmd, PIE_PROFILE, OTHER, "--name", "layout.pie", "-o", str(out)]
    if cmd == "layout":
        args += ["--cc-profile", str(tmp_path / "cc.txt")]
    code, text = cli(*args)
    assert code == 1 and "does not fit" in one_error_line(text), text
    assert not out.exists() and not (tmp_path / "cc.txt").exists()


@have_corpus
def test_a_build_id_match_is_not_judged():
    r = annotate(PIE_PROFILE, PIE_BINARY, inference="off")
    assert r.fit == {"judged": False, "why_not": "the profile recorded the binary's build-id"}


def test_a_verdict_needs_evidence():
    m = Measure("x", judged=MIN_EVIDENCE - 1, misses=MIN_EVIDENCE - 1)
    assert not m.over
    m = Measure("x", judged=MIN_EVIDENCE, misses=MIN_EVIDENCE // 2)
    assert m.over


def test_collector_memory_is_bounded():
    import numpy as np

    from bbmap.aggregate.resolve import Resolved
    from bbmap.buckets import IN_BLOCK

    n = 100_000
    r = Resolved(where=np.full(n, IN_BLOCK, np.int8), vaddr=np.arange(n, dtype=np.uint64),
                 block=np.zeros(n, np.int64), func=np.zeros(n, np.int32),
                 dso=np.full(n, -1, np.int32))
    c = FitCollector()
    for _ in range(5):
        c.add_ips(r)
        c.add_branches(r, r)
    assert c.n_ip == FIT_SAMPLE and c.n_br == FIT_SAMPLE
    assert sum(len(a) for a in c.ip) == FIT_SAMPLE


@have_corpus
@pytest.mark.parametrize("prof,binary", _own_binary_cases())
def test_no_corpus_profile_is_refused_on_its_own_binary(prof, binary):
    """Judged as if found by name (no build-id proof): 0 misses on every measure, in every
    function; the per-function rule that catches a rebuild refuses none of them."""
    r = annotate(str(CORPUS / prof), str(CORPUS / binary), inference="off",
                 name_override=os.path.basename(binary))
    assert r.status == "ok" and r.fit["judged"] and not r.fit["mismatch"], r.fit
    for k in ("ip", "branch_sources", "branch_targets"):
        assert r.fit[k]["misses"] == 0, (k, r.fit[k])


@have_corpus
def test_a_rebuild_without_build_ids_is_refused_naming_the_moved_function(tmp_path):
    """One statement added to main's loop moves the four functions after main by 0x10
    (corpus c22-rebuilt-pie).  Annotated with the pipe profile, which carries no build-ids,
    the binary is found by name.  Was: exit 0, no warning, lay_dbl's samples counted as
    lay_inc's, lay_neg's as lay_dbl's (23 of 2,953 IPs off instruction starts: 0.8%, under
    the whole-profile 30%)."""
    rebuilt = str(corpus_binary("c22-rebuilt-pie"))
    out = tmp_path / "out.json"
    code, text = cli("annotate", PIPE, rebuilt, "--inference", "off", "--format", "json",
                     "-o", str(out))
    line = one_error_line(text)
    assert code == 1, text
    assert "does not fit layout.pie" in line and "sampled IPs off instruction starts" in line
    assert "23 of 23 in lay_dbl (100%)" in line and "0x1722 in lay_dbl" in line, line
    assert "refused (--force" in line and not out.exists()
    r = annotate(PIPE, rebuilt, inference="off")
    assert r.status == "refused"
    worst = r.fit["ip"]["worst_function"]
    assert worst == {"name": "lay_dbl", "judged": 23, "misses": 23, "share": 1.0,
                     "over_threshold": True}, worst
    assert r.fit["ip"]["share"] < 0.30  # the whole-profile rule alone passes it
    code, text = cli("annotate", PIPE, rebuilt, "--inference", "off", "--format", "json",
                     "-o", str(out), "--force")
    assert code == 0 and out.exists(), text
    assert "kept because of --force" in text and "in lay_dbl" in text, text


@have_corpus
def test_a_rebuild_is_caught_by_lbr_targets_too():
    """With LBR the moved lay_inc is an indirect call target: 0x1700, once lay_inc's
    entry, is the middle of a block of main in the rebuild."""
    rebuilt = str(corpus_binary("c22-rebuilt-pie"))
    r = annotate(LBR, rebuilt, inference="off", name_override="layout.pie")
    assert r.status == "refused", r.fit
    t = r.fit["branch_targets"]
    assert t["worst_function"]["name"] == "main" and t["worst_function"]["over_threshold"]
    assert t["examples"] == ["0x1700 in main"], t


@have_corpus
@pytest.mark.skipif(shutil.which("objcopy") is None, reason="objcopy (binutils) not installed")
def test_a_rebuild_whose_build_id_was_stripped_is_refused(tmp_path):
    """The profile has the old build's id, the binary none: matched by name (the warning
    says it cannot be checked), and the code says the rest.  Was: exit 0 and the warning."""
    d = tmp_path / "bin"
    d.mkdir()
    binary = d / "layout.pie"
    subprocess.run(["objcopy", "--remove-section", ".note.gnu.build-id",
                    str(corpus_binary("c22-rebuilt-pie")), str(binary)], check=True)
    code, text = cli("annotate", PIE_PROFILE, str(binary), "--inference", "off")
    line = one_error_line(text)
    assert code == 1 and "does not fit layout.pie" in line and "in lay_dbl" in line, text


def test_one_function_decides_with_ten_misses_over_the_share():
    names = ["a", "b"]
    m = Measure("x")
    # 2,000 IPs in a, 0 misses; 10 of 12 in b miss: 0.5% overall, 83% in b
    misses = np.r_[np.zeros(2000, bool), np.ones(LOCAL_MIN_MISSES, bool), np.zeros(2, bool)]
    func = np.r_[np.zeros(2000, np.int64), np.ones(LOCAL_MIN_MISSES + 2, np.int64)]
    m.score(misses, func, names)
    assert m.over and not m.over_whole and m.function == "b"
    assert (m.function_judged, m.function_misses) == (12, 10)
    m = Measure("x")  # one miss fewer: below the count, whatever the share
    m.score(np.r_[misses[:2000], misses[2001:]],
            np.r_[func[:2000], func[2001:]], names)
    assert m.function_misses == LOCAL_MIN_MISSES - 1 and not m.over
    m = Measure("x")  # 10 misses among 40 IPs of b: 25%, under the share
    m.score(np.r_[np.ones(10, bool), np.zeros(30, bool)], np.ones(40, np.int64), names)
    assert not m.over
