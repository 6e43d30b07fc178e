"""The fast decoder equals the construct reference on every real map we have, batched
section decoding equals section-by-section decoding, and a fault in one section of an
object leaves the other sections decoded."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from unittest.mock import patch

import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import all_corpus_binaries, encode_section, map_function, map_input, map_section
from hypothesis import HealthCheck, given, settings

from bbmap.binary import load_binary, uleb_tokens
from bbmap.binary.decode_fast import decode_section_fast
from bbmap.binary.decode_ref import decode_section_ref
from bbmap.model import BlockMap


def _fast_equals_reference(inp, *patches):
    """Decode ``inp`` with the construct reference and with the fast decoder (under
    ``patches``: ``(object, attribute, value)`` each) and assert the same map and the
    same diagnostics; the fast decoder's map and diagnostics, for further checks."""
    r, rd = decode_section_ref(inp)
    with contextlib.ExitStack() as stack:
        for obj, attr, value in patches:
            stack.enter_context(patch.object(obj, attr, value))
        f, fd = decode_section_fast(inp)
    assert r.differences(f) == []
    assert [str(d) for d in rd] == [str(d) for d in fd]
    return f, fd

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


@pytest.mark.parametrize("path", all_corpus_binaries())
def test_fast_equals_reference_on_real_maps(path):
    if not path.exists():
        pytest.skip("not built")
    b = load_binary(path)
    for sec in b.map_sections():
        inp = b.map_input(sec)
        _fast_equals_reference(inp)


@pytest.mark.parametrize("path", all_corpus_binaries())
def test_batched_sections_equal_one_by_one(path):
    if not path.exists():
        pytest.skip("not built")
    b = load_binary(path)
    secs = b.map_sections()  # one section: block_map must equal that section's decode
    maps = [m for m in (b.decode_section(s) for s in secs) if m is not None and m.num_functions]
    one_by_one = BlockMap.concat(maps)
    if not b.is_relocatable:
        b._fill_range_sections(one_by_one)  # linked images: text sections from headers
    batched = load_binary(path).block_map
    if not maps:
        return
    assert batched.differences(one_by_one) == []
    assert len(batched.sources) == len(maps)


def test_fault_in_one_section_keeps_the_others(tmp_path):
    src = CORPUS / "handmade" / "crel.o"
    if not src.exists():
        pytest.skip("not built")
    p = tmp_path / "crel.o"
    shutil.copy(src, p)
    b = load_binary(p)
    first = b.map_sections()[0]
    data = bytearray(p.read_bytes())
    data[first.sh_offset] = 9  # version byte of the first function of the first map
    p.write_bytes(bytes(data))
    b = load_binary(p)
    m = b.block_map
    errors = [d for d in b.diagnostics if d.severity == "error"]
    assert len(errors) == 1 and errors[0].offset == 0
    assert errors[0].section == f"section [{first.index}] .llvm_bb_addr_map"
    assert errors[0].message == "unsupported SHT_LLVM_BB_ADDR_MAP version: 9"
    assert m.func_name == ["crel_loop"]
    assert np.all(m.range_section != first.sh_link) and m.num_blocks == 9


def _v5(feature: int, body: bytes) -> bytes:
    return bytes([5, feature & 0xFF, feature >> 8]) + bytes(8) + body


GOOD = _v5(0, b"\x01\x00\x00\x04\x01")


@pytest.mark.parametrize("bad, message", [
    (_v5(0x20, b"\x01\x00\x00\x02\xff\xff\xff\xff\x0f\x05\x01\x00"),
     "callsite offset 0x100000004 exceeds UINT32_MAX"),
    (_v5(0, b"\x01\x00\x00\x04\x80\x02"), "invalid encoding for BBEntry::Metadata: 0x100"),
    (_v5(0x40, b"\x01\x00\x00\x04\x01\x00\x00"), "needs at least 12 bytes but only 6"),
    (_v5(0x100, b""), "invalid encoding for BBAddrMap::Features: 0x100"),
    (_v5(0x04, b"\x01\x00\x00\x04\x01\xff\xff\xff\xff\x7f"), "count"),
])
def test_fast_and_reference_agree_on_crafted_faults(bad, message):
    from bbmap.binary.mapinput import KIND_VERSIONED, MapInput

    tail = b"" if "only 6" in message else GOOD  # a hash cut short must end the map
    inp = MapInput(data=GOOD + bad + tail, kind=KIND_VERSIONED, file="x.o",
                   label="section [3] .llvm_bb_addr_map")
    f, fd = _fast_equals_reference(inp)
    assert f.num_functions == 1
    (err,) = [d for d in fd if d.severity == "error"]
    assert message in err.message and err.offset >= len(GOOD)


# The fast decoder finds terminators and multi-byte tokens a slice of the section at a
# time, and keeps runs of common records as columns merged with the general walk's
# lists: tiny slices put slice boundaries inside tokens and records, and long
# generated sections mix both walks.
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(map_section(), st.integers(1, 9))
def test_fast_equals_reference_with_tiny_slices(sec, slice_bytes):
    kind, fns = sec
    inp = map_input(kind, encode_section(kind, fns))
    _fast_equals_reference(inp, (uleb_tokens, "SLICE", slice_bytes))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(st.lists(st.integers(2, 5), min_size=20, max_size=60), st.data())
def test_fast_equals_reference_on_long_mixed_sections(versions, data):
    fns = [data.draw(map_function(v)) for v in versions]
    inp = map_input("versioned", encode_section("versioned", fns))
    _fast_equals_reference(inp)


@pytest.mark.parametrize("path", all_corpus_binaries())
def test_label_decoder_has_the_decoders_shape(path):
    """LLVM 11 label symbols decode like a map section: a MapInput in, (BlockMap,
    diagnostics) out, the same functions the binary's block map holds from labels."""
    from bbmap.binary.labels import decode_labels
    from bbmap.model import VERSION_LABEL_SYMBOLS

    if not path.exists():
        pytest.skip("not built")
    b = load_binary(path)
    m, diags = decode_labels(b.label_input())
    assert isinstance(m, BlockMap) and isinstance(diags, list)
    whole = b.block_map
    mine = np.flatnonzero(whole.func_version == VERSION_LABEL_SYMBOLS)
    assert m.num_functions == len(mine)
    assert [whole.func_name[f] for f in mine] == m.func_name
    assert np.array_equal(whole.func_address[mine], m.func_address)


# Runs of common records are taken from *candidates* (every byte that could start one,
# walked at once; ``_Walker._candidates``).  Block fields drawn from a tiny alphabet make
# the bytes of a v5 header (05, 00|20, 00) turn up inside records often: junk candidates
# whose walks must not change what is decoded, whatever they overlap.
_JUNK_VALUES = st.sampled_from([0, 0, 1, 2, 5, 5, 0x20, 0x20, 3])


@st.composite
def _junky_function(draw):
    from bbmap.model import BlockRecord, FunctionRecord, RangeRecord

    version = draw(st.sampled_from([5, 5, 5, 4, 2]))
    feature = draw(st.sampled_from([0, 0x20, 0x20] if version >= 3 else [0]))
    blocks, end = [], 0
    for _ in range(draw(st.integers(0, 7))):
        off = end + draw(_JUNK_VALUES)
        cs = tuple(sorted(draw(st.lists(_JUNK_VALUES, max_size=3)))) if feature else ()
        size = draw(_JUNK_VALUES) + (cs[-1] if cs else 0)
        blocks.append(BlockRecord(id=draw(_JUNK_VALUES), offset=off, size=size,
                                  md=draw(st.sampled_from([0, 1, 5, 8])), callsites=cs))
        end = off + size
    base = draw(st.sampled_from([0, 5, 0x2005, 0x7F000005, 2**40 + 5]))
    return FunctionRecord(address=base, version=version, feature=feature,
                          ranges=[RangeRecord(base=base, blocks=blocks)])


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(st.lists(_junky_function(), min_size=1, max_size=40), st.data())
def test_fast_equals_reference_with_junk_candidates(fns, data):
    raw = bytearray(encode_section("versioned", fns))
    if data.draw(st.booleans()) and raw:  # and with one byte damaged
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 5, 0x20, 0x80, 0xFF]))
    inp = map_input("versioned", bytes(raw))
    _fast_equals_reference(inp)


@pytest.mark.slow
def test_junk_candidate_inside_a_record_is_walked_around():
    """A callsite record whose blocks spell a v5 header: the candidate there is junk,
    the record holding it is walked one by one, the records after it in a run again."""
    from bbmap.binary.decode_fast import _Walker
    from bbmap.model import BlockRecord, FunctionRecord, RangeRecord

    def fn(base, ids):
        return FunctionRecord(address=base, version=5, feature=0x20, ranges=[RangeRecord(
            base=base, blocks=[BlockRecord(id=i, offset=0x20 * j, size=0x20, md=0)
                               for j, i in enumerate(ids)])])

    fns = [fn(0x1000, [0, 1]), fn(0x2000, [0, 5, 2, 3, 4]), fn(0x3000, [0, 1]),
           fn(0x4000, [0]), fn(0x5000, [0, 1, 2])]
    data = encode_section("versioned", fns)
    # block id 5, offset delta 0x20 (its previous block's size is 0x20: delta 0), no callsites
    assert b"\x05\x00\x00" in data[16:]
    inp = map_input("versioned", data)
    w = _Walker(inp)
    cands = w._candidates(5)
    assert len(cands.pos) > len(fns)  # the junk one(s) too
    assert w.run_simple(0, True) == len(data)
    assert sum(len(s.pos) for s in w.simple) == len(fns)
    f, _ = _fast_equals_reference(inp)
    assert f.num_functions == len(fns)
    # many records spoiled by false candidates, clean ones between: the one-by-one walk
    # takes growing bursts of records, the vectorized runs resume after them
    many = [fn(0x1000 + 0x100 * k, [0, 5, 2, 3, 4] if k % 97 else [0, 1]) for k in range(700)]
    inp = map_input("versioned", encode_section("versioned", many))
    f, _ = _fast_equals_reference(inp)
    assert f.num_functions == len(many)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_junky_function(), min_size=1, max_size=40), st.sampled_from([0, 1, 3]),
       st.data())
@pytest.mark.slow
def test_recorded_chain_starts_equal_reference(fns, py_chains, data):
    """The candidate walk records every callsite chain's block starts for the column
    gathering (``_hop_chains``); chains hopped by numpy and by the Python tail
    (``_PY_CHAINS`` chains left), junk candidates among them, give the reference's map."""
    import bbmap.binary.decode_fast as fast

    raw = bytearray(encode_section("versioned", fns))
    if data.draw(st.booleans()) and raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 5, 0x20, 0x80, 0xFF]))
    inp = map_input("versioned", bytes(raw))
    _fast_equals_reference(inp, (fast, "_PY_CHAINS", py_chains))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@pytest.mark.slow
@given(st.lists(_junky_function(), min_size=1, max_size=40), st.booleans(), st.data())
def test_narrow_and_wide_token_indices_equal_reference(fns, narrow, data):
    """``assemble`` keeps the block fields' token indices int32 below
    ``NARROW_INDEX_MAX`` and falls back to int64 above it (huge counts in bad input):
    both give the reference's map, on damaged sections too."""
    import bbmap.binary.decode_assemble as asm

    raw = bytearray(encode_section("versioned", fns))
    if data.draw(st.booleans()) and raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 5, 0x20, 0x80, 0xFF]))
    inp = map_input("versioned", bytes(raw))
    _fast_equals_reference(inp, (asm, "NARROW_INDEX_MAX", asm.NARROW_INDEX_MAX if narrow else 0))


def _uleb_tokens_by_hand(raw: bytes):
    """Byte-by-byte reference for ``uleb_tokens``: each terminator (byte < 0x80) ends a
    token whose value is its 7-bit groups, low first; continuation bytes listed."""
    term, vals, cont, lens = [], [], [], []
    val = shift = n = 0
    for p, x in enumerate(raw):
        val |= (x & 0x7F) << shift
        shift += 7
        n += 1
        if x < 0x80:
            term.append(p)
            vals.append(val)
            lens.append(n)
            val = shift = n = 0
        else:
            cont.append(p)
    return term, vals, cont, lens


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 0x7F), st.integers(0x80, 0xFF)), max_size=300),
       st.sampled_from([1, 2, 3, 7, 64, 1 << 14]))
@pytest.mark.slow
def test_uleb_tokens_equal_byte_by_byte(raw, slice_bytes):
    """Terminators, values and continuation bytes found a slice at a time (any slice
    size, slice boundaries inside tokens) equal a byte-by-byte decode."""
    b = np.frombuffer(bytes(raw), np.uint8)
    term, vals, cont, lens = _uleb_tokens_by_hand(bytes(raw))
    with patch.object(uleb_tokens, "SLICE", slice_bytes):
        t, v, bad, c = uleb_tokens.uleb_tokens(b)
    assert t.tolist() == term
    assert c.tolist() == cont
    ok = [n <= 4 for n in lens]  # (longer tokens: values checked by the map tests)
    assert [x for x, k in zip(v.tolist(), ok) if k] == [x for x, k in zip(vals, ok) if k]
