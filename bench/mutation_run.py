"""The first-hour mutation run: every command, every annotate format, an ``-o`` file present.

``bench/hostile_mutants.py`` asks whether damaged input can crash bbmap.  This run asks what a
user with a good report already on disk sees when the next input is damaged.  Each mutant of a
corpus ELF file, perf.data file or Parquet aggregate (``tests/mutate.random_mutant``) goes
through every command that reads that kind of file, each with ``-o`` naming a file that already
holds a good output (lookup has no ``-o``: run without).  Every run is judged on:

* **internal error** / **traceback** / **hang** (killed after ``--timeout`` seconds) /
  **exit code** outside the README's table;
* **no file** / **no offset**: an error line (``bbmap: error:``) that does not name one of the
  run's files, or names no byte offset.  A refusal about what the input *means* rather than
  how its bytes are laid out (``REFUSALS``: a build-id mismatch, a profile that does not fit,
  no block map, no samples of the binary) has no byte to point at and is exempt from the
  offset rule; it is counted by kind all the same;
* **output changed** (counted per exit code): the existing ``-o`` file differs after a run
  that exited non-zero (the rule that a failing run never replaces a good output).
  ``incomplete: N of M profiles ...`` summarises the lines above it and is not judged.

Runs are forked from one parent that has imported bbmap (``hostile_mutants.run_forked``).

    nice python bench/mutation_run.py --mutants 300 --jobs 2 --json /tmp/run.json

prints each finding, then counts per command and per kind of finding; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(HERE))

from hostile_mutants import EXIT_CODES, run_forked  # noqa: E402
from mutate import random_mutant  # noqa: E402

CORPUS = REPO / "corpus"
C22 = CORPUS / "bin" / "clang-22"
PROF = CORPUS / "profiles"
LAYOUT = C22 / "addrmap" / "layout.pie"
LAYOUT_PGO = C22 / "pgomap-prof" / "layout.pie"
FLIP = C22 / "pgoflip" / "pgoflip.pie"
FLIP_PROF = PROF / "c22-pgoflip-pie-train-plain" / "perf.data"
LAYOUT_PROF = PROF / "c22-addrmap-pie-plain" / "perf.data"
LBR = CORPUS / "lbr" / "c22-addrmap-pie-lbr" / "perf.data"
FORMATS = ["text", "json", "csv", "propeller", "symorder", "aggregate", "fdata", "bolt-preagg"]
EXT = {"text": "txt", "json": "json", "csv": "csv", "propeller": "txt", "symorder": "txt",
       "aggregate": "parquet", "fdata": "fdata", "bolt-preagg": "txt"}

# (kind, seed file, the profile an ELF mutant is annotated with / the binary a perf mutant
#  is annotated against, the binary verify --profile holds a perf mutant against)
SEEDS = [
    ("elf", LAYOUT, LAYOUT_PROF, None),
    ("elf", C22 / "addrmap" / "layout.o", LAYOUT_PROF, None),
    ("elf", C22 / "addrmap" / "liblayout.so", LAYOUT_PROF, None),
    ("elf", C22 / "list" / "layout.pie", LAYOUT_PROF, None),
    ("elf", FLIP, FLIP_PROF, None),
    ("elf", C22 / "stripped" / "layout.pie", PROF / "c22-stripped-pie-plain" / "perf.data",
     None),
    ("perf", LAYOUT_PROF, LAYOUT, LAYOUT_PGO),
    ("perf", PROF / "c22-addrmap-pie-zstd" / "perf.data", LAYOUT, LAYOUT_PGO),
    ("perf", PROF / "c22-addrmap-pie-pipe" / "perf.data", LAYOUT, LAYOUT_PGO),
    ("perf", PROF / "c22-addrmap-pie-callgraph" / "perf.data", LAYOUT, LAYOUT_PGO),
    ("perf", FLIP_PROF, FLIP, FLIP),
    ("perf", LBR, LAYOUT, LAYOUT_PGO),
]

# Refusals about meaning, not layout: no byte offset to name (still one line naming a file).
REFUSALS = re.compile(
    r"build-id mismatch|does not fit|no block map|no samples|nothing mapped|not profiled|"
    r"no PGO analysis map|was not recorded|no executable mapping|none of the samples|"
    r"relocatable object|records no|recorded no|no sample of|did not map|not an ELF file|"
    r"is a perf\.data profile|not a perf\.data|different build|other build|"
    r"cannot open|No such file|is a directory|not a Parquet|other binar|no branch stacks|"
    r"outside every function|profile is empty|has no basic-block address map|"
    r"never appears in the profile|none of the \d+ samples landed in|the profile has no samples|"
    r"no inferred counts", re.I)
# A summary after the lines that name each file (``exit_if_incomplete``): exempt from both.
# So are the exit-1 reasons of verify (its report names each failed check and belief) and the
# notes of a failing run that kept an existing output (logged as errors before they were notes).
SUMMARY = re.compile(r"^bbmap: error: incomplete: \d+ of \d+ profiles|^bbmap: error: \.\.\. and "
                     r"\d+ more|verification failed: \d+ |the PGO analysis map does not "
                     r"match the profile|not replaced \(the run failed")
GOOD = b"a good output written by an earlier run\n"


def commands(kind: str, m: str, partner: Path, pgo: Path | None, out: str) -> list[list[str]]:
    """Every command that reads a file of ``kind`` on mutant ``m``; ``-o`` last but one."""
    if kind == "agg":
        return ([["merge", m, str(AGG_SEED), "-o", out + ".parquet"]]
                + [["annotate", m, str(LAYOUT), "--format", f, "-o", f"{out}.{EXT[f]}"]
                   for f in ("text", "json")])
    if kind == "elf":
        name = ["--name", _basename_of(m)]
        ann = [["annotate", str(partner), m, *name, "--format", f, "-o", f"{out}.{EXT[f]}",
                "--inference", "off"] for f in FORMATS]
        return ann + [
            ["dump", m, "-o", out + ".json"],
            ["lookup", m, "0x1740", "--explain"],
            ["verify", m, "-o", out + ".txt"],
            ["verify", m, "--profile", str(partner), "-o", out + ".txt"],
            ["cfg", str(partner), m, *name, "-o", out + ".svg", "--inference", "off"],
            ["layout", str(partner), m, *name, "-o", out + ".txt", "--inference", "off"]]
    ann = [["annotate", m, str(partner), "--format", f, "-o", f"{out}.{EXT[f]}",
            *_inference(f)] for f in FORMATS]
    return ann + [
        ["perf-info", m, "-o", out + ".json"],
        ["verify", str(pgo), "--profile", m, "-o", out + ".txt"],
        ["cfg", m, str(partner), "-o", out + ".svg"],
        ["layout", m, str(partner), "-o", out + ".txt"],
        ["lookup", str(partner), "0x1740", "--perf-data", m]]


def _inference(fmt: str) -> list[str]:
    """Inference (disassembly, CFG, min-cost flow) on a damaged profile for the text format,
    where it is the default; off for the others, whose writers are what those runs are for
    (a damaged binary runs without it: its disassembly is verify's)."""
    return [] if fmt == "text" else ["--inference", "off"]


def _basename_of(m: str) -> str:
    """The name the partner profile recorded the binary under (``--name``)."""
    return {"layout.o": "layout.pie", "liblayout.so": "layout.pie"}.get(
        SEED_OF[m].name, SEED_OF[m].name)


SEED_OF: dict[str, Path] = {}
AGG_SEED = Path(tempfile.gettempdir()) / f"bbmap-mutation-run-{os.getpid()}.parquet"


def _output_of(args: list[str]) -> str | None:
    return args[args.index("-o") + 1] if "-o" in args else None


def judge(args: list[str], r: dict, files: list[str], before: bytes | None,
          out: str | None) -> list[str]:
    """The findings of one run (empty: it behaved)."""
    bad = []
    err = r["stderr"]
    if r["hung"]:
        bad.append("hang")
    if "internal error" in err:
        bad.append("internal-error")
    if "Traceback" in err:
        bad.append("traceback")
    if not r["hung"] and r["code"] not in EXIT_CODES:
        bad.append(f"exit-{r['code']}")
    for ln in err.splitlines():
        if not ln.startswith("bbmap: error:") or SUMMARY.search(ln):
            continue
        if not any(f in ln or os.path.basename(f) in ln for f in files):
            bad.append("no-file")
        if "offset" not in ln and not REFUSALS.search(ln):
            bad.append("no-offset")
    if out is not None and r["code"] != 0 and not r["hung"]:
        try:
            now = Path(out).read_bytes()
        except OSError:
            now = None
        if now != before:
            bad.append(f"output-changed-exit-{r['code']}")
    return bad


def template(line: str) -> str:
    """An error line with paths, numbers and quoted values taken out: its kind."""
    t = re.sub(r"/\S+", "PATH", line)
    t = re.sub(r"0x[0-9a-f]+|\b\d+\b", "N", t)
    t = re.sub(r"'[^']*'|\"[^\"]*\"", "Q", t)
    return t[:160]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=300)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the counts here")
    ap.add_argument("--commit", default=None, help="recorded in --json")
    ap.add_argument("--runs-log", default=None, help="append one JSON line per run here")
    ap.add_argument("--summarize", default=None, metavar="LOG",
                    help="print the counts of a --runs-log (a run cut short included)")
    a = ap.parse_args()
    if a.summarize:
        print(json.dumps(summarize(Path(a.summarize)), indent=1))
        return 0

    import bbmap.cli  # noqa: F401 - imported once, before forking
    for mod in ("annotate", "cfg", "dump", "layout", "lookup", "merge", "perf_info", "verify"):
        __import__(f"bbmap.cli.{mod}")

    seeds = [s for s in SEEDS if s[1].exists()]
    r = run_forked(["annotate", str(LAYOUT_PROF), str(LAYOUT), "--format", "aggregate",
                    "-o", str(AGG_SEED)], 120, tempfile.gettempdir())
    if r["code"] == 0:
        seeds.append(("agg", AGG_SEED, LAYOUT, None))
    blobs = {s[1]: s[1].read_bytes() for s in seeds}
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="bbmap-mutation-run-")
    jobs = []
    for i in range(a.mutants):
        kind, src, partner, pgo = seeds[i % len(seeds)]
        data, desc = (_agg_mutant(blobs[src], rng) if kind == "agg"
                      else random_mutant(blobs[src], kind, rng))
        m = os.path.join(work, f"m{i}." + {"perf": "data", "elf": "elf", "agg": "parquet"}[kind])
        Path(m).write_bytes(data)
        SEED_OF[m] = src
        jobs.append((i, kind, src, desc, m, commands(kind, m, partner, pgo,
                                                     os.path.join(work, f"o{i}"))))

    done = [0]

    def one(job):
        i, kind, src, desc, m, cmds = job
        res = []
        for args in cmds:
            out = _output_of(args)
            if out is not None:
                Path(out).write_bytes(GOOD)
            files = [x for x in args if os.sep in x]
            r = run_forked(args, a.timeout, work)
            res.append((args, r, judge(args, r, files, GOOD if out else None, out)))
            if out is not None:
                Path(out).unlink(missing_ok=True)
        done[0] += 1
        print(f"# {done[0]} of {len(jobs)} mutants, {time.monotonic() - t0:.0f} s",
              file=sys.stderr, flush=True)
        if a.runs_log:  # one line per run as it ends: a run cut short still counts
            with open(a.runs_log, "a") as fh:
                for args, r, bad in res:
                    errs = [ln for ln in r["stderr"].splitlines()
                            if ln.startswith("bbmap: error:")]
                    fh.write(json.dumps({"mutant": i, "seed": src.name, "desc": desc,
                                         "cmd": _label(args), "args": args,
                                         "code": r["code"], "seconds": round(r["seconds"], 2),
                                         "findings": sorted(set(bad)), "errors": errs})
                             + "\n")
        return job, res

    t0 = time.monotonic()
    if a.jobs > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(a.jobs) as ex:
            results = list(ex.map(one, jobs))
    else:
        results = [one(j) for j in jobs]
    per_cmd: Counter = Counter()
    per_kind: Counter = Counter()
    per_cmd_kind: dict[str, Counter] = defaultdict(Counter)
    exits: dict[str, Counter] = defaultdict(Counter)
    messages: Counter = Counter()
    runs = 0
    for job, res in results:
        i, kind, src, desc, m, cmds = job
        for args, r, bad in res:
            runs += 1
            cmd = _label(args)
            per_cmd[cmd] += 1
            exits[cmd][r["code"]] += 1
            for ln in r["stderr"].splitlines():
                if ln.startswith("bbmap: error:"):
                    messages[template(ln)] += 1
            for b in set(bad):
                per_kind[b] += 1
                per_cmd_kind[cmd][b] += 1
            if bad:
                last = (r["stderr"].strip().splitlines() or [""])[-1][:220]
                print(f"{','.join(sorted(set(bad)))}: bbmap {' '.join(args)} "
                      f"[mutant {i} of {src.name}: {desc}]: exit {r['code']}: {last}",
                      flush=True)
        os.unlink(m)
    summary = {
        "commit": a.commit, "mutants": a.mutants, "runs": runs, "seed": a.seed,
        "wall_seconds": round(time.monotonic() - t0, 1),
        "findings": dict(sorted(per_kind.items())),
        "per_command": {c: {"runs": n, "exits": dict(sorted((str(k), v) for k, v in
                                                         exits[c].items())),
                            "findings": dict(sorted(per_cmd_kind[c].items()))}
                        for c, n in sorted(per_cmd.items())},
        "error_kinds": dict(messages.most_common()),
    }
    print(json.dumps(summary, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")
    AGG_SEED.unlink(missing_ok=True)
    return 1 if per_kind else 0


def summarize(log: Path) -> dict:
    """Counts per command and per finding of a ``--runs-log``."""
    runs = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]
    per: dict[str, dict] = {}
    kinds: Counter = Counter()
    messages: Counter = Counter()
    for r in runs:
        c = per.setdefault(r["cmd"], {"runs": 0, "exits": Counter(), "findings": Counter()})
        c["runs"] += 1
        c["exits"][str(r["code"])] += 1
        # the error lines judged again with this file's rules (REFUSALS may have grown)
        files = [x for x in r["args"] if os.sep in x]
        found = [b for b in r["findings"] if b not in ("no-file", "no-offset")]
        for ln in r["errors"]:
            messages[template(ln)] += 1
            if SUMMARY.search(ln):
                continue
            if not any(f in ln or os.path.basename(f) in ln for f in files):
                found.append("no-file")
            if "offset" not in ln and not REFUSALS.search(ln):
                found.append("no-offset")
                messages["(no offset) " + template(ln)] += 1
        for b in sorted(set(found)):
            c["findings"][b] += 1
            kinds[b] += 1
    return {"runs": len(runs), "mutants": len({r["mutant"] for r in runs}),
            "findings": dict(sorted(kinds.items())),
            "per_command": {k: {"runs": v["runs"], "exits": dict(sorted(v["exits"].items())),
                                "findings": dict(sorted(v["findings"].items()))}
                            for k, v in sorted(per.items())},
            "error_kinds": dict(messages.most_common())}


def _label(args: list[str]) -> str:
    """The command as counted: annotate per format, verify with or without --profile."""
    if args[0] == "annotate":
        return f"annotate --format {args[args.index('--format') + 1]}"
    if args[0] == "verify" and "--profile" in args:
        return "verify --profile"
    return args[0]


def _agg_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A damaged Parquet aggregate: a bit flip, a zeroed run or a truncation."""
    d = bytearray(data)
    how = rng.choice(["flip", "zero", "cut"])
    pos = rng.randrange(len(d))
    if how == "flip":
        d[pos] ^= 1 << rng.randrange(8)
        return bytes(d), f"bit flip at {pos:#x}"
    if how == "zero":
        n = rng.randint(1, 64)
        d[pos:pos + n] = bytes(len(d[pos:pos + n]))
        return bytes(d), f"{n} bytes zeroed at {pos:#x}"
    return bytes(d[:pos]), f"cut at {pos:#x}"


if __name__ == "__main__":
    sys.exit(main())
