"""``llvm-bolt-22`` accepts bbmap's fdata and pre-aggregated file, optimizes with them
exactly as with perf2bolt's profile (equal ``-dyno-stats``), and the binary it writes
runs with the original's output.  Skipped when llvm-bolt-22/perf2bolt-22/perf is absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bbmap.binary import load_binary
from bbmap.bolt_functions import BoltView
from bbmap.outputs.bolt import fdata_from_profile, preagg_from_profile
from bbmap.run import annotate
from tests.helpers import ip_profile_cases, profile_cases

TOOLS = ("llvm-bolt-22", "perf2bolt-22", "perf")
pytestmark = pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS),
                                reason="needs llvm-bolt-22, perf2bolt-22 and perf")

# BOLT's block layout and splitting (function reordering needs --emit-relocs, which the
# corpus binaries were not linked with)
BOLT_FLAGS = ("-reorder-blocks=ext-tsp", "-split-functions", "-dyno-stats")
LBR = {c[0]: c for c in profile_cases("lbr")}
IP = {c[0]: c for c in ip_profile_cases()}
CASES = [("lbr", "c22-addrmap-pie-lbr"), ("lbr", "c22-list-pie-lbr"),
         ("lbr", "c22-addrmap-nopie-lbr"), ("ip", "c22-addrmap-pie-ip")]


def run(cmd: list[str], cwd: str) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)
    assert r.returncode == 0, f"{cmd[0]} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def dyno_stats(log: str) -> str:
    """The dyno-stats tables of a llvm-bolt log (before and after optimization)."""
    m = re.search(r"program-wide dynostats.*?\n(.*?)\n(?:BOLT-INFO: patched|BOLT:)", log,
                  re.S)
    assert m, "llvm-bolt printed no dyno-stats"
    return m.group(1).strip()


@pytest.mark.parametrize("kind,name", CASES, ids=[c[1] for c in CASES])
def test_llvm_bolt_same_optimization_as_with_perf2bolt(kind: str, name: str, tmp_path) -> None:  # noqa: ANN001
    table = LBR if kind == "lbr" else IP
    if name not in table:
        pytest.skip(f"corpus case {name} absent")
    _, perf, binary = table[name]
    d = str(tmp_path)
    exe = os.path.join(d, os.path.basename(binary))  # perf2bolt matches the mmap's file name
    shutil.copy(binary, exe)
    nl = ["-nl"] if kind == "ip" else []
    run(["perf2bolt-22", *nl, "-p", perf, "-o", "perf2bolt.fdata", exe], d)
    r = annotate([perf], binary, addresses=True, inference="off")
    view = BoltView(load_binary(binary))
    with open(os.path.join(d, "bbmap.fdata"), "w") as f:
        f.write(fdata_from_profile(r.addresses, view)[0])
    with open(os.path.join(d, "bbmap.preagg"), "w") as f:
        f.write(preagg_from_profile(r.addresses, view, build_id=r.build_id))
    logs = {}
    for out, data in (("p", ["-data=perf2bolt.fdata"]), ("b", ["-data=bbmap.fdata"]),
                      ("pa", ["-p", "bbmap.preagg", "--pa", *nl])):
        logs[out] = run(["llvm-bolt-22", exe, "-o", f"out_{out}", *data, *BOLT_FLAGS], d)
    ref = dyno_stats(logs["p"])
    assert dyno_stats(logs["b"]) == ref
    if nl:
        # llvm-bolt turns IP samples read in-process (-p, --pa or perf.data alike) into
        # no block counts; the reference for --pa is its own read of the perf.data
        logs["d"] = run(["llvm-bolt-22", exe, "-o", "out_d", "-p", perf, *nl, *BOLT_FLAGS], d)
        assert dyno_stats(logs["pa"]) == dyno_stats(logs["d"])
    else:
        assert dyno_stats(logs["pa"]) == ref
    # the BOLTed binaries run like the original
    info = os.path.join(os.path.dirname(perf).replace("/ip/", "/lbr/"), "lbr-info.json")
    rounds = str(json.loads(Path(info).read_text())["rounds"]) if os.path.exists(info) else "60"
    want = run([exe, rounds], d)
    for out in ("b", "pa"):
        assert run([os.path.join(d, f"out_{out}"), rounds], d) == want
