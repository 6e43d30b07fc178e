"""LBR profiles that follow real control flow, derived from a valgrind execution trace.

No LBR hardware here, so the binary runs under valgrind's lackey tool and the taken branches
of the run are recovered from its trace.  Two tracers, the same result:

* ``--tracer mem`` (the corpus's original): ``--trace-mem=yes`` prints every executed
  instruction (``I  addr,size``); two consecutive instructions whose second address is not
  ``prev + size`` make a taken branch ``(prev, next)``.  About 20 bytes of text per
  instruction and one ``write`` per line: 2x10^8 instructions take ~130 s and 4.4 GB.
* ``--tracer sb`` (default; for traces of 10^8+ instructions): ``--trace-superblocks=yes
  --vex-guest-chase=no`` prints only the start of every executed superblock, ~5x fewer lines
  and no per-instruction work in valgrind (2x10^8 instructions: ~16 s, 0.5 GB).  The lines
  are parsed in chunks with numpy; each distinct superblock of the binary is decoded once
  with capstone to find where valgrind ends it (below), and a transition from superblock
  ``s`` to ``s'`` is a taken branch ``(terminator of s, s')`` unless ``s'`` is where ``s``
  falls through.  Memory is bounded by the number of distinct superblocks and edges, not by
  the trace length.

Where valgrind (VEX) ends a superblock with guest chasing off (valgrind 3.19,
``guest_amd64_toIR.c``/``bb_to_IR``): after a conditional or unconditional jump, call or
return; after a ``rep``-prefixed string instruction (which loops back to itself); after
``syscall``/``int``/``hlt``/``ud2``/``pause``; else after ``MAX_INSNS`` instructions (passed
explicitly as ``--vex-guest-max-insns``).  ``tests/test_lbr_tracer.py`` proves the two tracers
give identical branch stacks and exact counts on the corpus programs; a transition the model
cannot explain is counted (``unexplained`` in lbr-info.json), never guessed.

Both tracers keep the branches whose both ends lie in the binary's text, take a sample every
~N of them (seeded jitter, same draws in both), and write 32-entry branch stacks, newest
first, with ``entry0.to == sample ip`` through ``bbmap.perf.writer.PerfWriter``.  A
``rep`` iteration is not a branch.  A jump onto the very next instruction (an indirect
``jmp`` whose jump-table case follows it) is a taken branch to the hardware and to ``sb``;
``mem`` cannot tell it from a fall-through and misses it.  Beside each profile:

* ``exact-counts.json``: how many times the run executed the first instruction of each
  block (blocks from the llvm-readobj golden), plus every taken intra-binary edge;
* ``lbr-info.json``: base address, mapping, sample/branch counts, parameters;
* ``script-brstack.txt``: ``perf script -F ip,brstack`` of the written file (corpus/build),
  and ``--check`` proves it equals what was written (kept in corpus/work/, not committed).

Sample times: ``mem`` stamps 10^6 + instructions executed so far; ``sb`` stamps 10^6 +
superblocks executed so far (it decodes only the binary's own code, so it does not know the
length of the others).

Usage (from corpus/build):
  lbr.py --binary STAGED --readobj GOLDEN --rounds R --every N --variant none|V[,V...]
         (V: skylake = newest entry duplicated, hw_index = PERF_SAMPLE_BRANCH_HW_INDEX,
          pipe = pipe-mode file)
         [--tracer sb|mem] [--args ARG...] --out lbr/NAME --work work/lbr
  lbr.py --check lbr/NAME
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import capstone
import numpy as np
from elftools.elf.elffile import ELFFile

from bbmap.formats import perfdata as fmt
from bbmap.perf.writer import PerfWriter

DEPTH = 32
BR_USER, BR_ANY = 1 << 0, 1 << 3
PAGE = 4096
# valgrind's default --vex-guest-max-insns (valgrind 3.19 docs); the sb tracer passes it
MAX_INSNS = 60
# VEX translates exactly what runs only without chasing (which also merges "A && B"
# conditional branches into one exit and reports the second block as executed even when
# the first branch left) and without loop unrolling (several iterations per superblock
# entry); callgrind and exp-bbv force the same two settings
EXACT_VEX = ["--vex-guest-chase=no", "--vex-iropt-unroll-thresh=0"]
SHORT_WINDOW = 96  # bytes decoded first for a new superblock
CHUNK_BYTES = 1 << 22  # lackey text read per numpy pass (~350k superblocks)
FLUSH_BRANCHES = 1 << 16  # mem tracer: kept branches buffered before sampling


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
_TITLE = re.compile(r"SHOW_SEGMENTS: Memory layout at client (startup|shutdown)")


@dataclass(frozen=True)
class Mapping:
    """An executable file mapping of the traced process: [start, end) runs file offset pgoff."""
    start: int
    end: int
    pgoff: int
    path: str


class Tables:
    """Valgrind's address-space tables (``-d`` prints one when the client starts and one when
    it exits), read from its stderr by a thread: the executable file mappings of each."""

    def __init__(self) -> None:
        self.startup: list[Mapping] = []
        self.shutdown: list[Mapping] = []
        self.startup_done = threading.Event()
        self.thread: threading.Thread | None = None

    def finish(self) -> None:
        """Wait for the stderr reader (after the process exited)."""
        if self.thread is not None:
            self.thread.join(timeout=30)

    def drain(self, stream: Any) -> None:
        names: dict[str, str] = {}
        table: list[Mapping] | None = None
        for line in stream:
            if m := _TITLE.search(line):
                table = self.startup if m.group(1) == "startup" else self.shutdown
                names = {}
            elif table is None:
                continue
            elif m := _NAME.search(line):
                names[m.group(1)] = m.group(2)
            elif (m := _SEG.search(line)) and "x" in m.group(3):
                table.append(Mapping(int(m.group(1), 16), int(m.group(2), 16) + 1,
                                     int(m.group(4)), names.get(m.group(5), "?")))
            elif "aspacem >>>" in line:
                if table is self.startup:
                    self.startup_done.set()
                table = None
        self.startup_done.set()


def client_mappings(table: list[Mapping]) -> list[Mapping]:
    """The client's code: every executable file mapping but valgrind's own (the tool and its
    preloaded objects, which the hardware would never run)."""
    own = {os.path.dirname(m.path) for m in table if os.path.basename(m.path).startswith(
        ("lackey-", "vgpreload_"))}
    return sorted((m for m in table if os.path.dirname(m.path) not in own), key=lambda m: m.start)


def start_valgrind(binary: Path, argv: list[str], tool_args: list[str],
                   env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int, Tables]:
    """Start ``valgrind -d --tool=lackey TOOL_ARGS BINARY ARGV`` with its log on a pipe.

    ``-d`` makes valgrind print (on stderr) its address-space table before the client runs
    and when it exits; ``Tables.startup_done`` is set once the first is read, so the caller
    knows the real load address of this very run.  ``env``: the traced process's whole
    environment (default: this process's).  Returns the process, the read end of the log
    pipe and the tables.
    """
    rfd, wfd = os.pipe()
    proc = subprocess.Popen(
        ["valgrind", "-d", "--tool=lackey", *tool_args, f"--log-fd={wfd}",
         str(binary), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, pass_fds=(wfd,), env=env)
    os.close(wfd)
    tables = Tables()
    assert proc.stderr is not None
    tables.thread = threading.Thread(target=tables.drain, args=(proc.stderr,), daemon=True)
    tables.thread.start()
    return proc, rfd, tables


def valgrind_mappings(binary: Path, argv: list[str], env: dict[str, str] | None = None
                      ) -> list[Mapping]:
    """The client's executable mappings at exit, from an untraced run under the same tool
    (valgrind's layout does not depend on tracing; the traced run's own table checks it)."""
    proc, rfd, tables = start_valgrind(binary, argv, ["--basic-counts=no"], env)
    with os.fdopen(rfd, "rb") as f:
        while f.read(1 << 16):
            pass
    if proc.wait() != 0:
        raise SystemExit(f"lbr: valgrind exited {proc.returncode} on the mapping run")
    tables.finish()
    if not tables.shutdown:
        raise SystemExit("lbr: valgrind -d printed no address-space table at client exit")
    return client_mappings(tables.shutdown)


class AddressSpace:
    """The traced process's code mappings, for vectorized lookups and decoding."""

    def __init__(self, maps: list[Mapping]) -> None:
        self.maps = sorted(maps, key=lambda m: m.start)
        self.starts = np.array([m.start for m in self.maps], np.uint64)
        self.ends = np.array([m.end for m in self.maps], np.uint64)
        self._start_list = [m.start for m in self.maps]
        self._files: dict[str, bytes] = {}

    def index(self, addrs: np.ndarray) -> np.ndarray:
        """Mapping index of each address, -1 where none holds it."""
        i = np.searchsorted(self.starts, addrs, side="right").astype(np.int64) - 1
        ok = i >= 0
        ok[ok] = addrs[ok] < self.ends[i[ok]]
        return np.where(ok, i, -1)

    def contains(self, addr: int) -> bool:
        i = bisect.bisect_right(self._start_list, addr) - 1
        return i >= 0 and addr < self.maps[i].end

    def code(self, addr: int, n: int) -> bytes:
        """Up to ``n`` bytes of code at runtime address ``addr`` (empty outside every map)."""
        i = int(np.searchsorted(self.starts, np.uint64(addr), side="right")) - 1
        if i < 0 or addr >= self.maps[i].end:
            return b""
        m = self.maps[i]
        if m.path not in self._files:
            self._files[m.path] = Path(m.path).read_bytes()
        off = m.pgoff + addr - m.start
        return self._files[m.path][off:off + min(n, m.end - addr)]


def lackey_mem_trace(binary: Path, argv: list[str], env: dict[str, str] | None = None
                     ) -> tuple[subprocess.Popen, Tables, Iterator[tuple[int, int]]]:
    """Start valgrind; yield (address, size) of every executed instruction, streamed."""
    proc, rfd, tables = start_valgrind(binary, argv, ["--trace-mem=yes", *EXACT_VEX], env)

    def gen() -> Iterator[tuple[int, int]]:
        with os.fdopen(rfd, "r", buffering=1 << 20) as f:
            for line in f:
                if line.startswith("I  "):
                    tables.startup_done.wait()
                    a, sz = line[3:].split(",")
                    yield int(a, 16), int(sz)

    return proc, tables, gen()


# ----------------------------------------------------------------------- superblock tracer
_HEXVAL = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEXVAL[_c] = _i


def parse_superblock_lines(buf: bytes) -> np.ndarray:
    """Addresses of the ``SB <hex>`` lines in ``buf`` (complete lines only), vectorized.

    Other lines (valgrind's banner, ``==pid==`` messages) are skipped.
    """
    a = np.frombuffer(buf, np.uint8)
    nl = np.flatnonzero(a == 10)
    if not len(nl):
        return np.zeros(0, np.uint64)
    starts = np.concatenate(([0], nl[:-1] + 1))
    length = nl - starts
    long_enough = length >= 4
    s = starts[long_enough]
    is_sb = (a[s] == ord("S")) & (a[s + 1] == ord("B")) & (a[s + 2] == ord(" "))
    first = s[is_sb] + 3
    end = nl[long_enough][is_sb]
    nd = end - first
    if len(nd) and nd.max() > 16:
        raise SystemExit("lbr: lackey printed a superblock address longer than 64 bits")
    val = np.zeros(len(first), np.uint64)
    for j in range(int(nd.max()) if len(nd) else 0):
        m = nd > j
        digit = _HEXVAL[a[end[m] - 1 - j]]
        if (digit == 255).any():
            raise SystemExit("lbr: lackey printed a superblock address that is not hex")
        val[m] |= digit.astype(np.uint64) << np.uint64(4 * j)
    return val


def lackey_superblocks(binary: Path, argv: list[str], env: dict[str, str] | None = None
                       ) -> tuple[subprocess.Popen, Tables, Iterator[np.ndarray]]:
    """Start valgrind; yield the start address of every executed superblock, in chunks."""
    proc, rfd, tables = start_valgrind(
        binary, argv, ["--basic-counts=no", "--trace-superblocks=yes", *EXACT_VEX,
                       f"--vex-guest-max-insns={MAX_INSNS}"], env)

    def gen() -> Iterator[np.ndarray]:
        rest = b""
        with os.fdopen(rfd, "rb", buffering=0) as f:
            while True:
                parts, n = [rest], len(rest)
                while n < CHUNK_BYTES:  # a pipe read returns at most its buffer (64 KiB)
                    part = f.read(CHUNK_BYTES - n)
                    if not part:
                        break
                    parts.append(part)
                    n += len(part)
                if n == len(rest):
                    break
                buf = b"".join(parts)
                cut = buf.rfind(b"\n") + 1
                rest = buf[cut:]
                tables.startup_done.wait()
                out = parse_superblock_lines(buf[:cut])
                if len(out):
                    yield out
        if rest.strip():
            raise SystemExit("lbr: lackey's log ended in the middle of a line")

    return proc, tables, gen()


# what ends a superblock (module docstring); kinds
CUT, COND, UNCOND, REP, STOP = 0, 1, 2, 3, 4
_COND = {"jo", "jno", "jb", "jae", "je", "jne", "jbe", "ja", "js", "jns", "jp", "jnp", "jl",
         "jge", "jle", "jg", "jrcxz", "jecxz", "jcxz", "loop", "loope", "loopne"}
_UNCOND = {"jmp", "ljmp", "call", "lcall", "ret", "retf", "retfq", "iret", "iretd", "iretq"}
_STOP = {"syscall", "sysenter", "int", "int1", "int3", "into", "hlt", "ud0", "ud1", "ud2",
         "pause"}
_STRING = {f"{op}{w}" for op in ("movs", "stos", "lods", "cmps", "scas", "ins", "outs")
           for w in "bwdq"}
_REP = {"rep", "repe", "repz", "repne", "repnz"}


def insn_kind(mnemonic: str) -> int | None:
    """Kind of terminator ``mnemonic`` is (capstone spelling), or None if it does not end a
    superblock.  Prefix words (``rep``, ``bnd``, ``notrack``) come first in capstone."""
    words = mnemonic.split()
    op = words[-1]
    if op in _COND:
        return COND
    if op in _UNCOND:
        return UNCOND
    if op in _STOP:
        return STOP
    if op in _STRING and _REP.intersection(words[:-1]):
        return REP
    return None


class Superblocks:
    """The shape of every distinct superblock the trace enters, decoded once with capstone.

    Columns indexed by a dense id: ``end`` (address after its last instruction: where it
    falls through), ``term`` (address of its last instruction), ``kind`` and ``insns`` (the
    instruction addresses, for exact block counts).  Addresses are runtime addresses; the
    bytes come from the mapped files (``AddressSpace``).
    """

    def __init__(self, space: AddressSpace) -> None:
        self.space = space
        self.cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        self.ids: dict[int, int] = {}
        self.end: list[int] = []
        self.term: list[int] = []
        self.kind: list[int] = []
        self.insns: list[list[int]] = []
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _decode(self, start: int) -> None:
        addrs: list[int] = []
        kind, end = CUT, start
        # most superblocks end within a few instructions: decode a short window in one
        # capstone call first, the longest possible one only when that is not enough
        for window in (SHORT_WINDOW, 16 * MAX_INSNS):
            addrs, kind, end = [], CUT, start
            code = self.space.code(start, window)
            for addr, size, mnem, _ in self.cs.disasm_lite(code, start, MAX_INSNS):
                addrs.append(addr)
                end = addr + size
                k = insn_kind(mnem)
                if k is not None:
                    kind = k
                    break
            if kind != CUT or len(addrs) == MAX_INSNS or len(code) < window:
                break
        if not addrs:  # undecodable: every transition out of it is "unexplained"
            kind = STOP
        self.ids[start] = len(self.end)
        self.end.append(end)
        self.term.append(addrs[-1] if addrs else start)
        self.kind.append(kind)
        self.insns.append(addrs)
        self._arrays = None

    def lookup(self, starts: np.ndarray) -> np.ndarray:
        """Dense ids of ``starts`` (all inside the binary), decoding new ones."""
        uniq, inv = np.unique(starts, return_inverse=True)
        for s in uniq.tolist():
            if s not in self.ids:
                self._decode(s)
        ids = np.fromiter((self.ids[s] for s in uniq.tolist()), np.int64, len(uniq))
        return ids[inv]

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.array(self.end, np.uint64), np.array(self.term, np.uint64),
                            np.array(self.kind, np.int8))
        return self._arrays


# ----------------------------------------------------------------------- sampling + writing
class StackSampler:
    """Every ~``every`` kept branches (seeded jitter), one 32-entry stack, newest first.

    Fed the kept branches in order, in chunks of arrays; the same random draws as the
    corpus's original per-branch loop: a sample is taken at kept branch ``max(next_at,
    DEPTH)`` (the ring must be full), then ``next_at`` moves on by a fresh gap.
    """

    def __init__(self, writer: PerfWriter, pid: int, every: int, seed: int,
                 skylake: bool) -> None:
        self.w, self.pid, self.every, self.skylake = writer, pid, every, skylake
        self.rng = random.Random(seed)
        self.gap = self.next_at = self._draw()
        self.n = 0  # kept branches fed so far
        self.samples = 0
        self.expected: list[str] = []
        z = np.zeros(0, np.uint64)
        self.carry = (z, z, z)

    def _draw(self) -> int:
        return max(1, self.every + self.rng.randint(-self.every // 2, self.every // 2))

    def feed(self, frm: np.ndarray, to: np.ndarray, time: np.ndarray) -> None:
        f = np.concatenate((self.carry[0], frm))
        t = np.concatenate((self.carry[1], to))
        tm = np.concatenate((self.carry[2], time))
        first = self.n - len(self.carry[0])  # 0-based kept index of f[0]
        total = self.n + len(frm)
        while (at := max(self.next_at, DEPTH)) <= total:
            j = at - 1 - first
            fs = f[j - DEPTH + 1:j + 1][::-1].tolist()
            ts = t[j - DEPTH + 1:j + 1][::-1].tolist()
            stack = list(zip(fs, ts))
            if self.skylake:  # newest entry reported twice
                stack = [stack[0]] + stack[:-1]
            ip = ts[0]
            self.w.add_sample(ip, self.pid, self.pid, time=int(tm[j]), period=self.gap,
                              branches=[(a, b, 0) for a, b in stack])
            self.expected.append(f"{ip:x} " + " ".join(fmt_branch(a, b) for a, b in stack))
            self.samples += 1
            self.gap = self._draw()
            self.next_at = at + self.gap
        self.n = total
        keep = DEPTH - 1
        self.carry = (f[-keep:], t[-keep:], tm[-keep:])


def fmt_branch(f: int, t: int) -> str:
    return f"0x{f:x}/0x{t:x}/-/-/-/0/"  # perf 6.1 ends each entry with an empty type


class EdgeCounter:
    """Exact taken-edge counts, accumulated from chunks of (from, to) vaddr arrays."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.uint64)
        self.counts = np.zeros(0, np.int64)

    def add(self, frm: np.ndarray, to: np.ndarray) -> None:
        if not len(frm):
            return
        if frm.max() >= 1 << 32 or to.max() >= 1 << 32:
            raise SystemExit("lbr: binary vaddrs above 4 GiB are not supported")
        k = np.concatenate((self.keys, (frm << np.uint64(32)) | to))
        c = np.concatenate((self.counts, np.ones(len(frm), np.int64)))
        self.keys, inv = np.unique(k, return_inverse=True)
        self.counts = np.bincount(inv, weights=c, minlength=len(self.keys)).astype(np.int64)

    def items(self) -> list[tuple[int, int, int]]:
        return [(k >> 32, k & 0xFFFFFFFF, c)
                for k, c in zip(self.keys.tolist(), self.counts.tolist())]


def trace_mem(binary: Path, argv: list[str], setup: Any) -> dict[str, Any]:
    """The per-instruction tracer (``--tracer mem``)."""
    proc, tables, trace = lackey_mem_trace(binary, argv)
    first = next(trace)
    ctx = setup(tables)
    base, lo, hi, starts = ctx["base"], ctx["lo"], ctx["hi"], ctx["starts"]
    space: AddressSpace = ctx["space"]
    sampler: StackSampler = ctx["sampler"]
    edges: EdgeCounter = ctx["edges"]
    exec_count: Counter[int] = Counter()
    bf: list[int] = []
    bt: list[int] = []
    btm: list[int] = []

    def flush() -> None:
        sampler.feed(np.array(bf, np.uint64), np.array(bt, np.uint64),
                     np.array(btm, np.uint64))
        bf.clear(), bt.clear(), btm.clear()

    n_ins = n_taken = n_kept = n_bin = 0
    prev_a = prev_end = -1
    entry, entry_seen = ctx["entry"], False
    ef: list[int] = []
    et: list[int] = []

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
            in_bin = lo <= prev_a < hi and lo <= a < hi
            if in_bin:
                n_bin += 1
                ef.append(prev_a - base)
                et.append(a - base)
            if in_bin or (ctx["scope"] == "user" and space.contains(prev_a)
                          and space.contains(a)):
                n_kept += 1
                bf.append(prev_a)
                bt.append(a)
                btm.append(1_000_000 + n_ins)
                if len(bf) >= FLUSH_BRANCHES:
                    flush()
                    edges.add(np.array(ef, np.uint64), np.array(et, np.uint64))
                    ef.clear(), et.clear()
        prev_a, prev_end = a, a + size
    flush()
    edges.add(np.array(ef, np.uint64), np.array(et, np.uint64))
    return {"proc": proc, "tables": tables, "entry_seen": entry_seen,
            "exec_count": exec_count, "instructions": n_ins, "taken_branches": n_taken,
            "taken_branches_in_binary": n_bin, "end_time": 1_000_000 + n_ins,
            "extra": {"kept_branches": n_kept}}


def trace_sb(binary: Path, argv: list[str], setup: Any, env: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """The superblock tracer (``--tracer sb``): chunks of superblock starts, vectorized.

    ``setup(tables)`` returns the context: ``sampler`` (fed the kept branches; None for
    none) and, optionally, ``observe(seq, n_prev, code, superblocks)``, called with every
    chunk of executed superblocks (precise.py numbers retired instructions with it).
    """
    proc, tables, trace = lackey_superblocks(binary, argv, env)
    ctx: dict[str, Any] | None = None
    sbs: Superblocks | None = None
    prev = np.zeros(0, np.uint64)  # the last superblock of the previous chunk
    n_sb = n_kept = n_bin = n_taken_from = unexplained = unknown = 0
    runs = np.zeros(0, np.int64)  # executions per superblock id
    entry_seen = False
    for chunk in trace:
        if ctx is None:
            ctx = setup(tables)
            sbs = Superblocks(ctx["space"])
        assert sbs is not None
        base = np.uint64(ctx["base"])
        lo, hi = np.uint64(ctx["lo"]), np.uint64(ctx["hi"])
        seq = np.concatenate((prev, chunk))
        seq_index = np.arange(n_sb - len(prev), n_sb + len(chunk), dtype=np.int64)
        inside = (seq >= lo) & (seq < hi)
        # the traced code: the binary's text, or all the client's code
        code = inside if ctx["scope"] == "binary" else ctx["space"].index(seq) >= 0
        unknown += int((~code[len(prev):]).sum())
        entry_seen = entry_seen or bool((chunk == np.uint64(ctx["entry"])).any())
        # executions of the chunk's own superblocks (prev was counted with its chunk)
        own = code.copy()
        own[:len(prev)] = False
        c = np.bincount(sbs.lookup(seq[own]))
        if len(c) > len(runs):
            runs = np.concatenate((runs, np.zeros(len(c) - len(runs), np.int64)))
        runs[:len(c)] += c
        if (observe := ctx.get("observe")) is not None:
            # the executed superblocks in order (chunk, after the carried-over one):
            # precise.py places its instruction samples with them
            observe(seq, len(prev), code, sbs)
        # transitions seq[i] -> seq[i+1] out of a superblock of the traced code
        src = np.flatnonzero(code[:-1])
        ids = sbs.lookup(seq[src])
        end, term, kind = (x[ids] for x in sbs.arrays())
        nxt = seq[src + 1]
        # an unconditional jump is taken even onto the next instruction (a jump table's
        # case placed right after it); a rep iteration is no branch
        branch = ((nxt != end) | (kind == UNCOND)) & ~((kind == REP) & (nxt == term))
        odd = branch & ((kind == CUT) | (kind == STOP))
        unexplained += int(odd.sum())
        branch &= ~odd
        n_taken_from += int(branch.sum())
        kept = branch & code[src + 1]
        n_kept += int(kept.sum())
        if ctx["sampler"] is not None:  # none: a caller that takes no branch stacks
            ctx["sampler"].feed(term[kept], nxt[kept], np.uint64(1_000_000)
                                + seq_index[src + 1][kept].astype(np.uint64))
        both = branch & inside[src] & inside[src + 1]
        n_bin += int(both.sum())
        ctx["edges"].add(term[both] - base, nxt[both] - base)
        n_sb += len(chunk)
        prev = chunk[-1:]
    if ctx is None or sbs is None:
        rc = proc.wait()
        raise SystemExit(f"lbr: valgrind traced no superblock of {binary} (exit {rc})")
    ins_counts = np.array([len(x) for x in sbs.insns], np.int64)[:len(runs)]
    in_bin = np.array([ctx["lo"] <= a < ctx["hi"] for a in sbs.ids], bool)[:len(runs)]
    exec_count: Counter[int] = Counter()
    starts = ctx["starts"]
    for sid, addrs in enumerate(sbs.insns):
        if sid < len(runs) and runs[sid]:
            for a in addrs:
                if a in starts:
                    exec_count[a] += int(runs[sid])
    return {"proc": proc, "tables": tables, "entry_seen": entry_seen,
            "exec_count": exec_count, "instructions": None, "taken_branches": None,
            "taken_branches_in_binary": n_bin, "end_time": 1_000_000 + n_sb,
            "extra": {"superblocks": n_sb, "superblocks_outside_traced_code": unknown,
                      "distinct_superblocks": len(sbs.end),
                      "instructions_in_binary": int((runs[:len(ins_counts)]
                                                     * ins_counts)[in_bin].sum()),
                      "instructions_traced": int((runs[:len(ins_counts)] * ins_counts).sum()),
                      "taken_branches_traced": n_taken_from, "kept_branches": n_kept,
                      "unexplained": unexplained}}


def build_id(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            for sec in ELFFile(f).iter_sections():
                if sec.name == ".note.gnu.build-id":
                    return next(n["n_desc"] for n in sec.iter_notes()
                                if n["n_type"] == "NT_GNU_BUILD_ID")
    except (OSError, ValueError, StopIteration):
        return None
    return None


def binary_mapping(tables: Tables, binary: Path, lay: dict[str, Any],
                   user_maps: list[Mapping]) -> tuple[Mapping, int, int, int]:
    """The binary's executable mapping in valgrind's startup table, its load base and its
    text ``[lo, hi)`` as runtime addresses (``user_maps``: the mapping run's, which must
    hold the same mapping)."""
    tables.startup_done.wait()
    target = str(binary.resolve())
    segs = [m for m in tables.startup if m.path == target]
    if len(segs) != 1:
        raise SystemExit(f"lbr: valgrind -d showed {len(segs)} executable mappings of "
                         f"{binary}")
    me = segs[0]
    if user_maps and me not in user_maps:
        raise SystemExit("lbr: the mapping run loaded the binary elsewhere than the "
                         "traced run")
    # file offset fo runs at map_start + fo - pgoff; vaddr v sits at fo = v - p_vaddr + p_offset
    base = me.start - lay["p_vaddr"] + lay["p_offset"] - me.pgoff
    lo = base + lay["p_vaddr"]
    hi = lo + lay["p_filesz"]
    if not lo <= base + lay["entry"] < hi:  # a cheap cross-check of the base
        raise SystemExit(f"lbr: entry point outside the text mapping (base 0x{base:x})")
    return me, base, lo, hi


def write_side_records(w: PerfWriter, pid: int, binary: Path, lay: dict[str, Any],
                       me: Mapping, space: AddressSpace) -> None:
    """COMM, then an MMAP2 for the binary and for every other code mapping of ``space``
    (at the addresses the traced run used), and the build-ids of all of them."""
    w.add_comm(pid, pid, binary.name[:15], exec_=True)
    w.add_mmap2(pid, pid, me.start, me.end - me.start, me.pgoff, str(binary),
                prot=5, flags=2)
    for m in space.maps:
        if m != me:
            w.add_mmap2(pid, pid, m.start, m.end - m.start, m.pgoff, m.path,
                        prot=5, flags=2)
    if lay["build_id"]:
        w.add_build_id(str(binary), lay["build_id"])  # pid -1, as perf writes it
    for path in sorted({m.path for m in space.maps} - {me.path}):
        if bid := build_id(path):
            w.add_build_id(path, bid)


def exact_counts(binary: Path, lay: dict[str, Any], blocks: list[dict[str, Any]], base: int,
                 res: dict[str, Any], edges: EdgeCounter, rounds: int,
                 argv: list[str] | None) -> dict[str, Any]:
    """The ``exact-counts.json`` document of a traced run (``res``: a tracer's result)."""
    exec_count = res["exec_count"]
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
        "binary": binary.name, "build_id": lay["build_id"], "rounds": rounds,
        "instructions": res["instructions"], "taken_branches": res["taken_branches"],
        "taken_branches_in_binary": res["taken_branches_in_binary"],
        "blocks": counts,
        "edges": [{"from": f"0x{f:x}", "to": f"0x{t:x}", "count": c}
                  for f, t, c in edges.items()],
    }
    if argv is not None:
        exact["args"] = argv
    return exact


def run(args: argparse.Namespace) -> None:
    binary, out, work = Path(args.binary).absolute(), Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    lay = elf_layout(binary)
    blocks = readobj_blocks(Path(args.readobj))
    argv = args.args if args.args is not None else [str(args.rounds)]
    variant = set(args.variant.split(",")) - {"none"}
    unknown = variant - {"skylake", "hw_index", "pipe"}
    if unknown:
        raise SystemExit(f"lbr: unknown variant {sorted(unknown)}")
    branch_type = BR_USER | BR_ANY | (fmt.BR_HW_INDEX if "hw_index" in variant else 0)
    pid = 4242
    # with --scope user the stacks hold every branch of the client's code (libc, ld.so too),
    # as the hardware's user-mode LBR does; the mappings come from an untraced run first
    user_maps = valgrind_mappings(binary, argv) if args.scope == "user" else []
    w = PerfWriter(out / "perf.data", event_name="cycles:u",
                   sample_type=fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
                   | fmt.S_BRANCH_STACK,
                   branch_sample_type=branch_type, pipe="pipe" in variant,
                   cmdline=["valgrind", "--tool=lackey", str(binary), *argv])
    ctx: dict[str, Any] = {}

    def setup(tables: Tables) -> dict[str, Any]:
        """Called once valgrind's first address-space table is read: the binary's base."""
        me, base, lo, hi = binary_mapping(tables, binary, lay, user_maps)
        space = AddressSpace(user_maps or [me])
        write_side_records(w, pid, binary, lay, me, space)
        ctx.update(base=base, lo=lo, hi=hi, entry=base + lay["entry"], me=me, space=space,
                   scope=args.scope,
                   starts={base + b["vaddr"] for b in blocks if b["size"] > 0},
                   sampler=StackSampler(w, pid, args.every, args.seed, "skylake" in variant),
                   edges=EdgeCounter())
        return ctx

    tracer = trace_sb if args.tracer == "sb" else trace_mem
    res = tracer(binary, argv, setup)
    rc = res["proc"].wait()
    if rc != 0:
        raise SystemExit(f"lbr: valgrind exited {rc}")
    res["tables"].finish()
    if user_maps and client_mappings(res["tables"].shutdown) != user_maps:
        raise SystemExit("lbr: the traced run mapped the client's code elsewhere than the "
                         "mapping run")
    base = ctx["base"]
    if not res["entry_seen"]:
        raise SystemExit(f"lbr: base 0x{base:x} is wrong: the entry point never ran")
    if res["extra"].get("unexplained"):
        print(f"lbr: warning: {res['extra']['unexplained']} superblock transitions the "
              "model cannot explain (not counted as branches)", file=sys.stderr)
    sampler: StackSampler = ctx["sampler"]
    w.add_exit(pid, pid, time=res["end_time"])
    w.close()
    (work / f"{out.name}.expected.txt").write_text("\n".join(sampler.expected) + "\n")

    exact = exact_counts(binary, lay, blocks, base, res, ctx["edges"], args.rounds,
                         argv if args.args is not None else None)
    (out / "exact-counts.json").write_text(json.dumps(exact, indent=1) + "\n")
    me = ctx["me"]
    info = {"base": f"0x{base:x}", "mmap": {"start": f"0x{me.start:x}",
                                            "len": f"0x{me.end - me.start:x}",
                                            "pgoff": f"0x{me.pgoff:x}"},
            "pid": pid, "depth": DEPTH, "variant": sorted(variant), "every": args.every,
            "seed": args.seed, "samples": sampler.samples, "rounds": args.rounds,
            "branch_sample_type": branch_type, "event": "cycles:u"}
    if args.tracer != "mem" or args.scope != "binary":
        info.update(tracer=args.tracer, scope=args.scope, **res["extra"])
    if args.scope == "user":
        info["mappings"] = [{"start": f"0x{m.start:x}", "end": f"0x{m.end:x}",
                             "pgoff": f"0x{m.pgoff:x}", "path": m.path}
                            for m in ctx["space"].maps]
    if args.args is not None:
        info["args"] = argv
    (out / "lbr-info.json").write_text(json.dumps(info, indent=1) + "\n")
    how = ("--trace-mem=yes" if args.tracer == "mem" else
           f"--trace-superblocks=yes --vex-guest-max-insns={MAX_INSNS}")
    (out / "command.txt").write_text(
        f"valgrind -d --tool=lackey {how} {' '.join(EXACT_VEX)} {binary} {' '.join(argv)} | "
        f"tools/lbr.py --tracer {args.tracer} --scope {args.scope} --every {args.every} "
        f"--variant {args.variant} --seed {args.seed}\n")
    what = (f"{res['instructions']} instructions, {res['taken_branches']} taken branches"
            if args.tracer == "mem" else
            f"{res['extra']['superblocks']} superblocks, "
            f"{res['extra']['instructions_in_binary']} instructions in the binary")
    print(f"lbr: {out.name}: {what} ({res['taken_branches_in_binary']} taken in the binary), "
          f"{sampler.samples} samples, base 0x{base:x}", file=sys.stderr)


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
    ap.add_argument("--args", nargs=argparse.REMAINDER,
                    help="the program's arguments, all the rest (default: ROUNDS)")
    ap.add_argument("--tracer", choices=("sb", "mem"), default="sb")
    ap.add_argument("--scope", choices=("binary", "user"), default="binary",
                    help="branches kept in the stacks: both ends in the binary, or both in "
                         "any of the client's code (libc, ld.so ...), as user-mode LBR")
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
