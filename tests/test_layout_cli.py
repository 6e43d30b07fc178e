"""``bbmap layout`` end to end: the files, the report (text and JSON), the refusals."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from bbmap.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
LBR = os.path.join(ROOT, "lbr", "c22-addrmap-pie-lbr", "perf.data")
BIN = os.path.join(ROOT, "bin", "clang-22", "addrmap", "layout.pie")
pytestmark = pytest.mark.skipif(not (os.path.exists(LBR) and os.path.exists(BIN)),
                                reason="corpus not built")


def run(*args):
    r = CliRunner().invoke(main, ["layout", *args])
    return r.exit_code, r.output


def test_files_and_text_report(tmp_path):
    cc, ld = tmp_path / "cc.txt", tmp_path / "ld.txt"
    code, out = run(LBR, BIN, "--cc-profile", str(cc), "--ld-profile", str(ld))
    assert code == 0, out
    assert "LBR execution counts" in out and "function order: c3" in out
    total = next(ln for ln in out.splitlines() if ln.startswith("total"))
    assert "%" in total
    lines = cc.read_text().splitlines()
    assert lines[0] == "v1" and lines[1].startswith("# bbmap layout: ")
    funcs = [ln[2:] for ln in lines if ln.startswith("f ")]
    clusters = [ln for ln in lines if ln.startswith("c ")]
    assert len(funcs) == len(clusters) >= 10
    assert all(c.split()[1] == "0" for c in clusters)  # the entry first
    order = ld.read_text().splitlines()
    hot = [n for n in order if not n.endswith(".cold")]
    cold = [n for n in order if n.endswith(".cold")]
    assert sorted(hot) == sorted(funcs) and order == hot + cold
    assert all(c[:-5] in hot for c in cold)


def test_verbose_lines_are_propellers(tmp_path):
    cc = tmp_path / "cc.txt"
    code, out = run(LBR, BIN, "--cc-profile", str(cc), "--verbose")
    assert code == 0, out
    lines = cc.read_text().splitlines()
    score = re.compile(r"^#ext-tsp score: \[intra: \d+\.\d{6} -> \d+\.\d{6}\] "
                       r"\[inter: \d+\.\d{6} -> \d+\.\d{6}\]$")
    cfg = re.compile(r"^#cfg( \d+:\d+(,\d+:\d+)*)+$")
    for i, ln in enumerate(lines):
        if ln.startswith("f "):
            assert score.match(lines[i + 1]), lines[i + 1]
            assert re.match(r"^#entry-freq \d+$", lines[i + 2])
            assert lines[i + 3].startswith("c ")
            assert cfg.match(lines[i + 4]), lines[i + 4]
    # the same clusters as the plain file
    code, _ = run(LBR, BIN, "--cc-profile", str(tmp_path / "plain.txt"))
    plain = [ln for ln in (tmp_path / "plain.txt").read_text().splitlines()
             if not ln.startswith("#")]
    assert [ln for ln in lines if not ln.startswith("#")] == plain


def test_json_report_and_v0(tmp_path):
    cc = tmp_path / "cc0.txt"
    code, out = run(LBR, BIN, "--json", "--cluster-version", "0", "--params", "llvm",
                    "--function-order", "cdsort", "--cc-profile", str(cc))
    assert code == 0, out
    doc = json.loads(out)
    assert doc["count_source"] == "lbr" and doc["params"] == "llvm"
    assert doc["function_order"]["algorithm"] == "cdsort"
    fs = doc["functions"]
    t = doc["totals"]
    assert t["functions"] == len(fs)
    assert t["intra_after"] == pytest.approx(sum(f["score"]["intra_after"] for f in fs))
    assert t["fallthrough_gained"] == sum(f["fallthroughs"]["gained"] for f in fs)
    assert doc["symbol_order"][:len(fs)] == [f["symbol"] for f in fs]
    v0 = cc.read_text().splitlines()
    assert v0[0].startswith("#") and any(ln.startswith("!!0") for ln in v0)
    assert not any(ln.startswith(("v1", "f ", "c ")) for ln in v0)


def test_modes_and_report_to_file(tmp_path):
    rep = tmp_path / "report.json"
    code, out = run(LBR, BIN, "--split-only", "--json", "-o", str(rep))
    assert code == 0 and out == ""
    doc = json.loads(rep.read_text())
    assert doc["mode"] == "split-only"
    assert all(f["cluster"] == [f["cluster"][0]] + f["cluster"][1:] for f in doc["functions"])
    code, out = run(LBR, BIN, "--layout-only", "--json")
    assert code == 0 and all(not f["cold"] for f in json.loads(out)["functions"])


def test_annotate_formats_are_the_same_engine(tmp_path):
    cc, ld = tmp_path / "cc.txt", tmp_path / "ld.txt"
    assert run(LBR, BIN, "--cc-profile", str(cc), "--ld-profile", str(ld))[0] == 0
    for fmt, want in (("propeller", cc), ("symorder", ld)):
        r = CliRunner().invoke(main, ["annotate", LBR, BIN, "--format", fmt])
        assert r.exit_code == 0 and r.stdout == want.read_text()


@pytest.mark.parametrize("args,code", [
    (["--layout-only", "--split-only"], 2),
    (["--cc-profile", "SAME", "--ld-profile", "SAME"], 2),
    (["--params", "gcc"], 2),
])
def test_refusals(tmp_path, args, code):
    args = [str(tmp_path / "x.txt") if a == "SAME" else a for a in args]
    got, out = run(LBR, BIN, *args)
    assert got == code, out
    assert "Traceback" not in out


def test_output_over_an_input_is_refused(tmp_path):
    code, out = run(LBR, BIN, "--cc-profile", BIN)
    assert code == 2 and "input" in out
    assert os.path.getsize(BIN) > 0


def test_missing_binary_and_swapped_arguments(tmp_path):
    code, out = run(LBR, str(tmp_path / "nope"))
    assert code in (2, 3) and "Traceback" not in out
    code, out = run(BIN, LBR)
    assert code == 2 and "perf data" in out
