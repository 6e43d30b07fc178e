"""Precise instruction-sample profiles (``instructions:upp``) of a real run, from valgrind.

What a PEBS ``inst_retired.prec_dist`` (``perf record -e instructions:upp -c N``), an AMD IBS
op or an ARM SPE profile gives, without that hardware: the program runs under valgrind's
lackey (lbr.py's superblock tracer, imported, not copied: ``--trace-superblocks=yes`` with
the exact-VEX settings, every superblock decoded once with capstone), every executed
instruction of the whole process is numbered in retirement order, and one sample is taken
every ~N of them.  What the generator assumes, and so what the profile means:

* a sample is the instruction that retired as the Nth since the previous sample, N drawn
  uniformly from ``[every - every//2, every + every//2]`` with a seeded RNG (jitter keeps
  the period from locking onto a loop; reruns give the same file);
* no skid: the sample IP is that very instruction (``prec_dist`` semantics), never the next
  one, so every sampled IP is an instruction start;
* user instructions only (``:u``), counted across all of the client's code (the binary,
  ld.so, libc, ...); valgrind's own code and its preloads (``vgpreload_*``), which the
  hardware would never run, retire nothing;
* a ``rep`` string instruction retires once however many iterations it runs (valgrind
  re-enters it once per iteration: those re-entries are counted in ``rep_iterations``,
  not as instructions).

The file is what ``perf record -e instructions:upp -c EVERY -z`` writes: attr type
PERF_TYPE_HARDWARE, config PERF_COUNT_HW_INSTRUCTIONS, exclude_kernel, exclude_hv,
precise_ip 2, sample_period EVERY, sample_type IP|TID|TIME, the event named
``instructions:upp``; a COMM and one MMAP2 for every object the run mapped executable, at
the addresses valgrind loaded it (so samples in ld.so and libc land in their own DSOs),
their build-ids, zstd-compressed records.  Sample times are 10^6 + the instruction's
retirement number.  Beside it:

* ``exact-counts.json``: the same run's block executions and every taken intra-binary
  branch, in lbr.py's schema (``instructions``: retired instructions of the whole process);
* ``precise-info.json``: parameters, the base address and mappings, sample counts (total,
  in the binary, per object), retired instructions (total, in the binary; a ``rep``
  instruction once) and ``rep_iterations``;
* ``command.txt``; and in ``--work``: ``NAME.expected.txt``, the IP and object of every
  sample as written, which ``--check`` compares with ``perf script -F event,ip,dso``.

Usage (from corpus/build):
  precise.py --binary STAGED --readobj GOLDEN --rounds R --every N [--seed S]
             [--args ARG...] --out precise/NAME --work work/precise   (stdin: the program's)
  precise.py --check precise/NAME --work work/precise
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent)]  # lbr.py, and this tree's bbmap
import lbr  # noqa: E402

from bbmap.formats import perfdata as fmt  # noqa: E402
from bbmap.perf.writer import PerfWriter  # noqa: E402

EVENT = "instructions:upp"
PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS = 0, 1
SAMPLE_TYPE = fmt.S_IP | fmt.S_TID | fmt.S_TIME  # perf record -c N: no PERIOD in samples
PID = 4242
TIME0 = 1_000_000
# the traced process's whole environment: ld.so's and libc's start-up work depends on it,
# so a fixed one makes the samples outside the binary reproducible too (passed to Popen:
# os.environ does not hold what a library set with setenv, pytest's LINES and COLUMNS)
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


def rewindable_stdin(work: Path, name: str) -> None:
    """Make fd 0 a file that can be rewound: both valgrind runs read the program's input
    from its start (a pipe is spooled to ``work`` first)."""
    try:
        os.lseek(0, 0, os.SEEK_SET)
        return
    except OSError:
        pass
    spool = work / f"{name}.stdin"
    with spool.open("wb") as f:
        while chunk := os.read(0, 1 << 20):
            f.write(chunk)
    fd = os.open(spool, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)


class InstructionSampler:
    """Numbers the retired instructions of the superblocks lbr.trace_sb reports, in order,
    and writes a sample at every drawn position (module docstring)."""

    def __init__(self, writer: PerfWriter, every: int, seed: int) -> None:
        self.w, self.every = writer, every
        self.rng = random.Random(seed)
        self.next_at = self._draw()  # retirement number (1-based) of the next sample
        self.total = 0  # instructions retired so far
        self.in_binary = 0  # of them, in the binary's text [lo, hi) (set by the caller)
        self.lo = self.hi = 0
        self.rep_iterations = 0
        self.ips: list[int] = []
        self._lens = np.zeros(0, np.int64)

    def _draw(self) -> int:
        return max(1, self.every + self.rng.randint(-self.every // 2, self.every // 2))

    def _lengths(self, sbs: lbr.Superblocks) -> np.ndarray:
        if len(self._lens) != len(sbs.insns):
            self._lens = np.array([len(x) for x in sbs.insns], np.int64)
        return self._lens

    def observe(self, seq: np.ndarray, n_prev: int, code: np.ndarray,
                sbs: lbr.Superblocks) -> None:
        """``seq[n_prev:]``: the chunk's superblock starts; ``code``: which are client code
        (``seq[:n_prev]``, the previous chunk's last one, was counted with its chunk)."""
        at = np.flatnonzero(code[n_prev:]) + n_prev
        if not len(at):
            return
        ids = sbs.lookup(seq[at])
        lens = self._lengths(sbs)[ids]
        # a rep string instruction's further iterations: an entry at the rep instruction
        # the superblock just before ended in
        before = at - 1
        ok = (before >= 0) & code[np.maximum(before, 0)]
        if ok.any():
            pid = sbs.lookup(seq[before[ok]])
            _, term, kind = sbs.arrays()
            rep = (kind[pid] == lbr.REP) & (term[pid] == seq[at[ok]])
            idx = np.flatnonzero(ok)[rep]
            self.rep_iterations += int(len(idx))
            lens[idx] = 0
        inside = (seq[at] >= np.uint64(self.lo)) & (seq[at] < np.uint64(self.hi))
        self.in_binary += int(lens[inside].sum())
        cum = self.total + np.cumsum(lens)
        last = int(cum[-1])
        targets = []
        while self.next_at <= last:
            targets.append(self.next_at)
            self.next_at += self._draw()
        if targets:
            t = np.array(targets, np.int64)
            j = np.searchsorted(cum, t, side="left")
            off = t - (cum[j] - lens[j]) - 1
            for tt, sid, k in zip(t.tolist(), ids[j].tolist(), off.tolist()):
                ip = sbs.insns[sid][k]
                self.w.add_sample(ip, PID, PID, time=TIME0 + tt)
                self.ips.append(ip)
        self.total = last


def run(args: argparse.Namespace) -> None:
    t0 = time.monotonic()
    binary, out, work = Path(args.binary).absolute(), Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    lay = lbr.elf_layout(binary)
    blocks = lbr.readobj_blocks(Path(args.readobj))
    argv = args.args if args.args is not None else [str(args.rounds)]
    rewindable_stdin(work, out.name)
    # every executable object of the client, from an untraced run (valgrind's layout does
    # not depend on tracing; the traced run's own tables are checked against it below)
    user_maps = lbr.valgrind_mappings(binary, argv, ENV)
    w = PerfWriter(out / "perf.data", event_name=EVENT, attr_type=PERF_TYPE_HARDWARE,
                   config=PERF_COUNT_HW_INSTRUCTIONS, sample_period=args.every,
                   sample_type=SAMPLE_TYPE, compress=True, hostname="bbmap-corpus",
                   cmdline=["valgrind", "--tool=lackey", str(binary), *argv])
    sampler = InstructionSampler(w, args.every, args.seed)
    ctx: dict[str, Any] = {}
    os.lseek(0, 0, os.SEEK_SET)  # the mapping run read the input: the traced run reads it too

    def setup(tables: lbr.Tables) -> dict[str, Any]:
        me, base, lo, hi = lbr.binary_mapping(tables, binary, lay, user_maps)
        space = lbr.AddressSpace(user_maps)
        lbr.write_side_records(w, PID, binary, lay, me, space)
        sampler.lo, sampler.hi = lo, hi
        ctx.update(base=base, lo=lo, hi=hi, entry=base + lay["entry"], me=me, space=space,
                   scope="user", starts={base + b["vaddr"] for b in blocks if b["size"] > 0},
                   sampler=None, observe=sampler.observe, edges=lbr.EdgeCounter())
        return ctx

    try:
        res = lbr.trace_sb(binary, argv, setup, ENV)
        rc = res["proc"].wait()
        if rc != 0:
            raise SystemExit(f"precise: valgrind exited {rc}")
        res["tables"].finish()
        if lbr.client_mappings(res["tables"].shutdown) != user_maps:
            raise SystemExit("precise: the traced run mapped the client's code elsewhere "
                             "than the mapping run")
        if not res["entry_seen"]:
            raise SystemExit(f"precise: base 0x{ctx['base']:x} is wrong: the entry point "
                             "never ran")
        w.add_exit(PID, PID, time=TIME0 + sampler.total + 1)
        w.close()
    except BaseException:
        w.abort()
        raise
    extra = res["extra"]
    if extra["unexplained"]:
        print(f"precise: warning: {extra['unexplained']} superblock transitions the model "
              "cannot explain (not counted as branches)", file=sys.stderr)
    base, lo, hi, space = ctx["base"], ctx["lo"], ctx["hi"], ctx["space"]
    ips = np.array(sampler.ips, np.uint64)
    where = space.index(ips)
    paths = [str(binary) if m == ctx["me"] else m.path for m in space.maps]
    (work / f"{out.name}.expected.txt").write_text(
        "".join(f"{ip:x} {paths[i]}\n" for ip, i in zip(sampler.ips, where.tolist())))

    res["instructions"] = sampler.total
    res["taken_branches"] = extra["taken_branches_traced"]
    exact = lbr.exact_counts(binary, lay, blocks, base, res, ctx["edges"], args.rounds,
                             argv if args.args is not None else None)
    (out / "exact-counts.json").write_text(json.dumps(exact, indent=1) + "\n")
    in_bin = int(((ips >= np.uint64(lo)) & (ips < np.uint64(hi))).sum())
    by_object = Counter(paths[i] for i in where.tolist())
    me = ctx["me"]
    info = {
        "event": EVENT, "attr": {"type": PERF_TYPE_HARDWARE,
                                 "config": PERF_COUNT_HW_INSTRUCTIONS,
                                 "precise_ip": 2, "exclude_kernel": 1, "exclude_hv": 1,
                                 "sample_period": args.every, "sample_type": "IP|TID|TIME"},
        "every": args.every, "jitter": f"uniform +-{args.every // 2}", "seed": args.seed,
        "rounds": args.rounds, "pid": PID, "base": f"0x{base:x}",
        "mmap": {"start": f"0x{me.start:x}", "len": f"0x{me.end - me.start:x}",
                 "pgoff": f"0x{me.pgoff:x}"},
        "samples": len(sampler.ips), "samples_in_binary": in_bin,
        "samples_by_object": dict(sorted(by_object.items())),
        "instructions": sampler.total,
        "instructions_in_binary": sampler.in_binary,
        "rep_iterations": sampler.rep_iterations,
        "superblocks": extra["superblocks"],
        "superblocks_outside_client_code": extra["superblocks_outside_traced_code"],
        "unexplained": extra["unexplained"],
        "mappings": [{"start": f"0x{m.start:x}", "end": f"0x{m.end:x}",
                      "pgoff": f"0x{m.pgoff:x}", "path": p} for m, p in zip(space.maps, paths)],
    }
    if args.args is not None:
        info["args"] = argv
    (out / "precise-info.json").write_text(json.dumps(info, indent=1) + "\n")
    (out / "command.txt").write_text(
        f"env -i {' '.join(f'{k}={v}' for k, v in ENV.items())} valgrind -d --tool=lackey "
        f"--trace-superblocks=yes "
        f"--vex-guest-max-insns={lbr.MAX_INSNS} {' '.join(lbr.EXACT_VEX)} {binary} "
        f"{' '.join(argv)} | tools/precise.py --every {args.every} --seed {args.seed}\n")
    print(f"precise: {out.name}: {sampler.total} instructions "
          f"({sampler.in_binary} in the binary), {len(sampler.ips)} samples "
          f"({in_bin} in the binary), base 0x{base:x}, {time.monotonic() - t0:.1f} s",
          file=sys.stderr)


def parse_script(text: str) -> list[tuple[str, str, str]]:
    """``perf script -F event,ip,dso`` lines as (event, ip hex, dso path)."""
    out = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) >= 3:
            out.append((tok[0].rstrip(":"), tok[1], tok[2].strip("()")))
    return out


def check(d: Path, work: Path) -> None:
    """perf script reads ``d/perf.data`` back to exactly the samples written."""
    want = [(EVENT, *line.split(" ", 1))
            for line in (work / f"{d.name}.expected.txt").read_text().splitlines()]
    r = subprocess.run(["perf", "script", "-i", str(d / "perf.data"), "-F", "event,ip,dso"],
                       capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise SystemExit(f"precise: {d}: perf script failed: {r.stderr.strip()[:300]}")
    got = parse_script(r.stdout)
    if want != got:
        bad = next(i for i, (x, y) in enumerate(zip(want + [None], got + [None])) if x != y)
        raise SystemExit(f"precise: {d}: perf script differs from the written samples at "
                         f"sample {bad} of {len(want)} (perf printed {len(got)}):\n"
                         f" wrote {want[bad] if bad < len(want) else '-'}\n"
                         f" perf  {got[bad] if bad < len(got) else '-'}")
    objects = Counter(p for _, _, p in got)
    print(f"precise: {d.name}: perf script reads back all {len(got)} samples unchanged "
          f"(event {EVENT}; {', '.join(f'{Path(p).name} {n}' for p, n in objects.items())})",
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
    ap.add_argument("--every", type=int, default=250,
                    help="mean retired instructions between samples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    if args.check:
        check(args.check, Path(args.work))
    elif not (args.binary and args.readobj and args.out):
        ap.error("--binary, --readobj and --out are required (or --check)")
    elif args.every < 2:
        ap.error("--every must be at least 2")
    else:
        run(args)


if __name__ == "__main__":
    main()
