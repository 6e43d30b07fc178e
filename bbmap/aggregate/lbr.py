"""LBR branch stacks -> taken edges, fall-through ranges, block execution counts.

Rules (spec/annotate.md, after perf-data-format.md §4.6):

* entry 0 is the newest branch.  Some Intel parts record the newest branch twice
  (entries 0 and 1 identical in every sample).  A tight loop also repeats a branch, so the
  quirk is recognized per batch by comparing how often entries 0 and 1 are equal with how
  often neighbours deeper in the stack are (:func:`duplicate_newest_quirk`); when it is
  present (or forced), entry 0 of such samples is dropped and counted in the
  ``duplicate`` bucket;
* every other entry is one taken branch: an edge when both ends are in blocks of the
  binary, otherwise bucketed by the first end (source, then target) that is not;
* between consecutive kept entries the code ``[older.to, newer.from]`` ran straight
  through.  Such a range is used only if both ends are in blocks, start <= end, both ends
  are in one function and one range, and every block before the end block can fall
  through; otherwise it is counted under the first rule it breaks;
* a block's execution count is the number of valid ranges that hold its first instruction
  (a range starting mid-block, after a call returned, does not re-enter that block); the
  fall-through edge ``b -> b+1`` counts the valid ranges that contain both.

Everything is vectorized per batch: ends are resolved in bulk and range coverage is
added with difference arrays (+1 at the start block, -1 after the end block).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bbmap.aggregate.accounting import RANGE_REASONS, Accounting
from bbmap.aggregate.addresses import AddressAggregator
from bbmap.aggregate.cluster import ClusterAccumulator, ClusterMoments
from bbmap.aggregate.resolve import Resolved, Resolver
from bbmap.buckets import DUPLICATE, IN_BLOCK, OTHER_DSO
from bbmap.formats import perfdata as fmt
from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH, MD_HAS_RETURN
from bbmap.model import BlockMap

# edge kinds (index into EDGE_KINDS)
K_BRANCH, K_CALL, K_RETURN, K_OTHER, K_FALLTHROUGH = range(5)
EDGE_KINDS = ("branch", "call", "return", "other", "fallthrough")

# perf_branch_entry.flags type field, filled with PERF_SAMPLE_BRANCH_TYPE_SAVE
_BR_CALLS = (fmt.BR_TYPE_CALL, fmt.BR_TYPE_IND_CALL, fmt.BR_TYPE_COND_CALL)
_BR_RETURNS = (fmt.BR_TYPE_RET, fmt.BR_TYPE_COND_RET)
_BR_JUMPS = (fmt.BR_TYPE_COND, fmt.BR_TYPE_UNCOND, fmt.BR_TYPE_IND)

R_VALID, R_NOT_IN_BLOCK, R_REVERSED, R_CROSS_FUNCTION, R_CROSS_RANGE, R_NO_FT = range(6)
assert RANGE_REASONS[R_NO_FT] == "no_fall_through"


@dataclass
class BlockGeometry:
    """Per-block facts the LBR rules need, computed once per block map."""

    start: np.ndarray  # u8 absolute block start address
    range_: np.ndarray  # i8 range index of each block
    func: np.ndarray  # i8 block-map function of each block
    md: np.ndarray  # u1 metadata bits
    entry_block: np.ndarray  # i8 per function: its first block (-1 if none)
    nft_prefix: np.ndarray  # i8 B+1: number of blocks < i that cannot fall through

    @classmethod
    def of(cls, m: BlockMap) -> BlockGeometry:
        B = m.num_blocks
        b = np.arange(B, dtype=np.int64)
        rng = (np.searchsorted(m.range_block_ptr, b, side="right") - 1).astype(np.int64)
        fn = (np.searchsorted(m.func_range_ptr, rng, side="right") - 1).astype(np.int64)
        start = m.block_starts()
        first = m.range_block_ptr[m.func_range_ptr[:-1]].astype(np.int64)
        nblocks = (m.range_block_ptr[m.func_range_ptr[1:]] - first) if m.num_functions else first
        entry = np.where(nblocks > 0, first, -1)
        nft = np.zeros(B + 1, np.int64)
        np.cumsum((m.block_md & MD_CAN_FALL_THROUGH) == 0, out=nft[1:])
        return cls(start=start, range_=rng, func=fn, md=m.block_md.copy(), entry_block=entry,
                   nft_prefix=nft)

    @property
    def num_blocks(self) -> int:
        return len(self.start)


QUIRK_MIN_STACKS = 32  # stacks (of >= 3 entries) needed to judge a batch on its own


def _adjacent_same(f: np.ndarray, t: np.ndarray, fl: np.ndarray) -> np.ndarray:
    """``same[i]``: entry ``i`` equals entry ``i + 1`` (source, target, flags); n - 1 long.
    One pass over contiguous neighbours, where gathering both entries of every pair
    would copy each column twice."""
    return (f[1:] == f[:-1]) & (t[1:] == t[:-1]) & (fl[1:] == fl[:-1])


def duplicate_newest_quirk(br_ptr: np.ndarray, br_from: np.ndarray, br_to: np.ndarray,
                           br_flags: np.ndarray, same: np.ndarray | None = None
                           ) -> tuple[bool, tuple[float, float, int] | None]:
    """Is entry 0 a hardware duplicate of entry 1 in this batch's stacks?

    The quirk makes entries 0 and 1 equal in (nearly) every sample; a program's own
    repeats (a one-block loop's back edge) make neighbours equal at every depth alike.
    So compare ``p0`` = P(entry 0 == entry 1) with ``p_deeper`` = P(entry k == entry k+1),
    k >= 1: the quirk is present when ``p0`` is near one and sits well above
    ``p_deeper`` (at least half-way from it to one).  Returns the verdict and the evidence
    ``(p0, p_deeper, stacks)``, or ``None`` evidence when too few stacks have 3 entries.
    ``same`` is :func:`_adjacent_same` of the columns when the caller has it.
    """
    counts = np.diff(br_ptr)
    first = br_ptr[:-1][counts >= 3].astype(np.int64)
    n = len(first)
    if n < QUIRK_MIN_STACKS:
        return False, None
    if same is None:
        same = _adjacent_same(br_from, br_to, br_flags)
    p0 = float(same[first].mean())
    # neighbours deeper in the stack: every (k, k+1) pair with k >= 1
    ends = br_ptr[1:].astype(np.int64)
    deeper = np.ones(len(br_from), bool)
    deeper[br_ptr[:-1].astype(np.int64)[counts > 0]] = False  # not entry 0 ...
    deeper[(ends - 1)[counts > 0]] = False  # ... and not the last entry (no k+1)
    nd = int(np.count_nonzero(deeper))  # (the very last entry is never one: no k + 1)
    # an exact count over an exact count: the float that ``same[k].mean()`` gives
    p_deeper = int(np.count_nonzero(same & deeper[:-1])) / nd if nd else 0.0
    quirk = p0 >= 0.98 and p0 >= p_deeper + 0.5 * (1.0 - p_deeper)
    return quirk, (p0, p_deeper, n)


class BranchAggregator:
    """Accumulates LBR stacks over any number of batches and files (bounded memory:
    per-block arrays plus the distinct edges)."""

    def __init__(self, geom: BlockGeometry, acct: Accounting, *,
                 drop_duplicate_newest: bool | None = None, cluster_stats: bool = False,
                 addresses: AddressAggregator | None = None) -> None:
        self.geom = geom
        self.addresses = addresses  # instruction-address traces (BOLT's formats)
        self.address_only = False  # only those (Annotator(address_only=True))
        self.cluster: ClusterAccumulator | None = None  # per-stack moments (opt-in)
        if cluster_stats:
            ent = geom.entry_block
            is_entry = np.zeros(geom.num_blocks, bool)
            is_entry[ent[ent >= 0]] = True
            self.cluster = ClusterAccumulator(geom.num_blocks, ent[geom.func] if len(
                geom.func) else np.zeros(0, np.int64), is_entry)
        self.acct = acct
        self.drop_duplicate_newest = drop_duplicate_newest  # None: detect per batch
        self.quirk_batches = 0  # batches in which the duplicated-newest quirk was seen
        self.quirk_evidence: tuple[float, float, int] | None = None  # (p0, p_deeper, n)
        # of the last batch judged to have the quirk
        self._last_quirk = False
        B = geom.num_blocks
        self._cover = np.zeros(B + 1, np.int64)  # difference array of block coverage
        self._ft = np.zeros(B + 1, np.int64)  # difference array of b -> b+1 fall-throughs
        self._edge_keys = np.zeros(0, np.int64)
        self._edge_counts = np.zeros(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_n = 0
        self.fit = None  # a bbmap.aggregate.fit.FitCollector, set by the Annotator

    # ---------------------------------------------------------------- batch
    def add(self, br_ptr: np.ndarray, br_from: np.ndarray, br_to: np.ndarray,
            br_flags: np.ndarray, pid: np.ndarray, seq: np.ndarray, resolver: Resolver,
            time: np.ndarray | None = None) -> None:
        n_ent = len(br_from)
        if n_ent == 0:
            return
        if not self.address_only:
            self.acct.total_branches += n_ent
        counts = np.diff(br_ptr).astype(np.int64)
        sample_of = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        first = br_ptr[:-1].astype(np.int64)

        # the duplicated newest entry: entries 0 and 1 identical -> drop entry 0
        keep = np.ones(n_ent, bool)
        drop = self.drop_duplicate_newest
        same = None  # neighbours equal (computed once for the verdict and the drop)
        if drop is None:
            same = _adjacent_same(br_from, br_to, br_flags)
            quirk, evidence = duplicate_newest_quirk(br_ptr, br_from, br_to, br_flags, same)
            if evidence is None:
                quirk = self._last_quirk  # too few stacks to tell: as the last batch
            else:
                if quirk:  # the warning shows the evidence of a batch that had the quirk
                    self.quirk_evidence = evidence
                self._last_quirk = quirk
            self.quirk_batches += int(quirk)
            drop = quirk
        if drop:
            two = np.flatnonzero(counts >= 2)
            e0 = first[two]
            if same is None:
                same = _adjacent_same(br_from, br_to, br_flags)
            keep[e0[same[e0]]] = False
        n_dup = int(n_ent - keep.sum())
        if n_dup and not self.address_only:
            self.acct.branches[DUPLICATE] += n_dup
        if n_dup and self.addresses is not None:
            self.addresses.profile.duplicate += n_dup

        if n_dup:
            kidx = np.flatnonzero(keep)
            src, dst, flg = br_from[kidx], br_to[kidx], br_flags[kidx]
            ksample = sample_of[kidx]
        else:  # nothing dropped: the columns as they are (no copies)
            src, dst, flg, ksample = br_from, br_to, br_flags, sample_of
        if self.address_only and self.addresses is not None:
            # BOLT's formats only: instruction addresses, no blocks (the entries are
            # tallied by the address aggregates, spec/bolt.md)
            space = getattr(resolver, "space", None)
            if hasattr(getattr(space, "pm", None), "constant_between"):
                ns = len(counts)  # per-sample moments; samples with no entry take no part
                spid = pid if len(pid) else np.zeros(ns, np.int32)
                sseq = seq if len(seq) else np.zeros(ns, np.int64)
                stime = time if time is not None and len(time) else None
                live = None if counts.all() else counts > 0  # (the duplicate rule drops
                # one of two or more entries: a sample keeps an entry iff it has one)
                if self.addresses.add_stacks_raw(src, dst, flg, ksample, spid, sseq, stime,
                                                 space, live):
                    return
        epid = pid[ksample] if len(pid) else np.zeros(len(src), np.int32)
        eseq = seq[ksample] if len(seq) else np.zeros(len(src), np.int64)
        etime = time[ksample] if time is not None and len(time) else None
        if self.address_only and self.addresses is not None:
            rf = resolver.resolve_binary(src, epid, eseq, None, etime)  # type: ignore[attr-defined]
            rt = resolver.resolve_binary(dst, epid, eseq, None, etime)  # type: ignore[attr-defined]
            self.addresses.add_stacks(src, dst, flg, ksample, rf, rt)
            return
        rf = resolver.resolve(src, epid, eseq, None, "from", etime)
        rt = resolver.resolve(dst, epid, eseq, None, "to", etime)
        if self.fit is not None:  # the first branches: evidence that the binary fits
            self.fit.add_branches(rf, rt)
        names = resolver.dso_names
        if self.addresses is not None:
            self.addresses.add_stacks(src, dst, flg, ksample, rf, rt)

        # ---- taken branches: one bucket each
        where = np.where(rf.where != IN_BLOCK, rf.where, rt.where).astype(np.int64)
        self.acct.add_branches(where)
        dso = np.where(rf.where != IN_BLOCK, rf.dso, rt.dso)
        Accounting.add_named(self.acct.dso_branches, dso[where == OTHER_DSO], names)
        edge = np.flatnonzero(where == IN_BLOCK)
        taken = None
        if len(edge):
            fb, tb = rf.block[edge], rt.block[edge]
            kind = self._kinds(fb, tb, rt.vaddr[edge], flg[edge])
            self._add_edges(fb, tb, kind)
            br = kind == K_BRANCH
            taken = (ksample[edge][br], fb[br], tb[br])

        # ---- fall-through ranges between consecutive kept entries of one sample
        valid = None
        if len(src) >= 2:
            pair = np.flatnonzero(ksample[:-1] == ksample[1:])  # newer j, older j+1
            if len(pair):
                valid = self._add_ranges(rt, pair + 1, rf, pair, ksample[pair])
        if self.cluster is not None:
            self._add_cluster(taken, valid)

    # --------------------------------------------------------------- ranges
    def _add_ranges(self, r_start: Resolved, i_start: np.ndarray, r_end: Resolved,
                    i_end: np.ndarray, stack: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Count the ranges; return the valid ones as (stack, start block, first block
        entered, end block)."""
        g = self.geom
        self.acct.total_ranges += len(i_start)
        reason = np.full(len(i_start), R_VALID, np.int8)
        ok = (r_start.where[i_start] == IN_BLOCK) & (r_end.where[i_end] == IN_BLOCK)
        reason[~ok] = R_NOT_IN_BLOCK
        s = np.where(ok, r_start.block[i_start], 0)
        e = np.where(ok, r_end.block[i_end], 0)
        if not ok.any():  # e.g. a binary with no block map: block 0 does not exist
            self.acct.add_ranges(reason)
            return stack[:0], s[:0], s[:0], e[:0]
        va_s, va_e = r_start.vaddr[i_start], r_end.vaddr[i_end]
        todo = reason == R_VALID
        bad = todo & ((va_s > va_e) | (s > e))
        reason[bad] = R_REVERSED
        todo &= ~bad
        bad = todo & (g.func[s] != g.func[e])
        reason[bad] = R_CROSS_FUNCTION
        todo &= ~bad
        bad = todo & (g.range_[s] != g.range_[e])
        reason[bad] = R_CROSS_RANGE
        todo &= ~bad
        bad = todo & ((g.nft_prefix[e] - g.nft_prefix[s]) > 0)
        reason[bad] = R_NO_FT
        self.acct.add_ranges(reason)
        v = reason == R_VALID
        s, e, va_s, stack = s[v], e[v], va_s[v], stack[v]
        n = len(self._cover)
        # a block is *entered* by a range that holds its first instruction: a range that
        # starts inside a block (a return landing after its call) adds to the blocks after
        # it, not to the one it starts in, which was entered before the call
        first = s + (va_s != g.start[s])
        ok = first <= e
        self._cover += np.bincount(first[ok], minlength=n)
        self._cover -= np.bincount(e[ok] + 1, minlength=n)
        self._ft += np.bincount(s, minlength=n)
        self._ft -= np.bincount(e, minlength=n)
        return stack, s, first, e

    def _add_cluster(self, taken: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                     valid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None
                     ) -> None:
        """Per-stack moments of this batch: block executions (as block_counts counts
        them) and intra-function transfers (taken branches and fall-throughs)."""
        z = np.zeros(0, np.int64)
        c_stack = c_first = c_last = z
        es, ef, et = [], [], []
        if taken is not None:
            es.append(taken[0].astype(np.int64))
            ef.append(taken[1].astype(np.int64))
            et.append(taken[2].astype(np.int64))
        if valid is not None:
            stack, s, first, e = valid
            ok = first <= e
            c_stack, c_first, c_last = stack[ok], first[ok], e[ok]
            nft = (e - s).astype(np.int64)  # fall-throughs s->s+1 ... e-1->e
            if nft.sum():
                b = (np.repeat(s - np.cumsum(np.r_[0, nft[:-1]]), nft)
                     + np.arange(int(nft.sum()))).astype(np.int64)
                es.append(np.repeat(stack.astype(np.int64), nft))
                ef.append(b)
                et.append(b + 1)
        cat = (lambda a: np.concatenate(a) if a else z)  # noqa: E731
        self.cluster.add(c_stack, c_first, c_last, cat(es), cat(ef), cat(et))

    # ---------------------------------------------------------------- edges
    def _kinds(self, fb: np.ndarray, tb: np.ndarray, to_vaddr: np.ndarray,
               flags: np.ndarray) -> np.ndarray:
        g = self.geom
        kind = np.full(len(fb), K_BRANCH, np.int64)
        same = g.func[fb] == g.func[tb]
        kind[~same] = K_OTHER
        at_start = to_vaddr == g.start[tb]
        to_entry = at_start & (g.entry_block[g.func[tb]] == tb)
        kind[to_entry] = K_CALL  # an entry block is never a branch target inside its function
        ret = ((g.md[fb] & MD_HAS_RETURN) != 0) | ~at_start
        kind[ret & ~to_entry] = K_RETURN
        # the hardware's branch type, when recorded, overrides the guesses
        t = (flags >> np.uint64(fmt.BRF_TYPE_SHIFT)) & np.uint64(fmt.BRF_TYPE_MASK)
        if t.any():
            kind[np.isin(t, _BR_CALLS)] = K_CALL
            kind[np.isin(t, _BR_RETURNS)] = K_RETURN
            j = np.isin(t, _BR_JUMPS)
            kind[j & same] = K_BRANCH
            kind[j & ~same] = K_OTHER
        return kind

    def _add_edges(self, fb: np.ndarray, tb: np.ndarray, kind: np.ndarray) -> None:
        B = max(self.geom.num_blocks, 1)
        key = (fb * B + tb) * 8 + kind
        k, c = np.unique(key, return_counts=True)
        self._pending.append((k, c))
        self._pending_n += len(k)
        if self._pending_n > max(4 * len(self._edge_keys), 1 << 20):
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        keys = np.concatenate([self._edge_keys, *[p[0] for p in self._pending]])
        cnts = np.concatenate([self._edge_counts, *[p[1] for p in self._pending]])
        self._pending, self._pending_n = [], 0
        order = np.argsort(keys, kind="stable")
        keys, cnts = keys[order], cnts[order]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else keys
        self._edge_keys = keys[starts]
        self._edge_counts = np.add.reduceat(cnts, starts) if len(keys) else cnts

    def merge(self, other: BranchAggregator) -> None:
        """Add another aggregator's counts (same geometry); accounting is merged apart."""
        self._cover += other._cover
        self._ft += other._ft
        if self.cluster is not None and other.cluster is not None:
            self.cluster.merge(other.cluster)
        self.quirk_batches += other.quirk_batches
        self.quirk_evidence = other.quirk_evidence or self.quirk_evidence
        other._fold()
        self._pending.append((other._edge_keys, other._edge_counts))
        self._pending_n += len(other._edge_keys)
        self._fold()

    def raw_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The additive state, for an aggregate file (bbmap.aggregate.store): block
        entries, ``b -> b+1`` fall-throughs (both per block) and the taken edges as
        (sorted key ``(from * B + to) * 8 + kind``, count)."""
        self._fold()
        return (self.block_counts(), np.cumsum(self._ft)[:-1], self._edge_keys.copy(),
                self._edge_counts.copy())

    def add_raw(self, block_count: np.ndarray, fallthrough: np.ndarray,
                edge_keys: np.ndarray, edge_counts: np.ndarray) -> None:
        """Add counts that :meth:`raw_counts` gave (of another aggregator, same binary)."""
        z = np.zeros(1, np.int64)
        self._cover += np.diff(np.concatenate([z, block_count, z]))
        self._ft += np.diff(np.concatenate([z, fallthrough, z]))
        if len(edge_keys):
            self._pending.append((edge_keys.astype(np.int64), edge_counts.astype(np.int64)))
            self._pending_n += len(edge_keys)
            self._fold()

    # -------------------------------------------------------------- results
    def block_counts(self) -> np.ndarray:
        """Execution estimate per block: valid fall-through ranges covering it."""
        return np.cumsum(self._cover)[:-1]

    def cluster_moments(self) -> ClusterMoments | None:
        """Per-stack moments (bbmap.aggregate.cluster), or None unless cluster_stats."""
        return None if self.cluster is None else self.cluster.result()

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(from_block, to_block, kind, count) for taken and fall-through edges."""
        self._fold()
        B = max(self.geom.num_blocks, 1)
        kind = self._edge_keys % 8
        pair = self._edge_keys // 8
        fb, tb = pair // B, pair % B
        ft = np.cumsum(self._ft)[:-1]
        b = np.flatnonzero(ft > 0)
        return (np.concatenate([fb, b]), np.concatenate([tb, b + 1]),
                np.concatenate([kind, np.full(len(b), K_FALLTHROUGH, np.int64)]),
                np.concatenate([self._edge_counts, ft[b]]))
