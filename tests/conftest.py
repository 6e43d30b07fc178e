"""Shared fixtures: where the repository, its corpus and the shared reference files are.

Shared helpers (corpus walkers, CLI runner, hand-built binary, generated maps...) live in
``tests/helpers.py``; import them from there."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import (  # noqa: F401 - for tests written before helpers.py existed
    CORPUS,
    PERF_CORPUS,
    REPO,
    all_corpus_binaries,
    corpus_binary,
    load_manifest,
    profile_cases,
)

# the CLI keeps a disassembly cache (bbmap/binary/disasm_cache.py): tests use their own,
# not the user's ~/.cache, and leave nothing behind
if not os.environ.get("BBMAP_CACHE_DIR"):
    os.environ["BBMAP_CACHE_DIR"] = tempfile.mkdtemp(prefix="bbmap-test-cache-")
    atexit.register(shutil.rmtree, os.environ["BBMAP_CACHE_DIR"], True)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return CORPUS


@pytest.fixture(scope="session")
def manifest() -> dict:
    return load_manifest()


@pytest.fixture(scope="session")
def perf_corpus_dir() -> Path:
    if not PERF_CORPUS.is_dir():
        pytest.skip("../shared/perf-corpus not present")
    return PERF_CORPUS


@pytest.fixture(scope="session")
def perf_bin() -> str:
    perf = shutil.which("perf")
    if not perf:
        pytest.skip("perf not installed")
    return perf
