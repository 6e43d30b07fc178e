"""Does the profile fit the binary (bbmap/aggregate/fit.py): evidence from instructions.

The oracle is the build itself: a profile recorded from a binary scores 0 misses on it
(every sampled IP an instruction start, every LBR source a branch, every jump target a
block start: real perf and real traces); the same profile against another build of
another program, forced onto it with ``--name``, is refused with the evidence.
"""

from __future__ import annotations

import pytest
from helpers import CORPUS, PIE_BINARY, PIE_PROFILE, cli, have_corpus, one_error_line

from bbmap.aggregate import annotate
from bbmap.aggregate.fit import FIT_SAMPLE, MIN_EVIDENCE, FitCollector, Measure

OTHER = str(CORPUS / "bin" / "clang-22" / "list" / "layout.pie")  # another program
LBR = str(CORPUS / "lbr" / "c22-addrmap-pie-lbr" / "perf.data")
LIST_LBR = str(CORPUS / "lbr" / "c22-list-pie-lbr" / "perf.data")


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
