"""Alignment padding (bbmap/layout/align.py) against what the binaries hold.

* the padding bbmap reads from the block map (a gap before a block in its range) is, byte
  for byte, what llvm-objdump-22 disassembles as nops before that block, and the block
  starts at the alignment bbmap infers; every run of nops between two blocks of a laid-out
  function is such a gap;
* rebuilt from ``bbmap layout``'s files plus the recipe's ``-falign-loops=1`` (which the
  report prints when the new order runs more padding than the compiler's), the hot
  clusters of the corpus program hold no padding at all (read back by bbmap and by
  llvm-readobj-22), where the same files without the flag leave some;
* the model's arithmetic on small cases, and the policies.

Skipped without clang-22, lld, llvm-objdump-22 and the corpus.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import CORPUS, load_manifest

import bbmap
from bbmap.binary import load_binary
from bbmap.cli import main
from bbmap.layout.align import (
    DROP_LOOP_ALIGNMENT,
    Padding,
    block_alignment,
    loop_alignment_flags,
    padding_of_order,
    running_padding,
)
from bbmap.layout.plan import plan_layout

CLANG = shutil.which("clang-22")
OBJDUMP = shutil.which("llvm-objdump-22")
LLD = shutil.which("ld.lld-22") or shutil.which("ld.lld")
LBR = CORPUS / "lbr" / "c22-addrmap-pie-lbr" / "perf.data"
NAME = "c22-addrmap-pie"
real = pytest.mark.skipif(not (CLANG and OBJDUMP and LLD and LBR.exists()),
                          reason="needs clang-22, lld, llvm-objdump-22 and the corpus")


def _entry() -> dict:
    return next(b for b in load_manifest()["binaries"] if b["name"] == NAME)


def _nop_bytes(binary: str) -> set[int]:
    """Addresses of every byte llvm-objdump-22 disassembles as a nop."""
    out = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", binary], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    lines = [m for m in re.finditer(r"^\s*([0-9a-f]+):\s+(\S+)", out, re.M)]
    nops: set[int] = set()
    for a, b in zip(lines, lines[1:]):
        if a.group(2).startswith("nop"):
            nops.update(range(int(a.group(1), 16), int(b.group(1), 16)))
    return nops


def _plan(binary: str):
    return plan_layout(bbmap.annotate([str(LBR)], binary))


@real
def test_gaps_are_the_nops_objdump_sees():
    binary = str(CORPUS / _entry()["path"])
    nops = _nop_bytes(binary)
    plan = _plan(binary)
    padded = 0
    for f in plan.functions:
        fn = f.cfg
        gap, align = block_alignment(fn.addr, fn.sizes, fn.ranges)
        for v in range(fn.num_nodes):
            a = int(fn.addr[v])
            if gap[v]:
                padded += 1
                assert set(range(a - int(gap[v]), a)) <= nops, (fn.name, v)
                assert a % int(align[v]) == 0 and align[v] > 1
                # the padding is no more than the alignment needs
                assert gap[v] < align[v]
            else:
                assert align[v] == 1
        # every nop run between two blocks of one range is a gap bbmap found
        ends = {int(fn.addr[v] + fn.sizes[v]): v for v in range(fn.num_nodes)}
        starts = {int(fn.addr[v]): v for v in range(fn.num_nodes)}
        for e in ends:
            if e in nops and e not in starts:
                k = e
                while k in nops:
                    k += 1
                if k in starts:
                    assert gap[starts[k]] == k - e, (fn.name, hex(e))
    assert padded >= 3  # the corpus program has aligned loop headers


def _clusters_padding(binary: str, clusters: dict[str, list[int]]) -> int:
    """Padding bytes inside the hot clusters of a rebuilt binary (its first range)."""
    m = load_binary(binary).block_map
    total = 0
    for f in range(m.num_functions):
        if m.func_name[f] not in clusters:
            continue
        r = m.function_ranges(f)[0]
        blocks = list(m.range_blocks(r))
        addr = np.array([int(m.range_base[r]) + int(m.block_offset[b]) for b in blocks],
                        np.int64)
        size = np.array([int(m.block_size[b]) for b in blocks], np.int64)
        gap, _ = block_alignment(addr, size, np.zeros(len(blocks), np.int64))
        total += int(gap.sum())
    return total


@real
def test_recipe_flag_leaves_no_padding_in_hot_clusters(tmp_path):
    e = _entry()
    binary = str(CORPUS / e["path"])
    cc, ld = tmp_path / "cc.txt", tmp_path / "ld.txt"
    r = CliRunner().invoke(main, ["layout", str(LBR), binary, "--loop-alignment", "drop",
                                  "--cc-profile", str(cc), "--ld-profile", str(ld)])
    assert r.exit_code == 0, r.output
    assert f"-fbasic-block-sections=list=CC_PROFILE {DROP_LOOP_ALIGNMENT}" in r.output
    clusters: dict[str, list[int]] = {}
    name = ""
    for line in cc.read_text().splitlines():
        if line.startswith("f "):
            name = line[2:]
        elif line.startswith("c "):
            clusters[name] = [int(x) for x in line[2:].split()]
    flags = [f for f in e["flags"] if not f.startswith("-ffile-prefix-map")]
    src = [str(CORPUS / s) for s in e["sources"]]
    pads = {}
    for tag, extra in (("keep", []), ("drop", [DROP_LOOP_ALIGNMENT])):
        out = str(tmp_path / f"layout.{tag}")
        p = subprocess.run([CLANG, *flags, f"-fbasic-block-sections=list={cc}",
                            "-ffunction-sections", "-fuse-ld=lld",
                            f"-Wl,--symbol-ordering-file={ld}", *extra, *src, "-o", out],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        pads[tag] = _clusters_padding(out, clusters)
        run = subprocess.run([out, "300"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "checksum" in run.stdout
    assert pads["keep"] > 0
    assert pads["drop"] == 0


@real
def test_auto_policy_follows_the_padding_run(tmp_path):
    binary = str(CORPUS / _entry()["path"])
    plan = _plan(binary)
    t = plan.totals()
    before, after = t["padding_run_before"], t["padding_run_after"]
    want = (DROP_LOOP_ALIGNMENT,) if after["bytes"] > before["bytes"] else ()
    assert plan.compiler_flags == want
    doc = plan.to_json()
    assert doc["compiler_flags"] == list(want) and doc["loop_alignment"] == "auto"


def test_alignment_read_from_gaps():
    addr = np.array([0x1000, 0x1008, 0x1010, 0x1013, 0x1020, 0x2000], np.int64)
    size = np.array([8, 5, 3, 7, 4, 6], np.int64)
    rng = np.array([0, 0, 0, 0, 0, 1], np.int64)
    gap, align = block_alignment(addr, size, rng)
    # 0x1008+5 = 0x100d, gap 3 before 0x1010; 0x1013+7 = 0x101a, gap 6 before 0x1020;
    # the .cold range starts elsewhere: no gap across ranges
    assert gap.tolist() == [0, 0, 3, 0, 6, 0]
    assert align.tolist() == [1, 1, 16, 1, 16, 1]


def test_padding_of_a_new_order_and_what_runs():
    size = np.array([5, 7, 4], np.int64)
    align = np.array([1, 16, 1], np.int64)
    addr, pad = padding_of_order([0, 1, 2], size, align)
    assert addr.tolist() == [0, 16, 23] and pad.tolist() == [0, 11, 0]
    edges = np.array([[0, 1, 100], [1, 2, 40], [2, 1, 900]], np.int64)
    # 0 -> 1 falls through into 11 padding bytes 100 times; 2 -> 1 is a jump (skips them)
    assert running_padding(addr, size, pad, edges) == Padding(100, 1100, 1)
    addr, pad = padding_of_order([1, 2, 0], size, align)
    assert pad.tolist() == [0, 0, 0]
    assert running_padding(addr, size, pad, edges) == Padding()


def test_policies():
    lo, hi = Padding(10, 50, 1), Padding(20, 90, 2)
    assert loop_alignment_flags("auto", lo, hi) == (DROP_LOOP_ALIGNMENT,)
    assert loop_alignment_flags("auto", hi, lo) == ()
    assert loop_alignment_flags("keep", lo, hi) == ()
    assert loop_alignment_flags("drop", hi, lo) == (DROP_LOOP_ALIGNMENT,)
    with pytest.raises(ValueError, match="loop alignment"):
        loop_alignment_flags("sometimes", lo, hi)
