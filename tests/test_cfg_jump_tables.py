"""Jump tables read from the instruction bytes (bbmap/binary/jumptables.py) against the
capstone-detail reader (``cfg._TableReader.read``), the CFG's reference.

The fast reader decides the shapes clang emits for all blocks at once and hands every
other block to the reference; the CFG must be the reference's, block for block, table for
table and note for note.  Oracles: every corpus binary, and switch-heavy programs made by
bench/switch_program.py, compiled here with clang-22 in the ways that change the shapes
(PIE tables of int32 offsets, absolute tables of a non-PIE, loops that hoist the table's
base, -O1/-O2/-Os).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import CORPUS, all_corpus_binaries

from bbmap import cfg as cfgmod
from bbmap.binary import jumptables as jt
from bbmap.binary import load_binary
from bbmap.errors import BBMapError

CLANG = shutil.which("clang-22")
FIELDS = ("term", "n_insn", "succ_ptr", "succ_block", "succ_kind", "unknown_succ",
          "call_block", "call_func", "tail_block", "tail_func")


def _reference_shapes(*args):  # noqa: ANN002, ANN202 - decode_shapes' signature
    """Every block left to the reference reader."""
    n = len(args[3])
    z = np.zeros(n, np.int64)
    return jt.JumpShapes(np.full(n, jt.FALLBACK, np.uint8), z.astype(np.uint64),
                         z.astype(np.uint64), z, z.astype(bool), z - 1)


def _both(path, monkeypatch):  # noqa: ANN001, ANN202
    """(fast CFG, reference CFG, the fast reader's status per candidate block)."""
    b = load_binary(path)
    seen = []
    real = jt.decode_shapes

    def spy(*args):  # noqa: ANN002, ANN202
        out = real(*args)
        seen.append(out.status.copy())
        return out

    monkeypatch.setattr(jt, "decode_shapes", spy)
    fast = cfgmod.recover_cfg(b)
    monkeypatch.setattr(jt, "decode_shapes", _reference_shapes)
    ref = cfgmod.recover_cfg(b)
    return fast, ref, (seen[0] if seen else np.zeros(0, np.uint8))


def _assert_same(fast, ref) -> None:  # noqa: ANN001
    for f in FIELDS:
        assert np.array_equal(getattr(fast, f), getattr(ref, f)), f
    assert [t.__dict__ for t in fast.jump_tables] == [t.__dict__ for t in ref.jump_tables]
    assert fast.notes == ref.notes


@pytest.mark.parametrize("path", all_corpus_binaries())
def test_fast_tables_equal_the_reference_on_the_corpus(path, monkeypatch):
    try:
        b = load_binary(path)
        if b.block_map is None or b.block_map.num_blocks == 0:
            pytest.skip("no block map")
    except BBMapError as e:
        pytest.skip(f"not a binary with a block map: {e}")
    fast, ref, status = _both(path, monkeypatch)
    _assert_same(fast, ref)
    if ref.jump_tables and "x86" in str(b.machine).lower() and b.elfclass == 64:
        # layout.c's dense switch is clang's plain shape: read from the bytes
        assert (status == jt.FOUND).sum() >= 1


def _switch_program(tmp_path_factory, name: str, opt: str, pic: str, link: str):  # noqa: ANN202
    if CLANG is None:
        pytest.skip("clang-22 absent")
    sys.path.insert(0, str(CORPUS.parent / "bench"))
    import switch_program

    d = tmp_path_factory.mktemp(name)
    srcs = switch_program.write_program(str(d), 48, files=1)
    exe = d / "sw"
    subprocess.run([CLANG, opt, pic, "-fbasic-block-address-map", *srcs, link, "-o", str(exe)],
                   check=True)
    return exe


@pytest.mark.parametrize("opt,pic,link", [("-O2", "-fPIE", "-pie"), ("-O1", "-fPIE", "-pie"),
                                          ("-Os", "-fPIE", "-pie"),
                                          ("-O2", "-fno-pic", "-no-pie"),
                                          ("-O1", "-fno-pic", "-no-pie")])
def test_fast_tables_equal_the_reference_on_switch_programs(tmp_path_factory, monkeypatch,
                                                             opt, pic, link):
    exe = _switch_program(tmp_path_factory, f"sw{opt}{pic}", opt, pic, link)
    fast, ref, status = _both(exe, monkeypatch)
    _assert_same(fast, ref)
    # 48 functions, most with one or two switches: dozens of indirect jumps, nearly all
    # decided from the bytes (the reference reads at most a few odd ones)
    assert len(status) >= 40
    assert (status == jt.FALLBACK).sum() <= len(status) // 10
    if pic == "-fno-pic":  # absolute tables: every one decodes
        assert len(ref.jump_tables) == len(status)
    elif opt == "-O2":  # the straight-line functions' tables (base loaded beside them)
        assert len(ref.jump_tables) >= 5
    for t in ref.jump_tables:
        assert 4 <= t.entries <= 128 and set(t.targets) <= set(
            ref.function_blocks(int(ref.block_func[t.block])))
