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


# ---------------------------------------------------------------- the byte reader's rules
# hand-assembled blocks (addresses = file offsets): what the reader decides itself, and
# what it must leave to the reference
CMP_R9_13 = bytes.fromhex("4183f90d")  # cmp r9d, 13
JA = bytes.fromhex("7710")  # ja +0x10
JAE = bytes.fromhex("7310")  # jae +0x10
LEA_RSI = bytes.fromhex("488d3500010000")  # lea rsi, [rip + 0x100]
MOVSXD = bytes.fromhex("4e630c8e")  # movsxd r9, dword ptr [rsi + r9*4]
ADD = bytes.fromhex("4901f1")  # add r9, rsi
JMP_R9 = bytes.fromhex("41ffe1")  # jmp r9


def _shapes(prev: list[bytes], block: list[bytes], prev_jcc: bool = True,
            gap: bool = False) -> tuple[int, int, int, int, bool]:
    """(status, table, entry size, count, relative) of ``block`` after ``prev``."""
    insns = prev + block
    starts, at = [], 0
    for k, b in enumerate(insns):
        if gap and k == len(prev) + 1:
            at += 1  # a byte no row covers
        starts.append(at)
        at += len(b)
    image = np.zeros(at + 64, np.uint8)
    for s, b in zip(starts, insns):
        image[s:s + len(b)] = np.frombuffer(b, np.uint8)
    row_start = np.array(starts, np.uint64)
    row_size = np.array([len(b) for b in insns], np.uint8)
    one = lambda v: np.array([v], np.int64)  # noqa: E731
    pstart, bstart = 0, starts[len(prev)]
    sh = jt.decode_shapes(image, row_start, row_size, one(len(prev)), one(len(block)),
                          one(bstart), one(at), one(0), np.array([prev_jcc]), one(0),
                          one(len(prev)), one(pstart), one(bstart), one(0))
    return (int(sh.status[0]), int(sh.table[0]), int(sh.entry_size[0]), int(sh.count[0]),
            bool(sh.relative[0]))


def test_byte_reader_decides_clangs_shapes():
    guard = [CMP_R9_13, JA]
    st, table, size, count, rel = _shapes(guard, [LEA_RSI, MOVSXD, ADD, JMP_R9])
    assert (st, size, count, rel) == (jt.FOUND, 4, 14, True)
    assert table == len(CMP_R9_13 + JA) + len(LEA_RSI) + 0x100  # rip-relative
    assert _shapes([CMP_R9_13, JAE], [LEA_RSI, MOVSXD, ADD, JMP_R9])[3] == 13
    # a register move that leaves the index alone is passed over
    mov_eax_edi = bytes.fromhex("89f8")
    assert _shapes(guard, [mov_eax_edi, LEA_RSI, MOVSXD, ADD, JMP_R9])[0] == jt.FOUND
    # a mask bounds the table without a guard
    and_r9_7 = bytes.fromhex("4183e107")
    st, _, _, count, _ = _shapes([], [and_r9_7, LEA_RSI, MOVSXD, ADD, JMP_R9], prev_jcc=False)
    assert (st, count) == (jt.FOUND, 8)
    # absolute table of a non-PIE: jmp [T + rax*8]
    st, table, size, _, rel = _shapes([bytes.fromhex("4883f809"), JA],
                                      [bytes.fromhex("ff24c500104000")])
    assert (st, table, size, rel) == (jt.FOUND, 0x401000, 8, False)


def test_byte_reader_says_no_table_or_no_bound_as_the_reference_would():
    # the base is loaded outside the block (a loop's hoisted lea): no table
    assert _shapes([CMP_R9_13, JA], [MOVSXD, ADD, JMP_R9])[0] == jt.NO_TABLE
    # jmp [rip + x]: no index, no table
    assert _shapes([], [bytes.fromhex("ff2500100000")])[0] == jt.NO_TABLE
    # nothing falls into the block with a conditional jump: no bound (a note)
    assert _shapes([CMP_R9_13, JA], [LEA_RSI, MOVSXD, ADD, JMP_R9],
                   prev_jcc=False)[0] == jt.NO_BOUND


@pytest.mark.parametrize("prev,block,gap", [
    # a prefixed lea (operand size): capstone's reading of it is the reference's
    ([CMP_R9_13, JA], [bytes.fromhex("66") + LEA_RSI, MOVSXD, ADD, JMP_R9], False),
    # a REX byte before a prefix: the reader does not guess what capstone makes of it
    ([CMP_R9_13, JA], [bytes.fromhex("4866") + LEA_RSI[1:], MOVSXD, ADD, JMP_R9], False),
    # the guard compares another register
    ([bytes.fromhex("4183f80d"), JA], [LEA_RSI, MOVSXD, ADD, JMP_R9], False),
    # the index is renamed before the load (mov r9d, edi)
    ([CMP_R9_13, JA], [bytes.fromhex("4189f9"), LEA_RSI, MOVSXD, ADD, JMP_R9], False),
    # a conditional jump other than ja/jae ends the block before
    ([CMP_R9_13, bytes.fromhex("7510")], [LEA_RSI, MOVSXD, ADD, JMP_R9], False),
    # a 32-bit add (no REX.W)
    ([CMP_R9_13, JA], [LEA_RSI, MOVSXD, bytes.fromhex("4101f1"), JMP_R9], False),
    # the rows do not cover the block back to back
    ([CMP_R9_13, JA], [LEA_RSI, MOVSXD, ADD, JMP_R9], True),
    # jmp [rbx + rax*8]: a based table
    ([], [bytes.fromhex("ff24c3")], False),
])
def test_byte_reader_leaves_other_shapes_to_the_reference(prev, block, gap):
    assert _shapes(prev, block, gap=gap)[0] == jt.FALLBACK
