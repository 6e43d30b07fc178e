#!/usr/bin/env python3
"""Benchmark ``bbmap annotate`` against ``perf report --stdio`` and check its memory bound.

1. IP samples: generate C programs with many functions (default 20,000) that spread their
   time over all of them -- ``manyfuncs`` (small loops and branches, ``-O1``) and
   ``switchy`` (bench/switch_program.py: most functions built around switches of 4-64
   cases, ``-O2``: tens of thousands of jump tables) --, build them with clang-22
   ``-fbasic-block-address-map``, record each with ``perf record -e cpu-clock -c 10000``
   until the profile has >= 500,000 (and 2,000,000) samples, then time ``bbmap annotate``
   (text, JSON and CSV with inference off; JSON and CSV with inference on, the disassembly
   cache filled, empty (first run) and off) and ``perf report --stdio`` on the same file,
   in turn, and print each ratio with the spread and the load average; the JSON/CSV bytes
   are checked against the previous renderers, and the cache entry must survive the cached
   runs unwritten.
2. LBR: write a synthetic LBR profile of >= 1 GB (32-entry stacks over the same binary's
   blocks) with ``bbmap.perf.writer.PerfWriter`` and run ``bbmap annotate`` on it in a
   subprocess, reporting wall time and peak RSS (limit: 1 GB).

    python bench/bench_annotate.py [--workdir /tmp/bbmap-bench-annotate] [--functions 20000]
                                   [--binaries manyfuncs,switchy]
                                   [--samples 500000,2000000] [--rounds 5] [--solver auto]
                                   [--lbr-gb 1.0] [--skip-ip] [--skip-lbr]

Inputs are cached in the work directory (delete it to regenerate).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

BASE = 0x5555_5555_4000  # where the synthetic LBR profile maps the binary (page aligned)


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


# ----------------------------------------------------------------------------- program
def write_program(d: str, nfunc: int, files: int = 8) -> list[str]:
    """``nfunc`` small functions with loops and branches, called round-robin from a table."""
    srcs = []
    per = (nfunc + files - 1) // files
    for k in range(files):
        lines = []
        for i in range(k * per, min(nfunc, (k + 1) * per)):
            lines.append(
                f"unsigned f{i}(unsigned x) {{ unsigned s = x ^ {i}u;"
                f" for (unsigned j = 0; j < {24 + i % 17}u; j++) {{"
                f" if (s & 1) s = s * 3u + 1u; else s >>= 1; if (s == {i}u) return j; s += j; }}"
                f" return s; }}")
        p = os.path.join(d, f"part{k}.c")
        _write_if_changed(p, "\n".join(lines) + "\n")
        srcs.append(p)
    decl = "\n".join(f"unsigned f{i}(unsigned);" for i in range(nfunc))
    tab = ",".join(f"f{i}" for i in range(nfunc))
    main = (f"#include <stdlib.h>\n#include <time.h>\n{decl}\n"
            f"static unsigned (*const tab[{nfunc}])(unsigned) = {{{tab}}};\n"
            "int main(int argc, char **argv) { double secs = argc > 1 ? atof(argv[1]) : 6;"
            " unsigned acc = 1; while ((double)clock() < secs * CLOCKS_PER_SEC)"
            f" for (unsigned i = 0; i < {nfunc}u; i++) acc += tab[i](acc + i);"
            " volatile unsigned sink = acc; (void)sink; return 0; }\n")
    p = os.path.join(d, "main.c")
    _write_if_changed(p, main)
    return srcs + [p]


def _write_if_changed(path: str, text: str) -> None:
    if os.path.exists(path):
        with open(path) as fh:
            if fh.read() == text:
                return
    with open(path, "w") as fh:
        fh.write(text)


def build_program(d: str, nfunc: int) -> str:
    exe = os.path.join(d, "manyfuncs")
    if os.path.exists(exe):
        return exe
    srcs = write_program(d, nfunc)
    objs = []
    for s in srcs:
        o = s[:-2] + ".o"
        if os.path.exists(o) and os.path.getmtime(o) >= os.path.getmtime(s):
            objs.append(o)
            continue
        sh(["clang-22", "-O1", "-fPIE", "-fbasic-block-address-map", "-c", s, "-o", o])
        objs.append(o)
    sh(["clang-22", "-pie", "-Wl,--build-id=sha1", *objs, "-o", exe])
    return exe


def count_samples(path: str) -> int:
    from bbmap.perf import PerfData

    return sum(len(b) for b in PerfData(path).samples(branches=False))


def build_binary(d: str, name: str, nfunc: int) -> str:
    """The bench binary ``name``: ``manyfuncs`` (this file's program) or ``switchy``
    (bench/switch_program.py, clang-22 -O2 PIE)."""
    if name == "manyfuncs":
        return build_program(d, nfunc)
    if name == "switchy":
        import switch_program

        return switch_program.build(d, nfunc)
    raise SystemExit(f"no bench binary {name!r} (manyfuncs, switchy)")


def record_ip(d: str, exe: str, want: int) -> str:
    name = os.path.basename(exe)
    data = os.path.join(d, f"ip{want}.data" if name == "manyfuncs" else f"{name}-ip{want}.data")
    if os.path.exists(data) and count_samples(data) >= want:
        return data
    secs = want / 80_000  # cpu-clock at -c 10000 ns gives <= 100k samples per CPU second
    for _ in range(4):
        sh(["perf", "record", "-q", "-e", "cpu-clock", "-c", "10000", "-o", data, "--", exe,
            str(secs)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n = count_samples(data)
        if n >= want:
            return data
        secs *= 1.3 * want / max(n, 1)
    raise SystemExit(f"could not record {want} samples (got {n})")


# ----------------------------------------------------------------------------- timing
def timed(cmd: list[str]) -> float:
    return timed_cpu(cmd)[0]


def timed_cpu(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``cmd``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    sh(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
       env=None if env is None else {**os.environ, **env})
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def peak_rss_mb(cmd: list[str]) -> tuple[float, float]:
    """Wall time and peak RSS (MB) of ``cmd`` measured in a fresh helper process."""
    helper = ("import resource, subprocess, sys, time; t = time.perf_counter();"
              " r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
              " w = time.perf_counter() - t;"
              " print(w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)")
    out = sh([sys.executable, "-c", helper, *cmd], capture_output=True, text=True).stdout.split()
    if out[2] != "0":
        raise SystemExit(f"{cmd} failed with exit {out[2]}")
    return float(out[0]), int(out[1]) / 1024.0


def bbmap_cmd(*args: str) -> list[str]:
    """The console script beside this interpreter (a pyenv shim on PATH adds ~0.2 s of
    bash and pyenv startup that is no part of bbmap)."""
    here = os.path.join(os.path.dirname(sys.executable), "bbmap")
    exe = here if os.path.exists(here) else shutil.which("bbmap")
    if exe is None:
        raise SystemExit("bbmap is not installed (pip install -e .)")
    return [exe, *args]


def spread(ts: list[float]) -> str:
    return (f"median {statistics.median(ts):6.2f} s  min {min(ts):5.2f}  max {max(ts):5.2f}"
            f"  (n={len(ts)})")


# (label, extra args, disassembly cache): the formats pipelines read, the text report,
# inference off/on; with inference, a first run (an empty cache directory every run: it
# disassembles and writes the cache) and a repeated run (the cache filled beforehand)
IP_CASES = (("text", ["--inference", "off"], ""), ("json", ["--inference", "off"], ""),
            ("csv", ["--inference", "off"], ""), ("json", [], "first run"),
            ("csv", [], "first run"), ("json", [], "cached"), ("csv", [], "cached"),
            ("json", [], "no cache"))


def bench_ip(d: str, exe: str, want: int, rounds: int, solver: str = "auto") -> None:
    """``bbmap annotate`` in each format beside ``perf report --stdio`` on the same
    profile, every command once per round in turn (so they share the machine's load);
    the ratio is of the medians.  The JSON/CSV files are also checked byte for byte
    against the previous renderers (tests/oracles/render_oracle.py)."""
    data = record_ip(d, exe, want)
    from bbmap.binary import load_binary

    nfun = len(load_binary(exe).symbols)
    n = count_samples(data)
    cmds = {}
    cached_dir = os.path.join(d, "disasm-cache")
    shutil.rmtree(cached_dir, ignore_errors=True)
    name = os.path.basename(exe)
    for fmt, extra, cache in IP_CASES:
        label = f"annotate --format {fmt}" + (" --inference off" if extra else
                                              f" (inference auto, {solver}, {cache})")
        tag = "-noinf" if extra else {"first run": "-first", "no cache": "-nocache"}.get(
            cache, "")
        out = os.path.join(d, f"{name}-ip-{fmt}{tag}.out")
        cmds[label] = (bbmap_cmd("annotate", data, exe, "--format", fmt, *extra,
                                 "--inference-solver", solver, "-o", out), out, cache)
    perf = ["perf", "report", "--stdio", "-i", data]
    times: dict[str, list[float]] = {k: [] for k in [*cmds, "perf"]}
    cpu: dict[str, list[float]] = {k: [] for k in [*cmds, "perf"]}
    print(f"IP profile: {n} samples, binary {name} with {nfun} function symbols ({data})")
    timed_cpu(next(c for c, _o, k in cmds.values() if k == "cached"),
              {"BBMAP_CACHE_DIR": cached_dir})  # fills the cache of the "cached" rows
    entry = _entry_state(cached_dir)
    print("  load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for _ in range(rounds):
        for k, cmd, cache in [*((k, c, x) for k, (c, _o, x) in cmds.items()),
                              ("perf", perf, "")]:
            first = tempfile.mkdtemp(prefix="bbmap-bench-cache-") if cache == "first run" \
                else None
            env = {"BBMAP_CACHE_DIR": first or cached_dir}
            if cache == "no cache":
                env["BBMAP_NO_CACHE"] = "1"
            w, c = timed_cpu(cmd, env)
            if first:
                shutil.rmtree(first, ignore_errors=True)
            times[k].append(w)
            cpu[k].append(c)
    print("  load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    p = statistics.median(times["perf"])
    pc = statistics.median(cpu["perf"])
    print(f"  {'perf report --stdio':58s}: {spread(times['perf'])}  cpu {pc:5.2f} s")
    for k in cmds:
        b = statistics.median(times[k])
        bc = statistics.median(cpu[k])
        print(f"  bbmap {k:52s}: {spread(times[k])}  cpu {bc:5.2f} s   ratio {b / p:5.2f}"
              f"  (min/min {min(times[k]) / min(times['perf']):.2f}, cpu {bc / pc:.2f})")
    row = {x: lbl for lbl, (_c, _o, x) in cmds.items() if "--format json" in lbl and x}
    cached, nocache, first = (statistics.median(times[row[x]])
                              for x in ("cached", "no cache", "first run"))
    print(f"  json with inference: cached {cached:.2f} s, no cache {nocache:.2f} s, first run "
          f"{first:.2f} s: cached/no cache {cached / nocache:.2f}, first/no cache "
          f"{first / nocache:.2f}")
    print(f"  the cache entry was left alone by the cached runs (same inode, size, mtime): "
          f"{'yes' if _entry_state(cached_dir) == entry else 'NO'}")
    check_bytes(data, exe, {k: v[1] for k, v in cmds.items()
                            if v[2] not in ("first run", "no cache")}, solver)
    for fmt in ("json", "csv"):
        with open(os.path.join(d, f"{name}-ip-{fmt}-first.out"), "rb") as a, \
                open(os.path.join(d, f"{name}-ip-{fmt}.out"), "rb") as b:
            print(f"  {fmt}: first-run and cached outputs are the same bytes: "
                  f"{'yes' if a.read() == b.read() else 'NO'}")
    with open(os.path.join(d, f"{name}-ip-json-nocache.out"), "rb") as a, \
            open(os.path.join(d, f"{name}-ip-json.out"), "rb") as b:
        print(f"  json: no-cache and cached outputs are the same bytes: "
              f"{'yes' if a.read() == b.read() else 'NO'}")


def _entry_state(directory: str) -> list[tuple[str, int, int, int]]:
    """(name, inode, size, mtime) of every cache entry in ``directory``."""
    out = []
    for e in sorted(os.scandir(directory), key=lambda e: e.name) if os.path.isdir(
            directory) else []:
        st = e.stat()
        out.append((e.name, st.st_ino, st.st_size, st.st_mtime_ns))
    return out


def check_bytes(data: str, exe: str, outs: dict[str, str], solver: str) -> None:
    """The CLI's JSON/CSV files equal the previous renderers' output on the same result."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # tests/oracles/
    from oracles import render_oracle

    from bbmap.run import annotate

    for inference in ("off", "auto"):
        r = annotate([data], exe, inference=inference, solver=solver)
        for fmt in ("json", "csv"):
            key = next(k for k in outs if f"--format {fmt}" in k
                       and ("--inference off" in k) == (inference == "off"))
            with open(outs[key], encoding="utf-8") as fh:
                same = fh.read() == getattr(render_oracle, f"render_{fmt}")(r)
            print(f"  {fmt} (inference {inference}) bytes equal the previous renderer: "
                  f"{'yes' if same else 'NO'}")


# ----------------------------------------------------------------------------- LBR
def write_lbr(d: str, exe: str, gbytes: float) -> str:
    """A synthetic LBR profile: 32-entry stacks that walk real blocks of ``exe``."""
    from bbmap.binary import load_binary
    from bbmap.formats import perfdata as fmt
    from bbmap.formats.bbaddrmap import MD_CAN_FALL_THROUGH
    from bbmap.perf.writer import PerfWriter

    path = os.path.join(d, "lbr.data")
    if os.path.exists(path) and os.path.getsize(path) >= gbytes * (1 << 30):
        return path
    b = load_binary(exe)
    m = b.block_map
    seg = next(s for s in b.segments if s.is_exec)
    start = BASE + (seg.p_vaddr & ~0xFFF)
    rng = np.random.default_rng(1)
    starts = (m.range_base[m.block_range(np.arange(m.num_blocks))] + m.block_offset)
    ends = starts + m.block_size
    fptr = m.range_block_ptr[m.func_range_ptr]
    pool = []
    for _ in range(4096):  # distinct stacks, replayed
        f = int(rng.integers(m.num_functions))
        lo, hi = int(fptr[f]), int(fptr[f + 1])
        ent = []
        cur = lo
        for _ in range(32):
            # run straight from cur while blocks fall through, then take a branch
            nxt = cur
            while nxt + 1 < hi and m.block_md[nxt] & MD_CAN_FALL_THROUGH and rng.random() < .6:
                nxt += 1
            tgt = int(rng.integers(lo, hi))
            src = max(int(ends[nxt]) - 2, int(starts[nxt]))
            ent.append((BASE + src, BASE + int(starts[tgt]), 0))
            cur = tgt
        pool.append(np.array(ent[::-1], np.uint64))  # newest first
    w = PerfWriter(path, event_name="cycles:u", sample_period=10007,
                   branch_sample_type=fmt.BR_ANY | 1)
    w.add_comm(100, 100, "manyfuncs", exec_=True)
    w.add_mmap2(100, 100, start, seg.p_memsz + (seg.p_vaddr & 0xFFF), seg.p_offset & ~0xFFF,
                os.path.abspath(exe), build_id=b.build_id)
    recs = [w.sample_bytes(int(s[0][1]), 100, 100, 0, 10007, s) for s in pool]
    size = sum(len(r) for r in recs)
    rounds = int(gbytes * (1 << 30) / size) + 1
    for _ in range(rounds):
        for s in pool:
            w.add_sample(int(s[0][1]), 100, 100, 0, 10007, s)
    w.close()
    return path


def bench_lbr(d: str, exe: str, gbytes: float) -> None:
    data = write_lbr(d, exe, gbytes)
    size = os.path.getsize(data) / (1 << 30)
    wall, rss = peak_rss_mb(bbmap_cmd("annotate", data, exe, "--format", "json",
                                      "-o", os.path.join(d, "lbr.json")))
    print(f"LBR profile: {size:.2f} GiB synthetic ({data})")
    print(f"  bbmap annotate wall  : {wall:7.1f} s")
    print(f"  peak RSS             : {rss:7.0f} MB  (limit 1024 MB; ratio {rss / 1024:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/tmp/bbmap-bench-annotate")
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--binaries", default="manyfuncs,switchy",
                    help="bench binaries, comma-separated: manyfuncs (loops and branches), "
                         "switchy (jump-table-heavy, bench/switch_program.py)")
    ap.add_argument("--samples", default="500000,2000000",
                    help="IP profiles to record and time, by sample count (comma-separated; "
                         "the budgets: <= 1.0x perf report at 500k, <= 0.5x at 2M)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--solver", default="auto",
                    help="inference solver for the inference-on rows (auto: OR-Tools if "
                         "installed, else the built-in one)")
    ap.add_argument("--lbr-gb", type=float, default=1.0)
    ap.add_argument("--skip-ip", action="store_true")
    ap.add_argument("--skip-lbr", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    exes = [build_binary(a.workdir, x.strip(), a.functions) for x in a.binaries.split(",")]
    import compileall

    import bbmap

    compileall.compile_dir(os.path.dirname(bbmap.__file__), quiet=1)  # as pip install does
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if not a.skip_ip:
        for exe in exes:
            for want in (int(x) for x in a.samples.split(",")):
                bench_ip(a.workdir, exe, want, a.rounds, a.solver)
    if not a.skip_lbr:
        bench_lbr(a.workdir, build_program(a.workdir, a.functions), a.lbr_gb)
    resource.getrusage(resource.RUSAGE_SELF)


if __name__ == "__main__":
    main()
