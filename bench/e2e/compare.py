#!/usr/bin/env python3
"""Where two builds of the end-to-end bench differ, function by function.

    python bench/e2e/compare.py WORKDIR/PROGRAM [--rows bbmap-lbr,bolt-lbr] [--top 20]
                                        [--mix | --nops]

Reads what bench/bench_e2e.py kept in the program's work directory (each build's binary,
its cachegrind output with the 32 KiB I1 and its callgrind output) and prints, per function
(its ``.cold``/``.cold.N`` parts folded into it), the executed instructions, the I1 misses
and the taken branches of each build, sorted by how much the builds differ.  This is how the
analysis in spec/e2e.md finds where BOLT's build does better than bbmap's and why.
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402

_FRAGMENT = re.compile(r"\.(?:cold|warm)(?:\.\d+)?$|\.__part\.\d+$")


def canonical(name: str) -> str:
    """``foo.cold`` (clang's split part), ``foo.cold.0`` (BOLT's) belong to ``foo``."""
    return _FRAGMENT.sub("", name)


def cachegrind_by_function(path: Path) -> dict[str, tuple[int, int]]:
    """(instructions, I1 misses) per function of a cachegrind output file (events Ir I1mr
    first); names as cachegrind prints them (``--demangle=no``: raw)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    fn = "?"
    with open(path) as f:
        for line in f:
            if line.startswith("fn="):
                fn = canonical(line[3:].strip())
            elif line[:1].isdigit():
                tok = line.split()
                out[fn][0] += int(tok[1])
                out[fn][1] += int(tok[2]) if len(tok) > 2 else 0
    return {k: (v[0], v[1]) for k, v in out.items()}


class Symbols:
    """Function symbols of a binary, for address -> function name."""

    def __init__(self, binary: Path) -> None:
        from elftools.elf.elffile import ELFFile
        syms = []
        with open(binary, "rb") as f:
            tab = ELFFile(f).get_section_by_name(".symtab")
            for s in tab.iter_symbols() if tab else []:
                # clang's split parts (``foo.cold``) are NOTYPE symbols with a size
                func = s["st_info"]["type"] == "STT_FUNC" or (
                    s["st_info"]["type"] == "STT_NOTYPE" and _FRAGMENT.search(s.name))
                if func and s["st_value"] and s["st_size"]:
                    syms.append((s["st_value"], s["st_size"], s.name))
        syms.sort()
        self.starts = [s[0] for s in syms]
        self.syms = syms

    def name(self, addr: int) -> str:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.syms[i][0] + self.syms[i][1]:
            return canonical(self.syms[i][2])
        return "?"


def taken_by_function(cg: measure.CallgrindCounts, binary: Path) -> dict[str, int]:
    syms = Symbols(binary)
    out: dict[str, int] = defaultdict(int)
    for (site, _), n in cg.jumps.items():
        out[syms.name(site)] += n
    code = measure.executable_bytes(binary)
    import capstone
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    for (site, _), n in cg.calls.items():
        for lo, data in code:
            if lo <= site < lo + len(data):
                ins = next(cs.disasm_lite(data[site - lo:site - lo + 16], site), None)
                if ins and ins[2].split()[-1].startswith(("j", "loop")):
                    out[syms.name(site)] += n
                break
    return dict(out)


def instruction_mix(cg: measure.CallgrindCounts, binary: Path) -> dict[str, int]:
    """Executed instructions of the program by kind: conditional jumps, ``jmp``, nops
    (alignment padding that a layout put on a path that runs), and the rest."""
    import capstone
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    code = measure.executable_bytes(binary)
    out = {"jcc": 0, "jmp": 0, "nop": 0, "other": 0}
    for a, n in cg.per_addr.items():
        for lo, data in code:
            if lo <= a < lo + len(data):
                ins = next(cs.disasm_lite(data[a - lo:a - lo + 16], a), None)
                m = ins[2] if ins else ""
                kind = ("nop" if "nop" in m else "jmp" if m == "jmp" else
                        "jcc" if m.startswith(("j", "loop")) else "other")
                out[kind] += n
                break
    return out


def nop_sites(cg: measure.CallgrindCounts, binary: Path
              ) -> list[tuple[str, int, int, int]]:
    """Every executed ``nop`` of the program: (function, address, bytes, executions), most
    executed first.  The padding a layout runs shows as a run of multi-byte nops before a
    block; a ``nop`` the source writes (``__asm__("nop")``) as a one-byte one."""
    import capstone
    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    code = measure.executable_bytes(binary)
    syms = Symbols(binary)
    out = []
    for a, n in cg.per_addr.items():
        for lo, data in code:
            if lo <= a < lo + len(data):
                ins = next(cs.disasm_lite(data[a - lo:a - lo + 16], a), None)
                if ins and "nop" in ins[2]:
                    out.append((syms.name(a), a, ins[1], n))
                break
    return sorted(out, key=lambda t: (-t[3], t[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path, help="the program's work directory")
    ap.add_argument("--rows", default="baseline,bbmap-lbr,bolt-lbr")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--mix", action="store_true",
                    help="print each build's executed instructions by kind instead")
    ap.add_argument("--nops", action="store_true",
                    help="print each build's executed nops, per function and per site")
    args = ap.parse_args()
    rows = args.rows.split(",")

    def executed(row: str) -> tuple[Any, Path]:
        """The row's callgrind run of the measuring input, and its binary."""
        d = args.dir / "measure" / row
        binary = Path((d / "binary").read_text().strip())
        return measure.parse_callgrind(d / "callgrind.out", binary, decode_calls=False), binary

    if args.mix:
        for row in rows:
            mix = instruction_mix(*executed(row))
            print(f"{row:<14}" + "".join(f"{k} {v:>13,}  " for k, v in mix.items())
                  + f"total {sum(mix.values()):,}")
        return 0
    if args.nops:
        for row in rows:
            sites = nop_sites(*executed(row))
            per: dict[str, int] = defaultdict(int)
            for fn, _, _, n in sites:
                per[fn] += n
            print(f"{row}: {sum(per.values()):,} nops run")
            for fn, n in sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:args.top]:
                where = ", ".join(f"{a:#x}:{size}Bx{k:,}" for f, a, size, k in sites
                                  if f == fn)
                short = fn if len(fn) <= 43 else fn[:20] + "…" + fn[-22:]
                print(f"  {short:<44}{n:>10,}  {where[:200]}")
        return 0
    data: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        d = args.dir / "measure" / row
        binary = Path((d / "binary").read_text().strip())
        cgr = measure.parse_callgrind(d / "callgrind.out", binary)
        cache = cachegrind_by_function(d / "cachegrind-32k.out")
        taken = taken_by_function(cgr, binary)
        names = set(cache) | set(taken)
        data[row] = {n: {"ir": cache.get(n, (0, 0))[0], "i1": cache.get(n, (0, 0))[1],
                         "taken": taken.get(n, 0)} for n in names}
    a, b = rows[-2], rows[-1]
    names = set().union(*(set(v) for v in data.values()))
    zero = {"ir": 0, "i1": 0, "taken": 0}

    def gap(n: str) -> int:
        return abs(data[a].get(n, zero)["taken"] - data[b].get(n, zero)["taken"]) + \
            abs(data[a].get(n, zero)["i1"] - data[b].get(n, zero)["i1"])

    top = sorted(names, key=lambda n: (-gap(n), n))[:args.top]
    hdr = f"{'function':<44}" + "".join(f"{r + ' I1':>16}{r + ' taken':>20}" for r in rows)
    print(hdr)
    for n in top:
        cells = "".join(f"{data[r].get(n, zero)['i1']:>16,}{data[r].get(n, zero)['taken']:>20,}"
                        for r in rows)
        short = n if len(n) <= 43 else n[:20] + "…" + n[-22:]
        print(f"{short:<44}{cells}")
    tot = {r: {k: sum(v[k] for v in data[r].values()) for k in ("ir", "i1", "taken")}
           for r in rows}
    print("total " + "  ".join(f"{r}: I1 {t['i1']:,} taken {t['taken']:,}"
                               for r, t in tot.items()))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "functions": data}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
