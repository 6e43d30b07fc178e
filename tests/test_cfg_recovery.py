"""CFG recovery (bbmap/cfg.py) against the compiler's own CFG and llvm-objdump-22.

Oracles: the PGO analysis map's successor lists (clang writes ``MBB.successors()`` for
every block when ``-pgo-analysis-map=br-prob`` is on), and llvm-objdump-22's branch
targets for the last instruction of every block.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from helpers import CORPUS, load_manifest
from oracles.cfg_pgo_map import compare_with_pgo_map

from bbmap.binary import load_binary
from bbmap.cfg import (
    S_GUESS,
    T_COND,
    T_JUMP,
    T_RETURN,
    T_TABLE,
    recover_cfg,
)
from bbmap.formats.bbaddrmap import FEAT_BR_PROB


def _linked(pred=lambda b: True) -> list:
    return [pytest.param(CORPUS / b["path"], id=b["name"])
            for b in load_manifest().get("binaries", [])
            if b["kind"] not in ("obj", "debug") and pred(b)]


PGO_BINARIES = _linked(lambda b: "pgomap" in b["name"] or "allpgo" in b["name"])
LAYOUT_BINARIES = _linked(lambda b: b.get("sources") == ["src/layout.c"]
                          and b["kind"] != "stripped" and "skipbb" not in b["name"])


@pytest.mark.parametrize("path", PGO_BINARIES)
def test_successors_equal_the_pgo_map(path):
    b = load_binary(path)
    m = b.block_map
    if not (m.func_feature & FEAT_BR_PROB).any():
        pytest.skip("no successor lists in this map")
    rep = compare_with_pgo_map(recover_cfg(b))
    assert rep.mismatches == []
    assert rep.compared >= 90 and rep.equal == rep.compared
    # the dense switch of lay_opcode: its jump table reaches exactly the map's successors
    assert [(f, ok) for f, _, ok in rep.tables] == [("lay_opcode", True)]
    # lay_interp's computed gotos: the candidates (blocks nothing else reaches) are the
    # compiler's successor lists too
    assert rep.guesses and all(ok for f, _, ok in rep.guesses)
    assert {f for f, _, _ in rep.guesses} == {"lay_interp"}


@pytest.mark.parametrize("path", LAYOUT_BINARIES)
def test_jump_table_of_the_dense_switch(path):
    b = load_binary(path)
    m = b.block_map
    cfg = recover_cfg(b)
    f = m.func_name.index("lay_opcode")
    tables = [t for t in cfg.jump_tables if cfg.block_func[t.block] == f]
    assert len(tables) == 1
    t = tables[0]
    assert t.entries == 12  # switch (x & 15) with cases 0..11 (9 falls to default)
    assert t.relative == (b.e_type == "ET_DYN")
    blocks = set(m.function_blocks(f))
    assert set(t.targets) <= blocks
    # every case body and the default are distinct blocks: 11 case bodies + default,
    # minus the ones clang merged (case 9 shares the default)
    assert 8 <= len(set(t.targets)) <= 12
    assert cfg.term[t.block] == T_TABLE
    assert not cfg.unknown_succ[t.block]


def _objdump_targets(path) -> dict[int, tuple[str, int | None]]:
    out = subprocess.run(["llvm-objdump-22", "-d", "--no-show-raw-insn", str(path)],
                         capture_output=True, text=True, check=True).stdout
    insn = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)(?:\s+(\S+))?")
    res: dict[int, tuple[str, int | None]] = {}
    for line in out.splitlines():
        mt = insn.match(line)
        if mt:
            op = mt.group(3)
            tgt = int(op, 16) if op and re.fullmatch(r"0x[0-9a-f]+", op) else None
            res[int(mt.group(1), 16)] = (mt.group(2), tgt)
    return res


@pytest.mark.skipif(shutil.which("llvm-objdump-22") is None, reason="llvm-objdump-22 absent")
@pytest.mark.parametrize("path", _linked(lambda b: b["name"] in (
    "c22-addrmap-pie", "c22-addrmap-nopie", "c22-list-pie", "c19-addrmap-pie",
    "c22-eh-pie", "c14-labels-pie", "c22-kern-so", "c22-mfs-pie")))
def test_branch_targets_match_llvm_objdump(path):
    """Every conditional/direct jump ending a block: objdump's target is the start of
    the successor block we chose; every return is a ret in objdump."""
    b = load_binary(path)
    cfg = recover_cfg(b)
    od = _objdump_targets(path)
    m = b.block_map
    checked = 0
    for blk in range(m.num_blocks):
        t = int(cfg.term[blk])
        if t not in (T_COND, T_JUMP, T_RETURN):
            continue
        # the last instruction: the highest objdump address inside the block
        lo, hi = int(cfg.block_start[blk]), int(cfg.block_start[blk] + m.block_size[blk])
        addrs = [a for a in range(lo, hi) if a in od]
        mnem, tgt = od[addrs[-1]]
        if t == T_RETURN:
            assert mnem.startswith("ret"), hex(addrs[-1])
        else:
            assert mnem.startswith("j") and tgt is not None, (hex(addrs[-1]), mnem)
            succ_starts = {int(cfg.block_start[s]) for s in cfg.successors(blk)}
            assert tgt in succ_starts, (hex(addrs[-1]), hex(tgt))
        checked += 1
    assert checked > (15 if "kern" in str(path) else 40)


@pytest.mark.parametrize("path", _linked(lambda b: b.get("sources") == ["src/layout.c"]
                                          and b["kind"] in ("pie", "nopie")
                                          and "skipbb" not in b["name"]))
def test_calls_and_tail_calls(path):
    """Shared libraries are left out: their calls to exported functions go through the
    PLT, whose stubs are not blocks of the map (call_func -1)."""
    b = load_binary(path)
    m = b.block_map
    cfg = recover_cfg(b)
    name = {i: n for i, n in enumerate(m.func_name)}
    callers = {(name[int(cfg.block_func[cb])], name.get(int(cf)))
               for cb, cf in zip(cfg.call_block.tolist(), cfg.call_func.tolist())}
    assert ("lay_round", "lay_scan") in callers
    assert ("lay_round", "lay_insertion") in callers
    assert ("main", "lay_round") in callers
    # lay_apply calls through a table: an indirect call, callee unknown
    ind = [cb for cb, ct in zip(cfg.call_block.tolist(), cfg.call_target.tolist())
           if ct < 0 and name[int(cfg.block_func[cb])] == "lay_apply"]
    assert ind
    tails = {(name[int(cfg.block_func[tb])], name.get(int(tf)))
             for tb, tf in zip(cfg.tail_block.tolist(), cfg.tail_func.tolist())}
    # mutual tail calls (jmp, not call) and the tail call through a pointer
    assert ("lay_even", "lay_odd") in tails and ("lay_odd", "lay_even") in tails
    assert ("lay_dispatch", None) in tails


@pytest.mark.parametrize("path", LAYOUT_BINARIES)
def test_structure(path):
    """Successors stay inside the function; one edge per (block, successor); guessed
    edges only leave unknown indirect jumps; instruction counts fill every decoded block."""
    b = load_binary(path)
    cfg = recover_cfg(b)
    src, dst, kind = cfg.edges()
    assert (cfg.block_func[src] == cfg.block_func[dst]).all()
    pairs = src * cfg.num_blocks + dst
    assert len(np.unique(pairs)) == len(pairs)
    assert cfg.unknown_succ[src[kind == S_GUESS]].all()
    m = b.block_map
    assert ((cfg.n_insn > 0) == (m.block_size > 0)).all()
