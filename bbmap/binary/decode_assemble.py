"""The fast decoder's last stage: the token indices the walk recorded -> BlockMap columns.

:mod:`bbmap.binary.decode_fast` walks a section's records and keeps, per function and per
range, where things are (token indices, byte positions); here every per-block column is
gathered at once with fancy indexing -- IDs, offsets (accumulated: v1+ offsets count from
the previous block's end), sizes, metadata, callsite offsets (running sums of deltas),
hashes and the PGO analysis map -- and every value is checked against its width.  The
first function failing a check is returned, so the caller can hand it to the construct
reference for the exact diagnostic.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from bbmap.arrays import expand_ranges, segment_cumsum
from bbmap.binary.mapinput import MapInput
from bbmap.formats.bbaddrmap import (
    BLOCK_HASH_BYTES,
    CALLSITE_COUNT_INDEX,
    CALLSITE_ENTRY_ULEBS,
    FEAT_BB_FREQ,
    FEAT_BR_PROB,
    FEAT_CALLSITE_OFFSETS,
    FEAT_PGO_BLOCKS,
    FEAT_POST_LINK_CFG,
    METADATA_MAX,
    SUCCESSOR_ULEBS,
    UINT32_MAX,
    VERSION_BLOCK_IDS,
    VERSION_UNVERSIONED,
)
from bbmap.model import BlockMap

U32 = UINT32_MAX


class Walk(Protocol):
    """What the walk leaves behind (:class:`bbmap.binary.decode_fast._Walker`)."""

    data: bytes
    ntok: int
    V: np.ndarray  # token values
    bad_np: np.ndarray  # per token: malformed
    f_off: list[int]
    f_ver: list[int]
    f_feat: list[int]
    f_nr: list[int]
    f_entry_tok: list[int]
    r_addr_off: list[int]
    r_raw: list[int]
    r_nb: list[int]
    r_nblk: list[int]
    r_run: list[tuple[int, int]]
    x_ks: list[int]
    x_hash: list[int]
    p_start: list[int]
    simple: list
    hop_arrays: list[np.ndarray]  # recorded block starts of callsite chains


class Columns(NamedTuple):
    """Per-function and per-range walk results in file order."""

    f_off: np.ndarray
    f_ver: np.ndarray
    f_feat: np.ndarray
    f_nr: np.ndarray
    f_entry: np.ndarray
    r_addr_off: np.ndarray
    r_raw: np.ndarray
    r_nb: np.ndarray
    r_nblk: np.ndarray
    r_run: np.ndarray
    r_hop: np.ndarray  # callsite chains: where their block starts are recorded, or -1


def columns(w: Walk) -> Columns:
    """Join the records the general walk listed with the runs the inline walk of common
    records (``_Walker.run_simple``) kept as columns; each is in file order (the runs
    need not be in order among themselves), so records sort by their start and ranges
    by their address field's offset."""
    F = len(w.f_off)
    R = sum(w.f_nr[:F])
    g = Columns(np.array(w.f_off, np.int64), np.array(w.f_ver[:F], np.int64),
                 np.array(w.f_feat[:F], np.int64), np.array(w.f_nr[:F], np.int64),
                 np.array(w.f_entry_tok[:F], np.int64), np.array(w.r_addr_off[:R], np.int64),
                 np.array(w.r_raw[:R], "u8"), np.array(w.r_nb[:R], np.int64),
                 np.array(w.r_nblk[:R], np.int64),
                 np.array(w.r_run[:R], np.int64).reshape(-1, 2), np.full(R, -1, np.int64))
    if not w.simple:
        return g
    s = w.simple
    n = sum(len(x.pos) for x in s)
    parts = [g, Columns(*(np.concatenate(col) for col in (
        [x.pos for x in s], [x.ver for x in s], [x.feat for x in s],
        [np.ones(n, np.int64)], [np.full(n, -1, np.int64)], [x.addr_at for x in s],
        [x.raw for x in s], [x.nb for x in s], [x.nb for x in s], [x.run for x in s],
        [x.hop for x in s])))]
    if not F:
        out = parts[1]
        if len(s) == 1 or bool((np.diff(out.f_off) > 0).all()):
            return out  # (runs in file order: the usual case)
    else:
        out = Columns(*(np.concatenate([p[i] for p in parts]) for i in range(len(g))))
    fo = np.argsort(out.f_off, kind="stable")
    ro = np.argsort(out.r_addr_off, kind="stable")
    return Columns(*(col[fo] for col in out[:5]), *(col[ro] for col in out[5:]))


# Token indices of a block's fields are int32 while every one of them is below this
# bound (a clang-sized map has ~10 million tokens; int64 index columns were ~30 MB more
# to fault in per 1.4 million blocks); the margin covers the few fields after a count.
NARROW_INDEX_MAX = 2**31 - 64


def assemble(w: Walk, inp: MapInput) -> tuple[BlockMap, int | None]:
    """Gather the columns; return the map and the first function failing a value check."""
    m = BlockMap()
    m.sources = [inp.source] if inp.source is not None else []
    V = w.V
    c = columns(w)
    F = len(c.f_off)
    m.func_version = c.f_ver.astype("i2")
    m.func_feature = c.f_feat.astype("u2")
    m.func_source = np.zeros(F, "i4")
    m.func_map_offset = c.f_off.astype("u8")
    m.func_range_ptr = np.zeros(F + 1, np.int64)
    np.cumsum(c.f_nr, out=m.func_range_ptr[1:])
    R = len(c.r_nb)
    r_nb = c.r_nb
    r_nblk = c.r_nblk
    m.range_num_blocks = r_nb.astype("u4")
    m.range_block_ptr = np.zeros(R + 1, np.int64)
    np.cumsum(r_nblk, out=m.range_block_ptr[1:])
    B = int(m.range_block_ptr[-1])
    bad_func = np.zeros(F, "?")
    func_of_range = np.repeat(np.arange(F), c.f_nr) if F else np.zeros(0, np.int64)
    # addresses (relocated in .o)
    offs = c.r_addr_off.astype("u8")
    raws = c.r_raw
    vals, secs, bad = inp.relocs.resolve_many(offs, raws)
    if bad is not None:
        bad_func[func_of_range[bad]] = True
    m.range_base = vals.astype("u8")
    m.range_section = secs.astype("i4")
    first_range = m.func_range_ptr[:-1]
    m.func_address = m.range_base[first_range] if F else np.zeros(0, "u8")
    # per-block shape: IDs (v2+), callsite lists (bit 5); usually uniform per section
    fptr = m.range_block_ptr[m.func_range_ptr]
    blocks_per_func = np.diff(fptr)
    fver = m.func_version
    ids = fver >= VERSION_BLOCK_IDS
    feff = np.where(ids, m.func_feature, 0).astype(np.int64)
    if not F or bool(ids.all()):
        hasid: int | np.ndarray = 1
    elif not bool(ids.any()):
        hasid = 0
    else:
        hasid = np.repeat(ids.astype(np.int8), blocks_per_func)
    ks, hpos, itype = _entry_tokens(w, c, m, r_nblk, B)
    bad_tok = w.bad_np
    any_bad_tok = bool(bad_tok.any())
    wide = V.dtype.itemsize > 4
    bad_blocks: list[np.ndarray] = []
    off_t = ks + hasid
    size_t = off_t + 1
    ncs_full, size_t = _callsite_counts(w, (feff & FEAT_CALLSITE_OFFSETS) != 0,
                                        blocks_per_func, off_t, size_t, itype, bad_blocks)
    md_t = size_t + 1
    raw_off = V[off_t]
    raw_size = V[size_t]
    raw_md = V[md_t]
    if isinstance(hasid, int) and hasid:
        raw_id = V[ks]
    else:
        local = np.arange(B, dtype=np.int64) - np.repeat(m.range_block_ptr[:-1], r_nblk)
        raw_id = local.astype(V.dtype) if isinstance(hasid, int) else \
            np.where(hasid == 1, V[ks], local.astype(V.dtype))
    # value checks: metadata over 8 bits, 32-bit fields over 32 bits, malformed tokens
    bad_block = raw_md > METADATA_MAX
    if wide:
        bad_block |= (raw_off > U32) | (raw_size > U32) | (raw_id > U32)
    if any_bad_tok:
        bad_block |= bad_tok[off_t] | bad_tok[size_t] | bad_tok[md_t]
        if not isinstance(hasid, int) or hasid:
            bad_block |= bad_tok[ks] & (hasid == 1)
    bad_blocks.append(np.flatnonzero(bad_block))
    del ks, size_t, md_t  # (freed before the block columns are made)
    # callsites: running sums of the deltas, per block
    m.block_cs_ptr = np.zeros(B + 1, np.int64)
    np.cumsum(ncs_full, out=m.block_cs_ptr[1:])
    cs_blocks = np.flatnonzero(ncs_full)
    per_block = ncs_full[cs_blocks]
    cs_first = off_t[cs_blocks] + 2
    # the index columns (allocated together) are freed together before the block
    # columns are made: one hole for them, not fresh memory
    del off_t, ncs_full
    m.block_id = raw_id.astype("u4", copy=False)  # (raw_id is a fresh gather)
    m.block_md = raw_md.astype("u1")
    del raw_id, raw_md
    size = raw_size.astype(np.uint64)
    del raw_size
    cs_abs = _callsites(V, m, B, cs_blocks, per_block, cs_first, size, wide,
                        any_bad_tok, bad_tok, bad_blocks)
    bad_all = np.concatenate(bad_blocks)
    if len(bad_all):
        bad_func[np.searchsorted(fptr, bad_all, side="right") - 1] = True
    # absolute offsets: v0 from the function start, v1+ from the previous block's end
    step = raw_off.astype(np.uint64)
    step += size
    rel = segment_cumsum(step, m.range_block_ptr)
    rel -= size
    v0 = fver == VERSION_UNVERSIONED
    if bool(v0.any()):
        rel = np.where(np.repeat(v0, blocks_per_func), raw_off, rel)
    m.block_offset = rel
    m.block_size = size
    m.callsite_offsets = cs_abs.astype("u4")
    _hashes(m, w, inp, hpos, B)
    _pgo(m, w, c, feff, blocks_per_func, bad_func, any_bad_tok, wide)
    m.func_name = [None] * F
    first_bad = int(np.argmax(bad_func)) if bad_func.any() else None
    return m, first_bad


def _callsite_counts(w: Walk, f_cs: np.ndarray, blocks_per_func: np.ndarray,
                     off_t: np.ndarray, size_t: np.ndarray, itype: type,
                     bad_blocks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each block's callsite count (0 where its function has no callsite lists, ``f_cs``)
    and its size field's token (after the list); blocks with a bad count are added to
    ``bad_blocks``."""
    V, bad_tok = w.V, w.bad_np
    B = len(off_t)
    wide = V.dtype.itemsize > 4
    any_bad_tok = bool(bad_tok.any())
    if f_cs.any():
        # callsite lists on most blocks (clang-22 puts the feature on every function
        # with a call): whole columns, the blocks without the feature zeroed after
        # (the count is where such a block has its size: a valid token either way)
        ncs_full = V[size_t]
        # int32 counts (so the token indices below stay int32: half the memory to fault
        # in) when no count can overflow them; int64 otherwise (wide values, bad input)
        narrow = (V.dtype == np.uint32 and itype is np.int32 and B > 0
                  and int(ncs_full.max()) < NARROW_INDEX_MAX - w.ntok)
        ncs_full = ncs_full.view(np.int32) if narrow else ncs_full.astype(np.int64)
        blk_cs = None if bool(f_cs.all()) else np.repeat(f_cs, blocks_per_func)
        if blk_cs is not None:
            ncs_full *= blk_cs
        bad_ncs = (ncs_full > U32) if wide else None
        if any_bad_tok:
            bt = bad_tok[size_t] if blk_cs is None else bad_tok[size_t] & blk_cs
            bad_ncs = bt if bad_ncs is None else bad_ncs | bt
        if bad_ncs is not None and bad_ncs.any():
            bad_blocks.append(np.flatnonzero(bad_ncs))
            ncs_full[bad_ncs] = 0
        size_t = np.add(ncs_full, off_t, out=size_t if narrow else None)
        size_t += 1
        size_t += 1 if blk_cs is None else blk_cs
    else:
        ncs_full = np.zeros(B, np.int64)
    return ncs_full, size_t


def _entry_tokens(w: Walk, c: Columns, m: BlockMap, r_nblk: np.ndarray, B: int
                  ) -> tuple[np.ndarray, np.ndarray | None, type]:
    """Each block's first token (runs of plain entries, callsite chains the walk hopped
    or hops now, entries walked one by one), each hashed block's hash position (or None),
    and the index dtype."""
    V = w.V
    itype = np.int32 if w.ntok < 2**31 - 64 else np.int64
    ks = np.empty(B, itype)
    run = c.r_run
    is_run = (run[:, 0] >= 0) & (run[:, 1] > 0)
    if is_run.any():
        rr = np.flatnonzero(is_run)
        pos_blocks = expand_ranges(m.range_block_ptr[rr], r_nblk[rr])
        ks[pos_blocks] = expand_ranges(run[rr, 0], r_nblk[rr], run[rr, 1])
    is_chain = run[:, 1] < 0
    recorded = is_chain & (c.r_hop >= 0) & (r_nblk > 0)
    if recorded.any():  # chains the candidate walk hopped: their block starts are kept
        hop_ks = w.hop_arrays[0] if len(w.hop_arrays) == 1 else np.concatenate(w.hop_arrays)
        rc = np.flatnonzero(recorded)
        src, dst, cnt = c.r_hop[rc], m.range_block_ptr[rc], r_nblk[rc]
        # consecutive chains of a run are contiguous on both sides: copied as slices
        cut = np.flatnonzero((src[1:] - src[:-1] != cnt[:-1]) | (dst[1:] - dst[:-1] != cnt[:-1]))
        if len(cut) < 256:
            first = np.concatenate([[0], cut + 1]).tolist()
            last_ = np.concatenate([cut, [len(rc) - 1]])
            ends = (dst[last_] + cnt[last_]).tolist()
            for i, e in zip(first, ends):
                a, s0 = int(dst[i]), int(src[i])
                ks[a:e] = hop_ks[s0:s0 + e - a]
        else:
            ks[expand_ranges(dst, cnt)] = hop_ks[expand_ranges(src, cnt)]
    if is_chain.any():
        cr = np.flatnonzero(is_chain & ~recorded & (r_nblk > 0))
        cur = run[cr, 0]
        base = m.range_block_ptr[cr].copy()
        left = r_nblk[cr].copy()
        last = len(V) - 1
        while len(cur):  # one hop for every callsite range at once (the walk checked them)
            ks[base] = cur
            left -= 1
            keep = left > 0
            if not keep.all():
                cur, base, left = cur[keep], base[keep], left[keep]
            cur = cur + CALLSITE_ENTRY_ULEBS \
                + V[np.minimum(cur + CALLSITE_COUNT_INDEX, last)].astype(np.int64)
            base += 1
    hpos = None
    if w.x_ks:
        xr = np.flatnonzero(~is_run & ~is_chain & (r_nblk > 0))
        pos_blocks = expand_ranges(m.range_block_ptr[xr], r_nblk[xr])
        ks[pos_blocks] = np.array(w.x_ks, itype)
        hpos = np.full(B, -1, np.int64)
        hpos[pos_blocks] = np.array(w.x_hash, np.int64)
    return ks, hpos, itype


def _callsites(V: np.ndarray, m: BlockMap, B: int, cs_blocks: np.ndarray,
               per_block: np.ndarray, cs_first: np.ndarray, size: np.ndarray, wide: bool,
               any_bad_tok: bool, bad_tok: np.ndarray, bad_blocks: list[np.ndarray]
               ) -> np.ndarray:
    """Callsite offsets (running sums of the deltas, per block); each block's size grows by
    its last callsite; blocks with a bad value are added to ``bad_blocks``."""
    cs_abs = np.zeros(0, np.uint64)
    if len(cs_blocks):
        single = bool((per_block == 1).all())  # (usual: one call ends a block)
        cs_tok = cs_first if single else expand_ranges(cs_first, per_block)
        deltas = V[cs_tok].astype(np.uint64)
        wide_delta = (deltas > U32) if wide else None
        if single:  # each list's running sum is its one delta
            cs_abs = last_cs = deltas
        else:
            cs_abs = segment_cumsum(deltas, m.block_cs_ptr[np.append(cs_blocks, B)])
            last_cs = cs_abs[m.block_cs_ptr[cs_blocks + 1] - 1]
        size[cs_blocks] += last_cs
        bad_cs = cs_abs > U32
        if wide:
            bad_cs |= wide_delta
        if any_bad_tok:
            bad_cs |= bad_tok[cs_tok]
        if bad_cs.any():
            bad_blocks.append(np.repeat(cs_blocks, per_block)[bad_cs])
    return cs_abs


def _hashes(m: BlockMap, w: Walk, inp: MapInput, hpos: np.ndarray | None, B: int) -> None:
    """The blocks' hashes (8 bytes at each hashed block's position)."""
    m.block_hash = np.zeros(B, "u8")
    if hpos is not None:
        hb = np.flatnonzero(hpos >= 0)
        if len(hb):
            raw = np.frombuffer(w.data, np.uint8)
            idx = hpos[hb][:, None] + np.arange(BLOCK_HASH_BYTES)
            dt = np.dtype("<u8" if inp.little else ">u8")
            m.block_hash[hb] = np.ascontiguousarray(raw[idx]).view(dt).ravel().astype("u8")


def _pgo(m: BlockMap, w: Walk, c: Columns, feff: np.ndarray, blocks_per_func: np.ndarray,
         bad_func: np.ndarray, any_bad_tok: bool, wide: bool) -> None:
    """PGO analysis: entry counts, block frequencies, successors and their probabilities;
    functions with a bad value marked in ``bad_func``."""
    V, bad_tok = w.V, w.bad_np
    F, B = len(bad_func), len(m.block_id)
    m.func_entry_count = np.zeros(F, "u8")
    et = c.f_entry
    has_e = et >= 0
    if has_e.any():
        ev = V[et[has_e]]
        m.func_entry_count[has_e] = ev
        bad_func[np.flatnonzero(has_e)[bad_tok[et[has_e]]]] = True
    m.block_freq = np.zeros(B, "u8")
    m.block_postlink_freq = np.zeros(B, "u8")
    m.block_succ_ptr = np.zeros(B + 1, np.int64)
    m.succ_id, m.succ_prob, m.succ_postlink = np.zeros(0, "u4"), np.zeros(0, "u4"), \
        np.zeros(0, "u8")
    pgo_f = (feff & FEAT_PGO_BLOCKS) != 0
    if not pgo_f.any():
        return
    block_func = np.repeat(np.arange(F), blocks_per_func)
    pgo_blocks = np.flatnonzero(np.repeat(pgo_f, blocks_per_func)) if B else np.zeros(0, int)
    P = len(pgo_blocks)
    nsucc = np.zeros(B, np.int64)
    succ_first = np.zeros(B, np.int64)
    sw = np.zeros(B, np.int64)
    if P:
        ps = np.array(w.p_start[:P], np.int64)
        peff = np.repeat(feff, blocks_per_func)[pgo_blocks]
        has_f = (peff & FEAT_BB_FREQ) != 0
        has_p = (peff & FEAT_POST_LINK_CFG) != 0
        has_s = (peff & FEAT_BR_PROB) != 0
        bad_p = np.zeros(P, "?")
        sel = np.flatnonzero(has_f)
        m.block_freq[pgo_blocks[sel]] = V[ps[sel]]
        if any_bad_tok:
            bad_p[sel] |= bad_tok[ps[sel]]
        plf_t = ps + has_f
        sel = np.flatnonzero(has_p)
        m.block_postlink_freq[pgo_blocks[sel]] = V[plf_t[sel]]
        if wide:
            bad_p[sel] |= V[plf_t[sel]] > U32
        if any_bad_tok:
            bad_p[sel] |= bad_tok[plf_t[sel]]
        ns_t = plf_t + has_p
        sel = np.flatnonzero(has_s)
        nsucc[pgo_blocks[sel]] = V[ns_t[sel]].astype(np.int64)
        if any_bad_tok:
            bad_p[sel] |= bad_tok[ns_t[sel]]
        succ_first[pgo_blocks] = ns_t + 1
        sw[pgo_blocks] = SUCCESSOR_ULEBS + has_p
        if bad_p.any():
            bad_func[block_func[pgo_blocks[bad_p]]] = True
    np.cumsum(nsucc, out=m.block_succ_ptr[1:])
    sb = np.flatnonzero(nsucc > 0)
    st = expand_ranges(succ_first[sb], nsucc[sb], sw[sb])
    post = np.repeat(sw[sb] == 3, nsucc[sb])
    m.succ_id = V[st].astype("u4") if len(st) else np.zeros(0, "u4")
    m.succ_prob = V[st + 1].astype("u4") if len(st) else np.zeros(0, "u4")
    m.succ_postlink = np.where(post, V[np.where(post, st + 2, st)], 0).astype("u8") \
        if len(st) else np.zeros(0, "u8")
    if len(st):
        bad_s = (V[st] > U32) | (V[st + 1] > U32) | bad_tok[st] | bad_tok[st + 1]
        bad_s |= post & ((V[np.where(post, st + 2, st)] > U32)
                         | bad_tok[np.where(post, st + 2, st)])
        if bad_s.any():
            owner = np.repeat(sb, nsucc[sb])
            bad_func[block_func[owner[bad_s]]] = True
