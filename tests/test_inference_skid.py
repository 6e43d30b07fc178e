"""The ``skid`` sample model (bbmap/inference/weights.py): first instructions against
llvm-objdump-22, where each sample goes (every sample in exactly one place), and accuracy
against the exact valgrind counts of the corpus runs (real cpu-clock profiles)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import CORPUS, load_manifest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.inference.weights import REFILL_WEIGHT, WEIGHT_SCALE, _cheap, locate, skid_weights

IP_CASES = [pytest.param(p, id=p["name"]) for p in load_manifest().get("ip_profiles", [])
            if os.path.exists(CORPUS / p["path"])]


def _binary(ip: dict):
    bins = {b["name"]: CORPUS / b["path"] for b in load_manifest()["binaries"]}
    return bins[ip["binaries"][0]]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(CORPUS.parent / "bench"))
    import bench_inference

    return bench_inference


@pytest.fixture(scope="module")
def case():
    if not IP_CASES:
        pytest.skip("no IP corpus profile")
    from bbmap.binary import load_binary
    from bbmap.cfg import recover_cfg

    ip = IP_CASES[0].values[0]
    binary = _binary(ip)
    return ip, binary, recover_cfg(load_binary(binary))


@pytest.mark.parametrize("text,cheap", [
    ("0x1: mov rsi, rcx", True), ("0x1: movsxd rsi, esi", True), ("0x1: xor esi, esi", True),
    ("0x1: lea r8, [rsi + 1]", True), ("0x1: nop dword ptr [rax]", True),
    ("0x1: mov r8d, dword ptr [rdi + rsi*4 - 4]", False),
    ("0x1: mov dword ptr [rdi + rsi*4], edx", False), ("0x1: cmp r8d, dword ptr [rax]", False),
    ("0x1: imul eax, ecx", False), ("0x1: div rcx", False), ("0x1: push rbp", False),
    ("0x1: pop rbx", False), ("0x1: sqrtsd xmm0, xmm1", False), ("", False),
])
def test_cheap_first_instructions(text, cheap):
    assert _cheap(text) is cheap


@pytest.mark.skipif(shutil.which("llvm-objdump-22") is None, reason="llvm-objdump-22 absent")
def test_first_instructions_match_objdump(case):
    """Every block's first instruction (size and text) as llvm-objdump-22 decodes it."""
    _, binary, cfg = case
    out = subprocess.run(["llvm-objdump-22", "-d", "--no-show-raw-insn", "-M", "intel",
                          str(binary)], capture_output=True, text=True, check=True).stdout
    addrs, mnems = [], []
    for line in out.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)", line)
        if m:
            addrs.append(int(m.group(1), 16))
            mnems.append(m.group(2))
    addrs_a = np.array(addrs, np.uint64)
    nz = np.flatnonzero(cfg.n_insn > 0)
    assert len(nz) > 50
    k = np.searchsorted(addrs_a, cfg.block_start[nz])
    assert (addrs_a[k] == cfg.block_start[nz]).all()
    assert (addrs_a[k + 1] - addrs_a[k] == cfg.first_size[nz]).all()
    for b, i in zip(nz.tolist(), k.tolist()):
        got = cfg.first_insn_text(b).partition(": ")[2].split(" ")[0]
        assert got == mnems[i], (hex(int(cfg.block_start[b])), got, mnems[i])


def test_every_sample_lands_in_one_place(case):
    """A synthetic histogram: samples on first, second and later instructions of every
    block, plus addresses outside any block; the buckets add up and each is where the
    model says."""
    _, _, cfg = case
    nz = np.flatnonzero(cfg.n_insn >= 3)
    start = cfg.block_start[nz]
    second = start + cfg.first_size[nz].astype(np.uint64)
    addr = np.concatenate([start, second, np.array([1, 2**40], np.uint64)])
    cnt = np.concatenate([np.full(len(nz), 3), np.full(len(nz), 5), [7, 11]]).astype(np.int64)
    order = np.random.default_rng(1).permutation(len(addr))
    w, known, skid = skid_weights(cfg, addr[order], cnt[order])
    assert skid.first == 3 * len(nz)
    assert skid.used + skid.refill + skid.no_unit == 5 * len(nz)
    cheap = np.array([_cheap(cfg.first_insn_text(b)) for b in nz.tolist()])
    assert skid.refill == 5 * int(cheap.sum())
    # the last instruction is no unit, nor a jcc followed by a trailing jmp
    units = cfg.n_insn[nz] - 1 - (cfg.trail_jump[nz] > 0)
    want = np.rint(WEIGHT_SCALE * np.where(cheap, 5 * REFILL_WEIGHT, 5) / units)
    assert (w[nz] == want).all()
    assert known[nz].all()
    w2, k2, s2 = skid_weights(cfg, addr, cnt)  # order does not matter
    assert (w2 == w).all() and (k2 == known).all() and s2 == skid
    assert (locate(cfg, np.array([1, 2**40], np.uint64)) == -1).all()


@pytest.mark.slow
@pytest.mark.parametrize("ip", IP_CASES)
def test_skid_model_against_exact_counts(ip, bench):
    """Real cpu-clock profiles of the LBR cases' runs: the skid model's block and edge
    errors against valgrind's exact counts are a fraction of the ``insn`` model's and
    within the bounds measured (spec/inference.md: 10.4-14.4% / 10.0-19.4%)."""
    from bbmap.binary import load_binary
    from bbmap.cfg import recover_cfg
    from bbmap.inference.counts import infer_counts

    binary = str(_binary(ip))
    cfg = recover_cfg(load_binary(binary))
    bt, et = bench.truth_of(json.loads((CORPUS / ip["exact_counts"]).read_text()), cfg)
    res, hist = bench.annotate_ip(str(CORPUS / ip["path"]), binary)
    assert int(hist[1].sum()) == int(res.block_samples.sum())

    def errors(inf) -> tuple[float, float]:
        return (bench.weighted_error(inf.block_count, bt),
                bench.weighted_error(bench.edges_dict(inf.edge_from, inf.edge_to,
                                                      inf.edge_count), et))

    skid = infer_counts(cfg, res.block_samples, ip=hist)
    insn = infer_counts(cfg, res.block_samples)
    assert skid.quality.sample_model == "time" and insn.quality.sample_model == "insn"
    s = skid.quality.skid
    assert s.used + s.first + s.refill + s.no_unit == int(res.block_samples.sum())
    got, base = errors(skid), errors(insn)
    assert got[0] < 0.5 * base[0] and got[1] < 0.5 * base[1], (got, base)
    assert got[0] < 0.18 and got[1] < 0.23, got
    # annotate's own inference takes the same path (it asks for the IP histogram)
    from bbmap.run import annotate

    full = annotate([str(CORPUS / ip["path"])], binary)
    assert full.count_source == "inferred" and full.inference["sample_model"] == "time"
    assert full.inference["skid"] == s.to_json()
    assert (full.block_count == skid.block_count).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 5)), max_size=25),
       st.lists(st.integers(0, 80), max_size=30), st.booleans())
def test_locate_and_unique_starts_sorted_or_not(blocks, addrs, ascending) -> None:  # noqa: ANN001
    """``locate`` and ``unique_starts`` skip their sort when the block starts ascend (map
    order is usually address order): the same answers as a plain search and set."""
    from types import SimpleNamespace

    from bbmap.inference.weights import locate, unique_starts

    if ascending:
        blocks = sorted(blocks)
    start = np.array([a for a, _ in blocks], np.uint64)
    size = np.array([n for _, n in blocks], np.uint32)
    cfg = SimpleNamespace(block_start=start, block_map=SimpleNamespace(block_size=size))
    got = locate(cfg, np.array(addrs, np.uint64))
    nz = [i for i, (_, n) in enumerate(blocks) if n > 0]
    for a, b in zip(addrs, got.tolist()):
        inside = [i for i in nz if blocks[i][0] <= a < blocks[i][0] + blocks[i][1]]
        # the block of the last start at or below a (the first of equal starts in map order
        # sorts first, so the last of them is found), if a is inside it
        below = sorted((blocks[i][0], i) for i in nz if blocks[i][0] <= a)
        want = below[-1][1] if below and below[-1][1] in inside else -1
        assert b == want
    starts = [blocks[i][0] for i in nz]
    assert unique_starts(cfg) == (len(set(starts)) == len(starts))
