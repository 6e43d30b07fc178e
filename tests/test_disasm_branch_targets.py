"""Direct branch targets read from capstone's operand text all rows at once
(``disasm.hex_operands``) against the per-row rule they replace (``min(int(text, 16),
2**63 - 1)`` for ``0x``-text, anything else left to that rule), and the fast decoder's
targets against the reference decoder on real code."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bbmap.binary.disasm import _TARGET_MAX, Disassembler, hex_operands

PLAIN = re.compile(rb"0x[0-9a-fA-F]{1,16}")


def _rows(texts: list[bytes], width: int) -> np.ndarray:
    out = np.zeros((len(texts), width), np.uint8)
    for i, t in enumerate(texts):
        raw = np.frombuffer(t[:width], np.uint8)
        out[i, :len(raw)] = raw
    return out


texts = st.one_of(
    st.integers(0, (1 << 64) - 1).map(lambda v: b"%#x" % v),
    st.binary(max_size=24).map(lambda b: b.replace(b"\0", b"")),
    st.text("0123456789abcdefxX[]:, rqwordptr", max_size=22).map(str.encode),
    st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)).map(lambda p: b"%#x:%#x" % p),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=40), st.sampled_from([19, 24, 160]))
def test_hex_operands_equal_the_per_row_rule(batch, width):
    value, plain = hex_operands(_rows(batch, width))
    for text, v, p in zip(batch, value.tolist(), plain.tolist()):
        strict = PLAIN.fullmatch(text) is not None
        assert p == strict, text
        if p:
            assert v == min(int(text, 16), _TARGET_MAX), text


def test_hex_operands_of_nothing():
    value, plain = hex_operands(np.zeros((0, 160), np.uint8))
    assert len(value) == len(plain) == 0


def test_fast_decoder_targets_equal_the_reference_on_real_code(corpus_dir):
    """Every instruction of a real binary's .text (Go's gc: ~1 MB of code with every
    branch form, near and short): kinds and targets of the fast (ctypes, vectorized
    targets) and the reference (disasm_lite + classify) decoders."""
    from elftools.elf.elffile import ELFFile

    path = corpus_dir / "bin" / "go" / "plain" / "gohot"
    with open(path, "rb") as f:
        text = ELFFile(f).get_section_by_name(".text")
        code, base = text.data(), text["sh_addr"]
    fast, ref = Disassembler("EM_X86_64"), Disassembler("EM_X86_64")
    fast._fast, ref._fast = True, False
    a, b = fast.decode(code, base), ref.decode(code, base)
    assert len(a.addr) == len(b.addr) > 100_000
    assert np.array_equal(a.kinds, b.kinds)
    assert np.array_equal(a.target, b.target)
    assert (a.target >= 0).sum() > 10_000  # direct branches were there to read
