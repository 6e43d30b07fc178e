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

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.aggregate.addresses import AddressProfile
from bbmap.aggregate.result import AnnotateResult
from bbmap.errors import Diagnostic
from bbmap.stale.fingerprint import (
    block_starts,
    code_reader,
    content_hash,
    fingerprint,
    function_blocks,
    same_code,
)
from bbmap.stale.match import ANCHOR, DROPPED, EXACT, HASH, match_blocks
from bbmap.stale.names import match_functions

MIN_CARRIED = 0.5  # below this share of the profile's block samples carried: refused


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
    dropped: int = 0
    inferred: float = 0.0  # share of the new function's count on blocks with no evidence
    blocks_old: int = 0
    blocks_new: int = 0

    @property
    def carried(self) -> int:
        return self.exact + self.hash + self.anchor

    def to_json(self) -> dict:
        s = max(self.samples, 1)
        return {"function": self.name, "new_function": self.new_name,
                "found_by": self.found_by, "samples": self.samples,
                "blocks_old": self.blocks_old, "blocks_new": self.blocks_new,
                "share": {k: round(getattr(self, k) / s, 4)
                          for k in ("exact", "hash", "anchor", "dropped")}
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
                "share": {k: round(self.total(k) / s, 4)
                          for k in ("exact", "hash", "anchor", "dropped")},
                "functions": [f.to_json() for f in self.worst_first()]}

    def render_text(self, top: int = 20) -> str:
        s = max(self.samples, 1)
        pct = {k: 100 * self.total(k) / s for k in ("exact", "hash", "anchor", "dropped")}
        lines = [f"carried {self.old_binary} -> {self.new_binary}: "
                 f"{100 * self.carried_share:.1f}% of {self.samples} block samples "
                 f"(exact {pct['exact']:.1f}%, hash {pct['hash']:.1f}%, "
                 f"anchor {pct['anchor']:.1f}%, dropped {pct['dropped']:.1f}%)",
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
    from bbmap.aggregate.functions import FunctionTable
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
    same = {f for f, g in fmap.items() if same_code(old_bin, new_bin, f, g, co, cn)}
    fo = fingerprint(old_bin, np.asarray(sorted(set(fmap) - same), np.int64))
    fnp = fingerprint(new_bin, np.asarray(sorted(fmap[f] for f in set(fmap) - same),
                                          np.int64))
    B = mn.num_blocks
    bs_n = np.zeros(B, np.int64)
    bp_n = np.zeros(B, np.uint64)
    unknown = np.zeros(B, bool)
    bmap = np.full(mo.num_blocks, -1, np.int64)
    bkind: dict[int, str] = {}
    report = CarryReport(old_bin.path, new_bin.path, threshold=threshold,
                         old_result=old_res, old_bin=old_bin,
                         renames={f: names_n[g] for f, g in fmap.items() if names_n[g]})
    per_func: dict[int, FunctionCarry] = {}
    for f in sampled.tolist():
        ob = function_blocks(mo, f)
        fc = FunctionCarry(name=names_o[f] or f"0x{int(mo.func_address[f]):x}",
                           new_name=None, found_by=None, samples=int(fs_o[f]),
                           blocks_old=len(ob))
        per_func[f] = fc
        report.functions.append(fc)
        g = fmap.get(f)
        if g is None:
            fc.dropped = fc.samples
            continue
        nb = function_blocks(mn, g)
        fc.new_name, fc.found_by, fc.blocks_new = names_n[g], how[f], len(nb)
        if f in same:
            pairs = {a: (b, EXACT) for a, b in zip(ob.tolist(), nb.tolist())}
        else:
            pairs = match_blocks(ob.tolist(), nb.tolist(), fo, fnp, mo.block_size,
                                 mn.block_size)
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
    ft = FunctionTable.build(new_bin.symbols, mn, demangle=demangle,
                             sections=new_bin.sections)
    key_n = ft.key_of_bmfunc
    bf_n = _block_func(mn)
    func_samples = np.zeros(ft.num_keys, np.int64)
    func_period = np.zeros(ft.num_keys, np.uint64)
    if B:
        np.add.at(func_samples, key_n[bf_n], bs_n)
        np.add.at(func_period, key_n[bf_n], bp_n)
    res = AnnotateResult(
        binary=new_bin.path, build_id=new_bin.build_id, block_map=mn, functions=ft,
        accounting=old_res.accounting, profiles=old_res.profiles, block_samples=bs_n,
        block_period=bp_n, block_count=np.zeros(B, np.int64), func_samples=func_samples,
        func_period=func_period, edge_from=np.zeros(0, np.int64),
        edge_to=np.zeros(0, np.int64), edge_kind=np.zeros(0, np.int64),
        edge_count=np.zeros(0, np.int64), has_lbr=False,
        warnings=[w for w in old_res.warnings if w.severity == "error"],
        status=old_res.status, block_start=block_starts(mn),
        addresses=_carry_addresses(old_res.addresses, old_bin, bmap, bkind, fo, fnp,
                                   block_starts(mo), block_starts(mn)), carried=report)
    if report.too_little:
        res.warnings.append(Diagnostic(
            f"only {100 * report.carried_share:.1f}% of the profile's block samples carried "
            f"from {old_bin.path} to {new_bin.path} (at least {100 * threshold:.0f}% needed; "
            "--force keeps the result)", severity="error"))
    res = apply_inference(res, new_bin, inference, solver=solver, disasm_cache=disasm_cache,
                          sample_model=sample_model,
                          unknown=unknown if unknown.any() else None)
    if res.count_source == "inferred":
        for f, fc in per_func.items():
            g = fmap.get(f)
            if g is None:
                continue
            nb = function_blocks(mn, g)
            tot = float(res.block_count[nb].sum())
            fc.inferred = float(res.block_count[nb][unknown[nb]].sum()) / tot if tot else 0.0
    return res, report


def _carry_addresses(a: AddressProfile | None, old_bin: Any, bmap: np.ndarray,
                     bkind: dict[int, str], fo: Any, fn: Any, start_o: np.ndarray,
                     start_n: np.ndarray) -> AddressProfile | None:
    """The IP histogram on the new binary: an IP in an exactly matched block keeps its
    offset; in another matched block it goes to the instruction of the same index (the
    last one if the block got shorter); in an unmatched block it is dropped.  Branch
    traces are not carried (their addresses pair two blocks' fates)."""
    from bbmap.buckets import IN_BLOCK
    from bbmap.index import BlockIndex

    if a is None:
        return None
    ip, cnt = np.asarray(a.ip_addr, np.uint64), np.asarray(a.ip_samples, np.int64)
    lk = BlockIndex(old_bin.block_map, old_bin.symbols, old_bin.sections).lookup(ip)
    out_ip: list[int] = []
    out_n: list[int] = []
    for addr, n, b, st in zip(ip.tolist(), cnt.tolist(), lk.block.tolist(),
                              lk.status.tolist()):
        if st != IN_BLOCK or b < 0 or bmap[b] < 0:
            continue
        t = int(bmap[b])
        if bkind.get(b) == EXACT:
            out_ip.append(int(start_n[t]) + addr - int(start_o[b]))
        else:
            ia, ib = fo.insn_addr.get(b), fn.insn_addr.get(t)
            if ia is None or ib is None or not len(ib):
                out_ip.append(int(start_n[t]))
            else:
                i = max(int(np.searchsorted(ia, np.uint64(addr), "right")) - 1, 0)
                out_ip.append(int(ib[min(i, len(ib) - 1)]))
        out_n.append(n)
    if out_ip:
        u, inv = np.unique(np.asarray(out_ip, np.uint64), return_inverse=True)
        s = np.bincount(inv, weights=np.asarray(out_n, np.float64)).astype(np.int64)
    else:
        u, s = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return AddressProfile(ip_addr=u, ip_samples=s, events=list(a.events), samples=a.samples)


__all__ = ["ANCHOR", "DROPPED", "EXACT", "HASH", "CarryReport", "FunctionCarry", "carry"]
