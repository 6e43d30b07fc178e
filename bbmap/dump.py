# ruff: noqa: UP031 - %-formatting of preformatted JSON fragments is the fast path here
"""``bbmap dump``: every function, range and block of a binary's maps, as JSON or text.

The JSON shape is written down in ``spec/dump-json.md``.  A clang-sized map has
millions of blocks, so the JSON bytes are joined from shared fragments (one per
metadata value, one per small number) picked with numpy, five per block, instead of
``json.dumps`` of a dict per block; the rarer per-block texts (callsite lists, hashes)
are laid out in one byte buffer by vectorized digit arithmetic, and the text between
two functions is one %-format per function.  :func:`dump` is ``json.loads`` of that
same text, so both views agree; ``tests/test_dump_fastpath.py`` holds the previous
renderer and checks the bytes are the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO

import numpy as np

from bbmap.arrays import expand_ranges, row_of
from bbmap.binary import Binary, load_binary
from bbmap.formats.bbaddrmap import (
    FEAT_BB_FREQ,
    FEAT_BB_HASH,
    FEAT_BR_PROB,
    FEAT_CALLSITE_OFFSETS,
    FEAT_FUNC_ENTRY_COUNT,
    FEAT_PGO_ANALYSIS,
    FEAT_PGO_BLOCKS,
    FEAT_POST_LINK_CFG,
    MD_CAN_FALL_THROUGH,
    MD_HAS_INDIRECT_BRANCH,
    MD_HAS_RETURN,
    MD_HAS_TAIL_CALL,
    MD_IS_EH_PAD,
    MD_NAMES,
    SHT_LLVM_BB_ADDR_MAP,
    SHT_LLVM_BB_ADDR_MAP_V0,
)
from bbmap.model import BlockMap, MapSource
from bbmap.outputs.json_fragments import (
    KeyedDecimals,
    decimal_texts,
    is_plain,
    json_string,
    num_digits,
    put_const,
    put_digits,
    write_overlapped,
)

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
    funcs = np.flatnonzero(feats & FEAT_PGO_ANALYSIS)
    if not len(funcs):
        return {}
    fptr = m.range_block_ptr[m.func_range_ptr]
    nb_f = np.diff(fptr)
    per_block = feats[row_of(fptr)]
    want = np.flatnonzero(per_block & FEAT_PGO_BLOCKS)
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
            src = expand_ranges(sptr[want[sb]], nsucc[sb])
            dst = expand_ranges(pos[sb] + 1, nsucc[sb])
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
        if feat & FEAT_PGO_BLOCKS:
            a, z = int(fptr[f]), int(fptr[f + 1])
            text = "".join(flat[int(start[a]):int(end_of[z])]) if z > a else ""
            parts.append('"blocks":[%s]' % text)
        out[f] = "{" + ",".join(parts) + "}"
    return out


_CHUNK = 16_384
# A block is '{"metadata":{...},"id":N,"offset":N,"size":N[,callsites][,hash]}': key order
# is not significant in JSON, and leading with the metadata makes it one shared string.
# It is joined from three texts: the metadata and ID (with the "," before the block and
# the offset key), the offset (with the size key), the size and the rest.
_MD_TEXT = ['{"metadata":%s,"id":' % j for j in _MD_JSON]
_MD_TEXT_BYTES = [t.encode() for t in _MD_TEXT]
_HEAD_PRE = [b"," + t for t in _MD_TEXT_BYTES]
_HEAD_POST = [b',"offset":'] * len(_HEAD_PRE)


_CS_OPEN = b',"callsite_offsets":['
_HASH_KEY = b',"hash":'
_TAIL_PRE = [b"", b""]
_TAIL_POST = [b"}", _CS_OPEN + b"]}"]  # (by "has the callsite feature")
# A block with exactly one callsite offset below CS_KEYS (and no hash) -- most callsite
# blocks of compiler output: the call is near the block's end, the block is short --
# takes its whole tail ``size,"callsite_offsets":[c]}`` from a second keyed table (key
# c, value the size), sizes below CS_SIZE_CAP; the others are laid out by _block_tails.
CS_KEYS = 32
CS_SIZE_CAP = 256


def _single_callsite_table(m: BlockMap) -> KeyedDecimals:
    """The tails of one-callsite blocks (see ``CS_KEYS``), for the offsets and sizes
    that occur in ``m`` (a superset of those the table is asked for)."""
    cs = m.callsite_offsets
    keys = cs[cs < CS_KEYS].astype(np.int64)
    post = [_CS_OPEN + b"%d]}" % c for c in range(CS_KEYS)]
    return KeyedDecimals([b""] * CS_KEYS, post, keys,
                         m.block_size if len(keys) else keys, cap=CS_SIZE_CAP)


def _block_tails(m: BlockMap, feats_per_block: np.ndarray, b0: int, b1: int,
                 singles: KeyedDecimals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The end of each block of ``b0..b1-1`` from its size on: whether it has the
    callsite feature (its tail is then ``size,"callsite_offsets":[]}`` if it has no
    callsite, else ``size}``), and the blocks with callsites or a hash with their
    tails (an object array): one-callsite blocks from the ``singles`` table, the others
    laid out in one byte buffer (digit counts, cumulative offsets, digits by vectorized
    div/mod) and cut per block.  ``feats_per_block`` covers the same blocks."""
    cs_flag = (feats_per_block & FEAT_CALLSITE_OFFSETS) != 0
    hash_flag = (feats_per_block & FEAT_BB_HASH) != 0
    ptr = m.block_cs_ptr[b0:b1 + 1]
    ncs = np.diff(ptr)
    which = np.flatnonzero((cs_flag & (ncs > 0)) | hash_flag)
    out_tails = np.empty(len(which), dtype=object)
    if not len(which):
        return cs_flag, which, out_tails
    one = np.flatnonzero((ncs[which] == 1) & ~hash_flag[which])
    if len(one):
        first = m.callsite_offsets[ptr[which[one]]]
        sizes = m.block_size[b0 + which[one]]
        keep = (first < CS_KEYS) & (sizes < singles.size)
        one, first, sizes = one[keep], first[keep], sizes[keep]
        out_tails[one] = singles.texts(first.astype(np.int64), sizes)
    laid = np.ones(len(which), "?")
    laid[one] = False
    rest = np.flatnonzero(laid)
    if len(rest):
        out_tails[rest] = _laid_out_tails(m, cs_flag, hash_flag, ptr, ncs, b0, which[rest])
    return cs_flag, which, out_tails


def _laid_out_tails(m: BlockMap, cs_flag: np.ndarray, hash_flag: np.ndarray,
                    ptr: np.ndarray, ncs: np.ndarray, b0: int, which: np.ndarray
                    ) -> list[bytes]:
    """The tails of blocks ``b0 + which`` laid out in one byte buffer (see
    :func:`_block_tails`)."""
    n = ncs[which]
    has_cs = cs_flag[which]
    has_hash = hash_flag[which]
    cs_vals = m.callsite_offsets[expand_ranges(ptr[which], n)]
    cs_dig = num_digits(cs_vals)
    cs_item = cs_dig + 1  # each number is followed by "," or the closing "]"
    cs_ptr = np.zeros(len(which) + 1, np.int64)
    np.cumsum(n, out=cs_ptr[1:])
    cs_text = np.zeros(len(which), np.int64)
    if len(cs_item):
        cum = np.concatenate([[0], np.cumsum(cs_item)])
        cs_text = cum[cs_ptr[1:]] - cum[cs_ptr[:-1]]
    cs_len = np.where(has_cs, len(_CS_OPEN) + np.maximum(cs_text, 1), 0)
    hashes = m.block_hash[b0 + which[has_hash]]
    h_dig = num_digits(hashes)
    h_len = np.zeros(len(which), np.int64)
    h_len[has_hash] = len(_HASH_KEY) + h_dig
    sizes = m.block_size[b0 + which]
    s_dig = num_digits(sizes)
    total = s_dig + cs_len + h_len + 1
    start = np.zeros(len(which) + 1, np.int64)
    np.cumsum(total, out=start[1:])
    out = np.empty(int(start[-1]), np.uint8)
    put_digits(out, start[:-1] + s_dig, sizes, s_dig)
    key = start[:-1] + s_dig  # where the keys after the size start
    put_const(out, key[has_cs], _CS_OPEN)
    empty = has_cs & (n == 0)
    out[key[empty] + len(_CS_OPEN)] = ord("]")
    if len(cs_vals):
        # number j of block i ends at start_i + len(open) + (sum of earlier items) + digits
        within = cum[:-1] - np.repeat(cum[cs_ptr[:-1]], n)
        num_start = np.repeat(key + len(_CS_OPEN), n) + within
        put_digits(out, num_start + cs_dig, cs_vals, cs_dig)
        sep = np.full(len(cs_vals), ord(","), np.uint8)
        sep[cs_ptr[1:][n > 0] - 1] = ord("]")
        out[num_start + cs_dig] = sep
    h_start = key[has_hash] + cs_len[has_hash]
    put_const(out, h_start, _HASH_KEY)
    put_digits(out, h_start + len(_HASH_KEY) + h_dig, hashes, h_dig)
    out[start[1:] - 1] = ord("}")
    buf = out.tobytes()
    return [buf[a:b] for a, b in zip(start[:-1].tolist(), start[1:].tolist())]


def _gaps(binary: Binary, m: BlockMap, disp: list[str | None], tails: list[str],
          lead: str, trail: str, f0: int, f1: int) -> tuple[np.ndarray, list[bytes]]:
    """Everything between two blocks of functions ``f0..f1-1`` that is not the usual
    ``","``: block indices (the first block of a non-empty range) and their texts; the
    last text ends the part (``trail``); ``lead`` comes before the first function.

    Such a gap is the previous range's and function's closing, the next function's
    header and the next range's prefix, and it ends with the metadata prefix of the
    block that follows (a block's text starts with its metadata)."""
    r0, r1 = int(m.func_range_ptr[f0]), int(m.func_range_ptr[f1])
    src_json = []
    for src in m.sources:
        if src.section_index >= 0:
            sec = '"[%d] %s"' % (src.section_index, json_string(src.section_name)[1:-1])
        else:
            sec = json_string(src.section_name)
        src_json.append('"section":%s,"format":{"source":"%s","version":' % (
            sec, source_format(src)))
    if not src_json:
        src_json = ['"section":null,"format":{"source":"unknown","version":']
    secnames = {s.index: s.name for s in binary.sections}
    rsecs = m.range_section[r0:r1].tolist()
    text_sec = {i: ',"text_section":{"index":%d,"name":%s}' % (i, json_string(secnames.get(i, "?")))
                for i in set(rsecs) if i >= 0}
    text_sec[-1] = ""
    names = disp[f0:f1]
    plain = is_plain("".join([n for n in names if n is not None]))
    bptr = m.range_block_ptr[r0:r1 + 1]
    nblk = np.diff(bptr)
    declared = m.range_num_blocks[r0:r1].astype(np.int64)
    count_note = [""] * (r1 - r0)
    for r in np.flatnonzero(declared != nblk).tolist():
        count_note[r] = ',"num_blocks":%d' % declared[r]
    rptr = m.func_range_ptr[f0:f1 + 1]
    if f1 > f0 and bool((np.diff(rptr) == 1).all()) and bool((nblk > 0).all()):
        uniform = _uniform_texts(m, tails, lead, trail, f0, f1, names, plain, src_json,
                                 text_sec, count_note)
        if uniform is not None:
            return bptr[:-1], uniform
    jnames = _json_names(names, plain)
    srcs = [src_json[s] for s in m.func_source[f0:f1].tolist()]
    fcols = (m.func_address[f0:f1].tolist(), srcs, m.func_version[f0:f1].tolist(),
             m.func_feature[f0:f1].tolist(), m.func_map_offset[f0:f1].tolist())
    if f1 > f0 and bool((np.diff(rptr) == 1).all()) and bool((nblk > 0).all()):
        # every function one non-empty range: one format per function
        prev = [lead] + ["]}" + t + "," for t in tails[f0:f1 - 1]]
        texts = [('%s{"name":%s,"address":%d,%s%d,"feature":%d,"map_offset":%d},"ranges":['
                  '{"base_address":%d%s%s,"blocks":[%s%d,"offset":' % t).encode()
                 for t in zip(prev, jnames, *fcols, m.range_base[r0:r1].tolist(),
                              [text_sec[s] for s in rsecs], count_note,
                              [_MD_TEXT[md] for md in m.block_md[bptr[:-1]].tolist()],
                              m.block_id[bptr[:-1]].tolist())]
        texts.append(("]}" + tails[f1 - 1] + trail).encode())
        return bptr[:-1], texts
    heads = ['{"name":%s,"address":%d,%s%d,"feature":%d,"map_offset":%d},"ranges":[' % t
             for t in zip(jnames, *fcols)]
    rprefix = ['{"base_address":%d%s%s,"blocks":[' % (base, text_sec[sec], note)
               for base, sec, note in zip(m.range_base[r0:r1].tolist(), rsecs, count_note)]
    for r, sym in _part_symbols(binary, m).items():  # foo.cold, foo.__part.N
        if r0 <= r < r1:
            rprefix[r - r0] = rprefix[r - r0][:-len(',"blocks":[')] \
                + ',"symbol":%s,"blocks":[' % json_string(sym)
    where: list[int] = []
    texts = []
    pending = lead
    bp = bptr.tolist()
    rp = (rptr - r0).tolist()
    for f in range(f1 - f0):
        pending += ("," if f else "") + heads[f]
        for j, r in enumerate(range(rp[f], rp[f + 1])):
            pending += ("," if j else "") + rprefix[r]
            if bp[r + 1] > bp[r]:
                where.append(bp[r])
                texts.append(('%s%s%d,"offset":' % (pending, _MD_TEXT[int(m.block_md[bp[r]])],
                                                     int(m.block_id[bp[r]]))).encode())
                pending = "]}"
            else:
                pending += "]}"
        pending += tails[f0 + f]
    texts.append((pending + trail).encode())
    return np.array(where, np.int64), texts


def _json_names(names: list[str | None], plain: bool) -> list[str]:
    """Names as JSON values (``plain``: none needs escaping)."""
    if plain:
        return [("null" if n is None else '"' + n + '"') for n in names]
    return [("null" if n is None else json_string(n)) for n in names]


def _uniform_texts(m: BlockMap, tails: list[str], lead: str, trail: str, f0: int, f1: int,
                   names: list[str | None], plain: bool, src_json: list[str],
                   text_sec: dict[int, str], count_note: list[str]) -> list[bytes] | None:
    """The gap texts of :func:`_gaps` when functions ``f0..f1-1`` (one non-empty range
    each) share their source, version and text section, and have no extra keys (the
    usual compiler output): those go into the format itself, leaving six values per
    function to format.  None if they differ."""
    r0, r1 = int(m.func_range_ptr[f0]), int(m.func_range_ptr[f1])
    cols = [m.func_source[f0:f1], m.func_version[f0:f1], m.range_section[r0:r1]]
    if not all(bool((c == c[0]).all()) for c in cols) or any(count_note) \
            or tails[f0:f1].count("]}") != f1 - f0:
        return None
    src, ver, sec = (int(c[0]) for c in cols)
    quoted = plain and None not in names  # then the quotes go into the format
    fmt = ('{"name":%s,"address":%%d,%s%d,"feature":%%d,"map_offset":%%d},"ranges":['
           '{"base_address":%%d%s,"blocks":[%%s' % (
               '"%s"' if quoted else "%s", src_json[src].replace("%", "%%"), ver,
               text_sec[sec].replace("%", "%%"))).encode()
    rest = b"]}]}," + fmt  # the previous function's closing, then this one's header
    bstart = m.range_block_ptr[r0:r1]
    # bytes formatted from bytes: no str to encode per function (a name that is plain,
    # or a JSON string, holds no raw newline: one encode and split gives every name)
    jnames = names if quoted else _json_names(names, plain)
    args = zip("\n".join(jnames).encode().split(b"\n"), m.func_address[f0:f1].tolist(),
               m.func_feature[f0:f1].tolist(), m.func_map_offset[f0:f1].tolist(),
               m.range_base[r0:r1].tolist(),
               KeyedDecimals(_MD_TEXT_BYTES, _HEAD_POST, m.block_md[bstart],
                             m.block_id[bstart]).texts(m.block_md[bstart],
                                                       m.block_id[bstart]).tolist())
    first = next(args)
    texts = [lead.encode() + fmt % first]
    texts += [rest % t for t in args]
    texts.append(("]}]}" + trail).encode())
    return texts


def iter_json(binary: Binary, part: tuple[int, int] | None = None) -> Iterator[bytes]:
    """The dump as UTF-8 JSON fragments (concatenate them).

    ``part=(f0, f1)`` gives only functions ``f0..f1-1``: with the document's head if
    ``f0`` is 0, its tail if ``f1`` is the last, and a leading "," otherwise -- the
    parts of a split concatenate to the whole document.  Everything between two blocks
    is one "gap" text (:func:`_gaps`); the blocks themselves are joined a chunk at a
    time from table-looked-up byte fragments (small chunks: their buffers are reused
    instead of freshly faulted in).  The functions are rendered ``FUNC_GROUP`` at a
    time, as parts of the document, for the same reason.
    """
    m = binary.block_map
    F = m.num_functions
    f0, f1 = part if part is not None else (0, F)
    names = m.func_name or [None] * F
    disp = names
    if binary.demangle and "\n_Z" in "\n" + "\n".join([n for n in names if n]):
        from bbmap.binary.symbols import demangle

        disp = [demangle(n) if n and n.startswith("_Z") else n for n in names]
    feats = m.func_feature.astype(np.int64)
    go = binary.go  # read before the warnings are written: its faults are among them
    lead = '{"binary":%s,"build_id":%s,"go":%s,"functions":[' % (
        json_string(binary.path), json_string(binary.build_id) if binary.build_id else "null",
        json.dumps(go.to_json(binary.build_id), separators=(",", ":")) if go else "null") \
        if f0 == 0 else ","
    trail = '],"warnings":[%s]}\n' % ",".join(
        json.dumps(d.to_json()) for d in binary.diagnostics) if f1 == F else ""
    tails = ["]}"] * F
    for f, pgo in _pgo_texts(m, feats).items():
        tails[f] = '],"pgo":%s}' % pgo
    for f in range(f0, f1) if disp is not names else ():
        n, d = names[f], disp[f]
        if n is not None and d != n:
            tails[f] = tails[f][:-1] + ',"mangled":%s}' % json_string(n)
    fptr = m.range_block_ptr[m.func_range_ptr]
    b0, b1 = int(fptr[f0]), int(fptr[f1])
    heads = KeyedDecimals(_HEAD_PRE, _HEAD_POST, m.block_md[b0:b1], m.block_id[b0:b1])
    with_blocks = np.diff(fptr[f0:f1 + 1]) > 0
    cs_funcs = ((feats[f0:f1][with_blocks] & FEAT_CALLSITE_OFFSETS) != 0).view(np.uint8)
    ends = KeyedDecimals(_TAIL_PRE, _TAIL_POST, cs_funcs, m.block_size[b0:b1])
    singles = _single_callsite_table(m)
    groups = [(g, min(f1, g + FUNC_GROUP)) for g in range(f0, f1, FUNC_GROUP)] or [(f0, f1)]
    for g0, g1 in groups:
        yield from _part_json(binary, m, disp, tails, feats, fptr, heads, ends, singles,
                              lead if g0 == f0 else ",", trail if g1 == f1 else "", g0, g1)


# Functions rendered together: their header texts and block tails are made, joined and
# dropped before the next group's (memory reused instead of freshly faulted in: a
# 100,000-function map's header texts alone are ~35 MB).
FUNC_GROUP = 4096


def _part_json(binary: Binary, m: BlockMap, disp: list[str | None], tails: list[str],
               feats: np.ndarray, fptr: np.ndarray, heads: KeyedDecimals,
               ends: KeyedDecimals, singles: KeyedDecimals, lead: str, trail: str,
               f0: int, f1: int) -> Iterator[bytes]:
    """The text of functions ``f0..f1-1`` (see :func:`iter_json`): their gaps, and
    their blocks joined a chunk at a time from table-looked-up byte fragments."""
    special, gap_texts = _gaps(binary, m, disp, tails, lead, trail, f0, f1)
    b0, b1 = int(fptr[f0]), int(fptr[f1])
    feats_per_block = np.repeat(feats[f0:f1], np.diff(fptr[f0:f1 + 1]))
    cs_flag, custom, custom_tails = _block_tails(m, feats_per_block, b0, b1, singles)
    del feats_per_block
    cs_key = cs_flag.view(np.uint8)
    starts = range(b0, b1, _CHUNK)
    gap_at = np.searchsorted(special, [*starts, b1])
    custom_at = np.searchsorted(custom, [s - b0 for s in [*starts, b1]])
    for c, a in enumerate(starts):
        b = min(b1, a + _CHUNK)
        n = b - a
        head = heads.texts(m.block_md[a:b], m.block_id[a:b])
        g0, g1 = int(gap_at[c]), int(gap_at[c + 1])
        head[special[g0:g1] - a] = gap_texts[g0:g1]  # a range's first block: its gap
        tail = ends.texts(cs_key[a - b0:b - b0], m.block_size[a:b])
        k0, k1 = int(custom_at[c]), int(custom_at[c + 1])
        tail[custom[k0:k1] - (a - b0)] = custom_tails[k0:k1]
        parts: list = [None] * (3 * n)
        parts[0::3] = head.tolist()
        parts[1::3] = decimal_texts(m.block_offset[a:b], b',"size":')
        parts[2::3] = tail.tolist()
        yield b"".join(parts)
    yield gap_texts[-1]


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


def write_json(binary: Binary, fh: IO[bytes]) -> None:
    """Write the JSON dump to ``fh`` (formatting overlapped with the writes)."""
    write_overlapped(iter_json(binary), fh)


def dump_json_text(path: str, *, demangle: bool = True, decoder: str = "fast",
                   debug_dirs=()) -> tuple[str, Binary]:
    b = load_binary(path, demangle=demangle, decoder=decoder, debug_dirs=debug_dirs)
    return b"".join(iter_json(b)).decode(), b


def dump(path: str, demangle: bool = True, decoder: str = "fast") -> dict:
    """The dump as a dict (``json.loads`` of the text ``bbmap dump --json`` writes)."""
    text, _ = dump_json_text(path, demangle=demangle, decoder=decoder)
    return json.loads(text)


def _strip_lines(binary: Binary, m: BlockMap, names: list) -> Iterator[str]:
    """Where the block map came from when not this file, and, once, what a strip took."""
    src = getattr(binary, "block_map_file", binary.path)
    if src != binary.path:
        yield f"block map: from the debug file {src} (this file has none: stripped)\n"
    how = binary.stripped() if hasattr(binary, "stripped") else None
    if not how:
        return
    from bbmap.aggregate.explain import restore_advice

    unnamed = sum(1 for n in names if not n)
    if not m.num_functions:
        yield (f"stripped ({how}): no block map and no symbols; llvm-strip removes the map "
               f"with the symbols: {restore_advice(binary.build_id)}\n")
    elif unnamed:
        yield (f"stripped ({how}): {unnamed} of {m.num_functions} functions have no name "
               f"(fn@ADDRESS); to name them, {restore_advice(binary.build_id)}\n")


def iter_text(binary: Binary) -> Iterator[str]:
    """A readable table per function."""
    m = binary.block_map
    names = m.func_name or [None] * m.num_functions
    yield f"{binary.path}: {binary.e_type}, build-id {binary.build_id or '-'}, " \
          f"{m.num_functions} functions, {m.num_ranges} ranges, {m.num_blocks} blocks\n"
    yield from _strip_lines(binary, m, names)
    if binary.go is not None:
        from bbmap.binary.go import go_identity_line  # a Go binary's only: not at start-up

        yield f"{go_identity_line(binary.go, binary.build_id)}\n"
        if binary.symbols_source == ".gopclntab":
            yield (f"function symbols: {len(binary.symbols)} from .gopclntab (no .symtab: "
                   "the Go runtime's own table, which -ldflags=-s keeps)\n")
    md_letters = (("R", MD_HAS_RETURN), ("T", MD_HAS_TAIL_CALL), ("E", MD_IS_EH_PAD),
                  ("F", MD_CAN_FALL_THROUGH), ("I", MD_HAS_INDIRECT_BRANCH))
    from bbmap.binary.symbols import demangle

    for f in range(m.num_functions):
        src = m.sources[int(m.func_source[f])] if m.sources else None
        name = names[f]
        shown = (demangle(name) if binary.demangle else name) if name else "<?>"
        fmt = source_format(src) if src else "?"
        where = f"[{src.section_index}] {src.section_name}" if src and src.section_index >= 0 \
            else (src.section_name if src else "?")
        ver = int(m.func_version[f])
        kind = (f"{fmt} v{ver} feature {int(m.func_feature[f]):#x}, {where} "
                f"+{int(m.func_map_offset[f]):#x}") if ver >= 0 else f"{fmt}, {where}"
        yield f"\n{shown} @ {int(m.func_address[f]):#x}  ({kind})\n"
        if int(m.func_feature[f]) & FEAT_FUNC_ENTRY_COUNT:
            yield f"  entry count {int(m.func_entry_count[f])}\n"
        for r in m.function_ranges(f):
            base = int(m.range_base[r])
            sec = int(m.range_section[r])
            yield f"  range @ {base:#x}" + (f" in section [{sec}]" if sec >= 0 else "") + "\n"
            yield "    {:>5} {:>18} {:>8} {:>6}  {}\n".format("id", "address", "size", "flags",
                                                              "callsites/hash")
            for b in m.range_blocks(r):
                md = int(m.block_md[b])
                flags = "".join(ch if md & bit else "." for ch, bit in md_letters)
                extra = []
                cs = m.block_callsites(b)
                if len(cs):
                    extra.append("cs " + ",".join(f"+{int(c):#x}" for c in cs))
                if int(m.func_feature[f]) & FEAT_BB_HASH:
                    extra.append(f"hash {int(m.block_hash[b]):#018x}")
                yield "    {:>5} {:>#18x} {:>#8x} {:>6}  {}\n".format(
                    int(m.block_id[b]), base + int(m.block_offset[b]), int(m.block_size[b]),
                    flags, " ".join(extra))
    if len(binary.diagnostics):
        yield "\nwarnings:\n"
        for d in binary.diagnostics:
            yield f"  {d.severity}: {d}\n"
    yield "\nflags: R return, T tail call, E EH pad, F can fall through, I indirect branch\n"
