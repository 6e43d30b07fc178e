"""Does the profile fit the binary?  Evidence from the code itself, not from names.

A profile of one program annotated against another (``--name`` pointing at the wrong
file, a rebuilt binary without a build-id) still "maps": its addresses fall inside the
wrong binary's functions.  The instructions say otherwise:

* a sampled IP is the address of an instruction (the one the interrupt returned to), so
  in the right binary every sampled IP inside a decoded block is an instruction start;
* an LBR source is a branch instruction (jmp, jcc, call, ret);
* the target of a jump or call is the start of a block (or a function entry); only a
  return lands mid-block (after its call).

By chance, a random address is an instruction start about a quarter to a third of the
time on x86, so a wrong binary shows up as a large share of misses.  Parameters:

* ``MISMATCH_THRESHOLD`` = 0.30: Propeller refuses a profile when more than 30% of the
  jump weight lands in the middle of blocks ("source drift",
  /work/shared/reference/perf-data-format.md); bbmap applies the same share to each of
  the three measures.  The right binary scores ~0% on the corpus (tests/test_fit.py).
* ``MIN_EVIDENCE`` = 50 addresses per measure before a verdict (fewer decide nothing).
* ``FIT_SAMPLE`` = 200,000 IPs and as many branches are kept (the first ones): bounded
  memory, and far more than a share needs.

Only x86 is judged (the disassembler's targets); elsewhere the report says "not judged".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.buckets import IN_BLOCK

MISMATCH_THRESHOLD = 0.30
MIN_EVIDENCE = 50
FIT_SAMPLE = 200_000
MAX_EXAMPLES = 3
DOES_NOT_FIT = "the profile does not fit"  # how the verdict's message starts


class FitCollector:
    """The first ``FIT_SAMPLE`` in-block IPs and taken branches (both ends in blocks)."""

    def __init__(self) -> None:
        self.ip: list[np.ndarray] = []
        self.ip_block: list[np.ndarray] = []
        self.n_ip = 0
        self.br: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.n_br = 0

    @property
    def wants_ips(self) -> int:
        """How many more sample IPs the evidence takes (0: it has enough)."""
        return max(0, FIT_SAMPLE - self.n_ip)

    def add_ips(self, r: Any) -> None:  # a bbmap.aggregate.resolve.Resolved
        room = FIT_SAMPLE - self.n_ip
        if room <= 0:
            return
        sel = np.flatnonzero(r.where == IN_BLOCK)[:room]
        if len(sel):
            self.ip.append(r.vaddr[sel])
            self.ip_block.append(r.block[sel])
            self.n_ip += len(sel)

    def add_branches(self, rf: Any, rt: Any) -> None:
        room = FIT_SAMPLE - self.n_br
        if room <= 0:
            return
        sel = np.flatnonzero((rf.where == IN_BLOCK) & (rt.where == IN_BLOCK))[:room]
        if len(sel):
            self.br.append((rf.vaddr[sel], rf.block[sel], rt.vaddr[sel], rt.block[sel]))
            self.n_br += len(sel)

    def merge(self, other: FitCollector) -> None:
        for a, b in zip(other.ip, other.ip_block):
            room = FIT_SAMPLE - self.n_ip
            if room <= 0:
                break
            self.ip.append(a[:room])
            self.ip_block.append(b[:room])
            self.n_ip += len(a[:room])
        for cols in other.br:
            room = FIT_SAMPLE - self.n_br
            if room <= 0:
                break
            self.br.append(tuple(c[:room] for c in cols))  # type: ignore[arg-type]
            self.n_br += len(cols[0][:room])


@dataclass
class Measure:
    name: str
    judged: int = 0
    misses: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.misses / self.judged if self.judged else 0.0

    @property
    def over(self) -> bool:
        return self.judged >= MIN_EVIDENCE and self.share > MISMATCH_THRESHOLD

    def to_json(self) -> dict:
        return {"judged": self.judged, "misses": self.misses, "share": round(self.share, 4),
                "over_threshold": self.over, "examples": self.examples}


@dataclass
class FitReport:
    """The three measures; ``mismatch`` when any is over the threshold."""

    judged: bool
    why_not: str = ""
    ips: Measure = field(default_factory=lambda: Measure("sampled IPs off instruction starts"))
    sources: Measure = field(default_factory=lambda: Measure("branch sources that are not "
                                                             "branches"))
    targets: Measure = field(default_factory=lambda: Measure("jump and call targets in the "
                                                             "middle of blocks"))

    @property
    def mismatch(self) -> bool:
        return self.judged and any(m.over for m in self.measures)

    @property
    def measures(self) -> list[Measure]:
        return [self.ips, self.sources, self.targets]

    def evidence(self) -> str:
        parts = []
        for m in self.measures:
            if m.judged:
                ex = f" (e.g. {'; '.join(m.examples)})" if m.over and m.examples else ""
                parts.append(f"{m.misses} of {m.judged} {m.name} ({100 * m.share:.0f}%){ex}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        d: dict = {"judged": self.judged, "mismatch": self.mismatch,
                   "threshold": MISMATCH_THRESHOLD, "min_evidence": MIN_EVIDENCE}
        if not self.judged:
            d["why_not"] = self.why_not
        else:
            d.update(ip=self.ips.to_json(), branch_sources=self.sources.to_json(),
                     branch_targets=self.targets.to_json())
        return d


def judge_fit(binary: Any, fit: FitCollector) -> FitReport:
    """Disassemble the ranges the collected addresses fall in and score the three measures."""
    from bbmap.binary.disasm import (
        CALL,
        CALL_INDIRECT,
        JCC,
        JMP,
        JMP_INDIRECT,
        RET,
        Disassembler,
    )
    from bbmap.errors import BBMapError

    if not fit.n_ip and not fit.n_br:
        return FitReport(False, "no sampled address in a block")
    try:
        dis = Disassembler(binary.machine, int(getattr(binary, "elfclass", 64)))
    except (BBMapError, ImportError) as e:
        return FitReport(False, str(e))
    m = binary.block_map
    ip = np.concatenate(fit.ip) if fit.ip else np.zeros(0, np.uint64)
    ipb = np.concatenate(fit.ip_block) if fit.ip_block else np.zeros(0, np.int64)
    cols = [np.concatenate([c[i] for c in fit.br]) if fit.br else np.zeros(0, np.uint64)
            for i in range(4)]
    fv, fb, tv, tb = cols
    blocks = np.unique(np.concatenate([ipb, fb, tb]).astype(np.int64))
    rng_of_block = np.searchsorted(m.range_block_ptr, blocks, side="right") - 1
    ranges = np.unique(rng_of_block)
    starts, kinds = _instructions(binary, m, ranges, dis)
    if not len(starts):
        return FitReport(False, "the sampled code could not be disassembled")
    block_start = (m.range_base[np.searchsorted(m.range_block_ptr, np.arange(m.num_blocks),
                                                side="right") - 1] + m.block_offset
                   ).astype(np.uint64)
    rep = FitReport(True)

    def row(addr: np.ndarray) -> np.ndarray:
        j = np.searchsorted(starts, addr)
        ok = j < len(starts)
        ok[ok] = starts[j[ok]] == addr[ok]
        return np.where(ok, j, -1)

    def examples(addr: np.ndarray, blk: np.ndarray) -> list[str]:
        _, first = np.unique(addr, return_index=True)
        out = []
        for i in sorted(first.tolist())[:MAX_EXAMPLES]:
            f = _function_of(m, int(blk[i]))
            out.append(f"{int(addr[i]):#x}" + (f" in {f}" if f else ""))
        return out

    # 1. sampled IPs
    if len(ip):
        r = row(ip)
        miss = r < 0
        rep.ips.judged, rep.ips.misses = len(ip), int(miss.sum())
        rep.ips.examples = examples(ip[miss], ipb[miss])
    if len(fv):
        branchy = np.array(sorted({RET, JMP, JMP_INDIRECT, JCC, CALL, CALL_INDIRECT}),
                           np.uint8)
        r = row(fv)
        ok = r >= 0
        is_branch = np.zeros(len(fv), bool)
        is_branch[ok] = np.isin(kinds[r[ok]], branchy)
        rep.sources.judged, rep.sources.misses = len(fv), int((~is_branch).sum())
        rep.sources.examples = examples(fv[~is_branch], fb[~is_branch])
        # 3. targets of jumps and calls (not returns) must start a block
        jumpy = np.zeros(len(fv), bool)
        jumpy[ok] = np.isin(kinds[r[ok]], np.array([JMP, JMP_INDIRECT, JCC, CALL,
                                                    CALL_INDIRECT], np.uint8))
        bs = np.unique(block_start)
        j = np.searchsorted(bs, tv[jumpy])
        hit = (j < len(bs)) & (bs[np.minimum(j, len(bs) - 1)] == tv[jumpy])
        rep.targets.judged, rep.targets.misses = int(jumpy.sum()), int((~hit).sum())
        rep.targets.examples = examples(tv[jumpy][~hit], tb[jumpy][~hit])
    return rep


def _instructions(binary: Any, m: Any, ranges: np.ndarray, dis: Any
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted instruction starts (and kinds) of the given map ranges, by linear sweep from
    each range base, resynchronised at block starts as verify and the CFG do."""
    data = getattr(binary, "_mm", None)
    if data is None:
        with open(binary.path, "rb") as fh:
            data = fh.read()
    view = memoryview(data)
    execs = [s for s in binary.sections if s.is_exec and s.sh_type != 8]
    addr: list[np.ndarray] = []
    kind: list[np.ndarray] = []
    for r in ranges.tolist():
        base = int(m.range_base[r])
        lo_b, hi_b = int(m.range_block_ptr[r]), int(m.range_block_ptr[r + 1])
        if hi_b <= lo_b:
            continue
        bstart = (base + m.block_offset[lo_b:hi_b]).astype(np.int64)
        end = int((bstart + m.block_size[lo_b:hi_b]).max())
        sec = next((s for s in execs if s.sh_addr <= base < s.sh_addr + s.sh_size), None)
        if sec is None or sec.sh_offset + sec.sh_size > len(data):
            continue
        limit = min(sec.sh_addr + sec.sh_size, end + 16)
        code = view[sec.sh_offset + base - sec.sh_addr: sec.sh_offset + limit - sec.sh_addr]
        pieces, _, _ = dis.sweep(code, base, min(end, limit), limit, sorted(bstart.tolist()))
        for p in pieces:
            addr.append(p.addr)
            kind.append(p.kinds)
    if not addr:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint8)
    a, k = np.concatenate(addr), np.concatenate(kind)
    order = np.argsort(a, kind="stable")
    return a[order], k[order]


def _function_of(m: Any, block: int) -> str | None:
    r = int(np.searchsorted(m.range_block_ptr, block, side="right")) - 1
    f = int(np.searchsorted(m.func_range_ptr, r, side="right")) - 1
    names = m.func_name
    return names[f] if 0 <= f < len(names) and names[f] else None
