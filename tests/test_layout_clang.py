"""Real compilers accept ``bbmap layout``'s files and do what they say.

Profile (a corpus LBR profile of the corpus program) -> ``bbmap layout --cc-profile
--ld-profile`` -> rebuild corpus/src/layout.c with the corpus build's flags plus
``clang-22 -fbasic-block-sections=list=CC -ffunction-sections -fuse-ld=lld
-Wl,--symbol-ordering-file=LD``.  Then, read by bbmap *and* by llvm-readobj-22:

* every listed function's first range holds exactly its cluster, in order, and its other
  blocks sit in one more range (the ``.cold`` part);
* the functions' entries ascend in the ld file's order, and every ``.cold`` part lies after
  all the hot code;
* the rebuilt program prints what the original prints.

Skipped without clang-22, lld or llvm-readobj-22.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from helpers import CORPUS, load_manifest

from bbmap.binary import load_binary
from bbmap.cli import main

CLANG = shutil.which("clang-22")
READOBJ = shutil.which("llvm-readobj-22")
LLD = shutil.which("ld.lld-22") or shutil.which("ld.lld")
LBR = CORPUS / "lbr" / "c22-addrmap-pie-lbr" / "perf.data"
NAME = "c22-addrmap-pie"
pytestmark = pytest.mark.skipif(not (CLANG and READOBJ and LLD and LBR.exists()),
                                reason="needs clang-22, lld, llvm-readobj-22 and the corpus")


def _entry() -> dict:
    return next(b for b in load_manifest()["binaries"] if b["name"] == NAME)


def _build(out: str, extra: list[str]) -> None:
    e = _entry()
    flags = [f for f in e["flags"] if not f.startswith("-ffile-prefix-map")]
    src = [str(CORPUS / s) for s in e["sources"]]
    r = subprocess.run([CLANG, *flags, *extra, *src, "-o", out], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr


def _pairs(items):
    """llvm-readobj's JSON repeats keys; keep lists of repeated values."""
    out: dict = {}
    for k, v in items:
        if k in out:
            out[k] = (out[k] if isinstance(out[k], list) else [out[k]]) + (
                v if isinstance(v, list) else [v])
        else:
            out[k] = v
    return out


def _readobj_ranges(path: str) -> dict[str, list[list[int]]]:
    """Function name -> block IDs per range, as llvm-readobj-22 prints them."""
    r = subprocess.run([READOBJ, "--bb-addr-map", "--elf-output-style=JSON", path],
                       capture_output=True, text=True, timeout=120, check=True)
    doc = json.loads(r.stdout, object_pairs_hook=_pairs)[0]
    out = {}
    for rec in doc["BBAddrMap"]:
        fn = rec["Function"]
        out[fn["Name"]] = [[b["ID"] for b in rng["BB Entries"]] for rng in fn["BB Ranges"]]
    return out


def _bbmap_ranges(path: str) -> dict[str, list[list[int]]]:
    m = load_binary(path).block_map
    return {m.func_name[f]: [[int(m.block_id[b]) for b in m.range_blocks(r)]
                             for r in m.function_ranges(f)] for f in range(m.num_functions)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("layout-clang")
    binary = str(CORPUS / _entry()["path"])
    cc, ld = d / "cc.txt", d / "ld.txt"
    r = CliRunner().invoke(main, ["layout", str(LBR), binary, "--cc-profile", str(cc),
                                  "--ld-profile", str(ld)])
    assert r.exit_code == 0, r.output
    out = str(d / "layout.propeller")
    _build(out, [f"-fbasic-block-sections=list={cc}", "-ffunction-sections", "-fuse-ld=lld",
                 f"-Wl,--symbol-ordering-file={ld}"])
    clusters, fn = {}, None
    for line in cc.read_text().splitlines():
        if line.startswith("f "):
            fn = line[2:]
        elif line.startswith("c "):
            clusters[fn] = [int(x) for x in line[2:].split()]
    return binary, out, clusters, ld.read_text().split()


def test_clusters_in_the_rebuilt_map(built):
    binary, out, clusters, _ = built
    assert len(clusters) >= 10
    orig = _bbmap_ranges(binary)
    for reader in (_bbmap_ranges, _readobj_ranges):
        got = reader(out)
        for name, ids in clusters.items():
            ranges = got[name]
            assert ranges[0] == ids, (reader.__name__, name)
            cold = sorted(i for r in ranges[1:] for i in r)
            want_cold = sorted(set(i for r in orig[name] for i in r) - set(ids))
            assert cold == want_cold, (reader.__name__, name)
            assert len(ranges) == (2 if cold else 1)
    assert _bbmap_ranges(out) == _readobj_ranges(out)


def test_function_order_and_cold_parts_last(built):
    _, out, clusters, order = built
    syms = load_binary(out).symbols
    addr = {n: int(a) for n, a in zip(syms.names, syms.address)}
    end = {n: int(a) + int(s) for n, a, s in zip(syms.names, syms.address, syms.size)}
    hot = [n for n in order if not n.endswith(".cold")]
    cold = [n for n in order if n.endswith(".cold")]
    assert set(hot) == set(clusters) and cold
    assert [addr[n] for n in hot] == sorted(addr[n] for n in hot)
    hot_end = max(end[n] for n in hot)
    assert all(addr[c] >= hot_end for c in cold)
    assert [addr[c] for c in cold] == sorted(addr[c] for c in cold)


def test_program_output_unchanged(built):
    binary, out, _, _ = built
    runs = [subprocess.run([b, "300"], capture_output=True, text=True, timeout=120)
            for b in (binary, out)]
    assert runs[0].returncode == runs[1].returncode == 0
    assert runs[0].stdout == runs[1].stdout and "checksum" in runs[0].stdout


def test_layout_only_keeps_one_range(tmp_path):
    binary = str(CORPUS / _entry()["path"])
    cc = tmp_path / "cc.txt"
    r = CliRunner().invoke(main, ["layout", str(LBR), binary, "--layout-only",
                                  "--cc-profile", str(cc)])
    assert r.exit_code == 0, r.output
    out = str(tmp_path / "layout.whole")
    _build(out, [f"-fbasic-block-sections=list={cc}"])
    got = _readobj_ranges(out)
    for line in cc.read_text().splitlines():
        if line.startswith("f "):
            name = line[2:]
        elif line.startswith("c "):
            assert got[name] == [[int(x) for x in line[2:].split()]]
    assert os.path.getsize(out) > 0
