#!/usr/bin/env python3
"""One release behind, on real releases: profile release N, build release N+1 from it.

For each program, two releases fetched from their registries and pinned by sha256 (zstd
1.5.6 and 1.5.7 from the ``zstandard`` 0.23.0 and 0.25.0 sdists; SQLite from the
``better-sqlite3`` 11.10.0 and 13.2.0 npm packages), built as bench/e2e builds them
(clang-22 -O2, block map, function sections, unique internal names, lld) plus
``-mllvm -emit-bb-hash``.  Release N is profiled (``perf record -e cpu-clock`` of the
profiling input) and N+1 is rebuilt from that profile five ways:

* ``fresh``: bbmap's layout from a profile of N+1 itself (the win to reach);
  ``fresh-again``: the same from a second profile of N+1 (how far sampling noise alone
  moves the win: the ceiling a carried profile can be held to);
* ``stale``: ``bbmap layout PERF_N N+1 --profiled-binary N`` (bbmap carries the profile);
* ``naive``: N's own cluster and symbol-ordering files applied to N+1 as they are (what
  ``bbmap verify N+1 --cc-profile FILE --profiled-binary N`` refuses: its verdict is kept);
* ``clang-mi``: clang 22's own matching: ``annotate --format match-infer`` of N's profile
  (N's counts and block hashes under N+1's names) given to
  ``-fbasic-block-sections=list= -mllvm -basic-block-section-match-infer``;
* ``bolt-stale``: BOLT's stale path: ``perf2bolt-22 -nl -w`` YAML of N, then
  ``llvm-bolt-22 --infer-stale-profile`` on N+1 (without branch stacks perf2bolt writes
  that YAML with no blocks: BOLT gets no profile); ``bolt-fresh``: ``llvm-bolt-22`` of N+1
  from perf2bolt's fdata of N+1's profile (BOLT's own path without branch stacks);
* ``bolt-stale-bbmap``: BOLT's stale matching given a YAML that has blocks: bbmap's
  (``annotate --format bolt-yaml``) of N, read with ``--infer-stale-profile`` on N+1;
* ``bolt-bbmap``: bbmap's matching, BOLT's layout: ``annotate PERF_N N+1 --profiled-binary
  N --format bolt-yaml`` (N+1's blocks and BOLT's hashes), ``--infer-stale-profile``.

bbmap's YAML of N+1's own profile is held against BOLT's (``llvm-bolt -data=FDATA -w``) of
the same binary: functions, blocks, and each field of the block hashes
(``bolt_yaml_agreement``).

Every build must print what N+1's baseline prints.  On the measuring input: cachegrind I1
misses (32 KiB 8-way, 64 B lines) and taken branches in the binary (callgrind).  Each row's
win is its reduction from the baseline as a share of the fresh build's reduction.

    nice -n 10 python bench/bench_stale.py [--programs zstd,sqlite] [--cache DIR]
                                          [--workdir DIR] [--json FILE] [--reuse]
    python bench/bench_stale.py --speed [--functions 20000] [--samples 500000] [--rounds 3]

``--reuse`` keeps what a former run left in the workdir (builds, profiles, layouts, YAML,
measures; a measure is redone when its binary changed): delete a file to redo its step.
``--speed`` runs only the speed must-show (:func:`speed`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "e2e"))

import measure  # noqa: E402
import pipeline as pl  # noqa: E402
from programs import SQLITE, SQLITE_SRC, ZSTD, ZSTD_SRC, Program  # noqa: E402

# the releases before the ones bench/e2e pins
OLD_SOURCES = {
    "zstd": replace(ZSTD_SRC, version="0.23.0", archive="zstandard-0.23.0.tar.gz",
                    root="zstandard-0.23.0",
                    sha256="b2d8c62d08e7255f68f7a740bae85b3c9b8e5466baa9cbf7f57f1cde0ac6bc09"),
    "sqlite": replace(SQLITE_SRC, version="11.10.0", archive="better-sqlite3-11.10.0.tgz",
                      sha256="71e2d66a44dafc35649ff82742cf4908557fc31841108d19703b74b7065c0293"),
}
PROGRAMS = {"zstd": ZSTD, "sqlite": SQLITE}
HASH = ("-mllvm", "-emit-bb-hash")
ROWS = ("baseline", "fresh", "fresh-again", "stale", "naive", "clang-mi", "bolt-fresh",
        "bolt-stale", "bolt-stale-bbmap", "bolt-bbmap")


REUSE = False  # --reuse: keep every build, profile and measure a rerun finds in the workdir


def kept(path: Path) -> bool:
    """Whether a rerun may take ``path`` as it is (``--reuse`` and it exists)."""
    return REUSE and path.exists()


def build(prog: Program, root: Path, out: Path, **kw: Any) -> Path:
    return out if kept(out) else pl.build(prog, root, out, **kw)


def record(binary: Path, argv: list[str], out: Path, prog: Program) -> Path:
    if kept(out):
        return out
    return pl.record_ip(binary, argv, out, prog.ip_period_ns, prog.ip_repeat)


def measured(binary: Path, argv: list[str]) -> dict[str, int]:
    """cachegrind's I1 misses and callgrind's taken branches of one build, kept beside it
    (keyed by the build's sha256, so a rebuilt binary is measured again)."""
    memo = binary.with_name(binary.name + ".measure.json")
    digest = pl.sha256(binary)
    if memo.exists():
        m = json.loads(memo.read_text())
        if m.get("sha256") == digest and m.get("argv") == argv:
            return m["row"]
    cg = measure.cachegrind(binary, argv, "32768,8,64")
    cl = measure.callgrind(binary, argv)
    row = {"i1_misses": cg["i1_misses"], "instructions": cg["instructions"],
           "taken": cl.taken_in_binary}
    memo.write_text(json.dumps({"sha256": digest, "argv": argv, "row": row}))
    return row


def bbmap(*args: str, log: Path) -> subprocess.CompletedProcess:
    return pl.sh([sys.executable, "-m", "bbmap", *args], log=log)


def layout(perf: Path, binary: Path, out: Path, *extra: str) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    cc, ld = out / "cc.txt", out / "ld.txt"
    if kept(cc) and kept(ld):
        return {"cc": str(cc), "ld": str(ld)}
    bbmap("layout", str(perf), str(binary), "--cc-profile", str(cc), "--ld-profile", str(ld),
          *extra, "--json", "-o", str(out / "layout.json"), log=out / "layout.log")
    return {"cc": str(cc), "ld": str(ld)}


# plan._replicates_disagree's reasons (bbmap/inference/replicates.py says why)
KEPT_BY_CHECK = ("a half of the samples alone scores the compiler's order as high",
                 "a half of the samples alone has no count for the function",
                 "no replicate counts to check the new order against",
                 "too few samples to order its blocks")


def kept_by_check(layout_json: Path, top: int = 3) -> dict[str, Any]:
    """The functions a layout left in the compiler's block order because a half of the
    samples alone did not score Ext-TSP's order higher (bbmap/layout/plan.py), with their
    share of the layout's Ext-TSP score before.  (The intervals' corner check it replaced
    kept 17-63% of zstd's Ext-TSP gain, a lottery every profile drew anew: the most of
    what a stale build's taken-branch win differed by.)"""
    if not layout_json.exists():
        return {}
    d = json.loads(layout_json.read_text())
    fs = d.get("functions", [])
    total = sum(f["score"]["intra_before"] for f in fs if "score" in f) or 1.0
    kept = sorted((f for f in fs if f.get("kept_reason", "").startswith(KEPT_BY_CHECK)),
                  key=lambda f: -f["score"]["intra_before"])
    return {"functions": len(kept),
            "score_share": round(sum(f["score"]["intra_before"] for f in kept) / total, 4),
            "top": [f["symbol"] for f in kept[:top]]}


def bolt_run(binary: Path, data: Path, out: Path, stale: bool) -> dict[str, Any]:
    """llvm-bolt of ``binary`` from the profile ``data`` (fdata or YAML); the log's lines
    on the profile and on stale matching are kept."""
    extra = ["--infer-stale-profile"] if stale else []
    p = pl.sh([pl.LLVM_BOLT, str(binary), "-o", str(out), f"-data={data}", *pl.BOLT_FLAGS,
               *extra], log=out.with_suffix(".bolt.log"))
    text = p.stdout + p.stderr
    lines = [ln.strip() for ln in text.splitlines() if "stale" in ln.lower()
             or "profile" in ln.lower() and "function" in ln.lower()
             or "match for" in ln][:12]
    return {"data": str(data), "log": lines}


def perf2bolt(perf: Path, binary: Path, out: Path) -> tuple[Path, Path]:
    """``perf2bolt -nl`` of a sample profile: its fdata and its ``-w`` YAML (which, for a
    profile without branch stacks, BOLT 22 writes with no blocks)."""
    fd, yml = out.with_suffix(".fdata"), out.with_suffix(".p2b.yaml")
    if not (kept(fd) and kept(yml)):
        pl.sh([pl.PERF2BOLT, "-nl", "-p", str(perf), "-w", str(yml), "-o", str(fd),
               str(binary)], log=out.with_suffix(".p2b.log"))
    return fd, yml


def bolt_yaml(perf: Path, binary: Path, out: Path, *extra: str) -> Path:
    """bbmap's BOLT YAML (``--format bolt-yaml``) of ``binary`` from ``perf``."""
    if not kept(out):
        with open(out, "w") as fh:
            pl.sh([sys.executable, "-m", "bbmap", "annotate", str(perf), str(binary),
                   "--inference", "on", "--format", "bolt-yaml", *extra], stdout=fh)
    return out


def bolt_own_yaml(binary: Path, fdata: Path, out: Path) -> Path:
    """BOLT's own YAML of ``binary`` (``llvm-bolt -data=FDATA -w``): the oracle bbmap's
    YAML of the same binary is held against."""
    if not kept(out):
        pl.sh([pl.LLVM_BOLT, str(binary), f"-data={fdata}", "-w", str(out), "-o",
               os.devnull], log=out.with_suffix(".log"))
    return out


def compare_yaml(ours: Path, theirs: Path) -> dict[str, int]:
    """bbmap's YAML against BOLT's own of the same binary: of BOLT's blocks with a
    count, how many bbmap has at the same offset of the same function, and how many of
    those agree in ``bid``, ``insns`` and each field of the block hash."""
    import yaml

    def index(doc: dict) -> dict[str, tuple[int, dict[int, dict]]]:
        return {fn["name"]: (fn["nblocks"], {b["hash"] & 0xFFFF: b
                                             for b in fn.get("blocks") or []})
                for fn in doc.get("functions") or []}

    a = index(yaml.safe_load(ours.read_text()))
    b = index(yaml.safe_load(theirs.read_text()))
    c = dict.fromkeys(("functions", "functions_found", "nblocks_equal", "blocks",
                       "blocks_found", "bid", "insns", "opcode", "instr", "pred", "succ"), 0)
    fields = {"opcode": (16, 0xFFFF), "instr": (32, 0xFFFF), "pred": (48, 0xFF),
              "succ": (56, 0xFF)}
    for name, (nb, blocks) in b.items():
        if not blocks:
            continue
        c["functions"] += 1
        c["blocks"] += len(blocks)
        if name not in a:
            continue
        c["functions_found"] += 1
        c["nblocks_equal"] += a[name][0] == nb
        for off, yb in blocks.items():
            ya = a[name][1].get(off)
            if ya is None:
                continue
            c["blocks_found"] += 1
            c["bid"] += ya["bid"] == yb["bid"]
            c["insns"] += ya["insns"] == yb["insns"]
            for k, (sh, w) in fields.items():
                c[k] += (ya["hash"] >> sh & w) == (yb["hash"] >> sh & w)
    return c


def run_program(prog: Program, work: Path, cache: Path) -> dict[str, Any]:
    t0 = time.time()
    old_src = OLD_SOURCES[prog.name]
    roots_new = pl.fetch_all(cache)
    root_new = roots_new[prog.source.package]
    root_old = pl.fetch(old_src, cache)
    corp = pl.corpora(roots_new)
    prof_argv = pl.workload(prog, "profile", corp)
    meas_argv = pl.workload(prog, "measure", corp)
    w = work / prog.name
    w.mkdir(parents=True, exist_ok=True)
    b: dict[str, Path] = {}
    old = build(prog, root_old, w / "old", cflags=HASH)
    new = build(prog, root_new, w / "baseline", cflags=HASH)
    b["baseline"] = new
    perf_old = record(old, prof_argv, w / "old.perf.data", prog)
    perf_new = record(new, prof_argv, w / "new.perf.data", prog)
    perf_new2 = record(new, prof_argv, w / "new2.perf.data", prog)  # sampling noise
    doc: dict[str, Any] = {"old": f"{old_src.package} {old_src.version}",
                           "new": f"{prog.source.package} {prog.source.version}",
                           "samples": {"old": pl.ip_info(perf_old)["samples"],
                                       "new": pl.ip_info(perf_new)["samples"]}}
    fresh = layout(perf_new, new, w / "fresh")
    fresh2 = layout(perf_new2, new, w / "fresh-again")
    stale = layout(perf_old, new, w / "stale", "--profiled-binary", str(old), "--force",
                   "--carry-report", str(w / "carry.json"))
    naive = layout(perf_old, old, w / "naive")
    carry = json.loads((w / "carry.json").read_text())
    doc["carry"] = {k: carry[k] for k in ("samples", "carried_share", "share")}
    doc["carry"]["worst"] = carry["functions"][:5]
    v = subprocess.run([sys.executable, "-m", "bbmap", "verify", str(new), "--cc-profile",
                        naive["cc"], "--profiled-binary", str(old), "--json"],
                       capture_output=True, text=True)
    vdoc = json.loads(v.stdout) if v.stdout.startswith("{") else {}
    doc["verify_naive"] = {"exit": v.returncode,
                           "misplaced_functions": len(vdoc.get("misplaced", []))}
    doc["kept_by_check"] = {}
    for row, lay in (("fresh", fresh), ("fresh-again", fresh2), ("stale", stale),
                     ("naive", naive)):
        doc["kept_by_check"][row] = kept_by_check(w / row / "layout.json")
        cf, lf = pl.layout_flags(lay)
        b[row] = build(prog, root_new, w / row / "bin", cflags=(*HASH, *cf), ldflags=lf)
    mi = w / "clang-mi.txt"
    if not kept(mi):
        with open(mi, "w") as fh:
            pl.sh([sys.executable, "-m", "bbmap", "annotate", str(perf_old), str(new),
                   "--profiled-binary", str(old), "--force", "--format", "match-infer"],
                  stdout=fh)
    b["clang-mi"] = build(prog, root_new, w / "clang-mi" / "bin",
                             cflags=(*HASH, f"-fbasic-block-sections=list={mi}", "-mllvm",
                                     "-basic-block-section-match-infer"))
    doc["bolt"] = {}
    fd_new, _ = perf2bolt(perf_new, new, w / "bolt-new")
    fd_old, p2b_old = perf2bolt(perf_old, old, w / "bolt-old")
    own_new = bolt_own_yaml(new, fd_new, w / "bolt-own-new.yaml")
    ours_new = bolt_yaml(perf_new, new, w / "bbmap-new.yaml")
    doc["bolt_yaml_agreement"] = compare_yaml(ours_new, own_new)
    yml_old = bolt_yaml(perf_old, old, w / "bbmap-old.yaml")
    yml_carried = bolt_yaml(perf_old, new, w / "bbmap-carried.yaml", "--profiled-binary",
                            str(old), "--force")
    for row, data, st in (("bolt-fresh", fd_new, False), ("bolt-stale", p2b_old, True),
                          ("bolt-stale-bbmap", yml_old, True), ("bolt-bbmap", yml_carried, True)):
        out = w / f"{row}.bin"
        if not kept(out):
            doc["bolt"][row] = bolt_run(new, data, out, st)
        b[row] = out
    want = pl.program_output(new, meas_argv)
    for row, path in b.items():
        if pl.program_output(path, meas_argv) != want:
            raise pl.StepError(f"{row}: {path} prints something else than the baseline")
    rows = {}
    for row in ROWS:
        rows[row] = measured(b[row], meas_argv)
    base, fr = rows["baseline"], rows["fresh"]
    for r in rows.values():
        for k in ("i1_misses", "taken"):
            gain = base[k] - fr[k]
            r[f"{k}_share_of_fresh"] = round((base[k] - r[k]) / gain, 4) if gain else None
    doc["rows"] = rows
    doc["seconds"] = round(time.time() - t0, 1)
    return doc


def table(name: str, doc: dict[str, Any]) -> str:
    lines = [f"{name}: profile of {doc['old']}, build of {doc['new']}; carried "
             f"{100 * doc['carry']['carried_share']:.1f}% of {doc['carry']['samples']} "
             f"samples; verify of the naive file: exit {doc['verify_naive']['exit']}, "
             f"{doc['verify_naive']['misplaced_functions']} functions misplaced",
             f"{'row':17} {'I1 misses':>12} {'of fresh':>9} {'taken':>12} {'of fresh':>9}"]
    for row, r in doc["rows"].items():
        def pct(x: float | None) -> str:
            return "" if x is None else f"{100 * x:.1f}%"
        lines.append(f"{row:17} {r['i1_misses']:12,d} {pct(r['i1_misses_share_of_fresh']):>9} "
                     f"{r['taken']:12,d} {pct(r['taken_share_of_fresh']):>9}")
    for row, k in doc.get("kept_by_check", {}).items():
        if k:
            lines.append(f"{row}: {k['functions']} functions kept in the compiler's order "
                         f"(halves), {100 * k['score_share']:.1f}% of the score: "
                         + ", ".join(n[:40] for n in k["top"]))
    return "\n".join(lines)


# ------------------------------------------------------------------------------ speed
CHANGED_EVERY = 20  # the rebuild edits every 20th function: 5% of them


def speed(work: Path, nfunc: int, want: int, rounds: int) -> dict[str, Any]:
    """The speed must-show: a profile of bench/bench_annotate.py's ``manyfuncs`` (20,000
    functions, >= ``want`` samples) carried onto a rebuild in which every 20th function
    is edited (its loop's step changes: other code, other block sizes, same names),
    beside a plain annotate of the same profile on the profiled build.  Both write JSON
    with inference (the default for a sample profile), with a warm disassembly cache of
    their own, alternated ``rounds`` times (wall and CPU time; the ratio is of the
    medians)."""
    import statistics

    sys.path.insert(0, str(HERE))
    import bench_annotate as ba

    d1, d2 = work / "speed" / "v1", work / "speed" / "v2"
    for d in (d1, d2):
        d.mkdir(parents=True, exist_ok=True)
    old = Path(ba.build_program(str(d1), nfunc))
    srcs = ba.write_program(str(d2), nfunc)
    changed = 0
    for src in srcs:  # the edit: ``s * 3u + 1u`` -> ``s * 5u + 3u`` in every 20th function
        text = Path(src).read_text().splitlines()
        for k, ln in enumerate(text):
            i = ln.find("unsigned f")
            if i == 0 and "(unsigned x)" in ln:
                n = int(ln[len("unsigned f"):ln.index("(")])
                if n % CHANGED_EVERY == 0:
                    text[k] = ln.replace("s = s * 3u + 1u;", "s = s * 5u + 3u;")
                    changed += text[k] != ln
        ba._write_if_changed(src, "\n".join(text) + "\n")
    new = Path(ba.build_program(str(d2), nfunc))
    perf = Path(ba.record_ip(str(d1), str(old), want))
    cache = work / "speed" / "disasm-cache"
    env = {**os.environ, "BBMAP_CACHE_DIR": str(cache)}
    cmds = {"annotate": [sys.executable, "-m", "bbmap", "annotate", str(perf), str(old),
                         "--format", "json", "-o", str(work / "speed" / "plain.json")],
            "carry": [sys.executable, "-m", "bbmap", "annotate", str(perf), str(new),
                      "--profiled-binary", str(old), "--format", "json", "-o",
                      str(work / "speed" / "carried.json"), "--carry-report",
                      str(work / "speed" / "carry.json")]}
    for c in cmds.values():  # warm both binaries' disassembly caches
        subprocess.run(c, env=env, check=True, capture_output=True)
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for k, c in cmds.items():
            r0 = os.times()
            t0 = time.perf_counter()
            subprocess.run(c, env=env, check=True, capture_output=True)
            wall[k].append(time.perf_counter() - t0)
            r1 = os.times()
            cpu[k].append(r1.children_user - r0.children_user + r1.children_system
                          - r0.children_system)
    rep = json.loads((work / "speed" / "carry.json").read_text())
    med = {k: statistics.median(v) for k, v in wall.items()}
    medc = {k: statistics.median(v) for k, v in cpu.items()}
    return {"functions": nfunc, "changed_functions": changed,
            "samples": ba.count_samples(str(perf)), "carried_share": rep["carried_share"],
            "share": rep["share"], "wall": wall, "cpu": cpu,
            "ratio_wall": round(med["carry"] / med["annotate"], 3),
            "ratio_cpu": round(medc["carry"] / medc["annotate"], 3),
            "load": os.getloadavg()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="zstd,sqlite")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "bbmap-e2e")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--speed", action="store_true",
                    help="only the speed must-show (20,000 functions, 5%% edited)")
    ap.add_argument("--functions", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=500000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reuse", action="store_true",
                    help="keep the builds, profiles and measures a former run left in the workdir")
    a = ap.parse_args()
    global REUSE
    REUSE = a.reuse
    work = a.workdir or a.cache / "stale"
    out: dict[str, Any] = {}
    if a.speed:
        out["speed"] = sp = speed(work, a.functions, a.samples, a.rounds)
        print(f"speed: {sp['samples']} samples, {sp['functions']} functions, "
              f"{sp['changed_functions']} edited; carried {100 * sp['carried_share']:.1f}%; "
              f"carry / annotate: wall {sp['ratio_wall']}x, cpu {sp['ratio_cpu']}x "
              f"(wall s: {sp['wall']}; load {sp['load']})", flush=True)
    for name in [] if a.speed else a.programs.split(","):
        out[name] = run_program(PROGRAMS[name], work, a.cache)
        print(table(name, out[name]), flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
