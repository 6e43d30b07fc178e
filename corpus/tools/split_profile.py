#!/usr/bin/env python3
"""Split a recorded perf.data into many small ones, as a fleet would send them.

Each piece is a valid perf.data written by ``bbmap.perf.writer.PerfWriter``: the source's
event (name, period, sample type bits the writer produces, branch sample type), its header
build-ids, *all* of its side records (mmaps, comms, forks, exits: so every piece maps its
samples as the whole profile does) and one contiguous run of its samples (with their branch
stacks).  The runs partition the samples: every sample is in exactly one piece, so the
pieces together count what the source counts (``tests/test_fleet.py`` checks it).

Usage: split_profile.py SRC OUT_DIR --pieces N [--seed S] [--prefix P]
(sizes: a seeded log-uniform draw from 1 to 8x the mean, scaled to sum to the samples).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

import numpy as np

from bbmap.formats import perfdata as fmt
from bbmap.perf import PerfData
from bbmap.perf.records import (
    CommRecord,
    ExitRecord,
    ForkRecord,
    MmapRecord,
    SampleBatch,
    SideRecords,
)
from bbmap.perf.writer import PerfWriter

WRITER_BITS = (fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD | fmt.S_BRANCH_STACK
               | fmt.S_CPU)


def read_all(src: str) -> tuple[PerfData, list, SampleBatch]:
    perf = PerfData(src)
    side: list = []
    parts: list[SampleBatch] = []
    for item in perf.stream(1 << 16):
        if isinstance(item, SideRecords):
            side.extend(item.records)
        elif isinstance(item, SampleBatch) and len(item):
            parts.append(item)
    return perf, side, SampleBatch.concat(parts)


def piece_sizes(total: int, pieces: int, seed: int) -> list[int]:
    """``pieces`` sizes >= 1 summing to ``total``, log-uniform spread (varied sizes)."""
    if pieces > total:
        raise ValueError(f"{pieces} pieces of {total} samples: not enough samples")
    rnd = random.Random(seed)
    w = [2.0 ** rnd.uniform(0, 3) for _ in range(pieces)]
    s = sum(w)
    extra = total - pieces
    sizes = [1 + int(extra * x / s) for x in w]
    for i in range(total - sum(sizes)):
        sizes[i % pieces] += 1
    return sizes


def write_piece(path: str, perf: PerfData, side: list, batch: SampleBatch) -> None:
    a = perf.attrs[0]
    st = (a.sample_type & WRITER_BITS) | fmt.S_IP | fmt.S_TID | fmt.S_TIME | fmt.S_PERIOD
    with PerfWriter(path, sample_type=st, branch_sample_type=a.branch_sample_type
                    if st & fmt.S_BRANCH_STACK else 0, event_name=a.name,
                    sample_period=a.sample_period, config=a.config, attr_type=a.type,
                    hostname="fleet-piece", cmdline=["split_profile.py"]) as w:
        for b in perf.build_ids:
            w.add_build_id(b.filename, b.build_id, pid=b.pid, misc=b.misc & 0x7)
        for r in side:
            if isinstance(r, MmapRecord):
                if r.is_mmap2:
                    w.add_mmap2(r.pid, r.tid, r.start, r.length, r.pgoff, r.filename,
                                prot=r.prot, flags=r.flags, build_id=r.build_id, time=r.time,
                                cpumode=r.cpumode)
                else:
                    w.add_mmap(r.pid, r.tid, r.start, r.length, r.pgoff, r.filename,
                               time=r.time, cpumode=r.cpumode)
            elif isinstance(r, CommRecord):
                w.add_comm(r.pid, r.tid, r.comm, time=r.time, exec_=r.is_exec)
            elif isinstance(r, ForkRecord):
                w.add_fork(r.pid, r.ppid, r.tid, r.ptid, time=r.time)
            elif isinstance(r, ExitRecord):
                w.add_exit(r.pid, r.ppid, r.tid, r.ptid, time=r.time)
        w.add_batch(batch)


def split(src: str, out_dir: str, pieces: int, *, seed: int = 1, prefix: str = "piece"
          ) -> list[str]:
    """Write ``pieces`` files ``OUT_DIR/PREFIX-NNNNN.data``; return their paths."""
    perf, side, batch = read_all(src)
    sizes = piece_sizes(len(batch), pieces, seed)
    os.makedirs(out_dir, exist_ok=True)
    out = []
    lo = 0
    for i, n in enumerate(sizes):
        p = os.path.join(out_dir, f"{prefix}-{i:05d}.data")
        keep = np.zeros(len(batch), bool)
        keep[lo:lo + n] = True
        write_piece(p, perf, side, batch.select(keep))
        lo += n
        out.append(p)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out_dir")
    ap.add_argument("--pieces", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prefix", default=Path(sys.argv[0]).stem)
    a = ap.parse_args(argv)
    paths = split(a.src, a.out_dir, a.pieces, seed=a.seed, prefix=a.prefix)
    print(f"{len(paths)} pieces in {a.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
