"""The fast map decoder: numpy over ULEB tokens, a thin Python walk over records.

Almost every field of a map is a ULEB128.  Every byte below 0x80 ends one, so the
terminator positions, computed once with numpy, split the section into *tokens*
and the value of every token is computed vectorized.  A function's block entries
are then the next 4N (3N before version 2) tokens: the Python walk only reads the
few fixed-width fields (version, feature, addresses, hashes), skips whole runs of
tokens, and records token indices; all per-block columns are gathered at the end
with fancy indexing.  Blocks with callsites or hashes, and PGO data, are walked one
block at a time (still tokens, no byte parsing).

Anything unexpected -- truncation, an over-wide value, a bad version, a missing
relocation -- stops the fast walk at that function; the construct reference
decoder (:mod:`bbmap.binary.decode_ref`) then decodes from that function on, so
faults are reported by one implementation, with the same text and offset.  The
hypothesis tests prove this decoder equal to the reference on generated maps.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from typing import NamedTuple

import numpy as np

from bbmap.arrays import expand_ranges, segment_cumsum
from bbmap.binary.decode_ref import decode_records
from bbmap.binary.mapinput import KIND_BB_INFO, KIND_V0, MapInput, Notes, check_record
from bbmap.errors import Diagnostic
from bbmap.formats.bbaddrmap import (
    BLOCK_HASH_BYTES,
    CALLSITE_COUNT_INDEX,
    CALLSITE_ENTRY_ULEBS,
    ENTRY_ULEBS,
    ENTRY_ULEBS_NO_ID,
    FEAT_BB_FREQ,
    FEAT_BB_HASH,
    FEAT_BR_PROB,
    FEAT_CALLSITE_OFFSETS,
    FEAT_FUNC_ENTRY_COUNT,
    FEAT_MULTI_BB_RANGE,
    FEAT_OMIT_BB_ENTRIES,
    FEAT_PGO_ANALYSIS,
    FEAT_PGO_BLOCKS,
    FEAT_POST_LINK_CFG,
    FEATURE_MIN_VERSION,
    KNOWN_FEATURES,
    KNOWN_METADATA,
    MAX_VERSION,
    METADATA_MAX,
    SUCCESSOR_ULEBS,
    UINT32_MAX,
    VERSION_BLOCK_IDS,
    VERSION_FEATURE_U16,
    VERSION_UNVERSIONED,
    min_block_bytes,
)
from bbmap.formats.leb128 import LEB_GROUP_BITS, LEB_MORE, LEB_PAYLOAD, MAX_ULEB_BYTES
from bbmap.model import BlockMap, BlockMapBuilder

U32 = UINT32_MAX
# Records with any of these features leave the inline walk of common records (one range of
# plain or callsite entries, no PGO) for the general walk.
_GENERAL_FEATURES = KNOWN_FEATURES & ~FEAT_CALLSITE_OFFSETS


class _Stop(Exception):
    """The fast walk cannot continue at this function; the reference takes over."""


_SLICE = 1 << 14  # bytes per np.flatnonzero call: its int64 result is reused heap
_TERM_BYTES = bytes(1 if i < LEB_MORE else 0 for i in range(256))  # for bytes.translate


def _terminators(mask: np.ndarray, itype: type) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the True bytes of ``mask`` as ``itype``, and the indices of the
    multi-byte tokens (those whose terminator does not directly follow the previous
    one), found a slice at a time: one int64 ``flatnonzero`` or ``diff`` of a 10 MB
    map would be tens of MB to fault in."""
    term = np.empty(int(np.count_nonzero(mask)), itype)
    multi = []
    at, last = 0, -1
    for s in range(0, len(mask), _SLICE):
        idx = np.flatnonzero(mask[s:s + _SLICE])
        if not len(idx):
            continue
        idx += s
        term[at:at + len(idx)] = idx
        multi.append(np.flatnonzero(np.diff(idx, prepend=last) > 1) + at)
        at, last = at + len(idx), int(idx[-1])
    return term, (np.concatenate(multi) if multi else np.zeros(0, np.int64))


def _tokens(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Terminator positions, ULEB values ending there, and a per-token 'malformed' flag.

    Indices are int32 and values uint32 unless the section needs wider (less memory
    to fault in: a clang-sized map has ~10 million tokens).  Multi-byte tokens are
    the few decoded byte by byte.
    """
    itype = np.int32 if len(b) < 2**30 else np.int64
    term, multi = _terminators(b < LEB_MORE, itype)
    ntok = len(term)
    ml = term[multi] - np.where(multi > 0, term[np.maximum(multi - 1, 0)], -1)
    maxlen = int(ml.max()) if len(ml) else 1
    vtype = np.uint64 if maxlen > 4 else np.uint32
    vals = b[term].astype(vtype)
    vals &= LEB_PAYLOAD
    bad = np.zeros(ntok, dtype="?")
    if len(multi):
        st = term[multi].astype(np.int64) - ml + 1
        v = np.zeros(len(multi), np.uint64)
        for i in range(min(maxlen, MAX_ULEB_BYTES)):
            sel = np.flatnonzero(ml > i)
            v[sel] |= (b[st[sel] + i] & LEB_PAYLOAD).astype(np.uint64) \
                << np.uint64(LEB_GROUP_BITS * i)
        vals[multi] = v.astype(vtype)
        if maxlen >= MAX_ULEB_BYTES:
            bad[multi] = (ml > MAX_ULEB_BYTES) | ((ml == MAX_ULEB_BYTES) & (b[term[multi]] > 1))
    return term, vals, bad


class _SimpleRun(NamedTuple):
    """Consecutive common records (one range each), as columns: record start,
    version, feature, address field offset and value, block count, and the range's
    (first block token, entry width or -1 for a callsite chain)."""

    pos: np.ndarray
    ver: np.ndarray
    feat: np.ndarray
    addr_at: np.ndarray
    raw: np.ndarray
    nb: np.ndarray
    run: np.ndarray


class _Walker:
    """Token-level walk of one section; collects token indices per block."""

    def __init__(self, inp: MapInput) -> None:
        self.inp = inp
        data = inp.data
        self.data = data
        self.n = len(data)
        b = np.frombuffer(data, dtype=np.uint8)
        term, vals, bad = _tokens(b)
        # one byte per data byte, 1 where a token ends: token counts of short spans
        self.is_term = data.translate(_TERM_BYTES)
        self._cumm: memoryview | None = None
        self.term_np, self.vals_np, self.bad_np = term, vals, bad
        self.bad = memoryview(bad.view(np.uint8))
        self.T = memoryview(term)
        self.V = vals  # patched in place when a token starts after a fixed field
        self.Vm = memoryview(vals)
        self.ntok = len(term)
        end = "<" if inp.little else ">"
        self.addr = struct.Struct(end + ("Q" if inp.address_size == 8 else "I")).unpack_from
        self.u16 = struct.Struct(end + "H").unpack_from
        self.asz = inp.address_size
        # outputs (one entry per function / range / block / successor)
        self.f_off: list[int] = []
        self.f_ver: list[int] = []
        self.f_feat: list[int] = []
        self.f_nr: list[int] = []
        self.f_entry_tok: list[int] = []
        self.r_addr_off: list[int] = []
        self.r_raw: list[int] = []
        self.r_nb: list[int] = []
        self.r_nblk: list[int] = []  # blocks actually present
        # per range: (first token, width) a run, (first token, -1) a callsite chain,
        # (-1, 0) blocks listed in x_ks (hash ranges) or none (omitted entries)
        self.r_run: list[tuple[int, int]] = []
        self.x_ks: list[int] = []  # explicit blocks: first token
        self.x_hash: list[int] = []  # byte position of the hash, -1 if none
        self.p_start: list[int] = []  # PGO: first token of each block's entry
        self.simple: list[_SimpleRun] = []  # records run_simple walked, as columns

    def release_walk_tables(self) -> None:
        """Drop what only the walk needs (terminator positions, byte -> token counts):
        the column gathering that follows is the memory peak of a decode."""
        self.T = self._cumm = None  # type: ignore[assignment]
        self.term_np = self.is_term = None  # type: ignore[assignment]

    @property
    def cumm(self) -> memoryview:
        """``cumm[p]``: the number of tokens ending before byte ``p`` (built when the
        general walk first needs it; common records count their few bytes instead)."""
        if self._cumm is None:
            b = np.frombuffer(self.data, np.uint8)
            ctype = np.int32 if len(b) < 2**31 - 1 else np.int64
            cum = np.zeros(len(b) + 1, dtype=ctype)
            np.cumsum(b < LEB_MORE, dtype=ctype, out=cum[1:])
            self._cumm = memoryview(cum)
        return self._cumm

    def tok(self, pos: int) -> int:
        """Index of the token starting at byte ``pos`` (patching its value if needed)."""
        if pos >= self.n:
            raise _Stop
        k = self.cumm[pos]
        if k >= self.ntok:
            raise _Stop
        start = self.T[k - 1] + 1 if k else 0
        if start != pos:
            val = shift = 0
            p = pos
            end = self.T[k]
            if end - pos + 1 > MAX_ULEB_BYTES:
                raise _Stop
            while p <= end:
                val |= (self.data[p] & LEB_PAYLOAD) << shift
                shift += LEB_GROUP_BITS
                p += 1
            if val >> (8 * self.V.itemsize):
                raise _Stop
            self.V[k] = val
            self.bad_np[k] = False
        return k

    def run_simple(self, pos: int, versioned: bool) -> int:
        """Walk consecutive common records inline (one range, plain or callsite entries,
        no PGO); return where a record needing the general walk (or the end) starts."""
        data, n, T, Vm, bad = self.data, self.n, self.T, self.Vm, self.bad
        asz, ntok, little = self.asz, self.ntok, self.inp.little
        count = self.is_term.count
        kpos = bisect_left(T, pos)  # tokens ending before pos
        starts: list[int] = []
        firsts: list[int] = []
        s_pos, s_k0 = starts.append, firsts.append
        v = feat = hdr = 0
        # entries without IDs only in V0 (version 1 stops)
        width = ENTRY_ULEBS if versioned else ENTRY_ULEBS_NO_ID
        try:
            while pos < n:
                if versioned:
                    v = data[pos]
                    if v >= VERSION_FEATURE_U16:
                        feat, high = (data[pos + 1], data[pos + 2]) if little \
                            else (data[pos + 2], data[pos + 1])
                        if high:
                            return pos
                        hdr = 3
                    elif v >= VERSION_BLOCK_IDS:
                        feat = data[pos + 1]
                        hdr = 2
                    else:
                        return pos
                    if feat & _GENERAL_FEATURES or v > MAX_VERSION:
                        return pos
                p = pos + hdr + asz
                k = kpos + count(1, pos, p)
                # (an index past the tokens raises IndexError: the general walk decides)
                if T[k - 1] + 1 != p or bad[k]:
                    return pos
                nb = Vm[k]
                if nb * (CALLSITE_ENTRY_ULEBS if feat else width) > n - T[k] - 1:
                    return pos
                k += 1
                k0 = k
                if feat:  # blocks are [id, offset, n, n x callsite, size, md]
                    if nb & 1:
                        k += CALLSITE_ENTRY_ULEBS + Vm[k + CALLSITE_COUNT_INDEX]
                    for _b in range(nb >> 1):  # two hops a turn: less loop overhead
                        k += CALLSITE_ENTRY_ULEBS + Vm[k + CALLSITE_COUNT_INDEX]
                        k += CALLSITE_ENTRY_ULEBS + Vm[k + CALLSITE_COUNT_INDEX]
                else:
                    k += width * nb
                if k > ntok:
                    return pos
                s_pos(pos)
                s_k0(k0)
                pos = T[k - 1] + 1
                kpos = k
        except IndexError:
            return pos
        finally:
            self._add_simple(starts, firsts, versioned)
        return pos

    def _add_simple(self, starts: list[int], firsts: list[int], versioned: bool) -> None:
        """The columns of records :meth:`run_simple` walked, derived vectorized from
        each record's start and first block token (the walk itself records no more)."""
        if not starts:
            return
        d = np.frombuffer(self.data, np.uint8)
        pos = np.array(starts, np.int64)
        k0 = np.array(firsts, np.int64)
        if versioned:
            ver = d[pos].astype(np.int64)
            v5 = ver >= VERSION_FEATURE_U16
            lo = d[pos + 1].astype(np.int64)
            hi = d[np.where(v5, pos + 2, pos + 1)].astype(np.int64)
            if self.inp.little:
                feat = np.where(v5, lo | hi << 8, lo)
            else:
                feat = np.where(v5, lo << 8 | hi, lo)
            addr_at = pos + np.where(v5, 3, 2)
        else:
            ver = feat = np.zeros(len(pos), np.int64)
            addr_at = pos
        fixed = d[addr_at[:, None] + np.arange(self.asz)]
        end = "<" if self.inp.little else ">"
        raw = np.ascontiguousarray(fixed).view(end + ("u8" if self.asz == 8 else "u4"))
        nb = self.V[k0 - 1].astype(np.int64)
        width = np.where(feat != 0, -1, np.where(ver >= VERSION_BLOCK_IDS, ENTRY_ULEBS,
                                                 ENTRY_ULEBS_NO_ID))
        self.simple.append(_SimpleRun(pos, ver, feat, addr_at, raw.ravel().astype("u8"), nb,
                                      np.stack([k0, width], axis=1)))

    def function(self, pos: int, versioned: bool) -> int:
        """Walk one record at ``pos``; return the next record's position."""
        data, n = self.data, self.n
        if versioned:
            if pos + 2 > n:
                raise _Stop
            v = data[pos]
            if not 1 <= v <= MAX_VERSION:
                raise _Stop
            if v >= VERSION_FEATURE_U16:
                if pos + 3 > n:
                    raise _Stop
                feat = self.u16(data, pos + 1)[0]
                pos += 3
            else:
                feat = data[pos + 1]
                pos += 2
            if v >= VERSION_BLOCK_IDS and feat & ~KNOWN_FEATURES:
                raise _Stop
            eff = feat if v >= VERSION_BLOCK_IDS else 0
        else:
            v = feat = eff = 0
        T, Vm = self.T, self.Vm
        if not eff & _GENERAL_FEATURES:
            # the common record: one range of plain or callsite entries, no PGO
            raw = self.addr(data, pos)[0]
            self.r_addr_off.append(pos)
            self.r_raw.append(raw)
            k = self.tok(pos + self.asz)
            nb = Vm[k]
            width = ENTRY_ULEBS if v >= VERSION_BLOCK_IDS else ENTRY_ULEBS_NO_ID
            if self.bad[k] or nb > U32 or nb * (CALLSITE_ENTRY_ULEBS if eff else width) \
                    > n - T[k] - 1:
                raise _Stop
            k += 1
            self.r_nb.append(nb)
            self.r_nblk.append(nb)
            if eff:
                self.r_run.append((k, -1))
                for _b in range(nb):
                    k += CALLSITE_ENTRY_ULEBS + Vm[k + CALLSITE_COUNT_INDEX]
            else:
                self.r_run.append((k, width))
                k += width * nb
            if k > self.ntok:
                raise _Stop
            self.f_ver.append(v)
            self.f_feat.append(feat)
            self.f_nr.append(1)
            self.f_entry_tok.append(-1)
            return T[k - 1] + 1
        if eff & FEAT_MULTI_BB_RANGE:
            k = self.tok(pos)
            nr = Vm[k]
            if self.bad[k] or nr == 0 or nr > U32 or nr * (self.asz + 1) > n - T[k] - 1:
                raise _Stop
            pos = T[k] + 1
        else:
            nr = 1
        minb = min_block_bytes(v, feat)
        hasid = 1 if v >= VERSION_BLOCK_IDS else 0
        width = ENTRY_ULEBS_NO_ID + hasid
        cs_on = eff & FEAT_CALLSITE_OFFSETS
        hash_on = eff & FEAT_BB_HASH
        total_blocks = 0
        for _ in range(nr):
            if pos + self.asz > n:
                raise _Stop
            self.r_addr_off.append(pos)
            self.r_raw.append(self.addr(data, pos)[0])
            pos += self.asz
            k = self.tok(pos)
            nb = Vm[k]
            if self.bad[k] or nb > U32 or nb * minb > n - T[k] - 1:
                raise _Stop
            k += 1
            self.r_nb.append(nb)
            if eff & FEAT_OMIT_BB_ENTRIES:
                self.r_nblk.append(0)
                self.r_run.append((-1, 0))
                pos = T[k - 1] + 1
                continue
            self.r_nblk.append(nb)
            total_blocks += nb
            if not cs_on and not hash_on:
                if k + width * nb > self.ntok:
                    raise _Stop
                self.r_run.append((k, width))
                k += width * nb
                pos = T[k - 1] + 1
                if pos > n:
                    raise _Stop
                continue
            self.r_run.append((-1, 0))
            ntok = self.ntok
            cs1 = 1 if cs_on else 0
            pos = T[k - 1] + 1
            if not hash_on:
                # callsites only: still pure tokens; hop block to block by their
                # callsite counts (the block starts are recovered vectorized later)
                self.r_run[-1] = (k, -1)
                for _b in range(nb):
                    k += CALLSITE_ENTRY_ULEBS + Vm[k + CALLSITE_COUNT_INDEX]
                if k > ntok:
                    raise _Stop
                pos = T[k - 1] + 1
                continue
            for _b in range(nb):
                if k + width + cs1 > ntok:
                    raise _Stop
                ncs = Vm[k + CALLSITE_COUNT_INDEX - 1 + hasid] if cs_on else 0
                if ncs > U32 or k + width + ncs + cs1 > ntok:
                    raise _Stop
                self.x_ks.append(k)
                k += width + ncs + cs1
                hp = T[k - 1] + 1
                he = hp + BLOCK_HASH_BYTES
                if he > n:
                    raise _Stop
                self.x_hash.append(hp)
                k = self.tok(he) if he < n else ntok
                pos = he
        entry_tok = -1
        if eff & FEAT_PGO_ANALYSIS:
            k = self.tok(pos)
            if eff & FEAT_FUNC_ENTRY_COUNT:
                entry_tok = k
                k += 1
            if eff & FEAT_PGO_BLOCKS:
                # per block: [freq] [postlink freq] [n, n x (id, prob [, postlink])];
                # only each block's first token is kept, the rest is derived later
                post = 1 if eff & FEAT_POST_LINK_CFG else 0
                lead = (1 if eff & FEAT_BB_FREQ else 0) + post
                if eff & FEAT_BR_PROB:
                    app = self.p_start.append
                    sw = SUCCESSOR_ULEBS + post
                    step = lead + 1
                    for _b in range(total_blocks):
                        app(k)
                        k += step + Vm[k + lead] * sw
                else:
                    self.p_start.extend(range(k, k + lead * total_blocks, lead))
                    k += lead * total_blocks
            if k > self.ntok:
                raise _Stop
            pos = T[k - 1] + 1
        self.f_ver.append(v)
        self.f_feat.append(feat)
        self.f_nr.append(nr)
        self.f_entry_tok.append(entry_tok)
        return pos


def decode_section_fast(inp: MapInput) -> tuple[BlockMap, list[Diagnostic]]:
    if inp.kind == KIND_BB_INFO or not inp.data:
        from bbmap.binary.decode_ref import decode_section_ref

        return decode_section_ref(inp)
    w = _Walker(inp)
    versioned = inp.kind != KIND_V0
    pos = 0
    stop_at = None
    while pos < w.n:
        pos = w.run_simple(pos, versioned)
        if pos >= w.n:
            break
        committed = (len(w.r_nb), len(w.x_ks), len(w.p_start))
        try:
            nxt = w.function(pos, versioned)
        except (_Stop, IndexError, struct.error):
            _restore(w, committed)
            stop_at = pos
            break
        w.f_off.append(pos)
        pos = nxt
    w.release_walk_tables()
    m, first_bad = _assemble(w, inp)
    diags: list[Diagnostic] = []
    if first_bad is not None:
        stop_at = int(m.func_map_offset[first_bad])
        m = _truncate(m, first_bad)
    notes = Notes(inp)
    md_or = _md_or(m)
    ver, feat = m.func_version.astype(np.int64), m.func_feature.astype(np.int64)
    odd = ((ver == 1) & (feat != 0)) | ((md_or & ~KNOWN_METADATA) != 0)
    for bit, need in FEATURE_MIN_VERSION.items():
        if need > VERSION_BLOCK_IDS:
            odd |= (ver >= VERSION_BLOCK_IDS) & ((feat & bit) != 0) & (ver < need)
    for f in np.flatnonzero(odd).tolist():
        check_record(notes, int(m.func_map_offset[f]), int(ver[f]), int(feat[f]),
                     int(md_or[f]))
    diags.extend(notes.diagnostics())
    if stop_at is not None:
        records, rdiags = decode_records(inp, start=stop_at)
        diags.extend(rdiags)
        if records:
            b = BlockMapBuilder(list(m.sources))
            for r in records:
                b.add(r)
            m = BlockMap.concat([m, b.build()])
            m.sources = [inp.source] if inp.source is not None else []
    return m, diags


def _md_or(m: BlockMap) -> np.ndarray:
    """Per function: the OR of its blocks' metadata."""
    out = np.zeros(m.num_functions, np.int64)
    if not m.num_blocks:
        return out
    fb = m.range_block_ptr[m.func_range_ptr]
    nonempty = np.flatnonzero(np.diff(fb) > 0)
    if len(nonempty):
        out[nonempty] = np.bitwise_or.reduceat(m.block_md, fb[:-1][nonempty])
    return out


def _restore(w: _Walker, committed: tuple[int, int, int]) -> None:
    """Forget the partial function a stop interrupted (function lists grow at the end)."""
    nf = len(w.f_off)
    for name in ("f_ver", "f_feat", "f_nr", "f_entry_tok"):
        del getattr(w, name)[nf:]
    for names, n in zip(_LISTS, committed):
        for name in names:
            del getattr(w, name)[n:]


_LISTS = (("r_addr_off", "r_raw", "r_nb", "r_nblk", "r_run"),
          ("x_ks", "x_hash"),
          ("p_start",))


def _truncate(m: BlockMap, nf: int) -> BlockMap:
    """The first ``nf`` functions of ``m``."""
    out = BlockMap()
    nr = int(m.func_range_ptr[nf])
    nb = int(m.range_block_ptr[nr])
    ncs = int(m.block_cs_ptr[nb])
    ns = int(m.block_succ_ptr[nb])
    for name in BlockMap.ARRAY_FIELDS:
        a = getattr(m, name)
        if name == "func_range_ptr":
            setattr(out, name, a[:nf + 1])
        elif name == "range_block_ptr":
            setattr(out, name, a[:nr + 1])
        elif name in ("block_cs_ptr", "block_succ_ptr"):
            setattr(out, name, a[:nb + 1])
        elif name.startswith("func_"):
            setattr(out, name, a[:nf])
        elif name.startswith("range_"):
            setattr(out, name, a[:nr])
        elif name == "callsite_offsets":
            setattr(out, name, a[:ncs])
        elif name.startswith("succ_"):
            setattr(out, name, a[:ns])
        else:
            setattr(out, name, a[:nb])
    out.sources = list(m.sources)
    out.func_name = list(m.func_name[:nf])
    return out


class _Columns(NamedTuple):
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


def _columns(w: _Walker) -> _Columns:
    """Join the records the general walk listed with the runs :meth:`_Walker.run_simple`
    kept as columns; both are in file order, so records sort by their start and ranges
    by their address field's offset."""
    F = len(w.f_off)
    R = sum(w.f_nr[:F])
    g = _Columns(np.array(w.f_off, np.int64), np.array(w.f_ver[:F], np.int64),
                 np.array(w.f_feat[:F], np.int64), np.array(w.f_nr[:F], np.int64),
                 np.array(w.f_entry_tok[:F], np.int64), np.array(w.r_addr_off[:R], np.int64),
                 np.array(w.r_raw[:R], "u8"), np.array(w.r_nb[:R], np.int64),
                 np.array(w.r_nblk[:R], np.int64),
                 np.array(w.r_run[:R], np.int64).reshape(-1, 2))
    if not w.simple:
        return g
    s = w.simple
    n = sum(len(x.pos) for x in s)
    parts = [g, _Columns(*(np.concatenate(col) for col in (
        [x.pos for x in s], [x.ver for x in s], [x.feat for x in s],
        [np.ones(n, np.int64)], [np.full(n, -1, np.int64)], [x.addr_at for x in s],
        [x.raw for x in s], [x.nb for x in s], [x.nb for x in s], [x.run for x in s])))]
    if not F:
        return parts[1]
    out = _Columns(*(np.concatenate([p[i] for p in parts]) for i in range(len(g))))
    fo = np.argsort(out.f_off, kind="stable")
    ro = np.argsort(out.r_addr_off, kind="stable")
    return _Columns(*(col[fo] for col in out[:5]), *(col[ro] for col in out[5:]))


def _assemble(w: _Walker, inp: MapInput) -> tuple[BlockMap, int | None]:
    """Gather the columns; return the map and the first function failing a value check."""
    m = BlockMap()
    m.sources = [inp.source] if inp.source is not None else []
    V = w.V
    c = _columns(w)
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
    itype = np.int32 if w.ntok < 2**31 - 64 else np.int64
    ks = np.empty(B, itype)
    run = c.r_run
    is_run = (run[:, 0] >= 0) & (run[:, 1] > 0)
    if is_run.any():
        rr = np.flatnonzero(is_run)
        pos_blocks = expand_ranges(m.range_block_ptr[rr], r_nblk[rr])
        ks[pos_blocks] = expand_ranges(run[rr, 0], r_nblk[rr], run[rr, 1])
    is_chain = run[:, 1] < 0
    if is_chain.any():
        cr = np.flatnonzero(is_chain & (r_nblk > 0))
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
    bad_tok = w.bad_np
    any_bad_tok = bool(bad_tok.any())
    wide = V.dtype.itemsize > 4
    bad_blocks: list[np.ndarray] = []
    off_t = ks + hasid
    size_t = off_t + 1
    f_cs = (feff & FEAT_CALLSITE_OFFSETS) != 0
    ncs_full = np.zeros(B, np.int64)
    cs_idx = np.zeros(0, np.int64)
    if f_cs.any():
        # every block has a callsite list in a clang-22 map: plain slices then, not
        # fancy indexing (each pass over a million blocks costs tens of ms otherwise)
        every = bool(f_cs.all())
        cs_idx = np.arange(B) if every else np.flatnonzero(np.repeat(f_cs, blocks_per_func))
        sel = slice(None) if every else cs_idx
        ncs_tok = off_t[sel] + 1
        ncs_c = V[ncs_tok].astype(np.int64)
        bad_ncs = (ncs_c > U32) if wide else np.zeros(len(cs_idx), "?")
        if any_bad_tok:
            bad_ncs |= bad_tok[ncs_tok]
        if bad_ncs.any():
            bad_blocks.append(cs_idx[bad_ncs])
            ncs_c[bad_ncs] = 0
        ncs_full[sel] = ncs_c
        size_t[sel] += 1 + ncs_c
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
    # callsites: running sums of the deltas, per block
    m.block_cs_ptr = np.zeros(B + 1, np.int64)
    np.cumsum(ncs_full, out=m.block_cs_ptr[1:])
    cs_blocks = np.flatnonzero(ncs_full)
    size = raw_size.astype(np.uint64)
    cs_abs = np.zeros(0, np.uint64)
    if len(cs_blocks):
        cs_tok = expand_ranges(off_t[cs_blocks] + 2, ncs_full[cs_blocks])
        deltas = V[cs_tok].astype(np.uint64)
        wide_delta = (deltas > U32) if wide else None
        cs_abs = segment_cumsum(deltas, m.block_cs_ptr[np.append(cs_blocks, B)])
        last_cs = cs_abs[m.block_cs_ptr[cs_blocks + 1] - 1]
        size[cs_blocks] += last_cs
        bad_cs = cs_abs > U32
        if wide:
            bad_cs |= wide_delta
        if any_bad_tok:
            bad_cs |= bad_tok[cs_tok]
        if bad_cs.any():
            bad_blocks.append(np.repeat(cs_blocks, ncs_full[cs_blocks])[bad_cs])
    # value checks: metadata over 8 bits, 32-bit fields over 32 bits, malformed tokens
    bad_block = raw_md > METADATA_MAX
    if wide:
        bad_block |= (raw_off > U32) | (raw_size > U32) | (raw_id > U32)
    if any_bad_tok:
        bad_block |= bad_tok[off_t] | bad_tok[size_t] | bad_tok[md_t]
        if not isinstance(hasid, int) or hasid:
            bad_block |= bad_tok[ks] & (hasid == 1)
    bad_blocks.append(np.flatnonzero(bad_block))
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
    m.block_id = raw_id.astype("u4")
    m.block_offset = rel
    m.block_size = size
    m.block_md = raw_md.astype("u1")
    m.callsite_offsets = cs_abs.astype("u4")
    # hashes
    m.block_hash = np.zeros(B, "u8")
    if hpos is not None:
        hb = np.flatnonzero(hpos >= 0)
        if len(hb):
            raw = np.frombuffer(w.data, np.uint8)
            idx = hpos[hb][:, None] + np.arange(BLOCK_HASH_BYTES)
            dt = np.dtype("<u8" if inp.little else ">u8")
            m.block_hash[hb] = np.ascontiguousarray(raw[idx]).view(dt).ravel().astype("u8")
    # PGO
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
        m.func_name = [None] * F
        first_bad = int(np.argmax(bad_func)) if bad_func.any() else None
        return m, first_bad
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
    m.func_name = [None] * F
    first_bad = int(np.argmax(bad_func)) if bad_func.any() else None
    return m, first_bad
