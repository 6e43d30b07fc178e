"""corpus/tools/lbr.py: the superblock tracer against the per-instruction one, and its parts.

The oracle of ``--tracer sb`` is ``--tracer mem`` (lackey prints every executed instruction,
so every taken branch is visible without any model of valgrind's superblocks): on the same
run both must write the same branch stacks and the same exact counts.  The one designed
difference: a jump onto the very next instruction is a taken branch (as the hardware
records it) that only ``sb`` can see.  The pure parts (line parser, terminator kinds,
sampler) are checked against straightforward reference versions with hypothesis.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import capstone
import numpy as np
import pytest
from helpers import CORPUS, corpus_binary
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(CORPUS / "tools"))
import lbr  # noqa: E402

VALGRIND = shutil.which("valgrind")


@given(st.lists(st.integers(0, 2**64 - 1), max_size=200),
       st.lists(st.sampled_from(["==42== Lackey, an example Valgrind tool", "", "SB", "x"]),
                max_size=5), st.randoms())
def test_parse_superblock_lines(addrs, junk, rnd):
    lines = [f"SB {a:08x}" for a in addrs]
    for j in junk:  # valgrind's own messages may sit among the superblock lines
        lines.insert(rnd.randint(0, len(lines)), j)
    got = lbr.parse_superblock_lines(("\n".join(lines) + "\n").encode())
    assert got.dtype == np.uint64 and got.tolist() == addrs


def test_parse_superblock_lines_keeps_only_complete_lines():
    assert lbr.parse_superblock_lines(b"SB 1000\nSB 20").tolist() == [0x1000]


@pytest.mark.parametrize("code, kind", [
    ("74 05", lbr.COND), ("0f 84 00 01 00 00", lbr.COND), ("e3 00", lbr.COND),
    ("e2 fe", lbr.COND),                                   # loop
    ("eb 00", lbr.UNCOND), ("ff e0", lbr.UNCOND), ("3e ff e0", lbr.UNCOND),  # notrack jmp
    ("e8 00 00 00 00", lbr.UNCOND), ("c3", lbr.UNCOND), ("f3 c3", lbr.UNCOND),  # repz ret
    ("f2 c3", lbr.UNCOND),                                 # bnd ret
    ("f3 a4", lbr.REP), ("f3 48 ab", lbr.REP), ("f2 ae", lbr.REP), ("f3 a6", lbr.REP),
    ("0f 05", lbr.STOP), ("f3 90", lbr.STOP), ("0f 0b", lbr.STOP), ("cc", lbr.STOP),
    ("a4", None), ("f2 0f 10 c1", None), ("f3 0f 1e fa", None), ("48 89 c3", None),
])
def test_insn_kind(code, kind):
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    ins = next(cs.disasm_lite(bytes.fromhex(code), 0))
    assert lbr.insn_kind(ins[2]) == kind


class _Writer:
    def __init__(self):
        self.samples = []

    def add_sample(self, ip, pid, tid, time, period, branches):
        self.samples.append((ip, time, period, tuple(branches)))


def _reference_samples(branches, every, seed, skylake):
    """The corpus tool's original per-branch loop (a ring of the last 32 branches)."""
    from collections import deque
    rng = random.Random(seed)
    ring = deque(maxlen=lbr.DEPTH)
    out = []
    gap = next_at = max(1, every + rng.randint(-every // 2, every // 2))
    for n, (f, t, tm) in enumerate(branches, 1):
        ring.appendleft((f, t))
        if n >= next_at and len(ring) == lbr.DEPTH:
            stack = list(ring)
            if skylake:
                stack = [stack[0]] + stack[:-1]
            out.append((t, tm, gap, tuple((a, b, 0) for a, b in stack)))
            gap = max(1, every + rng.randint(-every // 2, every // 2))
            next_at = n + gap
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3000), st.integers(1, 300), st.integers(0, 9), st.booleans(),
       st.lists(st.integers(1, 700), max_size=8))
def test_sampler_matches_the_per_branch_loop(n, every, seed, skylake, cuts):
    rnd = random.Random(n * 7 + seed)
    br = [(rnd.randrange(1 << 40), rnd.randrange(1 << 40), 1_000_000 + 3 * i) for i in range(n)]
    w = _Writer()
    s = lbr.StackSampler(w, 1, every, seed, skylake)
    arr = np.array([x for x in br], np.uint64).reshape(-1, 3)
    pos = 0
    for c in cuts + [n]:  # feed in arbitrary chunks, including empty ones
        end = min(n, pos + c)
        s.feed(arr[pos:end, 0], arr[pos:end, 1], arr[pos:end, 2])
        pos = end
    assert w.samples == _reference_samples(br, every, seed, skylake)
    assert s.samples == len(w.samples)


def test_edge_counter_accumulates_across_chunks():
    e = lbr.EdgeCounter()
    e.add(np.array([5, 1, 5], np.uint64), np.array([9, 2, 9], np.uint64))
    e.add(np.array([1], np.uint64), np.array([2], np.uint64))
    e.add(np.zeros(0, np.uint64), np.zeros(0, np.uint64))
    assert e.items() == [(1, 2, 2), (5, 9, 2)]


# ----------------------------------------------------------------------------- real runs
def _trace(tracer: str, binary: Path, tmp: Path) -> tuple[list[str], dict, dict]:
    out, work = tmp / tracer / "case", tmp / f"work-{tracer}"
    golden = CORPUS / "golden" / "c22-addrmap-pie.readobj22.json"
    subprocess.run([sys.executable, str(CORPUS / "tools" / "lbr.py"), "--tracer", tracer,
                    "--binary", str(binary), "--readobj", str(golden), "--rounds", "20",
                    "--every", "300", "--out", str(out), "--work", str(work)],
                   check=True, capture_output=True)
    stacks = (work / "case.expected.txt").read_text().splitlines()
    return (stacks, json.loads((out / "exact-counts.json").read_text()),
            json.loads((out / "lbr-info.json").read_text()))


@pytest.mark.slow
@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
def test_superblock_tracer_equals_instruction_tracer(tmp_path):
    src = corpus_binary("c22-addrmap-pie")
    binary = tmp_path / src.name
    shutil.copy2(src, binary)
    mem_stacks, mem, _ = _trace("mem", binary, tmp_path)
    sb_stacks, sb, info = _trace("sb", binary, tmp_path)
    assert info["tracer"] == "sb" and info["unexplained"] == 0
    assert len(sb_stacks) > 100
    assert sb["blocks"] == mem["blocks"]
    # sb sees jumps onto the next instruction; mem cannot: the only allowed difference
    mem_edges = {(e["from"], e["to"]): e["count"] for e in mem["edges"]}
    sb_edges = {(e["from"], e["to"]): e["count"] for e in sb["edges"]}
    extra = {k: v for k, v in sb_edges.items() if k not in mem_edges}
    assert {k: v for k, v in sb_edges.items() if k in mem_edges} == mem_edges
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    data = binary.read_bytes()
    seg = lbr.elf_layout(binary)
    for f, t in extra:
        off = int(f, 16) - seg["p_vaddr"] + seg["p_offset"]
        ins = next(cs.disasm_lite(data[off:off + 16], int(f, 16)))
        assert ins[0] + ins[1] == int(t, 16) and lbr.insn_kind(ins[2]) == lbr.UNCOND
    if not extra:  # then the stacks are the same too
        assert sb_stacks == mem_stacks
    assert sb["taken_branches_in_binary"] == mem["taken_branches_in_binary"] + sum(extra.values())


def _kept_sequences(binary: Path, tmp: Path, monkeypatch, scope: str) -> dict:
    """Run both tracers in-process; every kept branch in order, and each run's lbr-info."""
    import argparse
    got: dict[str, list] = {}
    cur = [""]
    orig = lbr.StackSampler.feed

    def feed(self, f, t, tm):
        got.setdefault(cur[0], []).extend(zip(f.tolist(), t.tolist()))
        return orig(self, f, t, tm)

    monkeypatch.setattr(lbr.StackSampler, "feed", feed)
    info = {}
    for tracer in ("mem", "sb"):
        cur[0] = tracer
        lbr.run(argparse.Namespace(
            binary=str(binary), readobj=str(CORPUS / "golden" / "c22-addrmap-pie.readobj22.json"),
            rounds=5, args=None, tracer=tracer, scope=scope, every=300, variant="none", seed=1,
            out=str(tmp / tracer / "case"), work=str(tmp / f"work-{tracer}")))
        info[tracer] = json.loads((tmp / tracer / "case" / "lbr-info.json").read_text())
    return {"seq": got, "info": info}


@pytest.mark.slow
@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
def test_user_scope_keeps_libc_branches(tmp_path, monkeypatch):
    """--scope user: every branch of the client's code (libc, ld.so) is kept, as user-mode
    LBR records it.  Both tracers keep the same branches in the same order, but for the
    jumps onto the next instruction that only ``sb`` sees; each library is mapped."""
    src = corpus_binary("c22-addrmap-pie")
    binary = tmp_path / src.name
    shutil.copy2(src, binary)
    r = _kept_sequences(binary, tmp_path, monkeypatch, "user")
    mem, sb = r["seq"]["mem"], r["seq"]["sb"]
    info = r["info"]["sb"]
    assert info["scope"] == "user" and info["unexplained"] == 0
    # valgrind's own code (its ld.so redirections, the freeres call at exit) is not traced
    assert info["superblocks_outside_traced_code"] < 100
    space = lbr.AddressSpace([lbr.Mapping(int(m["start"], 16), int(m["end"], 16),
                                          int(m["pgoff"], 16), m["path"])
                              for m in info["mappings"]])
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)

    def onto_next(f: int, t: int) -> bool:
        ins = next(cs.disasm_lite(space.code(f, 16), f))
        return ins[0] + ins[1] == t and lbr.insn_kind(ins[2]) == lbr.UNCOND

    assert [b for b in sb if not onto_next(*b)] == mem
    lo = int(info["mmap"]["start"], 16)
    hi = lo + int(info["mmap"]["len"], 16)
    assert sum(1 for f, t in mem if not (lo <= f < hi and lo <= t < hi)) > 1000  # libc's own
    paths = {m["path"] for m in info["mappings"]}
    assert str(binary.resolve()) in paths and any("libc.so" in p for p in paths)
    assert not any("valgrind" in p for p in paths)
