"""A perf.data from another machine's ``perf script`` text of an LBR profile.

There is no LBR hardware here, but LLVM's llvm-profgen tests ship real LBR profiles
recorded on Intel machines as ``perf script`` text (``llvm/test/tools/llvm-profgen/
Inputs/*.perfscript``, beside their binaries ``*.perfbin``).  This tool puts such a text
back into a perf.data with bbmap's own ``PerfWriter``: **the branch records are the
hardware's, the container is ours.**  Real ``perf script`` then proves the container
right (``--check``: it must print every sample's branch stack exactly as the text has it).

Two text layouts are read (both as llvm-profgen's ``PerfReader`` reads them):

* ``perf script -F ip,brstack --show-mmap-events`` with call stacks (cs-* inputs):
  ``PERF_RECORD_MMAP2 PID/TID: [START(LEN) @ PGOFF MAJ:MIN INO GEN]: PROT PATH`` lines,
  then per sample a block of hex stack frames (the first is the sample's IP) followed by
  one line of `` 0xFROM/0xTO/P/-/-/CYCLES ...`` entries, newest first;
* ``perf script -F ip,brstack`` one line per sample: ``IP 0xFROM/0xTO/...``; such files
  hold no mapping, so one is made up and said so: ``--binary`` (its executable
  ``PT_LOAD``, page-aligned, named by the binary's base name: where a non-PIE binary
  runs) or ``--mmap START:LEN:PGOFF:PATH``; ``--pid`` names the process.

Each record becomes: MMAP2 as given (pid/tid, addresses, pgoff, maj:min, inode,
generation, prot and private/shared from ``r-xp``, path), one COMM (the binary's base
name) before the first, and one SAMPLE per stack (IP, the MMAP2's pid/tid, a running
timestamp that keeps the file's order, BRANCH_STACK with the entries in order: the
mispredicted/predicted flag from ``M``/``P``, in-transaction/abort from ``X``/``A``, the
cycle count).  Lines of neither form (comments ``//``, a wrapper's banner) are skipped
and counted.

    python corpus/tools/perfscript_to_perfdata.py IN.perfscript OUT.perf.data [--check]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bbmap.formats import perfdata as fmt
from bbmap.perf.writer import PerfWriter

# branch_sample_type of a user-space LBR recording (perf record -b / -j any,u)
BRANCH_SAMPLE_TYPE = fmt.BR_ANY | (1 << 0)  # PERF_SAMPLE_BRANCH_USER
PAGE = 4096  # x86-64 page: mappings start and end on it
SAMPLE_TYPE = fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD | fmt.S_BRANCH_STACK

MMAP2_RE = re.compile(
    r"PERF_RECORD_MMAP2 (-?\d+)/(-?\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ "
    r"(0x[0-9a-f]+|\d+) ([0-9a-f]+):([0-9a-f]+) (\d+) (\d+)\]: ([-r][-w][-x][ps]) (.*)$")
FRAME_RE = re.compile(r"^\s+([0-9a-f]+)$")
ENTRY_RE = re.compile(r"0x([0-9a-f]+)/0x([0-9a-f]+)/([PM-])/([X-])/([A-])/(\d+)")
ONE_LINE_RE = re.compile(r"^\s*([0-9a-f]+)((?:\s+0x[0-9a-f]+/0x[0-9a-f]+/\S+)+)\s*$")
LBR_LINE_RE = re.compile(r"^\s*(?:0x[0-9a-f]+/0x[0-9a-f]+/\S+\s*)+$")


@dataclass
class Mmap:
    pid: int
    tid: int
    start: int
    length: int
    pgoff: int
    inode: tuple[int, int, int, int]
    prot: int
    flags: int
    path: str


@dataclass
class Sample:
    ip: int
    pid: int
    tid: int
    entries: list[tuple[int, int, int]]  # (from, to, flags word)


@dataclass
class Script:
    events: list[Mmap | Sample] = field(default_factory=list)
    skipped: int = 0

    @property
    def samples(self) -> list[Sample]:
        return [e for e in self.events if isinstance(e, Sample)]

    @property
    def mmaps(self) -> list[Mmap]:
        return [e for e in self.events if isinstance(e, Mmap)]


def parse_mmap(m: re.Match) -> Mmap:
    pid, tid, start, length, pgoff, maj, mnr, ino, gen, perm, path = m.groups()
    prot = ((fmt.PROT_READ if perm[0] == "r" else 0) | (fmt.PROT_WRITE if perm[1] == "w" else 0)
            | (fmt.PROT_EXEC if perm[2] == "x" else 0))
    return Mmap(int(pid), int(tid), int(start, 16), int(length, 16), int(pgoff, 0),
                (int(maj, 16), int(mnr, 16), int(ino), int(gen)), prot,
                fmt.MAP_PRIVATE if perm[3] == "p" else fmt.MAP_SHARED, path.strip())


def parse_entries(text: str) -> list[tuple[int, int, int]]:
    out = []
    for frm, to, pred, tx, abort, cycles in ENTRY_RE.findall(text):
        flags = ((fmt.BRF_MISPRED if pred == "M" else fmt.BRF_PREDICTED if pred == "P" else 0)
                 | (fmt.BRF_IN_TX if tx == "X" else 0) | (fmt.BRF_ABORT if abort == "A" else 0)
                 | (min(int(cycles), fmt.BRF_CYCLES_MASK) << fmt.BRF_CYCLES_SHIFT))
        out.append((int(frm, 16), int(to, 16), flags))
    return out


def parse(text: str, pid: int | None = None) -> Script:
    """The records of a perf script text, in order; ``pid`` for files without MMAP2."""
    s = Script()
    cur_pid = pid
    frames: list[int] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if m := MMAP2_RE.search(line):
            mm = parse_mmap(m)
            s.events.append(mm)
            cur_pid = mm.pid
        elif m := FRAME_RE.match(line):
            frames.append(int(m.group(1), 16))
        elif LBR_LINE_RE.match(line) and frames:
            if cur_pid is None:
                raise SystemExit("perfscript: a sample before any PERF_RECORD_MMAP2 (give --pid)")
            s.events.append(Sample(frames[0], cur_pid, cur_pid, parse_entries(line)))
            frames = []
        elif (m := ONE_LINE_RE.match(line)) and not frames:
            if cur_pid is None:
                raise SystemExit("perfscript: a sample before any PERF_RECORD_MMAP2 (give --pid)")
            s.events.append(Sample(int(m.group(1), 16), cur_pid, cur_pid,
                                   parse_entries(m.group(2))))
        else:
            s.skipped += 1
            frames = []  # a stack not followed by its LBR line is not a sample
    return s


def text_mapping(binary: Path, pid: int) -> Mmap:
    """The mapping the loader makes of a non-PIE binary's executable segment."""
    from elftools.elf.elffile import ELFFile

    with open(binary, "rb") as f:
        segs = [s for s in ELFFile(f).iter_segments()
                if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]
    if len(segs) != 1:
        raise SystemExit(f"perfscript: {binary}: {len(segs)} executable PT_LOAD segments")
    s = segs[0]
    start = s["p_vaddr"] & ~(PAGE - 1)
    end = (s["p_vaddr"] + s["p_memsz"] + PAGE - 1) & ~(PAGE - 1)
    return Mmap(pid, pid, start, end - start, s["p_offset"] & ~(PAGE - 1), (0, 0, 0, 0),
                fmt.PROT_READ | fmt.PROT_EXEC, fmt.MAP_PRIVATE, binary.name)


def write(script: Script, out: Path, cmdline: list[str]) -> None:
    w = PerfWriter(out, sample_type=SAMPLE_TYPE, branch_sample_type=BRANCH_SAMPLE_TYPE,
                   event_name="cycles:u", hostname="perfscript", cmdline=cmdline)
    seen_comm: set[int] = set()
    try:
        for t, e in enumerate(script.events, 1):
            if e.pid not in seen_comm:
                first = next((m for m in script.mmaps if m.pid == e.pid), None)
                name = os.path.basename(first.path) if first else "unknown"
                w.add_comm(e.pid, e.tid, name[:15], time=t, exec_=True)
                seen_comm.add(e.pid)
            if isinstance(e, Mmap):
                w.add_mmap2(e.pid, e.tid, e.start, e.length, e.pgoff, e.path, prot=e.prot,
                            flags=e.flags, inode=e.inode, time=t)
            else:
                w.add_sample(e.ip, e.pid, e.tid, time=t, period=1, branches=e.entries)
    except BaseException:
        w.abort()
        raise
    w.close()


def perf_script_stacks(perf_data: Path) -> list[tuple[int, list[tuple[int, int, int]]]]:
    """(ip, entries) of every sample as real ``perf script -F ip,brstack`` prints them."""
    r = subprocess.run(["perf", "script", "-i", str(perf_data), "-F", "ip,brstack"],
                       capture_output=True, text=True, check=True)
    out = []
    for line in r.stdout.splitlines():
        if m := ONE_LINE_RE.match(line):
            out.append((int(m.group(1), 16), parse_entries(m.group(2))))
        elif line.strip():
            raise SystemExit(f"perfscript: unexpected perf script line {line[:80]!r}")
    return out


def check(script: Script, perf_data: Path) -> int:
    """Real perf script prints each sample's IP and entries exactly as the text had them."""
    want = [(s.ip, s.entries) for s in script.samples]
    got = perf_script_stacks(perf_data)
    if got != want:
        bad = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got),
                                                                                len(want)))
        raise SystemExit(f"perfscript: perf script differs from the text at sample {bad} "
                         f"({len(got)} printed, {len(want)} in the text)")
    return len(got)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script", type=Path, help="perf script text (llvm-profgen *.perfscript)")
    ap.add_argument("out", type=Path, help="perf.data to write")
    ap.add_argument("--mmap", help="START:LEN:PGOFF:PATH (hex) for texts without MMAP2 lines")
    ap.add_argument("--binary", type=Path,
                    help="for texts without MMAP2 lines: map this binary's executable segment")
    ap.add_argument("--pid", type=int, default=1, help="pid for texts without MMAP2 lines")
    ap.add_argument("--check", action="store_true",
                    help="prove the file with real `perf script -F ip,brstack`")
    a = ap.parse_args(argv)
    script = parse(a.script.read_text(), pid=a.pid)
    if not script.mmaps:
        if a.mmap:
            start, length, pgoff, path = a.mmap.split(":", 3)
            mm = Mmap(a.pid, a.pid, int(start, 16), int(length, 16), int(pgoff, 16),
                      (0, 0, 0, 0), 5, fmt.MAP_PRIVATE, path)
        elif a.binary:
            mm = text_mapping(a.binary, a.pid)
        else:
            raise SystemExit("perfscript: the text has no PERF_RECORD_MMAP2 lines: give "
                             "--binary or --mmap")
        print(f"perfscript: no MMAP2 in the text: made up {mm.path} at 0x{mm.start:x} "
              f"(0x{mm.length:x} bytes @ 0x{mm.pgoff:x})")
        script.events.insert(0, mm)
    write(script, a.out, ["perfscript_to_perfdata", a.script.name])
    n = len(script.samples)
    entries = sum(len(s.entries) for s in script.samples)
    print(f"{a.out}: {len(script.mmaps)} MMAP2, {n} samples, {entries} branch entries "
          f"({script.skipped} other lines skipped)")
    if a.check:
        print(f"perf script -F ip,brstack: {check(script, a.out)} samples equal to the text")
    return 0


if __name__ == "__main__":
    sys.exit(main())
