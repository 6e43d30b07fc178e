#!/usr/bin/env python3
"""Benchmark ``bbmap verify BINARY --profile`` (PGO map against an LBR profile).

No tool judges a PGO analysis map against a profile (llvm-profgen PR #93975 is an open
review), so the peers are the work it stands on: ``perf2bolt-22`` aggregating the same LBR
profile against the same binary, and ``bbmap annotate`` (no per-stack moments, no
statistics).  The ratios say what the judgement costs on top of aggregation.

Input: ``bench_annotate``'s many-function C program (default 20,000 functions), built with
clang-22 ``-O2 -fbasic-block-address-map -mllvm -pgo-analysis-map=func-entry-count,bb-freq,
br-prob`` (static estimates: no training needed to have a full map), and a synthetic LBR
profile of 32-entry stacks over its real blocks (``bench_annotate.write_lbr``).

    python bench/bench_verify_profile.py [--workdir /tmp/bbmap-bench-verify-profile]
                                         [--functions 20000] [--lbr-gb 0.25] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_annotate as ba  # noqa: E402 - the program and the LBR writer are shared

PGO = ["-mllvm", "-pgo-analysis-map=func-entry-count,bb-freq,br-prob"]


def build(d: str, nfunc: int) -> str:
    exe = os.path.join(d, "manyfuncs")
    if os.path.exists(exe):
        return exe
    objs = []
    for s in ba.write_program(d, nfunc):
        o = s[:-2] + ".o"
        ba.sh(["clang-22", "-O2", "-fPIE", "-fbasic-block-address-map", *PGO, "-c", s, "-o", o])
        objs.append(o)
    ba.sh(["clang-22", "-pie", "-Wl,--build-id=sha1", *objs, "-o", exe])
    return exe


def times(cmd: list[str], rounds: int) -> list[float]:
    return [ba.timed(cmd) for _ in range(rounds)]


def fmt(ts: list[float]) -> str:
    sd = statistics.stdev(ts) if len(ts) > 1 else 0.0
    return f"{statistics.median(ts):7.2f} s (sd {sd:.2f}, n={len(ts)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/bbmap-bench-verify-profile")
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--lbr-gb", type=float, default=0.25)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    exe = build(a.workdir, a.functions)
    data = ba.write_lbr(a.workdir, exe, a.lbr_gb)
    print(f"binary: {exe} ({a.functions} functions, PGO map); profile {data} "
          f"({os.path.getsize(data) / (1 << 20):.0f} MiB)")
    out = os.path.join(a.workdir, "verify.json")
    verify = ba.bbmap_cmd("verify", exe, "--profile", data, "--json", "-o", out)
    annot = ba.bbmap_cmd("annotate", data, exe, "--format", "json", "-o",
                         os.path.join(a.workdir, "annotate.json"))
    # exit 1 (mismatches) is the expected result of verify on static estimates
    subprocess.run(verify, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    doc = json.load(open(out))  # noqa: SIM115 - read once
    s = doc["summary"]["branches"]
    print(f"judged: {s['sampled']} sampled branches ({s['matched']} matched, "
          f"{s['mismatched']} mismatched, {s['unknown']} unknown)")
    tv, ta = [], []
    for _ in range(a.rounds):  # alternate so that machine load hits both alike
        t0 = ba.time.perf_counter()
        subprocess.run(verify, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tv.append(ba.time.perf_counter() - t0)
        ta.append(ba.timed(annot))
    print(f"bbmap verify --profile : {fmt(tv)}")
    print(f"bbmap annotate         : {fmt(ta)}  (verify / annotate "
          f"{statistics.median(tv) / statistics.median(ta):.2f})")
    if shutil.which("perf2bolt-22"):
        fd = os.path.join(a.workdir, "perf.fdata")
        tp = times(["perf2bolt-22", "-p", data, "-o", fd, exe], a.rounds)
        print(f"perf2bolt-22           : {fmt(tp)}  (verify / perf2bolt "
              f"{statistics.median(tv) / statistics.median(tp):.2f})")
    else:
        print("perf2bolt-22 not installed: peer skipped")


if __name__ == "__main__":
    main()
