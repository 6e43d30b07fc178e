"""Deterministic and timed measures of one build on one input (bench/bench_e2e.py).

* **I1 misses**: cachegrind with a stated geometry (``I1_GEOMETRIES``; D1 and LL pinned too so
  the figures do not depend on the host's caches).  Whole process: the program's own code
  competes with libc's for the cache.
* **instructions, taken branches, page footprint**: one callgrind run with
  ``--dump-instr=yes --collect-jumps=yes``, which counts every executed instruction per
  address and, per jump instruction, how often it was taken (``jcnd=taken/executed`` for
  conditional jumps, ``jump=count`` for unconditional ones; calls and returns are not jumps,
  and no layout changes their number).  Taken branches are summed over the program's own
  object and over all objects; the page footprint is the number of distinct 4 KiB pages of
  the program's text that hold 99 % of its executed instructions (an iTLB proxy).
  Callgrind, like the LBR tracer, runs without chasing and unrolling (its defaults).
* **wall time**: ``perf stat -e task-clock`` around single runs, the builds interleaved
  round-robin so drift on a shared machine hits all builds alike; median, min, max and the
  relative standard deviation of ``RUNS`` runs; and wall-clock time by ``hyperfine -N``
  (``HYPERFINE_RUNS`` runs per build in rounds of 2, builds interleaved the same way):
  mean, standard deviation, median, min, max.
* **text size**: the sum of the executable sections (BOLT keeps the original ``.text`` as
  ``.bolt.org.text`` and adds the moved code after it: both count, the first also apart).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import capstone
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

# Cache geometries (size, associativity, line), the issue's: a 32 KiB 8-way I1 with 64 B lines
# as on current x86 cores, and a 16 KiB one to show pressure.  D1/LL pinned for determinism.
I1_GEOMETRIES = {"32k": "32768,8,64", "16k": "16384,4,64"}
D1 = "32768,8,64"
LL = "8388608,16,64"
PAGE = 4096
FOOTPRINT = 0.99  # share of executed instructions the page footprint covers
RUNS = 10  # timed runs per build (perf stat, interleaved)
HYPERFINE_RUNS = 20  # timed runs per build (hyperfine); a run is 40-80 ms


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


_I1 = re.compile(r"I1\s+misses:\s+([\d,]+)")
_IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def cachegrind(binary: Path, argv: list[str], i1: str, keep: Path | None = None
               ) -> dict[str, int]:
    """Instructions and I1 misses of one run under cachegrind with I1 geometry ``i1``
    (``keep``: where to leave its per-function output, names not demangled)."""
    p = run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--I1={i1}", f"--D1={D1}",
             f"--LL={LL}", "--demangle=no", f"--cachegrind-out-file={keep or '/dev/null'}",
             str(binary), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m, n = _I1.search(p.stderr), _IREFS.search(p.stderr)
    if not m or not n:
        raise RuntimeError(f"cachegrind printed no summary for {binary}: {p.stderr[-400:]}")
    return {"instructions": int(n.group(1).replace(",", "")),
            "i1_misses": int(m.group(1).replace(",", ""))}


@dataclass
class CallgrindCounts:
    """What one callgrind run says about the program's own object and the whole process."""
    instructions: int = 0
    instructions_in_binary: int = 0
    taken_in_binary: int = 0  # taken conditional + unconditional jumps
    taken_cond_in_binary: int = 0
    uncond_in_binary: int = 0
    taken_total: int = 0
    per_addr: dict[int, int] = field(default_factory=dict)  # binary vaddr -> instructions
    jumps: dict[tuple[int, int], int] = field(default_factory=dict)  # (from, to) -> taken
    # (site, target) -> count of what callgrind calls calls: real calls, but also jumps into
    # another function (tail calls, jumps to a split function's .cold part and back)
    calls: dict[tuple[int, int], int] = field(default_factory=dict)
    taken_cross_function: int = 0  # the calls whose site is a jump instruction

    def page_footprint(self, share: float = FOOTPRINT) -> int:
        """Distinct 4 KiB pages of the binary that hold ``share`` of its instructions."""
        pages: dict[int, int] = {}
        for a, n in self.per_addr.items():
            pages[a // PAGE] = pages.get(a // PAGE, 0) + n
        need, got = share * sum(pages.values()), 0
        for k, n in enumerate(sorted(pages.values(), reverse=True), 1):
            got += n
            if got >= need:
                return k
        return len(pages)


def _sub(tok: str, prev: int) -> int:
    if tok == "*":
        return prev
    if tok[0] in "+-":
        return prev + int(tok, 0)
    return int(tok, 0)


def parse_callgrind(path: Path, binary: Path, *, decode_calls: bool = True
                    ) -> CallgrindCounts:
    """Read a callgrind ``--dump-instr=yes --collect-jumps=yes`` output file.

    Format (callgrind docs, "Callgrind Format Specification"): ``ob=``/``fn=`` name the
    object/function (``(id) name`` defines a compressed name, ``(id)`` reuses it); a cost line
    is ``instr line cost...`` whose positions may be absolute, ``+n``/``-n`` relative to the
    previous line's, or ``*`` (same); ``calls=n target`` is followed by the call site's line
    holding the *inclusive* cost of the call (not the instruction's own); ``jump=n target`` and
    ``jcnd=taken/executed target`` are followed by the jump's own position.  Targets are
    relative to the previous position but do not move it.
    """
    want = os.path.realpath(binary)
    names: dict[str, str] = {}
    out = CallgrindCounts()
    in_bin = False
    # Code valgrind could not tie to an object (``ob=???``, run-time addresses) is the
    # binary's when it falls in one of its executable sections at the load bias: BOLT's
    # ``.text.cold`` (valgrind's debug info covers the ``.text`` section only)
    try:
        bias = _load_bias(binary)
        spans = [(lo, lo + len(d)) for lo, d in executable_bytes(binary)]
    except (OSError, ELFError):  # not an ELF file (hand-made tests): no orphan code
        bias, spans = None, []
    orphan = False

    def own(a: int) -> int | None:
        a -= bias
        return a if any(lo <= a < hi for lo, hi in spans) else None
    addr = line = 0
    pending: tuple[str, int, int] | None = None  # (kind, count, target) awaiting its source
    call: tuple[int, int] | None = None  # (count, target) of the last calls= line
    skip_cost = False
    with open(path) as f:
        for raw in f:
            c = raw[0] if raw else ""
            if c.isdigit() or c in "+-*":
                tok = raw.split()
                addr = _sub(tok[0], addr)
                if len(tok) > 1:
                    line = _sub(tok[1], line)
                if orphan:  # positions stay run-time addresses; counted ones are translated
                    mine = own(addr)
                    in_bin, site = mine is not None, (mine if mine is not None else addr)
                else:
                    site = addr
                if pending is not None:
                    kind, n, target = pending
                    pending = None
                    if in_bin:
                        if orphan:
                            target = own(target) if own(target) is not None else target
                        out.jumps[(site, target)] = out.jumps.get((site, target), 0) + n
                        out.taken_in_binary += n
                        if kind == "jcnd":
                            out.taken_cond_in_binary += n
                        else:
                            out.uncond_in_binary += n
                    out.taken_total += n
                if skip_cost:  # the call site, with the inclusive cost of the call
                    skip_cost = False
                    if in_bin and call is not None:
                        out.calls[(site, call[1])] = out.calls.get((site, call[1]), 0) + call[0]
                    continue
                if len(tok) > 2:
                    n = int(tok[2])
                    out.instructions += n
                    if in_bin:
                        out.instructions_in_binary += n
                        out.per_addr[site] = out.per_addr.get(site, 0) + n
                continue
            if raw.startswith(("ob=", "cob=")):  # one name space for both
                is_ob = raw[0] == "o"
                v = raw[3 if is_ob else 4:].strip()
                m = re.match(r"\((\d+)\)\s*(.*)", v)
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    v = names.get(m.group(1), "")
                if is_ob:
                    in_bin = os.path.realpath(v) == want if v else False
                    orphan = v == "???" and bias is not None
            elif raw.startswith("calls="):
                spec = raw[6:].split()
                call = (int(spec[0]), _sub(spec[1], addr))
                skip_cost = True
            elif raw.startswith(("jump=", "jcnd=")):
                kind = raw[:4]
                spec, _, rest = raw[5:].partition(" ")
                n = int(spec.split("/")[0])
                target = _sub(rest.split()[0], addr)
                pending = (kind, n, target)
    if decode_calls:
        _count_jumps_among_calls(out, binary)
    return out


# Valgrind maps a position-independent main executable at this address
# (coregrind/m_ume/elf.c); corpus/tools/lbr.py reads the same base off its traces.
VALGRIND_PIE_BASE = 0x108000


def _load_bias(binary: Path) -> int | None:
    with open(binary, "rb") as f:
        t = ELFFile(f).header["e_type"]
    return VALGRIND_PIE_BASE if t == "ET_DYN" else 0 if t == "ET_EXEC" else None


def _count_jumps_among_calls(out: CallgrindCounts, binary: Path) -> None:
    """Callgrind reports a jump into another function as a call.  A taken branch it still
    is, and no layout can ignore those (BOLT's and Propeller's ``.cold`` parts are separate
    functions to callgrind): add the ones whose site decodes to a jump."""
    code = executable_bytes(binary)
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    for (site, _), n in out.calls.items():
        for lo, data in code:
            if lo <= site < lo + len(data):
                ins = next(cs.disasm_lite(data[site - lo:site - lo + 16], site), None)
                if ins and ins[2].split()[-1].startswith(("j", "loop")):
                    out.taken_in_binary += n
                    out.taken_total += n
                    out.taken_cross_function += n
                break


def executable_bytes(binary: Path) -> list[tuple[int, bytes]]:
    """(vaddr, bytes) of each executable PT_LOAD."""
    with open(binary, "rb") as f:
        elf = ELFFile(f)
        return [(seg["p_vaddr"], seg.data()) for seg in elf.iter_segments()
                if seg["p_type"] == "PT_LOAD" and seg["p_flags"] & 1]


def callgrind(binary: Path, argv: list[str], keep: Path | None = None) -> CallgrindCounts:
    """Run ``binary argv`` under callgrind (instructions per address, jumps) and parse it."""
    with tempfile.TemporaryDirectory(prefix="bbmap-e2e-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        run(["valgrind", "--tool=callgrind", "--dump-instr=yes", "--collect-jumps=yes",
             f"--callgrind-out-file={out}", str(binary), *argv],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if keep is not None:
            keep.write_bytes(out.read_bytes())
        return parse_callgrind(out, binary)


_TASK = re.compile(r"^([\d.]+),msec,task-clock", re.M)


def task_clock_ms(binary: Path, argv: list[str]) -> float:
    """One run's task-clock (ms) from ``perf stat -x,``."""
    p = run(["perf", "stat", "-x,", "-e", "task-clock", str(binary), *argv],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m = _TASK.search(p.stderr)
    if not m:
        raise RuntimeError(f"perf stat printed no task-clock: {p.stderr[-300:]}")
    return float(m.group(1))


def wall_times(builds: dict[str, Path], argv: list[str], runs: int = RUNS
               ) -> dict[str, dict[str, float]]:
    """``runs`` task-clock runs of each build, interleaved round-robin; one warm-up each."""
    for b in builds.values():
        task_clock_ms(b, argv)
    got: dict[str, list[float]] = {k: [] for k in builds}
    for _ in range(runs):
        for k, b in builds.items():
            got[k].append(task_clock_ms(b, argv))
    out = {}
    for k, xs in got.items():
        med = statistics.median(xs)
        out[k] = {"median_ms": med, "min_ms": min(xs), "max_ms": max(xs),
                  "rsd": statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0,
                  "runs": xs}
    return out


def hyperfine_times(builds: dict[str, Path], argv: list[str], json_out: Path,
                    runs: int = HYPERFINE_RUNS, per_round: int = 2
                    ) -> dict[str, dict[str, float]]:
    """Wall-clock time by ``hyperfine -N`` (no shell between, so the figures are the
    program's own): ``runs / per_round`` rounds, each one hyperfine run over every build
    (``--warmup 1 --runs per_round``), the build order rotated each round.  Hyperfine times
    its commands one after the other; rounds interleave the builds so that the drift of a
    shared machine hits them alike, as in :func:`wall_times`.  Mean, standard deviation,
    median, min and max in ms over all rounds; each round's JSON is kept."""
    import json
    import shlex

    names = list(builds)
    times: dict[str, list[float]] = {k: [] for k in names}
    rounds = max(1, -(-runs // per_round))
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        out = json_out.with_name(f"{json_out.stem}-{r}.json")
        cmd = ["hyperfine", "-N", "--warmup", "1", "--runs", str(per_round),
               "--style", "none", "--export-json", str(out)]
        for k in order:
            cmd += ["--command-name", k, shlex.join([str(builds[k]), *argv])]
        run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for res in json.loads(out.read_text())["results"]:
            times[res["command"]] += [t * 1000 for t in res["times"]]
    stats = {}
    for k, ms in times.items():
        stats[k] = {"mean_ms": statistics.mean(ms), "median_ms": statistics.median(ms),
                    "stddev_ms": statistics.stdev(ms) if len(ms) > 1 else 0.0,
                    "min_ms": min(ms), "max_ms": max(ms), "runs": ms}
    return stats


_SPLIT_PART = re.compile(r"\.cold(?:\.\d+)?$")


def cold_share(cg: CallgrindCounts, binary: Path) -> float:
    """Share of the binary's executed instructions that ran in split-off cold code (clang's
    ``foo.cold`` parts, BOLT's ``foo.cold.N`` fragments): blocks the layout judged cold but
    the measuring input ran.  A split that moves a running block costs two taken jumps per
    visit and a line in another page."""
    parts = []
    with open(binary, "rb") as f:
        tab = ELFFile(f).get_section_by_name(".symtab")
        for sym in tab.iter_symbols() if tab else []:
            if sym["st_size"] and _SPLIT_PART.search(sym.name):
                parts.append((sym["st_value"], sym["st_value"] + sym["st_size"]))
    parts.sort()
    starts = [a for a, _ in parts]
    import bisect
    cold = 0
    for a, n in cg.per_addr.items():
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and a < parts[i][1]:
            cold += n
    total = sum(cg.per_addr.values())
    return cold / total if total else 0.0


def text_size(binary: Path) -> dict[str, int]:
    """Bytes of executable sections.  BOLT keeps the original ``.text`` as ``.bolt.org.text``
    (functions it did not move still run there); its bytes are counted and also shown apart."""
    size = org = 0
    with open(binary, "rb") as f:
        for sec in ELFFile(f).iter_sections():
            if sec["sh_flags"] & 0x4 and sec["sh_type"] == "SHT_PROGBITS":  # SHF_EXECINSTR
                size += sec["sh_size"]
                if sec.name == ".bolt.org.text":
                    org += sec["sh_size"]
    return {"text_bytes": size, "bolt_org_text_bytes": org,
            "file_bytes": os.path.getsize(binary)}
