"""Instruction-address aggregates: what BOLT's profile formats are made of.

The block arrays (:mod:`bbmap.aggregate.lbr`, :mod:`bbmap.aggregate.samples`) say how often
a block ran; BOLT's fdata and pre-aggregated files name *instructions* (a branch at offset
0x2d of a function, a fall-through ending at 0x38), so annotate also keeps, in ELF
virtual addresses of the binary:

* **traces** -- one per LBR entry: ``(branch source, branch target, fall-through end) ->
  (count, mispredicted)``.  The end is the source of the next newer entry of the same
  stack: the code from the target up to that end ran straight through.  This is
  perf2bolt's ``Trace`` (``bolt/lib/Profile/DataAggregator.cpp``, ``parseLBRSample``),
  kept whole rather than as separate branch and range tables because BOLT treats a range
  differently when the branch that began it was a return from another function (it then
  also counts the fall-through out of the calling block); :meth:`AddressProfile.branches`
  and :meth:`AddressProfile.fallthroughs` are its two projections;
* the **IP histogram** -- ``address -> samples`` of the samples whose IP is in the binary
  (BOLT's ``no_lbr`` profile counts samples, not periods), and the names of their events.

Filled only on request (``annotate(addresses=True)``, the BOLT formats of the CLI): they
cost about a quarter of an LBR annotate.  The arrays, their shapes and the merge rule are
described in spec/bolt.md.

Rules, each BOLT's (facts read from ``DataAggregator.cpp``; the constants are named here):

* an entry with an end in the kernel half (``>= KERNEL_START``, perf2bolt's
  ``KernelBaseAddr``) is dropped *before* entries are paired (``--ignore-interrupt-lbr``,
  on by default): the user code before and after an interrupt is one straight run;
* the newest kept entry of a stack has no fall-through end: ``END_BRANCH_ONLY``;
* an address outside the binary is ``EXTERNAL`` (0, BOLT's ``Trace::EXTERNAL``); a trace
  with no address in the binary is not kept;
* entries that bbmap's duplicate rule dropped (the ``duplicate`` branch bucket) are not
  traces (perf2bolt keeps the duplicated newest entry; ``--duplicate-lbr keep`` does too).

Accounting: every LBR entry the duplicate rule kept is exactly one of ``kernel`` (dropped
as an interrupt), ``external`` (no address in the binary) or one count of a trace;
:meth:`AddressProfile.check` holds the three to the total.  Everything is vectorized per
batch; memory is bounded by the distinct traces and addresses, not by the profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.aggregate.resolve import Resolved
from bbmap.arrays import sorted_unique
from bbmap.buckets import OUTSIDE_FUNCTION
from bbmap.formats import perfdata as fmt
from bbmap.mappings import KERNEL_START  # x86-64 kernel half: perf2bolt's KernelBaseAddr

EXTERNAL = 0  # an address outside the binary (BOLT's Trace::EXTERNAL)
END_BRANCH_ONLY = (1 << 64) - 1  # newest entry: no fall-through end (BOLT's Trace::BR_ONLY)

_U8 = np.uint64
_EMPTY_U8 = np.zeros(0, np.uint64)
_EMPTY_I8 = np.zeros(0, np.int64)


class AddressAccountingError(AssertionError):
    """The address-level tallies do not add up: a bbmap bug, never bad input."""


_U8_MAX = (1 << 64) - 1


def reduce_by_key(keys: list[np.ndarray], values: list[np.ndarray]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Sum ``values`` over equal rows of ``keys`` (u8 columns); rows come back sorted by
    the keys, first column most significant.

    When the columns' spans multiply to less than 2**64 (addresses of one binary: a few
    MiB each), each row becomes one exact mixed-radix u8 key -- a column's all-ones
    sentinel (``END_BRANCH_ONLY``) taking the digit after its largest value -- so one
    ``argsort`` replaces ``lexsort`` and the keys come back from the sorted key alone.
    Otherwise two leading columns whose spans fit in 32 bits share one ``lexsort`` key."""
    n = len(keys[0])
    if n == 0:
        return [k[:0] for k in keys], [v[:0] for v in values]
    if len(keys) > 1:
        got = _packed(keys)
        if got is not None:
            key, decode, _ = got
            order = np.argsort(key)
            sk = key[order]
            new = np.ones(n, bool)
            new[1:] = sk[1:] != sk[:-1]
            starts = np.flatnonzero(new)
            return decode(sk[starts]), [np.add.reduceat(v[order], starts) for v in values]
    if len(keys) == 1 and _strictly_increasing(keys):  # already sorted and distinct (a
        # batch's distinct keys, distinct.py): one linear check instead of a sort
        return list(keys), list(values)
    cols = list(keys)
    if len(cols) >= 2:
        lo0, lo1 = cols[0].min(), cols[1].min()
        if int(cols[0].max() - lo0) < (1 << 32) and int(cols[1].max() - lo1) < (1 << 32):
            cols = [((cols[0] - lo0) << _U8(32)) | (cols[1] - lo1), *cols[2:]]
    order = np.lexsort(cols[::-1]) if len(cols) > 1 else np.argsort(cols[0], kind="stable")
    sk = [k[order] for k in keys]
    new = np.zeros(n, bool)
    new[0] = True
    for k in sk:
        new[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    return ([k[starts] for k in sk],
            [np.add.reduceat(v[order], starts) for v in values])


def count_by_key(keys: list[np.ndarray], flag: np.ndarray
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``reduce_by_key(keys, [ones, flag])`` for a 0/1 ``flag`` (an entry's count and
    its mispredicted bit): the flag becomes the last digit of the packed key, so one
    ``np.sort`` of the keys (no ``argsort``, no gathering of values) gives both sums --
    the count is a run's length, the flags the sum of its last digits."""
    n = len(keys[0])
    got = _packed([*keys, flag.astype(np.uint64)]) if n and len(keys) > 1 else None
    if got is None:
        return reduce_by_key(keys, [np.ones(n, np.int64), flag.astype(np.int64)])
    key, decode, (lo, radix) = got[0], got[1], got[2][-1]
    key.sort()  # (the key is this function's own temporary)
    if radix == 1:  # one flag value: the rows are the keys
        row, digit = key, None
    elif radix == 2:
        row, digit = key >> _U8(1), key & _U8(1)
    else:
        row, digit = key // _U8(radix), key % _U8(radix)
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(row[1:], row[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    count = np.diff(np.append(starts, n)).astype(np.int64)
    flags = lo * count
    if digit is not None:
        flags = flags + np.add.reduceat(digit.astype(np.int64), starts)
    return decode(key[starts])[:-1], [count, flags]


def trace_counts(src: np.ndarray, dst: np.ndarray, begins: np.ndarray, flag: np.ndarray
                 ) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """``count_by_key([src, dst, end], flag)`` of raw LBR entries whose fall-through end
    is the previous entry's source (``end[j] = src[j - 1]``), except at entry 0 and the
    entries ``begins`` (sorted, > 0), which begin a stack (``END_BRANCH_ONLY``) -- with
    the end column never made: its digit is the source's digit shifted by one entry,
    the sentinel taking the digit after the sources' largest.  One mixed-radix key
    (source, target, end, flag), built in six passes, sorted once.  None when the
    digits do not fit in 64 bits (use :func:`count_by_key`)."""
    n = len(src)
    if not n:
        return None
    lo_a, hi_a = int(src.min()), int(src.max())
    lo_b, hi_b = int(dst.min()), int(dst.max())
    ra, rb = hi_a - lo_a + 1, hi_b - lo_b + 1
    re_ = ra + 1  # the end: a source's digit, or the sentinel ``ra``
    rm = 2 if bool(flag.any()) else 1
    if ra * rb * re_ * rm >= 1 << 64:
        return None
    da = src - _U8(lo_a)
    key = da * _U8(rb)  # arithmetic mod 2**64: every intermediate wrap is undone
    key += dst  # by the end (the key itself fits)
    key -= _U8(lo_b)
    key *= _U8(re_)
    key[1:] += da[:-1]
    key[0] += _U8(ra)
    if len(begins):
        key[begins] += _U8(ra) - da[begins - 1]  # (da <= ra - 1: no wrap)
    if rm == 2:
        key <<= _U8(1)
        key |= flag.astype(np.uint64)
    key.sort()
    row = key >> _U8(1) if rm == 2 else key
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(row[1:], row[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    count = np.diff(np.append(starts, n)).astype(np.int64)
    flags = (np.add.reduceat((key & _U8(1)).astype(np.int64), starts) if rm == 2
             else np.zeros(len(starts), np.int64))
    r = row[starts]
    e = r % _U8(re_)
    r = r // _U8(re_)
    t = r % _U8(rb) + _U8(lo_b)
    f = r // _U8(rb) + _U8(lo_a)
    end = e + _U8(lo_a)
    end[e == _U8(ra)] = _U8(END_BRANCH_ONLY)
    return [f, t, end], [count, flags]


def binary_ranges(pm: Any, pid: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint ``[lo, hi)`` runtime ranges covering every mapping of the binary
    that process ``pid`` ever had in ``pm`` (a ProfileMappings): an address outside them
    is outside the binary at any moment, so it translates to :data:`EXTERNAL` whatever
    it is."""
    got = sorted((m.start, m.stop) for m in getattr(pm, "mappings", ())
                 if m.is_binary and m.pid == pid)
    lo: list[int] = []
    hi: list[int] = []
    for a, b in got:
        if lo and a <= hi[-1]:
            hi[-1] = max(hi[-1], b)
        else:
            lo.append(a)
            hi.append(b)
    return np.array(lo, np.uint64), np.array(hi, np.uint64)


def outside_to(a: np.ndarray, lo: np.ndarray, hi: np.ndarray, value: int) -> np.ndarray:
    """``a`` with every value outside the ranges ``[lo, hi)`` replaced by ``value`` (one
    of them too): the runtime addresses of other libraries, which only ever translate
    to EXTERNAL, folded into one so the packed trace key keeps a narrow span."""
    j = np.searchsorted(lo, a, side="right").astype(np.int64) - 1
    inside = (j >= 0) & (a < hi[np.maximum(j, 0)])
    return np.where(inside, a, _U8(value))


def _packed(keys: list[np.ndarray]):  # noqa: ANN202 - (key, decode, digits) or None
    """The mixed-radix key of :func:`reduce_by_key`, or None when it does not fit.

    Each column costs a few passes: min and max (a column with the all-ones sentinel
    takes its largest other value from ``max(k + 1) - 1``, the sentinel wrapping to 0),
    its digit ``k - lo`` (the sentinel's clipped to ``hi - lo + 1`` by one ``minimum``:
    it is the only value above ``hi``) and Horner's step on the key, in place."""
    digits = []  # (lo, radix, sentinel digit or None)
    total = 1
    for k in keys:
        if not len(k):
            return None
        lo, hi = int(k.min()), int(k.max())
        sentinel = None
        if hi == _U8_MAX:
            hi = int((k + _U8(1)).max()) - 1  # largest value below the sentinel
            if hi < 0:  # every value is the sentinel
                lo = hi = 0
            elif hi >= _U8_MAX - 1:
                return None  # (no room for the sentinel's digit)
            sentinel = hi - lo + 1
        radix = hi - lo + 1 + int(sentinel is not None)
        total *= radix
        if total >= 1 << 64:
            return None
        digits.append((lo, radix, sentinel))
    key = None
    for k, (lo, radix, sentinel) in zip(keys, digits):
        d = k - _U8(lo) if lo else k.astype(np.uint64, copy=True)
        if sentinel is not None:
            np.minimum(d, _U8(sentinel), out=d)
        if key is None:
            key = d
        else:
            if radix > 1:
                key *= _U8(radix)
            key += d

    def decode(packed: np.ndarray) -> list[np.ndarray]:
        out = []
        rest = packed.copy()
        for lo, radix, sentinel in reversed(digits):
            d = rest % _U8(radix)
            rest //= _U8(radix)
            col = d + _U8(lo)
            if sentinel is not None:
                col[d == _U8(sentinel)] = _U8(_U8_MAX)
            out.append(col)
        return out[::-1]

    return key, decode, [(lo, radix) for lo, radix, _s in digits]


def _strictly_increasing(cols: list[np.ndarray]) -> bool:
    """Are the rows of ``cols`` (first column most significant) in strictly increasing
    order -- sorted and distinct, so :func:`reduce_by_key` would return them unchanged?
    One linear pass instead of a sort."""
    later = np.zeros(len(cols[0]) - 1 if len(cols[0]) else 0, bool)  # row i+1 > row i
    tied = ~later  # rows i, i+1 equal on the columns so far
    for c in cols:
        a, b = c[:-1], c[1:]
        later |= tied & (b > a)
        tied &= b == a
    return bool(later.all())


def _sum_tables(keys: list[np.ndarray], values: list[np.ndarray], smaller: int
                ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``reduce_by_key`` of two concatenated tables, ``smaller`` rows in the smaller one.
    When that one is empty (a profile merged into an empty annotator: twice per profile
    read) and the other is already in reduce_by_key's form -- rows strictly increasing --
    the rows are the answer: one linear check instead of a sort of every row."""
    if not smaller and _strictly_increasing(keys):
        return keys, values
    return reduce_by_key(keys, values)


@dataclass
class AddressProfile:
    """The address-level aggregates of one or more profiles (ELF vaddrs of the binary).

    Additive: two profiles of the same binary merge exactly (:meth:`merge`), which is what
    an aggregate store must keep to write BOLT's formats from merged data."""

    trace_from: np.ndarray = field(default_factory=lambda: _EMPTY_U8)  # u8 branch source
    trace_to: np.ndarray = field(default_factory=lambda: _EMPTY_U8)  # u8 branch target
    trace_end: np.ndarray = field(default_factory=lambda: _EMPTY_U8)  # u8 fall-through end
    trace_count: np.ndarray = field(default_factory=lambda: _EMPTY_I8)  # i8
    trace_mispred: np.ndarray = field(default_factory=lambda: _EMPTY_I8)  # i8
    ip_addr: np.ndarray = field(default_factory=lambda: _EMPTY_U8)  # u8 sampled IP
    ip_samples: np.ndarray = field(default_factory=lambda: _EMPTY_I8)  # i8
    events: list[str] = field(default_factory=list)  # events of the samples in the binary
    entries: int = 0  # LBR entries offered (after the duplicate rule)
    duplicate: int = 0  # ... dropped before by the duplicate rule (not in ``entries``)
    samples: int = 0  # samples offered (in the binary or not; ``ip_samples`` <= this)
    kernel: int = 0  # ... dropped as kernel/interrupt entries
    external: int = 0  # ... whose trace has no address in the binary

    @property
    def has_traces(self) -> bool:
        return len(self.trace_count) > 0

    def check(self) -> None:
        """Every LBR entry offered is in exactly one tally."""
        got = self.kernel + self.external + int(self.trace_count.sum())
        if got != self.entries:
            raise AddressAccountingError(
                f"address accounting does not reconcile: kernel {self.kernel} + external "
                f"{self.external} + traces {int(self.trace_count.sum())} != {self.entries}")

    def branches(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(from, to, count, mispredicted) of every taken branch (traces summed over
        their ends)."""
        (f, t), (c, m) = reduce_by_key([self.trace_from, self.trace_to],
                                       [self.trace_count, self.trace_mispred])
        return f, t, c, m

    def fallthroughs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, count) of every straight-line range (traces with an end)."""
        keep = self.trace_end != _U8(END_BRANCH_ONLY)
        (s, e), (c,) = reduce_by_key([self.trace_to[keep], self.trace_end[keep]],
                                     [self.trace_count[keep]])
        return s, e, c

    def merge(self, other: AddressProfile) -> AddressProfile:
        """This profile plus ``other`` (same binary), as a new profile."""
        (f, t, e), (c, m) = _sum_tables(
            [np.concatenate([self.trace_from, other.trace_from]),
             np.concatenate([self.trace_to, other.trace_to]),
             np.concatenate([self.trace_end, other.trace_end])],
            [np.concatenate([self.trace_count, other.trace_count]),
             np.concatenate([self.trace_mispred, other.trace_mispred])],
            min(len(self.trace_from), len(other.trace_from)))
        (a,), (s,) = _sum_tables([np.concatenate([self.ip_addr, other.ip_addr])],
                                 [np.concatenate([self.ip_samples, other.ip_samples])],
                                 min(len(self.ip_addr), len(other.ip_addr)))
        return AddressProfile(trace_from=f, trace_to=t, trace_end=e, trace_count=c,
                              trace_mispred=m, ip_addr=a, ip_samples=s,
                              events=sorted(set(self.events) | set(other.events)),
                              entries=self.entries + other.entries,
                              duplicate=self.duplicate + other.duplicate,
                              samples=self.samples + other.samples,
                              kernel=self.kernel + other.kernel,
                              external=self.external + other.external)

    def to_json(self) -> dict:
        """Sizes and tallies (the arrays themselves go to aggregate files, not JSON)."""
        return {"traces": len(self.trace_count), "trace_count": int(self.trace_count.sum()),
                "ips": len(self.ip_addr), "ip_samples": int(self.ip_samples.sum()),
                "events": self.events, "entries": self.entries, "duplicate": self.duplicate,
                "samples": self.samples, "kernel": self.kernel,
                "external": self.external}


class AddressAggregator:
    """Accumulates traces and the IP histogram over batches (pending parts folded when
    they outgrow the folded tables, so memory follows the distinct keys)."""

    FOLD_ROWS = 1 << 20

    def __init__(self) -> None:
        self.profile = AddressProfile()
        self._traces: list[tuple[np.ndarray, ...]] = []
        self._trace_rows = 0
        self._ips: list[tuple[np.ndarray, np.ndarray]] = []
        self._ip_rows = 0
        self._event_ids: set[int] = set()

    # ---------------------------------------------------------------- batches
    def add_ips(self, r: Resolved, event: np.ndarray, count: np.ndarray | None = None
                ) -> None:
        """Samples whose IP ``r`` resolved into the binary (any of the three in-binary
        buckets: BOLT counts samples in PLT stubs and unnamed code too).  ``count``: row
        ``i`` stands for that many samples (a batch's distinct keys, distinct.py)."""
        self.profile.samples += len(r.where) if count is None else int(count.sum())
        inb = np.flatnonzero(r.where <= OUTSIDE_FUNCTION)
        if not len(inb):
            return
        (a,), (c,) = reduce_by_key([r.vaddr[inb].astype(np.uint64)],
                                   [np.ones(len(inb), np.int64) if count is None
                                    else count[inb]])
        self._ips.append((a, c))
        self._ip_rows += len(a)
        if len(event):
            self._event_ids.update(sorted_unique(event[inb]).tolist())
        if self._ip_rows > max(4 * len(self.profile.ip_addr), self.FOLD_ROWS):
            self._fold_ips()

    def add_stacks(self, src: np.ndarray, dst: np.ndarray, flags: np.ndarray,
                   stack: np.ndarray, rf: Resolved, rt: Resolved) -> None:
        """LBR entries (newest first within each stack; ``stack`` numbers the stacks)
        with their resolved ends ``rf`` / ``rt``."""
        n = len(src)
        if not n:
            return
        p = self.profile
        p.entries += n
        kern = (src >= _U8(KERNEL_START)) | (dst >= _U8(KERNEL_START))
        nk = int(kern.sum())
        p.kernel += nk
        idx = np.flatnonzero(~kern) if nk else np.arange(n)
        if not len(idx):
            return
        vf = np.where(rf.where[idx] <= OUTSIDE_FUNCTION, rf.vaddr[idx], _U8(EXTERNAL)
                      ).astype(np.uint64)
        vt = np.where(rt.where[idx] <= OUTSIDE_FUNCTION, rt.vaddr[idx], _U8(EXTERNAL)
                      ).astype(np.uint64)
        s = stack[idx]
        end = np.full(len(idx), END_BRANCH_ONLY, np.uint64)
        same = s[1:] == s[:-1]  # entry j+1 is older than entry j of the same stack
        end[1:][same] = vf[:-1][same]
        mis = ((flags[idx] & _U8(fmt.BRF_MISPRED)) != 0).astype(np.int64)
        outside = (vf == EXTERNAL) & (vt == EXTERNAL) & (
            (end == _U8(EXTERNAL)) | (end == _U8(END_BRANCH_ONLY)))
        no = int(outside.sum())
        p.external += no
        if no:
            keep = ~outside
            vf, vt, end, mis = vf[keep], vt[keep], end[keep], mis[keep]
        if not len(vf):
            return
        (f, t, e), (c, m) = reduce_by_key([vf, vt, end], [np.ones(len(vf), np.int64), mis])
        self._traces.append((f, t, e, c, m))
        self._trace_rows += len(f)
        if self._trace_rows > max(4 * len(p.trace_count), self.FOLD_ROWS):
            self._fold_traces()

    def add_stacks_raw(self, src: np.ndarray, dst: np.ndarray, flags: np.ndarray,
                       stack: np.ndarray, pid: np.ndarray, seq: np.ndarray,
                       time: np.ndarray | None, space: Any,
                       live: np.ndarray | None = None) -> bool:
        """:meth:`add_stacks` for entries not yet resolved: when no mapping of their
        processes changes between their first and last moment (``space.pm``'s
        ``constant_between``), the traces are first reduced on the runtime addresses and
        only the distinct addresses are mapped to the binary -- a hot loop's million
        entries cost one translation each of a few hundred addresses.  Returns False
        (and does nothing) when the mappings do change: resolve every entry then.

        ``pid``, ``seq``, ``time`` are per *sample* (``stack`` indexes them: no per-entry
        copies); ``live`` marks the samples that have entries here (None: all do) --
        only their moments count."""
        if live is not None:
            pid_l, seq_l = pid[live], seq[live]
            time_l = None if time is None else time[live]
        else:
            pid_l, seq_l, time_l = pid, seq, time
        pids = sorted_unique(np.asarray(pid_l, np.int64))
        if not space.pm.constant_between(pids.tolist(), seq_l, time_l):
            return False
        n = len(src)
        if not n:
            return True
        p = self.profile
        p.entries += n
        nk = 0
        if int(src.max()) >= KERNEL_START or int(dst.max()) >= KERNEL_START:  # (two
            kern = (src >= _U8(KERNEL_START)) | (dst >= _U8(KERNEL_START))  # reductions
            nk = int(kern.sum())  # tell a user-only slice without a mask)
        p.kernel += nk
        if nk:
            idx = np.flatnonzero(~kern)
            if not len(idx):
                return True
            sf, sd = src[idx].astype(np.uint64), dst[idx].astype(np.uint64)
            s, fl = stack[idx], flags[idx]
        else:  # no kernel entry: the columns as they are
            sf, sd = np.asarray(src, np.uint64), np.asarray(dst, np.uint64)
            s, fl = stack, flags
        begins = np.flatnonzero(s[1:] != s[:-1]) + 1  # entries that begin a stack (>0)
        mis = ((fl & _U8(fmt.BRF_MISPRED)) != 0).view(np.uint8)
        got = trace_counts(sf, sd, begins, mis) if len(pids) == 1 else None
        if got is None and len(pids) == 1:  # spans too wide: shared libraries' addresses
            lo, hi = binary_ranges(space.pm, int(pids[0]))
            if len(lo) and int(lo[0]) > 0:  # one value below the binary stands for them
                low = int(lo[0]) - 1
                got = trace_counts(outside_to(sf, lo, hi, low), outside_to(sd, lo, hi, low),
                                   begins, mis)
        if got is not None:
            rows, (c, m) = got
        else:
            end = np.empty(len(sf), np.uint64)  # entry j+1 is older than entry j: its
            end[1:] = sf[:-1]  # end is j's source, unless j+1 begins a stack
            end[0] = END_BRANCH_ONLY
            end[begins] = END_BRANCH_ONLY
            keys = [sf, sd, end]
            if len(pids) > 1:
                keys = [np.asarray(pid)[s].astype(np.uint64), *keys]
            rows, (c, m) = count_by_key(keys, mis)
        rp = rows[0].astype(np.int64) if len(pids) > 1 else np.full(len(c), pids[0], np.int64)
        rf, rt, re = rows[-3:]
        k = len(c)
        has_end = re != _U8(END_BRANCH_ONLY)
        addr = np.concatenate([rf, rt, re[has_end]])
        apid = np.concatenate([rp, rp, rp[has_end]])
        aseq = np.full(len(addr), int(np.asarray(seq_l)[0]), np.int64)
        atime = None if time_l is None else np.full(len(addr), np.asarray(time_l)[0],
                                                     np.uint64)
        where, vaddr, _ = space.classify(addr, apid, aseq, None, atime)
        va = np.where(np.asarray(where) <= OUTSIDE_FUNCTION, np.asarray(vaddr, np.uint64),
                      _U8(EXTERNAL)).astype(np.uint64)
        vf, vt = va[:k], va[k:2 * k]
        ve = np.full(k, END_BRANCH_ONLY, np.uint64)
        ve[has_end] = va[2 * k:]
        outside = (vf == EXTERNAL) & (vt == EXTERNAL) & (
            (ve == _U8(EXTERNAL)) | (ve == _U8(END_BRANCH_ONLY)))
        if outside.any():
            p.external += int(c[outside].sum())
            keep = ~outside
            vf, vt, ve, c, m = vf[keep], vt[keep], ve[keep], c[keep], m[keep]
        if not len(vf):
            return True
        if _strictly_increasing([vf, vt, ve]):  # translation kept the rows distinct
            f, t, e = vf, vt, ve  # (one mapping, no external ends): nothing to sum
        else:
            (f, t, e), (c, m) = reduce_by_key([vf, vt, ve], [c, m])
        self._traces.append((f, t, e, c, m))
        self._trace_rows += len(f)
        if self._trace_rows > max(4 * len(p.trace_count), self.FOLD_ROWS):
            self._fold_traces()
        return True

    # ------------------------------------------------------------------ folds
    def _fold_traces(self) -> None:
        if not self._traces:
            return
        p = self.profile
        parts = [(p.trace_from, p.trace_to, p.trace_end, p.trace_count, p.trace_mispred),
                 *self._traces]
        self._traces, self._trace_rows = [], 0
        cols = [np.concatenate([q[i] for q in parts]) for i in range(5)]
        (p.trace_from, p.trace_to, p.trace_end), (p.trace_count, p.trace_mispred) = \
            reduce_by_key(cols[:3], cols[3:])

    def _fold_ips(self) -> None:
        if not self._ips:
            return
        p = self.profile
        parts = [(p.ip_addr, p.ip_samples), *self._ips]
        self._ips, self._ip_rows = [], 0
        (p.ip_addr,), (p.ip_samples,) = reduce_by_key(
            [np.concatenate([q[0] for q in parts])], [np.concatenate([q[1] for q in parts])])

    # ------------------------------------------------------------- profiles
    def name_events(self, names: list[str]) -> None:
        """Turn the event indexes seen in this profile's batches into ``names`` (the
        profile's attrs) -- call once per file, before merging."""
        seen = {names[i] for i in self._event_ids if 0 <= i < len(names)}
        self.profile.events = sorted(set(self.profile.events) | seen)
        self._event_ids = set()

    def merge(self, other: AddressAggregator) -> None:
        self.profile = self.result().merge(other.result())

    def result(self) -> AddressProfile:
        self._fold_traces()
        self._fold_ips()
        return self.profile
