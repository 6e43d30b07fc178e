"""Does the profile fit the binary?  Evidence from the code itself, not from names.

A profile of one program annotated against another (``--name`` pointing at the wrong
file, a rebuilt binary without a build-id) still "maps": its addresses fall inside the
wrong binary's functions.  The instructions say otherwise:

* a sampled IP is the address of an instruction (the one the interrupt returned to), so
  in the right binary every sampled IP inside a decoded block is an instruction start;
* an LBR source is a branch instruction (jmp, jcc, call, ret);
* the target of a jump or call is the start of a block (or a function entry); only a
  return lands mid-block (after its call).

By chance, a random address is an instruction start about a third of the time on x86
(another program's addresses: 66% off instruction starts, tests/test_fit.py), so a wrong
binary shows up as a large share of misses.  A *rebuild* with a small change does not: the
code before the change is where it was, and only the functions after it move (one statement
added to ``main`` of the corpus program moves the four functions after it by 0x10: 23 misses
among 2,953 IPs, 0.8%, all in the moved code).  So each measure is also judged function by
function (the function of the block the address falls in).  Parameters:

* ``MISMATCH_THRESHOLD`` = 0.30: Propeller refuses a profile when more than 30% of the
  jump weight lands in the middle of blocks ("source drift",
  /work/shared/reference/perf-data-format.md); bbmap applies the same share to each of
  the three measures, over the whole profile and over each function.
* ``MIN_EVIDENCE`` = 50 addresses per measure before a whole-profile verdict.
* ``LOCAL_MIN_MISSES`` = 10 misses in one function before a function's share decides.  In
  the binary that was recorded every sampled IP is an instruction start: the corpus
  profiles score 0 misses (tests/test_fit.py runs every one).  Were the disassembler wrong
  on as much as 1 IP in 100, 10 misses among the at most 33 IPs that make them 30% would
  happen with a binomial probability under 1e-12; in moved code about 2 IPs in 3 miss, so
  about 15 samples in a moved function make a refusal.
* What cannot be seen: a move that lands the old addresses on instruction starts again (a
  shift by exactly the length of the instructions it passes, e.g. a whole function of the
  same shape: the old ``lay_dbl`` samples land on the new ``lay_inc``'s first instruction);
  moved functions sampled fewer than ~15 times; samples that fall outside every block
  (alignment padding) are not judged; a change that moves nothing (same code size).
* ``FIT_SAMPLE`` = 200,000 IPs and as many branches are kept (the first ones): bounded
  memory, and far more than a share needs.

Only x86 is judged (the disassembler's targets); elsewhere the report says "not judged".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bbmap.buckets import IN_BLOCK
from bbmap.options import MISMATCH_THRESHOLD  # (declared with the options that state it)

MIN_EVIDENCE = 50
LOCAL_MIN_MISSES = 10
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
    """One measure over the whole profile, and its worst function (the one with the most
    misses among those over the threshold, else the one with the most misses)."""

    name: str
    judged: int = 0
    misses: int = 0
    examples: list[str] = field(default_factory=list)
    function: str | None = None  # the worst function
    function_judged: int = 0
    function_misses: int = 0
    function_index: int = -1

    @property
    def share(self) -> float:
        return self.misses / self.judged if self.judged else 0.0

    @property
    def function_share(self) -> float:
        return self.function_misses / self.function_judged if self.function_judged else 0.0

    @property
    def over_whole(self) -> bool:
        return self.judged >= MIN_EVIDENCE and self.share > MISMATCH_THRESHOLD

    @property
    def over_function(self) -> bool:
        return (self.function_misses >= LOCAL_MIN_MISSES
                and self.function_share > MISMATCH_THRESHOLD)

    @property
    def over(self) -> bool:
        return self.over_whole or self.over_function

    def to_json(self) -> dict:
        d = {"judged": self.judged, "misses": self.misses, "share": round(self.share, 4),
             "over_threshold": self.over, "examples": self.examples}
        if self.function is not None:
            d["worst_function"] = {"name": self.function, "judged": self.function_judged,
                                   "misses": self.function_misses,
                                   "share": round(self.function_share, 4),
                                   "over_threshold": self.over_function}
        return d

    def score(self, misses: np.ndarray, func: np.ndarray, names: list[str]) -> None:
        """Fill the counts from a miss flag per judged address and its function index."""
        self.judged, self.misses = len(misses), int(misses.sum())
        if not self.misses:
            return
        f = np.where(func >= 0, func, -1).astype(np.int64)
        uniq, inv = np.unique(f, return_inverse=True)
        judged = np.bincount(inv, minlength=len(uniq))
        missed = np.bincount(inv, weights=misses.astype(np.float64),
                             minlength=len(uniq)).astype(np.int64)
        over = (missed >= LOCAL_MIN_MISSES) & (missed > MISMATCH_THRESHOLD * judged)
        pool = np.flatnonzero(over) if over.any() else np.arange(len(uniq))
        k = int(pool[np.argmax(missed[pool])])  # first of equals: lowest function index
        fi = int(uniq[k])
        self.function = (names[fi] if 0 <= fi < len(names) and names[fi]
                         else ("?" if fi < 0 else f"function #{fi}"))
        self.function_judged, self.function_misses = int(judged[k]), int(missed[k])
        self.function_index = fi

    def example_mask(self, func: np.ndarray) -> np.ndarray:
        """Which misses to show: the worst function's when only it is over the threshold."""
        if self.over_function and not self.over_whole:
            return func == self.function_index
        return np.ones(len(func), bool)


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
                fn = (f", {m.function_misses} of {m.function_judged} in {m.function} "
                      f"({100 * m.function_share:.0f}%)"
                      if m.over_function and not m.over_whole else "")
                parts.append(f"{m.misses} of {m.judged} {m.name} ({100 * m.share:.0f}%)"
                             f"{fn}{ex}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        d: dict = {"judged": self.judged, "mismatch": self.mismatch,
                   "threshold": MISMATCH_THRESHOLD, "min_evidence": MIN_EVIDENCE,
                   "function_min_misses": LOCAL_MIN_MISSES}
        if not self.judged:
            d["why_not"] = self.why_not
        else:
            d.update(ip=self.ips.to_json(), branch_sources=self.sources.to_json(),
                     branch_targets=self.targets.to_json())
        return d


def judge_fit(binary: Any, fit: FitCollector,
              swept: Callable[[], Any] | None = None) -> FitReport:
    """Disassemble the ranges the collected addresses fall in and score the three measures.
    ``swept`` makes the run's shared sweep (``bbmap.cfg.SharedSweep``, with the run's one
    disassembler); by default one is made here."""
    from bbmap.binary.disasm import (
        CALL,
        CALL_INDIRECT,
        JCC,
        JMP,
        JMP_INDIRECT,
        RET,
        Disassembler,
    )
    from bbmap.cfg import SharedSweep
    from bbmap.errors import BBMapError

    if not fit.n_ip and not fit.n_br:
        return FitReport(False, "no sampled address in a block")
    try:
        sw = swept() if swept is not None else SharedSweep(
            binary, Disassembler(binary.machine, int(binary.elfclass)))
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
    starts, kinds = _instructions(binary, m, ranges, sw)
    if not len(starts):
        return FitReport(False, "the sampled code could not be disassembled")
    fr = np.searchsorted(m.range_block_ptr, np.arange(m.num_blocks), side="right") - 1
    block_start = m.block_starts()
    rep = FitReport(True)
    func_of_block = np.searchsorted(m.func_range_ptr, fr, side="right") - 1
    names = list(m.func_name)

    def func(blk: np.ndarray) -> np.ndarray:
        b = blk.astype(np.int64)
        ok = (b >= 0) & (b < len(func_of_block))
        return np.where(ok, func_of_block[np.where(ok, b, 0)], -1)

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
        fi = func(ipb)
        rep.ips.score(miss, fi, names)
        sel = miss & rep.ips.example_mask(fi)
        rep.ips.examples = examples(ip[sel], ipb[sel])
    if len(fv):
        branchy = np.array(sorted({RET, JMP, JMP_INDIRECT, JCC, CALL, CALL_INDIRECT}),
                           np.uint8)
        r = row(fv)
        ok = r >= 0
        is_branch = np.zeros(len(fv), bool)
        is_branch[ok] = np.isin(kinds[r[ok]], branchy)
        fi = func(fb)
        rep.sources.score(~is_branch, fi, names)
        sel = ~is_branch & rep.sources.example_mask(fi)
        rep.sources.examples = examples(fv[sel], fb[sel])
        # 3. targets of jumps and calls (not returns) must start a block
        jumpy = np.zeros(len(fv), bool)
        jumpy[ok] = np.isin(kinds[r[ok]], np.array([JMP, JMP_INDIRECT, JCC, CALL,
                                                    CALL_INDIRECT], np.uint8))
        bs = np.unique(block_start)
        j = np.searchsorted(bs, tv[jumpy])
        hit = (j < len(bs)) & (bs[np.minimum(j, len(bs) - 1)] == tv[jumpy])
        fi = func(tb[jumpy])
        rep.targets.score(~hit, fi, names)
        sel = ~hit & rep.targets.example_mask(fi)
        rep.targets.examples = examples(tv[jumpy][sel], tb[jumpy][sel])
    return rep


def _instructions(binary: Any, m: Any, ranges: np.ndarray, swept: Any
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted instruction starts (and kinds) of the given map ranges, by linear sweep from
    each range base, resynchronised at block starts as verify and the CFG do: the rows of
    the run's shared sweep (``bbmap.cfg.SharedSweep``), so the CFG does not sweep them
    again.  A range with no block, outside every executable section or in one the file
    does not hold whole is not read."""
    data_len = len(binary.data)
    execs = binary.code_sections()
    want = np.zeros(m.num_ranges, bool)
    for r in ranges.tolist():
        base = int(m.range_base[r])
        if int(m.range_block_ptr[r + 1]) <= int(m.range_block_ptr[r]):
            continue
        sec = next((s for s in execs if s.sh_addr <= base < s.sh_addr + s.sh_size), None)
        if sec is not None and sec.sh_offset + sec.sh_size <= data_len:
            want[r] = True
    if not want.any():
        return np.zeros(0, np.uint64), np.zeros(0, np.uint8)
    rows = swept.rows(want).rows
    order = np.argsort(rows.addr, kind="stable")
    return rows.addr[order], rows.kinds[order]


def _function_of(m: Any, block: int) -> str | None:
    r = int(np.searchsorted(m.range_block_ptr, block, side="right")) - 1
    f = int(np.searchsorted(m.func_range_ptr, r, side="right")) - 1
    names = m.func_name
    return names[f] if 0 <= f < len(names) and names[f] else None
