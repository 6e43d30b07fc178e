"""The corpus's precise instruction-sample profiles (``corpus/precise/``, tools/precise.py)
against their oracles: perf itself, and the exact counts of the very run they sample.

They are the ground truth the inference is held to, so each is checked for what it claims:
the attr of ``perf record -e instructions:upp -c N``, samples that perf reads back with the
same IPs and objects, and a sample IP histogram that the exact counts explain -- every
sampled IP an instruction that executed, samples per block in proportion to the
executions of its instructions (capstone decodes the blocks; their executions summed must
equal the traced run's instructions in the binary, less the code no block covers).
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from functools import cache

import capstone
import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from helpers import CORPUS, load_manifest
from oracles import perf_oracle as oracle

from bbmap.binary import load_binary
from bbmap.cfg import recover_cfg
from bbmap.formats import perfdata as fmt
from bbmap.perf import PerfData

MANIFEST = load_manifest()
BINARIES = {b["name"]: CORPUS / b["path"] for b in MANIFEST["binaries"]}
CASES = [pytest.param(p, id=p["name"]) for p in MANIFEST.get("precise_profiles", [])]
WANTED = {"c22-addrmap-pie-precise", "c22-addrmap-nopie-precise",
          "c22-addrmap-lld-pie-precise", "c22-list-pie-precise",
          "c22-pgoflip-pie-precise-train", "c22-pgoflip-pie-precise-shift"}
needs_perf = pytest.mark.skipif(not oracle.have_perf(), reason="perf is not installed")


def test_every_case_is_there():
    assert {p["name"] for p in MANIFEST.get("precise_profiles", [])} >= WANTED


@cache
def _load(name: str) -> dict:
    p = next(c for c in MANIFEST["precise_profiles"] if c["name"] == name)
    info = json.loads((CORPUS / p["info"]).read_text())
    exact = json.loads((CORPUS / p["exact_counts"]).read_text())
    data = PerfData(str(CORPUS / p["path"]))
    rows, _ = oracle.bbmap_samples(data)
    return {"case": p, "info": info, "exact": exact, "perf": data,
            "ips": np.array([r[3] for r in rows], np.uint64), "rows": rows}


def _in_binary(d: dict) -> np.ndarray:
    m = d["info"]["mmap"]
    lo, hi = int(m["start"], 16), int(m["start"], 16) + int(m["len"], 16)
    return (d["ips"] >= np.uint64(lo)) & (d["ips"] < np.uint64(hi))


@pytest.mark.parametrize("p", CASES)
def test_attr_says_precise_instructions(p):
    d = _load(p["name"])
    perf = d["perf"]
    assert not perf.diagnostics.has_errors
    assert len(perf.attrs) == 1
    a = perf.attrs[0]
    assert a.name == "instructions:upp"
    assert (a.type, a.config) == (0, 1)  # PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS
    assert (a.flags >> 15) & 3 == 2  # precise_ip
    assert a.flags & fmt.F_EXCLUDE_KERNEL and a.flags & fmt.F_EXCLUDE_HV
    assert not a.freq and a.sample_period == p["every"]
    assert a.sample_type == fmt.S_IP | fmt.S_TID | fmt.S_TIME
    assert perf.record_counts["SAMPLE"] == len(d["ips"]) == p["samples"]
    assert int(_in_binary(d).sum()) == p["samples_in_binary"]
    times = [r[2] for r in d["rows"]]
    assert times == sorted(times)


@needs_perf
@pytest.mark.parametrize("p", CASES)
def test_perf_script_agrees(p):
    """perf prints the same IPs in the same order, the event name, and puts each sample in
    the object of the mapping the traced run had there (ld.so and libc included)."""
    d = _load(p["name"])
    out = oracle._run(["script", "-i", str(CORPUS / p["path"]), "-F", "event,ip,dso"])
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert [int(r[1], 16) for r in rows] == d["ips"].tolist()
    assert {r[0] for r in rows} == {"instructions:upp:"}
    maps = d["info"]["mappings"]
    starts = [int(m["start"], 16) for m in maps]
    for r in rows:
        m = maps[bisect.bisect_right(starts, int(r[1], 16)) - 1]
        assert int(r[1], 16) < int(m["end"], 16)
        assert r[2] == f"({m['path']})"
    objects = {m["path"].rsplit("/", 1)[1] for m in maps}
    assert {"ld-linux-x86-64.so.2", "libc.so.6"} <= objects
    assert len({r[2] for r in rows}) == len(maps)  # every mapped object has samples


@pytest.mark.parametrize("p", CASES)
def test_exact_counts_are_the_lbr_cases_run(p):
    """Same binary, argument and input as the LBR case: the same block executions."""
    d = _load(p["name"])
    lbr = next(c for c in MANIFEST["profiles"] if c["name"] == p["lbr_case"])
    theirs = json.loads((CORPUS / lbr["exact_counts"]).read_text())
    assert d["exact"]["blocks"] == theirs["blocks"]
    assert d["exact"]["build_id"] == theirs["build_id"]


def instruction_counts(binary: str, exact: dict, call_addrs: set[int]) -> dict[int, int]:
    """Exact executions of every instruction of every block (ELF vaddr -> count): the
    block's executions, less the taken branches out of the instructions before it (a block
    ending ``jcc; jmp`` runs its ``jmp`` only when the ``jcc`` falls through; a call
    returns, so it takes nothing away)."""
    with open(binary, "rb") as f:
        data = f.read()
        seg = next(s for s in ELFFile(f).iter_segments()
                   if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1).header
    taken: dict[int, int] = {}
    for e in exact["edges"]:
        a = int(e["from"], 16)
        if a not in call_addrs:
            taken[a] = taken.get(a, 0) + e["count"]
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    out: dict[int, int] = {}
    for b in exact["blocks"]:
        if not b["size"]:
            continue
        va = int(b["address"], 16)
        off = seg["p_offset"] + va - seg["p_vaddr"]
        left = b["count"]
        for addr, _, _, _ in cs.disasm_lite(data[off:off + b["size"]], va):
            out[addr] = left
            left -= taken.get(addr, 0)
    return out


@pytest.mark.parametrize("p", CASES)
def test_sample_histogram_fits_the_exact_counts(p):
    d = _load(p["name"])
    base = int(d["info"]["base"], 16)
    binary = str(BINARIES[p["binaries"][0]])
    cfg = recover_cfg(load_binary(binary))
    counts = instruction_counts(binary, d["exact"], set(cfg.call_addr.tolist()))
    assert min(counts.values()) >= 0
    # the blocks' instructions: the binary's retired instructions, but for the code outside
    # every block (PLT stubs, _start, crt helpers: 0.2-0.3 %)
    covered = sum(counts.values())
    in_binary = d["info"]["instructions_in_binary"]
    assert 0.995 * in_binary <= covered <= in_binary, (covered, in_binary)

    vaddr = (d["ips"][_in_binary(d)].astype(np.int64) - base).tolist()
    hits = Counter(vaddr)
    outside = sum(n for a, n in hits.items() if a not in counts)
    assert outside <= 0.005 * len(vaddr)  # no skid: the rest are instruction starts
    # every sampled instruction executed
    assert not [hex(a) for a in hits if counts.get(a) == 0]
    # samples per block in proportion to its instructions' executions
    start = np.array(sorted(counts), np.int64)
    block_of_insn = np.searchsorted(
        np.array(sorted(int(b["address"], 16) for b in d["exact"]["blocks"] if b["size"])),
        start, side="right") - 1
    execs = np.array([counts[a] for a in start.tolist()], np.float64)
    sampled = np.array([hits.get(a, 0) for a in start.tolist()], np.float64)
    nb = int(block_of_insn.max()) + 1
    obs = np.bincount(block_of_insn, weights=sampled, minlength=nb)
    exp = np.bincount(block_of_insn, weights=execs, minlength=nb) * obs.sum() / covered
    # sampling noise only: the L1 distance within 1.5x what counting noise gives on average
    # (E|X - e| ~ sqrt(2e/pi)), no block off by 5 standard deviations
    l1 = np.abs(obs - exp).sum()
    assert l1 <= 1.5 * np.sqrt(2 * exp / np.pi).sum(), (l1, np.sqrt(2 * exp / np.pi).sum())
    worst = np.abs(obs - exp) / np.sqrt(exp + 1)
    assert worst.max() < 5, (int(worst.argmax()), float(worst.max()))
