"""LBR profiles that follow real control flow, derived from a valgrind lackey trace.

No LBR hardware here, so: run the binary under ``valgrind --tool=lackey --trace-mem=yes``,
which prints every executed instruction (``I  addr,size``).  Two consecutive instructions
whose second address is not ``prev + size`` make a taken branch ``(prev, next)``.  Keeping the
branches whose both ends lie in the binary's text, sample every ~N of them (seeded jitter),
and write 32-entry branch stacks, newest first, with ``entry0.to == sample ip`` through
``bbmap.perf.writer.PerfWriter``.  Beside each profile:

* ``exact-counts.json``: how many times the run executed the first instruction of each
  block (blocks from the llvm-readobj golden), plus every taken intra-binary edge;
* ``lbr-info.json``: base address, mapping, sample/branch counts, parameters;
* ``script-brstack.txt``: ``perf script -F ip,brstack`` of the written file (corpus/build),
  and ``--check`` proves it equals what was written (kept in corpus/work/, not committed).

Usage (from corpus/build):
  lbr.py --binary STAGED --readobj GOLDEN --rounds R --every N --variant none|V[,V...]
         (V: skylake = newest entry duplicated, hw_index = PERF_SAMPLE_BRANCH_HW_INDEX,
          pipe = pipe-mode file)
         --out lbr/NAME --work work/lbr
  lbr.py --check lbr/NAME
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from bbmap.formats import perfdata as fmt
from bbmap.perf.writer import PerfWriter

DEPTH = 32
BR_USER, BR_ANY = 1 << 0, 1 << 3
PAGE = 4096


def elf_layout(path: Path) -> dict[str, Any]:
    """Entry point, type, build-id, the executable PT_LOAD and the function symbols."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        text = [s for s in elf.iter_segments()
                if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]
        if len(text) != 1:
            raise SystemExit(f"lbr: {path}: expected one executable PT_LOAD")
        bid = None
        for sec in elf.iter_sections():
            if sec.name == ".note.gnu.build-id":
                bid = next(n["n_desc"] for n in sec.iter_notes()
                           if n["n_type"] == "NT_GNU_BUILD_ID")
        syms = {}
        symtab = elf.get_section_by_name(".symtab")
        if symtab is not None:
            syms = {s.name: s["st_value"] for s in symtab.iter_symbols()
                    if s["st_info"]["type"] == "STT_FUNC" and s["st_value"]}
        seg = text[0].header
        return {"e_type": elf.header["e_type"], "entry": elf.header["e_entry"],
                "build_id": bid, "p_offset": seg["p_offset"], "p_vaddr": seg["p_vaddr"],
                "p_filesz": seg["p_filesz"], "symbols": syms}


def readobj_blocks(golden: Path) -> list[dict[str, Any]]:
    """Blocks (function, range, id, vaddr, size) from an llvm-readobj JSON golden."""
    def merge(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        # llvm-readobj repeats the "BBAddrMap" key once per map section
        out: dict[str, Any] = {}
        for k, v in pairs:
            out[k] = out[k] + v if k in out and isinstance(v, list) else v
        return out

    doc = json.loads(golden.read_text(), object_pairs_hook=merge)
    top = doc[0]
    if "BBAddrMap" not in top:  # readobj 13/14 nest the file under its name
        top = next(iter(top.values()))
    blocks = []
    for rec in top["BBAddrMap"]:
        fn = rec["Function"]
        ranges = fn.get("BB Ranges") or [{"Base Address": fn["At"],
                                         "BB Entries": fn.get("BB Entries")
                                         or fn.get("BB entries", [])}]
        for ri, rng in enumerate(ranges):
            for bi, e in enumerate(rng.get("BB Entries", [])):
                blocks.append({"function": fn.get("Name"), "range": ri,
                               "id": e.get("ID", bi),
                               "vaddr": rng["Base Address"] + e["Offset"], "size": e["Size"]})
    return blocks


_NAME = re.compile(r"aspacem \((\d+),\d+,\d+\) (\S+)")
_SEG = re.compile(r"aspacem\s+\d+: file ([0-9a-f]+)-([0-9a-f]+)\s+\d+ (\S+) .* o=(\d+)\s+"
                  r"\((\d+),\d+\)")


def lackey_trace(binary: Path, rounds: int, segs: list[tuple[int, int, int]]
                 ) -> tuple[subprocess.Popen, Iterator[tuple[int, int]]]:
    """Start valgrind; yield (address, size) of every executed instruction, streamed.

    ``-d`` makes valgrind print (on stderr) its address-space table before the client
    runs; the executable mappings of ``binary`` (start, end, file offset) are appended to
    ``segs`` before the first instruction is yielded, so the caller knows the real load
    address of this very run.
    """
    rfd, wfd = os.pipe()
    proc = subprocess.Popen(
        ["valgrind", "-d", "--tool=lackey", "--trace-mem=yes", f"--log-fd={wfd}",
         str(binary), str(rounds)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, pass_fds=(wfd,))
    os.close(wfd)
    target = str(binary.resolve())
    table_done = threading.Event()

    def drain_stderr() -> None:
        names: dict[str, str] = {}
        assert proc.stderr is not None
        for line in proc.stderr:
            if table_done.is_set():
                continue  # keep draining so valgrind never blocks on a full pipe
            if m := _NAME.search(line):
                names[m.group(1)] = m.group(2)
            elif (m := _SEG.search(line)) and "x" in m.group(3) \
                    and names.get(m.group(5)) == target:
                segs.append((int(m.group(1), 16), int(m.group(2), 16) + 1, int(m.group(4))))
            elif "aspacem >>>" in line:
                table_done.set()
        table_done.set()

    threading.Thread(target=drain_stderr, daemon=True).start()

    def gen() -> Iterator[tuple[int, int]]:
        with os.fdopen(rfd, "r", buffering=1 << 20) as f:
            for line in f:
                if line.startswith("I  "):
                    table_done.wait()
                    a, sz = line[3:].split(",")
                    yield int(a, 16), int(sz)

    return proc, gen()


def fmt_branch(f: int, t: int) -> str:
    return f"0x{f:x}/0x{t:x}/-/-/-/0/"  # perf 6.1 ends each entry with an empty type


def run(args: argparse.Namespace) -> None:
    binary, out, work = Path(args.binary), Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    lay = elf_layout(binary)
    blocks = readobj_blocks(Path(args.readobj))
    segs: list[tuple[int, int, int]] = []
    proc, trace = lackey_trace(binary, args.rounds, segs)
    first = next(trace)
    if len(segs) != 1:
        raise SystemExit(f"lbr: valgrind -d showed {len(segs)} executable mappings of {binary}")
    map_start, map_end, map_pgoff = segs[0]
    map_len = map_end - map_start
    # file offset fo runs at map_start + fo - pgoff; vaddr v sits at fo = v - p_vaddr + p_offset
    base = map_start - lay["p_vaddr"] + lay["p_offset"] - map_pgoff
    lo = base + lay["p_vaddr"]
    hi = lo + lay["p_filesz"]
    if not lo <= base + lay["entry"] < hi:  # a cheap cross-check of the base
        raise SystemExit(f"lbr: entry point outside the text mapping (base 0x{base:x})")

    starts = {base + b["vaddr"] for b in blocks if b["size"] > 0}
    exec_count: Counter[int] = Counter()
    edges: Counter[tuple[int, int]] = Counter()
    rng = random.Random(args.seed)
    pid = 4242
    variant = set(args.variant.split(",")) - {"none"}
    unknown = variant - {"skylake", "hw_index", "pipe"}
    if unknown:
        raise SystemExit(f"lbr: unknown variant {sorted(unknown)}")
    branch_type = BR_USER | BR_ANY | (fmt.BR_HW_INDEX if "hw_index" in variant else 0)
    w = PerfWriter(out / "perf.data", event_name="cycles:u",
                   sample_type=fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
                   | fmt.S_BRANCH_STACK,
                   branch_sample_type=branch_type, pipe="pipe" in variant,
                   cmdline=["valgrind", "--tool=lackey", str(binary), str(args.rounds)])
    w.add_comm(pid, pid, binary.name[:15], exec_=True)
    w.add_mmap2(pid, pid, map_start, map_len, map_pgoff, str(binary), prot=5, flags=2)
    if lay["build_id"]:
        w.add_build_id(str(binary), lay["build_id"])  # pid -1, as perf writes it

    ring: deque[tuple[int, int]] = deque(maxlen=DEPTH)
    expected: list[str] = []
    n_ins = n_taken = n_kept = n_samples = 0
    gap = next_at = max(1, args.every + rng.randint(-args.every // 2, args.every // 2))
    prev_a = prev_end = -1
    entry, entry_seen = base + lay["entry"], False

    def chain() -> Iterator[tuple[int, int]]:
        yield first
        yield from trace

    for a, size in chain():
        n_ins += 1
        if a == entry:
            entry_seen = True
        if a in starts:
            exec_count[a] += 1
        if prev_end >= 0 and a != prev_end and a != prev_a:  # a == prev_a: rep iterations
            n_taken += 1
            if lo <= prev_a < hi and lo <= a < hi:
                n_kept += 1
                ring.appendleft((prev_a, a))
                edges[(prev_a - base, a - base)] += 1
                if n_kept >= next_at and len(ring) == DEPTH:
                    stack = list(ring)
                    if "skylake" in variant:  # newest entry reported twice
                        stack = [stack[0]] + stack[:-1]
                    w.add_sample(a, pid, pid, time=1_000_000 + n_ins, period=gap,
                                 branches=[(f, t, 0) for f, t in stack])
                    expected.append(f"{a:x} " + " ".join(fmt_branch(f, t) for f, t in stack))
                    n_samples += 1
                    gap = max(1, args.every + rng.randint(-args.every // 2, args.every // 2))
                    next_at = n_kept + gap
        prev_a, prev_end = a, a + size
    rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"lbr: valgrind exited {rc}")
    if not entry_seen:
        raise SystemExit(f"lbr: base 0x{base:x} is wrong: the entry point never ran")
    w.add_exit(pid, pid, time=1_000_000 + n_ins)
    w.close()
    (work / f"{out.name}.expected.txt").write_text("\n".join(expected) + "\n")

    counts = []
    for b in blocks:
        addr = base + b["vaddr"]
        counts.append({"function": b["function"], "range": b["range"], "id": b["id"],
                       "address": f"0x{b['vaddr']:x}", "size": b["size"],
                       # an empty block has no instruction of its own: not observable
                       "count": exec_count[addr] if b["size"] > 0 else None})
    exact = {
        "about": "exact executions of each block's first instruction in the traced run "
                 "(valgrind lackey), addresses are ELF vaddrs; count null = empty block",
        "binary": binary.name, "build_id": lay["build_id"], "rounds": args.rounds,
        "instructions": n_ins, "taken_branches": n_taken, "taken_branches_in_binary": n_kept,
        "blocks": counts,
        "edges": [{"from": f"0x{f:x}", "to": f"0x{t:x}", "count": c}
                  for (f, t), c in sorted(edges.items())],
    }
    (out / "exact-counts.json").write_text(json.dumps(exact, indent=1) + "\n")
    info = {"base": f"0x{base:x}", "mmap": {"start": f"0x{map_start:x}",
                                            "len": f"0x{map_len:x}",
                                            "pgoff": f"0x{map_pgoff:x}"},
            "pid": pid, "depth": DEPTH, "variant": sorted(variant), "every": args.every,
            "seed": args.seed, "samples": n_samples, "rounds": args.rounds,
            "branch_sample_type": branch_type, "event": "cycles:u"}
    (out / "lbr-info.json").write_text(json.dumps(info, indent=1) + "\n")
    (out / "command.txt").write_text(
        f"valgrind -d --tool=lackey --trace-mem=yes {binary} {args.rounds} | "
        f"tools/lbr.py --every {args.every} --variant {args.variant} --seed {args.seed}\n")
    print(f"lbr: {out.name}: {n_ins} instructions, {n_taken} taken branches "
          f"({n_kept} in the binary), {n_samples} samples, base 0x{base:x}", file=sys.stderr)


def parse_script(text: str) -> list[str]:
    """perf script -F ip,brstack lines as "ip entry entry ...".  For pipe-mode input perf 6.1
    also prints the symbol after the ip; only the ip and the from/to entries are compared."""
    out = []
    for line in text.splitlines():
        tok = line.split()
        if tok:
            out.append(" ".join([tok[0]] + [t for t in tok[1:] if "/" in t]))
    return out


def check(d: Path, work: Path) -> None:
    want = parse_script((work / f"{d.name}.expected.txt").read_text())
    got = parse_script((d / "script-brstack.txt").read_text())
    if want != got:
        bad = next(i for i, (x, y) in enumerate(zip(want + [""], got + [""])) if x != y)
        raise SystemExit(f"lbr: {d}: perf script differs from the written stacks at sample "
                         f"{bad}:\n wrote {want[bad] if bad < len(want) else '-'}\n"
                         f" perf  {got[bad] if bad < len(got) else '-'}")
    print(f"lbr: {d.name}: perf script reads back all {len(got)} stacks unchanged",
          file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", type=Path)
    ap.add_argument("--binary")
    ap.add_argument("--readobj")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--variant", default="none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--work")
    args = ap.parse_args()
    if args.check:
        check(args.check, Path(args.work))
    else:
        run(args)


if __name__ == "__main__":
    main()
