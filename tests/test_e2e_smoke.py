"""The end-to-end bench, reduced: zstd from PyPI, tiny inputs, baseline vs bbmap vs BOLT.

Runs ``bench/bench_e2e.py --smoke`` when asked (``BBMAP_E2E_SMOKE=1``: it builds zstd and
takes minutes, so the default test run, which must stay well under ten minutes, leaves it to
the benches) and clang-22, lld, llvm-readobj-22 and valgrind are installed (BOLT's row where
bolt-22 and perf are) and the pinned sources can be fetched (or are cached:
``BBMAP_E2E_CACHE``).  It proves the pipeline end to end on a real third-party
program: the LBR perf.data read back by ``perf script`` and ``perf2bolt-22``, the bbmap and
BOLT builds printing exactly what the baseline prints, and every measure present.  The
figures that show the win come from the full bench (spec/e2e.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import REPO

TOOLS = ("clang-22", "valgrind", "llvm-readobj-22")
MISSING = [t for t in TOOLS if shutil.which(t) is None]
if shutil.which("ld.lld") is None and shutil.which("ld.lld-22") is None:
    MISSING.append("ld.lld")

pytestmark = [
    pytest.mark.skipif(not os.environ.get("BBMAP_E2E_SMOKE"),
                       reason="builds zstd (minutes): set BBMAP_E2E_SMOKE=1 to run it"),
    pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)}")]


@pytest.mark.slow
def test_e2e_smoke(tmp_path):
    out = tmp_path / "results.json"
    p = subprocess.run([sys.executable, str(REPO / "bench" / "bench_e2e.py"), "--smoke",
                        "--workdir", str(tmp_path / "work"), "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0 and ("npm" in p.stderr or "pip" in p.stderr) and \
            "sha256" not in p.stderr and not os.environ.get("BBMAP_E2E_REQUIRE"):
        pytest.skip(f"sources not fetchable here: {p.stderr.strip()[-300:]}")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(out.read_text())
    res = doc["programs"]["zstd"]
    assert res["output_identical"] is True
    assert res["source"]["unit_lines"] > 50_000
    lbr = res["lbr"]
    assert lbr["unexplained"] == 0 and lbr["samples"] > 100
    b = res["builds"]
    assert {"baseline", "bbmap-lbr"} <= set(b)
    for m in b.values():
        for k in ("instructions", "i1_misses_32k", "i1_misses_16k", "taken_branches",
                  "pages_99", "text_bytes"):
            assert m[k] > 0, k
    # the bbmap build is `bbmap layout`'s (Ext-TSP + split + C3) from the LBR edges
    lay = res["layouts"]["bbmap-lbr"]
    assert lay["count_source"] == "lbr" and lay["how"].startswith("bbmap layout")
    assert lay["totals"]["fallthrough_gained"] > 0
    # the layout packs the hot code: fewer pages hold 99 % of the executed instructions
    assert b["bbmap-lbr"]["pages_99"] < b["baseline"]["pages_99"]
    if "bolt-lbr" in b:  # perf2bolt read every sample and branch entry written
        fd = res["bolt"]["bolt-lbr"]
        assert fd["samples"] == lbr["samples"] and fd.get("ignored_samples", 0) == 0
    assert "zstd: zstandard" in p.stdout and "bbmap (LBR)" in p.stdout
