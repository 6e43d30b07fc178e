"""BOLT's profile formats from bbmap's address aggregates: fdata and pre-aggregated text.

``annotate --format fdata`` writes what ``perf2bolt -p perf.data -o out.fdata BINARY``
writes (and ``--format fdata`` on an IP-only profile what ``perf2bolt -ba``/``-nl``
writes); ``--format bolt-preagg`` writes the pre-aggregated text that ``perf2bolt --pa``
/ ``llvm-bolt --pa`` read (the form Perforator and ebpf-bolt emit).  Both are made from
:class:`bbmap.aggregate.addresses.AddressProfile` (traces and the IP histogram), so they
work the same from one profile, several, or a merged aggregate.

fdata, one line per (source, destination) (``spec/bolt.md``)::

    1 FUNC OFF 1 FUNC OFF MISPREDS COUNT   a branch, a call, or a fall-through pair
    0 [unknown] 0 1 FUNC OFF MISPREDS COUNT  entered from outside any function
    1 FUNC OFF 0 [unknown] 0 MISPREDS COUNT  left to outside any function
    no_lbr EVENT...   then   1 FUNC OFF COUNT   (IP samples)

The rules are perf2bolt's (``bolt/lib/Profile/DataAggregator.cpp``: processBranchEvents,
doBranch, doTrace, getFallthroughsInTrace, writeAggregatedFile); where they need BOLT's
functions or blocks, :mod:`bbmap.bolt_functions` supplies them:

* a trace whose branch is a ``ret`` gives no branch line (``// Ignore returns``);
* a branch inside one function (``to`` not at its entry) is intra: ``1 F a 1 F b``; any
  other with at least one end in a function is a call/entry line, an end outside every
  function written ``0 [unknown] 0``; a line entering from outside is kept only then;
* a trace's fall-through (target .. next source) in one function with a CFG is split at
  BOLT's blocks into ``(last instruction of a block, start of the next)`` pairs, written
  as intra lines with 0 mispredictions; if a block on the way cannot fall through, or the
  range runs backwards or across functions, the trace has no fall-through lines (perf2bolt's
  "traces mismatching disassembled function contents"); a range that starts a block right
  after a call, reached by a return (or from outside the function) also counts the
  call's block's fall-through;
* lines with the same text are one line (counts summed).  perf2bolt writes them in hash
  order; bbmap by function address, then offsets (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.aggregate.addresses import (
    END_BRANCH_ONLY,
    EXTERNAL,
    AddressProfile,
    reduce_by_key,
)
from bbmap.arrays import sorted_unique
from bbmap.bolt_functions import IS_CALL, BoltView

UNKNOWN = "[unknown]"  # writeAggregatedFile: a location with no function
NO_LBR = "no_lbr"  # header of an IP-sample (basic events) fdata
EVENT_SUFFIX = ":"  # perf script prints an event as "NAME:"; perf2bolt keeps the colon
EXTERNAL_LOC = "X:0"  # pre-aggregated: an address in no known object
FT_KINDS = ("F", "f", "r")  # fall-through after a branch in the function / from elsewhere /
# after a return from elsewhere (DataAggregator: FT, FT_EXTERNAL_ORIGIN, FT_EXTERNAL_RETURN)
_U8 = np.uint64


@dataclass
class FdataStats:
    """What became of the traces and samples (every one in exactly one tally)."""

    branch_lines: int = 0
    fallthrough_lines: int = 0
    branches: int = 0  # taken branches written (counts)
    returns: int = 0  # taken branches not written: returns
    branches_outside: int = 0  # ... no end in a function
    traces: int = 0  # fall-through ranges offered (counts)
    traces_ok: int = 0  # ... split into fall-through pairs (or inside one block)
    traces_mismatch: int = 0  # ... backwards / across functions / no fall-through / no CFG
    traces_outside: int = 0  # ... an end outside every function
    samples: int = 0  # IP samples offered
    samples_written: int = 0
    samples_outside: int = 0
    notes: list[str] = field(default_factory=list)

    def check(self) -> None:
        assert self.traces == self.traces_ok + self.traces_mismatch + self.traces_outside
        assert self.samples == self.samples_written + self.samples_outside

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "notes"}


# ====================================================================== fdata
def fdata_from_profile(p: AddressProfile, view: BoltView, *, basic: bool | None = None
                       ) -> tuple[str, FdataStats]:
    """The fdata text of ``p`` in ``view``'s binary.  ``basic``: write the ``no_lbr``
    form (default: when ``p`` has no traces)."""
    st = FdataStats()
    if basic is None:
        basic = not p.has_traces
    if basic:
        return _basic(p, view, st), st
    rows = _branch_rows(p, view, st) + _fallthrough_rows(p, view, st)
    st.check()
    return _write(rows, view), st


def _basic(p: AddressProfile, view: BoltView, st: FdataStats) -> str:
    f, off = view.locate(p.ip_addr)
    st.samples = int(p.ip_samples.sum())
    ok = f >= 0
    st.samples_written = int(p.ip_samples[ok].sum())
    st.samples_outside = st.samples - st.samples_written
    st.check()
    events = " ".join(e + EVENT_SUFFIX for e in p.events)
    head = f"{NO_LBR} {events}".rstrip() if events else NO_LBR
    f, off, c = f[ok], off[ok], p.ip_samples[ok]
    order = np.lexsort((off, view.start[f])) if len(f) else np.zeros(0, np.int64)
    st.samples_written = int(c.sum())
    return head + "\n" + _rows_text(view.names, [f[order] + 1], [off[order]],
                                     [c[order].astype(np.int64)])


def _rows_text(names: list[str], funcs: list[np.ndarray], offs: list[np.ndarray],
               nums: list[np.ndarray]) -> str:
    """Lines ``LOC [LOC...] NUM [NUM...]``, one location ``1 NAME OFF`` per pair of
    ``funcs`` (numbered from 1; 0 = ``0 [unknown] 0``) and ``offs``, laid out for all rows
    at once by :func:`bbmap.outputs.columnar.render_rows` (no per-line Python string);
    the names table holds only the functions written."""
    from bbmap.outputs.columnar import UTF8_ERRORS, Dec, Field, Hex, Pick, render_rows

    fs = [np.asarray(x, np.int64) for x in funcs]
    used = sorted_unique(np.concatenate(fs))
    tab = [f"1 {names[f - 1]} ".encode("utf-8", UTF8_ERRORS) if f else
           f"0 {UNKNOWN} ".encode() for f in used.tolist()]
    row: list[Field] = []
    for f, o in zip(fs, offs):
        o = np.where(f != 0, o, 0).astype(np.uint64)  # [unknown]: offset 0
        row += [Pick(tab, np.searchsorted(used, f)), Hex(o), b" "]
    for k, v in enumerate(nums):
        row += [Dec(v), b" " if k + 1 < len(nums) else b"\n"]
    text, _ = render_rows(len(fs[0]), row)
    return text.decode("utf-8", UTF8_ERRORS)


# rows: (owner function, from function (-1 unknown), from offset, to function, to offset,
# mispreds, count); owner orders the output
def _branch_rows(p: AddressProfile, view: BoltView, st: FdataStats) -> list[np.ndarray]:
    src, dst, cnt, mis = p.branches()
    inb = src != _U8(EXTERNAL)
    ret = np.zeros(len(src), bool)
    if inb.any():
        ret[inb] = view.is_return(src[inb])
    st.returns = int(cnt[ret].sum())
    keep = ~ret
    src, dst, cnt, mis = src[keep], dst[keep], cnt[keep], mis[keep]
    fs, os_ = view.locate(src)
    fd, od = view.locate(dst)
    any_end = (fs >= 0) | (fd >= 0)
    st.branches_outside = int(cnt[~any_end].sum())
    fs, os_, fd, od, cnt, mis = (a[any_end] for a in (fs, os_, fd, od, cnt, mis))
    st.branches = int(cnt.sum())
    owner = np.where(fs >= 0, fs, fd)
    return [np.stack([owner, fs, os_.astype(np.int64), fd, od.astype(np.int64), mis, cnt])]


def _fallthrough_rows(p: AddressProfile, view: BoltView, st: FdataStats) -> list[np.ndarray]:
    has_end = p.trace_end != _U8(END_BRANCH_ONLY)
    br, frm, to = p.trace_from[has_end], p.trace_to[has_end], p.trace_end[has_end]
    cnt = p.trace_count[has_end]
    st.traces = int(cnt.sum())
    ff, of = view.locate(frm)
    ft, ot = view.locate(to)
    outside = (ff < 0) | (ft < 0)
    st.traces_outside = int(cnt[outside].sum())
    bad = ~outside & ((ff != ft) | (of > ot))
    pseudo = ~outside & ~bad & view.is_pseudo(ff)
    cand = ~outside & ~bad & ~pseudo
    b = view.blocks(sorted_unique(ff[cand]))
    has_cfg = np.zeros(len(ff), bool)
    has_cfg[cand] = b.has_cfg(ff[cand])
    bad |= cand & ~has_cfg
    cand &= has_cfg
    ok_cnt = int(cnt[pseudo].sum())
    idx = np.flatnonzero(cand)
    rows: list[np.ndarray] = []
    if len(idx):
        f = ff[idx]
        fa = view.start[f]
        faddr, taddr = frm[idx], to[idx]
        # global block containing each end (blocks sorted by (function, start))
        key_b = (b.func.astype(_U8) << _U8(40)) | (b.start - view.start[b.func])
        kf = (f.astype(_U8) << _U8(40)) | (faddr - fa)
        kt = (f.astype(_U8) << _U8(40)) | (taddr - fa)
        bf = np.searchsorted(key_b, kf, side="right") - 1
        bt = np.searchsorted(key_b, kt, side="right") - 1
        # a range that starts a block right after a call, reached from outside the
        # function (a return, a jump from elsewhere): the call's block falls through too
        brr = br[idx]
        fsize = view.size[f]
        from_in_fn = (brr >= fa) & (brr < fa + fsize)
        at_start = b.start[bf] == faddr
        adj = ~from_in_fn & at_start & (faddr != fa)
        prev = bf - 1
        adj &= (prev >= 0)
        adj[adj] &= (b.func[prev[adj]] == f[adj]) & b.falls[prev[adj]] & \
            np.isin(b.last_kind[prev[adj]], IS_CALL)
        bf = np.where(adj, prev, bf)
        # every block from bf up to bt must fall through to the next
        nofall = np.concatenate([[0], np.cumsum(~b.falls)])
        valid = nofall[bt] - nofall[bf] == 0
        bad[idx[~valid]] = True
        c = cnt[idx]
        okc = valid & (bt > bf)
        ok_cnt += int(c[valid].sum())
        diff = np.zeros(len(b.func) + 1, np.int64)
        np.add.at(diff, bf[okc], c[okc])
        np.add.at(diff, bt[okc], -c[okc])
        per_block = np.cumsum(diff)[:-1]
        blk = np.flatnonzero(per_block)
        if len(blk):
            g = b.func[blk]
            rows.append(np.stack([g, g, (b.last[blk] - view.start[g]).astype(np.int64), g,
                                  (b.start[blk + 1] - view.start[g]).astype(np.int64),
                                  np.zeros(len(blk), np.int64), per_block[blk]]))
    st.traces_mismatch = int(cnt[bad].sum())
    st.traces_ok = ok_cnt
    return rows


def _write(rows: list[np.ndarray], view: BoltView) -> str:
    if not rows:
        return ""
    r = np.concatenate(rows, axis=1)
    owner, fs, os_, fd, od, mis, cnt = r
    # an entry from outside is written by the function it enters; a line into "unknown"
    # by the one it leaves; equal lines summed
    keys = [owner.astype(np.uint64), (fs + 1).astype(np.uint64), os_.astype(np.uint64),
            (fd + 1).astype(np.uint64), od.astype(np.uint64)]
    (ow, a, b, c, d), (m, n) = reduce_by_key(keys, [mis, cnt])
    order = np.lexsort((d, c, b, view.start[ow.astype(np.int64)]))
    return _rows_text(view.names, [a[order], c[order]], [b[order], d[order]],
                      [m[order], n[order]])


# ============================================================ pre-aggregated
def preagg_from_profile(p: AddressProfile, view: BoltView, *, build_id: str | None = None,
                        basic: bool | None = None) -> str:
    """BOLT's pre-aggregated text of ``p`` (``perf2bolt --pa`` / ``llvm-bolt --pa``).

    LBR: ``B FROM TO COUNT MISPREDS`` per taken branch and one fall-through line per
    range, ``F`` when the branch that began it is in the range's function, ``r`` when it
    is a return from elsewhere, ``f`` when it came from elsewhere (BOLT then also counts
    the call's block before a range that starts right after a call, as it does for a
    whole trace).  IP samples (``basic``): ``E EVENT`` then ``S ADDR COUNT``.  Addresses
    are ELF virtual addresses of the binary in hex, prefixed ``BUILDID:`` when
    ``build_id`` is given; an address outside the binary is ``X:0``."""
    if basic is None:
        basic = not p.has_traces
    pre = f"{build_id}:" if build_id else ""

    def loc(a: np.ndarray) -> list[str]:
        return [f"{pre}{x:x}" if x != EXTERNAL else EXTERNAL_LOC for x in a.tolist()]

    out: list[str] = []
    if basic:
        out += [f"E {e}{EVENT_SUFFIX}\n" for e in p.events]
        out += [f"S {a} {c}\n" for a, c in zip(loc(p.ip_addr), p.ip_samples.tolist())]
        return "".join(out)
    src, dst, cnt, mis = p.branches()
    out += [f"B {a} {b} {c} {m}\n" for a, b, c, m in
            zip(loc(src), loc(dst), cnt.tolist(), mis.tolist())]
    has_end = p.trace_end != _U8(END_BRANCH_ONLY)
    br, frm, to = p.trace_from[has_end], p.trace_to[has_end], p.trace_end[has_end]
    cnt = p.trace_count[has_end]
    ff, _ = view.locate(frm)
    fa = view.start[np.maximum(ff, 0)]
    inside = (ff >= 0) & (br >= fa) & (br < fa + view.size[np.maximum(ff, 0)])
    ret = np.zeros(len(br), bool)
    out_in_bin = ~inside & (br != _U8(EXTERNAL))
    if out_in_bin.any():
        ret[out_in_bin] = view.is_return(br[out_in_bin])
    kind = np.where(inside, 0, np.where(ret, 2, 1)).astype(np.uint64)
    (k, a, b), (c,) = reduce_by_key([kind, frm, to], [cnt])
    out += [f"{FT_KINDS[int(kk)]} {x} {y} {n}\n" for kk, x, y, n in
            zip(k.tolist(), loc(a), loc(b), c.tolist())]
    return "".join(out)


def _need(result: Any) -> AddressProfile:
    p = getattr(result, "addresses", None)
    if p is None:
        raise ValueError("the annotate result has no address aggregates: "
                         "call annotate(..., addresses=True)")
    return p


def render_fdata(result: Any, binary: Any = None, *, stats: FdataStats | None = None) -> str:
    """fdata of an annotate result (``binary``: the loaded Binary; loaded from
    ``result.binary`` when omitted)."""
    view = BoltView(binary if binary is not None else _binary_of(result))
    text, st = fdata_from_profile(_need(result), view)
    if stats is not None:
        stats.__dict__.update(st.__dict__)
    return text


def render_preagg(result: Any, binary: Any = None, *, build_id: bool = True) -> str:
    """Pre-aggregated text of an annotate result (addresses prefixed with the binary's
    build-id when it has one and ``build_id``)."""
    b = binary if binary is not None else _binary_of(result)
    bid = getattr(result, "build_id", None) if build_id else None
    return preagg_from_profile(_need(result), BoltView(b), build_id=bid)


def _binary_of(result: Any) -> Any:
    """The binary the run loaded (``result.loaded``), or the file opened again for a
    result made without one."""
    if getattr(result, "loaded", None) is not None:
        return result.loaded
    from bbmap.binary import load_binary

    return load_binary(result.binary)
