"""A profile of build N as counts on build N+1 (spec/stale.md).

``carry`` takes the annotate result of the profile on the binary it was recorded on and
makes the result the same profile would have on the new binary: every old block's
samples (and the sampled instruction addresses in it, for the sample models) go to the
new block matched to it (:mod:`bbmap.stale.match`), blocks of a matched function that
nothing matched are marked unknown, and the counts are inferred over the new binary's
CFG with the carried samples as soft evidence (:func:`bbmap.run.apply_inference`
with ``unknown``).  Every annotate format and layout output is then written from that
result as from a fresh one.  A byte-identical rebuild matches every function ``exact``,
carries every address unchanged, and so gives the counts annotate gives directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from bbmap.aggregate.addresses import AddressProfile
from bbmap.aggregate.result import AnnotateResult
from bbmap.arrays import expand_ranges
from bbmap.errors import Diagnostic
from bbmap.stale.fingerprint import (
    block_starts,
    code_reader,
    content_hash,
    fingerprint,
    function_blocks,
    same_code_pairs,
)
from bbmap.stale.match import ANCHOR, DROPPED, EXACT, HASH, match_blocks
from bbmap.stale.names import match_functions

MIN_CARRIED = 0.5  # below this share of the profile's block samples carried: refused
INLINED = "inlined"  # a function gone from the new build, carried into its callers' copies
CARRY_KINDS = (EXACT, HASH, ANCHOR, INLINED, DROPPED)  # how a sample carried (or not)


@dataclass
class FunctionCarry:
    """How one sampled function of the old build carried over (samples by how)."""

    name: str
    new_name: str | None
    found_by: str | None  # name | suffix | content | None (no function matched)
    samples: int
    exact: int = 0
    hash: int = 0
    anchor: int = 0
    inlined: int = 0  # a function gone from the new build: into its callers' copies
    dropped: int = 0
    inferred: float = 0.0  # share of the new function's count on blocks with no evidence
    blocks_old: int = 0
    blocks_new: int = 0

    @property
    def carried(self) -> int:
        return self.exact + self.hash + self.anchor + self.inlined

    def to_json(self) -> dict:
        s = max(self.samples, 1)
        return {"function": self.name, "new_function": self.new_name,
                "found_by": self.found_by, "samples": self.samples,
                "blocks_old": self.blocks_old, "blocks_new": self.blocks_new,
                "share": {k: round(getattr(self, k) / s, 4)
                          for k in CARRY_KINDS}
                | {"inferred": round(self.inferred, 4)}}


@dataclass
class CarryReport:
    """Per function and in total, how much of the profile's weight carried over and how."""

    old_binary: str
    new_binary: str
    functions: list[FunctionCarry] = field(default_factory=list)
    threshold: float = MIN_CARRIED
    forced: bool = False
    # the profiled build's result and binary, and each matched old function's name in the
    # new build (what the match-infer profile is written from)
    old_result: Any = None
    old_bin: Any = None  # a bbmap.binary.Binary
    renames: dict[int, str] = field(default_factory=dict)

    def profiled_counts(self) -> AnnotateResult:
        """The profiled build's result with counts (inferred here if it had none): what
        clang 22's match-infer profile is written from, under ``renames``."""
        from bbmap.run import apply_inference

        if not self.old_result.has_counts:
            self.old_result = apply_inference(self.old_result, self.old_bin, "on")
        return self.old_result

    @property
    def samples(self) -> int:
        return sum(f.samples for f in self.functions)

    def total(self, kind: str) -> int:
        return sum(getattr(f, kind) for f in self.functions)

    @property
    def carried_share(self) -> float:
        s = self.samples
        return sum(f.carried for f in self.functions) / s if s else 0.0

    @property
    def too_little(self) -> bool:
        return self.carried_share < self.threshold

    def worst_first(self) -> list[FunctionCarry]:
        return sorted(self.functions, key=lambda f: (-f.dropped, -(f.samples - f.exact),
                                                     f.name))

    def to_json(self) -> dict:
        s = max(self.samples, 1)
        return {"profiled_binary": self.old_binary, "binary": self.new_binary,
                "samples": self.samples, "carried_share": round(self.carried_share, 4),
                "threshold": self.threshold, "too_little": self.too_little,
                "share": {k: round(self.total(k) / s, 4) for k in CARRY_KINDS},
                "functions": [f.to_json() for f in self.worst_first()]}

    def render_text(self, top: int = 20) -> str:
        s = max(self.samples, 1)
        pct = {k: 100 * self.total(k) / s for k in CARRY_KINDS}
        lines = [f"carried {self.old_binary} -> {self.new_binary}: "
                 f"{100 * self.carried_share:.1f}% of {self.samples} block samples "
                 f"(exact {pct['exact']:.1f}%, hash {pct['hash']:.1f}%, "
                 f"anchor {pct['anchor']:.1f}%, inlined {pct['inlined']:.1f}%, "
                 f"dropped {pct['dropped']:.1f}%)",
                 f"{'function':40} {'samples':>8} {'exact':>6} {'hash':>6} {'anchor':>6} "
                 f"{'dropped':>7} {'inferred':>8}  found by"]
        for f in self.worst_first()[:top]:
            n = max(f.samples, 1)
            lines.append(f"{f.name[:40]:40} {f.samples:8d} {100 * f.exact / n:5.1f}% "
                         f"{100 * f.hash / n:5.1f}% {100 * f.anchor / n:5.1f}% "
                         f"{100 * f.dropped / n:6.1f}% {100 * f.inferred:7.1f}%  "
                         f"{f.found_by or 'no match'}")
        return "\n".join(lines) + "\n"


def _block_func(m: Any) -> np.ndarray:
    rf = np.repeat(np.arange(m.num_functions, dtype=np.int64), np.diff(m.func_range_ptr))
    return rf[np.repeat(np.arange(m.num_ranges, dtype=np.int64), np.diff(m.range_block_ptr))] \
        if m.num_blocks else np.zeros(0, np.int64)


def carry(old_res: AnnotateResult, old_bin: Any, new_bin: Any, *, inference: str = "auto",
          solver: str = "auto", disasm_cache: bool = False, sample_model: str = "auto",
          demangle: bool = True, threshold: float = MIN_CARRIED
          ) -> tuple[AnnotateResult, CarryReport]:
    """``old_res`` (a result on ``old_bin``) carried onto ``new_bin`` (both
    :class:`bbmap.binary.Binary`), and the report of how."""
    from bbmap.run import apply_inference

    mo, mn = old_bin.block_map, new_bin.block_map
    bf_o = _block_func(mo)
    bs_o = np.asarray(old_res.block_samples, np.int64)
    fs_o = np.bincount(bf_o, weights=bs_o, minlength=mo.num_functions).astype(np.int64) \
        if mo.num_blocks else np.zeros(mo.num_functions, np.int64)
    sampled = np.flatnonzero(fs_o > 0)
    cache: dict[tuple[str, int], int] = {}

    def content(side: str, f: int) -> int:
        k = (side, f)
        if k not in cache:
            cache[k] = content_hash(mo if side == "old" else mn, f)
        return cache[k]

    names_o = mo.func_name or [None] * mo.num_functions
    names_n = mn.func_name or [None] * mn.num_functions
    fmap, how = match_functions(names_o, names_n, sampled.tolist(), content)
    # unchanged functions (the same blocks and bytes) are matched block for block without
    # disassembly: in a rebuild most are, and fingerprinting is the cost of a carry
    co, cn = code_reader(old_bin), code_reader(new_bin)
    pf = np.fromiter(fmap.keys(), np.int64, len(fmap))
    pg = np.fromiter(fmap.values(), np.int64, len(fmap))
    is_same = same_code_pairs(old_bin, new_bin, pf, pg, co, cn)
    same = set(pf[is_same].tolist())
    fo = fingerprint(old_bin, np.asarray(sorted(set(fmap) - same), np.int64))
    fnp = fingerprint(new_bin, np.asarray(sorted(fmap[f] for f in set(fmap) - same),
                                          np.int64))
    B = mn.num_blocks
    block_starts_n = block_starts(mn)
    bs_n = np.zeros(B, np.int64)
    bp_n = np.zeros(B, np.uint64)
    unknown = np.zeros(B, bool)
    bmap = np.full(mo.num_blocks, -1, np.int64)
    bkind: dict[int, str] = {}
    report = CarryReport(old_bin.path, new_bin.path, threshold=threshold,
                         old_result=old_res, old_bin=old_bin,
                         renames={f: names_n[g] for f, g in fmap.items() if names_n[g]})
    # the exact pairs' blocks, all at once: block i of one is block i of the other
    sf, sg = pf[is_same], pg[is_same]
    n_same = (mo.range_block_ptr[mo.func_range_ptr[sf + 1]]
              - mo.range_block_ptr[mo.func_range_ptr[sf]]).astype(np.int64)
    ob_all = expand_ranges(mo.range_block_ptr[mo.func_range_ptr[sf]].astype(np.int64),
                           n_same)
    nb_all = expand_ranges(mn.range_block_ptr[mn.func_range_ptr[sg]].astype(np.int64),
                           n_same)
    bmap[ob_all] = nb_all
    bs_n[nb_all] += bs_o[ob_all]  # one to one: no block twice
    bp_n[nb_all] += np.asarray(old_res.block_period, np.uint64)[ob_all]
    exact = np.zeros(mo.num_blocks, bool)
    exact[ob_all] = True
    per_func: dict[int, FunctionCarry] = {}
    nblk_o = np.diff(mo.range_block_ptr[mo.func_range_ptr]).astype(np.int64)
    nblk_n = np.diff(mn.range_block_ptr[mn.func_range_ptr]).astype(np.int64)
    for f in sampled.tolist():
        fc = FunctionCarry(name=names_o[f] or f"0x{int(mo.func_address[f]):x}",
                           new_name=None, found_by=None, samples=int(fs_o[f]),
                           blocks_old=int(nblk_o[f]))
        per_func[f] = fc
        report.functions.append(fc)
        g = fmap.get(f)
        if g is None:
            fc.dropped = fc.samples
            continue
        fc.new_name, fc.found_by, fc.blocks_new = names_n[g], how[f], int(nblk_n[g])
        if f in same:  # carried above
            fc.exact = fc.samples
            continue
        ob, nb = function_blocks(mo, f), function_blocks(mn, g)
        pairs = match_blocks(ob.tolist(), nb.tolist(), fo, fnp, mo.block_size, mn.block_size)
        hit = np.zeros(len(nb), bool)
        for a, (b, kind) in pairs.items():
            bmap[a] = b
            bkind[a] = kind
            bs_n[b] += bs_o[a]
            bp_n[b] += np.uint64(old_res.block_period[a])
            hit[b - int(nb[0])] = True
        unknown[nb[~hit]] = True
        for a in ob.tolist():
            k = bkind.get(a, DROPPED)
            setattr(fc, k, getattr(fc, k) + int(bs_o[a]))
    extra_ips: list[tuple[int, int]] = []
    period_o = np.asarray(old_res.block_period, np.float64)
    for h, moves in _inlined_callees(old_bin, mo, mn, sampled, fmap, same, fo, fnp, bs_o,
                                     unknown, names_o, bmap).items():
        fc = per_func[h]
        for b, n in moves:
            bs_n[b] += n
            bp_n[b] += np.uint64(round(n * float(period_o[function_blocks(mo, h)].sum())
                                       / max(fc.samples, 1)))
            unknown[b] = False
            extra_ips.extend(_inside(fnp.insn_addr.get(b), int(block_starts_n[b]), n))
            fc.inlined += n
        fc.dropped -= fc.inlined
        fc.found_by = INLINED
    res = _carried_result(old_res, new_bin, bs_n, bp_n, demangle, report,
                          _carry_addresses(old_res.addresses, old_bin, bmap, exact, fo, fnp,
                                           block_starts(mo), block_starts_n, extra_ips))
    if report.too_little:
        res.warnings.append(Diagnostic(
            f"only {100 * report.carried_share:.1f}% of the profile's block samples carried "
            f"from {old_bin.path} to {new_bin.path} (at least {100 * threshold:.0f}% needed; "
            "--force keeps the result)", severity="error"))
    res = apply_inference(res, new_bin, inference, solver=solver, disasm_cache=disasm_cache,
                          sample_model=sample_model,
                          unknown=unknown if unknown.any() else None)
    res = replace(res, unknown_blocks=unknown if unknown.any() else None)
    if res.count_source == "inferred" and B:
        _inferred_shares(res, per_func, fmap, _block_func(mn), unknown, mn.num_functions)
    return res, report


def _carried_result(old_res: AnnotateResult, new_bin: Any, bs_n: np.ndarray,
                    bp_n: np.ndarray, demangle: bool, report: CarryReport,
                    addresses: Any) -> AnnotateResult:
    """The carried samples as a result on ``new_bin`` (no counts yet: inference follows),
    with the old run's accounting, profiles and errors."""
    from bbmap.aggregate.functions import FunctionTable

    mn = new_bin.block_map
    B = mn.num_blocks
    ft = FunctionTable.build(new_bin.symbols, mn, demangle=demangle,
                             sections=new_bin.sections)
    key_n = ft.key_of_bmfunc
    bf_n = _block_func(mn)
    func_samples = np.zeros(ft.num_keys, np.int64)
    func_period = np.zeros(ft.num_keys, np.uint64)
    if B:
        np.add.at(func_samples, key_n[bf_n], bs_n)
        np.add.at(func_period, key_n[bf_n], bp_n)
    return AnnotateResult(
        binary=new_bin.path, build_id=new_bin.build_id, block_map=mn, functions=ft,
        accounting=old_res.accounting, profiles=old_res.profiles, block_samples=bs_n,
        block_period=bp_n, block_count=np.zeros(B, np.int64), func_samples=func_samples,
        func_period=func_period, edge_from=np.zeros(0, np.int64),
        edge_to=np.zeros(0, np.int64), edge_kind=np.zeros(0, np.int64),
        edge_count=np.zeros(0, np.int64), has_lbr=False,
        warnings=[w for w in old_res.warnings if w.severity == "error"],
        status=old_res.status, block_start=block_starts(mn), addresses=addresses,
        carried=report)


def _inferred_shares(res: AnnotateResult, per_func: dict[int, FunctionCarry],
                     fmap: dict[int, int], bf_n: np.ndarray, unknown: np.ndarray,
                     num_functions: int) -> None:
    """Each carried function's share of its new count that inference supplied (blocks
    nothing carried to)."""
    cnt = np.asarray(res.block_count, np.float64)
    tot = np.bincount(bf_n, weights=cnt, minlength=num_functions)
    unk = np.bincount(bf_n, weights=np.where(unknown, cnt, 0.0), minlength=num_functions)
    for f, fc in per_func.items():
        g = fmap.get(f)
        if g is not None:
            fc.inferred = float(unk[g]) / float(tot[g]) if tot[g] else 0.0


def _inlined_callees(old_bin: Any, mo: Any, mn: Any, sampled: np.ndarray,
                     fmap: dict[int, int], same: set[int], fo: Any, fn: Any,
                     bs_o: np.ndarray, unknown: np.ndarray, names_o: list,
                     bmap: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """Samples of sampled old functions the new build does not have, carried into the
    copies the new build inlined into their callers: per such function ``h``, the
    (new block, samples) it gives.  A caller is a matched, changed function whose old
    blocks call ``h``; its share of ``h``'s samples is its calling blocks' share of the
    samples of all of ``h``'s calling blocks; inside the caller's new function, each of
    ``h``'s blocks goes to the caller's blocks that nothing matched with the same opcodes
    (split evenly among them); when none has, ``h``'s share goes to the unmatched blocks
    next to the image of each calling block (by instructions), or to the images
    themselves when none is and they grew (a small copy merged into the calling block; a
    call taken out shrinks it).  An inlined copy is
    otherwise unknown to inference, which sends no flow through it when a path around it
    exists (SQLite 3.54 inlines ``sqlite3GetVarint`` into twelve callers)."""
    from bbmap.stale.names import base_name

    gone = {base_name(names_o[h]): h for h in sampled.tolist()
            if h not in fmap and names_o[h]}
    if not gone:
        return {}
    weight: dict[int, dict[int, float]] = {}  # h -> caller f -> weight
    sites: dict[tuple[int, int], list[int]] = {}  # (h, f) -> f's old blocks calling h
    for f in sorted(set(fmap) - same):
        for a in function_blocks(mo, f).tolist():
            for c in fo.calls.get(a, ()):
                h = gone.get(c)
                if h is not None:
                    w = weight.setdefault(h, {})
                    w[f] = w.get(f, 0.0) + float(bs_o[a]) + 1.0
                    sites.setdefault((h, f), []).append(a)
    if not weight:
        return {}
    fh = fingerprint(old_bin, np.asarray(sorted(weight), np.int64))
    out: dict[int, list[tuple[int, int]]] = {}
    for h, callers in sorted(weight.items()):
        total = sum(callers.values())
        hb = [x for x in function_blocks(mo, h).tolist() if bs_o[x] > 0]
        moves: dict[int, int] = {}
        for f, w in sorted(callers.items()):
            nb = function_blocks(mn, fmap[f])
            free: dict[int, list[int]] = {}
            for y in nb[unknown[nb]].tolist():
                if fn.opcode[y]:
                    free.setdefault(int(fn.opcode[y]), []).append(y)
            left = []  # h's blocks no unmatched block of the copy has the opcodes of
            for x in hb:
                to = free.get(int(fh.opcode[x]))
                n = int(float(bs_o[x]) * w / total)  # floor: never more than h had
                if n <= 0:
                    continue
                if to:
                    _spread(moves, to, [1] * len(to), n)
                else:
                    left.append(x)
            if not left:
                continue
            # the copy was compiled anew in its caller (other opcodes): the unmatched
            # blocks around each call site's image, in address order, each of h's blocks
            # to the one at its relative position (a copy keeps its callee's order: its
            # hot entry first, its rare tail last); the entry's own test merges into the
            # calling block's image
            calls = sites.get((h, f), [])
            region = sorted(_region(calls, bmap, fn, unknown))
            images = sorted({int(bmap[a]) for a in calls if bmap[a] >= 0})
            allh = function_blocks(mo, h)
            if region:
                for x in left:
                    n = int(float(bs_o[x]) * w / total)
                    i = x - int(allh[0])
                    if i == 0 and images:
                        _spread(moves, images, [1] * len(images), n)
                    else:
                        j = max(i - 1, 0) * len(region) // max(len(allh) - 1, 1)
                        _spread(moves, [region[min(j, len(region) - 1)]], [1], n)
                continue
            region = [y for y in images  # a copy merged into the call's block
                      if int(fn.n_insn[y]) > min(int(fo.n_insn[a]) for a in calls
                                                 if bmap[a] == y)]
            n = int(float(bs_o[left].sum()) * w / total)
            if region and n > 0:
                _spread(moves, region, [max(int(fn.n_insn[y]), 1) for y in region], n)
        if moves:
            out[h] = sorted(moves.items())
    return out


def _inside(addrs: np.ndarray | None, start: int, n: int) -> list[tuple[int, int]]:
    """``n`` samples given to a block as IPs (address, samples) the sample models credit
    to the block itself: spread over its instructions from the third (the second when
    it has two).  The time model credits a sample on a block's first instruction to
    whichever block ran before (skid: ``bbmap.inference.weights``), and one on the second
    after a cheap first to a front-end refill at a tenth of its weight, so samples put at
    the block's start are lost to it (SQLite 3.54's ``sqlite3BtreeTableMoveto``: the
    inlined ``sqlite3GetVarint``'s 1,500 samples, all at block starts, left its copy's
    blocks a count of 1).  A block of one instruction (or not disassembled): its start."""
    if addrs is None or len(addrs) < 2:
        return [(start, n)] if n > 0 else []
    ins = [int(a) for a in addrs[(2 if len(addrs) >= 3 else 1):]]
    parts = [n // len(ins)] * len(ins)
    for i in range(n - sum(parts)):
        parts[i] += 1
    return [(a, k) for a, k in zip(ins, parts) if k]


REGION_MAX = 16  # unmatched blocks around a call site's image taken for an inlined copy


def _region(calls: list[int], bmap: np.ndarray, fn: Any, unknown: np.ndarray) -> list[int]:
    """The unmatched new blocks next to the images of the old blocks ``calls`` (before
    them: the call's block kept what follows the call; after them), through unmatched
    blocks only (breadth first, at most ``REGION_MAX``)."""
    seen: list[int] = []
    todo = [int(bmap[a]) for a in calls if bmap[a] >= 0]
    while todo and len(seen) < REGION_MAX:
        nxt = []
        for b in todo:
            for y in [*fn.pred.get(b, []), *fn.succ.get(b, [])]:
                if unknown[y] and y not in seen and len(seen) < REGION_MAX:
                    seen.append(y)
                    nxt.append(y)
        todo = nxt
    return seen


def _spread(moves: dict[int, int], to: list[int], weights: list[int], n: int) -> None:
    """``n`` samples over the blocks ``to`` in proportion to ``weights`` (integers; the
    remainder to the first ones)."""
    tot = sum(weights)
    parts = [n * w // tot for w in weights]
    for i in range(n - sum(parts)):
        parts[i % len(parts)] += 1
    for y, k in zip(to, parts):
        if k:
            moves[y] = moves.get(y, 0) + k


def _carry_addresses(a: AddressProfile | None, old_bin: Any, bmap: np.ndarray,
                     exact: np.ndarray, fo: Any, fn: Any, start_o: np.ndarray,
                     start_n: np.ndarray, extra: list[tuple[int, int]] = ()
                     ) -> AddressProfile | None:
    """The IP histogram on the new binary: an IP in an exactly matched block keeps its
    offset; in another matched block it goes to the instruction of the same index (the
    last one if the block got shorter); in an unmatched block it is dropped.  Branch
    traces are not carried (their addresses pair two blocks' fates).  ``exact``: bool
    per old block; ``extra``: (address, samples) carried otherwise (inlined callees, inside
    their copies' blocks: :func:`_inside`)."""
    from bbmap.buckets import IN_BLOCK
    from bbmap.index import BlockIndex

    if a is None:
        return None
    ip, cnt = np.asarray(a.ip_addr, np.uint64), np.asarray(a.ip_samples, np.int64)
    lk = BlockIndex(old_bin.block_map, old_bin.symbols, old_bin.sections).lookup(ip)
    b = np.asarray(lk.block, np.int64)
    live = (np.asarray(lk.status) == IN_BLOCK) & (b >= 0)
    live[live] = bmap[b[live]] >= 0
    ex = live.copy()
    ex[ex] = exact[b[ex]]
    t = bmap[b[ex]]  # exact: the same offset in the matched block
    out_ip: list[int] = (start_n[t] + (ip[ex] - start_o[b[ex]])).tolist()
    out_n: list[int] = cnt[ex].tolist()
    for addr, n, blk in zip(ip[live & ~ex].tolist(), cnt[live & ~ex].tolist(),
                            b[live & ~ex].tolist()):
        t = int(bmap[blk])
        ia, ib = fo.insn_addr.get(blk), fn.insn_addr.get(t)
        if ia is None or ib is None or not len(ib):
            out_ip.append(int(start_n[t]))
        else:
            i = max(int(np.searchsorted(ia, np.uint64(addr), "right")) - 1, 0)
            out_ip.append(int(ib[min(i, len(ib) - 1)]))
        out_n.append(n)
    for addr, n in extra:
        out_ip.append(addr)
        out_n.append(n)
    if out_ip:
        u, inv = np.unique(np.asarray(out_ip, np.uint64), return_inverse=True)
        s = np.bincount(inv, weights=np.asarray(out_n, np.float64)).astype(np.int64)
    else:
        u, s = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return AddressProfile(ip_addr=u, ip_samples=s, events=list(a.events), samples=a.samples)


__all__ = ["ANCHOR", "DROPPED", "EXACT", "HASH", "CarryReport", "FunctionCarry", "carry"]
