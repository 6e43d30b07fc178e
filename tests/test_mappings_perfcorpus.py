"""Foreign perf.data files (kernels 3.2-4.14, fork/exec churn, remaps): the DSO per sample.

These profiles come from other machines without their binaries, so only the mapping layer
is checked: for the most-sampled files, a sample is IN_BINARY for bbmap exactly when
`perf script` prints that file as its DSO.  Needs `perf` and ../shared/perf-corpus.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from bbmap.binary.types import PF_R, PF_X, PT_LOAD, Segment
from bbmap.mappings import IN_BINARY, ProfileMappings
from bbmap.perf import PerfData, SampleBatch

PC = Path(__file__).resolve().parent.parent.parent / "shared" / "perf-corpus"
FILES = ["perf.data.forkexit-3.8", "perf.data.remmap-3.2", "perf.data.branch_stack_hw_index",
         "perf.data.branch-4.14"]
LINE = re.compile(r"^\s*(\d+)\s+(\d+)\.(\d+):\s+([0-9a-f]+)\s+\((.*)\)\s*$")
# one executable segment at offset 0 = vaddr 0: the vaddr is the file offset
WHOLE = [Segment(PT_LOAD, PF_R | PF_X, 0, 0, 1 << 40, 1 << 40, 0x1000)]


@pytest.mark.skipif(not shutil.which("perf") or not PC.is_dir(), reason="needs perf + corpus")
@pytest.mark.parametrize("name", FILES)
def test_dso_per_sample_equals_perf_script(name: str) -> None:
    path = PC / name
    out = subprocess.run(["perf", "script", "-i", str(path), "-F", "tid,time,ip,dso", "--ns"],
                         capture_output=True, text=True, timeout=300).stdout
    perf = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            perf[(int(m[1]), int(m[2]) * 10**9 + int(m[3]), int(m[4], 16))] = m[5]
    assert perf
    p = PerfData(path)
    side, batches = [], []
    for item in p.stream(branches=False):
        (batches if isinstance(item, SampleBatch) else side).append(item)
    tops = [n for n, _ in Counter(perf.values()).most_common() if n.startswith("/")][:2]
    for dso in tops:
        b = SimpleNamespace(path=dso, build_id=None, segments=WHOLE)
        pm = ProfileMappings.from_perf(side, b, build_ids=p.build_ids, name_override=dso)
        n = bad = 0
        for bt in batches:
            c = pm.classify(bt)
            for i in range(len(bt)):
                key = (int(bt.tid[i]), int(bt.time[i]), int(bt.ip[i]))
                n += 1
                bad += (perf[key] == dso) != (c.where[i] == IN_BINARY)
        assert n == len(perf) and bad == 0, (dso, bad, n)
