# ruff: noqa: UP031, E501 - a verbatim copy of the previous renderer (%-formatting)
"""`bbmap dump --json`: the byte-level fast path equals the renderer it replaced.

``reference_iter_json`` below is the previous implementation of
:func:`bbmap.dump.iter_json` (string fragments joined per chunk, then encoded), kept
verbatim as the oracle.  The new renderer must produce the same bytes on every corpus
binary and on generated maps of every version and feature combination (callsite lists,
hashes, PGO, multiple ranges, omitted entries, names needing escapes, mangled names).
The small vectorized helpers (decimal digits, segmented sums, the "needs escaping"
check) are also checked against plain Python.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import all_corpus_binaries, go_cases, map_function
from hypothesis import HealthCheck, given, settings

import bbmap.outputs.json_fragments as fast
from bbmap.binary import Binary, load_binary
from bbmap.binary.writer import encode_map_fast, write_elf
from bbmap.dump import dump, iter_json, write_json
from bbmap.formats.bbaddrmap import (
    FEAT_BB_FREQ,
    FEAT_BB_HASH,
    FEAT_BR_PROB,
    FEAT_CALLSITE_OFFSETS,
    FEAT_FUNC_ENTRY_COUNT,
    FEAT_POST_LINK_CFG,
    MD_NAMES,
    SHT_LLVM_BB_ADDR_MAP,
    SHT_LLVM_BB_ADDR_MAP_V0,
)
from bbmap.model import BlockMap, MapSource

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


# --------------------------------------------------------------------------------------
# the previous renderer, verbatim (only iter_json renamed)
# --------------------------------------------------------------------------------------
_MD_JSON = []
for _md in range(256):
    _MD_JSON.append("{" + ",".join(f'"{k}":{"true" if _md & bit else "false"}'
                                   for k, bit in MD_NAMES.items()) + "}")


def source_format(src: MapSource) -> str:
    if src.kind == "label-symbols":
        return "label-symbols"
    if src.kind == "bb_info":
        return "bb_info"
    return {SHT_LLVM_BB_ADDR_MAP: "SHT_LLVM_BB_ADDR_MAP",
            SHT_LLVM_BB_ADDR_MAP_V0: "SHT_LLVM_BB_ADDR_MAP_V0"}.get(src.sh_type,
                                                                   hex(src.sh_type))


def _pgo_texts(m: BlockMap, feats: np.ndarray) -> dict[int, str]:
    """The ``"pgo"`` object of every function that has one (feature bits 0-2).

    Built column-wise: one string per block head and per successor, laid out in one
    flat list in output order, then joined per function (a PGO map of a clang-sized
    binary has millions of blocks too)."""
    funcs = np.flatnonzero(feats & (FEAT_FUNC_ENTRY_COUNT | FEAT_BB_FREQ | FEAT_BR_PROB))
    if not len(funcs):
        return {}
    fptr = m.range_block_ptr[m.func_range_ptr]
    nb_f = np.diff(fptr)
    per_block = feats[np.repeat(np.arange(m.num_functions), nb_f)]
    want = np.flatnonzero(per_block & (FEAT_BB_FREQ | FEAT_BR_PROB))
    flat: list[str] = []
    start = np.zeros(m.num_blocks + 1, np.int64)  # where each wanted block starts in flat
    if len(want):
        bf = per_block[want]
        has_freq, has_post = (bf & FEAT_BB_FREQ) != 0, (bf & FEAT_POST_LINK_CFG) != 0
        has_succ = (bf & FEAT_BR_PROB) != 0
        first_of_func = np.zeros(m.num_blocks, "?")
        first_of_func[fptr[:-1][nb_f > 0]] = True
        heads = np.empty(len(want), dtype=object)
        ids = m.block_id[want]
        key = (first_of_func[want].astype(np.int64) << 3 | has_freq << 2 | has_post << 1
               | has_succ)
        for k in np.unique(key).tolist():  # one format per feature combination
            sel = np.flatnonzero(key == k)
            fmt = ('{"id":%d' if k & 8 else ',{"id":%d') + (',"frequency":%d' if k & 4 else "") \
                + (',"postlink_frequency":%d' if k & 2 else "") \
                + (',"successors":[' if k & 1 else "}")
            cols = [ids[sel].tolist()]
            if k & 4:
                cols.append(m.block_freq[want[sel]].tolist())
            if k & 2:
                cols.append(m.block_postlink_freq[want[sel]].tolist())
            heads[sel] = [fmt % t for t in zip(*cols)]
        sptr = m.block_succ_ptr
        nsucc = np.where(has_succ, sptr[want + 1] - sptr[want], 0)
        count = 1 + nsucc + has_succ
        pos = np.zeros(len(want) + 1, np.int64)
        np.cumsum(count, out=pos[1:])
        flat_arr = np.empty(int(pos[-1]), dtype=object)
        flat_arr[pos[:-1]] = heads
        flat_arr[pos[:-1][has_succ] + count[has_succ] - 1] = "]}"
        sb = np.flatnonzero(nsucc)
        if len(sb):
            src = _ranges(sptr[want[sb]], nsucc[sb])
            dst = _ranges(pos[sb] + 1, nsucc[sb])
            first = np.zeros(len(src), "?")
            first[np.concatenate([[0], np.cumsum(nsucc[sb])[:-1]])] = True
            post = np.repeat(has_post[sb], nsucc[sb])
            sid = m.succ_id[src].tolist()
            prob = m.succ_prob[src].tolist()
            spl = m.succ_postlink[src].tolist()
            flat_arr[dst] = [
                ('%s{"id":%d,"probability":%d,"postlink_frequency":%d}' % (
                    "" if f else ",", a, b, c)) if p else
                ('%s{"id":%d,"probability":%d}' % ("" if f else ",", a, b))
                for f, p, a, b, c in zip(first.tolist(), post.tolist(), sid, prob, spl)]
        flat = flat_arr.tolist()
        start[want] = pos[:-1]
        # blocks without PGO entries keep no text; a function's text ends where its last
        # wanted block's pieces end
        start_end = np.zeros(m.num_blocks + 1, np.int64)
        start_end[want + 1] = pos[1:]
        end_of = np.maximum.accumulate(start_end)
    out = {}
    entry = m.func_entry_count.tolist()
    for f in funcs.tolist():
        feat = int(feats[f])
        parts = []
        if feat & FEAT_FUNC_ENTRY_COUNT:
            parts.append('"entry_count":%d' % entry[f])
        if feat & (FEAT_BB_FREQ | FEAT_BR_PROB):
            a, z = int(fptr[f]), int(fptr[f + 1])
            text = "".join(flat[int(start[a]):int(end_of[z])]) if z > a else ""
            parts.append('"blocks":[%s]' % text)
        out[f] = "{" + ",".join(parts) + "}"
    return out


def _ranges(first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenate ``arange(first[i], first[i] + counts[i])``."""
    total = int(counts.sum())
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return np.repeat(first - ptr[:-1], counts) + np.arange(total, dtype=np.int64)


_CHUNK = 100_000
# A block is '{"metadata":{...},"id":N,"offset":N,"size":N[,callsites][,hash]}': key order
# is not significant in JSON, and leading with the metadata makes it one shared string.
_MD_PREFIX = np.array(['{"metadata":%s,"id":' % j for j in _MD_JSON], dtype=object)
_MD_PREFIX_COMMA = np.array([",%s" % p for p in _MD_PREFIX], dtype=object)
_TABLE_SIZE = 1 << 16


@lru_cache(maxsize=4)
def _number_table(suffix: str, size: int) -> np.ndarray:
    """``str(i) + suffix`` for i < size: one shared string per small value."""
    return np.array([f"{i}{suffix}" for i in range(size)], dtype=object)


def _decimal(values: np.ndarray, suffix: str = "") -> list[str]:
    """Decimal strings (followed by ``suffix``) of unsigned integers; table lookups for
    the small ones, which are nearly all of them."""
    if not len(values):
        return []
    top = int(values.max())
    table = _number_table(suffix, _TABLE_SIZE if top >= 4096 else 4096)
    big = values >= len(table)
    out = table[np.where(big, 0, values).astype(np.int64)].tolist()
    if big.any():
        for i in np.flatnonzero(big).tolist():
            out[i] = f"{int(values[i])}{suffix}"
    return out


_CLOSE = np.array(["}", ',"callsite_offsets":[]}'], dtype=object)


def _block_closings(m: BlockMap, feats_per_block: np.ndarray) -> list[str]:
    """Per block: its optional callsite / hash keys and the closing brace."""
    cs_flag = (feats_per_block & FEAT_CALLSITE_OFFSETS) != 0
    close = _CLOSE[cs_flag.astype(np.int64)]
    cs_on = np.flatnonzero(cs_flag)
    if len(cs_on):
        ptr = m.block_cs_ptr
        n = ptr[cs_on + 1] - ptr[cs_on]
        for k in np.unique(n[n > 0]).tolist():  # one vectorized pass per list length
            blocks = cs_on[n == k]
            first = ptr[blocks]
            text = np.full(len(blocks), ',"callsite_offsets":[', dtype=object)
            for j in range(k):
                if j:
                    text = text + ","
                text = text + np.array(_decimal(m.callsite_offsets[first + j]), dtype=object)
            close[blocks] = text + "]}"
    hash_on = np.flatnonzero(feats_per_block & FEAT_BB_HASH)
    if len(hash_on):
        hashes = m.block_hash.tolist()
        for b in hash_on.tolist():
            close[b] = close[b][:-1] + ',"hash":%d}' % hashes[b]
    return close.tolist()


def reference_iter_json(binary: Binary) -> Iterator[bytes]:
    """The dump as UTF-8 JSON fragments (concatenate them).

    Everything between two blocks (closing a range, a function tail, the next
    function's header, the next range's prefix) is one "gap" string; the blocks
    themselves are joined a chunk at a time from table-looked-up fragments.
    """
    m = binary.block_map
    F, B = m.num_functions, m.num_blocks
    names = m.func_name or [None] * F
    disp = names
    if binary.demangle:
        from bbmap.binary.symbols import demangle

        disp = [demangle(n) if n and n.startswith("_Z") else n for n in names]
    feats = m.func_feature.astype(np.int64)
    fblocks = np.diff(m.range_block_ptr[m.func_range_ptr])
    feats_per_block = np.repeat(feats, fblocks) if B else np.zeros(0, np.int64)
    secnames = {s.index: s.name for s in binary.sections}
    src_json = []
    for src in m.sources:
        if src.section_index >= 0:
            sec = '"[%d] %s"' % (src.section_index, _esc(src.section_name)[1:-1])
        else:
            sec = _esc(src.section_name)
        src_json.append((sec, source_format(src)))
    go = binary.go  # a Go binary's identity (spec/dump-json.md), null for the others
    doc_head = '{"binary":%s,"build_id":%s,"go":%s,"functions":[' % (
        _esc(binary.path), _esc(binary.build_id) if binary.build_id else "null",
        json.dumps(go.to_json(binary.build_id), separators=(",", ":")) if go else "null")
    doc_tail = '],"warnings":[%s]}\n' % ",".join(
        json.dumps(d.to_json()) for d in binary.diagnostics)
    rsecs = m.range_section.tolist()
    text_sec = {i: ',"text_section":{"index":%d,"name":%s}' % (i, _esc(secnames.get(i, "?")))
                for i in set(rsecs) if i >= 0}
    text_sec[-1] = ""
    if not src_json:
        src_json = [("null", "unknown")]
    srcs = [src_json[i] for i in m.func_source.tolist()]
    plain = not _PLAIN.search("".join(n for n in disp if n is not None))
    jnames = [("null" if n is None else '"' + n + '"') for n in disp] if plain else \
        [("null" if n is None else _esc(n)) for n in disp]
    heads = ['{"name":%s,"address":%d,"section":%s,"format":{"source":"%s","version":%d,'
             '"feature":%d,"map_offset":%d},"ranges":[' % (
                 n, a, sf[0], sf[1], v, ft, o)
             for n, a, sf, v, ft, o in zip(jnames, m.func_address.tolist(), srcs,
                                           m.func_version.tolist(), feats.tolist(),
                                           m.func_map_offset.tolist())]
    declared, nblk = m.range_num_blocks.tolist(), np.diff(m.range_block_ptr).tolist()
    rprefix = ['{"base_address":%d%s%s,"blocks":[' % (
                   base, text_sec[sec], "" if d == k else ',"num_blocks":%d' % d)
               for base, sec, d, k in zip(m.range_base.tolist(), rsecs, declared, nblk)]
    for r, sym in _part_symbols(binary, m).items():  # foo.cold, foo.__part.N
        rprefix[r] = rprefix[r][:-len(',"blocks":[')] + ',"symbol":%s,"blocks":[' % _esc(sym)
    tails = ["]}"] * F
    for f, pgo in _pgo_texts(m, feats).items():
        tails[f] = '],"pgo":%s}' % pgo
    for f, (n, d) in enumerate(zip(names, disp)):
        if n is not None and d != n:
            tails[f] = tails[f][:-1] + ',"mangled":%s}' % _esc(n)
    gaps = np.full(B + 1, ",", dtype=object)
    rptr = m.func_range_ptr
    if F and bool((np.diff(rptr) == 1).all()) and bool((fblocks > 0).all()):
        # every function one non-empty range: the gap before its first block is
        # the previous function's closing, its header and its range prefix
        prev = [doc_head] + ["]}" + t + "," for t in tails[:-1]]
        gaps[m.range_block_ptr[:-1]] = [p + h + r for p, h, r in zip(prev, heads, rprefix)]
        gaps[B] = "]}" + tails[-1] + doc_tail
    else:
        pending = doc_head
        bptr = m.range_block_ptr.tolist()
        rp = rptr.tolist()
        for f in range(F):
            pending += ("," if f else "") + heads[f]
            for j, r in enumerate(range(rp[f], rp[f + 1])):
                pending += ("," if j else "") + rprefix[r]
                if bptr[r + 1] > bptr[r]:
                    gaps[bptr[r]] = pending
                    pending = "]}"
                else:
                    pending += "]}"
            pending += tails[f]
        gaps[B] = pending + doc_tail
    closings = _block_closings(m, feats_per_block)
    special = np.flatnonzero(gaps[:B] != ",")  # first blocks of ranges
    for a in range(0, B, _CHUNK):
        b = min(B, a + _CHUNK)
        n = b - a
        md = m.block_md[a:b]
        lead = _MD_PREFIX_COMMA[md]  # the usual "," gap joined to the metadata prefix
        sp = special[(special >= a) & (special < b)]
        lead[sp - a] = [g + p for g, p in zip(gaps[sp].tolist(), _MD_PREFIX[md[sp - a]].tolist())]
        parts: list = [None] * (5 * n)
        parts[0::5] = lead.tolist()
        parts[1::5] = _decimal(m.block_id[a:b], ',"offset":')
        parts[2::5] = _decimal(m.block_offset[a:b], ',"size":')
        parts[3::5] = _decimal(m.block_size[a:b])
        parts[4::5] = closings[a:b]
        yield "".join(parts).encode()
    yield gaps[B].encode()


def _part_symbols(binary: Binary, m: BlockMap) -> dict[int, str]:
    """Ranges after a function's first one, by index -> the symbol starting there
    (basic-block-section parts such as ``foo.cold`` or ``foo.__part.1``)."""
    first = np.zeros(m.num_ranges, "?")
    first[m.func_range_ptr[:-1][np.diff(m.func_range_ptr) > 0]] = True
    later = np.flatnonzero(~first)
    if not len(later):
        return {}
    fs = binary.symbols
    if not len(fs):
        return {}
    out = {}
    bases = m.range_base[later]
    lo = np.searchsorted(fs.address, bases, side="left")
    hi = np.searchsorted(fs.address, bases, side="right")
    for r, a, b in zip(later.tolist(), lo.tolist(), hi.tolist()):
        cands = [i for i in range(a, b)
                 if not binary.is_relocatable or int(fs.section[i]) == int(m.range_section[r])]
        if cands:  # prefer the part names, then the first
            best = next((i for i in cands if not fs.is_func[i] or "." in fs.names[i]), cands[0])
            out[r] = fs.display[best] if binary.demangle else fs.names[best]
    return out


_PLAIN = re.compile(r'[\x00-\x1f"\\\x7f-\U0010ffff]')


def _esc(s: str) -> str:
    if not _PLAIN.search(s):
        return '"' + s + '"'
    return json.dumps(s, ensure_ascii=False)




# --------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------
def _render(b: Binary) -> bytes:
    return b"".join(iter_json(b))


def _reference(b: Binary) -> bytes:
    return b"".join(reference_iter_json(b))


@pytest.mark.parametrize("path", all_corpus_binaries() + [
    pytest.param(CORPUS / e["path"], id=e["name"]) for e in go_cases()])
@pytest.mark.parametrize("demangle", [True, False])
def test_same_bytes_as_previous_renderer_on_corpus(path, demangle):
    if not path.exists():
        pytest.skip("not built")
    b = load_binary(path, demangle=demangle)
    new = _render(b)
    assert new == _reference(b)
    json.loads(new)


NAMES = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_.]{0,12}", fullmatch=True),
    st.sampled_from(["_Z3fooi", "_ZN2ns3barEv", "_Z1fPKc", "_Zbad", "f.cold", "g.__part.1"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=6),
)


@st.composite
def elf_file(draw):
    """A linked ELF with one generated map (any version and feature combination) and a
    symbol per function start and per later range (names that need escaping too)."""
    v0 = draw(st.booleans())
    if v0:
        fns = draw(st.lists(map_function(0), max_size=6))
    else:
        fns = [draw(map_function(v)) for v in draw(st.lists(st.integers(1, 5), max_size=6))]
    symbols, seen = [], set()
    for f in fns:
        for j, r in enumerate(f.ranges):
            addr = 0x401000 + r.base % 0x1000
            r.base = addr
            if j == 0:
                f.address = addr
            if addr not in seen and draw(st.integers(0, 4)):
                seen.add(addr)
                symbols.append((draw(NAMES), addr, 16))
    sh_type = SHT_LLVM_BB_ADDR_MAP_V0 if v0 else SHT_LLVM_BB_ADDR_MAP
    data = encode_map_fast(fns, sh_type=sh_type) if v0 else encode_map_fast(fns)
    return write_elf(data, sh_type=sh_type, text_size=0x2000, functions=symbols)


SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@SETTINGS
@given(elf_file(), st.booleans())
def test_same_bytes_as_previous_renderer_on_generated_maps(tmp_path, data, demangle):
    p = tmp_path / "gen.elf"
    p.write_bytes(data)
    b = load_binary(p, demangle=demangle)
    new = _render(b)
    assert new == _reference(b)
    doc = json.loads(new)
    assert len(doc["functions"]) == b.block_map.num_functions


@pytest.mark.slow
@SETTINGS
@given(elf_file(), st.data())
def test_parts_concatenate_to_the_whole(tmp_path, data, pick):
    p = tmp_path / "gen.elf"
    p.write_bytes(data)
    b = load_binary(p)
    F = b.block_map.num_functions
    cut = pick.draw(st.integers(0, F))
    whole = _render(b)
    if 0 < cut < F:
        assert b"".join(iter_json(b, (0, cut))) + b"".join(iter_json(b, (cut, F))) == whole


def test_write_json_equals_rendering(tmp_path):
    path = CORPUS / "bin/clang-22/eh/unwind.pie"
    if not path.exists():
        pytest.skip("not built")
    b = load_binary(path)
    out = tmp_path / "d.json"
    with open(out, "wb") as fh:
        write_json(b, fh)
    assert out.read_bytes() == _reference(b)
    assert json.loads(out.read_bytes()) == dump(str(path))


U64 = st.integers(0, 2**64 - 1)


@pytest.mark.slow
@given(st.lists(st.one_of(st.integers(0, 70000), U64), max_size=50), st.binary(max_size=3))
def test_decimal_texts(values, suffix):
    arr = np.array(values, dtype=np.uint64)
    assert fast.decimal_texts(arr, suffix) == [b"%d%s" % (v, suffix) for v in values]


@given(st.lists(U64, max_size=50))
def test_digits_written_in_place(values):
    arr = np.array(values, dtype=np.uint64)
    nd = fast.num_digits(arr)
    assert nd.tolist() == [len(str(v)) for v in values]
    ends = np.cumsum(nd)
    out = np.zeros(int(ends[-1]) if len(ends) else 0, np.uint8)
    fast.put_digits(out, ends, arr, nd)
    assert out.tobytes() == "".join(map(str, values)).encode()


@given(st.text())
def test_plain_check_agrees_with_the_regex(s):
    assert fast.is_plain(s) == (not _PLAIN.search(s))
    assert fast.json_string(s) == json.dumps(s, ensure_ascii=False)


@given(st.lists(st.tuples(st.integers(0, 3), st.one_of(st.integers(0, 300), U64)), max_size=60),
       st.sampled_from([1, 64, 1 << 11]), st.data())
def test_keyed_decimals(pairs, cap, data):
    pre = [data.draw(st.binary(max_size=4)) for _ in range(4)]
    post = [data.draw(st.binary(max_size=4)) for _ in range(4)]
    keys = np.array([k for k, _ in pairs], np.uint8)
    values = np.array([v for _, v in pairs], np.uint64)
    table = fast.KeyedDecimals(pre, post, keys, values, cap=cap)
    want = [b"%s%d%s" % (pre[k], v, post[k]) for k, v in zip(keys.tolist(), values.tolist())]
    assert table.texts(keys, values).tolist() == want
    half = len(pairs) // 2  # a slice of the columns the table was built for
    assert table.texts(keys[half:], values[half:]).tolist() == want[half:]


def test_percent_in_section_names(tmp_path):
    """The map section's name goes into the per-function format of uniform maps: a ``%``
    in it is text, not a conversion."""
    from bbmap.model import BlockRecord, FunctionRecord, RangeRecord

    fns = [FunctionRecord(address=0x1000 + 0x40 * i, version=2, feature=0, ranges=[
        RangeRecord(base=0x1000 + 0x40 * i, blocks=[BlockRecord(id=0, offset=0, size=4, md=1)])])
        for i in range(3)]
    p = tmp_path / "pct.elf"
    p.write_bytes(write_elf(encode_map_fast(fns), text_size=0x2000,
                            functions=[(f"f{i}", 0x1000 + 0x40 * i, 16) for i in range(3)]))
    b = load_binary(p)
    m = b.block_map
    m.sources[0] = dataclasses.replace(m.sources[0], section_name=".llvm_bb_addr_map%d%s")
    new = _render(b)
    assert new == _reference(b) and b'.llvm_bb_addr_map%d%s"' in new


@pytest.mark.slow
@SETTINGS
@given(elf_file(), st.sampled_from([1, 2, 3]), st.data())
def test_function_groups_join_to_the_same_bytes(tmp_path, data, group, pick):
    """Functions are rendered FUNC_GROUP at a time; any group size gives the same text,
    whole or in parts."""
    from unittest.mock import patch

    import bbmap.dump

    p = tmp_path / "gen.elf"
    p.write_bytes(data)
    b = load_binary(p)
    F = b.block_map.num_functions
    cut = pick.draw(st.integers(0, F))
    with patch.object(bbmap.dump, "FUNC_GROUP", group):
        whole = _render(b)
        split = b"".join(iter_json(b, (0, cut))) + b"".join(iter_json(b, (cut, F)))
    assert whole == _reference(b)
    if 0 < cut < F:
        assert split == whole


@st.composite
def callsite_heavy_elf(draw):
    """v5 maps with the callsite feature, one-callsite blocks with small offsets and
    sizes around the tails table's bounds (``CS_KEYS``, ``CS_SIZE_CAP``), and a few
    blocks with hashes or two callsites."""
    from bbmap.model import BlockRecord, FunctionRecord, RangeRecord

    fns, symbols, addr = [], [], 0x401000
    for i in range(draw(st.integers(1, 5))):
        feature = 0x20 | (0x40 if draw(st.integers(0, 4)) == 0 else 0)
        blocks, off = [], 0
        for j in range(draw(st.integers(1, 12))):
            cs = tuple(sorted(draw(st.lists(st.integers(0, 40), max_size=2))))
            size = draw(st.sampled_from([0, 1, 7, 39, 255, 256, 257, 3000])) + (cs[-1] if cs else 0)
            blocks.append(BlockRecord(id=j, offset=off, size=size, md=draw(st.integers(0, 31)),
                                      callsites=cs, hash=draw(U64) if feature & 0x40 else 0))
            off += size
        fns.append(FunctionRecord(address=addr, version=5, feature=feature,
                                  ranges=[RangeRecord(base=addr, blocks=blocks)]))
        symbols.append((f"f{i}", addr, max(off, 1)))
        addr += off + 16
    return write_elf(encode_map_fast(fns), text_size=addr - 0x401000 + 16, functions=symbols)


@pytest.mark.slow
@SETTINGS
@given(callsite_heavy_elf(), st.sampled_from([1, 2, 4096]))
def test_one_callsite_tails_from_the_table(tmp_path, data, group):
    """One-callsite blocks take their tails from a keyed table (offset below CS_KEYS,
    size below the table's size), the others are laid out: the bytes are the previous
    renderer's, whatever the mix and the group size."""
    from unittest.mock import patch

    import bbmap.dump

    p = tmp_path / "cs.elf"
    p.write_bytes(data)
    b = load_binary(p)
    with patch.object(bbmap.dump, "FUNC_GROUP", group):
        assert _render(b) == _reference(b)
