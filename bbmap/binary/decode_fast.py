"""The fast map decoder: numpy over ULEB tokens, records found vectorized.

Almost every field of a map is a ULEB128.  Every byte below 0x80 ends one, so the
terminator positions, computed once with numpy, split the section into *tokens*
and the value of every token is computed vectorized.  A function's block entries
are then the next 4N (3N before version 2) tokens, or, with callsite offsets, a
chain of blocks each 5 tokens plus its callsite count.  Common records (one range,
plain or callsite entries, no PGO: what compilers emit) are found all at once: every
byte that could start one is a *candidate*, every candidate's record is walked as if
it started there (chains hop one block per numpy step for all candidates together),
and a run of candidates each ending where the next begins is a run of records
(``_Walker._candidates``).  Other records, and a record holding a false candidate,
are walked in Python, reading only the few fixed-width fields (version, feature,
addresses, hashes) and skipping whole runs of tokens.  Either way the walk records
token indices; all per-block columns are gathered at the end with fancy indexing.

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

from bbmap.binary.decode_assemble import assemble
from bbmap.binary.decode_ref import decode_records
from bbmap.binary.mapinput import KIND_BB_INFO, KIND_V0, MapInput, Notes, check_record
from bbmap.binary.uleb_tokens import TERM_BYTES, uleb_tokens
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
    SUCCESSOR_ULEBS,
    UINT32_MAX,
    VERSION_BLOCK_IDS,
    VERSION_FEATURE_U16,
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


class _SimpleRun(NamedTuple):
    """Consecutive common records (one range each), as columns: record start,
    version, feature, address field offset and value, block count, the range's
    (first block token, entry width or -1 for a callsite chain), and where a callsite
    chain's block starts are in the walker's ``hop_ks`` (-1: not recorded)."""

    pos: np.ndarray
    ver: np.ndarray
    feat: np.ndarray
    addr_at: np.ndarray
    raw: np.ndarray
    nb: np.ndarray
    run: np.ndarray
    hop: np.ndarray


class _Candidates(NamedTuple):
    """Where common records of one version could start (:meth:`_Walker._candidates`):
    byte position, first block token, end byte (-1: not walkable from there), the
    candidates whose end is not the next candidate's start, and where each callsite
    chain's block starts are in the walker's ``hop_ks`` (-1: not a chain)."""

    pos: np.ndarray
    k0: np.ndarray
    end_byte: np.ndarray
    breaks: np.ndarray
    hop: np.ndarray


# Below this many chains still hopping, the rest are finished in Python (a numpy step
# costs microseconds however few chains it moves; a big function has thousands of blocks).
_PY_CHAINS = 64
# At most this many records walked one by one between two vectorized attempts (see
# _Walker.run_simple): a run of records spoiled by false candidates is walked at the
# one-by-one walk's speed, and a good run after it waits at most this many records.
_MAX_BURST = 1024


def _hop_chains(V: np.ndarray, k0: np.ndarray, nb: np.ndarray, lim: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """End token of each callsite-entry chain: ``nb`` blocks from token ``k0``, a block
    being ``CALLSITE_ENTRY_ULEBS`` tokens plus its callsite count (the token at
    ``CALLSITE_COUNT_INDEX``); every chain moves one block per step, together.  A
    chain passing ``lim`` stops there (its end is then > lim: no record of its own).

    The token where each block starts is recorded on the way (the column gathering
    needs them): chain i's go to ``hops[at[i]:]``, one slot per block it can hold
    before ``lim`` (a block is at least ``CALLSITE_ENTRY_ULEBS`` tokens), so the slots
    of a chain that ends by ``lim`` hold all its blocks and chains that end where the
    next begins are contiguous.  Returns (ends, hops, at)."""
    end = k0.copy()
    slots = np.minimum(nb, np.maximum(lim - k0, 0) // CALLSITE_ENTRY_ULEBS + 1)
    at = np.zeros(len(k0) + 1, np.int64)
    np.cumsum(slots, out=at[1:])
    hops = np.empty(int(at[-1]), np.int64 if len(V) >= 2**31 else np.int32)
    if not len(k0):
        return end, hops, at[:-1]
    last = len(V) - 1
    cap = np.uint64(len(V)) if V.dtype.itemsize > 4 else np.uint32(min(len(V), 2**32 - 1))
    cur, left, lm, idx = k0.copy(), nb.copy(), lim, np.arange(len(k0))
    # a chain still hopping at step s has s < nb and k0 + 5s <= cur <= lim: s < its slots
    slot = at[:-1].copy()
    while len(idx) > _PY_CHAINS:
        hops[slot] = cur
        slot += 1
        ncs = np.minimum(V[np.minimum(cur + CALLSITE_COUNT_INDEX, last)], cap)
        cur += CALLSITE_ENTRY_ULEBS
        cur += ncs.astype(np.int64)
        left -= 1
        done = (left == 0) | (cur > lm)
        if done.any():
            end[idx[done]] = cur[done]
            keep = ~done
            cur, left, lm, idx, slot = cur[keep], left[keep], lm[keep], idx[keep], slot[keep]
    Vm = memoryview(V)  # the few long chains: one Python hop per block
    for c, k, nleft, stop, s in zip(idx.tolist(), cur.tolist(), left.tolist(), lm.tolist(),
                                    slot.tolist()):
        starts = []
        while nleft and k <= stop:
            starts.append(k)
            k += CALLSITE_ENTRY_ULEBS + Vm[min(k + CALLSITE_COUNT_INDEX, last)]
            nleft -= 1
        hops[s:s + len(starts)] = starts
        end[c] = k
    return end, hops, at[:-1]


class _Walker:
    """Token-level walk of one section; collects token indices per block."""

    def __init__(self, inp: MapInput) -> None:
        self.inp = inp
        data = inp.data
        self.data = data
        self.n = len(data)
        b = np.frombuffer(data, dtype=np.uint8)
        term, vals, bad, cont = uleb_tokens(b)
        self.cont = cont  # continuation bytes: tokens before byte p = p - those before p
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
        # block start tokens of the candidates' callsite chains (see _hop_chains), one
        # array per candidate table; _SimpleRun.hop indexes their concatenation
        self.hop_arrays: list[np.ndarray] = []
        self._cands: dict[int, _Candidates] = {}  # by version: see _candidates

    def release_walk_tables(self) -> None:
        """Drop what only the walk needs (terminator positions, byte -> token counts):
        the column gathering that follows is the memory peak of a decode."""
        self.T = self._cumm = None  # type: ignore[assignment]
        self.term_np = self.cont = None  # type: ignore[assignment]
        self._cands = {}

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
        """Walk consecutive common records (one range, plain or callsite entries, no
        PGO); return where a record needing the general walk (or the end) starts.

        Versioned maps take whole runs of records from :meth:`_run_vectorized`; a
        common record it cannot vouch for is walked here one by one, and after each
        vectorized attempt that makes no progress twice as many records as the last time
        (up to ``_MAX_BURST``), so a section of records each holding a false candidate
        costs about what the one-by-one walk costs.  The records walked one by one are
        kept as one column run (no numpy call per record)."""
        if not versioned:
            return self._walk_simple(pos, versioned)
        one_by_one: tuple[list[int], list[int]] = ([], [])
        burst = 1
        try:
            while pos < self.n:
                nxt = self._run_vectorized(pos)
                burst = 1 if nxt != pos else min(2 * burst, _MAX_BURST)
                pos = nxt
                if pos >= self.n:
                    break
                nxt = self._walk_simple(pos, versioned, limit=burst, out=one_by_one)
                if nxt == pos:
                    break
                pos = nxt
        finally:
            self._add_simple(*one_by_one, versioned)
        return pos

    def _candidates(self, version: int) -> _Candidates:
        """Every byte where a common record of ``version`` could start, walked at once.

        A candidate is a byte holding ``version`` followed by a feature field with no
        general feature and an address whose last byte ends a token, so that the block
        count starts a token: the header checks of :meth:`_walk_simple`.  Each
        candidate's record is then walked as if it started there -- fixed-width entries
        by arithmetic, callsite entries by one hop per block for all candidates at once
        -- and a walk is abandoned when it runs past the next candidate (so junk
        candidates inside records cost no more than the tokens up to the next one).
        Candidates whose record ends exactly where the next candidate starts are
        *linked*; a chain of links from a known record start is a run of real records,
        decoded exactly as the one-by-one walk decodes them (each record's decoding is
        a function of its start alone)."""
        cached = self._cands.get(version)
        if cached is not None:
            return cached
        d = np.frombuffer(self.data, np.uint8)
        n, asz = self.n, self.asz
        u16 = version >= VERSION_FEATURE_U16
        hdr = 3 if u16 else 2
        P = np.flatnonzero(d[:max(n - hdr - asz, 0)] == version)
        if u16:
            lo, hi = (d[P + 1], d[P + 2]) if self.inp.little else (d[P + 2], d[P + 1])
            ok = hi == 0
        else:
            lo = d[P + 1]
            ok = np.ones(len(P), "?")
        ok &= (lo & _GENERAL_FEATURES) == 0
        ok &= d[P + (hdr + asz - 1)] < LEB_MORE  # the block count starts a token
        P = P[ok]
        feat = lo[ok].astype(np.int64)
        T = self.term_np
        # tokens ending before each candidate and before its block count: the bytes
        # before it less the continuation bytes before it (few: a short search)
        before = P - np.searchsorted(self.cont, P)
        knb = P + (hdr + asz)
        knb -= np.searchsorted(self.cont, knb)
        ntok = self.ntok
        inside = knb < ntok
        P, feat, knb, before = P[inside], feat[inside], knb[inside], before[inside]
        # (counts above the section's size fail the room check below either way)
        nb = np.minimum(self.V[knb], n + 1).astype(np.int64)
        ok = ~self.bad_np[knb]
        width = ENTRY_ULEBS if version >= VERSION_BLOCK_IDS else ENTRY_ULEBS_NO_ID
        room = n - 1 - T[knb].astype(np.int64)
        ok &= nb * np.where(feat != 0, CALLSITE_ENTRY_ULEBS, width) <= room
        P, feat, knb, nb, before = P[ok], feat[ok], knb[ok], nb[ok], before[ok]
        k0 = knb + 1
        # a record ending where the next candidate starts ends at token lim
        lim = np.empty(len(P), np.int64)
        lim[:-1] = before[1:]
        if len(P):
            lim[-1] = ntok
        end = k0 + np.where(feat != 0, 0, width * nb)
        chain = np.flatnonzero((feat != 0) & (nb > 0))
        end[chain], hops, at = _hop_chains(self.V, k0[chain], nb[chain], lim[chain])
        hop = np.full(len(P), -1, np.int64)
        hop[chain] = at + sum(len(h) for h in self.hop_arrays)
        self.hop_arrays.append(hops)
        end[end > lim] = -1
        end_byte = np.full(len(P), -1, np.int64)
        valid = np.flatnonzero(end >= 0)
        end_byte[valid] = T[end[valid] - 1].astype(np.int64) + 1
        nxt = np.empty(len(P), np.int64)
        nxt[:-1] = P[1:]
        if len(P):
            nxt[-1] = -2
        breaks = np.flatnonzero(end_byte != nxt)
        cand = _Candidates(P, k0, end_byte, breaks, hop)
        self._cands[version] = cand
        return cand

    def _run_vectorized(self, pos: int) -> int:
        """Take the linked run of candidate records starting at ``pos`` (see
        :meth:`_candidates`); return where the walk must look next."""
        v = self.data[pos]
        if not VERSION_BLOCK_IDS <= v <= MAX_VERSION:
            return pos
        c = self._candidates(v)
        i = int(np.searchsorted(c.pos, pos))
        if i >= len(c.pos) or c.pos[i] != pos:
            return pos
        j = int(c.breaks[np.searchsorted(c.breaks, i)])  # the last candidate ends a break
        stop = int(c.end_byte[j])
        if stop < 0:  # record j could not be walked from here: stop before it
            stop = int(c.pos[j])
        else:
            j += 1
        if j > i:
            self._add_simple(c.pos[i:j], c.k0[i:j], True, c.hop[i:j])
        return stop

    def _walk_simple(self, pos: int, versioned: bool, limit: int = -1,
                     out: tuple[list[int], list[int]] | None = None) -> int:
        """The one-by-one walk of common records (at most ``limit`` of them, if >= 0);
        the records' starts and first block tokens go to ``out`` if given, else to a
        column run of their own."""
        data, n, T, Vm, bad = self.data, self.n, self.T, self.Vm, self.bad
        asz, ntok, little = self.asz, self.ntok, self.inp.little
        kpos = bisect_left(T, pos)  # tokens ending before pos
        starts, firsts = out if out is not None else ([], [])
        s_pos, s_k0 = starts.append, firsts.append
        v = feat = hdr = 0
        # entries without IDs only in V0 (version 1 stops)
        width = ENTRY_ULEBS if versioned else ENTRY_ULEBS_NO_ID
        try:
            while pos < n and limit:
                limit -= 1
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
                k = kpos + data[pos:p].translate(TERM_BYTES).count(1)  # (a few bytes)
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
            if out is None:
                self._add_simple(starts, firsts, versioned)
        return pos

    def _add_simple(self, starts: list[int] | np.ndarray, firsts: list[int] | np.ndarray,
                    versioned: bool, hop: np.ndarray | None = None) -> None:
        """The columns of records :meth:`run_simple` walked, derived vectorized from
        each record's start and first block token (the walk itself records no more),
        and, from the candidate walk, where each chain's block starts are recorded."""
        if not len(starts):
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
                                      np.stack([k0, width], axis=1),
                                      np.full(len(pos), -1, np.int64) if hop is None
                                      else hop))

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
        return self._general(pos, v, feat, eff)

    def _general(self, pos: int, v: int, feat: int, eff: int) -> int:
        """A record with multiple ranges, block hashes, omitted entries or PGO analysis
        (the rare kinds, kept out of :meth:`function`'s common path)."""
        data, n = self.data, self.n
        T, Vm = self.T, self.Vm
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
        pos, entry_tok = self._pgo_analysis(pos, eff, total_blocks)
        self.f_ver.append(v)
        self.f_feat.append(feat)
        self.f_nr.append(nr)
        self.f_entry_tok.append(entry_tok)
        return pos

    def _pgo_analysis(self, pos: int, eff: int, total_blocks: int) -> tuple[int, int]:
        """Skip a record's PGO analysis at ``pos``: (the position after it, the token of its
        entry count or -1)."""
        T, Vm = self.T, self.Vm
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
        return pos, entry_tok


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
    m, first_bad = assemble(w, inp)
    diags: list[Diagnostic] = []
    if first_bad is not None:
        stop_at = int(m.func_map_offset[first_bad])
        m = m.prefix(first_bad)
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


