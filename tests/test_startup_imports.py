"""The start-up budget (spec/startup.md), held by what gets imported, not by a clock.

``bbmap --version`` and every ``--help`` import neither numpy nor the format layers;
a command imports only what its path needs (annotate's JSON path: no disassembler with
inference off, no rich, no pictures, no layout); the BLAS / OpenMP thread pools are
limited to one thread before numpy loads.  Each case runs in a fresh interpreter with
``-X importtime`` (what the process imported, whatever the cache state).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import pytest
from helpers import PIE_BINARY, PIE_PROFILE, have_corpus

from bbmap import __version__
from bbmap.cli import SUBCOMMANDS, THREAD_POOL_ENV

# never before a command body runs: numpy, the formats and readers, third-party parsers
HEAVY = ("numpy", "bbmap.formats", "bbmap.binary", "bbmap.perf", "bbmap.aggregate",
         "construct", "elftools", "capstone", "rich", "importlib.metadata", "scipy")


def imported(*args: str, env: dict | None = None) -> set[str]:
    """Modules the ``bbmap`` command imports for ``args`` (run as ``python -m bbmap``)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "bbmap", *args],
                       capture_output=True, text=True, env=env)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def heavy_in(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("args", [("--version",), ("--help",), *(
    (name, "--help") for name in sorted(SUBCOMMANDS))], ids=" ".join)
def test_version_and_help_import_nothing_heavy(args: tuple[str, ...]) -> None:
    assert heavy_in(imported(*args)) == []


def test_version_fast_path_loads_no_click() -> None:
    """The console script answers ``--version`` before click loads (bbmap/__main__.py),
    with the text click's version option prints."""
    assert "click" not in imported("--version")
    assert "typing" not in imported("--version") - interpreter_imports()  # (1.9 ms)
    from click.testing import CliRunner

    from bbmap.cli import main

    r = subprocess.run([sys.executable, "-m", "bbmap", "--version"], capture_output=True,
                       text=True, check=True)
    assert r.stdout == CliRunner().invoke(main, ["--version"], prog_name="bbmap").output


def test_version_is_the_installed_one() -> None:
    """--version prints ``bbmap.__version__`` (no metadata read at start-up); it must
    equal what the installer recorded from pyproject.toml."""
    assert __version__ == importlib.metadata.version("bbmap")
    r = subprocess.run([sys.executable, "-m", "bbmap", "--version"], capture_output=True,
                       text=True, check=True)
    assert r.stdout == f"bbmap, version {__version__}\n"


@have_corpus
def test_annotate_json_imports_only_its_path(tmp_path) -> None:
    out = str(tmp_path / "a.json")
    mods = imported("annotate", PIE_PROFILE, PIE_BINARY, "--format", "json",
                    "--inference", "off", "-o", out)
    assert "bbmap.outputs.jsonout" in mods and "numpy" in mods
    unwanted = ("bbmap.outputs.text", "bbmap.outputs.svg", "bbmap.outputs.csvout",
                "bbmap.layout", "bbmap.cfg", "bbmap.inference", "capstone", "rich",
                "bbmap.verify", "bbmap.dump", "scipy", "ortools",
                "bbmap.binary.go")  # not a Go binary: Binary.go answers without its reader
    assert sorted(m for m in mods if m.startswith(unwanted)) == []


@have_corpus
def test_dump_json_imports_only_its_path(tmp_path) -> None:
    mods = imported("dump", "--json", PIE_BINARY, "-o", str(tmp_path / "d.json"))
    assert "bbmap.dump" in mods
    unwanted = ("bbmap.perf", "bbmap.aggregate", "bbmap.index", "bbmap.cfg", "capstone",
                "rich", "bbmap.verify", "bbmap.outputs.text", "scipy",
                "bbmap.formats.perfdata",  # only to name a profile given as the binary
                "bbmap.binary.go")  # not a Go binary: Binary.go answers without its reader
    assert sorted(m for m in mods if m.startswith(unwanted)) == []


def interpreter_imports() -> set[str]:
    """What this interpreter imports before any code runs (``site`` and the ``.pth``
    files of its environment: some import tempfile or pathlib themselves)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"],
                       capture_output=True, text=True, check=True)
    return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@have_corpus
@pytest.mark.parametrize("to_file", [False, True], ids=["stdout", "file"])
def test_dump_json_imports_no_tempfile(to_file: bool, tmp_path) -> None:
    """Not even an output renamed into place: bbmap.atomic makes its temporary file
    itself (tempfile brings shutil, bz2, lzma and random: 2.7 ms)."""
    out = ["-o", str(tmp_path / "map.json")] if to_file else []
    mods = imported("dump", "--json", PIE_BINARY, *out) - interpreter_imports()
    assert "bbmap.dump" in mods
    assert "tempfile" not in mods
    assert (tmp_path / "map.json").exists() == to_file


def test_thread_pools_limited_before_numpy_loads() -> None:
    """With the variables unset, importing the CLI sets them to 1, and numpy then
    starts no BLAS thread: the process has one thread (OpenBLAS would add one per
    core).  A value the user exported is kept."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_POOL_ENV}
    code = ("import os, bbmap.cli, sys; assert 'numpy' not in sys.modules; import numpy; "
            "print(*[os.environ[v] for v in bbmap.cli.THREAD_POOL_ENV], "
            "len(os.listdir('/proc/self/task')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, check=True)
    assert r.stdout.split() == ["1"] * len(THREAD_POOL_ENV) + ["1"]
    env["OMP_NUM_THREADS"] = "3"
    r = subprocess.run([sys.executable, "-c", "import os, bbmap.cli; "
                        "print(os.environ['OMP_NUM_THREADS'])"], capture_output=True,
                       text=True, env=env, check=True)
    assert r.stdout.strip() == "3"


@have_corpus
@pytest.mark.parametrize("args", [
    ("perf-info", PIE_PROFILE), ("perf-info", "--json", PIE_PROFILE),
    ("perf-info", "-o", "{tmp}/info.json", PIE_PROFILE),
    ("lookup", PIE_BINARY, "0x1180", "0x1"), ("lookup", "--json", PIE_BINARY, "0x1180"),
    ("verify", PIE_BINARY), ("verify", "--json", "-o", "{tmp}/v.json", PIE_BINARY),
    ("verify", PIE_BINARY, "--profile", PIE_PROFILE),
], ids=" ".join)
def test_quick_exit_commands_write_what_the_in_process_cli_writes(args, tmp_path,
                                                                 monkeypatch) -> None:
    """perf-info, lookup and verify end without the interpreter's teardown (rule 4: ~7 %
    of a small run's instructions): the process still writes every byte of stdout, stderr
    and the output file that the in-process CLI (which never exits early) writes, with
    the same exit code."""
    from click.testing import CliRunner

    from bbmap.cli import main

    argv = [a.replace("{tmp}", str(tmp_path / "ref")) for a in args]
    (tmp_path / "ref").mkdir()
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("BBMAP_CACHE_DIR", str(tmp_path / "cache"))  # both runs, not ~/.cache
    ref = CliRunner().invoke(main, argv, catch_exceptions=False)
    run_argv = [a.replace("{tmp}", str(tmp_path / "run")) for a in args]
    got = subprocess.run([sys.executable, "-m", "bbmap", *run_argv], capture_output=True)
    assert got.returncode == ref.exit_code, got.stderr
    assert got.stdout == ref.stdout_bytes
    assert got.stderr.decode().replace(str(tmp_path / "run"), "") == \
        ref.stderr.replace(str(tmp_path / "ref"), "")
    assert sorted(os.listdir(tmp_path / "run")) == sorted(os.listdir(tmp_path / "ref"))
    for f in os.listdir(tmp_path / "ref"):
        assert (tmp_path / "run" / f).read_bytes() == (tmp_path / "ref" / f).read_bytes()


def test_console_script_raises_the_young_collection_threshold_library_does_not() -> None:
    """rule 5: the ``bbmap`` process collects young objects every GC_GEN0_THRESHOLD
    allocations, not Python's 700 (the collector stays on); ``import bbmap.cli`` leaves a
    host program's collector as it was."""
    from bbmap.__main__ import GC_GEN0_THRESHOLD

    lib = subprocess.run([sys.executable, "-c", "import gc; d = gc.get_threshold(); "
                          "import bbmap.cli; print(gc.get_threshold() == d, gc.isenabled())"],
                         capture_output=True, text=True, check=True)
    assert lib.stdout.split() == ["True", "True"]
    code = ("import gc, sys; sys.argv = ['bbmap', '--help']\n"
            "from bbmap.__main__ import run\n"
            "try:\n    run()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(f'{gc.get_threshold()[0]} {gc.isenabled()}')")
    cli = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert cli.stderr.split() == [str(GC_GEN0_THRESHOLD), "True"]
