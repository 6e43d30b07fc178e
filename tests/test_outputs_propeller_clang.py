"""The cluster and ordering files are accepted by the real toolchain and do what they say.

Profile a corpus binary -> ``--format propeller`` -> recompile its source with
``clang-22 -fbasic-block-sections=list=FILE -fbasic-block-address-map``: every listed
function's first range must hold exactly the listed IDs in the listed order, and the
other blocks must sit in a second (``.cold``) range.  ``--format symorder`` linked with
lld must lay the hot functions out in the listed order.  Skipped without clang-22/lld.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from bbmap.binary import load_binary
from bbmap.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
PROF = os.path.join(ROOT, "profiles", "c22-addrmap-pie-plain", "perf.data")
LBR = os.path.join(ROOT, "lbr", "c22-addrmap-pie-lbr", "perf.data")  # edges drive the chains
NAME = "c22-addrmap-pie"
CLANG = shutil.which("clang-22")

pytestmark = pytest.mark.skipif(CLANG is None or not os.path.exists(PROF),
                                reason="needs clang-22 and the corpus")


def _entry():
    with open(os.path.join(ROOT, "manifest.json")) as fh:
        return next(b for b in json.load(fh)["binaries"] if b["name"] == NAME)


def _compile(out: str, extra: list[str]) -> None:
    e = _entry()
    flags = [f for f in e["flags"] if not f.startswith("-ffile-prefix-map")]
    src = [os.path.join(ROOT, s) for s in e["sources"]]
    r = subprocess.run([CLANG, *flags, *extra, *src, "-o", out], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr


@pytest.mark.parametrize("version,profile", [("0", PROF), ("1", PROF), ("1", LBR)],
                         ids=["v0-ip", "v1-ip", "v1-lbr"])
def test_cluster_file_drives_clang(tmp_path, version, profile):
    if not os.path.exists(profile):
        pytest.skip("profile not built")
    binary = os.path.join(ROOT, _entry()["path"])
    cl = tmp_path / "clusters.txt"
    r = CliRunner().invoke(main, ["annotate", profile, binary, "--format", "propeller",
                                  "--cluster-version", version, "-o", str(cl)])
    assert r.exit_code == 0, r.output
    want: dict[str, list[int]] = {}
    fn = None
    for line in cl.read_text().splitlines():
        if line.startswith(("f ", "!")) and not line.startswith("!!"):
            fn = line[2:] if line.startswith("f ") else line[1:]
        elif line.startswith(("c ", "!!")):
            want[fn] = [int(x) for x in line[2:].split()]
    assert len(want) >= 5
    out = str(tmp_path / "layout.bbs")
    _compile(out, [f"-fbasic-block-sections=list={cl}"])
    m = load_binary(out).block_map
    orig = load_binary(binary).block_map
    orig_ids = {orig.func_name[f]: sorted(int(orig.block_id[b]) for b in orig.function_blocks(f))
                for f in range(orig.num_functions)}
    for f in range(m.num_functions):
        name = m.func_name[f]
        if name not in want:
            continue
        ranges = [[int(m.block_id[b]) for b in m.range_blocks(r)] for r in m.function_ranges(f)]
        assert ranges[0] == want[name], name
        cold = sorted(i for r in ranges[1:] for i in r)
        assert cold == sorted(set(orig_ids[name]) - set(want[name])), name
        assert len(ranges) == (2 if cold else 1)


def test_symbol_ordering_file_drives_lld(tmp_path):
    if shutil.which("ld.lld-22") is None and shutil.which("ld.lld") is None:
        pytest.skip("no lld")
    binary = os.path.join(ROOT, _entry()["path"])
    order = tmp_path / "order.txt"
    r = CliRunner().invoke(main, ["annotate", PROF, binary, "--format", "symorder",
                                  "-o", str(order)])
    assert r.exit_code == 0, r.output
    names = order.read_text().split()
    assert names and all(n for n in names)
    out = str(tmp_path / "layout.lld")
    _compile(out, ["-ffunction-sections", "-fuse-ld=lld", f"-Wl,--symbol-ordering-file={order}",
                   "-Wl,--no-warn-symbol-ordering"])  # order needs one section a function
    syms = load_binary(out).symbols
    addr = {n: int(a) for n, a in zip(syms.names, syms.address)}
    hot = [n for n in names if n in addr]
    assert len(hot) >= 5
    assert [addr[n] for n in hot] == sorted(addr[n] for n in hot)
