#!/usr/bin/env python3
"""Time ``bbmap dump --json`` against ``llvm-readobj-22 --bb-addr-map --elf-output-style=JSON``.

Inputs, each timed side by side in one run (each tool writes its JSON to a file, the
runs alternate, best of ``--repeat``):

* ``big``: a clang-sized map of >= 1.5 million blocks made with bbmap's writer (v5,
  callsite offsets on most functions, like clang-22 output), wrapped in an ELF file
  with a symbol per function -- llvm-readobj decodes it too (checked: same function
  count).
* ``real``: a real clang-22 ``-fbasic-block-address-map`` shared object compiled from
  generated C (switches, loops, calls), by default ~102,000 functions / ~1.4 million
  blocks: big enough that the comparison measures decoding and JSON writing rather
  than process start-up.
* ``small``: the same kind of binary with ~20,400 functions, where ~0.1 s of Python and
  numpy start-up is a large part of bbmap's time.

Budgets (issue 17): ratio <= 1.0 on ``small``, <= 0.6 on ``real``; ``big`` is information.

bbmap runs through the console script's entry point (``bbmap.__main__.run``, what the
``bbmap`` command calls), its bytecode compiled first, as ``pip install`` does (this
sandbox sets PYTHONDONTWRITEBYTECODE=1, which would otherwise recompile bbmap on every
run).
With an editable install (``pip install -e``, this repository's venvs) bbmap is also run
the way a regular install starts it (no editable finder; printed as information, the
budgets stay on the console-script figures).

Inputs are cached under ``$BBMAP_BENCH_DIR`` (default /tmp/bbmap-bench).  Prints wall
seconds (median, min, max) and CPU seconds for each tool, the ratios of the medians,
and the machine's load average before and after.
"""


from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bbmap.binary.writer import encode_map_fast, write_elf
from bbmap.model import BlockRecord, FunctionRecord, RangeRecord

READOBJ = "llvm-readobj-22"
CLANG = "clang-22"


def make_big_map(path: Path, blocks: int = 1_600_000, seed: int = 1) -> None:
    """A v5 map shaped like clang's: mostly small functions, callsites where calls are."""
    rnd = random.Random(seed)
    recs, names, addr, made = [], [], 0x400000, 0
    while made < blocks:
        n = min(blocks - made, max(1, int(rnd.expovariate(1 / 15))))
        calls = rnd.random() < 0.7
        bl, off = [], 0
        ids = list(range(n))
        rnd.shuffle(ids[1:]) if n > 2 else None
        for i in range(n):
            off += rnd.choice((0, 0, 0, 0, 1, 3))
            cs = tuple(sorted(rnd.sample(range(1, 40), rnd.randint(1, 2)))) \
                if calls and rnd.random() < 0.3 else ()
            size = max(cs[-1] if cs else 0, rnd.randint(1, 40))
            md = rnd.choice((0, 8, 8, 8, 1, 3, 0x10))
            bl.append(BlockRecord(id=ids[i], offset=off, size=size, md=md, callsites=cs))
            off += size
        feature = 0x20 if any(b.callsites for b in bl) else 0
        recs.append(FunctionRecord(address=addr, version=5, feature=feature,
                                   ranges=[RangeRecord(base=addr, blocks=bl)]))
        names.append((f"fn_{len(recs)}", addr, off))
        addr += (off + 15) & ~15
        made += n
    data = encode_map_fast(recs)
    path.write_bytes(write_elf(data, text_addr=0x400000, text_size=addr - 0x400000,
                               functions=names))


C_TEMPLATE = """
int g_{i}(int x, int y) {{
  int s = 0;
  switch ((x + {i}) & 7) {{
  case 0: s = x * {a}; break;
  case 1: s = y - {b}; break;
  case 2: s = x ^ y; break;
  case 3: s = {a} + y * x; break;
  case 5: s = ext_{j}(x, y); break;
  default: s = x + y;
  }}
  for (int k = 0; k < (y & 15); k++) {{
    if ((s + k) % {c} == 0) s += ext_{j}(k, s); else s -= k;
  }}
  return s > {b} ? s : -s;
}}
"""


def make_real_binary(out: Path, functions: int = 20_400, units: int = 6) -> None:
    src = out.parent / f"gen{functions}"
    src.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(2)
    per = functions // units
    objs = []
    for u in range(units):
        parts = [f"int ext_{u}(int, int);\n"]
        for i in range(u * per, (u + 1) * per):
            parts.append(C_TEMPLATE.format(i=i, j=u, a=rnd.randint(2, 99), b=rnd.randint(2, 999),
                                           c=rnd.randint(2, 9)))
        cfile = src / f"unit{u}.c"
        cfile.write_text("".join(parts))
        obj = src / f"unit{u}.o"
        subprocess.run([CLANG, "-O2", "-fPIC", "-fbasic-block-address-map", "-c", str(cfile),
                        "-o", str(obj)], check=True)
        objs.append(str(obj))
    ext = src / "ext.c"
    ext.write_text("".join(f"int ext_{u}(int a, int b) {{ return a * {u + 3} - b; }}\n"
                           for u in range(units)))
    subprocess.run([CLANG, "-O2", "-shared", "-fPIC", "-fbasic-block-address-map",
                    str(ext), *objs, "-o", str(out)], check=True)


def timed(cmd: list[str], out: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run writing to ``out``.

    The previous run's output is removed before the clock starts (freeing a few hundred
    MB of page cache is not the tool's work)."""
    out.unlink(missing_ok=True)
    with open(out, "wb") as fh:
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[:300]}")
    return dt, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)


def count_functions(bbmap_json: Path, readobj_json: Path) -> tuple[int, int, int]:
    d = json.loads(bbmap_json.read_text())
    r = json.loads(readobj_json.read_text())
    nb = sum(len(rg["blocks"]) for f in d["functions"] for rg in f["ranges"])
    return len(d["functions"]), sum(len(x.get("BBAddrMap", [])) for x in r), nb


def compile_bytecode() -> None:
    """Byte-compile the bbmap package (what a regular install does)."""
    import compileall

    import bbmap

    compileall.compile_dir(os.path.dirname(bbmap.__file__), quiet=1)


def regular_install_cmd() -> list[str] | None:
    """How bbmap would start from a regular (wheel) install, when this one is editable
    (``pip install -e``): the same code and interpreter, without the editable finder that
    ``site`` installs from its ``.pth`` file (pathlib, urllib.parse, ...: ~5-7 ms of a
    20,000-function dump, spec/startup.md).  ``-S`` and the paths set by hand; ``site``
    is imported but runs no ``.pth`` file (a regular install would run the others': well
    under a millisecond here).  None when the install is not editable."""
    import glob
    import site

    import bbmap

    dirs = site.getsitepackages()
    if not any(glob.glob(os.path.join(d, "__editable__*bbmap*.pth")) for d in dirs):
        return None
    repo = os.path.dirname(os.path.dirname(os.path.abspath(bbmap.__file__)))
    code = (f"import sys; sys.path[:0] = {[repo, *dirs]!r}; import site; "
            "from bbmap.__main__ import run; run()")
    return [sys.executable, "-S", "-c", code]


def bench(name: str, binary: Path, work: Path, repeat: int) -> float:
    """Both tools on ``binary``, in turn ``repeat`` times; the ratio of the medians.  With
    an editable install, bbmap as a regular install starts it too (information only)."""
    # the console script's entry point (what `bbmap` runs), with the venv's interpreter
    bb = [sys.executable, "-c", "from bbmap.__main__ import run; run()", "dump", "--json",
          str(binary)]
    ro = [READOBJ, "--bb-addr-map", "--elf-output-style=JSON", str(binary)]
    reg = regular_install_cmd()
    tb, tr, tg = [], [], []
    for _ in range(repeat):
        tb.append(timed(bb, work / f"{name}.bbmap.json"))
        tr.append(timed(ro, work / f"{name}.readobj.json"))
        if reg is not None:
            tg.append(timed([*reg, *bb[3:]], work / f"{name}.bbmap-regular.json"))
    fb, fr, nb = count_functions(work / f"{name}.bbmap.json", work / f"{name}.readobj.json")
    b, r = statistics.median(w for w, _ in tb), statistics.median(w for w, _ in tr)
    bc, rc = statistics.median(c for _, c in tb), statistics.median(c for _, c in tr)
    print(f"{name:5s} {binary.name}: {fb} functions ({fr} by readobj), {nb} blocks, "
          f"{binary.stat().st_size / 1e6:.1f} MB")
    for tool, ts, med, cpu in (("bbmap dump --json", tb, b, bc),
                               ("llvm-readobj-22 JSON", tr, r, rc)):
        print(f"      {tool:22s} median {med:6.2f} s  (min {min(w for w, _ in ts):.2f} max "
              f"{max(w for w, _ in ts):.2f}, n={len(ts)})  cpu median {cpu:.2f} s")
    print(f"      ratio bbmap/readobj: wall {b / r:.2f}  cpu {bc / rc:.2f}")
    if tg:
        g, gc = statistics.median(w for w, _ in tg), statistics.median(c for _, c in tg)
        same = (work / f"{name}.bbmap-regular.json").read_bytes() == \
            (work / f"{name}.bbmap.json").read_bytes()
        print(f"      bbmap as a regular install (no editable finder; information): median "
              f"{g:6.2f} s, cpu median {gc:.2f} s: ratio wall {g / r:.2f}  cpu {gc / rc:.2f}"
              f"{'' if same else '  OUTPUT DIFFERS'}")
    return b / r


def real_binary(work: Path, functions: int) -> Path:
    """The compiled clang-22 binary with ``functions`` functions (built once, cached)."""
    path = work / ("real-clang22.so" if functions == 20_400
                   else f"real-clang22-{functions}.so")
    if not path.exists():
        if not shutil.which(CLANG):
            raise SystemExit(f"{CLANG} is needed to build the real binary")
        make_real_binary(path, functions=functions, units=max(6, functions // 3400))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=1_600_000)
    ap.add_argument("--real-functions", type=int, default=102_000,
                    help="functions in the compiled binary (>= 20,000)")
    ap.add_argument("--small-functions", type=int, default=20_400,
                    help="functions in the start-up-dominated binary (0: skip it)")
    ap.add_argument("--skip-big", action="store_true", help="leave out the synthetic map")
    args = ap.parse_args()
    if not shutil.which(READOBJ):
        raise SystemExit(f"{READOBJ} is needed for the side-by-side timing")
    work = Path(os.environ.get("BBMAP_BENCH_DIR", "/tmp/bbmap-bench"))
    work.mkdir(parents=True, exist_ok=True)
    big = work / f"big{args.blocks}.elf"
    if not args.skip_big and not big.exists():
        make_big_map(big, args.blocks)
    real = real_binary(work, args.real_functions)
    small = real_binary(work, args.small_functions) if args.small_functions else None
    compile_bytecode()
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    budgets = {}  # issue 17: <= 1.0x readobj at ~20,000 functions, <= 0.6x at ~100,000
    if small is not None:
        budgets["small"] = (bench("small", small, work, args.repeat), 1.0)
    budgets["real"] = (bench("real", real, work, args.repeat), 0.6)
    if not args.skip_big:
        bench("big", big, work, args.repeat)
        print("      (big: synthetic map, information only)")
    print("load average after:  {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for name, (ratio, limit) in budgets.items():
        print(f"{name}: ratio {ratio:.2f}, budget {limit:.1f}: "
              f"{'met' if ratio <= limit else 'NOT met'}")


if __name__ == "__main__":
    main()
