"""Time the three-stage index: 10M addresses in bulk (target < 2 s) and one address (< 50 us).

Run: ``python bench/bench_index.py [--n 10000000] [--binary corpus/bin/...]``.
The map is synthetic but clang-sized (60k functions, 10% split into two ranges, ~900k
blocks with empty blocks and padding gaps).  The peer comparison runs
``llvm-symbolizer-22`` (function stage only) and bbmap's full lookup on the same
addresses of a real corpus binary and checks they name the same functions.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time

import numpy as np

from bbmap.binary.types import FunctionSymbols, parent_name
from bbmap.index import IN_BLOCK, BlockIndex
from bbmap.model import BlockMap


def synthetic_map(nfunc: int, rng: np.random.Generator) -> tuple[BlockMap, FunctionSymbols]:
    nb = rng.integers(2, 30, nfunc)  # blocks per function
    split = rng.random(nfunc) < 0.1
    nr = np.where(split, 2, 1)
    R = int(nr.sum())
    # blocks per range: split functions give their last third to a cold range
    rb = []
    for f in range(nfunc):
        if split[f]:
            k = max(1, int(nb[f]) // 3)
            rb += [int(nb[f]) - k, k]
        else:
            rb.append(int(nb[f]))
    rb = np.array(rb)
    B = int(rb.sum())
    size = rng.integers(1, 40, B).astype(np.uint64)
    size[rng.random(B) < 0.03] = 0  # empty blocks
    pad = np.where(rng.random(B) < 0.1, rng.integers(1, 16, B), 0).astype(np.uint64)
    rptr = np.concatenate([[0], np.cumsum(rb)])
    first = np.zeros(B, bool)
    first[rptr[:-1]] = True
    pad[first] = 0
    step = size + pad
    # offsets: exclusive cumsum of steps within each range, plus the block's own padding
    cs = np.cumsum(step)
    range_start_cs = np.repeat(cs[rptr[:-1]] - step[rptr[:-1]], rb)
    offset = cs - step - range_start_cs + pad
    extent = np.add.reduceat(step, rptr[:-1])
    hot = np.array([r for r in range(R)])
    # place hot ranges first, then all cold ranges (like .text.split)
    is_cold = np.zeros(R, bool)
    fr = np.concatenate([[0], np.cumsum(nr)])
    is_cold[fr[1:][split] - 1] = True
    order = np.concatenate([hot[~is_cold], hot[is_cold]])
    gaps = rng.integers(0, 32, R).astype(np.uint64)
    base = np.zeros(R, np.uint64)
    base[order] = 0x401000 + np.concatenate([[0], np.cumsum((extent + gaps)[order])[:-1]])
    m = BlockMap()
    m.func_address = base[fr[:-1]]
    m.func_version = np.full(nfunc, 2, "i2")
    m.func_feature = np.where(split, 8, 0).astype("u2")
    m.func_source = np.zeros(nfunc, "i4")
    m.func_map_offset = np.zeros(nfunc, "u8")
    m.func_entry_count = np.zeros(nfunc, "u8")
    m.func_range_ptr = fr.astype(np.int64)
    m.range_base = base
    m.range_section = np.full(R, -1, "i4")
    m.range_num_blocks = rb.astype("u4")
    m.range_block_ptr = rptr.astype(np.int64)
    m.block_id = (np.arange(B) - np.repeat(rptr[:-1], rb)).astype("u4")
    m.block_offset = offset.astype("u8")
    m.block_size = size
    m.block_md = np.zeros(B, "u1")
    m.block_hash = np.zeros(B, "u8")
    m.block_cs_ptr = np.zeros(B + 1, np.int64)
    m.block_freq = np.zeros(B, "u8")
    m.block_postlink_freq = np.zeros(B, "u8")
    m.block_succ_ptr = np.zeros(B + 1, np.int64)
    m.func_name = [f"fn{f}" for f in range(nfunc)]
    m.validate_shape()
    # symbols: one per range (foo, foo.cold) plus 5% map-less functions in the gaps' place
    names = []
    for f in range(nfunc):
        names.append(f"fn{f}")
        if split[f]:
            names.append(f"fn{f}.cold")
    so = np.argsort(base, kind="stable")
    syms = FunctionSymbols(address=base[so], size=extent[so].astype("u8"),
                           section=np.zeros(R, "i4"), names=[names[i] for i in so],
                           display=[names[i] for i in so], is_func=np.ones(R, "?"))
    return m, syms


def bench_bulk(n: int, nfunc: int) -> None:
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    bm, syms = synthetic_map(nfunc, rng)
    idx = BlockIndex(bm, syms)
    build = time.perf_counter() - t0
    lo, hi = int(bm.range_base.min()), int(bm.range_base.max()) + 64
    # mix: 80% inside the text, 20% outside (below, above, far away)
    addrs = rng.integers(lo, hi, n, dtype=np.uint64)
    out = rng.random(n) < 0.2
    addrs[out] = rng.integers(0, 1 << 47, int(out.sum()), dtype=np.uint64)
    idx.lookup(addrs[:1000])  # warm up
    runs = []
    for _ in range(3):  # the machine is shared: report the best and the median of three
        t0 = time.perf_counter()
        res = idx.lookup(addrs)
        runs.append(time.perf_counter() - t0)
    bulk, med = min(runs), sorted(runs)[1]
    t0 = time.perf_counter()
    idx.lookup_direction(addrs, to=True)
    tgt = time.perf_counter() - t0
    inb = float(np.mean(res.status == IN_BLOCK))
    print(f"map: {bm.num_functions} functions, {bm.num_ranges} ranges, {bm.num_blocks} blocks; "
          f"index built in {build:.2f} s")
    print(f"bulk lookup: {n:,} addresses in {bulk:.3f} s = {bulk / n * 1e9:.0f} ns/address "
          f"({inb:.0%} in a block); target 2 s: ratio {bulk / 2.0:.2f} of target "
          f"({'PASS' if bulk < 2.0 else 'FAIL'}); median {med:.3f} s; "
          f"branch-target rule {tgt:.3f} s")
    # scalar path
    probe = [int(a) for a in addrs[:20000]]
    t0 = time.perf_counter()
    for a in probe:
        idx.lookup_one(a)
    one = (time.perf_counter() - t0) / len(probe)
    t0 = time.perf_counter()
    for a in probe[:2000]:
        idx.explain(a)
    ex = (time.perf_counter() - t0) / 2000
    print(f"single address: lookup_one {one * 1e6:.2f} us, explain {ex * 1e6:.1f} us; "
          f"target 50 us: ratio {one / 50e-6:.3f} of target ({'PASS' if one < 50e-6 else 'FAIL'})")


def bench_classify(n: int) -> None:
    """VMA -> mapping -> ELF vaddr for ``n`` samples of 4 processes (the layer before the index)."""
    from types import SimpleNamespace

    from bbmap.binary.types import PF_R, PF_X, PT_LOAD, Segment
    from bbmap.mappings import ProfileMappings
    from bbmap.perf.records import MmapRecord

    segs = [Segment(PT_LOAD, PF_R, 0, 0, 0xB78, 0xB78, 0x1000),
            Segment(PT_LOAD, PF_R | PF_X, 0xB80, 0x1B80, 0x4000000, 0x4000000, 0x1000)]
    b = SimpleNamespace(path="/x/app", build_id=None, segments=segs)
    recs = []
    for pid in range(1, 5):
        base = 0x5555_0000_0000 + pid * 0x1000_0000
        recs.append(MmapRecord(pid, 0, pid, pid, base + 0x1000, 0x4001000, 0, "/x/app", 5, 2,
                               None, 2, True))
        for k, lib in enumerate(("libc.so.6", "libm.so.6", "ld.so")):
            recs.append(MmapRecord(10 * pid + k, 0, pid, pid, 0x7F00_0000_0000 + k * 0x100000,
                                   0x80000, 0, f"/lib/{lib}", 5, 2, None, 2, True))
    pm = ProfileMappings.from_perf(recs, b)
    rng = np.random.default_rng(3)
    pid = rng.integers(1, 5, n).astype(np.int32)
    ip = (0x5555_0000_0000 + pid.astype(np.uint64) * np.uint64(0x1000_0000) + np.uint64(0x1B80)
          + rng.integers(0, 0x4000000, n, dtype=np.uint64))
    other = rng.random(n) < 0.1
    ip[other] = np.uint64(0x7F00_0000_0000) + rng.integers(0, 0x300000, int(other.sum()),
                                                           dtype=np.uint64)
    seq = np.arange(100, 100 + n)
    cm = np.full(n, 2, np.uint8)
    t0 = time.perf_counter()
    counts = np.zeros(5, np.int64)
    for lo in range(0, n, 65536):  # the perf reader's batch size
        c = pm.classify(pid=pid[lo:lo + 65536], ip=ip[lo:lo + 65536], seq=seq[lo:lo + 65536],
                        cpumode=cm[lo:lo + 65536])
        counts += np.bincount(c.where, minlength=5)
    el = time.perf_counter() - t0
    print(f"classify (4 pids, mappings + seed 000 translation, 64k batches): {n:,} samples in "
          f"{el:.3f} s = {el / n * 1e9:.0f} ns/sample; where counts {counts.tolist()}")


def bench_peer(binary: str, n: int) -> None:
    tool = shutil.which("llvm-symbolizer-22") or shutil.which("llvm-symbolizer")
    if not tool:
        print("peer: llvm-symbolizer not found; skipped")
        return
    from bbmap.binary import load_binary

    b = load_binary(binary)
    text = [s for s in b.sections if s.name == ".text"][0]
    rng = np.random.default_rng(2)
    addrs = rng.integers(text.sh_addr, text.sh_addr + text.sh_size, n, dtype=np.uint64)
    inp = "".join(f"{int(a):#x}\n" for a in addrs)
    t0 = time.perf_counter()
    out = subprocess.run([tool, f"--obj={binary}", "--functions=linkage", "--no-inlines",
                          "--output-style=JSON"], input=inp, capture_output=True, text=True,
                         check=True).stdout
    peer = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx = BlockIndex(b.block_map, b.symbols)
    res = idx.lookup(addrs)
    ours = time.perf_counter() - t0
    import json

    theirs = [json.loads(line)["Symbol"][0]["FunctionName"] for line in out.splitlines()]
    from bbmap.lookup import Lookuper

    lk = Lookuper(b)
    probe = [hex(int(a)) for a in addrs[:5000]]
    t0 = time.perf_counter()
    for a in probe:
        lk.lookup(a)
    full = (time.perf_counter() - t0) / len(probe)
    print(f"single address, full `bbmap lookup` path (parse, translate, symbol, three stages): "
          f"{full * 1e6:.1f} us; target 50 us: ratio {full / 50e-6:.2f} of target")
    agree = sum(parent_name(t) == (parent_name(idx.func_names[f]) if f >= 0 else "")
                for t, f in zip(theirs, res.func.tolist()))
    print(f"peer: {n:,} .text addresses of {binary}: llvm-symbolizer (function only) "
          f"{peer:.3f} s, bbmap index build + three-stage lookup {ours:.4f} s: "
          f"ratio {peer / ours:.0f}x; same function for {agree}/{n}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--functions", type=int, default=60_000)
    ap.add_argument("--binary", default="corpus/bin/clang-22/list-lld/layout.pie")
    ap.add_argument("--peer-n", type=int, default=20_000)
    a = ap.parse_args()
    bench_bulk(a.n, a.functions)
    bench_classify(a.n)
    bench_peer(a.binary, a.peer_n)


if __name__ == "__main__":
    main()
