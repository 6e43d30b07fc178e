#!/usr/bin/env python3
"""Benchmark ``bbmap fleet`` against its peer, one-process ``bbmap annotate``, on 10,000
perf.data files, and ``bbmap merge`` of 10,000 aggregates (issue 13's must-show).

Inputs (made once under ``--workdir``):

* a real ``perf record -e cpu-clock -F 4000`` profile of the corpus program
  ``corpus/bin/clang-22/addrmap/layout.pie`` (``--rounds`` rounds, ~100,000 samples), split
  with ``corpus/tools/split_profile.py`` (bbmap's ``PerfWriter``) into pieces of varied
  size (log-uniform, 1 to ~8x the mean);
* the corpus's real-trace LBR profile of the same binary (``lbr/c22-addrmap-pie-lbr``, 779
  32-entry stacks) split into ``--lbr`` pieces;
* ``--corrupt`` damaged copies of pieces, five kinds in turn: truncated inside the data
  section, a zeroed magic, a garbage header size, a garbage record header in the middle
  of the data, an empty file.

Then, all with ``nice``: ``bbmap annotate --keep-going @list BINARY --format json`` (one
process), ``bbmap fleet @list BINARY --local-workers N -o ... --json ...`` for each N of
``--workers``; the JSON files are compared byte for byte.  The per-profile aggregates are
written in one process (library), then ``bbmap merge`` of all of them is timed, in three
orders/groupings, and compared with the fleet's aggregate.

    nice python bench/bench_fleet.py [--workdir /work/cache/i13-fleet] [--files 10000]
                                     [--lbr 300] [--corrupt 50] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "corpus", "tools"))

import split_profile  # noqa: E402

CORPUS = os.path.join(REPO, "corpus")
BINARY = os.path.join(CORPUS, "bin", "clang-22", "addrmap", "layout.pie")
LBR = os.path.join(CORPUS, "lbr", "c22-addrmap-pie-lbr", "perf.data")
BBMAP = [sys.executable, "-m", "bbmap"]
NICE = ["nice", "-n", "10"]
CORRUPT_KINDS = ("truncated", "magic", "header_size", "record", "empty")


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:  # noqa: ANN003
    return subprocess.run(cmd, check=False, capture_output=True, text=True, **kw)


def record(workdir: str, rounds: int) -> str:
    out = os.path.join(workdir, "recorded.perf.data")
    if not os.path.exists(out):
        r = sh([*NICE, "perf", "record", "-e", "cpu-clock", "-F", "4000", "-N", "-o",
                out + ".tmp", "--", BINARY, str(rounds)])
        if r.returncode:
            raise SystemExit(f"perf record failed: {r.stderr[-500:]}")
        os.replace(out + ".tmp", out)
    return out


def corrupt(src: str, dst: str, kind: str) -> None:
    import struct

    with open(src, "rb") as fh:
        raw = bytearray(fh.read())
    off, size = struct.unpack_from("<QQ", raw, 40)  # perf header: the data section
    if kind == "truncated":
        raw = raw[: off + size * 3 // 4]
    elif kind == "magic":
        raw[0:8] = b"\0" * 8
    elif kind == "header_size":
        raw[8:16] = struct.pack("<Q", 0xDEADBEEF)
    elif kind == "record":  # a record header that claims a size past the data
        mid = off + size // 2
        # walk the records to one that starts near the middle
        p = off
        while p < off + size:
            rsize = struct.unpack_from("<H", raw, p + 6)[0]
            if p >= mid or rsize == 0:
                break
            p += rsize
        struct.pack_into("<IHH", raw, p, 9, 0, 0xFFF8)
    elif kind == "empty":
        raw = bytearray()
    with open(dst, "wb") as fh:
        fh.write(raw)


def make_inputs(workdir: str, files: int, lbr: int, bad: int, rounds: int) -> list[str]:
    d = os.path.join(workdir, f"profiles-{files}")
    lst = os.path.join(workdir, f"profiles-{files}.txt")
    if os.path.exists(lst):
        with open(lst) as fh:
            return fh.read().split()
    shutil.rmtree(d, ignore_errors=True)
    rec = record(workdir, rounds)
    t = time.perf_counter()
    plain = split_profile.split(rec, d, files - lbr - bad, prefix="plain")
    lbrs = split_profile.split(LBR, d, lbr, prefix="lbr")
    rnd = random.Random(13)
    srcs = rnd.sample(plain, bad)
    bads = []
    for i, s in enumerate(srcs):
        kind = CORRUPT_KINDS[i % len(CORRUPT_KINDS)]
        p = os.path.join(d, f"corrupt-{kind}-{i:02d}.data")
        corrupt(s, p, kind)
        bads.append(p)
    paths = sorted(plain + lbrs + bads)
    with open(lst + ".tmp", "w") as fh:
        fh.write("\n".join(paths) + "\n")
    os.replace(lst + ".tmp", lst)
    print(f"inputs: {len(paths)} files ({len(lbrs)} LBR, {len(bads)} corrupt) written in "
          f"{time.perf_counter() - t:.0f} s under {d}")
    return paths


CPU = {}  # command name -> CPU seconds (user + system) of it and every process it started


def timed(cmd: list[str], name: str = "") -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds; the CPU seconds of the command and its descendants (Dask workers are
    children of the fleet process, waited for when the cluster closes) go to ``CPU``."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = sh([*NICE, *cmd])
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[name or cmd[3]] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, r


def same(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def write_aggregates(paths: list[str], d: str) -> tuple[list[str], float]:
    """One aggregate file per profile, written by the library in this process."""
    from bbmap.aggregate import store
    from bbmap.run import Session

    os.makedirs(d, exist_ok=True)
    s = Session(BINARY, keep_going=True, cluster_stats=True, hash_profiles=True,
                addresses=True)
    out = []
    t = time.perf_counter()
    for i, p in enumerate(paths):
        one = s.fresh()
        one.add(p)
        f = os.path.join(d, f"{i:05d}.agg")
        store.write_aggregate(one.aggregate(), f)
        out.append(f)
    return out, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/work/cache/i13-fleet")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--lbr", type=int, default=300)
    ap.add_argument("--corrupt", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=4_000_000, help="layout.pie rounds recorded")
    ap.add_argument("--workers", default="1,2")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    w = a.workdir
    paths = make_inputs(w, a.files, a.lbr, a.corrupt, a.rounds)
    lst = os.path.join(w, f"profiles-{a.files}.txt")
    n = len(paths)
    total_bytes = sum(os.path.getsize(p) for p in paths)
    res: dict = {"files": n, "bytes": total_bytes, "cpus": os.cpu_count(),
                 "load_before": os.getloadavg()[0]}
    print(f"{n} profiles, {total_bytes / 2**20:.1f} MiB; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs (shared machine: wall times are noisy)")

    one = os.path.join(w, "one.json")
    t, r = timed([*BBMAP, "annotate", "--keep-going", f"@{lst}", BINARY, "--format", "json",
                  "-o", one], "annotate")
    cpu = CPU["annotate"]
    res["annotate"] = {"seconds": t, "exit": r.returncode, "profiles_per_s": n / t,
                       "cpu_seconds": cpu, "profiles_per_cpu_s": n / cpu}
    print(f"annotate (one process):  {t:7.1f} s  {n / t:7.1f} profiles/s  exit {r.returncode}"
          f"  CPU {cpu:.1f} s ({n / cpu:.0f} profiles per CPU-second)")

    fleet_aggs = {}
    for k in [int(x) for x in a.workers.split(",")]:
        agg, js = os.path.join(w, f"fleet{k}.agg"), os.path.join(w, f"fleet{k}.json")
        t, r = timed([*BBMAP, "fleet", f"@{lst}", BINARY, "--local-workers", str(k), "-o",
                      agg, "--json", js, "--no-progress"], f"fleet{k}")
        cpu = CPU[f"fleet{k}"]
        m = re.search(r"on (\d+) workers: ([\d.]+) s", r.stderr)
        inner = float(m.group(2)) if m else float("nan")
        named = re.search(r"incomplete: (\d+) of (\d+)", r.stderr)
        eq = same(js, one)
        res[f"fleet_{k}"] = {"seconds": t, "run_seconds": inner, "exit": r.returncode,
                             "profiles_per_s": n / t, "profiles_per_s_run": n / inner,
                             "json_equal": eq, "incomplete": named.group(0) if named else None,
                             "cpu_seconds": cpu, "profiles_per_cpu_s": n / cpu}
        fleet_aggs[k] = agg
        print(f"fleet --local-workers {k}: {t:7.1f} s  {n / t:7.1f} profiles/s "
              f"({inner:.1f} s, {n / inner:.1f}/s after cluster start)  exit {r.returncode}  "
              f"JSON == annotate: {eq}  ({named.group(0) if named else '?'})  CPU {cpu:.1f} s "
              f"({n / cpu:.0f} profiles per CPU-second, all processes)")
    ks = sorted(fleet_aggs)
    res["fleet_aggs_equal"] = all(same(fleet_aggs[ks[0]], fleet_aggs[k]) for k in ks)

    # the corrupt ones, from the fleet's provenance
    from bbmap.aggregate import store

    agg = store.read_aggregate(fleet_aggs[ks[-1]])
    bad = [p for p in agg.profiles if p.error or any(x.severity == "error" for x in p.warnings)]
    want = sorted(p for p in paths if "/corrupt-" in p)
    res["corrupt_named"] = sorted(p.info.path for p in bad) == want
    res["corrupt_examples"] = {p.info.path.rsplit("/", 1)[1]: (p.error or next(
        x.message for x in p.warnings if x.severity == "error"))[:160] for p in bad[::10]}
    res["counted"] = {"samples": agg.totals["samples"], "branches": agg.totals["branches"],
                      "profiles": len(agg.profiles)}
    print(f"corrupt profiles named with their error: {len(bad)} (== the {len(want)} made: "
          f"{res['corrupt_named']}); counted {agg.totals['samples']} samples, "
          f"{agg.totals['branches']} LBR records of {len(agg.profiles)} profiles")

    # 10,000 aggregates: written per profile, merged by `bbmap merge`
    agg_dir = os.path.join(w, f"aggs-{a.files}")
    alist = os.path.join(w, f"aggs-{a.files}.txt")
    if not os.path.exists(alist):
        files, t = write_aggregates(paths, agg_dir)
        with open(alist, "w") as fh:
            fh.write("\n".join(files) + "\n")
        res["aggregate_write_per_s"] = n / t
        print(f"per-profile aggregates written (library, one process): {t:.1f} s "
              f"({n / t:.0f}/s)")
    with open(alist) as fh:
        files = fh.read().split()
    res["aggregate_bytes_mean"] = sum(os.path.getsize(f) for f in files) / len(files)
    merged = {}
    rev = os.path.join(w, "aggs-reversed.txt")
    with open(rev, "w") as fh:
        fh.write("\n".join(files[::-1]) + "\n")
    t, r = timed([*BBMAP, "merge", f"@{alist}", "-o", os.path.join(w, "merged-a.agg")],
                 "merge")
    res["merge"] = {"seconds": t, "exit": r.returncode, "aggregates": len(files),
                    "per_s": len(files) / t, "cpu_seconds": CPU["merge"]}
    merged["a"] = os.path.join(w, "merged-a.agg")
    print(f"bbmap merge of {len(files)} aggregates: {t:.1f} s ({len(files) / t:.0f}/s)  "
          f"exit {r.returncode}  CPU {CPU['merge']:.1f} s")
    t2, _ = timed([*BBMAP, "merge", f"@{rev}", "-o", os.path.join(w, "merged-b.agg")])
    merged["b"] = os.path.join(w, "merged-b.agg")
    h = len(files) // 3
    groups = [files[2 * h:], files[:h], files[h:2 * h]]  # another grouping and order
    parts = []
    for i, g in enumerate(groups):
        gl = os.path.join(w, f"aggs-group{i}.txt")
        with open(gl, "w") as fh:
            fh.write("\n".join(g) + "\n")
        part = os.path.join(w, f"merged-group{i}.agg")
        sh([*NICE, *BBMAP, "merge", f"@{gl}", "-o", part])
        parts.append(part)
    sh([*NICE, *BBMAP, "merge", parts[2], parts[0], parts[1], "-o",
        os.path.join(w, "merged-c.agg")])
    merged["c"] = os.path.join(w, "merged-c.agg")
    res["merge_orders_identical"] = same(merged["a"], merged["b"]) and same(merged["a"],
                                                                             merged["c"])
    res["merge_equals_fleet"] = same(merged["a"], fleet_aggs[ks[-1]])
    res["merged_bytes"] = os.path.getsize(merged["a"])
    print(f"merge: 3 orders/groupings byte-identical: {res['merge_orders_identical']}; "
          f"== fleet's aggregate: {res['merge_equals_fleet']} ({res['merged_bytes']} bytes; "
          f"mean per-profile aggregate {res['aggregate_bytes_mean']:.0f} bytes)")
    base = res["annotate"]
    for k in ks:
        f = res[f"fleet_{k}"]
        print(f"ratio fleet {k} worker(s) / one-process annotate: "
              f"{f['profiles_per_s'] / base['profiles_per_s']:.2f}x wall, "
              f"{f['profiles_per_cpu_s'] / base['profiles_per_cpu_s']:.2f}x per CPU-second")
    res["load_after"] = os.getloadavg()[0]
    with open(os.path.join(w, "results.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    ok = (res["corrupt_named"] and res["fleet_aggs_equal"] and res["merge_orders_identical"]
          and res["merge_equals_fleet"] and all(res[f"fleet_{k}"]["json_equal"] for k in ks))
    print("all checks hold" if ok else "A CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
