"""Every subcommand on seeded mutants of corpus files: never an internal error.

The CI-sized slice of ``bench/hostile_mutants.py`` (which runs thousands, each in its own
process, with peak memory): mutants from ``tests/mutate.random_mutant`` (bit flips,
truncation, size/offset fields set to 0 or huge, zeroed runs) of an ELF binary and a
perf.data file, through dump, lookup, verify, annotate, cfg, layout and perf-info in-process;
mutants of a Parquet aggregate through merge and annotate; and one ``fleet`` run (a local
Dask cluster of one worker) over all the perf.data mutants at once.  Each run must end with
an exit code from the README's table, no traceback, no ``internal error`` and no library
words in its error lines (on stderr, the workers' included), within ``TIME_LIMIT`` seconds.
"""

from __future__ import annotations

import os
import random
import re
import signal

import pytest
from click.testing import CliRunner
from helpers import PIE_BINARY, PIE_PROFILE, have_corpus
from mutate import random_mutant, read_bytes

from bbmap.cli import main

SEED = 18
MUTANTS = 150  # per kind, 7 commands each: ~25 s; fewer found none of the old faults
AGG_MUTANTS = 60  # Parquet aggregates, 3 commands each: ~5 s
TIME_LIMIT = 60  # seconds per run (a hang)
EXIT_CODES = {0, 1, 2, 3, 141}
LEAK = re.compile(r"Error in path|ssize_t|C long|Python int|elftools|ELFParseError|"
                  r"StreamError|ArrayError|struct\.error|NoneType|object has no attribute|"
                  r"OverflowError|ValueError|IndexError|KeyError|TypeError")


class Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise Hang()


def _commands(kind: str, m: str, out: str) -> list[list[str]]:
    if kind == "elf":
        return [["dump", m], ["dump", m, "--json"], ["lookup", m, "1210"],
                ["verify", m], ["annotate", PIE_PROFILE, m, "--name", "layout.pie"],
                ["cfg", PIE_PROFILE, m, "--name", "layout.pie", "-o", out + ".svg"],
                ["layout", PIE_PROFILE, m, "--name", "layout.pie"]]
    return [["perf-info", m], ["perf-info", m, "--json"], ["annotate", m, PIE_BINARY],
            ["annotate", m, PIE_BINARY, "--format", "json"],
            ["cfg", m, PIE_BINARY, "-o", out + ".svg"], ["layout", m, PIE_BINARY],
            ["lookup", PIE_BINARY, "0x1210", "--perf-data", m]]


def _run(args: list[str], desc: str, bad: list[str], extra_err: str = "") -> int | None:
    """One in-process run, its faults appended to ``bad``; its exit code."""
    signal.alarm(TIME_LIMIT)
    try:
        r = CliRunner().invoke(main, args)
    except Hang:
        bad.append(f"hang: {args[0]} ({desc})")
        return None
    finally:
        signal.alarm(0)
    out = r.output + extra_err
    errors = [ln for ln in out.splitlines() if ln.startswith("bbmap: error")]
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        bad.append(f"exception {type(r.exception).__name__}: {args[0]} ({desc})")
    elif "internal error" in out or "Traceback" in out:
        bad.append(f"internal error: {args[0]} ({desc}): {out[-200:]}")
    elif r.exit_code not in EXIT_CODES:
        bad.append(f"exit {r.exit_code}: {args[0]} ({desc})")
    elif any(LEAK.search(ln) for ln in errors):
        bad.append(f"library words: {args[0]} ({desc}): {errors}")
    return r.exit_code


@pytest.mark.slow
@have_corpus
@pytest.mark.parametrize("kind", ["elf", "perf"])
def test_every_subcommand_survives_mutants(tmp_path, kind):
    rng = random.Random(f"{SEED}-{kind}")
    seed = read_bytes(PIE_BINARY if kind == "elf" else PIE_PROFILE)
    bad: list[str] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(MUTANTS):
            data, desc = random_mutant(bytes(seed), kind, rng)
            m = tmp_path / f"m{i}"
            m.write_bytes(data)
            for args in _commands(kind, str(m), str(tmp_path / f"o{i}")):
                _run(args, desc, bad)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
@have_corpus
def test_merge_and_annotate_survive_aggregate_mutants(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    seed_path = str(tmp_path / "seed.parquet")
    # the aggregate records the profile's path as given: relative paths give the same seed
    # file, and so the same mutants, in every clone (an absolute path moved them with it)
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = CliRunner().invoke(main, ["annotate", os.path.relpath(PIE_PROFILE),
                                     os.path.relpath(PIE_BINARY), "--format",
                                     "aggregate", "-o", seed_path]).exit_code
    assert code == 0
    rng = random.Random(f"{SEED}-agg")
    seed = read_bytes(seed_path)
    bad: list[str] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(AGG_MUTANTS):
            data, desc = random_mutant(bytes(seed), "agg", rng)
            m = str(tmp_path / f"m{i}.parquet")
            with open(m, "wb") as fh:
                fh.write(data)
            for args in (["merge", m, seed_path, "-o", str(tmp_path / f"o{i}.parquet")],
                         ["annotate", m, PIE_BINARY],
                         ["annotate", m, PIE_BINARY, "--format", "json"]):
                _run(args, desc, bad)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert not bad, "\n".join(bad)


@pytest.mark.slow
@have_corpus
def test_fleet_survives_perf_mutants(tmp_path, capfd):
    """All the perf.data mutants in one fleet run: each read on a Dask worker, each named
    in the provenance when it cannot be read; nothing of Dask's or a traceback on stderr."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("distributed")
    rng = random.Random(f"{SEED}-perf")
    seed = read_bytes(PIE_PROFILE)
    paths = []
    for i in range(MUTANTS):
        data, _ = random_mutant(bytes(seed), "perf", rng)
        paths.append(str(tmp_path / f"m{i:03}.data"))
        with open(paths[-1], "wb") as fh:
            fh.write(data)
    bad: list[str] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        code = _run(["fleet", *paths, PIE_BINARY, "--local-workers", "1", "--no-progress",
                     "--batch-files", "8", "-o", str(tmp_path / "f.parquet")],
                    f"{MUTANTS} perf.data mutants", bad)
    finally:
        signal.signal(signal.SIGALRM, old)
    err = capfd.readouterr().err  # the workers' stderr too (they inherit the descriptor)
    assert not bad, "\n".join(bad)
    assert code in (0, 1) and "Traceback" not in err and "distributed." not in err, err
    from bbmap.aggregate.store import read_aggregate

    agg = read_aggregate(str(tmp_path / "f.parquet"))  # every mutant has its row
    assert sorted(p.info.path for p in agg.profiles) == paths
