"""The DOT output renders with the Graphviz people have (``dot -Tsvg``, as the spec says).

Graphviz 2.43 (Debian/Ubuntu) aborted with ``free(): double free`` on the concatenated
graphs of the corpus LBR profiles: call edges to the dashed note nodes were all
``constraint=false``, which leaves those nodes unranked next to clusters.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from bbmap.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
CASES = [
    ("lbr/c22-addrmap-pie-lbr/perf.data", "bin/clang-22/addrmap/layout.pie"),
    ("lbr/c22-addrmap-nopie-lbr-skylake/perf.data", "bin/clang-22/addrmap/layout.nopie"),
    ("lbr/c22-list-pie-lbr/perf.data", "bin/clang-22/list/layout.pie"),
    ("profiles/c22-eh-pie-plain/perf.data", "bin/clang-22/eh/unwind.pie"),
]


@pytest.mark.skipif(not shutil.which("dot"), reason="graphviz not installed")
@pytest.mark.parametrize("prof,binary", CASES)
def test_dot_output_renders(tmp_path, prof, binary):
    prof, binary = os.path.join(ROOT, prof), os.path.join(ROOT, binary)
    if not (os.path.exists(prof) and os.path.exists(binary)):
        pytest.skip("corpus not built")
    out = tmp_path / "cfg.dot"
    r = CliRunner().invoke(main, ["cfg", prof, binary, "-o", str(out), "--top", "30"])
    assert r.exit_code == 0, r.output
    d = subprocess.run(["dot", "-Tsvg", str(out)], capture_output=True, timeout=300)
    assert d.returncode == 0, d.stderr.decode(errors="replace")[:300]
    assert d.stdout.count(b"<svg") == out.read_text().count("digraph ")
