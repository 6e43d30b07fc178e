"""Shared fixtures: where the repository, its corpus and the shared reference files are."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "corpus"


def shared_dir() -> Path:
    """``../shared`` beside the checkout (CI layout), else the workplace copy."""
    env = os.environ.get("BBMAP_SHARED")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared", Path("/work/shared")]:
        if cand.is_dir():
            return cand
    return REPO.parent / "shared"


PERF_CORPUS = shared_dir() / "perf-corpus"


def load_manifest(path: Path = CORPUS / "manifest.json") -> dict:
    if not path.exists():
        return {"binaries": [], "profiles": []}
    return json.loads(path.read_text())


def corpus_binary(name: str) -> Path:
    """The manifest binary called ``name``; skips the test when the corpus lacks it."""
    if not (CORPUS / "manifest.json").exists():
        pytest.skip("corpus not built")
    for b in load_manifest().get("binaries", []):
        if b["name"] == name and (CORPUS / b["path"]).exists():
            return CORPUS / b["path"]
    pytest.skip(f"corpus binary {name} absent")


def all_corpus_binaries() -> list:
    """Every binary of both manifests (compiled and hand-made), as pytest params by name."""
    out = []
    for manifest in (CORPUS / "manifest.json", CORPUS / "handmade" / "manifest.json"):
        try:
            entries = json.loads(manifest.read_text())["binaries"]
        except (OSError, ValueError, KeyError):
            continue
        out.extend(pytest.param(manifest.parent / e["path"], id=e["name"]) for e in entries)
    return out


def profile_cases(kind: str) -> list[tuple[str, str, str]]:
    """(profile name, perf.data path, binary path) of the manifest's profiles of ``kind``
    that name one binary and exist on disk."""
    m = load_manifest()
    bins = {b["name"]: str(CORPUS / b["path"]) for b in m.get("binaries", [])}
    out = []
    for p in m.get("profiles", []):
        if kind in p.get("kinds", []) and len(p.get("binaries", [])) == 1:
            perf, binary = str(CORPUS / p["path"]), bins.get(p["binaries"][0], "")
            if os.path.exists(perf) and os.path.exists(binary):
                out.append((p["name"], perf, binary))
    return out


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
