"""The skid model's "cheap register operation" test, decided while the CFG is decoded.

``bbmap.binary.disasm.is_cheap`` is the rule on an instruction's text (issue 12's
``_cheap``); ``cheap_columns`` is its vectorized form over capstone's ``cs_insn`` strings,
which the sweep evaluates at every block start (``CFG.first_cheap``) instead of decoding
each first instruction again (issue 17: that was 0.2 s of a 500k-sample annotate).
Proven equal with hypothesis on made-up strings (with garbage after the NUL, prefix
words, long operands) and on the real first instruction of every block of every corpus
binary against the text rule on ``describe``'s text.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import all_corpus_binaries
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary.disasm import (
    CHEAP_UNKNOWN,
    CHEAP_YES,
    MEMORY_OK,
    SLOW_PREFIXES,
    STACK_WORDS,
    cheap_columns,
    is_cheap,
)

WORDS = [*SLOW_PREFIXES, *STACK_WORDS, *MEMORY_OK, "mov", "movsxd", "add", "xor", "cmp",
         "test", "leave", "lead", "popcnt", "pushf", "nopw", "rep stosq", "lock add",
         "notrack jmp", "vpbroadcastq", "imul", "cmovne", "shl", "sqrtsd", "mulx"]
OPS = st.text(alphabet="abcdqwr0123x[]+-*, :ptr", max_size=200)


def _rows(items: list[tuple[str, str, bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """capstone-like NUL-terminated fields, with junk after the NUL."""
    mn = np.zeros((len(items), 32), np.uint8)
    op = np.zeros((len(items), 200), np.uint8)
    for i, (m, o, junk) in enumerate(items):
        mb = m.encode()[:31] + b"\0" + junk
        ob = o.encode()[:199] + b"\0" + junk
        mn[i, :min(len(mb), 32)] = np.frombuffer(mb[:32], np.uint8)
        op[i, :min(len(ob), 200)] = np.frombuffer(ob[:200], np.uint8)
    return mn, op


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.sampled_from(WORDS), st.text(
    alphabet="abcdeilmnopqrstuvx ", max_size=12)), OPS, st.binary(max_size=40)),
    min_size=1, max_size=30), st.sampled_from([8, 16, 64, 200]))
@pytest.mark.slow
def test_columns_equal_the_text_rule(items, width):
    mn, op = _rows(items)
    got = cheap_columns(mn[:, :8], op[:, :width])
    for i, (m, o, _junk) in enumerate(items):
        m, o = m.encode()[:31].decode(), o.encode()[:199].decode()
        want = is_cheap(f"0x1: {m} {o}".rstrip())
        if got[i] == CHEAP_UNKNOWN:  # only when the operands go past the window
            assert width < 200 and len(o.encode()) >= width and "[" not in o[:width]
            assert cheap_columns(mn[i:i + 1, :8], op[i:i + 1])[0] == want
        else:
            assert bool(got[i] == CHEAP_YES) == want, (m, o)


BINARIES = all_corpus_binaries()


@pytest.mark.skipif(not BINARIES, reason="corpus not built")
@pytest.mark.parametrize("binary", BINARIES)
def test_every_block_first_instruction_of_the_corpus(binary):
    from bbmap.binary import load_binary
    from bbmap.cfg import recover_cfg
    from bbmap.errors import BBMapError

    b = load_binary(binary)
    try:
        cfg = recover_cfg(b)
    except BBMapError as e:
        pytest.skip(str(e))
    rows = np.flatnonzero(cfg.n_insn > 0)
    decided = rows[cfg.first_cheap[rows] != CHEAP_UNKNOWN]
    # an instruction starts at every decoded block's start on real compiler output
    assert len(decided) == len(rows)
    for blk in decided.tolist():
        assert (cfg.first_cheap[blk] == CHEAP_YES) == is_cheap(cfg.first_insn_text(blk)), \
            cfg.first_insn_text(blk)
