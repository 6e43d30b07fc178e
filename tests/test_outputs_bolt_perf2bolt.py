"""bbmap's fdata and pre-aggregated files against ``perf2bolt-22`` on the corpus profiles.

The oracle is perf2bolt itself, run on the same perf.data and binary: the fdata bbmap
writes must have the same lines with the same counts (perf2bolt writes them in hash
order, so both are compared as multisets of lines), and perf2bolt's own tallies
("traces mismatching disassembled function contents") must equal bbmap's.  The
pre-aggregated file is checked by feeding it back to ``perf2bolt --pa``: it must give
perf2bolt's fdata of the perf.data.  Skipped when perf2bolt-22 or perf is absent.
"""

from __future__ import annotations

import re
import shutil
from functools import cache

import pytest

from bbmap.binary import load_binary
from bbmap.bolt_functions import BoltView
from bbmap.outputs.bolt import fdata_from_profile, preagg_from_profile
from bbmap.run import annotate
from tests.helpers import PERF2BOLT, ip_profile_cases, profile_cases, run_perf2bolt
from tests.helpers import fdata_lines as lines
from tests.helpers import perf2bolt_tally as tally

P2B = PERF2BOLT
pytestmark = pytest.mark.skipif(P2B is None or shutil.which("perf") is None,
                                reason="needs perf2bolt-22 and perf")

LBR = profile_cases("lbr")
IP = ip_profile_cases()
# perf2bolt reads the profile through `perf script`, whose text for a piped recording
# with hardware branch indexes it cannot parse ("expected hexadecimal number with From
# address"): no oracle for that file
NO_ORACLE = {"c22-addrmap-pie-lbr-hwindex-pipe"}
# the Skylake variant repeats each stack's newest entry; bbmap drops the copy (the
# "duplicate" bucket), perf2bolt (outside BAT mode) keeps it
KEEP_DUPLICATE = {"c22-addrmap-nopie-lbr-skylake"}


@cache
def perf2bolt(perf: str, binary: str, *extra: str) -> tuple[str, str, int]:
    return run_perf2bolt(perf, binary, *extra)


@cache
def ours(perf: str, binary: str, keep_duplicate: bool = False):  # noqa: ANN201
    r = annotate([perf], binary, addresses=True, inference="off",
                 drop_duplicate_newest=False if keep_duplicate else None)
    return r, BoltView(load_binary(binary))


@pytest.mark.parametrize("name,perf,binary", [c for c in LBR if c[0] not in NO_ORACLE],
                         ids=lambda x: x if "/" not in str(x) else "")
def test_lbr_fdata_equals_perf2bolt(name: str, perf: str, binary: str) -> None:
    theirs, log, rc = perf2bolt(perf, binary)
    assert rc == 0, log
    r, view = ours(perf, binary, name in KEEP_DUPLICATE)
    text, st = fdata_from_profile(r.addresses, view)
    a, b = lines(text), lines(theirs)
    assert a == b, f"only bbmap: {sorted(a - b)[:5]}; only perf2bolt: {sorted(b - a)[:5]}"
    # what perf2bolt drops, bbmap drops and counts the same way
    assert st.traces_mismatch == tally(log, "traces mismatching disassembled function "
                                            "contents")
    assert st.traces_outside == tally(log, "out of range traces involving unknown regions")
    assert sum(n for ln, n in a.items()) == len(text.splitlines())


def test_duplicate_rule_is_the_only_skylake_difference() -> None:
    """Default annotate drops the repeated newest entry; the difference from perf2bolt is
    then exactly those entries' branch counts."""
    case = [c for c in LBR if c[0] in KEEP_DUPLICATE]
    if not case:
        pytest.skip("Skylake corpus case absent")
    name, perf, binary = case[0]
    theirs, _, _ = perf2bolt(perf, binary)
    r, view = ours(perf, binary)
    dup = int(r.accounting.branch_buckets()["duplicate"])
    assert dup > 0
    a, b = lines(fdata_from_profile(r.addresses, view)[0]), lines(theirs)
    assert a != b
    count = lambda c: sum(int(ln.split()[-1]) for ln in c.elements())  # noqa: E731
    # every dropped copy was counted once as a branch by perf2bolt
    branch_a = sum(int(ln.split()[-1]) * n for ln, n in a.items())
    branch_b = sum(int(ln.split()[-1]) * n for ln, n in b.items())
    assert branch_b - branch_a >= dup
    assert count(b) > count(a)


def test_unreadable_pipe_profile_is_perf2bolts_problem() -> None:
    case = [c for c in LBR if c[0] in NO_ORACLE]
    if not case:
        pytest.skip("piped hw-index corpus case absent")
    _, perf, binary = case[0]
    theirs, log, _ = perf2bolt(perf, binary)
    assert not theirs.strip()
    r, view = ours(perf, binary)
    text, st = fdata_from_profile(r.addresses, view)
    assert len(text.splitlines()) > 50 and st.traces_ok > 0


@pytest.mark.parametrize("name,perf,binary", IP, ids=lambda x: x if "/" not in str(x) else "")
def test_ip_fdata_equals_perf2bolt_nl(name: str, perf: str, binary: str) -> None:
    theirs, log, rc = perf2bolt(perf, binary, "-nl")
    assert rc == 0, log
    r, view = ours(perf, binary)
    text, st = fdata_from_profile(r.addresses, view)
    assert text.splitlines()[0] == theirs.splitlines()[0]  # no_lbr EVENT:
    assert lines(text) == lines(theirs)
    # perf2bolt counts the samples of the processes that mapped the binary and calls those
    # outside it "out of range"; bbmap puts them in its other-DSO / kernel buckets (with
    # the samples of processes that never mapped the binary, which perf2bolt skips)
    read = int(re.search(r"read (\d+) basic samples", log).group(1))
    out = tally(log, "out of range samples recorded in unknown regions")
    assert st.samples_written == read - out
    b = r.accounting.sample_buckets()
    assert b["other_dso"] + b["kernel"] + b["unmapped"] + b["other_pid"] >= out


@pytest.mark.parametrize("name,perf,binary", [c for c in LBR if c[0] not in NO_ORACLE][:6],
                         ids=lambda x: x if "/" not in str(x) else "")
def test_preagg_read_by_perf2bolt_gives_its_fdata(name: str, perf: str, binary: str,
                                                  tmp_path) -> None:  # noqa: ANN001
    theirs, _, _ = perf2bolt(perf, binary)
    r, view = ours(perf, binary, name in KEEP_DUPLICATE)
    pa = tmp_path / "profile.preagg"
    pa.write_text(preagg_from_profile(r.addresses, view, build_id=r.build_id))
    got, log, rc = perf2bolt(str(pa), binary, "--pa")
    assert rc == 0, log
    assert lines(got) == lines(theirs)


@pytest.mark.parametrize("name,perf,binary", IP[:2], ids=lambda x: x if "/" not in str(x) else "")
def test_ip_preagg_read_by_perf2bolt(name: str, perf: str, binary: str, tmp_path) -> None:  # noqa: ANN001
    theirs, _, _ = perf2bolt(perf, binary, "-nl")
    r, view = ours(perf, binary)
    pa = tmp_path / "profile.preagg"
    pa.write_text(preagg_from_profile(r.addresses, view, build_id=r.build_id))
    got, log, rc = perf2bolt(str(pa), binary, "--pa", "-nl")
    assert rc == 0, log
    assert lines(got) == lines(theirs)
