"""A map section as ULEB128 tokens, found and valued with numpy (the fast decoder's input).

Almost every field of a block map is a ULEB128, and every byte below 0x80 ends one, so
the terminator positions split the section into *tokens* and every token's value can be
computed vectorized.  Fixed-width fields (versions, features, addresses, hashes) also
contain such bytes; the walk (:mod:`bbmap.binary.decode_fast`) steps over them and
re-values the token that starts after one (``_Walker.tok``).
"""

from __future__ import annotations

import numpy as np

from bbmap.formats.leb128 import LEB_GROUP_BITS, LEB_MORE, LEB_PAYLOAD, MAX_ULEB_BYTES

SLICE = 1 << 14  # bytes per np.flatnonzero call: its int64 result is reused heap
TERM_BYTES = bytes(1 if i < LEB_MORE else 0 for i in range(256))  # for bytes.translate



def terminators(mask: np.ndarray, itype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the True bytes of ``mask`` as ``itype`` (found a slice at a time:
    one int64 ``flatnonzero`` of a 10 MB map would be tens of MB to fault in), the
    positions of the False bytes (the continuation bytes: few, since nearly every field
    is a one-byte token), and the indices of the multi-byte tokens.

    A multi-byte token ends at a terminator right after a continuation byte; every byte
    is one or the other, so the terminator at byte q is token q - (continuation bytes
    before q): no pass over the terminators is needed to find them."""
    term = np.empty(int(np.count_nonzero(mask)), itype)
    conts = []  # (by slice too: no section-sized ~mask)
    at = 0
    for s in range(0, len(mask), SLICE):
        m = mask[s:s + SLICE]
        idx = np.flatnonzero(m)
        if len(idx) < len(m):
            conts.append(np.flatnonzero(~m) + s)
        if not len(idx):
            continue
        idx += s
        term[at:at + len(idx)] = idx
        at += len(idx)
    cont = np.concatenate(conts) if conts else np.zeros(0, np.intp)
    after = cont + 1
    if len(after) and after[-1] >= len(mask):  # a section ending inside a token
        after = after[:-1]
    ends = np.flatnonzero(mask[after])
    return term, cont, after[ends] - (ends + 1)


def uleb_tokens(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Terminator positions, ULEB values ending there, a per-token 'malformed' flag,
    and the continuation bytes' positions (tokens ending before byte p: p minus the
    continuation bytes before p).

    Indices are int32 and values uint32 unless the section needs wider (less memory
    to fault in: a clang-sized map has ~10 million tokens).  Multi-byte tokens are
    the few decoded byte by byte.
    """
    itype = np.int32 if len(b) < 2**30 else np.int64
    mask = b < LEB_MORE
    term, cont, multi = terminators(mask, itype)
    ntok = len(term)
    ml = term[multi] - np.where(multi > 0, term[np.maximum(multi - 1, 0)], -1)
    maxlen = int(ml.max()) if len(ml) else 1
    vtype = np.uint64 if maxlen > 4 else np.uint32
    # the terminator bytes, compressed a slice at a time into the value column (no
    # section-sized uint8 temporary; no int64 copy of the positions)
    vals = np.empty(ntok, vtype)
    at = 0
    for s in range(0, len(b), SLICE):
        part = b[s:s + SLICE][mask[s:s + SLICE]]
        vals[at:at + len(part)] = part
        at += len(part)
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
    return term, vals, bad, cont
