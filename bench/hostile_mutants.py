"""A mutation run over every subcommand: bit flips, truncations, wild size fields.

Each mutant of a corpus ELF or perf.data file (``tests/mutate.random_mutant``) is given to
the subcommands that read that kind of file, each run in its own process, and every run
is judged on what a user sees:

* **internal error**: ``bbmap: internal error`` on stderr (a bug: no input may reach it);
* **traceback**: ``Traceback`` on stderr;
* **hang**: the run outlives ``--timeout`` seconds (killed);
* **leak**: an error line with a library's words in it (construct parse paths, C types,
  pyelftools' class names) instead of bbmap's;
* **memory**: peak RSS (``wait4``'s ``ru_maxrss``) over ``max(10 x input size, 300 MB)``;
* **exit code**: anything outside the README's table (0, 1, 2, 3, 141).

Runs are forked from one parent that has imported bbmap already (a fresh interpreter per
run would cost ~0.4 s of start-up each); the child's peak RSS therefore includes the
parent's (~100 MB of imports): the memory figure is an upper bound on a real run's.

    nice python bench/hostile_mutants.py --mutants 2000 --jobs 2 --out /work/cache/i18/run

prints one line per finding and a summary table; ``--json`` writes the counts.  With
``--out``, each faulty mutant is kept there with, beside it, the full stderr of every run
that found a fault (``mN-SEED.CMD-K.stderr``), so a fault seen once can be read later.
Parameters: MEMORY_FACTOR and MEMORY_FLOOR are the issue's bound (issue 18, "Must show").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "tests"))

from mutate import random_mutant  # noqa: E402

MEMORY_FACTOR = 10  # peak RSS may be 10x the input file ...
MEMORY_FLOOR = 300 << 20  # ... or 300 MB, whichever is larger (issue 18)
EXIT_CODES = {0, 1, 2, 3, 141}
# a library's words reaching the user instead of bbmap's
LEAK = re.compile(r"Error in path|->\s*_|ssize_t|C long|Python int|construct|elftools|"
                  r"ELFParseError|ELFError|StreamError|ArrayError|struct\.error|unpack|"
                  r"object has no attribute|NoneType|index out of range|invalid literal|"
                  r"KeyError|ValueError|TypeError|IndexError|OverflowError")

C22 = REPO / "corpus" / "bin" / "clang-22"
PROF = REPO / "corpus" / "profiles"
SEEDS = {  # (kind, path) -> the partner file a command needs
    "elf": [C22 / "addrmap" / "layout.pie", C22 / "addrmap" / "layout.o",
            C22 / "addrmap" / "liblayout.so", C22 / "list" / "layout.pie",
            C22 / "eh" / "unwind.pie"],
    "perf": [PROF / "c22-addrmap-pie-plain" / "perf.data",
             PROF / "c22-addrmap-pie-zstd" / "perf.data",
             PROF / "c22-addrmap-pie-pipe" / "perf.data",
             PROF / "c22-addrmap-pie-callgraph" / "perf.data",
             PROF / "c22-addrmap-pie-buildid-mmap" / "perf.data"],
}
PARTNER_BIN = C22 / "addrmap" / "layout.pie"
AGG_SEED = Path(os.environ.get("BBMAP_MUTANT_WORK", "/tmp")) / "bbmap-mutants-seed.parquet"
FLEET_EVERY = 10
PARTNER_PROF = PROF / "c22-addrmap-pie-plain" / "perf.data"
LBR_PROF = next(iter(sorted((REPO / "corpus" / "lbr").glob("**/*.data"))), None) \
    if (REPO / "corpus" / "lbr").is_dir() else None


def commands(kind: str, m: str, out: str, i: int = 0,
             fleet_every: int = FLEET_EVERY) -> list[list[str]]:
    """Every subcommand that reads a file of ``kind``, on mutant ``m`` (fleet, which starts
    a Dask cluster per run, on one mutant in ``fleet_every``)."""
    if kind == "agg":
        return [["merge", m, str(AGG_SEED), "-o", out + ".parquet"],
                ["annotate", m, str(PARTNER_BIN)],
                ["annotate", m, str(PARTNER_BIN), "--format", "json"]]
    if kind == "elf":
        return [["dump", m], ["dump", m, "--json"], ["lookup", m, "0x1740", "--explain"],
                ["verify", m], ["annotate", str(PARTNER_PROF), m, "--name", "layout.pie"],
                ["cfg", str(PARTNER_PROF), m, "--name", "layout.pie", "-o", out + ".svg"],
                ["layout", str(PARTNER_PROF), m, "--name", "layout.pie", "-o", out + ".txt"]]
    fleet = [["fleet", m, str(PARTNER_BIN), "--local-workers", "1", "--no-progress",
              "-o", out + ".parquet"]] if i % fleet_every == 0 else []
    return fleet + [["perf-info", m], ["annotate", m, str(PARTNER_BIN)],
            ["annotate", m, str(PARTNER_BIN), "--format", "json", "-o", out + ".json"],
            ["cfg", m, str(PARTNER_BIN), "-o", out + ".svg"],
            ["layout", m, str(PARTNER_BIN), "-o", out + ".txt"],
            ["verify", str(PARTNER_BIN), "--profile", m],
            ["lookup", str(PARTNER_BIN), "0x1740", "--perf-data", m]]


def _make_aggregate() -> bool:
    """A Parquet aggregate of a corpus profile, the seed of the ``agg`` mutants (merge,
    and aggregates given where perf.data goes); False without pyarrow."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    r = run_forked(["annotate", str(PARTNER_PROF), str(PARTNER_BIN), "--format", "aggregate",
                    "-o", str(AGG_SEED)], 120, tempfile.gettempdir())
    return r["code"] == 0 and AGG_SEED.exists()


def run_forked(args: list[str], timeout: float, workdir: str) -> dict:
    """Run ``bbmap ARGS`` in a forked child; exit code, stderr, peak RSS, seconds."""
    import threading
    err_path = os.path.join(workdir, f"err.{threading.get_ident()}")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: the CLI as ``bbmap`` would run it
        try:
            fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.environ.pop("BBMAP_DEBUG", None)
            os.environ.pop("BBMAP_DASK_LOGS", None)
            from bbmap.cli import main
            try:
                main(args, prog_name="bbmap")
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 - what a real run would print
                import traceback
                traceback.print_exc()
                code = 99
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(locals().get("code", 98))
    hung = False
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid:
            break
        if time.monotonic() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            _, status, ru = os.wait4(pid, 0)
            hung = True
            break
        time.sleep(0.005)
    code = os.waitstatus_to_exitcode(status)
    try:
        err = Path(err_path).read_text(errors="replace")
    except OSError:
        err = ""
    return {"code": code, "stderr": err, "rss": ru.ru_maxrss * 1024, "hung": hung,
            "seconds": time.monotonic() - t0}


def judge(r: dict, size: int) -> list[str]:
    """The faults of one run (empty: it behaved)."""
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
    errors = [ln for ln in err.splitlines() if ln.startswith("bbmap: error")]
    if any(LEAK.search(ln) for ln in errors):
        bad.append("leak")
    if r["rss"] > max(MEMORY_FACTOR * size, MEMORY_FLOOR):
        bad.append("memory")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="keep the faulty mutants here")
    ap.add_argument("--json", default=None, help="write the counts here")
    ap.add_argument("--per-mutant", type=int, default=0,
                    help="run only this many (random) commands per mutant (0: all)")
    ap.add_argument("--fleet-every", type=int, default=FLEET_EVERY,
                    help="give fleet one perf.data mutant in N (each run starts a cluster)")
    ap.add_argument("--commit", default=None,
                    help="the commit the code under test is (recorded in --json)")
    a = ap.parse_args()

    import bbmap.cli  # noqa: F401 - imported once, before forking
    for mod in ("annotate", "cfg", "dump", "layout", "lookup", "perf_info", "verify"):
        __import__(f"bbmap.cli.{mod}")

    rng = random.Random(a.seed)
    seeds = [(k, p) for k, ps in SEEDS.items() for p in ps if p.exists()]
    if _make_aggregate():
        seeds.append(("agg", AGG_SEED))
    blobs = {p: p.read_bytes() for _, p in seeds}
    outdir = Path(a.out) if a.out else None
    if outdir:
        outdir.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix="bbmap-mutants-")
    counts: Counter = Counter()
    per_cmd: Counter = Counter()
    exits: Counter = Counter()
    peak = (0, 0.0, "")
    slowest = (0.0, "")
    runs = 0
    findings = []
    t_start = time.monotonic()
    jobs: list[tuple[int, str, Path, str, list[str]]] = []
    for i in range(a.mutants):
        kind, src = seeds[i % len(seeds)]
        data, desc = random_mutant(blobs[src], kind, rng)
        m = os.path.join(work, f"m{i}" + (".data" if kind == "perf" else ".elf"))
        Path(m).write_bytes(data)
        cmds = commands(kind, m, os.path.join(work, f"o{i}"), i // len(seeds), a.fleet_every)
        if a.per_mutant:
            cmds = rng.sample(cmds, min(a.per_mutant, len(cmds)))
        jobs.append((i, kind, src, desc, m, len(data), cmds))

    def one(job):
        i, kind, src, desc, m, size, cmds = job
        res = []
        for args in cmds:
            r = run_forked(args, a.timeout, work)
            res.append((args, r, judge(r, max(size, 1))))
        return job, res

    if a.jobs > 1:  # a few forking threads: each fork is its own process
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(a.jobs) as ex:
            results = ex.map(one, jobs)
            results = list(results)
    else:
        results = map(one, jobs)
    for job, res in results:
        i, kind, src, desc, m, size, cmds = job
        for k, (args, r, bad) in enumerate(res):
            runs += 1
            per_cmd[args[0]] += 1
            exits[r["code"]] += 1
            if r["rss"] > peak[0]:
                peak = (r["rss"], r["rss"] / max(size, 1), f"{args[0]} on {src.name} ({desc})")
            if r["seconds"] > slowest[0]:
                slowest = (r["seconds"], f"{args[0]} on {src.name} ({desc})")
            for b in bad:
                counts[b] += 1
            if bad:
                line = (f"{','.join(bad)}: bbmap {args[0]} on mutant {i} of {src.name} "
                        f"({desc}): exit {r['code']}: "
                        + (r["stderr"].strip().splitlines() or [""])[-1][:200])
                findings.append(line)
                print(line, flush=True)
                if outdir:
                    (outdir / f"m{i}-{src.name}").write_bytes(Path(m).read_bytes())
                    (outdir / f"m{i}-{src.name}.{args[0]}-{k}.stderr").write_text(
                        f"$ bbmap {' '.join(args)}\n# exit {r['code']}, {bad}, "
                        f"{r['seconds']:.1f} s, {r['rss'] >> 20} MB\n{r['stderr']}")
        os.unlink(m)
    wall = time.monotonic() - t_start
    summary = {
        "commit": a.commit,
        "mutants": a.mutants, "runs": runs, "seed": a.seed, "wall_seconds": round(wall, 1),
        "per_command": dict(sorted(per_cmd.items())),
        "exit_codes": {str(k): v for k, v in sorted(exits.items())},
        "internal_errors": counts["internal-error"], "tracebacks": counts["traceback"],
        "hangs": counts["hang"], "leaks": counts["leak"], "memory_over_bound": counts["memory"],
        "bad_exit_codes": sum(v for k, v in counts.items() if k.startswith("exit-")),
        "peak_rss_mb": round(peak[0] / 2**20, 1), "peak_rss_run": peak[2],
        "slowest_seconds": round(slowest[0], 2), "slowest_run": slowest[1],
        "parent_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    for k, v in summary.items():
        print(f"{k:20} {v}")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
