"""BOLT's YAML profile with block hashes (``annotate --format bolt-yaml``): held against
the YAML BOLT itself writes for the same binary and profile (``llvm-bolt -data=FDATA
-w``), and read by ``llvm-bolt --infer-stale-profile`` on the next build."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bbmap.outputs.bolt_yaml_hash import blend, hash_16_bytes, opcode_name, xxh3_64
from tests.helpers import CORPUS, cli_stdout

STALE = CORPUS / "stale"
OLD = STALE / "bin" / "v1-O2-hash"
NEW = STALE / "bin" / "v2-O2-hash"
PERF_OLD = STALE / "profiles" / "v1-O2-hash.perf.data"
PERF_NEW = STALE / "profiles" / "v2-O2-hash.perf.data"
BOLT = shutil.which("llvm-bolt-22")
PERF2BOLT = shutil.which("perf2bolt-22")
needs_bolt = pytest.mark.skipif(not (BOLT and PERF2BOLT), reason="needs llvm-bolt-22, "
                                "perf2bolt-22")


def test_xxh3_is_the_reference_function() -> None:
    # XXH3-64 (seed 0) of the empty input and of "a", as the xxHash reference gives them
    assert xxh3_64(b"") == 0x2D06800538D394C2
    assert xxh3_64(b"a") == 0xE6C632B61E964E1F


def test_neighbour_fold_and_blend() -> None:
    assert hash_16_bytes(0, 0) == 0
    assert hash_16_bytes(1, 2) != hash_16_bytes(2, 1)
    h = blend(0x1234, 0xABCD, 0x5678, 0x9A, 0xBC)
    assert h == 0xBC9A5678ABCD1234
    assert opcode_name("cmovbl", False) == "cmov" and opcode_name("jne", True) == "JMP"


def _ours(*args: str) -> str:
    code, out = cli_stdout("annotate", *args, "--inference", "on", "--format", "bolt-yaml")
    assert code == 0, out
    return out


def _bolt_own(tmp: Path, perf: Path, binary: Path) -> dict:
    fd = tmp / "p.fdata"
    subprocess.run([PERF2BOLT, "-nl", "-p", str(perf), "-o", str(fd), str(binary)],
                   check=True, capture_output=True)
    y = tmp / "bolt.yaml"
    subprocess.run([BOLT, str(binary), f"-data={fd}", "-w", str(y), "-o", str(tmp / "out")],
                   check=True, capture_output=True)
    return yaml.safe_load(y.read_text())


@needs_bolt
def test_blocks_and_hashes_agree_with_bolts_own_yaml(tmp_path: Path) -> None:
    ours = yaml.safe_load(_ours(str(PERF_NEW), str(NEW)))
    theirs = _bolt_own(tmp_path, PERF_NEW, NEW)
    assert ours["header"]["hash-func"] == theirs["header"]["hash-func"] == "xxh3"
    mine = {f["name"]: f for f in ours["functions"]}
    compared = 0
    for fn in theirs["functions"]:
        if not fn.get("blocks"):
            continue
        assert fn["name"] in mine, fn["name"]
        m = mine[fn["name"]]
        assert m["nblocks"] == fn["nblocks"]
        by_bid = {b["bid"]: b for b in m["blocks"]}
        for b in fn["blocks"]:
            o = by_bid[b["bid"]]
            assert o["insns"] == b["insns"]
            # offset, opcode hash, predecessor and successor hashes: BOLT's own values;
            # the instruction hash is not reproducible outside LLVM (bolt_yaml_hash.py)
            keep = 0xFFFF_0000_FFFF_FFFF
            assert o["hash"] & keep == b["hash"] & keep, (fn["name"], b["bid"])
            compared += 1
    assert compared >= 20


def test_output_is_byte_identical() -> None:
    assert _ours(str(PERF_NEW), str(NEW)) == _ours(str(PERF_NEW), str(NEW))


@needs_bolt
def test_carried_profile_is_matched_by_bolts_stale_path(tmp_path: Path) -> None:
    text = _ours(str(PERF_OLD), str(NEW), "--profiled-binary", str(OLD))
    y = tmp_path / "carried.yaml"
    y.write_text(text)
    p = subprocess.run([BOLT, str(NEW), f"-data={y}", "--infer-stale-profile", "-o",
                        str(tmp_path / "out"), "-reorder-blocks=ext-tsp"],
                       capture_output=True, text=True, check=True)
    log = p.stdout + p.stderr
    loose = re.search(r"loose match for ([\d.]+)% of basic blocks .* responsible for "
                      r"([\d.]+)% samples", log)
    assert loose, log
    assert float(loose.group(1)) >= 90 and float(loose.group(2)) >= 90, loose.group(0)
    prof = re.search(r"(\d+) out of \d+ functions in the binary .* non-empty", log)
    assert prof and int(prof.group(1)) >= 4, log
