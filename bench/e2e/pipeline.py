"""Fetch, build, profile and optimise one program: the steps of bench/bench_e2e.py.

Every step is a real tool run: ``npm``/``pip`` fetch pinned sources; clang-22 and lld build;
``perf record -e cpu-clock`` takes the IP profile; ``corpus/tools/lbr.py`` turns a valgrind
trace of the same input into an LBR perf.data (proved by ``perf script -F ip,brstack`` and
``perf2bolt-22``); ``bbmap`` writes the Propeller cluster and symbol-ordering files the
relink uses; ``perf2bolt-22``/``llvm-bolt-22`` optimise the same baseline from the same
perf.data.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from programs import HERE, SOURCES, Program, Source

REPO = HERE.parent.parent
LBR_TOOL = REPO / "corpus" / "tools" / "lbr.py"
PRECISE_TOOL = REPO / "corpus" / "tools" / "precise.py"
CC = os.environ.get("BBMAP_E2E_CC", "clang-22")
READOBJ = os.environ.get("BBMAP_E2E_READOBJ", "llvm-readobj-22")
PERF2BOLT = os.environ.get("BBMAP_E2E_PERF2BOLT", "perf2bolt-22")
LLVM_BOLT = os.environ.get("BBMAP_E2E_LLVM_BOLT", "llvm-bolt-22")
# The baseline: every function in its own section, block map on, unique names for
# internal functions (so a cluster file names each one), lld keeping relocations for BOLT.
CFLAGS = ("-O2", "-fbasic-block-address-map", "-ffunction-sections",
          "-funique-internal-linkage-names")
LDFLAGS = ("-fuse-ld=lld", "-Wl,--emit-relocs")
# BOLT's documented recipe (bolt/README.md "Optimizing a binary"), with CDSort function order
BOLT_FLAGS = ("-reorder-blocks=ext-tsp", "-reorder-functions=cdsort", "-split-functions",
              "-split-all-cold", "-split-eh", "-dyno-stats")


class StepError(RuntimeError):
    """A step failed; the message names the command and the tail of its output."""


def sh(cmd: list[str], *, log: Path | None = None, **kw: Any) -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure raise StepError with its stderr tail.  ``log`` keeps stderr."""
    p = subprocess.run(cmd, stdout=kw.pop("stdout", subprocess.PIPE),
                       stderr=subprocess.PIPE, text=True, **kw)
    if log is not None:
        log.write_text((p.stdout if isinstance(p.stdout, str) else "") + p.stderr)
    if p.returncode != 0:
        raise StepError(f"{_short(cmd)} exited {p.returncode}:\n{p.stderr[-1500:]}")
    return p


def _short(cmd: list[str]) -> str:
    text = shlex.join(cmd)
    return text if len(text) < 400 else text[:300] + " ... " + text[-60:]


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# ------------------------------------------------------------------------------ sources
def fetch(src: Source, cache: Path) -> Path:
    """The unpacked source tree of ``src`` (downloaded and checked once, then cached)."""
    dl = cache / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    arc = dl / src.archive
    if not arc.exists() or sha256(arc) != src.sha256:
        arc.unlink(missing_ok=True)
        if src.registry == "npm":
            sh(["npm", "pack", f"{src.package}@{src.version}", "--pack-destination", str(dl)],
               cwd=dl)
        else:
            # the sdist of this package only (its build dependencies as wheels)
            sh([sys.executable, "-m", "pip", "download", "--no-binary", src.package,
                "--no-deps", f"{src.package}=={src.version}", "-d", str(dl)],
               env={**os.environ, **dict(src.env)})
        if not arc.exists():
            raise StepError(f"{src.registry} did not write {arc}")
        got = sha256(arc)
        if got != src.sha256:
            raise StepError(f"{arc}: sha256 {got}, pinned {src.sha256}: refusing to build it")
    dest = cache / "src" / f"{src.package}-{src.version}"
    if not (dest / src.root / src.files[0]).exists():
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(arc) as t:
            t.extractall(tmp, filter="data")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest / src.root


def fetch_all(cache: Path) -> dict[str, Path]:
    return {s.package: fetch(s, cache) for s in SOURCES}


def corpora(roots: dict[str, Path]) -> dict[str, list[str]]:
    """zstd's corpora: every file of the downloaded packages (those with ``corpus``),
    sorted by path, split alternately into the profiling (even) and measuring (odd)
    inputs."""
    inside = {s.package for s in SOURCES if s.corpus}
    files = sorted(str(p) for k, r in roots.items() if k in inside for p in r.rglob("*")
                   if p.is_file() and ".git" not in p.parts)
    even, odd = files[0::2], files[1::2]
    return {"even": even, "odd": odd, "smoke-even": even[:8], "smoke-odd": odd[:8]}


def workload(prog: Program, kind: str, corp: dict[str, list[str]]) -> list[str]:
    argv: list[str] = []
    for a in prog.workloads[kind]:
        m = re.fullmatch(r"\{corpus:([\w-]+)\}", a)
        argv.extend(corp[m.group(1)] if m else [a])
    return argv


# ------------------------------------------------------------------------------ builds
def build(prog: Program, root: Path, out: Path, *, cflags: tuple[str, ...] = (),
          ldflags: tuple[str, ...] = ()) -> Path:
    """Compile the amalgamation and the driver, link with lld.  The unit is compiled from
    the source root by the same relative path every time: the ``.__uniq`` suffix of internal
    names hashes the path, and the cluster file names functions by it."""
    objs = out.with_name(out.name + ".o")
    objs.mkdir(parents=True, exist_ok=True)
    inc = ["-I", str((root / prog.unit).parent)]
    flags = [*CFLAGS, *prog.defines, *cflags, *inc]
    jobs = [([CC, *flags, "-c", prog.unit, "-o", str(objs / "unit.o")], root),
            ([CC, *flags, "-c", str(HERE / prog.driver), "-o", str(objs / "driver.o")], root)]
    procs = [subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for cmd, cwd in jobs]
    for (cmd, _), p in zip(jobs, procs):
        _, err = p.communicate()
        if p.returncode:
            raise StepError(f"{_short(cmd)} exited {p.returncode}:\n{err[-1500:]}")
    sh([CC, *LDFLAGS, *ldflags, str(objs / "driver.o"), str(objs / "unit.o"), *prog.libs,
        "-o", str(out)])
    return out


def readobj_golden(binary: Path, out: Path) -> Path:
    with open(out, "w") as f:
        sh([READOBJ, "--bb-addr-map", "--elf-output-style=JSON", str(binary)], stdout=f)
    return out


def program_output(binary: Path, argv: list[str]) -> bytes:
    p = subprocess.run([str(binary), *argv], capture_output=True)
    if p.returncode:
        raise StepError(f"{binary} exited {p.returncode}: {p.stderr[-500:]!r}")
    return p.stdout


# ------------------------------------------------------------------------------ profiles
def record_ip(binary: Path, argv: list[str], out: Path, period_ns: int, repeat: int) -> Path:
    """``perf record -e cpu-clock -c N`` of ``repeat`` runs of the profiling input."""
    loop = f'for i in $(seq {repeat}); do "$@" >/dev/null || exit 1; done'
    sh(["perf", "record", "-q", "-e", "cpu-clock", "-c", str(period_ns), "-o", str(out), "--",
        "sh", "-c", loop, "sh", str(binary), *argv], stdout=subprocess.DEVNULL)
    return out


def record_lbr(binary: Path, argv: list[str], golden: Path, out: Path, work: Path,
               every: int) -> dict[str, Any]:
    """An LBR perf.data of one traced run of the profiling input (``lbr.py --tracer sb
    --scope user``: the stacks hold libc's branches too, as user-mode LBR does), then proved:
    ``perf script -F ip,brstack`` must read back every stack as written."""
    sh([sys.executable, str(LBR_TOOL), "--tracer", "sb", "--scope", "user",
        "--binary", str(binary), "--readobj", str(golden), "--every", str(every),
        "--out", str(out), "--work", str(work), "--args", *argv], log=work / "lbr.log")
    with open(out / "script-brstack.txt", "w") as f:
        sh(["perf", "script", "-i", str(out / "perf.data"), "-F", "ip,brstack"], stdout=f)
    sh([sys.executable, str(LBR_TOOL), "--check", str(out), "--work", str(work)])
    info = json.loads((out / "lbr-info.json").read_text())
    if info.get("unexplained"):
        raise StepError(f"{out}: {info['unexplained']} superblock transitions unexplained")
    return info


def record_precise(binary: Path, argv: list[str], golden: Path, out: Path, work: Path,
                   every: int) -> dict[str, Any]:
    """A precise instruction-sample perf.data (``instructions:upp``, a sample every ~EVERY
    retired instructions, no skid) of one traced run of the profiling input, with that run's
    exact counts beside it, then proved: ``perf script`` must read back every sample."""
    sh([sys.executable, str(PRECISE_TOOL), "--binary", str(binary), "--readobj", str(golden),
        "--every", str(every), "--out", str(out), "--work", str(work), "--args", *argv],
       log=work / "precise.log", stdin=subprocess.DEVNULL)
    sh([sys.executable, str(PRECISE_TOOL), "--check", str(out), "--work", str(work)])
    info = json.loads((out / "precise-info.json").read_text())
    if info.get("unexplained"):
        raise StepError(f"{out}: {info['unexplained']} superblock transitions unexplained")
    return info


def precise_key(every: int) -> str:
    """What a precise profile depends on beyond the profile key: its generator and period."""
    return f"{sha256(PRECISE_TOOL)} {every}"


def profile_key(binary: Path, argv: list[str], prog: Program, kind: str) -> str:
    """What the profiles depend on: the baseline's bytes (clang and lld builds are
    reproducible, so an unchanged toolchain and source give the same key), the profiling
    input, the sampling settings and the LBR tracer's source."""
    h = hashlib.sha256()
    for part in (sha256(binary), sha256(LBR_TOOL), json.dumps(argv), kind,
                 str(prog.lbr_every), str(prog.ip_period_ns), str(prog.ip_repeat)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def ip_info(perf: Path) -> dict[str, Any]:
    """Samples in the IP profile (``perf report``'s own count of the binary's samples)."""
    p = sh(["perf", "report", "-i", str(perf), "--stdio", "--sort", "dso", "-q"])
    dsos = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith("%"):
            dsos[parts[-1]] = float(parts[0].rstrip("%"))
    n = sh(["perf", "script", "-i", str(perf), "-F", "ip"]).stdout.count("\n")
    return {"samples": n, "share_by_dso_pct": dsos}


_P2B_READ = re.compile(r"read (\d+) samples and (\d+) brstack entries")
_P2B_IGN = re.compile(r"ignored samples: (\d+)")
_P2B_MISMATCH = re.compile(r"traces mismatching disassembled function contents: (\d+)")


def perf2bolt(binary: Path, perf: Path, out: Path, *, lbr: bool) -> dict[str, Any]:
    """``perf2bolt-22 [-nl]``; for LBR also the oracle check of the written perf.data: BOLT's
    reader must take every sample and every branch entry."""
    cmd = [PERF2BOLT, "-p", str(perf), "-o", str(out), str(binary)]
    if not lbr:
        cmd.insert(1, "-nl")
    p = sh(cmd, log=out.with_suffix(".log"))
    text = p.stdout + p.stderr
    res: dict[str, Any] = {"fdata": str(out)}
    if m := _P2B_READ.search(text):
        res["samples"], res["brstack_entries"] = int(m.group(1)), int(m.group(2))
    if m := _P2B_IGN.search(text):
        res["ignored_samples"] = int(m.group(1))
    if m := _P2B_MISMATCH.search(text):
        res["mismatching_traces"] = int(m.group(1))
    return res


def llvm_bolt(binary: Path, fdata: Path, out: Path) -> dict[str, Any]:
    p = sh([LLVM_BOLT, str(binary), "-o", str(out), f"-data={fdata}", *BOLT_FLAGS],
           log=out.with_name(out.name + ".log"))
    return {"flags": list(BOLT_FLAGS), "log_tail": (p.stdout + p.stderr)[-400:]}


def bbmap_layout(perf: Path, binary: Path, out_dir: Path) -> dict[str, Any]:
    """``bbmap layout``: Ext-TSP block order, hot/cold split and C3 function order from
    ``perf`` (LBR edges, or for an IP-only profile the counts inferred over the recovered
    CFG), written as the cluster file and the symbol-ordering file of the relink, plus the
    JSON report (count source, Ext-TSP scores, hot/cold bytes)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cc, ld, rep = out_dir / "cc.txt", out_dir / "ld.txt", out_dir / "layout.json"
    cmd = [sys.executable, "-m", "bbmap", "layout", str(perf), str(binary),
           "--cc-profile", str(cc), "--ld-profile", str(ld), "--json", "-o", str(rep)]
    sh(cmd, log=out_dir / "layout.log")
    doc = json.loads(rep.read_text())
    return {"how": "bbmap layout " + " ".join(cmd[5:]).replace(str(out_dir) + "/", ""),
            "cc": str(cc), "ld": str(ld), "report": str(rep),
            "count_source": doc["count_source"], "params": doc["params"],
            "mode": doc["mode"], "function_order": doc["function_order"],
            "totals": doc["totals"], "compiler_flags": doc.get("compiler_flags", []),
            "functions": sum(1 for x in cc.read_text().splitlines() if x.startswith("f "))}


def layout_flags(layout: dict[str, Any], *, recipe: bool = True
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Compiler and linker flags of the relink from a layout's two files, plus (``recipe``)
    the compiler flags ``bbmap layout`` prints beside them (loop alignment off when its
    order would run the compiler's padding)."""
    extra = tuple(layout.get("compiler_flags", ())) if recipe else ()
    return ((f"-fbasic-block-sections=list={layout['cc']}", *extra),
            (f"-Wl,--symbol-ordering-file={layout['ld']}", "-Wl,--no-warn-symbol-ordering"))
