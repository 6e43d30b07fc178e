#!/usr/bin/env python3
"""One more build of a finished bench run, measured like the bench's rows: how the figures
in spec/e2e.md's "IP-only vs LBR" and "Where BOLT does better" tables were made.

    python bench/e2e/variant.py WORKDIR PROGRAM NAME [--perf FILE] [--layout-arg ARG]...
                                [--cflag FLAG]... [--ldflag FLAG]... [--no-layout]
                                [--cc FILE --ld FILE]

Takes the run's baseline binary (``WORKDIR/PROGRAM/baseline``) and, unless ``--no-layout``,
writes ``bbmap layout`` files from ``--perf`` (default: the run's IP profile) with the extra
``--layout-arg`` options (or takes the cluster and symbol-ordering files given with ``--cc``
and ``--ld``, e.g. a layout's files edited by hand); rebuilds the program with them (plus
any ``--cflag`` and ``--ldflag``), checks the output on the measuring input is the
baseline's, and prints cachegrind I1 misses (32 KiB and 16 KiB), callgrind taken branches,
pages99, the share run in ``.cold`` and the executed ``nop``s and ``jmp``s, with the change
against the run's baseline.  Work files go to ``WORKDIR/variants/PROGRAM/NAME``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402
import measure  # noqa: E402
import pipeline as pl  # noqa: E402
from programs import PROGRAMS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("program", choices=sorted(PROGRAMS))
    ap.add_argument("name")
    ap.add_argument("--perf", type=Path, default=None)
    ap.add_argument("--layout-arg", action="append", default=[])
    ap.add_argument("--cflag", action="append", default=[])
    ap.add_argument("--ldflag", action="append", default=[])
    ap.add_argument("--no-layout", action="store_true")
    ap.add_argument("--cc", type=Path, default=None,
                    help="build with this cluster file instead of a new layout (with --ld)")
    ap.add_argument("--ld", type=Path, default=None, help="the symbol-ordering file for --cc")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/e2e"))
    args = ap.parse_args()
    prog = PROGRAMS[args.program]
    doc = json.loads((args.workdir / "results.json").read_text())["programs"][prog.name]
    base = args.workdir / prog.name / "baseline"
    roots = pl.fetch_all(args.cache)
    meas = pl.workload(prog, "measure", pl.corpora(roots))
    out = args.workdir / "variants" / prog.name / args.name
    out.mkdir(parents=True, exist_ok=True)
    cflags, ldflags = tuple(args.cflag), tuple(args.ldflag)
    if (args.cc is None) != (args.ld is None):
        ap.error("--cc and --ld go together")
    perf = None
    if args.cc is not None:
        cfl, ldl = pl.layout_flags({"cc": str(args.cc.resolve()), "ld": str(args.ld.resolve())})
        cflags, ldflags = (*cfl, *cflags), (*ldl, *ldflags)
    elif not args.no_layout:
        perf = args.perf or Path(doc["profiles"]["dir"]) / "ip.perf.data"
        cc, ld = out / "cc.txt", out / "ld.txt"
        pl.sh([sys.executable, "-m", "bbmap", "layout", str(perf), str(base), "--cc-profile",
               str(cc), "--ld-profile", str(ld), "--json", "-o", str(out / "layout.json"),
               *args.layout_arg])
        lay = {"cc": str(cc), "ld": str(ld)}
        cfl, ldl = pl.layout_flags(lay)
        cflags, ldflags = (*cfl, *cflags), (*ldl, *ldflags)
    b = pl.build(prog, roots[prog.source.package], out / "bin", cflags=cflags,
                 ldflags=ldflags)
    if pl.program_output(b, meas) != pl.program_output(base, meas):
        print(f"{args.name}: prints something else than the baseline", file=sys.stderr)
        return 1
    r: dict[str, float] = {}
    for geo, spec in measure.I1_GEOMETRIES.items():
        c = measure.cachegrind(b, meas, spec)
        r["instructions"], r[f"i1_misses_{geo}"] = c["instructions"], c["i1_misses"]
    cg = measure.callgrind(b, meas)
    r.update(taken_branches=cg.taken_in_binary, pages_99=cg.page_footprint(),
             cold_share=round(measure.cold_share(cg, b), 4))
    mix = compare.instruction_mix(cg, b)
    r.update(nops=mix["nop"], jmp=mix["jmp"])
    bl = doc["builds"]["baseline"]
    change = {k: round((r[k] - bl[k]) / bl[k], 4) for k in
              ("instructions", "i1_misses_32k", "i1_misses_16k", "taken_branches", "pages_99")}
    res = {"name": args.name, "program": prog.name, "layout_args": args.layout_arg,
           "cflags": args.cflag, "ldflags": args.ldflag,
           "perf": None if perf is None else str(perf),
           "cc": None if args.cc is None else str(args.cc),
           "ld": None if args.ld is None else str(args.ld),
           "measures": r, "change_vs_baseline": change}
    (out / "result.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
